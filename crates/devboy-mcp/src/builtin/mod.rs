//! devboy's own tools, served next to the proxied ones.
//!
//! A built-in is a type implementing [`BuiltinTool`] in a file of its own
//! in this module, plus one line in [`BuiltinRegistry::shipped`]; the
//! catalog lists the registry's tools first, in registry order, and routes
//! calls to them by index. A built-in's call gets a [`BuiltinContext`]: the
//! session, the request's progress target and cancellation, and
//! [`BuiltinContext::call_tool`], which calls an upstream tool through the
//! same path an agent's call takes (answer store, upstream, response seam).
//!
//! A call's arguments are checked against the tool's declared input schema
//! before the tool runs (`arguments.rs`): a tool reads only arguments that
//! fit it, and a call that does not fit is an `isError` result naming the
//! argument.
//!
//! Built-in names use a single underscore (`devboy_status`); proxied names
//! always contain `__`, so the two can never collide.

mod arguments;
mod code;
mod compact;
mod expand;
mod explore;
mod find_files;
mod find_tools;
mod roots;
mod sampling;
mod servers;
mod status;

use std::sync::Arc;

pub(crate) use arguments::refusal;
pub(crate) use servers::control_of;
pub(crate) use status::upstreams_report;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use rmcp::ErrorData as McpError;
use tokio_util::sync::CancellationToken;

use crate::call::PendingCall;
use crate::seam::Delivery;
use crate::session::Session;
use crate::upstream::ProgressTarget;

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

/// What a built-in's call can see and use.
pub struct BuiltinContext<'a> {
    /// The session the call came in on.
    pub session: &'a Session,
    /// The call's arguments.
    pub arguments: Option<&'a JsonObject>,
    /// Where progress notifications for this request go, if the agent
    /// asked for them.
    pub progress: Option<&'a ProgressTarget>,
    /// Cancelled when the agent cancels the request.
    pub ct: &'a CancellationToken,
    pub(crate) call: &'a PendingCall,
}

impl BuiltinContext<'_> {
    /// The client's connection (for requests to it, such as sampling), when
    /// the call came from one.
    pub fn client(&self) -> Option<&rmcp::Peer<rmcp::RoleServer>> {
        self.call.peer.as_ref()
    }

    /// The client's name from `initialize`, if it gave one.
    pub fn client_name(&self) -> Option<&str> {
        self.call.client.as_deref()
    }

    /// The string argument `name`, if given as a string.
    pub fn str_argument(&self, name: &str) -> Option<&str> {
        self.arguments?.get(name)?.as_str()
    }

    /// Calls the upstream tool exposed as `name` through the session's call
    /// path: resolved, what it may change forgotten, the answer store, the
    /// upstream and the response seam, with this request's progress target and
    /// cancellation. Built-in tools cannot be called this way.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResult, McpError> {
        let call = self.call.nested(name, arguments);
        self.session.call_upstream_tool(call).await
    }
}

/// The built-in tools one proxy serves, in listing order.
#[derive(Clone)]
pub struct BuiltinRegistry {
    tools: Vec<Arc<dyn BuiltinTool>>,
}

impl BuiltinRegistry {
    /// The tools devboy ships: one line per tool.
    pub fn shipped() -> Self {
        Self::shipped_for(
            &devboy_core::pipeline_config::PipelineConfig::embedded_default(),
            None,
        )
    }

    /// The shipped tools, configured by the pipeline config (`[explore]`)
    /// and the model `find_files` navigates with (`[retrieval.llm]`).
    pub fn shipped_for(
        config: &devboy_core::pipeline_config::PipelineConfig,
        retrieval: Option<devboy_core::config::LlmConfig>,
    ) -> Self {
        Self::empty()
            .with(status::Status)
            .with(servers::Servers)
            .with(compact::Compact)
            .with(expand::Expand)
            .with(explore::Explore::new(&config.explore))
            .with(find_files::FindFiles::new(
                retrieval,
                roots::AllowedRoots::new(&config.explore.allowed_roots),
            ))
            .with(find_tools::FindTools)
    }

    /// Only the tools named in `enabled` (exposed names), when given
    /// (`[builtins] enabled` in devboy.toml), and those listed only to a
    /// lazy session, which cannot find its tools without them.
    pub fn only(mut self, enabled: Option<&[String]>) -> Self {
        if let Some(enabled) = enabled {
            self.tools
                .retain(|t| t.lazy_only() || enabled.iter().any(|n| *n == t.definition().name));
        }
        self
    }

    /// No built-in tools.
    pub fn empty() -> Self {
        Self { tools: Vec::new() }
    }

    /// This registry with `tool` listed after the others.
    pub fn with(mut self, tool: impl BuiltinTool) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// The tools in listing order.
    pub fn tools(&self) -> &[Arc<dyn BuiltinTool>] {
        &self.tools
    }

    /// The tool at `index` (as routed by the catalog).
    pub fn get(&self, index: usize) -> Option<&Arc<dyn BuiltinTool>> {
        self.tools.get(index)
    }
}

impl Default for BuiltinRegistry {
    fn default() -> Self {
        Self::shipped()
    }
}

impl std::fmt::Debug for BuiltinRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.definition().name))
            .finish()
    }
}

/// Built-in tools are all idempotent, non-destructive and closed-world;
/// they differ in title and in whether they only read. A title says what
/// the tool does, without "devboy": Claude Code shows it after the
/// server's name (`devboy - Expand a result (MCP)`).
fn annotations(title: &str, read_only: bool) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(read_only)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

/// A tool definition with an input schema given as JSON.
fn definition(name: &'static str, description: &'static str, schema: serde_json::Value) -> Tool {
    let schema = match schema {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    };
    Tool::new(name, description, schema)
}

#[cfg(test)]
mod titles {
    use super::*;

    /// What a person reads for each tool in the client (Claude Code:
    /// "devboy - TITLE (MCP)"): what it does, not its name again.
    #[test]
    fn each_builtin_has_its_title() {
        let titles: Vec<(String, String)> = BuiltinRegistry::shipped()
            .tools()
            .iter()
            .map(|tool| {
                let d = tool.definition();
                let title = d.annotations.and_then(|a| a.title).unwrap_or_default();
                (d.name.into_owned(), title)
            })
            .collect();
        let expected = [
            ("devboy_status", "Proxy status"),
            ("devboy_servers", "Manage the servers"),
            ("devboy_compact", "Mark the context compacted"),
            ("devboy_expand", "Expand a result"),
            ("devboy_explore", "Explore how code works"),
            ("devboy_find_files", "Find the relevant files"),
            ("devboy_find_tools", "Find more tools"),
        ]
        .map(|(name, title)| (name.to_owned(), title.to_owned()));
        assert_eq!(titles, expected);
    }
}

#[cfg(test)]
mod definition_size {
    use super::*;

    /// What a definition costs the model on every request, in o200k.
    fn cost(tool: &Tool) -> usize {
        crate::definition_tokens(
            std::slice::from_ref(tool),
            devboy_pipeline::Tokenizer::O200k,
        ) as usize
    }

    /// Each built-in pays for itself only if it is short: none over 120
    /// tokens (issue 26).
    #[test]
    fn no_builtin_definition_is_longer_than_120_tokens() {
        let registry = BuiltinRegistry::shipped();
        let mut listed = 0;
        let mut over = Vec::new();
        for tool in registry.tools() {
            let d = tool.definition();
            let n = cost(&d);
            let lazy = if tool.lazy_only() {
                "  (lazy sessions only)"
            } else {
                ""
            };
            println!("{:<20} {n:>4} tokens{lazy}", d.name);
            if !tool.lazy_only() {
                listed += n;
            }
            if n > 120 {
                over.push(format!("{} costs {n} tokens", d.name));
            }
        }
        println!("{:<20} {listed:>4} tokens", "listed to all");
        assert!(over.is_empty(), "{over:?}");
    }
}
