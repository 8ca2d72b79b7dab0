//! Code mode's sandbox: a model-written body of an async JavaScript
//! function, run in QuickJS (docs/code-mode-engine.md says why that engine)
//! with nothing but `tools` and `console`, within limits.
//!
//! The engine knows nothing of MCP: each `await tools.<prefix>.<tool>(args)`
//! (or `tools.call(name, args)`) becomes a [`Host::send`] of the exposed
//! name and the arguments as JSON text, and the script waits until the
//! host answers with [`Host::next`]. Results cross as JSON text and are
//! parsed with their numbers exact: an integer past 2^53 becomes a
//! `BigInt`, a long decimal a `JSON.rawJSON`, and a number passed through
//! unchanged prints back as the upstream wrote it (the prelude's codec).
//!
//! Limits ([`Limits`]) end a script as an error naming the limit: the wall
//! clock and cancellation through the interrupt handler, memory and stack
//! inside the engine, the number of calls and the output's size here. A
//! few native builtins never poll the interrupt handler, and a host
//! mistake can abort the engine; that is why devboy runs this in a child
//! process it can kill, not in its own.

pub mod worker;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rquickjs::promise::PromiseState;
use rquickjs::{CatchResultExt, Context, Ctx, Function, Persistent, Promise, Runtime, Value};

const PRELUDE: &str = include_str!("prelude.js");

/// What a run may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall time of the whole run.
    pub timeout: Duration,
    /// The engine's heap.
    pub memory_bytes: usize,
    /// The engine's stack (below the thread's, which [`run`]'s caller
    /// gives; see [`THREAD_STACK_BYTES`]).
    pub stack_bytes: usize,
    /// Tool calls per run.
    pub max_calls: u64,
    /// Bytes of output (the logs and the value together).
    pub max_output_bytes: usize,
}

/// The stack of the thread a run should have, comfortably above
/// [`Limits::default`]'s engine stack: an engine stack limit above the
/// thread's real stack crashes the process instead of throwing.
pub const THREAD_STACK_BYTES: usize = 8 * 1024 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            memory_bytes: 64 * 1024 * 1024,
            stack_bytes: 1024 * 1024,
            max_calls: 200,
            max_output_bytes: 1024 * 1024,
        }
    }
}

/// A tool's answer to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The result, as JSON text.
    Json(String),
    /// The call failed (an `isError` result, a refusal): the script's
    /// `await` throws an `Error` with this message.
    Error(String),
}

/// Where a script's tool calls go.
pub trait Host {
    /// The script called `name` with `arguments` (JSON text); answer it
    /// later, by `id`, from [`next`](Self::next).
    fn send(&mut self, id: u64, name: &str, arguments: &str);

    /// The next answer to a call sent, waiting at most until `until`;
    /// `None` when none came by then.
    fn next(&mut self, until: Instant) -> Option<(u64, Answer)>;
}

/// What a run gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// `console.log` lines, in order.
    pub logs: Vec<String>,
    /// The returned value: a string as it is, anything else as JSON
    /// (empty for `undefined`).
    pub value: String,
    /// Tool calls made.
    pub calls: u64,
}

/// Why a run gave no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The script threw, or does not parse: the message, with the line
    /// of the model's code when the engine gives one.
    Script(String),
    /// The wall-clock limit.
    Timeout(Duration),
    /// The memory limit.
    Memory(usize),
    /// More than this many tool calls.
    TooManyCalls(u64),
    /// More output than this many bytes.
    OutputTooLarge(usize),
    /// Cancelled by the caller.
    Cancelled,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Script(message) => write!(f, "{message}"),
            Self::Timeout(limit) => {
                write!(f, "the script ran past its {} s limit", limit.as_secs_f64())
            }
            Self::Memory(bytes) => write!(
                f,
                "the script used more than its {} MiB of memory",
                bytes / (1024 * 1024)
            ),
            Self::TooManyCalls(max) => write!(f, "the script made more than {max} tool calls"),
            Self::OutputTooLarge(max) => write!(f, "the script's output passed {max} bytes"),
            Self::Cancelled => write!(f, "the script was cancelled"),
        }
    }
}

impl std::error::Error for RunError {}

type Resolvers = (Persistent<Function<'static>>, Persistent<Function<'static>>);

/// The state the host functions share with the event loop.
#[derive(Default)]
struct Shared {
    pending: HashMap<u64, Resolvers>,
    /// Calls the script made and [`run`] has not yet sent.
    outbox: Vec<(u64, String, String)>,
    calls: u64,
    refused: bool,
    logs: Vec<String>,
    output_bytes: usize,
    too_much_output: bool,
}

/// Runs `code` (the body of an async function) within `limits`, its tool
/// calls through `host`, until it returns, throws, hits a limit or
/// `cancel` is set. Call it on a thread with at least
/// [`THREAD_STACK_BYTES`] of stack.
pub fn run(
    code: &str,
    limits: &Limits,
    host: &mut dyn Host,
    cancel: &Arc<AtomicBool>,
) -> Result<Finished, RunError> {
    let started = Instant::now();
    let deadline = started + limits.timeout;
    let runtime = Runtime::new().map_err(|e| RunError::Script(format!("the engine: {e}")))?;
    runtime.set_memory_limit(limits.memory_bytes);
    runtime.set_max_stack_size(limits.stack_bytes);
    let cancelled = cancel.clone();
    runtime.set_interrupt_handler(Some(Box::new(move || {
        cancelled.load(Ordering::Relaxed) || Instant::now() >= deadline
    })));
    // No module loader, no `performance` (a finer clock than `Date`).
    use rquickjs::context::intrinsic as i;
    type Intrinsics = (
        i::Date,
        i::Eval,
        i::RegExpCompiler,
        i::RegExp,
        i::Json,
        i::Proxy,
        i::MapSet,
        i::TypedArrays,
        i::Promise,
        i::WeakRef,
    );
    let context = Context::custom::<Intrinsics>(&runtime)
        .map_err(|e| RunError::Script(format!("the engine: {e}")))?;
    let shared: Rc<RefCell<Shared>> = Rc::default();
    let outcome = drive(
        &runtime, &context, code, limits, host, cancel, deadline, &shared,
    );
    // Handles into the engine must go before the runtime does.
    shared.borrow_mut().pending.clear();
    CALLS.with(|calls| calls.borrow_mut().take());
    let calls = shared.borrow().calls;
    let logs = std::mem::take(&mut shared.borrow_mut().logs);
    drop(context);
    drop(runtime);
    let classify = |message: String| {
        if cancel.load(Ordering::Relaxed) {
            RunError::Cancelled
        } else if Instant::now() >= deadline {
            RunError::Timeout(limits.timeout)
        } else if message.contains("out of memory") {
            RunError::Memory(limits.memory_bytes)
        } else {
            RunError::Script(message)
        }
    };
    match outcome {
        Ok(value) => {
            let bytes = value.len() + logs.iter().map(|l| l.len() + 1).sum::<usize>();
            if bytes > limits.max_output_bytes {
                return Err(RunError::OutputTooLarge(limits.max_output_bytes));
            }
            Ok(Finished { logs, value, calls })
        }
        Err(Stop::Limit(error)) => Err(error),
        Err(Stop::Thrown(message)) => Err(classify(message)),
    }
}

enum Stop {
    /// A limit of ours.
    Limit(RunError),
    /// The script's own error, or the engine's (timeout, memory).
    Thrown(String),
}

#[allow(clippy::too_many_arguments)]
fn drive(
    runtime: &Runtime,
    context: &Context,
    code: &str,
    limits: &Limits,
    host: &mut dyn Host,
    cancel: &AtomicBool,
    deadline: Instant,
    shared: &Rc<RefCell<Shared>>,
) -> Result<String, Stop> {
    let max_calls = limits.max_calls;
    let max_output = limits.max_output_bytes;
    let promise = context.with(|ctx| -> Result<Persistent<Promise<'static>>, Stop> {
        let globals = ctx.globals();
        CALLS.with(|calls| *calls.borrow_mut() = Some((shared.clone(), max_calls)));
        let host_call =
            Function::new(ctx.clone(), host_call).map_err(|e| Stop::Thrown(e.to_string()))?;
        globals
            .set("__host_call", host_call)
            .map_err(|e| Stop::Thrown(e.to_string()))?;
        let logs = shared.clone();
        let host_log = Function::new(ctx.clone(), move |line: String| {
            let mut shared = logs.borrow_mut();
            shared.output_bytes += line.len() + 1;
            if shared.output_bytes > max_output {
                shared.too_much_output = true;
            } else {
                shared.logs.push(line);
            }
        })
        .map_err(|e| Stop::Thrown(e.to_string()))?;
        globals
            .set("__host_log", host_log)
            .map_err(|e| Stop::Thrown(e.to_string()))?;
        ctx.eval_with_options::<(), _>(PRELUDE, named("prelude.js"))
            .catch(&ctx)
            .map_err(|e| Stop::Thrown(format!("the prelude: {e}")))?;
        let wrapped = format!("(async () => {{\n{code}\n}})().then(__finish)");
        let promise: Promise = ctx
            .eval_with_options(wrapped, named(SCRIPT_FILE))
            .catch(&ctx)
            .map_err(|e| Stop::Thrown(describe_caught(e)))?;
        Ok(Persistent::save(&ctx, promise))
    })?;
    loop {
        loop {
            match runtime.execute_pending_job() {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => {
                    let message = error.0.with(|ctx| describe(&ctx.catch()));
                    return Err(Stop::Thrown(message));
                }
            }
        }
        {
            let mut shared = shared.borrow_mut();
            if shared.refused {
                return Err(Stop::Limit(RunError::TooManyCalls(max_calls)));
            }
            if shared.too_much_output {
                return Err(Stop::Limit(RunError::OutputTooLarge(max_output)));
            }
            for (id, name, args) in std::mem::take(&mut shared.outbox) {
                host.send(id, &name, &args);
            }
        }
        let state = context.with(|ctx| {
            let promise = promise.clone().restore(&ctx).ok()?;
            match promise.state() {
                PromiseState::Pending => None,
                PromiseState::Resolved => Some(
                    promise
                        .result::<String>()
                        .and_then(Result::ok)
                        .ok_or_else(|| "the script's value could not be read".to_owned()),
                ),
                PromiseState::Rejected => {
                    let _ = promise.result::<Value>();
                    Some(Err(describe(&ctx.catch())))
                }
            }
        });
        match state {
            Some(Ok(value)) => return Ok(value),
            Some(Err(message)) => return Err(Stop::Thrown(message)),
            None => {}
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(Stop::Limit(RunError::Cancelled));
        }
        if shared.borrow().pending.is_empty() {
            return Err(Stop::Thrown(
                "the script awaits something that never settles".to_owned(),
            ));
        }
        // Waits in short steps so a cancel is seen while tools run.
        let step = (Instant::now() + Duration::from_millis(50)).min(deadline);
        if Instant::now() >= deadline {
            return Err(Stop::Limit(RunError::Timeout(limits.timeout)));
        }
        let Some((id, answer)) = host.next(step) else {
            continue;
        };
        let Some((resolve, reject)) = shared.borrow_mut().pending.remove(&id) else {
            continue;
        };
        context.with(|ctx| {
            let settled = match answer {
                Answer::Json(text) => resolve.restore(&ctx).and_then(|f| f.call::<_, ()>((text,))),
                Answer::Error(message) => reject.restore(&ctx).and_then(|f| {
                    let error: Value = ctx
                        .globals()
                        .get::<_, Function>("Error")?
                        .call((message,))?;
                    f.call::<_, ()>((error,))
                }),
            };
            settled.map_err(|e| Stop::Thrown(e.to_string()))
        })?;
    }
}

thread_local! {
    /// The run on this thread: its shared state and its call limit (a
    /// function the engine calls is a plain `fn`, generic over the
    /// engine's lifetime, so it finds them here).
    static CALLS: RefCell<Option<(Rc<RefCell<Shared>>, u64)>> = const { RefCell::new(None) };
}

/// `__host_call(name, argsJson)`: a promise the event loop settles when
/// the host answers.
fn host_call<'js>(ctx: Ctx<'js>, name: String, args: String) -> rquickjs::Result<Promise<'js>> {
    let (shared, max_calls) = CALLS
        .with(|calls| calls.borrow().clone())
        .ok_or(rquickjs::Error::Unknown)?;
    let ctx = &ctx;
    let (promise, resolve, reject) = Promise::new(ctx)?;
    let mut shared = shared.borrow_mut();
    shared.calls += 1;
    if shared.calls > max_calls {
        shared.refused = true;
        let error: Value = ctx
            .globals()
            .get::<_, Function>("Error")?
            .call((format!("more than {max_calls} tool calls"),))?;
        reject.call::<_, ()>((error,))?;
        return Ok(promise);
    }
    let id = shared.calls;
    shared.pending.insert(
        id,
        (
            Persistent::save(ctx, resolve),
            Persistent::save(ctx, reject),
        ),
    );
    shared.outbox.push((id, name, args));
    Ok(promise)
}

/// The file name the model's code is evaluated under, so that an error's
/// line is found among its own frames (the prelude's are `prelude.js`).
const SCRIPT_FILE: &str = "script";

/// Evaluation as a global script named `file`.
fn named(file: &str) -> rquickjs::context::EvalOptions {
    let mut options = rquickjs::context::EvalOptions::default();
    options.filename = Some(file.to_owned());
    options
}

/// An exception as one line: its name and message, and where in the
/// model's code (the wrapper adds one line before it): the first frame of
/// the script's own file.
fn describe(value: &Value<'_>) -> String {
    if let Some(object) = value.as_object() {
        let name: String = object.get("name").unwrap_or_default();
        let message: String = object.get("message").unwrap_or_default();
        let stack: String = object.get("stack").unwrap_or_default();
        let at = stack
            .lines()
            .filter_map(|l| {
                let at = l.find(&format!("{SCRIPT_FILE}:"))?;
                Some(&l[at..])
            })
            .filter_map(|l| l.rsplit_once(':'))
            .filter_map(|(head, col)| {
                let (_, line) = head.rsplit_once(':')?;
                let line: usize = line.parse().ok()?;
                col.trim_end_matches(')').parse::<usize>().ok()?;
                Some(line)
            })
            .next();
        match (name.is_empty(), at) {
            (false, Some(line)) if line > 1 => format!("{name}: {message} (line {})", line - 1),
            (false, _) => format!("{name}: {message}"),
            (true, _) => message,
        }
    } else if let Some(text) = value.as_string() {
        text.to_string().unwrap_or_default()
    } else {
        format!("{value:?}")
    }
}

/// An error of evaluating the script itself (it does not parse, say).
fn describe_caught(error: rquickjs::CaughtError<'_>) -> String {
    match error {
        rquickjs::CaughtError::Exception(exception) => describe(&exception.into_value()),
        other => {
            let text = other.to_string();
            text.lines().next().unwrap_or(&text).to_owned()
        }
    }
}
