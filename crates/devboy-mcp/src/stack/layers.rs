//! The layers of the call stack, outermost first, and the router; each
//! holds what it uses. Their unit tests drive each one alone, between a
//! fake outer call and a fake innermost answer.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use devboy_core::call::{CallKey, ResolvedCall};
use devboy_core::speculation::Served;
use futures::FutureExt as _;
use rmcp::model::{CallToolResult, ContentBlock, ErrorCode};
use rmcp::ErrorData as McpError;

use super::local::{BuiltinContext, BuiltinRegistry, Services};
use super::{CallStack, Cx, Innermost, Layer, Next, Reply, Replying};
use crate::answers::{AnswerStore, Memory, StoredAnswer};
use crate::catalog::ToolRoute;
use crate::partition::PartitionWatcher;
use crate::processor::PipelineProcessor;
use crate::proxy::Proxy;
use crate::seam::{fail_open, Delivery, Seam, SessionEvent};
use crate::speculation::{SpeculationEngine, SpeculationMode};
use crate::upstream::{CallFailure, Phase, Upstream};
use crate::view::shown_blocks;

/// The seam, outermost: what the layers answered goes through the
/// session's transform as its delivery says, and inline mode appends the
/// follow-ups that landed.
pub(crate) struct Deliver {
    seam: Seam,
    /// The engine whose landed follow-ups inline mode appends.
    speculation: Option<Arc<SpeculationEngine>>,
    /// Whether results with `structuredContent` may come back without it
    /// (a pipeline runs).
    rewrites_structured: bool,
}

impl Deliver {
    pub(crate) fn new(
        seam: Seam,
        speculation: Option<Arc<SpeculationEngine>>,
        rewrites_structured: bool,
    ) -> Self {
        Self {
            seam,
            speculation,
            rewrites_structured,
        }
    }

    /// Inline mode: appends to `answered` the prefetches of `sent` that
    /// landed in time and fit the budget, each through the seam as the
    /// result of its own call (so the pipeline holds it as delivered, and
    /// the agent's later identical call may be a reference to it), under a
    /// one-line hint naming the call. Nothing is appended to an error. A
    /// client that shows `structuredContent` instead of the text is given
    /// the text it would have shown, without the structured copy, when
    /// the pipeline may do that (it then declares no `outputSchema`);
    /// else nothing is appended.
    async fn inline_follow_ups(
        &self,
        call: &ResolvedCall,
        mut answered: CallToolResult,
        sent: &[CallKey],
        cancel: &tokio_util::sync::CancellationToken,
    ) -> CallToolResult {
        let Some(engine) = &self.speculation else {
            return answered;
        };
        let hidden = call.forwards_structured && answered.structured_content.is_some();
        if sent.is_empty()
            || engine.settings().mode != SpeculationMode::Inline
            || answered.is_error == Some(true)
            || (hidden && !self.rewrites_structured)
        {
            return answered;
        }
        let taken = AssertUnwindSafe(engine.take_inline(sent, cancel))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!(tool = %call.exposed, "inlining panicked; nothing inlined");
                Vec::new()
            });
        if taken.is_empty() {
            return answered;
        }
        if hidden {
            answered.content = shown_blocks(&answered, true);
            answered.structured_content = None;
        }
        for follow_up in taken {
            // Processed as the agent's own call of it would be, so its
            // later call is the same body: a reference.
            let inlined = Arc::new(
                ResolvedCall::clone(&follow_up.call)
                    .shown_to(call.forwards_structured, call.client.clone())
                    .served(Served::Inline),
            );
            let shown = self.seam.apply(&inlined, follow_up.result).await;
            answered
                .content
                .push(ContentBlock::text(inline_hint(&inlined)));
            answered
                .content
                .extend(shown_blocks(&shown, call.forwards_structured));
        }
        answered
    }
}

impl Layer for Deliver {
    fn name(&self) -> &'static str {
        "deliver"
    }

    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a> {
        Box::pin(async move {
            let answered = next.run(cx).await?;
            if cx.pending.by_script {
                // A script's: back to it as it came; the model holds none
                // of it, so no later reference or diff can point at it.
                return Ok(Reply {
                    delivery: Delivery::Exact,
                    ..answered
                });
            }
            let shown = self
                .seam
                .deliver(&answered.call, answered.result, answered.delivery)
                .await;
            let result = self
                .inline_follow_ups(&answered.call, shown, &answered.sent, &cx.pending.ct)
                .await;
            Ok(Reply {
                result,
                call: answered.call,
                delivery: Delivery::Exact,
                sent: answered.sent,
            })
        })
    }
}

/// The line before an inlined result: which call it answers, so the
/// agent need not make it. Long arguments are cut (the call stays
/// recognisable; the agent's own call with them is then a reference).
fn inline_hint(call: &ResolvedCall) -> String {
    const MAX_ARGS: usize = 160;
    let exposed = &call.exposed;
    let mut args = call.key.arguments().to_owned();
    if args.len() > MAX_ARGS {
        let mut cut = MAX_ARGS;
        while !args.is_char_boundary(cut) {
            cut -= 1;
        }
        args.truncate(cut);
        args.push('…');
    }
    format!("> [inlined: {exposed} {args} returned:]")
}

/// A panic inside answers with an error result, never with silence (the
/// agent would wait for its own timeout) and never with a dropped
/// connection. Layers that must fall through to the upstream (the answer
/// store) or keep the answer (speculation) catch their own.
pub(crate) struct CatchPanic;

impl Layer for CatchPanic {
    fn name(&self) -> &'static str {
        "catch-panic"
    }

    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a> {
        Box::pin(async move {
            match AssertUnwindSafe(next.run(cx)).catch_unwind().await {
                Ok(answered) => answered,
                Err(_) => {
                    let name = &cx.pending.name;
                    tracing::error!(tool = %name, "answering a call panicked; answered with an error");
                    let failed = CallToolResult::error(vec![ContentBlock::text(format!(
                        "{name}: failed inside devboy (a bug; the log has it)"
                    ))]);
                    Ok(Reply::new(cx.call.clone(), failed, Delivery::Exact))
                }
            }
        })
    }
}

/// What happened outside the call stack, and who was told of it: files
/// Claude Code's own tools wrote, compactions, the session's model.
pub(crate) struct Outside {
    partition: PartitionWatcher,
    memories: Vec<Arc<dyn Memory>>,
    /// The partition the memories were last told about.
    told_partition: AtomicU64,
    /// Told the model the hooks report.
    pipeline: Option<Arc<PipelineProcessor>>,
    /// The model the pipeline was last told about.
    told_model: Mutex<Option<String>>,
}

impl Outside {
    pub(crate) fn new(
        partition: PartitionWatcher,
        memories: Vec<Arc<dyn Memory>>,
        pipeline: Option<Arc<PipelineProcessor>>,
    ) -> Self {
        Self {
            partition,
            memories,
            told_partition: AtomicU64::new(0),
            pipeline,
            told_model: Mutex::new(None),
        }
    }

    /// The session's context partition.
    pub(crate) fn partition(&self) -> &PartitionWatcher {
        &self.partition
    }

    /// Tells every memory about the files Claude Code's own tools wrote
    /// (the `PostToolUse` hook) since they last heard.
    pub(crate) fn writes(&self) {
        let written = self.partition.take_written();
        if written.is_empty() {
            return;
        }
        for memory in &self.memories {
            memory.forget_written(&written.paths, written.missed);
        }
    }

    /// Tells every memory about a compaction since they last heard, and
    /// the pipeline the model the hooks reported, when it changed.
    pub(crate) fn catch_up(&self) {
        let current = self.partition.current();
        let mut seen = self.told_partition.load(Ordering::SeqCst);
        while seen < current {
            match self.told_partition.compare_exchange(
                seen,
                current,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    for memory in &self.memories {
                        memory.advance_partition();
                    }
                    break;
                }
                Err(now) => seen = now,
            }
        }
        let model = self.partition.model();
        let mut told = crate::sync::lock(&self.told_model);
        if *told != model {
            told.clone_from(&model);
            drop(told);
            if let Some(pipeline) = &self.pipeline {
                pipeline.set_model(model);
            }
        }
    }
}

/// What happened outside the call stack reaches every memory first: files
/// written, a compaction, the session's model; compactions and the model
/// again once the answer is in (a built-in may have compacted), before the
/// seam.
pub(crate) struct SyncOutside {
    outside: Arc<Outside>,
}

impl SyncOutside {
    pub(crate) fn new(outside: Arc<Outside>) -> Self {
        Self { outside }
    }
}

impl Layer for SyncOutside {
    fn name(&self) -> &'static str {
        "sync"
    }

    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a> {
        Box::pin(async move {
            self.outside.writes();
            self.outside.catch_up();
            let answered = next.run(cx).await;
            self.outside.catch_up();
            answered
        })
    }
}

/// What plans follow-ups once a call is answered (the speculation engine).
pub(crate) trait FollowUps: Send + Sync {
    /// After `call` was answered with `result`: the prefetches sent.
    fn after_answer(&self, call: &ResolvedCall, result: &CallToolResult) -> Vec<CallKey>;
}

impl FollowUps for Arc<SpeculationEngine> {
    fn after_answer(&self, call: &ResolvedCall, result: &CallToolResult) -> Vec<CallKey> {
        SpeculationEngine::after_answer(self, call, result)
    }
}

/// After an upstream's answer (or the store's): fail-fast counts, and the
/// follow-ups worth prefetching. Fails open.
pub(crate) struct Speculate {
    engine: Box<dyn FollowUps>,
}

impl Speculate {
    pub(crate) fn new(engine: impl FollowUps + 'static) -> Self {
        Self {
            engine: Box::new(engine),
        }
    }
}

impl Layer for Speculate {
    fn name(&self) -> &'static str {
        "speculate"
    }

    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a> {
        Box::pin(async move {
            let mut answered = next.run(cx).await?;
            // A script's calls neither count toward fail-fast (the model
            // never saw those results) nor plan prefetches.
            if cx.call.is_builtin() || cx.pending.by_script {
                return Ok(answered);
            }
            // Planned on the original: the pipeline has not rewritten it.
            answered.sent = fail_open("speculation", &cx.call.exposed, || {
                self.engine.after_answer(&answered.call, &answered.result)
            })
            .unwrap_or_default();
            Ok(answered)
        })
    }
}

/// Before an upstream tool is asked: the session's events note the call,
/// and every memory forgets, in one pass, what the call may change (by its
/// one class and paths). Fails open; a memory that fails counts as a
/// pipeline failure.
pub(crate) struct Forget {
    seam: Seam,
    memories: Vec<Arc<dyn Memory>>,
}

impl Forget {
    pub(crate) fn new(seam: Seam, memories: Vec<Arc<dyn Memory>>) -> Self {
        Self { seam, memories }
    }
}

impl Layer for Forget {
    fn name(&self) -> &'static str {
        "forget"
    }

    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a> {
        if !cx.call.is_builtin() {
            let call = &*cx.call;
            self.seam.record(SessionEvent::Call(call));
            for memory in &self.memories {
                let forgot = fail_open(memory.name(), &call.exposed, || memory.forget_call(call));
                if forgot.is_none() {
                    self.seam.stats().failures.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        next.run(cx)
    }
}

/// The answer store may answer an upstream tool's call (fail-fast, a
/// prefetch landed or joined in flight). A store that panics answers
/// nothing: the upstream then does, like a failing pipeline stage.
pub(crate) struct Store {
    store: Arc<dyn AnswerStore>,
}

impl Store {
    pub(crate) fn new(store: Arc<dyn AnswerStore>) -> Self {
        Self { store }
    }
}

impl Layer for Store {
    fn name(&self) -> &'static str {
        "answer-store"
    }

    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a> {
        Box::pin(async move {
            if cx.call.is_builtin() {
                return next.run(cx).await;
            }
            let cancel = &cx.pending.ct;
            let answer = match fail_open("the answer store", &cx.call.exposed, || {
                self.store.answer(&cx.call, cancel)
            }) {
                Some(answer) => AssertUnwindSafe(answer)
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|_| {
                        tracing::error!(tool = %cx.call.exposed, "the answer store panicked; the upstream answers");
                        None
                    }),
                None => None,
            };
            // A script gets results, never a fail-fast hint in their place.
            let answer = answer.filter(|a| !(cx.pending.by_script && a.served == Served::FailFast));
            if let Some(StoredAnswer { result, served }) = answer {
                let call = Arc::new(ResolvedCall::clone(&cx.call).served(served));
                return Ok(Reply::new(call, result, Delivery::Processed));
            }
            if cancel.is_cancelled() {
                // Cancelled while a store answer was awaited: nothing to ask.
                return Err(cancelled());
            }
            next.run(cx).await
        })
    }
}

/// The innermost layer: a built-in answers itself (given the services it
/// may use, and the stack for its own upstream calls), an upstream tool is
/// forwarded.
pub(crate) struct Router {
    builtins: BuiltinRegistry,
    proxy: Arc<Proxy>,
    services: Services,
    /// The stack this router is the end of, for built-ins' upstream calls.
    stack: Weak<CallStack>,
}

impl Router {
    pub(crate) fn new(
        builtins: BuiltinRegistry,
        proxy: Arc<Proxy>,
        services: Services,
        stack: Weak<CallStack>,
    ) -> Self {
        Self {
            builtins,
            proxy,
            services,
            stack,
        }
    }
}

impl Innermost for Router {
    fn answer<'a>(&'a self, cx: &'a Cx<'a>) -> Replying<'a> {
        Box::pin(async move {
            let pending = cx.pending;
            match cx.route {
                ToolRoute::Builtin { .. } => {
                    let Some(tool) = self.builtins.named(&pending.name) else {
                        return Err(unknown_tool(&pending.name));
                    };
                    if let Some(refused) =
                        super::local::refusal(&tool.definition(), pending.arguments.as_ref())
                    {
                        // Heard as an error result whatever the tool's
                        // delivery: the tool never ran.
                        return Ok(Reply::new(cx.call.clone(), refused, Delivery::Processed));
                    }
                    let Some(stack) = self.stack.upgrade() else {
                        return Err(unknown_tool(&pending.name));
                    };
                    let context = BuiltinContext::new(pending, &self.services, &stack);
                    let result = tool.call(context).await?;
                    Ok(Reply::new(cx.call.clone(), result, tool.delivery()))
                }
                ToolRoute::Upstream { upstream, .. } => {
                    let Some(upstream) = self.proxy.upstream(upstream) else {
                        // Retired by a reload since the call was routed.
                        return Err(explain_unknown_tool(&self.proxy, &pending.name));
                    };
                    let result = ask_upstream(&upstream, cx.call.tool(), pending).await?;
                    Ok(Reply::new(cx.call.clone(), result, Delivery::Processed))
                }
            }
        })
    }
}

/// The error of a request the agent cancelled.
fn cancelled() -> McpError {
    McpError::new(ErrorCode::INTERNAL_ERROR, "request cancelled", None)
}

/// Forwards `call` to `upstream`'s `tool`. The upstream's own JSON-RPC
/// error passes through as it was, and a cancelled request is an error;
/// any other failure becomes an error result the agent can read (the seam
/// passes it untouched and the session's events count it like an
/// upstream error).
async fn ask_upstream(
    upstream: &Upstream,
    tool: &str,
    call: &super::PendingCall,
) -> Result<CallToolResult, McpError> {
    let outcome = upstream
        .call_tool(
            tool,
            call.arguments.clone(),
            call.meta.clone(),
            call.progress.clone(),
            call.peer.clone(),
            call.ct.clone(),
        )
        .await;
    match outcome {
        Ok(result) => Ok(result),
        Err(CallFailure::Protocol(error)) => Err(error),
        Err(CallFailure::Cancelled) => Err(cancelled()),
        // The server is not up (a tool listed from an earlier run's kept
        // listing, say): say since when and why, as for an unknown name.
        Err(failure @ CallFailure::Unavailable { .. }) => {
            let why = why_unavailable(upstream, &call.name).unwrap_or_else(|| failure.to_string());
            tracing::warn!(tool = %call.name, %failure, "tool call failed");
            Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "devboy: {why}"
            ))]))
        }
        Err(failure) => {
            tracing::warn!(tool = %call.name, %failure, "tool call failed");
            Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "devboy: {failure}"
            ))]))
        }
    }
}

pub(crate) fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("unknown tool `{name}`"), None)
}

/// Why `name` is not a tool the agent can call, as precisely as devboy
/// knows: the tool's server is down (since when, and why), disabled or
/// still starting, the tool is filtered out by the config, or that server
/// has no such tool.
pub(crate) fn explain_unknown_tool(proxy: &Proxy, name: &str) -> McpError {
    let Some((upstream, tool)) = proxy.owner_of(name) else {
        return unknown_tool(name);
    };
    let config = upstream.config();
    let server = &config.name;
    let listed = upstream.catalog().tools.iter().any(|t| t.name == tool);
    let message = if listed && !config.tools.permits(tool) {
        format!(
            "tool `{name}` is filtered out: `{tool}` of server `{server}` does not pass its allow/deny globs in devboy's config"
        )
    } else {
        why_unavailable(&upstream, name).unwrap_or_else(|| {
            format!("unknown tool `{name}`: server `{server}` has no tool `{tool}`")
        })
    };
    McpError::invalid_params(message, None)
}

/// Why a tool `name` of `upstream` cannot be called now: its server is
/// down (for how long, and why), disabled, still starting or stopped.
/// `None` while the server is ready. The same words answer a call of an
/// unknown name and a call of a listed tool (one kept from an earlier run,
/// say) whose server is not up.
pub(crate) fn why_unavailable(upstream: &Upstream, name: &str) -> Option<String> {
    let server = &upstream.config().name;
    Some(match upstream.phase() {
        Phase::Disabled if upstream.config().enabled => format!(
            "tool `{name}`: its server `{server}` was disabled while devboy runs (devboy_servers or devboy ctl enable {server} starts it again)"
        ),
        Phase::Disabled => {
            format!("tool `{name}`: its server `{server}` is disabled in devboy's config")
        }
        Phase::Failed { error, .. } => {
            let down = upstream
                .down_for()
                .map(|d| format!(" for {} s", d.as_secs()))
                .unwrap_or_default();
            format!("tool `{name}`: its server `{server}` is down{down}: {error}")
        }
        Phase::Starting => match upstream.down_for() {
            Some(down) => format!(
                "tool `{name}`: its server `{server}` is down for {} s and restarting; last error: {}",
                down.as_secs(),
                crate::sync::lock(&upstream.stats.last_error)
                    .as_deref()
                    .unwrap_or("unknown")
            ),
            None => format!(
                "tool `{name}`: its server `{server}` is still starting; call devboy_status to see when it is ready"
            ),
        },
        Phase::Stopped => format!("tool `{name}`: its server `{server}` has stopped"),
        Phase::Ready => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use devboy_core::call::{CallRoute, SideEffect};
    use devboy_core::pipeline_config::SideEffectClass;
    use rmcp::model::JsonObject;
    use tokio_util::sync::CancellationToken;

    use super::super::PendingCall;
    use super::*;
    use crate::seam::{EventSink, Handoff, NoEvents, Passthrough, ProcessError, Transform};

    /// The innermost answer: counts its calls and answers `inner`, or
    /// panics when asked to.
    #[derive(Default)]
    struct Inner {
        calls: AtomicUsize,
        panics: bool,
        /// Advances this partition while answering (a built-in compacting).
        compacts: Option<PartitionWatcher>,
    }

    impl Innermost for Inner {
        fn answer<'a>(&'a self, cx: &'a Cx<'a>) -> Replying<'a> {
            Box::pin(async move {
                self.calls.fetch_add(1, Ordering::SeqCst);
                if self.panics {
                    panic!("a bug inside");
                }
                if let Some(partition) = &self.compacts {
                    partition.advance();
                }
                let result = CallToolResult::success(vec![ContentBlock::text("inner")]);
                Ok(Reply::new(cx.call.clone(), result, Delivery::Processed))
            })
        }
    }

    fn upstream_route() -> ToolRoute {
        ToolRoute::Upstream {
            upstream: "t".into(),
            tool: "echo".into(),
            side_effect: SideEffectClass::Unknown,
            shipped: None,
        }
    }

    fn resolved(name: &str, route: &ToolRoute) -> Arc<ResolvedCall> {
        let call_route = match route {
            ToolRoute::Builtin { .. } => CallRoute::Builtin,
            ToolRoute::Upstream { upstream, tool, .. } => CallRoute::Upstream {
                upstream: upstream.clone(),
                tool: tool.clone(),
            },
        };
        Arc::new(ResolvedCall::new(
            name,
            call_route,
            None,
            SideEffect::UNKNOWN,
        ))
    }

    /// Runs `layer` alone on a call of `name` by `route`, `inner` after it.
    async fn run(
        layer: &dyn Layer,
        inner: &Inner,
        pending: &PendingCall,
        route: &ToolRoute,
    ) -> Result<Reply, McpError> {
        let cx = Cx {
            pending,
            route,
            call: resolved(&pending.name, route),
        };
        let layers: Vec<Box<dyn Layer>> = Vec::new();
        let next = Next::new(&layers, inner);
        layer.call(&cx, next).await
    }

    fn text(result: &CallToolResult) -> String {
        result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    /// A transform that marks what it processes.
    struct Marks;

    impl Transform for Marks {
        fn name(&self) -> &'static str {
            "marks"
        }

        fn process(
            &self,
            _call: &ResolvedCall,
            result: &CallToolResult,
            _handoff: &Handoff,
        ) -> Result<Option<CallToolResult>, ProcessError> {
            Ok(Some(CallToolResult::success(vec![ContentBlock::text(
                format!("marked {}", text(result)),
            )])))
        }
    }

    /// Events written down as lines.
    #[derive(Default)]
    struct Heard(Mutex<Vec<String>>);

    impl EventSink for Heard {
        fn record(&self, event: SessionEvent<'_>) {
            if let SessionEvent::Call(call) = event {
                crate::sync::lock(&self.0).push(format!("call {}", call.exposed));
            }
        }
    }

    /// A memory that counts what it is told, and may panic forgetting.
    #[derive(Default)]
    struct Counting {
        calls: AtomicUsize,
        partitions: AtomicUsize,
        panics: bool,
    }

    impl Memory for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }

        fn forget_call(&self, _call: &ResolvedCall) {
            if self.panics {
                panic!("a memory with a bug");
            }
            self.calls.fetch_add(1, Ordering::SeqCst);
        }

        fn advance_partition(&self) {
            self.partitions.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn deliver_runs_the_seam_as_the_delivery_says() {
        let seam = Seam::new(Arc::new(Marks), Arc::new(NoEvents));
        let deliver = Deliver::new(seam.clone(), None, true);
        let pending = PendingCall::new("t__echo", None);
        let reply = run(&deliver, &Inner::default(), &pending, &upstream_route())
            .await
            .expect("reply");
        assert_eq!(text(&reply.result), "marked inner");
        assert_eq!(reply.delivery, Delivery::Exact, "delivered once");
        assert_eq!(seam.stats().processed.load(Ordering::Relaxed), 1);
        // Through the plain seam, the same answer as it came.
        let plain = Deliver::new(
            Seam::new(Arc::new(Passthrough), Arc::new(NoEvents)),
            None,
            false,
        );
        let reply = run(&plain, &Inner::default(), &pending, &upstream_route())
            .await
            .expect("reply");
        assert_eq!(text(&reply.result), "inner");
    }

    #[tokio::test]
    async fn catch_panic_turns_a_panic_into_an_error_result() {
        let inner = Inner {
            panics: true,
            ..Inner::default()
        };
        let pending = PendingCall::new("t__echo", None);
        let reply = run(&CatchPanic, &inner, &pending, &upstream_route())
            .await
            .expect("an answer, not a protocol error");
        assert_eq!(reply.result.is_error, Some(true));
        assert!(text(&reply.result).contains("t__echo: failed inside devboy"));
        assert_eq!(reply.delivery, Delivery::Exact);
    }

    #[tokio::test]
    async fn sync_tells_every_memory_of_a_compaction_before_and_after_the_answer() {
        let partition = PartitionWatcher::manual();
        let memory = Arc::new(Counting::default());
        let outside = Arc::new(Outside::new(
            partition.clone(),
            vec![memory.clone(), Arc::new(Counting::default())],
            None,
        ));
        let sync = SyncOutside::new(outside);
        let pending = PendingCall::new("t__echo", None);
        // A compaction before the call reaches the memory before the answer.
        partition.advance();
        run(&sync, &Inner::default(), &pending, &upstream_route())
            .await
            .expect("reply");
        assert_eq!(memory.partitions.load(Ordering::SeqCst), 1);
        // One during the answer (a built-in compacting) before it goes out.
        let compacting = Inner {
            compacts: Some(partition.clone()),
            ..Inner::default()
        };
        run(&sync, &compacting, &pending, &upstream_route())
            .await
            .expect("reply");
        assert_eq!(memory.partitions.load(Ordering::SeqCst), 2);
        // Nothing new: nothing told.
        run(&sync, &Inner::default(), &pending, &upstream_route())
            .await
            .expect("reply");
        assert_eq!(memory.partitions.load(Ordering::SeqCst), 2);
    }

    /// Plans one follow-up after every answer, or panics.
    struct OneFollowUp {
        panics: bool,
    }

    impl FollowUps for OneFollowUp {
        fn after_answer(&self, call: &ResolvedCall, _result: &CallToolResult) -> Vec<CallKey> {
            if self.panics {
                panic!("a planner with a bug");
            }
            vec![CallKey::new(&format!("{}_next", call.exposed), None)]
        }
    }

    #[tokio::test]
    async fn speculate_plans_after_an_upstream_answer_only_and_fails_open() {
        let speculate = Speculate::new(OneFollowUp { panics: false });
        let pending = PendingCall::new("t__echo", None);
        let reply = run(&speculate, &Inner::default(), &pending, &upstream_route())
            .await
            .expect("reply");
        assert_eq!(reply.sent, [CallKey::new("t__echo_next", None)]);
        let builtin = ToolRoute::Builtin {
            side_effect: SideEffectClass::ReadOnly,
        };
        let status = PendingCall::new("devboy_status", None);
        let reply = run(&speculate, &Inner::default(), &status, &builtin)
            .await
            .expect("reply");
        assert!(reply.sent.is_empty(), "built-ins plan nothing");
        let broken = Speculate::new(OneFollowUp { panics: true });
        let reply = run(&broken, &Inner::default(), &pending, &upstream_route())
            .await
            .expect("the answer, whatever the planner does");
        assert_eq!(text(&reply.result), "inner");
        assert!(reply.sent.is_empty());
    }

    #[tokio::test]
    async fn forget_notes_the_call_and_tells_every_memory_once() {
        let heard = Arc::new(Heard::default());
        let seam = Seam::new(Arc::new(Passthrough), heard.clone());
        let (first, second) = (Arc::new(Counting::default()), Arc::new(Counting::default()));
        let broken = Arc::new(Counting {
            panics: true,
            ..Counting::default()
        });
        let forget = Forget::new(seam.clone(), vec![first.clone(), broken, second.clone()]);
        let pending = PendingCall::new("t__echo", None);
        let reply = run(&forget, &Inner::default(), &pending, &upstream_route())
            .await
            .expect("reply");
        assert_eq!(text(&reply.result), "inner");
        assert_eq!(*crate::sync::lock(&heard.0), ["call t__echo"]);
        assert_eq!(first.calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            second.calls.load(Ordering::SeqCst),
            1,
            "after a memory that failed"
        );
        assert_eq!(seam.stats().failures.load(Ordering::Relaxed), 1);
        // A built-in's call changes nothing upstream: nobody forgets.
        let builtin = ToolRoute::Builtin {
            side_effect: SideEffectClass::ReadOnly,
        };
        let status = PendingCall::new("devboy_status", None);
        run(&forget, &Inner::default(), &status, &builtin)
            .await
            .expect("reply");
        assert_eq!(first.calls.load(Ordering::SeqCst), 1);
        assert_eq!(crate::sync::lock(&heard.0).len(), 1);
    }

    /// Answers `t__echo`, or panics.
    struct Holds {
        panics: bool,
    }

    impl AnswerStore for Holds {
        fn answer<'a>(
            &'a self,
            call: &'a ResolvedCall,
            _cancel: &'a CancellationToken,
        ) -> futures::future::BoxFuture<'a, Option<StoredAnswer>> {
            let panics = self.panics;
            let held = (call.exposed == "t__echo").then(|| StoredAnswer {
                result: CallToolResult::success(vec![ContentBlock::text("held")]),
                served: Served::Prefetch,
            });
            Box::pin(async move {
                if panics {
                    panic!("a store with a bug");
                }
                held
            })
        }
    }

    #[tokio::test]
    async fn the_store_answers_first_and_else_the_inner_layers_do() {
        let store = Store::new(Arc::new(Holds { panics: false }));
        let inner = Inner::default();
        let echo = PendingCall::new("t__echo", None);
        let reply = run(&store, &inner, &echo, &upstream_route())
            .await
            .expect("reply");
        assert_eq!(text(&reply.result), "held");
        assert_eq!(reply.call.served, Served::Prefetch);
        assert_eq!(inner.calls.load(Ordering::SeqCst), 0);
        let other = PendingCall::new("t__other", None);
        let reply = run(&store, &inner, &other, &upstream_route())
            .await
            .expect("reply");
        assert_eq!(text(&reply.result), "inner");
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
        // A store that panics answers nothing: the inner layers do.
        let broken = Store::new(Arc::new(Holds { panics: true }));
        let reply = run(&broken, &inner, &echo, &upstream_route())
            .await
            .expect("reply");
        assert_eq!(text(&reply.result), "inner");
        // Cancelled while the store was asked: nothing else is.
        let cancelled = PendingCall::new("t__other", None);
        cancelled.ct.cancel();
        let refused = run(&store, &inner, &cancelled, &upstream_route()).await;
        assert!(refused.is_err());
        assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
    }

    /// A built-in that echoes its `text`.
    struct Echo;

    impl super::super::BuiltinTool for Echo {
        fn definition(&self) -> rmcp::model::Tool {
            let schema = serde_json::json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            });
            rmcp::model::Tool::new(
                "devboy_echo",
                "Echoes.",
                Arc::new(schema.as_object().cloned().unwrap_or_default()),
            )
        }

        fn delivery(&self) -> Delivery {
            Delivery::Volatile
        }

        fn call<'a>(
            &'a self,
            context: BuiltinContext<'a>,
        ) -> futures::future::BoxFuture<'a, Result<CallToolResult, McpError>> {
            let text = context.str_argument("text").unwrap_or_default().to_owned();
            Box::pin(async move { Ok(CallToolResult::success(vec![ContentBlock::text(text)])) })
        }
    }

    /// The router alone, over a proxy with no upstreams (no child process).
    #[tokio::test]
    async fn the_router_checks_a_builtins_arguments_then_answers_as_it_declares() {
        let builtins = BuiltinRegistry::empty().with(Echo);
        let config = devboy_core::config::ProxyConfig::embedded_default();
        let proxy = Proxy::start(&config, Default::default(), builtins.listing());
        let stack = CallStack::new(super::super::StackParts {
            proxy: proxy.clone(),
            builtins,
            resolver: crate::resolve::Resolver::new(Arc::new(
                devboy_core::pipeline_config::PipelineConfig::embedded_default(),
            )),
            seam: Seam::new(Arc::new(Passthrough), Arc::new(NoEvents)),
            pipeline: None,
            speculation: None,
            answers: None,
            memories: Vec::new(),
            partition: PartitionWatcher::manual(),
            rules: None,
        });
        let route = ToolRoute::Builtin {
            side_effect: SideEffectClass::ReadOnly,
        };
        let arguments: JsonObject = serde_json::json!({"text": "hi"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let good = PendingCall::new("devboy_echo", Some(arguments));
        let cx = Cx {
            pending: &good,
            route: &route,
            call: resolved("devboy_echo", &route),
        };
        let reply = stack.router.answer(&cx).await.expect("reply");
        assert_eq!(text(&reply.result), "hi");
        assert_eq!(reply.delivery, Delivery::Volatile);
        let bad = PendingCall::new("devboy_echo", None);
        let cx = Cx {
            pending: &bad,
            route: &route,
            call: resolved("devboy_echo", &route),
        };
        let refused = stack.router.answer(&cx).await.expect("reply");
        assert_eq!(refused.result.is_error, Some(true));
        assert!(
            text(&refused.result).contains("`text`"),
            "{}",
            text(&refused.result)
        );
        let unknown = PendingCall::new("devboy_nope", None);
        let cx = Cx {
            pending: &unknown,
            route: &route,
            call: resolved("devboy_nope", &route),
        };
        assert!(stack.router.answer(&cx).await.is_err());
        proxy.shutdown().await;
    }
}
