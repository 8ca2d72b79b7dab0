//! `devboy_expand`: the result behind an id devboy printed (`kafrum12`),
//! all of it or the lines or items a hint named, as a full delivery of it
//! reads, or as the server wrote it; never more than one delivery may
//! show, the rest named by the call that gives it. What it sends is
//! counted as received (`PipelineProcessor::record_expansion`): again what
//! the model was shown is a cost against the savings, parts of an elided
//! result it never saw are new.

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::ErrorData as McpError;
use serde_json::json;

use super::{annotations, definition, BuiltinContext, BuiltinTool};
use crate::seam::Delivery;
use devboy_pipeline::route::PartRange;

/// The `devboy_expand` tool.
pub(super) struct Expand;

impl BuiltinTool for Expand {
    fn definition(&self) -> Tool {
        definition(
            "devboy_expand",
            "The result behind a devboy hint's id (e.g. kafrum12), as a full result reads: a file's text as is, safe to copy into an edit; lines/items as the hint gives them.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The hint's id"},
                    "lines": {"type": "string"},
                    "items": {"type": "string"},
                    "raw": {"type": "boolean", "description": "The server's exact text instead"}
                },
                "required": ["id"]
            }),
        )
        .with_annotations(annotations("Expand a result", true))
    }

    /// The text is bounded and shaped here: nothing rewrites it.
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
        let range = match (context.str_argument("lines"), context.str_argument("items")) {
            (Some(_), Some(_)) => Err("give `lines` or `items`, not both".to_owned()),
            (Some(spec), None) => PartRange::parse("lines", spec).map(Some),
            (None, Some(spec)) => PartRange::parse("items", spec).map(Some),
            (None, None) => Ok(None),
        };
        let client = context.client_name().map(str::to_owned);
        let pipeline = context.pipeline().cloned();
        let deadline = context.deadline();
        Box::pin(async move {
            let failed = |message: String| {
                CallToolResult::error(vec![ContentBlock::text(format!("devboy: {message}"))])
            };
            let range = match range {
                Ok(range) => range,
                Err(message) => return Ok(failed(message)),
            };
            let Some(processor) = pipeline else {
                return Ok(failed("this session's pipeline emits no ids".into()));
            };
            // The readable form re-encodes what is shown: off the async
            // workers and within the pipeline's deadline, else as the
            // server wrote it (bounded the same way).
            let readable = {
                let (processor, id, range, client) =
                    (processor.clone(), id.clone(), range.clone(), client.clone());
                tokio::task::spawn_blocking(move || {
                    processor.expand(&id, range.as_ref(), raw, client.as_deref())
                })
            };
            let expanded = match tokio::time::timeout(deadline, readable).await {
                Ok(Ok(expanded)) => expanded,
                _ => processor.expand(&id, range.as_ref(), true, client.as_deref()),
            };
            Ok(match expanded {
                Ok(text) => {
                    // Counted here, for the one text that goes out (a
                    // readable form past the deadline never does).
                    // A script's expansion reaches the model only as
                    // the script's answer, counted there.
                    if !context.by_script() {
                        processor.record_expansion(&id, range.is_some(), &text);
                    }
                    CallToolResult::success(vec![ContentBlock::text(text)])
                }
                Err(message) => failed(message),
            })
        })
    }
}
