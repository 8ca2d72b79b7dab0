//! The proxy's configuration: which upstream MCP servers to wrap and how.
//!
//! Two formats feed one schema. A `.json` file is read as Claude Code's
//! `mcpServers` JSON, so a user's existing `.mcp.json` loads unedited:
//! keys devboy does not use become [`ProxyConfig::warnings`], never
//! failures. A `.toml` file is devboy's own `devboy.toml` and is read
//! strictly: an unknown key is an error naming it. Both are parsed into one
//! order-preserving tree first and validated by one validator, so errors
//! read the same way and upstreams keep file order.
//!
//! Resolution happens here, once: `${VAR}` expansion, relative `cwd`
//! against the config file's directory, default timeouts, and unique
//! tool-name prefixes. What leaves this module is ready to use.
//!
//! Only a problem with the file as a whole stops loading: it cannot be
//! read, is not valid TOML/JSON, or its top level is not a table; then
//! nothing in it can be trusted, and [`ProxyConfig::resolve_or_default`]
//! gives what a starting devboy serves instead. A problem inside one
//! server's entry (an unset variable, a wrong type, an unknown key, a
//! clashing prefix) makes that one server [`UpstreamTransport::Invalid`]:
//! it shows as failed with every error of its entry, and the other servers
//! start. Claude Code treats its own `.mcp.json` the same way, and a user
//! whose one server is misconfigured should still have the rest. Any
//! other bad key is left out, what applies without it applies, and it is
//! one of [`ProxyConfig::problems`]: `[devboy]` and `[tools]` key by key,
//! `[builtins]`, `[retrieval]` and `[team]` as a whole (half a model or
//! half a team setup is none). Every bad key is reported, not the first.

mod code;
mod error;
mod expand;
mod filter;
pub mod import;
pub(crate) mod keypath;
mod schema;
pub mod team;
pub(crate) mod tree;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use code::CodeConfig;
pub use error::{ConfigError, ConfigErrorKind};
pub use filter::ToolFilter;

/// The name devboy has in Claude Code unless the config says otherwise.
pub const DEFAULT_SERVER_NAME: &str = "devboy";
/// Time allowed for one tool call, unless a server sets `timeout_ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Time allowed to connect and initialize, unless a server sets
/// `startup_timeout_ms`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// The same for a server started through a package runner (`npx -y pkg`,
/// `uvx pkg`): its first start downloads and installs the package, which
/// takes longer than 30 s on a slow network, and a runner stopped halfway
/// may leave a broken install behind that fails every later start.
pub const DEFAULT_RUNNER_STARTUP_TIMEOUT: Duration = Duration::from_secs(180);
/// The prefix of devboy's built-in tools (`devboy_expand`, …); no upstream
/// may use it (compared ignoring case).
pub const RESERVED_PREFIX: &str = "devboy";
/// Longest prefix derived from a server's name; explicit prefixes may be
/// longer, at the cost of shorter tool names.
pub const DERIVED_PREFIX_MAX: usize = 16;

/// The default config compiled into the binary: no servers, every key
/// shown in comments.
pub const EMBEDDED_DEFAULT_TOML: &str = include_str!("../../../../config/devboy.toml");
const EMBEDDED_ORIGIN: &str = "<embedded config/devboy.toml>";

/// devboy's configuration, resolved and validated.
#[derive(Clone, Debug, PartialEq)]
pub struct ProxyConfig {
    /// Where it came from.
    pub source: ConfigSource,
    /// The name the user gave devboy in Claude Code (`claude mcp add
    /// <name>`); it counts against the 64-character tool name limit.
    pub server_name: String,
    /// The upstream servers in file order, disabled ones included with
    /// `enabled == false`, entries with a problem of their own included as
    /// [`UpstreamTransport::Invalid`]. Names and prefixes are unique.
    pub upstreams: Vec<UpstreamConfig>,
    /// The model `find_files` navigates with (`[retrieval.llm]`); `None`
    /// when there is none (or the section has a problem, which is then a
    /// warning): `find_files` ranks offline.
    pub retrieval_llm: Option<LlmConfig>,
    /// `[team]` (devboy.toml only): the team's store and providers; the
    /// default (nothing shared, nothing blended) when absent or invalid.
    pub team: team::TeamConfig,
    /// What was wrong with `[team]`, naming the file and key: the tune
    /// commands that need it stop with it (the proxy only warns).
    pub team_problem: Option<String>,
    /// `[builtins] enabled` (devboy.toml only): the built-in tools to offer,
    /// by exposed name (`devboy_status`, …); `None`: all of them.
    /// `devboy_expand` is always among them.
    pub builtins: Option<Vec<String>>,
    /// `[builtins] always_load` (devboy.toml only): the built-ins, by
    /// exposed name, that a client with a tool search loads up front
    /// (default `devboy_explore` and `devboy_find_files`); `devboy_expand`
    /// and `devboy_run`, which devboy's hints name, always are.
    pub always_load: Vec<String>,
    /// `[tools]` (devboy.toml only): how the servers' tool definitions
    /// are passed on.
    pub tools: ToolsConfig,
    /// `[code]` (`"code"` in a JSON config): code mode's limits and what
    /// a script may call.
    pub code: CodeConfig,
    /// Things worth telling the user that did not stop loading (ignored
    /// keys, unsupported transports, renamed prefixes), each starting with
    /// the file and key path.
    pub warnings: Vec<String>,
    /// What in the file is wrong and left out, outside the server entries
    /// (whose errors are their [`UpstreamTransport::Invalid`]): each names
    /// the file, line:col and key, what was expected, and what applies
    /// instead. Empty when the whole file applies.
    pub problems: Vec<String>,
}

/// The built-ins loaded up front besides those devboy's hints name, when
/// `[builtins] always_load` does not say.
pub fn default_always_load() -> Vec<String> {
    vec!["devboy_explore".to_owned(), "devboy_find_files".to_owned()]
}

/// `[tools]`: how the servers' tool definitions reach the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolsConfig {
    /// `compact_schemas` (default true): the servers' input schemas passed
    /// on in their smallest equivalent form ([`crate::tool_schema`]).
    pub compact_schemas: bool,
    /// `lazy` (default `auto`): whether `tools/list` offers every tool or
    /// only the built-ins, `devboy_find_tools` and the tools the session
    /// has found or used.
    pub lazy: LazyTools,
    /// `lazy_budget` (default [`DEFAULT_LAZY_BUDGET`]): the definition
    /// tokens above which `lazy = "auto"` holds the tools back.
    pub lazy_budget: usize,
}

/// Tokens of tool definitions above which `lazy = "auto"` holds tools
/// back: a tenth of a 200k context, Claude Code's own threshold for
/// deferring MCP tools behind its tool search.
pub const DEFAULT_LAZY_BUDGET: usize = 20_000;

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            compact_schemas: true,
            lazy: LazyTools::Auto,
            lazy_budget: DEFAULT_LAZY_BUDGET,
        }
    }
}

/// `[tools] lazy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LazyTools {
    /// Lazy when the definitions pass the budget and the client does not
    /// defer tools itself (Claude Code does, behind its tool search).
    Auto,
    /// Always lazy.
    On,
    /// Every tool listed.
    Off,
}

impl LazyTools {
    /// Whether a session is lazy: its client (by the name it gave at
    /// `initialize`) and what the full listing costs (`definition_tokens`,
    /// read only when [`measures`](Self::measures) says so).
    pub fn applies(
        self,
        client_name: Option<&str>,
        definition_tokens: usize,
        budget: usize,
    ) -> bool {
        match self {
            LazyTools::On => true,
            LazyTools::Off => false,
            LazyTools::Auto => self.measures(client_name) && definition_tokens > budget,
        }
    }

    /// Whether the decision for this client depends on what the listing
    /// costs (so that it need be measured at all): `auto`, for a client
    /// without a tool search of its own.
    pub fn measures(self, client_name: Option<&str>) -> bool {
        self == LazyTools::Auto && !client_defers_tools(client_name)
    }
}

/// Whether a client holds MCP tools back behind a search of its own:
/// Claude Code (`claude-code`) does, past a share of its context.
pub fn client_defers_tools(client_name: Option<&str>) -> bool {
    client_name.is_some_and(|n| n.starts_with("claude-code"))
}

/// `[retrieval.llm]`: the model that ranks candidates for `find_files`'
/// Beam and Block strategies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmConfig {
    /// Which API it speaks.
    pub provider: LlmProvider,
    /// The model's name as the API knows it (empty for MCP sampling:
    /// the client picks).
    pub model: String,
    /// Where the API is (`None`: the provider's public endpoint).
    pub base_url: Option<String>,
    /// The environment variable holding the API key (`None` or empty: no
    /// key sent, as local servers want).
    pub api_key_env: Option<String>,
    /// Time allowed for one model call, retries excluded.
    pub timeout: Duration,
    /// Most model calls in flight at once (Block ranks its blocks in
    /// parallel).
    pub max_parallel: usize,
    /// Retries of a call answered 429 or 5xx (or whose connection
    /// failed), with exponential backoff.
    pub max_retries: u32,
    /// Whether the stable part of a prompt is marked for the provider's
    /// prompt cache (Anthropic `cache_control`).
    pub cache: bool,
}

/// The APIs `find_files` can rank with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LlmProvider {
    /// The Anthropic Messages API.
    Anthropic,
    /// Any OpenAI-compatible chat-completions endpoint (OpenAI, llama.cpp,
    /// Ollama, vLLM, …).
    OpenAi,
    /// MCP sampling: the connected client's model (`sampling/createMessage`).
    Sampling,
}

impl LlmProvider {
    /// The name used in the config.
    pub fn name(self) -> &'static str {
        match self {
            LlmProvider::Anthropic => "anthropic",
            LlmProvider::OpenAi => "openai",
            LlmProvider::Sampling => "mcp-sampling",
        }
    }
}

/// Default time for one model call.
pub const DEFAULT_LLM_TIMEOUT: Duration = Duration::from_secs(60);
/// Default most model calls at once.
pub const DEFAULT_LLM_PARALLEL: usize = 4;
/// Default retries of a failed model call.
pub const DEFAULT_LLM_RETRIES: u32 = 3;

/// Where a [`ProxyConfig`] came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// A file on disk (the path as given).
    File(PathBuf),
    /// The default compiled into devboy.
    Embedded,
}

/// One upstream MCP server.
#[derive(Clone, Debug, PartialEq)]
pub struct UpstreamConfig {
    /// The server's key in the file.
    pub name: String,
    /// What its tools are exposed under: `<prefix>__<tool>`. Only
    /// `[A-Za-z0-9_-]`, no `__`, not ending in `_` (so the first `__` of an
    /// exposed name is the separator), never `devboy`, and unique across
    /// upstreams. Empty only when the config says `prefix = ""`: then the
    /// server's tools, prompts and resources keep their own names
    /// ([`Self::keeps_names`]).
    pub prefix: String,
    /// How to reach it.
    pub transport: UpstreamTransport,
    /// Time allowed for one tool call.
    pub timeout: Duration,
    /// Time allowed to connect and initialize.
    pub startup_timeout: Duration,
    /// Which of its tools devboy exposes.
    pub tools: ToolFilter,
    /// False when the file disables it (`disabled: true` or `enabled: false`).
    pub enabled: bool,
    /// `always_load` (`alwaysLoad`, Claude Code's spelling, in a JSON
    /// config): every tool of it carries `_meta["anthropic/alwaysLoad"]`,
    /// so that a client with a tool search (Claude Code) loads them up
    /// front instead of deferring them.
    pub always_load: bool,
    /// How devboy identifies itself to an HTTP server that asks for a
    /// login (`oauth`); empty: registered dynamically or by the server's
    /// own means.
    pub oauth: OAuthConfig,
    /// `sampling`: devboy declares sampling to this server and passes its
    /// `sampling/createMessage` on to the agent. Off by default: Claude
    /// Code does not sample, and a server told it may would offer tools
    /// that then fail.
    pub sampling: bool,
}

/// An HTTP server's `oauth` table. Every field is optional: without
/// one, devboy registers itself with the authorization server (dynamic
/// client registration) and asks for the scopes the server names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OAuthConfig {
    /// A client id registered with the authorization server.
    pub client_id: Option<String>,
    /// Its secret, for a confidential client (`${VAR}` keeps it out of
    /// the file).
    pub client_secret: Option<String>,
    /// The scopes to ask for, instead of those the server names.
    pub scopes: Option<Vec<String>>,
    /// An `https://` URL of a client ID metadata document describing
    /// devboy, used as the client id where the server takes one.
    pub client_metadata_url: Option<String>,
    /// The loopback port `devboy login` listens on for the redirect
    /// (a client registered with a fixed redirect URI needs one).
    pub callback_port: Option<u16>,
    /// How devboy gets its tokens (`grant`).
    pub grant: OAuthGrant,
    /// A PEM file with the private key the client proves itself with
    /// (`private_key_jwt`: a signed assertion instead of a secret), for
    /// `grant = "client_credentials"`. Relative to the config file.
    pub private_key_file: Option<PathBuf>,
    /// For `grant = "cross_app"`: the enterprise identity provider's token
    /// endpoint, where the user's ID token is exchanged for an
    /// authorization grant to this server.
    pub idp_token_endpoint: Option<String>,
    /// The client id devboy has at that identity provider, when it wants
    /// one named in the exchange.
    pub idp_client_id: Option<String>,
    /// The user's ID token from the identity provider (`${VAR}` keeps it
    /// out of the file)…
    pub id_token: Option<String>,
    /// …or a command that prints it, run on every connect (an enterprise's
    /// login tool), so that a fresh one is used.
    pub id_token_command: Option<String>,
}

/// How devboy gets an HTTP server's tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OAuthGrant {
    /// A person logs in once with `devboy login` (a browser, PKCE).
    #[default]
    AuthorizationCode,
    /// devboy exchanges `client_id` and `client_secret` (or an assertion
    /// signed with `private_key_file`) for a token itself whenever it
    /// connects, with no login and nothing kept on disk (the OAuth
    /// client-credentials extension, for machine-to-machine use).
    ClientCredentials,
    /// Cross-app access (enterprise-managed authorization): the user's ID
    /// token from the enterprise's identity provider is exchanged there for
    /// an authorization grant (an ID-JAG), which the server's authorization
    /// server exchanges for a token; no browser, nothing kept on disk.
    CrossApp,
}

impl UpstreamConfig {
    /// True when its tools, prompts and resources are exposed under their
    /// own names (`prefix = ""`), so that devboy can stand in front of one
    /// server transparently.
    pub fn keeps_names(&self) -> bool {
        self.prefix.is_empty()
    }
}

/// How to reach an upstream server. All `${VAR}`s are already expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpstreamTransport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program to run.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to the inherited environment.
        env: BTreeMap<String, String>,
        /// Its working directory, absolute; `None` inherits devboy's.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint, `http://` or `https://`.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
    /// A transport devboy does not speak (e.g. `sse`). Kept so the proxy
    /// can list the server as failed instead of refusing the whole file.
    Unsupported {
        /// The `type` as written.
        kind: String,
    },
    /// An entry that cannot be used as written (an unset variable, a value
    /// of the wrong type, an unknown key in `devboy.toml`, a clashing
    /// prefix, …). One bad entry must not stop the others, so the entry is
    /// kept and shown as failed, with this reason.
    Invalid {
        /// The config error, naming the file, the key and what was expected.
        error: String,
    },
}

impl UpstreamTransport {
    /// A short name for status output: `stdio`, `http`, or the unsupported
    /// kind as written.
    pub fn kind(&self) -> &str {
        match self {
            UpstreamTransport::Stdio { .. } => "stdio",
            UpstreamTransport::Http { .. } => "http",
            UpstreamTransport::Unsupported { kind } => kind,
            UpstreamTransport::Invalid { .. } => "invalid",
        }
    }

    /// Whether this starts a package runner that may first download the
    /// server (`npx`, `bunx`, `pnpx`, `uvx`, `pipx run`, `npm exec`,
    /// `pnpm dlx`, `yarn dlx`, `uv tool run`), judged by the program's
    /// file name and first argument.
    pub fn runs_a_package_runner(&self) -> bool {
        let UpstreamTransport::Stdio { command, args, .. } = self else {
            return false;
        };
        // The file name, on any platform's separators, without `.cmd`/`.exe`.
        let name = command.rsplit(['/', '\\']).next().unwrap_or_default();
        let program = name
            .split_once('.')
            .map_or(name, |(stem, _)| stem)
            .to_ascii_lowercase();
        let first = args.first().map(String::as_str).unwrap_or_default();
        match program.as_str() {
            "npx" | "bunx" | "pnpx" | "uvx" => true,
            "pipx" => first == "run",
            "npm" => first == "exec",
            "pnpm" | "yarn" => first == "dlx",
            "uv" => first == "tool" && args.get(1).is_some_and(|a| a == "run"),
            _ => false,
        }
    }

    /// Why this upstream cannot be started at all, when the config alone
    /// says so (an unsupported transport or an invalid entry).
    pub fn unusable(&self) -> Option<String> {
        match self {
            UpstreamTransport::Unsupported { kind } => Some(format!(
                "transport `{kind}` is not supported; use stdio or streamable HTTP (`type = \"http\"`)"
            )),
            UpstreamTransport::Invalid { error } => Some(error.clone()),
            UpstreamTransport::Stdio { .. } | UpstreamTransport::Http { .. } => None,
        }
    }
}

/// The two config formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigFormat {
    /// devboy's own `devboy.toml`, read strictly.
    Toml,
    /// Claude Code's `{"mcpServers": …}` JSON (`.mcp.json`), read leniently.
    McpJson,
}

impl ConfigFormat {
    /// The format a file name implies: `.toml` or `.json` (any case).
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?;
        if ext.eq_ignore_ascii_case("toml") {
            Some(ConfigFormat::Toml)
        } else if ext.eq_ignore_ascii_case("json") {
            Some(ConfigFormat::McpJson)
        } else {
            None
        }
    }
}

impl fmt::Display for ConfigFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigFormat::Toml => "TOML",
            ConfigFormat::McpJson => "JSON",
        })
    }
}

impl ProxyConfig {
    /// Reads a config file, expanding `${VAR}` from the process
    /// environment. The format follows the extension: `.json` is Claude
    /// Code's `mcpServers` JSON, `.toml` is `devboy.toml`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with_env(path, &|name| std::env::var(name).ok())
    }

    /// [`ProxyConfig::load`] with the environment given as a function.
    pub fn load_with_env(
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let format = ConfigFormat::from_path(path).ok_or_else(|| {
            let extension = path.extension().map(|e| e.to_string_lossy().into_owned());
            ConfigError::new(path, None, ConfigErrorKind::UnsupportedFormat { extension })
        })?;
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::new(path, None, ConfigErrorKind::Read { source }))?;
        Self::from_str(&text, format, path, env)
    }

    /// Parses config text. `origin` names the file in messages, and
    /// relative `cwd`s resolve against its directory.
    pub fn from_str(
        text: &str,
        format: ConfigFormat,
        origin: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        // TOML refuses a repeated key itself; JSON keeps the last, as
        // Claude Code does, and the repeats become warnings below.
        let (root, duplicates) = match format {
            ConfigFormat::Toml => tree::parse_toml(text).map(|root| (root, Vec::new())),
            ConfigFormat::McpJson => tree::parse_json(text),
        }
        .map_err(|e| e.in_file(origin, format))?;
        let resolved = schema::resolve(&root, format, origin, env)?;
        let mut warnings: Vec<String> = duplicates
            .iter()
            .map(|duplicate| format!("{}: {duplicate}", origin.display()))
            .collect();
        warnings.extend(resolved.warnings);
        Ok(ProxyConfig {
            source: ConfigSource::File(origin.to_path_buf()),
            server_name: resolved.server_name,
            upstreams: resolved.upstreams,
            retrieval_llm: resolved.retrieval_llm,
            team: resolved.team,
            team_problem: resolved.team_problem,
            builtins: resolved.builtins,
            always_load: resolved.always_load,
            tools: resolved.tools,
            code: resolved.code,
            warnings,
            problems: resolved.problems,
        })
    }

    /// The config compiled into devboy ([`EMBEDDED_DEFAULT_TOML`]): no
    /// upstreams, so devboy serves only its built-in tools.
    pub fn embedded_default() -> Self {
        let no_env = |_: &str| None;
        let parsed = Self::from_str(
            EMBEDDED_DEFAULT_TOML,
            ConfigFormat::Toml,
            Path::new(EMBEDDED_ORIGIN),
            &no_env,
        );
        // A test keeps the embedded file valid; should it ever not be, the
        // bare default below is what it is meant to say anyway.
        let mut config = parsed.unwrap_or_else(|_| ProxyConfig {
            source: ConfigSource::Embedded,
            server_name: DEFAULT_SERVER_NAME.to_owned(),
            upstreams: Vec::new(),
            retrieval_llm: None,
            team: team::TeamConfig::default(),
            team_problem: None,
            builtins: None,
            always_load: default_always_load(),
            tools: ToolsConfig::default(),
            code: CodeConfig::default(),
            warnings: Vec::new(),
            problems: Vec::new(),
        });
        config.source = ConfigSource::Embedded;
        config
    }

    /// The config a starting `devboy mcp` serves: [`ProxyConfig::resolve`],
    /// except that a file that cannot be used at all gives the embedded
    /// default (no servers, the built-in tools) with that error as its
    /// problem. It still names the file as its source, so that the file is
    /// watched and applies once fixed. Only a command line that cannot be
    /// followed is an error: `explicit` naming no file, or a file whose
    /// extension says neither format.
    pub fn resolve_or_default(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        if let Some(path) = explicit {
            let format = ConfigFormat::from_path(path);
            let exists = std::fs::metadata(path);
            match (format, exists) {
                (None, _) => return Self::load(path),
                (Some(_), Err(source)) if source.kind() == std::io::ErrorKind::NotFound => {
                    return Err(ConfigError::new(
                        path,
                        None,
                        ConfigErrorKind::Read { source },
                    ))
                }
                _ => {}
            }
        }
        match Self::resolve(explicit) {
            Ok(config) => Ok(config),
            Err(error) => {
                let mut config = Self::embedded_default();
                config.source = ConfigSource::File(error.file().to_path_buf());
                config.problems.push(format!(
                    "{error}; devboy serves its built-in tools only (no servers) until the file is fixed"
                ));
                Ok(config)
            }
        }
    }

    /// The config `devboy` runs with: the explicit path if given; else
    /// [`crate::paths::default_config_file`] if it exists; else the
    /// embedded default.
    pub fn resolve(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        if let Some(path) = explicit {
            return Self::load(path);
        }
        let default = crate::paths::default_config_file();
        if default.is_file() {
            Self::load(&default)
        } else {
            Ok(Self::embedded_default())
        }
    }

    /// The enabled entries that cannot start, with the reason each one
    /// shows as failed (for stderr at startup and `devboy doctor`).
    pub fn unusable_upstreams(&self) -> impl Iterator<Item = (&UpstreamConfig, String)> {
        self.enabled_upstreams()
            .filter_map(|u| u.transport.unusable().map(|why| (u, why)))
    }

    /// The upstreams to start.
    pub fn enabled_upstreams(&self) -> impl Iterator<Item = &UpstreamConfig> {
        self.upstreams.iter().filter(|u| u.enabled)
    }

    /// The upstream whose tools carry `prefix`.
    pub fn upstream_by_prefix(&self, prefix: &str) -> Option<&UpstreamConfig> {
        self.upstreams.iter().find(|u| u.prefix == prefix)
    }
}

#[cfg(test)]
mod tests;
