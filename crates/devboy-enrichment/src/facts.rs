//! What the catalog says about a tool: the facts the planner starts from.

use serde_json::{Map, Value};

/// A tool's MCP annotations, as the server sent them (`None`: not said).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Annotations {
    /// `readOnlyHint`.
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    pub destructive: Option<bool>,
    /// `idempotentHint`.
    pub idempotent: Option<bool>,
    /// `openWorldHint`.
    pub open_world: Option<bool>,
}

impl Annotations {
    /// Whether the annotations say the tool writes (`destructiveHint:
    /// true` or `readOnlyHint: false`).
    pub fn say_writes(&self) -> bool {
        self.destructive == Some(true) || self.read_only == Some(false)
    }
}

/// One tool of the catalog devboy serves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolFacts {
    /// The name the agent calls it by (`<prefix>__<tool>`).
    pub exposed: String,
    /// The upstream serving it (its config name).
    pub upstream: String,
    /// Its name on the upstream.
    pub tool: String,
    /// Its annotations.
    pub annotations: Annotations,
    /// Its `inputSchema`.
    pub input_schema: Map<String, Value>,
    /// Whether its upstream is reached over HTTP.
    pub remote_upstream: bool,
}
