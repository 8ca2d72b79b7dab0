//! Drives the built `devboy-test-server` binary with rmcp's client and checks
//! that every tool, knob and notification does what the server promises.

use std::{
    future::Future,
    process::Stdio,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use rmcp::{
    model::{
        object, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
        GetPromptRequestParams, PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
        ReadResourceRequestParams, Request, ResourceContents, Role, ServerNotification,
        SubscriptionFilter,
    },
    service::{NotificationContext, PeerRequestOptions, RunningService},
    transport::TokioChildProcess,
    ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceError, ServiceExt,
};
use serde_json::{json, Value};
use tokio::{io::AsyncWriteExt, process::Command, sync::Notify};

const BIN: &str = env!("CARGO_BIN_EXE_devboy-test-server");
const TIMEOUT: Duration = Duration::from_secs(20);

/// A client that records the notifications the server sends.
#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    list_changed: Arc<AtomicUsize>,
    changed: Arc<Notify>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
        self.changed.notify_waiters();
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

type Client = RunningService<RoleClient, Recorder>;

fn command(envs: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BIN);
    for (key, value) in envs {
        command.env(key, value);
    }
    command
}

async fn start_with(envs: &[(&str, &str)]) -> (Client, u32) {
    let transport = TokioChildProcess::new(command(envs)).expect("spawn devboy-test-server");
    let pid = transport.id().expect("child pid");
    let client = within(Recorder::default().serve(transport))
        .await
        .expect("initialize");
    (client, pid)
}

async fn start() -> Client {
    start_with(&[]).await.0
}

async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .expect("timed out")
}

/// Waits until `done` holds, re-checking whenever the recorder sees a notification.
async fn wait_for(recorder: &Recorder, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        let notified = recorder.changed.notified();
        let _ = tokio::time::timeout(Duration::from_millis(50), notified).await;
    }
}

async fn call(client: &Client, name: &str, args: Value) -> Result<CallToolResult, ServiceError> {
    let params = CallToolRequestParams::new(name.to_string()).with_arguments(object(args));
    within(client.call_tool(params)).await
}

fn text(result: &CallToolResult) -> &str {
    &result.content[0]
        .as_text()
        .expect("first block is text")
        .text
}

#[tokio::test]
async fn lists_every_tool_with_schema_and_description() {
    let client = start().await;
    let tools = within(client.list_all_tools()).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "echo",
            "payload",
            "structured",
            "rich",
            "fail",
            "sleep",
            "crash",
            "add_tool",
            "pid",
            "count",
            "poll",
            "length"
        ]
    );
    for tool in &tools {
        assert!(
            tool.description.is_some(),
            "{} has no description",
            tool.name
        );
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
    }
    let structured = tools.iter().find(|t| t.name == "structured").unwrap();
    let output_schema = structured.output_schema.as_ref().expect("outputSchema");
    assert_eq!(output_schema["required"], json!(["items"]));

    let rich = tools.iter().find(|t| t.name == "rich").unwrap();
    let annotations = rich.annotations.as_ref().expect("annotations");
    assert_eq!(annotations.read_only_hint, Some(true));
    assert_eq!(annotations.title.as_deref(), Some("Rich content"));
    let meta = rich.meta.as_ref().expect("tool _meta");
    assert_eq!(meta.get("anthropic/alwaysLoad"), Some(&json!(true)));
}

#[tokio::test]
async fn echo_returns_the_text() {
    let client = start().await;
    let result = call(&client, "echo", json!({ "text": "héllo wörld" }))
        .await
        .unwrap();
    assert_eq!(text(&result), "héllo wörld");
    assert_ne!(result.is_error, Some(true));
}

#[tokio::test]
async fn payload_has_exactly_the_requested_size() {
    let client = start().await;
    for bytes in [0u64, 1, 27, 4096, 1_000_000] {
        let result = call(&client, "payload", json!({ "bytes": bytes }))
            .await
            .unwrap();
        assert_eq!(result.content.len(), 1);
        let body = text(&result);
        assert_eq!(body.len() as u64, bytes);
        if bytes >= 26 {
            assert!(
                body.starts_with(r#"[{"id":0,"name":"item-0"},"#),
                "{body:.40}"
            );
        }
    }
    // Deterministic: the same size gives the same text.
    let a = call(&client, "payload", json!({ "bytes": 500 }))
        .await
        .unwrap();
    let b = call(&client, "payload", json!({ "bytes": 500 }))
        .await
        .unwrap();
    assert_eq!(text(&a), text(&b));
}

#[tokio::test]
async fn structured_has_structured_content_and_the_same_json_as_text() {
    let client = start().await;
    let result = call(&client, "structured", json!({ "n": 3 }))
        .await
        .unwrap();
    let expected = json!({ "items": [
        { "id": 0, "name": "a0" },
        { "id": 1, "name": "a1" },
        { "id": 2, "name": "a2" }
    ]});
    assert_eq!(result.structured_content, Some(expected.clone()));
    let from_text: Value = serde_json::from_str(text(&result)).unwrap();
    assert_eq!(from_text, expected);
}

#[tokio::test]
async fn rich_carries_every_content_kind_and_meta() {
    let client = start().await;
    let result = call(&client, "rich", json!({})).await.unwrap();
    assert_eq!(result.content.len(), 4);

    let text_block = result.content[0].as_text().expect("text block");
    let annotations = text_block.annotations.as_ref().expect("annotations");
    assert_eq!(annotations.audience, Some(vec![Role::User]));
    assert_eq!(annotations.priority, Some(0.5));

    let image = result.content[1].as_image().expect("image block");
    assert_eq!(image.mime_type, "image/png");
    assert!(image.data.starts_with("iVBORw0KGgo"), "PNG signature");

    let link = result.content[2].as_resource_link().expect("resource_link");
    assert_eq!(link.uri, "test://greeting");

    let embedded = result.content[3].as_resource().expect("embedded resource");
    match &embedded.resource {
        ResourceContents::TextResourceContents { uri, text, .. } => {
            assert_eq!(uri, "test://embedded");
            assert_eq!(text, "embedded hello");
        }
        other => panic!("unexpected embedded resource {other:?}"),
    }

    let meta = result.meta.as_ref().expect("result _meta");
    assert_eq!(meta.get("anthropic/maxResultSizeChars"), Some(&json!(1000)));
    assert_eq!(meta.get("test/key"), Some(&json!("v")));
}

#[tokio::test]
async fn fail_returns_is_error() {
    let client = start().await;
    let result = call(&client, "fail", json!({})).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(!text(&result).is_empty());
}

#[tokio::test]
async fn unknown_tool_and_bad_arguments_are_protocol_errors() {
    let client = start().await;
    assert!(matches!(
        call(&client, "nope", json!({})).await,
        Err(ServiceError::McpError(_))
    ));
    assert!(matches!(
        call(&client, "echo", json!({})).await,
        Err(ServiceError::McpError(_))
    ));
}

#[tokio::test]
async fn sleep_sends_progress_to_the_client() {
    let client = start().await;
    let started = Instant::now();
    let result = call(&client, "sleep", json!({ "ms": 300, "progress_steps": 3 }))
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(text(&result), "slept 300 ms");

    let recorder = client.service().clone();
    wait_for(&recorder, "3 progress notifications", || {
        recorder.progress.lock().unwrap().len() >= 3
    })
    .await;
    let progress = recorder.progress.lock().unwrap().clone();
    assert_eq!(progress.len(), 3);
    for (i, step) in progress.iter().enumerate() {
        assert_eq!(step.progress, (i + 1) as f64);
        assert_eq!(step.total, Some(3.0));
        assert_eq!(
            step.message.as_deref(),
            Some(&*format!("step {} of 3", i + 1))
        );
        assert_eq!(step.progress_token, progress[0].progress_token);
    }
}

#[tokio::test]
async fn sleep_stops_when_cancelled_and_reports_it() {
    let log = std::env::temp_dir().join(format!(
        "devboy-test-server-cancel-{}-{}.log",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let _ = std::fs::remove_file(&log);
    let log_str = log.to_str().unwrap().to_string();
    let (client, _) = start_with(&[("DEVBOY_TEST_CANCEL_LOG", &log_str)]).await;

    let params =
        CallToolRequestParams::new("sleep").with_arguments(object(json!({ "ms": 30_000 })));
    let handle = within(client.send_cancellable_request(
        ClientRequest::CallToolRequest(Request::new(params)),
        PeerRequestOptions::no_options(),
    ))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    within(handle.cancel(Some("test cancels".into())))
        .await
        .unwrap();

    let deadline = Instant::now() + TIMEOUT;
    let line = loop {
        if let Ok(contents) = std::fs::read_to_string(&log) {
            if !contents.is_empty() {
                break contents;
            }
        }
        assert!(
            Instant::now() < deadline,
            "cancellation never reached the server"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(line.starts_with("cancelled"), "{line}");
    let _ = std::fs::remove_file(&log);

    // The server is still healthy afterwards.
    let result = call(&client, "echo", json!({ "text": "still here" }))
        .await
        .unwrap();
    assert_eq!(text(&result), "still here");
}

#[tokio::test]
async fn tools_list_is_paginated_when_page_size_is_set() {
    let (client, _) = start_with(&[("DEVBOY_TEST_PAGE_SIZE", "2")]).await;
    let first = within(client.list_tools(None)).await.unwrap();
    assert_eq!(first.tools.len(), 2);
    assert_eq!(first.next_cursor.as_deref(), Some("2"));

    let second = within(client.list_tools(Some(
        PaginatedRequestParams::default().with_cursor(Some("2".into())),
    )))
    .await
    .unwrap();
    assert_eq!(second.tools[0].name, "structured");
    assert_eq!(second.next_cursor.as_deref(), Some("4"));

    let last = within(client.list_tools(Some(
        PaginatedRequestParams::default().with_cursor(Some("10".into())),
    )))
    .await
    .unwrap();
    assert_eq!(last.tools.len(), 2);
    assert_eq!(last.next_cursor, None);

    let all = within(client.list_all_tools()).await.unwrap();
    assert_eq!(all.len(), 12);

    let bad = within(client.list_tools(Some(
        PaginatedRequestParams::default().with_cursor(Some("bogus".into())),
    )))
    .await;
    assert!(bad.is_err());
}

#[tokio::test]
async fn add_tool_sends_list_changed_and_the_new_tool_echoes() {
    let client = start().await;
    let recorder = client.service().clone();
    let result = call(&client, "add_tool", json!({ "name": "late_tool" }))
        .await
        .unwrap();
    assert_eq!(text(&result), "added");
    wait_for(&recorder, "tools/list_changed", || {
        recorder.list_changed.load(Ordering::SeqCst) >= 1
    })
    .await;

    let tools = within(client.list_all_tools()).await.unwrap();
    assert_eq!(tools.len(), 13);
    assert_eq!(tools.last().unwrap().name, "late_tool");
    let echoed = call(&client, "late_tool", json!({ "text": "from the new tool" }))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "from the new tool");
}

#[tokio::test]
async fn add_tool_reaches_a_2026_listen_subscription() {
    let transport = TokioChildProcess::new(command(&[])).unwrap();
    let client = within(Recorder::default().serve_with_lifecycle(
        transport,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    ))
    .await
    .expect("discover lifecycle");
    let mut subscription = within(
        client
            .peer()
            .listen(SubscriptionFilter::builder().tools_list_changed().build()),
    )
    .await
    .unwrap();
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));

    let result = call(&client, "add_tool", json!({ "name": "modern_tool" }))
        .await
        .unwrap();
    assert_eq!(text(&result), "added");
    let notification = within(subscription.next()).await.unwrap();
    assert!(
        matches!(
            notification,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{notification:?}"
    );
}

#[tokio::test]
async fn pid_and_count_describe_the_process() {
    let (client, pid) = start_with(&[]).await;
    let result = call(&client, "pid", json!({})).await.unwrap();
    assert_eq!(text(&result), pid.to_string());
    call(&client, "echo", json!({ "text": "x" })).await.unwrap();
    let count = call(&client, "count", json!({})).await.unwrap();
    // pid, echo, and count itself.
    assert_eq!(text(&count), "3");
}

#[tokio::test]
async fn crash_closes_the_transport() {
    let client = start().await;
    let outcome = call(&client, "crash", json!({})).await;
    assert!(
        matches!(outcome, Err(ServiceError::TransportClosed)),
        "{outcome:?}"
    );
    within(client.waiting()).await.unwrap();
}

/// Spawns the server with raw pipes, feeds it `lines`, closes its stdin, and
/// waits for it to exit.
async fn run_raw(envs: &[(&str, &str)], lines: &[Value]) -> std::process::Output {
    let mut child = command(envs)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        // The process may already be gone; that is what some tests expect.
        let _ = stdin.write_all(format!("{line}\n").as_bytes()).await;
    }
    drop(stdin);
    within(child.wait_with_output()).await.unwrap()
}

fn handshake() -> Vec<Value> {
    vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "raw", "version": "0" }
        }}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
}

#[tokio::test]
async fn crash_exits_with_the_given_code_without_answering() {
    let mut lines = handshake();
    lines.push(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "crash", "arguments": { "code": 7 } }}));
    let output = run_raw(&[], &lines).await;
    assert_eq!(output.status.code(), Some(7));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains(r#""id":1"#), "{stdout}");
    assert!(
        !stdout.contains(r#""id":2"#),
        "crash must not answer: {stdout}"
    );
}

/// The wire form, not just what rmcp's client makes of it: `_meta` keys and
/// annotations must be on the JSON-RPC lines the server writes.
#[tokio::test]
async fn rich_meta_is_on_the_wire() {
    let mut lines = handshake();
    lines.push(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    lines.push(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": "rich", "arguments": {} }}));
    let output = run_raw(&[], &lines).await;
    assert_eq!(output.status.code(), Some(0));
    let responses: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let by_id = |id: u64| {
        responses
            .iter()
            .find(|message| message["id"] == json!(id))
            .unwrap_or_else(|| panic!("no response {id} in {responses:?}"))
    };
    let tools = by_id(2)["result"]["tools"].as_array().unwrap();
    let rich = tools.iter().find(|tool| tool["name"] == "rich").unwrap();
    assert_eq!(rich["_meta"], json!({ "anthropic/alwaysLoad": true }));
    assert_eq!(rich["annotations"]["readOnlyHint"], json!(true));
    let structured = tools
        .iter()
        .find(|tool| tool["name"] == "structured")
        .unwrap();
    assert!(structured["outputSchema"].is_object());

    let result = &by_id(3)["result"];
    assert_eq!(
        result["_meta"],
        json!({ "anthropic/maxResultSizeChars": 1000, "test/key": "v" })
    );
    let kinds: Vec<&str> = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| block["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["text", "image", "resource_link", "resource"]);
    assert_eq!(
        result["content"][0]["annotations"],
        json!({ "audience": ["user"], "priority": 0.5 })
    );
}

#[tokio::test]
async fn fail_start_exits_1_with_a_message() {
    let output = run_raw(&[("DEVBOY_TEST_FAIL_START", "1")], &handshake()).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("DEVBOY_TEST_FAIL_START"), "{stderr}");
}

#[tokio::test]
async fn startup_delay_postpones_the_handshake() {
    let started = Instant::now();
    let (client, _) = start_with(&[("DEVBOY_TEST_STARTUP_DELAY_MS", "400")]).await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    let result = call(&client, "echo", json!({ "text": "late" }))
        .await
        .unwrap();
    assert_eq!(text(&result), "late");
}

#[tokio::test]
async fn tool_prefix_renames_builtin_tools() {
    let (client, _) = start_with(&[("DEVBOY_TEST_TOOL_PREFIX", "up_")]).await;
    let tools = within(client.list_all_tools()).await.unwrap();
    assert!(tools.iter().all(|tool| tool.name.starts_with("up_")));
    assert_eq!(tools.len(), 12);
    let result = call(&client, "up_echo", json!({ "text": "prefixed" }))
        .await
        .unwrap();
    assert_eq!(text(&result), "prefixed");
    assert!(call(&client, "echo", json!({ "text": "x" })).await.is_err());
}

#[tokio::test]
async fn resources_and_prompts() {
    let client = start().await;
    let resources = within(client.list_all_resources()).await.unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].uri, "test://greeting");

    let greeting = within(client.read_resource(ReadResourceRequestParams::new("test://greeting")))
        .await
        .unwrap();
    match &greeting.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, "hello"),
        other => panic!("unexpected contents {other:?}"),
    }

    let templates = within(client.list_all_resource_templates()).await.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "test://echo/{text}");
    let echoed = within(client.read_resource(ReadResourceRequestParams::new("test://echo/abc")))
        .await
        .unwrap();
    match &echoed.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, "abc"),
        other => panic!("unexpected contents {other:?}"),
    }
    assert!(
        within(client.read_resource(ReadResourceRequestParams::new("test://missing")))
            .await
            .is_err()
    );

    let prompts = within(client.list_all_prompts()).await.unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].name, "greet");
    let prompt = within(client.get_prompt(
        GetPromptRequestParams::new("greet").with_arguments(object(json!({ "name": "Ada" }))),
    ))
    .await
    .unwrap();
    assert_eq!(prompt.messages.len(), 1);
    match &prompt.messages[0].content {
        ContentBlock::Text(text) => assert_eq!(text.text, "Hello, Ada!"),
        other => panic!("unexpected prompt content {other:?}"),
    }
}

#[tokio::test]
async fn the_relay_delays_each_response_and_passes_it_unchanged() {
    let mut relay = Command::new(BIN);
    relay.args(["relay", "--delay-ms", "300", "--", BIN]);
    let client = within(Recorder::default().serve(TokioChildProcess::new(relay).unwrap()))
        .await
        .expect("initialize through the relay");
    let started = Instant::now();
    let echoed = call(&client, "echo", json!({"text": "through"}))
        .await
        .unwrap();
    let one = started.elapsed();
    assert_eq!(text(&echoed), "through");
    assert!(one >= Duration::from_millis(300), "{one:?}");
    // Three at once, each answered unchanged. (That they overlap, latency
    // rather than a queue, is checked on a paused clock in relay.rs.)
    let calls = (0..3).map(|i| call(&client, "echo", json!({"text": i.to_string()})));
    let results = futures::future::join_all(calls).await;
    for (i, result) in results.into_iter().enumerate() {
        assert_eq!(text(&result.unwrap()), i.to_string());
    }
    client.cancel().await.unwrap();
}
