//! The profile axes, the hint policy and the enrichment settings of
//! `pipeline_config.toml`, and their resolution against one session.
//!
//! - **llm** (`[profiles.llms.NAME]`): what a model's id implies: the
//!   tokenizer costs are counted in and a cap on one result's tokens.
//!   `profiles.llm = "auto"` picks the last profile whose `models` globs
//!   match the session's model id (reported by Claude Code's `SessionStart`
//!   hook, else `profiles.model`).
//! - **agent** (`[profiles.agents.NAME]`): how the session works. A profile
//!   with conditions (`min_events`, `min_compactions`) is picked by
//!   `profiles.agent = "auto"` once the live session meets them; it then
//!   changes the dedup TTL, the minimum body size and the near-duplicate
//!   default of endpoints that do not set their own.
//! - **data**: per endpoint, which is `[endpoints."GLOB"]`.
//! - **hints** (`[hints.KIND]`): which hint kinds may be emitted, for
//!   which models, how many per session. A hint that may not be emitted
//!   means the content goes out in full instead: the policy can only cost
//!   tokens, never lose content.
//!
//! [`PipelineConfig::resolve_session`] collapses all of it into one
//! [`SessionSettings`]: a pure function of the config and a
//! [`SessionContext`].

use std::time::Duration;

use globset::GlobMatcher;

use super::{PipelineConfig, TokenizerChoice};

/// `profiles.llm` or `profiles.agent`: a named profile, or `auto`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Chosen from the session (model id, or session statistics).
    Auto,
    /// This profile, always (the name is checked at load).
    Named(String),
}

impl Selection {
    /// The name used in the file.
    pub fn name(&self) -> &str {
        match self {
            Selection::Auto => "auto",
            Selection::Named(n) => n,
        }
    }
}

/// The `[profiles]` section.
#[derive(Clone, Debug)]
pub struct Profiles {
    /// The model id to assume when the client did not report one.
    pub model: Option<String>,
    /// Which llm profile applies.
    pub llm: Selection,
    /// Which agent profile applies.
    pub agent: Selection,
    /// The llm profiles: built-in ones first, then the file's (a file
    /// profile with a built-in name replaces it).
    pub llms: Vec<LlmProfile>,
    /// The agent profiles, in the same order.
    pub agents: Vec<AgentProfile>,
}

/// `[profiles.llms.NAME]`: what a family of models implies.
#[derive(Clone, Debug)]
pub struct LlmProfile {
    /// The table's name.
    pub name: String,
    /// Model id globs, as written, with their matchers.
    pub models: Vec<(String, GlobMatcher)>,
    /// The tokenizer costs are counted in for these models.
    pub tokenizer: Option<TokenizerChoice>,
    /// A cap on one result's tokens (the lower of this and
    /// `encoding.budget_tokens` applies).
    pub budget_tokens: Option<usize>,
}

impl LlmProfile {
    /// Whether `model` is one of this profile's models.
    pub fn matches(&self, model: &str) -> bool {
        self.models.iter().any(|(_, m)| m.is_match(model))
    }
}

/// `[profiles.agents.NAME]`: how a kind of session is served.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentProfile {
    /// The table's name.
    pub name: String,
    /// `auto` picks this profile once the session has handled this many
    /// tool results...
    pub min_events: Option<u64>,
    /// ...and seen this many compactions. A profile with neither is only
    /// used when named.
    pub min_compactions: Option<u64>,
    /// Overrides `dedup.ttl_secs`.
    pub ttl: Option<Duration>,
    /// Overrides `dedup.min_body_bytes` (an endpoint's own setting wins).
    pub min_body_bytes: Option<usize>,
    /// Overrides `dedup.near_ref.enabled` (an endpoint's own setting wins).
    pub near_ref: Option<bool>,
}

impl AgentProfile {
    /// Whether `auto` would pick this profile for a session with `stats`.
    pub fn applies(&self, stats: &SessionStats) -> bool {
        if self.min_events.is_none() && self.min_compactions.is_none() {
            return false;
        }
        self.min_events.is_none_or(|n| stats.events >= n)
            && self.min_compactions.is_none_or(|n| stats.compactions >= n)
    }
}

/// The kinds of hint devboy emits in place of content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HintKind {
    /// `> [ref: kafrum3, unchanged; …]` for a repeat (and the `> [id: kafrum3]` line
    /// a later reference needs).
    Ref,
    /// `> [near-ref: kafrum3, changed below; …]` for a polled near-duplicate.
    NearRef,
    /// `> [elided N of M items …]` for a result over the budget.
    Elided,
    /// `> [encoded: csv …]` heading a re-encoded result.
    Encoded,
}

impl HintKind {
    /// Every kind, in the order of the file.
    pub const ALL: [HintKind; 4] = [Self::Ref, Self::NearRef, Self::Elided, Self::Encoded];

    /// The name used in the file (`[hints.NAME]`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Ref => "ref",
            Self::NearRef => "near_ref",
            Self::Elided => "elided",
            Self::Encoded => "encoded",
        }
    }

    /// The kind a name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind's place in [`HintKind::ALL`] (for per-kind counters).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// `[hints.KIND]`: whether, for which models and how often a hint kind
/// may stand in for content.
#[derive(Clone, Debug)]
pub struct HintRule {
    /// Emit this kind at all.
    pub enabled: bool,
    /// At most this many per session (`None`: no limit).
    pub max_per_session: Option<u64>,
    /// Only for models whose id matches one of these globs (empty: every
    /// model, also when the model is not known).
    pub models: Vec<(String, GlobMatcher)>,
}

impl Default for HintRule {
    fn default() -> Self {
        Self {
            enabled: true,
            max_per_session: None,
            models: Vec::new(),
        }
    }
}

impl HintRule {
    /// Whether the rule lets this hint out for `model`, `used` of them
    /// having gone out already this session.
    pub fn allows(&self, model: Option<&str>, used: u64) -> bool {
        self.enabled
            && self.max_per_session.is_none_or(|max| used < max)
            && (self.models.is_empty()
                || model.is_some_and(|m| self.models.iter().any(|(_, g)| g.is_match(m))))
    }
}

/// The `[hints]` section: one rule per kind.
#[derive(Clone, Debug, Default)]
pub struct HintsPolicy {
    rules: [HintRule; 4],
}

impl HintsPolicy {
    /// The rule for `kind`.
    pub fn rule(&self, kind: HintKind) -> &HintRule {
        &self.rules[kind.index()]
    }

    /// The rule for `kind`, to change.
    pub fn rule_mut(&mut self, kind: HintKind) -> &mut HintRule {
        &mut self.rules[kind.index()]
    }
}

/// `[enrichment]`: read-only speculation (calling likely next tools ahead
/// of the agent), planned by the `devboy-enrichment` crate.
#[derive(Clone, Debug, PartialEq)]
pub struct EnrichmentSettings {
    /// Speculate at all (on local tools).
    pub enabled: bool,
    /// Also speculate on tools that reach a remote service (an HTTP
    /// upstream, `openWorldHint`, a `rate_limit_host`).
    pub remote: bool,
    /// What a landed prefetch is for.
    pub mode: EnrichmentMode,
    /// How long a prefetch may take before it is dropped.
    pub prefetch_timeout: Duration,
    /// At most this many prefetches in flight.
    pub max_parallel: usize,
    /// At most this many prefetches in flight per upstream or rate-limit
    /// host.
    pub per_host: usize,
    /// Tokens of prefetched results per answered call.
    pub budget_tokens: usize,
    /// Only follow-ups at least this likely.
    pub min_probability: f64,
    /// How long a landed prefetch may answer the agent's call (a tool's
    /// `freshness_secs` overrides it).
    pub ttl: Duration,
}

/// `[explore]`: the built-in `devboy_explore` tool.
#[derive(Clone, Debug, PartialEq)]
pub struct ExploreSettings {
    /// Interchangeable implementations off the flow as skeletons
    /// (`DEVBOY_ADAPTIVE_EXPLORE=0` turns it off whatever this says).
    pub adaptive: bool,
    /// The size an answer aims for, in characters, unless the call says.
    pub budget_chars: usize,
    /// Directories the built-in code tools may read besides the project
    /// devboy serves and the client's roots (absolute paths).
    pub allowed_roots: Vec<std::path::PathBuf>,
}

/// The environment variable whose value `0` turns skeletons off whatever
/// `[explore] adaptive` says (an escape hatch for measurements).
pub const ADAPTIVE_EXPLORE_ENV: &str = "DEVBOY_ADAPTIVE_EXPLORE";

impl ExploreSettings {
    /// Whether the environment leaves skeletons on: not
    /// `DEVBOY_ADAPTIVE_EXPLORE=0`. Read by the callers of devboy-explore
    /// (the commands and the built-in tool), which reads no environment.
    pub fn adaptive_allowed_by_env() -> bool {
        std::env::var(ADAPTIVE_EXPLORE_ENV).map_or(true, |v| v != "0")
    }

    /// `adaptive` as the environment leaves it.
    pub fn adaptive_effective(&self) -> bool {
        self.adaptive && Self::adaptive_allowed_by_env()
    }
}

/// What a landed prefetch is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnrichmentMode {
    /// It answers the agent's own matching call when it comes.
    Prefetch,
    /// It is attached to the result that predicted it.
    Inline,
}

impl EnrichmentMode {
    /// Every mode, in the order of the names in the file.
    pub const ALL: [EnrichmentMode; 2] = [Self::Prefetch, Self::Inline];

    /// The name used in the file.
    pub fn name(self) -> &'static str {
        match self {
            Self::Prefetch => "prefetch",
            Self::Inline => "inline",
        }
    }

    /// The mode a name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// What one session is, as far as resolution needs to know.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionContext {
    /// The model id the client reported (Claude Code's `SessionStart` hook
    /// input), if any.
    pub model: Option<String>,
    /// The session's statistics so far.
    pub stats: SessionStats,
}

/// What a session has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Tool results handled.
    pub events: u64,
    /// Compactions or clears seen.
    pub compactions: u64,
}

/// The settings of one session: the config collapsed against a
/// [`SessionContext`].
#[derive(Clone, Debug, PartialEq)]
pub struct SessionSettings {
    /// The model id in effect (reported, else pinned), if any.
    pub model: Option<String>,
    /// The llm profile applied, if any.
    pub llm: Option<String>,
    /// The agent profile applied, if any.
    pub agent: Option<String>,
    /// The tokenizer costs are counted in.
    pub tokenizer: TokenizerChoice,
    /// The most tokens one result may cost before parts are elided.
    pub budget_tokens: usize,
    /// How long a delivered result may be referenced.
    pub ttl: Duration,
    /// The minimum body size for dedup, for endpoints without their own.
    pub min_body_bytes: usize,
    /// Near-duplicate hints, for endpoints without their own setting.
    pub near_ref: bool,
}

impl PipelineConfig {
    /// The llm profile for `context`: the named one, or with `auto` the
    /// last whose models match the model id in effect (so a profile in the
    /// file wins over a built-in one).
    pub fn llm_profile(&self, context: &SessionContext) -> Option<&LlmProfile> {
        match &self.profiles.llm {
            Selection::Named(name) => self.profiles.llms.iter().find(|p| &p.name == name),
            Selection::Auto => {
                let model = self.model_in_effect(context)?;
                self.profiles.llms.iter().rev().find(|p| p.matches(model))
            }
        }
    }

    /// The agent profile for `context`: the named one, or with `auto` the
    /// last whose conditions the session meets.
    pub fn agent_profile(&self, context: &SessionContext) -> Option<&AgentProfile> {
        match &self.profiles.agent {
            Selection::Named(name) => self.profiles.agents.iter().find(|p| &p.name == name),
            Selection::Auto => self
                .profiles
                .agents
                .iter()
                .rev()
                .find(|p| p.applies(&context.stats)),
        }
    }

    /// The model id in effect: the one the client reported, else
    /// `profiles.model`.
    pub fn model_in_effect<'a>(&'a self, context: &'a SessionContext) -> Option<&'a str> {
        context.model.as_deref().or(self.profiles.model.as_deref())
    }

    /// Collapses the config against one session. Pure: the same config
    /// and context always give the same settings.
    pub fn resolve_session(&self, context: &SessionContext) -> SessionSettings {
        let llm = self.llm_profile(context);
        let agent = self.agent_profile(context);
        let tokenizer = self
            .tokenizer
            .or_else(|| llm.and_then(|l| l.tokenizer))
            .unwrap_or(TokenizerChoice::O200k);
        let budget_tokens = llm
            .and_then(|l| l.budget_tokens)
            .map_or(self.encoding.budget_tokens, |b| {
                b.min(self.encoding.budget_tokens)
            });
        SessionSettings {
            model: self.model_in_effect(context).map(str::to_owned),
            llm: llm.map(|l| l.name.clone()),
            agent: agent.map(|a| a.name.clone()),
            tokenizer,
            budget_tokens,
            ttl: agent.and_then(|a| a.ttl).unwrap_or(self.dedup.ttl),
            min_body_bytes: agent
                .and_then(|a| a.min_body_bytes)
                .unwrap_or(self.dedup.min_body_bytes),
            near_ref: agent
                .and_then(|a| a.near_ref)
                .unwrap_or(self.dedup.near_ref.enabled),
        }
    }
}
