//! The call path: how one `tools/call` is answered, as layers.
//!
//! ```text
//! route        the catalog's route for the exposed name (waiting for the
//!              first listing and a server's first start, else saying why
//!              the name is unknown)
//! resolve      the call's facts, decided once (crate::resolve): key,
//!              side-effect class, paths, route, what the client is shown
//! seam         outermost: the answer through the session's transform as
//!              its Delivery says; inline mode appends landed follow-ups
//!  catch-panic   a panic inside is an error result
//!  sync          written files, compactions, the model reach the pipeline
//!                and the prefetch store (again after the answer)
//!  speculate     after the answer: fail-fast counts, prefetches planned
//!  forget        upstream calls: SessionEvent::Call, then the pipeline's
//!                memory and the answer store forget what the call may
//!                change, in one pass
//!  answer-store  upstream calls: fail-fast, a landed or joined prefetch
//!  router        innermost: a built-in answers (its arguments checked
//!                against its schema first), or the upstream does
//! ```
//!
//! Each layer is a [`Layer`] and one line of [`LAYERS`]; every layer reads
//! the one [`ResolvedCall`]. The agent's request becomes a [`PendingCall`]
//! at the MCP edge ([`Session`]'s `call_tool`), and a built-in makes one
//! to call an upstream tool through the same path.

use std::panic::AssertUnwindSafe;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use devboy_core::call::{CallKey, ResolvedCall};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorCode, JsonObject, RequestMetaObject,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use tokio_util::sync::CancellationToken;

use futures::future::BoxFuture;
use futures::FutureExt as _;

use crate::answers::StoredAnswer;
use crate::builtin::BuiltinContext;
use crate::catalog::ToolRoute;
use crate::seam::{fail_open, Delivery, SessionEvent};
use crate::session::{explain_unknown_tool, unknown_tool, why_unavailable, Session};
use crate::speculation::SpeculationMode;
use crate::upstream::{CallFailure, ProgressTarget, Upstream};
use crate::view::shown_blocks;
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

/// What the inner layers answered a call with, on its way out.
pub(crate) struct Reply {
    /// The result, as it came (the seam has not run yet).
    result: CallToolResult,
    /// The call it answers, marked with where the answer came from.
    call: Arc<ResolvedCall>,
    /// How the seam delivers it.
    delivery: Delivery,
    /// The prefetches planned after it (inline mode appends those that
    /// land in time).
    sent: Vec<CallKey>,
}

impl Reply {
    fn new(call: Arc<ResolvedCall>, result: CallToolResult, delivery: Delivery) -> Self {
        Self {
            result,
            call,
            delivery,
            sent: Vec::new(),
        }
    }
}

/// One call on its way in: the agent's request, its route and its facts.
pub(crate) struct Cx<'a> {
    session: &'a Session,
    pending: &'a PendingCall,
    route: ToolRoute,
    call: Arc<ResolvedCall>,
}

type Replying<'a> = BoxFuture<'a, Result<Reply, McpError>>;

/// One layer of the call path: answers a call itself, or through `next`
/// and then works on what came back. Our own two-method trait rather
/// than tower's `Service`: a layer borrows the session and the call for
/// one request, has no readiness to report and is never cloned, so
/// `poll_ready` and `'static` futures would only be ceremony.
trait Layer: Sync {
    /// For logs.
    fn name(&self) -> &'static str;

    /// Answers `cx`'s call, itself or through `next`.
    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a>;
}

/// The layers inside the current one; the router answers when none is
/// left.
struct Next<'a> {
    layers: &'a [&'a dyn Layer],
}

impl<'a> Next<'a> {
    fn run(self, cx: &'a Cx<'a>) -> Replying<'a> {
        match self.layers.split_first() {
            Some((layer, rest)) => {
                tracing::trace!(layer = layer.name(), tool = %cx.call.exposed, "call path");
                layer.call(cx, Next { layers: rest })
            }
            None => Box::pin(Router.answer(cx)),
        }
    }
}

/// The call path, outermost first (see the module docs). A new layer is
/// one type implementing [`Layer`] and one line here.
const LAYERS: &[&dyn Layer] = &[&CatchPanic, &SyncOutside, &Speculate, &Forget, &Store];

impl Session {
    /// Answers `call` through the layers of the call path.
    pub async fn call(&self, call: PendingCall) -> Result<CallToolResult, McpError> {
        let route = self.route(&call.name).await?;
        if let ToolRoute::Upstream { .. } = route {
            // A tool the agent calls is one it uses: a lazy session lists it.
            self.reveal_tools([call.name.as_str()]);
        }
        self.answer(&call, route).await
    }

    /// [`call`](Self::call) for upstream tools only (what a built-in may
    /// call: no built-in calls another).
    pub(crate) async fn call_upstream_tool(
        &self,
        call: PendingCall,
    ) -> Result<CallToolResult, McpError> {
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
        self.answer(&call, route).await
    }

    /// The seam, outermost: what the layers answered goes through the
    /// session's transform as its delivery says, and inline mode appends
    /// the follow-ups that landed.
    async fn answer(
        &self,
        pending: &PendingCall,
        route: ToolRoute,
    ) -> Result<CallToolResult, McpError> {
        let call = self.resolve(pending, &route)?;
        let cx = Cx {
            session: self,
            pending,
            route,
            call,
        };
        let answered = Next { layers: LAYERS }.run(&cx).await?;
        let shown = self
            .seam()
            .deliver(&answered.call, answered.result, answered.delivery)
            .await;
        Ok(self
            .inline_follow_ups(&answered.call, shown, &answered.sent, &pending.ct)
            .await)
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

/// A panic inside answers with an error result, never with silence (the
/// agent would wait for its own timeout) and never with a dropped
/// connection. Layers that must fall through to the upstream (the answer
/// store) or keep the answer (speculation) catch their own.
struct CatchPanic;

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

/// What happened outside the call path reaches the pipeline and the
/// prefetch store first: files Claude Code's own tools wrote, a
/// compaction, the session's model; compactions and the model again once
/// the answer is in (a built-in may have compacted), before the seam.
struct SyncOutside;

impl Layer for SyncOutside {
    fn name(&self) -> &'static str {
        "sync"
    }

    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a> {
        Box::pin(async move {
            let session = cx.session;
            session.sync_writes();
            session.sync_partition();
            session.sync_model();
            let answered = next.run(cx).await;
            session.sync_partition();
            session.sync_model();
            answered
        })
    }
}

/// After an upstream's answer (or the store's): fail-fast counts, and the
/// follow-ups worth prefetching. Fails open.
struct Speculate;

impl Layer for Speculate {
    fn name(&self) -> &'static str {
        "speculate"
    }

    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a> {
        Box::pin(async move {
            let mut answered = next.run(cx).await?;
            let Some(engine) = cx.session.speculation() else {
                return Ok(answered);
            };
            if cx.call.is_builtin() {
                return Ok(answered);
            }
            // Planned on the original: the pipeline has not rewritten it.
            answered.sent = fail_open("speculation", &cx.call.exposed, || {
                engine.after_answer(&answered.call, &answered.result)
            })
            .unwrap_or_default();
            Ok(answered)
        })
    }
}

/// Before an upstream tool is asked: the session's events note the call,
/// and whatever holds results forgets, in one pass, what it may change
/// (the pipeline's dedup memory and the answer store, by the call's one
/// class and paths). Fails open.
struct Forget;

impl Layer for Forget {
    fn name(&self) -> &'static str {
        "forget"
    }

    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a> {
        if !cx.call.is_builtin() {
            let (session, call) = (cx.session, &*cx.call);
            session.seam().record(SessionEvent::Call(call));
            if let Some(pipeline) = session.pipeline_memory() {
                let forgot = fail_open("forgetting", &call.exposed, || pipeline.forget_for(call));
                if forgot.is_none() {
                    let failures = &session.seam().stats().failures;
                    failures.fetch_add(1, Ordering::Relaxed);
                }
            }
            let store = session.answer_store();
            fail_open("the answer store forgetting", &call.exposed, || {
                store.on_call(call)
            });
        }
        next.run(cx)
    }
}

/// The answer store may answer an upstream tool's call (fail-fast, a
/// prefetch landed or joined in flight). A store that panics answers
/// nothing: the upstream then does, like a failing pipeline stage.
struct Store;

impl Layer for Store {
    fn name(&self) -> &'static str {
        "answer-store"
    }

    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a> {
        Box::pin(async move {
            if cx.call.is_builtin() {
                return next.run(cx).await;
            }
            let store = cx.session.answer_store();
            let cancel = &cx.pending.ct;
            let answer = match fail_open("the answer store", &cx.call.exposed, || {
                store.answer(&cx.call, cancel)
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

/// The innermost layer: a built-in answers itself, an upstream tool is
/// forwarded.
struct Router;

impl Router {
    async fn answer(&self, cx: &Cx<'_>) -> Result<Reply, McpError> {
        let session = cx.session;
        let pending = cx.pending;
        match &cx.route {
            ToolRoute::Builtin(index) => {
                let Some(tool) = session.proxy().builtins().get(*index).cloned() else {
                    return Err(unknown_tool(&pending.name));
                };
                if let Some(refused) =
                    crate::builtin::refusal(&tool.definition(), pending.arguments.as_ref())
                {
                    // Heard as an error result whatever the tool's delivery:
                    // the tool never ran.
                    return Ok(Reply::new(cx.call.clone(), refused, Delivery::Processed));
                }
                let context = BuiltinContext {
                    session,
                    arguments: pending.arguments.as_ref(),
                    progress: pending.progress.as_ref(),
                    ct: &pending.ct,
                    call: pending,
                };
                let result = tool.call(context).await?;
                Ok(Reply::new(cx.call.clone(), result, tool.delivery()))
            }
            ToolRoute::Upstream { upstream, .. } => {
                let Some(upstream) = session.proxy().upstreams().get(*upstream).cloned() else {
                    return Err(unknown_tool(&pending.name));
                };
                let result = ask_upstream(&upstream, cx.call.tool(), pending).await?;
                Ok(Reply::new(cx.call.clone(), result, Delivery::Processed))
            }
        }
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

/// Forwards `call` to `upstream`'s `tool`. The upstream's own JSON-RPC
/// error passes through as it was, and a cancelled request is an error;
/// any other failure becomes an error result the agent can read (the seam
/// passes it untouched and the session's events count it like an
/// upstream error).
async fn ask_upstream(
    upstream: &Upstream,
    tool: &str,
    call: &PendingCall,
) -> Result<CallToolResult, McpError> {
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
