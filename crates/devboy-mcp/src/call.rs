//! The call path: how one `tools/call` is answered, as layers.
//!
//! ```text
//! route        the catalog's route for the exposed name (waiting for the
//!              first listing and a server's first start, else saying why
//!              the name is unknown)
//!  ├─ built-in   BuiltinTool::call → the seam, as the tool's Delivery says
//!  └─ upstream   processor.before_call → answer store (on_call, answer:
//!                fail-fast, a prefetch landed or joined in flight)
//!                → the upstream → speculation (plan, prefetch) → the seam
//! ```
//!
//! Every layer is a method of its own below, and a [`PendingCall`] is all a
//! layer needs: the agent's request is turned into one at the MCP edge
//! ([`Session`]'s `call_tool`), and a built-in makes one to call an
//! upstream tool through the same path.

use std::panic::{catch_unwind, AssertUnwindSafe};

use devboy_core::pipeline_config::SideEffectClass;

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
use crate::seam::{apply, before_call, deliver, Delivery, ToolCallInfo};
use crate::session::{explain_unknown_tool, unknown_tool, why_unavailable, Session};
use crate::speculation::{CallKey, SpeculationMode};
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

    fn info<'a>(
        &'a self,
        upstream: &'a str,
        tool: &'a str,
        side_effect: SideEffectClass,
    ) -> ToolCallInfo<'a> {
        ToolCallInfo {
            upstream,
            tool,
            exposed: &self.name,
            arguments: self.arguments.as_ref(),
            side_effect,
            forwards_structured: self.forwards_structured,
            client: self.client.as_deref(),
            served: devboy_core::speculation::Served::Upstream,
            builtin: false,
        }
    }
}

impl Session {
    /// Answers `call` through the layers of the call path.
    pub async fn call(&self, call: PendingCall) -> Result<CallToolResult, McpError> {
        self.sync_writes();
        match self.route(&call.name).await? {
            ToolRoute::Builtin(index) => self.call_builtin(index, &call).await,
            upstream => self.call_upstream(upstream, call).await,
        }
    }

    /// [`call`](Self::call) for upstream tools only (what a built-in may
    /// call: no built-in calls another).
    pub(crate) async fn call_upstream_tool(
        &self,
        call: PendingCall,
    ) -> Result<CallToolResult, McpError> {
        self.sync_writes();
        match self.route(&call.name).await? {
            ToolRoute::Builtin(_) => Err(McpError::invalid_params(
                format!(
                    "`{}` is a devboy tool; a built-in calls upstream tools only",
                    call.name
                ),
                None,
            )),
            upstream => self.call_upstream(upstream, call).await,
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

    /// The built-in layer: the registry's tool answers, and the seam
    /// delivers its result as the tool says. A built-in presents itself to
    /// the processor as a tool of upstream `devboy`.
    async fn call_builtin(
        &self,
        index: usize,
        call: &PendingCall,
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
        let side_effect = tool
            .definition()
            .annotations
            .as_ref()
            .map_or(SideEffectClass::Unknown, |a| {
                SideEffectClass::from_annotations(a.read_only_hint, a.destructive_hint)
            });
        let info = ToolCallInfo {
            builtin: true,
            ..call.info(crate::SERVER_INFO_NAME, &call.name, side_effect)
        };
        if tool.delivery() == Delivery::Processed {
            // As before an upstream result: the processor learns of a
            // compaction or a new model before it processes.
            self.sync_partition();
            self.sync_model();
        }
        Ok(deliver(
            self.processor(),
            &self.counters().seam,
            &info,
            result,
            tool.delivery(),
            self.deadline(),
        )
        .await)
    }

    /// An upstream tool's call: the processor forgets what the call may
    /// change, the answer store may answer, else the upstream does; the
    /// result goes through the seam either way.
    async fn call_upstream(
        &self,
        route: ToolRoute,
        call: PendingCall,
    ) -> Result<CallToolResult, McpError> {
        let ToolRoute::Upstream {
            upstream: index,
            tool,
            side_effect,
        } = route
        else {
            return Err(unknown_tool(&call.name));
        };
        let Some(upstream) = self.proxy().upstreams().get(index).cloned() else {
            return Err(unknown_tool(&call.name));
        };
        let mut info = call.info(&upstream.config().name, &tool, side_effect);
        self.sync_partition();
        self.sync_model();
        let processor = self.processor();
        let seam = &self.counters().seam;
        let deadline = self.deadline();
        before_call(processor.as_ref(), seam, &info);
        if let Some(answer) = self.stored_answer(&info, &call.ct).await {
            info.served = answer.served;
            self.after_answer(&info, &answer.result);
            return Ok(apply(processor, seam, &info, answer.result, deadline).await);
        }
        if call.ct.is_cancelled() {
            // Cancelled while a store answer was awaited: nothing to ask.
            return Err(cancelled());
        }
        match ask_upstream(&upstream, &tool, &call).await? {
            Answer::Result(result) => {
                self.sync_partition();
                // Planned on the original: the pipeline has not rewritten it.
                let sent = self.after_answer(&info, &result);
                let answered = apply(processor, seam, &info, result, deadline).await;
                Ok(self
                    .inline_follow_ups(&info, answered, &sent, &call.ct)
                    .await)
            }
            // An error result: the seam passes it untouched and tells the
            // processor (telemetry counts it like an upstream error).
            Answer::Failure(result) => Ok(apply(processor, seam, &info, result, deadline).await),
        }
    }

    /// The answer-store layer. A store that panics answers nothing (the
    /// upstream then does), like a failing pipeline stage.
    async fn stored_answer(
        &self,
        info: &ToolCallInfo<'_>,
        cancel: &CancellationToken,
    ) -> Option<StoredAnswer> {
        let store = self.answer_store();
        let asked = catch_unwind(AssertUnwindSafe(|| {
            store.on_call(info);
            store.answer(info, cancel)
        }));
        let answered = match asked {
            Ok(answer) => AssertUnwindSafe(answer).catch_unwind().await.ok(),
            Err(_) => None,
        };
        answered.unwrap_or_else(|| {
            tracing::error!(
                tool = info.exposed,
                "answer store panicked; the upstream answers"
            );
            None
        })
    }

    /// The speculation step after a result reached the seam: fail-fast
    /// counts, and follow-ups of an upstream's answer. Fails open. Returns
    /// the prefetches it sent.
    fn after_answer(&self, info: &ToolCallInfo<'_>, result: &CallToolResult) -> Vec<CallKey> {
        let Some(engine) = self.speculation() else {
            return Vec::new();
        };
        catch_unwind(AssertUnwindSafe(|| engine.after_answer(info, result))).unwrap_or_else(|_| {
            tracing::error!(
                tool = info.exposed,
                "speculation panicked; nothing prefetched"
            );
            Vec::new()
        })
    }

    /// Inline mode: appends to `answered` the prefetches of `sent` that
    /// landed in time and fit the budget, each through the seam as the
    /// result of its own call (so the processor holds it as delivered, and
    /// the agent's later identical call may be a reference to it), under a
    /// one-line hint naming the call. Nothing is appended to an error. A
    /// client that shows `structuredContent` instead of the text is given
    /// the text it would have shown, without the structured copy, when
    /// the processor may do that (it then declares no `outputSchema`);
    /// else nothing is appended.
    async fn inline_follow_ups(
        &self,
        info: &ToolCallInfo<'_>,
        mut answered: CallToolResult,
        sent: &[CallKey],
        cancel: &CancellationToken,
    ) -> CallToolResult {
        let Some(engine) = self.speculation() else {
            return answered;
        };
        let hidden = info.forwards_structured && answered.structured_content.is_some();
        if sent.is_empty()
            || engine.settings().mode != SpeculationMode::Inline
            || answered.is_error == Some(true)
            || (hidden && !self.processor().rewrites_structured())
        {
            return answered;
        }
        let taken = AssertUnwindSafe(engine.take_inline(sent, cancel))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!(tool = info.exposed, "inlining panicked; nothing inlined");
                Vec::new()
            });
        if taken.is_empty() {
            return answered;
        }
        if hidden {
            answered.content = shown_blocks(&answered, true);
            answered.structured_content = None;
        }
        let processor = self.processor();
        let seam = &self.counters().seam;
        for follow_up in taken {
            let call = ToolCallInfo {
                upstream: &follow_up.upstream,
                tool: &follow_up.tool,
                exposed: &follow_up.exposed,
                arguments: Some(&follow_up.arguments),
                side_effect: follow_up.side_effect,
                // Processed as the agent's own call of it would be, so its
                // later call is the same body: a reference.
                forwards_structured: info.forwards_structured,
                client: info.client,
                served: Served::Inline,
                builtin: false,
            };
            let shown = apply(processor, seam, &call, follow_up.result, self.deadline()).await;
            answered.content.push(ContentBlock::text(inline_hint(
                &follow_up.exposed,
                &follow_up.arguments,
            )));
            answered
                .content
                .extend(shown_blocks(&shown, info.forwards_structured));
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
fn inline_hint(exposed: &str, arguments: &JsonObject) -> String {
    const MAX_ARGS: usize = 160;
    let mut args = devboy_core::speculation::canonical_object(arguments);
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
