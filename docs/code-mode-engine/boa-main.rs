//! Minimal code-mode worker on boa_engine. Same contract as the rquickjs one.
use boa_engine::{
    builtins::promise::PromiseState, js_string, object::builtins::JsPromise, Context, JsError,
    JsNativeError, JsResult, JsValue, NativeFunction, Source,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod upstream {
    include!("../../upstream.rs");
}
use upstream::*;

const PRELUDE: &str = include_str!("../../prelude.js");

struct HostState {
    pending: HashMap<u64, boa_engine::builtins::promise::ResolvingFunctions>,
    tx: std::sync::mpsc::Sender<Req>,
    calls: u64,
    max_calls: u64,
}
thread_local! {
    static STATE: RefCell<Option<HostState>> = const { RefCell::new(None) };
    static LOGS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn host_call(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let name = args.first().cloned().unwrap_or_default().to_string(ctx)?.to_std_string_escaped();
    let a = args.get(1).cloned().unwrap_or_default().to_string(ctx)?.to_std_string_escaped();
    let (promise, resolvers) = JsPromise::new_pending(ctx);
    let over = STATE.with(|st| {
        let mut st = st.borrow_mut();
        let st = st.as_mut().unwrap();
        st.calls += 1;
        if st.calls > st.max_calls {
            return Some(st.max_calls);
        }
        let id = st.calls;
        st.tx.send(Req { id, name, args: a }).unwrap();
        st.pending.insert(id, resolvers.clone());
        None
    });
    if let Some(max) = over {
        let e = JsNativeError::error().with_message(format!("devboy_run: more than {max} tool calls"));
        let e = JsError::from(e).into_opaque(ctx)?;
        resolvers.reject.call(&JsValue::undefined(), &[e], ctx)?;
    }
    Ok(promise.into())
}

fn host_log(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let s = args.first().cloned().unwrap_or_default().to_string(ctx)?.to_std_string_escaped();
    LOGS.with(|l| l.borrow_mut().push(s));
    Ok(JsValue::undefined())
}

fn main() {
    let opts = Opts::from_args();
    let mut code = String::new();
    std::io::stdin().read_to_string(&mut code).unwrap();
    let h = std::thread::Builder::new()
        .stack_size(opts.thread_stack_kib * 1024)
        .spawn(move || run(opts, code))
        .unwrap();
    let out = h.join().unwrap();
    println!("{out}");
}

fn logs() -> Vec<String> {
    LOGS.with(|l| l.borrow().clone())
}

fn describe(e: JsError, ctx: &mut Context) -> String {
    match e.clone().into_opaque(ctx) {
        Ok(v) => describe_value(&v, ctx),
        Err(e) => format!("uncatchable: {e}"),
    }
}
fn describe_value(v: &JsValue, ctx: &mut Context) -> String {
    if let Some(o) = v.as_object() {
        let name = o.get(js_string!("name"), ctx).ok().and_then(|x| x.to_string(ctx).ok()).map(|s| s.to_std_string_escaped()).unwrap_or_default();
        let msg = o.get(js_string!("message"), ctx).ok().and_then(|x| x.to_string(ctx).ok()).map(|s| s.to_std_string_escaped()).unwrap_or_default();
        format!("{name}: {msg}")
    } else {
        v.to_string(ctx).map(|s| s.to_std_string_escaped()).unwrap_or_default()
    }
}

fn run(opts: Opts, code: String) -> String {
    let start = Instant::now();
    let deadline = start + Duration::from_millis(opts.timeout_ms);
    let cancel = Arc::new(AtomicBool::new(false));
    let (req_tx, resp_rx, wake_tx) = spawn_upstream(opts.delay_ms);
    if let Some(ms) = opts.cancel_after_ms {
        spawn_canceller(ms, cancel.clone(), wake_tx.clone());
    }
    // Context::default() installs SimpleModuleLoader rooted at the current directory: a script could
    // then `import("x.json", {with: {type: "json"}})` any JSON file, or run any .js file, under it.
    let mut ctx = if std::env::var_os("BOA_DEFAULT_LOADER").is_some() {
        Context::default()
    } else {
        boa_engine::context::ContextBuilder::new()
            .module_loader(std::rc::Rc::new(boa_engine::module::IdleModuleLoader))
            .build()
            .unwrap()
    };
    {
        let l = ctx.runtime_limits_mut();
        l.set_loop_iteration_limit(opts.loop_limit);
        l.set_recursion_limit(opts.recursion_limit);
    }
    STATE.with(|st| {
        *st.borrow_mut() = Some(HostState { pending: HashMap::new(), tx: req_tx.clone(), calls: 0, max_calls: opts.max_calls })
    });
    ctx.register_global_builtin_callable(js_string!("__host_call"), 2, NativeFunction::from_fn_ptr(host_call)).unwrap();
    ctx.register_global_builtin_callable(js_string!("__host_log"), 1, NativeFunction::from_fn_ptr(host_log)).unwrap();
    if let Err(e) = ctx.eval(Source::from_bytes(PRELUDE)) {
        let d = describe(e, &mut ctx);
        return report(start, "error", &format!("prelude: {d}"), &logs(), 0);
    }
    let wrapped = format!("(async () => {{{code}\n}})().then(__finish)");
    let promise = match ctx.eval(Source::from_bytes(&wrapped)) {
        Ok(v) => JsPromise::from_object(v.as_object().unwrap().clone()).unwrap(),
        Err(e) => {
            let d = describe(e, &mut ctx);
            return report(start, "error", &d, &logs(), 0);
        }
    };
    loop {
        if let Err(e) = ctx.run_jobs() {
            let d = describe(e, &mut ctx);
            return report(start, "error", &format!("job: {d}"), &logs(), 0);
        }
        match promise.state() {
            PromiseState::Pending => {}
            PromiseState::Fulfilled(v) => {
                let s = v.to_string(&mut ctx).unwrap().to_std_string_escaped();
                return report(start, "ok", &s, &logs(), 0);
            }
            PromiseState::Rejected(v) => {
                let d = describe_value(&v, &mut ctx);
                return report(start, "error", &d, &logs(), 0);
            }
        }
        let empty = STATE.with(|st| st.borrow().as_ref().unwrap().pending.is_empty());
        if empty {
            return report(start, "error", "script awaits a promise nothing will settle", &logs(), 0);
        }
        let now = Instant::now();
        if now >= deadline {
            return report(start, "timeout", "wall-clock limit while awaiting tools", &logs(), 0);
        }
        match resp_rx.recv_timeout(deadline - now) {
            Ok(Msg::Cancel) => return report(start, "cancelled", "cancelled while awaiting tools", &logs(), 0),
            Ok(Msg::Resp(r)) => {
                let rf = STATE.with(|st| st.borrow_mut().as_mut().unwrap().pending.remove(&r.id).unwrap());
                match r.result {
                    Ok(text) => {
                        rf.resolve.call(&JsValue::undefined(), &[js_string!(text.as_str()).into()], &mut ctx).unwrap();
                    }
                    Err(msg) => {
                        let e = JsError::from(JsNativeError::error().with_message(msg)).into_opaque(&mut ctx).unwrap();
                        rf.reject.call(&JsValue::undefined(), &[e], &mut ctx).unwrap();
                    }
                }
            }
            Err(_) => return report(start, "timeout", "wall-clock limit while awaiting tools", &logs(), 0),
        }
    }
}
