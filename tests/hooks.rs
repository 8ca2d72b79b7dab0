//! The compaction signal channel end to end: `devboy hook signal` run as
//! Claude Code runs it (JSON on stdin) advances the `context_partition` of
//! the devboy serving that project; `devboy_compact` advances it directly;
//! `devboy hook install` merges the hooks into `.claude/settings.json`.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{devboy_bin, RawClient, TempDir};
use serde_json::{json, Value};

/// Runs `devboy hook signal` with `input` on stdin; returns its stdout.
fn hook_signal(runtime_dir: &Path, input: &str) -> String {
    let mut child = Command::new(devboy_bin())
        .args(["hook", "signal"])
        .env("DEVBOY_RUNTIME_DIR", runtime_dir)
        .env_remove("CLAUDE_PROJECT_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn devboy hook signal");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "hook signal exit: {:?}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

fn pre_compact(cwd: &Path) -> String {
    json!({"session_id": "sess-1", "transcript_path": "/tmp/t.jsonl",
        "cwd": cwd, "hook_event_name": "PreCompact", "trigger": "auto",
        "custom_instructions": null})
    .to_string()
}

fn session_start(cwd: &Path, source: &str) -> String {
    json!({"session_id": "sess-1", "transcript_path": "/tmp/t.jsonl",
        "cwd": cwd, "hook_event_name": "SessionStart", "source": source})
    .to_string()
}

struct Proxy {
    client: RawClient,
    next_id: i64,
    _config: TempDir,
}

impl Proxy {
    async fn start(project: &Path, runtime_dir: &Path) -> Self {
        let config = TempDir::new("hooks-config");
        let client = RawClient::start_command_in(
            &["mcp"],
            &[
                ("DEVBOY_CONFIG_DIR", config.path().to_str().unwrap()),
                ("DEVBOY_RUNTIME_DIR", runtime_dir.to_str().unwrap()),
            ],
            Some(project),
        )
        .await;
        Self {
            client,
            next_id: 1,
            _config: config,
        }
    }

    async fn call(&mut self, tool: &str) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": {}}}))
            .await;
        let response = self.client.recv_response(id).await;
        let text = response["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{tool}: {response}"));
        serde_json::from_str(text).expect("JSON text")
    }

    async fn partition(&mut self) -> u64 {
        let status = self.call("devboy_status").await;
        status["session"]["context_partition"]
            .as_u64()
            .unwrap_or_else(|| panic!("no context_partition: {status}"))
    }

    /// Polls `devboy_status` until the partition is `want` (5 s at most).
    async fn wait_partition(&mut self, want: u64) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let now = self.partition().await;
            if now == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "context_partition stayed {now}, expected {want}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hook_signals_advance_the_partition_of_the_project() {
    let project = TempDir::new("hooks-project");
    let runtime = TempDir::new("hooks-runtime");
    // A compaction from before devboy started does not count.
    assert_eq!(
        hook_signal(runtime.path(), &pre_compact(project.path())),
        ""
    );

    let mut proxy = Proxy::start(project.path(), runtime.path()).await;
    let status = proxy.call("devboy_status").await;
    assert_eq!(status["session"]["context_partition"], json!(0), "{status}");
    let file = status["session"]["partition_file"].as_str().expect("file");
    assert!(
        file.starts_with(runtime.path().to_str().unwrap()),
        "{file} not under the runtime dir"
    );

    // PreCompact advances it; Claude Code sees nothing on stdout.
    assert_eq!(
        hook_signal(runtime.path(), &pre_compact(project.path())),
        ""
    );
    proxy.wait_partition(1).await;

    // SessionStart startup/resume does nothing (give the watcher time to
    // notice if it would).
    for source in ["startup", "resume"] {
        assert_eq!(
            hook_signal(runtime.path(), &session_start(project.path(), source)),
            ""
        );
    }
    // Another project's compaction does not reach this devboy.
    let other = TempDir::new("hooks-other");
    assert_eq!(hook_signal(runtime.path(), &pre_compact(other.path())), "");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(proxy.partition().await, 1);

    // SessionStart after /compact or /clear advances it.
    assert_eq!(
        hook_signal(runtime.path(), &session_start(project.path(), "clear")),
        ""
    );
    proxy.wait_partition(2).await;
    assert_eq!(
        hook_signal(runtime.path(), &session_start(project.path(), "compact")),
        ""
    );
    proxy.wait_partition(3).await;

    // The built-in tool advances it directly.
    let compact = proxy.call("devboy_compact").await;
    assert_eq!(compact, json!({"context_partition": 4}));
    assert_eq!(proxy.partition().await, 4);

    // Garbage on stdin: exit 0, nothing on stdout, nothing advanced.
    assert_eq!(hook_signal(runtime.path(), "not json {"), "");
    assert_eq!(hook_signal(runtime.path(), ""), "");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let status = proxy.call("devboy_status").await;
    assert_eq!(status["session"]["context_partition"], json!(4), "{status}");
    assert_eq!(
        status["session"]["compaction_signals"],
        json!(3),
        "{status}"
    );
    proxy.client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_session_start_hook_gives_devboy_the_model_and_its_profile() {
    let project = TempDir::new("hooks-model-project");
    let runtime = TempDir::new("hooks-model-runtime");
    let mut proxy = Proxy::start(project.path(), runtime.path()).await;
    let session = |status: &Value| status["session"]["savings"]["session"].clone();
    let status = proxy.call("devboy_status").await;
    assert_eq!(session(&status)["model"], Value::Null, "{status}");
    assert_eq!(status["session"]["savings"]["tokenizer"], "o200k_base");
    // Claude Code's SessionStart input on startup names the model.
    let mut start: Value = serde_json::from_str(&session_start(project.path(), "startup")).unwrap();
    start["model"] = json!("gpt-4-0613");
    hook_signal(runtime.path(), &start.to_string());
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        let status = proxy.call("devboy_status").await;
        if session(&status)["model"] == "gpt-4-0613" {
            break status;
        }
        assert!(Instant::now() < deadline, "model never arrived: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(session(&status)["llm_profile"], "openai_cl100k", "{status}");
    assert_eq!(status["session"]["savings"]["tokenizer"], "cl100k_base");
    // Learning the model is no context reset.
    assert_eq!(proxy.partition().await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn hook_cwd_is_matched_canonically() {
    // Claude Code may report the project through a symlink; devboy's own
    // working directory is the resolved path.
    let base = TempDir::new("hooks-canon");
    let runtime = TempDir::new("hooks-canon-rt");
    let real = base.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = base.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let mut proxy = Proxy::start(&link, runtime.path()).await;
    assert_eq!(proxy.partition().await, 0);
    hook_signal(runtime.path(), &pre_compact(&link.join(".")));
    proxy.wait_partition(1).await;
    proxy.client.stop().await;
}

fn install(args: &[&str], cwd: &Path) -> std::process::Output {
    Command::new(devboy_bin())
        .args(["hook", "install"])
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run devboy hook install")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn our_command() -> String {
    let exe = std::fs::canonicalize(devboy_bin()).unwrap();
    devboy_core::hooks::signal_command(exe.to_str().unwrap())
}

#[test]
fn install_creates_the_settings_file() {
    let project = TempDir::new("hooks-install-new");
    let out = install(&[], project.path());
    assert!(out.status.success(), "{out:?}");
    let settings = read_json(&project.path().join(".claude/settings.json"));
    let command = our_command();
    assert_eq!(
        settings,
        json!({"hooks": {
            "PreCompact": [{"hooks": [{"type": "command", "command": command}]}],
            "SessionStart": [{"matcher": "startup|resume|compact|clear",
                "hooks": [{"type": "command", "command": command}]}],
            "PostToolUse": [{"matcher": "Edit|Write|MultiEdit|NotebookEdit",
                "hooks": [{"type": "command", "command": command}]}],
        }})
    );
}

#[test]
fn install_keeps_existing_settings_and_is_idempotent() {
    let project = TempDir::new("hooks-install-merge");
    let elsewhere = TempDir::new("hooks-install-cwd");
    let dir = project.path().join(".claude");
    std::fs::create_dir(&dir).unwrap();
    let original = json!({
        "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
        "model": "sonnet",
        "hooks": {
            "SessionStart": [{"matcher": "startup",
                "hooks": [{"type": "command", "command": "echo hi"}]}],
            "PostToolUse": [{"matcher": "Write|Edit",
                "hooks": [{"type": "command", "command": "cargo fmt"}]}],
        }
    });
    let file = dir.join("settings.json");
    std::fs::write(&file, serde_json::to_string_pretty(&original).unwrap()).unwrap();
    let project_arg = project.path().to_str().unwrap();
    let out = install(&["--project", project_arg], elsewhere.path());
    assert!(out.status.success(), "{out:?}");
    let once = read_json(&file);
    assert_eq!(once["permissions"], original["permissions"]);
    assert_eq!(once["model"], original["model"]);
    // The user's own PostToolUse hook stays, devboy's joins it.
    let posts = once["hooks"]["PostToolUse"].as_array().unwrap();
    assert_eq!(posts.len(), 2, "{once}");
    assert_eq!(posts[0], original["hooks"]["PostToolUse"][0]);
    assert_eq!(posts[1]["hooks"][0]["command"], json!(our_command()));
    let starts = once["hooks"]["SessionStart"].as_array().unwrap();
    assert_eq!(starts.len(), 2, "{once}");
    assert_eq!(starts[0], original["hooks"]["SessionStart"][0]);
    assert_eq!(starts[1]["hooks"][0]["command"], json!(our_command()));
    assert_eq!(once["hooks"]["PreCompact"].as_array().unwrap().len(), 1);
    assert!(!elsewhere.path().join(".claude").exists());

    let again = install(&["--settings", file.to_str().unwrap()], elsewhere.path());
    assert!(again.status.success(), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already"),
        "{again:?}"
    );
    assert_eq!(read_json(&file), once);
}

#[test]
fn install_refuses_a_malformed_settings_file_and_leaves_it_alone() {
    let project = TempDir::new("hooks-install-bad");
    let dir = project.path().join(".claude");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("settings.json");
    for bad in ["{\"permissions\": {", "{\"hooks\": [1, 2]}"] {
        std::fs::write(&file, bad).unwrap();
        let out = install(&[], project.path());
        assert!(!out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(file.to_str().unwrap()) && stderr.contains("left unchanged"),
            "the error names the file: {stderr}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), bad);
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary files left");
    }
}

/// After a compaction hook, a repeat that was a reference goes out in full.
#[tokio::test(flavor = "multi_thread")]
async fn after_the_compaction_hook_the_next_repeat_is_full() {
    let project = TempDir::new("hooks-dedup-project");
    let runtime = TempDir::new("hooks-dedup-runtime");
    let config = TempDir::new("hooks-dedup-config");
    std::fs::write(
        config.path().join("devboy.toml"),
        format!(
            "[servers.t]\ncommand = {}\n",
            serde_json::to_string(&common::test_server_bin().display().to_string()).unwrap()
        ),
    )
    .unwrap();
    let mut client = RawClient::start_command_in(
        &["mcp"],
        &[
            ("DEVBOY_CONFIG_DIR", config.path().to_str().unwrap()),
            ("DEVBOY_RUNTIME_DIR", runtime.path().to_str().unwrap()),
        ],
        Some(project.path()),
    )
    .await;
    let mut id = 0;
    let mut payload = || {
        id += 1;
        (
            id,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "t__payload", "arguments": {"bytes": 2048}}}),
        )
    };
    let blocks = |response: &Value| response["result"]["content"].as_array().map(Vec::len);

    let (n, request) = payload();
    client.send(request).await;
    let first = client.recv_response(n).await;
    assert_eq!(blocks(&first), Some(2), "fresh: body + id line: {first}");
    let (n, request) = payload();
    client.send(request).await;
    let repeat = client.recv_response(n).await;
    assert_eq!(blocks(&repeat), Some(1), "a reference: {repeat}");
    // The fresh result's id, named by the reference.
    let id = first["result"]["content"][1]["text"]
        .as_str()
        .and_then(|l| l.strip_prefix("> [id: ")?.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no id line: {first}"))
        .to_owned();
    assert!(
        repeat.to_string().contains(&format!("[ref: {id},")),
        "{repeat}"
    );
    let next = format!(
        "[id: {}2]",
        id.trim_end_matches(|c: char| c.is_ascii_digit())
    );

    hook_signal(runtime.path(), &pre_compact(project.path()));
    // The watcher polls every 250 ms; then a repeat must go out in full.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (n, request) = payload();
        client.send(request).await;
        let after = client.recv_response(n).await;
        if blocks(&after) == Some(2) {
            assert!(after.to_string().contains(&next), "{after}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still a reference after the hook: {after}"
        );
    }
    client.stop().await;
}

#[test]
fn install_writes_the_command_as_typed_when_devboy_is_on_path() {
    let project = TempDir::new("hooks-install-path");
    let bin = TempDir::new("hooks-install-bin");
    std::os::unix::fs::symlink(devboy_bin(), bin.path().join("devboy")).unwrap();
    let path = std::env::join_paths(std::iter::once(bin.path().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let out = Command::new(devboy_bin())
        .args(["hook", "install"])
        .current_dir(project.path())
        .env("PATH", path)
        .output()
        .expect("run devboy hook install");
    assert!(out.status.success(), "{out:?}");
    let settings = read_json(&project.path().join(".claude/settings.json"));
    assert_eq!(
        settings["hooks"]["PreCompact"][0]["hooks"][0]["command"], "devboy hook signal",
        "a shared settings file gets no machine-specific path"
    );
}
