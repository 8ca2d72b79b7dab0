//! The speculation engine end to end, driven through [`Session::call`]
//! against real upstreams (`@modelcontextprotocol/server-filesystem` and
//! `devboy-test-server`), with a planner of fixed edges
//! ([`support::edges::FixedEdges`]): these tests pin down the engine, not a
//! planner.

#[path = "support/edges.rs"]
mod edges;
#[path = "support/proxy.rs"]
mod support_proxy;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use devboy_core::call::ResolvedCall;
use devboy_core::speculation::{PrefetchEnd, SpeculationEvent};
use devboy_mcp::seam::ProcessError;
use devboy_mcp::{
    BuiltinRegistry, EventSink, PendingCall, Proxy, Session, SessionBuilder, SessionEvent,
    SpeculationSettings, Transform,
};
use edges::{always, each_line, FixedEdges};
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::{json, Value};
use support_proxy::{start_proxy, test_server};

/// The test server as upstream `t`, logging cancellations to `cancel_log`.
fn test_proxy(cancel_log: &Path) -> Arc<Proxy> {
    start_proxy(
        &format!(
            "[servers.t]\ncommand = {:?}\nenv = {{ DEVBOY_TEST_CANCEL_LOG = {:?} }}\n",
            test_server().display().to_string(),
            cancel_log.display().to_string()
        ),
        &BuiltinRegistry::shipped(),
    )
}

/// server-filesystem over `root` as upstream `fs`.
fn fs_proxy(root: &Path) -> Arc<Proxy> {
    let peer = devboy_testkit::peers::server_filesystem(root);
    start_proxy(
        &format!(
            "[servers.fs]\ncommand = {:?}\nargs = [{:?}]\n",
            peer.program_str(),
            root.display().to_string()
        ),
        &BuiltinRegistry::shipped(),
    )
}

/// A processor that passes every result unchanged and writes down where
/// each came from and what speculation reported.
#[derive(Default)]
struct Watcher {
    log: Mutex<Vec<String>>,
}

impl Watcher {
    fn entries(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn has(&self, line: &str) -> bool {
        self.entries().iter().any(|e| e == line)
    }
}

impl Transform for Watcher {
    fn name(&self) -> &'static str {
        "watcher"
    }

    fn process(
        &self,
        call: &ResolvedCall,
        _result: &CallToolResult,
        _handoff: &devboy_mcp::seam::Handoff,
    ) -> Result<Option<CallToolResult>, ProcessError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{} served {}", call.exposed, call.served.name()));
        Ok(None)
    }
}

impl EventSink for Watcher {
    fn record(&self, event: SessionEvent<'_>) {
        let SessionEvent::Speculation {
            call,
            event,
            result,
        } = event
        else {
            return;
        };
        let what = match event {
            SpeculationEvent::Dispatched { .. } => "dispatched".to_owned(),
            SpeculationEvent::Declined { reason } => format!("declined {}", reason.name()),
            SpeculationEvent::Ended { end, .. } => format!(
                "ended {}{}",
                end.name(),
                if result.is_some() { " with result" } else { "" }
            ),
        };
        self.log
            .lock()
            .unwrap()
            .push(format!("{} {what}", call.exposed));
    }
}

/// A session whose results pass through `watcher`, which hears its events.
fn watched(proxy: &Arc<Proxy>, watcher: &Arc<Watcher>) -> SessionBuilder {
    Session::builder(proxy.clone(), BuiltinRegistry::shipped(), watcher.clone())
        .events(watcher.clone())
}

/// [`watched`], speculating as `planner` says, with the tools it takes
/// as read-only classed so.
fn speculating(proxy: &Arc<Proxy>, watcher: &Arc<Watcher>, planner: FixedEdges) -> Session {
    watched(proxy, watcher)
        .classes(planner.classes())
        .speculation(Arc::new(planner))
        .build()
}

fn args(value: Value) -> Option<JsonObject> {
    value.as_object().cloned()
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn upstream_calls(proxy: &Proxy) -> u64 {
    proxy.upstreams()[0].stats.calls.load(Ordering::Relaxed)
}

/// Waits until `done` holds, at most 10 s.
async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn settings(change: impl FnOnce(&mut SpeculationSettings)) -> SpeculationSettings {
    let mut settings = SpeculationSettings::default();
    change(&mut settings);
    settings
}

fn files(dir: &Path) {
    for (name, text) in [("a.txt", "alpha\n"), ("b.txt", "bravo\n"), ("c.md", "no")] {
        std::fs::write(dir.join(name), text).expect("write file");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hit_is_the_upstream_result_byte_for_byte_and_the_upstream_is_called_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("root");
    files(&root);
    let proxy = fs_proxy(&root);
    let watcher = Arc::new(Watcher::default());
    let planner =
        FixedEdges::new().edge("fs__search_files", each_line("fs__read_text_file", "path"));
    let session = speculating(&proxy, &watcher, planner);
    let engine = session.speculation().expect("engine").clone();

    let search = args(json!({"path": root, "pattern": "*.txt"}));
    let found = session
        .call(PendingCall::new("fs__search_files", search))
        .await
        .expect("search");
    let hits: Vec<String> = text_of(&found).lines().map(str::to_owned).collect();
    assert_eq!(hits.len(), 2, "{hits:?}");
    until("both prefetches land", || {
        engine.stats().dispatched.load(Ordering::Relaxed) == 2 && engine.in_flight() == 0
    })
    .await;
    assert_eq!(upstream_calls(&proxy), 3);

    // A session without speculation on a second server gives the direct
    // answer to compare with.
    let direct_proxy = fs_proxy(&root);
    let direct = Session::builder(
        direct_proxy.clone(),
        BuiltinRegistry::shipped(),
        Arc::new(devboy_mcp::Passthrough),
    )
    .build();
    for hit in &hits {
        let read = || PendingCall::new("fs__read_text_file", args(json!({"path": hit})));
        let served = session.call(read()).await.expect("read");
        let upstream = direct.call(read()).await.expect("direct read");
        assert_eq!(
            serde_json::to_vec(&served).unwrap(),
            serde_json::to_vec(&upstream).unwrap()
        );
    }
    assert_eq!(upstream_calls(&proxy), 3, "no read went upstream again");
    let served: Vec<String> = watcher
        .entries()
        .into_iter()
        .filter(|e| e.contains(" served "))
        .collect();
    assert_eq!(
        served,
        [
            "fs__search_files served upstream",
            "fs__read_text_file served prefetch",
            "fs__read_text_file served prefetch"
        ]
    );
    assert_eq!(engine.stats().ended(PrefetchEnd::Used), 2);
    assert_eq!(engine.held(), (0, 0), "a used entry leaves the store");
    // The next identical call is the dedup cache's job, not the store's.
    session
        .call(PendingCall::new(
            "fs__read_text_file",
            args(json!({"path": hits[0]})),
        ))
        .await
        .expect("read again");
    assert_eq!(upstream_calls(&proxy), 4);

    // Status shows it.
    let status = session
        .call(PendingCall::new("devboy_status", None))
        .await
        .expect("status");
    let status: Value = serde_json::from_str(&text_of(&status)).expect("json");
    let speculation = &status["session"]["speculation"];
    assert_eq!(speculation["enabled"], true);
    assert_eq!(speculation["mode"], "prefetch");
    assert_eq!(speculation["dispatched"], 2);
    assert_eq!(speculation["hits"], 2);
    assert_eq!(speculation["wasted"]["expired"], 0);
    assert_eq!(speculation["in_flight"], 0);
    session.end_speculation().await;
    proxy.shutdown().await;
    direct_proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_joins_a_prefetch_in_flight_without_a_second_upstream_call() {
    let log = tempfile::NamedTempFile::new().expect("log");
    let proxy = test_proxy(log.path());
    let watcher = Arc::new(Watcher::default());
    let planner = FixedEdges::new()
        .edge("t__echo", always("t__sleep", json!({"ms": 700})))
        .read_only("t__sleep");
    let session = speculating(&proxy, &watcher, planner);

    session
        .call(PendingCall::new("t__echo", args(json!({"text": "go"}))))
        .await
        .expect("echo");
    tokio::time::sleep(Duration::from_millis(250)).await;
    let slept = session
        .call(PendingCall::new("t__sleep", args(json!({"ms": 700}))))
        .await
        .expect("sleep");
    assert_ne!(slept.is_error, Some(true), "{slept:?}");
    // Joined, not sent again: one upstream sleep, served as joined.
    assert_eq!(upstream_calls(&proxy), 2, "echo and one sleep");
    assert!(
        watcher.has("t__sleep served joined"),
        "{:?}",
        watcher.entries()
    );
    assert!(watcher.has("t__sleep ended joined with result"));
    session.end_speculation().await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_between_prefetch_and_call_sends_the_call_upstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("root");
    files(&root);
    let file = root.join("a.txt").display().to_string();
    let proxy = fs_proxy(&root);
    let watcher = Arc::new(Watcher::default());
    let planner = FixedEdges::new().edge("fs__list_directory", always_read(file.clone()));
    let session = speculating(&proxy, &watcher, planner);
    let engine = session.speculation().expect("engine").clone();

    session
        .call(PendingCall::new(
            "fs__list_directory",
            args(json!({"path": root})),
        ))
        .await
        .expect("list");
    until("the read lands", || {
        engine.stats().dispatched.load(Ordering::Relaxed) == 1 && engine.in_flight() == 0
    })
    .await;
    let wrote = session
        .call(PendingCall::new(
            "fs__write_file",
            args(json!({"path": file, "content": "changed"})),
        ))
        .await
        .expect("write");
    assert_ne!(wrote.is_error, Some(true), "{wrote:?}");
    let read = session
        .call(PendingCall::new(
            "fs__read_text_file",
            args(json!({"path": file})),
        ))
        .await
        .expect("read");
    assert_eq!(text_of(&read), "changed");
    assert!(watcher.has("fs__read_text_file ended invalidated with result"));
    assert!(watcher.has("fs__read_text_file served upstream"));
    assert_eq!(upstream_calls(&proxy), 4, "list, prefetch, write, read");
    session.end_speculation().await;
    proxy.shutdown().await;
}

fn always_read(path: String) -> edges::Follow {
    Box::new(move |_, _| {
        vec![(
            "fs__read_text_file".to_owned(),
            args(json!({"path": path})).unwrap_or_default(),
        )]
    })
}

/// A session whose `t__echo` is followed by a 20-second `t__sleep`
/// prefetch (allowed 30 s), the server logging cancellations: the echo is
/// called, and the prefetch has reached the server (so it can be cancelled
/// there).
struct Slow {
    log: tempfile::NamedTempFile,
    proxy: Arc<Proxy>,
    watcher: Arc<Watcher>,
    session: Session,
    engine: Arc<devboy_mcp::speculation::SpeculationEngine>,
}

async fn slow_prefetch() -> Slow {
    let log = tempfile::NamedTempFile::new().expect("log");
    let proxy = test_proxy(log.path());
    let watcher = Arc::new(Watcher::default());
    let planner = FixedEdges {
        settings: settings(|s| s.prefetch_timeout = Duration::from_secs(30)),
        ..FixedEdges::new()
            .edge("t__echo", always("t__sleep", json!({"ms": 20_000})))
            .read_only("t__sleep")
    };
    let session = speculating(&proxy, &watcher, planner);
    let engine = session.speculation().expect("engine").clone();
    session
        .call(PendingCall::new("t__echo", args(json!({"text": "go"}))))
        .await
        .expect("echo");
    until("the server got the sleep", || upstream_calls(&proxy) == 2).await;
    Slow {
        log,
        proxy,
        watcher,
        session,
        engine,
    }
}

/// Waits until the test server has logged the cancelled 20-second sleep.
async fn server_logs_the_cancellation(log: &tempfile::NamedTempFile) {
    until("the server logs the cancellation", || {
        std::fs::read_to_string(log.path()).is_ok_and(|l| l.contains("sleep ms=20000"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_end_of_the_session_cancels_prefetches_in_flight_upstream() {
    let Slow {
        log,
        proxy,
        watcher,
        session,
        engine,
    } = slow_prefetch().await;
    assert_eq!(engine.in_flight(), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Cancelled, not awaited: it ends long before the 20-second sleep
    // could have (the server's log below says it was cancelled there).
    tokio::time::timeout(Duration::from_secs(15), session.end_speculation())
        .await
        .expect("the session's end waits for no prefetch to finish");
    assert_eq!(engine.in_flight(), 0, "no orphan work");
    assert!(
        watcher.has("t__sleep ended session_ended"),
        "{:?}",
        watcher.entries()
    );
    server_logs_the_cancellation(&log).await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_call_cancelled_while_joined_cancels_the_prefetch_upstream() {
    let Slow {
        log,
        proxy,
        watcher,
        session,
        engine,
    } = slow_prefetch().await;
    let call = PendingCall::new("t__sleep", args(json!({"ms": 20_000})));
    let cancel = call.ct.clone();
    let joined = tokio::spawn({
        let session = session.clone();
        async move { session.call(call).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    cancel.cancel();
    let answered = tokio::time::timeout(Duration::from_secs(5), joined)
        .await
        .expect("answered at once")
        .expect("task");
    assert!(answered.is_err(), "a cancelled request: {answered:?}");
    assert!(
        watcher.has("t__sleep ended cancelled"),
        "{:?}",
        watcher.entries()
    );
    server_logs_the_cancellation(&log).await;
    until("nothing in flight", || engine.in_flight() == 0).await;
    assert_eq!(upstream_calls(&proxy), 2, "no second sleep");
    assert_eq!(engine.stats().ended(PrefetchEnd::Joined), 0);
    session.end_speculation().await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_crash_during_a_prefetch_still_answers_the_agent() {
    let log = tempfile::NamedTempFile::new().expect("log");
    let proxy = test_proxy(log.path());
    let watcher = Arc::new(Watcher::default());
    let planner = FixedEdges::new()
        .edge("t__echo", always("t__sleep", json!({"ms": 1500})))
        .read_only("t__sleep");
    let session = speculating(&proxy, &watcher, planner);

    session
        .call(PendingCall::new("t__echo", args(json!({"text": "go"}))))
        .await
        .expect("echo");
    let crasher = session.clone();
    let crash = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        crasher
            .call(PendingCall::new("t__crash", None))
            .await
            .map(|r| r.is_error)
    });
    let slept = session
        .call(PendingCall::new("t__sleep", args(json!({"ms": 1500}))))
        .await
        .expect("sleep answered");
    assert_ne!(slept.is_error, Some(true), "{slept:?}");
    let _ = crash.await;
    assert!(
        watcher.has("t__sleep served upstream"),
        "{:?}",
        watcher.entries()
    );
    assert!(
        watcher.has("t__sleep ended upstream_restarted"),
        "{:?}",
        watcher.entries()
    );
    session.end_speculation().await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn prefetch_errors_and_timeouts_never_reach_the_agent() {
    let log = tempfile::NamedTempFile::new().expect("log");
    let proxy = test_proxy(log.path());
    let watcher = Arc::new(Watcher::default());
    let planner = FixedEdges {
        settings: settings(|s| s.prefetch_timeout = Duration::from_millis(300)),
        ..FixedEdges::new()
            .edge("t__echo", always("t__sleep", json!({"ms": 1200})))
            .edge("t__length", always("t__fail", json!({})))
            .read_only("t__sleep")
            .read_only("t__fail")
    };
    let session = speculating(&proxy, &watcher, planner);
    let engine = session.speculation().expect("engine").clone();

    // An isError prefetch is dropped: the agent's call goes upstream.
    session
        .call(PendingCall::new("t__length", args(json!({"text": "abc"}))))
        .await
        .expect("length");
    until("the failing prefetch ends", || {
        engine.stats().ended(PrefetchEnd::Failed) == 1
    })
    .await;
    let failed = session
        .call(PendingCall::new("t__fail", None))
        .await
        .expect("fail");
    assert_eq!(failed.is_error, Some(true), "the upstream's own answer");
    assert_eq!(
        upstream_calls(&proxy),
        3,
        "length, the prefetch, the agent's call"
    );

    // A prefetch past its timeout is cancelled upstream and dropped.
    session
        .call(PendingCall::new("t__echo", args(json!({"text": "go"}))))
        .await
        .expect("echo");
    until("the slow prefetch times out", || {
        engine.stats().ended(PrefetchEnd::TimedOut) == 1
    })
    .await;
    until("the server logs the cancellation", || {
        std::fs::read_to_string(log.path()).is_ok_and(|l| l.contains("sleep ms=1200"))
    })
    .await;
    let slept = session
        .call(PendingCall::new("t__sleep", args(json!({"ms": 1200}))))
        .await
        .expect("sleep");
    assert_ne!(slept.is_error, Some(true));
    assert!(watcher.has("t__sleep served upstream"));
    assert!(!watcher
        .entries()
        .iter()
        .any(|e| e.contains("served prefetch")));
    session.end_speculation().await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fail_fast_answers_a_call_that_keeps_coming_back_empty_until_the_context_changes() {
    let log = tempfile::NamedTempFile::new().expect("log");
    let proxy = test_proxy(log.path());
    let watcher = Arc::new(Watcher::default());
    let planner = FixedEdges {
        fail_fast: vec![("t__echo".into(), 2)],
        ..FixedEdges::new()
    };
    let session = speculating(&proxy, &watcher, planner);
    let empty = || PendingCall::new("t__echo", args(json!({"text": "  "})));

    for _ in 0..2 {
        session.call(empty()).await.expect("echo");
    }
    assert_eq!(upstream_calls(&proxy), 2);
    let hint = session.call(empty()).await.expect("echo");
    assert_eq!(
        text_of(&hint),
        "> [fail-fast: the last 2 identical calls came back empty; change the arguments]"
    );
    assert_eq!(upstream_calls(&proxy), 2, "answered without the upstream");
    assert!(watcher.has("t__echo served fail_fast"));
    // Other arguments are another call.
    let other = session
        .call(PendingCall::new("t__echo", args(json!({"text": "x"}))))
        .await
        .expect("echo");
    assert_eq!(text_of(&other), "x");
    // A compaction starts the count over.
    session
        .call(PendingCall::new("devboy_compact", None))
        .await
        .expect("compact");
    session.call(empty()).await.expect("echo");
    assert_eq!(upstream_calls(&proxy), 4);
    let status = session
        .call(PendingCall::new("devboy_status", None))
        .await
        .expect("status");
    let status: Value = serde_json::from_str(&text_of(&status)).expect("json");
    assert_eq!(status["session"]["speculation"]["fail_fast"], 1);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_planner_every_call_goes_upstream_as_before() {
    let log = tempfile::NamedTempFile::new().expect("log");
    let proxy = test_proxy(log.path());
    let watcher = Arc::new(Watcher::default());
    let session = watched(&proxy, &watcher).build();
    assert!(session.speculation().is_none());
    for _ in 0..3 {
        session
            .call(PendingCall::new("t__echo", args(json!({"text": ""}))))
            .await
            .expect("echo");
    }
    assert_eq!(upstream_calls(&proxy), 3);
    assert_eq!(watcher.entries(), vec!["t__echo served upstream"; 3]);
    let status = session
        .call(PendingCall::new("devboy_status", None))
        .await
        .expect("status");
    let status: Value = serde_json::from_str(&text_of(&status)).expect("json");
    assert_eq!(status["session"]["speculation"], json!({"enabled": false}));
    session.end_speculation().await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_engine_never_prefetches_a_tool_that_may_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("root");
    files(&root);
    let proxy = fs_proxy(&root);
    let watcher = Arc::new(Watcher::default());
    let target = root.join("new.txt").display().to_string();
    let planner = FixedEdges::new().edge(
        "fs__list_directory",
        Box::new(move |_, _| {
            vec![(
                "fs__write_file".to_owned(),
                args(json!({"path": target, "content": "x"})).unwrap_or_default(),
            )]
        }),
    );
    let session = speculating(&proxy, &watcher, planner);
    session
        .call(PendingCall::new(
            "fs__list_directory",
            args(json!({"path": root})),
        ))
        .await
        .expect("list");
    assert!(watcher.has("fs__write_file declined not_read_only"));
    assert_eq!(upstream_calls(&proxy), 1);
    assert!(!root.join("new.txt").exists());
    session.end_speculation().await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_store_is_bounded_and_stale_results_expire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("root");
    files(&root);
    std::fs::write(root.join("c.txt"), "charlie\n").expect("write");
    let proxy = fs_proxy(&root);
    let watcher = Arc::new(Watcher::default());
    let planner = FixedEdges {
        settings: settings(|s| {
            s.per_host = 3;
            s.max_entries = 2;
            s.ttl = Duration::from_millis(300);
        }),
        ..FixedEdges::new().edge("fs__search_files", each_line("fs__read_text_file", "path"))
    };
    let session = speculating(&proxy, &watcher, planner);
    let engine = session.speculation().expect("engine").clone();

    session
        .call(PendingCall::new(
            "fs__search_files",
            args(json!({"path": root, "pattern": "*.txt"})),
        ))
        .await
        .expect("search");
    until("three prefetches land", || {
        engine.stats().dispatched.load(Ordering::Relaxed) == 3 && engine.in_flight() == 0
    })
    .await;
    assert_eq!(engine.held().0, 2, "at most two entries");
    assert_eq!(engine.stats().ended(PrefetchEnd::Evicted), 1);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let read = session
        .call(PendingCall::new(
            "fs__read_text_file",
            args(json!({"path": root.join("c.txt")})),
        ))
        .await
        .expect("read");
    assert_eq!(text_of(&read), "charlie\n");
    assert!(watcher.has("fs__read_text_file served upstream"));
    assert_eq!(
        engine.stats().ended(PrefetchEnd::Expired),
        2,
        "swept on access"
    );
    assert_eq!(engine.held(), (0, 0));
    session.end_speculation().await;
    proxy.shutdown().await;
}
