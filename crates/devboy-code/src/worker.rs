//! The worker: one run in a process of its own (`devboy code-worker`), so
//! that nothing the engine does can take devboy down, and a run that will
//! not end can be killed.
//!
//! One JSON object a line each way. devboy writes the run first, then
//! answers and at most one cancel; the worker writes calls, then one end:
//!
//! ```text
//! → {"run": {"code": "...", "limits": {"timeout_ms": 30000, "memory_bytes": …,
//!            "stack_bytes": …, "max_calls": 200, "max_output_bytes": …}}}
//! ← {"call": {"id": 1, "name": "fs__read_text_file", "arguments": "{\"path\":\"/a\"}"}}
//! → {"answer": {"id": 1, "json": "{…}"}}      or {"answer": {"id": 1, "error": "…"}}
//! → {"cancel": true}
//! ← {"done": {"value": "…", "logs": ["…"], "calls": 3}}
//! ← {"failed": {"kind": "timeout", "message": "…"}}
//! ```
//!
//! Arguments and results cross as JSON *text*, so their numbers stay as
//! written. A watchdog thread ends the process with a `timeout` end a
//! quarter second past the limit, for the native builtins that never poll
//! the engine's interrupt handler; devboy's kill after that is the last
//! resort. Closing the worker's stdin cancels the run.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{run, Answer, Host, Limits, RunError, THREAD_STACK_BYTES};

/// How long past the limit the watchdog waits for the engine to end a run
/// itself.
pub const WATCHDOG_GRACE: Duration = Duration::from_millis(250);

/// The kind a `failed` end names, for each error.
pub fn kind(error: &RunError) -> &'static str {
    match error {
        RunError::Script(_) => "script",
        RunError::Timeout(_) => "timeout",
        RunError::Memory(_) => "memory",
        RunError::TooManyCalls(_) => "calls",
        RunError::OutputTooLarge(_) => "output",
        RunError::Cancelled => "cancelled",
    }
}

/// The `limits` object of a `run` line, and back.
pub fn limits_json(limits: &Limits) -> Value {
    json!({
        "timeout_ms": limits.timeout.as_millis() as u64,
        "memory_bytes": limits.memory_bytes,
        "stack_bytes": limits.stack_bytes,
        "max_calls": limits.max_calls,
        "max_output_bytes": limits.max_output_bytes,
    })
}

fn limits_of(value: &Value) -> Limits {
    let default = Limits::default();
    let number = |key: &str| value.get(key).and_then(Value::as_u64);
    Limits {
        timeout: number("timeout_ms").map_or(default.timeout, Duration::from_millis),
        memory_bytes: number("memory_bytes").map_or(default.memory_bytes, |n| n as usize),
        stack_bytes: number("stack_bytes")
            .map_or(default.stack_bytes, |n| n as usize)
            .min(THREAD_STACK_BYTES / 2),
        max_calls: number("max_calls").unwrap_or(default.max_calls),
        max_output_bytes: number("max_output_bytes")
            .map_or(default.max_output_bytes, |n| n as usize),
    }
}

/// What devboy's lines become for the run.
enum Incoming {
    Answer(u64, Answer),
}

/// The host of a run in the worker: calls go out as lines, answers come in
/// from the reader thread.
struct LineHost<W: Write> {
    out: Arc<Mutex<W>>,
    answers: Receiver<Incoming>,
}

impl<W: Write> Host for LineHost<W> {
    fn send(&mut self, id: u64, name: &str, arguments: &str) {
        let line = json!({"call": {"id": id, "name": name, "arguments": arguments}});
        write_line(&self.out, &line);
    }

    fn next(&mut self, until: Instant) -> Option<(u64, Answer)> {
        let wait = until.saturating_duration_since(Instant::now());
        match self.answers.recv_timeout(wait) {
            Ok(Incoming::Answer(id, answer)) => Some((id, answer)),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }
}

fn write_line<W: Write>(out: &Mutex<W>, line: &Value) {
    let mut out = out
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The worker's end line for `outcome`.
pub fn end_line(outcome: &Result<crate::Finished, RunError>) -> Value {
    match outcome {
        Ok(finished) => json!({"done": {
            "value": finished.value,
            "logs": finished.logs,
            "calls": finished.calls,
        }}),
        Err(error) => json!({"failed": {"kind": kind(error), "message": error.to_string()}}),
    }
}

/// Serves one run on `input` and `output` (the process's stdin and
/// stdout), then returns; the caller exits.
pub fn serve<R, W>(input: R, output: W) -> std::io::Result<()>
where
    R: BufRead + Send + 'static,
    W: Write + Send + 'static,
{
    let out = Arc::new(Mutex::new(output));
    let mut lines = input.lines();
    let first = match lines.next() {
        Some(line) => line?,
        None => return Ok(()),
    };
    let request: Value = match serde_json::from_str(&first) {
        Ok(value) => value,
        Err(error) => {
            write_line(
                &out,
                &json!({"failed": {"kind": "protocol", "message": format!("the first line is not JSON: {error}")}}),
            );
            return Ok(());
        }
    };
    let Some(code) = request.pointer("/run/code").and_then(Value::as_str) else {
        write_line(
            &out,
            &json!({"failed": {"kind": "protocol", "message": "the first line is not a run"}}),
        );
        return Ok(());
    };
    let code = code.to_owned();
    let limits = limits_of(request.pointer("/run/limits").unwrap_or(&Value::Null));
    let cancel = Arc::new(AtomicBool::new(false));
    let (answers, received) = std::sync::mpsc::channel();
    let cancelled = cancel.clone();
    std::thread::spawn(move || {
        for line in lines {
            let Ok(line) = line else { break };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message.get("cancel").is_some() {
                cancelled.store(true, Ordering::Relaxed);
            } else if let Some(answer) = message.get("answer") {
                let Some(id) = answer.get("id").and_then(Value::as_u64) else {
                    continue;
                };
                let answer = match (answer.get("json"), answer.get("error")) {
                    (Some(Value::String(text)), _) => Answer::Json(text.clone()),
                    (_, Some(Value::String(message))) => Answer::Error(message.clone()),
                    _ => Answer::Error("devboy sent an answer without json or error".into()),
                };
                // The run may be over: the line is read all the same, so
                // devboy's writes never block on a full pipe.
                let _ = answers.send(Incoming::Answer(id, answer));
            }
        }
        // devboy closed the pipe: it wants no more of this run.
        cancelled.store(true, Ordering::Relaxed);
    });
    let watched = out.clone();
    let limit = limits.timeout;
    std::thread::spawn(move || {
        std::thread::sleep(limit + WATCHDOG_GRACE);
        // Says so unless a line is being written (devboy, not reading,
        // may hold it up): the exit must not wait for the pipe.
        if let Ok(mut out) = watched.try_lock() {
            let _ = writeln!(out, "{}", end_line(&Err(RunError::Timeout(limit))));
            let _ = out.flush();
        }
        std::process::exit(0);
    });
    let host_out = out.clone();
    let outcome = std::thread::Builder::new()
        .stack_size(THREAD_STACK_BYTES)
        .spawn(move || {
            let mut host = LineHost {
                out: host_out,
                answers: received,
            };
            run(&code, &limits, &mut host, &cancel)
        })?
        .join()
        .unwrap_or_else(|_| Err(RunError::Script("the engine panicked".into())));
    write_line(&out, &end_line(&outcome));
    Ok(())
}
