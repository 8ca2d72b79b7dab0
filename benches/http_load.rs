//! `devboy serve --http` under load: many clients at once through devboy to
//! a real server, and many sessions opened and closed.
//!
//! Run with `cargo bench --bench http_load` (a release build; needs the
//! test peers: `tests/peers/install.sh`). `DEVBOY_BENCH_CLIENTS` (default
//! 50), `DEVBOY_BENCH_CALLS` (calls per client, default 200) and
//! `DEVBOY_BENCH_SESSIONS` (the soak, default 10,000) change the sizes.
//!
//! The upstream is `@modelcontextprotocol/server-everything` serving
//! Streamable HTTP itself, so the same server is reached two ways with the
//! same rmcp client: **direct** (client → server) and **through devboy**
//! (client → `devboy serve --http` → server). Printed, in one run:
//!
//! 1. **Latency**: every client opens its own MCP session and makes its
//!    calls (`echo`) one after another, all clients at once; the p50 and
//!    p99 of a call direct and through devboy, and what devboy adds at
//!    each. Errors of either mode are counted (the target is none).
//! 2. **Memory per session**: devboy's resident set (`VmRSS`) with no
//!    client, then with every client's session open, divided by the
//!    number of sessions.
//! 3. **Soak**: sessions opened (initialize, one call) and closed
//!    (`DELETE`) one after another, devboy's resident set after the first
//!    tenth and at the end: a leak of one session's state would show as
//!    growth in proportion.
//!
//! Ratios are only meaningful within one run.

// Only its WorkDir is used here.
#[allow(dead_code)]
mod support;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use devboy_testkit::peers;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(38_000)
}

fn wait_listening(port: u16, what: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("{what} did not listen on {port} within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One client's calls at `url`; the latency of each, or the error count.
async fn client_calls(url: String, tool: &'static str, calls: usize) -> (Vec<Duration>, usize) {
    let mut times = Vec::with_capacity(calls);
    let mut errors = 0;
    let transport = StreamableHttpClientTransport::from_uri(url);
    let client = match ().serve(transport).await {
        Ok(client) => client,
        Err(_) => return (times, calls),
    };
    for n in 0..calls {
        let mut params = CallToolRequestParams::new(tool);
        params.arguments = serde_json::json!({"message": format!("call {n}")})
            .as_object()
            .cloned();
        let start = Instant::now();
        match client.peer().call_tool(params).await {
            Ok(result) if result.is_error != Some(true) => times.push(start.elapsed()),
            _ => errors += 1,
        }
    }
    let _ = client.cancel().await;
    (times, errors)
}

/// All clients at once; every call's latency, and the errors.
async fn round(
    url: &str,
    tool: &'static str,
    clients: usize,
    calls: usize,
) -> (Vec<Duration>, usize) {
    let tasks: Vec<_> = (0..clients)
        .map(|_| tokio::spawn(client_calls(url.to_owned(), tool, calls)))
        .collect();
    let mut all = Vec::with_capacity(clients * calls);
    let mut errors = 0;
    for task in tasks {
        let (times, failed) = task.await.unwrap_or((Vec::new(), calls));
        all.extend(times);
        errors += failed;
    }
    all.sort();
    (all, errors)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> Result<()> {
    let clients = env_usize("DEVBOY_BENCH_CLIENTS", 50);
    let calls = env_usize("DEVBOY_BENCH_CALLS", 200);
    let sessions = env_usize("DEVBOY_BENCH_SESSIONS", 10_000);
    let work = support::WorkDir::new("http-load")?;
    // The HTTP client's TLS provider (unused on loopback, but required).
    devboy_mcp::install_tls_provider();

    let everything = peers::server_everything();
    let upstream_port = free_port();
    let _upstream = KillOnDrop(
        Command::new(&everything.program)
            .arg("streamableHttp")
            .env("PORT", upstream_port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting server-everything (run tests/peers/install.sh)")?,
    );
    wait_listening(upstream_port, "server-everything")?;
    let config = work.0.join("devboy.toml");
    std::fs::write(
        &config,
        format!("[servers.e]\ntype = \"http\"\nurl = \"http://127.0.0.1:{upstream_port}/mcp\"\n"),
    )?;
    let devboy_port = free_port();
    let devboy = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_devboy"))
            .args(["serve", "--http", &format!("127.0.0.1:{devboy_port}")])
            .arg("--config")
            .arg(&config)
            .args(["--rate-limit", "1000000", "--list-grace-ms", "30000"])
            .env("DEVBOY_CONFIG_DIR", &work.0)
            .env("DEVBOY_CACHE_DIR", work.0.join("cache"))
            .env("DEVBOY_RUNTIME_DIR", work.0.join("run"))
            .env("DEVBOY_TELEMETRY", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting devboy serve")?,
    );
    wait_listening(devboy_port, "devboy serve")?;
    let pid = devboy.0.id();
    let direct_url = format!("http://127.0.0.1:{upstream_port}/mcp");
    let via_url = format!("http://127.0.0.1:{devboy_port}/mcp");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;

    runtime.block_on(async {
        // Warm-up: devboy's upstream ready, both paths exercised.
        round(&via_url, "e__echo", 2, 20).await;
        round(&direct_url, "echo", 2, 20).await;
        let rss_idle = rss_kib(pid);

        // 1. Latency, ABBA so drift hits both modes alike.
        let (mut direct, mut via) = (Vec::new(), Vec::new());
        let (mut direct_errors, mut via_errors) = (0, 0);
        for first_via in [false, true, true, false] {
            for use_via in [first_via, !first_via] {
                let (url, tool) = if use_via {
                    (&via_url, "e__echo")
                } else {
                    (&direct_url, "echo")
                };
                let (times, errors) = round(url, tool, clients, calls / 4).await;
                if use_via {
                    via.extend(times);
                    via_errors += errors;
                } else {
                    direct.extend(times);
                    direct_errors += errors;
                }
            }
        }
        direct.sort();
        via.sort();
        println!(
            "http load: {clients} clients x {calls} calls (echo), server-everything over Streamable HTTP"
        );
        for (label, p) in [("p50", 0.5), ("p99", 0.99)] {
            let (d, v) = (percentile(&direct, p), percentile(&via, p));
            println!(
                "  {label}: direct {:.2} ms, through devboy {:.2} ms, added {:.2} ms",
                ms(d),
                ms(v),
                ms(v.saturating_sub(d))
            );
        }
        println!(
            "  calls: direct {} ok / {direct_errors} errors, through devboy {} ok / {via_errors} errors",
            direct.len(),
            via.len()
        );

        // 2. Memory per open session: every client connected at once.
        let mut open = Vec::new();
        for _ in 0..clients {
            let transport = StreamableHttpClientTransport::from_uri(via_url.clone());
            if let Ok(client) = ().serve(transport).await {
                open.push(client);
            }
        }
        let rss_open = rss_kib(pid);
        println!(
            "  memory: devboy {} KiB idle, {} KiB with {} sessions open: {:.1} KiB per session",
            rss_idle,
            rss_open,
            open.len(),
            (rss_open.saturating_sub(rss_idle)) as f64 / open.len().max(1) as f64
        );
        for client in open {
            let _ = client.cancel().await;
        }

        // 3. Soak: sessions opened and closed one after another.
        let started = Instant::now();
        let mut failures = 0;
        let mut rss_tenth = 0;
        for n in 0..sessions {
            let transport = StreamableHttpClientTransport::from_uri(via_url.clone());
            match ().serve(transport).await {
                Ok(client) => {
                    let mut params = CallToolRequestParams::new("e__echo");
                    params.arguments = serde_json::json!({"message": "soak"}).as_object().cloned();
                    if client.peer().call_tool(params).await.is_err() {
                        failures += 1;
                    }
                    let _ = client.cancel().await;
                }
                Err(_) => failures += 1,
            }
            if n + 1 == sessions / 10 {
                rss_tenth = rss_kib(pid);
            }
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        let rss_end = rss_kib(pid);
        // How many sessions devboy still holds (each client ended its own).
        let socket = devboy_mcp::control::socket_dir(&work.0.join("run")).join(format!("{pid}.sock"));
        let status = devboy_mcp::control::request(&socket, &serde_json::json!({"action": "status"}))
            .await
            .map(|s| s["sessions"]["open"].clone())
            .unwrap_or_default();
        println!("  sessions devboy holds after the soak: {status}");
        println!(
            "  soak: {sessions} sessions opened and closed in {:.1} s, {failures} failures; devboy {} KiB after {}, {} KiB after all ({:+} KiB)",
            started.elapsed().as_secs_f64(),
            rss_tenth,
            sessions / 10,
            rss_end,
            rss_end as i64 - rss_tenth as i64
        );
    });
    Ok(())
}
