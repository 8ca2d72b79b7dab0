//! What devboy costs on a tool call: the same rmcp client calls a fast
//! upstream (`devboy-test-server`) straight and through `devboy mcp`, and the
//! difference is the proxy's price.
//!
//! Run with `cargo bench --bench proxy` (a release build). `DEVBOY_BENCH_CALLS`
//! sets the calls per mode and measurement (default 2000).
//!
//! Every call is `echo` of new text (log-like lines, a call number in each,
//! so no two calls are alike and the default pipeline has nothing to
//! deduplicate), as a client would send it, in three modes: **direct** to
//! the test server, **via devboy** (`--pipeline passthrough`: the hop
//! alone), and **devboy, default pipeline** (what a user runs).
//!
//! Measured, in one run:
//!
//! 1. **Sequential latency**: one call at a time of 4 KiB and of 64 KiB,
//!    timed around `Peer::call_tool`, i.e. request serialisation, the round
//!    trip(s) over stdio pipes and decoding of the result. Reported:
//!    p50/p90/p99/mean per mode, each devboy mode's ratio to direct at p50,
//!    and the added µs per call at p50, at the mean, and as the median of
//!    the per-call differences. Also the CPU time per call of each mode's
//!    process (`/proc/<pid>/stat`, 10 ms ticks), which says where the added
//!    time is spent.
//! 2. **Throughput**: 16 calls in flight, the same number of calls in total,
//!    calls per second direct and via devboy (passthrough), their ratio, and
//!    the added wall time per call amortised over the run.
//! 3. **Memory**: devboy's resident set (`VmRSS` in `/proc/<pid>/status`)
//!    after warm-up, then 1,000 and 10,000 calls of 4 KiB later (16 in
//!    flight), in a devboy process of its own so the call counts are exact.
//!    RSS includes what the allocator keeps, so a little growth while it
//!    settles is expected; "flat" here means under 1 MiB from 1,000 to
//!    10,000 calls, where a per-call leak of even one result would be 36 MiB.
//!
//! Targets (printed as MET / NOT MET), added p50 at 4 KiB: at most 100 µs
//! passthrough and 250 µs under the default pipeline; memory flat in the
//! number of calls.
//!
//! Method: the three processes (each devboy with its own upstream) run side
//! by side for the whole run, and their calls are interleaved, each mode
//! going first in turn, so drift in the machine (frequency, other load)
//! hits all alike; throughput runs alternate in several rounds for the same
//! reason. Every mode is warmed up first. The client runs on a
//! single-threaded tokio runtime so it adds as little scheduling noise as
//! possible on a small machine; every answer is checked (passthrough and
//! direct: the text sent, exactly). Children's stderr goes to `/dev/null`,
//! except the proxied upstreams', which devboy itself drains (part of what
//! the proxy costs: the test server logs one line per call).
//!
//! A fourth mode, **bare relay**, is the floor of any stdio proxy on the
//! machine: `devboy-test-server floor`, a process that copies lines both
//! ways on two blocking threads and parses each line the server sends
//! once, with nothing else to do. Its added p50 is what two more pipe hops
//! and a wake-up each way cost here; what devboy adds above it is
//! devboy's own.
//!
//! `DEVBOY_BENCH_DEVBOY=target/profiling/devboy` measures another devboy
//! binary, such as the profiling build, under `perf record`.
//! `DEVBOY_BENCH_BASELINE=/path/to/devboy` adds that binary's two devboy
//! modes to the same run (`baseline, …` rows, keys `base_passthrough` and
//! `base_pipeline`), so a change is measured against the build before it
//! with both interleaved call by call, not from two runs.
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
/// Target: added latency per call at p50 for a 4 KiB result, passthrough.
const TARGET_PASSTHROUGH_P50_US: f64 = 100.0;
/// Target: the same under the default pipeline.
const TARGET_PIPELINE_P50_US: f64 = 250.0;
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
    let proxied = Client::devboy(&devboy_bin(), &config, Some("passthrough"), false).await?;
    let pipelined = Client::devboy(&devboy_bin(), &config, None, false).await?;
    let relay = Client::relay(&server).await?;
    let baseline = match std::env::var_os("DEVBOY_BENCH_BASELINE") {
        Some(bin) => {
            let bin = std::path::PathBuf::from(bin);
            vec![
                Client::devboy(&bin, &config, Some("passthrough"), true).await?,
                Client::devboy(&bin, &config, None, true).await?,
            ]
        }
        None => Vec::new(),
    };
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "devboy proxy benchmark: {calls} timed calls per mode and measurement, {WARM_UP} warm-up, \
         {cpus} CPUs, rmcp client over stdio, echo of new log-like text each call"
    );
    println!("direct: {}", server.display());
    println!(
        "via devboy: {} mcp --pipeline passthrough -> same server",
        devboy_bin().display()
    );
    println!(
        "via devboy, default pipeline: {} mcp -> same server",
        devboy_bin().display()
    );
    println!("bare relay: {} floor -> same server", server.display());
    if let Some(bin) = std::env::var_os("DEVBOY_BENCH_BASELINE") {
        println!(
            "baseline: {} mcp, both devboy modes again",
            std::path::Path::new(&bin).display()
        );
    }
    println!();

    // Index 0 is direct, 1 passthrough, 2 the default pipeline, 3 the
    // bare relay, then the baseline's two modes.
    let mut modes = vec![&direct, &proxied, &pipelined, &relay];
    modes.extend(baseline.iter());
    for client in &modes {
        for _ in 0..WARM_UP {
            client.call(SMALL).await?;
            client.call(LARGE).await?;
        }
    }

    println!(
        "sequential, one call at a time     {:>9} {:>9} {:>9} {:>9}   (µs per call)",
        "p50", "p90", "p99", "mean"
    );
    let small = Comparison::sequential(&modes, SMALL, calls).await?;
    small.print();
    let large = Comparison::sequential(&modes, LARGE, calls).await?;
    large.print();

    let throughput = Throughput::measure(&direct, &proxied, SMALL, calls).await?;
    throughput.print();

    direct.stop().await;
    proxied.stop().await;
    pipelined.stop().await;
    relay.stop().await;
    for client in baseline {
        client.stop().await;
    }

    let memory = Memory::measure(&config).await?;
    memory.print();

    let passthrough_p50 = small.added_p50(1);
    let pipeline_p50 = small.added_p50(2);
    println!(
        "\nthe floor at 4 KiB, a bare relay: {:+.1} µs added at p50; devboy above it: \
         passthrough {:+.1} µs, default pipeline {:+.1} µs",
        small.added_p50(3),
        passthrough_p50 - small.added_p50(3),
        pipeline_p50 - small.added_p50(3),
    );
    let passthrough_met = passthrough_p50 <= TARGET_PASSTHROUGH_P50_US;
    let pipeline_met = pipeline_p50 <= TARGET_PIPELINE_P50_US;
    let memory_met = memory.growth_kib() < FLAT_GROWTH_KIB as i64;
    println!(
        "\ntargets at 4 KiB, added p50: passthrough <= {TARGET_PASSTHROUGH_P50_US} µs: {} \
         ({passthrough_p50:+.1} µs); default pipeline <= {TARGET_PIPELINE_P50_US} µs: {} \
         ({pipeline_p50:+.1} µs); memory flat (growth {}→{} calls < {FLAT_GROWTH_KIB} KiB): {} \
         ({:+} KiB)",
        verdict(passthrough_met),
        verdict(pipeline_met),
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
        " passthrough_target_met={passthrough_met} pipeline_target_met={pipeline_met} \
         memory_flat={memory_met}"
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
    /// `echo` as this side names it.
    tool: &'static str,
    /// What the rows of this mode are called.
    label: &'static str,
    /// Whether the answer must be the text sent (not under the default
    /// pipeline, which may change it).
    exact: bool,
}

impl Client {
    async fn direct(server: &Path) -> Result<Self> {
        Self::spawn(tokio::process::Command::new(server), "echo", "direct", true).await
    }

    /// The floor: a relay that copies lines and does nothing else.
    async fn relay(server: &Path) -> Result<Self> {
        let mut cmd = tokio::process::Command::new(server);
        cmd.args(["floor", "--"]).arg(server);
        Self::spawn(cmd, "echo", "bare relay", true).await
    }

    /// `bin` with `--pipeline NAME`, or with its default pipeline; a
    /// `baseline` one's rows say so.
    async fn devboy(
        bin: &Path,
        config: &Path,
        pipeline: Option<&str>,
        baseline: bool,
    ) -> Result<Self> {
        let mut cmd = tokio::process::Command::new(bin);
        cmd.arg("mcp").arg("--config").arg(config);
        if let Some(pipeline) = pipeline {
            cmd.args(["--pipeline", pipeline]);
        }
        // Production logging (info), whatever the caller's environment says.
        cmd.env_remove("RUST_LOG");
        let label = match (pipeline, baseline) {
            (Some(_), false) => "via devboy",
            (None, false) => "devboy, default pipeline",
            (Some(_), true) => "baseline, via devboy",
            (None, true) => "baseline, default pipeline",
        };
        let client = Self::spawn(cmd, "t__echo", label, pipeline.is_some()).await?;
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

    async fn spawn(
        cmd: tokio::process::Command,
        tool: &'static str,
        label: &'static str,
        exact: bool,
    ) -> Result<Self> {
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .context("spawning")?;
        let pid = transport.id().context("child has no pid")?;
        let service = tokio::time::timeout(Duration::from_secs(20), ().serve(transport))
            .await
            .context("initialize timed out")?
            .context("initialize")?;
        Ok(Self {
            service,
            pid,
            tool,
            label,
            exact,
        })
    }

    fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    /// One `echo` call of `bytes` bytes; returns its duration.
    async fn call(&self, bytes: usize) -> Result<Duration> {
        call(self.peer(), self.tool, bytes, self.exact).await
    }

    async fn stop(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.service.cancel()).await;
    }
}

/// The calls made so far, so every call's text is new to devboy.
static SEQ: AtomicUsize = AtomicUsize::new(0);

/// `bytes` bytes of log-like lines, distinct for every call (so the default
/// pipeline finds nothing to deduplicate and does its whole work).
fn call_text(bytes: usize) -> String {
    use std::fmt::Write as _;
    let call = SEQ.fetch_add(1, Ordering::Relaxed);
    let mut text = String::with_capacity(bytes + 128);
    let mut line = 0;
    while text.len() < bytes {
        let _ = writeln!(
            text,
            "2026-12-03T18:{:02}:{:02}.{:03}Z INFO call={call} line={line} GET /api/items/{} \
             200 {} ms",
            line / 60 % 60,
            line % 60,
            line * 7 % 1000,
            call * 31 + line,
            line % 97
        );
        line += 1;
    }
    text.truncate(bytes);
    text
}

/// One `echo` call of `bytes` bytes of new text; returns its duration. A
/// passthrough answer must be the text itself; the default pipeline's may
/// be what it made of it, but not an error.
async fn call(
    peer: &Peer<RoleClient>,
    tool: &'static str,
    bytes: usize,
    exact: bool,
) -> Result<Duration> {
    let text = call_text(bytes);
    let params = CallToolRequestParams::new(tool).with_arguments(
        json!({ "text": text })
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let start = Instant::now();
    let result = peer.call_tool(params).await?;
    let elapsed = start.elapsed();
    let answer = result
        .content
        .first()
        .and_then(|block| block.as_text())
        .map(|block| block.text.as_str());
    ensure!(
        result.is_error != Some(true)
            && answer.is_some_and(|answer| if exact {
                answer == text
            } else {
                !answer.is_empty()
            }),
        "{tool} did not answer its {bytes} bytes: {:?}",
        answer.map(|a| a.chars().take(200).collect::<String>())
    );
    Ok(elapsed)
}

/// Sequential latencies of each mode, in µs, sorted; the first mode is
/// direct, the others go through devboy.
struct Comparison {
    bytes: usize,
    labels: Vec<&'static str>,
    latencies: Vec<Vec<f64>>,
    /// Each proxied mode minus direct, call by call, sorted (index 0 empty).
    paired: Vec<Vec<f64>>,
    /// CPU time per call of each mode's process (the direct upstream's, then
    /// each devboy's, all threads), µs.
    cpu: Vec<f64>,
}

impl Comparison {
    async fn sequential(modes: &[&Client], bytes: usize, calls: usize) -> Result<Self> {
        let mut latencies = vec![Vec::with_capacity(calls); modes.len()];
        let cpu_before = modes
            .iter()
            .map(|mode| cpu_time(mode.pid))
            .collect::<Result<Vec<_>>>()?;
        for i in 0..calls {
            // Each mode goes first in turn, so drift hits all alike.
            for k in 0..modes.len() {
                let m = (i + k) % modes.len();
                latencies[m].push(modes[m].call(bytes).await?);
            }
        }
        let cpu = modes
            .iter()
            .zip(cpu_before)
            .map(|(mode, before)| {
                let after = cpu_time(mode.pid)?;
                Ok(after.saturating_sub(before).as_secs_f64() * 1e6 / calls as f64)
            })
            .collect::<Result<Vec<_>>>()?;
        let paired = latencies
            .iter()
            .enumerate()
            .map(|(m, mode)| {
                let mut pairs: Vec<f64> = if m == 0 {
                    Vec::new()
                } else {
                    mode.iter()
                        .zip(&latencies[0])
                        .map(|(p, d)| (p.as_secs_f64() - d.as_secs_f64()) * 1e6)
                        .collect()
                };
                pairs.sort_by(f64::total_cmp);
                pairs
            })
            .collect();
        let latencies = latencies
            .into_iter()
            .map(|v| {
                let mut v: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e6).collect();
                v.sort_by(f64::total_cmp);
                v
            })
            .collect();
        Ok(Self {
            bytes,
            labels: modes.iter().map(|mode| mode.label).collect(),
            latencies,
            paired,
            cpu,
        })
    }

    fn ratio_p50(&self, mode: usize) -> f64 {
        percentile(&self.latencies[mode], 0.5) / percentile(&self.latencies[0], 0.5)
    }

    fn added_p50(&self, mode: usize) -> f64 {
        percentile(&self.latencies[mode], 0.5) - percentile(&self.latencies[0], 0.5)
    }

    fn added_mean(&self, mode: usize) -> f64 {
        mean(&self.latencies[mode]) - mean(&self.latencies[0])
    }

    fn print(&self) {
        let label = format!("{} KiB", self.bytes / 1024);
        for (mode, v) in self.labels.iter().zip(&self.latencies) {
            println!(
                "  {label:<7} {mode:<26} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                percentile(v, 0.5),
                percentile(v, 0.9),
                percentile(v, 0.99),
                mean(v)
            );
        }
        for m in 1..self.labels.len() {
            println!(
                "  {label:<7} {}: {:.2}x direct at p50; added {:+.1} µs at p50, {:+.1} µs at the \
                 mean, {:+.1} µs median of pairs",
                self.labels[m],
                self.ratio_p50(m),
                self.added_p50(m),
                self.added_mean(m),
                percentile(&self.paired[m], 0.5)
            );
        }
        let cpu: Vec<String> = self
            .labels
            .iter()
            .zip(&self.cpu)
            .map(|(mode, cpu)| format!("{mode} {cpu:.1} µs"))
            .collect();
        println!(
            "  {label:<7} CPU per call (its process): {}",
            cpu.join(", ")
        );
    }

    fn key_values(&self, line: &mut String) {
        const KEYS: [&str; 6] = [
            "direct",
            "passthrough",
            "pipeline",
            "relay",
            "base_passthrough",
            "base_pipeline",
        ];
        let key = format!("seq_{}k", self.bytes / 1024);
        for (m, mode) in KEYS.iter().enumerate().take(self.latencies.len()) {
            line.push_str(&format!(
                " {key}_{mode}_p50_us={:.1} {key}_{mode}_p99_us={:.1} {key}_{mode}_cpu_us={:.1}",
                percentile(&self.latencies[m], 0.5),
                percentile(&self.latencies[m], 0.99),
                self.cpu[m],
            ));
            if m > 0 {
                line.push_str(&format!(
                    " {key}_{mode}_added_p50_us={:.1} {key}_{mode}_added_mean_us={:.1}",
                    self.added_p50(m),
                    self.added_mean(m),
                ));
            }
        }
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
async fn burst(client: &Client, bytes: usize, calls: usize) -> Result<Duration> {
    let (tool, exact) = (client.tool, client.exact);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..IN_FLIGHT.min(calls) {
        let peer = client.peer().clone();
        let next = next.clone();
        workers.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                call(&peer, tool, bytes, exact).await?;
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
        burst(direct, bytes, WARM_UP).await?;
        burst(proxied, bytes, WARM_UP).await?;
        let per_round = calls / ROUNDS;
        let (mut d, mut p) = (Duration::ZERO, Duration::ZERO);
        for round in 0..ROUNDS {
            if round % 2 == 0 {
                d += burst(direct, bytes, per_round).await?;
                p += burst(proxied, bytes, per_round).await?;
            } else {
                p += burst(proxied, bytes, per_round).await?;
                d += burst(direct, bytes, per_round).await?;
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
        let client = Client::devboy(&devboy_bin(), config, Some("passthrough"), false).await?;
        burst(&client, SMALL, WARM_UP).await?;
        let warm = rss_kib(client.pid, "VmRSS")?;
        let mut marks = [0; 2];
        let mut done = 0;
        for (mark, at) in marks.iter_mut().zip(MEMORY_MARKS) {
            burst(&client, SMALL, at - done).await?;
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

/// The devboy binary measured: this build's, or `DEVBOY_BENCH_DEVBOY` (a
/// profiling build with symbols, `cargo build --profile profiling`, to run
/// the bench under `perf record`).
fn devboy_bin() -> std::path::PathBuf {
    std::env::var_os("DEVBOY_BENCH_DEVBOY")
        .map_or_else(|| env!("CARGO_BIN_EXE_devboy").into(), Into::into)
}
