//! The one seam between the proxy and the response pipeline.
//!
//! Every successful tool result (an upstream's, the answer store's, and a
//! built-in tool's as its [`Delivery`] says) passes through the session's
//! [`ResponseProcessor`] before it reaches the agent. The processor borrows
//! the result and returns a replacement or nothing, so the proxy always still
//! holds the original: if the processor errors or panics, the original goes
//! out unchanged and the failure is counted (invariant 4 in docs/invariants.md: fail open).
//! Errors (`isError`) are never processed: the processor only hears of
//! them ([`ResponseProcessor::on_error_result`], for telemetry), and they
//! go out untouched.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use devboy_core::pipeline_config::SideEffectClass;
use devboy_core::speculation::{Served, SpeculationEvent};
pub use devboy_pipeline::Handoff;
use rmcp::model::{CallToolResult, JsonObject};

/// How long a processor may work on one result when the session is not
/// told otherwise (`encoding.deadline_ms`).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(2);

/// What the processor knows about the call that produced a result.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallInfo<'a> {
    /// Upstream name as configured.
    pub upstream: &'a str,
    /// The tool's name on the upstream.
    pub tool: &'a str,
    /// The name the agent called.
    pub exposed: &'a str,
    /// The call's arguments.
    pub arguments: Option<&'a JsonObject>,
    /// What the tool's MCP annotations say a call does (`readOnlyHint`,
    /// `destructiveHint`); without them, unknown. The pipeline config may
    /// override it.
    pub side_effect: SideEffectClass,
    /// The client shows the model `structuredContent` instead of the text
    /// blocks when a result has it (Claude Code does; see docs/invariants.md, "The client, as measured").
    pub forwards_structured: bool,
    /// The client's name from `initialize`, if it gave one.
    pub client: Option<&'a str>,
    /// Where the result comes from: the upstream, or a prefetch.
    pub served: Served,
    /// devboy answered the call itself, with a built-in tool: its result
    /// answers this one question and is not expected to come again, so it
    /// gets an id only once the tool's answers have repeated in the
    /// session (no repeat prior, as for a write's result).
    pub builtin: bool,
}

/// A [`ToolCallInfo`] that owns its strings, to go with a result to the
/// thread that processes it.
#[derive(Debug, Clone)]
struct OwnedCallInfo {
    upstream: String,
    tool: String,
    exposed: String,
    arguments: Option<JsonObject>,
    side_effect: SideEffectClass,
    forwards_structured: bool,
    client: Option<String>,
    served: Served,
    builtin: bool,
}

impl OwnedCallInfo {
    fn of(call: &ToolCallInfo<'_>) -> Self {
        Self {
            upstream: call.upstream.to_owned(),
            tool: call.tool.to_owned(),
            exposed: call.exposed.to_owned(),
            arguments: call.arguments.cloned(),
            side_effect: call.side_effect,
            forwards_structured: call.forwards_structured,
            client: call.client.map(str::to_owned),
            served: call.served,
            builtin: call.builtin,
        }
    }

    fn info(&self) -> ToolCallInfo<'_> {
        ToolCallInfo {
            upstream: &self.upstream,
            tool: &self.tool,
            exposed: &self.exposed,
            arguments: self.arguments.as_ref(),
            side_effect: self.side_effect,
            forwards_structured: self.forwards_structured,
            client: self.client.as_deref(),
            served: self.served,
            builtin: self.builtin,
        }
    }
}

/// Error type a processor may return; the result then passes unchanged.
pub type ProcessError = Box<dyn std::error::Error + Send + Sync>;

/// Turns an upstream result into what the agent should see.
pub trait ResponseProcessor: Send + Sync + 'static {
    /// A short name for logs and status.
    fn name(&self) -> &'static str;

    /// `Ok(None)` keeps the result as it is; `Ok(Some(r))` replaces it.
    ///
    /// Runs on a blocking thread under the session's deadline: once
    /// `handoff` says the caller gave up, the original has gone out and
    /// whatever this returns is dropped, so a processor that records what
    /// it sent must settle with [`Handoff::hand_over`] before it records.
    fn process(
        &self,
        call: &ToolCallInfo<'_>,
        result: &CallToolResult,
        handoff: &Handoff,
    ) -> Result<Option<CallToolResult>, ProcessError>;

    /// Blocks until the processor's one-time setup (a tokenizer's
    /// vocabulary, loaded on first use) is done. Called on the processing
    /// thread before a result's deadline starts: it is not the result's work.
    fn ready(&self) {}

    /// Whether results with `structuredContent` may come back without it,
    /// in which case the session stops declaring the tools' `outputSchema`
    /// to clients that forward structured content.
    fn rewrites_structured(&self) -> bool {
        false
    }

    /// Sees every call before it is forwarded (to forget what it may change).
    fn before_call(&self, _call: &ToolCallInfo<'_>) {}

    /// Claude Code's own tools wrote `paths` (absolute; `missed`: and
    /// files nobody knows) without a call through devboy: forget what was
    /// read from them, as before a call that writes them.
    fn forget_written(&self, _paths: &[String], _missed: bool) {}

    /// Hears of an error result (`isError`), which passes untouched.
    fn on_error_result(&self, _call: &ToolCallInfo<'_>, _result: &CallToolResult) {}

    /// The agent's session is over (the client disconnected or devboy is
    /// stopping): write what must outlive it. Called once, from a thread
    /// that may block briefly.
    fn end_session(&self) {}

    /// Speculation did something for `call` (a follow-up the planner
    /// weighed, a prefetch sent or ended): for telemetry and status.
    /// `result` is the prefetch's result when one ended after landing.
    /// Prefetched results themselves never pass through
    /// [`process`](Self::process) until the agent's own call is answered
    /// with them.
    fn on_speculation(
        &self,
        _call: &ToolCallInfo<'_>,
        _event: SpeculationEvent,
        _result: Option<&CallToolResult>,
    ) {
    }

    /// A `find_files` query was answered (telemetry: counts only).
    fn on_retrieval(&self, _record: devboy_telemetry::RetrievalRecord) {}

    /// The model the session runs with became known (or changed).
    fn set_model(&self, _model: Option<String>) {}

    /// The model's context was compacted or cleared. Returns the processor's
    /// new partition, if it keeps one.
    fn advance_partition(&self) -> Option<u64> {
        None
    }

    /// What the processor has done this session, for `devboy_status`.
    fn report(&self) -> Option<serde_json::Value> {
        None
    }

    /// The whole result an id this session emitted stood for, in the form
    /// a full delivery of it is shown (a file's text fenced, unescaped), or
    /// with `raw` the exact text the server sent: `None` if the processor
    /// emits no ids, `Err` with a message for people otherwise.
    fn expand(&self, _id: &str, _raw: bool) -> Option<Result<String, String>> {
        None
    }
}

/// The identity processor: every result passes as it came.
#[derive(Debug, Default, Clone, Copy)]
pub struct Passthrough;

impl ResponseProcessor for Passthrough {
    fn name(&self) -> &'static str {
        "passthrough"
    }

    fn process(
        &self,
        _call: &ToolCallInfo<'_>,
        _result: &CallToolResult,
        _handoff: &Handoff,
    ) -> Result<Option<CallToolResult>, ProcessError> {
        Ok(None)
    }
}

/// Counts of what the seam did, for status.
#[derive(Debug, Default)]
pub struct SeamStats {
    /// Results the processor saw.
    pub processed: AtomicU64,
    /// Results it replaced.
    pub replaced: AtomicU64,
    /// Errors and panics; each passed the original through.
    pub failures: AtomicU64,
    /// Results the processor did not finish within the deadline; each
    /// passed the original through.
    pub deadline: AtomicU64,
}

/// What the seam does with a result, by where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The processor may rewrite it ([`apply`]): every upstream result,
    /// and a built-in's by default, as devboy's own answer
    /// ([`ToolCallInfo::builtin`]: an id only once its answers repeat, for
    /// an id on a query's answer costs more than it saves).
    Processed,
    /// A report that differs on every call and that clients parse (status,
    /// a new partition number): never rewritten, as an endpoint with dedup
    /// and encoding off; an error result is still heard of.
    Volatile,
    /// Exact bytes the agent asked for by id: passed as they are, unheard.
    Exact,
}

/// Delivers `result` as `delivery` says, failing open, within `deadline`.
pub async fn deliver(
    processor: &Arc<dyn ResponseProcessor>,
    stats: &SeamStats,
    call: &ToolCallInfo<'_>,
    result: CallToolResult,
    delivery: Delivery,
    deadline: Duration,
) -> CallToolResult {
    match delivery {
        Delivery::Processed => apply(processor, stats, call, result, deadline).await,
        Delivery::Volatile if result.is_error == Some(true) => {
            apply(processor, stats, call, result, deadline).await
        }
        Delivery::Volatile | Delivery::Exact => result,
    }
}

/// Runs `processor.before_call`, failing open (a panic is counted).
pub fn before_call(processor: &dyn ResponseProcessor, stats: &SeamStats, call: &ToolCallInfo<'_>) {
    if catch_unwind(AssertUnwindSafe(|| processor.before_call(call))).is_err() {
        stats.failures.fetch_add(1, Ordering::Relaxed);
        tracing::error!(
            processor = processor.name(),
            tool = call.exposed,
            "before_call panicked"
        );
    }
}

/// Runs `processor` on `result`, failing open and within `deadline`
/// (invariant 13).
///
/// The work happens on a blocking thread, so a slow result never holds up
/// the async workers that answer every other request. When the deadline
/// passes first, the original goes out as it came (counted in
/// [`SeamStats::deadline`]); the processor learns of it through the
/// [`Handoff`], stops at its next stage and keeps nothing of the result.
/// An error result is only heard of, on the caller's thread.
pub async fn apply(
    processor: &Arc<dyn ResponseProcessor>,
    stats: &SeamStats,
    call: &ToolCallInfo<'_>,
    result: CallToolResult,
    deadline: Duration,
) -> CallToolResult {
    if result.is_error == Some(true) {
        let heard = catch_unwind(AssertUnwindSafe(|| {
            processor.on_error_result(call, &result)
        }));
        if heard.is_err() {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                processor = processor.name(),
                tool = call.exposed,
                "on_error_result panicked"
            );
        }
        return result;
    }
    stats.processed.fetch_add(1, Ordering::Relaxed);
    let handoff = Arc::new(Handoff::new());
    let result = Arc::new(result);
    let started: Arc<std::sync::OnceLock<tokio::time::Instant>> = Arc::default();
    let mut job = {
        let (processor, result, handoff) = (processor.clone(), result.clone(), handoff.clone());
        let started = started.clone();
        let owned = OwnedCallInfo::of(call);
        tokio::task::spawn_blocking(move || {
            processor.ready();
            let _ = started.set(tokio::time::Instant::now());
            catch_unwind(AssertUnwindSafe(|| {
                processor.process(&owned.info(), &result, &handoff)
            }))
        })
    };
    let outcome = match run_until_deadline(&mut job, &started, deadline).await {
        Some(done) => done,
        None if handoff.give_up() => {
            stats.deadline.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                processor = processor.name(),
                tool = call.exposed,
                deadline_ms = deadline.as_millis() as u64,
                "processing ran past its deadline; the result went out as it came"
            );
            return Arc::unwrap_or_clone(result);
        }
        // Handed over as the deadline passed: the answer is on its way.
        None => job.await,
    };
    let original = || Arc::unwrap_or_clone(result);
    match outcome {
        Ok(Ok(Ok(None))) => original(),
        Ok(Ok(Ok(Some(replacement)))) => {
            stats.replaced.fetch_add(1, Ordering::Relaxed);
            replacement
        }
        Ok(Ok(Err(error))) => {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(processor = processor.name(), tool = call.exposed, %error, "response processor failed; original passed through");
            original()
        }
        Ok(Err(_)) | Err(_) => {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                processor = processor.name(),
                tool = call.exposed,
                "response processor panicked; original passed through"
            );
            original()
        }
    }
}

/// How many deadlines a result may wait in all, however late a blocking
/// thread picked it up (a busy machine) or the processor was ready (its
/// vocabulary loading on the first result), before it goes out anyway.
const MAX_QUEUED: u32 = 4;

/// `job`'s outcome, or `None` once it has worked `deadline` (counted from
/// when a blocking thread started it, so time queued on a busy machine is
/// not work) or waited `MAX_QUEUED` deadlines in all.
async fn run_until_deadline<T>(
    job: &mut tokio::task::JoinHandle<T>,
    started: &std::sync::OnceLock<tokio::time::Instant>,
    deadline: Duration,
) -> Option<Result<T, tokio::task::JoinError>> {
    let last = tokio::time::Instant::now() + deadline * MAX_QUEUED;
    loop {
        let started = started.get();
        let give_up = started.map_or(last, |at| (*at + deadline).min(last));
        // Not started yet: look again every eighth of a deadline.
        let until = match started {
            Some(_) => give_up,
            None => give_up.min(tokio::time::Instant::now() + deadline / 8),
        };
        match tokio::time::timeout_at(until, &mut *job).await {
            Ok(done) => return Some(done),
            Err(_) if until >= give_up => return None,
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    struct Panics;
    impl ResponseProcessor for Panics {
        fn name(&self) -> &'static str {
            "panics"
        }
        fn process(
            &self,
            _: &ToolCallInfo<'_>,
            _: &CallToolResult,
            _: &Handoff,
        ) -> Result<Option<CallToolResult>, ProcessError> {
            panic!("stage bug")
        }
    }

    struct Fails;
    impl ResponseProcessor for Fails {
        fn name(&self) -> &'static str {
            "fails"
        }
        fn process(
            &self,
            _: &ToolCallInfo<'_>,
            _: &CallToolResult,
            _: &Handoff,
        ) -> Result<Option<CallToolResult>, ProcessError> {
            Err("bad input".into())
        }
    }

    #[derive(Default)]
    struct Upper {
        errors: AtomicU64,
    }
    impl ResponseProcessor for Upper {
        fn name(&self) -> &'static str {
            "upper"
        }
        fn on_error_result(&self, _: &ToolCallInfo<'_>, _: &CallToolResult) {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        fn process(
            &self,
            _: &ToolCallInfo<'_>,
            r: &CallToolResult,
            _: &Handoff,
        ) -> Result<Option<CallToolResult>, ProcessError> {
            let text = r.content[0].as_text().map(|t| t.text.to_uppercase());
            Ok(text.map(|t| CallToolResult::success(vec![ContentBlock::text(t)])))
        }
    }

    /// Works until its waiter gives up, then says whether it could still
    /// hand its answer over (it never can).
    #[derive(Default)]
    struct Stubborn {
        handed_over_late: std::sync::Mutex<Option<bool>>,
    }
    impl ResponseProcessor for Stubborn {
        fn name(&self) -> &'static str {
            "stubborn"
        }
        fn process(
            &self,
            _: &ToolCallInfo<'_>,
            _: &CallToolResult,
            handoff: &Handoff,
        ) -> Result<Option<CallToolResult>, ProcessError> {
            while !handoff.given_up() {
                std::thread::yield_now();
            }
            *self.handed_over_late.lock().unwrap() = Some(handoff.hand_over());
            Ok(Some(CallToolResult::success(vec![ContentBlock::text(
                "too late",
            )])))
        }
    }

    fn call() -> ToolCallInfo<'static> {
        ToolCallInfo {
            upstream: "u",
            tool: "t",
            exposed: "u__t",
            arguments: None,
            side_effect: SideEffectClass::Unknown,
            forwards_structured: false,
            client: None,
            served: Served::Upstream,
            builtin: false,
        }
    }

    const LONG: Duration = Duration::from_secs(600);

    #[tokio::test]
    async fn panics_and_errors_pass_the_original() {
        let original = CallToolResult::success(vec![ContentBlock::text("body")]);
        let stats = SeamStats::default();
        let panics: Arc<dyn ResponseProcessor> = Arc::new(Panics);
        let out = apply(&panics, &stats, &call(), original.clone(), LONG).await;
        assert_eq!(out, original);
        let fails: Arc<dyn ResponseProcessor> = Arc::new(Fails);
        let out = apply(&fails, &stats, &call(), original.clone(), LONG).await;
        assert_eq!(out, original);
        assert_eq!(stats.failures.load(Ordering::Relaxed), 2);
        assert_eq!(stats.replaced.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn replacement_is_used_and_errors_are_untouched() {
        let stats = SeamStats::default();
        let upper = Arc::new(Upper::default());
        let processor: Arc<dyn ResponseProcessor> = upper.clone();
        let body = CallToolResult::success(vec![ContentBlock::text("body")]);
        let out = apply(&processor, &stats, &call(), body, LONG).await;
        assert_eq!(
            out.content[0].as_text().map(|t| t.text.as_str()),
            Some("BODY")
        );
        let error = CallToolResult::error(vec![ContentBlock::text("nope")]);
        assert_eq!(
            apply(&processor, &stats, &call(), error.clone(), LONG).await,
            error
        );
        assert_eq!(
            upper.errors.load(Ordering::Relaxed),
            1,
            "heard of, untouched"
        );
        assert_eq!(stats.processed.load(Ordering::Relaxed), 1);
        assert_eq!(stats.replaced.load(Ordering::Relaxed), 1);
    }

    /// Past the deadline the original goes out, the processor is told,
    /// and its late answer is never used.
    #[tokio::test]
    async fn past_the_deadline_the_original_goes_out() {
        let stats = SeamStats::default();
        let stubborn = Arc::new(Stubborn::default());
        let processor: Arc<dyn ResponseProcessor> = stubborn.clone();
        let original = CallToolResult::success(vec![ContentBlock::text("body")]);
        let deadline = Duration::from_millis(20);
        let out = apply(&processor, &stats, &call(), original.clone(), deadline).await;
        assert_eq!(out, original);
        assert_eq!(stats.deadline.load(Ordering::Relaxed), 1);
        assert_eq!(stats.replaced.load(Ordering::Relaxed), 0);
        // The processor finishes on its own thread and learns it lost.
        loop {
            if let Some(late) = *stubborn.handed_over_late.lock().unwrap() {
                assert!(!late, "a late answer was handed over");
                break;
            }
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn volatile_results_pass_unprocessed_but_their_errors_are_heard() {
        let stats = SeamStats::default();
        let upper = Arc::new(Upper::default());
        let processor: Arc<dyn ResponseProcessor> = upper.clone();
        let report = CallToolResult::success(vec![ContentBlock::text("{\"calls\":1}")]);
        let error = CallToolResult::error(vec![ContentBlock::text("nope")]);
        for delivery in [Delivery::Volatile, Delivery::Exact] {
            let out = deliver(&processor, &stats, &call(), report.clone(), delivery, LONG).await;
            assert_eq!(out, report);
        }
        assert_eq!(stats.processed.load(Ordering::Relaxed), 0);
        deliver(
            &processor,
            &stats,
            &call(),
            error.clone(),
            Delivery::Exact,
            LONG,
        )
        .await;
        assert_eq!(upper.errors.load(Ordering::Relaxed), 0, "exact: unheard");
        deliver(&processor, &stats, &call(), error, Delivery::Volatile, LONG).await;
        assert_eq!(upper.errors.load(Ordering::Relaxed), 1, "volatile: heard");
        let out = deliver(
            &processor,
            &stats,
            &call(),
            report,
            Delivery::Processed,
            LONG,
        )
        .await;
        assert_eq!(
            out.content[0].as_text().map(|t| t.text.as_str()),
            Some("{\"CALLS\":1}")
        );
    }
}
