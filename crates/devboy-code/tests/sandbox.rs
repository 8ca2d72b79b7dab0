//! The sandbox alone, with a fake host: what a script can do, what it
//! cannot, and each limit ending a run as the error that names it.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use devboy_code::{run, Answer, Finished, Host, Limits, RunError, THREAD_STACK_BYTES};

/// Answers each call from a table (by tool name), in call order; records
/// what it was asked.
#[derive(Default)]
struct Table {
    answers: Vec<(&'static str, Answer)>,
    asked: Vec<(String, String)>,
    queue: VecDeque<(u64, Answer)>,
}

impl Host for Table {
    fn send(&mut self, id: u64, name: &str, arguments: &str) {
        self.asked.push((name.to_owned(), arguments.to_owned()));
        let answer = self
            .answers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, a)| a.clone())
            .unwrap_or_else(|| Answer::Error(format!("no tool {name}")));
        self.queue.push_back((id, answer));
    }

    fn next(&mut self, until: Instant) -> Option<(u64, Answer)> {
        let answer = self.queue.pop_front();
        if answer.is_none() {
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
        }
        answer
    }
}

/// Runs `code` on a thread of its own, as devboy's worker does.
fn script(
    code: &str,
    limits: Limits,
    host: Table,
) -> (Result<Finished, RunError>, Table, Duration) {
    let code = code.to_owned();
    std::thread::Builder::new()
        .stack_size(THREAD_STACK_BYTES)
        .spawn(move || {
            let mut host = host;
            let started = Instant::now();
            let outcome = run(&code, &limits, &mut host, &Arc::new(AtomicBool::new(false)));
            (outcome, host, started.elapsed())
        })
        .expect("a thread")
        .join()
        .expect("the run does not panic")
}

fn quick() -> Limits {
    Limits {
        timeout: Duration::from_secs(1),
        ..Limits::default()
    }
}

fn value(outcome: Result<Finished, RunError>) -> String {
    outcome.expect("a value").value
}

#[test]
fn a_script_returns_a_value_and_logs() {
    let (outcome, _, _) = script(
        "console.log('a', 1, {b: 2}); return {sum: [1,2,3].reduce((a, b) => a + b)};",
        quick(),
        Table::default(),
    );
    let finished = outcome.expect("a value");
    assert_eq!(finished.value, r#"{"sum":6}"#);
    assert_eq!(finished.logs, [r#"a 1 {"b":2}"#]);
    let (outcome, _, _) = script("return 'text as it is';", quick(), Table::default());
    assert_eq!(value(outcome), "text as it is");
}

#[test]
fn tools_are_called_by_prefix_or_name_in_parallel_and_errors_throw() {
    let host = Table {
        answers: vec![
            ("fs__read", Answer::Json(r#"{"text":"hello"}"#.into())),
            ("git__log", Answer::Json(r#"[1,2,3]"#.into())),
            ("fs__write", Answer::Error("fs__write may write".into())),
        ],
        ..Table::default()
    };
    let (outcome, host, _) = script(
        r#"
        const [file, log] = await Promise.all([
            tools.fs.read({path: "/a"}),
            tools.call("git__log", {n: 3}),
        ]);
        let refused = "";
        try { await tools.fs.write({}); } catch (e) { refused = e.message; }
        return {text: file.text, commits: log.length, refused};
        "#,
        quick(),
        host,
    );
    assert_eq!(
        value(outcome),
        r#"{"text":"hello","commits":3,"refused":"fs__write may write"}"#
    );
    assert_eq!(
        host.asked,
        [
            ("fs__read".to_owned(), r#"{"path":"/a"}"#.to_owned()),
            ("git__log".to_owned(), r#"{"n":3}"#.to_owned()),
            ("fs__write".to_owned(), "{}".to_owned()),
        ]
    );
}

#[test]
fn numbers_pass_through_as_the_upstream_wrote_them() {
    let exact = r#"{"id":12345678901234567891,"price":10.50,"tiny":1e-400,"n":7}"#;
    let host = Table {
        answers: vec![("t__get", Answer::Json(exact.into()))],
        ..Table::default()
    };
    let (outcome, _, _) = script("return await tools.t.get({});", quick(), host);
    assert_eq!(value(outcome), exact);
}

#[test]
fn a_thrown_error_and_a_syntax_error_name_the_line_of_the_code() {
    let (outcome, _, _) = script(
        "const a = 1;\nthrow new TypeError('no');",
        quick(),
        Table::default(),
    );
    assert_eq!(
        outcome,
        Err(RunError::Script("TypeError: no (line 2)".into()))
    );
    let (outcome, _, _) = script("return (;", quick(), Table::default());
    let Err(RunError::Script(message)) = outcome else {
        panic!("a syntax error: {outcome:?}");
    };
    assert!(message.contains("SyntaxError"), "{message}");
}

#[test]
fn nothing_but_tools_and_console_is_there() {
    let (outcome, _, _) = script(
        "return [typeof require, typeof process, typeof fetch, typeof performance, \
         typeof setTimeout, typeof std, typeof os, typeof __host_call].join(',');",
        quick(),
        Table::default(),
    );
    assert_eq!(
        value(outcome),
        "undefined,undefined,undefined,undefined,undefined,undefined,undefined,undefined"
    );
    for code in [
        "return await import('fs');",
        "return require('fs');",
        "return eval(\"import('os')\");",
    ] {
        let (outcome, _, _) = script(code, quick(), Table::default());
        assert!(
            matches!(outcome, Err(RunError::Script(_))),
            "{code}: {outcome:?}"
        );
    }
}

#[test]
fn an_endless_loop_ends_at_the_time_limit() {
    for code in [
        "for (;;) {}",
        "for (;;) { try { for (;;) {} } catch (e) {} }",
        "await 1; while (true) {}",
    ] {
        let (outcome, _, took) = script(code, quick(), Table::default());
        assert_eq!(
            outcome,
            Err(RunError::Timeout(Duration::from_secs(1))),
            "{code}"
        );
        assert!(took < Duration::from_millis(1900), "{code}: {took:?}");
    }
}

#[test]
fn a_memory_bomb_ends_at_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 16 * 1024 * 1024,
        ..quick()
    };
    let (outcome, _, _) = script(
        "let a = []; for (;;) a.push(new Array(100000).fill(1));",
        limits,
        Table::default(),
    );
    assert_eq!(outcome, Err(RunError::Memory(16 * 1024 * 1024)));
}

#[test]
fn endless_recursion_is_a_stack_error_not_a_crash() {
    let (outcome, _, _) = script(
        "function f() { return f() + 1; } return f();",
        quick(),
        Table::default(),
    );
    let Err(RunError::Script(message)) = outcome else {
        panic!("a script error: {outcome:?}");
    };
    assert!(message.contains("stack"), "{message}");
}

#[test]
fn more_calls_than_allowed_end_the_run() {
    let host = Table {
        answers: vec![("t__x", Answer::Json("1".into()))],
        ..Table::default()
    };
    let limits = Limits {
        max_calls: 5,
        ..quick()
    };
    let (outcome, host, _) = script(
        "for (let i = 0; i < 10; i++) await tools.t.x({i}); return 'done';",
        limits,
        host,
    );
    assert_eq!(outcome, Err(RunError::TooManyCalls(5)));
    assert_eq!(host.asked.len(), 5, "the sixth never reached the host");
}

#[test]
fn output_past_its_limit_ends_the_run() {
    let limits = Limits {
        max_output_bytes: 1000,
        ..quick()
    };
    let (outcome, _, _) = script(
        "for (let i = 0; i < 100; i++) console.log('x'.repeat(50)); return 1;",
        limits,
        Table::default(),
    );
    assert_eq!(outcome, Err(RunError::OutputTooLarge(1000)));
    let (outcome, _, _) = script("return 'y'.repeat(2000);", limits, Table::default());
    assert_eq!(outcome, Err(RunError::OutputTooLarge(1000)));
}

#[test]
fn a_cancel_ends_a_spinning_script() {
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let runner = std::thread::Builder::new()
        .stack_size(THREAD_STACK_BYTES)
        .spawn(move || {
            let mut host = Table::default();
            let limits = Limits::default();
            let started = Instant::now();
            (
                run("for (;;) {}", &limits, &mut host, &flag),
                started.elapsed(),
            )
        })
        .expect("a thread");
    std::thread::sleep(Duration::from_millis(300));
    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
    let (outcome, took) = runner.join().expect("no panic");
    assert_eq!(outcome, Err(RunError::Cancelled));
    assert!(took < Duration::from_secs(2), "{took:?}");
}
