//! The call path: how one `tools/call` is answered, as layers.
//!
//! ```text
//! sync writes  files Claude Code's own tools wrote are forgotten
//! route        the catalog's route for the exposed name (waiting for the
//!              first listing and a server's first start, else saying why
//!              the name is unknown)
//! resolve      the call's facts, decided once (crate::resolve): key,
//!              side-effect class, paths, route, what the client is shown
//!  ├─ built-in   BuiltinTool::call → the seam, as the tool's Delivery says
//!  └─ upstream   SessionEvent::Call → forget (the pipeline's memory and
//!                the answer store, one pass) → answer store (fail-fast, a
//!                prefetch landed or joined in flight) → the upstream →
//!                speculation (plan, prefetch) → the seam
//! ```
//!
//! Every layer is a method of its own below and reads the one
//! [`ResolvedCall`]: the agent's request becomes a [`PendingCall`] at the
//! MCP edge ([`Session`]'s `call_tool`), and a built-in makes one to call
//! an upstream tool through the same path.

use std::panic::{catch_unwind, AssertUnwindSafe};

use std::sync::atomic::Ordering;
use std::sync::Arc;

use devboy_core::call::{CallKey, ResolvedCall};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorCode, JsonObject, RequestMetaObject,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use tokio_util::sync::CancellationToken;

use futures::FutureExt as _;

use crate::answers::StoredAnswer;
use crate::builtin::BuiltinContext;
use crate::catalog::ToolRoute;
use crate::seam::{Delivery, SessionEvent};
use crate::session::{explain_unknown_tool, unknown_tool, why_unavailable, Session};
use crate::speculation::SpeculationMode;
use crate::upstream::{CallFailure, ProgressTarget, Upstream};
use devboy_core::speculation::Served;

/// One tool call on its way through the layers.
#[derive(Clone)]
pub struct PendingCall {
    /// The exposed tool name.
    pub name: String,
    /// The arguments.
    pub arguments: Option<JsonObject>,
    /// The agent's `_meta`, without its progress token (the upstream
    /// client puts its own; progress is mapped back through `progress`).
    pub meta: RequestMetaObject,
    /// Where progress notifications go, if the agent asked for them.
    pub progress: Option<ProgressTarget>,
    /// Cancelled when the agent cancels the request.
    pub ct: CancellationToken,
    /// The client's name from `initialize`, if it gave one.
    pub client: Option<String>,
    /// The client shows the model `structuredContent` instead of the text
    /// blocks when a result has it.
    pub forwards_structured: bool,
    /// The client's connection, for requests to it (MCP sampling).
    pub(crate) peer: Option<rmcp::Peer<rmcp::RoleServer>>,
}

impl PendingCall {
    /// A call of `name` with `arguments`, from no client in particular:
    /// no `_meta`, no progress, never cancelled.
    pub fn new(name: impl Into<String>, arguments: Option<JsonObject>) -> Self {
        Self {
            name: name.into(),
            arguments,
            meta: RequestMetaObject::default(),
            progress: None,
            ct: CancellationToken::new(),
            client: None,
            forwards_structured: false,
            peer: None,
        }
    }

    /// The agent's request as a call.
    pub(crate) fn from_request(
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        forwards_structured: bool,
    ) -> Self {
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| ProgressTarget {
                peer: context.peer.clone(),
                token,
            });
        let mut meta = context.meta.clone();
        meta.0 .0.remove("progressToken");
        Self {
            name: request.name.into(),
            arguments: request.arguments,
            meta,
            progress,
            ct: context.ct.clone(),
            client: context
                .peer
                .peer_info()
                .map(|info| info.client_info.name.clone()),
            forwards_structured,
            peer: Some(context.peer.clone()),
        }
    }

    /// A call made while answering this one (by a built-in): the same
    /// client, progress target and cancellation, no `_meta` of its own.
    pub(crate) fn nested(&self, name: &str, arguments: Option<JsonObject>) -> Self {
        Self {
            name: name.to_owned(),
            arguments,
            meta: RequestMetaObject::default(),
            progress: self.progress.clone(),
            ct: self.ct.clone(),
            client: self.client.clone(),
            forwards_structured: self.forwards_structured,
            peer: self.peer.clone(),
        }
    }
}

impl Session {
    /// Answers `call` through the layers of the call path.
    pub async fn call(&self, call: PendingCall) -> Result<CallToolResult, McpError> {
        self.sync_writes();
        let route = self.route(&call.name).await?;
        let resolved = self.resolve(&call, &route)?;
        match route {
            ToolRoute::Builtin(index) => self.call_builtin(index, &call, resolved).await,
            ToolRoute::Upstream { upstream, .. } => {
                self.call_upstream(upstream, call, resolved).await
            }
        }
    }

    /// [`call`](Self::call) for upstream tools only (what a built-in may
    /// call: no built-in calls another).
    pub(crate) async fn call_upstream_tool(
        &self,
        call: PendingCall,
    ) -> Result<CallToolResult, McpError> {
        self.sync_writes();
        let route = self.route(&call.name).await?;
        if let ToolRoute::Builtin(_) = route {
            return Err(McpError::invalid_params(
                format!(
                    "`{}` is a devboy tool; a built-in calls upstream tools only",
                    call.name
                ),
                None,
            ));
        }
        let resolved = self.resolve(&call, &route)?;
        match route {
            ToolRoute::Upstream { upstream, .. } => {
                self.call_upstream(upstream, call, resolved).await
            }
            ToolRoute::Builtin(_) => Err(unknown_tool(&call.name)),
        }
    }

    /// Where `name` goes. The agent may call before the first listing has
    /// settled, or call a tool of a server still on its first start: both
    /// are waited for before the name is called unknown.
    async fn route(&self, name: &str) -> Result<ToolRoute, McpError> {
        if let Some(route) = self.proxy().catalog().tool_route(name) {
            return Ok(route.clone());
        }
        self.proxy().settle().await;
        self.proxy().wait_first_start(name).await;
        match self.proxy().catalog().tool_route(name) {
            Some(route) => Ok(route.clone()),
            None => Err(explain_unknown_tool(self.proxy(), name)),
        }
    }

    /// The call's facts, decided once: every later layer reads them.
    fn resolve(
        &self,
        call: &PendingCall,
        route: &ToolRoute,
    ) -> Result<Arc<ResolvedCall>, McpError> {
        let resolved = self
            .resolver()
            .resolve(self.proxy(), &call.name, call.arguments.clone(), route)
            .ok_or_else(|| unknown_tool(&call.name))?;
        Ok(Arc::new(
            resolved.shown_to(call.forwards_structured, call.client.clone()),
        ))
    }

    /// The built-in layer: the registry's tool answers, and the seam
    /// delivers its result as the tool says. A built-in presents itself to
    /// the transform as a tool of upstream `devboy`.
    async fn call_builtin(
        &self,
        index: usize,
        call: &PendingCall,
        resolved: Arc<ResolvedCall>,
    ) -> Result<CallToolResult, McpError> {
        let Some(tool) = self.proxy().builtins().get(index).cloned() else {
            return Err(unknown_tool(&call.name));
        };
        let context = BuiltinContext {
            session: self,
            arguments: call.arguments.as_ref(),
            progress: call.progress.as_ref(),
            ct: &call.ct,
            call,
        };
        // A built-in that panics answers with an error result, never with
        // silence (the agent would wait for its own timeout).
        let called = std::panic::AssertUnwindSafe(tool.call(context));
        let result = match futures::FutureExt::catch_unwind(called).await {
            Ok(result) => result?,
            Err(_) => {
                tracing::error!(tool = %call.name, "a built-in tool panicked; answered with an error");
                return Ok(CallToolResult::error(vec![
                    rmcp::model::ContentBlock::text(format!(
                        "{}: failed inside devboy (a bug; the log has it)",
                        call.name
                    )),
                ]));
            }
        };
        if tool.delivery() == Delivery::Processed {
            // As before an upstream result: the pipeline learns of a
            // compaction or a new model before it processes.
            self.sync_partition();
            self.sync_model();
        }
        Ok(self
            .seam()
            .deliver(&resolved, result, tool.delivery())
            .await)
    }

    /// An upstream tool's call: what it may change is forgotten, the
    /// answer store may answer, else the upstream does; the result goes
    /// through the seam either way.
    async fn call_upstream(
        &self,
        index: usize,
        call: PendingCall,
        resolved: Arc<ResolvedCall>,
    ) -> Result<CallToolResult, McpError> {
        let Some(upstream) = self.proxy().upstreams().get(index).cloned() else {
            return Err(unknown_tool(&call.name));
        };
        self.sync_partition();
        self.sync_model();
        self.seam().record(SessionEvent::Call(&resolved));
        self.forget_for(&resolved);
        if let Some(answer) = self.stored_answer(&resolved, &call.ct).await {
            let served = Arc::new(ResolvedCall::clone(&resolved).served(answer.served));
            self.after_answer(&served, &answer.result);
            return Ok(self.seam().apply(&served, answer.result).await);
        }
        if call.ct.is_cancelled() {
            // Cancelled while a store answer was awaited: nothing to ask.
            return Err(cancelled());
        }
        match ask_upstream(&upstream, resolved.tool(), &call).await? {
            Answer::Result(result) => {
                self.sync_partition();
                // Planned on the original: the pipeline has not rewritten it.
                let sent = self.after_answer(&resolved, &result);
                let answered = self.seam().apply(&resolved, result).await;
                Ok(self
                    .inline_follow_ups(&resolved, answered, &sent, &call.ct)
                    .await)
            }
            // An error result: the seam passes it untouched and tells the
            // session's events (telemetry counts it like an upstream error).
            Answer::Failure(result) => Ok(self.seam().apply(&resolved, result).await),
        }
    }

    /// The invalidation layer: whatever holds results forgets, in one
    /// pass, what `call` may change (the pipeline's dedup memory and the
    /// answer store, by the call's one class and paths). Fails open.
    fn forget_for(&self, call: &ResolvedCall) {
        if let Some(pipeline) = self.pipeline_memory() {
            if catch_unwind(AssertUnwindSafe(|| pipeline.forget_for(call))).is_err() {
                self.seam().stats().failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(tool = %call.exposed, "forgetting for a call panicked");
            }
        }
        let store = self.answer_store();
        if catch_unwind(AssertUnwindSafe(|| store.on_call(call))).is_err() {
            tracing::error!(tool = %call.exposed, "the answer store panicked forgetting for a call");
        }
    }

    /// The answer-store layer. A store that panics answers nothing (the
    /// upstream then does), like a failing pipeline stage.
    async fn stored_answer(
        &self,
        call: &ResolvedCall,
        cancel: &CancellationToken,
    ) -> Option<StoredAnswer> {
        let store = self.answer_store();
        let asked = catch_unwind(AssertUnwindSafe(|| store.answer(call, cancel)));
        let answered = match asked {
            Ok(answer) => AssertUnwindSafe(answer).catch_unwind().await.ok(),
            Err(_) => None,
        };
        answered.unwrap_or_else(|| {
            tracing::error!(
                tool = %call.exposed,
                "answer store panicked; the upstream answers"
            );
            None
        })
    }

    /// The speculation step after a result reached the seam: fail-fast
    /// counts, and follow-ups of an upstream's answer. Fails open. Returns
    /// the prefetches it sent.
    fn after_answer(&self, call: &ResolvedCall, result: &CallToolResult) -> Vec<CallKey> {
        let Some(engine) = self.speculation() else {
            return Vec::new();
        };
        catch_unwind(AssertUnwindSafe(|| engine.after_answer(call, result))).unwrap_or_else(|_| {
            tracing::error!(
                tool = %call.exposed,
                "speculation panicked; nothing prefetched"
            );
            Vec::new()
        })
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
        cancel: &CancellationToken,
    ) -> CallToolResult {
        let Some(engine) = self.speculation() else {
            return answered;
        };
        let hidden = call.forwards_structured && answered.structured_content.is_some();
        if sent.is_empty()
            || engine.settings().mode != SpeculationMode::Inline
            || answered.is_error == Some(true)
            || (hidden && !self.rewrites_structured())
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
            let shown = self.seam().apply(&inlined, follow_up.result).await;
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

/// The blocks of `result` the client shows the model: its
/// `structuredContent` as JSON text for a client that shows that instead
/// of the text, else its content.
fn shown_blocks(result: &CallToolResult, forwards_structured: bool) -> Vec<ContentBlock> {
    match &result.structured_content {
        Some(structured) if forwards_structured => vec![ContentBlock::text(structured.to_string())],
        _ => result.content.clone(),
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

/// The error of a request the agent cancelled.
fn cancelled() -> McpError {
    McpError::new(ErrorCode::INTERNAL_ERROR, "request cancelled", None)
}

/// What the upstream layer got back.
#[derive(Debug)]
enum Answer {
    /// The upstream's result.
    Result(CallToolResult),
    /// devboy's error result for a call that failed on the way.
    Failure(CallToolResult),
}

/// The upstream layer: forwards `call` to `upstream`'s `tool`. The
/// upstream's own JSON-RPC error passes through as it was, and a
/// cancelled request is an error; any other failure becomes an error
/// result the agent can read.
async fn ask_upstream(
    upstream: &Upstream,
    tool: &str,
    call: &PendingCall,
) -> Result<Answer, McpError> {
    let outcome = upstream
        .call_tool(
            tool,
            call.arguments.clone(),
            call.meta.clone(),
            call.progress.clone(),
            call.ct.clone(),
        )
        .await;
    match outcome {
        Ok(result) => Ok(Answer::Result(result)),
        Err(CallFailure::Protocol(error)) => Err(error),
        Err(CallFailure::Cancelled) => Err(cancelled()),
        // The server is not up (a tool listed from an earlier run's kept
        // listing, say): say since when and why, as for an unknown name.
        Err(failure @ CallFailure::Unavailable { .. }) => {
            let why = why_unavailable(upstream, &call.name).unwrap_or_else(|| failure.to_string());
            tracing::warn!(tool = %call.name, %failure, "tool call failed");
            Ok(Answer::Failure(CallToolResult::error(vec![
                ContentBlock::text(format!("devboy: {why}")),
            ])))
        }
        Err(failure) => {
            tracing::warn!(tool = %call.name, %failure, "tool call failed");
            Ok(Answer::Failure(CallToolResult::error(vec![
                ContentBlock::text(format!("devboy: {failure}")),
            ])))
        }
    }
}
