//! Reading `pipeline_config.toml`: a walk over the parsed tree guided by
//! the description of the file ([`schema::KEYS`]), the version check, and
//! the migration from schema version 1.
//!
//! The walk checks every table's keys against the description, reads each
//! value by its [`KeyKind`] into a [`KeyValue`], and
//! [`PipelineConfig::store`] puts it in its field.
//!
//! A key that is unknown, has a value of the wrong kind, or is new in a
//! later schema version than the file's is not stored: it becomes one of
//! [`PipelineConfig::problems`] and the walk goes on, so that every bad key
//! is reported at once and the good ones apply. Only what makes the whole
//! file unreadable is an error: TOML syntax, and a `schema_version` this
//! devboy cannot read the file by.

use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobMatcher};

use super::schema::{self, KeyKind, KeySpec, KeyValue, FOLLOW_UP_KEYS};
use super::{
    AgentProfile, ClientProfile, DedupSettings, EncodingSettings, EndpointRule, EnrichmentMode,
    EnrichmentSettings, ExploreSettings, HintKind, HintsPolicy, InlineChars, LlmProfile,
    NearRefSettings, PipelineConfig, Profiles, Selection, SideEffectClass, TelemetrySettings,
    TextDiffSettings, TokenizerChoice, ToolRule, SCHEMA_VERSION,
};
use crate::config::keypath::{closest, KeyPath};
use crate::config::tree::{self, describe, Entry, Node, Value};
use crate::config::{ConfigError, ConfigErrorKind, ConfigFormat, ConfigSource};
use crate::value_model::{ArgSource, FollowUp, ValueClass};

type Result<T> = std::result::Result<T, ConfigError>;

const SIDE_EFFECTS: &[&str] = &["pure", "read_only", "mutating", "destructive", "unknown"];

/// Every setting at its built-in default: the description's defaults
/// stored by the loader's own [`PipelineConfig::store`] (the embedded file says the same;
/// a test keeps it so).
pub(super) fn defaults() -> PipelineConfig {
    let mut config = blank();
    let origin = Path::new("<built-in defaults>");
    for key in schema::KEYS.iter().filter(|k| !k.path.contains('*')) {
        let Some(literal) = key.default else {
            continue;
        };
        // A test reads every default; a literal that did not read would
        // leave the blank value.
        if let Ok(Some(value)) = read_literal(key, literal, origin, &config) {
            config.store(key.path, 0, value);
        }
    }
    config
}

/// A TOML literal (a default of the description) read as the loader reads
/// the key (`None` for `schema_version`, which is not stored).
pub(super) fn read_literal(
    key: &KeySpec,
    literal: &str,
    origin: &Path,
    config: &PipelineConfig,
) -> Result<Option<KeyValue>> {
    // A position in the made-up line would point nowhere in the file.
    let root = tree::parse_toml(&format!("v = {literal}"))
        .map_err(|e| tree::SyntaxError { pos: None, ..e }.in_file(origin, ConfigFormat::Toml))?;
    let mut reader = Reader {
        origin,
        config: config.clone(),
        yield_to: None,
    };
    let path = KeyPath::default().key(key.name());
    let entries = reader.table(&root, &path)?;
    let Some(entry) = entries.first() else {
        return Ok(None);
    };
    match key.kind {
        KeyKind::Selection => Ok(Some(KeyValue::Selection(reader.selection(
            key,
            &entry.node,
            &path,
        )?))),
        kind if kind.is_table() || kind == KeyKind::Version => Ok(None),
        kind => reader.value(kind, &entry.node, &path).map(Some),
    }
}

/// The structs before any key is stored: zeros, and the built-in profiles.
fn blank() -> PipelineConfig {
    PipelineConfig {
        source: ConfigSource::Embedded,
        file_version: SCHEMA_VERSION,
        dedup: DedupSettings {
            enabled: false,
            min_body_bytes: 0,
            ttl: Duration::ZERO,
            max_entries: 0,
            max_context_bytes: 0,
            near_ref: NearRefSettings {
                enabled: false,
                max_changes: 0,
                min_body_bytes: 0,
            },
            text_diff: TextDiffSettings {
                enabled: false,
                max_share: 0.0,
            },
        },
        encoding: EncodingSettings {
            enabled: false,
            budget_tokens: 0,
            deadline: std::time::Duration::ZERO,
            inline_chars: InlineChars::Auto,
        },
        tokenizer: None,
        client: ClientProfile::Auto,
        profiles: Profiles {
            model: None,
            llm: Selection::Auto,
            agent: Selection::Auto,
            llms: builtin_llms(),
            agents: builtin_agents(),
        },
        hints: HintsPolicy::default(),
        enrichment: EnrichmentSettings {
            enabled: false,
            remote: false,
            mode: EnrichmentMode::Prefetch,
            prefetch_timeout: Duration::ZERO,
            max_parallel: 0,
            per_host: 0,
            budget_tokens: 0,
            min_probability: 0.0,
            ttl: Duration::ZERO,
        },
        explore: ExploreSettings {
            adaptive: false,
            budget_chars: 0,
            allowed_roots: Vec::new(),
        },
        telemetry: TelemetrySettings {
            enabled: false,
            sample_rate: 0.0,
            max_file_bytes: 0,
            max_age_days: 0,
        },
        endpoints: Vec::new(),
        tools: Vec::new(),
        warnings: Vec::new(),
        problems: Vec::new(),
        layers: Vec::new(),
        key_origins: Default::default(),
    }
}

/// A glob known to be valid.
fn matcher(pattern: &str) -> (String, GlobMatcher) {
    let glob = Glob::new(pattern).unwrap_or_else(|_| Glob::new("").expect("empty glob"));
    (pattern.to_owned(), glob.compile_matcher())
}

/// The llm profiles every config has (the embedded file shows them).
/// Claude's tokenizer is not public; o200k is the documented stand-in.
/// OpenAI ids (behind a gateway) get their published tokenizers.
fn builtin_llms() -> Vec<LlmProfile> {
    let profile = |name: &str, models: &[&str], tokenizer| LlmProfile {
        name: name.to_owned(),
        models: models.iter().map(|m| matcher(m)).collect(),
        tokenizer: Some(tokenizer),
        budget_tokens: None,
    };
    vec![
        profile("claude", &["*claude*"], TokenizerChoice::O200k),
        profile(
            "openai_o200k",
            &[
                "gpt-4o*",
                "chatgpt-4o*",
                "gpt-4.1*",
                "gpt-5*",
                "o1*",
                "o3*",
                "o4*",
            ],
            TokenizerChoice::O200k,
        ),
        profile(
            "openai_cl100k",
            &["gpt-4", "gpt-4-*", "gpt-3.5*"],
            TokenizerChoice::Cl100k,
        ),
    ]
}

/// The agent profiles every config has: `marathon`, for sessions whose
/// compactions devboy is told about (so the partition, not the clock,
/// says what left the context): references live longer, and polled
/// near-duplicates are sent as their changes.
fn builtin_agents() -> Vec<AgentProfile> {
    vec![AgentProfile {
        name: "marathon".to_owned(),
        min_events: None,
        min_compactions: Some(2),
        ttl: Some(Duration::from_secs(2 * 60 * 60)),
        min_body_bytes: None,
        near_ref: Some(true),
    }]
}

pub(super) fn parse(text: &str, origin: &Path) -> Result<PipelineConfig> {
    parse_onto(defaults(), text, origin)
}

/// Reads `text` into `base`: the keys it sets replace `base`'s, its rules
/// come after `base`'s.
///
/// Over a file (`base` read from one), a value equal to the built-in
/// default does not replace one that file set: the file `devboy tune`
/// first writes is the documented default, which sets every key, and
/// must not undo a project's committed settings.
pub(super) fn parse_onto(
    base: PipelineConfig,
    text: &str,
    origin: &Path,
) -> Result<PipelineConfig> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root = tree::parse_toml(text).map_err(|e| e.in_file(origin, ConfigFormat::Toml))?;
    let yield_to = (!base.layers.is_empty()).then(defaults);
    let mut reader = Reader {
        origin,
        config: base,
        yield_to,
    };
    let entries = reader.table(&root, &KeyPath::default())?;
    let version = reader.version(entries)?;
    reader.config.file_version = version;
    match version {
        1 => reader.v1(&root)?,
        _ => reader.current(&root, version)?,
    }
    Ok(reader.config)
}

struct Reader<'a> {
    origin: &'a Path,
    config: PipelineConfig,
    /// When reading over another file: the built-in defaults, whose
    /// values do not replace what that file set.
    yield_to: Option<PipelineConfig>,
}

impl Reader<'_> {
    // ------------------------------------------------------------ errors

    fn invalid(&self, path: &KeyPath, node: &Node, expected: &str) -> ConfigError {
        ConfigError::new(
            self.origin,
            node.pos.map(|p| (p.line, p.column)),
            ConfigErrorKind::Invalid {
                key: path.to_string(),
                expected: expected.to_owned(),
                found: describe(&node.value, "a table"),
            },
        )
    }

    fn unknown_key(&self, entry: &Entry, path: &KeyPath, allowed: &[&str]) -> ConfigError {
        ConfigError::new(
            self.origin,
            entry.key_pos.map(|p| (p.line, p.column)),
            ConfigErrorKind::UnknownKey {
                key: path.key(&entry.key).to_string(),
                expected: allowed.iter().map(|s| (*s).to_owned()).collect(),
                suggestion: closest(&entry.key, allowed).map(str::to_owned),
            },
        )
    }

    /// The first key of `entries` not among `allowed`, for a value read
    /// whole (a `follow_up` item): one bad part makes the value bad.
    fn check_keys(&self, entries: &[Entry], path: &KeyPath, allowed: &[&str]) -> Result<()> {
        match entries.iter().find(|e| !allowed.contains(&e.key.as_str())) {
            None => Ok(()),
            Some(entry) => Err(self.unknown_key(entry, path, allowed)),
        }
    }

    /// Records `error` as a problem of the file: what it names is left out,
    /// and what applies without it (the layer below, else the default)
    /// applies.
    fn skip(&mut self, error: ConfigError) {
        self.config.problems.push(format!("{error}; ignored"));
    }

    fn warn(&mut self, path: &KeyPath, message: impl std::fmt::Display) {
        let line = format!("{}: {path}: {message}", self.origin.display());
        self.config.warnings.push(line);
    }

    // ------------------------------------------------------------ typed reads

    fn table<'n>(&self, node: &'n Node, path: &KeyPath) -> Result<&'n [Entry]> {
        node.as_table()
            .ok_or_else(|| self.invalid(path, node, "a table"))
    }

    fn boolean(&self, node: &Node, path: &KeyPath) -> Result<bool> {
        match node.value {
            Value::Bool(b) => Ok(b),
            _ => Err(self.invalid(path, node, "true or false")),
        }
    }

    /// A non-negative integer, at least `min`.
    fn count(&self, node: &Node, path: &KeyPath, min: usize) -> Result<usize> {
        let expected = if min == 0 {
            "a non-negative integer".to_owned()
        } else {
            format!("an integer of at least {min}")
        };
        match node.value {
            Value::Integer(n) => usize::try_from(n)
                .ok()
                .filter(|n| *n >= min)
                .ok_or_else(|| self.invalid(path, node, &expected)),
            _ => Err(self.invalid(path, node, &expected)),
        }
    }

    /// A number from 0 to 1 (an integer 0 or 1 counts).
    fn fraction(&self, node: &Node, path: &KeyPath) -> Result<f64> {
        let value = match node.value {
            Value::Float(f) => f,
            Value::Integer(n) => n as f64,
            _ => f64::NAN,
        };
        if (0.0..=1.0).contains(&value) {
            Ok(value)
        } else {
            Err(self.invalid(path, node, "a number from 0 to 1"))
        }
    }

    fn string<'n>(&self, node: &'n Node, path: &KeyPath) -> Result<&'n str> {
        match &node.value {
            Value::String(s) if !s.is_empty() => Ok(s),
            _ => Err(self.invalid(path, node, "a non-empty string")),
        }
    }

    fn glob(&self, pattern: &str, node: &Node, path: &KeyPath) -> Result<GlobMatcher> {
        Glob::new(pattern)
            .map(|g| g.compile_matcher())
            .map_err(|e| {
                ConfigError::new(
                    self.origin,
                    node.pos.map(|p| (p.line, p.column)),
                    ConfigErrorKind::Invalid {
                        key: path.to_string(),
                        expected: "a glob pattern (`*`, `?`, `[abc]`, `{a,b}`)".to_owned(),
                        found: format!("{pattern:?} ({})", e.kind()),
                    },
                )
            })
    }

    fn version(&self, entries: &[Entry]) -> Result<u32> {
        let Some(entry) = entries.iter().find(|e| e.key == "schema_version") else {
            return Ok(SCHEMA_VERSION);
        };
        let path = KeyPath::default().key("schema_version");
        let node = &entry.node;
        let expected = format!("a schema version from 1 to {SCHEMA_VERSION}");
        let Value::Integer(n) = node.value else {
            return Err(self.invalid(&path, node, &expected));
        };
        match u32::try_from(n) {
            Ok(v @ 1..=SCHEMA_VERSION) => Ok(v),
            Ok(v) if v > SCHEMA_VERSION => Err(ConfigError::new(
                self.origin,
                node.pos.map(|p| (p.line, p.column)),
                ConfigErrorKind::Invalid {
                    key: path.to_string(),
                    expected: format!(
                        "a schema version this devboy understands (1 to {SCHEMA_VERSION})"
                    ),
                    found: format!(
                        "version {v}, written by a newer devboy; upgrade devboy, or remove the file to use the defaults"
                    ),
                },
            )),
            _ => Err(self.invalid(&path, node, &expected)),
        }
    }

    // ------------------------------------------------------------ versions 2 and 3

    /// Version 3, or version 2, which is version 3 without the keys the
    /// description says came in version 3 (the profile axes, `[hints]`,
    /// `[enrichment]`, the value-model keys of `[tools.*]`): a version 2
    /// file means what it always meant, and a key only version 3 knows is
    /// reported as such.
    fn current(&mut self, root: &Node, version: u32) -> Result<()> {
        self.section(root, &KeyPath::default(), "", 0, version)
    }

    /// Why a key the description has at this place cannot be in a file of
    /// schema `version` (it came in a later one), naming that version.
    fn newer_key(&self, entry: &Entry, path: &KeyPath, version: u32) -> ConfigError {
        ConfigError::new(
            self.origin,
            entry.key_pos.map(|p| (p.line, p.column)),
            ConfigErrorKind::Invalid {
                key: path.key(&entry.key).to_string(),
                expected: format!(
                    "a key of schema version {version} (the file's `schema_version`); `{}` is new in version {SCHEMA_VERSION}",
                    entry.key
                ),
                found: format!("set `schema_version = {SCHEMA_VERSION}` to use it"),
            },
        )
    }

    /// Reads the table described at `spec` (`""`: the top level) into the
    /// config; `at` is the index of the named table the path went through
    /// (an endpoint rule, a profile, a hint kind). A bad key inside is a
    /// problem and is skipped; only a `node` that is not a table is an
    /// error, for the caller to skip.
    fn section(
        &mut self,
        node: &Node,
        path: &KeyPath,
        spec: &str,
        at: usize,
        version: u32,
    ) -> Result<()> {
        let entries = self.table(node, path)?;
        let allowed: Vec<&str> = schema::children(spec).map(|k| k.name()).collect();
        // Selections last, so one can name a profile defined below it.
        let mut selections = Vec::new();
        for entry in entries {
            let Some(key) = schema::children(spec).find(|k| k.name() == entry.key) else {
                let error = self.unknown_key(entry, path, &allowed);
                self.skip(error);
                continue;
            };
            if key.since > version {
                let error = self.newer_key(entry, path, version);
                self.skip(error);
                continue;
            }
            let (n, p) = (&entry.node, path.key(&entry.key));
            let read = match key.kind {
                KeyKind::Version => Ok(()),
                KeyKind::Section => self.section(n, &p, key.path, at, version),
                KeyKind::Patterns | KeyKind::Names | KeyKind::HintKinds => {
                    self.named_tables(key, n, &p, version)
                }
                KeyKind::Selection => {
                    selections.push((key, n, p));
                    Ok(())
                }
                kind => self
                    .value(kind, n, &p)
                    .map(|value| self.store(key.path, at, value)),
            };
            if let Err(error) = read {
                self.skip(error);
            }
        }
        for (key, n, p) in selections {
            match self.selection(key, n, &p) {
                Ok(selection) => self.store(key.path, at, KeyValue::Selection(selection)),
                Err(error) => self.skip(error),
            }
        }
        Ok(())
    }

    /// A table of tables named by the file: `[endpoints."GLOB"]`,
    /// `[tools."GLOB"]`, `[profiles.llms.NAME]`, `[profiles.agents.NAME]`,
    /// `[hints.KIND]`. A named table that cannot be one (a bad glob, an
    /// unknown hint kind, not a table) is a problem and is skipped whole.
    fn named_tables(
        &mut self,
        key: &KeySpec,
        node: &Node,
        path: &KeyPath,
        version: u32,
    ) -> Result<()> {
        let inner = format!("{}.*", key.path);
        let hint_kinds: Vec<&str> = HintKind::ALL.iter().map(|k| k.name()).collect();
        for entry in self.table(node, path)? {
            let (name, item, p) = (entry.key.as_str(), &entry.node, path.key(&entry.key));
            if item.as_table().is_none() {
                let error = self.invalid(&p, item, "a table");
                self.skip(error);
                continue;
            }
            let at = match key.kind {
                KeyKind::Patterns => match self.glob(name, item, &p) {
                    Ok(matcher) => self.new_rule(key.path, name, matcher),
                    Err(error) => {
                        self.skip(error);
                        continue;
                    }
                },
                KeyKind::Names => self.profile(key.path, name),
                _ => match HintKind::from_name(name) {
                    Some(kind) => kind.index(),
                    None => {
                        let error = self.unknown_key(entry, path, &hint_kinds);
                        self.skip(error);
                        continue;
                    }
                },
            };
            if let Err(error) = self.section(item, &p, &inner, at, version) {
                self.skip(error);
            }
        }
        Ok(())
    }

    /// Appends an empty rule for `pattern` to `[endpoints]` or `[tools]`;
    /// its index.
    fn new_rule(&mut self, table: &str, pattern: &str, matcher: GlobMatcher) -> usize {
        let pattern = pattern.to_owned();
        if table == "endpoints" {
            self.config
                .endpoints
                .push(EndpointRule::new(pattern, matcher));
            self.config.endpoints.len() - 1
        } else {
            self.config.tools.push(ToolRule::new(pattern, matcher));
            self.config.tools.len() - 1
        }
    }

    /// The index of the llm or agent profile `name`: a built-in name
    /// changes the fields the file sets; another name adds a profile.
    fn profile(&mut self, table: &str, name: &str) -> usize {
        let profiles = &mut self.config.profiles;
        if table == "profiles.llms" {
            find_or_push(
                &mut profiles.llms,
                |l| l.name == name,
                || LlmProfile {
                    name: name.to_owned(),
                    models: Vec::new(),
                    tokenizer: None,
                    budget_tokens: None,
                },
            )
        } else {
            find_or_push(
                &mut profiles.agents,
                |a| a.name == name,
                || AgentProfile {
                    name: name.to_owned(),
                    min_events: None,
                    min_compactions: None,
                    ttl: None,
                    min_body_bytes: None,
                    near_ref: None,
                },
            )
        }
    }

    /// A value read by its kind.
    fn value(&mut self, kind: KeyKind, n: &Node, p: &KeyPath) -> Result<KeyValue> {
        Ok(match kind {
            KeyKind::Bool => KeyValue::Bool(self.boolean(n, p)?),
            KeyKind::Count { min } => KeyValue::Count(self.count(n, p, min)?),
            KeyKind::Days => {
                let days = self.count(n, p, 1)?;
                u32::try_from(days)
                    .map_err(|_| self.invalid(p, n, "a number of days below 2^32"))?;
                KeyValue::Count(days)
            }
            KeyKind::Fraction => KeyValue::Fraction(self.fraction(n, p)?),
            KeyKind::Text => KeyValue::Text(self.string(n, p)?.to_owned()),
            KeyKind::Globs => KeyValue::Globs(self.globs(n, p)?),
            KeyKind::Paths => KeyValue::Paths(self.paths(n, p)?),
            KeyKind::Tokenizer => KeyValue::Tokenizer(self.tokenizer(n, p)?),
            KeyKind::Client => KeyValue::Client(self.client(n, p)?),
            KeyKind::InlineChars => KeyValue::InlineChars(self.inline_chars(n, p)?),
            KeyKind::SideEffect => KeyValue::SideEffect(self.side_effect(n, p)?),
            KeyKind::ValueClass => KeyValue::ValueClass(self.value_class(n, p)?),
            KeyKind::FollowUps => KeyValue::FollowUps(self.follow_up(n, p)?),
            KeyKind::EnrichmentMode => KeyValue::EnrichmentMode(self.mode(n, p)?),
            KeyKind::Version
            | KeyKind::Section
            | KeyKind::Patterns
            | KeyKind::Names
            | KeyKind::HintKinds
            | KeyKind::Selection => return Err(self.invalid(p, n, "a table")),
        })
    }

    /// `profiles.llm` or `profiles.agent`: `auto` or a profile's name.
    fn selection(&self, key: &KeySpec, n: &Node, p: &KeyPath) -> Result<Selection> {
        let name = self.string(n, p)?;
        let profiles = &self.config.profiles;
        let table = key.name();
        let known: Vec<&str> = if table == "llm" {
            profiles.llms.iter().map(|l| l.name.as_str()).collect()
        } else {
            profiles.agents.iter().map(|a| a.name.as_str()).collect()
        };
        if name == "auto" {
            Ok(Selection::Auto)
        } else if known.contains(&name) {
            Ok(Selection::Named(name.to_owned()))
        } else {
            let mut names = vec!["auto"];
            names.extend(known);
            let expected = format!(
                "\"auto\" or the name of a [profiles.{table}s.NAME] table: {}",
                quoted_list(&names)
            );
            Err(self.invalid(p, n, &expected))
        }
    }

    /// Stores a value read from the file.
    fn store(&mut self, spec: &str, at: usize, value: KeyValue) {
        let key = super::origin_key(spec, at);
        if let Some(defaults) = &self.yield_to {
            let set_below = self.config.key_origins.contains_key(&key);
            let is_default = defaults
                .key_value(spec, at)
                .is_some_and(|d| d.to_string() == value.to_string());
            if set_below && is_default {
                return;
            }
        }
        let bound = self.config.store(spec, at, value);
        debug_assert!(bound, "{spec} is described but bound to no field");
        self.config
            .key_origins
            .insert(key, self.origin.to_path_buf());
    }

    /// Reads a table whose keys must be among `allowed`, handing each
    /// field (key, value, key path) to `read`.
    fn fields(
        &mut self,
        node: &Node,
        path: &KeyPath,
        allowed: &[&str],
        mut read: impl FnMut(&mut Self, &str, &Node, &KeyPath) -> Result<()>,
    ) -> Result<()> {
        let entries = self.table(node, path)?;
        self.check_keys(entries, path, allowed)?;
        for entry in entries {
            read(self, &entry.key, &entry.node, &path.key(&entry.key))?;
        }
        Ok(())
    }

    /// An array of glob patterns.
    fn globs(&self, node: &Node, path: &KeyPath) -> Result<Vec<(String, GlobMatcher)>> {
        let Value::Array(items) = &node.value else {
            return Err(self.invalid(path, node, "an array of glob patterns"));
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ip = path.index(i);
            let pattern = self.string(item, &ip)?;
            out.push((pattern.to_owned(), self.glob(pattern, item, &ip)?));
        }
        Ok(out)
    }

    /// An array of absolute paths (a relative one would depend on where
    /// devboy happens to start).
    fn paths(&self, node: &Node, path: &KeyPath) -> Result<Vec<PathBuf>> {
        const EXPECTED: &str = "an array of absolute directory paths";
        let Value::Array(items) = &node.value else {
            return Err(self.invalid(path, node, EXPECTED));
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ip = path.index(i);
            let text = self.string(item, &ip)?;
            let dir = PathBuf::from(text);
            if !dir.is_absolute() {
                return Err(self.invalid(&ip, item, "an absolute directory path"));
            }
            out.push(dir);
        }
        Ok(out)
    }

    /// A tokenizer, or `auto` (`None`).
    fn tokenizer(&self, node: &Node, path: &KeyPath) -> Result<Option<TokenizerChoice>> {
        const EXPECTED: &str =
            "\"auto\", \"o200k\", \"cl100k\" or \"chars:N\" (characters per token, N > 0)";
        let Value::String(s) = &node.value else {
            return Err(self.invalid(path, node, EXPECTED));
        };
        match s.as_str() {
            "auto" => Ok(None),
            "o200k" | "o200k_base" => Ok(Some(TokenizerChoice::O200k)),
            "cl100k" | "cl100k_base" => Ok(Some(TokenizerChoice::Cl100k)),
            other => other
                .strip_prefix("chars:")
                .and_then(|r| r.trim().parse::<f32>().ok())
                .filter(|r| r.is_finite() && *r > 0.0)
                .map(|r| Some(TokenizerChoice::CharsPerToken(r)))
                .ok_or_else(|| self.invalid(path, node, EXPECTED)),
        }
    }

    fn client(&self, node: &Node, path: &KeyPath) -> Result<ClientProfile> {
        const EXPECTED: &str = "\"auto\", \"structured\" or \"content\"";
        match &node.value {
            Value::String(s) if s == "auto" => Ok(ClientProfile::Auto),
            Value::String(s) if s == "structured" => Ok(ClientProfile::Structured),
            Value::String(s) if s == "content" => Ok(ClientProfile::Content),
            _ => Err(self.invalid(path, node, EXPECTED)),
        }
    }

    fn inline_chars(&self, node: &Node, path: &KeyPath) -> Result<InlineChars> {
        match &node.value {
            Value::String(s) if s == "auto" => Ok(InlineChars::Auto),
            Value::String(s) if s == "none" => Ok(InlineChars::Unlimited),
            Value::Integer(n) if *n >= InlineChars::MIN as i128 => {
                Ok(InlineChars::At(usize::try_from(*n).unwrap_or(usize::MAX)))
            }
            _ => Err(self.invalid(
                path,
                node,
                &format!(
                    "\"auto\", \"none\" or a number of characters of at least {}",
                    InlineChars::MIN
                ),
            )),
        }
    }

    fn value_class(&self, node: &Node, path: &KeyPath) -> Result<ValueClass> {
        let names: Vec<&str> = ValueClass::ALL.iter().map(|c| c.name()).collect();
        match &node.value {
            Value::String(s) => ValueClass::from_name(s),
            _ => None,
        }
        .ok_or_else(|| self.invalid(path, node, &format!("one of {}", quoted_list(&names))))
    }

    fn mode(&mut self, node: &Node, path: &KeyPath) -> Result<EnrichmentMode> {
        let names: Vec<&str> = EnrichmentMode::ALL.iter().map(|m| m.name()).collect();
        match &node.value {
            Value::String(s) => EnrichmentMode::from_name(s),
            _ => None,
        }
        .ok_or_else(|| self.invalid(path, node, &format!("one of {}", quoted_list(&names))))
    }

    /// `follow_up = [{ tool = "…", probability = 0.4, args = { … }, limit = 3 }, …]`.
    fn follow_up(&mut self, node: &Node, path: &KeyPath) -> Result<Vec<FollowUp>> {
        let Value::Array(items) = &node.value else {
            return Err(self.invalid(
                path,
                node,
                "an array of tables { tool = \"NAME\", probability = P }",
            ));
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ip = path.index(i);
            let mut link = FollowUp::new(String::new(), f64::NAN);
            self.fields(item, &ip, FOLLOW_UP_KEYS, |r, key, n, p| {
                match key {
                    "tool" => link.tool = r.string(n, p)?.to_owned(),
                    "probability" => link.probability = r.fraction(n, p)?,
                    "limit" => link.limit = r.count(n, p, 1)?,
                    "args" => {
                        for (arg, v, vp) in r.pairs(n, p)? {
                            link.args.push((arg.to_owned(), r.arg_source(v, &vp)?));
                        }
                    }
                    _ => {}
                }
                Ok(())
            })?;
            if link.tool.is_empty() || link.probability.is_nan() {
                return Err(self.invalid(&ip, item, "a table with both `tool` and `probability`"));
            }
            out.push(link);
        }
        Ok(out)
    }

    /// One value of a `follow_up` item's `args`: a source string, or a
    /// number or boolean passed as it is.
    fn arg_source(&self, node: &Node, path: &KeyPath) -> Result<ArgSource> {
        let literal = match &node.value {
            Value::String(s) => {
                return ArgSource::parse(s).map_err(|expected| self.invalid(path, node, &expected))
            }
            Value::Bool(b) => serde_json::Value::from(*b),
            Value::Integer(n) => i64::try_from(*n)
                .map(serde_json::Value::from)
                .map_err(|_| self.invalid(path, node, "an integer that fits in 64 bits"))?,
            Value::Float(x) => serde_json::Number::from_f64(*x)
                .map(serde_json::Value::Number)
                .ok_or_else(|| self.invalid(path, node, "a finite number"))?,
            _ => {
                let expected = ArgSource::parse("").err().unwrap_or_default();
                return Err(self.invalid(path, node, &expected));
            }
        };
        Ok(ArgSource::Literal(literal))
    }

    fn side_effect(&self, node: &Node, path: &KeyPath) -> Result<SideEffectClass> {
        let expected = format!("one of {}", quoted_list(SIDE_EFFECTS));
        let Value::String(s) = &node.value else {
            return Err(self.invalid(path, node, &expected));
        };
        SideEffectClass::named(s).ok_or_else(|| self.invalid(path, node, &expected))
    }

    // ------------------------------------------------------------ version 1

    /// Schema version 1, migrated in memory as [`schema::V1_KEYS`] says:
    /// moved keys are stored as the keys they became, each with a warning;
    /// knobs the current pipeline has no use for are checked, reported and
    /// dropped. (Version 1 had no `tokenizer`, which is `auto` now.)
    fn v1(&mut self, root: &Node) -> Result<()> {
        self.v1_section(root, &KeyPath::default(), "")
    }

    /// A table of a version 1 file, by [`schema::V1_KEYS`]: each value is
    /// read as that version read it and stored as the key it became; a bad
    /// key is a problem and is skipped.
    fn v1_section(&mut self, node: &Node, path: &KeyPath, spec: &str) -> Result<()> {
        let entries = self.table(node, path)?;
        let keys = || schema::V1_KEYS.iter().filter(|k| k.parent() == spec);
        let allowed: Vec<&str> = keys().map(|k| k.name()).collect();
        for entry in entries {
            let Some(key) = keys().find(|k| k.name() == entry.key) else {
                let error = self.unknown_key(entry, path, &allowed);
                self.skip(error);
                continue;
            };
            let (n, p) = (&entry.node, path.key(&entry.key));
            let read = match key.kind {
                KeyKind::Version => Ok(()),
                KeyKind::Section => self.v1_section(n, &p, key.path),
                KeyKind::Patterns => self.v1_patterns(key, n, &p),
                kind => self.value(kind, n, &p).map(|value| {
                    if let Some(to) = key.to {
                        self.store(to, 0, value);
                    }
                }),
            };
            match read {
                Ok(()) if !key.note.is_empty() => {
                    self.warn(&p, format!("schema 1 key, {}", key.note))
                }
                Ok(()) => {}
                Err(error) => self.skip(error),
            }
        }
        Ok(())
    }

    /// A version 1 table of endpoint patterns (`dedup.enabled_per_endpoint`,
    /// `templates.endpoint_overrides`), each value stored on its endpoint's
    /// rule; a bad one is a problem and is skipped.
    fn v1_patterns(&mut self, key: &schema::V1Key, node: &Node, path: &KeyPath) -> Result<()> {
        let inner = format!("{}.*", key.path);
        let Some(item_key) = schema::V1_KEYS.iter().find(|k| k.path == inner) else {
            return Ok(());
        };
        for (pattern, item, ip) in self.pairs(node, path)? {
            let stored = self.value(item_key.kind, item, &ip).and_then(|value| {
                let at = self.v1_endpoint(pattern, item, &ip)?;
                if let Some(to) = item_key.to {
                    self.store(to, at, value);
                }
                Ok(())
            });
            if let Err(error) = stored {
                self.skip(error);
            }
        }
        Ok(())
    }

    /// The entries of a table as (key, value node, path) triples.
    fn pairs<'n>(
        &self,
        node: &'n Node,
        path: &KeyPath,
    ) -> Result<Vec<(&'n str, &'n Node, KeyPath)>> {
        Ok(self
            .table(node, path)?
            .iter()
            .map(|e| (e.key.as_str(), &e.node, path.key(&e.key)))
            .collect())
    }

    /// The index of the endpoint rule for `pattern`, created at the end
    /// when new.
    fn v1_endpoint(&mut self, pattern: &str, node: &Node, path: &KeyPath) -> Result<usize> {
        let endpoints = &self.config.endpoints;
        Ok(match endpoints.iter().position(|r| r.pattern == pattern) {
            Some(i) => i,
            None => {
                let matcher = self.glob(pattern, node, path)?;
                self.new_rule("endpoints", pattern, matcher)
            }
        })
    }
}

/// The index of the first item `is` picks, after appending `make()` when
/// none does (a table that names a built-in profile changes it; another
/// name adds one).
fn find_or_push<T>(items: &mut Vec<T>, is: impl Fn(&T) -> bool, make: impl FnOnce() -> T) -> usize {
    match items.iter().position(is) {
        Some(i) => i,
        None => {
            items.push(make());
            items.len() - 1
        }
    }
}

fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ")
}
