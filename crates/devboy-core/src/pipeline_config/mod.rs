//! `pipeline_config.toml`: the knobs of the response pipeline, separate
//! from the proxy config (`devboy.toml`) because a different author writes
//! it: `devboy tune analyze` regenerates it from telemetry, and hand edits
//! go in the same file.
//!
//! Key design decisions:
//!
//! - **Versioned schema.** The file carries `schema_version`. Version 1 (the
//!   seed design's flat knobs: `dedup.lru_size`, `dedup.min_body_chars`,
//!   `dedup.enabled_per_endpoint`, `templates.endpoint_overrides`) loads and
//!   is migrated in memory, with one warning per moved key; the file on disk
//!   is left as it is. A version newer than [`SCHEMA_VERSION`] is refused
//!   with a message telling the user to upgrade devboy, rather than
//!   half-read. A file without `schema_version` is read as the current
//!   version.
//! - **Written once.** [`schema::KEYS`] describes every key (kind,
//!   default, the version that introduced it); the loader, the built-in
//!   defaults, `devboy tune` and `tune show` all read it.
//! - **Strict, with paths, never all or nothing.** An unknown key, or a
//!   value of the wrong kind, names the key path and what is allowed
//!   there, like `devboy.toml` ([`ConfigError`]); it is left out (what
//!   applies without it applies) and listed in
//!   [`PipelineConfig::problems`], every one of them at once. Only a file
//!   that is not TOML, or whose `schema_version` this devboy cannot read
//!   it by, fails to load; [`PipelineConfig::resolve_or_default`] then
//!   serves without that file and says so.
//! - **Patterns, first to last.** `[endpoints."GLOB"]` and `[tools."GLOB"]`
//!   match a tool's exposed name (`<prefix>__<tool>`, what Claude Code shows
//!   after `mcp__devboy__`). Every matching table applies, in file order, a
//!   later one overriding the keys it sets; so write general patterns first
//!   and specific ones after them.
//! - **Resolution is a pure function.** [`PipelineConfig::endpoint`] and
//!   [`PipelineConfig::side_effect`] read nothing but the config and their
//!   arguments, so one file and one session context always give one
//!   effective setting. The one environment override,
//!   `DEVBOY_TELEMETRY=off` ([`TelemetrySettings::with_env`]), takes the
//!   environment as a function for the same reason.

mod load;
mod profiles;
pub mod schema;
#[cfg(test)]
mod tests;

pub use profiles::{
    AgentProfile, EnrichmentMode, EnrichmentSettings, ExploreSettings, HintKind, HintRule,
    HintsPolicy, LlmProfile, Profiles, Selection, SessionContext, SessionSettings, SessionStats,
};

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::GlobMatcher;

use crate::config::{ConfigError, ConfigErrorKind, ConfigSource};
use crate::value_model::{FollowUp, ToolValueModel, ValueClass};

/// The schema version this devboy writes and reads natively.
pub const SCHEMA_VERSION: u32 = 3;

/// The pipeline config compiled into the binary: every key at its default,
/// documented.
pub const EMBEDDED_PIPELINE_TOML: &str = include_str!("../../../../config/pipeline_config.toml");
const EMBEDDED_ORIGIN: &str = "<embedded config/pipeline_config.toml>";

/// The response pipeline's settings, validated.
#[derive(Clone, Debug)]
pub struct PipelineConfig {
    /// Where it came from.
    pub source: ConfigSource,
    /// The `schema_version` the file was written in (before migration).
    pub file_version: u32,
    /// L0 dedup defaults (per endpoint overridable).
    pub dedup: DedupSettings,
    /// L1/L2 encoding and the token budget.
    pub encoding: EncodingSettings,
    /// Which tokenizer counts costs (`None`: `auto`, from the llm profile,
    /// else o200k; see [`PipelineConfig::resolve_session`]).
    pub tokenizer: Option<TokenizerChoice>,
    /// What the client shows the model of a result.
    pub client: ClientProfile,
    /// The model, llm and agent profile axes.
    pub profiles: Profiles,
    /// Which hints may stand in for content.
    pub hints: HintsPolicy,
    /// Read-only speculation.
    pub enrichment: EnrichmentSettings,
    /// The built-in `devboy_explore` tool.
    pub explore: ExploreSettings,
    /// Where and how much telemetry is written.
    pub telemetry: TelemetrySettings,
    /// Per-endpoint overrides, in file order.
    pub endpoints: Vec<EndpointRule>,
    /// Per-tool value models (side effects, invalidation, freshness,
    /// planning priors), in file order.
    pub tools: Vec<ToolRule>,
    /// Migration notes and other things worth telling the user, each
    /// starting with the file and key.
    pub warnings: Vec<String>,
    /// What in the files is wrong and left out, each naming the file,
    /// line:col and key and what was expected: a key that is unknown, of
    /// the wrong kind, or newer than the file's schema version (what
    /// applies without it applies: the layer below, else the default), or
    /// a whole file that could not be read. Empty when every key applies.
    pub problems: Vec<String>,
    /// The files applied, in order: a project's committed
    /// `.devboy/pipeline_config.toml` ([`project_file`]), then the user's
    /// own; a key a later file sets wins. Empty for the embedded default.
    pub layers: Vec<PathBuf>,
    /// The file that set each key ([`origin_key`] names them); keys no
    /// file set are at their defaults.
    pub key_origins: std::collections::BTreeMap<String, PathBuf>,
}

/// The name [`PipelineConfig::key_origins`] gives a key: its path in the
/// description (`dedup.ttl_secs`), with `#N` for a key of the Nth table of
/// `[endpoints]`, `[tools]`, the profiles or the hints
/// (`endpoints.*.dedup#0`).
pub fn origin_key(spec: &str, at: usize) -> String {
    if spec.contains('*') {
        format!("{spec}#{at}")
    } else {
        spec.to_owned()
    }
}

/// L0 dedup settings.
#[derive(Clone, Debug, PartialEq)]
pub struct DedupSettings {
    /// Replace repeats with references at all.
    pub enabled: bool,
    /// Bodies shorter than this pass untouched and claim no id.
    pub min_body_bytes: usize,
    /// How long after delivery a body may still be referenced.
    pub ttl: Duration,
    /// How many delivered bodies are remembered.
    pub max_entries: usize,
    /// How many bytes of delivered bodies are remembered (an estimate of
    /// what one context holds).
    pub max_context_bytes: usize,
    /// Near-duplicate hints for polling endpoints.
    pub near_ref: NearRefSettings,
    /// Re-reads said as diffs.
    pub text_diff: TextDiffSettings,
}

/// Re-read diffs: a result whose text changed in a few lines since the
/// version the model holds (the same call, or a read of the same path,
/// delivered in full in this context, even if the agent wrote the path
/// since) is sent as that version's id plus a unified diff.
#[derive(Clone, Debug, PartialEq)]
pub struct TextDiffSettings {
    /// On by default.
    pub enabled: bool,
    /// Only when the hint and diff cost at most this share of the body.
    pub max_share: f64,
}

/// Near-duplicate hints: a repeat of the same call whose body differs from
/// the last full delivery only in a few scalar fields is sent as that
/// delivery's id plus the exact changes.
#[derive(Clone, Debug, PartialEq)]
pub struct NearRefSettings {
    /// Off by default; enable per endpoint for polling tools.
    pub enabled: bool,
    /// At most this many scalar fields may differ.
    pub max_changes: usize,
    /// Only bodies at least this large; below it the full body is cheap.
    pub min_body_bytes: usize,
}

/// L1 templates and the L2 router.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodingSettings {
    /// Re-encode structured results into cheaper lossless formats.
    pub enabled: bool,
    /// The most tokens one result may cost the model before the router
    /// elides its least valuable parts (recoverably). Claude Code's own cap
    /// is 25,000 (`MAX_MCP_OUTPUT_TOKENS`).
    pub budget_tokens: usize,
    /// How long the whole pipeline (dedup and encoding) may work on one
    /// result; past it the result goes out as it came and the session
    /// keeps serving (invariant 13).
    pub deadline: std::time::Duration,
    /// The most characters one result may show the model inline.
    pub inline_chars: InlineChars,
}

/// `encoding.inline_chars`: how many characters of one result the client
/// shows the model inline; a result is kept within it as within the token
/// budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InlineChars {
    /// The client's own limit, as measured: Claude Code shows a result of
    /// up to [`CLAUDE_CODE_INLINE_CHARS`] inline; other clients have none
    /// known.
    Auto,
    /// No limit but the token budget.
    Unlimited,
    /// This many characters, whatever the client.
    At(usize),
}

impl InlineChars {
    /// The smallest number the file accepts: below it a result could not
    /// hold its hints.
    pub const MIN: usize = 1_000;

    /// As the file writes it.
    pub fn name(self) -> String {
        match self {
            InlineChars::Auto => "\"auto\"".into(),
            InlineChars::Unlimited => "\"none\"".into(),
            InlineChars::At(n) => n.to_string(),
        }
    }
}

/// Claude Code (2.1.330) shows a tool result of up to this many characters
/// (JavaScript string length) inline; a longer one is written to a file
/// and the model is shown its path and a 2,000-character preview. A tool
/// may raise it with `_meta["anthropic/maxResultSizeChars"]` (up to
/// 500,000); devboy's tools do not.
pub const CLAUDE_CODE_INLINE_CHARS: usize = 50_000;

/// Claude Code cuts an MCP tool result at this many tokens unless
/// [`MAX_MCP_OUTPUT_TOKENS_ENV`] says otherwise.
pub const CLAUDE_CODE_MAX_TOKENS: usize = 25_000;

/// The variable Claude Code reads its MCP result token cap from; the
/// servers it starts inherit it.
pub const MAX_MCP_OUTPUT_TOKENS_ENV: &str = "MAX_MCP_OUTPUT_TOKENS";

/// What one client shows the model of one result at most, resolved from
/// the config and the client's name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientBound {
    /// Characters shown inline.
    pub inline_chars: Option<usize>,
    /// Tokens passed on.
    pub max_tokens: Option<usize>,
}

impl PipelineConfig {
    /// What a client named `client` (its `initialize` name) shows the model
    /// of one result at most: Claude Code's measured limits for a client
    /// named `claude-code…` (its token cap from `max_output_tokens`, the
    /// value of [`MAX_MCP_OUTPUT_TOKENS_ENV`] when set), `inline_chars`
    /// when the file sets a number.
    pub fn client_bound(
        &self,
        client: Option<&str>,
        max_output_tokens: Option<usize>,
    ) -> ClientBound {
        let claude_code = client.is_some_and(|n| n.starts_with("claude-code"));
        ClientBound {
            inline_chars: match self.encoding.inline_chars {
                InlineChars::Auto => claude_code.then_some(CLAUDE_CODE_INLINE_CHARS),
                InlineChars::Unlimited => None,
                InlineChars::At(n) => Some(n),
            },
            max_tokens: claude_code.then(|| {
                max_output_tokens
                    .filter(|&n| n > 0)
                    .unwrap_or(CLAUDE_CODE_MAX_TOKENS)
            }),
        }
    }
}

/// The token cap Claude Code was started with, from the environment:
/// [`MAX_MCP_OUTPUT_TOKENS_ENV`] as a positive number, else `None`.
pub fn max_output_tokens_with_env(env: &dyn Fn(&str) -> Option<OsString>) -> Option<usize> {
    env(MAX_MCP_OUTPUT_TOKENS_ENV)?
        .to_str()?
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
}

/// `[telemetry]`: the anonymous per-result events `devboy tune` learns
/// from (docs/telemetry.md). Invariant, kept by the loader:
/// `0.0 <= sample_rate <= 1.0`, `max_file_bytes >= 1024`,
/// `max_age_days >= 1`.
#[derive(Clone, Debug, PartialEq)]
pub struct TelemetrySettings {
    /// Write events at all.
    pub enabled: bool,
    /// The fraction of result events kept (session summaries are always
    /// written and record the rate).
    pub sample_rate: f64,
    /// An events file is rotated when it reaches this size.
    pub max_file_bytes: u64,
    /// Events files older than this are deleted when a session starts.
    pub max_age_days: u32,
}

/// Turns telemetry off whatever the config says: `DEVBOY_TELEMETRY=off`
/// (also `0`, `false`, `no`; any case).
pub const TELEMETRY_ENV: &str = "DEVBOY_TELEMETRY";

impl TelemetrySettings {
    /// These settings with the environment's override applied
    /// ([`TELEMETRY_ENV`]); `env` is the environment as a function, e.g.
    /// `&|k| std::env::var_os(k)`.
    pub fn with_env(&self, env: &dyn Fn(&str) -> Option<OsString>) -> Self {
        let off = env(TELEMETRY_ENV).is_some_and(|v| {
            let v = v.to_string_lossy().trim().to_ascii_lowercase();
            matches!(v.as_str(), "off" | "0" | "false" | "no")
        });
        Self {
            enabled: self.enabled && !off,
            ..self.clone()
        }
    }
}

/// The tokenizer costs are counted in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TokenizerChoice {
    /// OpenAI `o200k_base`, the default stand-in for Claude.
    O200k,
    /// OpenAI `cl100k_base`.
    Cl100k,
    /// Characters divided by this ratio.
    CharsPerToken(f32),
}

/// What the client shows the model of a result that carries both content
/// blocks and `structuredContent`: the pipeline must work on the part the
/// model will see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientProfile {
    /// Decide by the client's name at `initialize`: names starting with
    /// `claude` (Claude Code) forward `structuredContent`, others the
    /// content blocks.
    Auto,
    /// The client forwards `structuredContent` when present.
    Structured,
    /// The client forwards the content blocks.
    Content,
}

impl ClientProfile {
    /// The name used in the file.
    pub fn name(self) -> &'static str {
        match self {
            ClientProfile::Auto => "auto",
            ClientProfile::Structured => "structured",
            ClientProfile::Content => "content",
        }
    }

    /// Whether a client called `client_name` forwards `structuredContent`.
    pub fn forwards_structured(self, client_name: Option<&str>) -> bool {
        match self {
            ClientProfile::Auto => client_name.is_some_and(|n| n.starts_with("claude")),
            ClientProfile::Structured => true,
            ClientProfile::Content => false,
        }
    }
}

/// Which exposed tool names one `[endpoints."GLOB"]` or `[tools."GLOB"]`
/// table matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleMatches {
    /// `endpoints` or `tools`.
    pub table: &'static str,
    /// The glob as written.
    pub pattern: String,
    /// The names it matches, in the order given.
    pub matches: Vec<String>,
}

impl PipelineConfig {
    /// For every glob table, the names of `tools` (exposed names) it
    /// matches: a table that matches none is most likely a misspelt
    /// prefix (`fs__write_*` for a server whose prefix is `filesystem`).
    pub fn rule_matches(&self, tools: &[&str]) -> Vec<RuleMatches> {
        let endpoints = self
            .endpoints
            .iter()
            .map(|rule| ("endpoints", &rule.pattern, &rule.matcher));
        let tool_rules = self
            .tools
            .iter()
            .map(|rule| ("tools", &rule.pattern, &rule.matcher));
        endpoints
            .chain(tool_rules)
            .map(|(table, pattern, matcher)| RuleMatches {
                table,
                pattern: pattern.clone(),
                matches: tools
                    .iter()
                    .filter(|name| matcher.is_match(name))
                    .map(|name| (*name).to_owned())
                    .collect(),
            })
            .collect()
    }
}

/// `[endpoints."GLOB"]`: settings for the tools whose exposed names match.
#[derive(Clone, Debug)]
pub struct EndpointRule {
    /// The glob as written.
    pub pattern: String,
    matcher: GlobMatcher,
    /// Override of `dedup.enabled`.
    pub dedup: Option<bool>,
    /// Override of `dedup.min_body_bytes`.
    pub min_body_bytes: Option<usize>,
    /// Override of `dedup.near_ref.enabled`.
    pub near_ref: Option<bool>,
    /// Override of `encoding.enabled`.
    pub encode: Option<bool>,
    /// The L1 template to use (`auto` lets the router choose).
    pub template: Option<String>,
}

impl EndpointRule {
    /// A rule for `pattern` that sets nothing yet.
    pub(crate) fn new(pattern: String, matcher: GlobMatcher) -> Self {
        Self {
            pattern,
            matcher,
            dedup: None,
            min_body_bytes: None,
            near_ref: None,
            encode: None,
            template: None,
        }
    }
}

/// `[tools."GLOB"]`: the value model of the matching tools, as far as
/// this table sets it ([`ToolValueModel`]).
#[derive(Clone, Debug)]
pub struct ToolRule {
    /// The glob as written.
    pub pattern: String,
    matcher: GlobMatcher,
    /// The side-effect class, overriding the server's annotations.
    pub side_effect: Option<SideEffectClass>,
    /// Endpoint globs whose remembered bodies a call forgets.
    pub invalidates: Vec<(String, GlobMatcher)>,
    /// How long the tool's results may be referenced.
    pub freshness: Option<Duration>,
    /// What the tool's result is worth.
    pub value_class: Option<ValueClass>,
    /// A typical result's cost in tokens.
    pub typical_tokens: Option<usize>,
    /// A typical call's latency in milliseconds.
    pub latency_ms: Option<u64>,
    /// Calls that often follow (`None`: not set here).
    pub follow_up: Option<Vec<FollowUp>>,
    /// Stop repeating after this many empty results.
    pub fail_fast_after_n: Option<usize>,
    /// Whether the tool may be called ahead of the agent.
    pub speculate: Option<bool>,
    /// The host whose rate limit the tool's calls share.
    pub rate_limit_host: Option<String>,
}

impl ToolRule {
    /// A rule for `pattern` that sets nothing yet.
    pub(crate) fn new(pattern: String, matcher: GlobMatcher) -> Self {
        Self {
            pattern,
            matcher,
            side_effect: None,
            invalidates: Vec::new(),
            freshness: None,
            value_class: None,
            typical_tokens: None,
            latency_ms: None,
            follow_up: None,
            fail_fast_after_n: None,
            speculate: None,
            rate_limit_host: None,
        }
    }
}

/// What a tool call may do, for dedup invalidation and speculation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SideEffectClass {
    /// No side effects and the same answer for the same arguments.
    Pure,
    /// Reads only; the answer may change as the world changes.
    ReadOnly,
    /// Changes state.
    Mutating,
    /// Changes state irreversibly.
    Destructive,
    /// Not known; treated as "may mutate".
    Unknown,
}

impl SideEffectClass {
    /// Whether a call may change what other tools return.
    pub fn may_mutate(self) -> bool {
        !matches!(self, SideEffectClass::Pure | SideEffectClass::ReadOnly)
    }

    /// Every class, in [`name`](Self::name)'s order.
    pub const ALL: [SideEffectClass; 5] = [
        SideEffectClass::Pure,
        SideEffectClass::ReadOnly,
        SideEffectClass::Mutating,
        SideEffectClass::Destructive,
        SideEffectClass::Unknown,
    ];

    /// The class named `name` ([`name`](Self::name)'s inverse).
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The name used in the file.
    pub fn name(self) -> &'static str {
        match self {
            SideEffectClass::Pure => "pure",
            SideEffectClass::ReadOnly => "read_only",
            SideEffectClass::Mutating => "mutating",
            SideEffectClass::Destructive => "destructive",
            SideEffectClass::Unknown => "unknown",
        }
    }

    /// The class MCP tool annotations imply: `readOnlyHint: true` is
    /// read-only, `destructiveHint: true` destructive, anything else
    /// unknown (the spec's defaults are not promises).
    pub fn from_annotations(read_only: Option<bool>, destructive: Option<bool>) -> Self {
        match (read_only, destructive) {
            (Some(true), _) => SideEffectClass::ReadOnly,
            (_, Some(true)) => SideEffectClass::Destructive,
            _ => SideEffectClass::Unknown,
        }
    }
}

/// The effective settings for one endpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointSettings {
    /// Dedup on.
    pub dedup: bool,
    /// Minimum body size for dedup.
    pub min_body_bytes: usize,
    /// Near-duplicate hints on.
    pub near_ref: bool,
    /// Encoding on.
    pub encode: bool,
    /// The template to use, `None` for the router's choice.
    pub template: Option<String>,
}

impl PipelineConfig {
    /// Reads a `pipeline_config.toml`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::new(path, None, ConfigErrorKind::Read { source }))?;
        let mut config = Self::from_str(&text, path)?;
        config.source = ConfigSource::File(path.to_path_buf());
        Ok(config)
    }

    /// Parses pipeline config text; `origin` names the file in messages.
    pub fn from_str(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        let mut config = load::parse(text, origin)?;
        config.source = ConfigSource::File(origin.to_path_buf());
        config.layers = vec![origin.to_path_buf()];
        Ok(config)
    }

    /// Parses `text` (the file `origin`) on top of this config: each key
    /// it sets replaces this one's, its `[endpoints]` and `[tools]` rules
    /// come after this one's (so they win where both match), and a
    /// profile it names changes the fields it sets.
    pub fn overlaid(self, text: &str, origin: &Path) -> Result<Self, ConfigError> {
        let mut layers = self.layers.clone();
        let mut config = load::parse_onto(self, text, origin)?;
        config.source = ConfigSource::File(origin.to_path_buf());
        layers.push(origin.to_path_buf());
        config.layers = layers;
        Ok(config)
    }

    /// The config of `own` (the user's file, when there is one) on top of
    /// `project` (a project's committed file, when there is one); the
    /// embedded default when neither.
    pub fn layered(project: Option<&Path>, own: Option<&Path>) -> Result<Self, ConfigError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path)
                .map_err(|source| ConfigError::new(path, None, ConfigErrorKind::Read { source }))
        };
        match (project, own) {
            (None, None) => Ok(Self::embedded_default()),
            (Some(one), None) | (None, Some(one)) => Self::load(one),
            (Some(project), Some(own)) => Self::load(project)?.overlaid(&read(own)?, own),
        }
    }

    /// The defaults ([`EMBEDDED_PIPELINE_TOML`]).
    pub fn embedded_default() -> Self {
        let parsed = load::parse(EMBEDDED_PIPELINE_TOML, Path::new(EMBEDDED_ORIGIN));
        // A test keeps the embedded file valid; the built-in defaults are
        // what it says anyway.
        let mut config = parsed.unwrap_or_else(|_| load::defaults());
        config.source = ConfigSource::Embedded;
        config.layers.clear();
        config.key_origins.clear();
        config
    }

    /// The pipeline config a starting `devboy mcp` serves: as
    /// [`PipelineConfig::resolve_in`], but a file that cannot be used at
    /// all (not TOML, a `schema_version` this devboy cannot read, not
    /// readable) is left out, the other layer and the defaults applying,
    /// with its error among the [`problems`](Self::problems). Only
    /// `explicit` naming no file is an error: the command line itself is
    /// wrong.
    pub fn resolve_or_default(
        explicit: Option<&Path>,
        project: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let layers: Vec<PathBuf> = match explicit {
            Some(path) => {
                if let Err(source) = std::fs::metadata(path) {
                    if source.kind() == std::io::ErrorKind::NotFound {
                        return Err(ConfigError::new(
                            path,
                            None,
                            ConfigErrorKind::Read { source },
                        ));
                    }
                }
                vec![path.to_path_buf()]
            }
            None => project
                .and_then(project_file)
                .into_iter()
                .chain(Some(default_file()).filter(|p| p.is_file()))
                .collect(),
        };
        Ok(Self::layers_or_default(&layers))
    }

    /// `layers` read each on top of the one before, as
    /// [`PipelineConfig::layered`] does, leaving out a file that cannot be
    /// used at all (its error one of the problems); the embedded default
    /// when none can be.
    fn layers_or_default(layers: &[PathBuf]) -> Self {
        let mut read: Option<Self> = None;
        let mut unusable = Vec::new();
        for layer in layers {
            let next = match &read {
                None => Self::load(layer),
                Some(below) => std::fs::read_to_string(layer)
                    .map_err(|source| {
                        ConfigError::new(layer, None, ConfigErrorKind::Read { source })
                    })
                    .and_then(|text| below.clone().overlaid(&text, layer)),
            };
            match next {
                Ok(config) => read = Some(config),
                Err(error) => unusable.push(format!(
                    "{error}; devboy reads the pipeline config without this file until it is fixed"
                )),
            }
        }
        let mut config = read.unwrap_or_else(Self::embedded_default);
        config.problems.extend(unusable);
        config
    }

    /// The pipeline config devboy runs with: the explicit path if given
    /// (alone); else the project's committed
    /// `.devboy/pipeline_config.toml` ([`project_file`], from the current
    /// directory) with `<config_dir>/pipeline_config.toml` on top, each
    /// when it exists ([`PipelineConfig::layered`]); else the embedded
    /// default.
    pub fn resolve(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        let cwd = std::env::current_dir().ok();
        Self::resolve_in(explicit, cwd.as_deref())
    }

    /// [`PipelineConfig::resolve`] for a project at `project`.
    pub fn resolve_in(
        explicit: Option<&Path>,
        project: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        if let Some(path) = explicit {
            return Self::load(path);
        }
        let default = default_file();
        let team = project.and_then(project_file);
        Self::layered(
            team.as_deref(),
            Some(default.as_path()).filter(|p| p.is_file()),
        )
    }

    /// The effective settings for the tool exposed as `exposed`, with no
    /// session profile applied.
    pub fn endpoint(&self, exposed: &str) -> EndpointSettings {
        self.endpoint_in(exposed, &self.resolve_session(&SessionContext::default()))
    }

    /// The effective settings for the tool exposed as `exposed` in a
    /// session with `session` settings: the agent profile's defaults, then
    /// every matching `[endpoints.*]` table in file order.
    pub fn endpoint_in(&self, exposed: &str, session: &SessionSettings) -> EndpointSettings {
        let mut out = EndpointSettings {
            dedup: self.dedup.enabled,
            min_body_bytes: session.min_body_bytes,
            near_ref: session.near_ref,
            encode: self.encoding.enabled,
            template: None,
        };
        for rule in self
            .endpoints
            .iter()
            .filter(|r| r.matcher.is_match(exposed))
        {
            if let Some(v) = rule.dedup {
                out.dedup = v;
            }
            if let Some(v) = rule.min_body_bytes {
                out.min_body_bytes = v;
            }
            if let Some(v) = rule.near_ref {
                out.near_ref = v;
            }
            if let Some(v) = rule.encode {
                out.encode = v;
            }
            if let Some(v) = &rule.template {
                out.template = (v != "auto").then(|| v.clone());
            }
        }
        out
    }

    /// The `side_effect` the last matching `[tools."GLOB"]` table sets for
    /// the tool exposed as `exposed`, if any: the strongest of the rules
    /// [`crate::call::side_effect`] applies, the one place a class is
    /// decided.
    pub fn configured_side_effect(&self, exposed: &str) -> Option<SideEffectClass> {
        self.tools
            .iter()
            .rev()
            .filter(|r| r.matcher.is_match(exposed))
            .find_map(|r| r.side_effect)
    }

    /// Whether a call to `caller` forgets the bodies of endpoint `exposed`
    /// (some matching `[tools.*]` rule lists a glob matching it).
    pub fn invalidates(&self, caller: &str, exposed: &str) -> bool {
        self.tools
            .iter()
            .filter(|r| r.matcher.is_match(caller))
            .any(|r| r.invalidates.iter().any(|(_, m)| m.is_match(exposed)))
    }

    /// The value model of the tool exposed as `exposed`: every matching
    /// `[tools.*]` table in file order, a later one overriding the fields
    /// it sets (`invalidates` lists add up).
    pub fn tool_model(&self, exposed: &str) -> ToolValueModel {
        let mut out = ToolValueModel::default();
        for rule in self.tools.iter().filter(|r| r.matcher.is_match(exposed)) {
            fn set<T: Clone>(slot: &mut Option<T>, value: &Option<T>) {
                if value.is_some() {
                    slot.clone_from(value);
                }
            }
            set(&mut out.side_effect, &rule.side_effect);
            out.invalidates
                .extend(rule.invalidates.iter().map(|(p, _)| p.clone()));
            set(&mut out.freshness, &rule.freshness);
            set(&mut out.value_class, &rule.value_class);
            set(&mut out.typical_tokens, &rule.typical_tokens);
            set(&mut out.latency_ms, &rule.latency_ms);
            if let Some(f) = &rule.follow_up {
                out.follow_up.clone_from(f);
            }
            set(&mut out.fail_fast_after_n, &rule.fail_fast_after_n);
            set(&mut out.speculate, &rule.speculate);
            set(&mut out.rate_limit_host, &rule.rate_limit_host);
        }
        out
    }

    /// How long a result of the tool exposed as `exposed` may be
    /// referenced: its `freshness_secs`, else the session's TTL.
    pub fn freshness(&self, exposed: &str, session: &SessionSettings) -> Duration {
        self.tools
            .iter()
            .rev()
            .filter(|r| r.matcher.is_match(exposed))
            .find_map(|r| r.freshness)
            .unwrap_or(session.ttl)
    }

    /// Whether any `[tools.*]` rule for `caller` has an `invalidates` list.
    pub fn has_invalidations(&self, caller: &str) -> bool {
        self.tools
            .iter()
            .any(|r| !r.invalidates.is_empty() && r.matcher.is_match(caller))
    }
}

/// The directory a project keeps devboy's committed files in.
pub const PROJECT_DIR_NAME: &str = ".devboy";

/// A project's committed pipeline config, shared by everyone who works on
/// it: `.devboy/pipeline_config.toml` in `start` or the nearest directory
/// above it, looking no higher than the repository's root (the first
/// directory that holds `.git`).
pub fn project_file(start: &Path) -> Option<PathBuf> {
    for dir in start.ancestors() {
        let candidate = dir.join(PROJECT_DIR_NAME).join(FILE_NAME);
        if candidate.is_file() {
            return Some(candidate);
        }
        if dir.join(".git").exists() {
            return None;
        }
    }
    None
}

/// `<config_dir>/pipeline_config.toml`.
pub fn default_file() -> PathBuf {
    crate::paths::config_dir().join(FILE_NAME)
}

/// The pipeline config's file name inside the config directory.
pub const FILE_NAME: &str = "pipeline_config.toml";

impl TokenizerChoice {
    /// The name used in the file: `o200k`, `cl100k`, `chars:4`.
    pub fn name(&self) -> String {
        match self {
            TokenizerChoice::O200k => "o200k".to_owned(),
            TokenizerChoice::Cl100k => "cl100k".to_owned(),
            TokenizerChoice::CharsPerToken(r) => format!("chars:{r}"),
        }
    }
}
