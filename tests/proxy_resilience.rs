//! devboy against its own test server: the behaviours that need a server
//! that crashes, stalls, paginates and changes its tool list on request.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{text_of, Devboy};
use rmcp::model::{CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::json;

const ONE: &str = r#"
[servers.t]
command = "{server}"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn calls_pass_through_with_prefix() {
    let devboy = Devboy::start(ONE).await;
    let names = devboy.tool_names().await;
    assert!(names.contains(&"devboy_status".to_string()), "{names:?}");
    assert!(names.contains(&"t__echo".to_string()), "{names:?}");
    let result = devboy
        .call("t__echo", json!({"text": "hello through devboy"}))
        .await;
    assert_eq!(text_of(&result), "hello through devboy");
    assert_ne!(result.is_error, Some(true));
}

#[tokio::test(flavor = "multi_thread")]
async fn rich_results_and_tool_metadata_are_faithful() {
    // Compare what devboy forwards with what the server says directly.
    let devboy = Devboy::start(ONE).await;
    let direct = common::direct_client(&common::test_server_bin()).await;
    let via: serde_json::Value =
        serde_json::to_value(devboy.call("t__rich", json!({})).await).unwrap();
    let mut params = CallToolRequestParams::new("rich");
    params.arguments = Some(Default::default());
    let straight = serde_json::to_value(direct.peer().call_tool(params).await.unwrap()).unwrap();
    assert_eq!(via, straight, "rich result changed on the way");
    assert_eq!(via["_meta"]["anthropic/maxResultSizeChars"], json!(1000));

    let tools = devboy.client.peer().list_all_tools().await.unwrap();
    let direct_tools = direct.peer().list_all_tools().await.unwrap();
    for tool in &direct_tools {
        let exposed = tools
            .iter()
            .find(|t| t.name == format!("t__{}", tool.name))
            .unwrap_or_else(|| panic!("{} not exposed", tool.name));
        // Only the name, and the input schema's lossless compaction
        // (tests/tool_schemas.rs proves it accepts the same arguments).
        let mut renamed = tool.clone();
        renamed.name = exposed.name.clone();
        renamed.input_schema = std::sync::Arc::new(devboy_core::tool_schema::compact(
            &tool.input_schema,
            &tool.name,
        ));
        assert_eq!(
            exposed, &renamed,
            "tool definition of {} changed",
            tool.name
        );
    }
    let rich = tools.iter().find(|t| t.name == "t__rich").unwrap();
    assert_eq!(
        rich.meta
            .as_ref()
            .and_then(|m| m.0.get("anthropic/alwaysLoad")),
        Some(&json!(true))
    );
    let structured = devboy.call("t__structured", json!({"n": 3})).await;
    assert_eq!(
        structured.structured_content.as_ref().unwrap()["items"][2]["id"],
        json!(2)
    );
    let failed = devboy.call("t__fail", json!({})).await;
    assert_eq!(failed.is_error, Some(true));
    assert!(!text_of(&failed).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_pagination_is_collected() {
    let config = r#"
[servers.t]
command = "{server}"
env = { DEVBOY_TEST_PAGE_SIZE = "2" }
"#;
    let devboy = Devboy::start(config).await;
    let names = devboy.tool_names().await;
    let direct = common::direct_client(&common::test_server_bin()).await;
    let all = direct.peer().list_all_tools().await.unwrap();
    assert!(all.len() > 4, "test server should have more than two pages");
    for tool in all {
        assert!(
            names.contains(&format!("t__{}", tool.name)),
            "{} missing from {names:?}",
            tool.name
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_is_mapped_back_to_the_clients_token() {
    let mut client = common::RawClient::start(ONE).await;
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "t__sleep", "arguments": {"ms": 600, "progress_steps": 3},
            "_meta": {"progressToken": "client-token-7"}}}),
        )
        .await;
    let mut notes = Vec::new();
    let response = client.recv_response_collecting(1, &mut notes).await;
    assert!(response["result"].is_object(), "{response}");
    let progress: Vec<_> = notes
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{notes:?}");
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["params"]["progressToken"], "client-token-7");
        assert_eq!(p["params"]["progress"].as_f64(), Some((i + 1) as f64));
        assert_eq!(p["params"]["total"].as_f64(), Some(3.0));
    }
    // A call that asked for no progress gets none.
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "t__sleep", "arguments": {"ms": 300, "progress_steps": 3}}}),
        )
        .await;
    let mut notes = Vec::new();
    client.recv_response_collecting(2, &mut notes).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        .await;
    client.recv_response_collecting(3, &mut notes).await;
    assert!(
        notes
            .iter()
            .all(|m| m["method"] != "notifications/progress"),
        "unrequested progress leaked: {notes:?}"
    );
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancellation_reaches_the_upstream() {
    let devboy_dir = common::TempDir::new("cancel");
    let log = devboy_dir.path().join("cancel.log");
    let config = format!(
        "[servers.t]\ncommand = \"{{server}}\"\nenv = {{ DEVBOY_TEST_CANCEL_LOG = \"{}\" }}\n",
        log.display()
    );
    let devboy = Devboy::start(&config).await;
    let mut params = CallToolRequestParams::new("t__sleep");
    params.arguments = json!({"ms": 20000}).as_object().cloned();
    let handle = devboy
        .client
        .peer()
        .send_request_with_option(
            ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    handle.cancel(Some("test cancels".into())).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !log.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("cancel"),
        "upstream did not see the cancellation: {text:?}"
    );
    // The upstream keeps serving.
    assert_eq!(
        text_of(&devboy.call("t__echo", json!({"text": "after"})).await),
        "after"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_gives_a_clear_error() {
    let config = r#"
[servers.t]
command = "{server}"
timeout_ms = 400
"#;
    let devboy = Devboy::start(config).await;
    // Timed from an upstream that is up (its first start is not the point).
    devboy.call("t__sleep", json!({"ms": 0})).await;
    let result = devboy.call("t__sleep", json!({"ms": 10000})).await;
    assert_eq!(result.is_error, Some(true));
    let text = text_of(&result);
    // Answered by the timeout, not by the 10 s sleep: said, and counted.
    assert!(text.contains("did not answer within 0.4 s"), "{text}");
    let entry = devboy
        .wait_upstream("t", "timeout counted", |u| u["timeouts"] == 1)
        .await;
    assert_eq!(entry["state"], "ready");
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_fails_in_flight_calls_and_restarts() {
    let config = r#"
[servers.t]
command = "{server}"

[servers.other]
command = "{server}"
"#;
    let devboy = Devboy::start(config).await;
    let pid_before = text_of(&devboy.call("t__pid", json!({})).await);
    // A slow call in flight when the server dies.
    let peer = devboy.client.peer().clone();
    let slow = tokio::spawn(async move {
        let mut params = CallToolRequestParams::new("t__sleep");
        params.arguments = json!({"ms": 15000}).as_object().cloned();
        peer.call_tool(params).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let crash = devboy.call("t__crash", json!({})).await;
    assert_eq!(crash.is_error, Some(true), "{crash:?}");
    assert!(
        text_of(&crash).contains("upstream `t` exited"),
        "{}",
        text_of(&crash)
    );
    let slow = slow.await.unwrap().unwrap();
    assert_eq!(slow.is_error, Some(true));
    assert!(text_of(&slow).contains("exited while the call was in flight"));
    // The other upstream never noticed.
    assert_eq!(
        text_of(&devboy.call("other__echo", json!({"text": "fine"})).await),
        "fine"
    );
    let entry = devboy
        .wait_upstream("t", "restart", |u| {
            u["state"] == "ready" && u["restarts"] == 1
        })
        .await;
    assert!(entry["last_error"]
        .as_str()
        .unwrap_or("")
        .contains("exited"));
    let pid_after = text_of(&devboy.call("t__pid", json!({})).await);
    assert_ne!(pid_before, pid_after, "a new process serves the tools");
    assert_eq!(
        text_of(&devboy.call("t__echo", json!({"text": "back"})).await),
        "back"
    );
    let other = devboy
        .wait_upstream("other", "untouched", |u| u["state"] == "ready")
        .await;
    assert_eq!(other["restarts"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_list_changed_is_forwarded() {
    let devboy = Devboy::start(ONE).await;
    assert!(!devboy.tool_names().await.contains(&"t__fresh".to_string()));
    let notified = devboy.recorder.changed.notified();
    devboy.call("t__add_tool", json!({"name": "fresh"})).await;
    tokio::time::timeout(Duration::from_secs(10), notified)
        .await
        .expect("tools/list_changed from devboy");
    assert!(devboy.recorder.tool_list_changed.load(Ordering::SeqCst) >= 1);
    // The notification may have been an earlier one (the startup listing
    // settling under load); the new tool must follow within the timeout.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !devboy.tool_names().await.contains(&"t__fresh".to_string()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "t__fresh never listed"
        );
        let next = devboy.recorder.changed.notified();
        let _ = tokio::time::timeout(Duration::from_millis(200), next).await;
    }
    assert_eq!(
        text_of(&devboy.call("t__fresh", json!({"text": "new"})).await),
        "new"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_command_shows_in_status_and_spares_the_others() {
    let config = r#"
[servers.broken]
command = "/nonexistent/devboy-no-such-server"

[servers.t]
command = "{server}"
"#;
    let devboy = Devboy::start(config).await;
    assert_eq!(
        text_of(&devboy.call("t__echo", json!({"text": "ok"})).await),
        "ok"
    );
    let entry = devboy
        .wait_upstream("broken", "failure", |u| u["state"] == "failed")
        .await;
    let error = entry["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("command not found"), "{error}");
    assert_eq!(entry["tools"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_upstream_does_not_delay_initialize() {
    let config = r#"
[servers.slow]
command = "{server}"
env = { DEVBOY_TEST_STARTUP_DELAY_MS = "3000" }
"#;
    let devboy = Devboy::start_with(config, "devboy.toml", &["--list-grace-ms", "0"]).await;
    // Initialized and listed before the slow server is up (it needs 3 s):
    // had initialize waited for it, its tools would be listed.
    let names = devboy.tool_names().await;
    assert!(!names.contains(&"slow__echo".to_string()), "{names:?}");
    // It arrives later, announced by list_changed.
    let deadline = Instant::now() + Duration::from_secs(20);
    while devboy.recorder.tool_list_changed.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no tools/list_changed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(devboy
        .tool_names()
        .await
        .contains(&"slow__echo".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn first_listing_waits_for_starting_upstreams_within_grace() {
    let config = r#"
[servers.slow]
command = "{server}"
env = { DEVBOY_TEST_STARTUP_DELAY_MS = "800" }
"#;
    let devboy = Devboy::start(config).await;
    // The grace (the test helper's 30 s; devboy's default is 4 s) covers
    // an 0.8 s start: the first list is complete.
    assert!(devboy
        .tool_names()
        .await
        .contains(&"slow__echo".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_calls_run_concurrently() {
    let devboy = Devboy::start(ONE).await;
    // The clock starts once the upstream is up: its first start is not
    // what this test measures, and it takes seconds on a loaded machine.
    let mut warm = CallToolRequestParams::new("t__sleep");
    warm.arguments = json!({"ms": 0}).as_object().cloned();
    devboy.client.peer().call_tool(warm).await.unwrap();
    let started = Instant::now();
    let mut calls = Vec::new();
    for _ in 0..8 {
        let peer = devboy.client.peer().clone();
        calls.push(tokio::spawn(async move {
            let mut params = CallToolRequestParams::new("t__sleep");
            params.arguments = json!({"ms": 1000}).as_object().cloned();
            let result = peer.call_tool(params).await.unwrap();
            (result, started.elapsed())
        }));
    }
    let mut answered = Vec::new();
    for call in calls {
        let (result, at) = call.await.unwrap();
        assert_ne!(result.is_error, Some(true));
        answered.push(at);
    }
    // In sequence the eight answers would come a second apart; together,
    // they come within one sleep of each other.
    let spread = answered
        .iter()
        .max()
        .unwrap()
        .saturating_sub(*answered.iter().min().unwrap());
    assert!(spread < Duration::from_secs(1), "answered at {answered:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn name_collisions_and_long_names_stay_unique_and_short() {
    let config = r#"
[devboy]
server_name = "devboy"

[servers.a]
command = "{server}"
prefix = "x"
env = { DEVBOY_TEST_TOOL_PREFIX = "a_really_long_tool_name_prefix_that_goes_on_and_on_" }

[servers.b]
command = "{server}"
prefix = "y"
"#;
    let devboy = Devboy::start(config).await;
    let names = devboy.tool_names().await;
    let mut seen = std::collections::HashSet::new();
    for name in &names {
        assert!(seen.insert(name.clone()), "duplicate {name}");
        assert!(
            format!("mcp__devboy__{name}").len() <= 64,
            "{name} too long for the client"
        );
        assert!(name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
    let tools = devboy.client.peer().list_all_tools().await.unwrap();
    let count = |p: &str| tools.iter().filter(|t| t.name.starts_with(p)).count();
    assert_eq!(count("x__"), count("y__"), "no tool lost to shortening");
    let plain = tools.iter().find(|t| t.name == "y__echo").unwrap();
    let long = tools
        .iter()
        .find(|t| t.name.starts_with("x__") && t.description == plain.description)
        .expect("the long-named echo is exposed");
    assert_ne!(
        long.name,
        "x__a_really_long_tool_name_prefix_that_goes_on_and_on_echo"
    );
    let result = devboy.call(&long.name, json!({"text": "short"})).await;
    assert_eq!(text_of(&result), "short", "{result:?}");
    assert!(names.contains(&"y__echo".to_string()));
}

async fn upstream_pid(client: &mut common::RawClient) -> u32 {
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t__pid", "arguments": {}}}))
        .await;
    let response = client.recv_response(1).await;
    response["result"]["content"][0]["text"]
        .as_str()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("pid: {response}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn client_disconnect_stops_upstreams() {
    let mut client = common::RawClient::start(ONE).await;
    let pid = upstream_pid(&mut client).await;
    assert!(!common::process_gone(pid));
    client.stop().await; // closes devboy's stdin and waits for it to exit
    assert!(
        common::wait_process_gone(pid).await,
        "upstream {pid} outlived devboy"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_upstreams() {
    let mut client = common::RawClient::start(ONE).await;
    let pid = upstream_pid(&mut client).await;
    let status = client.kill_with("TERM").await;
    assert!(status.success(), "devboy exit on SIGTERM: {status:?}");
    assert!(
        common::wait_process_gone(pid).await,
        "upstream {pid} outlived devboy"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn resources_and_prompts_wait_for_a_starting_upstream() {
    let config = r#"
[servers.t]
command = "{server}"
env = { DEVBOY_TEST_STARTUP_DELAY_MS = "1000" }
"#;
    let mut client = common::RawClient::start(config).await;
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
            "params": {"uri": "test://greeting"}}),
        )
        .await;
    let read = client.recv_response(1).await;
    assert_eq!(read["result"]["contents"][0]["text"], "hello", "{read}");
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
            "params": {"name": "t__greet", "arguments": {"name": "A"}}}))
        .await;
    let prompt = client.recv_response(2).await;
    assert!(prompt["result"]["messages"].is_array(), "{prompt}");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_dies_at_start_shows_what_it_said() {
    let config = r#"
[servers.dies]
command = "{server}"
env = { DEVBOY_TEST_FAIL_START = "1" }
"#;
    let devboy = Devboy::start(config).await;
    // stderr is read by its own task, so the detail may join the error on
    // the next attempt; within the wait it must be there.
    let entry = devboy
        .wait_upstream("dies", "failure with its stderr", |u| {
            u["state"] == "failed"
                && u["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("failing on purpose"))
        })
        .await;
    let tail = entry["stderr_tail"].to_string();
    assert!(tail.contains("failing on purpose"), "{entry}");
}
