//! Bounded work per result (invariant 13), end to end against the real
//! `devboy` binary and the real `server-filesystem`: a pathological result
//! never stalls the session, a result the pipeline does not finish in time
//! goes out as the server sent it and is never referenced later, and devboy
//! ends promptly when its client goes away, whatever is in flight.

mod common;

use std::time::Duration;

use common::{peer_toml, toml_str, upstream, RawClient, TempDir};
use devboy_testkit::peers;
use serde_json::{json, Value};

/// devboy over the real filesystem server rooted at `root` and the test
/// server, with `pipeline` as its pipeline config when given.
async fn start(root: &std::path::Path, pipeline: Option<&str>) -> (RawClient, TempDir) {
    let dir = TempDir::new("bounded");
    let config = format!(
        "{}[servers.t]\ncommand = {}\n",
        peer_toml("fs", &peers::server_filesystem(root)),
        toml_str(&common::test_server_bin().display().to_string()),
    );
    let config_path = dir.path().join("devboy.toml");
    std::fs::write(&config_path, config).expect("write config");
    let mut args = vec![
        "mcp".to_owned(),
        "--config".to_owned(),
        config_path.display().to_string(),
        "--list-grace-ms".to_owned(),
        "30000".to_owned(),
    ];
    if let Some(pipeline) = pipeline {
        let path = dir.path().join("pipeline_config.toml");
        std::fs::write(&path, pipeline).expect("write pipeline config");
        args.push("--pipeline-config".to_owned());
        args.push(path.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let config_dir = dir.path().display().to_string();
    let client = RawClient::start_command(&args, &[("DEVBOY_CONFIG_DIR", &config_dir)]).await;
    (client, dir)
}

/// A `tools/call` request, to send without waiting for its answer.
fn call(id: i64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// The text blocks of a `tools/call` response, joined.
fn text(response: &Value) -> String {
    response["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool result: {response}"))
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads responses until every id in `ids` has one, within `limit`.
async fn responses(client: &mut RawClient, ids: &[i64], limit: Duration) -> Vec<Value> {
    let mut got: Vec<Option<Value>> = vec![None; ids.len()];
    let deadline = tokio::time::Instant::now() + limit;
    while got.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        assert!(
            !left.is_zero(),
            "no answer within {limit:?} to {ids:?}: {got:?}"
        );
        let message = client.recv_within(left).await;
        if let Some(at) = ids
            .iter()
            .position(|id| message.get("id") == Some(&json!(id)))
        {
            got[at] = Some(message);
        }
    }
    got.into_iter().flatten().collect()
}

/// 20 MB of one letter is one o200k piece, which a quadratic merge never
/// finished counting (devboy froze: no answer to anything, SIGTERM
/// ignored). Now it is answered, within what one message may carry (one
/// line cannot be cut at a line break: its start is sent and the rest said
/// to be cut), and a ping and another tool's call sent while it is in
/// flight are answered too.
#[tokio::test(flavor = "multi_thread")]
async fn a_huge_one_character_result_never_stalls_the_session() {
    let root = TempDir::new("bounded-root");
    let big = "y".repeat(20 << 20);
    let file = root.path().join("big.txt");
    std::fs::write(&file, &big).expect("write the big file");
    let (mut client, _dir) = start(root.path(), None).await;
    client
        .send(call(
            1,
            "fs__read_text_file",
            json!({"path": file.display().to_string()}),
        ))
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    client
        .send(call(3, "t__echo", json!({"text": "still here"})))
        .await;
    let answers = responses(&mut client, &[1, 2, 3], Duration::from_secs(120)).await;
    let shown = text(&answers[0]);
    let (start, note) = shown.rsplit_once("> [cut: ").expect("the cut is said");
    let start = start.trim_end_matches('\n');
    assert!(
        start.len() <= 4 << 20 && start.len() > 2 << 20 && big.starts_with(start),
        "the file's start, {} bytes",
        start.len()
    );
    assert!(
        note.starts_with(&format!("this result was {} bytes", big.len())),
        "{note}"
    );
    assert!(answers[1].get("result").is_some(), "ping: {}", answers[1]);
    assert_eq!(text(&answers[2]), "still here");
    client.stop().await;
}

/// Past `encoding.deadline_ms` the result goes out as the server sent it,
/// counts as `deadline`, and nothing refers to it later: the same read
/// again is the full text, never a reference to an id the model was not
/// shown.
#[tokio::test(flavor = "multi_thread")]
async fn past_the_deadline_the_result_goes_out_as_sent_and_is_never_referenced() {
    let root = TempDir::new("bounded-root");
    // Nearly 1 MB of source-like text (within what one message may
    // carry): far more than 1 ms of work.
    let line = "    let value = compute(input, &mut state); // keep the state\n";
    let body = line.repeat((900 << 10) / line.len());
    let file = root.path().join("long.rs");
    std::fs::write(&file, &body).expect("write the file");
    let pipeline = "schema_version = 3\n[encoding]\ndeadline_ms = 1\n";
    let (mut client, _dir) = start(root.path(), Some(pipeline)).await;
    let read = json!({"path": file.display().to_string()});
    for id in [1, 2] {
        let response = client
            .call_tool(id, "fs__read_text_file", read.clone())
            .await;
        assert_eq!(text(&response), body, "read {id}: as the server sent it");
    }
    // The pipeline may still be on the results it was given up on (status
    // then says it is busy rather than wait, or has not counted them yet):
    // ask until both are counted.
    let mut id = 3;
    let report = loop {
        let report = client.status(id).await;
        if report["session"]["savings"]["passthrough"]["deadline"] == json!(2) {
            break report;
        }
        assert!(id < 400, "never counted: {report}");
        id += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        report["session"]["passed_at_deadline"],
        json!(2),
        "{report}"
    );
    assert_eq!(report["session"]["savings"]["references"], json!(0));
    client.stop().await;
}

/// Closing devboy's stdin ends it promptly even with a call in flight for
/// a minute (rmcp alone waits 5 s for in-flight answers); so does SIGTERM.
#[tokio::test(flavor = "multi_thread")]
async fn devboy_ends_promptly_with_a_call_in_flight() {
    let root = TempDir::new("bounded-root");
    for ending in ["stdin", "SIGTERM"] {
        let (mut client, _dir) = start(root.path(), None).await;
        client
            .send(call(1, "t__sleep", json!({"ms": 60_000})))
            .await;
        // The call is under way once the server logged it; polling status
        // shows the upstream call counted.
        loop {
            let report = client.status(2).await;
            if upstream(&report, "t")["calls"].as_u64().unwrap_or(0) >= 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let started = std::time::Instant::now();
        match ending {
            "stdin" => {
                let exited = client.close_stdin_and_wait(Duration::from_secs(3)).await;
                assert!(exited.is_some(), "devboy still runs 3 s after stdin closed");
            }
            _ => {
                client.kill_with("TERM").await;
            }
        }
        eprintln!("{ending}: devboy ended after {:?}", started.elapsed());
    }
}
