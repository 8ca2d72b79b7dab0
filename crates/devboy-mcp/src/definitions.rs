//! What a tool list costs the model: every tool's definition (name,
//! description, input schema) rides on every model request, so the list a
//! session serves is a per-request cost, counted here with the one measure
//! of it, [`Tokenizer::count_definition`]. The session records it for
//! each `tools/list` it answers ([`crate::SessionEvent::ToolsListed`]).

use devboy_pipeline::Tokenizer;
use rmcp::model::Tool;

/// The tokens `tools`' definitions cost the model on each request, as
/// Claude Code sends them, counted with `tokenizer`. The names are those
/// of the list (the client may add its own prefix, `mcp__<server>__`).
pub fn definition_tokens(tools: &[Tool], tokenizer: Tokenizer) -> u64 {
    tools
        .iter()
        .map(|tool| {
            tokenizer.count_definition(&tool.name, tool.description.as_deref(), &tool.input_schema)
                as u64
        })
        .sum()
}
