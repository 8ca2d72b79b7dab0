//! The call stack: how one `tools/call` is answered, as layers that each
//! own what they use.
//!
//! ```text
//! route        the catalog's route for the exposed name (waiting for the
//!              first listing and a server's first start, else saying why
//!              the name is unknown)
//! resolve      the call's facts, decided once (crate::resolve): key,
//!              side-effect class, paths, what the client is shown
//! deliver      outermost: the answer through the session's seam as its
//!              Delivery says; inline mode appends landed follow-ups
//!  catch-panic   a panic inside is an error result
//!  sync          written files, compactions, the model reach every
//!                Memory (again after the answer)
//!  speculate     after an upstream's answer: fail-fast counts, prefetches
//!                planned
//!  forget        upstream calls: SessionEvent::Call, then every Memory
//!                forgets what the call may change, in one pass
//!  answer-store  upstream calls: fail-fast, a landed or joined prefetch
//!  router        innermost: a built-in answers (its arguments checked
//!                against its schema first), or the upstream does
//! ```
//!
//! A [`CallStack`] is built once per session from its parts
//! ([`StackParts`]); each layer is a type in [`layers`] holding the parts
//! it uses and nothing else, and sees of a call only its [`Cx`]: the
//! request, its route and its [`ResolvedCall`]. A new layer is one type
//! implementing [`Layer`] and one line in [`CallStack::new`]. The agent's
//! request becomes a [`PendingCall`] at the MCP edge (the session's
//! `call_tool`), and a built-in makes one to call an upstream tool through
//! the same stack.

mod arguments;
mod figures;
mod layers;
mod local;

use std::sync::{Arc, Weak};

use devboy_core::call::{CallKey, ResolvedCall};
use futures::future::BoxFuture;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, RequestMetaObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::answers::{AnswerStore, Memory};
use crate::catalog::ToolRoute;
use crate::lazy::LazyListing;
use crate::partition::PartitionWatcher;
use crate::processor::PipelineProcessor;
use crate::proxy::Proxy;
use crate::resolve::Resolver;
use crate::seam::{Delivery, Seam};
use crate::speculation::SpeculationEngine;
use crate::upstream::ProgressTarget;

pub use figures::{Figures, Rules};
use layers::explain_unknown_tool;
pub use local::{BuiltinContext, BuiltinRegistry, BuiltinTool};

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
    /// A code-mode script makes the call (`devboy_run`): its answer goes
    /// back to the script, past the seam, so nothing the model holds
    /// comes of it.
    pub(crate) by_script: bool,
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
            by_script: false,
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
            by_script: false,
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
            by_script: self.by_script,
        }
    }

    /// A call a code-mode script makes while this one (`devboy_run`) is
    /// answered: [`nested`](Self::nested), answered to the script, ended
    /// by `ct` (the run's, cancelled when the run ends), with no progress
    /// of its own (the script's calls run side by side under one token).
    pub(crate) fn nested_for_script(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        ct: CancellationToken,
    ) -> Self {
        Self {
            by_script: true,
            progress: None,
            ct,
            ..self.nested(name, arguments)
        }
    }
}

/// What a script's call came to ([`CallStack::call_from_script`]).
pub(crate) enum ScriptAnswer {
    /// The layers answered it.
    Answered(CallToolResult),
    /// Refused before anything saw it: its class may write.
    MayWrite(devboy_core::pipeline_config::SideEffectClass),
}

/// What the inner layers answered a call with, on its way out.
pub(crate) struct Reply {
    /// The result: as it came until the deliver layer has run.
    pub(crate) result: CallToolResult,
    /// The call it answers, marked with where the answer came from.
    pub(crate) call: Arc<ResolvedCall>,
    /// How the seam delivers it.
    pub(crate) delivery: Delivery,
    /// The prefetches planned after it (inline mode appends those that
    /// land in time).
    pub(crate) sent: Vec<CallKey>,
}

impl Reply {
    pub(crate) fn new(call: Arc<ResolvedCall>, result: CallToolResult, delivery: Delivery) -> Self {
        Self {
            result,
            call,
            delivery,
            sent: Vec::new(),
        }
    }
}

/// One call on its way in: the request, its route and its facts. All a
/// layer sees of a call.
pub(crate) struct Cx<'a> {
    pub(crate) pending: &'a PendingCall,
    pub(crate) route: &'a ToolRoute,
    pub(crate) call: Arc<ResolvedCall>,
}

pub(crate) type Replying<'a> = BoxFuture<'a, Result<Reply, McpError>>;

/// One layer of the call stack: answers a call itself, or through `next`
/// and then works on what came back. Our own two-method trait rather
/// than tower's `Service`: a layer borrows the call for one request, has
/// no readiness to report and is never cloned, so `poll_ready` and
/// `'static` futures would only be ceremony.
pub(crate) trait Layer: Send + Sync {
    /// For logs.
    fn name(&self) -> &'static str;

    /// Answers `cx`'s call, itself or through `next`.
    fn call<'a>(&'a self, cx: &'a Cx<'a>, next: Next<'a>) -> Replying<'a>;
}

/// What answers when no layer is left (the router; a fake in tests).
pub(crate) trait Innermost: Send + Sync {
    /// Answers `cx`'s call.
    fn answer<'a>(&'a self, cx: &'a Cx<'a>) -> Replying<'a>;
}

/// The layers inside the current one, and what answers after them.
pub(crate) struct Next<'a> {
    layers: &'a [Box<dyn Layer>],
    inner: &'a dyn Innermost,
}

impl<'a> Next<'a> {
    /// `layers`, outermost first, then `inner`.
    pub(crate) fn new(layers: &'a [Box<dyn Layer>], inner: &'a dyn Innermost) -> Self {
        Self { layers, inner }
    }

    /// Runs the next layer (or the innermost) on `cx`.
    pub(crate) fn run(self, cx: &'a Cx<'a>) -> Replying<'a> {
        match self.layers.split_first() {
            Some((layer, rest)) => {
                tracing::trace!(layer = layer.name(), tool = %cx.call.exposed, "call path");
                layer.call(
                    cx,
                    Next {
                        layers: rest,
                        inner: self.inner,
                    },
                )
            }
            None => self.inner.answer(cx),
        }
    }
}

/// What a session's stack is built from: every part once, each handed to
/// the layers that use it.
pub struct StackParts {
    /// The upstreams and the catalog.
    pub proxy: Arc<Proxy>,
    /// devboy's own tools (the catalog lists the same ones).
    pub builtins: BuiltinRegistry,
    /// Decides calls' facts.
    pub resolver: Resolver,
    /// The session's transform and events.
    pub seam: Seam,
    /// The pipeline's memory, when a pipeline runs.
    pub pipeline: Option<Arc<PipelineProcessor>>,
    /// The prefetch engine, when the session speculates.
    pub speculation: Option<Arc<SpeculationEngine>>,
    /// What may answer upstream calls first (the engine when it
    /// speculates).
    pub answers: Option<Arc<dyn AnswerStore>>,
    /// What else forgets with the pipeline and the engine.
    pub memories: Vec<Arc<dyn Memory>>,
    /// The session's context partition.
    pub partition: PartitionWatcher,
    /// The `[endpoints]`/`[tools]` tables status checks against the
    /// catalog.
    pub rules: Option<Arc<devboy_core::pipeline_config::PipelineConfig>>,
}

/// The layers of one session, built once.
pub struct CallStack {
    proxy: Arc<Proxy>,
    resolver: Resolver,
    lazy: Arc<LazyListing>,
    layers: Vec<Box<dyn Layer>>,
    router: layers::Router,
    figures: Arc<Figures>,
}

impl CallStack {
    /// The stack of `parts`, outermost layer first (see the module docs).
    pub fn new(parts: StackParts) -> Arc<Self> {
        let StackParts {
            proxy,
            builtins,
            resolver,
            seam,
            pipeline,
            speculation,
            answers,
            memories: extra,
            partition,
            rules,
        } = parts;
        let memories: Vec<Arc<dyn Memory>> = pipeline
            .iter()
            .map(|p| p.clone() as Arc<dyn Memory>)
            .chain(speculation.iter().map(|e| e.clone() as Arc<dyn Memory>))
            .chain(extra)
            .collect();
        let answers: Arc<dyn AnswerStore> = match (answers, &speculation) {
            (Some(store), _) => store,
            (None, Some(engine)) => engine.clone(),
            (None, None) => Arc::new(crate::answers::NoAnswers),
        };
        let outside = Arc::new(layers::Outside::new(
            partition.clone(),
            memories.clone(),
            pipeline.clone(),
        ));
        let lazy = Arc::new(LazyListing::default());
        let figures = Arc::new(Figures::new(
            seam.clone(),
            outside.clone(),
            pipeline.clone(),
            speculation.clone(),
            lazy.clone(),
            Rules::new(rules, proxy.clone()),
        ));
        let mut stack: Vec<Box<dyn Layer>> = vec![
            Box::new(layers::Deliver::new(
                seam.clone(),
                speculation.clone(),
                pipeline.is_some(),
            )),
            Box::new(layers::CatchPanic),
            Box::new(layers::SyncOutside::new(outside)),
        ];
        if let Some(engine) = &speculation {
            stack.push(Box::new(layers::Speculate::new(engine.clone())));
        }
        stack.push(Box::new(layers::Forget::new(seam.clone(), memories)));
        stack.push(Box::new(layers::Store::new(answers)));
        let services = local::Services {
            proxy: proxy.clone(),
            pipeline,
            deadline: seam.deadline(),
            seam,
            lazy: lazy.clone(),
            figures: figures.clone(),
        };
        Arc::new_cyclic(|this: &Weak<CallStack>| Self {
            router: layers::Router::new(builtins, proxy.clone(), services, this.clone()),
            proxy,
            resolver,
            lazy,
            layers: stack,
            figures,
        })
    }

    /// Answers `call` through the layers.
    pub async fn call(&self, call: PendingCall) -> Result<CallToolResult, McpError> {
        let route = self.route(&call.name).await?;
        if let ToolRoute::Upstream { .. } = route {
            // A tool the agent calls is one it uses: a lazy session lists it.
            self.lazy.reveal([call.name.as_str()]);
        }
        self.answer(&call, &route).await
    }

    /// [`call`](Self::call) for upstream tools only (what a built-in may
    /// call: no built-in calls another).
    pub async fn call_upstream_tool(&self, call: PendingCall) -> Result<CallToolResult, McpError> {
        let route = self.route(&call.name).await?;
        if let ToolRoute::Builtin { .. } = route {
            return Err(McpError::invalid_params(
                format!(
                    "`{}` is a devboy tool; a built-in calls upstream tools only",
                    call.name
                ),
                None,
            ));
        }
        self.answer(&call, &route).await
    }

    /// A call a code-mode script makes (`devboy_run`): routed, resolved
    /// and answered through the same layers as the agent's own, built-ins
    /// included, except that its answer goes back to the script as it
    /// came, past the seam. Refused before any layer or upstream sees it
    /// when its class may write and `may_write` (the `[code] allow`
    /// globs, by exposed name) does not allow it.
    pub(crate) async fn call_from_script(
        &self,
        call: PendingCall,
        may_write: impl Fn(&str) -> bool,
    ) -> Result<ScriptAnswer, McpError> {
        let route = self.route(&call.name).await?;
        let class = self
            .resolver
            .resolve(&call.name, call.arguments.clone(), &route)
            .side_effect
            .class;
        if class.may_mutate() && !may_write(&call.name) {
            return Ok(ScriptAnswer::MayWrite(class));
        }
        self.answer(&call, &route).await.map(ScriptAnswer::Answered)
    }

    /// The effective side-effect class of a call of `name` without
    /// arguments, when the catalog routes it now (what a listing of the
    /// tools a script may call goes by).
    pub(crate) fn class_of(
        &self,
        name: &str,
    ) -> Option<devboy_core::pipeline_config::SideEffectClass> {
        let catalog = self.proxy.catalog();
        let route = catalog.tool_route(name)?;
        Some(self.resolver.resolve(name, None, route).side_effect.class)
    }

    async fn answer(
        &self,
        pending: &PendingCall,
        route: &ToolRoute,
    ) -> Result<CallToolResult, McpError> {
        let resolved = self
            .resolver
            .resolve(&pending.name, pending.arguments.clone(), route)
            .shown_to(pending.forwards_structured, pending.client.clone());
        let cx = Cx {
            pending,
            route,
            call: Arc::new(resolved),
        };
        let answered = Next::new(&self.layers, &self.router).run(&cx).await?;
        Ok(answered.result)
    }

    /// Where `name` goes. The agent may call before the first listing has
    /// settled, or call a tool of a server still on its first start: both
    /// are waited for before the name is called unknown.
    async fn route(&self, name: &str) -> Result<ToolRoute, McpError> {
        if let Some(route) = self.proxy.catalog().tool_route(name) {
            return Ok(route.clone());
        }
        self.proxy.settle().await;
        self.proxy.wait_first_start(name).await;
        match self.proxy.catalog().tool_route(name) {
            Some(route) => Ok(route.clone()),
            None => Err(explain_unknown_tool(&self.proxy, name)),
        }
    }

    /// The proxy the stack calls through.
    pub fn proxy(&self) -> &Arc<Proxy> {
        &self.proxy
    }

    /// What the session did, for status.
    pub fn figures(&self) -> &Arc<Figures> {
        &self.figures
    }

    /// The session's lazy listing.
    pub(crate) fn lazy(&self) -> &Arc<LazyListing> {
        &self.lazy
    }
}
