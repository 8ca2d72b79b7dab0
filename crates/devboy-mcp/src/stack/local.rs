//! What a built-in tool is to the call stack: the [`BuiltinTool`] trait,
//! the [`BuiltinRegistry`] the router answers from, and the
//! [`BuiltinContext`] a call gets: its arguments, progress and
//! cancellation, and the capabilities a built-in may use (call an
//! upstream tool through the stack, the pipeline's memory, the session's
//! figures, the catalog and the servers, the lazy listing, the session's
//! events) — never the session itself. The shipped tools live in
//! [`crate::builtin`].

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use rmcp::ErrorData as McpError;
use tokio_util::sync::CancellationToken;

use super::{CallStack, Figures, PendingCall};
use crate::catalog::{always_loaded, BuiltinListing};
use crate::lazy::LazyListing;
use crate::partition::PartitionWatcher;
use crate::processor::PipelineProcessor;
use crate::proxy::Proxy;
use crate::seam::{Delivery, Seam, SessionEvent};
use crate::upstream::ProgressTarget;

pub(crate) use super::arguments::refusal;

/// A tool devboy serves itself.
pub trait BuiltinTool: Send + Sync + 'static {
    /// The tool as listed to the agent.
    fn definition(&self) -> Tool;

    /// What the response seam does with this tool's results (by default,
    /// the same as with an upstream's).
    fn delivery(&self) -> Delivery {
        Delivery::Processed
    }

    /// Whether the tool is listed only to a lazy session (`[tools] lazy`).
    fn lazy_only(&self) -> bool {
        false
    }

    /// Answers one call. Errors are protocol errors; a failure the agent
    /// should read is an `isError` result.
    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>>;
}

/// What every built-in call of one session may use.
pub(crate) struct Services {
    pub(crate) proxy: Arc<Proxy>,
    pub(crate) pipeline: Option<Arc<PipelineProcessor>>,
    pub(crate) deadline: Duration,
    pub(crate) seam: Seam,
    pub(crate) lazy: Arc<LazyListing>,
    pub(crate) figures: Arc<Figures>,
}

/// What a built-in's call can see and use.
pub struct BuiltinContext<'a> {
    /// The call's arguments.
    pub arguments: Option<&'a JsonObject>,
    /// Where progress notifications for this request go, if the agent
    /// asked for them.
    pub progress: Option<&'a ProgressTarget>,
    /// Cancelled when the agent cancels the request.
    pub ct: &'a CancellationToken,
    call: &'a PendingCall,
    services: &'a Services,
    stack: &'a CallStack,
}

impl<'a> BuiltinContext<'a> {
    pub(crate) fn new(call: &'a PendingCall, services: &'a Services, stack: &'a CallStack) -> Self {
        Self {
            arguments: call.arguments.as_ref(),
            progress: call.progress.as_ref(),
            ct: &call.ct,
            call,
            services,
            stack,
        }
    }

    /// The client's connection (for requests to it, such as sampling), when
    /// the call came from one.
    pub fn client(&self) -> Option<&rmcp::Peer<rmcp::RoleServer>> {
        self.call.peer.as_ref()
    }

    /// The client's name from `initialize`, if it gave one.
    pub fn client_name(&self) -> Option<&str> {
        self.call.client.as_deref()
    }

    /// Whether a code-mode script makes this call: its result goes back to
    /// the script, not to the model (a built-in then records nothing as
    /// delivered and changes no listing).
    pub fn by_script(&self) -> bool {
        self.call.by_script
    }

    /// Whether the client shows the model `structuredContent` instead of
    /// the text blocks when a result has it.
    pub fn forwards_structured(&self) -> bool {
        self.call.forwards_structured
    }

    /// The string argument `name`, if given as a string.
    pub fn str_argument(&self, name: &str) -> Option<&str> {
        self.arguments?.get(name)?.as_str()
    }

    /// Calls the upstream tool exposed as `name` through the session's call
    /// stack: resolved, what it may change forgotten, the answer store, the
    /// upstream and the response seam, with this request's progress target
    /// and cancellation. Built-in tools cannot be called this way.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResult, McpError> {
        let call = self.call.nested(name, arguments);
        self.stack.call_upstream_tool(call).await
    }

    /// Calls the tool exposed as `name` for a code-mode script (see
    /// [`CallStack::call_from_script`]): a built-in or an upstream tool,
    /// answered to the script and not to the model.
    pub(crate) async fn call_from_script(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        may_write: impl Fn(&str) -> bool,
        ct: CancellationToken,
    ) -> Result<super::ScriptAnswer, McpError> {
        let call = self.call.nested_for_script(name, arguments, ct);
        self.stack.call_from_script(call, may_write).await
    }

    /// The effective side-effect class of a call of `name` (see
    /// [`CallStack::class_of`]).
    pub(crate) fn class_of(
        &self,
        name: &str,
    ) -> Option<devboy_core::pipeline_config::SideEffectClass> {
        self.stack.class_of(name)
    }

    /// The upstreams, the catalog and the config devboy runs.
    pub fn proxy(&self) -> &Arc<Proxy> {
        &self.services.proxy
    }

    /// The session's pipeline (its memory, ids and report), when one runs.
    pub fn pipeline(&self) -> Option<&Arc<PipelineProcessor>> {
        self.services.pipeline.as_ref()
    }

    /// How long the transform may work on one result.
    pub fn deadline(&self) -> Duration {
        self.services.deadline
    }

    /// What the session did, for status.
    pub fn figures(&self) -> &Arc<Figures> {
        &self.services.figures
    }

    /// The session's context partition.
    pub fn partition(&self) -> &PartitionWatcher {
        self.services.figures.partition()
    }

    /// Adds upstream tools (exposed names) to a lazy session's list.
    pub fn reveal_tools<'n>(&self, names: impl IntoIterator<Item = &'n str>) {
        self.services.lazy.reveal(names);
    }

    /// Tells the session's events (telemetry, the capture).
    pub fn record(&self, event: SessionEvent<'_>) {
        self.services.seam.record(event);
    }
}

/// The built-in tools one session serves, in listing order.
#[derive(Clone, Default)]
pub struct BuiltinRegistry {
    tools: Vec<Arc<dyn BuiltinTool>>,
    /// Their exposed names, in the same order.
    names: Vec<String>,
    /// Those listed with `_meta["anthropic/alwaysLoad"]`, besides the
    /// ones devboy's hints name ([`HINTED`]).
    always_load: Vec<String>,
}

/// The built-ins devboy's own results tell the model to call: a client
/// with a tool search always loads them, so that a hint is one step.
pub(crate) const HINTED: [&str; 2] = ["devboy_expand", "devboy_run"];

impl BuiltinRegistry {
    /// No built-in tools.
    pub fn empty() -> Self {
        Self::default()
    }

    /// This registry with `tool` listed after the others.
    pub fn with(mut self, tool: impl BuiltinTool) -> Self {
        self.names.push(tool.definition().name.into_owned());
        self.tools.push(Arc::new(tool));
        self
    }

    /// Only the tools named in `enabled` (exposed names), when given
    /// (`[builtins] enabled` in devboy.toml), and those listed only to a
    /// lazy session, which cannot find its tools without them.
    pub fn only(mut self, enabled: Option<&[String]>) -> Self {
        if let Some(enabled) = enabled {
            let (tools, names) = self
                .tools
                .into_iter()
                .zip(self.names)
                .filter(|(t, name)| t.lazy_only() || enabled.contains(name))
                .unzip();
            self.tools = tools;
            self.names = names;
        }
        self
    }

    /// This registry without the tool exposed as `name`.
    pub fn without(mut self, name: &str) -> Self {
        if let Some(index) = self.names.iter().position(|n| n == name) {
            self.names.remove(index);
            self.tools.remove(index);
        }
        self
    }

    /// This registry listing the tools exposed as `names` to be loaded up
    /// front (`[builtins] always_load`), besides [`HINTED`].
    pub fn loading_always(mut self, names: &[String]) -> Self {
        self.always_load = names.to_vec();
        self
    }

    /// The tools in listing order.
    pub fn tools(&self) -> &[Arc<dyn BuiltinTool>] {
        &self.tools
    }

    /// The tool exposed as `name`.
    pub fn named(&self, name: &str) -> Option<&Arc<dyn BuiltinTool>> {
        let index = self.names.iter().position(|n| n == name)?;
        self.tools.get(index)
    }

    /// The tools as the catalog lists them.
    pub fn listing(&self) -> Vec<BuiltinListing> {
        self.tools
            .iter()
            .zip(&self.names)
            .map(|(t, name)| {
                let tool = t.definition();
                let tool = if HINTED.contains(&name.as_str()) || self.always_load.contains(name) {
                    always_loaded(tool)
                } else {
                    tool
                };
                BuiltinListing {
                    tool,
                    lazy_only: t.lazy_only(),
                }
            })
            .collect()
    }
}

impl std::fmt::Debug for BuiltinRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.names).finish()
    }
}
