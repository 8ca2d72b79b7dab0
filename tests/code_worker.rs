//! `devboy code-worker`: one code-mode run in a process of its own,
//! spoken to as devboy will (one JSON object a line): its tool calls
//! answered over the pipe with numbers exact, a native builtin that never
//! yields ended by the watchdog, and a closed pipe ending a spinning run.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");

fn worker() -> Child {
    Command::new(DEVBOY)
        .arg("code-worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start devboy code-worker")
}

fn send(child: &mut Child, line: &Value) {
    let stdin = child.stdin.as_mut().expect("stdin");
    writeln!(stdin, "{line}").expect("write a line");
    stdin.flush().expect("flush");
}

fn run_line(code: &str, timeout_ms: u64) -> Value {
    json!({"run": {"code": code, "limits": {"timeout_ms": timeout_ms}}})
}

#[test]
fn tool_calls_cross_the_pipe_with_their_numbers_as_written() {
    let mut child = worker();
    send(
        &mut child,
        &run_line(
            "const a = await tools.t.get({n: 12345678901234567891n}); \
             let failed = ''; try { await tools.call('t__bad', {}); } catch (e) { failed = e.message; } \
             console.log('seen', a.price); return {a, failed};",
            5_000,
        ),
    );
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut asked = Vec::new();
    let end = loop {
        let line: Value =
            serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("JSON");
        if let Some(call) = line.get("call") {
            asked.push((call["name"].clone(), call["arguments"].clone()));
            let answer = if call["name"] == "t__get" {
                json!({"answer": {"id": call["id"], "json": r#"{"id":98765432109876543210,"price":10.50}"#}})
            } else {
                json!({"answer": {"id": call["id"], "error": "t__bad may write"}})
            };
            send(&mut child, &answer);
            continue;
        }
        break line;
    };
    assert_eq!(
        asked,
        [
            (json!("t__get"), json!(r#"{"n":12345678901234567891}"#)),
            (json!("t__bad"), json!("{}")),
        ]
    );
    assert_eq!(
        end,
        json!({"done": {
            "value": r#"{"a":{"id":98765432109876543210,"price":10.50},"failed":"t__bad may write"}"#,
            "logs": ["seen 10.5"],
            "calls": 2,
        }})
    );
    assert!(child.wait().expect("exit").success());
}

#[test]
fn a_builtin_that_never_yields_is_ended_by_the_watchdog() {
    let mut child = worker();
    let started = Instant::now();
    send(
        &mut child,
        &run_line(
            "return Array.prototype.join.call({length: 2 ** 32 - 1}, '').length;",
            500,
        ),
    );
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let end: Value =
        serde_json::from_str(&lines.next().expect("an end").expect("read")).expect("JSON");
    assert_eq!(end["failed"]["kind"], "timeout", "{end}");
    let status = child.wait().expect("exit");
    let took = started.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_millis(2_500), "{took:?}");
}

#[test]
fn a_closed_pipe_cancels_a_spinning_run() {
    let mut child = worker();
    send(&mut child, &run_line("for (;;) {}", 30_000));
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    drop(child.stdin.take());
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let end: Value =
        serde_json::from_str(&lines.next().expect("an end").expect("read")).expect("JSON");
    assert_eq!(end["failed"]["kind"], "cancelled", "{end}");
    assert!(child.wait().expect("exit").success());
    assert!(started.elapsed() < Duration::from_secs(2));
}
