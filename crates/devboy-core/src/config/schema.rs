//! The schema: from a parsed [`Node`] tree to validated upstreams.
//!
//! One validator for both formats; the format only decides whether an
//! unknown key is an error (TOML, ours) or a warning (JSON, Claude Code's),
//! and whether an unknown transport `type` is an error or an unsupported
//! upstream.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::Glob;

use super::error::{ConfigError, ConfigErrorKind};
use super::expand::{expand, ExpandError};
use super::keypath::{closest, KeyPath};
use super::team::{ProviderConfig, ProviderSource, TeamConfig, STORE_SCHEMES};
use super::tree::{describe, quote_short, Entry, Node, Pos, Value};
use super::{
    CodeConfig, ConfigFormat, LazyTools, LlmConfig, LlmProvider, OAuthConfig, OAuthGrant,
    ToolFilter, ToolsConfig, UpstreamConfig, UpstreamTransport, DEFAULT_LLM_PARALLEL,
    DEFAULT_LLM_RETRIES, DEFAULT_LLM_TIMEOUT, DEFAULT_RUNNER_STARTUP_TIMEOUT, DEFAULT_SERVER_NAME,
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_TIMEOUT, DERIVED_PREFIX_MAX, RESERVED_PREFIX,
};
use crate::naming::sanitize_component;

/// The keys a server table may have, in both formats.
pub(super) const SERVER_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "timeout",
    "timeout_ms",
    "startup_timeout_ms",
    "prefix",
    "allow",
    "deny",
    "enabled",
    "disabled",
    "always_load",
    "alwaysLoad",
    "oauth",
    "sampling",
];
/// Keys Claude Code and similar clients write that do not matter to devboy;
/// skipped without a word.
const JSON_SILENT_KEYS: &[&str] = &[
    "autoApprove",
    "alwaysAllow",
    "description",
    "ideName",
    "ideRunningInWindows",
    "authToken",
];
/// Claude Code keys devboy does not implement and whose absence can change
/// behaviour (authentication); ignored with a specific warning.
const JSON_UNSUPPORTED_KEYS: &[&str] = &["headersHelper"];
/// An HTTP server's `oauth` table, in either spelling (Claude Code writes
/// `clientId` and `callbackPort`).
const OAUTH_KEYS: &[&str] = &[
    "client_id",
    "clientId",
    "client_secret",
    "clientSecret",
    "scopes",
    "client_metadata_url",
    "clientMetadataUrl",
    "callback_port",
    "callbackPort",
    "grant",
    "private_key_file",
    "privateKeyFile",
    "idp_token_endpoint",
    "idpTokenEndpoint",
    "idp_client_id",
    "idpClientId",
    "id_token",
    "idToken",
    "id_token_command",
    "idTokenCommand",
];
/// The values of an `oauth` table's `grant`.
const GRANTS: &str = "\"authorization_code\", \"client_credentials\" or \"cross_app\"";
const TOML_TOP_KEYS: &[&str] = &[
    "devboy",
    "servers",
    "mcpServers",
    "retrieval",
    "team",
    "builtins",
    "tools",
    "code",
];
const CODE_KEYS: &[&str] = &[
    "enabled",
    "timeout_secs",
    "memory_mib",
    "max_calls",
    "max_in_flight",
    "max_output_bytes",
    "allow",
];
const BUILTINS_KEYS: &[&str] = &["enabled", "always_load"];
const TOOLS_KEYS: &[&str] = &["compact_schemas", "lazy", "lazy_budget"];
const LAZY_MODES: &[&str] = &["auto", "on", "off"];
/// devboy's built-in tools, by the name after `devboy_`.
pub(super) const BUILTIN_NAMES: &[&str] = &[
    "status",
    "servers",
    "compact",
    "expand",
    "explore",
    "find_files",
    "find_tools",
    "run",
];
const TEAM_KEYS: &[&str] = &[
    "store",
    "share",
    "weight",
    "ttl_days",
    "k_anonymity",
    "providers",
];
const PROVIDER_KEYS: &[&str] = &["url", "path", "server", "weight"];
const RETRIEVAL_KEYS: &[&str] = &["llm"];
const LLM_KEYS: &[&str] = &[
    "provider",
    "model",
    "base_url",
    "api_key_env",
    "timeout_ms",
    "max_parallel",
    "max_retries",
    "cache",
];
const LLM_PROVIDERS: &[&str] = &["anthropic", "openai", "mcp-sampling"];
const SETTINGS_KEYS: &[&str] = &["server_name"];
const STDIO_ONLY_KEYS: &[&str] = &["command", "args", "env", "cwd"];
const HTTP_ONLY_KEYS: &[&str] = &["url", "headers", "oauth"];
const TOML_TYPES: &[&str] = &["stdio", "http", "streamable-http", "sse"];

/// What [`resolve`] produces.
pub(super) struct Resolved {
    pub(super) server_name: String,
    pub(super) upstreams: Vec<UpstreamConfig>,
    pub(super) retrieval_llm: Option<LlmConfig>,
    pub(super) team: TeamConfig,
    pub(super) team_problem: Option<String>,
    pub(super) builtins: Option<Vec<String>>,
    pub(super) always_load: Vec<String>,
    pub(super) tools: ToolsConfig,
    pub(super) code: CodeConfig,
    pub(super) warnings: Vec<String>,
    pub(super) problems: Vec<String>,
}

/// Validates and resolves a whole document. Only a document whose top
/// level is not a table is an error; every other problem is reported
/// (all of them, not the first) and costs only what it names.
pub(super) fn resolve(
    root: &Node,
    format: ConfigFormat,
    origin: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Resolved> {
    let mut loader = Loader {
        origin,
        format,
        env,
        warnings: Vec::new(),
        problems: Vec::new(),
    };
    let TopLevel {
        server_name,
        servers,
        retrieval,
        team,
        builtins,
        tools,
        code,
    } = loader.top_level(root)?;
    // `[tools]` and `[devboy]` are read key by key (a bad key is left out,
    // the rest applies); the other sections apply whole or not at all,
    // since half a model or half a team setup is none.
    let tools = tools.map_or_else(ToolsConfig::default, |(entry, path)| {
        loader.tools(&entry.node, &path)
    });
    let code = code.map_or_else(CodeConfig::default, |(entry, path)| {
        loader.code(&entry.node, &path)
    });
    let builtins_table = loader
        .section(builtins, Loader::builtins, "every built-in tool is offered")
        .0;
    let always_load = builtins_table
        .as_ref()
        .and_then(|t| t.always_load.clone())
        .unwrap_or_else(super::default_always_load);
    let builtins = builtins_table.map(|t| t.enabled);
    let retrieval_llm = loader
        .section(
            retrieval,
            Loader::retrieval,
            "find_files ranks without a model until this is fixed",
        )
        .0
        .flatten();
    // The tune commands that need `[team]` report its problem themselves.
    let (team, team_problem) = loader.section(
        team,
        Loader::team,
        "team fingerprints are neither shared nor blended until this is fixed",
    );
    let team = team.unwrap_or_default();
    let mut pending = Vec::with_capacity(servers.len());
    for (entry, path) in servers {
        // Warnings of an entry that turns out invalid would only repeat
        // its errors, so they are dropped with it.
        let warned = loader.warnings.len();
        match loader.server(entry, path.clone()) {
            Ok(server) => pending.push(server),
            Err(errors) => {
                loader.warnings.truncate(warned);
                pending.push(loader.invalid_server(entry, path, &errors));
            }
        }
    }
    let upstreams = loader.assign_prefixes(pending);
    Ok(Resolved {
        server_name,
        upstreams,
        retrieval_llm,
        team,
        team_problem,
        builtins,
        always_load,
        tools,
        code,
        warnings: loader.warnings,
        problems: loader.problems,
    })
}

/// `[builtins]` as read.
pub(super) struct BuiltinsTable {
    enabled: Vec<String>,
    always_load: Option<Vec<String>>,
}

/// The top level of a document: the server name, the server entries in
/// file order, and the sections read after them.
struct TopLevel<'n> {
    server_name: String,
    servers: Vec<(&'n Entry, KeyPath)>,
    retrieval: Option<(&'n Entry, KeyPath)>,
    team: Option<(&'n Entry, KeyPath)>,
    builtins: Option<(&'n Entry, KeyPath)>,
    tools: Option<(&'n Entry, KeyPath)>,
    code: Option<(&'n Entry, KeyPath)>,
}

/// The errors of one table, gathered rather than returned at the first,
/// so that a user fixing the file sees every one of them at once.
#[derive(Default)]
struct Gathered(Vec<ConfigError>);

impl Gathered {
    /// The value of `result`, or `None` with its error kept.
    fn keep<T>(&mut self, result: Result<T>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                self.0.push(error);
                None
            }
        }
    }

    fn push(&mut self, error: ConfigError) {
        self.0.push(error);
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `value` if nothing was gathered (and it is there), else every error
    /// gathered; `missing` names the table should a value be absent with
    /// no error to say why.
    fn finish<T>(
        self,
        value: Option<T>,
        missing: impl FnOnce() -> ConfigError,
    ) -> std::result::Result<T, Vec<ConfigError>> {
        match value {
            Some(value) if self.is_empty() => Ok(value),
            _ if self.is_empty() => Err(vec![missing()]),
            _ => Err(self.0),
        }
    }
}

/// Several errors as one text, one per line.
pub(super) fn lines(errors: &[ConfigError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A server validated except for its prefix, which needs all servers.
struct Pending {
    name: String,
    path: KeyPath,
    pos: Option<Pos>,
    explicit_prefix: Option<(String, KeyPath, Option<Pos>)>,
    transport: UpstreamTransport,
    timeout: Duration,
    startup_timeout: Duration,
    tools: ToolFilter,
    enabled: bool,
    always_load: bool,
    oauth: OAuthConfig,
    sampling: bool,
}

struct Loader<'a> {
    origin: &'a Path,
    format: ConfigFormat,
    env: &'a dyn Fn(&str) -> Option<String>,
    warnings: Vec<String>,
    /// What devboy leaves out of the file, each naming the file, key and
    /// what applies instead (problems of a server entry are that entry's).
    problems: Vec<String>,
}

type Result<T> = std::result::Result<T, ConfigError>;
/// A table read whole: its value, or every error in it.
type Gathering<T> = std::result::Result<T, Vec<ConfigError>>;

impl Loader<'_> {
    // ------------------------------------------------------------ errors

    fn error(&self, pos: Option<Pos>, kind: ConfigErrorKind) -> ConfigError {
        ConfigError::new(self.origin, pos.map(|p| (p.line, p.column)), kind)
    }

    fn invalid(
        &self,
        path: &KeyPath,
        pos: Option<Pos>,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> ConfigError {
        self.error(
            pos,
            ConfigErrorKind::Invalid {
                key: path.to_string(),
                expected: expected.into(),
                found: found.into(),
            },
        )
    }

    /// Defensive: a value missing although no error says why (every
    /// reader that returns nothing has gathered the error).
    fn unexplained(&self, path: &KeyPath) -> ConfigError {
        self.invalid(path, None, "a value devboy can read", "one it could not")
    }

    fn wrong_type(&self, path: &KeyPath, node: &Node, expected: &str) -> ConfigError {
        self.invalid(path, node.pos, expected, self.describe(node))
    }

    fn unknown_key(&self, path: &KeyPath, entry: &Entry, allowed: &[&str]) -> ConfigError {
        self.error(
            entry.key_pos,
            ConfigErrorKind::UnknownKey {
                key: path.key(&entry.key).to_string(),
                expected: allowed.iter().map(|s| (*s).to_owned()).collect(),
                suggestion: closest(&entry.key, allowed).map(str::to_owned),
            },
        )
    }

    fn warn(&mut self, path: &KeyPath, message: impl fmt::Display) {
        self.warnings
            .push(format!("{}: {path}: {message}", self.origin.display()));
    }

    fn describe(&self, node: &Node) -> String {
        describe(&node.value, self.table_word())
    }

    fn table_word(&self) -> &'static str {
        match self.format {
            ConfigFormat::Toml => "a table",
            ConfigFormat::McpJson => "an object",
        }
    }

    // ------------------------------------------------------------ typed reads

    fn table<'n>(&self, node: &'n Node, path: &KeyPath) -> Result<&'n [Entry]> {
        node.as_table()
            .ok_or_else(|| self.wrong_type(path, node, self.table_word()))
    }

    fn string<'n>(&self, node: &'n Node, path: &KeyPath) -> Result<&'n str> {
        match &node.value {
            Value::String(s) => Ok(s),
            _ => Err(self.wrong_type(path, node, "a string")),
        }
    }

    fn boolean(&self, node: &Node, path: &KeyPath) -> Result<bool> {
        match node.value {
            Value::Bool(b) => Ok(b),
            _ => Err(self.wrong_type(path, node, "true or false")),
        }
    }

    fn millis(&self, node: &Node, path: &KeyPath) -> Result<Duration> {
        match node.value {
            Value::Integer(n) if n > 0 => match u64::try_from(n) {
                Ok(ms) => Ok(Duration::from_millis(ms)),
                Err(_) => Err(self.wrong_type(path, node, "a positive integer (milliseconds)")),
            },
            _ => Err(self.wrong_type(path, node, "a positive integer (milliseconds)")),
        }
    }

    /// A string with `${VAR}` expanded. In a disabled server an unset
    /// variable is a warning and the text stays as written: whether the
    /// variable is set is a fact about today's shell, not about the file,
    /// and a server that will not start should not stop the others.
    fn expanded(&mut self, node: &Node, path: &KeyPath, lenient: bool) -> Result<String> {
        let raw = self.string(node, path)?;
        match expand(raw, self.env) {
            Ok(s) => Ok(s),
            Err(ExpandError::Unset(variable)) if lenient => {
                self.warn(
                    path,
                    format_args!(
                        "environment variable {variable} is not set (server is disabled, left unexpanded)"
                    ),
                );
                Ok(raw.to_owned())
            }
            Err(ExpandError::Unset(variable)) => Err(self.error(
                node.pos,
                ConfigErrorKind::UnsetVariable {
                    key: path.to_string(),
                    variable,
                },
            )),
            // A fact about the file, not the shell: refused even when the
            // server is disabled.
            Err(ExpandError::Unterminated {
                reference,
                character,
            }) => Err(self.error(
                node.pos,
                ConfigErrorKind::UnterminatedVariable {
                    key: path.to_string(),
                    reference,
                    character,
                },
            )),
        }
    }

    /// An array of strings (each `${VAR}`-expanded when `expand_as` says
    /// how), every bad item gathered in `errors`.
    fn string_array(
        &mut self,
        node: &Node,
        path: &KeyPath,
        expand_as: Option<bool>,
        errors: &mut Gathered,
    ) -> Option<Vec<String>> {
        let Value::Array(items) = &node.value else {
            errors.push(self.wrong_type(path, node, "an array of strings"));
            return None;
        };
        let before = errors.len();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_path = path.index(i);
            let read = match expand_as {
                Some(lenient) => self.expanded(item, &item_path, lenient),
                None => self.string(item, &item_path).map(str::to_owned),
            };
            out.extend(errors.keep(read));
        }
        (errors.len() == before).then_some(out)
    }

    /// A table of strings, each `${VAR}`-expanded, every bad value
    /// gathered in `errors`.
    fn string_map(
        &mut self,
        node: &Node,
        path: &KeyPath,
        lenient: bool,
        errors: &mut Gathered,
    ) -> Option<BTreeMap<String, String>> {
        let expected = format!("{} of string values", self.table_word());
        let Some(entries) = node.as_table() else {
            errors.push(self.wrong_type(path, node, &expected));
            return None;
        };
        let before = errors.len();
        let mut out = BTreeMap::new();
        for entry in entries {
            let value = self.expanded(&entry.node, &path.key(&entry.key), lenient);
            if let Some(value) = errors.keep(value) {
                out.insert(entry.key.clone(), value);
            }
        }
        (errors.len() == before).then_some(out)
    }

    fn globs(&mut self, node: &Node, path: &KeyPath, errors: &mut Gathered) -> Option<Vec<String>> {
        let globs = self.string_array(node, path, None, errors)?;
        let Value::Array(items) = &node.value else {
            return Some(globs);
        };
        let before = errors.len();
        for (i, (glob, item)) in globs.iter().zip(items).enumerate() {
            if let Err(e) = Glob::new(glob) {
                errors.push(self.invalid(
                    &path.index(i),
                    item.pos,
                    "a glob pattern (`*`, `?`, `[abc]`, `{a,b}`)",
                    format!("{} ({})", describe(&item.value, ""), e.kind()),
                ));
            }
        }
        (errors.len() == before).then_some(globs)
    }

    /// A server whose entry has `errors`: kept, so it shows as failed with
    /// all of them, unless the entry says plainly that it is disabled.
    fn invalid_server(&mut self, entry: &Entry, path: KeyPath, errors: &[ConfigError]) -> Pending {
        let flag = |key: &str| {
            entry
                .node
                .as_table()
                .and_then(|entries| entries.iter().find(|e| e.key == key))
                .and_then(|e| match e.node.value {
                    Value::Bool(b) => Some(b),
                    _ => None,
                })
        };
        let enabled = flag("enabled") != Some(false) && flag("disabled") != Some(true);
        let error = lines(errors);
        if !enabled {
            self.warn(&path, format_args!("disabled server is invalid: {error}"));
        }
        Pending {
            name: entry.key.clone(),
            pos: entry.node.pos,
            path,
            explicit_prefix: None,
            transport: UpstreamTransport::Invalid { error },
            timeout: DEFAULT_TIMEOUT,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tools: ToolFilter::default(),
            enabled,
            always_load: false,
            oauth: OAuthConfig::default(),
            sampling: false,
        }
    }

    /// Records `error` as a problem of the file, with what stands in for
    /// the part it names.
    fn problem(&mut self, error: &ConfigError, instead: &str) {
        self.problems.push(format!("{error}; {instead}"));
    }

    // ------------------------------------------------------------ structure

    /// The server name, the server entries in file order, and the other
    /// sections.
    fn top_level<'n>(&mut self, root: &'n Node) -> Result<TopLevel<'n>> {
        let top = KeyPath::default();
        let entries = root.as_table().ok_or_else(|| {
            self.wrong_type(
                &top,
                root,
                &format!("{} with \"mcpServers\"", self.table_word()),
            )
        })?;
        let mut server_name = DEFAULT_SERVER_NAME.to_owned();
        let mut servers: Vec<(&Entry, KeyPath)> = Vec::new();
        let mut saw_servers = false;
        let mut ignored = Vec::new();
        let mut retrieval = None;
        let mut team = None;
        let mut builtins = None;
        let mut tools = None;
        let mut code = None;
        for entry in entries {
            let path = top.key(&entry.key);
            match entry.key.as_str() {
                "devboy" => server_name = self.settings(&entry.node, &path),
                "retrieval" => retrieval = Some((entry, path)),
                "team" if self.format == ConfigFormat::Toml => team = Some((entry, path)),
                "builtins" if self.format == ConfigFormat::Toml => builtins = Some((entry, path)),
                "tools" if self.format == ConfigFormat::Toml => tools = Some((entry, path)),
                "code" => code = Some((entry, path)),
                "mcpServers" | "servers"
                    if entry.key == "mcpServers" || self.format == ConfigFormat::Toml =>
                {
                    saw_servers = true;
                    let table = match self.table(&entry.node, &path) {
                        Ok(table) => table,
                        Err(error) => {
                            self.problem(&error, "no servers are read from it");
                            continue;
                        }
                    };
                    for server in table {
                        let server_path = path.key(&server.key);
                        if let Some((_, first)) = servers.iter().find(|(e, _)| e.key == server.key)
                        {
                            let error = self.invalid(
                                &server_path,
                                server.key_pos,
                                "a server name not used twice",
                                format!("{} again (first at {first})", quote_short(&server.key)),
                            );
                            self.problem(&error, "this entry is ignored");
                            continue;
                        }
                        servers.push((server, server_path));
                    }
                }
                _ if self.format == ConfigFormat::Toml => {
                    let error = self.unknown_key(&top, entry, TOML_TOP_KEYS);
                    self.problem(&error, "ignored");
                }
                _ => ignored.push(entry.key.as_str()),
            }
        }
        if !ignored.is_empty() {
            let mut list = ignored
                .iter()
                .take(5)
                .copied()
                .collect::<Vec<_>>()
                .join(", ");
            if ignored.len() > 5 {
                list.push_str(", …");
            }
            self.warn(
                &top,
                format_args!("ignored keys devboy does not use: {list}"),
            );
        }
        if !saw_servers && self.format == ConfigFormat::McpJson {
            self.warn(
                &top,
                "no \"mcpServers\" object; no upstream servers configured",
            );
        }
        Ok(TopLevel {
            server_name,
            servers,
            retrieval,
            team,
            builtins,
            tools,
            code,
        })
    }

    /// `[tools]`: how the servers' tool definitions are passed on, key by
    /// key: a bad one is a problem and keeps its default.
    fn tools(&mut self, node: &Node, path: &KeyPath) -> ToolsConfig {
        let mut tools = ToolsConfig::default();
        let entries = match self.table(node, path) {
            Ok(entries) => entries,
            Err(error) => {
                self.problem(&error, "the defaults of [tools] apply");
                return tools;
            }
        };
        for entry in entries {
            let key = path.key(&entry.key);
            let read = match entry.key.as_str() {
                "compact_schemas" => self
                    .boolean(&entry.node, &key)
                    .map(|on| tools.compact_schemas = on),
                "lazy" => self.string(&entry.node, &key).and_then(|mode| {
                    tools.lazy = match mode {
                        "auto" => LazyTools::Auto,
                        "on" => LazyTools::On,
                        "off" => LazyTools::Off,
                        other => {
                            return Err(self.invalid(
                                &key,
                                entry.node.pos,
                                format!("one of {}", LAZY_MODES.join(", ")),
                                quote_short(other),
                            ))
                        }
                    };
                    Ok(())
                }),
                "lazy_budget" => match entry.node.value {
                    Value::Integer(n) if n > 0 => {
                        tools.lazy_budget = usize::try_from(n).unwrap_or(usize::MAX);
                        Ok(())
                    }
                    _ => Err(self.wrong_type(&key, &entry.node, "a positive integer (tokens)")),
                },
                _ => Err(self.unknown_key(path, entry, TOOLS_KEYS)),
            };
            if let Err(error) = read {
                self.problem(&error, "ignored");
            }
        }
        tools
    }

    /// `[code]`: code mode's limits and allowed tools, key by key: a bad
    /// one is a problem and keeps its default.
    fn code(&mut self, node: &Node, path: &KeyPath) -> CodeConfig {
        let mut code = CodeConfig::default();
        let entries = match self.table(node, path) {
            Ok(entries) => entries,
            Err(error) => {
                self.problem(&error, "the defaults of [code] apply");
                return code;
            }
        };
        for entry in entries {
            let key = path.key(&entry.key);
            // Bounded so that no limit overflows a clock or the engine's
            // allocator: a day, 64 GiB, and counts no run could reach.
            let positive = |loader: &mut Self, unit: &str, most: u64| match entry.node.value {
                Value::Integer(n) if n > 0 && n <= i128::from(most) => {
                    Ok(u64::try_from(n).unwrap_or(most))
                }
                _ => Err(loader.wrong_type(
                    &key,
                    &entry.node,
                    &format!("a positive integer up to {most} ({unit})"),
                )),
            };
            let as_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
            let read =
                match entry.key.as_str() {
                    "enabled" => self.boolean(&entry.node, &key).map(|on| code.enabled = on),
                    "timeout_secs" => positive(self, "seconds", 86_400)
                        .map(|n| code.timeout = Duration::from_secs(n)),
                    "memory_mib" => positive(self, "MiB", 65_536)
                        .map(|n| code.memory_bytes = as_usize(n) * 1024 * 1024),
                    "max_calls" => positive(self, "calls", 1_000_000).map(|n| code.max_calls = n),
                    "max_in_flight" => {
                        positive(self, "calls", 1_000).map(|n| code.max_in_flight = as_usize(n))
                    }
                    "max_output_bytes" => positive(self, "bytes", 1 << 30)
                        .map(|n| code.max_output_bytes = as_usize(n)),
                    "allow" => {
                        let mut errors = Gathered::default();
                        let globs = self.string_array(&entry.node, &key, None, &mut errors);
                        match (globs, errors.0.pop()) {
                            (_, Some(error)) => Err(error),
                            (None, None) => Ok(()),
                            (Some(globs), None) => match code.clone().with_allow(globs) {
                                Ok(allowed) => {
                                    code = allowed;
                                    Ok(())
                                }
                                Err(why) => {
                                    Err(self.invalid(&key, entry.node.pos, "tool name globs", why))
                                }
                            },
                        }
                    }
                    _ => Err(self.unknown_key(path, entry, CODE_KEYS)),
                };
            if let Err(error) = read {
                self.problem(&error, "ignored");
            }
        }
        code
    }

    /// `[builtins]`: `enabled`, the built-in tools to offer, and
    /// `always_load`, those a client with a tool search loads up front, as
    /// exposed names. An unknown key is a problem of its own; the rest
    /// applies when good.
    fn builtins(&mut self, node: &Node, path: &KeyPath) -> Gathering<BuiltinsTable> {
        let entries = self.table(node, path).map_err(|e| vec![e])?;
        for entry in entries {
            if !BUILTINS_KEYS.contains(&entry.key.as_str()) {
                let error = self.unknown_key(path, entry, BUILTINS_KEYS);
                self.problem(&error, "ignored");
            }
        }
        let mut errors = Gathered::default();
        let enabled = match entries.iter().find(|e| e.key == "enabled") {
            None => BUILTIN_NAMES
                .iter()
                .map(|n| format!("devboy_{n}"))
                .collect(),
            Some(enabled) => {
                let key_path = path.key("enabled");
                let out = self.builtin_names(&enabled.node, &key_path, &mut errors);
                if errors.is_empty() && !out.iter().any(|n| n == "devboy_expand") {
                    errors.push(self.invalid(
                        &key_path,
                        enabled.node.pos,
                        "a list with \"expand\": devboy_expand resolves devboy's references, which are never sent without it",
                        "a list without it",
                    ));
                }
                out
            }
        };
        let always_load = entries
            .iter()
            .find(|e| e.key == "always_load")
            .map(|e| self.builtin_names(&e.node, &path.key("always_load"), &mut errors));
        errors.finish(
            Some(BuiltinsTable {
                enabled,
                always_load,
            }),
            || self.unexplained(path),
        )
    }

    /// A list of built-in names (`"expand"` or `"devboy_expand"`) as
    /// exposed names, every unknown one gathered in `errors`.
    fn builtin_names(
        &mut self,
        node: &Node,
        key_path: &KeyPath,
        errors: &mut Gathered,
    ) -> Vec<String> {
        let names = self
            .string_array(node, key_path, None, errors)
            .unwrap_or_default();
        let mut out = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let short = name.strip_prefix("devboy_").unwrap_or(name);
            if !BUILTIN_NAMES.contains(&short) {
                errors.push(self.invalid(
                    &key_path.index(i),
                    node.pos,
                    format!("one of {}", BUILTIN_NAMES.join(", ")),
                    quote_short(name),
                ));
            }
            out.push(format!("devboy_{short}"));
        }
        out
    }

    /// An optional top-level section read whole by `read`: its value, or
    /// `None` when it is absent or has problems; each problem (all of
    /// them) is recorded ending in `costs` (what it costs the user), and
    /// returned too, one per line.
    fn section<T>(
        &mut self,
        found: Option<(&Entry, KeyPath)>,
        read: impl FnOnce(&mut Self, &Node, &KeyPath) -> Gathering<T>,
        costs: &str,
    ) -> (Option<T>, Option<String>) {
        let Some((entry, path)) = found else {
            return (None, None);
        };
        match read(self, &entry.node, &path) {
            Ok(value) => (Some(value), None),
            Err(errors) => {
                for error in &errors {
                    self.problem(error, costs);
                }
                (None, Some(lines(&errors)))
            }
        }
    }

    /// `[team]` and its `[[team.providers]]`.
    fn team(&mut self, node: &Node, path: &KeyPath) -> Gathering<TeamConfig> {
        let entries = self.table(node, path).map_err(|e| vec![e])?;
        let mut errors = Gathered::default();
        for entry in entries {
            if !TEAM_KEYS.contains(&entry.key.as_str()) {
                errors.push(self.unknown_key(path, entry, TEAM_KEYS));
            }
        }
        let get = |key: &str| entries.iter().find(|e| e.key == key);
        let mut team = TeamConfig {
            origin: Some(self.origin.to_path_buf()),
            ..TeamConfig::default()
        };
        if let Some(e) = get("store") {
            let key_path = path.key("store");
            let store = self.expanded(&e.node, &key_path, false).and_then(|store| {
                let scheme = store.split_once("://").map(|(s, _)| s);
                let usable = scheme.is_some_and(|s| STORE_SCHEMES.contains(&s))
                    && store
                        .split_once("://")
                        .is_some_and(|(_, rest)| !rest.trim_matches('/').is_empty());
                if usable {
                    Ok(store)
                } else {
                    Err(self.invalid(
                        &key_path,
                        e.node.pos,
                        "a store URL: s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or file:///path",
                        quote_short(&store),
                    ))
                }
            });
            team.store = errors.keep(store);
        }
        if let Some(e) = get("share") {
            let share = self.boolean(&e.node, &path.key("share"));
            team.share = errors.keep(share).unwrap_or(team.share);
        }
        if let Some(e) = get("weight") {
            let weight = self.fraction(&e.node, &path.key("weight"), 1.0);
            team.weight = errors.keep(weight).unwrap_or(team.weight);
        }
        if let Some(e) = get("ttl_days") {
            let days = self.count_in(&e.node, &path.key("ttl_days"), 1, 365);
            team.ttl_days = errors.keep(days).unwrap_or(team.ttl_days);
        }
        if let Some(e) = get("k_anonymity") {
            let k = self.count_in(
                &e.node,
                &path.key("k_anonymity"),
                super::team::MIN_K_ANONYMITY,
                1000,
            );
            team.k_anonymity = errors.keep(k).unwrap_or(team.k_anonymity);
        }
        if let Some(e) = get("providers") {
            let providers_path = path.key("providers");
            match &e.node.value {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        match self.provider(item, &providers_path.index(i)) {
                            Ok(provider) => team.providers.push(provider),
                            Err(more) => more.into_iter().for_each(|e| errors.push(e)),
                        }
                    }
                }
                _ => errors.push(self.wrong_type(
                    &providers_path,
                    &e.node,
                    "an array of tables ([[team.providers]])",
                )),
            }
        }
        errors.finish(Some(team), || self.unexplained(path))
    }

    /// One `[[team.providers]]`, every bad key of it reported.
    fn provider(&mut self, node: &Node, path: &KeyPath) -> Gathering<ProviderConfig> {
        let entries = self.table(node, path).map_err(|e| vec![e])?;
        let mut errors = Gathered::default();
        for entry in entries {
            if !PROVIDER_KEYS.contains(&entry.key.as_str()) {
                errors.push(self.unknown_key(path, entry, PROVIDER_KEYS));
            }
        }
        let get = |key: &str| entries.iter().find(|e| e.key == key);
        let source = match (get("url"), get("path")) {
            (Some(url), None) => {
                let key_path = path.key("url");
                let url_text = self.expanded(&url.node, &key_path, false).and_then(|text| {
                    if text.starts_with("https://") || text.starts_with("http://") {
                        Ok(text)
                    } else {
                        Err(self.invalid(
                            &key_path,
                            url.node.pos,
                            "an http:// or https:// URL (or `path` for a file)",
                            quote_short(&text),
                        ))
                    }
                });
                errors.keep(url_text).map(ProviderSource::Url)
            }
            (None, Some(file)) => {
                let text = self.expanded(&file.node, &path.key("path"), false);
                errors
                    .keep(text)
                    .map(|text| ProviderSource::File(self.resolve_dir(&text)))
            }
            (Some(_), Some(file)) => {
                errors.push(self.invalid(
                    &path.key("path"),
                    file.node.pos,
                    "either `url` or `path`, not both",
                    "both",
                ));
                None
            }
            (None, None) => {
                errors.push(self.invalid(
                    &path.key("url"),
                    node.pos,
                    "`url` (or `path`) of the provider's fingerprints",
                    "nothing",
                ));
                None
            }
        };
        let server = match get("server") {
            Some(e) => {
                let server = self.string(&e.node, &path.key("server")).map(str::to_owned);
                errors.keep(server)
            }
            None => {
                errors.push(self.invalid(
                    &path.key("server"),
                    node.pos,
                    "the server (its key under [servers]) whose tools the document describes",
                    "nothing",
                ));
                None
            }
        };
        let weight = match get("weight") {
            Some(e) => {
                let weight = self.fraction(
                    &e.node,
                    &path.key("weight"),
                    super::team::MAX_PROVIDER_WEIGHT,
                );
                errors.keep(weight)
            }
            None => Some(super::team::MAX_PROVIDER_WEIGHT),
        };
        let provider = match (source, server, weight) {
            (Some(source), Some(server), Some(weight)) => Some(ProviderConfig {
                source,
                server,
                weight,
            }),
            _ => None,
        };
        errors.finish(provider, || self.unexplained(path))
    }

    /// A number from 0 to `max`.
    fn fraction(&self, node: &Node, path: &KeyPath, max: f64) -> Result<f64> {
        let value = match node.value {
            Value::Float(x) => x,
            Value::Integer(n) => n as f64,
            _ => f64::NAN,
        };
        if (0.0..=max).contains(&value) {
            Ok(value)
        } else {
            Err(self.wrong_type(path, node, &format!("a number from 0 to {max}")))
        }
    }

    /// An integer from `min` to `max`.
    fn count_in(&self, node: &Node, path: &KeyPath, min: u32, max: u32) -> Result<u32> {
        match node.value {
            Value::Integer(n) if (i128::from(min)..=i128::from(max)).contains(&n) => Ok(n as u32),
            _ => Err(self.wrong_type(path, node, &format!("an integer from {min} to {max}"))),
        }
    }

    /// `[retrieval]`: the model `find_files` ranks with, if any.
    fn retrieval(&mut self, node: &Node, path: &KeyPath) -> Gathering<Option<LlmConfig>> {
        let mut llm = None;
        let mut errors = Vec::new();
        for entry in self.table(node, path).map_err(|e| vec![e])? {
            let key_path = path.key(&entry.key);
            match entry.key.as_str() {
                "llm" => match self.llm(&entry.node, &key_path) {
                    Ok(read) => llm = Some(read),
                    Err(more) => errors.extend(more),
                },
                _ if self.format == ConfigFormat::Toml => {
                    errors.push(self.unknown_key(path, entry, RETRIEVAL_KEYS));
                }
                _ => self.warn(&key_path, "unknown key, ignored"),
            }
        }
        if errors.is_empty() {
            Ok(llm)
        } else {
            Err(errors)
        }
    }

    /// `[retrieval.llm]`, every bad key of it reported.
    fn llm(&mut self, node: &Node, path: &KeyPath) -> Gathering<LlmConfig> {
        let entries = self.table(node, path).map_err(|e| vec![e])?;
        let get = |key: &str| entries.iter().find(|e| e.key == key);
        let mut errors = Gathered::default();
        for entry in entries {
            if !LLM_KEYS.contains(&entry.key.as_str()) {
                errors.push(self.unknown_key(path, entry, LLM_KEYS));
            }
        }
        let provider_path = path.key("provider");
        let provider = match get("provider") {
            None => {
                errors.push(self.invalid(
                    &provider_path,
                    node.pos,
                    format!("one of {}", LLM_PROVIDERS.join(", ")),
                    "nothing",
                ));
                None
            }
            Some(provider) => {
                let named =
                    self.string(&provider.node, &provider_path)
                        .and_then(|name| match name {
                            "anthropic" => Ok(LlmProvider::Anthropic),
                            "openai" | "openai-compatible" => Ok(LlmProvider::OpenAi),
                            "mcp-sampling" | "sampling" => Ok(LlmProvider::Sampling),
                            _ => Err(self.invalid(
                                &provider_path,
                                provider.node.pos,
                                format!("one of {}", LLM_PROVIDERS.join(", ")),
                                self.describe(&provider.node),
                            )),
                        });
                errors.keep(named)
            }
        };
        let model = match get("model") {
            Some(e) => {
                let model = self.expanded(&e.node, &path.key("model"), false);
                errors.keep(model)
            }
            None if provider == Some(LlmProvider::Sampling) => Some(String::new()),
            None => {
                errors.push(self.invalid(
                    &path.key("model"),
                    node.pos,
                    "the model's name, e.g. \"claude-haiku-4-5\"",
                    "nothing",
                ));
                None
            }
        };
        let base_url = match get("base_url") {
            Some(e) => {
                let url = self.expanded(&e.node, &path.key("base_url"), false);
                errors.keep(url).map(Some)
            }
            None => Some(None),
        };
        let api_key_env = match get("api_key_env") {
            Some(e) => {
                let name = self
                    .string(&e.node, &path.key("api_key_env"))
                    .map(str::to_owned);
                errors.keep(name).map(Some)
            }
            None if provider == Some(LlmProvider::Anthropic) => {
                Some(Some("ANTHROPIC_API_KEY".to_owned()))
            }
            None => Some(None),
        };
        let timeout = match get("timeout_ms") {
            Some(e) => {
                let ms = self.millis(&e.node, &path.key("timeout_ms"));
                errors.keep(ms)
            }
            None => Some(DEFAULT_LLM_TIMEOUT),
        };
        let count = |loader: &Self, key: &str, max: i128| -> Result<Option<i128>> {
            match get(key) {
                None => Ok(None),
                Some(e) => match e.node.value {
                    Value::Integer(n) if (0..=max).contains(&n) => Ok(Some(n)),
                    _ => Err(loader.wrong_type(
                        &path.key(key),
                        &e.node,
                        &format!("an integer from 0 to {max}"),
                    )),
                },
            }
        };
        let max_parallel = errors
            .keep(count(self, "max_parallel", 64))
            .map(|n| n.map_or(DEFAULT_LLM_PARALLEL, |n| n.max(1) as usize));
        let max_retries = errors
            .keep(count(self, "max_retries", 10))
            .map(|n| n.map_or(DEFAULT_LLM_RETRIES, |n| n as u32));
        let cache = match get("cache") {
            Some(e) => {
                let cache = self.boolean(&e.node, &path.key("cache"));
                errors.keep(cache)
            }
            None => Some(true),
        };
        let config = (|| {
            Some(LlmConfig {
                provider: provider?,
                model: model?,
                base_url: base_url?,
                api_key_env: api_key_env?,
                timeout: timeout?,
                max_parallel: max_parallel?,
                max_retries: max_retries?,
                cache: cache?,
            })
        })();
        errors.finish(config, || self.unexplained(path))
    }

    /// `[devboy]` / `"devboy": {…}`: returns the server name. Read key by
    /// key: a bad one is a problem and keeps its default.
    fn settings(&mut self, node: &Node, path: &KeyPath) -> String {
        let mut server_name = DEFAULT_SERVER_NAME.to_owned();
        let entries = match self.table(node, path) {
            Ok(entries) => entries,
            Err(error) => {
                self.problem(&error, "ignored");
                return server_name;
            }
        };
        for entry in entries {
            let key_path = path.key(&entry.key);
            let read = match entry.key.as_str() {
                "server_name" => self.string(&entry.node, &key_path).and_then(|name| {
                    let valid = !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if valid {
                        server_name = name.to_owned();
                        Ok(())
                    } else {
                        Err(self.invalid(
                            &key_path,
                            entry.node.pos,
                            "the name given to `claude mcp add` (letters, digits, `_`, `-`)",
                            self.describe(&entry.node),
                        ))
                    }
                }),
                _ if self.format == ConfigFormat::Toml => {
                    Err(self.unknown_key(path, entry, SETTINGS_KEYS))
                }
                _ => {
                    self.warn(&key_path, "unknown key, ignored");
                    Ok(())
                }
            };
            if let Err(error) = read {
                let instead = if entry.key == "server_name" {
                    format!("ignored (devboy takes its name to be {DEFAULT_SERVER_NAME:?})")
                } else {
                    "ignored".to_owned()
                };
                self.problem(&error, &instead);
            }
        }
        server_name
    }

    /// One server, all but its prefix; or every error of its entry.
    fn server(&mut self, entry: &Entry, path: KeyPath) -> Gathering<Pending> {
        let entries = self.table(&entry.node, &path).map_err(|e| vec![e])?;
        let mut errors = Gathered::default();
        for e in entries {
            if SERVER_KEYS.contains(&e.key.as_str()) {
                continue;
            }
            match self.format {
                ConfigFormat::Toml => errors.push(self.unknown_key(&path, e, SERVER_KEYS)),
                ConfigFormat::McpJson if JSON_SILENT_KEYS.contains(&e.key.as_str()) => {}
                ConfigFormat::McpJson if JSON_UNSUPPORTED_KEYS.contains(&e.key.as_str()) => self
                    .warn(
                        &path.key(&e.key),
                        "not supported by devboy, ignored (the server may fail to authenticate)",
                    ),
                ConfigFormat::McpJson => self.warn(&path.key(&e.key), "unknown key, ignored"),
            }
        }
        let get = |key: &str| entries.iter().find(|e| e.key == key).map(|e| &e.node);
        let flag = |loader: &Self, errors: &mut Gathered, key: &str| {
            get(key).and_then(|n| errors.keep(loader.boolean(n, &path.key(key))))
        };
        let enabled_flag = flag(self, &mut errors, "enabled");
        let disabled_flag = flag(self, &mut errors, "disabled");
        if enabled_flag == Some(true) && disabled_flag == Some(true) {
            self.warn(
                &path,
                "both enabled = true and disabled = true; the server is disabled",
            );
        }
        let enabled = enabled_flag != Some(false) && disabled_flag != Some(true);
        let always_load = flag(self, &mut errors, "always_load").unwrap_or(false)
            || flag(self, &mut errors, "alwaysLoad").unwrap_or(false);
        let sampling = flag(self, &mut errors, "sampling").unwrap_or(false);

        let transport = self.transport(entry, &path, &get, !enabled, &mut errors);
        let oauth = match get("oauth") {
            Some(node) => self.oauth(node, &path.key("oauth"), !enabled, &mut errors),
            None => Some(OAuthConfig::default()),
        };

        let timeout = match (get("timeout_ms"), get("timeout")) {
            (Some(ms), other) => {
                if other.is_some() {
                    self.warn(
                        &path,
                        "both timeout_ms and timeout are set; using timeout_ms",
                    );
                }
                errors.keep(self.millis(ms, &path.key("timeout_ms")))
            }
            (None, Some(ms)) => errors.keep(self.millis(ms, &path.key("timeout"))),
            (None, None) => Some(DEFAULT_TIMEOUT),
        };
        let startup_timeout = match get("startup_timeout_ms") {
            Some(n) => errors
                .keep(self.millis(n, &path.key("startup_timeout_ms")))
                .map(Some),
            None => Some(None),
        };

        // Outer `None`: the key is there and bad.
        let allow = match get("allow") {
            Some(n) => self.globs(n, &path.key("allow"), &mut errors).map(Some),
            None => Some(None),
        };
        if allow
            .as_ref()
            .is_some_and(|a| a.as_ref().is_some_and(Vec::is_empty))
        {
            self.warn(
                &path.key("allow"),
                "empty: no tool of this server will be exposed",
            );
        }
        let deny = match get("deny") {
            Some(n) => self.globs(n, &path.key("deny"), &mut errors),
            None => Some(Vec::new()),
        };

        let explicit_prefix = match entries.iter().find(|e| e.key == "prefix") {
            Some(e) => {
                let prefix_path = path.key("prefix");
                let prefix = self.string(&e.node, &prefix_path).and_then(|prefix| {
                    self.check_explicit_prefix(prefix, &prefix_path, e.node.pos)
                        .map(|()| prefix.to_owned())
                });
                errors
                    .keep(prefix)
                    .map(|prefix| Some((prefix, prefix_path, e.node.pos)))
            }
            None => Some(None),
        };

        let (
            Some(transport),
            Some(timeout),
            Some(startup_timeout),
            Some(allow),
            Some(deny),
            Some(explicit_prefix),
        ) = (
            transport,
            timeout,
            startup_timeout,
            allow,
            deny,
            explicit_prefix,
        )
        else {
            return errors.finish(None, || self.unexplained(&path));
        };
        // Each glob was checked above, so this cannot fail; map defensively.
        let tools = ToolFilter::new(allow, deny).map_err(|e| {
            vec![self.invalid(
                &path,
                entry.node.pos,
                "valid allow/deny globs",
                e.to_string(),
            )]
        })?;
        let startup_timeout = startup_timeout.unwrap_or(if transport.runs_a_package_runner() {
            DEFAULT_RUNNER_STARTUP_TIMEOUT
        } else {
            DEFAULT_STARTUP_TIMEOUT
        });
        let pending = Pending {
            name: entry.key.clone(),
            pos: entry.node.pos,
            path: path.clone(),
            explicit_prefix,
            transport,
            timeout,
            startup_timeout,
            tools,
            enabled,
            always_load,
            oauth: oauth.unwrap_or_default(),
            sampling,
        };
        errors.finish(Some(pending), || self.unexplained(&path))
    }

    /// An HTTP server's `oauth` table: how devboy identifies itself when
    /// the server asks for a login. Strings expand `${VAR}`.
    fn oauth(
        &mut self,
        node: &Node,
        path: &KeyPath,
        lenient: bool,
        errors: &mut Gathered,
    ) -> Option<OAuthConfig> {
        let Some(entries) = node.as_table() else {
            errors.push(self.wrong_type(path, node, self.table_word()));
            return None;
        };
        let before = errors.len();
        let mut oauth = OAuthConfig::default();
        for entry in entries {
            let key = path.key(&entry.key);
            match entry.key.as_str() {
                "client_id" | "clientId" => {
                    oauth.client_id = errors.keep(self.expanded(&entry.node, &key, lenient));
                }
                "client_secret" | "clientSecret" => {
                    oauth.client_secret = errors.keep(self.expanded(&entry.node, &key, lenient));
                }
                "client_metadata_url" | "clientMetadataUrl" => {
                    let url = self.expanded(&entry.node, &key, lenient).and_then(|url| {
                        if url.starts_with("https://") {
                            Ok(url)
                        } else {
                            Err(self.invalid(
                                &key,
                                entry.node.pos,
                                "an https:// URL (a client ID metadata document)",
                                format!("the string {}", quote_short(&url)),
                            ))
                        }
                    });
                    oauth.client_metadata_url = errors.keep(url);
                }
                "scopes" => {
                    oauth.scopes = self.string_array(&entry.node, &key, None, errors);
                }
                "callback_port" | "callbackPort" => {
                    let port = match entry.node.value {
                        Value::Integer(n) if (1..=65_535).contains(&n) => {
                            Ok(u16::try_from(n).unwrap_or(0))
                        }
                        _ => Err(self.wrong_type(&key, &entry.node, "a port number (1–65535)")),
                    };
                    oauth.callback_port = errors.keep(port);
                }
                "grant" => {
                    let grant = match entry.node.value {
                        Value::String(ref g) if g == "authorization_code" => {
                            Ok(OAuthGrant::AuthorizationCode)
                        }
                        Value::String(ref g) if g == "client_credentials" => {
                            Ok(OAuthGrant::ClientCredentials)
                        }
                        Value::String(ref g) if g == "cross_app" => Ok(OAuthGrant::CrossApp),
                        _ => Err(self.wrong_type(&key, &entry.node, GRANTS)),
                    };
                    if let Some(grant) = errors.keep(grant) {
                        oauth.grant = grant;
                    }
                }
                "private_key_file" | "privateKeyFile" => {
                    let file = self.expanded(&entry.node, &key, lenient);
                    oauth.private_key_file = errors.keep(file).map(|f| self.resolve_dir(&f));
                }
                "idp_token_endpoint" | "idpTokenEndpoint" => {
                    let url = self.expanded(&entry.node, &key, lenient).and_then(|url| {
                        if url.starts_with("https://") || url.starts_with("http://") {
                            Ok(url)
                        } else {
                            Err(self.invalid(
                                &key,
                                entry.node.pos,
                                "an http(s):// URL (the identity provider's token endpoint)",
                                format!("the string {}", quote_short(&url)),
                            ))
                        }
                    });
                    oauth.idp_token_endpoint = errors.keep(url);
                }
                "idp_client_id" | "idpClientId" => {
                    oauth.idp_client_id = errors.keep(self.expanded(&entry.node, &key, lenient));
                }
                "id_token" | "idToken" => {
                    oauth.id_token = errors.keep(self.expanded(&entry.node, &key, lenient));
                }
                "id_token_command" | "idTokenCommand" => {
                    oauth.id_token_command =
                        errors.keep(self.string(&entry.node, &key).map(str::to_owned));
                }
                _ => errors.push(self.unknown_key(path, entry, OAUTH_KEYS)),
            }
        }
        self.check_grant(&oauth, node, path, errors);
        if oauth.client_secret.is_some() && oauth.client_id.is_none() {
            errors.push(self.invalid(
                &path.key("client_secret"),
                node.pos,
                "a client_id beside it (a secret belongs to a registered client)",
                "a client_secret alone".to_owned(),
            ));
        }
        (errors.len() == before).then_some(oauth)
    }

    /// What each grant needs beside it, and nothing a grant would ignore.
    fn check_grant(&self, oauth: &OAuthConfig, node: &Node, path: &KeyPath, errors: &mut Gathered) {
        let grant_key = path.key("grant");
        let mut need = |missing: bool, what: &str, found: &str| {
            if missing {
                errors.push(self.invalid(&grant_key, node.pos, what, found.to_owned()));
            }
        };
        let proof = oauth.client_secret.is_some() as u8 + oauth.private_key_file.is_some() as u8;
        let id_token = oauth.id_token.is_some() as u8 + oauth.id_token_command.is_some() as u8;
        let cross_app_keys =
            oauth.idp_token_endpoint.is_some() || oauth.idp_client_id.is_some() || id_token > 0;
        match oauth.grant {
            OAuthGrant::AuthorizationCode => {
                need(
                    oauth.private_key_file.is_some(),
                    "grant = \"client_credentials\" beside private_key_file (a signed assertion is a machine client's proof)",
                    "the authorization-code grant",
                );
                need(
                    cross_app_keys,
                    "grant = \"cross_app\" beside the identity provider's keys",
                    "the authorization-code grant",
                );
            }
            OAuthGrant::ClientCredentials => {
                need(
                    oauth.client_id.is_none() || proof != 1,
                    "client_id and one of client_secret or private_key_file beside grant = \"client_credentials\"",
                    if proof == 2 { "both a secret and a key" } else { "a grant without them" },
                );
                need(
                    cross_app_keys,
                    "no identity provider keys beside grant = \"client_credentials\" (they belong to grant = \"cross_app\")",
                    "identity provider keys",
                );
            }
            OAuthGrant::CrossApp => {
                need(
                    oauth.client_id.is_none() || oauth.client_secret.is_none(),
                    "client_id and client_secret beside grant = \"cross_app\" (the client the server's authorization server knows)",
                    "a grant without both",
                );
                need(
                    oauth.idp_token_endpoint.is_none() || id_token != 1,
                    "idp_token_endpoint and one of id_token or id_token_command beside grant = \"cross_app\"",
                    if id_token == 2 { "both an id_token and a command" } else { "a grant without them" },
                );
                need(
                    oauth.private_key_file.is_some(),
                    "no private_key_file beside grant = \"cross_app\" (the client authenticates with its secret)",
                    "a private_key_file",
                );
            }
        }
    }

    /// How to reach the server, or `None` with its errors gathered.
    fn transport<'n>(
        &mut self,
        entry: &'n Entry,
        path: &KeyPath,
        get: &dyn Fn(&str) -> Option<&'n Node>,
        lenient: bool,
        errors: &mut Gathered,
    ) -> Option<UpstreamTransport> {
        enum Kind {
            Stdio,
            Http,
        }
        // Without a usable `type`, what the entry has says which it is, so
        // that the rest of it is still checked.
        let inferred = if get("command").is_some() {
            Some(Kind::Stdio)
        } else if get("url").is_some() {
            Some(Kind::Http)
        } else {
            None
        };
        let kind = match get("type") {
            Some(node) => {
                let type_path = path.key("type");
                match self.string(node, &type_path) {
                    Ok("stdio") => Some(Kind::Stdio),
                    Ok("http" | "streamable-http" | "streamableHttp") => Some(Kind::Http),
                    Ok(other) if other == "sse" || self.format == ConfigFormat::McpJson => {
                        self.warn(
                            &type_path,
                            format_args!(
                                "transport {} is not supported by devboy (stdio and http are); the server will show as failed",
                                quote_short(other)
                            ),
                        );
                        return Some(UpstreamTransport::Unsupported {
                            kind: other.to_owned(),
                        });
                    }
                    Ok(_) => {
                        errors.push(self.wrong_type(
                            &type_path,
                            node,
                            &format!("one of: {}", TOML_TYPES.join(", ")),
                        ));
                        inferred
                    }
                    Err(error) => {
                        errors.push(error);
                        inferred
                    }
                }
            }
            None if inferred.is_some() => inferred,
            None => {
                errors.push(self.invalid(
                    path,
                    entry.node.pos,
                    "`command` (a stdio server) or `url` (an http server)",
                    "neither",
                ));
                return None;
            }
        };
        let kind = kind?;
        let (foreign, name) = match kind {
            Kind::Stdio => (HTTP_ONLY_KEYS, "stdio"),
            Kind::Http => (STDIO_ONLY_KEYS, "http"),
        };
        for key in foreign {
            if get(key).is_some() {
                self.warn(&path.key(key), format_args!("ignored for a {name} server"));
            }
        }
        let required = |loader: &Self, errors: &mut Gathered, key: &str| {
            let node = get(key);
            if node.is_none() {
                let what = if key == "command" {
                    "a stdio server's `command` (a string)"
                } else {
                    "an http server's `url` (a string)"
                };
                errors.push(loader.invalid(&path.key(key), entry.node.pos, what, "nothing"));
            }
            node
        };
        match kind {
            Kind::Stdio => {
                let command_path = path.key("command");
                let command = required(self, errors, "command").and_then(|node| {
                    let command = self.expanded(node, &command_path, lenient).and_then(|c| {
                        if c.trim().is_empty() {
                            Err(self.wrong_type(&command_path, node, "a program to run"))
                        } else {
                            Ok(c)
                        }
                    });
                    errors.keep(command)
                });
                let args = match get("args") {
                    Some(n) => self.string_array(n, &path.key("args"), Some(lenient), errors),
                    None => Some(Vec::new()),
                };
                let env = match get("env") {
                    Some(n) => self.string_map(n, &path.key("env"), lenient, errors),
                    None => Some(BTreeMap::new()),
                };
                let cwd = match get("cwd") {
                    Some(n) => {
                        let dir = self.expanded(n, &path.key("cwd"), lenient);
                        errors.keep(dir).map(|dir| Some(self.resolve_dir(&dir)))
                    }
                    None => Some(None),
                };
                Some(UpstreamTransport::Stdio {
                    command: command?,
                    args: args?,
                    env: env?,
                    cwd: cwd?,
                })
            }
            Kind::Http => {
                let url_path = path.key("url");
                let url = required(self, errors, "url").and_then(|url_node| {
                    let url = self.expanded(url_node, &url_path, lenient).and_then(|url| {
                        let scheme_ok = ["http://", "https://"].iter().any(|scheme| {
                            url.get(..scheme.len())
                                .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
                        });
                        // A disabled server may keep an unexpanded `${URL}`.
                        let unexpanded = lenient && super::expand::has_reference(&url);
                        if scheme_ok || unexpanded {
                            Ok(url)
                        } else {
                            Err(self.invalid(
                                &url_path,
                                url_node.pos,
                                "an http:// or https:// URL",
                                format!("the string {}", quote_short(&url)),
                            ))
                        }
                    });
                    errors.keep(url)
                });
                let headers = match get("headers") {
                    Some(n) => self.string_map(n, &path.key("headers"), lenient, errors),
                    None => Some(BTreeMap::new()),
                };
                Some(UpstreamTransport::Http {
                    url: url?,
                    headers: headers?,
                })
            }
        }
    }

    /// A `cwd` as an absolute path; relative ones are relative to the
    /// config file's directory, not to wherever devboy was started.
    fn resolve_dir(&self, dir: &str) -> PathBuf {
        let dir = Path::new(dir);
        let joined = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            self.origin
                .parent()
                .unwrap_or_else(|| Path::new(""))
                .join(dir)
        };
        std::path::absolute(&joined).unwrap_or(joined)
    }

    // ------------------------------------------------------------ prefixes

    /// An explicit prefix is a name part, or empty: that server's tools,
    /// prompts and resources keep their own names (at most one server may
    /// do that; two empty prefixes clash like any two equal ones).
    fn check_explicit_prefix(&self, prefix: &str, path: &KeyPath, pos: Option<Pos>) -> Result<()> {
        let valid = prefix.is_empty()
            || prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                && !prefix.contains("__")
                && !prefix.ends_with('_');
        if !valid {
            return Err(self.invalid(
                path,
                pos,
                "a prefix of letters, digits, `_` and `-`, without `__` and not ending in `_` (or \"\" to keep the server's own names)",
                describe(&Value::String(prefix.to_owned()), ""),
            ));
        }
        if prefix.eq_ignore_ascii_case(RESERVED_PREFIX) {
            return Err(self.invalid(
                path,
                pos,
                format!("a prefix other than {RESERVED_PREFIX:?} (reserved for devboy's built-in tools)"),
                describe(&Value::String(prefix.to_owned()), ""),
            ));
        }
        Ok(())
    }

    /// Gives every server its prefix: explicit ones as written, derived
    /// ones from the name, renamed `name_2`, `name_3`, … in file order when
    /// taken by another derived prefix or reserved. A clash involving an
    /// explicit prefix (two equal explicit ones, or a derived one equal to
    /// an explicit one) makes the later server invalid: which of the two
    /// the user meant to rename is not ours to guess, and the earlier one
    /// keeps working. An invalid server still gets a unique derived prefix,
    /// so it can be named in status.
    fn assign_prefixes(&mut self, mut pending: Vec<Pending>) -> Vec<UpstreamConfig> {
        let mut explicit: Vec<(String, KeyPath)> = Vec::new();
        for p in &mut pending {
            let Some((prefix, prefix_path, pos)) = p.explicit_prefix.take() else {
                continue;
            };
            match explicit.iter().find(|(taken, _)| *taken == prefix) {
                Some((_, first)) => {
                    let error = self.error(
                        pos,
                        ConfigErrorKind::DuplicatePrefix {
                            key: prefix_path.to_string(),
                            prefix: prefix.clone(),
                            other: first.to_string(),
                        },
                    );
                    p.transport = UpstreamTransport::Invalid {
                        error: error.to_string(),
                    };
                }
                None => {
                    explicit.push((prefix.clone(), prefix_path.clone()));
                    p.explicit_prefix = Some((prefix, prefix_path, pos));
                }
            }
        }

        let mut derived: Vec<(String, KeyPath)> = Vec::new();
        let mut renames = Vec::new();
        for p in pending.iter_mut().filter(|p| p.explicit_prefix.is_none()) {
            let base = derive_prefix(&p.name);
            let invalid = matches!(p.transport, UpstreamTransport::Invalid { .. });
            if let Some((_, other)) = explicit.iter().find(|(taken, _)| *taken == base) {
                if !invalid {
                    let error = self.error(
                        p.pos,
                        ConfigErrorKind::DuplicatePrefix {
                            key: format!("{} (prefix derived from the name)", p.path),
                            prefix: base.clone(),
                            other: other.to_string(),
                        },
                    );
                    p.transport = UpstreamTransport::Invalid {
                        error: error.to_string(),
                    };
                }
            }
            let invalid = matches!(p.transport, UpstreamTransport::Invalid { .. });
            let taken = |candidate: &str| {
                candidate.eq_ignore_ascii_case(RESERVED_PREFIX)
                    || explicit.iter().any(|(t, _)| t == candidate)
                    || derived.iter().any(|(t, _)| t == candidate)
            };
            let mut prefix = base.clone();
            let mut n = 2usize;
            while taken(&prefix) {
                prefix = numbered(&base, n);
                n += 1;
            }
            // An invalid server's prefix names it in status only; renaming
            // it is not worth a warning of its own.
            if prefix != base && !invalid {
                let why = match derived.iter().find(|(t, _)| *t == base) {
                    Some((_, other)) => format!("is taken by {other}"),
                    None => "is reserved".to_owned(),
                };
                renames.push((
                    p.path.clone(),
                    format!("prefix {base:?} {why}; using {prefix:?} (set `prefix` to choose one)"),
                ));
            }
            derived.push((prefix, p.path.clone()));
        }
        for (path, message) in renames {
            self.warn(&path, message);
        }

        let mut derived = derived.into_iter();
        let mut upstreams = Vec::with_capacity(pending.len());
        for p in pending {
            let prefix = match p.explicit_prefix {
                Some((prefix, _, _)) => prefix,
                // One derived entry per server without an explicit prefix,
                // in the same order; the fallback is unreachable.
                None => derived
                    .next()
                    .map(|(prefix, _)| prefix)
                    .unwrap_or_else(|| derive_prefix(&p.name)),
            };
            upstreams.push(UpstreamConfig {
                name: p.name,
                prefix,
                transport: p.transport,
                timeout: p.timeout,
                startup_timeout: p.startup_timeout,
                tools: p.tools,
                enabled: p.enabled,
                always_load: p.always_load,
                oauth: p.oauth,
                sampling: p.sampling,
            });
        }
        upstreams
    }
}

/// The default prefix for a server named `name`: sanitized, at most
/// [`DERIVED_PREFIX_MAX`] characters, no trailing `_`, never empty.
pub(super) fn derive_prefix(name: &str) -> String {
    let sanitized = sanitize_component(name);
    let cut = sanitized.get(..DERIVED_PREFIX_MAX).unwrap_or(&sanitized);
    let trimmed = cut.trim_end_matches('_');
    if trimmed.is_empty() {
        "server".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// `base_n`, cut so it stays within [`DERIVED_PREFIX_MAX`].
fn numbered(base: &str, n: usize) -> String {
    let suffix = format!("_{n}");
    let room = DERIVED_PREFIX_MAX.saturating_sub(suffix.len()).max(1);
    let head = base.get(..room.min(base.len())).unwrap_or(base);
    let head = head.trim_end_matches('_');
    let head = if head.is_empty() { "server" } else { head };
    format!("{head}{suffix}")
}
