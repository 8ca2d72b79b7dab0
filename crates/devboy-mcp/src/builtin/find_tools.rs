//! `devboy_find_tools`: the search a lazy session (`[tools] lazy`) finds
//! the upstream tools it was not listed with. Each tool found comes back
//! with its description and input schema, so the model can call it at
//! once, and joins the session's tool list (`tools/list_changed`).

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::ErrorData as McpError;
use serde_json::json;

use super::{annotations, definition, BuiltinContext, BuiltinTool};
use crate::seam::Delivery;

/// Tools returned when the call does not say.
const DEFAULT_LIMIT: usize = 5;
/// The most tools one call returns.
const MAX_LIMIT: u64 = 30;
/// Up to this many tools, a search that finds nothing names them all.
const NAMES_LISTED: usize = 200;

/// The `devboy_find_tools` tool.
pub(super) struct FindTools;

impl BuiltinTool for FindTools {
    fn definition(&self) -> Tool {
        definition(
            "devboy_find_tools",
            "Find tools of devboy's MCP servers by what they do; found tools join your tool list. Any tool can be called by its full name.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, or tool names"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Most tools returned (default 5)"}
                },
                "required": ["query"]
            }),
        )
        .with_annotations(annotations("Find more tools", true))
    }

    /// Listed only to a lazy session: with every tool listed, the model
    /// has nothing to find.
    fn lazy_only(&self) -> bool {
        true
    }

    /// Schemas are JSON the model copies from: passed as they are.
    fn delivery(&self) -> Delivery {
        Delivery::Volatile
    }

    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        Box::pin(async move {
            let query = context.str_argument("query").unwrap_or_default().trim();
            let limit = context
                .arguments
                .and_then(|a| a.get("limit"))
                .and_then(serde_json::Value::as_u64)
                // Within the schema's bounds: the call path checked it.
                .map_or(DEFAULT_LIMIT, |n| n as usize);
            let proxy = context.proxy();
            proxy.settle().await;
            let catalog = proxy.catalog();
            let index = catalog.index();
            let found = index.search(query, limit);
            if found.is_empty() {
                return Ok(CallToolResult::success(vec![ContentBlock::text(
                    nothing_found(query, &catalog),
                )]));
            }
            context.reveal_tools(found.iter().copied());
            let mut text = format!(
                "{} of {} tools for \"{query}\", now in your tool list:\n",
                found.len(),
                index.len()
            );
            for name in &found {
                let Some(tool) = catalog.tools.iter().find(|t| t.name == *name) else {
                    continue;
                };
                let schema = serde_json::Value::Object((*tool.input_schema).clone());
                text.push_str(&format!(
                    "\n{name}\n{}\ninput: {schema}\n",
                    tool.description.as_deref().unwrap_or_default()
                ));
            }
            Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
        })
    }
}

/// What a search that matched nothing says: every tool's name, when
/// there are not too many, so the next call can name one.
fn nothing_found(query: &str, catalog: &crate::catalog::Catalog) -> String {
    let names: Vec<&str> = catalog
        .tools
        .iter()
        .map(|t| t.name.as_ref())
        .filter(|n| catalog.is_upstream_tool(n))
        .collect();
    if names.is_empty() {
        return "No MCP server of devboy offers a tool yet (see devboy_status).".to_owned();
    }
    if names.len() > NAMES_LISTED {
        return format!(
            "No tool matches \"{query}\" among {} tools; try other words.",
            names.len()
        );
    }
    format!(
        "No tool matches \"{query}\"; the {} tools are: {}",
        names.len(),
        names.join(", ")
    )
}
