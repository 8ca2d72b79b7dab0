//! devboy's own tools, served next to the proxied ones.
//!
//! Built-in names use a single underscore (`devboy_status`); proxied names
//! always contain `__`, so the two can never collide.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::json;

/// A tool devboy serves itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinTool {
    /// Each upstream's state, tool count, calls served, last error; the
    /// session's counters.
    Status,
    /// Starts a new context partition: the agent's context was compacted
    /// or cleared, so nothing devboy sends from now on may refer to a
    /// result shown before.
    Compact,
    /// The exact text behind an id devboy printed (`kafrum12`).
    Expand,
}

impl BuiltinTool {
    /// Every built-in tool, in listing order.
    pub const ALL: [BuiltinTool; 3] = [
        BuiltinTool::Status,
        BuiltinTool::Compact,
        BuiltinTool::Expand,
    ];

    /// The tool as listed to the agent.
    pub fn definition(self) -> Tool {
        match self {
            BuiltinTool::Status => Tool::new(
                "devboy_status",
                "devboy proxy status: each upstream MCP server's state, tool count, calls, errors and last error.",
                schema(json!({"type": "object", "properties": {}})),
            )
            .with_annotations(annotations("devboy status", true)),
            BuiltinTool::Compact => Tool::new(
                "devboy_compact",
                "Call after the conversation was compacted, summarised or cleared: devboy then stops abbreviating tool results as references to earlier results and sends them in full again.",
                schema(json!({"type": "object", "properties": {}})),
            )
            .with_annotations(annotations("devboy compact", false)),
            BuiltinTool::Expand => Tool::new(
                "devboy_expand",
                "Returns the exact original text of a tool result that devboy abbreviated, by the id in its hint (e.g. kafrum12).",
                schema(json!({
                    "type": "object",
                    "properties": {"id": {"type": "string", "description": "The id from the hint, e.g. kafrum12"}},
                    "required": ["id"]
                })),
            )
            .with_annotations(annotations("devboy expand", true)),
        }
    }
}

/// Built-in tools are all idempotent, non-destructive and closed-world;
/// they differ in title and in whether they only read.
fn annotations(title: &str, read_only: bool) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(read_only)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

fn schema(value: serde_json::Value) -> Arc<JsonObject> {
    match value {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}
