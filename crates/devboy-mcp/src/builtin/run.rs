//! `devboy_run`: code mode. The model sends the body of an async
//! JavaScript function; it runs in a `devboy code-worker` child of its own
//! (the sandbox, `devboy-code`), its tool calls come back here one line
//! each and go through the session's call stack as the model's own would,
//! and only what it logs and returns is this tool's result.
//!
//! What this side enforces, besides what the worker does itself:
//! - **Only read-only tools**, unless `[code] allow` names them: a call
//!   whose effective class may write is refused here, before any layer
//!   or upstream sees it (docs/invariants.md, invariant 17).
//! - **`max_in_flight`** calls of one run at a time; the rest wait here.
//! - **The wall clock**: the worker ends its own run at the limit (a
//!   watchdog a quarter second later); this side kills it a second past
//!   the limit whatever it is doing, and on the agent's cancel after the
//!   worker had a second to stop.
//! - **A crash of the engine** is an `isError` result; devboy and the
//!   session go on.
//!
//! A script's calls are answered past the seam
//! ([`crate::stack::CallStack::call_from_script`]): the model holds none
//! of their results, so no later reference or diff can point at one.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use devboy_code::Limits;
use devboy_pipeline::Tokenizer;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};

use super::code::failure;
use super::{definition, BuiltinContext, BuiltinTool};
use crate::seam::SessionEvent;
use crate::stack::ScriptAnswer;

/// The tool's exposed name.
pub(crate) const NAME: &str = "devboy_run";

/// How long past the limit (or a cancel) the worker may take to end
/// before it is killed.
const KILL_GRACE: Duration = Duration::from_secs(1);

/// The name a script's `api()` calls (the prelude's).
const API_CALL: &str = "devboy__api";

const DESCRIPTION: &str = "Run an async JavaScript function body over the tools; only what it logs and returns reaches you. `await tools.<server>.<tool>({...})` gives structuredContent, else the text parsed as JSON, else the text; an error result throws. `return api()` lists the functions. Read-only tools only; no files, network or timers.";

/// `devboy_run`.
pub(crate) struct Run {
    /// The `devboy` binary whose `code-worker` runs a script.
    worker: PathBuf,
    /// Scripts call only read-only tools (`[code] allow` names none).
    read_only: bool,
}

impl Run {
    /// The tool as `code` configures it, running scripts in this very
    /// binary's `code-worker`.
    pub(crate) fn new(code: &devboy_core::config::CodeConfig) -> Self {
        let this = PathBuf::from("/proc/self/exe");
        let worker = if this.exists() {
            this
        } else {
            std::env::current_exe().unwrap_or_else(|_| PathBuf::from("devboy"))
        };
        Self {
            worker,
            read_only: code.allow.is_empty(),
        }
    }
}

impl BuiltinTool for Run {
    fn definition(&self) -> Tool {
        definition(
            NAME,
            DESCRIPTION,
            json!({
                "type": "object",
                "properties": {"code": {"type": "string", "description": "the function body"}},
                "required": ["code"],
                "additionalProperties": false
            }),
        )
        // Read-only only while no tool that may write is allowed; open
        // world, since a script reaches whatever the servers do.
        .with_annotations(
            ToolAnnotations::with_title("Run a script over the tools")
                .read_only(self.read_only)
                .destructive(!self.read_only)
                .idempotent(self.read_only)
                .open_world(true),
        )
    }

    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        Box::pin(async move {
            let code = context.str_argument("code").unwrap_or_default().to_owned();
            let config = context.proxy().code_config();
            if !config.enabled {
                return Ok(failure(
                    "devboy_run: code mode is off (`[code] enabled = false` in devboy.toml)".into(),
                ));
            }
            let limits = Limits {
                timeout: config.timeout,
                memory_bytes: config.memory_bytes,
                max_calls: config.max_calls,
                max_output_bytes: config.max_output_bytes,
                ..Limits::default()
            };
            let started = Instant::now();
            let run = drive(&self.worker, &code, &limits, config.max_in_flight, &context).await;
            let run = match run {
                Ok(run) => run,
                Err(spawn) => {
                    tracing::error!(worker = %self.worker.display(), %spawn, "could not start the code worker");
                    return Ok(failure(format!(
                        "devboy_run: could not start the script's sandbox ({spawn})"
                    )));
                }
            };
            let tokenizer = context
                .pipeline()
                .map_or(Tokenizer::O200k, |p| p.tokenizer());
            let result = run.result();
            context.record(SessionEvent::CodeRun(run.record(
                &code,
                &result,
                tokenizer,
                started.elapsed(),
            )));
            Ok(result)
        })
    }
}

/// How a run ended.
#[derive(Debug)]
enum End {
    /// `done`: the logs and the value.
    Done { logs: Vec<String>, value: String },
    /// `failed`: its kind (`script`, `timeout`, `memory`, `calls`,
    /// `output`, `cancelled`, `protocol`) and message.
    Failed { kind: String, message: String },
    /// Killed a second past the limit.
    Killed,
    /// The agent cancelled the call.
    Cancelled,
    /// The worker ended without an end line: the engine crashed.
    Crashed(String),
}

/// One call a script made, for telemetry.
#[derive(Debug, Default)]
struct CallMade {
    /// What its result would have cost the model, shown directly.
    direct_tokens: u64,
    /// Refused: its class may write.
    refused: bool,
    /// Answered with an error.
    failed: bool,
}

/// What one run did.
#[derive(Debug)]
struct Ran {
    end: End,
    calls: Vec<CallMade>,
    limits: Limits,
}

impl Ran {
    /// The tool's result: the logs and the value, or an `isError` saying
    /// what ended the run.
    fn result(&self) -> CallToolResult {
        let timeout = self.limits.timeout.as_secs_f64();
        match &self.end {
            End::Done { logs, value } => {
                let mut text = logs.join("\n");
                if !value.is_empty() {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(value);
                }
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            End::Failed { kind, message } => failure(match kind.as_str() {
                "script" => format!("devboy_run: {message}"),
                "timeout" => format!("devboy_run: the script ran past its {timeout} s limit (`[code] timeout_secs`)"),
                "memory" => format!("devboy_run: {message} (`[code] memory_mib`)"),
                "calls" => format!("devboy_run: {message} (`[code] max_calls`)"),
                "output" => format!("devboy_run: {message} (`[code] max_output_bytes`)"),
                _ => format!("devboy_run: {message}"),
            }),
            End::Killed => failure(format!(
                "devboy_run: the script ran past its {timeout} s limit and was stopped (`[code] timeout_secs`)"
            )),
            End::Cancelled => failure("devboy_run: cancelled".into()),
            End::Crashed(why) => failure(format!(
                "devboy_run: the script's engine crashed ({why}); devboy and the session go on"
            )),
        }
    }

    /// The run as one telemetry record: counts only, never the code.
    fn record(
        &self,
        code: &str,
        result: &CallToolResult,
        tokenizer: Tokenizer,
        took: Duration,
    ) -> devboy_telemetry::CodeRunRecord {
        let answer: String = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        devboy_telemetry::CodeRunRecord {
            calls: self.calls.len() as u32,
            refused_calls: self.calls.iter().filter(|c| c.refused).count() as u32,
            failed_calls: self.calls.iter().filter(|c| c.failed).count() as u32,
            direct_tokens: self.calls.iter().map(|c| c.direct_tokens).sum(),
            code_tokens: tokenizer.count(code) as u64,
            answer_tokens: tokenizer.count(&answer) as u64,
            end: self.end_word().into(),
            ms: took.as_millis() as u64,
            ..Default::default()
        }
    }

    fn end_word(&self) -> &'static str {
        match &self.end {
            End::Done { .. } => "done",
            End::Failed { kind, .. } => match kind.as_str() {
                "script" => "script_error",
                "timeout" => "timeout",
                "memory" => "memory",
                "calls" => "calls",
                "output" => "output",
                "cancelled" => "cancelled",
                _ => "protocol",
            },
            End::Killed => "killed",
            End::Cancelled => "cancelled",
            End::Crashed(_) => "crashed",
        }
    }
}

/// One call of the script, waiting for a slot or in flight.
struct Asked {
    id: u64,
    name: String,
    arguments: String,
}

/// Runs `code` in a worker child and answers its calls until it ends.
/// `Err` only when the worker could not be started.
///
/// Lines to the worker go through a writer task, so that a worker that
/// stops reading never holds up this loop: the kill timer and the agent's
/// cancel are always heard. The script's calls are ended by a token of
/// the run's own, cancelled when the run ends however it ends, and waited
/// for a moment so that each upstream hears its cancel.
async fn drive(
    worker: &std::path::Path,
    code: &str,
    limits: &Limits,
    max_in_flight: usize,
    context: &BuiltinContext<'_>,
) -> std::io::Result<Ran> {
    let mut child = Command::new(worker)
        .arg("code-worker")
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let stderr_tail = tokio::spawn(async move {
        // The first 64 KiB are kept; the rest is drained, so a worker
        // that writes more never blocks on a full pipe.
        let mut tail = Vec::new();
        let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut tail).await;
        let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
        String::from_utf8_lossy(&tail).into_owned()
    });
    let (to_worker, mut lines_out) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut stdin = stdin;
        while let Some(line) = lines_out.recv().await {
            if write_line(&mut stdin, &line).await.is_err() {
                break;
            }
        }
        // Dropped here: the worker sees its stdin close.
    });
    let _ = to_worker
        .send(json!({"run": {"code": code, "limits": devboy_code::worker::limits_json(limits)}}));
    let mut ran = Ran {
        end: End::Crashed("it ended without a word".into()),
        calls: Vec::new(),
        limits: *limits,
    };
    let config = context.proxy().code_config();
    let run_ct = context.ct.child_token();
    let mut lines = BufReader::new(stdout).lines();
    let mut waiting: VecDeque<Asked> = VecDeque::new();
    let mut in_flight = FuturesUnordered::new();
    let mut kill_at = tokio::time::Instant::now() + limits.timeout + KILL_GRACE;
    let mut cancelled = false;
    let mut crashed = false;
    let tokenizer = context
        .pipeline()
        .map_or(Tokenizer::O200k, |p| p.tokenizer());
    let forwards_structured = context.forwards_structured();
    loop {
        while in_flight.len() < max_in_flight.max(1) {
            let Some(asked) = waiting.pop_front() else {
                break;
            };
            in_flight.push(answer(
                asked,
                context,
                &config,
                &run_ct,
                tokenizer,
                forwards_structured,
            ));
        }
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(line)) => {
                    let Ok(message) = serde_json::from_str::<Value>(&line) else {
                        tracing::warn!(%line, "the code worker wrote a line that is not JSON");
                        continue;
                    };
                    if let Some(call) = message.get("call") {
                        let asked = Asked {
                            id: call.get("id").and_then(Value::as_u64).unwrap_or(0),
                            name: call.get("name").and_then(Value::as_str).unwrap_or("").to_owned(),
                            arguments: call.get("arguments").and_then(Value::as_str).unwrap_or("{}").to_owned(),
                        };
                        if cancelled {
                            // Nothing more goes out for a cancelled run.
                            let _ = to_worker.send(json!({"answer": {"id": asked.id, "error": "the run was cancelled"}}));
                        } else {
                            waiting.push_back(asked);
                        }
                    } else if let Some(done) = message.get("done") {
                        let logs = done
                            .get("logs")
                            .and_then(Value::as_array)
                            .map(|l| l.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                            .unwrap_or_default();
                        let value = done.get("value").and_then(Value::as_str).unwrap_or("").to_owned();
                        ran.end = if cancelled { End::Cancelled } else { End::Done { logs, value } };
                        break;
                    } else if let Some(failed) = message.get("failed") {
                        let text = |key: &str| failed.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
                        ran.end = if cancelled {
                            End::Cancelled
                        } else {
                            End::Failed { kind: text("kind"), message: text("message") }
                        };
                        break;
                    }
                }
                Ok(None) | Err(_) => {
                    ran.end = End::Cancelled;
                    crashed = !cancelled;
                    break;
                }
            },
            Some((id, reply, made)) = in_flight.next(), if !in_flight.is_empty() => {
                ran.calls.extend(made);
                let line = match reply {
                    Ok(text) => json!({"answer": {"id": id, "json": text}}),
                    Err(message) => json!({"answer": {"id": id, "error": message}}),
                };
                // A worker gone answers nothing; its end (or EOF) follows.
                let _ = to_worker.send(line);
            }
            () = context.ct.cancelled(), if !cancelled => {
                cancelled = true;
                let _ = to_worker.send(json!({"cancel": true}));
                kill_at = kill_at.min(tokio::time::Instant::now() + KILL_GRACE);
                waiting.clear();
            }
            () = tokio::time::sleep_until(kill_at) => {
                ran.end = if cancelled { End::Cancelled } else { End::Killed };
                break;
            }
        }
    }
    // However the run ended, its calls still in flight end now: each
    // upstream is told, and what they come to is counted.
    run_ct.cancel();
    let _ = tokio::time::timeout(KILL_GRACE, async {
        while let Some((_, _, made)) = in_flight.next().await {
            ran.calls.extend(made);
        }
    })
    .await;
    drop(in_flight);
    drop(to_worker);
    if crashed {
        ran.end = End::Crashed(ended(&mut child, stderr_tail).await);
    }
    // Ended: the worker exits on its own; a kill makes sure.
    let _ = child.start_kill();
    let _ = child.wait().await;
    writer.abort();
    Ok(ran)
}

/// Why the worker ended without an end line: its exit and the tail of its
/// stderr.
async fn ended(
    child: &mut tokio::process::Child,
    stderr: tokio::task::JoinHandle<String>,
) -> String {
    let status = match tokio::time::timeout(KILL_GRACE, child.wait()).await {
        Ok(Ok(status)) => status.to_string(),
        _ => {
            let _ = child.start_kill();
            "it stopped answering".to_owned()
        }
    };
    let tail = tokio::time::timeout(Duration::from_millis(200), stderr)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let last = tail.lines().rev().find(|l| !l.trim().is_empty());
    match last {
        Some(line) => format!("{status}: {}", line.trim()),
        None => status,
    }
}

async fn write_line(stdin: &mut ChildStdin, line: &Value) -> std::io::Result<()> {
    let mut text = line.to_string();
    text.push('\n');
    stdin.write_all(text.as_bytes()).await?;
    stdin.flush().await
}

/// Answers one call of the script: the JSON text the script gets, or the
/// message its `await` throws.
async fn answer(
    asked: Asked,
    context: &BuiltinContext<'_>,
    config: &devboy_core::config::CodeConfig,
    run_ct: &tokio_util::sync::CancellationToken,
    tokenizer: Tokenizer,
    forwards_structured: bool,
) -> (u64, Result<String, String>, Option<CallMade>) {
    let id = asked.id;
    let name = exposed_name(&asked.name);
    if asked.name == API_CALL {
        // Not a tool call: not counted.
        let filter = serde_json::from_str::<Value>(&asked.arguments)
            .ok()
            .and_then(|v| v.get("filter").and_then(Value::as_str).map(str::to_owned));
        // As a call would, it waits for the first listing to settle.
        context.proxy().settle().await;
        let text = api(context, config, filter.as_deref());
        return (id, Ok(Value::String(text).to_string()), None);
    }
    let (id, reply, made) = call(
        id,
        &name,
        &asked.arguments,
        context,
        config,
        run_ct,
        tokenizer,
        forwards_structured,
    )
    .await;
    (id, reply, Some(made))
}

/// One tool call of the script, and what it came to.
#[allow(clippy::too_many_arguments)]
async fn call(
    id: u64,
    name: &str,
    arguments: &str,
    context: &BuiltinContext<'_>,
    config: &devboy_core::config::CodeConfig,
    run_ct: &tokio_util::sync::CancellationToken,
    tokenizer: Tokenizer,
    forwards_structured: bool,
) -> (u64, Result<String, String>, CallMade) {
    let mut made = CallMade::default();
    if let Some(why) = not_for_scripts(name) {
        made.failed = true;
        return (id, Err(why), made);
    }
    let arguments = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => Some(map),
        Ok(Value::Null) => None,
        _ => {
            made.failed = true;
            return (
                id,
                Err(format!("{name}: the arguments must be an object")),
                made,
            );
        }
    };
    let answered = context
        .call_from_script(
            name,
            arguments,
            |exposed| config.allows(exposed),
            run_ct.clone(),
        )
        .await;
    let result = match answered {
        Ok(ScriptAnswer::Answered(result)) => result,
        Ok(ScriptAnswer::MayWrite(class)) => {
            made.refused = true;
            return (
                id,
                Err(format!(
                    "{name} may write (its class is {}); devboy_run calls only read-only tools (allow it in devboy's config: `[code] allow = [\"{name}\"]`, in JSON `\"code\": {{\"allow\": [\"{name}\"]}}`)",
                    class.name()
                )),
                made,
            );
        }
        Err(error) => {
            made.failed = true;
            return (id, Err(format!("{name}: {}", error.message)), made);
        }
    };
    made.direct_tokens = direct_tokens(&result, forwards_structured, tokenizer);
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    if result.is_error == Some(true) {
        made.failed = true;
        let message = texts.join("\n");
        return (
            id,
            Err(if message.is_empty() {
                format!("{name} failed")
            } else {
                message
            }),
            made,
        );
    }
    if let Some(structured) = &result.structured_content {
        return (id, Ok(structured.to_string()), made);
    }
    let text = texts.join("\n");
    // JSON text crosses as written (its numbers exact); other text as a
    // string.
    let json = if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok() {
        text
    } else {
        Value::String(text).to_string()
    };
    (id, Ok(json), made)
}

/// What `result` would have cost the model had it been shown whole.
fn direct_tokens(result: &CallToolResult, forwards_structured: bool, tokenizer: Tokenizer) -> u64 {
    let shown: Vec<String> = crate::view::shown_blocks(result, forwards_structured)
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    tokenizer.count(&shown.join("\n")) as u64
}

/// Why a script may not call `name` whatever its class: itself, and the
/// tool search, which adds to the model's tool list (a script calls tools
/// by name; `api()` lists them).
fn not_for_scripts(name: &str) -> Option<String> {
    match name {
        NAME => Some("devboy_run cannot call itself".into()),
        "devboy_find_tools" => Some(
            "devboy_find_tools is for the model; a script calls any tool by name (`api()` lists them)"
                .into(),
        ),
        _ => None,
    }
}

/// The exposed name a script's call names: `devboy__x` (how
/// `tools.devboy.x` spells it) is the built-in `devboy_x`.
fn exposed_name(called: &str) -> String {
    match called.strip_prefix("devboy__") {
        Some(builtin) => format!("devboy_{builtin}"),
        None => called.to_owned(),
    }
}

/// The signatures of the tools a script may call now.
fn api(
    context: &BuiltinContext<'_>,
    config: &devboy_core::config::CodeConfig,
    filter: Option<&str>,
) -> String {
    let catalog = context.proxy().catalog();
    super::api::signatures(&catalog.tools, filter, |name| {
        not_for_scripts(name).is_none()
            && (config.allows(name)
                || context
                    .class_of(name)
                    .is_some_and(|class| !class.may_mutate()))
    })
}
