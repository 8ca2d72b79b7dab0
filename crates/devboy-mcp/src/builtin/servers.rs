//! `devboy_servers`: devboy's upstream servers, and control over them at
//! runtime: restart one (a crashed or updated server), disable it (its
//! tools are withdrawn, `list_changed` says so) or enable it again.

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use rmcp::ErrorData as McpError;
use serde_json::json;

use super::status::upstreams_report;
use super::{definition, BuiltinContext, BuiltinTool};
use crate::seam::Delivery;
use crate::upstream::Control;

/// The `devboy_servers` tool.
pub(super) struct Servers;

impl BuiltinTool for Servers {
    fn definition(&self) -> Tool {
        definition(
            "devboy_servers",
            "devboy's MCP servers and their state; or restart, enable or disable one by name.",
            json!({
                "type": "object",
                "properties": {
                    "action": {"enum": ["list", "restart", "enable", "disable"], "description": "Default list"},
                    "server": {"type": "string", "description": "The server's name, for the other actions"}
                }
            }),
        )
        .with_annotations(
            ToolAnnotations::with_title("Manage the servers")
                .read_only(false)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        )
    }

    /// A state report that changes from call to call.
    fn delivery(&self) -> Delivery {
        Delivery::Volatile
    }

    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        Box::pin(async move {
            let action = context.str_argument("action").unwrap_or("list");
            let proxy = context.proxy();
            let text = match control_of(action) {
                Ok(None) => json!(upstreams_report(proxy)).to_string(),
                Ok(Some(control)) => {
                    let Some(server) = context.str_argument("server") else {
                        return Ok(error(format!("`{action}` needs `server`, a server's name")));
                    };
                    match proxy.control(server, control).await {
                        Ok(_) => json!(upstreams_report(proxy)
                            .into_iter()
                            .filter(|u| u["name"] == server || u["prefix"] == server)
                            .collect::<Vec<_>>())
                        .to_string(),
                        Err(message) => return Ok(error(message)),
                    }
                }
                Err(message) => return Ok(error(message)),
            };
            Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
        })
    }
}

/// The control an action names; `None` for `list`.
pub(crate) fn control_of(action: &str) -> Result<Option<Control>, String> {
    match action {
        "list" => Ok(None),
        "restart" => Ok(Some(Control::Restart)),
        "enable" => Ok(Some(Control::Enable)),
        "disable" => Ok(Some(Control::Disable)),
        other => Err(format!(
            "unknown action `{other}`: one of list, restart, enable, disable"
        )),
    }
}

fn error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("devboy: {message}"))])
}
