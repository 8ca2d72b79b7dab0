//! The call stack's layers together, driven through [`Session::call`]
//! against a real upstream (`devboy-test-server`), without an MCP client: built-in
//! tools from a registry, the answer store, the upstream, and the seam
//! after each.

#[path = "support/proxy.rs"]
mod support_proxy;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use devboy_core::call::ResolvedCall;
use devboy_core::speculation::Served;
use devboy_mcp::seam::ProcessError;
use devboy_mcp::{
    AnswerStore, BuiltinRegistry, BuiltinTool, EventSink, Memory, PendingCall, Proxy, Session,
    SessionEvent, StoredAnswer, Transform,
};
use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use rmcp::ErrorData as McpError;
use serde_json::json;
use support_proxy::{start_proxy, test_server};
use tokio_util::sync::CancellationToken;

/// A proxy with the test server as upstream `t`, listing `builtins`, and
/// the built-ins its sessions serve.
fn proxy(builtins: BuiltinRegistry) -> (Arc<Proxy>, BuiltinRegistry) {
    let text = format!(
        "[servers.t]\ncommand = {:?}\n",
        test_server().display().to_string()
    );
    (start_proxy(&text, &builtins), builtins)
}

/// A processor that writes down what it is shown and marks what it
/// processes, so a test can see the seam ran.
#[derive(Default)]
struct Recorder {
    log: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn entries(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Transform for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    fn process(
        &self,
        call: &ResolvedCall,
        result: &CallToolResult,
        _handoff: &devboy_mcp::seam::Handoff,
    ) -> Result<Option<CallToolResult>, ProcessError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("process {} of {}", call.exposed, call.upstream()));
        let text = text_of(result);
        Ok(Some(CallToolResult::success(vec![ContentBlock::text(
            format!("processed: {text}"),
        )])))
    }
}

impl EventSink for Recorder {
    fn record(&self, event: SessionEvent<'_>) {
        let line = match event {
            SessionEvent::Call(call) => format!("before_call {}", call.exposed),
            SessionEvent::ErrorResult(call, _) => format!("error {}", call.exposed),
            _ => return,
        };
        self.log.lock().unwrap().push(line);
    }
}

/// A session whose results pass through `recorder`, which hears its events.
fn recorded(proxy: &Arc<Proxy>, builtins: &BuiltinRegistry, recorder: &Arc<Recorder>) -> Session {
    Session::builder(proxy.clone(), builtins.clone(), recorder.clone())
        .events(recorder.clone())
        .build()
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn args(value: serde_json::Value) -> Option<JsonObject> {
    value.as_object().cloned()
}

fn upstream_calls(proxy: &Proxy) -> u64 {
    proxy.upstreams()[0].stats.calls.load(Ordering::Relaxed)
}

/// A built-in that exists only in this test: it echoes `text` and then
/// asks upstream `t` to echo it too, through the call path.
struct EchoTwice;

impl BuiltinTool for EchoTwice {
    fn definition(&self) -> Tool {
        let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        Tool::new(
            "devboy_echo_twice",
            "Test only: echoes `text`, then has upstream `t` echo it.",
            Arc::new(schema.as_object().cloned().unwrap()),
        )
    }

    fn call<'a>(
        &'a self,
        context: devboy_mcp::builtin::BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        Box::pin(async move {
            let text = context.str_argument("text").unwrap_or_default().to_owned();
            let upstream = context
                .call_tool("t__echo", args(json!({"text": text})))
                .await?;
            let builtin = context.call_tool("devboy_status", None).await;
            assert!(builtin.is_err(), "a built-in calls upstream tools only");
            Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "{text} | {}",
                text_of(&upstream)
            ))]))
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_builtin_is_one_type_and_one_registry_line() {
    let (proxy, builtins) = proxy(BuiltinRegistry::shipped().with(EchoTwice));
    let recorder = Arc::new(Recorder::default());
    let session = recorded(&proxy, &builtins, &recorder);

    // Listed after the shipped tools; the shipped registry does not have it.
    let names: Vec<String> = proxy
        .catalog()
        .tools
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        names[..9],
        [
            "devboy_status",
            "devboy_servers",
            "devboy_compact",
            "devboy_expand",
            "devboy_explore",
            "devboy_find_files",
            "devboy_find_tools",
            "devboy_run",
            "devboy_echo_twice"
        ]
    );
    assert!(BuiltinRegistry::shipped()
        .tools()
        .iter()
        .all(|t| t.definition().name != "devboy_echo_twice"));

    let result = session
        .call(PendingCall::new(
            "devboy_echo_twice",
            args(json!({"text": "hi"})),
        ))
        .await
        .expect("call");
    // The upstream's result went through the seam inside the built-in,
    // and the built-in's own result went through it after.
    assert_eq!(text_of(&result), "processed: hi | processed: hi");
    assert_eq!(
        recorder.entries(),
        [
            "before_call t__echo",
            "process t__echo of t",
            "process devboy_echo_twice of devboy"
        ]
    );
    assert_eq!(upstream_calls(&proxy), 1);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shipped_builtins_are_delivered_as_they_declare() {
    let (proxy, builtins) = proxy(BuiltinRegistry::shipped());
    let recorder = Arc::new(Recorder::default());
    let session = recorded(&proxy, &builtins, &recorder);

    // Status and compact: JSON reports, never rewritten.
    let status = session
        .call(PendingCall::new("devboy_status", None))
        .await
        .expect("status");
    let report: serde_json::Value = serde_json::from_str(&text_of(&status)).expect("JSON");
    assert_eq!(report["upstreams"][0]["name"], "t");
    let compact = session
        .call(PendingCall::new("devboy_compact", None))
        .await
        .expect("compact");
    assert_eq!(text_of(&compact), r#"{"context_partition":1}"#);
    // Expand: exactly what the pipeline answers, as it is (here, that the
    // session has no pipeline to emit ids), neither processed nor heard.
    let expanded = session
        .call(PendingCall::new(
            "devboy_expand",
            args(json!({"id": "kafrum12"})),
        ))
        .await
        .expect("expand");
    assert_eq!(
        text_of(&expanded),
        "devboy: this session's pipeline emits no ids"
    );
    assert!(recorder.entries().is_empty(), "{:?}", recorder.entries());
    assert_eq!(session.seam().stats().processed.load(Ordering::Relaxed), 0);
    proxy.shutdown().await;
}

/// Holds one answer for `name` with `arguments`; any other call that may
/// mutate drops it.
struct OneAnswer {
    held: Mutex<Option<(String, Option<JsonObject>, CallToolResult)>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Memory for OneAnswer {
    fn name(&self) -> &'static str {
        "the test store"
    }

    fn forget_call(&self, call: &ResolvedCall) {
        self.log
            .lock()
            .unwrap()
            .push(format!("store sees {}", call.exposed));
        let mut held = self.held.lock().unwrap();
        let other = held
            .as_ref()
            .is_some_and(|(name, ..)| *name != call.exposed);
        if other && call.side_effect.may_mutate() {
            *held = None;
        }
    }
}

impl AnswerStore for OneAnswer {
    fn answer<'a>(
        &'a self,
        call: &'a ResolvedCall,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<StoredAnswer>> {
        let held = self.held.lock().unwrap();
        let answer = held.as_ref().and_then(|(name, arguments, result)| {
            (*name == call.exposed && *arguments == call.arguments).then(|| StoredAnswer {
                result: result.clone(),
                served: Served::Prefetch,
            })
        });
        Box::pin(async move { answer })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_answer_store_answers_before_the_upstream_and_hears_every_call_first() {
    let (proxy, builtins) = proxy(BuiltinRegistry::shipped());
    let recorder = Arc::new(Recorder::default());
    let store = Arc::new(OneAnswer {
        held: Mutex::new(Some((
            "t__echo".into(),
            args(json!({"text": "hi"})),
            CallToolResult::success(vec![ContentBlock::text("stored")]),
        ))),
        log: recorder.log.clone(),
    });
    let session = Session::builder(proxy.clone(), builtins, recorder.clone())
        .events(recorder.clone())
        .answer_store(store.clone())
        .memory(store)
        .build();
    let echo = |text: &str| PendingCall::new("t__echo", args(json!({"text": text})));

    // Answered by the store, through the seam, without the upstream.
    let answered = session.call(echo("hi")).await.expect("call");
    assert_eq!(text_of(&answered), "processed: stored");
    assert_eq!(upstream_calls(&proxy), 0);
    assert_eq!(
        recorder.entries(),
        [
            "before_call t__echo",
            "store sees t__echo",
            "process t__echo of t"
        ]
    );
    // Other arguments: the upstream answers.
    let other = session.call(echo("other")).await.expect("call");
    assert_eq!(text_of(&other), "processed: other");
    assert_eq!(upstream_calls(&proxy), 1);
    // A call that may mutate makes the store drop its answer.
    session
        .call(PendingCall::new("t__pid", None))
        .await
        .expect("call");
    let again = session.call(echo("hi")).await.expect("call");
    assert_eq!(text_of(&again), "processed: hi");
    assert_eq!(upstream_calls(&proxy), 3);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_store_the_upstream_answers_and_failures_map_as_before() {
    let (proxy, builtins) = proxy(BuiltinRegistry::shipped());
    let recorder = Arc::new(Recorder::default());
    let session = recorded(&proxy, &builtins, &recorder);

    let result = session
        .call(PendingCall::new("t__echo", args(json!({"text": "up"}))))
        .await
        .expect("call");
    assert_eq!(text_of(&result), "processed: up");
    assert_eq!(upstream_calls(&proxy), 1);
    // An isError result is heard of, never processed.
    let failed = session
        .call(PendingCall::new("t__fail", None))
        .await
        .expect("call");
    assert_eq!(failed.is_error, Some(true));
    assert!(recorder.entries().contains(&"error t__fail".to_owned()));
    // The upstream's own protocol error passes as it was.
    let refused = session
        .call(PendingCall::new("t__echo", None))
        .await
        .expect_err("echo needs text");
    assert_eq!(refused.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    // A name the catalog does not have is explained.
    let unknown = session
        .call(PendingCall::new("t__nope", None))
        .await
        .expect_err("unknown");
    assert_eq!(
        unknown.message,
        "unknown tool `t__nope`: server `t` has no tool `nope`"
    );
    proxy.shutdown().await;
}

/// A store with a bug.
struct Panics;

impl AnswerStore for Panics {
    fn answer<'a>(
        &'a self,
        call: &'a ResolvedCall,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<StoredAnswer>> {
        // A panic while answering; one while asked is caught the same way.
        if call.exposed == "t__pid" {
            panic!("store bug, sync")
        }
        Box::pin(async { panic!("store bug, async") })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_that_panics_leaves_the_call_to_the_upstream() {
    let (proxy, builtins) = proxy(BuiltinRegistry::shipped());
    let session = Session::builder(proxy.clone(), builtins, Arc::new(devboy_mcp::Passthrough))
        .answer_store(Arc::new(Panics))
        .build();
    let result = session
        .call(PendingCall::new(
            "t__echo",
            args(json!({"text": "still here"})),
        ))
        .await
        .expect("call");
    assert_eq!(text_of(&result), "still here");
    assert_eq!(upstream_calls(&proxy), 1);
    let pid = session
        .call(PendingCall::new("t__pid", None))
        .await
        .expect("call");
    assert_ne!(pid.is_error, Some(true));
    assert_eq!(upstream_calls(&proxy), 2);
    proxy.shutdown().await;
}

/// A test-only built-in whose call panics (a bug in a built-in).
struct PanickingTool;

impl BuiltinTool for PanickingTool {
    fn definition(&self) -> Tool {
        let schema = json!({"type": "object"});
        Tool::new(
            "devboy_panics",
            "Test only: panics.",
            Arc::new(schema.as_object().cloned().unwrap()),
        )
    }

    fn call<'a>(
        &'a self,
        _context: devboy_mcp::builtin::BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        Box::pin(async move { panic!("a bug in a built-in") })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_builtin_that_panics_answers_with_an_error_and_the_session_goes_on() {
    let (proxy, builtins) = proxy(BuiltinRegistry::shipped().with(PanickingTool));
    let session = Session::builder(proxy.clone(), builtins, Arc::new(Recorder::default())).build();
    let result = session
        .call(PendingCall::new("devboy_panics", None))
        .await
        .expect("an answer, not a protocol error");
    assert_eq!(result.is_error, Some(true));
    assert!(text_of(&result).contains("devboy_panics: failed inside devboy"));
    let status = session
        .call(PendingCall::new("devboy_status", None))
        .await
        .expect("status after the panic");
    assert_ne!(status.is_error, Some(true));
    proxy.shutdown().await;
}
