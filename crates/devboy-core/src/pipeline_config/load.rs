//! Reading `pipeline_config.toml`: the typed walk over the parsed tree, the
//! version check and the migration from schema version 1.

use std::path::Path;
use std::time::Duration;

use globset::{Glob, GlobMatcher};

use super::{
    AgentProfile, ClientProfile, DedupSettings, EncodingSettings, EndpointRule, EnrichmentSettings,
    HintKind, HintsPolicy, LlmProfile, NearRefSettings, PipelineConfig, Profiles, Selection,
    SideEffectClass, TelemetrySettings, TokenizerChoice, ToolRule, SCHEMA_VERSION,
};
use crate::config::keypath::{closest, KeyPath};
use crate::config::tree::{self, describe, Entry, Node, Value};
use crate::config::{ConfigError, ConfigErrorKind, ConfigFormat, ConfigSource};
use crate::value_model::{FollowUp, ValueClass};

type Result<T> = std::result::Result<T, ConfigError>;

const TOP_KEYS: &[&str] = &[
    "schema_version",
    "dedup",
    "encoding",
    "profiles",
    "hints",
    "enrichment",
    "telemetry",
    "endpoints",
    "tools",
];
/// Version 2 had no `[hints]` or `[enrichment]`.
const V2_TOP_KEYS: &[&str] = &[
    "schema_version",
    "dedup",
    "encoding",
    "profiles",
    "telemetry",
    "endpoints",
    "tools",
];
const DEDUP_KEYS: &[&str] = &[
    "enabled",
    "min_body_bytes",
    "ttl_secs",
    "max_entries",
    "max_context_bytes",
    "near_ref",
];
const NEAR_REF_KEYS: &[&str] = &["enabled", "max_changes", "min_body_bytes"];
const ENCODING_KEYS: &[&str] = &["enabled", "budget_tokens"];
const PROFILES_KEYS: &[&str] = &[
    "tokenizer",
    "client",
    "model",
    "llm",
    "agent",
    "llms",
    "agents",
];
const V2_PROFILES_KEYS: &[&str] = &["tokenizer", "client"];
const LLM_KEYS: &[&str] = &["models", "tokenizer", "budget_tokens"];
const AGENT_KEYS: &[&str] = &[
    "min_events",
    "min_compactions",
    "ttl_secs",
    "min_body_bytes",
    "near_ref",
];
const HINT_KEYS: &[&str] = &["enabled", "max_per_session", "models"];
const ENRICHMENT_KEYS: &[&str] = &[
    "enabled",
    "prefetch_timeout_ms",
    "max_parallel",
    "budget_tokens",
    "min_probability",
];
const TELEMETRY_KEYS: &[&str] = &["enabled", "sample_rate", "max_file_bytes", "max_age_days"];
/// The smallest `telemetry.max_file_bytes`: a few events per file.
const MIN_TELEMETRY_FILE_BYTES: usize = 1024;
const ENDPOINT_KEYS: &[&str] = &["dedup", "min_body_bytes", "near_ref", "encode", "template"];
const TOOL_KEYS: &[&str] = &[
    "side_effect",
    "invalidates",
    "freshness_secs",
    "value_class",
    "typical_tokens",
    "latency_ms",
    "follow_up",
    "fail_fast_after_n",
    "speculate",
    "rate_limit_host",
];
const V2_TOOL_KEYS: &[&str] = &["side_effect", "invalidates"];
const FOLLOW_UP_KEYS: &[&str] = &["tool", "probability", "args"];
const SIDE_EFFECTS: &[&str] = &["pure", "read_only", "mutating", "destructive", "unknown"];

// Schema version 1: the seed design's knobs.
const V1_TOP_KEYS: &[&str] = &["schema_version", "dedup", "templates", "mckp", "telemetry"];
const V1_DEDUP_KEYS: &[&str] = &[
    "enabled",
    "lru_size",
    "min_body_chars",
    "enabled_per_endpoint",
];
const V1_TEMPLATES_KEYS: &[&str] = &["endpoint_overrides"];
const V1_MCKP_KEYS: &[&str] = &["recursion_depth", "budget_tokens"];
const V1_TELEMETRY_KEYS: &[&str] = &["enabled", "sample_rate"];

/// Every setting at its built-in default (what the embedded file says).
pub(super) fn defaults() -> PipelineConfig {
    PipelineConfig {
        source: ConfigSource::Embedded,
        file_version: SCHEMA_VERSION,
        dedup: DedupSettings {
            enabled: true,
            min_body_bytes: 512,
            ttl: Duration::from_secs(30 * 60),
            max_entries: 256,
            max_context_bytes: 4 << 20,
            near_ref: NearRefSettings {
                enabled: false,
                max_changes: 8,
                min_body_bytes: 1024,
            },
        },
        encoding: EncodingSettings {
            enabled: true,
            budget_tokens: 25_000,
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
            prefetch_timeout: Duration::from_millis(1000),
            max_parallel: 3,
            budget_tokens: 8000,
            min_probability: 0.3,
        },
        telemetry: TelemetrySettings {
            enabled: true,
            sample_rate: 1.0,
            max_file_bytes: 16 << 20,
            max_age_days: 30,
        },
        endpoints: Vec::new(),
        tools: Vec::new(),
        warnings: Vec::new(),
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
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root = tree::parse_toml(text).map_err(|e| {
        ConfigError::new(
            origin,
            e.pos.map(|p| (p.line, p.column)),
            ConfigErrorKind::Syntax {
                format: ConfigFormat::Toml,
                message: e.message,
            },
        )
    })?;
    let mut reader = Reader {
        origin,
        config: defaults(),
    };
    let entries = reader.table(&root, &KeyPath::default())?;
    let version = reader.version(entries)?;
    reader.config.file_version = version;
    match version {
        1 => reader.v1(entries)?,
        _ => reader.current(entries, version)?,
    }
    Ok(reader.config)
}

struct Reader<'a> {
    origin: &'a Path,
    config: PipelineConfig,
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

    fn check_keys(&self, entries: &[Entry], path: &KeyPath, allowed: &[&str]) -> Result<()> {
        match entries.iter().find(|e| !allowed.contains(&e.key.as_str())) {
            None => Ok(()),
            Some(entry) => Err(ConfigError::new(
                self.origin,
                entry.key_pos.map(|p| (p.line, p.column)),
                ConfigErrorKind::UnknownKey {
                    key: path.key(&entry.key).to_string(),
                    expected: allowed.iter().map(|s| (*s).to_owned()).collect(),
                    suggestion: closest(&entry.key, allowed).map(str::to_owned),
                },
            )),
        }
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

    /// Version 3, or version 2, which is version 3 without the profile
    /// axes, `[hints]`, `[enrichment]` and the value-model keys of
    /// `[tools.*]`: a version 2 file means what it always meant, and a key
    /// only version 3 knows is reported as such.
    fn current(&mut self, entries: &[Entry], version: u32) -> Result<()> {
        let root = KeyPath::default();
        let v2 = version == 2;
        self.check_version_keys(entries, &root, TOP_KEYS, v2.then_some(V2_TOP_KEYS))?;
        for entry in entries {
            let path = root.key(&entry.key);
            match entry.key.as_str() {
                "dedup" => self.dedup(&entry.node, &path)?,
                "encoding" => self.encoding(&entry.node, &path)?,
                "profiles" => self.profiles(&entry.node, &path, v2)?,
                "hints" => self.hints(&entry.node, &path)?,
                "enrichment" => self.enrichment(&entry.node, &path)?,
                "telemetry" => self.telemetry(&entry.node, &path)?,
                "endpoints" => self.endpoints(&entry.node, &path)?,
                "tools" => self.tools(&entry.node, &path, v2)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// `check_keys`, but a key the current version allows and `older`
    /// (the file's version's list) does not is refused with a message
    /// naming the version that introduced it.
    fn check_version_keys(
        &self,
        entries: &[Entry],
        path: &KeyPath,
        allowed: &[&str],
        older: Option<&[&str]>,
    ) -> Result<()> {
        self.check_keys(entries, path, allowed)?;
        let Some(older) = older else {
            return Ok(());
        };
        match entries.iter().find(|e| !older.contains(&e.key.as_str())) {
            None => Ok(()),
            Some(entry) => Err(ConfigError::new(
                self.origin,
                entry.key_pos.map(|p| (p.line, p.column)),
                ConfigErrorKind::Invalid {
                    key: path.key(&entry.key).to_string(),
                    expected: format!(
                        "a key of schema version 2 (the file's `schema_version`); `{}` is new in version {SCHEMA_VERSION}",
                        entry.key
                    ),
                    found: format!("set `schema_version = {SCHEMA_VERSION}` to use it"),
                },
            )),
        }
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

    fn dedup(&mut self, node: &Node, path: &KeyPath) -> Result<()> {
        self.fields(node, path, DEDUP_KEYS, |r, key, n, p| {
            match key {
                "enabled" => r.config.dedup.enabled = r.boolean(n, p)?,
                "min_body_bytes" => r.config.dedup.min_body_bytes = r.count(n, p, 1)?,
                "ttl_secs" => r.config.dedup.ttl = Duration::from_secs(r.count(n, p, 1)? as u64),
                "max_entries" => r.config.dedup.max_entries = r.count(n, p, 1)?,
                "max_context_bytes" => r.config.dedup.max_context_bytes = r.count(n, p, 1)?,
                "near_ref" => r.near_ref(n, p)?,
                _ => {}
            }
            Ok(())
        })
    }

    fn near_ref(&mut self, node: &Node, path: &KeyPath) -> Result<()> {
        self.fields(node, path, NEAR_REF_KEYS, |r, key, n, p| {
            match key {
                "enabled" => r.config.dedup.near_ref.enabled = r.boolean(n, p)?,
                "max_changes" => r.config.dedup.near_ref.max_changes = r.count(n, p, 1)?,
                "min_body_bytes" => r.config.dedup.near_ref.min_body_bytes = r.count(n, p, 1)?,
                _ => {}
            }
            Ok(())
        })
    }

    fn encoding(&mut self, node: &Node, path: &KeyPath) -> Result<()> {
        self.fields(node, path, ENCODING_KEYS, |r, key, n, p| {
            match key {
                "enabled" => r.config.encoding.enabled = r.boolean(n, p)?,
                "budget_tokens" => r.config.encoding.budget_tokens = r.count(n, p, 100)?,
                _ => {}
            }
            Ok(())
        })
    }

    fn profiles(&mut self, node: &Node, path: &KeyPath, v2: bool) -> Result<()> {
        let entries = self.table(node, path)?;
        self.check_version_keys(entries, path, PROFILES_KEYS, v2.then_some(V2_PROFILES_KEYS))?;
        // Profiles first, so a selection can name one defined below it.
        let mut selections = Vec::new();
        for entry in entries {
            let (n, p) = (&entry.node, path.key(&entry.key));
            match entry.key.as_str() {
                "tokenizer" => self.config.tokenizer = self.tokenizer(n, &p)?,
                "client" => self.config.client = self.client(n, &p)?,
                "model" => self.config.profiles.model = Some(self.string(n, &p)?.to_owned()),
                "llm" | "agent" => selections.push((entry.key.as_str(), n, p)),
                "llms" => self.llms(n, &p)?,
                "agents" => self.agents(n, &p)?,
                _ => {}
            }
        }
        for (key, n, p) in selections {
            let name = self.string(n, &p)?;
            let profiles = &self.config.profiles;
            let known: Vec<&str> = if key == "llm" {
                profiles.llms.iter().map(|l| l.name.as_str()).collect()
            } else {
                profiles.agents.iter().map(|a| a.name.as_str()).collect()
            };
            let selection = if name == "auto" {
                Selection::Auto
            } else if known.contains(&name) {
                Selection::Named(name.to_owned())
            } else {
                let mut names = vec!["auto"];
                names.extend(known);
                let expected = format!(
                    "\"auto\" or the name of a [profiles.{key}s.NAME] table: {}",
                    quoted_list(&names)
                );
                return Err(self.invalid(&p, n, &expected));
            };
            if key == "llm" {
                self.config.profiles.llm = selection;
            } else {
                self.config.profiles.agent = selection;
            }
        }
        Ok(())
    }

    /// `[profiles.llms.NAME]`: a built-in name changes the fields it sets.
    fn llms(&mut self, node: &Node, path: &KeyPath) -> Result<()> {
        for (name, n, p) in self.pairs(node, path)? {
            let index = find_or_push(
                &mut self.config.profiles.llms,
                |l| l.name == name,
                || LlmProfile {
                    name: name.to_owned(),
                    models: Vec::new(),
                    tokenizer: None,
                    budget_tokens: None,
                },
            );
            self.fields(n, &p, LLM_KEYS, |r, key, n, p| {
                match key {
                    "models" => {
                        let models = r.globs(n, p)?;
                        r.config.profiles.llms[index].models = models;
                    }
                    "tokenizer" => {
                        let t = r.tokenizer(n, p)?;
                        r.config.profiles.llms[index].tokenizer = t;
                    }
                    "budget_tokens" => {
                        let b = r.count(n, p, 100)?;
                        r.config.profiles.llms[index].budget_tokens = Some(b);
                    }
                    _ => {}
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// `[profiles.agents.NAME]`: a built-in name changes the fields it sets.
    fn agents(&mut self, node: &Node, path: &KeyPath) -> Result<()> {
        for (name, n, p) in self.pairs(node, path)? {
            let index = find_or_push(
                &mut self.config.profiles.agents,
                |a| a.name == name,
                || AgentProfile {
                    name: name.to_owned(),
                    min_events: None,
                    min_compactions: None,
                    ttl: None,
                    min_body_bytes: None,
                    near_ref: None,
                },
            );
            self.fields(n, &p, AGENT_KEYS, |r, key, n, p| {
                let count = r.count(n, p, 0);
                let agent = &mut r.config.profiles.agents[index];
                match key {
                    "min_events" => agent.min_events = Some(count? as u64),
                    "min_compactions" => agent.min_compactions = Some(count? as u64),
                    "ttl_secs" => {
                        let secs = r.count(n, p, 1)?;
                        r.config.profiles.agents[index].ttl =
                            Some(Duration::from_secs(secs as u64));
                    }
                    "min_body_bytes" => {
                        let bytes = r.count(n, p, 1)?;
                        r.config.profiles.agents[index].min_body_bytes = Some(bytes);
                    }
                    "near_ref" => {
                        let on = r.boolean(n, p)?;
                        r.config.profiles.agents[index].near_ref = Some(on);
                    }
                    _ => {}
                }
                Ok(())
            })?;
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

    fn hints(&mut self, node: &Node, path: &KeyPath) -> Result<()> {
        let names: Vec<&str> = HintKind::ALL.iter().map(|k| k.name()).collect();
        let entries = self.table(node, path)?;
        self.check_keys(entries, path, &names)?;
        for entry in entries {
            let Some(kind) = HintKind::from_name(&entry.key) else {
                continue;
            };
            let p = path.key(&entry.key);
            self.fields(&entry.node, &p, HINT_KEYS, |r, key, n, p| {
                match key {
                    "enabled" => r.config.hints.rule_mut(kind).enabled = r.boolean(n, p)?,
                    "max_per_session" => {
                        let max = r.count(n, p, 0)? as u64;
                        r.config.hints.rule_mut(kind).max_per_session = Some(max);
                    }
                    "models" => {
                        let models = r.globs(n, p)?;
                        r.config.hints.rule_mut(kind).models = models;
                    }
                    _ => {}
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    fn enrichment(&mut self, node: &Node, path: &KeyPath) -> Result<()> {
        self.fields(node, path, ENRICHMENT_KEYS, |r, key, n, p| {
            match key {
                "enabled" => {
                    r.config.enrichment.enabled = r.boolean(n, p)?;
                    if r.config.enrichment.enabled {
                        r.warn(
                            p,
                            "this devboy does not speculate yet; the [enrichment] settings are kept for the version that does",
                        );
                    }
                }
                "prefetch_timeout_ms" => {
                    let ms = r.count(n, p, 1)? as u64;
                    r.config.enrichment.prefetch_timeout = Duration::from_millis(ms);
                }
                "max_parallel" => r.config.enrichment.max_parallel = r.count(n, p, 1)?,
                "budget_tokens" => r.config.enrichment.budget_tokens = r.count(n, p, 0)?,
                "min_probability" => r.config.enrichment.min_probability = r.fraction(n, p)?,
                _ => {}
            }
            Ok(())
        })
    }

    fn telemetry(&mut self, node: &Node, path: &KeyPath) -> Result<()> {
        self.fields(node, path, TELEMETRY_KEYS, |r, key, n, p| {
            match key {
                "enabled" => r.config.telemetry.enabled = r.boolean(n, p)?,
                "sample_rate" => r.config.telemetry.sample_rate = r.fraction(n, p)?,
                "max_file_bytes" => {
                    let bytes = r.count(n, p, MIN_TELEMETRY_FILE_BYTES)?;
                    r.config.telemetry.max_file_bytes = bytes as u64;
                }
                "max_age_days" => {
                    let days = u32::try_from(r.count(n, p, 1)?)
                        .map_err(|_| r.invalid(p, n, "a number of days below 2^32"))?;
                    r.config.telemetry.max_age_days = days;
                }
                _ => {}
            }
            Ok(())
        })
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

    fn endpoints(&mut self, node: &Node, path: &KeyPath) -> Result<()> {
        let entries = self.table(node, path)?;
        for entry in entries {
            let p = path.key(&entry.key);
            let matcher = self.glob(&entry.key, &entry.node, &p)?;
            let fields = self.table(&entry.node, &p)?;
            self.check_keys(fields, &p, ENDPOINT_KEYS)?;
            let mut rule = EndpointRule {
                pattern: entry.key.clone(),
                matcher,
                dedup: None,
                min_body_bytes: None,
                near_ref: None,
                encode: None,
                template: None,
            };
            for field in fields {
                let fp = p.key(&field.key);
                let n = &field.node;
                match field.key.as_str() {
                    "dedup" => rule.dedup = Some(self.boolean(n, &fp)?),
                    "min_body_bytes" => rule.min_body_bytes = Some(self.count(n, &fp, 1)?),
                    "near_ref" => rule.near_ref = Some(self.boolean(n, &fp)?),
                    "encode" => rule.encode = Some(self.boolean(n, &fp)?),
                    "template" => rule.template = Some(self.string(n, &fp)?.to_owned()),
                    _ => {}
                }
            }
            self.config.endpoints.push(rule);
        }
        Ok(())
    }

    fn tools(&mut self, node: &Node, path: &KeyPath, v2: bool) -> Result<()> {
        let entries = self.table(node, path)?;
        for entry in entries {
            let p = path.key(&entry.key);
            let matcher = self.glob(&entry.key, &entry.node, &p)?;
            let fields = self.table(&entry.node, &p)?;
            self.check_version_keys(fields, &p, TOOL_KEYS, v2.then_some(V2_TOOL_KEYS))?;
            let mut rule = ToolRule {
                pattern: entry.key.clone(),
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
            };
            for field in fields {
                let fp = p.key(&field.key);
                let n = &field.node;
                match field.key.as_str() {
                    "side_effect" => rule.side_effect = Some(self.side_effect(n, &fp)?),
                    "invalidates" => rule.invalidates = self.globs(n, &fp)?,
                    "freshness_secs" => {
                        let secs = self.count(n, &fp, 1)? as u64;
                        rule.freshness = Some(Duration::from_secs(secs));
                    }
                    "value_class" => rule.value_class = Some(self.value_class(n, &fp)?),
                    "typical_tokens" => rule.typical_tokens = Some(self.count(n, &fp, 0)?),
                    "latency_ms" => rule.latency_ms = Some(self.count(n, &fp, 0)? as u64),
                    "follow_up" => rule.follow_up = Some(self.follow_up(n, &fp)?),
                    "fail_fast_after_n" => rule.fail_fast_after_n = Some(self.count(n, &fp, 1)?),
                    "speculate" => rule.speculate = Some(self.boolean(n, &fp)?),
                    "rate_limit_host" => {
                        rule.rate_limit_host = Some(self.string(n, &fp)?.to_owned());
                    }
                    _ => {}
                }
            }
            self.config.tools.push(rule);
        }
        Ok(())
    }

    fn value_class(&self, node: &Node, path: &KeyPath) -> Result<ValueClass> {
        let names: Vec<&str> = ValueClass::ALL.iter().map(|c| c.name()).collect();
        match &node.value {
            Value::String(s) => ValueClass::from_name(s),
            _ => None,
        }
        .ok_or_else(|| self.invalid(path, node, &format!("one of {}", quoted_list(&names))))
    }

    /// `follow_up = [{ tool = "…", probability = 0.4, args = { … } }, …]`.
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
            let mut link = FollowUp {
                tool: String::new(),
                probability: f64::NAN,
                args: Vec::new(),
            };
            self.fields(item, &ip, FOLLOW_UP_KEYS, |r, key, n, p| {
                match key {
                    "tool" => link.tool = r.string(n, p)?.to_owned(),
                    "probability" => link.probability = r.fraction(n, p)?,
                    "args" => {
                        for (arg, v, vp) in r.pairs(n, p)? {
                            let pointer = r.string(v, &vp).ok().filter(|s| s.starts_with('/'));
                            let pointer = pointer.ok_or_else(|| {
                                r.invalid(
                                    &vp,
                                    v,
                                    "a JSON pointer into the result, like \"/items/0/path\"",
                                )
                            })?;
                            link.args.push((arg.to_owned(), pointer.to_owned()));
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

    fn side_effect(&self, node: &Node, path: &KeyPath) -> Result<SideEffectClass> {
        let expected = format!("one of {}", quoted_list(SIDE_EFFECTS));
        let Value::String(s) = &node.value else {
            return Err(self.invalid(path, node, &expected));
        };
        Ok(match s.as_str() {
            "pure" => SideEffectClass::Pure,
            "read_only" => SideEffectClass::ReadOnly,
            "mutating" => SideEffectClass::Mutating,
            "destructive" => SideEffectClass::Destructive,
            "unknown" => SideEffectClass::Unknown,
            _ => return Err(self.invalid(path, node, &expected)),
        })
    }

    // ------------------------------------------------------------ version 1

    /// Schema version 1, migrated in memory: `dedup.lru_size` becomes
    /// `dedup.max_entries`, `dedup.min_body_chars` `dedup.min_body_bytes`
    /// (a character is at least a byte, so no body that version 1 would
    /// have skipped gains a reference), `dedup.enabled_per_endpoint.E` and
    /// `templates.endpoint_overrides.E` become `[endpoints."E"]` tables,
    /// `telemetry.enabled` and `telemetry.sample_rate` keep their names.
    /// Knobs the current pipeline has no use for are reported and dropped.
    /// (Version 1's `tokenizer` is absent, which is `auto` now.)
    fn v1(&mut self, entries: &[Entry]) -> Result<()> {
        let root = KeyPath::default();
        self.check_keys(entries, &root, V1_TOP_KEYS)?;
        for entry in entries {
            let path = root.key(&entry.key);
            let node = &entry.node;
            match entry.key.as_str() {
                "dedup" => {
                    let fields = self.table(node, &path)?;
                    self.check_keys(fields, &path, V1_DEDUP_KEYS)?;
                    for field in fields {
                        let p = path.key(&field.key);
                        let n = &field.node;
                        match field.key.as_str() {
                            "enabled" => self.config.dedup.enabled = self.boolean(n, &p)?,
                            "lru_size" => {
                                self.config.dedup.max_entries = self.count(n, &p, 1)?;
                                self.warn(&p, "schema 1 key, read as dedup.max_entries");
                            }
                            "min_body_chars" => {
                                self.config.dedup.min_body_bytes = self.count(n, &p, 1)?;
                                self.warn(&p, "schema 1 key, read as dedup.min_body_bytes");
                            }
                            "enabled_per_endpoint" => {
                                for (pattern, item, ip) in self.pairs(n, &p)? {
                                    let on = self.boolean(item, &ip)?;
                                    self.v1_endpoint(pattern, item, &ip)?.dedup = Some(on);
                                }
                                self.warn(&p, "schema 1 key, read as [endpoints.\"…\"] dedup");
                            }
                            _ => {}
                        }
                    }
                }
                "templates" => {
                    let fields = self.table(node, &path)?;
                    self.check_keys(fields, &path, V1_TEMPLATES_KEYS)?;
                    for field in fields {
                        let p = path.key(&field.key);
                        for (pattern, item, ip) in self.pairs(&field.node, &p)? {
                            let template = self.string(item, &ip)?.to_owned();
                            self.v1_endpoint(pattern, item, &ip)?.template = Some(template);
                        }
                        self.warn(&p, "schema 1 key, read as [endpoints.\"…\"] template");
                    }
                }
                "mckp" => {
                    let fields = self.table(node, &path)?;
                    self.check_keys(fields, &path, V1_MCKP_KEYS)?;
                    for field in fields {
                        let p = path.key(&field.key);
                        if field.key == "budget_tokens" {
                            self.config.encoding.budget_tokens =
                                self.count(&field.node, &p, 100)?;
                            self.warn(&p, "schema 1 key, read as encoding.budget_tokens");
                        } else {
                            self.count(&field.node, &p, 1)?;
                            self.warn(
                                &p,
                                "schema 1 key, no longer used (the router needs no depth limit)",
                            );
                        }
                    }
                }
                "telemetry" => {
                    let fields = self.table(node, &path)?;
                    self.check_keys(fields, &path, V1_TELEMETRY_KEYS)?;
                    // Same names and meaning in version 2: read as they are.
                    self.telemetry(node, &path)?;
                }
                _ => {}
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

    /// The endpoint rule for `pattern`, created at the end when new.
    fn v1_endpoint(
        &mut self,
        pattern: &str,
        node: &Node,
        path: &KeyPath,
    ) -> Result<&mut EndpointRule> {
        let endpoints = &self.config.endpoints;
        let index = match endpoints.iter().position(|r| r.pattern == pattern) {
            Some(i) => i,
            None => {
                let matcher = self.glob(pattern, node, path)?;
                self.config.endpoints.push(EndpointRule {
                    pattern: pattern.to_owned(),
                    matcher,
                    dedup: None,
                    min_body_bytes: None,
                    near_ref: None,
                    encode: None,
                    template: None,
                });
                self.config.endpoints.len() - 1
            }
        };
        Ok(&mut self.config.endpoints[index])
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
