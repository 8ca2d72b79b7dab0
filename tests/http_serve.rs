//! `devboy serve --http`: MCP over Streamable HTTP with
//! a bearer token, for several clients at once.
//!
//! - Two Python SDK clients (`tests/python/http_client.py`) on one devboy:
//!   what the door refuses (401 without or with a wrong token, 403 for a
//!   foreign Origin, 404 elsewhere), tools and calls over HTTP, and
//!   references that never cross sessions.
//! - Real Claude Code registered with `claude mcp add --transport http …
//!   --header "Authorization: Bearer …"` calls a proxied tool.
//! - `devboy doctor` in that Claude Code's HOME asks each HTTP registration
//!   as Claude Code would, and says why one would fail: a wrong token, no
//!   header, a wrong path, a refused Origin, devboy not running.
//! - A client that leaves without `DELETE` (exits, or is killed) stops
//!   counting in `devboy status` and its session ends; one still connected
//!   keeps its session however long it is idle.
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
    serve_with(dir, root, "")
}

/// [`serve`] with `extra` lines at the end of the config.
fn serve_with(dir: &Path, root: &Path, extra: &str) -> Served {
    let fs = peers::server_filesystem(root);
    let fs_args: Vec<String> = fs.args.iter().map(|a| toml_str(a)).collect();
    let config = dir.join("devboy.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.t]\ncommand = {}\n\n[servers.fs]\ncommand = {}\nargs = [{}]\n\n{extra}",
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

/// Runs the Python SDK client `script` (under `tests/python/`) against
/// `served`, reading `file`: its summary and stderr.
fn sdk_client(script: &str, served: &Served, file: &Path) -> (Value, String) {
    let output = Command::new(peers::python())
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/python")
                .join(script),
        )
        .args(["--url", &served.url, "--token", TOKEN, "--file"])
        .arg(file)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run the SDK client");
    common::python_summary(&output)
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
    let (summary, stderr) = sdk_client("http_client.py", &served, &file);
    assert_eq!(
        summary["ok"], true,
        "failed: {}\nsummary: {summary}\nstderr:\n{stderr}",
        summary["failed"]
    );
    assert_eq!(summary["refused"]["no token"][0], 401, "{summary}");
    assert_eq!(summary["refused"]["a foreign Origin"][0], 403, "{summary}");
    assert_eq!(
        summary["accepted origins"]["http://127.0.0.1:5173"], 200,
        "{summary}"
    );
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

/// Code mode over HTTP, from the Python SDK (`tests/python/code_mode_client.py`):
/// a script reads a file and calls an allowed tool, a write is refused,
/// and a spinning script holds up neither the other session nor devboy.
#[test]
fn the_python_sdk_runs_scripts_over_http_and_a_spinning_one_holds_nothing_up() {
    let (dir, root, file) = project("http-code");
    let served = serve_with(
        dir.path(),
        &root,
        "[code]\ntimeout_secs = 2\nallow = [\"t__echo\"]\n",
    );
    let (summary, stderr) = sdk_client("code_mode_client.py", &served, &file);
    assert_eq!(
        summary["ok"], true,
        "failed: {}\nsummary: {summary}\nstderr:\n{stderr}",
        summary["failed"]
    );
    assert!(summary["passed"].as_u64().unwrap() >= 7, "{summary}");
    assert!(served_still(&served));
}

/// `devboy status --format json` for the devboy serving from `dir`: the
/// one process it finds.
fn status_of(dir: &Path) -> Value {
    let status = Command::new(common::devboy_bin())
        .args(["status", "--format", "json"])
        .env("DEVBOY_RUNTIME_DIR", dir.join("run"))
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    status["processes"][0].clone()
}

/// Polls (up to 60 s) until `devboy status` counts `open` HTTP sessions
/// and the telemetry holds `ended` session summaries.
fn wait_for_sessions(dir: &Path, open: u64, ended: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let process = status_of(dir);
        let summaries = session_summaries(&dir.join("telemetry"));
        if process["sessions"]["open"] == open && summaries == ended {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waited 60 s for {open} open sessions and {ended} ended; status: {process}, \
             {summaries} session summaries"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_session_whose_client_left_without_delete_stops_counting() {
    let (dir, root, _file) = project("http-leave");
    let served = serve(dir.path(), &root);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/http_leaving_client.py");
    let client = |mode: &str| {
        let mut command = Command::new(peers::python());
        command
            .arg(&script)
            .args(["--url", &served.url, "--token", TOKEN, mode])
            .env("PYTHONUNBUFFERED", "1");
        command
    };
    // One client stays connected (its SSE stream open) and idle.
    let mut staying = client("--stay")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the staying SDK client");
    let mut said = BufReader::new(staying.stdout.take().unwrap()).lines();
    let ready = said.next().unwrap().unwrap();
    assert_eq!(ready, r#"{"ready": true}"#);
    // Another one exits without DELETE, as Claude Code does.
    let output = client("--leave")
        .stdin(Stdio::null())
        .output()
        .expect("run the leaving SDK client");
    let (summary, stderr) = common::python_summary(&output);
    assert_eq!(summary["ok"], true, "{summary}\nstderr:\n{stderr}");
    // Its session ends: `devboy status` counts only the staying one.
    wait_for_sessions(dir.path(), 1, 1);
    // The one still connected, idle all along, keeps its session.
    let stdin = staying.stdin.as_mut().unwrap();
    std::io::Write::write_all(stdin, b"call\n").unwrap();
    let echoed = said.next().unwrap().unwrap();
    assert_eq!(echoed, r#"{"echoed": true}"#);
    // Killed, it never says goodbye; its connections close all the same.
    staying.kill().unwrap();
    staying.wait().unwrap();
    wait_for_sessions(dir.path(), 0, 2);
    let text = Command::new(common::devboy_bin())
        .arg("status")
        .env("DEVBOY_RUNTIME_DIR", dir.path().join("run"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("open HTTP sessions: 0\n"), "{text}");
    assert!(!text.contains("session: "), "{text}");
    assert!(served_still(&served));
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
    add_http(&claude, "user", "devboy", &served.url);
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

/// `devboy doctor` run in `claude`'s HOME and project, as a user would
/// there: its exit code and stdout.
fn doctor(claude: &ClaudeCode) -> (Option<i32>, String) {
    let out = Command::new(common::devboy_bin())
        .arg("doctor")
        .current_dir(claude.project())
        .env("HOME", claude.home())
        .env("XDG_CONFIG_HOME", claude.home().join(".config"))
        .env_remove("DEVBOY_CONFIG_DIR")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("DEVBOY_TELEMETRY", "off")
        // What a project's .mcp.json may refer to as ${DEVBOY_HTTP_TEST_TOKEN}.
        .env("DEVBOY_HTTP_TEST_TOKEN", TOKEN)
        .env_remove("DEVBOY_HTTP_TEST_UNSET")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The line after the one starting with `start` (trimmed), in `out`.
fn line_after<'a>(out: &'a str, start: &str) -> &'a str {
    let mut lines = out.lines().map(str::trim);
    lines.find(|l| l.starts_with(start));
    lines.next().unwrap_or_default()
}

/// `claude mcp add --transport http -s SCOPE NAME URL --header
/// "Authorization: Bearer TOKEN"`, as the README has it.
fn add_http(claude: &ClaudeCode, scope: &str, name: &str, url: &str) {
    let added = claude
        .run(&[
            "mcp",
            "add",
            "--transport",
            "http",
            "-s",
            scope,
            name,
            url,
            "--header",
            &format!("Authorization: Bearer {TOKEN}"),
        ])
        .unwrap();
    assert!(added.success(), "{added:?}");
}

#[test]
fn doctor_asks_an_http_registration_as_claude_code_would() {
    let (dir, root, _) = project("http-doctor");
    let served = serve(dir.path(), &root);
    let url = served.url.clone();
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let claude = ClaudeCode::new().unwrap();
    // The README's registration, a stdio devboy beside it, and the same
    // devboy under a name that does not say so (local scope).
    for (scope, name) in [("user", "devboy-http"), ("local", "shared")] {
        add_http(&claude, scope, name, &url);
    }
    claude
        .mcp_add("devboy", common::devboy_bin(), &["mcp"])
        .unwrap();
    // A server that is not devboy (nothing listens there): not devboy's
    // business, never mentioned.
    let claude_json = claude.home().join(".claude.json");
    let edit = |change: &dyn Fn(&mut Value)| {
        let mut state: Value =
            serde_json::from_str(&std::fs::read_to_string(&claude_json).unwrap()).unwrap();
        change(&mut state);
        std::fs::write(&claude_json, state.to_string()).unwrap();
    };
    edit(&|state| {
        state["mcpServers"]["elsewhere"] = json!({"type": "http", "url": "http://127.0.0.1:9/mcp"});
    });

    let (code, out) = doctor(&claude);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!("✔ user scope, `devboy-http`: {url}")),
        "{out}"
    );
    let said = line_after(&out, "✔ user scope, `devboy-http`");
    let tools: usize = said
        .strip_prefix("answered as Claude Code would ask: initialize ")
        .and_then(|rest| rest.split_once(" ms, tools/list "))
        .and_then(|(_, rest)| rest.split_once(" ms ("))
        .and_then(|(_, rest)| rest.split_once(" tools; Claude Code allows 5 s)"))
        .and_then(|(count, _)| count.parse().ok())
        .unwrap_or_else(|| panic!("{said:?} in\n{out}"));
    // devboy's own tools, the test server's and server-filesystem's.
    assert!(tools > 10, "{out}");
    assert!(
        out.contains(&format!("✔ local scope, `shared`: {url}")),
        "{out}"
    );
    assert!(out.contains("✔ user scope, `devboy`: "), "{out}");
    // Three names, one devboy: a note, not a problem.
    assert!(
        out.contains("note: devboy is registered under 3 names")
            && out.contains("mcp__devboy-http__…")
            && out.contains("`claude mcp remove shared -s local`"),
        "{out}"
    );
    assert!(!out.contains("not registered"), "{out}");
    assert!(!out.contains("elsewhere"), "{out}");
    assert!(!out.contains(TOKEN), "{out}");

    // What goes wrong: a wrong token, no header, another path (the
    // project's .mcp.json), a browser Origin.
    let wrong = "wrong-token-of-some-length-0451";
    edit(&|state| {
        let servers = &mut state["mcpServers"];
        servers["devboy-http"]["headers"]["Authorization"] = json!(format!("Bearer {wrong}"));
        servers["devboy-bare"] = json!({"type": "http", "url": url});
        servers["devboy-origin"] = json!({"type": "http", "url": url,
            "headers": {"Authorization": format!("Bearer {TOKEN}"), "Origin": "https://evil.example"}});
        servers.as_object_mut().unwrap().remove("devboy");
    });
    // In .mcp.json, ${VAR} is expanded from the environment, as Claude
    // Code does: a set variable gives the token, an unset one is named.
    claude
        .write_project_mcp_json(&json!({
            "devboy-path": {"type": "http",
                "url": format!("http://{address}/other"),
                "headers": {"Authorization": format!("Bearer {TOKEN}")}},
            "devboy-env": {"type": "http", "url": url,
                "headers": {"Authorization": "Bearer ${DEVBOY_HTTP_TEST_TOKEN}"}},
            "devboy-unset": {"type": "http", "url": url,
                "headers": {"Authorization": "Bearer ${DEVBOY_HTTP_TEST_UNSET}"}},
        }))
        .unwrap();
    let (code, out) = doctor(&claude);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("✘ user scope, `devboy-http`"), "{out}");
    assert!(
        line_after(&out, "✘ user scope, `devboy-http`")
            .contains("token is not the one `devboy serve` was started with"),
        "{out}"
    );
    assert!(
        line_after(&out, "✘ user scope, `devboy-bare`").contains("add --header"),
        "{out}"
    );
    assert!(
        line_after(&out, "✘ project scope, `devboy-path`").contains("the URL's path is `/other`"),
        "{out}"
    );
    assert!(
        line_after(&out, "✘ user scope, `devboy-origin`").contains("Origin header is not allowed"),
        "{out}"
    );
    assert!(out.contains("✔ local scope, `shared`"), "{out}");
    assert!(out.contains("✔ project scope, `devboy-env`"), "{out}");
    assert!(
        line_after(&out, "✘ project scope, `devboy-unset`")
            .contains("${DEVBOY_HTTP_TEST_UNSET} is not set"),
        "{out}"
    );
    assert!(!out.contains(TOKEN) && !out.contains(wrong), "{out}");

    // devboy stopped.
    drop(served);
    let (code, out) = doctor(&claude);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        line_after(&out, "✘ user scope, `devboy-http`").contains(&format!(
            "not answering: nothing listens at {address} (connection refused); is `devboy serve --http {address}` running?"
        )),
        "{out}"
    );
    assert!(!out.contains(TOKEN) && !out.contains(wrong), "{out}");
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

/// ADDR may name a host (`localhost:PORT`), resolved at start; an ADDR
/// without a port says what to give.
#[test]
fn a_host_name_is_resolved_and_a_missing_port_is_named() {
    let dir = common::TempDir::new("http-host");
    let mut child = Command::new(common::devboy_bin())
        .args(["serve", "--http", "localhost:0"])
        .env_remove("DEVBOY_HTTP_TOKEN")
        .env("DEVBOY_CONFIG_DIR", dir.path())
        .env("DEVBOY_CACHE_DIR", dir.path().join("cache"))
        .env("DEVBOY_RUNTIME_DIR", dir.path().join("run"))
        .env("DEVBOY_TELEMETRY", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let said = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("devboy: serving MCP at "));
    let _ = child.kill();
    let _ = child.wait();
    let said = said.expect("devboy serves on localhost");
    assert!(
        said.starts_with("devboy: serving MCP at http://127.0.0.1:"),
        "{said}"
    );

    let output = Command::new(common::devboy_bin())
        .args(["serve", "--http", "localhost"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("has no port"), "{stderr}");
}
