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

impl crate::Session {
    /// Tells the session's events of the tool list just served, off the
    /// request path: counting the definitions may first load the
    /// tokenizer's vocabulary, which the answer must not wait for. The
    /// count runs at once on a blocking thread (so counts may finish out
    /// of order: the event says when the list was served); a list served
    /// in the very moment the session ends may miss its summary.
    pub(crate) fn record_listed(&self, tools: &[Tool]) {
        let seam = self.seam().clone();
        let tools = tools.to_vec();
        let served = std::time::Instant::now();
        tokio::task::spawn_blocking(move || {
            seam.record(crate::SessionEvent::ToolsListed {
                tools: &tools,
                served,
            });
        });
    }
}
