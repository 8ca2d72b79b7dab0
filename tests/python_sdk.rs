//! devboy driven by an independent client: the Python `mcp` SDK 2.x from the
//! test peers' virtualenv runs `tests/python/sdk_client.py`, which starts
//! `devboy mcp --config FILE` over stdio (devboy proxying the test server as
//! `t` and `server-filesystem` as `fs`), checks tools, structured results,
//! progress, resources, prompts and `devboy_status`, and prints a JSON
//! summary. The script exits non-zero on any failed check; this test also
//! reads the summary.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{toml_str, TempDir};
use devboy_testkit::peers;
use serde_json::{json, Value};

/// The SDK client script.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_client.py")
}

/// Runs the SDK client in `mode` against a fresh devboy; returns its summary.
async fn run_sdk_client(mode: &str) -> Value {
    let dir = TempDir::new("python-sdk");
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let file = root.join("notes.txt");
    std::fs::write(&file, "read by the python sdk\nthrough devboy — ünïcødé\n").unwrap();

    let fs = peers::server_filesystem(&root);
    let fs_args: Vec<String> = fs.args.iter().map(|a| toml_str(a)).collect();
    let config = dir.path().join("devboy.toml");
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

    let mut cmd = tokio::process::Command::new(peers::python());
    cmd.arg(script())
        .arg("--devboy")
        .arg(common::devboy_bin())
        .arg("--config")
        .arg(&config)
        .arg("--file")
        .arg(&file)
        .arg("--mode")
        .arg(mode)
        // The first listing waits for both upstreams even on a loaded
        // machine (start latency is not under test here).
        .arg("--list-grace-ms")
        .arg("30000")
        .env("PYTHONUNBUFFERED", "1")
        .env("RUST_LOG", common::test_log_filter())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the SDK client finished within 60 s")
        .expect("run the SDK client");
    let (summary, stderr) = common::python_summary(&output);
    assert!(
        output.status.success(),
        "the SDK client failed ({}): failed checks {}\nsummary: {summary}\nstderr:\n{stderr}",
        output.status,
        summary["failed"]
    );
    assert_eq!(summary["ok"], true, "{summary}");
    assert_eq!(summary["failed"], json!([]), "{summary}");
    summary
}

/// What every run must show, whatever the connect mode.
fn check_summary(summary: &Value) {
    assert_eq!(summary["server_name"], "devboy");
    assert!(
        summary["passed"].as_u64().unwrap_or(0) >= 40,
        "fewer checks ran than expected: {summary}"
    );

    let tools: Vec<&str> = summary["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"devboy_status"), "{tools:?}");
    for tool in ["t__echo", "t__structured", "t__sleep", "fs__read_text_file"] {
        assert!(tools.contains(&tool), "{tool} missing: {tools:?}");
    }
    assert!(
        tools
            .iter()
            .all(|t| t.starts_with("devboy_") || t.starts_with("t__") || t.starts_with("fs__")),
        "{tools:?}"
    );

    assert_eq!(summary["echo"], json!(["hello from the python sdk"]));
    assert_eq!(
        summary["structured"]["items"][3],
        json!({"id": 3, "name": "a3"})
    );
    assert_eq!(
        summary["fs_structured"]["content"],
        "read by the python sdk\nthrough devboy — ünïcødé\n"
    );
    assert_eq!(summary["unknown_tool_error"]["code"], -32602, "{summary}");

    let progress = summary["progress"].as_array().unwrap();
    assert_eq!(progress.len(), 3, "{summary}");
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["progress"].as_f64(), Some((i + 1) as f64));
        assert_eq!(p["total"].as_f64(), Some(3.0));
    }

    assert_eq!(summary["resources"]["test://greeting"], "t__greeting");
    assert_eq!(
        summary["resource_templates"]["test://echo/{text}"],
        "t__echo"
    );
    assert_eq!(summary["resource_text"], json!(["hello"]));
    assert_eq!(summary["template_text"], json!(["sdk-42"]));
    assert_eq!(summary["prompts"], json!(["t__greet"]));
    assert_eq!(summary["prompt_text"], json!(["Hello, Ada!"]));

    for (name, calls) in [("t", 4), ("fs", 1)] {
        let entry = &summary["status"][name];
        assert_eq!(entry["state"], "ready", "{summary}");
        assert_eq!(entry["prefix"], name, "{summary}");
        assert_eq!(entry["calls"], calls, "{summary}");
        assert!(entry["tools"].as_u64().unwrap_or(0) > 0, "{summary}");
    }
    assert_eq!(summary["status"]["fs"]["errors"], 0, "{summary}");
}

#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_default_mode_drives_devboy() {
    // The SDK's default ("auto") first probes `server/discover`; devboy
    // answers with an error naming its handshake versions and the SDK falls
    // back to `initialize`.
    let summary = run_sdk_client("auto").await;
    assert_eq!(summary["mode"], "auto");
    check_summary(&summary);
    let version = summary["protocol_version"].as_str().unwrap_or_default();
    assert!(version.starts_with("20"), "{summary}");
}

#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_legacy_handshake_drives_devboy() {
    let summary = run_sdk_client("legacy").await;
    assert_eq!(summary["mode"], "legacy");
    check_summary(&summary);
}
