//! What devboy costs on a tool call: the same rmcp client calls a fast
//! upstream (`devboy-test-server`) straight and through `devboy mcp`, and the
//! difference is the proxy's price.
//!
//! Run with `cargo bench --bench proxy` (a release build). `DEVBOY_BENCH_CALLS`
//! sets the calls per mode and measurement (default 2000).
//!
//! Measured, in one run:
//!
//! 1. **Sequential latency**: one call at a time of `payload {bytes}` (4 KiB
//!    and 64 KiB of text), timed around `Peer::call_tool`, i.e. request
//!    serialisation, the round trip(s) over stdio pipes and decoding of the
//!    result. Reported: p50/p90/p99/mean per mode, the proxied/direct ratio
//!    at p50, and the added µs per call at p50, at the mean, and as the
//!    median of the per-pair differences. Also the CPU time per call of the
//!    direct upstream and of devboy (`/proc/<pid>/stat`, 10 ms ticks), which
//!    says where the added time is spent.
//! 2. **Throughput**: 16 calls in flight, the same number of calls in total,
//!    calls per second per mode, their ratio, and the added wall time per
//!    call amortised over the run.
//! 3. **Memory**: devboy's resident set (`VmRSS` in `/proc/<pid>/status`)
//!    after warm-up, then 1,000 and 10,000 calls of 4 KiB later (16 in
//!    flight), in a devboy process of its own so the call counts are exact.
//!    RSS includes what the allocator keeps, so a little growth while it
//!    settles is expected; "flat" here means under 1 MiB from 1,000 to
//!    10,000 calls, where a per-call leak of even one result would be 36 MiB.
//!
//! Targets (printed as MET / NOT MET): added p50 under 1 ms for a 4 KiB
//! result; memory flat in the number of calls.
//!
//! Method: the direct upstream and devboy (with its own upstream) run side
//! by side for the whole run, and their calls are interleaved, alternating
//! which goes first (ABBA), so drift in the machine (frequency, other load)
//! hits both modes alike; throughput runs alternate in several rounds for
//! the same reason. Every mode is warmed up first. The client runs on a
//! single-threaded tokio runtime so it adds as little scheduling noise as
//! possible on a small machine; every result's size is checked. Children's
//! stderr goes to `/dev/null`, except the proxied upstream's, which devboy
//! itself drains (part of what the proxy costs: the test server logs one
//! line per call).
//!
//! Ratios are only meaningful within one run; compare the printed figures,
//! not numbers from different machines or runs.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context as _, Result};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

mod support;
use support::{test_server_bin, WorkDir};

/// The small result size the latency target is about.
const SMALL: usize = 4 * 1024;
/// A large result, to see how the cost scales with size.
const LARGE: usize = 64 * 1024;
/// Calls in flight in the throughput measurement.
const IN_FLIGHT: usize = 16;
/// Calls per mode before anything is timed.
const WARM_UP: usize = 200;
/// Throughput runs alternate direct/proxied in this many rounds.
const ROUNDS: usize = 8;
/// Calls after which devboy's memory is read (after warm-up).
const MEMORY_MARKS: [usize; 2] = [1_000, 10_000];
/// Target: added latency per call at p50 for a 4 KiB result.
const TARGET_ADDED_P50: Duration = Duration::from_millis(1);
/// "Flat" memory: growth between the two marks stays under this.
const FLAT_GROWTH_KIB: u64 = 1024;

fn main() -> Result<()> {
    let calls = match std::env::var("DEVBOY_BENCH_CALLS") {
        Ok(raw) => raw
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n >= ROUNDS)
            .ok_or_else(|| {
                anyhow!("DEVBOY_BENCH_CALLS must be an integer >= {ROUNDS}, got {raw:?}")
            })?,
        Err(_) => 2000,
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?
        .block_on(run(calls))
}

async fn run(calls: usize) -> Result<()> {
    let started = Instant::now();
    let server = test_server_bin()?;
    let work = WorkDir::new("bench")?;
    let config = work.0.join("devboy.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.t]\ncommand = {:?}\n",
            server.display().to_string()
        ),
    )
    .context("writing the devboy config")?;

    let direct = Client::direct(&server).await?;
    let proxied = Client::devboy(&config).await?;
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "devboy proxy benchmark: {calls} timed calls per mode and measurement, {WARM_UP} warm-up, \
         {cpus} CPUs, rmcp client over stdio"
    );
    println!("direct: {}", server.display());
    println!("proxied: {} mcp -> same server\n", devboy_bin().display());

    for client in [&direct, &proxied] {
        for _ in 0..WARM_UP {
            client.call(SMALL).await?;
            client.call(LARGE).await?;
        }
    }

    println!(
        "sequential, one call at a time   {:>9} {:>9} {:>9} {:>9}   (µs per call)",
        "p50", "p90", "p99", "mean"
    );
    let small = Comparison::sequential(&direct, &proxied, SMALL, calls).await?;
    small.print();
    let large = Comparison::sequential(&direct, &proxied, LARGE, calls).await?;
    large.print();

    let throughput = Throughput::measure(&direct, &proxied, SMALL, calls).await?;
    throughput.print();

    direct.stop().await;
    proxied.stop().await;

    let memory = Memory::measure(&config).await?;
    memory.print();

    let added_p50 = small.added_p50();
    let latency_met = added_p50 < TARGET_ADDED_P50.as_secs_f64() * 1e6;
    let memory_met = memory.growth_kib() < FLAT_GROWTH_KIB as i64;
    println!(
        "\ntargets: added p50 at 4 KiB < 1 ms: {} ({added_p50:.1} µs); \
         memory flat (growth {}→{} calls < {FLAT_GROWTH_KIB} KiB): {} ({:+} KiB)",
        verdict(latency_met),
        MEMORY_MARKS[0],
        MEMORY_MARKS[1],
        verdict(memory_met),
        memory.growth_kib(),
    );
    println!("wall time {:.1} s\n", started.elapsed().as_secs_f64());

    let mut line = format!("proxy_bench calls={calls} cpus={cpus}");
    small.key_values(&mut line);
    large.key_values(&mut line);
    throughput.key_values(&mut line);
    memory.key_values(&mut line);
    line.push_str(&format!(
        " latency_target_met={latency_met} memory_flat={memory_met}"
    ));
    println!("{line}");
    Ok(())
}

fn verdict(met: bool) -> &'static str {
    if met {
        "MET"
    } else {
        "NOT MET"
    }
}

/// One connected client: straight to the test server, or to devboy.
struct Client {
    service: RunningService<RoleClient, ()>,
    /// The child process the client talks to.
    pid: u32,
    /// `payload` as this side names it.
    tool: &'static str,
}

impl Client {
    async fn direct(server: &Path) -> Result<Self> {
        Self::spawn(tokio::process::Command::new(server), "payload").await
    }

    async fn devboy(config: &Path) -> Result<Self> {
        let mut cmd = tokio::process::Command::new(devboy_bin());
        // Passthrough: the payloads repeat, and the bench measures the proxy,
        // not how much dedup saves.
        cmd.arg("mcp")
            .arg("--config")
            .arg(config)
            .args(["--pipeline", "passthrough"]);
        // Production logging (info), whatever the caller's environment says.
        cmd.env_remove("RUST_LOG");
        let client = Self::spawn(cmd, "t__payload").await?;
        // Waits (list grace) until the upstream has listed its tools.
        let tools = client.service.peer().list_all_tools().await?;
        ensure!(
            tools.iter().any(|tool| tool.name == client.tool),
            "devboy does not offer {}; it offers {:?}",
            client.tool,
            tools
                .iter()
                .map(|tool| tool.name.as_ref())
                .collect::<Vec<_>>()
        );
        Ok(client)
    }

    async fn spawn(cmd: tokio::process::Command, tool: &'static str) -> Result<Self> {
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .context("spawning")?;
        let pid = transport.id().context("child has no pid")?;
        let service = tokio::time::timeout(Duration::from_secs(20), ().serve(transport))
            .await
            .context("initialize timed out")?
            .context("initialize")?;
        Ok(Self { service, pid, tool })
    }

    fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    /// One `payload {bytes}` call; returns its duration.
    async fn call(&self, bytes: usize) -> Result<Duration> {
        call(self.peer(), self.tool, bytes).await
    }

    async fn stop(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.service.cancel()).await;
    }
}

async fn call(peer: &Peer<RoleClient>, tool: &'static str, bytes: usize) -> Result<Duration> {
    let params = CallToolRequestParams::new(tool).with_arguments(
        json!({ "bytes": bytes })
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let start = Instant::now();
    let result = peer.call_tool(params).await?;
    let elapsed = start.elapsed();
    let size = result
        .content
        .first()
        .and_then(|block| block.as_text())
        .map(|text| text.text.len());
    ensure!(
        size == Some(bytes) && result.is_error != Some(true),
        "{tool} answered {size:?} bytes instead of {bytes}"
    );
    Ok(elapsed)
}

/// Sequential latencies of both modes, in µs, sorted.
struct Comparison {
    bytes: usize,
    direct: Vec<f64>,
    proxied: Vec<f64>,
    /// Proxied minus direct, pair by pair, sorted.
    paired: Vec<f64>,
    /// CPU time per call of the direct upstream process, µs.
    upstream_cpu: f64,
    /// CPU time per call of the devboy process (all threads), µs.
    devboy_cpu: f64,
}

impl Comparison {
    async fn sequential(
        direct: &Client,
        proxied: &Client,
        bytes: usize,
        calls: usize,
    ) -> Result<Self> {
        let mut d = Vec::with_capacity(calls);
        let mut p = Vec::with_capacity(calls);
        let cpu_before = (cpu_time(direct.pid)?, cpu_time(proxied.pid)?);
        for i in 0..calls {
            // ABBA: alternate which mode goes first.
            if i % 2 == 0 {
                d.push(direct.call(bytes).await?);
                p.push(proxied.call(bytes).await?);
            } else {
                p.push(proxied.call(bytes).await?);
                d.push(direct.call(bytes).await?);
            }
        }
        let per_call = |before: Duration, after: Duration| {
            after.saturating_sub(before).as_secs_f64() * 1e6 / calls as f64
        };
        let upstream_cpu = per_call(cpu_before.0, cpu_time(direct.pid)?);
        let devboy_cpu = per_call(cpu_before.1, cpu_time(proxied.pid)?);
        let micros = |v: Vec<Duration>| -> Vec<f64> {
            let mut v: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e6).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let mut paired: Vec<f64> = p
            .iter()
            .zip(&d)
            .map(|(p, d)| (p.as_secs_f64() - d.as_secs_f64()) * 1e6)
            .collect();
        paired.sort_by(f64::total_cmp);
        Ok(Self {
            bytes,
            direct: micros(d),
            proxied: micros(p),
            paired,
            upstream_cpu,
            devboy_cpu,
        })
    }

    fn ratio_p50(&self) -> f64 {
        percentile(&self.proxied, 0.5) / percentile(&self.direct, 0.5)
    }

    fn added_p50(&self) -> f64 {
        percentile(&self.proxied, 0.5) - percentile(&self.direct, 0.5)
    }

    fn added_mean(&self) -> f64 {
        mean(&self.proxied) - mean(&self.direct)
    }

    fn print(&self) {
        let label = format!("{} KiB", self.bytes / 1024);
        for (mode, v) in [("direct", &self.direct), ("via devboy", &self.proxied)] {
            println!(
                "  {label:<7} {mode:<23} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                percentile(v, 0.5),
                percentile(v, 0.9),
                percentile(v, 0.99),
                mean(v)
            );
        }
        println!(
            "  {label:<7} proxied/direct at p50: {:.2}x; added: {:+.1} µs at p50, {:+.1} µs at the mean, \
             {:+.1} µs median of pairs",
            self.ratio_p50(),
            self.added_p50(),
            self.added_mean(),
            percentile(&self.paired, 0.5)
        );
        println!(
            "  {label:<7} CPU per call: upstream {:.1} µs, devboy {:.1} µs",
            self.upstream_cpu, self.devboy_cpu
        );
    }

    fn key_values(&self, line: &mut String) {
        let key = format!("seq_{}k", self.bytes / 1024);
        line.push_str(&format!(
            " {key}_direct_p50_us={:.1} {key}_proxied_p50_us={:.1} {key}_direct_p99_us={:.1} \
             {key}_proxied_p99_us={:.1} {key}_ratio_p50={:.2} {key}_added_p50_us={:.1} \
             {key}_added_mean_us={:.1} {key}_devboy_cpu_us={:.1}",
            percentile(&self.direct, 0.5),
            percentile(&self.proxied, 0.5),
            percentile(&self.direct, 0.99),
            percentile(&self.proxied, 0.99),
            self.ratio_p50(),
            self.added_p50(),
            self.added_mean(),
            self.devboy_cpu,
        ));
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// `calls` calls with [`IN_FLIGHT`] in flight; returns the wall time.
async fn burst(
    peer: &Peer<RoleClient>,
    tool: &'static str,
    bytes: usize,
    calls: usize,
) -> Result<Duration> {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..IN_FLIGHT.min(calls) {
        let peer = peer.clone();
        let next = next.clone();
        workers.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                call(&peer, tool, bytes).await?;
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(outcome) = workers.join_next().await {
        outcome.context("a worker panicked")??;
    }
    Ok(start.elapsed())
}

/// Throughput with [`IN_FLIGHT`] calls in flight, direct vs proxied.
struct Throughput {
    bytes: usize,
    direct: Duration,
    proxied: Duration,
    calls: usize,
}

impl Throughput {
    async fn measure(
        direct: &Client,
        proxied: &Client,
        bytes: usize,
        calls: usize,
    ) -> Result<Self> {
        burst(direct.peer(), direct.tool, bytes, WARM_UP).await?;
        burst(proxied.peer(), proxied.tool, bytes, WARM_UP).await?;
        let per_round = calls / ROUNDS;
        let (mut d, mut p) = (Duration::ZERO, Duration::ZERO);
        for round in 0..ROUNDS {
            if round % 2 == 0 {
                d += burst(direct.peer(), direct.tool, bytes, per_round).await?;
                p += burst(proxied.peer(), proxied.tool, bytes, per_round).await?;
            } else {
                p += burst(proxied.peer(), proxied.tool, bytes, per_round).await?;
                d += burst(direct.peer(), direct.tool, bytes, per_round).await?;
            }
        }
        Ok(Self {
            bytes,
            direct: d,
            proxied: p,
            calls: per_round * ROUNDS,
        })
    }

    fn per_second(&self, total: Duration) -> f64 {
        self.calls as f64 / total.as_secs_f64()
    }

    fn ratio(&self) -> f64 {
        self.per_second(self.direct) / self.per_second(self.proxied)
    }

    /// Added wall time per call, amortised over the concurrent run.
    fn added_us(&self) -> f64 {
        (self.proxied.as_secs_f64() - self.direct.as_secs_f64()) * 1e6 / self.calls as f64
    }

    fn print(&self) {
        println!(
            "\nconcurrent, {IN_FLIGHT} in flight, {} calls of {} KiB per mode in {ROUNDS} alternating rounds",
            self.calls,
            self.bytes / 1024
        );
        println!(
            "  direct {:.0} calls/s; via devboy {:.0} calls/s; direct/proxied {:.2}x; \
             added {:+.1} µs per call (wall time, amortised)",
            self.per_second(self.direct),
            self.per_second(self.proxied),
            self.ratio(),
            self.added_us()
        );
    }

    fn key_values(&self, line: &mut String) {
        line.push_str(&format!(
            " conc{IN_FLIGHT}_direct_cps={:.0} conc{IN_FLIGHT}_proxied_cps={:.0} \
             conc{IN_FLIGHT}_ratio={:.2} conc{IN_FLIGHT}_added_us={:.1}",
            self.per_second(self.direct),
            self.per_second(self.proxied),
            self.ratio(),
            self.added_us()
        ));
    }
}

/// devboy's resident memory over many calls, in KiB.
struct Memory {
    warm: u64,
    marks: [u64; 2],
    peak: u64,
}

impl Memory {
    async fn measure(config: &Path) -> Result<Self> {
        let client = Client::devboy(config).await?;
        burst(client.peer(), client.tool, SMALL, WARM_UP).await?;
        let warm = rss_kib(client.pid, "VmRSS")?;
        let mut marks = [0; 2];
        let mut done = 0;
        for (mark, at) in marks.iter_mut().zip(MEMORY_MARKS) {
            burst(client.peer(), client.tool, SMALL, at - done).await?;
            done = at;
            // Let devboy finish any work after the last answer went out.
            tokio::time::sleep(Duration::from_millis(100)).await;
            *mark = rss_kib(client.pid, "VmRSS")?;
        }
        let peak = rss_kib(client.pid, "VmHWM")?;
        client.stop().await;
        Ok(Self { warm, marks, peak })
    }

    fn growth_kib(&self) -> i64 {
        self.marks[1] as i64 - self.marks[0] as i64
    }

    fn print(&self) {
        let calls = (MEMORY_MARKS[1] - MEMORY_MARKS[0]) as f64;
        println!(
            "\nmemory, devboy VmRSS (own process, 4 KiB calls, {IN_FLIGHT} in flight, after {WARM_UP} warm-up)"
        );
        println!(
            "  after warm-up {} KiB; after {} calls {} KiB; after {} calls {} KiB; peak (VmHWM) {} KiB",
            self.warm, MEMORY_MARKS[0], self.marks[0], MEMORY_MARKS[1], self.marks[1], self.peak
        );
        println!(
            "  growth {}→{} calls: {:+} KiB ({:+.1} bytes per call)",
            MEMORY_MARKS[0],
            MEMORY_MARKS[1],
            self.growth_kib(),
            self.growth_kib() as f64 * 1024.0 / calls
        );
    }

    fn key_values(&self, line: &mut String) {
        line.push_str(&format!(
            " rss_warm_kib={} rss_1k_kib={} rss_10k_kib={} rss_growth_1k_10k_kib={} rss_peak_kib={}",
            self.warm,
            self.marks[0],
            self.marks[1],
            self.growth_kib(),
            self.peak
        ));
    }
}

/// CPU time (user + system, all threads, exited ones included) a process
/// has used so far, from `/proc/<pid>/stat`, in clock ticks of 10 ms
/// (`USER_HZ` is 100 on Linux).
fn cpu_time(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may contain
    // spaces: state is field 3, utime 14, stime 15.
    let (_, rest) = stat
        .rsplit_once(')')
        .with_context(|| format!("unexpected /proc/{pid}/stat: {stat:?}"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |index: usize| -> Result<u64> {
        fields
            .get(index)
            .and_then(|field| field.parse().ok())
            .with_context(|| format!("unexpected /proc/{pid}/stat: {stat:?}"))
    };
    Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// A `kB` field of `/proc/<pid>/status`.
fn rss_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    let kib = line.trim().trim_end_matches("kB").trim();
    kib.parse()
        .with_context(|| format!("{field} is not a number: {line:?}"))
}

fn devboy_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_devboy"))
}
