//! One agent session: the MCP server the agent talks to, and the one
//! place a session is put together ([`SessionBuilder`]).
//!
//! A [`Session`] answers `initialize` at once from devboy's own capabilities
//! (it never waits for upstreams), serves lists from the proxy's current
//! catalog, answers tool calls through its [`CallStack`], and forwards
//! `list_changed` when the catalog changes. What it holds is what only the
//! MCP edge has: the stack, the client profile, the notifier and the
//! ending of a session its transport ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use devboy_core::pipeline_config::{ClientProfile, PipelineConfig};
#[allow(deprecated)] // Logging and subscriptions: SEP-2577's legacy, still spoken.
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, Reference,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::answers::{AnswerStore, Memory};
use crate::catalog::Catalog;
use crate::partition::PartitionWatcher;
use crate::processor::PipelineProcessor;
use crate::proxy::Proxy;
use crate::resolve::Resolver;
use crate::seam::{EventSink, NoEvents, Seam, SessionEvent, Transform};
use crate::speculation::{PrefetchPlanner, SpeculationEngine};
use crate::stack::{BuiltinRegistry, CallStack, Figures, PendingCall, StackParts};
use crate::upstream::{next_agent_id, AgentId, CallFailure, Upstream};

/// How often a session's `list_changed` notifier checks that its client
/// is still connected.
const NOTIFIER_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// The MCP server side of one agent connection.
#[derive(Clone)]
pub struct Session {
    stack: Arc<CallStack>,
    /// Decides what the client shows the model.
    client: ClientProfile,
    notifier_started: Arc<AtomicBool>,
    /// Tells this session apart where upstreams keep what each agent
    /// asked of them (log levels, subscriptions).
    agent: AgentId,
    /// Ends the session when its last handle goes (an HTTP session).
    _ending: Option<Arc<EndOnDrop>>,
}

/// Ends a session whose transport ends without devboy ending (an HTTP
/// session the client deleted, or that idled out): speculation in flight
/// is cancelled and awaited, then the session's events are told it ended
/// (its telemetry summary is written).
struct EndOnDrop {
    figures: Arc<Figures>,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        let seam = self.figures.seam().clone();
        let speculation = self.figures.speculation().cloned();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            seam.record(SessionEvent::Ended);
            return;
        };
        runtime.spawn(async move {
            if let Some(engine) = speculation {
                engine.end_session().await;
            }
            let _ = tokio::task::spawn_blocking(move || seam.record(SessionEvent::Ended)).await;
        });
    }
}

/// How one session is put together: each part set by its own method, in
/// any order, except that [`pipeline`](Self::pipeline) sets the transform
/// and the events too (an [`events`](Self::events) after it replaces the
/// pipeline's events); [`build`](Self::build) composes them. An
/// [`answer_store`](Self::answer_store) answers instead of the
/// speculation engine, which then still prefetches.
#[must_use]
pub struct SessionBuilder {
    proxy: Arc<Proxy>,
    builtins: BuiltinRegistry,
    transform: Arc<dyn Transform>,
    events: Arc<dyn EventSink>,
    pipeline: Option<Arc<PipelineProcessor>>,
    classes: Arc<PipelineConfig>,
    rules: Option<Arc<PipelineConfig>>,
    planner: Option<Arc<dyn PrefetchPlanner>>,
    answers: Option<Arc<dyn AnswerStore>>,
    memories: Vec<Arc<dyn Memory>>,
    partition: PartitionWatcher,
    client: ClientProfile,
    end_when_dropped: bool,
}

impl SessionBuilder {
    /// A session over `proxy` serving `builtins` (the ones the proxy's
    /// catalog lists), whose results pass through `transform`. By
    /// default: events go nowhere, classes are the embedded config's, no
    /// speculation, no answer store, a context partition only
    /// `devboy_compact` advances, the client profile decided by name.
    pub fn new(
        proxy: Arc<Proxy>,
        builtins: BuiltinRegistry,
        transform: Arc<dyn Transform>,
    ) -> Self {
        Self {
            proxy,
            builtins,
            transform,
            events: Arc::new(NoEvents),
            pipeline: None,
            classes: Arc::new(PipelineConfig::embedded_default()),
            rules: None,
            planner: None,
            answers: None,
            memories: Vec::new(),
            partition: PartitionWatcher::manual(),
            client: ClientProfile::Auto,
            end_when_dropped: false,
        }
    }

    /// Runs `pipeline`: its transform, its events and its memory.
    pub fn pipeline(mut self, pipeline: Arc<PipelineProcessor>) -> Self {
        self.transform = pipeline.clone();
        self.events = pipeline.clone();
        self.pipeline = Some(pipeline);
        self
    }

    /// Tells `events` what happens (telemetry, the capture).
    pub fn events(mut self, events: Arc<dyn EventSink>) -> Self {
        self.events = events;
        self
    }

    /// Decides calls' side-effect classes with `config`'s
    /// `[tools."GLOB"]` tables.
    pub fn classes(mut self, config: Arc<PipelineConfig>) -> Self {
        self.classes = config;
        self
    }

    /// Checks `config`'s `[endpoints."GLOB"]` and `[tools."GLOB"]` tables
    /// against the tools served (status, and a warning for one that
    /// matches nothing), and gives the transform its `encoding.deadline_ms`.
    pub fn rules(mut self, config: Arc<PipelineConfig>) -> Self {
        self.rules = Some(config);
        self
    }

    /// Speculates as `planner` says: after an upstream's answer the
    /// planned read-only follow-ups are prefetched, and the engine answers
    /// calls first (unless [`answer_store`](Self::answer_store) names
    /// another store) and forgets with the pipeline.
    pub fn speculation(mut self, planner: Arc<dyn PrefetchPlanner>) -> Self {
        self.planner = Some(planner);
        self
    }

    /// Lets `store` answer calls it holds fresh answers for before they
    /// reach the upstream.
    pub fn answer_store(mut self, store: Arc<dyn AnswerStore>) -> Self {
        self.answers = Some(store);
        self
    }

    /// Tells `memory` what every memory is told (calls, written files,
    /// compactions), after the pipeline and the engine.
    pub fn memory(mut self, memory: Arc<dyn Memory>) -> Self {
        self.memories.push(memory);
        self
    }

    /// Uses `partition` as the context partition (typically a
    /// [`PartitionWatcher::for_project`] that the compaction hooks signal).
    pub fn partition(mut self, partition: PartitionWatcher) -> Self {
        self.partition = partition;
        self
    }

    /// Decides with `client` what the client shows the model.
    pub fn client(mut self, client: ClientProfile) -> Self {
        self.client = client;
        self
    }

    /// Ends the session when its last handle is dropped: for transports
    /// that end sessions on their own (HTTP).
    pub fn end_when_dropped(mut self) -> Self {
        self.end_when_dropped = true;
        self
    }

    /// The session.
    pub fn build(self) -> Session {
        let deadline = self
            .rules
            .as_ref()
            .map_or(crate::seam::DEFAULT_DEADLINE, |c| c.encoding.deadline);
        let seam = Seam::new(self.transform, self.events).with_deadline(deadline);
        let resolver = Resolver::new(self.classes);
        let speculation = self.planner.map(|planner| {
            SpeculationEngine::new(planner, self.proxy.clone(), seam.clone(), resolver.clone())
        });
        let stack = CallStack::new(StackParts {
            proxy: self.proxy,
            builtins: self.builtins,
            resolver,
            seam,
            pipeline: self.pipeline,
            speculation,
            answers: self.answers,
            memories: self.memories,
            partition: self.partition,
            rules: self.rules,
        });
        let ending = self.end_when_dropped.then(|| {
            Arc::new(EndOnDrop {
                figures: stack.figures().clone(),
            })
        });
        Session {
            stack,
            client: self.client,
            notifier_started: Arc::default(),
            agent: next_agent_id(),
            _ending: ending,
        }
    }
}

impl Session {
    /// [`SessionBuilder::new`].
    pub fn builder(
        proxy: Arc<Proxy>,
        builtins: BuiltinRegistry,
        transform: Arc<dyn Transform>,
    ) -> SessionBuilder {
        SessionBuilder::new(proxy, builtins, transform)
    }

    /// Answers `call` through the session's call stack.
    pub async fn call(&self, call: PendingCall) -> Result<CallToolResult, McpError> {
        self.stack.call(call).await
    }

    /// The session's call stack.
    pub fn stack(&self) -> &Arc<CallStack> {
        &self.stack
    }

    /// What this session did, for status.
    pub fn figures(&self) -> &Arc<Figures> {
        self.stack.figures()
    }

    /// The proxy this session serves from.
    pub fn proxy(&self) -> &Arc<Proxy> {
        self.stack.proxy()
    }

    /// The session's seam: its transform, its events, its counts.
    pub fn seam(&self) -> &Seam {
        self.figures().seam()
    }

    /// The session's speculation engine, if it speculates.
    pub fn speculation(&self) -> Option<&Arc<SpeculationEngine>> {
        self.figures().speculation()
    }

    /// The session's pipeline, when one runs (passthrough: none).
    pub fn pipeline_memory(&self) -> Option<&Arc<PipelineProcessor>> {
        self.figures().pipeline()
    }

    /// Ends the session's speculation: prefetches in flight are cancelled
    /// upstream and awaited, what was held is reported as ended. Call
    /// before [`SessionEvent::Ended`] and before the upstreams stop.
    pub async fn end_speculation(&self) {
        if let Some(engine) = self.speculation() {
            engine.end_session().await;
        }
    }

    /// Tells the session's events of the tool list just served, off the
    /// request path: counting the definitions may first load the
    /// tokenizer's vocabulary, which the answer must not wait for. The
    /// count runs at once on a blocking thread (so counts may finish out
    /// of order: the event says when the list was served); a list served
    /// in the very moment the session ends may miss its summary.
    fn record_listed(&self, tools: &[rmcp::model::Tool]) {
        let seam = self.seam().clone();
        let tools = tools.to_vec();
        let served = std::time::Instant::now();
        tokio::task::spawn_blocking(move || {
            seam.record(SessionEvent::ToolsListed {
                tools: &tools,
                served,
            });
        });
    }

    /// Whether this session's client shows the model `structuredContent`
    /// rather than the text blocks (Claude Code does).
    fn forwards_structured(&self, peer: &rmcp::Peer<RoleServer>) -> bool {
        let info = peer.peer_info();
        let name = info.as_ref().map(|i| i.client_info.name.as_str());
        self.client.forwards_structured(name)
    }

    /// Sends `list_changed` notifications for as long as the agent listens:
    /// when the catalog changes what the session is listed, and when a
    /// lazy session's list grows.
    fn start_notifier(&self, peer: rmcp::Peer<RoleServer>) {
        if self.notifier_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut updates = self.proxy().subscribe();
        let lazy = self.stack.lazy().clone();
        let mut grown = lazy.subscribe();
        let mut last: Arc<Catalog> = updates.borrow_and_update().clone();
        let mut listed = lazy.listing(&last);
        // Stops once the client's transport is closed, letting go of the
        // session (an HTTP session deleted or idled out then ends).
        let session = self.clone();
        tokio::spawn(async move {
            let mut gone = tokio::time::interval(NOTIFIER_POLL);
            loop {
                tokio::select! {
                    changed = updates.changed() => if changed.is_err() { return },
                    grew = grown.changed() => if grew.is_err() { return },
                    _ = gone.tick() => {
                        if peer.is_transport_closed() {
                            return;
                        }
                        continue;
                    }
                }
                session.figures().rules().warn_unmatched();
                let next = updates.borrow_and_update().clone();
                grown.borrow_and_update();
                let now_listed = lazy.listing(&next);
                let sent = async {
                    if now_listed != listed {
                        peer.notify_tool_list_changed().await?;
                    }
                    if next.resources != last.resources
                        || next.resource_templates != last.resource_templates
                    {
                        peer.notify_resource_list_changed().await?;
                    }
                    if next.prompts != last.prompts {
                        peer.notify_prompt_list_changed().await?;
                    }
                    Ok::<_, rmcp::service::ServiceError>(())
                }
                .await;
                if let Err(error) = sent {
                    tracing::debug!(%error, "agent gone; list_changed notifier stops");
                    return;
                }
                last = next;
                listed = now_listed;
            }
        });
    }
}

impl Session {
    /// The upstream that serves resource (or template) `uri`, waiting for
    /// upstreams still starting when no listed one does.
    async fn resource_upstream(&self, uri: &str) -> Result<Arc<Upstream>, McpError> {
        let route = match self.proxy().catalog().resource_route(uri) {
            Some(name) => Some(name.to_owned()),
            None => {
                self.proxy().settle().await;
                self.proxy()
                    .catalog()
                    .resource_route(uri)
                    .map(str::to_owned)
            }
        };
        route
            .and_then(|name| self.proxy().upstream(&name))
            .ok_or_else(|| {
                McpError::resource_not_found(format!("no upstream offers `{uri}`"), None)
            })
    }

    /// The upstream of prompt `name` and the prompt's name there.
    async fn prompt_route(&self, name: &str) -> Result<(Arc<Upstream>, String), McpError> {
        let route = match self.proxy().catalog().prompt_route(name).cloned() {
            Some(route) => Some(route),
            None => {
                self.proxy().settle().await;
                self.proxy().catalog().prompt_route(name).cloned()
            }
        };
        route
            .and_then(|(upstream, original)| Some((self.proxy().upstream(&upstream)?, original)))
            .ok_or_else(|| McpError::invalid_params(format!("unknown prompt `{name}`"), None))
    }
}

fn failure_to_error(failure: CallFailure) -> McpError {
    match failure {
        CallFailure::Protocol(error) => error,
        other => McpError::internal_error(other.to_string(), None),
    }
}

impl ServerHandler for Session {
    #[allow(deprecated)] // Logging: SEP-2577's legacy, still spoken.
    fn get_info(&self) -> ServerConfig {
        // Answered before any upstream is up, so what a proxy may carry:
        // a level or a subscription is kept and passed to the upstreams
        // that log or take subscriptions when they come up; completion
        // asks the server of the prompt or template.
        let mut capabilities = ServerCapabilities::builder()
            .enable_completions()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_prompts_list_changed()
            .build();
        capabilities
            .completions
            .get_or_insert_with(Default::default);
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                crate::upstream::SERVER_INFO_NAME,
                env!("CARGO_PKG_VERSION"),
            ))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        // Session lifecycle only: list_changed goes out as plain notifications.
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.start_notifier(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // Results may come back without structuredContent when a pipeline
        // runs (rewritten as the text the client would have shown).
        let strip_schemas =
            self.pipeline_memory().is_some() && self.forwards_structured(&context.peer);
        self.start_notifier(context.peer.clone());
        let proxy = self.proxy();
        proxy.settle().await;
        let catalog = proxy.catalog();
        self.figures().rules().warn_unmatched();
        let client = context.peer.peer_info();
        let client_name = client.as_ref().map(|i| i.client_info.name.as_str());
        let lazy = self.stack.lazy();
        lazy.decide(&proxy.tools_config(), client_name, &catalog);
        let mut tools = lazy.listing(&catalog);
        if strip_schemas {
            // Results may come back without structuredContent (rewritten as
            // the text the client would have shown), so no schema may bind them.
            for tool in &mut tools {
                tool.output_schema = None;
            }
        }
        self.record_listed(&tools);
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.figures().count_call();
        let forwards_structured = self.forwards_structured(&context.peer);
        let call = PendingCall::from_request(request, &context, forwards_structured);
        self.call(call).await.map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.proxy().settle().await;
        Ok(ListResourcesResult::with_all_items(
            self.proxy().catalog().resources.clone(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.proxy().settle().await;
        Ok(ListResourceTemplatesResult::with_all_items(
            self.proxy().catalog().resource_templates.clone(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let upstream = self.resource_upstream(&request.uri).await?;
        upstream
            .read_resource(request)
            .await
            .map(Into::into)
            .map_err(failure_to_error)
    }

    #[allow(deprecated)] // Logging is SEP-2577's legacy, still in use.
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let upstreams: Vec<Arc<Upstream>> = self
            .proxy()
            .current_upstreams()
            .into_iter()
            .filter(|u| u.is_enabled())
            .collect();
        let asked = upstreams
            .iter()
            .map(|upstream| upstream.set_level(self.agent, context.peer.clone(), request.level));
        for (upstream, outcome) in upstreams.iter().zip(futures::future::join_all(asked).await) {
            // One server refusing a level is no reason to refuse the agent.
            if let Err(failure) = outcome {
                tracing::debug!(upstream = %upstream.config().name, %failure, "logging/setLevel not passed on");
            }
        }
        Ok(())
    }

    #[allow(deprecated)] // resources/subscribe is what 2025-11-25 servers speak.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let upstream = self.resource_upstream(&request.uri).await?;
        upstream
            .subscribe(self.agent, context.peer.clone(), request.uri)
            .await
            .map_err(failure_to_error)
    }

    #[allow(deprecated)] // resources/unsubscribe, as 2025-11-25 servers speak it.
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let upstream = self.resource_upstream(&request.uri).await?;
        upstream
            .unsubscribe(self.agent, request.uri)
            .await
            .map_err(failure_to_error)
    }

    async fn complete(
        &self,
        mut request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let upstream = match &mut request.r#ref {
            Reference::Resource(template) => self.resource_upstream(&template.uri).await?,
            Reference::Prompt(prompt) => {
                let (upstream, original) = self.prompt_route(&prompt.name).await?;
                prompt.name = original;
                upstream
            }
            _ => {
                return Err(McpError::invalid_params(
                    "unknown completion reference",
                    None,
                ))
            }
        };
        upstream.complete(request).await.map_err(failure_to_error)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.proxy().settle().await;
        Ok(ListPromptsResult::with_all_items(
            self.proxy().catalog().prompts.clone(),
        ))
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let (upstream, original) = self.prompt_route(&request.name).await?;
        request.name = original;
        upstream
            .get_prompt(request)
            .await
            .map(Into::into)
            .map_err(failure_to_error)
    }
}
