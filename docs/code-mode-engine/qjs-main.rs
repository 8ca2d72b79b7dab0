//! Minimal code-mode worker on rquickjs (QuickJS-ng). Reads a JS function body from stdin,
//! runs it as `(async () => { BODY })()`, exposes `tools.call(name, args)` whose promise is
//! resolved by a fake upstream thread after a short delay, and prints one JSON line.
use rquickjs::{
    CatchResultExt, Context, Ctx, Function, Persistent, Promise, Runtime, Value, promise::PromiseState,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Read;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod upstream {
    include!("../../upstream.rs");
}
use upstream::*;

const PRELUDE: &str = include_str!("../../prelude.js");

type Resolvers = (Persistent<Function<'static>>, Persistent<Function<'static>>);

struct HostState {
    pending: Rc<RefCell<HashMap<u64, Resolvers>>>,
    tx: std::sync::mpsc::Sender<Req>,
    calls: Rc<RefCell<u64>>,
    max_calls: u64,
}
thread_local! { static STATE: RefCell<Option<HostState>> = const { RefCell::new(None) }; }

/// `__host_call(name, argsJson)`: returns a pending promise; the event loop settles it when the
/// upstream answers.
fn host_call<'js>(ctx: Ctx<'js>, name: String, args: String) -> rquickjs::Result<Promise<'js>> {
    let (promise, resolve, reject) = Promise::new(&ctx)?;
    STATE.with(|st| -> rquickjs::Result<()> {
        let st = st.borrow();
        let st = st.as_ref().unwrap();
        let id = {
            let mut n = st.calls.borrow_mut();
            *n += 1;
            *n
        };
        if id > st.max_calls {
            let e: Value = ctx.globals().get::<_, Function>("Error")?.call((format!(
                "devboy_run: more than {} tool calls",
                st.max_calls
            ),))?;
            return reject.call::<_, ()>((e,));
        }
        st.pending
            .borrow_mut()
            .insert(id, (Persistent::save(&ctx, resolve), Persistent::save(&ctx, reject)));
        st.tx.send(Req { id, name, args }).unwrap();
        Ok(())
    })?;
    Ok(promise)
}

fn main() {
    let opts = Opts::from_args();
    let mut code = String::new();
    std::io::stdin().read_to_string(&mut code).unwrap();
    // Run on a thread whose stack we choose, so the engine's stack limit is below it.
    let thread_stack = opts.thread_stack_kib * 1024;
    // In-worker watchdog: a native loop that never polls the interrupt handler (e.g.
    // Array.prototype.join on a 2^32-length array-like) is ended here, 250 ms past the limit,
    // with a clean error line; the parent's SIGKILL stays the last resort.
    if std::env::var_os("QJS_WATCHDOG").is_some() {
        let (t, start) = (opts.timeout_ms, Instant::now());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(t + 250));
            println!("{}", report(start, "timeout", "wall-clock limit (watchdog: the engine did not yield)", &[], 0));
            std::process::exit(0);
        });
    }
    let h = std::thread::Builder::new()
        .stack_size(thread_stack)
        .spawn(move || run(opts, code))
        .unwrap();
    let out = h.join().unwrap();
    println!("{out}");
}

fn run(opts: Opts, code: String) -> String {
    let start = Instant::now();
    let deadline = start + Duration::from_millis(opts.timeout_ms);
    let cancel = Arc::new(AtomicBool::new(false));
    let (req_tx, resp_rx, wake_tx) = spawn_upstream(opts.delay_ms);
    if let Some(ms) = opts.cancel_after_ms {
        spawn_canceller(ms, cancel.clone(), wake_tx.clone());
    }

    let rt = Runtime::new().unwrap();
    rt.set_memory_limit(opts.memory_mib * 1024 * 1024);
    rt.set_max_stack_size(opts.stack_kib * 1024);
    let (c2, interrupts) = (cancel.clone(), Rc::new(RefCell::new(0u64)));
    let i2 = interrupts.clone();
    rt.set_interrupt_handler(Some(Box::new(move || {
        *i2.borrow_mut() += 1;
        c2.load(Ordering::Relaxed) || Instant::now() >= deadline
    })));
    // Context::full minus Performance (performance.now() is a clock finer than Date).
    use rquickjs::context::intrinsic as i;
    type Intrinsics = (i::Date, i::Eval, i::RegExpCompiler, i::RegExp, i::Json, i::Proxy, i::MapSet, i::TypedArrays, i::Promise, i::WeakRef, i::DOMException);
    let ctx = if std::env::var_os("QJS_FULL").is_some() {
        Context::full(&rt).unwrap()
    } else {
        Context::custom::<Intrinsics>(&rt).unwrap()
    };
    // Persistent handles kept in the thread-local must be released before the runtime is freed,
    // else JS_FreeRuntime's leak assertion aborts the process.
    struct ClearState;
    impl Drop for ClearState {
        fn drop(&mut self) {
            STATE.with(|s| s.borrow_mut().take());
        }
    }
    let _clear = ClearState;

    let pending: Rc<RefCell<HashMap<u64, Resolvers>>> = Rc::default();
    let logs: Rc<RefCell<Vec<String>>> = Rc::default();
    let calls = Rc::new(RefCell::new(0u64));
    let max_calls = opts.max_calls;

    let setup: Result<Persistent<Promise<'static>>, String> = ctx.with(|ctx| {
        let g = ctx.globals();
        STATE.with(|st| {
            *st.borrow_mut() = Some(HostState {
                pending: pending.clone(),
                tx: req_tx.clone(),
                calls: calls.clone(),
                max_calls,
            })
        });
        let host_call = Function::new(ctx.clone(), host_call).unwrap();
        g.set("__host_call", host_call).unwrap();
        let l = logs.clone();
        g.set(
            "__host_log",
            Function::new(ctx.clone(), move |s: String| l.borrow_mut().push(s)).unwrap(),
        )
        .unwrap();
        ctx.eval::<(), _>(PRELUDE).catch(&ctx).map_err(|e| format!("prelude: {e}"))?;
        let wrapped = format!("(async () => {{{code}\n}})().then(__finish)");
        let p: Promise = ctx.eval(wrapped).catch(&ctx).map_err(|e| e.to_string())?;
        Ok(Persistent::save(&ctx, p))
    });
    let promise = match setup {
        Ok(p) => p,
        Err(e) => {
            let why = if cancel.load(Ordering::Relaxed) { "cancelled" } else if Instant::now() >= deadline { "timeout" } else { "error" };
            return report(start, why, &e, &logs.borrow(), *interrupts.borrow());
        }
    };

    loop {
        // Drain microtasks.
        loop {
            match rt.execute_pending_job() {
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    let msg = e.0.with(|ctx| {
                        let v = ctx.catch();
                        format!("job: {}", describe(&ctx, v))
                    });
                    let why = if cancel.load(Ordering::Relaxed) {
                        "cancelled"
                    } else if Instant::now() >= deadline {
                        "timeout"
                    } else {
                        "error"
                    };
                    return report(start, why, &msg, &logs.borrow(), *interrupts.borrow());
                }
            }
        }
        let state = ctx.with(|ctx| {
            let p = promise.clone().restore(&ctx).unwrap();
            match p.state() {
                PromiseState::Pending => None,
                PromiseState::Resolved => Some(Ok(p.result::<String>().unwrap().unwrap())),
                PromiseState::Rejected => {
                    let _ = p.result::<Value>();
                    let v = ctx.catch();
                    Some(Err(describe(&ctx, v)))
                }
            }
        });
        match state {
            Some(Ok(v)) => return report(start, "ok", &v, &logs.borrow(), *interrupts.borrow()),
            Some(Err(e)) => {
                let why = if cancel.load(Ordering::Relaxed) { "cancelled" } else if Instant::now() >= deadline { "timeout" } else { "error" };
                return report(start, why, &e, &logs.borrow(), *interrupts.borrow());
            }
            None => {}
        }
        if pending.borrow().is_empty() {
            return report(start, "error", "script awaits a promise nothing will settle", &logs.borrow(), 0);
        }
        // Wait for an upstream answer, the deadline, or a cancel.
        let now = Instant::now();
        if now >= deadline {
            return report(start, "timeout", "wall-clock limit while awaiting tools", &logs.borrow(), 0);
        }
        match resp_rx.recv_timeout(deadline - now) {
            Ok(Msg::Cancel) => {
                return report(start, "cancelled", "cancelled while awaiting tools", &logs.borrow(), 0)
            }
            Ok(Msg::Resp(r)) => {
                let (res, rej) = pending.borrow_mut().remove(&r.id).unwrap();
                ctx.with(|ctx| {
                    let (res, rej) = (res.restore(&ctx).unwrap(), rej.restore(&ctx).unwrap());
                    match r.result {
                        Ok(text) => res.call::<_, ()>((text,)).unwrap(),
                        Err(msg) => {
                            let e: Value = ctx
                                .globals()
                                .get::<_, Function>("Error")
                                .unwrap()
                                .call((msg,))
                                .unwrap();
                            rej.call::<_, ()>((e,)).unwrap()
                        }
                    }
                });
            }
            Err(_) => {
                return report(start, "timeout", "wall-clock limit while awaiting tools", &logs.borrow(), 0)
            }
        }
    }
}

fn describe<'js>(ctx: &Ctx<'js>, v: Value<'js>) -> String {
    let _ = ctx;
    if let Some(o) = v.as_object() {
        let name: String = o.get("name").unwrap_or_default();
        let msg: String = o.get("message").unwrap_or_default();
        let stack: String = o.get("stack").unwrap_or_default();
        format!("{name}: {msg} | {}", stack.lines().next().unwrap_or("").trim())
    } else if let Some(s) = v.as_string() {
        s.to_string().unwrap_or_default()
    } else {
        format!("{v:?}")
    }
}
