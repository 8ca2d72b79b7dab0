//! Runtime control: a running devboy's servers
//! restarted, disabled and enabled mid-session, from the agent
//! (`devboy_servers`) and from a terminal (`devboy ctl` through the
//! control socket), and `devboy status` reading every running devboy.
//! Against real upstreams: the devboy test server (`t`, whose `pid` tool
//! tells its process) and `server-filesystem` (`fs`).

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{text_of, toml_str, Devboy};
use devboy_testkit::peers;
use serde_json::{json, Value};

fn config(root: &Path) -> String {
    let fs = peers::server_filesystem(root);
    let fs_args: Vec<String> = fs.args.iter().map(|a| toml_str(a)).collect();
    format!(
        "[servers.t]\ncommand = \"{{server}}\"\n\n[servers.fs]\ncommand = {}\nargs = [{}]\n",
        toml_str(&fs.program_str()),
        fs_args.join(", ")
    )
}

async fn start(runtime: &Path) -> (Devboy, std::path::PathBuf) {
    let root = runtime.parent().unwrap().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(
        root.join("a.txt"),
        "controlled, line after line\n".repeat(60),
    )
    .unwrap();
    let devboy = Devboy::start_with_env(
        &config(&root),
        None,
        &[("DEVBOY_RUNTIME_DIR", runtime.as_os_str())],
    )
    .await;
    for name in ["t", "fs"] {
        devboy
            .wait_upstream(name, "ready", |u| u["state"] == "ready")
            .await;
    }
    (devboy, root)
}

/// `devboy ARGS` against the devboys under `runtime`; (success, stdout, stderr).
fn devboy_cli(runtime: &Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(common::devboy_bin())
        .args(args)
        .env("DEVBOY_RUNTIME_DIR", runtime)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn servers(devboy: &Devboy, args: Value) -> Value {
    let result = devboy.call("devboy_servers", args).await;
    assert_ne!(result.is_error, Some(true), "{}", text_of(&result));
    serde_json::from_str(&text_of(&result)).unwrap()
}

fn state<'a>(report: &'a Value, name: &str) -> &'a str {
    report
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == name)
        .and_then(|u| u["state"].as_str())
        .unwrap_or_else(|| panic!("{name} not in {report}"))
}

async fn changed_after(devboy: &Devboy, seen: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while devboy.recorder.tool_list_changed.load(Ordering::SeqCst) <= seen {
        assert!(tokio::time::Instant::now() < deadline, "no list_changed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_restarts_disables_and_enables_a_server_mid_session() {
    let dir = common::TempDir::new("runtime-agent");
    let runtime = dir.path().join("run");
    let (devboy, root) = start(&runtime).await;
    let listed = servers(&devboy, json!({})).await;
    assert_eq!(state(&listed, "t"), "ready", "{listed}");
    assert_eq!(state(&listed, "fs"), "ready", "{listed}");

    // Restart: a new process, the same tools.
    let before = text_of(&devboy.call("t__pid", json!({})).await);
    let restarted = servers(&devboy, json!({"action": "restart", "server": "t"})).await;
    assert_eq!(state(&restarted, "t"), "ready", "{restarted}");
    let after = text_of(&devboy.call("t__pid", json!({})).await);
    assert_ne!(before, after, "the test server runs in a new process");
    assert!(peers_gone(&before), "the old process {before} is gone");

    // Disable: the tools go (list_changed), a call says why.
    let seen = devboy.recorder.tool_list_changed.load(Ordering::SeqCst);
    let disabled = servers(&devboy, json!({"action": "disable", "server": "fs"})).await;
    assert_eq!(state(&disabled, "fs"), "disabled", "{disabled}");
    changed_after(&devboy, seen).await;
    let names = devboy.tool_names().await;
    assert!(!names.iter().any(|n| n.starts_with("fs__")), "{names:?}");
    let path = root.join("a.txt").display().to_string();
    let refused = devboy
        .client
        .peer()
        .call_tool({
            let mut p = rmcp::model::CallToolRequestParams::new("fs__read_text_file");
            p.arguments = json!({"path": path}).as_object().cloned();
            p
        })
        .await;
    let message = format!("{refused:?}");
    assert!(message.contains("disabled while devboy runs"), "{message}");

    // Enable: back, and it works.
    let seen = devboy.recorder.tool_list_changed.load(Ordering::SeqCst);
    let enabled = servers(&devboy, json!({"action": "enable", "server": "fs"})).await;
    assert_eq!(state(&enabled, "fs"), "ready", "{enabled}");
    changed_after(&devboy, seen).await;
    let read = devboy
        .call("fs__read_text_file", json!({"path": path}))
        .await;
    assert!(text_of(&read).contains("controlled"), "{}", text_of(&read));

    // Mistakes are named.
    let unknown = devboy
        .call(
            "devboy_servers",
            json!({"action": "restart", "server": "nope"}),
        )
        .await;
    assert_eq!(unknown.is_error, Some(true));
    assert!(
        text_of(&unknown).contains("the servers are t, fs"),
        "{}",
        text_of(&unknown)
    );
}

fn peers_gone(pid: &str) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if common::process_gone(pid.trim().parse().unwrap()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devboy_ctl_and_status_reach_the_running_devboy() {
    let dir = common::TempDir::new("runtime-ctl");
    let runtime = dir.path().join("run");
    let (devboy, root) = start(&runtime).await;
    let path = root.join("a.txt").display().to_string();
    devboy
        .call("fs__read_text_file", json!({"path": path}))
        .await;
    devboy
        .call("fs__read_text_file", json!({"path": path}))
        .await;

    let before = text_of(&devboy.call("t__pid", json!({})).await);
    let (ok, out, err) = devboy_cli(&runtime, &["ctl", "restart", "t"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "t: ready");
    let after = text_of(&devboy.call("t__pid", json!({})).await);
    assert_ne!(before, after);

    let (ok, out, err) = devboy_cli(&runtime, &["ctl", "disable", "fs"]);
    assert!(ok && out.contains("fs: disabled"), "{out}{err}");
    let (ok, out, _) = devboy_cli(&runtime, &["ctl", "list"]);
    assert!(ok && out.contains("disabled"), "{out}");
    let (ok, out, err) = devboy_cli(&runtime, &["ctl", "enable", "fs"]);
    assert!(ok && out.contains("fs: ready"), "{out}{err}");

    let (ok, _, err) = devboy_cli(&runtime, &["ctl", "restart", "nope"]);
    assert!(!ok && err.contains("the servers are t, fs"), "{err}");

    let (ok, out, err) = devboy_cli(&runtime, &["status", "--format", "json"]);
    assert!(ok, "{err}");
    let status: Value = serde_json::from_str(&out).unwrap();
    let processes = status["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 1, "{status}");
    let process = &processes[0];
    assert_eq!(process["serving"], "stdio");
    assert_eq!(process["upstreams"].as_array().unwrap().len(), 2);
    let session = &process["sessions"][0];
    assert!(session["calls"].as_u64().unwrap() >= 4, "{session}");
    assert!(
        session["savings"]["tokens_raw"].as_u64().unwrap() > 0,
        "{session}"
    );
    assert_eq!(
        session["savings"]["references"], 1,
        "the second read: {session}"
    );

    let (ok, text, _) = devboy_cli(&runtime, &["status"]);
    assert!(
        ok && text.contains("serving stdio") && text.contains("fs"),
        "{text}"
    );

    // Gone with devboy: nothing is left to reach.
    drop(devboy);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, text, _) = devboy_cli(&runtime, &["status"]);
        if text.contains("no devboy is running") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, _, err) = devboy_cli(&runtime, &["ctl", "list"]);
    assert!(!ok && err.contains("no devboy is running"), "{err}");
}

/// `devboy status --pid` shows that one process, and the config it runs
/// is named by its absolute path, however devboy was started (here with a
/// path relative to its own directory, read from another one).
#[test]
fn status_names_one_process_and_its_config_by_absolute_path() {
    let dir = common::TempDir::new("status-pid");
    let runtime = dir.path().join("run");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("devboy.toml"), "[servers]\n").unwrap();
    let mut child = Command::new(common::devboy_bin())
        .args(["mcp", "--config", "devboy.toml"])
        .current_dir(&project)
        .env("DEVBOY_RUNTIME_DIR", &runtime)
        .env("DEVBOY_CONFIG_DIR", dir.path())
        .env("DEVBOY_CACHE_DIR", dir.path().join("cache"))
        .env("DEVBOY_TELEMETRY", "off")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        let (ok, out, err) = devboy_cli(&runtime, &["status", "--format", "json", "--pid", &pid]);
        // Until devboy's control socket answers (its file may be there a
        // moment before), the process is listed with an error.
        if ok {
            let status = serde_json::from_str::<Value>(&out).unwrap();
            if status["processes"][0]["config"].is_string() {
                break status;
            }
        }
        assert!(std::time::Instant::now() < deadline, "{out}{err}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let processes = status["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 1, "{status}");
    let expected = project.canonicalize().unwrap().join("devboy.toml");
    assert_eq!(
        std::path::Path::new(processes[0]["config"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        expected,
        "{status}"
    );
    assert!(std::path::Path::new(processes[0]["config"].as_str().unwrap()).is_absolute());

    // Another pid: said plainly, not an empty list.
    let (ok, _, err) = devboy_cli(&runtime, &["status", "--pid", "1"]);
    assert!(!ok && err.contains("no running devboy has pid 1"), "{err}");

    drop(child.stdin.take());
    child.wait().unwrap();
}

/// With two devboys running, `devboy ctl` goes to the one that has the
/// server named, and asks for `--pid` only when that does not decide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_finds_the_devboy_that_has_the_server() {
    let dir = common::TempDir::new("runtime-two");
    let runtime = dir.path().join("run");
    let (first, _root) = start(&runtime).await;
    let second = Devboy::start_with_env(
        "[servers.other]\ncommand = \"{server}\"\n",
        None,
        &[("DEVBOY_RUNTIME_DIR", runtime.as_os_str())],
    )
    .await;
    second
        .wait_upstream("other", "ready", |u| u["state"] == "ready")
        .await;
    // Both answer on their sockets before ctl is asked.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, out, _) = devboy_cli(&runtime, &["status", "--format", "json"]);
        let status: Value = serde_json::from_str(&out).unwrap_or_default();
        if status["processes"].as_array().is_some_and(|p| p.len() == 2) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{out}");
        std::thread::sleep(Duration::from_millis(100));
    }

    let (ok, out, err) = devboy_cli(&runtime, &["ctl", "restart", "other"]);
    assert!(ok && out.trim() == "other: ready", "{out}{err}");
    let (ok, out, err) = devboy_cli(&runtime, &["ctl", "disable", "fs"]);
    assert!(ok && out.contains("fs: disabled"), "{out}{err}");
    let (ok, _, err) = devboy_cli(&runtime, &["ctl", "list"]);
    assert!(
        !ok && err.contains("2 devboy processes run") && err.contains("--pid"),
        "{err}"
    );
    let (ok, _, err) = devboy_cli(&runtime, &["ctl", "restart", "nowhere"]);
    assert!(!ok && err.contains("--pid"), "{err}");
    drop((first, second));
}
