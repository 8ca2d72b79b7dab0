//! `devboy serve --http` (issue 27, part 1): MCP over Streamable HTTP with
//! a bearer token, for several clients at once.
//!
//! - Two Python SDK clients (`tests/python/http_client.py`) on one devboy:
//!   what the door refuses (401 without or with a wrong token, 403 for a
//!   foreign Origin, 404 elsewhere), tools and calls over HTTP, and
//!   references that never cross sessions.
//! - Real Claude Code registered with `claude mcp add --transport http …
//!   --header "Authorization: Bearer …"` calls a proxied tool.
//! - An address other than loopback without a token is refused at start.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{toml_str, TempDir};
use devboy_testkit::{peers, ClaudeCode, Script, ScriptedModel};
use serde_json::{json, Value};

const TOKEN: &str = "devboy-test-token-7f3a9c21";

/// A running `devboy serve --http 127.0.0.1:0`, killed on drop.
struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes the config (test server as `t`, server-filesystem over `root`
/// as `fs`) and the token file, and starts devboy; returns once it says
/// where it serves.
fn serve(dir: &Path, root: &Path) -> Served {
    let fs = peers::server_filesystem(root);
    let fs_args: Vec<String> = fs.args.iter().map(|a| toml_str(a)).collect();
    let config = dir.join("devboy.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.t]\ncommand = {}\n\n[servers.fs]\ncommand = {}\nargs = [{}]\n",
            toml_str(&common::test_server_bin().display().to_string()),
            toml_str(&fs.program_str()),
            fs_args.join(", ")
        ),
    )
    .unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let mut child = Command::new(common::devboy_bin())
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--token-file")
        .arg(&token_file)
        .args(["--list-grace-ms", "30000"])
        .env("RUST_LOG", common::test_log_filter())
        .env("DEVBOY_CONFIG_DIR", dir)
        .env("DEVBOY_CACHE_DIR", dir.join("cache"))
        .env("DEVBOY_RUNTIME_DIR", dir.join("run"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start devboy serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[devboy] {line}");
            if let Some(url) = line.strip_prefix("devboy: serving MCP at ") {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("devboy says where it serves within 30 s");
    Served { child, url }
}

fn project(tag: &str) -> (TempDir, PathBuf, PathBuf) {
    let dir = TempDir::new(tag);
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let file = root.join("notes.txt");
    std::fs::write(&file, "served over http, 6402\n".repeat(60)).unwrap();
    (dir, root, file)
}

#[test]
fn two_http_clients_share_the_upstreams_and_never_each_others_references() {
    let (dir, root, file) = project("http-two");
    let served = serve(dir.path(), &root);
    let output = Command::new(peers::python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/http_client.py"))
        .args(["--url", &served.url, "--token", TOKEN, "--file"])
        .arg(&file)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run the SDK client");
    let (summary, stderr) = common::python_summary(&output);
    assert_eq!(
        summary["ok"], true,
        "failed: {}\nsummary: {summary}\nstderr:\n{stderr}",
        summary["failed"]
    );
    assert_eq!(summary["refused"]["no token"][0], 401, "{summary}");
    assert_eq!(summary["refused"]["a foreign Origin"][0], 403, "{summary}");
    assert!(summary["passed"].as_u64().unwrap() >= 20, "{summary}");
    assert!(!stderr.contains("Session termination failed"), "{stderr}");
    // Each client's session ended when it closed (DELETE): devboy wrote a
    // telemetry summary for each while still serving.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let ended = session_summaries(&dir.path().join("telemetry"));
        if ended == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{ended} session summaries, not 2"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(served_still(&served));
    // `devboy status` finds it, serving HTTP, its sessions ended.
    let status = Command::new(common::devboy_bin())
        .args(["status", "--format", "json"])
        .env("DEVBOY_RUNTIME_DIR", dir.path().join("run"))
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let process = &status["processes"][0];
    assert_eq!(
        process["serving"].as_str(),
        Some(format!("http {}", served.url.trim_start_matches("http://")).as_str()),
        "{status}"
    );
    assert_eq!(process["sessions"]["open"], 0, "{status}");
    assert_eq!(
        process["upstreams"].as_array().unwrap().len(),
        2,
        "{status}"
    );
}

/// Session summary lines in the telemetry under `dir`.
fn session_summaries(dir: &Path) -> usize {
    let Ok(files) = std::fs::read_dir(dir.join("events")) else {
        return 0;
    };
    files
        .filter_map(Result::ok)
        .filter_map(|f| std::fs::read_to_string(f.path()).ok())
        .map(|text| text.matches("\"kind\":\"session\"").count())
        .sum()
}

fn served_still(served: &Served) -> bool {
    let mut child = std::process::Command::new("kill");
    child.arg("-0").arg(served.child.id().to_string());
    child.status().is_ok_and(|s| s.success())
}

#[test]
fn claude_code_calls_a_tool_through_devboy_over_http_with_a_bearer_header() {
    let (dir, root, file) = project("http-claude");
    let served = serve(dir.path(), &root);
    let tool = "mcp__devboy__fs__read_text_file";
    let model = ScriptedModel::start(
        Script::new()
            .tool_use(tool, json!({"path": file.to_str().unwrap()}))
            .final_text("read"),
    )
    .unwrap();
    let claude = ClaudeCode::new().unwrap().model(&model);
    let added = claude
        .run(&[
            "mcp",
            "add",
            "--transport",
            "http",
            "-s",
            "user",
            "devboy",
            &served.url,
            "--header",
            &format!("Authorization: Bearer {TOKEN}"),
        ])
        .unwrap();
    assert!(added.success(), "{added:?}");
    let list = claude.mcp_list().unwrap();
    assert!(
        list.lines()
            .any(|l| l.starts_with("devboy:") && l.contains("Connected")),
        "{list}"
    );
    claude
        .run_print("Read notes.txt.", &[tool])
        .unwrap()
        .assert_success();
    let results = model.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert!(
        results[0].text().contains("served over http, 6402"),
        "{}",
        results[0].text()
    );
}

#[test]
fn without_a_token_only_loopback_is_served() {
    let output = Command::new(common::devboy_bin())
        .args(["serve", "--http", "0.0.0.0:0"])
        .env_remove("DEVBOY_HTTP_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("--token-file"),
        "{stderr}"
    );
    let short = Command::new(common::devboy_bin())
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("DEVBOY_HTTP_TOKEN", "short")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!short.status.success());
    assert!(
        String::from_utf8_lossy(&short.stderr).contains("at least 16"),
        "{short:?}"
    );
}
