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
//! Who reads what: `side_effect` and `invalidates` drive dedup
//! invalidation, `freshness_secs` bounds how long a result may be
//! referenced. The planning fields (`value_class`, `typical_tokens`,
//! `latency_ms`, `follow_up`, `fail_fast_after_n`, `speculate`,
//! `rate_limit_host`) are the input of read-only speculation
//! (`[enrichment]`, planned by the `devboy-enrichment` crate).
//!
//! A `follow_up` item's `args` say where each argument of the predicted
//! call comes from ([`ArgSource`]); the sources are parsed (and their
//! regexes compiled) when the file is loaded, so a bad one is an error
//! naming its key, never a surprise in the middle of a session.

use std::fmt;
use std::time::Duration;

use regex::Regex;

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
    /// Where the follow-up's arguments come from, by argument name. Empty:
    /// the arguments of a shipped edge to the same tool, if there is one.
    pub args: Vec<(String, ArgSource)>,
    /// At most this many predicted calls from one answered call (at least
    /// 1).
    pub limit: usize,
}

impl FollowUp {
    /// The `limit` of an item that sets none.
    pub const DEFAULT_LIMIT: usize = 3;

    /// An edge to `tool` with no arguments of its own and the default
    /// limit (what the tuner writes).
    pub fn new(tool: impl Into<String>, probability: f64) -> Self {
        Self {
            tool: tool.into(),
            probability,
            args: Vec::new(),
            limit: Self::DEFAULT_LIMIT,
        }
    }
}

/// Where one argument of a predicted call comes from, as written in a
/// `follow_up` item's `args`.
#[derive(Clone, Debug)]
pub enum ArgSource {
    /// `"/items/*/path"`: an RFC 6901 pointer into the answered call's
    /// result (its `structuredContent`, else its text parsed as JSON); a
    /// `*` segment takes every element of an array. Holds the pointer.
    Result(String),
    /// `"$args/repo_path"`: a pointer into the answered call's own
    /// arguments. Holds the pointer (`/repo_path`).
    Args(String),
    /// `"$lines"`: every non-empty line of the result's text, trimmed.
    Lines,
    /// `"$match:REGEX"`: of every match of the regex in the result's text,
    /// the first capture group, else the whole match.
    Match(Regex),
    /// A TOML number or boolean, passed as it is.
    Literal(serde_json::Value),
}

impl ArgSource {
    /// The source a string of the file stands for; the error says what
    /// was expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Some(pointer) = text.strip_prefix("$args") {
            return if pointer.starts_with('/') {
                Ok(Self::Args(pointer.to_owned()))
            } else {
                Err("\"$args/NAME\": a JSON pointer into the call's arguments".to_owned())
            };
        }
        if text == "$lines" {
            return Ok(Self::Lines);
        }
        if let Some(pattern) = text.strip_prefix("$match:") {
            return Regex::new(pattern)
                .map(Self::Match)
                .map_err(|e| format!("\"$match:REGEX\" with a valid regex ({e})"));
        }
        if text.starts_with('/') {
            return Ok(Self::Result(text.to_owned()));
        }
        Err("a JSON pointer into the result (\"/items/*/path\"), \"$args/NAME\", \"$lines\", \"$match:REGEX\", or a number or boolean".to_owned())
    }

    /// Whether the source gives at most one value (a literal, or a
    /// pointer without `*`); the others give a list.
    pub fn is_single(&self) -> bool {
        match self {
            Self::Literal(_) => true,
            Self::Args(p) | Self::Result(p) => !p.split('/').any(|s| s == "*"),
            Self::Lines | Self::Match(_) => false,
        }
    }
}

/// As written in the file: `"/0/number"`, `"$lines"`, `3`.
impl fmt::Display for ArgSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Result(p) => write!(f, "{p:?}"),
            Self::Args(p) => write!(f, "\"$args{}\"", p.escape_debug()),
            Self::Lines => f.write_str("\"$lines\""),
            Self::Match(r) => write!(f, "{:?}", format!("$match:{}", r.as_str())),
            Self::Literal(v) => write!(f, "{v}"),
        }
    }
}

/// Two sources are equal when they are written the same.
impl PartialEq for ArgSource {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
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
