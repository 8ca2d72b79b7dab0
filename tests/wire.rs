//! The JSON-RPC wire at both ends of devboy: every line the client sends
//! gets an answer (parse errors, params that do not fit, oversized
//! requests), and results and requests over rmcp's 16 MiB line limit get
//! through, or fail at once with their size, never by a timeout.

mod common;

use std::time::{Duration, Instant};

use common::RawClient;
use serde_json::{json, Value};

const ONE: &str = r#"
[servers.t]
command = "{server}"
"#;

/// Over rmcp's 16 MiB line limit, under devboy's 64 MiB.
const LARGE: usize = 20 * 1024 * 1024;
/// Over devboy's 64 MiB limit.
const OVERSIZED: usize = 65 * 1024 * 1024;

/// The next reply (a message without `method`), skipping notifications
/// such as the `list_changed` of the upstream coming up.
async fn next_reply(client: &mut RawClient, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = client.recv_within(left).await;
        if message.get("method").is_none() {
            return message;
        }
    }
}

/// Asserts `reply` is a JSON-RPC error with `code` for request `id`.
fn assert_error(reply: &Value, id: Value, code: i64) {
    assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
    assert_eq!(reply["id"], id, "{reply}");
    assert_eq!(reply["error"]["code"], code, "{reply}");
    assert!(reply.get("result").is_none(), "{reply}");
}

/// `ping` still gets its answer: the connection kept serving.
async fn assert_still_serving(client: &mut RawClient, id: i64) {
    client
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
        .await;
    let pong = client.recv_response(id).await;
    assert!(pong["result"].is_object(), "{pong}");
}

/// An echo through the upstream (the whole path still works).
async fn assert_echo(client: &mut RawClient, id: i64) {
    client
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "t__echo", "arguments": {"text": "still here"}}}))
        .await;
    let reply = client.recv_response(id).await;
    assert_eq!(
        reply["result"]["content"][0]["text"], "still here",
        "{reply}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_json_gets_a_parse_error_with_null_id_and_serving_goes_on() {
    let mut client = RawClient::start(ONE).await;
    client.send_raw(b"this is not json\n").await;
    let reply = next_reply(&mut client, Duration::from_secs(20)).await;
    assert_error(&reply, Value::Null, -32700);
    assert_still_serving(&mut client, 2).await;
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_truncated_request_line_is_answered() {
    let mut client = RawClient::start(ONE).await;
    client
        .send_raw(
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"t__echo\",\"argu\n",
        )
        .await;
    let reply = next_reply(&mut client, Duration::from_secs(20)).await;
    assert_error(&reply, Value::Null, -32700);
    assert_echo(&mut client, 8).await;
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_tools_call_params_get_invalid_params_with_their_id() {
    let mut client = RawClient::start(ONE).await;
    let cases = [
        (
            json!(11),
            json!({"name": "t__echo", "arguments": "text=hi"}),
        ),
        (json!(12), json!({"name": "t__echo", "arguments": ["hi"]})),
        (json!("thirteen"), json!({"name": 13, "arguments": {}})),
        (json!(14), json!("x")),
    ];
    for (id, params) in cases {
        client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
            .await;
        let reply = next_reply(&mut client, Duration::from_secs(20)).await;
        assert_error(&reply, id.clone(), -32602);
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("tools/call"), "{reply}");
    }
    assert_echo(&mut client, 15).await;
    client.stop().await;
}

/// A result over 16 MiB is read whole from the upstream and answered
/// within what one message to the client may carry: its first items, and
/// a hint naming the call that gives the rest (or, past the pipeline's
/// deadline, its first bytes and a line saying it was cut).
#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_result_over_16_mib_is_answered_within_one_message() {
    let mut client = RawClient::start(ONE).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call",
            "params": {"name": "t__payload", "arguments": {"bytes": LARGE}}}))
        .await;
    let reply = next_reply(&mut client, Duration::from_secs(120)).await;
    assert_eq!(reply["id"], 21);
    assert_ne!(reply["result"]["isError"], true, "{}", short(&reply));
    let texts: Vec<&str> = reply["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect();
    let text: usize = texts.iter().map(|t| t.len()).sum();
    assert!(
        text > 0 && text <= (4 << 20) + 1024,
        "{text} bytes arrived: {}",
        short(&reply)
    );
    let last = texts
        .last()
        .and_then(|t| t.lines().last())
        .unwrap_or_default();
    assert!(
        last.starts_with("> [elided items ") || last.starts_with("> [cut: "),
        "the rest is named: {last}"
    );
    assert_echo(&mut client, 22).await;
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_result_over_the_limit_fails_at_once_naming_size_limit_and_upstream() {
    // A long call timeout: the failure must come from the size, not from it.
    let mut client = RawClient::start(
        r#"
[servers.t]
command = "{server}"
timeout_ms = 600000
"#,
    )
    .await;
    let started = Instant::now();
    client
        .send(json!({"jsonrpc": "2.0", "id": 31, "method": "tools/call",
            "params": {"name": "t__payload", "arguments": {"bytes": OVERSIZED}}}))
        .await;
    let reply = next_reply(&mut client, Duration::from_secs(300)).await;
    let elapsed = started.elapsed();
    assert_eq!(reply["id"], 31, "{}", short(&reply));
    let message = reply["error"]["message"]
        .as_str()
        .or_else(|| reply["result"]["content"][0]["text"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("upstream `t`"), "{message}");
    assert!(message.contains("64.0 MiB"), "the limit: {message}");
    // The line is larger than the text it carries (JSON escaping).
    let bytes = reply["error"]["data"]["bytes"].as_u64().unwrap_or_default();
    assert!(bytes as usize > OVERSIZED, "{}", short(&reply));
    assert!(
        message.contains(&format!("({bytes} bytes)")),
        "the size: {message}"
    );
    assert!(
        elapsed < Duration::from_secs(200),
        "took {elapsed:?}, should fail well before the 600 s timeout"
    );
    // The upstream connection is still good.
    assert_echo(&mut client, 32).await;
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_request_over_16_mib_is_answered() {
    let mut client = RawClient::start(ONE).await;
    let text = "x".repeat(LARGE);
    client
        .send(json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
            "params": {"name": "t__length", "arguments": {"text": text}}}))
        .await;
    let reply = next_reply(&mut client, Duration::from_secs(60)).await;
    assert_eq!(reply["id"], 41, "{}", short(&reply));
    assert_eq!(
        reply["result"]["content"][0]["text"],
        LARGE.to_string(),
        "{}",
        short(&reply)
    );
    assert_still_serving(&mut client, 42).await;
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_request_over_the_limit_gets_an_error_naming_size_and_limit() {
    let mut client = RawClient::start(ONE).await;
    let text = "x".repeat(OVERSIZED);
    client
        .send(json!({"jsonrpc": "2.0", "id": 51, "method": "tools/call",
            "params": {"name": "t__length", "arguments": {"text": text}}}))
        .await;
    let reply = next_reply(&mut client, Duration::from_secs(60)).await;
    assert_error(&reply, json!(51), -32600);
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("tools/call"), "{reply}");
    assert!(message.contains("64.0 MiB"), "{reply}");
    assert!(message.contains("65."), "{reply}");
    assert_still_serving(&mut client, 52).await;
    client.stop().await;
}

/// A reply cut for assertion messages.
fn short(reply: &Value) -> String {
    let text = reply.to_string();
    text.chars().take(400).collect()
}
