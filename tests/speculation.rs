//! Read-only speculation through the devboy binary, against the real
//! `@modelcontextprotocol/server-filesystem` and the planner's shipped
//! edges: after a `search_files`, the first hits are read ahead, and the
//! agent's own reads of them are answered from what landed — byte for
//! byte what the server answers directly. Writes are never prefetched,
//! and a write between a prefetch and the agent's read sends the read
//! upstream.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{test_server_bin, text_of, toml_str, Devboy, TempDir};
use devboy_testkit::peers::{self, PeerCommand};
use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt as _;
use serde_json::{json, Value};

fn server_toml(name: &str, peer: &PeerCommand) -> String {
    let args: Vec<String> = peer.args.iter().map(|a| toml_str(a)).collect();
    format!(
        "[servers.{name}]\ncommand = {}\nargs = [{}]\n",
        toml_str(&peer.program_str()),
        args.join(", ")
    )
}

/// A project with three source files a search finds.
fn project(tag: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(tag);
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    for (name, body) in [
        ("src/alpha.rs", "pub fn alpha() -> u32 { 1 }\n"),
        ("src/beta.rs", "pub fn beta() -> u32 { 2 }\n"),
        ("src/gamma.rs", "pub fn gamma() -> u32 { 3 }\n"),
    ] {
        std::fs::write(root.join(name), body.repeat(40)).unwrap();
    }
    (dir, root)
}

/// devboy over server-filesystem at `root`, the results untouched by the
/// token pipeline (so they can be compared with the server's own), with
/// `pipeline` as its pipeline config.
async fn devboy(root: &Path, pipeline: &str) -> Devboy {
    let peer = peers::server_filesystem(root);
    devboy_with(&server_toml("fs", &peer), pipeline).await
}

/// devboy over the servers of `config`, passthrough, with `pipeline`.
async fn devboy_with(config: &str, pipeline: &str) -> Devboy {
    Devboy::start_full(
        config,
        "devboy.toml",
        &["--list-grace-ms", "30000", "--pipeline", "passthrough"],
        Some(pipeline),
        &[],
    )
    .await
}

/// The server's own answer to `tool(args)`.
async fn direct_call(root: &Path, tool: &str, args: Value) -> Value {
    let peer = peers::server_filesystem(root);
    let mut cmd = tokio::process::Command::new(&peer.program);
    cmd.args(&peer.args);
    let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
    let client = ().serve(transport).await.unwrap();
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    let result = client.peer().call_tool(params).await.unwrap();
    let _ = client.cancel().await;
    serde_json::to_value(result).unwrap()
}

/// Polls `devboy_status` until `pred` holds for its `speculation` object.
async fn wait_speculation(devboy: &Devboy, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = devboy.status().await;
        let speculation = status["session"]["speculation"].clone();
        if pred(&speculation) {
            return speculation;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited 20 s for {what}; speculation: {speculation}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn search_args(root: &Path) -> Value {
    json!({"path": root.display().to_string(), "pattern": "**/*.rs"})
}

fn read_args(root: &Path, name: &str) -> Value {
    json!({"path": root.join(name).display().to_string()})
}

const FILES: [&str; 3] = ["src/alpha.rs", "src/beta.rs", "src/gamma.rs"];

/// The calls devboy forwarded to upstream `name`, prefetches included.
async fn upstream_calls(devboy: &Devboy, name: &str) -> u64 {
    let status = devboy.status().await;
    status["upstreams"]
        .as_array()
        .and_then(|a| a.iter().find(|u| u["name"] == name))
        .and_then(|u| u["calls"].as_u64())
        .unwrap_or_else(|| panic!("no upstream {name} in {status}"))
}

/// Every prefetch sent has landed or ended.
fn settled(dispatched: u64) -> impl Fn(&Value) -> bool {
    move |s: &Value| s["dispatched"] == dispatched && s["in_flight"] == 0
}

#[tokio::test]
async fn the_hits_of_a_search_are_read_ahead_and_served_byte_for_byte() {
    let (_dir, root) = project("spec-hits");
    let devboy = devboy(&root, "").await;
    let search = devboy.call("fs__search_files", search_args(&root)).await;
    assert_eq!(
        serde_json::to_value(&search).unwrap(),
        direct_call(&root, "search_files", search_args(&root)).await
    );
    // The shipped edge search_files → read_text_file, with the default
    // caps, sends all three reads; they land before the agent asks.
    wait_speculation(&devboy, "three prefetches to land", settled(3)).await;
    assert_eq!(upstream_calls(&devboy, "fs").await, 4);
    for name in FILES {
        let via = devboy
            .call("fs__read_text_file", read_args(&root, name))
            .await;
        let direct = direct_call(&root, "read_text_file", read_args(&root, name)).await;
        assert_eq!(serde_json::to_value(&via).unwrap(), direct, "{name}");
        assert!(
            text_of(&via).contains("pub fn"),
            "{name}: {}",
            text_of(&via)
        );
    }
    // Answered from the store: no read went upstream again.
    assert_eq!(upstream_calls(&devboy, "fs").await, 4);
    let speculation = devboy.status().await["session"]["speculation"].clone();
    assert_eq!(speculation["used"], 3, "{speculation}");
    assert_eq!(speculation["hits"], 3, "{speculation}");
    assert_eq!(speculation["held"], 0, "{speculation}");
}

#[tokio::test]
async fn with_enrichment_off_nothing_is_read_ahead() {
    let (_dir, root) = project("spec-off");
    let devboy = devboy(&root, "[enrichment]\nenabled = false\n").await;
    devboy.call("fs__search_files", search_args(&root)).await;
    let read = devboy
        .call("fs__read_text_file", read_args(&root, FILES[0]))
        .await;
    assert_eq!(
        serde_json::to_value(&read).unwrap(),
        direct_call(&root, "read_text_file", read_args(&root, FILES[0])).await
    );
    // One search, one read: nothing else reached the server.
    assert_eq!(upstream_calls(&devboy, "fs").await, 2);
    assert_eq!(
        devboy.status().await["session"]["speculation"]["enabled"],
        false
    );
}

#[tokio::test]
async fn a_write_after_the_prefetch_sends_the_read_upstream() {
    let (_dir, root) = project("spec-write");
    let devboy = devboy(&root, "").await;
    devboy.call("fs__search_files", search_args(&root)).await;
    wait_speculation(&devboy, "three prefetches to land", settled(3)).await;
    let path = root.join(FILES[0]).display().to_string();
    let written = devboy
        .call(
            "fs__write_file",
            json!({"path": path, "content": "pub fn alpha() -> u32 { 42 }\n"}),
        )
        .await;
    assert_ne!(written.is_error, Some(true), "{}", text_of(&written));
    let read = devboy
        .call("fs__read_text_file", read_args(&root, FILES[0]))
        .await;
    assert!(text_of(&read).contains("{ 42 }"), "{}", text_of(&read));
    assert_eq!(
        serde_json::to_value(&read).unwrap(),
        direct_call(&root, "read_text_file", read_args(&root, FILES[0])).await
    );
    // The other two are still answered from the store.
    for name in &FILES[1..] {
        devboy
            .call("fs__read_text_file", read_args(&root, name))
            .await;
    }
    let speculation = devboy.status().await["session"]["speculation"].clone();
    assert_eq!(speculation["wasted"]["invalidated"], 1, "{speculation}");
    assert_eq!(speculation["used"], 2, "{speculation}");
    // search + 3 prefetches + write + the read after it.
    assert_eq!(upstream_calls(&devboy, "fs").await, 6);
}

#[tokio::test]
async fn configured_edges_to_writing_or_unannotated_tools_are_never_followed() {
    let (_dir, root) = project("spec-never");
    let fs = peers::server_filesystem(&root);
    let config = format!(
        "{}\n[servers.test]\ncommand = {}\n",
        server_toml("fs", &fs),
        toml_str(&test_server_bin().display().to_string())
    );
    // Edges a user (or a bad tuner run) might write: to a tool whose name
    // and annotations say it writes, and to a tool with no annotations.
    let pipeline = r#"
[tools."fs__search_files"]
follow_up = [
  { tool = "fs__create_directory", probability = 0.9, args = { path = "$match:(.+)\\.rs" } },
  { tool = "test__echo", probability = 0.9, args = { text = "$lines" } },
]
[tools."fs__create_directory"]
side_effect = "read_only"
speculate = true
"#;
    let devboy = devboy_with(&config, pipeline).await;
    devboy.call("fs__search_files", search_args(&root)).await;
    let speculation = wait_speculation(&devboy, "the declines", |s| {
        s["declined"]["writes"].as_u64().unwrap_or(0) >= 1
            && s["declined"]["not_read_only"].as_u64().unwrap_or(0) >= 1
    })
    .await;
    assert!(!root.join("src/alpha").exists(), "a directory was created");
    assert_eq!(upstream_calls(&devboy, "test").await, 0, "{speculation}");
    // The shipped reads still went out.
    assert!(
        speculation["dispatched"].as_u64().unwrap() >= 1,
        "{speculation}"
    );
}

/// devboy over server-filesystem at `root` with the default token pipeline
/// (references on) and `pipeline` as its pipeline config.
async fn devboy_piped(root: &Path, pipeline: &str) -> Devboy {
    let peer = peers::server_filesystem(root);
    Devboy::start_full(
        &server_toml("fs", &peer),
        "devboy.toml",
        &["--list-grace-ms", "30000"],
        Some(pipeline),
        &[],
    )
    .await
}

#[tokio::test]
async fn inline_mode_appends_the_reads_and_a_later_read_is_a_reference_to_them() {
    let (_dir, root) = project("spec-inline");
    let devboy = devboy_piped(&root, "[enrichment]\nmode = \"inline\"\n").await;
    let search = devboy.call("fs__search_files", search_args(&root)).await;
    let shown = text_of(&search);
    // The search's own answer first, then each read under its hint line,
    // its body as the server sends it.
    let direct_search = direct_call(&root, "search_files", search_args(&root)).await;
    let listing = direct_search["content"][0]["text"].as_str().unwrap();
    // The search's answer is its own first block, encoded or not.
    let first = search.content[0].as_text().unwrap().text.as_str();
    let decoded = match devboy_pipeline::template::decode(first) {
        Ok(devboy_pipeline::template::DecodedBody::Text(text)) => text,
        _ => first.to_owned(),
    };
    assert_eq!(decoded, listing, "{shown}");
    let mut at = first.len();
    for name in FILES {
        let path = root.join(name).display().to_string();
        let hint = format!(
            "> [inlined: fs__read_text_file {} returned:]",
            json!({"path": path})
        );
        let found = shown[at..]
            .find(&hint)
            .unwrap_or_else(|| panic!("no {hint} after byte {at} in {shown}"));
        at += found + hint.len();
        let body = std::fs::read_to_string(root.join(name)).unwrap();
        assert!(
            shown[at..].contains(body.trim_end()),
            "{name}'s body follows its hint: {shown}"
        );
    }
    // The three reads were sent once each, and shown: nothing is held.
    let speculation = wait_speculation(&devboy, "three inlined", |s| s["inlined"] == 3).await;
    assert_eq!(speculation["held"], 0, "{speculation}");
    assert_eq!(speculation["wasted"]["expired"], 0, "{speculation}");
    assert_eq!(upstream_calls(&devboy, "fs").await, 4);
    // The agent reads one anyway: the model holds it, so it is a
    // reference to what it was shown (fetched fresh: the file may have
    // changed since).
    let again = devboy
        .call("fs__read_text_file", read_args(&root, FILES[1]))
        .await;
    assert!(
        text_of(&again).starts_with("> [ref: "),
        "a reference: {}",
        text_of(&again)
    );
    assert_eq!(upstream_calls(&devboy, "fs").await, 5);
}

#[tokio::test]
async fn inline_mode_appends_only_what_fits_the_budget() {
    let (_dir, root) = project("spec-inline-budget");
    // alpha and beta cost ~300 tokens each, gamma ~3,100: any two of the
    // three fit a budget of 3,500, all three do not.
    std::fs::write(
        root.join(FILES[2]),
        "pub fn gamma() -> u32 { 3 }\n".repeat(430),
    )
    .unwrap();
    let devboy = devboy_piped(
        &root,
        "[enrichment]\nmode = \"inline\"\nbudget_tokens = 3500\n",
    )
    .await;
    let search = devboy.call("fs__search_files", search_args(&root)).await;
    let shown = text_of(&search);
    assert_eq!(shown.matches("> [inlined: ").count(), 2, "{shown}");
    // The third stays in the store and answers the agent's own read.
    let speculation = wait_speculation(&devboy, "two inlined", |s| s["inlined"] == 2).await;
    assert_eq!(speculation["held"], 1, "{speculation}");
}

/// Every telemetry record of the events files under `dir`.
fn telemetry_records(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir.join("events")) else {
        return out;
    };
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        out.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
    }
    out
}

/// A passthrough session transforms nothing and still records what it
/// did: its prefetches and its `find_files` queries reach telemetry as in
/// a full session (the seam's event sink is the session's, whatever the
/// pipeline).
#[tokio::test]
async fn a_passthrough_session_records_its_speculation_and_retrieval() {
    let (_dir, root) = project("spec-passthrough-telemetry");
    let telemetry = TempDir::new("spec-passthrough-telemetry-out");
    let peer = peers::server_filesystem(&root);
    let pipeline = format!(
        "[explore]\nallowed_roots = [{}]\n",
        toml_str(&root.display().to_string())
    );
    let devboy = Devboy::start_full(
        &server_toml("fs", &peer),
        "devboy.toml",
        &["--list-grace-ms", "30000", "--pipeline", "passthrough"],
        Some(&pipeline),
        &[("DEVBOY_TELEMETRY_DIR", telemetry.path().as_os_str())],
    )
    .await;
    devboy.call("fs__search_files", search_args(&root)).await;
    wait_speculation(&devboy, "the reads to land", settled(3)).await;
    let found = devboy
        .call(
            "devboy_find_files",
            json!({"query": "where is beta defined", "root": root.display().to_string()}),
        )
        .await;
    assert_ne!(found.is_error, Some(true), "{found:?}");
    let Devboy { client, .. } = devboy;
    let _ = client.cancel().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let records = loop {
        let records = telemetry_records(telemetry.path());
        if records.iter().any(|r| r["kind"] == "session") {
            break records;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no session summary within 15 s; records: {records:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let dispatched = records
        .iter()
        .filter(|r| r["kind"] == "speculation" && r["event"] == "dispatched")
        .count();
    assert_eq!(dispatched, 3, "{records:#?}");
    assert!(
        records.iter().any(|r| r["kind"] == "retrieval"),
        "{records:#?}"
    );
}
