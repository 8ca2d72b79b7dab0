//! `devboy_expand`: the exact text behind an id devboy printed
//! (`kafrum12`).

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::ErrorData as McpError;
use serde_json::json;

use super::{annotations, definition, BuiltinContext, BuiltinTool};
use crate::seam::Delivery;

/// The `devboy_expand` tool.
pub struct Expand;

impl BuiltinTool for Expand {
    fn definition(&self) -> Tool {
        definition(
            "devboy_expand",
            "Returns the exact original text of a tool result that devboy abbreviated, by the id in its hint (e.g. kafrum12).",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "The id from the hint, e.g. kafrum12"}},
                "required": ["id"]
            }),
        )
        .with_annotations(annotations("devboy expand", true))
    }

    /// The original bytes are the point: nothing may rewrite them.
    fn delivery(&self) -> Delivery {
        Delivery::Exact
    }

    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        let id = context.str_argument("id").unwrap_or_default();
        let result = match context.session.processor().expand(id) {
            Some(Ok(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Some(Err(message)) => {
                CallToolResult::error(vec![ContentBlock::text(format!("devboy: {message}"))])
            }
            None => CallToolResult::error(vec![ContentBlock::text(
                "devboy: this session's pipeline emits no ids",
            )]),
        };
        Box::pin(async move { Ok(result) })
    }
}
