//! Tool value models: what a tool's result is worth to the agent, what it
//! costs, what usually follows it, and whether it may be called ahead of
//! the agent.
//!
//! A value model is assembled from `[tools."GLOB"]` tables in
//! `pipeline_config.toml` ([`crate::pipeline_config::PipelineConfig::tool_model`]):
//! every matching table applies in file order, a later one overriding the
//! fields it sets. The tuner writes some of the fields from measurements
//! (`typical_tokens` from telemetry, `follow_up` from Claude Code session
//! logs); users write the rest.
//!
//! Who reads what today: `side_effect` and `invalidates` drive dedup
//! invalidation, `freshness_secs` bounds how long a result may be
//! referenced. The planning fields (`value_class`, `typical_tokens`,
//! `latency_ms`, `follow_up`, `fail_fast_after_n`, `speculate`,
//! `rate_limit_host`) are the input of read-only speculation
//! (`[enrichment]`), which this version of devboy does not run yet; they
//! are validated, resolved and shown by `devboy tune show` so a file
//! written now keeps its meaning when it does.

use std::time::Duration;

use crate::pipeline_config::SideEffectClass;

/// How much a tool's result matters, first to last under a budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueClass {
    /// The agent cannot do without it (file content, search results).
    Critical,
    /// Useful context.
    Supporting,
    /// Nice to have; the first to go.
    Optional,
    /// Bookkeeping the agent writes for itself; never worth prefetching
    /// or budgeting.
    AuditOnly,
}

impl ValueClass {
    /// Every class, in the order of the names in the file.
    pub const ALL: [ValueClass; 4] = [
        Self::Critical,
        Self::Supporting,
        Self::Optional,
        Self::AuditOnly,
    ];

    /// The name used in the file.
    pub fn name(self) -> &'static str {
        match self {
            Self::Critical => "critical",
            Self::Supporting => "supporting",
            Self::Optional => "optional",
            Self::AuditOnly => "audit_only",
        }
    }

    /// The class a name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// A call that often follows a tool's call: an edge of the session graph.
#[derive(Clone, Debug, PartialEq)]
pub struct FollowUp {
    /// The exposed name of the tool called next.
    pub tool: String,
    /// How often it was the next call (0 to 1).
    pub probability: f64,
    /// Where the follow-up's arguments come from: argument name → RFC 6901
    /// pointer into this tool's result.
    pub args: Vec<(String, String)>,
}

/// Everything `[tools."GLOB"]` tables say about one tool, merged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolValueModel {
    /// The side-effect class, overriding the server's annotations.
    pub side_effect: Option<SideEffectClass>,
    /// Endpoint globs whose remembered results a call to the tool forgets.
    pub invalidates: Vec<String>,
    /// How long a result may be referenced after delivery, overriding
    /// `dedup.ttl_secs` for this tool.
    pub freshness: Option<Duration>,
    /// What the result is worth.
    pub value_class: Option<ValueClass>,
    /// A typical result's cost in tokens.
    pub typical_tokens: Option<usize>,
    /// A typical call's latency (median) in milliseconds.
    pub latency_ms: Option<u64>,
    /// Calls that often follow this one.
    pub follow_up: Vec<FollowUp>,
    /// Stop repeating a call after this many empty results in a row.
    pub fail_fast_after_n: Option<usize>,
    /// Whether the tool may be called ahead of the agent at all (only ever
    /// for `pure` and `read_only` tools).
    pub speculate: Option<bool>,
    /// The host whose rate limit calls to the tool share.
    pub rate_limit_host: Option<String>,
}

impl ToolValueModel {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}
