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

use devboy_core::pipeline_config::SideEffectClass;
use devboy_core::speculation::{Served, SpeculationEvent};
use rmcp::model::{CallToolResult, JsonObject};

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
}

/// Error type a processor may return; the result then passes unchanged.
pub type ProcessError = Box<dyn std::error::Error + Send + Sync>;

/// Turns an upstream result into what the agent should see.
pub trait ResponseProcessor: Send + Sync + 'static {
    /// A short name for logs and status.
    fn name(&self) -> &'static str;

    /// `Ok(None)` keeps the result as it is; `Ok(Some(r))` replaces it.
    fn process(
        &self,
        call: &ToolCallInfo<'_>,
        result: &CallToolResult,
    ) -> Result<Option<CallToolResult>, ProcessError>;

    /// Whether results with `structuredContent` may come back without it,
    /// in which case the session stops declaring the tools' `outputSchema`
    /// to clients that forward structured content.
    fn rewrites_structured(&self) -> bool {
        false
    }

    /// Sees every call before it is forwarded (to forget what it may change).
    fn before_call(&self, _call: &ToolCallInfo<'_>) {}

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

    /// The exact text an id this session emitted stood for: `None` if the
    /// processor emits no ids, `Err` with a message for people otherwise.
    fn expand(&self, _id: &str) -> Option<Result<String, String>> {
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
}

/// What the seam does with a result, by where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The processor may rewrite it ([`apply`]): every upstream result,
    /// and a built-in's by default.
    Processed,
    /// A report that differs on every call and that clients parse (status,
    /// a new partition number): never rewritten, as an endpoint with dedup
    /// and encoding off; an error result is still heard of.
    Volatile,
    /// Exact bytes the agent asked for by id: passed as they are, unheard.
    Exact,
}

/// Delivers `result` as `delivery` says, failing open.
pub fn deliver(
    processor: &dyn ResponseProcessor,
    stats: &SeamStats,
    call: &ToolCallInfo<'_>,
    result: CallToolResult,
    delivery: Delivery,
) -> CallToolResult {
    match delivery {
        Delivery::Processed => apply(processor, stats, call, result),
        Delivery::Volatile if result.is_error == Some(true) => {
            apply(processor, stats, call, result)
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

/// Runs `processor` on `result`, failing open.
pub fn apply(
    processor: &dyn ResponseProcessor,
    stats: &SeamStats,
    call: &ToolCallInfo<'_>,
    result: CallToolResult,
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
    match catch_unwind(AssertUnwindSafe(|| processor.process(call, &result))) {
        Ok(Ok(None)) => result,
        Ok(Ok(Some(replacement))) => {
            stats.replaced.fetch_add(1, Ordering::Relaxed);
            replacement
        }
        Ok(Err(error)) => {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(processor = processor.name(), tool = call.exposed, %error, "response processor failed; original passed through");
            result
        }
        Err(_) => {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                processor = processor.name(),
                tool = call.exposed,
                "response processor panicked; original passed through"
            );
            result
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
        ) -> Result<Option<CallToolResult>, ProcessError> {
            let text = r.content[0].as_text().map(|t| t.text.to_uppercase());
            Ok(text.map(|t| CallToolResult::success(vec![ContentBlock::text(t)])))
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
        }
    }

    #[test]
    fn panics_and_errors_pass_the_original() {
        let original = CallToolResult::success(vec![ContentBlock::text("body")]);
        let stats = SeamStats::default();
        let out = apply(&Panics, &stats, &call(), original.clone());
        assert_eq!(out, original);
        let out = apply(&Fails, &stats, &call(), original.clone());
        assert_eq!(out, original);
        assert_eq!(stats.failures.load(Ordering::Relaxed), 2);
        assert_eq!(stats.replaced.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn replacement_is_used_and_errors_are_untouched() {
        let stats = SeamStats::default();
        let upper = Upper::default();
        let out = apply(
            &upper,
            &stats,
            &call(),
            CallToolResult::success(vec![ContentBlock::text("body")]),
        );
        assert_eq!(
            out.content[0].as_text().map(|t| t.text.as_str()),
            Some("BODY")
        );
        let error = CallToolResult::error(vec![ContentBlock::text("nope")]);
        assert_eq!(apply(&upper, &stats, &call(), error.clone()), error);
        assert_eq!(
            upper.errors.load(Ordering::Relaxed),
            1,
            "heard of, untouched"
        );
        assert_eq!(stats.processed.load(Ordering::Relaxed), 1);
        assert_eq!(stats.replaced.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn volatile_results_pass_unprocessed_but_their_errors_are_heard() {
        let stats = SeamStats::default();
        let upper = Upper::default();
        let report = CallToolResult::success(vec![ContentBlock::text("{\"calls\":1}")]);
        let error = CallToolResult::error(vec![ContentBlock::text("nope")]);
        for delivery in [Delivery::Volatile, Delivery::Exact] {
            let out = deliver(&upper, &stats, &call(), report.clone(), delivery);
            assert_eq!(out, report);
        }
        assert_eq!(stats.processed.load(Ordering::Relaxed), 0);
        deliver(&upper, &stats, &call(), error.clone(), Delivery::Exact);
        assert_eq!(upper.errors.load(Ordering::Relaxed), 0, "exact: unheard");
        deliver(&upper, &stats, &call(), error, Delivery::Volatile);
        assert_eq!(upper.errors.load(Ordering::Relaxed), 1, "volatile: heard");
        let out = deliver(&upper, &stats, &call(), report, Delivery::Processed);
        assert_eq!(
            out.content[0].as_text().map(|t| t.text.as_str()),
            Some("{\"CALLS\":1}")
        );
    }
}
