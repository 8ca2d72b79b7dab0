// Shared by both workers: options, a fake upstream thread and the report line.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

pub struct Opts {
    pub timeout_ms: u64,
    pub memory_mib: usize,
    pub stack_kib: usize,
    pub thread_stack_kib: usize,
    pub delay_ms: u64,
    pub cancel_after_ms: Option<u64>,
    pub max_calls: u64,
    pub loop_limit: u64,
    pub recursion_limit: usize,
}

impl Opts {
    pub fn from_args() -> Self {
        let mut o = Opts {
            timeout_ms: 2000,
            memory_mib: 64,
            stack_kib: 1024,
            thread_stack_kib: 8192,
            delay_ms: 5,
            cancel_after_ms: None,
            max_calls: 200,
            loop_limit: u64::MAX,
            recursion_limit: 512,
        };
        let a: Vec<String> = std::env::args().skip(1).collect();
        let mut i = 0;
        while i + 1 < a.len() {
            let v = &a[i + 1];
            match a[i].as_str() {
                "--timeout-ms" => o.timeout_ms = v.parse().unwrap(),
                "--memory-mib" => o.memory_mib = v.parse().unwrap(),
                "--stack-kib" => o.stack_kib = v.parse().unwrap(),
                "--thread-stack-kib" => o.thread_stack_kib = v.parse().unwrap(),
                "--delay-ms" => o.delay_ms = v.parse().unwrap(),
                "--cancel-after-ms" => o.cancel_after_ms = Some(v.parse().unwrap()),
                "--max-calls" => o.max_calls = v.parse().unwrap(),
                "--loop-limit" => o.loop_limit = v.parse().unwrap(),
                "--recursion-limit" => o.recursion_limit = v.parse().unwrap(),
                x => panic!("unknown option {x}"),
            }
            i += 2;
        }
        o
    }
}

pub struct Req {
    pub id: u64,
    pub name: String,
    pub args: String,
}
pub struct Resp {
    pub id: u64,
    pub result: Result<String, String>,
}
pub enum Msg {
    Resp(Resp),
    Cancel,
}

/// Canned upstream answers, as raw JSON text, exactly as a server would write them.
pub fn answer(name: &str, args: &str) -> Option<Result<String, String>> {
    Some(match name {
        "t__echo" => Ok(args.to_string()),
        "t__big" => Ok(r#"{"id": 12345678901234567890123, "u64max": 18446744073709551615, "safe": 9007199254740991, "unsafe": 9007199254740993, "neg": -9223372036854775808, "price": 0.1000000000000000000001, "pi": 3.141592653589793, "one": 1.0, "half": 0.5, "exp": 1e400, "tiny": 1e-400, "z": 0.0, "negz": -0, "cents": 10.50, "e": 1E5, "e2": 2.5e-3, "n": [1, 2.25, 123456789012345678]}"#.to_string()),
        "t__list" => Ok(format!("[{}]", (0..40).map(|i| format!("{{\"path\":\"src/f{i}.rs\",\"lines\":{}}}", i * 7 % 13)).collect::<Vec<_>>().join(","))),
        "t__fail" => Err("upstream said no".to_string()),
        "t__hang" => return None,
        _ => Err(format!("unknown tool {name}")),
    })
}

pub fn spawn_upstream(delay_ms: u64) -> (mpsc::Sender<Req>, mpsc::Receiver<Msg>, mpsc::Sender<Msg>) {
    let (req_tx, req_rx) = mpsc::channel::<Req>();
    let (resp_tx, resp_rx) = mpsc::channel::<Msg>();
    let t = resp_tx.clone();
    std::thread::spawn(move || {
        for r in req_rx {
            let t = t.clone();
            // one thread per call: calls in flight overlap like real upstream requests
            std::thread::spawn(move || {
                if let Some(result) = answer(&r.name, &r.args) {
                    std::thread::sleep(Duration::from_millis(delay_ms));
                    let _ = t.send(Msg::Resp(Resp { id: r.id, result }));
                }
            });
        }
    });
    (req_tx, resp_rx, resp_tx)
}

/// Simulates devboy's cancel arriving on another thread (e.g. the stdin reader of a worker).
pub fn spawn_canceller(ms: u64, flag: Arc<AtomicBool>, wake: mpsc::Sender<Msg>) {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(ms));
        flag.store(true, Ordering::Relaxed);
        let _ = wake.send(Msg::Cancel);
    });
}

pub fn report(start: Instant, status: &str, text: &str, logs: &[String], interrupts: u64) -> String {
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    let mut s = String::from("{\"status\":");
    s += &json_str(status);
    s += &format!(",\"ms\":{ms:.1},\"interrupt_checks\":{interrupts},\"logs\":[");
    s += &logs.iter().map(|l| json_str(l)).collect::<Vec<_>>().join(",");
    s += "],\"value\":";
    s += &json_str(text);
    s += "}";
    s
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}
