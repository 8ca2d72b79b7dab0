//! `devboy_compact`: starts a new context partition. The agent's context
//! was compacted or cleared, so nothing devboy sends from now on may refer
//! to a result shown before.

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::ErrorData as McpError;
use serde_json::json;

use super::{annotations, definition, BuiltinContext, BuiltinTool};
use crate::seam::Delivery;

/// The `devboy_compact` tool.
pub(super) struct Compact;

impl BuiltinTool for Compact {
    fn definition(&self) -> Tool {
        definition(
            "devboy_compact",
            "Call after the conversation was compacted, summarised or cleared: devboy then stops abbreviating tool results as references to earlier results and sends them in full again.",
            json!({"type": "object", "properties": {}}),
        )
        .with_annotations(annotations("Mark the context compacted", false))
    }

    /// A new partition number each call, read by clients as JSON.
    fn delivery(&self) -> Delivery {
        Delivery::Volatile
    }

    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        let partition = context.partition().advance();
        tracing::info!(partition, "devboy_compact: partition advanced");
        let report = json!({ "context_partition": partition });
        Box::pin(async move {
            Ok(CallToolResult::success(vec![ContentBlock::text(
                report.to_string(),
            )]))
        })
    }
}
