//! One agent session: the MCP server the agent talks to.
//!
//! A [`Session`] answers `initialize` at once from devboy's own capabilities
//! (it never waits for upstreams), serves lists from the proxy's current
//! catalog, routes calls to upstreams or built-in tools, passes every
//! successful upstream result through the session's response processor, and
//! forwards `list_changed` when the catalog changes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use devboy_core::pipeline_config::{ClientProfile, SideEffectClass};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::builtin::BuiltinTool;
use crate::catalog::{Catalog, ToolRoute};
use crate::partition::PartitionWatcher;
use crate::proxy::Proxy;
use crate::seam::{apply, before_call, ResponseProcessor, SeamStats, ToolCallInfo};
use crate::status;
use crate::upstream::{CallFailure, ProgressTarget};

/// Counters for one agent session.
#[derive(Debug, Default)]
pub struct SessionStats {
    /// Tool calls received (built-in and proxied).
    pub calls: AtomicU64,
    /// What the response seam did.
    pub seam: SeamStats,
}

/// The MCP server side of one agent connection.
#[derive(Clone)]
pub struct Session {
    proxy: Arc<Proxy>,
    processor: Arc<dyn ResponseProcessor>,
    stats: Arc<SessionStats>,
    partition: PartitionWatcher,
    /// The partition the processor was last told about.
    processor_partition: Arc<AtomicU64>,
    /// The model the processor was last told about.
    processor_model: Arc<std::sync::Mutex<Option<String>>>,
    notifier_started: Arc<AtomicBool>,
    client: ClientProfile,
}

impl Session {
    /// A session over `proxy` whose results pass through `processor`. Its
    /// context partition advances only through `devboy_compact` until
    /// [`with_partition`](Self::with_partition) says otherwise.
    pub fn new(proxy: Arc<Proxy>, processor: Arc<dyn ResponseProcessor>) -> Self {
        Self {
            proxy,
            processor,
            stats: Arc::default(),
            partition: PartitionWatcher::manual(),
            processor_partition: Arc::default(),
            processor_model: Arc::default(),
            notifier_started: Arc::default(),
            client: ClientProfile::Auto,
        }
    }

    /// This session with `client` deciding what the client shows the model
    /// (default: by the client's name).
    pub fn with_client(mut self, client: ClientProfile) -> Self {
        self.client = client;
        self
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

    /// This session's counters.
    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    /// The processor's name, for status.
    pub fn pipeline(&self) -> &'static str {
        self.processor.name()
    }

    /// The processor's own report, for status.
    pub fn pipeline_report(&self) -> Option<serde_json::Value> {
        self.sync_partition();
        self.sync_model();
        self.processor.report()
    }

    /// Tells the processor the model the hooks reported, when it changed.
    fn sync_model(&self) {
        let model = self.partition.model();
        let mut told = crate::upstream::lock(&self.processor_model);
        if *told != model {
            told.clone_from(&model);
            drop(told);
            self.processor.set_model(model);
        }
    }

    /// Tells the processor about every compaction since it last heard.
    fn sync_partition(&self) {
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
                    self.processor.advance_partition();
                    return;
                }
                Err(now) => seen = now,
            }
        }
    }

    /// Whether this session's client shows the model `structuredContent`
    /// rather than the text blocks (Claude Code does; DESIGN §3).
    fn forwards_structured(&self, peer: &rmcp::Peer<RoleServer>) -> bool {
        let info = peer.peer_info();
        let name = info.as_ref().map(|i| i.client_info.name.as_str());
        self.client.forwards_structured(name)
    }

    async fn call_upstream(
        &self,
        index: usize,
        tool: &str,
        side_effect: SideEffectClass,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let Some(upstream) = self.proxy.upstreams().get(index) else {
            return Err(unknown_tool(&request.name));
        };
        let peer_info = context.peer.peer_info();
        let info = ToolCallInfo {
            upstream: &upstream.config().name,
            tool,
            exposed: &request.name,
            arguments: request.arguments.as_ref(),
            side_effect,
            forwards_structured: self.forwards_structured(&context.peer),
            client: peer_info.as_ref().map(|i| i.client_info.name.as_str()),
        };
        self.sync_partition();
        self.sync_model();
        before_call(self.processor.as_ref(), &self.stats.seam, &info);
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| ProgressTarget {
                peer: context.peer.clone(),
                token,
            });
        let mut meta = context.meta.clone();
        meta.0 .0.remove("progressToken");
        let outcome = upstream
            .call_tool(
                tool,
                request.arguments.clone(),
                meta,
                progress,
                context.ct.clone(),
            )
            .await;
        match outcome {
            Ok(result) => {
                self.sync_partition();
                Ok(apply(
                    self.processor.as_ref(),
                    &self.stats.seam,
                    &info,
                    result,
                ))
            }
            // The upstream's own JSON-RPC error passes through as it was.
            Err(CallFailure::Protocol(error)) => Err(error),
            Err(CallFailure::Cancelled) => Err(McpError::new(
                ErrorCode::INTERNAL_ERROR,
                "request cancelled",
                None,
            )),
            Err(failure) => {
                tracing::warn!(tool = %request.name, %failure, "tool call failed");
                let result =
                    CallToolResult::error(vec![ContentBlock::text(format!("devboy: {failure}"))]);
                // An error result: the seam passes it untouched and tells
                // the processor (telemetry counts it like an upstream error).
                Ok(apply(
                    self.processor.as_ref(),
                    &self.stats.seam,
                    &info,
                    result,
                ))
            }
        }
    }

    fn call_builtin(&self, tool: BuiltinTool, request: &CallToolRequestParams) -> CallToolResult {
        match tool {
            BuiltinTool::Expand => {
                let id = request
                    .arguments
                    .as_ref()
                    .and_then(|a| a.get("id"))
                    .and_then(|v| v.as_str())
                    .unwrap_or_default();
                match self.processor.expand(id) {
                    Some(Ok(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
                    Some(Err(message)) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "devboy: {message}"
                    ))]),
                    None => CallToolResult::error(vec![ContentBlock::text(
                        "devboy: this session's pipeline emits no ids",
                    )]),
                }
            }
            BuiltinTool::Status => {
                let report = status::report(&self.proxy, self, &self.partition);
                CallToolResult::success(vec![ContentBlock::text(report)])
            }
            BuiltinTool::Compact => {
                let partition = self.partition.advance();
                tracing::info!(partition, "devboy_compact: partition advanced");
                let report = serde_json::json!({ "context_partition": partition });
                CallToolResult::success(vec![ContentBlock::text(report.to_string())])
            }
        }
    }

    /// Sends `list_changed` notifications for as long as the agent listens.
    fn start_notifier(&self, peer: rmcp::Peer<RoleServer>) {
        if self.notifier_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut updates = self.proxy.subscribe();
        let mut last: Arc<Catalog> = updates.borrow_and_update().clone();
        tokio::spawn(async move {
            while updates.changed().await.is_ok() {
                let next = updates.borrow_and_update().clone();
                let sent = async {
                    if next.tools != last.tools {
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
            }
        });
    }
}

fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("unknown tool `{name}`"), None)
}

/// Why `name` is not a tool the agent can call, as precisely as devboy
/// knows: the tool's server is down (since when, and why), disabled or
/// still starting, the tool is filtered out by the config, or that server
/// has no such tool.
fn explain_unknown_tool(proxy: &Proxy, name: &str) -> McpError {
    let Some((prefix, tool)) = name.split_once("__") else {
        return unknown_tool(name);
    };
    let Some(upstream) = proxy
        .upstreams()
        .iter()
        .find(|u| u.config().prefix == prefix)
    else {
        return unknown_tool(name);
    };
    let config = upstream.config();
    let server = &config.name;
    let listed = upstream.catalog().tools.iter().any(|t| t.name == tool);
    let message = match upstream.phase() {
        _ if listed && !config.tools.permits(tool) => format!(
            "tool `{name}` is filtered out: `{tool}` of server `{server}` does not pass its allow/deny globs in devboy's config"
        ),
        crate::upstream::Phase::Disabled => {
            format!("tool `{name}`: its server `{server}` is disabled in devboy's config")
        }
        crate::upstream::Phase::Failed { error, .. } => {
            let down = upstream
                .down_for()
                .map(|d| format!(" for {} s", d.as_secs()))
                .unwrap_or_default();
            format!("tool `{name}`: its server `{server}` is down{down}: {error}")
        }
        crate::upstream::Phase::Starting => match upstream.down_for() {
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
        crate::upstream::Phase::Stopped => {
            format!("tool `{name}`: its server `{server}` has stopped")
        }
        crate::upstream::Phase::Ready => {
            format!("unknown tool `{name}`: server `{server}` has no tool `{tool}`")
        }
    };
    McpError::invalid_params(message, None)
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
        let strip_schemas =
            self.processor.rewrites_structured() && self.forwards_structured(&context.peer);
        self.start_notifier(context.peer);
        self.proxy.settle().await;
        let catalog = self.proxy.catalog();
        let mut tools = catalog.tools.clone();
        if strip_schemas {
            // Results may come back without structuredContent (rewritten as
            // the text the client would have shown), so no schema may bind them.
            for tool in &mut tools {
                tool.output_schema = None;
            }
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let catalog = self.proxy.catalog();
        let route = match catalog.tool_route(&request.name) {
            Some(route) => route.clone(),
            None => {
                // The agent may call before the first listing has settled,
                // or call a tool of a server still on its first start.
                self.proxy.settle().await;
                self.proxy.wait_first_start(&request.name).await;
                match self.proxy.catalog().tool_route(&request.name) {
                    Some(route) => route.clone(),
                    None => return Err(explain_unknown_tool(&self.proxy, &request.name)),
                }
            }
        };
        drop(catalog);
        let result = match route {
            ToolRoute::Builtin(tool) => self.call_builtin(tool, &request),
            ToolRoute::Upstream {
                upstream,
                tool,
                side_effect,
            } => {
                self.call_upstream(upstream, &tool, side_effect, request, context)
                    .await?
            }
        };
        Ok(result.into())
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
        let upstream = &self.proxy.upstreams()[index];
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
