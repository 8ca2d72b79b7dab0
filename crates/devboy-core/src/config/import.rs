//! Starting configs from the ones a user already has: Claude Code's
//! `.mcp.json` and Claude Desktop's `claude_desktop_config.json` (both
//! `{"mcpServers": {…}}`), for `devboy init`. Pure text in, text out; the
//! caller reads and writes the files.
//!
//! Two moves:
//! - [`mcp_servers_to_toml`]: the servers of such a file as
//!   `[servers.NAME]` tables for `devboy.toml`, keeping `${VAR}`s as
//!   written (they expand when devboy starts, not when it is set up).
//! - [`split_project_mcp_json`]: a project's `.mcp.json` split in two: its
//!   servers go to `devboy.mcp.json` unchanged, and `.mcp.json` keeps only
//!   an entry that starts devboy on that file, by a relative path, since
//!   the file is meant to be committed and Claude Code starts project
//!   servers in the project directory.

use serde_json::{Map, Value};

use super::schema::SERVER_KEYS;

/// The file `devboy init --project` moves a project's servers into.
pub const PROJECT_SERVERS_FILE: &str = "devboy.mcp.json";

/// Why a file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Not JSON at all.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but not `{"mcpServers": {…}}`.
    #[error("expected an object with an \"mcpServers\" object, found {0}")]
    Shape(&'static str),
}

/// Servers converted for `devboy.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TomlServers {
    /// `[servers.NAME]` tables, one blank line apart.
    pub toml: String,
    /// The servers' names, in file order.
    pub names: Vec<String>,
    /// Servers left out because they are devboy itself.
    pub skipped_devboy: Vec<String>,
}

/// The `mcpServers` of a `.mcp.json` or Claude Desktop config as
/// `devboy.toml` tables. Keys devboy does not read (`autoApprove`, …) are
/// left out with a comment, since `devboy.toml` is strict; a server that
/// runs devboy itself is left out (devboy does not proxy itself).
pub fn mcp_servers_to_toml(json: &str) -> Result<TomlServers, ImportError> {
    let root: Value = serde_json::from_str(json.strip_prefix('\u{feff}').unwrap_or(json))?;
    let servers = mcp_servers(&root)?;
    let mut out = TomlServers {
        toml: String::new(),
        names: Vec::new(),
        skipped_devboy: Vec::new(),
    };
    for (name, server) in servers {
        if runs_devboy(server) {
            out.skipped_devboy.push(name.clone());
            continue;
        }
        if !out.toml.is_empty() {
            out.toml.push('\n');
        }
        out.toml
            .push_str(&format!("[servers.{}]\n", toml_key(name)));
        match server.as_object() {
            Some(fields) => {
                for (key, value) in fields {
                    let rendered = SERVER_KEYS
                        .contains(&key.as_str())
                        .then(|| toml_value(value))
                        .flatten();
                    match rendered {
                        Some(rendered) => {
                            out.toml
                                .push_str(&format!("{} = {rendered}\n", toml_key(key)));
                        }
                        None => out.toml.push_str(&format!(
                            "# {}: left out (not a devboy.toml key, or null)\n",
                            toml_key(key)
                        )),
                    }
                }
            }
            // Kept as written so loading it names the problem.
            None => out.toml.push_str(&format!(
                "# {name}: expected an object, found {}\n",
                kind(server)
            )),
        }
        out.names.push(name.clone());
    }
    Ok(out)
}

/// A project's `.mcp.json`, split by [`split_project_mcp_json`].
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectSplit {
    /// The new `devboy.mcp.json`: `{"mcpServers": {…}}` with every server
    /// that is not devboy, as it was.
    pub servers_file: String,
    /// The new `.mcp.json`: everything else as it was, and `mcpServers`
    /// holding only devboy.
    pub mcp_json: String,
    /// The servers moved, in file order.
    pub moved: Vec<String>,
}

/// Moves a project's servers behind devboy: see the module docs. `servers`
/// is what `devboy.mcp.json` holds already (its servers come first and
/// win over a moved server of the same name), when it exists.
pub fn split_project_mcp_json(
    mcp_json: &str,
    servers: Option<&str>,
) -> Result<ProjectSplit, ImportError> {
    let mut root: Value =
        serde_json::from_str(mcp_json.strip_prefix('\u{feff}').unwrap_or(mcp_json))?;
    let moving = mcp_servers(&root)?.clone();
    let mut kept: Map<String, Value> = match servers {
        Some(text) => {
            let existing: Value =
                serde_json::from_str(text.strip_prefix('\u{feff}').unwrap_or(text))?;
            mcp_servers(&existing)?.clone()
        }
        None => Map::new(),
    };
    let mut moved = Vec::new();
    for (name, server) in moving {
        if runs_devboy(&server) || kept.contains_key(&name) {
            continue;
        }
        moved.push(name.clone());
        kept.insert(name, server);
    }
    let mut devboy = Map::new();
    devboy.insert("type".into(), "stdio".into());
    devboy.insert("command".into(), "devboy".into());
    devboy.insert(
        "args".into(),
        Value::Array(vec![
            "mcp".into(),
            "--config".into(),
            PROJECT_SERVERS_FILE.into(),
        ]),
    );
    let mut only_devboy = Map::new();
    only_devboy.insert("devboy".into(), Value::Object(devboy));
    if let Some(object) = root.as_object_mut() {
        object.insert("mcpServers".into(), Value::Object(only_devboy));
    }
    let mut servers_root = Map::new();
    servers_root.insert("mcpServers".into(), Value::Object(kept));
    Ok(ProjectSplit {
        servers_file: pretty(&Value::Object(servers_root)),
        mcp_json: pretty(&root),
        moved,
    })
}

/// An entry in Claude Code's files that is, or may be, devboy.
///
/// Every [`RegisteredServer::Stdio`] entry runs `devboy mcp`; an HTTP entry
/// is devboy's when its name says so ([`Registration::known_devboy`]) or
/// when its server answers `initialize` as devboy, which only a request
/// can tell: every HTTP entry is kept for the caller to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// `local` (`~/.claude.json`, this project only), `project`
    /// (`.mcp.json`) or `user` (`~/.claude.json`, every project): the
    /// order in which Claude Code lets one shadow another.
    pub scope: &'static str,
    /// The name it is registered under (Claude Code names its tools
    /// `mcp__<name>__<tool>`).
    pub name: String,
    /// How Claude Code reaches it.
    pub server: RegisteredServer,
}

/// How Claude Code reaches a registered server, as its entry says
/// (nothing expanded: `claude mcp add --header "…$(cat FILE)"` stores
/// what the shell made of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisteredServer {
    /// A command Claude Code starts (`"type": "stdio"`, or no type).
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its extra environment.
        env: Vec<(String, String)>,
    },
    /// A URL Claude Code sends requests to: `"type": "http"` (Streamable
    /// HTTP, what `devboy serve --http` speaks) or `"sse"` (the older
    /// HTTP+SSE transport, which devboy does not serve).
    Http {
        /// `"type": "sse"`.
        sse: bool,
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: Vec<(String, String)>,
    },
}

impl Registration {
    /// Whether the entry alone says it is devboy: a command that runs
    /// `devboy mcp`, or an HTTP entry whose name contains `devboy` (in any
    /// case). Another HTTP entry is devboy only if its server says so.
    pub fn known_devboy(&self) -> bool {
        match self.server {
            RegisteredServer::Stdio { .. } => true,
            RegisteredServer::Http { .. } => self.name.to_ascii_lowercase().contains("devboy"),
        }
    }
}

/// Every entry that starts devboy, and every HTTP entry, in Claude Code's
/// files for the project at `project_dir` (as written in
/// `~/.claude.json`'s `projects` keys): `claude_json` is
/// `~/.claude.json`, `project_mcp_json` the project's `.mcp.json`. In
/// scope order: local, project, user; in file order within a scope.
pub fn claude_registrations(
    claude_json: Option<&Value>,
    project_dir: &str,
    project_mcp_json: Option<&Value>,
) -> Vec<Registration> {
    let local = claude_json
        .and_then(|c| c.get("projects"))
        .and_then(|p| p.get(project_dir))
        .and_then(|p| p.get("mcpServers"));
    let project = project_mcp_json.and_then(|p| p.get("mcpServers"));
    let user = claude_json.and_then(|c| c.get("mcpServers"));
    let mut out = Vec::new();
    for (scope, servers) in [("local", local), ("project", project), ("user", user)] {
        let Some(servers) = servers.and_then(Value::as_object) else {
            continue;
        };
        for (name, server) in servers {
            if let Some(server) = registered_server(server) {
                out.push(Registration {
                    scope,
                    name: name.clone(),
                    server,
                });
            }
        }
    }
    out
}

/// An entry that runs devboy, or any HTTP entry; `None` for the rest.
fn registered_server(server: &Value) -> Option<RegisteredServer> {
    let strings = |key: &str| -> Vec<String> {
        server
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let pairs = |key: &str| -> Vec<(String, String)> {
        server
            .get(key)
            .and_then(Value::as_object)
            .map(|e| {
                e.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let kind = server.get("type").and_then(Value::as_str);
    if let Some(kind @ ("http" | "sse")) = kind {
        return Some(RegisteredServer::Http {
            sse: kind == "sse",
            url: server.get("url").and_then(Value::as_str)?.to_owned(),
            headers: pairs("headers"),
        });
    }
    runs_devboy(server).then(|| RegisteredServer::Stdio {
        command: server
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        args: strings("args"),
        env: pairs("env"),
    })
}

/// `text` with its `${VAR}` and `${VAR:-default}` expanded from this
/// process's environment, as Claude Code expands a project's `.mcp.json`
/// (its `url` and `headers` among the rest); the error names the variable
/// that is not set, or the reference whose `}` is missing.
pub fn expand_from_env(text: &str) -> Result<String, String> {
    super::expand::expand(text, &|name| std::env::var(name).ok()).map_err(|error| match error {
        super::expand::ExpandError::Unset(name) => format!("${{{name}}} is not set"),
        super::expand::ExpandError::Unterminated { reference, .. } => {
            format!("`{reference}` has no closing `}}`")
        }
    })
}

/// What Claude Code makes of a project server (one in `.mcp.json`): it
/// starts only once the user approved it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectApproval {
    /// Approved: Claude Code starts it.
    Approved,
    /// Not decided yet: Claude Code asks when it next starts in the
    /// project (`claude mcp list` shows "Pending approval") and until then
    /// does not start it.
    Pending,
    /// Declined (`disabledMcpjsonServers`): Claude Code does not start it.
    Rejected,
}

/// The files Claude Code reads a project server's approval from, parsed.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApprovalFiles<'a> {
    /// `~/.claude.json`: the project's trust (`hasTrustDialogAccepted`)
    /// and approvals an older Claude Code kept there (moved to the local
    /// settings when it next starts).
    pub claude_json: Option<&'a Value>,
    /// The user's settings, `~/.claude/settings.json`.
    pub user: Option<&'a Value>,
    /// The project's shared settings, `.claude/settings.json`.
    pub project: Option<&'a Value>,
    /// The project's local settings, `.claude/settings.local.json`, where
    /// Claude Code writes the user's answer.
    pub local: Option<&'a Value>,
}

/// Whether Claude Code (2.1) starts the `.mcp.json` server `name` in the
/// project at `project_dir` (as `~/.claude.json`'s `projects` keys it), by
/// its own rule: named in any `disabledMcpjsonServers`, it is rejected;
/// approved by the user's settings (`enabledMcpjsonServers` naming it, or
/// `enableAllProjectMcpServers`), it runs; approved by the project's or
/// local settings (or the older place in `~/.claude.json`), it runs only
/// once the user has trusted the project folder; otherwise it waits.
pub fn project_server_approval(
    name: &str,
    project_dir: &str,
    files: &ApprovalFiles<'_>,
) -> ProjectApproval {
    let legacy = files
        .claude_json
        .and_then(|c| c.get("projects"))
        .and_then(|p| p.get(project_dir));
    let names = |settings: Option<&Value>, key: &str| {
        settings
            .and_then(|s| s.get(key))
            .and_then(Value::as_array)
            .is_some_and(|list| list.iter().any(|n| n.as_str() == Some(name)))
    };
    let approves = |settings: Option<&Value>| {
        names(settings, "enabledMcpjsonServers")
            || settings
                .and_then(|s| s.get("enableAllProjectMcpServers"))
                .and_then(Value::as_bool)
                == Some(true)
    };
    let sources = [files.user, files.project, files.local, legacy];
    if sources.iter().any(|s| names(*s, "disabledMcpjsonServers")) {
        return ProjectApproval::Rejected;
    }
    let trusted = legacy
        .and_then(|p| p.get("hasTrustDialogAccepted"))
        .and_then(Value::as_bool)
        == Some(true);
    let by_project = [files.project, files.local, legacy]
        .iter()
        .any(|s| approves(*s));
    if approves(files.user) || (trusted && by_project) {
        ProjectApproval::Approved
    } else {
        ProjectApproval::Pending
    }
}

/// Whether a server entry starts devboy's own MCP server (`devboy mcp …`,
/// by any path to a program named `devboy`).
pub fn runs_devboy(server: &Value) -> bool {
    let Some(command) = server.get("command").and_then(Value::as_str) else {
        return false;
    };
    let program = command.rsplit(['/', '\\']).next().unwrap_or(command);
    let first_arg = server
        .get("args")
        .and_then(Value::as_array)
        .and_then(|args| args.first())
        .and_then(Value::as_str);
    (program == "devboy" || program == "devboy.exe") && first_arg == Some("mcp")
}

fn mcp_servers(root: &Value) -> Result<&Map<String, Value>, ImportError> {
    let object = root.as_object().ok_or(ImportError::Shape(kind(root)))?;
    match object.get("mcpServers") {
        Some(Value::Object(servers)) => Ok(servers),
        Some(other) => Err(ImportError::Shape(kind(other))),
        None => Err(ImportError::Shape("no \"mcpServers\"")),
    }
}

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    text
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A key as TOML writes it: bare when it can be, else a quoted string.
fn toml_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        key.to_owned()
    } else {
        toml_string(key)
    }
}

/// A basic TOML string (JSON's escapes are all valid TOML escapes).
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// A JSON value as a TOML value; `None` for what TOML cannot hold (null).
fn toml_value(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => toml_string(s),
        Value::Array(items) => {
            let items: Option<Vec<String>> = items.iter().map(toml_value).collect();
            format!("[{}]", items?.join(", "))
        }
        Value::Object(fields) => {
            let mut parts = Vec::with_capacity(fields.len());
            for (key, value) in fields {
                parts.push(format!("{} = {}", toml_key(key), toml_value(value)?));
            }
            if parts.is_empty() {
                "{}".to_owned()
            } else {
                format!("{{ {} }}", parts.join(", "))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigFormat, ProxyConfig};
    use std::path::Path;

    const MCP_JSON: &str = r#"{
      "mcpServers": {
        "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
        "git repo": {"type": "stdio", "command": "uvx", "args": ["mcp-server-git"], "autoApprove": ["git_status"]},
        "github": {"type": "http", "url": "https://api.example/mcp",
                   "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}, "timeout": 30000},
        "devboy": {"command": "/usr/local/bin/devboy", "args": ["mcp", "--config", ".mcp.json"]}
      },
      "other": true
    }"#;

    fn env(name: &str) -> Option<String> {
        (name == "GITHUB_TOKEN").then(|| "t0k".to_owned())
    }

    #[test]
    fn toml_import_loads_to_the_same_servers_as_the_json() {
        let converted = mcp_servers_to_toml(MCP_JSON).unwrap();
        assert_eq!(converted.names, ["filesystem", "git repo", "github"]);
        assert_eq!(converted.skipped_devboy, ["devboy"]);
        assert!(
            converted.toml.contains("Bearer ${GITHUB_TOKEN}"),
            "{}",
            converted.toml
        );
        let toml_config = ProxyConfig::from_str(
            &converted.toml,
            ConfigFormat::Toml,
            Path::new("/p/devboy.toml"),
            &env,
        )
        .unwrap();
        let json_config = ProxyConfig::from_str(
            MCP_JSON,
            ConfigFormat::McpJson,
            Path::new("/p/.mcp.json"),
            &env,
        )
        .unwrap();
        // The JSON still holds devboy's own entry (failing when started);
        // the import leaves it out.
        let json_upstreams: Vec<_> = json_config
            .upstreams
            .iter()
            .filter(|u| u.name != "devboy")
            .collect();
        assert_eq!(toml_config.upstreams.len(), json_upstreams.len());
        for (t, j) in toml_config.upstreams.iter().zip(json_upstreams) {
            assert_eq!(t, j);
        }
    }

    #[test]
    fn project_split_moves_servers_and_leaves_devboy_by_relative_path() {
        let split = split_project_mcp_json(MCP_JSON, None).unwrap();
        assert_eq!(split.moved, ["filesystem", "git repo", "github"]);
        let mcp: Value = serde_json::from_str(&split.mcp_json).unwrap();
        assert_eq!(mcp["other"], true);
        let servers = mcp["mcpServers"].as_object().unwrap();
        assert_eq!(servers.len(), 1);
        assert_eq!(
            servers["devboy"]["args"],
            serde_json::json!(["mcp", "--config", "devboy.mcp.json"])
        );
        let moved: Value = serde_json::from_str(&split.servers_file).unwrap();
        let original: Value = serde_json::from_str(MCP_JSON).unwrap();
        for name in &split.moved {
            assert_eq!(moved["mcpServers"][name], original["mcpServers"][name]);
        }
        assert!(moved["mcpServers"].get("devboy").is_none());
        // Running it again on its own output moves nothing and loses nothing.
        let again = split_project_mcp_json(&split.mcp_json, Some(&split.servers_file)).unwrap();
        assert!(again.moved.is_empty());
        assert_eq!(again.servers_file, split.servers_file);
        assert_eq!(again.mcp_json, split.mcp_json);
    }

    #[test]
    fn registrations_are_found_in_every_scope() {
        let claude = serde_json::json!({
            "mcpServers": {"devboy": {"command": "devboy", "args": ["mcp"]},
                           "fs": {"command": "npx", "args": ["-y", "x"]}},
            "projects": {"/p": {"mcpServers": {"db": {"command": "/opt/bin/devboy",
                "args": ["mcp", "--config", "x.json"], "env": {"A": "1"}}}}}
        });
        let project: Value = serde_json::from_str(MCP_JSON).unwrap();
        let found = claude_registrations(Some(&claude), "/p", Some(&project));
        let scopes: Vec<(&str, &str)> = found.iter().map(|r| (r.scope, r.name.as_str())).collect();
        // The project's `github` is an HTTP entry: kept, for its server to
        // say whether it is devboy.
        assert_eq!(
            scopes,
            [
                ("local", "db"),
                ("project", "github"),
                ("project", "devboy"),
                ("user", "devboy")
            ]
        );
        assert_eq!(
            found[0].server,
            RegisteredServer::Stdio {
                command: "/opt/bin/devboy".into(),
                args: vec!["mcp".into(), "--config".into(), "x.json".into()],
                env: vec![("A".to_owned(), "1".to_owned())],
            }
        );
        assert!(!found[1].known_devboy());
        assert!(found[2].known_devboy() && found[3].known_devboy());
        assert!(claude_registrations(Some(&claude), "/other", None).len() == 1);
    }

    #[test]
    fn http_registrations_keep_their_url_and_headers_as_written() {
        // What `claude mcp add --transport http devboy-http URL --header …`
        // writes (user scope), a local `sse` entry and a project one.
        let claude = serde_json::json!({
            "mcpServers": {
                "devboy-http": {"type": "http", "url": "http://127.0.0.1:8787/mcp",
                    "headers": {"Authorization": "Bearer 0123456789abcdef", "X-N": 7}},
                "remote": {"type": "http", "url": "https://mcp.example/mcp"},
                "no-url": {"type": "http"},
                "ws": {"type": "ws", "url": "ws://127.0.0.1:1"}
            },
            "projects": {"/p": {"mcpServers": {
                "DevBoy-Old": {"type": "sse", "url": "http://127.0.0.1:8787/sse"}}}}
        });
        let project = serde_json::json!({"mcpServers": {
            "shared": {"type": "http", "url": "${DEVBOY_URL}", "headers": {"Authorization": "Bearer ${T}"}}
        }});
        let found = claude_registrations(Some(&claude), "/p", Some(&project));
        let http = |scope, name: &str, sse, url: &str, token: Option<&str>| Registration {
            scope,
            name: name.to_owned(),
            server: RegisteredServer::Http {
                sse,
                url: url.to_owned(),
                headers: token
                    .map(|t| vec![("Authorization".to_owned(), format!("Bearer {t}"))])
                    .unwrap_or_default(),
            },
        };
        assert_eq!(
            found,
            [
                http(
                    "local",
                    "DevBoy-Old",
                    true,
                    "http://127.0.0.1:8787/sse",
                    None
                ),
                // Nothing expanded: Claude Code's own expansion of a
                // project file is not devboy's to guess.
                http("project", "shared", false, "${DEVBOY_URL}", Some("${T}")),
                // A header that is not a string is not sent.
                http(
                    "user",
                    "devboy-http",
                    false,
                    "http://127.0.0.1:8787/mcp",
                    Some("0123456789abcdef")
                ),
                http("user", "remote", false, "https://mcp.example/mcp", None),
            ]
        );
        let known: Vec<bool> = found.iter().map(Registration::known_devboy).collect();
        assert_eq!(known, [true, false, true, false]);
    }

    #[test]
    fn a_project_server_waits_for_approval_as_claude_code_decides() {
        use serde_json::json;
        use ProjectApproval::*;
        let approval = |claude: Value, user: Value, project: Value, local: Value| {
            let files = ApprovalFiles {
                claude_json: Some(&claude),
                user: Some(&user),
                project: Some(&project),
                local: Some(&local),
            };
            project_server_approval("devboy", "/p", &files)
        };
        let none = || json!({});
        let trusted = || json!({"projects": {"/p": {"hasTrustDialogAccepted": true}}});
        let enabled = || json!({"enabledMcpjsonServers": ["devboy"]});
        assert_eq!(approval(none(), none(), none(), none()), Pending);
        // Local or project approval counts once the folder is trusted.
        assert_eq!(approval(none(), none(), none(), enabled()), Pending);
        assert_eq!(approval(trusted(), none(), none(), enabled()), Approved);
        assert_eq!(approval(trusted(), none(), enabled(), none()), Approved);
        assert_eq!(
            approval(
                trusted(),
                none(),
                none(),
                json!({"enabledMcpjsonServers": ["other"]})
            ),
            Pending
        );
        // The user's own settings count anywhere.
        assert_eq!(approval(none(), enabled(), none(), none()), Approved);
        assert_eq!(
            approval(
                none(),
                json!({"enableAllProjectMcpServers": true}),
                none(),
                none()
            ),
            Approved
        );
        assert_eq!(
            approval(
                trusted(),
                none(),
                none(),
                json!({"enableAllProjectMcpServers": false})
            ),
            Pending
        );
        // A rejection anywhere wins.
        let both =
            json!({"enabledMcpjsonServers": ["devboy"], "disabledMcpjsonServers": ["devboy"]});
        assert_eq!(approval(trusted(), enabled(), none(), both), Rejected);
        // An older Claude Code's approval in ~/.claude.json.
        let legacy = json!({"projects": {"/p": {"hasTrustDialogAccepted": true, "enabledMcpjsonServers": ["devboy"]}}});
        assert_eq!(approval(legacy, none(), none(), none()), Approved);
    }

    #[test]
    fn not_mcp_servers_is_an_error() {
        assert!(matches!(
            mcp_servers_to_toml("[]"),
            Err(ImportError::Shape("an array"))
        ));
        assert!(matches!(
            split_project_mcp_json("{}", None),
            Err(ImportError::Shape(_))
        ));
        assert!(matches!(
            mcp_servers_to_toml("{"),
            Err(ImportError::Json(_))
        ));
    }
}
