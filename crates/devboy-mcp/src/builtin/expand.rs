//! `devboy_expand`: the whole result behind an id devboy printed
//! (`kafrum12`), as a full delivery of it reads, or the server's exact
//! text.

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
            "The whole tool result behind the id in a devboy hint (e.g. kafrum12), as a full result reads: a file's text as it is, safe to copy into an edit.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The hint's id"},
                    "raw": {"type": "boolean", "description": "The server's exact text instead (JSON-escaped for a file read)"}
                },
                "required": ["id"]
            }),
        )
        .with_annotations(annotations("Expand a result", true))
    }

    /// The text is already what the agent asked for: nothing rewrites it.
    fn delivery(&self) -> Delivery {
        Delivery::Exact
    }

    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        let id = context.str_argument("id").unwrap_or_default().to_owned();
        let raw = context
            .arguments
            .and_then(|a| a.get("raw"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        let pipeline = context.session.pipeline_memory().cloned();
        let deadline = context.session.deadline();
        Box::pin(async move {
            let Some(processor) = pipeline else {
                return Ok(CallToolResult::error(vec![ContentBlock::text(
                    "devboy: this session's pipeline emits no ids",
                )]));
            };
            // The readable form re-encodes the whole result: off the async
            // workers and within the pipeline's deadline, else the raw text.
            let readable = {
                let (processor, id) = (processor.clone(), id.clone());
                tokio::task::spawn_blocking(move || processor.expand(&id, raw))
            };
            let expanded = match tokio::time::timeout(deadline, readable).await {
                Ok(Ok(expanded)) => expanded,
                _ => processor.expand(&id, true),
            };
            Ok(match expanded {
                Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
                Err(message) => {
                    CallToolResult::error(vec![ContentBlock::text(format!("devboy: {message}"))])
                }
            })
        })
    }
}
