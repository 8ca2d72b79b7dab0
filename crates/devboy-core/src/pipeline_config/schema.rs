//! The description of `pipeline_config.toml`, written once: every section
//! and key with its kind (type and allowed values), default, the schema
//! version that introduced it and a line of documentation.
//!
//! Everything that needs to know the file's shape reads it from here: the
//! loader walks a file by it (strict keys, "did you mean", version 2
//! files refusing version 3 keys, the built-in defaults), `devboy tune`
//! asks it which keys a version 2 file may hold and what a key's default
//! is, and `devboy tune show` prints the sections in its order. The
//! typed structs stay the result: a key's value is read from its field by
//! path with [`PipelineConfig::key_value`] and stored by the reverse,
//! `PipelineConfig::store`, both below.
//!
//! Adding a key: its row in [`KEYS`], its struct field, an arm in each of
//! `key_value` and `store`, and its documented line in the embedded
//! `config/pipeline_config.toml`. Tests fail when the embedded file and
//! [`KEYS`] disagree (a described default missing or different, a key
//! not described) or when a described key is not bound both ways.
//!
//! Paths are dotted (`dedup.near_ref.enabled`); in a table of named
//! tables the name is written `*` (`endpoints.*.dedup`,
//! `profiles.llms.*.models`, `hints.*.enabled`).

use std::fmt;
use std::time::Duration;

use globset::GlobMatcher;

use super::{
    ClientProfile, EnrichmentMode, HintKind, InlineChars, PipelineConfig, Selection,
    SideEffectClass, TokenizerChoice,
};
use crate::value_model::{FollowUp, ValueClass};

/// What a key holds, which is also how the loader reads and checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// `schema_version`, read before everything else.
    Version,
    /// A table of the keys listed under it.
    Section,
    /// A table of tables keyed by a glob over exposed tool names
    /// (`[endpoints."GLOB"]`), applied in file order.
    Patterns,
    /// A table of tables keyed by a profile name (`[profiles.llms.NAME]`);
    /// a built-in name changes the built-in profile.
    Names,
    /// A table of tables keyed by a hint kind (`[hints.ref]`).
    HintKinds,
    /// `true` or `false`.
    Bool,
    /// An integer of at least `min`.
    Count {
        /// The smallest value allowed.
        min: usize,
    },
    /// A number of days: an integer from 1 below 2^32.
    Days,
    /// A number from 0 to 1.
    Fraction,
    /// A non-empty string.
    Text,
    /// An array of glob patterns.
    Globs,
    /// An array of absolute directory paths.
    Paths,
    /// `auto`, `o200k`, `cl100k` or `chars:N`.
    Tokenizer,
    /// `auto`, `structured` or `content`.
    Client,
    /// `auto`, `none` or a number of characters.
    InlineChars,
    /// `auto` or the name of a profile of the sibling table named like the
    /// key plus `s` (`llm` names a `[profiles.llms.NAME]`).
    Selection,
    /// A [`SideEffectClass`] name.
    SideEffect,
    /// A [`ValueClass`] name.
    ValueClass,
    /// An array of `{ tool, probability, args, limit }` tables.
    FollowUps,
    /// An [`EnrichmentMode`] name.
    EnrichmentMode,
}

impl KeyKind {
    /// Whether the key holds a table the loader walks into.
    pub fn is_table(self) -> bool {
        matches!(
            self,
            KeyKind::Section | KeyKind::Patterns | KeyKind::Names | KeyKind::HintKinds
        )
    }
}

/// One section or key of the file.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    /// The dotted path, `*` standing for a table name chosen by the file.
    pub path: &'static str,
    /// What it holds.
    pub kind: KeyKind,
    /// The built-in value as a TOML literal (`None`: unset by default, or
    /// a table).
    pub default: Option<&'static str>,
    /// The schema version that introduced it.
    pub since: u32,
    /// What it does, in a line.
    pub doc: &'static str,
}

impl KeySpec {
    /// The key's own name (the last segment of the path).
    pub fn name(&self) -> &'static str {
        self.path.rsplit('.').next().unwrap_or(self.path)
    }

    /// The path of the table holding it (`""` for the top level).
    pub fn parent(&self) -> &'static str {
        self.path.rsplit_once('.').map_or("", |(p, _)| p)
    }
}

const fn key(
    path: &'static str,
    kind: KeyKind,
    default: Option<&'static str>,
    since: u32,
    doc: &'static str,
) -> KeySpec {
    KeySpec {
        path,
        kind,
        default,
        since,
        doc,
    }
}

/// The smallest `telemetry.max_file_bytes`: a few events per file.
pub const MIN_TELEMETRY_FILE_BYTES: usize = 1024;

/// The keys of one `follow_up` item (an inline table read as a whole).
pub const FOLLOW_UP_KEYS: &[&str] = &["tool", "probability", "args", "limit"];

use KeyKind as K;

/// Every section and key, in the order of the embedded file (which is
/// also the order of error messages' key lists and of `tune show`).
#[rustfmt::skip]
pub const KEYS: &[KeySpec] = &[
    key("schema_version", K::Version, Some("3"), 1, "the schema the file is written in"),
    key("dedup", K::Section, None, 1, "replacing repeats with references"),
    key("dedup.enabled", K::Bool, Some("true"), 1, "replace repeats at all"),
    key("dedup.min_body_bytes", K::Count { min: 1 }, Some("512"), 2, "smaller results pass untouched and get no id"),
    key("dedup.ttl_secs", K::Count { min: 1 }, Some("1800"), 2, "how long after delivery a result may be referenced"),
    key("dedup.max_entries", K::Count { min: 1 }, Some("256"), 2, "how many delivered results are remembered"),
    key("dedup.max_context_bytes", K::Count { min: 1 }, Some("4194304"), 2, "how many bytes of delivered results are remembered"),
    key("dedup.near_ref", K::Section, None, 2, "near-duplicate hints for polling tools"),
    key("dedup.near_ref.enabled", K::Bool, Some("false"), 2, "send a polled near-duplicate as its changes"),
    key("dedup.near_ref.max_changes", K::Count { min: 1 }, Some("8"), 2, "at most this many scalar fields may differ"),
    key("dedup.near_ref.min_body_bytes", K::Count { min: 1 }, Some("1024"), 2, "only bodies at least this large"),
    key("dedup.text_diff", K::Section, None, 2, "re-reads that changed in a few lines, as a diff"),
    key("dedup.text_diff.enabled", K::Bool, Some("true"), 2, "send a changed re-read as a diff against the version the model holds"),
    key("dedup.text_diff.max_share", K::Fraction, Some("0.25"), 2, "only when the diff costs at most this share of the full result"),
    key("encoding", K::Section, None, 2, "lossless re-encoding and the token budget"),
    key("encoding.enabled", K::Bool, Some("true"), 2, "re-encode structured results"),
    key("encoding.budget_tokens", K::Count { min: 100 }, Some("25000"), 2, "the most tokens one result may cost before parts are elided"),
    key("encoding.deadline_ms", K::Count { min: 1 }, Some("2000"), 3, "how long devboy may work on one result before it goes out as it came"),
    key("encoding.inline_chars", K::InlineChars, Some("\"auto\""), 3, "the most characters one result may show inline (auto: the client's own limit)"),
    key("profiles", K::Section, None, 2, "the tokenizer, client, model and profile axes"),
    key("profiles.tokenizer", K::Tokenizer, Some("\"auto\""), 2, "what costs are counted in"),
    key("profiles.client", K::Client, Some("\"auto\""), 2, "what the client shows the model of a result"),
    key("profiles.model", K::Text, None, 3, "the model id to assume when the client reports none"),
    key("profiles.llm", K::Selection, Some("\"auto\""), 3, "which llm profile applies"),
    key("profiles.agent", K::Selection, Some("\"auto\""), 3, "which agent profile applies"),
    key("profiles.llms", K::Names, None, 3, "what a family of models implies"),
    key("profiles.llms.*.models", K::Globs, None, 3, "model id globs"),
    key("profiles.llms.*.tokenizer", K::Tokenizer, None, 3, "the tokenizer for these models"),
    key("profiles.llms.*.budget_tokens", K::Count { min: 100 }, None, 3, "a cap on one result's tokens"),
    key("profiles.agents", K::Names, None, 3, "how a kind of session is served"),
    key("profiles.agents.*.min_events", K::Count { min: 0 }, None, 3, "auto picks it from this many results"),
    key("profiles.agents.*.min_compactions", K::Count { min: 0 }, None, 3, "and this many compactions"),
    key("profiles.agents.*.ttl_secs", K::Count { min: 1 }, None, 3, "overrides dedup.ttl_secs"),
    key("profiles.agents.*.min_body_bytes", K::Count { min: 1 }, None, 3, "overrides dedup.min_body_bytes"),
    key("profiles.agents.*.near_ref", K::Bool, None, 3, "overrides dedup.near_ref.enabled"),
    key("hints", K::HintKinds, None, 3, "which hint kinds may stand in for content"),
    key("hints.*.enabled", K::Bool, Some("true"), 3, "emit this kind at all"),
    key("hints.*.max_per_session", K::Count { min: 0 }, None, 3, "at most this many per session"),
    key("hints.*.models", K::Globs, None, 3, "only for these model ids"),
    key("enrichment", K::Section, None, 3, "read-only speculation: calling the likely next tool ahead of the agent"),
    key("enrichment.enabled", K::Bool, Some("true"), 3, "speculate at all (on local tools)"),
    key("enrichment.remote", K::Bool, Some("false"), 3, "also on tools that reach a remote service"),
    key("enrichment.mode", K::EnrichmentMode, Some("\"prefetch\""), 3, "prefetch: answer the agent's own call; inline: attach to the result"),
    key("enrichment.prefetch_timeout_ms", K::Count { min: 1 }, Some("2000"), 3, "how long a prefetch may take"),
    key("enrichment.max_parallel", K::Count { min: 1 }, Some("3"), 3, "prefetches at once"),
    key("enrichment.per_host", K::Count { min: 1 }, Some("3"), 3, "prefetches at once per upstream or rate-limit host"),
    key("enrichment.budget_tokens", K::Count { min: 0 }, Some("8000"), 3, "tokens prefetched results may cost"),
    key("enrichment.min_probability", K::Fraction, Some("0.3"), 3, "only follow-ups at least this likely"),
    key("enrichment.ttl_secs", K::Count { min: 1 }, Some("60"), 3, "how long a landed prefetch may answer"),
    key("explore", K::Section, None, 3, "the built-in devboy_explore tool"),
    key("explore.adaptive", K::Bool, Some("true"), 3, "off-flow family members as signatures only"),
    key("explore.budget_chars", K::Count { min: 1000 }, Some("16000"), 3, "the size an answer aims for"),
    key("explore.allowed_roots", K::Paths, None, 3, "directories the code tools may read besides the project and the client's roots"),
    key("telemetry", K::Section, None, 1, "the anonymous events devboy tune learns from"),
    key("telemetry.enabled", K::Bool, Some("true"), 1, "write events at all"),
    key("telemetry.sample_rate", K::Fraction, Some("1.0"), 1, "the fraction of result events kept"),
    key("telemetry.max_file_bytes", K::Count { min: MIN_TELEMETRY_FILE_BYTES }, Some("16777216"), 2, "an events file is rotated at this size"),
    key("telemetry.max_age_days", K::Days, Some("30"), 2, "older events files are deleted"),
    key("endpoints", K::Patterns, None, 2, "per-endpoint overrides by exposed-name glob"),
    key("endpoints.*.dedup", K::Bool, None, 2, "overrides dedup.enabled"),
    key("endpoints.*.min_body_bytes", K::Count { min: 1 }, None, 2, "overrides dedup.min_body_bytes"),
    key("endpoints.*.near_ref", K::Bool, None, 2, "overrides dedup.near_ref.enabled"),
    key("endpoints.*.encode", K::Bool, None, 2, "overrides encoding.enabled"),
    key("endpoints.*.template", K::Text, None, 2, "the template to use (auto: the router's choice)"),
    key("tools", K::Patterns, None, 2, "per-tool value models by exposed-name glob"),
    key("tools.*.side_effect", K::SideEffect, None, 2, "what a call does to the world"),
    key("tools.*.invalidates", K::Globs, None, 2, "endpoints whose remembered results a call forgets"),
    key("tools.*.freshness_secs", K::Count { min: 1 }, None, 3, "how long its results may be referenced"),
    key("tools.*.value_class", K::ValueClass, None, 3, "what its result is worth"),
    key("tools.*.typical_tokens", K::Count { min: 0 }, None, 3, "a typical result's cost in tokens"),
    key("tools.*.latency_ms", K::Count { min: 0 }, None, 3, "a typical call's latency"),
    key("tools.*.follow_up", K::FollowUps, None, 3, "calls that often follow"),
    key("tools.*.fail_fast_after_n", K::Count { min: 1 }, None, 3, "stop repeating after this many empty results"),
    key("tools.*.speculate", K::Bool, None, 3, "may be called ahead of the agent"),
    key("tools.*.rate_limit_host", K::Text, None, 3, "the host whose rate limit its calls share"),
];

/// A key of schema version 1, which still loads, migrated in memory:
/// where its value goes now, and what the loader tells the user.
#[derive(Clone, Copy, Debug)]
pub struct V1Key {
    /// The dotted path in a version 1 file (`*`: a name the file chose).
    pub path: &'static str,
    /// What it holds.
    pub kind: KeyKind,
    /// The key of [`KEYS`] its value is stored as (`None`: dropped, or a
    /// table).
    pub to: Option<&'static str>,
    /// The warning a file using it gets (empty: none, the key kept its
    /// name and meaning).
    pub note: &'static str,
}

impl V1Key {
    /// The key's own name.
    pub fn name(&self) -> &'static str {
        self.path.rsplit('.').next().unwrap_or(self.path)
    }

    /// The path of the table holding it.
    pub fn parent(&self) -> &'static str {
        self.path.rsplit_once('.').map_or("", |(p, _)| p)
    }
}

const fn v1(
    path: &'static str,
    kind: KeyKind,
    to: Option<&'static str>,
    note: &'static str,
) -> V1Key {
    V1Key {
        path,
        kind,
        to,
        note,
    }
}

/// Schema version 1 (the first design's flat knobs) and where each went. A
/// character is at least a byte, so reading `min_body_chars` as bytes
/// gives no body a reference version 1 would have skipped.
#[rustfmt::skip]
pub const V1_KEYS: &[V1Key] = &[
    v1("schema_version", K::Version, None, ""),
    v1("dedup", K::Section, None, ""),
    v1("dedup.enabled", K::Bool, Some("dedup.enabled"), ""),
    v1("dedup.lru_size", K::Count { min: 1 }, Some("dedup.max_entries"), "read as dedup.max_entries"),
    v1("dedup.min_body_chars", K::Count { min: 1 }, Some("dedup.min_body_bytes"), "read as dedup.min_body_bytes"),
    v1("dedup.enabled_per_endpoint", K::Patterns, None, "read as [endpoints.\"…\"] dedup"),
    v1("dedup.enabled_per_endpoint.*", K::Bool, Some("endpoints.*.dedup"), ""),
    v1("templates", K::Section, None, ""),
    v1("templates.endpoint_overrides", K::Patterns, None, "read as [endpoints.\"…\"] template"),
    v1("templates.endpoint_overrides.*", K::Text, Some("endpoints.*.template"), ""),
    v1("mckp", K::Section, None, ""),
    v1("mckp.recursion_depth", K::Count { min: 1 }, None, "no longer used (the router needs no depth limit)"),
    v1("mckp.budget_tokens", K::Count { min: 100 }, Some("encoding.budget_tokens"), "read as encoding.budget_tokens"),
    v1("telemetry", K::Section, None, ""),
    v1("telemetry.enabled", K::Bool, Some("telemetry.enabled"), ""),
    v1("telemetry.sample_rate", K::Fraction, Some("telemetry.sample_rate"), ""),
];

/// The section or key at `path`.
pub fn lookup(path: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.path == path)
}

/// The keys directly inside the table at `parent` (`""`: the top level),
/// in file order.
pub fn children(parent: &str) -> impl Iterator<Item = &'static KeySpec> + '_ {
    KEYS.iter().filter(move |k| k.parent() == parent)
}

/// A key's value in a loaded config, typed by its [`KeyKind`]; also what
/// the loader reads before it stores a value. Displays as `tune show`
/// prints it (strings quoted, as in the file).
#[derive(Clone, Debug)]
pub enum KeyValue {
    /// [`KeyKind::Bool`].
    Bool(bool),
    /// [`KeyKind::Count`] and [`KeyKind::Days`].
    Count(usize),
    /// [`KeyKind::Fraction`].
    Fraction(f64),
    /// [`KeyKind::Text`].
    Text(String),
    /// [`KeyKind::Globs`]: the patterns as written, with their matchers.
    Globs(Vec<(String, GlobMatcher)>),
    /// [`KeyKind::Paths`].
    Paths(Vec<std::path::PathBuf>),
    /// [`KeyKind::Tokenizer`] (`None`: `auto`).
    Tokenizer(Option<TokenizerChoice>),
    /// [`KeyKind::Client`].
    Client(ClientProfile),
    /// [`KeyKind::InlineChars`].
    InlineChars(InlineChars),
    /// [`KeyKind::Selection`].
    Selection(Selection),
    /// [`KeyKind::SideEffect`].
    SideEffect(SideEffectClass),
    /// [`KeyKind::ValueClass`].
    ValueClass(ValueClass),
    /// [`KeyKind::FollowUps`].
    FollowUps(Vec<FollowUp>),
    /// [`KeyKind::EnrichmentMode`].
    EnrichmentMode(EnrichmentMode),
}

impl fmt::Display for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyValue::Bool(b) => write!(f, "{b}"),
            KeyValue::Count(n) => write!(f, "{n}"),
            KeyValue::Fraction(x) => write!(f, "{x}"),
            KeyValue::Text(s) => write!(f, "\"{s}\""),
            KeyValue::Globs(globs) => {
                let list: Vec<&str> = globs.iter().map(|(p, _)| p.as_str()).collect();
                write!(f, "[{}]", list.join(", "))
            }
            KeyValue::Paths(paths) => {
                let list: Vec<String> = paths
                    .iter()
                    .map(|p| format!("{:?}", p.display().to_string()))
                    .collect();
                write!(f, "[{}]", list.join(", "))
            }
            KeyValue::Tokenizer(t) => f.write_str(&t.map_or("auto".to_owned(), |t| t.name())),
            KeyValue::Client(c) => f.write_str(c.name()),
            KeyValue::InlineChars(c) => f.write_str(&c.name()),
            KeyValue::Selection(s) => f.write_str(s.name()),
            KeyValue::SideEffect(s) => f.write_str(s.name()),
            KeyValue::ValueClass(c) => f.write_str(c.name()),
            KeyValue::EnrichmentMode(m) => write!(f, "\"{}\"", m.name()),
            KeyValue::FollowUps(links) => {
                let items: Vec<String> = links.iter().map(follow_up_text).collect();
                write!(f, "[{}]", items.join(", "))
            }
        }
    }
}

/// One `follow_up` item as written in the file.
fn follow_up_text(l: &FollowUp) -> String {
    let args: Vec<String> = l
        .args
        .iter()
        .map(|(a, source)| format!("{a} = {source}"))
        .collect();
    let args = if args.is_empty() {
        String::new()
    } else {
        format!(", args = {{ {} }}", args.join(", "))
    };
    let limit = if l.limit == FollowUp::DEFAULT_LIMIT {
        String::new()
    } else {
        format!(", limit = {}", l.limit)
    };
    format!(
        "{{ tool = \"{}\", probability = {:?}{args}{limit} }}",
        l.tool, l.probability
    )
}

impl KeyValue {
    /// `None` for an empty glob list (a list that sets nothing).
    fn non_empty(self) -> Option<Self> {
        match &self {
            KeyValue::Globs(g) if g.is_empty() => None,
            KeyValue::Paths(p) if p.is_empty() => None,
            _ => Some(self),
        }
    }
}

impl PipelineConfig {
    /// The value of the key at `path` (a path of [`KEYS`]): for a path
    /// through a table of named tables, of the `at`-th one (the `at`-th
    /// `[endpoints.*]` rule or profile; [`HintKind::index`] for
    /// `hints.*`); `at` is ignored otherwise. `None`: the key is not set,
    /// or names no value.
    pub fn key_value(&self, path: &str, at: usize) -> Option<KeyValue> {
        use KeyValue as S;
        let d = &self.dedup;
        let secs = |t: Duration| S::Count(t.as_secs() as usize);
        let hint = || HintKind::ALL.get(at).map(|k| self.hints.rule(*k));
        let llm = || self.profiles.llms.get(at);
        let agent = || self.profiles.agents.get(at);
        let endpoint = || self.endpoints.get(at);
        let tool = || self.tools.get(at);
        Some(match path {
            "dedup.enabled" => S::Bool(d.enabled),
            "dedup.min_body_bytes" => S::Count(d.min_body_bytes),
            "dedup.ttl_secs" => secs(d.ttl),
            "dedup.max_entries" => S::Count(d.max_entries),
            "dedup.max_context_bytes" => S::Count(d.max_context_bytes),
            "dedup.near_ref.enabled" => S::Bool(d.near_ref.enabled),
            "dedup.near_ref.max_changes" => S::Count(d.near_ref.max_changes),
            "dedup.near_ref.min_body_bytes" => S::Count(d.near_ref.min_body_bytes),
            "dedup.text_diff.enabled" => S::Bool(d.text_diff.enabled),
            "dedup.text_diff.max_share" => S::Fraction(d.text_diff.max_share),
            "encoding.enabled" => S::Bool(self.encoding.enabled),
            "encoding.budget_tokens" => S::Count(self.encoding.budget_tokens),
            "encoding.deadline_ms" => S::Count(self.encoding.deadline.as_millis() as usize),
            "encoding.inline_chars" => S::InlineChars(self.encoding.inline_chars),
            "profiles.tokenizer" => S::Tokenizer(self.tokenizer),
            "profiles.client" => S::Client(self.client),
            "profiles.model" => S::Text(self.profiles.model.clone()?),
            "profiles.llm" => S::Selection(self.profiles.llm.clone()),
            "profiles.agent" => S::Selection(self.profiles.agent.clone()),
            "profiles.llms.*.models" => S::Globs(llm()?.models.clone()).non_empty()?,
            "profiles.llms.*.tokenizer" => S::Tokenizer(Some(llm()?.tokenizer?)),
            "profiles.llms.*.budget_tokens" => S::Count(llm()?.budget_tokens?),
            "profiles.agents.*.min_events" => S::Count(agent()?.min_events? as usize),
            "profiles.agents.*.min_compactions" => S::Count(agent()?.min_compactions? as usize),
            "profiles.agents.*.ttl_secs" => secs(agent()?.ttl?),
            "profiles.agents.*.min_body_bytes" => S::Count(agent()?.min_body_bytes?),
            "profiles.agents.*.near_ref" => S::Bool(agent()?.near_ref?),
            "hints.*.enabled" => S::Bool(hint()?.enabled),
            "hints.*.max_per_session" => S::Count(hint()?.max_per_session? as usize),
            "hints.*.models" => S::Globs(hint()?.models.clone()).non_empty()?,
            "enrichment.enabled" => S::Bool(self.enrichment.enabled),
            "enrichment.remote" => S::Bool(self.enrichment.remote),
            "enrichment.mode" => S::EnrichmentMode(self.enrichment.mode),
            "enrichment.per_host" => S::Count(self.enrichment.per_host),
            "enrichment.ttl_secs" => secs(self.enrichment.ttl),
            "enrichment.prefetch_timeout_ms" => {
                S::Count(self.enrichment.prefetch_timeout.as_millis() as usize)
            }
            "enrichment.max_parallel" => S::Count(self.enrichment.max_parallel),
            "enrichment.budget_tokens" => S::Count(self.enrichment.budget_tokens),
            "enrichment.min_probability" => S::Fraction(self.enrichment.min_probability),
            "explore.adaptive" => S::Bool(self.explore.adaptive),
            "explore.budget_chars" => S::Count(self.explore.budget_chars),
            "explore.allowed_roots" => S::Paths(self.explore.allowed_roots.clone()).non_empty()?,
            "telemetry.enabled" => S::Bool(self.telemetry.enabled),
            "telemetry.sample_rate" => S::Fraction(self.telemetry.sample_rate),
            "telemetry.max_file_bytes" => S::Count(self.telemetry.max_file_bytes as usize),
            "telemetry.max_age_days" => S::Count(self.telemetry.max_age_days as usize),
            "endpoints.*.dedup" => S::Bool(endpoint()?.dedup?),
            "endpoints.*.min_body_bytes" => S::Count(endpoint()?.min_body_bytes?),
            "endpoints.*.near_ref" => S::Bool(endpoint()?.near_ref?),
            "endpoints.*.encode" => S::Bool(endpoint()?.encode?),
            "endpoints.*.template" => S::Text(endpoint()?.template.clone()?),
            "tools.*.side_effect" => S::SideEffect(tool()?.side_effect?),
            "tools.*.invalidates" => S::Globs(tool()?.invalidates.clone()).non_empty()?,
            "tools.*.freshness_secs" => secs(tool()?.freshness?),
            "tools.*.value_class" => S::ValueClass(tool()?.value_class?),
            "tools.*.typical_tokens" => S::Count(tool()?.typical_tokens?),
            "tools.*.latency_ms" => S::Count(tool()?.latency_ms? as usize),
            "tools.*.follow_up" => S::FollowUps(tool()?.follow_up.clone()?),
            "tools.*.fail_fast_after_n" => S::Count(tool()?.fail_fast_after_n?),
            "tools.*.speculate" => S::Bool(tool()?.speculate?),
            "tools.*.rate_limit_host" => S::Text(tool()?.rate_limit_host.clone()?),
            _ => return None,
        })
    }

    /// Stores `value` in the field of the key at `path`, in the `at`-th
    /// named table where the path has one (as for [`Self::key_value`], its
    /// reverse); `false` when the path and kind name no field (a test
    /// keeps every described key bound both ways). The loader calls it
    /// with values it has checked.
    pub(super) fn store(&mut self, path: &str, at: usize, value: KeyValue) -> bool {
        use KeyValue as S;
        let c = self;
        let secs = |n: usize| Duration::from_secs(n as u64);
        let hint = HintKind::ALL.get(at).copied().unwrap_or(HintKind::Ref);
        match (path, value) {
            ("dedup.enabled", S::Bool(v)) => c.dedup.enabled = v,
            ("dedup.min_body_bytes", S::Count(n)) => c.dedup.min_body_bytes = n,
            ("dedup.ttl_secs", S::Count(n)) => c.dedup.ttl = secs(n),
            ("dedup.max_entries", S::Count(n)) => c.dedup.max_entries = n,
            ("dedup.max_context_bytes", S::Count(n)) => c.dedup.max_context_bytes = n,
            ("dedup.near_ref.enabled", S::Bool(v)) => c.dedup.near_ref.enabled = v,
            ("dedup.near_ref.max_changes", S::Count(n)) => c.dedup.near_ref.max_changes = n,
            ("dedup.near_ref.min_body_bytes", S::Count(n)) => c.dedup.near_ref.min_body_bytes = n,
            ("dedup.text_diff.enabled", S::Bool(v)) => c.dedup.text_diff.enabled = v,
            ("dedup.text_diff.max_share", S::Fraction(x)) => c.dedup.text_diff.max_share = x,
            ("encoding.enabled", S::Bool(v)) => c.encoding.enabled = v,
            ("encoding.budget_tokens", S::Count(n)) => c.encoding.budget_tokens = n,
            ("encoding.deadline_ms", S::Count(n)) => {
                c.encoding.deadline = std::time::Duration::from_millis(n as u64)
            }
            ("encoding.inline_chars", S::InlineChars(v)) => c.encoding.inline_chars = v,
            ("profiles.tokenizer", S::Tokenizer(t)) => c.tokenizer = t,
            ("profiles.client", S::Client(v)) => c.client = v,
            ("profiles.model", S::Text(s)) => c.profiles.model = Some(s),
            ("profiles.llm", S::Selection(s)) => c.profiles.llm = s,
            ("profiles.agent", S::Selection(s)) => c.profiles.agent = s,
            ("profiles.llms.*.models", S::Globs(g)) => c.profiles.llms[at].models = g,
            ("profiles.llms.*.tokenizer", S::Tokenizer(t)) => c.profiles.llms[at].tokenizer = t,
            ("profiles.llms.*.budget_tokens", S::Count(n)) => {
                c.profiles.llms[at].budget_tokens = Some(n);
            }
            ("profiles.agents.*.min_events", S::Count(n)) => {
                c.profiles.agents[at].min_events = Some(n as u64);
            }
            ("profiles.agents.*.min_compactions", S::Count(n)) => {
                c.profiles.agents[at].min_compactions = Some(n as u64);
            }
            ("profiles.agents.*.ttl_secs", S::Count(n)) => {
                c.profiles.agents[at].ttl = Some(secs(n))
            }
            ("profiles.agents.*.min_body_bytes", S::Count(n)) => {
                c.profiles.agents[at].min_body_bytes = Some(n);
            }
            ("profiles.agents.*.near_ref", S::Bool(v)) => c.profiles.agents[at].near_ref = Some(v),
            ("hints.*.enabled", S::Bool(v)) => c.hints.rule_mut(hint).enabled = v,
            ("hints.*.max_per_session", S::Count(n)) => {
                c.hints.rule_mut(hint).max_per_session = Some(n as u64);
            }
            ("hints.*.models", S::Globs(g)) => c.hints.rule_mut(hint).models = g,
            ("enrichment.enabled", S::Bool(v)) => c.enrichment.enabled = v,
            ("enrichment.remote", S::Bool(v)) => c.enrichment.remote = v,
            ("enrichment.mode", S::EnrichmentMode(m)) => c.enrichment.mode = m,
            ("enrichment.per_host", S::Count(n)) => c.enrichment.per_host = n,
            ("enrichment.ttl_secs", S::Count(n)) => c.enrichment.ttl = secs(n),
            ("enrichment.prefetch_timeout_ms", S::Count(n)) => {
                c.enrichment.prefetch_timeout = Duration::from_millis(n as u64);
            }
            ("enrichment.max_parallel", S::Count(n)) => c.enrichment.max_parallel = n,
            ("enrichment.budget_tokens", S::Count(n)) => c.enrichment.budget_tokens = n,
            ("enrichment.min_probability", S::Fraction(x)) => c.enrichment.min_probability = x,
            ("explore.adaptive", S::Bool(v)) => c.explore.adaptive = v,
            ("explore.budget_chars", S::Count(n)) => c.explore.budget_chars = n,
            ("explore.allowed_roots", S::Paths(p)) => c.explore.allowed_roots = p,
            ("telemetry.enabled", S::Bool(v)) => c.telemetry.enabled = v,
            ("telemetry.sample_rate", S::Fraction(x)) => c.telemetry.sample_rate = x,
            ("telemetry.max_file_bytes", S::Count(n)) => c.telemetry.max_file_bytes = n as u64,
            // The loader checked that it fits.
            ("telemetry.max_age_days", S::Count(n)) => {
                c.telemetry.max_age_days = u32::try_from(n).unwrap_or(u32::MAX);
            }
            ("endpoints.*.dedup", S::Bool(v)) => c.endpoints[at].dedup = Some(v),
            ("endpoints.*.min_body_bytes", S::Count(n)) => c.endpoints[at].min_body_bytes = Some(n),
            ("endpoints.*.near_ref", S::Bool(v)) => c.endpoints[at].near_ref = Some(v),
            ("endpoints.*.encode", S::Bool(v)) => c.endpoints[at].encode = Some(v),
            ("endpoints.*.template", S::Text(s)) => c.endpoints[at].template = Some(s),
            ("tools.*.side_effect", S::SideEffect(v)) => c.tools[at].side_effect = Some(v),
            ("tools.*.invalidates", S::Globs(g)) => c.tools[at].invalidates = g,
            ("tools.*.freshness_secs", S::Count(n)) => c.tools[at].freshness = Some(secs(n)),
            ("tools.*.value_class", S::ValueClass(v)) => c.tools[at].value_class = Some(v),
            ("tools.*.typical_tokens", S::Count(n)) => c.tools[at].typical_tokens = Some(n),
            ("tools.*.latency_ms", S::Count(n)) => c.tools[at].latency_ms = Some(n as u64),
            ("tools.*.follow_up", S::FollowUps(f)) => c.tools[at].follow_up = Some(f),
            ("tools.*.fail_fast_after_n", S::Count(n)) => c.tools[at].fail_fast_after_n = Some(n),
            ("tools.*.speculate", S::Bool(v)) => c.tools[at].speculate = Some(v),
            ("tools.*.rate_limit_host", S::Text(s)) => c.tools[at].rate_limit_host = Some(s),
            _ => return false,
        }
        true
    }
}
