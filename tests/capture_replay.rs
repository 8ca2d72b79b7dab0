//! `devboy mcp --capture FILE` then `devboy replay FILE`: a live session
//! through the real binary and a real upstream, reproduced offline. What
//! `devboy_status` said of the pipeline at the end is exactly what the
//! replay of the capture computes.

mod common;

use common::{devboy_bin, Devboy, TempDir};
use serde_json::{json, Value};

const ONE: &str = r#"
[servers.t]
command = "{server}"
"#;

/// Polls get near references; a small budget makes large lists elided.
const PIPELINE: &str = r#"schema_version = 3
[endpoints."t__poll"]
near_ref = true
[encoding]
budget_tokens = 450
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_replay_of_a_capture_reports_what_the_session_reported() {
    let dir = TempDir::new("capture");
    let pipeline = dir.path().join("pipeline_config.toml");
    std::fs::write(&pipeline, PIPELINE).unwrap();
    let capture = dir.path().join("session.jsonl");
    let devboy = Devboy::start_with(
        ONE,
        "devboy.toml",
        &[
            "--pipeline-config",
            pipeline.to_str().unwrap(),
            "--capture",
            capture.to_str().unwrap(),
        ],
    )
    .await;
    let calls = [
        ("t__payload", json!({"bytes": 3000})),
        ("t__payload", json!({"bytes": 3000})), // a reference
        ("t__poll", json!({})),
        ("t__poll", json!({})), // a near reference
        ("t__poll", json!({})),
        ("t__structured", json!({"n": 40})), // re-encoded
        ("t__structured", json!({"n": 40})),
        ("t__structured", json!({"n": 400})), // over the budget: elided
        ("t__echo", json!({"text": "small"})),
        ("t__echo", json!({"text": "small"})),
        ("devboy_compact", json!({})),
        ("t__payload", json!({"bytes": 3000})), // full again
        ("t__payload", json!({"bytes": 5000})),
        ("t__payload", json!({"bytes": 5000})),
    ];
    for (tool, args) in calls {
        let result = devboy.call(tool, args).await;
        assert_ne!(result.is_error, Some(true), "{tool}: {result:?}");
    }
    let status = devboy.status().await;
    let live = &status["session"]["savings"];
    for (key, least) in [
        ("references", 3),
        ("near_references", 1),
        ("encoded", 1),
        ("elided", 1),
    ] {
        assert!(live[key].as_u64().unwrap() >= least, "{key} in {live:#}");
    }
    assert_eq!(live["session"]["compactions"], 1, "{live:#}");
    assert!(
        live["hints_sent"]["encoded"].as_u64().unwrap() >= 1,
        "{live:#}"
    );

    let out = std::process::Command::new(devboy_bin())
        .args(["replay", "--format", "json", "--pipeline-config"])
        .arg(&pipeline)
        .arg(&capture)
        .output()
        .expect("run devboy replay");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replay: Value = serde_json::from_slice(&out.stdout).expect("replay prints JSON");
    // Everything, to the id counts and what was forgotten and why.
    assert_eq!(&replay["status"], live);
    assert_eq!(replay["tokens_raw"], live["tokens_raw"]);
    assert_eq!(replay["tokens_final"], live["tokens_final"]);
    assert_eq!(replay["results"], live["session"]["results"]);
    assert_eq!(replay["decode_failures"], 0, "{replay:#}");
}

#[test]
fn a_capture_replays_on_its_own() {
    let dir = TempDir::new("capture-mixed");
    let capture = dir.path().join("session.jsonl");
    std::fs::write(
        &capture,
        "{\"kind\":\"session\",\"tag\":\"tagfix\",\"encode\":true}\n",
    )
    .unwrap();
    let other = dir.path().join("body.txt");
    std::fs::write(&other, "text").unwrap();
    let out = std::process::Command::new(devboy_bin())
        .arg("replay")
        .args([&capture, &other])
        .output()
        .expect("run devboy replay");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("replay it on its own"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
