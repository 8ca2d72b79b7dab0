//! Code mode (`devboy_run`) through the real devboy, its real
//! `code-worker` child and real upstreams (the test server; the real
//! `server-filesystem` for the read-only rule): only the script's answer
//! reaches the model, a script calls only read-only tools, every limit
//! ends its script as an `isError` result naming the `[code]` key, and a
//! runaway or crashed script never stalls another call or devboy.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{peer_toml, text_of, Devboy, RawClient, TempDir};
use devboy_testkit::peers;
use rmcp::model::CallToolResult;
use serde_json::{json, Value};

/// The test server under prefix `t`, with `extra` devboy.toml lines.
fn config(extra: &str) -> String {
    format!("[servers.t]\ncommand = \"{{server}}\"\n\n{extra}")
}

/// The test server's tools a script reads with, declared read-only (the
/// test server annotates none of them); `crash`, `sleep` and the rest stay
/// unknown, which may write.
const READ_ONLY: &str = "schema_version = 3\n\
[tools.\"t__echo\"]\nside_effect = \"read_only\"\n\
[tools.\"t__structured\"]\nside_effect = \"read_only\"\n\
[tools.\"t__payload\"]\nside_effect = \"read_only\"\n\
[tools.\"t__count\"]\nside_effect = \"read_only\"\n\
[tools.\"t__fail\"]\nside_effect = \"read_only\"\n";

async fn run(devboy: &Devboy, code: &str) -> CallToolResult {
    devboy.call("devboy_run", json!({ "code": code })).await
}

fn failed(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_script_joins_tool_results_and_only_its_answer_reaches_the_model() {
    let devboy = Devboy::start_with_pipeline(&config(""), READ_ONLY).await;
    let result = run(
        &devboy,
        "const list = await tools.t.structured({n: 40});\n\
         const picked = list.items.filter(i => i.id % 10 === 0).map(i => i.name);\n\
         const echoed = await tools.call('t__echo', {text: 'plain words'});\n\
         console.log('picked', picked.length);\n\
         return {picked, echoed};",
    )
    .await;
    assert!(!failed(&result), "{result:?}");
    let text = text_of(&result);
    assert_eq!(
        text, "picked 4\n{\"picked\":[\"a0\",\"a10\",\"a20\",\"a30\"],\"echoed\":\"plain words\"}",
        "the logs, then the value; a text that is not JSON arrives as a string"
    );
    // An error result throws, with the upstream's text.
    let caught = run(
        &devboy,
        "try { await tools.t.fail({}); } catch (e) { return 'caught: ' + e.message; }",
    )
    .await;
    assert!(text_of(&caught).starts_with("caught: the `fail` tool always fails"));
}

#[tokio::test(flavor = "multi_thread")]
async fn numbers_the_script_passes_through_keep_the_upstreams_text() {
    let devboy = Devboy::start_with_pipeline(&config(""), READ_ONLY).await;
    let body = r#"{"id":12345678901234567890,"price":0.1000000000000000055511151231257827,"big":1e400,"n":7}"#;
    let code = format!(
        "const r = await tools.t.echo({{text: {}}});\n\
         return {{id: r.id, price: r.price, big: r.big, next: r.n + 1}};",
        serde_json::to_string(body).unwrap()
    );
    let result = run(&devboy, &code).await;
    assert_eq!(
        text_of(&result),
        r#"{"id":12345678901234567890,"price":0.1000000000000000055511151231257827,"big":1e400,"next":8}"#
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_name_the_line_of_the_models_code() {
    let devboy = Devboy::start_with_pipeline(&config(""), READ_ONLY).await;
    let thrown = run(&devboy, "const a = 1;\nconst b = null;\nreturn b.x;").await;
    assert!(failed(&thrown));
    assert_eq!(
        text_of(&thrown),
        "devboy_run: TypeError: cannot read property 'x' of null (line 3)"
    );
    // A failure inside a tool call's own machinery is on the line that
    // made the call, not in devboy's prelude.
    let circular = run(&devboy, "const a = {};\na.a = a;\nawait tools.t.echo(a);").await;
    assert!(failed(&circular));
    assert!(
        text_of(&circular).ends_with("(line 3)"),
        "{}",
        text_of(&circular)
    );
    let syntax = run(&devboy, "return [1, 2;").await;
    assert!(failed(&syntax));
    assert!(
        text_of(&syntax).starts_with("devboy_run: SyntaxError: "),
        "{}",
        text_of(&syntax)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_that_may_write_is_refused_before_the_upstream_sees_it() {
    let devboy = Devboy::start_with_pipeline(&config(""), READ_ONLY).await;
    let pid = text_of(&devboy.call("t__pid", json!({})).await);
    let before: u64 = text_of(&devboy.call("t__count", json!({})).await)
        .parse()
        .unwrap();
    // `crash` is of no known class: it may write, and would end the server.
    let result = run(
        &devboy,
        "try { await tools.t.crash({}); return 'called'; } catch (e) { return e.message; }",
    )
    .await;
    assert_eq!(
        text_of(&result),
        "t__crash may write (its class is unknown); devboy_run calls only read-only tools (allow it in devboy's config: `[code] allow = [\"t__crash\"]`, in JSON `\"code\": {\"allow\": [\"t__crash\"]}`)"
    );
    let after: u64 = text_of(&devboy.call("t__count", json!({})).await)
        .parse()
        .unwrap();
    assert_eq!(
        after,
        before + 1,
        "only the count call itself reached the server"
    );
    assert_eq!(text_of(&devboy.call("t__pid", json!({})).await), pid);
    // Nor may a script reach a built-in that changes anything, or itself.
    let builtins = run(
        &devboy,
        "const out = [];\n\
         for (const f of [() => tools.devboy.compact({}), () => tools.devboy.run({code: 'return 1'})]) {\n\
           try { await f(); out.push('ran'); } catch (e) { out.push(e.message.split(' ').slice(0, 3).join(' ')); }\n\
         }\n\
         return out;",
    )
    .await;
    assert_eq!(
        text_of(&builtins),
        r#"["devboy_compact may write","devboy_run cannot call"]"#
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_lets_a_script_call_a_tool_that_may_write() {
    let devboy =
        Devboy::start_with_pipeline(&config("[code]\nallow = [\"t__len*\"]\n"), READ_ONLY).await;
    let result = run(&devboy, "return await tools.t.length({text: 'four'});").await;
    assert_eq!(text_of(&result), "4");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_tool_of_a_real_server_is_refused_and_nothing_is_written() {
    let root = TempDir::new("code-fs");
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    std::fs::write(root_path.join("a.txt"), "alpha\n").unwrap();
    let devboy = Devboy::start(&peer_toml("fs", &peers::server_filesystem(&root_path))).await;
    let target = root_path.join("b.txt");
    let code = format!(
        "const read = await tools.fs.read_text_file({{path: {a}}});\n\
         let wrote;\n\
         try {{ await tools.fs.write_file({{path: {b}, content: 'x'}}); wrote = 'wrote'; }}\n\
         catch (e) {{ wrote = e.message; }}\n\
         return {{read: read.content, wrote}};",
        a = serde_json::to_string(&root_path.join("a.txt")).unwrap(),
        b = serde_json::to_string(&target).unwrap(),
    );
    let result = run(&devboy, &code).await;
    let answer: Value = serde_json::from_str(&text_of(&result)).expect("JSON answer");
    assert_eq!(answer["read"], "alpha\n", "{answer}");
    assert!(
        answer["wrote"]
            .as_str()
            .unwrap()
            .starts_with("fs__write_file may write (its class is "),
        "{answer}"
    );
    assert!(!target.exists(), "the server never saw the write");
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_script_read_is_not_held_by_the_model() {
    let devboy = Devboy::start_with_pipeline(&config(""), READ_ONLY).await;
    let args = json!({"bytes": 6000});
    let inside = run(
        &devboy,
        "const r = await tools.t.payload({bytes: 6000}); return r.length;",
    )
    .await;
    assert_eq!(text_of(&inside), "6000");
    // The model's own first call of it is whole: no reference to what only
    // the script saw.
    let first = text_of(&devboy.call("t__payload", args.clone()).await);
    assert!(first.len() >= 6000, "whole: {} bytes", first.len());
    // Its second is a reference (the control: the pipeline does hold what
    // the model saw).
    let second = text_of(&devboy.call("t__payload", args).await);
    assert!(
        second.len() < 1000,
        "the model's repeat is a reference: {second}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn api_lists_the_functions_a_script_may_call() {
    let devboy = Devboy::start_with_pipeline(&config(""), READ_ONLY).await;
    let listing = text_of(&run(&devboy, "return api();").await);
    for line in [
        "t.echo(a: {text: string})  // Returns the given text unchanged.",
        "t.structured(a: {n: number}): {items: ({id: number, name: string})[]}",
        "devboy.find_files(a: {query: string, root?: string, k?: number})",
    ] {
        assert!(listing.contains(line), "{line} in:\n{listing}");
    }
    for hidden in ["t.crash(", "devboy.run(", "devboy.compact("] {
        assert!(
            !listing.contains(hidden),
            "{hidden} is not callable:\n{listing}"
        );
    }
    let filtered = text_of(&run(&devboy, "return api('echo');").await);
    assert_eq!(
        filtered,
        "// 1 functions; call as `await tools.<server>.<tool>(a)`\nt.echo(a: {text: string})  // Returns the given text unchanged.\n"
    );
}

/// A server that keeps its names (`prefix = ""`): its tools are listed and
/// called on `tools` itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_tool_under_its_own_name_is_called_on_tools() {
    let read_only = "schema_version = 3\n[tools.\"echo\"]\nside_effect = \"read_only\"\n";
    let devboy = Devboy::start_with_pipeline(&config("prefix = \"\"\n"), read_only).await;
    let listing = text_of(&run(&devboy, "return api('echo');").await);
    assert!(
        listing.contains("`tools.<tool>(a)` where no server is shown")
            && listing.contains("\necho(a: {text: string})"),
        "{listing}"
    );
    let said = run(&devboy, "return (await tools.echo({text: 'own name'}));").await;
    assert!(!failed(&said), "{}", text_of(&said));
    assert_eq!(text_of(&said), "own name");
}

/// Each limit ends its script with an error naming its `[code]` key (or
/// what the sandbox refuses).
#[tokio::test(flavor = "multi_thread")]
async fn every_limit_and_refused_capability_is_an_error_result() {
    let devboy = Devboy::start_with_pipeline(
        &config("[code]\ntimeout_secs = 2\nmemory_mib = 32\nmax_output_bytes = 100000\n"),
        READ_ONLY,
    )
    .await;
    let cases = [
        ("while (true) {}", "past its 2 s limit (`[code] timeout_secs`)"),
        (
            "const a = []; while (true) a.push('x'.repeat(1 << 16) + a.length);",
            "(`[code] memory_mib`)",
        ),
        ("const f = (n) => f(n + 1) + 1; return f(0);", "Maximum call stack size exceeded"),
        (
            "for (let i = 0; i < 201; i++) await tools.t.echo({text: 'x'});",
            "more than 200 tool calls (`[code] max_calls`)",
        ),
        (
            "return 'y'.repeat(200000);",
            "passed 100000 bytes (`[code] max_output_bytes`)",
        ),
        ("await import('fs'); return 1;", "could not load module 'fs'"),
        ("return require('fs');", "require is not defined"),
        ("return typeof process + typeof fetch + typeof setTimeout + typeof performance + typeof std + typeof os;", ""),
        ("return await eval(\"import('os')\");", "could not load module 'os'"),
        ("return await new Function('return import(\"os\")')();", "could not load module 'os'"),
    ];
    for (code, says) in cases {
        let started = Instant::now();
        let result = run(&devboy, code).await;
        let text = text_of(&result);
        if says.is_empty() {
            assert_eq!(text, "undefined".repeat(6), "{code}");
            continue;
        }
        assert!(failed(&result), "{code}: {text}");
        assert!(text.contains(says), "{code}: {text}");
        assert!(
            started.elapsed() < Duration::from_secs(3 + 1),
            "{code} ended within 1 s of its limit ({:?})",
            started.elapsed()
        );
    }
}

/// Processes whose parent is `parent` and whose command line has
/// `code-worker`.
fn workers_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains("code-worker") {
            found.push(pid);
        }
    }
    found
}

async fn wait_for_worker(parent: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = workers_of(parent).first() {
            return *pid;
        }
        assert!(
            Instant::now() < deadline,
            "no code-worker child within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn run_request(id: i64, code: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "devboy_run", "arguments": {"code": code}}})
}

fn response_text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {response}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn devboy_answers_ping_and_other_calls_while_a_script_spins() {
    let mut client =
        RawClient::start(&config("[code]\ntimeout_secs = 3\nallow = [\"t__*\"]\n")).await;
    client.send(run_request(10, "while (true) {}")).await;
    let worker = wait_for_worker(client.pid()).await;
    let started = Instant::now();
    client
        .send(json!({"jsonrpc": "2.0", "id": 11, "method": "ping"}))
        .await;
    let pong = client.recv_response(11).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    let echo = client
        .call_tool(12, "t__echo", json!({"text": "meanwhile"}))
        .await;
    assert_eq!(response_text(&echo), "meanwhile");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered while the script spins ({:?})",
        started.elapsed()
    );
    let spun = client.recv_response(10).await;
    assert_eq!(spun["result"]["isError"], json!(true), "{spun}");
    assert!(response_text(&spun).contains("past its 3 s limit"));
    assert!(
        common::wait_process_gone(worker).await,
        "the worker is gone"
    );
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_engine_is_an_error_result_and_devboy_goes_on() {
    let mut client = RawClient::start(&config("[code]\nallow = [\"t__*\"]\n")).await;
    client
        .send(run_request(
            20,
            "await tools.t.sleep({ms: 20000}); return 'slept';",
        ))
        .await;
    let worker = wait_for_worker(client.pid()).await;
    // The engine dies the hardest way there is.
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &worker.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let crashed = client.recv_response(20).await;
    assert_eq!(crashed["result"]["isError"], json!(true), "{crashed}");
    assert!(
        response_text(&crashed).contains("engine crashed"),
        "{crashed}"
    );
    let after = client
        .call_tool(21, "devboy_run", json!({"code": "return 1 + 1"}))
        .await;
    assert_eq!(response_text(&after), "2", "the next script runs");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_run_ends_the_script_and_its_calls_in_flight() {
    let logs = TempDir::new("code-cancel");
    let cancel_log = logs.path().join("cancelled.log");
    let mut client = RawClient::start(&format!(
        "[servers.t]\ncommand = \"{{server}}\"\nenv = {{ DEVBOY_TEST_CANCEL_LOG = {} }}\n\n[code]\nallow = [\"t__*\"]\n",
        common::toml_str(&cancel_log.display().to_string())
    ))
    .await;
    let before: u64 = response_text(&client.call_tool(29, "t__count", json!({})).await)
        .parse()
        .unwrap();
    client
        .send(run_request(
            30,
            "await Promise.all([tools.t.sleep({ms: 30000}), tools.t.sleep({ms: 30000})]); return 'slept';",
        ))
        .await;
    let worker = wait_for_worker(client.pid()).await;
    // Both sleeps reached the server.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut id = 31;
    loop {
        let count: u64 = response_text(&client.call_tool(id, "t__count", json!({})).await)
            .parse()
            .unwrap();
        id += 1;
        if count >= before + 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sleeps never reached the server"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancelled_at = Instant::now();
    client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 30, "reason": "test"}}),
        )
        .await;
    assert!(
        common::wait_process_gone(worker).await,
        "the worker is gone"
    );
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(2),
        "within a second or so of the cancel ({:?})",
        cancelled_at.elapsed()
    );
    // Both sleeps were cancelled at the server, not left to run.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&cancel_log).map_or(0, |t| t.lines().count()) < 2 {
        assert!(
            Instant::now() < deadline,
            "the server heard {:?} of 2 cancels",
            std::fs::read_to_string(&cancel_log).ok()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let echo = client
        .call_tool(id, "t__echo", json!({"text": "after"}))
        .await;
    assert_eq!(response_text(&echo), "after");
    client.stop().await;
}

/// A script that stops waiting for calls it made (`Promise.race`) and
/// ends with a large value: devboy goes on writing the big answers the
/// worker no longer wants while the worker writes its end. Neither may
/// wait on the other.
#[tokio::test(flavor = "multi_thread")]
async fn big_answers_nobody_waits_for_and_a_big_end_do_not_deadlock() {
    let devboy = Devboy::start_with_pipeline(&config(""), READ_ONLY).await;
    let started = Instant::now();
    let result = run(
        &devboy,
        "const reads = [1, 2, 3, 4].map(() => tools.t.payload({bytes: 2000000}));\n\
         await Promise.race(reads);\n\
         return 'x'.repeat(900000);",
    )
    .await;
    assert!(!failed(&result), "{}", text_of(&result));
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_more_than_max_in_flight_calls_of_a_run_at_once() {
    let devboy = Devboy::start(&config("[code]\nmax_in_flight = 2\nallow = [\"t__*\"]\n")).await;
    let started = Instant::now();
    let result = run(
        &devboy,
        "const all = []; for (let i = 0; i < 6; i++) all.push(tools.t.sleep({ms: 300}));\n\
         await Promise.all(all); return 'ok';",
    )
    .await;
    assert_eq!(text_of(&result), "ok");
    // Three rounds of two: never six at once (which would take 300 ms).
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn disabled_code_mode_lists_no_devboy_run() {
    let devboy = Devboy::start(&config("[code]\nenabled = false\n")).await;
    let names = devboy.tool_names().await;
    assert!(!names.iter().any(|n| n == "devboy_run"), "{names:?}");
    assert!(names.iter().any(|n| n == "t__echo"));
}

#[tokio::test(flavor = "multi_thread")]
async fn telemetry_records_a_run_with_its_counts_and_never_its_code() {
    let telemetry = TempDir::new("code-telemetry");
    let devboy = Devboy::start_full(
        &config(""),
        "devboy.toml",
        &[],
        Some(READ_ONLY),
        &[("DEVBOY_TELEMETRY_DIR", telemetry.path().as_os_str())],
    )
    .await;
    let code = "const canary = 'CANARY-CODE-7731';\n\
                const a = await tools.t.payload({bytes: 4000});\n\
                const b = await tools.t.payload({bytes: 3000});\n\
                try { await tools.t.crash({}); } catch (e) {}\n\
                return a.length + b.length;";
    assert_eq!(text_of(&run(&devboy, code).await), "7000");
    let Devboy { client, dir, .. } = devboy;
    let _ = client.cancel().await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let events = loop {
        let events = common::events(telemetry.path());
        if events.iter().any(|e| e["kind"] == "session") {
            break events;
        }
        assert!(Instant::now() < deadline, "no session summary");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(dir);
    let runs: Vec<&Value> = events.iter().filter(|e| e["kind"] == "code_run").collect();
    assert_eq!(runs.len(), 1, "{events:?}");
    let run = runs[0];
    assert_eq!(run["calls"], 3);
    assert_eq!(run["refused_calls"], 1);
    assert_eq!(run["end"], "done");
    let direct = run["direct_tokens"].as_u64().unwrap();
    let shown = run["code_tokens"].as_u64().unwrap() + run["answer_tokens"].as_u64().unwrap();
    assert!(direct > 10 * shown, "direct {direct} against shown {shown}");
    let all = files_text(&telemetry.path().join("events"));
    assert!(
        !all.contains("CANARY-CODE-7731"),
        "the code is never written"
    );
}

fn files_text(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
    }
    text
}

/// `devboy eval code-mode` on this checkout, through the real
/// `server-filesystem`, `mcp-server-git` and `server-memory`: code mode's
/// answers are the direct ones, at a tenth of the tokens or less, on the
/// tuning and the validation set alike.
#[test]
fn the_eval_gives_the_same_answers_at_a_tenth_of_the_direct_tokens() {
    let repo = peers::workspace_root();
    let scratch = TempDir::new("code-eval");
    let config = format!(
        "{}{}{}",
        peer_toml("fs", &peers::server_filesystem(&repo)),
        peer_toml("git", &peers::server_git(&repo)),
        peer_toml(
            "memory",
            &peers::server_memory(&scratch.path().join("memory.jsonl"))
        ),
    );
    let config_path = scratch.path().join("devboy.toml");
    std::fs::write(&config_path, config).unwrap();
    let output = std::process::Command::new(common::devboy_bin())
        .args(["eval", "code-mode", "--format", "json", "--config"])
        .arg(&config_path)
        .arg("--repo")
        .arg(&repo)
        .output()
        .expect("run devboy eval code-mode");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).expect("JSON report");
    let sets = report["sets"].as_array().expect("sets");
    assert_eq!(sets.len(), 2, "{report:#}");
    for set in sets {
        let tasks = set["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 4, "{set:#}");
        for task in tasks {
            assert_eq!(task["answers_same"], true, "{task:#}");
            assert!(
                task["answer"].as_array().is_some_and(|a| !a.is_empty()),
                "a real answer: {task:#}"
            );
        }
        let ratio = set["code_ratio"].as_f64().unwrap();
        assert!(ratio <= 0.1, "{}: code mode at {ratio}×", set["set"]);
    }
}
