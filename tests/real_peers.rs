//! devboy in front of real, third-party MCP servers (the pinned test peers of
//! `tests/peers`): `@modelcontextprotocol/server-everything` (stdio and
//! streamable HTTP), `server-filesystem`, `server-memory`, PyPI
//! `mcp-server-time` and `mcp-server-git`, and a user's unedited `.mcp.json`.
//!
//! Where faithfulness is at stake the test also talks to the same server
//! directly (rmcp client, no devboy) and requires the two answers to be equal
//! except for the `<prefix>__` in names.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{text_of, toml_str, Devboy, RawClient, Recorder, TempDir};
use devboy_testkit::peers::{self, PeerCommand};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, GetPromptRequestParams, ReadResourceRequestParams,
};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

type Client = RunningService<RoleClient, Recorder>;

// ---------------------------------------------------------------- helpers

/// A `[servers.NAME]` table running `peer`, plus `extra` lines.
fn server_toml(name: &str, peer: &PeerCommand, extra: &str) -> String {
    let args: Vec<String> = peer.args.iter().map(|a| toml_str(a)).collect();
    let env: Vec<String> = peer
        .env
        .iter()
        .map(|(k, v)| format!("{} = {}", toml_str(k), toml_str(v)))
        .collect();
    format!(
        "[servers.{name}]\ncommand = {}\nargs = [{}]\nenv = {{ {} }}\n{extra}\n",
        toml_str(&peer.program_str()),
        args.join(", "),
        env.join(", ")
    )
}

/// devboy's first listing waits this long for upstreams still starting. The
/// default (5 s) is too short for a Python server starting on a loaded
/// two-core machine while other tests run; start latency is not under test
/// here.
///
/// These tests hold devboy's proxy layer to byte-for-byte faithfulness
/// against direct clients, so they run without the token pipeline, which
/// rewrites results on purpose (its own tests are in `dedup.rs`).
const GRACE: &[&str] = &["--list-grace-ms", "30000", "--pipeline", "passthrough"];

/// devboy with `config` (TOML), its first listing waiting for every upstream.
async fn start(config: &str) -> Devboy {
    Devboy::start_with(config, "devboy.toml", GRACE).await
}

/// Lists tools over a raw client until `tool` shows up (the upstream may
/// still be starting), failing after 30 s. `next_id` is the next request id.
async fn raw_wait_for_tool(client: &mut RawClient, next_id: &mut i64, tool: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let id = *next_id;
        *next_id += 1;
        client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
            .await;
        let list = client.recv_response(id).await;
        let tools = list["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if tools.iter().any(|t| t["name"] == tool) {
            return;
        }
        assert!(Instant::now() < deadline, "{tool} never listed: {list}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An rmcp client straight to `peer`, bypassing devboy, declaring what
/// devboy declares to its upstreams (elicitation), so both see the same
/// tools.
async fn direct(peer: &PeerCommand) -> Client {
    let mut cmd = tokio::process::Command::new(&peer.program);
    cmd.args(&peer.args);
    for (k, v) in &peer.env {
        cmd.env(k, v);
    }
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", peer.program.display()));
    let started = tokio::time::timeout(
        Duration::from_secs(20),
        Recorder {
            elicitation: true,
            ..Recorder::default()
        }
        .serve(transport),
    )
    .await;
    match started {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => panic!("initialize {}: {e}", peer.program.display()),
        Err(_) => panic!("{} did not initialize in 20 s", peer.program.display()),
    }
}

fn params(name: &str, args: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = args.as_object().cloned();
    params
}

async fn call_direct(client: &Client, name: &str, args: Value) -> CallToolResult {
    client
        .peer()
        .call_tool(params(name, args))
        .await
        .unwrap_or_else(|e| panic!("direct call {name}: {e}"))
}

/// Calls `tool` through devboy (as `<prefix>__<tool>`) and directly, and
/// requires identical results. Returns the result.
async fn assert_same_call(
    devboy: &Devboy,
    direct: &Client,
    prefix: &str,
    tool: &str,
    args: Value,
) -> Value {
    let via = devboy
        .call(&format!("{prefix}__{tool}"), args.clone())
        .await;
    let straight = call_direct(direct, tool, args).await;
    let via = serde_json::to_value(via).unwrap();
    let straight = serde_json::to_value(straight).unwrap();
    assert_eq!(
        via, straight,
        "result of {tool} through devboy differs from the direct one"
    );
    assert_ne!(via["isError"], json!(true), "{tool} failed: {via}");
    via
}

/// A failing call fails the same way through devboy as straight: the same
/// `isError` result, or the same protocol error.
async fn assert_same_failure(devboy: &Devboy, direct: &Client, via: &str, name: &str, args: Value) {
    let through = devboy
        .client
        .peer()
        .call_tool(params(via, args.clone()))
        .await;
    let straight = direct.peer().call_tool(params(name, args)).await;
    match (&through, &straight) {
        (Ok(through), Ok(straight)) => {
            assert_eq!(through.is_error, Some(true), "{through:?}");
            assert_eq!(
                serde_json::to_value(through).unwrap(),
                serde_json::to_value(straight).unwrap()
            );
        }
        (Err(through), Err(straight)) => assert_eq!(through.to_string(), straight.to_string()),
        _ => panic!("failure differs: via {through:?}, direct {straight:?}"),
    }
}

/// All tools of a client, by name, as JSON.
async fn tools_json(client: &Client) -> BTreeMap<String, Value> {
    client
        .peer()
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| (t.name.to_string(), serde_json::to_value(&t).unwrap()))
        .collect()
}

/// A direct server's tool definition as devboy passes it on: the same but
/// for the input schema's lossless compaction (tests/tool_schemas.rs).
fn as_devboy_shows(name: &str, tool: &Value) -> Value {
    let mut tool = tool.clone();
    if let Some(schema) = tool.get("inputSchema").and_then(Value::as_object) {
        tool["inputSchema"] = Value::Object(devboy_core::tool_schema::compact(schema, name));
    }
    tool
}

/// The upstream's tools as devboy shows them: `prefix__`-named tools with the
/// prefix removed from the name (in the JSON too).
fn strip_prefix(tools: &BTreeMap<String, Value>, prefix: &str) -> BTreeMap<String, Value> {
    let head = format!("{prefix}__");
    tools
        .iter()
        .filter_map(|(name, tool)| {
            let original = name.strip_prefix(&head)?;
            let mut tool = tool.clone();
            tool["name"] = json!(original);
            Some((original.to_owned(), tool))
        })
        .collect()
}

/// Requires devboy's `prefix__*` tools to equal the direct listing, name for
/// name and field for field (description, schemas, annotations, `_meta`, …),
/// the input schema compacted losslessly.
/// Lists again for a few seconds when the sets differ: some servers register
/// tools only after `initialized` and announce them with `list_changed`.
async fn assert_same_tools(devboy: &Devboy, direct: &Client, prefix: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let via = strip_prefix(&tools_json(&devboy.client).await, prefix);
        let straight = tools_json(direct).await;
        let same_names = via.keys().eq(straight.keys());
        if same_names || Instant::now() > deadline {
            assert!(
                same_names,
                "tool names differ: via devboy {:?}, direct {:?}",
                via.keys().collect::<Vec<_>>(),
                straight.keys().collect::<Vec<_>>()
            );
            assert!(!straight.is_empty(), "the server lists no tools");
            for (name, tool) in &straight {
                assert_eq!(
                    via[name],
                    as_devboy_shows(name, tool),
                    "definition of {name} changed through devboy"
                );
            }
            return straight.into_keys().collect();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A free TCP port on the loopback interface (free when this returns).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral port")
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `git` in `repo`, failing the test on error.
fn git(repo: &Path, args: &[&str]) {
    common::git_as(repo, "Devboy Test", None, args);
}

/// The text of a result, parsed as JSON.
fn json_text(result: &CallToolResult) -> Value {
    let text = text_of(result);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

// ------------------------------------------------------ server-everything

#[tokio::test(flavor = "multi_thread")]
async fn everything_tools_and_results_are_faithful() {
    let mut peer = peers::server_everything();
    peer.env
        .push(("DEVBOY_PEER_MARKER".into(), "marker-7 ü \"q\"".into()));
    let devboy = start(&server_toml("ev", &peer, "")).await;
    let direct = direct(&peer).await;

    let names = assert_same_tools(&devboy, &direct, "ev").await;
    for expected in [
        "echo",
        "get-structured-content",
        "get-tiny-image",
        "trigger-long-running-operation",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing");
    }
    let listed = devboy.tool_names().await;
    assert!(listed.contains(&"devboy_status".to_owned()), "{listed:?}");
    assert!(
        !listed.iter().any(|n| n == "echo"),
        "unprefixed upstream name leaked: {listed:?}"
    );

    // echo
    let echo = assert_same_call(
        &devboy,
        &direct,
        "ev",
        "echo",
        json!({"message": "hello from devboy"}),
    )
    .await;
    assert_eq!(echo["content"][0]["text"], "Echo: hello from devboy");

    // The structured tool: found by its outputSchema, not by a guessed name.
    let tools = tools_json(&direct).await;
    let structured: Vec<&String> = tools
        .iter()
        .filter(|(_, t)| t.get("outputSchema").is_some())
        .map(|(n, _)| n)
        .collect();
    assert!(
        structured.contains(&&"get-structured-content".to_owned()),
        "{structured:?}"
    );
    let weather = assert_same_call(
        &devboy,
        &direct,
        "ev",
        "get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await;
    assert_eq!(weather["structuredContent"]["temperature"], json!(36));
    assert!(weather["structuredContent"]["conditions"].is_string());

    // The tiny image: the image block is identical, byte for byte.
    let image = assert_same_call(&devboy, &direct, "ev", "get-tiny-image", json!({})).await;
    let block = image["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "image")
        .unwrap_or_else(|| panic!("no image block: {image}"));
    assert_eq!(block["mimeType"], "image/png");
    assert!(block["data"].as_str().unwrap().len() > 100);

    // Annotated content, resource links and embedded resources.
    let annotated = assert_same_call(
        &devboy,
        &direct,
        "ev",
        "get-annotated-message",
        json!({"messageType": "error", "includeImage": true}),
    )
    .await;
    assert!(
        annotated["content"][0]["annotations"]["priority"].is_number(),
        "{annotated}"
    );
    let links = assert_same_call(
        &devboy,
        &direct,
        "ev",
        "get-resource-links",
        json!({"count": 3}),
    )
    .await;
    let link_count = links["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "resource_link")
        .count();
    assert_eq!(link_count, 3, "{links}");
    let reference = assert_same_call(
        &devboy,
        &direct,
        "ev",
        "get-resource-reference",
        json!({"resourceType": "Blob", "resourceId": 2}),
    )
    .await;
    assert!(
        reference["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "resource"),
        "{reference}"
    );
    assert_same_call(&devboy, &direct, "ev", "get-sum", json!({"a": 2, "b": 40})).await;

    // The configured env reaches the server, on top of the inherited one.
    let env = devboy.call("ev__get-env", json!({})).await;
    let env = json_text(&env);
    assert_eq!(env["DEVBOY_PEER_MARKER"], "marker-7 ü \"q\"", "{env}");
    assert!(env["PATH"].is_string(), "PATH not inherited: {env}");

    // An invalid call: the error is passed on, not swallowed.
    assert_same_failure(
        &devboy,
        &direct,
        "ev__get-structured-content",
        "get-structured-content",
        json!({"location": "Atlantis"}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn everything_progress_reaches_the_client_under_its_own_token() {
    let peer = peers::server_everything();
    let mut client = RawClient::start(&server_toml("ev", &peer, "")).await;
    let mut id = 1;
    raw_wait_for_tool(&mut client, &mut id, "ev__trigger-long-running-operation").await;
    client
        .send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "ev__trigger-long-running-operation",
            "arguments": {"duration": 1, "steps": 4},
            "_meta": {"progressToken": "everything-progress-42"}}}),
        )
        .await;
    let mut notes = Vec::new();
    let response = client.recv_response_collecting(id, &mut notes).await;
    let text = response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{response}"));
    assert!(text.contains("Steps: 4"), "{text}");
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 4, "progress notifications: {notes:?}");
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(
            p["params"]["progressToken"], "everything-progress-42",
            "{p}"
        );
        assert_eq!(p["params"]["progress"].as_f64(), Some((i + 1) as f64));
        assert_eq!(p["params"]["total"].as_f64(), Some(4.0));
    }

    // Two operations at once, one with a numeric token (equal to the other
    // request's id, to catch a mix-up): each token gets its own progress.
    let (first, second) = (id + 1, id + 2);
    for (request, token, steps) in [(first, json!("tok-A"), 3), (second, json!(first), 5)] {
        client
            .send(
                json!({"jsonrpc": "2.0", "id": request, "method": "tools/call", "params": {
                "name": "ev__trigger-long-running-operation",
                "arguments": {"duration": 1, "steps": steps},
                "_meta": {"progressToken": token}}}),
            )
            .await;
    }
    let mut notes = Vec::new();
    let mut answered = BTreeSet::new();
    while answered.len() < 2 {
        let message = client.recv().await;
        if message.get("method").is_some() {
            notes.push(message);
        } else {
            assert!(message["result"].is_object(), "{message}");
            answered.insert(message["id"].as_i64().unwrap());
        }
    }
    assert_eq!(answered, BTreeSet::from([first, second]));
    for (token, steps) in [(json!("tok-A"), 3), (json!(first), 5)] {
        let seen: Vec<f64> = notes
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .filter(|m| m["params"]["progressToken"] == token)
            .map(|m| {
                assert_eq!(m["params"]["total"].as_f64(), Some(steps as f64), "{m}");
                m["params"]["progress"].as_f64().unwrap()
            })
            .collect();
        let expected: Vec<f64> = (1..=steps).map(f64::from).collect();
        assert_eq!(seen, expected, "progress for token {token}: {notes:?}");
    }
    let all = notes
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    assert_eq!(all, 8, "unexpected progress: {notes:?}");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn everything_resources_and_prompts_pass_through() {
    let peer = peers::server_everything();
    let devboy = start(&server_toml("ev", &peer, "")).await;
    let direct = direct(&peer).await;

    // Resources: same list, names prefixed, URIs untouched.
    let via = devboy.client.peer().list_all_resources().await.unwrap();
    let straight = direct.peer().list_all_resources().await.unwrap();
    assert!(!straight.is_empty(), "server-everything lists no resources");
    let via: Vec<Value> = via
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let expected: Vec<Value> = straight
        .iter()
        .map(|r| {
            let mut r = serde_json::to_value(r).unwrap();
            r["name"] = json!(format!("ev__{}", r["name"].as_str().unwrap()));
            r
        })
        .collect();
    assert_eq!(via, expected, "resources/list changed through devboy");

    let via = devboy
        .client
        .peer()
        .list_all_resource_templates()
        .await
        .unwrap();
    let straight = direct.peer().list_all_resource_templates().await.unwrap();
    assert_eq!(via.len(), straight.len());
    for (v, s) in via.iter().zip(&straight) {
        assert_eq!(v.uri_template, s.uri_template);
        assert_eq!(v.name, format!("ev__{}", s.name));
    }

    // Reading a listed resource by URI: identical contents.
    let uri = straight_first_static(&expected);
    let via = devboy
        .client
        .peer()
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap_or_else(|e| panic!("read {uri} through devboy: {e}"));
    let straight = direct
        .peer()
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&via).unwrap(),
        serde_json::to_value(&straight).unwrap(),
        "contents of {uri} changed"
    );
    assert!(!via.contents.is_empty());
    // A URI only a template covers is routed to the right upstream too.
    let dynamic = devboy
        .client
        .peer()
        .read_resource(ReadResourceRequestParams::new(
            "demo://resource/dynamic/text/3",
        ))
        .await
        .expect("read a templated resource through devboy");
    let dynamic = serde_json::to_value(&dynamic).unwrap();
    assert!(
        dynamic["contents"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Resource 3: This is a plaintext resource"),
        "{dynamic}"
    );

    // Prompts: prefixed names, otherwise identical; prompts/get works.
    let via = devboy.client.peer().list_all_prompts().await.unwrap();
    let straight = direct.peer().list_all_prompts().await.unwrap();
    assert!(!straight.is_empty(), "server-everything lists no prompts");
    assert_eq!(via.len(), straight.len());
    for prompt in &straight {
        let exposed = via
            .iter()
            .find(|p| p.name == format!("ev__{}", prompt.name))
            .unwrap_or_else(|| panic!("prompt {} not exposed", prompt.name));
        let mut renamed = prompt.clone();
        renamed.name = exposed.name.clone();
        assert_eq!(exposed, &renamed);
    }
    for (name, args) in [
        ("simple-prompt", json!({})),
        ("args-prompt", json!({"city": "Paris", "state": "Texas"})),
    ] {
        let mut request = GetPromptRequestParams::new(format!("ev__{name}"));
        if let Some(args) = args.as_object().filter(|a| !a.is_empty()) {
            request = request.with_arguments(args.clone());
        }
        let via = devboy
            .client
            .peer()
            .get_prompt(request)
            .await
            .unwrap_or_else(|e| panic!("prompts/get ev__{name}: {e}"));
        let mut request = GetPromptRequestParams::new(name);
        if let Some(args) = args.as_object().filter(|a| !a.is_empty()) {
            request = request.with_arguments(args.clone());
        }
        let straight = direct.peer().get_prompt(request).await.unwrap();
        assert_eq!(
            serde_json::to_value(&via).unwrap(),
            serde_json::to_value(&straight).unwrap(),
            "prompt {name} changed"
        );
    }
    let args = devboy
        .client
        .peer()
        .get_prompt(
            GetPromptRequestParams::new("ev__args-prompt")
                .with_arguments(json!({"city": "Oslo"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&args.messages[0]).unwrap()["content"]["text"],
        "What's weather in Oslo?"
    );
}

/// The first static document among listed resources (their content does not
/// change between reads).
fn straight_first_static(resources: &[Value]) -> String {
    resources
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .find(|u| u.starts_with("demo://resource/static/"))
        .unwrap_or_else(|| panic!("no static resource in {resources:?}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn everything_over_streamable_http() {
    let everything = peers::server_everything();
    let port = free_port();
    let server = std::process::Command::new(&everything.program)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server-everything streamableHttp");
    let _server = KillOnDrop(server);
    let deadline = Instant::now() + Duration::from_secs(15);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server-everything did not listen on port {port} within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let config = format!(
        "[servers.evh]\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout_ms = 20000\n"
    );
    let devboy = start(&config).await;
    let entry = devboy
        .wait_upstream("evh", "ready over HTTP", |u| u["state"] == "ready")
        .await;
    assert!(entry["tools"].as_u64().unwrap_or(0) >= 10, "{entry}");
    let names = devboy.tool_names().await;
    for tool in ["evh__echo", "evh__get-sum", "evh__get-structured-content"] {
        assert!(
            names.contains(&tool.to_owned()),
            "{tool} missing: {names:?}"
        );
    }
    // The same definitions as the same server over stdio.
    let stdio = direct(&everything).await;
    let via = strip_prefix(&tools_json(&devboy.client).await, "evh");
    let straight = tools_json(&stdio).await;
    for name in ["echo", "get-sum", "get-structured-content"] {
        assert_eq!(
            via[name],
            as_devboy_shows(name, &straight[name]),
            "{name} differs over HTTP"
        );
    }

    let echo = devboy
        .call("evh__echo", json!({"message": "over http"}))
        .await;
    assert_eq!(text_of(&echo), "Echo: over http");
    let sum = devboy.call("evh__get-sum", json!({"a": 20, "b": 22})).await;
    assert!(text_of(&sum).contains("42"), "{}", text_of(&sum));
    let weather = devboy
        .call(
            "evh__get-structured-content",
            json!({"location": "New York"}),
        )
        .await;
    assert_eq!(
        weather.structured_content.as_ref().unwrap()["temperature"],
        json!(33)
    );
    let entry = devboy
        .wait_upstream("evh", "calls counted", |u| u["calls"] == 3)
        .await;
    assert_eq!(entry["errors"], 0, "{entry}");

    // Progress from an HTTP upstream reaches the client under its token.
    let mut raw = RawClient::start(&config).await;
    let mut id = 1;
    raw_wait_for_tool(&mut raw, &mut id, "evh__trigger-long-running-operation").await;
    raw.send(
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "evh__trigger-long-running-operation",
        "arguments": {"duration": 0.6, "steps": 3},
        "_meta": {"progressToken": "http-progress"}}}),
    )
    .await;
    let mut notes = Vec::new();
    let response = raw.recv_response_collecting(id, &mut notes).await;
    assert!(response["result"]["content"].is_array(), "{response}");
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{notes:?}");
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["params"]["progressToken"], "http-progress", "{p}");
        assert_eq!(p["params"]["progress"].as_f64(), Some((i + 1) as f64));
    }
    raw.stop().await;
}

// ------------------------------------------------------- server-filesystem

#[tokio::test(flavor = "multi_thread")]
async fn filesystem_reads_writes_and_lists() {
    let root = TempDir::new("fs-root");
    let root_path = root.path().canonicalize().unwrap();
    let root_str = root_path.display().to_string();
    let text = "line one\nline two — ünïcødé\n{\"json\": [1, 2, 3]}\n";
    std::fs::write(root_path.join("notes.txt"), text).unwrap();
    std::fs::create_dir_all(root_path.join("sub/deeper")).unwrap();
    std::fs::write(root_path.join("sub/deeper/a.rs"), "fn main() {}\n").unwrap();

    let peer = peers::server_filesystem(&root_path);
    let devboy = start(&server_toml("fs", &peer, "")).await;
    let direct = direct(&peer).await;
    assert_same_tools(&devboy, &direct, "fs").await;

    let path = root_path.join("notes.txt").display().to_string();
    let read = assert_same_call(
        &devboy,
        &direct,
        "fs",
        "read_text_file",
        json!({"path": path}),
    )
    .await;
    assert_eq!(read["content"][0]["text"], text);
    assert_eq!(read["structuredContent"]["content"], text, "{read}");

    let head = assert_same_call(
        &devboy,
        &direct,
        "fs",
        "read_text_file",
        json!({"path": path, "head": 1}),
    )
    .await;
    assert_eq!(head["structuredContent"]["content"], "line one");

    // write_file, then read it back (through devboy and directly).
    let new_path = root_path.join("sub/written.md").display().to_string();
    let written = "# Written through devboy\n\n- one\n- two\n";
    let result = devboy
        .call(
            "fs__write_file",
            json!({"path": new_path, "content": written}),
        )
        .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(std::fs::read_to_string(&new_path).unwrap(), written);
    let back = assert_same_call(
        &devboy,
        &direct,
        "fs",
        "read_text_file",
        json!({"path": new_path}),
    )
    .await;
    assert_eq!(back["structuredContent"]["content"], written);

    let tree = assert_same_call(
        &devboy,
        &direct,
        "fs",
        "directory_tree",
        json!({"path": root_str}),
    )
    .await;
    let tree_text = tree["content"][0]["text"].as_str().unwrap();
    for name in ["notes.txt", "sub", "deeper", "a.rs", "written.md"] {
        assert!(tree_text.contains(name), "{name} not in tree: {tree_text}");
    }

    let allowed = assert_same_call(
        &devboy,
        &direct,
        "fs",
        "list_allowed_directories",
        json!({}),
    )
    .await;
    assert!(
        allowed["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(&root_str),
        "{allowed}"
    );

    // A path outside the allowed directory: the server's refusal comes back
    // as it was.
    let outside = devboy
        .client
        .peer()
        .call_tool(params(
            "fs__read_text_file",
            json!({"path": "/etc/hostname"}),
        ))
        .await;
    let outside_direct = direct
        .peer()
        .call_tool(params("read_text_file", json!({"path": "/etc/hostname"})))
        .await;
    match (outside, outside_direct) {
        (Ok(via), Ok(straight)) => {
            assert_eq!(via.is_error, Some(true), "{via:?}");
            assert_eq!(
                serde_json::to_value(via).unwrap(),
                serde_json::to_value(straight).unwrap()
            );
        }
        (Err(via), Err(straight)) => assert_eq!(via.to_string(), straight.to_string()),
        (via, straight) => panic!("refusal differs: via {via:?}, direct {straight:?}"),
    }
    let entry = devboy
        .wait_upstream("fs", "ready", |u| u["state"] == "ready")
        .await;
    assert_eq!(entry["prefix"], "fs");
}

#[tokio::test(flavor = "multi_thread")]
async fn filesystem_large_and_binary_results_are_faithful() {
    let root = TempDir::new("fs-large");
    let root_path = root.path().canonicalize().unwrap();
    // 4 MB of JSON-ish lines: far beyond any line buffer or token budget.
    let mut big = String::new();
    let mut i = 0;
    while big.len() < 4 << 20 {
        big.push_str(&format!(
            "{{\"id\":{i},\"name\":\"row-{i}\",\"note\":\"ünïcødé \\\"quoted\\\" \\t tab\"}}\n"
        ));
        i += 1;
    }
    let big_path = root_path.join("big.jsonl");
    std::fs::write(&big_path, &big).unwrap();
    // Arbitrary bytes with a PNG name: read_media_file answers with base64.
    let bytes: Vec<u8> = (0..30_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let png_path = root_path.join("picture.png");
    std::fs::write(&png_path, &bytes).unwrap();
    std::fs::write(root_path.join("small.txt"), "small").unwrap();

    let peer = peers::server_filesystem(&root_path);
    let devboy = start(&server_toml("fs", &peer, "")).await;
    let direct = direct(&peer).await;

    let read = assert_same_call(
        &devboy,
        &direct,
        "fs",
        "read_text_file",
        json!({"path": big_path.display().to_string()}),
    )
    .await;
    assert_eq!(
        read["structuredContent"]["content"].as_str(),
        Some(big.as_str())
    );

    let media = assert_same_call(
        &devboy,
        &direct,
        "fs",
        "read_media_file",
        json!({"path": png_path.display().to_string()}),
    )
    .await;
    let block = &media["content"][0];
    assert_eq!(block["mimeType"], "image/png", "{block}");
    assert!(
        block["data"].as_str().unwrap().len() >= 40_000,
        "base64 of 30 kB: {}",
        block["data"].as_str().unwrap().len()
    );

    assert_same_call(
        &devboy,
        &direct,
        "fs",
        "read_multiple_files",
        json!({"paths": [
            root_path.join("small.txt").display().to_string(),
            root_path.join("missing.txt").display().to_string(),
        ]}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn filesystem_allow_and_deny_filter_the_tool_list() {
    let root = TempDir::new("fs-filter");
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("a.txt"), "alpha").unwrap();
    let peer = peers::server_filesystem(&root_path);
    let devboy = start(&server_toml(
        "fs",
        &peer,
        "allow = [\"read_*\", \"list_*\"]\ndeny = [\"list_allowed*\"]",
    ))
    .await;
    let direct = direct(&peer).await;

    let all: Vec<String> = tools_json(&direct).await.into_keys().collect();
    let expected: BTreeSet<String> = all
        .iter()
        .filter(|n| n.starts_with("read_") || n.starts_with("list_"))
        .filter(|n| !n.starts_with("list_allowed"))
        .map(|n| format!("fs__{n}"))
        .collect();
    assert!(expected.contains("fs__read_text_file"), "{all:?}");
    assert!(expected.contains("fs__list_directory"), "{all:?}");
    let shown: BTreeSet<String> = devboy
        .tool_names()
        .await
        .into_iter()
        .filter(|n| n.starts_with("fs__"))
        .collect();
    assert_eq!(shown, expected, "allow/deny not applied as configured");
    for hidden in [
        "fs__write_file",
        "fs__list_allowed_directories",
        "fs__edit_file",
    ] {
        assert!(!shown.contains(hidden), "{hidden} visible");
    }

    // Allowed tools work; a hidden tool cannot be called by name either.
    let read = devboy
        .call(
            "fs__read_text_file",
            json!({"path": root_path.join("a.txt").display().to_string()}),
        )
        .await;
    assert_eq!(text_of(&read), "alpha");
    let hidden = devboy
        .client
        .peer()
        .call_tool(params(
            "fs__write_file",
            json!({"path": root_path.join("b.txt").display().to_string(), "content": "x"}),
        ))
        .await;
    match hidden {
        Err(_) => {}
        Ok(result) => assert_eq!(result.is_error, Some(true), "{result:?}"),
    }
    assert!(
        !root_path.join("b.txt").exists(),
        "a denied tool reached the server"
    );
    let entry = devboy
        .wait_upstream("fs", "ready", |u| u["state"] == "ready")
        .await;
    assert_eq!(entry["tools"].as_u64(), Some(expected.len() as u64));
}

#[tokio::test(flavor = "multi_thread")]
async fn filesystem_concurrent_reads_return_their_own_files() {
    let root = TempDir::new("fs-many");
    let root_path = root.path().canonicalize().unwrap();
    let mut files = Vec::new();
    for i in 0..20 {
        let path = root_path.join(format!("file-{i:02}.txt"));
        let content = format!("file number {i}\n{}\n", "x".repeat(i * 50));
        std::fs::write(&path, &content).unwrap();
        files.push((path.display().to_string(), content));
    }
    let peer = peers::server_filesystem(&root_path);
    let devboy = start(&server_toml("fs", &peer, "")).await;
    // Warm up: the upstream is ready before the burst.
    devboy
        .wait_upstream("fs", "ready", |u| u["state"] == "ready")
        .await;

    let started = Instant::now();
    let mut calls = Vec::new();
    for (path, content) in files.clone() {
        let peer = devboy.client.peer().clone();
        calls.push(tokio::spawn(async move {
            let result = peer
                .call_tool(params("fs__read_text_file", json!({"path": path})))
                .await
                .unwrap_or_else(|e| panic!("read {path}: {e}"));
            (path, content, result)
        }));
    }
    for call in calls {
        let (path, content, result) = call.await.unwrap();
        assert_ne!(result.is_error, Some(true), "{path}: {result:?}");
        assert_eq!(text_of(&result), content, "wrong content for {path}");
        assert_eq!(
            result.structured_content.as_ref().unwrap()["content"],
            json!(content),
            "wrong structured content for {path}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "20 reads took {:?}",
        started.elapsed()
    );
    let entry = devboy
        .wait_upstream("fs", "calls counted", |u| u["calls"] == 20)
        .await;
    assert_eq!(entry["errors"], 0, "{entry}");
}

// ----------------------------------------------------------- server-memory

#[tokio::test(flavor = "multi_thread")]
async fn memory_graph_round_trips() {
    let dir = TempDir::new("memory");
    let memory_file = dir.path().join("memory.jsonl");
    let peer = peers::server_memory(&memory_file);
    let devboy = start(&server_toml("mem", &peer, "")).await;

    let entities: Vec<Value> = (0..36)
        .map(|i| {
            json!({
                "name": format!("entity-{i:02}"),
                "entityType": if i % 2 == 0 { "person" } else { "project" },
                "observations": [format!("observation {i}a"), format!("observation {i}b — ü")],
            })
        })
        .collect();
    let created = devboy
        .call("mem__create_entities", json!({"entities": entities}))
        .await;
    assert_ne!(created.is_error, Some(true), "{created:?}");
    let relations: Vec<Value> = (0..35)
        .step_by(5)
        .map(|i| {
            json!({"from": format!("entity-{i:02}"), "to": format!("entity-{:02}", i + 1),
                   "relationType": "works_on"})
        })
        .collect();
    let related = devboy
        .call("mem__create_relations", json!({"relations": relations}))
        .await;
    assert_ne!(related.is_error, Some(true), "{related:?}");

    let graph = devboy.call("mem__read_graph", json!({})).await;
    assert_ne!(graph.is_error, Some(true), "{graph:?}");
    let parsed = graph
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("read_graph has no structuredContent: {graph:?}"));
    assert_eq!(
        json_text(&graph),
        parsed,
        "text and structuredContent disagree"
    );
    let names: BTreeSet<String> = parsed["entities"]
        .as_array()
        .unwrap_or_else(|| panic!("no entities in {parsed}"))
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    let expected: BTreeSet<String> = (0..36).map(|i| format!("entity-{i:02}")).collect();
    assert_eq!(names, expected);
    assert_eq!(parsed["relations"].as_array().unwrap().len(), 7);

    // The server itself, asked directly over the same file, agrees exactly.
    let direct = direct(&peer).await;
    let straight = call_direct(&direct, "read_graph", json!({})).await;
    assert_eq!(
        serde_json::to_value(&graph).unwrap(),
        serde_json::to_value(&straight).unwrap(),
        "read_graph through devboy differs from the direct one"
    );
    assert_same_tools(&devboy, &direct, "mem").await;

    let found = assert_same_call(
        &devboy,
        &direct,
        "mem",
        "search_nodes",
        json!({"query": "observation 17a"}),
    )
    .await;
    assert_eq!(
        found["structuredContent"]["entities"][0]["name"], "entity-17",
        "{found}"
    );
}

// ------------------------------------------------------- mcp-server-time

#[tokio::test(flavor = "multi_thread")]
async fn time_server_through_devboy() {
    let peer = peers::server_time();
    let devboy = start(&server_toml("time", &peer, "")).await;
    let direct = direct(&peer).await;
    assert_same_tools(&devboy, &direct, "time").await;

    let now = devboy
        .call("time__get_current_time", json!({"timezone": "UTC"}))
        .await;
    assert_ne!(now.is_error, Some(true), "{now:?}");
    let parsed = json_text(&now);
    assert_eq!(parsed["timezone"], "UTC", "{parsed}");
    let datetime = parsed["datetime"].as_str().unwrap();
    assert!(datetime.ends_with("+00:00"), "{datetime}");
    assert!(datetime.starts_with("20"), "{datetime}");

    let converted = assert_same_call(
        &devboy,
        &direct,
        "time",
        "convert_time",
        json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
    )
    .await;
    let parsed: Value =
        serde_json::from_str(converted["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(parsed["source"]["timezone"], "UTC");
    assert_eq!(parsed["target"]["timezone"], "Asia/Tokyo");
    assert!(
        parsed["target"]["datetime"]
            .as_str()
            .unwrap()
            .contains("T21:00:00"),
        "{parsed}"
    );
    assert_eq!(parsed["time_difference"], "+9.0h", "{parsed}");

    // A bad timezone: the server's error passes through unchanged.
    assert_same_failure(
        &devboy,
        &direct,
        "time__get_current_time",
        "get_current_time",
        json!({"timezone": "Mars/Olympus"}),
    )
    .await;
}

// -------------------------------------------------------- mcp-server-git

#[tokio::test(flavor = "multi_thread")]
async fn git_server_through_devboy() {
    let repo_dir = TempDir::new("git-repo");
    let repo = repo_dir.path().canonicalize().unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README.md"), "# demo\n").unwrap();
    git(&repo, &["add", "README.md"]);
    git(
        &repo,
        &["commit", "-q", "-m", "Initial commit from devboy test"],
    );
    std::fs::write(repo.join("README.md"), "# demo\n\nchanged\n").unwrap();
    std::fs::write(repo.join("untracked.txt"), "new\n").unwrap();
    let repo_str = repo.display().to_string();

    let peer = peers::server_git(&repo);
    let devboy = start(&server_toml("git", &peer, "")).await;
    let direct = direct(&peer).await;
    assert_same_tools(&devboy, &direct, "git").await;

    let status = assert_same_call(
        &devboy,
        &direct,
        "git",
        "git_status",
        json!({"repo_path": repo_str}),
    )
    .await;
    let status = status["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(status.contains("untracked.txt"), "{status}");
    assert!(status.contains("README.md"), "{status}");

    let log = assert_same_call(
        &devboy,
        &direct,
        "git",
        "git_log",
        json!({"repo_path": repo_str, "max_count": 5}),
    )
    .await;
    let log = log["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(log.contains("Initial commit from devboy test"), "{log}");
    assert!(log.contains("Devboy Test"), "{log}");

    let diff = devboy
        .call("git__git_diff_unstaged", json!({"repo_path": repo_str}))
        .await;
    assert!(text_of(&diff).contains("+changed"), "{}", text_of(&diff));
}

// ------------------------------------------------------ a user's .mcp.json

#[tokio::test(flavor = "multi_thread")]
async fn users_mcp_json_works_unedited() {
    let root = TempDir::new("mcpjson-root");
    let root_path = root.path().canonicalize().unwrap();
    let root_str = root_path.display().to_string();
    std::fs::write(root_path.join("hello.txt"), "hello from .mcp.json").unwrap();
    let fs = peers::server_filesystem(&root_path);
    let time = peers::server_time();
    let memory_dir = TempDir::new("mcpjson-memory");
    let memory = peers::server_memory(&memory_dir.path().join("m.jsonl"));
    let everything = peers::server_everything();
    let unset = "DEVBOY_REAL_PEERS_SURELY_UNSET_VAR";
    assert!(std::env::var_os(unset).is_none());

    // As a user writes it: `${VAR:-default}` in args and env, a disabled
    // server, an SSE server, a timeout, fields devboy does not use.
    let config = json!({
        "mcpServers": {
            "filesystem": {
                "command": fs.program_str(),
                "args": [format!("${{{unset}:-{root_str}}}")],
            },
            "time": {
                "type": "stdio",
                "command": time.program_str(),
                "args": ["--local-timezone", format!("${{{unset}_TZ:-UTC}}")],
                "env": {},
                "timeout": 30000,
            },
            "memory": {
                "command": memory.program_str(),
                "args": [],
                "env": {
                    "MEMORY_FILE_PATH": format!("${{{unset}_MEM:-{}}}", memory.env[0].1),
                },
            },
            "everything": {
                "command": everything.program_str(),
                "args": ["stdio"],
                "disabled": true,
            },
            "remote-sse": {
                "type": "sse",
                "url": "http://127.0.0.1:9/sse",
                "headers": {"Authorization": "Bearer ${DEVBOY_REAL_PEERS_TOKEN:-none}"},
            },
        }
    });
    let text = serde_json::to_string_pretty(&config).unwrap();
    let devboy = Devboy::start_with(&text, ".mcp.json", GRACE).await;

    let status = devboy.status().await;
    let upstreams = status["upstreams"].as_array().unwrap();
    let entry = |name: &str| -> Value {
        upstreams
            .iter()
            .find(|u| u["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in status: {status}"))
    };
    let prefix = |name: &str| entry(name)["prefix"].as_str().unwrap().to_owned();
    let (fs_p, time_p, mem_p, ev_p) = (
        prefix("filesystem"),
        prefix("time"),
        prefix("memory"),
        prefix("everything"),
    );

    let names = devboy.tool_names().await;
    for tool in [
        format!("{fs_p}__read_text_file"),
        format!("{time_p}__get_current_time"),
        format!("{mem_p}__read_graph"),
    ] {
        assert!(names.contains(&tool), "{tool} missing: {names:?}");
    }
    assert!(
        !names.iter().any(|n| n.starts_with(&format!("{ev_p}__"))),
        "tools of the disabled server are listed: {names:?}"
    );

    // `${VAR:-default}` took the default: the filesystem root is ours.
    let allowed = devboy
        .call(&format!("{fs_p}__list_allowed_directories"), json!({}))
        .await;
    assert!(
        text_of(&allowed).contains(&root_str),
        "{}",
        text_of(&allowed)
    );
    let hello = devboy
        .call(
            &format!("{fs_p}__read_text_file"),
            json!({"path": root_path.join("hello.txt").display().to_string()}),
        )
        .await;
    assert_eq!(text_of(&hello), "hello from .mcp.json");
    let now = devboy
        .call(
            &format!("{time_p}__get_current_time"),
            json!({"timezone": "UTC"}),
        )
        .await;
    assert_eq!(json_text(&now)["timezone"], "UTC");
    let created = devboy
        .call(
            &format!("{mem_p}__create_entities"),
            json!({"entities": [{"name": "x", "entityType": "t", "observations": []}]}),
        )
        .await;
    assert_ne!(created.is_error, Some(true), "{created:?}");
    let stored = std::fs::read_to_string(&memory.env[0].1).unwrap_or_default();
    assert!(
        stored.contains("\"x\""),
        "memory env default not applied: {stored:?}"
    );

    let disabled = devboy
        .wait_upstream("everything", "disabled", |u| u["state"] == "disabled")
        .await;
    assert_eq!(disabled["tools"], 0, "{disabled}");
    assert_eq!(disabled["calls"], 0, "{disabled}");

    let sse = devboy
        .wait_upstream("remote-sse", "failed", |u| u["state"] == "failed")
        .await;
    let error = sse["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("transport") && error.contains("sse"),
        "the SSE error should name the transport: {sse}"
    );
    assert_eq!(sse["tools"], 0);

    for name in ["filesystem", "time", "memory"] {
        let e = devboy
            .wait_upstream(name, "ready", |u| u["state"] == "ready")
            .await;
        assert_eq!(e["errors"], 0, "{e}");
        assert_eq!(e["restarts"], 0, "{e}");
        assert!(e["tools"].as_u64().unwrap() > 0, "{e}");
    }
}
