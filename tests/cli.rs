//! The command line as a new user meets it: no config at all, a bad config.

mod common;

use std::process::Command;

use common::{devboy_bin, RawClient, TempDir};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn no_config_serves_the_builtin_tools() {
    // An empty config dir: no devboy.toml anywhere, the embedded default applies.
    let empty = TempDir::new("noconfig");
    let mut client = RawClient::start_command(
        &["mcp"],
        &[("DEVBOY_CONFIG_DIR", empty.path().to_str().unwrap())],
    )
    .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    let list = client.recv_response(1).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "devboy_status",
            "devboy_servers",
            "devboy_compact",
            "devboy_expand",
            "devboy_explore",
            "devboy_find_files",
            "devboy_run"
        ],
        "{list}"
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "devboy_status", "arguments": {}}}))
        .await;
    let status = client.recv_response(2).await;
    let text = status["result"]["content"][0]["text"]
        .as_str()
        .expect("text");
    let report: serde_json::Value = serde_json::from_str(text).expect("status JSON");
    assert_eq!(report["upstreams"], json!([]));
    client.stop().await;
}

#[test]
fn bad_config_names_file_key_and_expectation() {
    let dir = TempDir::new("badconfig");
    let path = dir.path().join(".mcp.json");
    std::fs::write(
        &path,
        r#"{"mcpServers": {"github": {"command": "gh-mcp", "args": ["--x", 3]}}}"#,
    )
    .unwrap();
    let out = Command::new(devboy_bin())
        .args(["mcp", "--config"])
        .arg(&path)
        .output()
        .expect("run devboy");
    assert!(out.stdout.is_empty(), "stdout is the protocol channel");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The bad entry stops nothing: devboy ends only because no client spoke.
    assert!(
        stderr.contains("handshake with the client failed"),
        "{stderr}"
    );
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(stderr.contains("mcpServers.github.args[1]"), "{stderr}");
    assert!(stderr.contains("expected a string"), "{stderr}");
}

#[test]
fn missing_config_file_is_a_clear_error() {
    let out = Command::new(devboy_bin())
        .args(["mcp", "--config", "/nonexistent/devboy.toml"])
        .output()
        .expect("run devboy");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/devboy.toml"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn log_file_gets_the_logs_and_stdout_stays_protocol() {
    let dir = TempDir::new("logfile");
    let log = dir.path().join("devboy.log");
    let client = RawClient::start_command(
        &[
            "mcp",
            "--log-file",
            log.to_str().unwrap(),
            "--log-level",
            "debug",
        ],
        // An empty RUST_LOG leaves the choice to --log-level.
        &[
            ("DEVBOY_CONFIG_DIR", dir.path().to_str().unwrap()),
            ("RUST_LOG", ""),
        ],
    )
    .await;
    client.stop().await;
    let text = std::fs::read_to_string(&log).expect("log file written");
    assert!(
        text.contains("no config file; serving built-in tools only"),
        "{text}"
    );
}

/// What a user tries first by hand: requests piped in, stdin closed at
/// once. Every request is answered before devboy ends, listing and
/// status included (neither may wait for the tokenizer's vocabulary).
#[test]
fn requests_piped_in_with_stdin_closed_are_all_answered() {
    use std::io::Write;
    for _ in 0..3 {
        let empty = TempDir::new("piped");
        let mut child = Command::new(devboy_bin())
            .arg("mcp")
            .env("DEVBOY_CONFIG_DIR", empty.path())
            .env("HOME", empty.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let requests = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "by-hand", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "devboy_status", "arguments": {}}}),
        ];
        let mut stdin = child.stdin.take().unwrap();
        for request in requests {
            writeln!(stdin, "{request}").unwrap();
        }
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        let mut ids: Vec<u64> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["id"].as_u64())
            .collect();
        // Each is answered once; requests after `initialize` are served
        // concurrently, so their answers may come in either order.
        assert_eq!(ids.first(), Some(&1), "initialize first");
        ids.sort_unstable();
        assert_eq!(
            ids,
            [1, 2, 3],
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}
