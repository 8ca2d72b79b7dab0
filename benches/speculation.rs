//! What read-only prefetch buys on a slow server: an agent's
//! `search_files` on `@modelcontextprotocol/server-filesystem` behind a
//! relay that delays every response by 300 ms
//! (`devboy-test-server relay --delay-ms 300`), then reads of its three
//! hits (`read_text_file`, one after another, no think time), with
//! speculation off and on.
//!
//! Run with `cargo bench --bench speculation`. The proxy and session run in
//! process as `devboy mcp` runs them, with the planner it runs
//! (`ConfiguredPlanner`: devboy-enrichment's planner and its shipped edge
//! `search_files` → `read_text_file` of the first hits).
//!
//! Measured:
//!
//! 1. **Wall time** of the four calls, median of `ROUNDS` rounds per mode
//!    (modes alternate round by round, so drift hits all alike): off, on
//!    with the default caps (`per_host = 3`), and on with `per_host = 2`
//!    (the third read is declined as host-busy and goes upstream). Reported:
//!    the on/off ratio (target ≤ 0.6), upstream calls per round, and wasted
//!    prefetches (dispatched and not used). And inline mode: the reads
//!    come with the search's answer, so the agent makes one call (in a
//!    real session, one model turn instead of four).
//! 2. **Planning cost**: what the step after an answer costs the call
//!    path (the planner, the engine's checks and bookkeeping), timed over
//!    10,000 runs on a search's result whose three follow-ups are already
//!    held (so nothing is sent): the planner's projection and scoring and
//!    the engine's own checks.
//! 3. **Memory**: 10,000 calls on the same server without the relay, each
//!    search on a different pattern so prefetches keep coming and most are
//!    never read (the store fills, evicts and expires): the store's entries
//!    and bytes and this process's `VmRSS` after 1,000 and 10,000 calls.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _, Result};
use devboy_core::config::{ConfigFormat, ProxyConfig};
use devboy_core::pipeline_config::PipelineConfig;
use devboy_core::speculation::PrefetchEnd;
use devboy_mcp::speculation::ConfiguredPlanner;
use devboy_mcp::{BuiltinRegistry, Passthrough, PendingCall, Proxy, ProxyOptions, Session};
use rmcp::model::CallToolResult;
use serde_json::json;

mod support;
use support::{test_server_bin, WorkDir};

const DELAY_MS: u64 = 300;
const ROUNDS: usize = 5;
const MEMORY_MARKS: [usize; 2] = [1_000, 10_000];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Off,
    On {
        per_host: usize,
    },
    /// `mode = "inline"`: the reads come with the search's answer, and the
    /// agent reads only what it was not shown.
    Inline,
}

impl Mode {
    fn label(self) -> String {
        match self {
            Mode::Off => "off".into(),
            Mode::On { per_host } => format!("on, per_host={per_host}"),
            Mode::Inline => "inline".into(),
        }
    }
}

struct Round {
    wall: Duration,
    /// Calls the agent made (each one a model turn in a real session).
    agent_calls: u64,
    upstream_calls: u64,
    wasted: u64,
    hits: u64,
}

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> Result<()> {
    let work = WorkDir::new("spec-bench")?;
    let root = work.0.join("repo");
    std::fs::create_dir_all(&root)?;
    for i in 0..3 {
        std::fs::write(
            root.join(format!("hit{i}.rs")),
            "fn main() {}\n".repeat(150),
        )?;
    }
    for i in 0..20 {
        std::fs::write(root.join(format!("other{i}.txt")), "x\n")?;
    }
    let root = root.canonicalize()?;
    let relay = test_server_bin()?;
    let filesystem = devboy_testkit::peers::server_filesystem(&root);

    let modes = [
        Mode::Off,
        Mode::On { per_host: 3 },
        Mode::On { per_host: 2 },
        Mode::Inline,
    ];
    let mut rounds: Vec<Vec<Round>> = modes.iter().map(|_| Vec::new()).collect();
    println!(
        "speculation: search_files + 3 × read_text_file on server-filesystem, responses delayed {DELAY_MS} ms"
    );
    let config = format!(
        "[servers.fs]\ncommand = {:?}\nargs = [\"relay\", \"--delay-ms\", \"{DELAY_MS}\", \"--\", {:?}, {:?}]\n",
        relay.display().to_string(),
        filesystem.program_str(),
        root.display().to_string()
    );
    for round in 0..ROUNDS {
        // Alternate the order per round.
        let order: Vec<usize> = if round % 2 == 0 {
            (0..modes.len()).collect()
        } else {
            (0..modes.len()).rev().collect()
        };
        for i in order {
            rounds[i].push(one_round(&config, &root, modes[i]).await?);
        }
    }
    let median = |rs: &[Round]| {
        let mut walls: Vec<Duration> = rs.iter().map(|r| r.wall).collect();
        walls.sort();
        walls[walls.len() / 2]
    };
    let off = median(&rounds[0]);
    for (mode, rs) in modes.iter().zip(&rounds) {
        let wall = median(rs);
        let last = rs.last().context("no rounds")?;
        println!(
            "  {:<18} wall p50 {:>5} ms (of {ROUNDS}: {:?} ms)  ratio {:.2}  agent calls {}  upstream calls {}  hits {}  wasted {}",
            mode.label(),
            wall.as_millis(),
            rs.iter().map(|r| r.wall.as_millis()).collect::<Vec<_>>(),
            wall.as_secs_f64() / off.as_secs_f64(),
            last.agent_calls,
            last.upstream_calls,
            last.hits,
            last.wasted,
        );
    }
    for (mode, rs) in modes.iter().zip(&rounds).skip(1) {
        let ratio = median(rs).as_secs_f64() / off.as_secs_f64();
        println!(
            "  target wall ratio ≤ 0.60 ({}): {:.2} {}",
            mode.label(),
            ratio,
            if ratio <= 0.6 { "MET" } else { "NOT MET" }
        );
    }
    planning(&root, &filesystem).await?;
    memory(&root, &filesystem).await?;
    Ok(())
}

async fn planning(root: &Path, filesystem: &devboy_testkit::peers::PeerCommand) -> Result<()> {
    const RUNS: u32 = 10_000;
    let config = format!(
        "[servers.fs]\ncommand = {:?}\nargs = [{:?}]\n",
        filesystem.program_str(),
        root.display().to_string()
    );
    let proxy = start(&config)?;
    let session = session(&proxy, Mode::On { per_host: 3 })?;
    let engine = session.speculation().context("engine")?.clone();
    let arguments = json!({"path": root, "pattern": "hit*.rs"});
    let found = call(&session, "fs__search_files", arguments.clone()).await?;
    let arguments = arguments.as_object().cloned();
    let info = devboy_core::call::ResolvedCall::new(
        "fs__search_files",
        devboy_core::call::CallRoute::Upstream {
            upstream: "fs".into(),
            tool: "search_files".into(),
        },
        arguments,
        devboy_core::call::SideEffect::stated(
            devboy_core::pipeline_config::SideEffectClass::ReadOnly,
        ),
    );
    let started = Instant::now();
    for _ in 0..RUNS {
        engine.after_answer(&info, &found);
    }
    let per_call = started.elapsed() / RUNS;
    let declined = engine
        .stats()
        .declined(devboy_core::speculation::DeclineReason::AlreadyHeld);
    ensure!(
        declined >= 3 * RUNS as u64,
        "the follow-ups were not all held: {declined}"
    );
    println!(
        "\nplanning: {:.1} µs per answer (3 follow-ups, all held; {RUNS} runs)",
        per_call.as_secs_f64() * 1e6
    );
    session.end_speculation().await;
    proxy.shutdown().await;
    Ok(())
}

fn start(config: &str) -> Result<Arc<Proxy>> {
    let config = ProxyConfig::from_str(
        config,
        ConfigFormat::Toml,
        Path::new("devboy.toml"),
        &|_| None,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let options = ProxyOptions {
        list_grace: Duration::from_secs(30),
        ..ProxyOptions::default()
    };
    Ok(Proxy::start(&config, options, Vec::new()))
}

fn session(proxy: &Arc<Proxy>, mode: Mode) -> Result<Session> {
    let session = Session::builder(
        proxy.clone(),
        BuiltinRegistry::empty(),
        Arc::new(Passthrough),
    );
    Ok(match mode {
        Mode::Off => session.build(),
        Mode::On { .. } | Mode::Inline => {
            let enrichment = match mode {
                Mode::On { per_host } => format!("per_host = {per_host}"),
                _ => "mode = \"inline\"\nper_host = 3".into(),
            };
            let config = PipelineConfig::from_str(
                &format!("[enrichment]\n{enrichment}\n"),
                Path::new("pipeline_config.toml"),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            let planner = ConfiguredPlanner::new(Arc::new(config), proxy.clone());
            session.speculation(Arc::new(planner)).build()
        }
    })
}

async fn call(
    session: &Session,
    name: &str,
    arguments: serde_json::Value,
) -> Result<CallToolResult> {
    let result = session
        .call(PendingCall::new(name, arguments.as_object().cloned()))
        .await
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    ensure!(result.is_error != Some(true), "{name} failed: {result:?}");
    Ok(result)
}

fn lines(result: &CallToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .flat_map(|t| t.text.lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| l.starts_with('/'))
        .collect()
}

async fn one_round(config: &str, root: &Path, mode: Mode) -> Result<Round> {
    let proxy = start(config)?;
    let session = session(&proxy, mode)?;
    // Started and listed before the clock runs.
    call(&session, "fs__list_allowed_directories", json!({})).await?;
    let before = proxy.upstreams()[0].stats.calls.load(Ordering::Relaxed);
    let started = Instant::now();
    let found = call(
        &session,
        "fs__search_files",
        json!({"path": root, "pattern": "hit*.rs"}),
    )
    .await?;
    let hits = lines(&found);
    ensure!(hits.len() == 3, "expected 3 hits, got {hits:?}");
    let shown: String = found
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    let mut agent_calls = 1;
    for hit in &hits {
        if shown.contains(&format!(
            "> [inlined: fs__read_text_file {{\"path\":{hit:?}}}"
        )) {
            continue;
        }
        let read = call(&session, "fs__read_text_file", json!({"path": hit})).await?;
        ensure!(!read.content.is_empty(), "empty read of {hit}");
        agent_calls += 1;
    }
    let wall = started.elapsed();
    if mode == Mode::Inline {
        ensure!(
            agent_calls == 1,
            "inline mode showed not all reads: {shown}"
        );
    }
    let upstream_calls = proxy.upstreams()[0].stats.calls.load(Ordering::Relaxed) - before;
    session.end_speculation().await;
    let (hits, wasted) = match session.speculation() {
        Some(engine) => {
            let stats = engine.stats();
            let hits = stats.ended(PrefetchEnd::Used)
                + stats.ended(PrefetchEnd::Joined)
                + stats.ended(PrefetchEnd::Inlined);
            (hits, stats.dispatched.load(Ordering::Relaxed) - hits)
        }
        None => (0, 0),
    };
    proxy.shutdown().await;
    Ok(Round {
        wall,
        agent_calls,
        upstream_calls,
        wasted,
        hits,
    })
}

async fn memory(root: &Path, filesystem: &devboy_testkit::peers::PeerCommand) -> Result<()> {
    for i in 0..100 {
        std::fs::write(
            root.join(format!("m{i:02}.txt")),
            format!("{i}\n").repeat(50),
        )?;
    }
    let config = format!(
        "[servers.fs]\ncommand = {:?}\nargs = [{:?}]\n",
        filesystem.program_str(),
        root.display().to_string()
    );
    let proxy = start(&config)?;
    let session = session(&proxy, Mode::On { per_host: 2 })?;
    let engine = session.speculation().context("engine")?.clone();
    call(&session, "fs__list_allowed_directories", json!({})).await?;
    let warm = rss_kib()?;
    let mut done = 0;
    let mut marks = Vec::new();
    let started = Instant::now();
    while done < MEMORY_MARKS[1] {
        // Ten patterns of ten files: each search prefetches new reads.
        let pattern = format!("m{}*.txt", done % 10);
        let found = call(
            &session,
            "fs__search_files",
            json!({"path": root, "pattern": pattern}),
        )
        .await?;
        done += 1;
        // Read one hit in four: the rest is wasted and must not pile up.
        if done % 4 == 0 {
            if let Some(hit) = lines(&found).first() {
                call(&session, "fs__read_text_file", json!({"path": hit})).await?;
                done += 1;
            }
        }
        if marks.len() < MEMORY_MARKS.len() && done >= MEMORY_MARKS[marks.len()] {
            let (entries, bytes) = engine.held();
            marks.push((done, rss_kib()?, entries, bytes));
        }
    }
    let elapsed = started.elapsed();
    let stats = engine.stats();
    println!(
        "\nmemory: {} calls in {:.1} s, prefetches dispatched {}, used {}, evicted {}, expired {}, declined (held or busy) {}",
        done,
        elapsed.as_secs_f64(),
        stats.dispatched.load(Ordering::Relaxed),
        stats.ended(PrefetchEnd::Used) + stats.ended(PrefetchEnd::Joined),
        stats.ended(PrefetchEnd::Evicted),
        stats.ended(PrefetchEnd::Expired),
        devboy_core::speculation::DeclineReason::ALL
            .iter()
            .map(|r| stats.declined(*r))
            .sum::<u64>(),
    );
    println!("  VmRSS after warm-up {warm} KiB");
    for (calls, rss, entries, bytes) in &marks {
        println!(
            "  after {calls:>6} calls: VmRSS {rss} KiB, store {entries} entries / {bytes} bytes"
        );
    }
    if let [(_, first, ..), (_, last, ..)] = marks[..] {
        let growth = last as i64 - first as i64;
        println!(
            "  growth {}→{} calls: {growth:+} KiB; flat (< 1 MiB): {}",
            MEMORY_MARKS[0],
            MEMORY_MARKS[1],
            if growth < 1024 { "MET" } else { "NOT MET" }
        );
    }
    session.end_speculation().await;
    proxy.shutdown().await;
    Ok(())
}

fn rss_kib() -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .context("no VmRSS")?;
    line.trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .context("VmRSS is not a number")
}
