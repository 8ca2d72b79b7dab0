//! The one seam between the proxy and the response pipeline.
//!
//! Every successful tool result (an upstream's, the answer store's, and a
//! built-in tool's as its [`Delivery`] says) passes through the session's
//! [`Transform`] before it reaches the agent. The transform borrows the
//! result and returns a replacement or nothing, so the proxy always still
//! holds the original: if it errors or panics, the original goes out
//! unchanged and the failure is counted (invariant 4 in docs/invariants.md:
//! fail open). Errors (`isError`) are never transformed: the session's
//! [`EventSink`] hears of them ([`SessionEvent::ErrorResult`], for
//! telemetry), and they go out untouched.
//!
//! The two traits are apart so that every pipeline mode feeds the same
//! events: a passthrough session transforms nothing and still records its
//! error results, speculation and `find_files` queries.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use devboy_core::call::ResolvedCall;
use devboy_core::speculation::SpeculationEvent;
pub use devboy_pipeline::Handoff;
use rmcp::model::{CallToolResult, Tool};

/// How long a transform may work on one result when the session is not
/// told otherwise (`encoding.deadline_ms`).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(2);

/// Error type a transform may return; the result then passes unchanged.
pub type ProcessError = Box<dyn std::error::Error + Send + Sync>;

/// Turns an upstream result into what the agent should see: the only
/// thing in the call path that may change a result.
pub trait Transform: Send + Sync + 'static {
    /// A short name for logs and status.
    fn name(&self) -> &'static str;

    /// `Ok(None)` keeps the result as it is; `Ok(Some(r))` replaces it.
    ///
    /// Runs on a blocking thread under the session's deadline: once
    /// `handoff` says the caller gave up, the original has gone out and
    /// whatever this returns is dropped, so a transform that records what
    /// it sent must settle with [`Handoff::hand_over`] before it records.
    fn process(
        &self,
        call: &ResolvedCall,
        result: &CallToolResult,
        handoff: &Handoff,
    ) -> Result<Option<CallToolResult>, ProcessError>;

    /// Blocks until the transform's one-time setup (a tokenizer's
    /// vocabulary, loaded on first use) is done. Called on the processing
    /// thread before a result's deadline starts: it is not the result's work.
    fn ready(&self) {}

    /// Whether this transform keeps every result as it is
    /// ([`Passthrough`]): the seam then does not hand results to a
    /// blocking thread for it at all.
    fn keeps_everything(&self) -> bool {
        false
    }
}

/// Something a session hears of besides the results it transforms.
#[derive(Debug)]
pub enum SessionEvent<'a> {
    /// A call is about to be answered, after what it may change was
    /// forgotten (the capture notes it).
    Call(&'a ResolvedCall),
    /// An error result (`isError`), which passes untouched.
    ErrorResult(&'a ResolvedCall, &'a CallToolResult),
    /// Speculation did something for a call (a follow-up the planner
    /// weighed, a prefetch sent or ended); the result is the prefetch's
    /// when one ended after landing. Prefetched results themselves never
    /// reach the transform until the agent's own call is answered with
    /// them.
    Speculation {
        /// The call speculated on.
        call: &'a ResolvedCall,
        /// What happened.
        event: SpeculationEvent,
        /// The landed result, if one ended after landing.
        result: Option<&'a CallToolResult>,
    },
    /// A `find_files` query was answered (counts only).
    Retrieval(devboy_telemetry::RetrievalRecord),
    /// A `devboy_run` script ended (counts only, never the code).
    CodeRun(devboy_telemetry::CodeRunRecord),
    /// The agent was served this tool list (`tools/list`); telemetry keeps
    /// what its definitions cost ([`crate::definitions`]), not the names.
    ToolsListed {
        /// The tools, as served.
        tools: &'a [Tool],
        /// When: of several lists, the one served last is what later
        /// requests carry.
        served: std::time::Instant,
    },
    /// The agent's session is over (the client disconnected or devboy is
    /// stopping): write what must outlive it. Sent once, from a thread
    /// that may block briefly.
    Ended,
}

/// Where a session's events go (telemetry, the capture, counters).
pub trait EventSink: Send + Sync + 'static {
    /// Hears of `event`. Must not block for long: it runs on the call path.
    fn record(&self, event: SessionEvent<'_>);
}

/// Sends `event` to `sink`, failing open (a panic is counted and logged).
pub fn record(sink: &dyn EventSink, stats: &SeamStats, event: SessionEvent<'_>) {
    let (what, tool) = match &event {
        SessionEvent::Call(call) => ("recording a call", call.exposed.as_str()),
        SessionEvent::ErrorResult(call, _) => ("recording an error result", call.exposed.as_str()),
        SessionEvent::Speculation { call, .. } => ("recording speculation", call.exposed.as_str()),
        SessionEvent::Retrieval(_) => ("recording a find_files query", "devboy_find_files"),
        SessionEvent::CodeRun(_) => ("recording a script run", "devboy_run"),
        SessionEvent::ToolsListed { .. } => ("recording a tool list", ""),
        SessionEvent::Ended => ("ending the session", ""),
    };
    if fail_open(what, tool, || sink.record(event)).is_none() {
        stats.failures.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs `f`, failing open: a panic is logged as `what` went wrong for
/// `tool` and gives `None` (the caller goes on as if `f` had done
/// nothing). Every layer of the call path that must not take a call down
/// with a bug of its own runs through here.
pub fn fail_open<T>(what: &str, tool: &str, f: impl FnOnce() -> T) -> Option<T> {
    let done = catch_unwind(AssertUnwindSafe(f));
    if done.is_err() {
        tracing::error!(tool, "{what} panicked; went on without it");
    }
    done.ok()
}

/// The sink that hears nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn record(&self, _event: SessionEvent<'_>) {}
}

/// The identity transform: every result passes as it came.
#[derive(Debug, Default, Clone, Copy)]
pub struct Passthrough;

impl Transform for Passthrough {
    fn name(&self) -> &'static str {
        "passthrough"
    }

    fn process(
        &self,
        _call: &ResolvedCall,
        _result: &CallToolResult,
        _handoff: &Handoff,
    ) -> Result<Option<CallToolResult>, ProcessError> {
        Ok(None)
    }

    fn keeps_everything(&self) -> bool {
        true
    }
}

/// Counts of what the seam did, for status.
#[derive(Debug, Default)]
pub struct SeamStats {
    /// Results the transform saw.
    pub processed: AtomicU64,
    /// Results it replaced.
    pub replaced: AtomicU64,
    /// Errors and panics (of the transform or the event sink); each
    /// transform failure passed the original through.
    pub failures: AtomicU64,
    /// Results the transform did not finish within the deadline; each
    /// passed the original through.
    pub deadline: AtomicU64,
}

/// What the seam does with a result, by where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The transform may rewrite it ([`apply`]): every upstream result,
    /// and a built-in's by default, as devboy's own answer
    /// ([`ResolvedCall::is_builtin`]: an id only once its answers repeat,
    /// for an id on a query's answer costs more than it saves).
    Processed,
    /// A report that differs on every call and that clients parse (status,
    /// a new partition number): never rewritten, as an endpoint with dedup
    /// and encoding off; an error result is still heard of.
    Volatile,
    /// Exact bytes the agent asked for by id: passed as they are, unheard.
    Exact,
}

/// The seam of one session: its transform, where its events go, what it
/// counted, and how long a result may take.
#[derive(Clone)]
pub struct Seam {
    transform: Arc<dyn Transform>,
    events: Arc<dyn EventSink>,
    stats: Arc<SeamStats>,
    deadline: Duration,
}

impl Seam {
    /// A seam running `transform` and telling `events`, within the default
    /// deadline.
    pub fn new(transform: Arc<dyn Transform>, events: Arc<dyn EventSink>) -> Self {
        Self {
            transform,
            events,
            stats: Arc::default(),
            deadline: DEFAULT_DEADLINE,
        }
    }

    /// This seam giving a result at most `deadline`.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The transform's name, for status.
    pub fn name(&self) -> &'static str {
        self.transform.name()
    }

    /// The transform.
    pub fn transform(&self) -> Arc<dyn Transform> {
        self.transform.clone()
    }

    /// What the seam did so far.
    pub fn stats(&self) -> &SeamStats {
        &self.stats
    }

    /// How long a result may take.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Tells the session's sink of `event`, failing open.
    pub fn record(&self, event: SessionEvent<'_>) {
        record(self.events.as_ref(), &self.stats, event);
    }

    /// Delivers `result` as `delivery` says, failing open, within the
    /// deadline, and never larger than one message may carry
    /// ([`crate::frame`]).
    pub async fn deliver(
        &self,
        call: &Arc<ResolvedCall>,
        result: CallToolResult,
        delivery: Delivery,
    ) -> CallToolResult {
        let delivered = match delivery {
            Delivery::Processed => self.apply(call, result).await,
            Delivery::Volatile if result.is_error == Some(true) => self.apply(call, result).await,
            Delivery::Volatile | Delivery::Exact => result,
        };
        crate::frame::within_frame(call, delivered)
    }

    /// Runs the transform on `result`, failing open and within the
    /// deadline ([`apply`]).
    pub async fn apply(&self, call: &Arc<ResolvedCall>, result: CallToolResult) -> CallToolResult {
        apply(
            &self.transform,
            self.events.as_ref(),
            &self.stats,
            call,
            result,
            self.deadline,
        )
        .await
    }
}

/// Runs `transform` on `result`, failing open and within `deadline`
/// (invariant 13).
///
/// The work happens on a blocking thread, so a slow result never holds up
/// the async workers that answer every other request. When the deadline
/// passes first, the original goes out as it came (counted in
/// [`SeamStats::deadline`]); the transform learns of it through the
/// [`Handoff`], stops at its next stage and keeps nothing of the result.
/// An error result is only told to `events`, on the caller's thread.
pub async fn apply(
    processor: &Arc<dyn Transform>,
    events: &dyn EventSink,
    stats: &SeamStats,
    call: &Arc<ResolvedCall>,
    result: CallToolResult,
    deadline: Duration,
) -> CallToolResult {
    if result.is_error == Some(true) {
        record(events, stats, SessionEvent::ErrorResult(call, &result));
        return result;
    }
    stats.processed.fetch_add(1, Ordering::Relaxed);
    if processor.keeps_everything() {
        return result;
    }
    let handoff = Arc::new(Handoff::new());
    let result = Arc::new(result);
    let started: Arc<std::sync::OnceLock<tokio::time::Instant>> = Arc::default();
    let mut job = {
        let (processor, result, handoff) = (processor.clone(), result.clone(), handoff.clone());
        let started = started.clone();
        let call = call.clone();
        tokio::task::spawn_blocking(move || {
            processor.ready();
            let at = tokio::time::Instant::now();
            let _ = started.set(at);
            let done = catch_unwind(AssertUnwindSafe(|| {
                processor.process(&call, &result, &handoff)
            }));
            tracing::debug!(
                tool = %call.exposed,
                ms = at.elapsed().as_millis() as u64,
                "result processed"
            );
            done
        })
    };
    let outcome = match run_until_deadline(&mut job, &started, deadline).await {
        Some(done) => done,
        None if handoff.give_up() => {
            stats.deadline.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                processor = processor.name(),
                tool = %call.exposed,
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
            tracing::warn!(processor = processor.name(), tool = %call.exposed, %error, "response processor failed; original passed through");
            original()
        }
        Ok(Err(_)) | Err(_) => {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                processor = processor.name(),
                tool = %call.exposed,
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
    impl Transform for Panics {
        fn name(&self) -> &'static str {
            "panics"
        }
        fn process(
            &self,
            _: &ResolvedCall,
            _: &CallToolResult,
            _: &Handoff,
        ) -> Result<Option<CallToolResult>, ProcessError> {
            panic!("stage bug")
        }
    }

    struct Fails;
    impl Transform for Fails {
        fn name(&self) -> &'static str {
            "fails"
        }
        fn process(
            &self,
            _: &ResolvedCall,
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
    impl EventSink for Upper {
        fn record(&self, event: SessionEvent<'_>) {
            if let SessionEvent::ErrorResult(..) = event {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    impl Transform for Upper {
        fn name(&self) -> &'static str {
            "upper"
        }
        fn process(
            &self,
            _: &ResolvedCall,
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
    impl Transform for Stubborn {
        fn name(&self) -> &'static str {
            "stubborn"
        }
        fn process(
            &self,
            _: &ResolvedCall,
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

    fn call() -> Arc<ResolvedCall> {
        Arc::new(ResolvedCall::new(
            "u__t",
            devboy_core::call::CallRoute::Upstream {
                upstream: "u".into(),
                tool: "t".into(),
            },
            None,
            devboy_core::call::SideEffect::UNKNOWN,
        ))
    }

    fn seam(transform: Arc<dyn Transform>, deadline: Duration) -> Seam {
        Seam::new(transform, Arc::new(NoEvents)).with_deadline(deadline)
    }

    const LONG: Duration = Duration::from_secs(600);

    #[tokio::test]
    async fn panics_and_errors_pass_the_original() {
        let original = CallToolResult::success(vec![ContentBlock::text("body")]);
        let panics = seam(Arc::new(Panics), LONG);
        let out = panics.apply(&call(), original.clone()).await;
        assert_eq!(out, original);
        let fails = seam(Arc::new(Fails), LONG);
        let out = fails.apply(&call(), original.clone()).await;
        assert_eq!(out, original);
        for seam in [panics, fails] {
            assert_eq!(seam.stats().failures.load(Ordering::Relaxed), 1);
            assert_eq!(seam.stats().replaced.load(Ordering::Relaxed), 0);
        }
    }

    #[tokio::test]
    async fn replacement_is_used_and_errors_are_untouched() {
        let upper = Arc::new(Upper::default());
        let seam = Seam::new(upper.clone(), upper.clone()).with_deadline(LONG);
        let stats = seam.stats();
        let body = CallToolResult::success(vec![ContentBlock::text("body")]);
        let out = seam.apply(&call(), body).await;
        assert_eq!(
            out.content[0].as_text().map(|t| t.text.as_str()),
            Some("BODY")
        );
        let error = CallToolResult::error(vec![ContentBlock::text("nope")]);
        assert_eq!(seam.apply(&call(), error.clone()).await, error);
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
        let stubborn = Arc::new(Stubborn::default());
        let seam = seam(stubborn.clone(), Duration::from_millis(20));
        let stats = seam.stats();
        let original = CallToolResult::success(vec![ContentBlock::text("body")]);
        let out = seam.apply(&call(), original.clone()).await;
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
        let upper = Arc::new(Upper::default());
        let seam = Seam::new(upper.clone(), upper.clone()).with_deadline(LONG);
        let stats = seam.stats();
        let report = CallToolResult::success(vec![ContentBlock::text("{\"calls\":1}")]);
        let error = CallToolResult::error(vec![ContentBlock::text("nope")]);
        for delivery in [Delivery::Volatile, Delivery::Exact] {
            let out = seam.deliver(&call(), report.clone(), delivery).await;
            assert_eq!(out, report);
        }
        assert_eq!(stats.processed.load(Ordering::Relaxed), 0);
        seam.deliver(&call(), error.clone(), Delivery::Exact).await;
        assert_eq!(upper.errors.load(Ordering::Relaxed), 0, "exact: unheard");
        seam.deliver(&call(), error, Delivery::Volatile).await;
        assert_eq!(upper.errors.load(Ordering::Relaxed), 1, "volatile: heard");
        let out = seam.deliver(&call(), report, Delivery::Processed).await;
        assert_eq!(
            out.content[0].as_text().map(|t| t.text.as_str()),
            Some("{\"CALLS\":1}")
        );
    }
}
