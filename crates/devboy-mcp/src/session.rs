//! One agent session: the MCP server the agent talks to.
//!
//! A [`Session`] answers `initialize` at once from devboy's own capabilities
//! (it never waits for upstreams), serves lists from the proxy's current
//! catalog, answers tool calls through the call path ([`crate::call`]:
//! built-in tools, the answer store, the upstreams, the response seam), and
//! forwards `list_changed` when the catalog changes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use devboy_core::pipeline_config::ClientProfile;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::answers::{AnswerStore, NoAnswers};
use crate::call::PendingCall;
use crate::catalog::Catalog;
use crate::lazy::LazyListing;
use crate::partition::PartitionWatcher;
use crate::processor::PipelineProcessor;
use crate::proxy::Proxy;
use crate::resolve::Resolver;
use crate::seam::{EventSink, NoEvents, Seam, SessionEvent, Transform};
use crate::speculation::{PrefetchPlanner, SpeculationEngine};
use crate::upstream::{CallFailure, Phase, Upstream};

/// Counters for one agent session.
#[derive(Debug, Default)]
pub struct SessionCounters {
    /// Tool calls received (built-in and proxied).
    pub calls: AtomicU64,
}

/// How often a session's `list_changed` notifier checks that its client
/// is still connected.
const NOTIFIER_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// The MCP server side of one agent connection.
#[derive(Clone)]
pub struct Session {
    proxy: Arc<Proxy>,
    /// The transform results pass through and where events go.
    seam: Seam,
    /// The pipeline's memory (dedup, ids), when a pipeline runs.
    pipeline: Option<Arc<PipelineProcessor>>,
    /// Decides calls' facts (the classes, with the planner's shipped ones).
    resolver: Arc<Resolver>,
    counters: Arc<SessionCounters>,
    answers: Arc<dyn AnswerStore>,
    /// The prefetch engine, when the session speculates.
    speculation: Option<Arc<SpeculationEngine>>,
    partition: PartitionWatcher,
    /// The partition the processor was last told about.
    processor_partition: Arc<AtomicU64>,
    /// The model the processor was last told about.
    processor_model: Arc<std::sync::Mutex<Option<String>>>,
    notifier_started: Arc<AtomicBool>,
    client: ClientProfile,
    /// The pipeline config's glob tables, checked against the catalog.
    rules: Option<Arc<devboy_core::pipeline_config::PipelineConfig>>,
    /// The tables already warned about.
    rules_warned: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    /// `[tools] lazy`: whether this session is listed only some tools,
    /// and which.
    lazy: Arc<LazyListing>,
    /// Ends the session when its last handle goes
    /// ([`end_when_dropped`](Self::end_when_dropped)).
    ending: Option<Arc<EndOnDrop>>,
}

/// Ends a session whose transport ends without devboy ending (an HTTP
/// session the client deleted, or that idled out): speculation in flight
/// is cancelled and awaited, then the session's events are told it ended
/// (its telemetry summary is written).
struct EndOnDrop {
    seam: Seam,
    speculation: Option<Arc<SpeculationEngine>>,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        let seam = self.seam.clone();
        let speculation = self.speculation.take();
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

impl Session {
    /// A session over `proxy` whose results pass through `transform`, and
    /// whose events go nowhere until [`with_events`](Self::with_events)
    /// says where. Its context partition advances only through
    /// `devboy_compact` until [`with_partition`](Self::with_partition)
    /// says otherwise.
    pub fn new(proxy: Arc<Proxy>, transform: Arc<dyn Transform>) -> Self {
        let classes = Arc::new(devboy_core::pipeline_config::PipelineConfig::embedded_default());
        Self {
            proxy,
            seam: Seam::new(transform, Arc::new(NoEvents)),
            pipeline: None,
            resolver: Arc::new(Resolver::new(classes, None)),
            counters: Arc::default(),
            answers: Arc::new(NoAnswers),
            speculation: None,
            partition: PartitionWatcher::manual(),
            processor_partition: Arc::default(),
            processor_model: Arc::default(),
            notifier_started: Arc::default(),
            client: ClientProfile::Auto,
            rules: None,
            rules_warned: Arc::default(),
            lazy: Arc::default(),
            ending: None,
        }
    }

    /// This session, ended when its last handle is dropped: for transports
    /// that end sessions on their own (HTTP). Call it last, once the
    /// session's seam and speculation are set.
    pub fn end_when_dropped(mut self) -> Self {
        self.ending = Some(Arc::new(EndOnDrop {
            seam: self.seam.clone(),
            speculation: self.speculation.clone(),
        }));
        self
    }

    /// A session over `proxy` running `pipeline`: its transform, its
    /// events and its memory.
    pub fn pipelined(proxy: Arc<Proxy>, pipeline: Arc<PipelineProcessor>) -> Self {
        Self::new(proxy, pipeline.clone())
            .with_events(pipeline.clone())
            .with_memory(pipeline)
    }

    /// This session telling `events` what happens (telemetry, the capture).
    pub fn with_events(mut self, events: Arc<dyn EventSink>) -> Self {
        self.seam = Seam::new(self.seam_transform(), events).with_deadline(self.seam.deadline());
        self
    }

    /// This session asking `pipeline` to forget, expand and report (its
    /// transform and events stay as they are).
    pub fn with_memory(mut self, pipeline: Arc<PipelineProcessor>) -> Self {
        self.pipeline = Some(pipeline);
        self
    }

    /// This session deciding calls' side-effect classes with `config`'s
    /// `[tools."GLOB"]` tables (default: the embedded config's). Before
    /// [`with_speculation`](Self::with_speculation), which shares them.
    pub fn with_classes(
        mut self,
        config: Arc<devboy_core::pipeline_config::PipelineConfig>,
    ) -> Self {
        debug_assert!(self.speculation.is_none(), "classes set after speculation");
        self.resolver = Arc::new(Resolver::new(config, None));
        self
    }

    /// What decides this session's calls' facts.
    pub(crate) fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// This session with `client` deciding what the client shows the model
    /// (default: by the client's name).
    pub fn with_client(mut self, client: ClientProfile) -> Self {
        self.client = client;
        self
    }

    /// This session checking `config`'s `[endpoints."GLOB"]` and
    /// `[tools."GLOB"]` tables against the tools it serves: status shows
    /// what each matches, and one that matches nothing once every upstream
    /// has started is warned about (once).
    pub fn with_rules(mut self, config: Arc<devboy_core::pipeline_config::PipelineConfig>) -> Self {
        self.seam = self.seam.clone().with_deadline(config.encoding.deadline);
        self.rules = Some(config);
        self
    }

    /// How long the transform may work on one result before it goes out
    /// as it came: the pipeline config's `encoding.deadline_ms`, else
    /// [`DEFAULT_DEADLINE`](crate::seam::DEFAULT_DEADLINE).
    pub fn deadline(&self) -> std::time::Duration {
        self.seam.deadline()
    }

    /// The session's seam: its transform, its events, its counts.
    pub fn seam(&self) -> &Seam {
        &self.seam
    }

    fn seam_transform(&self) -> Arc<dyn Transform> {
        self.seam.transform()
    }

    /// What each glob table of the pipeline config matches among the tools
    /// served now (empty without a pipeline config).
    pub fn rule_matches(&self) -> Vec<devboy_core::pipeline_config::RuleMatches> {
        let Some(rules) = &self.rules else {
            return Vec::new();
        };
        let catalog = self.proxy.catalog();
        let names: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_ref()).collect();
        rules.rule_matches(&names)
    }

    /// This session with `partition` as its context partition (typically a
    /// [`PartitionWatcher::for_project`] that the compaction hooks signal).
    pub fn with_partition(mut self, partition: PartitionWatcher) -> Self {
        self.partition = partition;
        self
    }

    /// This session's context partition.
    pub fn partition(&self) -> &PartitionWatcher {
        &self.partition
    }

    /// This session with `store` answering calls it holds fresh answers
    /// for before they reach the upstream (by default, none).
    pub fn with_answer_store(mut self, store: Arc<dyn AnswerStore>) -> Self {
        self.answers = store;
        self
    }

    /// This session speculating as `planner` says: after an upstream's
    /// answer the planned read-only follow-ups are prefetched, and the
    /// engine becomes the session's answer store (replacing any other).
    /// Without it nothing is prefetched.
    pub fn with_speculation(mut self, planner: Arc<dyn PrefetchPlanner>) -> Self {
        self.resolver = Arc::new(self.resolver.with_planner(planner.clone()));
        let engine = SpeculationEngine::new(
            planner,
            self.proxy.clone(),
            self.seam.clone(),
            self.resolver.clone(),
        );
        self.answers = engine.clone();
        self.speculation = Some(engine);
        self
    }

    /// The session's speculation engine, if it speculates.
    pub fn speculation(&self) -> Option<&Arc<SpeculationEngine>> {
        self.speculation.as_ref()
    }

    /// Ends the session's speculation: prefetches in flight are cancelled
    /// upstream and awaited, what was held is reported as ended. Call
    /// before [`SessionEvent::Ended`] and before the upstreams stop.
    pub async fn end_speculation(&self) {
        if let Some(engine) = &self.speculation {
            engine.end_session().await;
        }
    }

    /// This session's counters.
    pub fn counters(&self) -> &SessionCounters {
        &self.counters
    }

    /// The proxy this session serves from.
    pub fn proxy(&self) -> &Arc<Proxy> {
        &self.proxy
    }

    /// Records a `find_files` answer in telemetry: how it was answered and
    /// what it cost, as counts; `provider` is the configured model's API.
    pub fn record_retrieval(
        &self,
        found: &devboy_retrieval::FindResult,
        provider: Option<devboy_core::config::LlmProvider>,
        took: std::time::Duration,
    ) {
        let provider = provider.map(|p| std::borrow::Cow::Borrowed(p.name()));
        let cost = &found.llm;
        let record = devboy_telemetry::RetrievalRecord {
            strategy: std::borrow::Cow::Borrowed(found.strategy),
            fell_back: provider.is_some() && found.model.is_none(),
            provider,
            files: found.files.len() as u32,
            tree_nodes: found.tree_nodes as u64,
            calls: cost.calls,
            failed_calls: cost.failed_calls,
            retries: cost.retries,
            invalid_ids: cost.invalid_ids,
            input_tokens: cost.usage.input_tokens,
            cached_input_tokens: cost.usage.cached_input_tokens,
            cache_write_tokens: cost.usage.cache_write_tokens,
            output_tokens: cost.usage.output_tokens,
            ms: took.as_millis() as u64,
            ..Default::default()
        };
        self.seam.record(SessionEvent::Retrieval(record));
    }

    /// The session's pipeline, when one runs (passthrough: none).
    pub fn pipeline_memory(&self) -> Option<&Arc<PipelineProcessor>> {
        self.pipeline.as_ref()
    }

    pub(crate) fn answer_store(&self) -> &dyn AnswerStore {
        self.answers.as_ref()
    }

    /// The transform's name, for status.
    pub fn pipeline(&self) -> &'static str {
        self.seam.name()
    }

    /// The pipeline's own report, for status.
    pub fn pipeline_report(&self) -> Option<serde_json::Value> {
        self.sync_partition();
        self.sync_model();
        self.pipeline.as_ref().map(|p| p.report())
    }

    /// Tells the processor the model the hooks reported, when it changed.
    pub(crate) fn sync_model(&self) {
        let model = self.partition.model();
        let mut told = crate::upstream::lock(&self.processor_model);
        if *told != model {
            told.clone_from(&model);
            drop(told);
            if let Some(pipeline) = &self.pipeline {
                pipeline.set_model(model);
            }
        }
    }

    /// Tells the processor and the prefetch store about the files Claude
    /// Code's own tools wrote (the `PostToolUse` hook) since they last
    /// heard. Before every call, whatever answers it.
    pub(crate) fn sync_writes(&self) {
        let written = self.partition.take_written();
        if written.is_empty() {
            return;
        }
        if let Some(pipeline) = &self.pipeline {
            pipeline.forget_written(&written.paths, written.missed);
        }
        if let Some(engine) = &self.speculation {
            engine.forget_written(&written.paths, written.missed);
        }
    }

    /// Tells the processor about every compaction since it last heard.
    pub(crate) fn sync_partition(&self) {
        let current = self.partition.current();
        let mut seen = self.processor_partition.load(Ordering::SeqCst);
        while seen < current {
            match self.processor_partition.compare_exchange(
                seen,
                current,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    if let Some(pipeline) = &self.pipeline {
                        pipeline.advance_partition();
                    }
                    if let Some(engine) = &self.speculation {
                        engine.advance_partition();
                    }
                    return;
                }
                Err(now) => seen = now,
            }
        }
    }

    /// Whether results with `structuredContent` may come back without it
    /// (a pipeline runs), in which case the session stops declaring the
    /// tools' `outputSchema` to clients that forward structured content.
    pub(crate) fn rewrites_structured(&self) -> bool {
        self.pipeline
            .as_ref()
            .is_some_and(|p| p.rewrites_structured())
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
        let mut updates = self.proxy.subscribe();
        let mut grown = self.lazy.subscribe();
        let mut last: Arc<Catalog> = updates.borrow_and_update().clone();
        let mut listed = self.lazy.listing(&last);
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
                session.warn_unmatched_rules(&mut crate::upstream::lock(&session.rules_warned));
                let next = updates.borrow_and_update().clone();
                grown.borrow_and_update();
                let now_listed = session.lazy.listing(&next);
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

    /// What this session did, for `devboy status`: [`figures_with`]
    /// (Self::figures_with) the pipeline's figures (which may wait for a
    /// result being processed).
    pub fn figures(&self) -> serde_json::Value {
        self.figures_with(self.pipeline_report())
    }

    /// What this session did, as `devboy_status` and `devboy status` show
    /// it: calls, `savings` (the pipeline's figures, given), the seam's
    /// counts, the context partition, speculation and the lazy listing.
    pub fn figures_with(&self, savings: Option<serde_json::Value>) -> serde_json::Value {
        let seam = self.seam.stats();
        let partition = &self.partition;
        let (lazy, found) = self.lazy_listing();
        serde_json::json!({
            "calls": self.counters.calls.load(Ordering::Relaxed),
            "pipeline": self.pipeline(),
            "savings": savings,
            "processed": seam.processed.load(Ordering::Relaxed),
            "replaced": seam.replaced.load(Ordering::Relaxed),
            "pipeline_failures": seam.failures.load(Ordering::Relaxed),
            "passed_at_deadline": seam.deadline.load(Ordering::Relaxed),
            "context_partition": partition.current(),
            "compaction_signals": partition.signals(),
            "partition_file": partition.file().map(|f| f.display().to_string()),
            "speculation": self.speculation.as_ref().map_or_else(
                || serde_json::json!({"enabled": false}),
                |engine| engine.report_json()
            ),
            // `[tools] lazy`: listed only the tools it found or used.
            "lazy_tools": lazy,
            "tools_found": found,
        })
    }

    /// Adds upstream tools (exposed names) to a lazy session's list
    /// (`devboy_find_tools` found them, or the agent called them).
    pub fn reveal_tools<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        self.lazy.reveal(names);
    }

    /// Whether this session is listed only some tools (`[tools] lazy`),
    /// and how many upstream tools it has found or used.
    pub fn lazy_listing(&self) -> (bool, usize) {
        (self.lazy.is_active(), self.lazy.revealed())
    }
}

impl Session {
    /// Warns about each glob table that matches no tool, once every
    /// upstream has started (or failed) and only once per table.
    fn warn_unmatched_rules(&self, warned: &mut std::collections::HashSet<String>) {
        if self.rules.is_none() || !self.proxy.all_started() {
            return;
        }
        for rule in self.rule_matches() {
            if rule.matches.is_empty() && warned.insert(format!("{}.{}", rule.table, rule.pattern))
            {
                tracing::warn!(
                    "pipeline_config.toml: [{}.\"{}\"] matches no tool devboy serves; tool names are <prefix>__<tool>, see devboy_status",
                    rule.table,
                    rule.pattern
                );
            }
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
    let Some((prefix, tool)) = name.split_once("__") else {
        return unknown_tool(name);
    };
    let Some(upstream) = proxy
        .current_upstreams()
        .into_iter()
        .find(|u| u.config().prefix == prefix)
    else {
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
                crate::upstream::lock(&upstream.stats.last_error)
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

fn failure_to_error(failure: CallFailure) -> McpError {
    match failure {
        CallFailure::Protocol(error) => error,
        other => McpError::internal_error(other.to_string(), None),
    }
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                crate::SERVER_INFO_NAME,
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
        let strip_schemas = self.rewrites_structured() && self.forwards_structured(&context.peer);
        self.start_notifier(context.peer.clone());
        self.proxy.settle().await;
        let catalog = self.proxy.catalog();
        self.warn_unmatched_rules(&mut crate::upstream::lock(&self.rules_warned));
        let client = context.peer.peer_info();
        let client_name = client.as_ref().map(|i| i.client_info.name.as_str());
        self.lazy
            .decide(&self.proxy.tools_config(), client_name, &catalog);
        let mut tools = self.lazy.listing(&catalog);
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
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        let forwards_structured = self.forwards_structured(&context.peer);
        let call = PendingCall::from_request(request, &context, forwards_structured);
        self.call(call).await.map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.proxy.settle().await;
        Ok(ListResourcesResult::with_all_items(
            self.proxy.catalog().resources.clone(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.proxy.settle().await;
        Ok(ListResourceTemplatesResult::with_all_items(
            self.proxy.catalog().resource_templates.clone(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let route = match self.proxy.catalog().resource_route(&request.uri) {
            Some(index) => Some(index),
            None => {
                self.proxy.settle().await;
                self.proxy.catalog().resource_route(&request.uri)
            }
        };
        let Some(index) = route else {
            return Err(McpError::resource_not_found(
                format!("no upstream offers `{}`", request.uri),
                None,
            ));
        };
        let upstream = self.proxy.upstreams()[index].clone();
        upstream
            .read_resource(request)
            .await
            .map(Into::into)
            .map_err(failure_to_error)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.proxy.settle().await;
        Ok(ListPromptsResult::with_all_items(
            self.proxy.catalog().prompts.clone(),
        ))
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let route = match self.proxy.catalog().prompt_route(&request.name).cloned() {
            Some(route) => Some(route),
            None => {
                self.proxy.settle().await;
                self.proxy.catalog().prompt_route(&request.name).cloned()
            }
        };
        let Some((index, original)) = route else {
            return Err(McpError::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            ));
        };
        request.name = original;
        self.proxy.upstreams()[index]
            .get_prompt(request)
            .await
            .map(Into::into)
            .map_err(failure_to_error)
    }
}
