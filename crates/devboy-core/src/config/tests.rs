//! Tests of config loading: both formats, every error path, env
//! expansion, prefixes, and the embedded default.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "devboy-core-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write temp file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn env(name: &str) -> Option<String> {
    match name {
        "GITHUB_TOKEN" => Some("ghp_test123".to_owned()),
        "DOCS_TOKEN" => Some("docs-tok".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fn json(text: &str) -> Result<ProxyConfig, ConfigError> {
    ProxyConfig::from_str(
        text,
        ConfigFormat::McpJson,
        Path::new("/proj/.mcp.json"),
        &env,
    )
}

fn toml(text: &str) -> Result<ProxyConfig, ConfigError> {
    ProxyConfig::from_str(
        text,
        ConfigFormat::Toml,
        Path::new("/cfg/devboy.toml"),
        &env,
    )
}

fn ok(result: Result<ProxyConfig, ConfigError>) -> ProxyConfig {
    result.unwrap_or_else(|e| panic!("expected a config, got error: {e}"))
}

/// The error of a file that does not load; its message must contain every
/// one of `parts`.
fn file_err_with(result: Result<ProxyConfig, ConfigError>, parts: &[&str]) -> ConfigError {
    let err = match result {
        Ok(config) => panic!("expected an error, got {config:#?}"),
        Err(e) => e,
    };
    let message = err.to_string();
    for part in parts {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
    err
}

/// What is wrong with a config, in one place: the file's error, when it
/// does not load; else the one invalid server's errors, or else the
/// file's problems (there must be one of the two). Its message must
/// contain every one of `parts`.
fn err_with(result: Result<ProxyConfig, ConfigError>, parts: &[&str]) -> String {
    let message = match result {
        Err(e) => e.to_string(),
        Ok(config) => {
            let invalid: Vec<&str> = config
                .upstreams
                .iter()
                .filter_map(|u| match &u.transport {
                    UpstreamTransport::Invalid { error } => Some(error.as_str()),
                    _ => None,
                })
                .collect();
            match (invalid.as_slice(), config.problems.is_empty()) {
                ([one], true) => (*one).to_owned(),
                ([], false) => config.problems.join("\n"),
                _ => panic!("expected one invalid server or problems, got {config:#?}"),
            }
        }
    };
    for part in parts {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
    message
}

fn stdio(config: &UpstreamConfig) -> (&str, &[String], &BTreeMap<String, String>, Option<&Path>) {
    match &config.transport {
        UpstreamTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => (command, args, env, cwd.as_deref()),
        other => panic!("expected stdio, got {other:?}"),
    }
}

fn http(config: &UpstreamConfig) -> (&str, &BTreeMap<String, String>) {
    match &config.transport {
        UpstreamTransport::Http { url, headers } => (url, headers),
        other => panic!("expected http, got {other:?}"),
    }
}

const MCP_JSON: &str = r#"{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}" }
    },
    "docs": {
      "type": "http",
      "url": "${DOCS_URL:-https://mcp.example.com/mcp}",
      "headers": { "Authorization": "Bearer ${DOCS_TOKEN}", "X-Team": "core" },
      "timeout": 120000
    },
    "memory": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory"],
      "disabled": true
    },
    "legacy-events": {
      "type": "sse",
      "url": "https://events.example.com/sse"
    }
  }
}"#;

const DEVBOY_TOML: &str = r#"
[servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }

[servers.docs]
type = "http"
url = "${DOCS_URL:-https://mcp.example.com/mcp}"
headers = { Authorization = "Bearer ${DOCS_TOKEN}", X-Team = "core" }
timeout_ms = 120000

[servers.memory]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-memory"]
enabled = false

[servers.legacy-events]
type = "sse"
url = "https://events.example.com/sse"
"#;

// ---------------------------------------------------------------- formats

#[test]
fn real_mcp_json_loads_unedited_from_disk() {
    let dir = TempDir::new();
    let path = dir.write(".mcp.json", MCP_JSON);
    let config = ok(ProxyConfig::load_with_env(&path, &env));

    assert_eq!(config.source, ConfigSource::File(path.clone()));
    assert_eq!(config.server_name, "devboy");
    let names: Vec<_> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(
        names,
        ["github", "docs", "memory", "legacy-events"],
        "file order"
    );

    let github = &config.upstreams[0];
    let (command, args, vars, cwd) = stdio(github);
    assert_eq!(command, "npx");
    assert_eq!(args, ["-y", "@modelcontextprotocol/server-github"]);
    assert_eq!(vars["GITHUB_PERSONAL_ACCESS_TOKEN"], "ghp_test123");
    assert_eq!(cwd, None);
    assert_eq!(github.prefix, "github");
    assert_eq!(github.timeout, DEFAULT_TIMEOUT);
    // `npx -y …` may download the server first: a longer start.
    assert_eq!(github.startup_timeout, DEFAULT_RUNNER_STARTUP_TIMEOUT);
    assert!(github.enabled);
    assert!(github.tools.is_allow_all());

    let docs = &config.upstreams[1];
    let (url, headers) = http(docs);
    assert_eq!(url, "https://mcp.example.com/mcp");
    assert_eq!(headers["Authorization"], "Bearer docs-tok");
    assert_eq!(headers["X-Team"], "core");
    assert_eq!(docs.timeout, Duration::from_millis(120_000));

    assert!(!config.upstreams[2].enabled);
    assert_eq!(config.enabled_upstreams().count(), 3);

    let sse = &config.upstreams[3];
    assert_eq!(
        sse.transport,
        UpstreamTransport::Unsupported {
            kind: "sse".to_owned()
        }
    );
    assert_eq!(sse.transport.kind(), "sse");
    assert_eq!(sse.prefix, "legacy-events");
    assert!(
        sse.enabled,
        "unsupported is not disabled; the proxy shows it as failed"
    );

    assert_eq!(config.warnings.len(), 1, "{:#?}", config.warnings);
    assert!(config.warnings[0].contains(".mcp.json"));
    assert!(config.warnings[0].contains("mcpServers.legacy-events.type"));
    assert!(config.warnings[0].contains("not supported"));
}

#[test]
fn toml_equivalent_gives_the_same_upstreams() {
    let from_json = ok(json(MCP_JSON));
    let from_toml = ok(toml(DEVBOY_TOML));
    assert_eq!(from_toml.upstreams, from_json.upstreams);
    assert_eq!(from_toml.server_name, "devboy");
}

#[test]
fn toml_accepts_mcp_servers_alias_and_server_name() {
    let config = ok(toml(
        r#"
[devboy]
server_name = "db"

[mcpServers.fs]
command = "mcp-fs"

[servers.git]
command = "mcp-git"
"#,
    ));
    assert_eq!(config.server_name, "db");
    let names: Vec<_> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["fs", "git"]);
}

#[test]
fn json_devboy_object_sets_server_name() {
    let config = ok(json(
        r#"{"devboy": {"server_name": "proxy"}, "mcpServers": {}}"#,
    ));
    assert_eq!(config.server_name, "proxy");
    assert!(config.upstreams.is_empty());
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn toml_file_loads_from_disk_and_format_follows_extension() {
    let dir = TempDir::new();
    let path = dir.write("devboy.TOML", DEVBOY_TOML);
    let config = ok(ProxyConfig::load_with_env(&path, &env));
    assert_eq!(config.upstreams.len(), 4);
    assert_eq!(
        ConfigFormat::from_path(Path::new("x/.mcp.json")),
        Some(ConfigFormat::McpJson)
    );
    assert_eq!(
        ConfigFormat::from_path(Path::new("devboy.toml")),
        Some(ConfigFormat::Toml)
    );
    assert_eq!(ConfigFormat::from_path(Path::new("devboy")), None);
}

#[test]
fn resolve_uses_an_explicit_path() {
    let dir = TempDir::new();
    let path = dir.write(
        "explicit.json",
        r#"{"mcpServers": {"x": {"command": "x-server"}}}"#,
    );
    let config = ok(ProxyConfig::resolve(Some(&path)));
    assert_eq!(config.source, ConfigSource::File(path));
    assert_eq!(config.upstreams[0].name, "x");
}

#[test]
fn utf8_bom_is_accepted() {
    let config = ok(json(
        "\u{feff}{\"mcpServers\": {\"a\": {\"command\": \"a\"}}}",
    ));
    assert_eq!(config.upstreams.len(), 1);
}

// ---------------------------------------------------------------- embedded default

#[test]
fn embedded_default_parses_with_no_upstreams() {
    let no_env = |_: &str| None;
    let parsed = ProxyConfig::from_str(
        EMBEDDED_DEFAULT_TOML,
        ConfigFormat::Toml,
        Path::new("config/devboy.toml"),
        &no_env,
    );
    let parsed = ok(parsed);
    assert!(parsed.upstreams.is_empty());
    assert!(parsed.warnings.is_empty());

    let config = ProxyConfig::embedded_default();
    assert_eq!(config.source, ConfigSource::Embedded);
    assert_eq!(config.server_name, DEFAULT_SERVER_NAME);
    assert!(config.upstreams.is_empty());
}

#[test]
fn embedded_default_examples_are_valid_when_uncommented() {
    // Every commented example line, uncommented, must load: the file is
    // documentation users copy from.
    let uncommented: String = EMBEDDED_DEFAULT_TOML
        .lines()
        .map(|line| match line.strip_prefix("# ") {
            Some(rest)
                if rest.starts_with('[')
                    || rest
                        .split_once(" = ")
                        .is_some_and(|(key, _)| !key.is_empty() && !key.contains(' ')) =>
            {
                rest
            }
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let vars =
        |name: &str| (name == "GITHUB_TOKEN" || name == "DOCS_TOKEN").then(|| "t".to_owned());
    let config = ProxyConfig::from_str(
        &uncommented,
        ConfigFormat::Toml,
        Path::new("/cfg/devboy.toml"),
        &vars,
    );
    let config = ok(config);
    assert_eq!(config.upstreams.len(), 2, "{uncommented}");
    let github = &config.upstreams[0];
    assert_eq!(github.prefix, "gh");
    assert!(github.tools.permits("get_file_contents"));
    assert!(!github.tools.permits("create_issue"));
    assert_eq!(stdio(github).3, Some(Path::new("/cfg")));
    assert_eq!(http(&config.upstreams[1]).0, "https://mcp.example.com/mcp");
}

// ---------------------------------------------------------------- env expansion

#[test]
fn env_expands_in_command_args_env_cwd_url_and_headers() {
    let config = ok(json(
        r#"{"mcpServers": {
            "a": {"command": "${BIN:-node}", "args": ["${GITHUB_TOKEN}", "--x=${MISSING:-dflt}", "$$", "$HOME"],
                  "env": {"T": "${EMPTY:-was-empty}"}, "cwd": "/srv/${DIR:-work}"},
            "b": {"url": "https://${HOST:-h.example}/mcp", "headers": {"Auth": "${DOCS_TOKEN}"}}
        }}"#,
    ));
    let (command, args, vars, cwd) = stdio(&config.upstreams[0]);
    assert_eq!(command, "node");
    assert_eq!(args, ["ghp_test123", "--x=dflt", "$$", "$HOME"]);
    assert_eq!(vars["T"], "was-empty");
    assert_eq!(cwd, Some(Path::new("/srv/work")));
    let (url, headers) = http(&config.upstreams[1]);
    assert_eq!(url, "https://h.example/mcp");
    assert_eq!(headers["Auth"], "docs-tok");
}

#[test]
fn unset_variable_names_file_key_and_variable() {
    err_with(
        json(r#"{"mcpServers": {"github": {"command": "npx", "env": {"TOKEN": "${NOT_SET}"}}}}"#),
        &[
            "/proj/.mcp.json",
            "mcpServers.github.env.TOKEN",
            "NOT_SET",
            "found it unset",
            "${NOT_SET:-default}",
        ],
    );
    err_with(
        json(r#"{"mcpServers": {"a": {"command": "x", "args": ["ok", "${NOPE}"]}}}"#),
        &["mcpServers.a.args[1]", "NOPE"],
    );
    err_with(
        toml("[servers.h]\nurl = \"https://x/${NOPE}\"\n"),
        &["/cfg/devboy.toml:2:7", "servers.h.url", "NOPE"],
    );
    err_with(
        json(r#"{"mcpServers": {"h": {"url": "https://x", "headers": {"A": "${NOPE}"}}}}"#),
        &["mcpServers.h.headers.A", "NOPE"],
    );
}

#[test]
fn one_bad_server_fails_alone_and_the_others_load() {
    // The first-contact case: an HTTP server whose header needs an unset
    // token, next to servers that are fine.
    let config = ok(json(
        r#"{"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
            "github": {"type": "http", "url": "https://api.example/mcp",
                       "headers": {"Authorization": "Bearer ${NOT_SET}"}},
            "bad-args": {"command": "x", "args": [1]},
            "git": {"command": "uvx", "args": ["mcp-server-git"]}
        }}"#,
    ));
    let kinds: Vec<&str> = config
        .upstreams
        .iter()
        .map(|u| u.transport.kind())
        .collect();
    assert_eq!(kinds, ["stdio", "invalid", "invalid", "stdio"]);
    assert_eq!(prefixes(&config), ["fs", "github", "bad-args", "git"]);
    let unusable: Vec<(String, String)> = config
        .unusable_upstreams()
        .map(|(u, why)| (u.name.clone(), why))
        .collect();
    assert_eq!(unusable.len(), 2);
    assert_eq!(unusable[0].0, "github");
    assert!(
        unusable[0]
            .1
            .contains("mcpServers.github.headers.Authorization")
            && unusable[0].1.contains("NOT_SET"),
        "{unusable:?}"
    );
    assert!(
        unusable[1].1.contains("mcpServers.bad-args.args[0]"),
        "{unusable:?}"
    );
    // The same in devboy.toml: an unknown key fails its server only.
    let config = ok(toml(
        "[servers.a]\ncomand = \"x\"\n[servers.b]\ncommand = \"y\"\n",
    ));
    assert_eq!(config.upstreams[0].transport.kind(), "invalid");
    assert_eq!(config.upstreams[1].transport.kind(), "stdio");
    // A disabled invalid server stays disabled, with a warning.
    let config = ok(json(
        r#"{"mcpServers": {"old": {"command": 3, "disabled": true}}}"#,
    ));
    assert!(!config.upstreams[0].enabled);
    assert_eq!(config.unusable_upstreams().count(), 0);
    assert!(
        config.warnings[0].contains("disabled server is invalid"),
        "{:?}",
        config.warnings
    );
}

#[test]
fn only_a_file_whose_top_level_is_not_a_table_stops_loading() {
    file_err_with(json("[1]"), &["expected an object"]);
    // A key of the top level that is wrong is left out, and the rest applies.
    let config = ok(json(
        r#"{"mcpServers": [], "devboy": {"server_name": "db"}}"#,
    ));
    assert!(config.upstreams.is_empty());
    assert_eq!(config.server_name, "db");
    err_with(
        Ok(config),
        &[
            "/proj/.mcp.json",
            "mcpServers",
            "expected an object",
            "no servers are read from it",
        ],
    );
    let config = ok(toml(
        "[server.a]\ncommand = \"x\"\n[servers.b]\ncommand = \"y\"\n",
    ));
    assert_eq!(config.upstreams.len(), 1, "servers.b starts");
    err_with(
        Ok(config),
        &["devboy.toml:1:2: server: unknown key", "; ignored"],
    );
}

#[test]
fn a_server_entry_names_every_bad_key_at_once() {
    let config = ok(toml(
        "[servers.a]\ntype = \"stdio\"\ncomand = \"x\"\ntimeout_ms = \"5s\"\nargs = [1, \"ok\", true]\nenv = { A = 1, B = \"${NOT_SET}\" }\n[servers.b]\ncommand = \"y\"\n",
    ));
    assert_eq!(config.upstreams[1].transport.kind(), "stdio", "b starts");
    let error = err_with(
        Ok(config),
        &[
            "devboy.toml:3:1: servers.a.comand: unknown key",
            "did you mean `command`?",
            "devboy.toml:4:14: servers.a.timeout_ms: expected a positive integer",
            "servers.a.command: expected a stdio server's `command`",
            "servers.a.args[0]: expected a string",
            "servers.a.args[2]: expected a string",
            "servers.a.env.A: expected a string",
            "servers.a.env.B: expected environment variable NOT_SET",
        ],
    );
    assert_eq!(error.lines().count(), 7, "one line each:\n{error}");
    // The same in JSON, where an unknown key is only a warning.
    let error = err_with(
        json(r#"{"mcpServers": {"gh": {"command": 3, "disabled": "no", "headersHelper": "x"}}}"#),
        &[
            "mcpServers.gh.command: expected a string",
            "mcpServers.gh.disabled: expected true or false",
        ],
    );
    assert_eq!(error.lines().count(), 2, "{error}");
}

#[test]
fn a_bad_devboy_key_is_left_out_and_the_rest_applies() {
    let config = ok(toml(
        "[devboy]\nsever_name = \"db\"\n[servers.a]\ncommand = \"x\"\n[tools]\nlazy = \"on\"\n",
    ));
    assert_eq!(config.server_name, DEFAULT_SERVER_NAME);
    assert_eq!(config.upstreams[0].transport.kind(), "stdio");
    assert_eq!(config.tools.lazy, LazyTools::On);
    assert_eq!(config.problems.len(), 1, "{:?}", config.problems);
    let problem = &config.problems[0];
    assert!(
        problem.starts_with("/cfg/devboy.toml:2:1: devboy.sever_name: unknown key")
            && problem.contains("did you mean `server_name`?")
            && problem.ends_with("; ignored"),
        "{problem}"
    );
    // Two bad keys of one table: both, each with its place.
    let config = ok(toml(
        "[devboy]\nserver_name = \"dev boy\"\nnam = 1\n[tools]\nlazy = 1\ncompact = true\n[zzz]\n",
    ));
    let problems = config.problems.join("\n");
    for part in [
        "devboy.toml:2:15: devboy.server_name",
        "devboy.toml:3:1: devboy.nam: unknown key",
        "devboy.toml:5:8: tools.lazy: expected a string",
        "devboy.toml:6:1: tools.compact: unknown key",
        "devboy.toml:7:2: zzz: unknown key",
    ] {
        assert!(problems.contains(part), "{part} not in\n{problems}");
    }
    assert_eq!(config.problems.len(), 5, "{problems}");
}

#[test]
fn a_section_read_whole_names_every_bad_key_of_it() {
    let config = ok(toml(
        "[retrieval.llm]\nprovider = \"gpt\"\nmodel = 3\nmax_paralel = 2\n",
    ));
    assert_eq!(config.retrieval_llm, None);
    let problems = config.problems.join("\n");
    for part in [
        "retrieval.llm.provider",
        "retrieval.llm.model",
        "retrieval.llm.max_paralel",
        "find_files ranks without a model",
    ] {
        assert!(problems.contains(part), "{part} not in\n{problems}");
    }
    assert_eq!(config.problems.len(), 3, "{problems}");
    let config = ok(toml(
        "[team]\nstor = \"s3://b\"\nweight = 2\n[[team.providers]]\nurl = \"ftp://p\"\n",
    ));
    let problem = config.team_problem.unwrap_or_default();
    for part in [
        "team.stor",
        "team.weight",
        "team.providers[0].url",
        "team.providers[0].server",
    ] {
        assert!(problem.contains(part), "{part} not in\n{problem}");
    }
    assert_eq!(problem.lines().count(), 4, "{problem}");
}

#[test]
fn a_serving_devboy_falls_back_to_the_default_for_a_file_it_cannot_use() {
    let dir = TempDir::new();
    let broken = dir.write("devboy.toml", "[servers.a\ncommand = ");
    let config = ok(ProxyConfig::resolve_or_default(Some(&broken)));
    assert!(config.upstreams.is_empty());
    assert_eq!(
        config.source,
        ConfigSource::File(broken.clone()),
        "still watched"
    );
    assert_eq!(config.problems.len(), 1, "{:?}", config.problems);
    let problem = &config.problems[0];
    assert!(
        problem.starts_with(&format!("{}:1:", broken.display()))
            && problem.contains("invalid TOML")
            && problem.contains("built-in tools only"),
        "{problem}"
    );
    let fine = dir.write("fine.toml", "[servers.a]\ncommand = \"x\"\n");
    let config = ok(ProxyConfig::resolve_or_default(Some(&fine)));
    assert!(config.problems.is_empty() && config.upstreams.len() == 1);
    // A command line that names nothing usable is still refused.
    file_err_with(
        ProxyConfig::resolve_or_default(Some(&dir.0.join("absent.toml"))),
        &["absent.toml", "cannot read the file"],
    );
    file_err_with(
        ProxyConfig::resolve_or_default(Some(&dir.write("servers.yaml", ""))),
        &["servers.yaml", "expected a file ending in .toml"],
    );
}

#[test]
fn unset_variable_in_a_disabled_server_is_only_a_warning() {
    let config = ok(json(
        r#"{"mcpServers": {"old": {"command": "x", "env": {"T": "${NOPE}"}, "disabled": true},
                             "old-http": {"url": "${OLD_URL}", "enabled": false}}}"#,
    ));
    let (_, _, vars, _) = stdio(&config.upstreams[0]);
    assert_eq!(vars["T"], "${NOPE}");
    assert_eq!(http(&config.upstreams[1]).0, "${OLD_URL}");
    assert_eq!(config.warnings.len(), 2, "{:#?}", config.warnings);
    assert!(config.warnings[0].contains("mcpServers.old.env.T"));
    assert!(config.warnings[0].contains("NOPE"));
}

// ---------------------------------------------------------------- cwd

#[test]
fn relative_cwd_resolves_against_the_config_directory() {
    let config = ok(toml("[servers.a]\ncommand = \"x\"\ncwd = \"tools/a\"\n"));
    assert_eq!(
        stdio(&config.upstreams[0]).3,
        Some(Path::new("/cfg/tools/a"))
    );
    let config = ok(toml("[servers.a]\ncommand = \"x\"\ncwd = \"/abs/dir\"\n"));
    assert_eq!(stdio(&config.upstreams[0]).3, Some(Path::new("/abs/dir")));
}

// ---------------------------------------------------------------- per-server keys

#[test]
fn timeouts_filters_and_flags() {
    let config = ok(toml(
        r#"
[servers.a]
command = "x"
timeout = 5000
startup_timeout_ms = 1500
allow = ["read_*", "list_*"]
deny = ["list_secrets"]
disabled = true
"#,
    ));
    let a = &config.upstreams[0];
    assert_eq!(a.timeout, Duration::from_secs(5));
    assert_eq!(a.startup_timeout, Duration::from_millis(1500));
    assert!(a.tools.permits("read_file"));
    assert!(a.tools.permits("list_dir"));
    assert!(!a.tools.permits("list_secrets"));
    assert!(!a.tools.permits("write_file"));
    assert!(!a.enabled);
}

#[test]
fn timeout_ms_wins_over_timeout_with_a_warning() {
    let config = ok(json(
        r#"{"mcpServers": {"a": {"command": "x", "timeout": 1000, "timeout_ms": 2000}}}"#,
    ));
    assert_eq!(config.upstreams[0].timeout, Duration::from_millis(2000));
    assert!(config.warnings.iter().any(|w| w.contains("timeout_ms")));
}

#[test]
fn type_is_inferred_and_streamable_http_is_http() {
    let config = ok(json(
        r#"{"mcpServers": {"u": {"url": "http://localhost:3000/mcp"},
                             "s": {"type": "streamable-http", "url": "https://a/mcp"},
                             "c": {"type": "stdio", "command": "c"}}}"#,
    ));
    assert_eq!(config.upstreams[0].transport.kind(), "http");
    assert_eq!(config.upstreams[1].transport.kind(), "http");
    assert_eq!(config.upstreams[2].transport.kind(), "stdio");
}

#[test]
fn json_unknown_keys_warn_and_known_client_keys_are_silent() {
    let config = ok(json(
        r#"{"mcpServers": {"a": {"command": "x", "autoApprove": ["t"], "description": "d",
                                 "frobnicate": 1, "headersHelper": "get-headers.sh", "url": "http://x"}},
             "projects": {}}"#,
    ));
    let w = &config.warnings;
    assert_eq!(w.len(), 4, "{w:#?}");
    assert!(w
        .iter()
        .any(|m| m.contains("mcpServers.a.frobnicate") && m.contains("unknown key")));
    assert!(w
        .iter()
        .any(|m| m.contains("mcpServers.a.headersHelper") && m.contains("not supported")));
    assert!(w
        .iter()
        .any(|m| m.contains("mcpServers.a.url") && m.contains("ignored for a stdio server")));
    assert!(w.iter().any(|m| m.contains("projects")));
    assert!(!w
        .iter()
        .any(|m| m.contains("autoApprove") || m.contains("description")));
}

#[test]
fn json_unknown_type_is_unsupported_but_toml_unknown_type_is_an_error() {
    let config = ok(json(
        r#"{"mcpServers": {"w": {"type": "ws", "url": "ws://x"}}}"#,
    ));
    assert_eq!(config.upstreams[0].transport.kind(), "ws");
    assert!(config.warnings[0].contains("\"ws\""));
    err_with(
        toml("[servers.w]\ntype = \"ws\"\nurl = \"ws://x\"\n"),
        &[
            "devboy.toml:2:8",
            "servers.w.type",
            "expected one of: stdio, http, streamable-http, sse",
            "\"ws\"",
        ],
    );
}

#[test]
fn json_without_mcp_servers_warns() {
    let config = ok(json("{}"));
    assert!(config.upstreams.is_empty());
    assert!(config.warnings[0].contains("mcpServers"));
}

// ---------------------------------------------------------------- error paths

#[test]
fn args_must_be_strings_with_index_in_the_key() {
    err_with(
        json(r#"{"mcpServers": {"github": {"command": "npx", "args": ["-y", "pkg", 3]}}}"#),
        &["/proj/.mcp.json: mcpServers.github.args[2]: expected a string, found the integer 3"],
    );
    err_with(
        json(r#"{"mcpServers": {"github": {"command": "npx", "args": "-y pkg"}}}"#),
        &["mcpServers.github.args: expected an array of strings, found the string \"-y pkg\""],
    );
    err_with(
        toml("[servers.github]\ncommand = \"npx\"\nargs = [\"a\", true]\n"),
        &["/cfg/devboy.toml:3:14: servers.github.args[1]: expected a string, found the boolean true"],
    );
}

#[test]
fn env_and_headers_must_map_to_strings() {
    err_with(
        json(r#"{"mcpServers": {"a": {"command": "x", "env": {"PORT": 3000}}}}"#),
        &[
            ".mcp.json",
            "mcpServers.a.env.PORT",
            "expected a string",
            "found the integer 3000",
        ],
    );
    err_with(
        json(r#"{"mcpServers": {"a": {"command": "x", "env": ["A=1"]}}}"#),
        &[
            "mcpServers.a.env",
            "expected an object of string values",
            "found an array",
        ],
    );
    err_with(
        toml("[servers.h]\nurl = \"https://x\"\nheaders = \"Authorization: x\"\n"),
        &[
            "devboy.toml",
            "servers.h.headers",
            "expected a table of string values",
            "found the string",
        ],
    );
}

#[test]
fn stdio_needs_command_and_http_needs_url() {
    err_with(
        json(r#"{"mcpServers": {"a": {"type": "stdio", "args": ["x"]}}}"#),
        &[
            ".mcp.json",
            "mcpServers.a.command",
            "expected a stdio server's `command`",
            "found nothing",
        ],
    );
    err_with(
        json(r#"{"mcpServers": {"a": {"type": "http", "headers": {}}}}"#),
        &[
            "mcpServers.a.url",
            "expected an http server's `url`",
            "found nothing",
        ],
    );
    err_with(
        toml("[servers.a]\nargs = []\n"),
        &[
            "devboy.toml",
            "servers.a:",
            "expected `command` (a stdio server) or `url` (an http server)",
            "found neither",
        ],
    );
    err_with(
        json(r#"{"mcpServers": {"a": {"command": 42}}}"#),
        &[
            "mcpServers.a.command",
            "expected a string",
            "found the integer 42",
        ],
    );
    err_with(
        json(r#"{"mcpServers": {"a": {"command": "${EMPTY}"}}}"#),
        &["mcpServers.a.command", "expected a program to run"],
    );
    err_with(
        json(r#"{"mcpServers": {"a": {"url": "localhost:3000/mcp"}}}"#),
        &[
            "mcpServers.a.url",
            "expected an http:// or https:// URL",
            "found the string \"localhost:3000/mcp\"",
        ],
    );
}

#[test]
fn timeouts_must_be_positive_integers() {
    for (value, found) in [
        ("0", "the integer 0"),
        ("-5", "the integer -5"),
        ("\"30s\"", "the string \"30s\""),
        ("1.5", "the number 1.5"),
    ] {
        err_with(
            json(&format!(
                r#"{{"mcpServers": {{"a": {{"command": "x", "timeout_ms": {value}}}}}}}"#
            )),
            &[
                ".mcp.json",
                "mcpServers.a.timeout_ms",
                "expected a positive integer (milliseconds)",
                found,
            ],
        );
    }
    err_with(
        toml("[servers.a]\ncommand = \"x\"\nstartup_timeout_ms = 0\n"),
        &[
            "devboy.toml:3:22",
            "servers.a.startup_timeout_ms",
            "positive integer",
        ],
    );
}

#[test]
fn flags_must_be_booleans_and_servers_objects() {
    err_with(
        json(r#"{"mcpServers": {"a": {"command": "x", "disabled": "yes"}}}"#),
        &[
            "mcpServers.a.disabled",
            "expected true or false",
            "found the string \"yes\"",
        ],
    );
    err_with(
        json(r#"{"mcpServers": {"a": "npx server"}}"#),
        &["mcpServers.a", "expected an object", "found the string"],
    );
    err_with(
        json(r#"{"mcpServers": []}"#),
        &["mcpServers", "expected an object", "found an array"],
    );
    err_with(
        json("[1]"),
        &["(top level)", "expected an object", "found an array"],
    );
}

#[test]
fn invalid_globs_name_their_index() {
    err_with(
        toml("[servers.a]\ncommand = \"x\"\nallow = [\"get_*\", \"[oops\"]\n"),
        &[
            "devboy.toml:3:19",
            "servers.a.allow[1]",
            "expected a glob pattern",
            "\"[oops\"",
            "unclosed",
        ],
    );
    err_with(
        json(r#"{"mcpServers": {"a": {"command": "x", "deny": "get_*"}}}"#),
        &["mcpServers.a.deny", "expected an array of strings"],
    );
}

#[test]
fn toml_is_strict_about_unknown_keys() {
    err_with(
        toml("[servers.github]\ncomand = \"npx\"\n"),
        &[
            "/cfg/devboy.toml:2:1",
            "servers.github.comand",
            "unknown key",
            "expected one of: type, command, args",
            "did you mean `command`?",
        ],
    );
    err_with(
        toml("[server.a]\ncommand = \"x\"\n"),
        &[
            "devboy.toml:1:2: server: unknown key",
            "expected one of: devboy, servers, mcpServers",
            "did you mean `servers`?",
        ],
    );
    err_with(
        toml("[devboy]\nname = \"x\"\n"),
        &["devboy.name", "expected one of: server_name"],
    );
}

#[test]
fn server_name_must_be_a_claude_code_name() {
    err_with(
        toml("[devboy]\nserver_name = \"dev boy\"\n"),
        &[
            "devboy.toml:2:15",
            "devboy.server_name",
            "letters, digits",
            "\"dev boy\"",
        ],
    );
}

#[test]
fn syntax_errors_name_file_line_and_column() {
    let e = file_err_with(
        json("{\n  \"mcpServers\": {,}\n}"),
        &["/proj/.mcp.json:2:", "invalid JSON"],
    );
    assert!(matches!(
        e.kind(),
        ConfigErrorKind::Syntax {
            format: ConfigFormat::McpJson,
            ..
        }
    ));
    let e = file_err_with(
        toml("[servers.a]\ncommand = \"x\n"),
        &["/cfg/devboy.toml:2:", "invalid TOML"],
    );
    assert_eq!(e.file(), Path::new("/cfg/devboy.toml"));
    err_with(
        toml("[servers.a]\ncommand = \"x\"\ncommand = \"y\"\n"),
        &["devboy.toml:3:", "duplicate key"],
    );
}

#[test]
fn unsupported_extension_and_missing_file_name_the_file() {
    let dir = TempDir::new();
    let yaml = dir.write("servers.yaml", "mcpServers: {}");
    let e = file_err_with(
        ProxyConfig::load(&yaml),
        &[
            "servers.yaml",
            "expected a file ending in .toml",
            "found extension .yaml",
        ],
    );
    assert!(matches!(
        e.kind(),
        ConfigErrorKind::UnsupportedFormat { .. }
    ));
    err_with(
        ProxyConfig::load(&dir.0.join("noext")),
        &["noext", "found no extension"],
    );
    let missing = dir.0.join("absent.toml");
    let e = file_err_with(
        ProxyConfig::load(&missing),
        &["absent.toml", "cannot read the file"],
    );
    assert!(matches!(e.kind(), ConfigErrorKind::Read { .. }));
}

#[test]
fn duplicate_server_across_servers_and_mcp_servers() {
    err_with(
        toml("[servers.a]\ncommand = \"x\"\n[mcpServers.a]\ncommand = \"y\"\n"),
        &[
            "mcpServers.a",
            "a server name not used twice",
            "first at servers.a",
        ],
    );
}

#[test]
fn json_duplicate_keys_keep_the_last_and_warn_with_both_places() {
    // A server twice, a key twice inside a server, and two mcpServers
    // objects: the last of each wins, as with Claude Code's JSON.parse.
    let text = r#"{
  "mcpServers": {"old": {"command": "ignored"}},
  "mcpServers": {
    "gh": {"command": "first"},
    "fs": {"command": "fs", "args": ["a"], "args": ["b"]},
    "gh": {"command": "second"}
  }
}"#;
    let config = ok(json(text));
    let names: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["gh", "fs"], "first place, last value");
    assert_eq!(stdio(&config.upstreams[0]).0, "second");
    assert_eq!(stdio(&config.upstreams[1]).1, ["b"]);
    let warnings = &config.warnings;
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    let expect = [
        "/proj/.mcp.json: mcpServers.fs.args: defined twice, at 5:29 and at 5:44; the one at 5:44 is used",
        "/proj/.mcp.json: mcpServers.gh: defined twice, at 4:5 and at 6:5; the one at 6:5 is used",
        "/proj/.mcp.json: mcpServers: defined twice, at 2:3 and at 3:3; the one at 3:3 is used",
    ];
    for (warning, start) in warnings.iter().zip(expect) {
        assert!(
            warning.starts_with(start),
            "{warning:?} does not start with {start:?}"
        );
    }
    // Unique keys: no warning.
    assert!(ok(json(r#"{"mcpServers": {"a": {"command": "x"}}}"#))
        .warnings
        .is_empty());
}

#[test]
fn unterminated_variable_names_key_and_character() {
    // A problem of that one server: it fails, the others would start.
    err_with(
        json(
            r#"{"mcpServers": {"gh": {"url": "https://x", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN"}}}}"#,
        ),
        &["/proj/.mcp.json: mcpServers.gh.headers.Authorization: unterminated ${GITHUB_TOKEN (no closing }) at character 8"],
    );
    err_with(
        toml("[servers.a]\ncommand = \"x\"\nargs = [\"${HOME\"]\n"),
        &[
            "/cfg/devboy.toml:3:9: servers.a.args[0]: unterminated ${HOME",
            "character 1",
        ],
    );
    // Said of a disabled server too (it is a mistake in the file, not a
    // variable today's shell happens not to set), as a warning, since a
    // disabled server fails nothing.
    let config = ok(json(
        r#"{"mcpServers": {"off": {"command": "x ${A:-b", "disabled": true}}}"#,
    ));
    assert!(!config.upstreams[0].enabled);
    assert!(
        config.warnings[0].contains("mcpServers.off.command: unterminated ${A"),
        "{:?}",
        config.warnings
    );
    // Shell snippets that are no references still pass through.
    let config = ok(json(
        r#"{"mcpServers": {"sh": {"command": "sh", "args": ["-c", "echo $$ $HOME ${} ${a.b}"]}}}"#,
    ));
    assert_eq!(stdio(&config.upstreams[0]).1[1], "echo $$ $HOME ${} ${a.b}");
}

#[test]
fn odd_server_keys_are_quoted_in_paths() {
    err_with(
        json(r#"{"mcpServers": {"my server.v2": {"command": 1}}}"#),
        &["mcpServers.\"my server.v2\".command"],
    );
}

// ---------------------------------------------------------------- prefixes

fn prefixes(config: &ProxyConfig) -> Vec<&str> {
    config.upstreams.iter().map(|u| u.prefix.as_str()).collect()
}

#[test]
fn derived_prefixes_are_sanitized_and_truncated() {
    let config = ok(json(
        r#"{"mcpServers": {
            "my server.v2": {"command": "x"},
            "a-really-long-server-name-here": {"command": "x"},
            "ends_with___": {"command": "x"},
            "日本": {"command": "x"},
            "GitHub": {"command": "x"}
        }}"#,
    ));
    assert_eq!(
        prefixes(&config),
        [
            "my_server_v2",
            "a-really-long-se",
            "ends_with",
            "server",
            "GitHub"
        ]
    );
}

#[test]
fn colliding_derived_prefixes_are_numbered_in_file_order() {
    let config = ok(json(
        r#"{"mcpServers": {
            "git hub": {"command": "x"},
            "git.hub": {"command": "x"},
            "git_hub": {"command": "x"},
            "long-server-name-number-1": {"command": "x"},
            "long-server-name-number-2": {"command": "x"}
        }}"#,
    ));
    assert_eq!(
        prefixes(&config),
        [
            "git_hub",
            "git_hub_2",
            "git_hub_3",
            "long-server-name",
            "long-server-na_2"
        ]
    );
    assert!(config
        .warnings
        .iter()
        .any(|w| w.contains("mcpServers.\"git.hub\"")
            && w.contains("\"git_hub_2\"")
            && w.contains("taken by mcpServers.\"git hub\"")));
    // Deterministic.
    let again = ok(json(
        r#"{"mcpServers": {"git hub": {"command": "x"}, "git.hub": {"command": "x"}, "git_hub": {"command": "x"}}}"#,
    ));
    assert_eq!(prefixes(&again), ["git_hub", "git_hub_2", "git_hub_3"]);
}

#[test]
fn numbering_skips_explicit_prefixes() {
    let config = ok(json(
        r#"{"mcpServers": {"a b": {"command": "x"}, "a.b": {"command": "x"}, "z": {"command": "x", "prefix": "a_b_2"}}}"#,
    ));
    assert_eq!(prefixes(&config), ["a_b", "a_b_3", "a_b_2"]);
}

#[test]
fn explicit_prefix_collisions_name_both_keys() {
    err_with(
        json(
            r#"{"mcpServers": {"a": {"command": "x", "prefix": "gh"}, "b": {"command": "y", "prefix": "gh"}}}"#,
        ),
        &[
            ".mcp.json",
            "mcpServers.b.prefix",
            "mcpServers.a.prefix",
            "\"gh\"",
            "expected a prefix no other server uses",
        ],
    );
    err_with(
        json(
            r#"{"mcpServers": {"github": {"command": "x"}, "other": {"command": "y", "prefix": "github"}}}"#,
        ),
        &[
            "mcpServers.github (prefix derived from the name)",
            "mcpServers.other.prefix",
            "\"github\"",
        ],
    );
}

#[test]
fn reserved_prefix() {
    err_with(
        toml("[servers.a]\ncommand = \"x\"\nprefix = \"devboy\"\n"),
        &[
            "devboy.toml:3:10",
            "servers.a.prefix",
            "reserved for devboy's built-in tools",
            "found the string \"devboy\"",
        ],
    );
    err_with(
        json(r#"{"mcpServers": {"a": {"command": "x", "prefix": "DevBoy"}}}"#),
        &["mcpServers.a.prefix", "reserved"],
    );
    let config = ok(json(
        r#"{"mcpServers": {"devboy": {"command": "x"}, "DevBoy": {"command": "y"}}}"#,
    ));
    assert_eq!(prefixes(&config), ["devboy_2", "DevBoy_2"]);
    assert!(config.warnings.iter().any(|w| w.contains("is reserved")));
}

#[test]
fn explicit_prefix_must_already_be_valid() {
    for bad in ["a.b", "a__b", "gh_", "é", "with space"] {
        err_with(
            json(&format!(r#"{{"mcpServers": {{"a": {{"command": "x", "prefix": {bad:?}}}}}}}"#)),
            &["mcpServers.a.prefix", "expected a prefix of letters, digits, `_` and `-`, without `__` and not ending in `_`"],
        );
    }
    let config = ok(json(
        r#"{"mcpServers": {"a": {"command": "x", "prefix": "_My-Prefix_1"}}}"#,
    ));
    assert_eq!(prefixes(&config), ["_My-Prefix_1"]);
    assert_eq!(
        config
            .upstream_by_prefix("_My-Prefix_1")
            .map(|u| u.name.as_str()),
        Some("a")
    );
}

#[test]
fn an_empty_prefix_keeps_names_on_one_server_only() {
    let config = ok(toml(
        "[servers.remote]\nurl = \"https://mcp.example/mcp\"\nprefix = \"\"\n[servers.git]\ncommand = \"x\"\n",
    ));
    assert_eq!(prefixes(&config), ["", "git"]);
    assert!(config.upstreams[0].keeps_names());
    assert!(!config.upstreams[1].keeps_names());
    err_with(
        json(
            r#"{"mcpServers": {"a": {"command": "x", "prefix": ""}, "b": {"command": "y", "prefix": ""}}}"#,
        ),
        &[
            "mcpServers.b.prefix",
            "mcpServers.a.prefix",
            "expected a prefix no other server uses",
        ],
    );
}

#[test]
fn package_runners_get_time_to_download() {
    let runner = |command: &str, args: &[&str]| {
        UpstreamTransport::Stdio {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: BTreeMap::new(),
            cwd: None,
        }
        .runs_a_package_runner()
    };
    assert!(runner(
        "npx",
        &["-y", "@modelcontextprotocol/server-memory"]
    ));
    assert!(runner("/usr/local/bin/npx", &["pkg"]));
    assert!(runner("C:\\nodejs\\npx.cmd", &["pkg"]));
    assert!(runner("uvx", &["mcp-server-git"]));
    assert!(runner("pipx", &["run", "mcp-server-time"]));
    assert!(runner("pnpm", &["dlx", "pkg"]));
    assert!(runner("uv", &["tool", "run", "pkg"]));
    assert!(!runner("node", &["server.js"]));
    assert!(!runner("npm", &["start"]));
    assert!(!runner("uv", &["run", "server.py"]));
    assert!(!runner("mcp-server-git", &[]));
    // An explicit startup_timeout_ms wins.
    let config =
        toml("[servers.a]\ncommand = \"npx\"\nargs = [\"pkg\"]\nstartup_timeout_ms = 1500\n")
            .unwrap();
    assert_eq!(
        config.upstreams[0].startup_timeout,
        Duration::from_millis(1500)
    );
    let config = toml("[servers.a]\ncommand = \"node\"\n").unwrap();
    assert_eq!(config.upstreams[0].startup_timeout, DEFAULT_STARTUP_TIMEOUT);
}

#[test]
fn retrieval_llm_is_read_with_defaults() {
    let config = ok(toml(
        "[retrieval.llm]\nprovider = \"openai\"\nmodel = \"qwen\"\nbase_url = \"http://127.0.0.1:8080/v1\"\nmax_parallel = 2\n",
    ));
    let llm = config.retrieval_llm.expect("the model");
    assert_eq!(llm.provider, LlmProvider::OpenAi);
    assert_eq!(llm.model, "qwen");
    assert_eq!(llm.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
    assert_eq!(llm.api_key_env, None);
    assert_eq!(llm.max_parallel, 2);
    assert_eq!(llm.max_retries, DEFAULT_LLM_RETRIES);
    assert_eq!(llm.timeout, DEFAULT_LLM_TIMEOUT);
    assert!(llm.cache);
    let anthropic = ok(toml(
        "[retrieval.llm]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\n",
    ));
    assert_eq!(
        anthropic
            .retrieval_llm
            .expect("the model")
            .api_key_env
            .as_deref(),
        Some("ANTHROPIC_API_KEY")
    );
    assert_eq!(ok(toml("")).retrieval_llm, None);
}

#[test]
fn a_bad_retrieval_section_is_a_warning_naming_file_and_key_and_servers_still_start() {
    let config = ok(toml(
        "[servers.a]\ncommand = \"x\"\n[retrieval.llm]\nprovider = \"anthropic\"\nmodel = \"m\"\nmax_paralel = 2\n",
    ));
    assert_eq!(config.retrieval_llm, None);
    assert_eq!(config.upstreams.len(), 1);
    let warning = config.problems.join("\n");
    assert!(warning.contains("/cfg/devboy.toml"), "{warning}");
    assert!(warning.contains("retrieval.llm.max_paralel"), "{warning}");
    assert!(warning.contains("max_parallel"), "{warning}");
    let config = ok(toml("[retrieval.llm]\nprovider = \"gpt\"\nmodel = \"m\"\n"));
    assert!(
        config
            .problems
            .join("\n")
            .contains("retrieval.llm.provider"),
        "{:?}",
        config.problems
    );
    let config = ok(toml("[retrieval.llm]\nprovider = \"openai\"\n"));
    assert!(
        config.problems.join("\n").contains("retrieval.llm.model"),
        "{:?}",
        config.problems
    );
}

#[test]
fn team_is_read_with_defaults_and_providers_resolve_against_the_file() {
    use super::team::*;
    let config = ok(toml(
        "[team]\nstore = \"s3://bucket/teams/a\"\nshare = true\n\n[[team.providers]]\nurl = \"https://mcp.example.com/mcp/fingerprints/v1\"\nserver = \"github\"\n\n[[team.providers]]\npath = \"prov/fp.json\"\nserver = \"gitlab\"\nweight = 0.25\n",
    ));
    let team = &config.team;
    assert_eq!(team.store.as_deref(), Some("s3://bucket/teams/a"));
    assert!(team.share);
    assert_eq!(team.weight, DEFAULT_TEAM_WEIGHT);
    assert_eq!(team.ttl_days, DEFAULT_TEAM_TTL_DAYS);
    assert_eq!(team.k_anonymity, DEFAULT_K_ANONYMITY);
    assert_eq!(team.providers.len(), 2);
    assert_eq!(
        team.providers[0].source,
        ProviderSource::Url("https://mcp.example.com/mcp/fingerprints/v1".into())
    );
    assert_eq!(team.providers[0].weight, MAX_PROVIDER_WEIGHT);
    assert_eq!(
        team.providers[1].source,
        ProviderSource::File(PathBuf::from("/cfg/prov/fp.json"))
    );
    assert_eq!(team.providers[1].weight, 0.25);
    assert!(config.team_problem.is_none());
    let none = ok(toml(""));
    assert!(!none.team.is_set());
    assert_eq!(none.team_problem, None);
}

#[test]
fn a_bad_team_section_names_file_and_key_and_servers_still_start() {
    for (text, key) in [
        ("[team]\nstore = \"ftp://x/y\"\n", "team.store"),
        ("[team]\nstore = \"s3://\"\n", "team.store"),
        ("[team]\nweight = 1.5\n", "team.weight"),
        ("[team]\nk_anonymity = 1\n", "team.k_anonymity"),
        ("[team]\nstor = \"s3://b\"\n", "team.stor"),
        (
            "[[team.providers]]\nurl = \"https://p\"\nserver = \"s\"\nweight = 0.6\n",
            "team.providers[0].weight",
        ),
        (
            "[[team.providers]]\nserver = \"s\"\n",
            "team.providers[0].url",
        ),
        (
            "[[team.providers]]\nurl = \"ftp://p\"\nserver = \"s\"\n",
            "team.providers[0].url",
        ),
        (
            "[[team.providers]]\nurl = \"https://p\"\n",
            "team.providers[0].server",
        ),
    ] {
        let config = ok(toml(&format!("[servers.a]\ncommand = \"x\"\n{text}")));
        assert_eq!(config.upstreams.len(), 1, "{text}");
        assert!(!config.team.is_set(), "{text}");
        let problem = config.team_problem.clone().unwrap_or_default();
        assert!(problem.contains("/cfg/devboy.toml"), "{text}: {problem}");
        assert!(problem.contains(key), "{text}: {problem}");
        assert!(
            config.problems.iter().any(|w| w.contains(key)),
            "{text}: {:?}",
            config.problems
        );
    }
}

#[test]
fn builtins_enabled_names_the_tools_and_expand_always_stays() {
    let config = ok(toml(
        "[builtins]\nenabled = [\"status\", \"devboy_expand\"]\n",
    ));
    assert_eq!(
        config.builtins,
        Some(vec!["devboy_status".to_owned(), "devboy_expand".to_owned()])
    );
    assert_eq!(ok(toml("")).builtins, None);
    for (text, key) in [
        ("[builtins]\nenabled = [\"status\"]\n", "builtins.enabled"),
        (
            "[builtins]\nenabled = [\"expand\", \"statuz\"]\n",
            "builtins.enabled[1]",
        ),
        ("[builtins]\nenable = [\"expand\"]\n", "builtins.enable"),
    ] {
        let config = ok(toml(&format!("[servers.a]\ncommand = \"x\"\n{text}")));
        let all = config
            .builtins
            .as_ref()
            .is_none_or(|b| b.len() == schema::BUILTIN_NAMES.len());
        assert!(all, "{text}: all built-ins kept");
        assert_eq!(config.upstreams.len(), 1);
        let warnings = config.problems.join("\n");
        assert!(warnings.contains(key), "{text}: {warnings}");
        assert!(warnings.contains("/cfg/devboy.toml"), "{warnings}");
    }
}

#[test]
fn tools_compact_schemas_is_on_unless_turned_off() {
    assert!(ok(toml("")).tools.compact_schemas);
    assert!(
        !ok(toml("[tools]\ncompact_schemas = false\n"))
            .tools
            .compact_schemas
    );
    let config = ok(toml("[tools]\ncompact_schemas = \"no\"\n"));
    assert!(
        config.tools.compact_schemas,
        "a bad value keeps the default"
    );
    assert!(
        config.problems.join("\n").contains("tools.compact_schemas"),
        "{:?}",
        config.problems
    );
}

#[test]
fn tools_lazy_is_auto_with_a_tenth_of_a_200k_context_unless_set() {
    let tools = ok(toml("")).tools;
    assert_eq!(tools.lazy, LazyTools::Auto);
    assert_eq!(tools.lazy_budget, 20_000);
    let tools = ok(toml("[tools]\nlazy = \"on\"\nlazy_budget = 5000\n")).tools;
    assert_eq!((tools.lazy, tools.lazy_budget), (LazyTools::On, 5000));
    assert_eq!(
        ok(toml("[tools]\nlazy = \"off\"\n")).tools.lazy,
        LazyTools::Off
    );
    for (text, key, says) in [
        (
            "[tools]\nlazy = \"sometimes\"\n",
            "tools.lazy",
            "one of auto, on, off",
        ),
        ("[tools]\nlazy = true\n", "tools.lazy", "a string"),
        (
            "[tools]\nlazy_budget = 0\n",
            "tools.lazy_budget",
            "positive integer",
        ),
        (
            "[tools]\nlazy_budget = \"20k\"\n",
            "tools.lazy_budget",
            "positive integer",
        ),
    ] {
        let config = ok(toml(text));
        assert_eq!(
            config.tools,
            ToolsConfig::default(),
            "{text}: the defaults apply"
        );
        let warnings = config.problems.join("\n");
        assert!(
            warnings.contains(key) && warnings.contains(says),
            "{text}: {warnings}"
        );
    }
}

#[test]
fn auto_lazy_applies_past_the_budget_for_clients_without_tool_search() {
    let auto = LazyTools::Auto;
    assert!(auto.applies(Some("mcp"), 20_001, 20_000));
    assert!(auto.applies(None, 20_001, 20_000));
    assert!(
        !auto.applies(Some("mcp"), 20_000, 20_000),
        "at the budget, all listed"
    );
    assert!(
        !auto.applies(Some("claude-code"), 90_000, 20_000),
        "Claude Code searches itself"
    );
    assert!(LazyTools::On.applies(Some("claude-code"), 0, 20_000));
    assert!(!LazyTools::Off.applies(Some("cursor"), 90_000, 20_000));
}

#[test]
fn the_code_table_sets_code_modes_limits_and_allowed_tools() {
    let config = ok(toml(
        "[code]\nenabled = false\ntimeout_secs = 5\nmemory_mib = 16\nmax_calls = 10\n\
         max_in_flight = 2\nmax_output_bytes = 1000\nallow = [\"git__commit\", \"fs__write_*\"]\n",
    ));
    let code = &config.code;
    assert!(!code.enabled);
    assert_eq!(code.timeout, std::time::Duration::from_secs(5));
    assert_eq!(code.memory_bytes, 16 * 1024 * 1024);
    assert_eq!(
        (code.max_calls, code.max_in_flight, code.max_output_bytes),
        (10, 2, 1000)
    );
    assert!(code.allows("fs__write_file") && code.allows("git__commit"));
    assert!(!code.allows("fs__read_text_file") && !code.allows("git__commit_all"));
    assert!(config.problems.is_empty(), "{:?}", config.problems);
    assert_eq!(ok(toml("")).code, CodeConfig::default());
}

#[test]
fn a_bad_code_key_keeps_its_default_and_names_itself() {
    let config = ok(toml(
        "[code]\ntimeout_secs = 0\nallow = [\"fs__[\"]\nmax_calls = 3\nfast = true\nmemory_mib = 9999999999\n",
    ));
    assert_eq!(config.code.timeout, CodeConfig::default().timeout);
    assert!(config.code.allow.is_empty() && !config.code.allows("fs__["));
    assert_eq!(config.code.max_calls, 3, "the good key applies");
    let problems = config.problems.join("\n");
    assert_eq!(config.code.memory_bytes, CodeConfig::default().memory_bytes);
    for key in [
        "code.timeout_secs",
        "code.allow",
        "code.fast",
        "code.memory_mib",
    ] {
        assert!(problems.contains(key), "{key} in {problems}");
    }
    assert!(
        problems.contains("positive integer up to 86400 (seconds)"),
        "{problems}"
    );
}

#[test]
fn a_json_config_takes_code_too() {
    let config = ok(json(
        r#"{"mcpServers": {}, "code": {"allow": ["git__git_commit"], "max_calls": 9}}"#,
    ));
    assert!(config.code.allows("git__git_commit"));
    assert_eq!(config.code.max_calls, 9);
    assert!(
        config.problems.is_empty() && config.warnings.is_empty(),
        "{config:?}"
    );
}

#[test]
fn always_load_marks_builtins_and_servers() {
    let config = ok(toml(
        "[builtins]\nalways_load = [\"status\", \"devboy_explore\"]\n\n\
         [servers.fs]\ncommand = \"fs-server\"\nalways_load = true\n\n\
         [servers.git]\ncommand = \"git-server\"\n",
    ));
    assert_eq!(config.always_load, ["devboy_status", "devboy_explore"]);
    let by_name = |n: &str| config.upstreams.iter().find(|u| u.name == n).unwrap();
    assert!(by_name("fs").always_load);
    assert!(!by_name("git").always_load);
    assert!(config.problems.is_empty(), "{:?}", config.problems);
    assert_eq!(ok(toml("")).always_load, default_always_load());
    // Claude Code's own spelling in a .mcp.json, without a warning.
    let json_config = ok(json(
        r#"{"mcpServers": {"fs": {"command": "fs-server", "alwaysLoad": true}}}"#,
    ));
    assert!(json_config.upstreams[0].always_load);
    assert!(
        json_config.warnings.is_empty(),
        "{:?}",
        json_config.warnings
    );
    let bad = ok(toml("[builtins]\nalways_load = [\"nope\"]\n"));
    assert!(
        bad.problems.join("\n").contains("builtins.always_load[0]"),
        "{:?}",
        bad.problems
    );
}

#[test]
fn an_http_servers_oauth_table_is_read_in_either_spelling() {
    let config = ok(json(
        r#"{"mcpServers": {"remote": {"type": "http", "url": "https://mcp.example/mcp",
            "oauth": {"clientId": "devboy-app", "callbackPort": 8976, "scopes": ["read"]}}}}"#,
    ));
    let oauth = &config.upstreams[0].oauth;
    assert_eq!(oauth.client_id.as_deref(), Some("devboy-app"));
    assert_eq!(oauth.callback_port, Some(8976));
    assert_eq!(oauth.scopes.as_deref(), Some(&["read".to_owned()][..]));
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    err_with(
        toml("[servers.r]\nurl = \"https://x/mcp\"\noauth = { client_secret = \"s\" }\n"),
        &["servers.r.oauth.client_secret", "a client_id beside it"],
    );
    err_with(
        toml("[servers.r]\nurl = \"https://x/mcp\"\noauth = { client_metadata_url = \"http://x/c.json\" }\n"),
        &["servers.r.oauth.client_metadata_url", "an https:// URL"],
    );
    assert_eq!(oauth.grant, OAuthGrant::AuthorizationCode, "the default");
    let machine = ok(toml(
        "[servers.r]\nurl = \"https://x/mcp\"\noauth = { grant = \"client_credentials\", client_id = \"m\", client_secret = \"s\" }\n",
    ));
    assert_eq!(
        machine.upstreams[0].oauth.grant,
        OAuthGrant::ClientCredentials
    );
    err_with(
        toml("[servers.r]\nurl = \"https://x/mcp\"\noauth = { grant = \"client_credentials\", client_id = \"m\" }\n"),
        &["servers.r.oauth.grant", "client_id and one of client_secret or private_key_file"],
    );
    err_with(
        toml("[servers.r]\nurl = \"https://x/mcp\"\noauth = { grant = \"client_credentials\", client_id = \"m\", client_secret = \"s\", private_key_file = \"k.pem\" }\n"),
        &["servers.r.oauth.grant", "both a secret and a key"],
    );
    // A key file is the proof of a machine client, relative to the config.
    let signed = ok(toml(
        "[servers.r]\nurl = \"https://x/mcp\"\noauth = { grant = \"client_credentials\", client_id = \"m\", private_key_file = \"keys/m.pem\" }\n",
    ));
    let key = signed.upstreams[0].oauth.private_key_file.as_ref().unwrap();
    assert!(key.is_absolute() && key.ends_with("keys/m.pem"), "{key:?}");
    err_with(
        toml("[servers.r]\nurl = \"https://x/mcp\"\noauth = { private_key_file = \"k.pem\" }\n"),
        &[
            "servers.r.oauth.grant",
            "grant = \"client_credentials\" beside private_key_file",
        ],
    );
    // Cross-app access: the identity provider's endpoint and the user's ID
    // token (or a command that prints it), and the client the server's
    // authorization server knows.
    let cross = ok(json(
        r#"{"mcpServers": {"r": {"type": "http", "url": "https://x/mcp", "oauth": {
            "grant": "cross_app", "clientId": "c", "clientSecret": "s",
            "idpTokenEndpoint": "https://idp.example/token", "idpClientId": "i",
            "idTokenCommand": "corp-login print-id-token"}}}}"#,
    ));
    let oauth = &cross.upstreams[0].oauth;
    assert_eq!(oauth.grant, OAuthGrant::CrossApp);
    assert_eq!(
        oauth.idp_token_endpoint.as_deref(),
        Some("https://idp.example/token")
    );
    assert_eq!(oauth.idp_client_id.as_deref(), Some("i"));
    assert_eq!(
        oauth.id_token_command.as_deref(),
        Some("corp-login print-id-token")
    );
    err_with(
        toml("[servers.r]\nurl = \"https://x/mcp\"\noauth = { grant = \"cross_app\", client_id = \"c\", client_secret = \"s\", idp_token_endpoint = \"https://idp/token\" }\n"),
        &["servers.r.oauth.grant", "one of id_token or id_token_command"],
    );
    err_with(
        toml("[servers.r]\nurl = \"https://x/mcp\"\noauth = { grant = \"cross_app\", client_id = \"c\", idp_token_endpoint = \"https://idp/token\", id_token = \"t\" }\n"),
        &["servers.r.oauth.grant", "client_id and client_secret beside grant = \"cross_app\""],
    );
    err_with(
        toml("[servers.r]\nurl = \"https://x/mcp\"\noauth = { id_token = \"t\" }\n"),
        &["servers.r.oauth.grant", "grant = \"cross_app\" beside"],
    );
    err_with(
        toml("[servers.r]\nurl = \"https://x/mcp\"\noauth = { grant = \"cross_app\", client_id = \"c\", client_secret = \"s\", idp_token_endpoint = \"idp/token\", id_token = \"t\" }\n"),
        &["servers.r.oauth.idp_token_endpoint", "an http(s):// URL"],
    );
    err_with(
        toml("[servers.r]\nurl = \"https://x/mcp\"\noauth = { grant = \"password\" }\n"),
        &[
            "servers.r.oauth.grant",
            "\"authorization_code\", \"client_credentials\" or \"cross_app\"",
        ],
    );
}
