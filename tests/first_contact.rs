//! First contact: devboy started the way a new user starts it, with an
//! ordinary `.mcp.json` that has a server needing an unset variable, one
//! that is down, one that is slow, and one that is devboy itself. Whatever
//! is wrong with one server, the others serve, `devboy_status` says at
//! once what is wrong and where, and stderr stays short.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{devboy_bin, test_server_bin, upstream, RawClient, TempDir};
use serde_json::{json, Value};

/// Writes `servers` as `DIR/.mcp.json` and returns its path.
fn write_mcp_json(dir: &Path, servers: Value) -> String {
    let path = dir.join(".mcp.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "mcpServers": servers })).unwrap(),
    )
    .unwrap();
    path.display().to_string()
}

/// devboy on `config`, started in `dir` (as Claude Code starts it in the
/// project directory).
async fn start(dir: &TempDir, config: &str, extra: &[&str]) -> RawClient {
    let mut args = vec!["mcp", "--config", config];
    args.extend_from_slice(extra);
    RawClient::start_command_in(&args, &[], Some(dir.path())).await
}

/// A port on loopback that nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unset_variable_fails_only_its_server_and_says_why() {
    let dir = TempDir::new("first-unset");
    std::env::remove_var("DEVBOY_TEST_SURELY_UNSET");
    let config = write_mcp_json(
        dir.path(),
        json!({
            "t": {"command": test_server_bin()},
            "github": {"type": "http", "url": "https://api.example/mcp",
                       "headers": {"Authorization": "Bearer ${DEVBOY_TEST_SURELY_UNSET}"}},
        }),
    );
    let mut devboy = start(&dir, &config, &[]).await;
    let names = devboy.tool_names(1).await;
    assert!(names.contains(&"t__echo".to_owned()), "{names:?}");
    let echo = devboy
        .call_tool(2, "t__echo", json!({"text": "still here"}))
        .await;
    assert_eq!(echo["result"]["content"][0]["text"], "still here", "{echo}");
    let status = devboy.status(3).await;
    let github = upstream(&status, "github");
    assert_eq!(github["state"], "failed", "{github}");
    assert_eq!(github["retrying"], false, "{github}");
    let error = github["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains(".mcp.json: mcpServers.github.headers.Authorization")
            && error.contains("DEVBOY_TEST_SURELY_UNSET"),
        "{error}"
    );
    // Its tools, were it up, would be explained, not "unknown".
    let call = devboy.call_tool(4, "github__search", json!({})).await;
    let message = call["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("its server `github` is down") && message.contains("DEVBOY_TEST"),
        "{call}"
    );
    devboy.stop().await;
}

/// Processes whose command line holds `needle`.
fn processes_with(needle: &str) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            count += 1;
        }
    }
    count
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_that_lists_devboy_itself_does_not_multiply_it() {
    // What `claude mcp add devboy -s project -- devboy mcp --config .mcp.json`
    // produces: devboy's own entry inside the file devboy reads.
    let dir = TempDir::new("first-self");
    let config = dir.path().join(".mcp.json").display().to_string();
    write_mcp_json(
        dir.path(),
        json!({
            "t": {"command": test_server_bin()},
            "devboy": {"command": devboy_bin(), "args": ["mcp", "--config", &config]},
        }),
    );
    let mut devboy = start(&dir, &config, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let entry = loop {
        let status = devboy.status(1).await;
        let entry = upstream(&status, "devboy").clone();
        if entry["state"] == "failed" || Instant::now() > deadline {
            break entry;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(entry["state"], "failed", "{entry}");
    assert_eq!(entry["retrying"], false, "{entry}");
    assert!(
        entry["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("this server is devboy itself"),
        "{entry}"
    );
    // Its built-in tools are not offered a second time under a prefix.
    let names = devboy.tool_names(2).await;
    assert!(
        !names.iter().any(|n| n.starts_with("devboy_2__")),
        "{names:?}"
    );
    assert!(names.contains(&"t__echo".to_owned()), "{names:?}");
    // Give a runaway chain time to show itself: only this devboy is left
    // (the nested one was stopped when it was recognised).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(processes_with(&config), 1, "devboy processes on {config}");
    devboy.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn first_tools_list_answers_with_what_is_ready_and_late_tools_follow() {
    let dir = TempDir::new("first-slow");
    let config = write_mcp_json(
        dir.path(),
        json!({
            "fast": {"command": test_server_bin()},
            "slow": {"command": test_server_bin(),
                     "env": {"DEVBOY_TEST_STARTUP_DELAY_MS": "7000"}},
        }),
    );
    let started = Instant::now();
    let mut devboy = start(&dir, &config, &[]).await;
    // Status, before any tools/list, answers with the real state without
    // waiting for the slow server (it is still starting).
    let status = devboy.status(1).await;
    assert_eq!(upstream(&status, "slow")["state"], "starting", "{status}");
    let names = devboy.tool_names(2).await;
    let listed_after = started.elapsed();
    // Claude Code gives tools/list 5 s; devboy's default grace is 4 s.
    assert!(
        listed_after < Duration::from_secs(5),
        "first tools/list took {listed_after:?}"
    );
    assert!(names.contains(&"fast__echo".to_owned()), "{names:?}");
    assert!(!names.contains(&"slow__echo".to_owned()), "{names:?}");
    // The slow server's tools are announced when it comes up, and work.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut id = 10;
    let names = loop {
        id += 1;
        let names = devboy.tool_names(id).await;
        if names.contains(&"slow__echo".to_owned()) || Instant::now() > deadline {
            break names;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(names.contains(&"slow__echo".to_owned()), "{names:?}");
    let echo = devboy
        .call_tool(100, "slow__echo", json!({"text": "late"}))
        .await;
    assert_eq!(echo["result"]["content"][0]["text"], "late", "{echo}");
    devboy.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn list_changed_announces_a_late_server() {
    let dir = TempDir::new("first-late");
    let config = write_mcp_json(
        dir.path(),
        json!({"slow": {"command": test_server_bin(),
                        "env": {"DEVBOY_TEST_STARTUP_DELAY_MS": "8000"}}}),
    );
    let mut devboy = start(&dir, &config, &[]).await;
    let names = devboy.tool_names(1).await;
    assert!(!names.contains(&"slow__echo".to_owned()), "{names:?}");
    // Wait for the notification itself, not for a poll to succeed.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no list_changed within 30 s");
        let message = devboy.recv().await;
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    let names = devboy.tool_names(2).await;
    assert!(names.contains(&"slow__echo".to_owned()), "{names:?}");
    devboy.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_failures_read_as_what_happened() {
    let dir = TempDir::new("first-errors");
    let port = closed_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let config = write_mcp_json(
        dir.path(),
        json!({
            "down": {"type": "http", "url": url},
            "missing": {"command": "devboy-test-no-such-command"},
            "exits": {"command": "sh", "args": ["-c", "echo 'no token given' >&2; exit 3"]},
            "noisy": {"command": "sh", "args": ["-c", "echo 'Server listening on stdio'; sleep 60"],
                      "startup_timeout_ms": 1500},
            "t": {"command": test_server_bin()},
        }),
    );
    let mut devboy = start(&dir, &config, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        let status = devboy.status(1).await;
        let down = upstream(&status, "down");
        let noisy = upstream(&status, "noisy");
        if (down["last_error"].is_string() && noisy["last_error"].is_string())
            || Instant::now() > deadline
        {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let down = upstream(&status, "down");
    assert_eq!(
        down["last_error"],
        format!("initialize over HTTP failed: connection refused at {url}"),
        "{down}"
    );
    assert!(
        ["failed", "restarting"].contains(&down["state"].as_str().unwrap_or_default()),
        "{down}"
    );
    assert!(down["down_for_s"].is_u64(), "{down}");
    let missing = upstream(&status, "missing");
    assert!(
        missing["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("command not found: `devboy-test-no-such-command`"),
        "{missing}"
    );
    // A process that exits says how, and what it said last.
    assert_eq!(
        upstream(&status, "exits")["last_error"],
        "exited with code 3; stderr: no token given",
        "{status}"
    );
    // One that writes something other than JSON-RPC on stdout is told so.
    let noisy = upstream(&status, "noisy");
    assert_eq!(
        noisy["stdout_not_json"], "Server listening on stdio",
        "{noisy}"
    );
    assert!(
        noisy["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("printed non-JSON on stdout (\"Server listening on stdio\")"),
        "{noisy}"
    );
    // Every attempt counts, and relaunches are restarts.
    let attempts = down["attempts"].as_u64().unwrap_or_default();
    assert_eq!(
        down["restarts"].as_u64(),
        Some(attempts.saturating_sub(1)),
        "{down}"
    );
    devboy.stop().await;
}

#[test]
fn stderr_stays_short_while_a_server_stays_down() {
    let dir = TempDir::new("first-quiet");
    let config = write_mcp_json(
        dir.path(),
        json!({
            "missing": {"command": "devboy-test-no-such-command"},
            "down": {"type": "http", "url": format!("http://127.0.0.1:{}/mcp", closed_port())},
            "t": {"command": test_server_bin()},
        }),
    );
    let mut child = std::process::Command::new(devboy_bin())
        .args(["mcp", "--config", &config])
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .env("DEVBOY_TELEMETRY", "off")
        .env("DEVBOY_CONFIG_DIR", dir.path())
        .env("DEVBOY_CACHE_DIR", dir.path().join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Until both have failed five times (backoff of 250 ms doubling), as
    // devboy_status counts them, asked over the protocol.
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        use std::io::{BufRead, Write};
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{request}").unwrap();
        if method == "initialize" {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            writeln!(stdin, "{note}").unwrap();
        }
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "devboy closed stdout"
            );
            let reply: Value = serde_json::from_str(&line).unwrap();
            if reply["id"] == id {
                return reply;
            }
        }
    };
    ask(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "first-contact-test", "version": "0"}}),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in 2.. {
        let reply = ask(
            id,
            "tools/call",
            json!({"name": "devboy_status", "arguments": {}}),
        );
        let text = reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("{}");
        let status: Value = serde_json::from_str(text).unwrap_or_default();
        let attempts = |name: &str| upstream(&status, name)["attempts"].as_u64().unwrap_or(0);
        if attempts("missing") >= 5 && attempts("down") >= 5 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never failed five times: {status}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(stdin);
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        !lines.iter().any(|l| l.contains(" INFO ")),
        "INFO on stderr by default:\n{stderr}"
    );
    for server in ["missing", "down"] {
        let about = lines
            .iter()
            .filter(|l| l.contains(&format!("upstream={server}")))
            .count();
        assert_eq!(
            about, 1,
            "one line for `{server}` per distinct error:\n{stderr}"
        );
    }
    assert!(lines.len() <= 3, "stderr:\n{stderr}");
}

#[test]
fn doctor_reports_each_server_and_starts_devboy_as_claude_code_would() {
    let home = TempDir::new("doctor-home");
    let project = TempDir::new("doctor-project");
    std::fs::write(
        project.path().join("devboy.mcp.json"),
        json!({"mcpServers": {
            "t": {"command": test_server_bin()},
            "missing": {"command": "devboy-test-no-such-command"},
        }})
        .to_string(),
    )
    .unwrap();
    // What `devboy init --project` leaves, with devboy found by path.
    std::fs::write(
        project.path().join(".mcp.json"),
        json!({"mcpServers": {"devboy": {"command": devboy_bin(),
            "args": ["mcp", "--config", "devboy.mcp.json"]}}})
        .to_string(),
    )
    .unwrap();
    let out = std::process::Command::new(devboy_bin())
        .args(["doctor", "--wait-ms", "20000"])
        .current_dir(project.path())
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("DEVBOY_CONFIG_DIR")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("DEVBOY_TELEMETRY", "off")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a server is down:\n{stdout}");
    assert!(stdout.contains("devboy.mcp.json"), "{stdout}");
    assert!(
        stdout.contains("✔ t (stdio, prefix t): ready, 12 tool(s)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("✘ missing (stdio, prefix missing)")
            && stdout.contains("command not found: `devboy-test-no-such-command`"),
        "{stdout}"
    );
    // The registration in .mcp.json, started as Claude Code starts it;
    // nothing approved it in this HOME yet.
    assert!(
        stdout.contains("! project scope, `devboy`")
            && stdout.contains("pending approval in Claude Code")
            && stdout.contains("tools/list"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn status_shows_what_each_pipeline_rule_matches() {
    // The docs' example `fs__write_*` for a server named `filesystem`
    // matches nothing; status says so (and stderr warns once).
    let dir = TempDir::new("first-rules");
    let config = write_mcp_json(dir.path(), json!({"t": {"command": test_server_bin()}}));
    let rules = dir.path().join("pipeline_config.toml");
    std::fs::write(
        &rules,
        "schema_version = 3\n[tools.\"fs__write_*\"]\nside_effect = \"mutating\"\n\
         [endpoints.\"t__echo\"]\ndedup = true\n",
    )
    .unwrap();
    let rules = rules.display().to_string();
    let mut devboy = start(&dir, &config, &["--pipeline-config", &rules]).await;
    devboy.tool_names(1).await;
    let status = devboy.status(2).await;
    assert_eq!(
        status["pipeline_rules"],
        json!([
            {"table": "endpoints", "pattern": "t__echo", "matches": ["t__echo"]},
            {"table": "tools", "pattern": "fs__write_*", "matches": []},
        ]),
        "{status}"
    );
    devboy.stop().await;
}

/// A client that starts devboy for a moment (`claude mcp list`, a short
/// `claude -p`) while a package runner is still installing its server on
/// a first run: the runner is left to finish (stopping it halfway leaves
/// an npx install that fails every later start with
/// `ERR_MODULE_NOT_FOUND`, seen in a fresh `HOME`). Any other server is
/// stopped as before.
#[tokio::test(flavor = "multi_thread")]
async fn a_package_runner_still_installing_is_left_to_finish_when_devboy_stops() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = TempDir::new("runner-install");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // "Installs" for 2 s, writes its marker, then serves until stdin ends.
    let script = "#!/bin/sh\nsleep 2\ntouch \"$MARKER\"\nexec cat >/dev/null\n";
    for name in ["npx", "slow-server"] {
        let path = bin.join(name);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let marker = |name: &str| dir.path().join(format!("{name}.done"));
    let config = write_mcp_json(
        dir.path(),
        json!({
            "runner": {"command": bin.join("npx"), "args": ["-y", "some-mcp-server"],
                       "env": {"MARKER": marker("runner")}},
            "plain": {"command": bin.join("slow-server"),
                      "env": {"MARKER": marker("plain")}},
        }),
    );
    let client = start(&dir, &config, &[]).await;
    client.stop().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marker("runner").exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        marker("runner").exists(),
        "the runner was stopped halfway through its install"
    );
    assert!(
        !marker("plain").exists(),
        "a server that is not a package runner is stopped with devboy"
    );
}
