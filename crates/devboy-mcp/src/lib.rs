//! The devboy MCP proxy: one MCP server to the agent, one MCP client per
//! upstream server, and the seam where the response pipeline plugs in.
//!
//! Key design decision: **the agent side never waits for upstreams.**
//! `initialize` is answered from devboy's own capabilities; upstreams start
//! concurrently under their own supervisors ([`upstream`]), and what they
//! offer is published as an immutable [`catalog::Catalog`] snapshot that
//! requests read and that changes announce with `list_changed`. A broken or
//! slow upstream therefore only ever affects its own tools.
//!
//! Only this crate knows about rmcp and tokio; the response pipeline sees a
//! result through [`seam::Transform`] and must not panic its way into the
//! protocol (the seam fails open); every call's facts are decided once, in
//! [`resolve`], into a [`devboy_core::call::ResolvedCall`] each layer reads.

#![deny(missing_docs)]

pub mod answers;
pub mod builtin;
pub mod call;
pub mod catalog;
pub mod child;
mod client_stdio;
pub mod control;
pub mod definitions;
pub mod doctor;
mod frame;
pub mod http;
mod lazy;
pub mod listing_cache;
pub mod partition;
pub mod processor;
pub mod proxy;
pub mod reload;
pub mod resolve;
pub mod seam;
pub mod session;
pub mod speculation;
mod sync;
pub mod tap;
pub mod tool_search;
pub mod upstream;
mod view;
pub mod wire;

use std::path::PathBuf;
use std::sync::Arc;

use devboy_core::config::ProxyConfig;
use devboy_core::pipeline_config::{ClientProfile, PipelineConfig};
use rmcp::ServiceExt;

pub use answers::{AnswerStore, NoAnswers, StoredAnswer};
pub use builtin::{BuiltinRegistry, BuiltinTool};
pub use call::PendingCall;
pub use definitions::definition_tokens;
pub use partition::PartitionWatcher;
pub use proxy::{ConfigKind, Proxy, ProxyOptions};
pub use seam::{EventSink, Passthrough, SessionEvent, Transform};
pub use session::Session;
pub use speculation::{
    AnsweredCall, Declined, Plan, PlannedPrefetch, PrefetchPlanner, SpeculationEngine,
    SpeculationSettings,
};

/// The environment variable devboy sets for the stdio upstreams it starts
/// (`<pid> <upstream name>`). A `devboy mcp` that finds it set was started
/// as an upstream of another devboy, so it starts no upstreams of its own.
pub const NESTED_ENV: &str = "DEVBOY_UPSTREAM_OF";

/// How long the first `tools/list` waits for upstreams still starting
/// that have no kept listing (a server's first run ever, or a changed
/// entry), counted from devboy's start, by default. Print mode runs only
/// the tools of that first list, so the wait is as long as `claude mcp
/// list` allows: it gives `tools/list` 5,000 ms from its request (a
/// timeout past that; measured connected up to a 4.9 s grace), and 1 s is
/// left for a busy machine. Later servers are announced with
/// `list_changed`, which interactive sessions honour.
pub const DEFAULT_LIST_GRACE_MS: u64 = 4_000;

/// The name devboy gives in `initialize` (`serverInfo.name`); an upstream
/// that gives it is devboy itself and is not proxied.
pub const SERVER_INFO_NAME: &str = "devboy";

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The agent connection could not be set up.
    #[error("MCP handshake with the client failed: {0}")]
    Handshake(String),
    /// The service loop ended abnormally.
    #[error("MCP service ended abnormally: {0}")]
    Service(String),
    /// Serving could not start as asked (an address, a missing token).
    #[error("{0}")]
    Refused(String),
}

/// Which response pipeline a session runs.
#[derive(Debug, Clone)]
pub enum Pipeline {
    /// Dedup (repeats become references the model resolves by text) and,
    /// with `encode`, lossless re-encoding and budget elision, following
    /// the pipeline config.
    Configured {
        /// The pipeline config.
        config: Arc<PipelineConfig>,
        /// Re-encode and elide, not only deduplicate.
        encode: bool,
        /// Write the session to this file, for `devboy replay` (it holds
        /// tool-result content and call arguments).
        capture: Option<PathBuf>,
    },
    /// Every result exactly as the upstream sent it.
    Passthrough,
}

/// Installs the TLS crypto provider used by HTTP upstreams. Idempotent.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Serves MCP on this process's stdin/stdout until the client disconnects
/// or the process gets SIGTERM/SIGINT, then ends the session (speculation
/// in flight is cancelled and awaited, the session's events write their
/// telemetry summary, [`SessionEvent::Ended`])
/// and stops every upstream (upstreams run in their own process groups, so
/// nothing else would stop them).
///
/// The configured pipelines record telemetry as the pipeline config's
/// `[telemetry]` section says (`DEVBOY_TELEMETRY=off` turns it off), to
/// [`devboy_core::paths::telemetry_dir`].
///
/// `planning` is the pipeline config whose value models and
/// `[enrichment]` settings drive read-only speculation, whatever the
/// pipeline (a passthrough session still prefetches; `enrichment.enabled
/// = false` turns it off).
pub async fn serve_stdio(
    config: &ProxyConfig,
    options: ProxyOptions,
    pipeline: Pipeline,
    planning: Arc<PipelineConfig>,
) -> Result<(), ServeError> {
    install_tls_provider();
    let reload_sources = options.reload.clone();
    let proxy = Proxy::start_with(
        config,
        options,
        BuiltinRegistry::shipped_for(&planning, config.retrieval_llm.clone())
            .only(config.builtins.as_deref()),
    );
    // Said on stderr by whoever loaded it; shown in status until fixed.
    proxy.set_config_problems(proxy::ConfigKind::Pipeline, planning.problems.clone());
    // Claude Code starts MCP servers in the project directory; its
    // compaction hooks signal the state file keyed by that directory.
    let partition = match std::env::current_dir() {
        Ok(dir) => PartitionWatcher::for_project(&devboy_core::paths::runtime_dir(), &dir),
        Err(error) => {
            tracing::warn!(%error, "no working directory; compaction hooks cannot reach this session");
            PartitionWatcher::manual()
        }
    };
    if let Some(file) = partition.file() {
        tracing::debug!(file = %file.display(), "watching the context partition file");
    }
    let session = agent_session(&proxy, &pipeline, &planning, partition);
    let _reload = reload_sources.map(|sources| {
        let processor = session.pipeline_memory().cloned();
        reload::watch(
            proxy.clone(),
            sources,
            Arc::new(move |config| {
                if let Some(processor) = &processor {
                    processor.set_config(config);
                }
            }),
        )
    });
    let reported = session.clone();
    let _control = control::listen(
        &devboy_core::paths::runtime_dir(),
        proxy.clone(),
        "stdio".to_owned(),
        Arc::new(move || serde_json::json!([reported.figures()])),
    );
    // Non-blocking when stdin/stdout are sockets (as under Claude Code) or
    // pipes: no blocked thread to wait for at the end. devboy's own
    // framing answers broken and oversized requests (`wire`).
    let (stdin, stdout) = client_stdio::open();
    let input_closed = tokio_util::sync::CancellationToken::new();
    let transport = wire::LineTransport::<rmcp::RoleServer, _>::new(
        stdin,
        stdout,
        wire::MAX_MESSAGE_BYTES,
        "the client",
    )
    .signal_input_closed(input_closed.clone());
    let ending = session.clone();
    // `asked`: when devboy was asked to end; every ending step keeps to
    // its share of ENDING from then.
    let (outcome, asked) = match session.serve(transport).await {
        Ok(running) => {
            let stop = running.cancellation_token();
            let mut waiting = Box::pin(running.waiting());
            tokio::select! {
                quit = &mut waiting => (
                    quit.map(|_| ()).map_err(|e| ServeError::Service(e.to_string())),
                    tokio::time::Instant::now(),
                ),
                () = input_closed.cancelled() => {
                    let asked = tokio::time::Instant::now();
                    // Answers already under way may still go out, briefly
                    // (a client that writes its requests and closes its end,
                    // `printf … | devboy mcp`, reads them after); rmcp alone
                    // would wait for them up to 5 s.
                    if tokio::time::timeout_at(asked + ENDING / 4, &mut waiting).await.is_err() {
                        stop.cancel();
                    }
                    (Ok(()), asked)
                }
                signal = termination() => {
                    let asked = tokio::time::Instant::now();
                    tracing::info!(%signal, "stopping");
                    stop.cancel();
                    let _ = tokio::time::timeout_at(asked + ENDING / 4, waiting).await;
                    (Ok(()), asked)
                }
            }
        }
        Err(e) => (
            Err(ServeError::Handshake(e.to_string())),
            tokio::time::Instant::now(),
        ),
    };
    // devboy is ending (stdin closed, or a signal): whatever still runs, it
    // is gone within ENDING (invariant 13). What does not finish in time
    // is dropped: prefetches and upstream calls with their connections
    // (a child still running is killed as its transport drops), a result
    // still being processed with the runtime.
    //
    // No orphan work: prefetches in flight are cancelled upstream and
    // awaited while the upstreams still run and before the summary. Each
    // step has its share of the time, so a slow one never costs the
    // session summary its turn.
    if tokio::time::timeout_at(asked + ENDING / 2, ending.end_speculation())
        .await
        .is_err()
    {
        tracing::warn!("prefetches still in flight at the end; dropped");
    }
    // Before the upstreams stop: a client that kills devboy soon after
    // closing its stdin should still find the session summary written.
    let seam = ending.seam().clone();
    let summary = tokio::task::spawn_blocking(move || seam.record(SessionEvent::Ended));
    match tokio::time::timeout_at(asked + ENDING * 3 / 4, summary).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => {
            tracing::error!("ending the session panicked; its telemetry summary may be missing")
        }
        Err(_) => tracing::warn!(
            "the session summary was not written in time (a result was still being processed)"
        ),
    }
    if tokio::time::timeout_at(asked + ENDING, proxy.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("upstreams still stopping at the end; their processes are killed");
    }
    tracing::debug!(
        ms = asked.elapsed().as_millis() as u64,
        "ended (the time since devboy was asked to)"
    );
    outcome
}

/// One agent connection's session over `proxy`: its own pipeline (memory,
/// references, telemetry), context partition, client profile, classes and
/// speculation.
pub(crate) fn agent_session(
    proxy: &Arc<Proxy>,
    pipeline: &Pipeline,
    planning: &Arc<PipelineConfig>,
    partition: PartitionWatcher,
) -> Session {
    let (mut session, client) = match pipeline {
        Pipeline::Configured {
            config,
            encode,
            capture,
        } => {
            let client = config.client;
            let mut processor = processor::PipelineProcessor::new(config.clone(), *encode);
            if let Some(path) = capture {
                match devboy_session::capture::CaptureWriter::create(path) {
                    Ok(writer) => processor = processor.with_capture(writer),
                    Err(error) => {
                        tracing::error!(file = %path.display(), %error, "cannot write the capture; serving without it")
                    }
                }
            }
            let tokenizer = processor.tokenizer().to_string();
            let telemetry = devboy_telemetry::Telemetry::for_session(&config.telemetry, &tokenizer);
            let processor = Arc::new(processor.with_telemetry(telemetry));
            (
                Session::pipelined(proxy.clone(), processor).with_rules(config.clone()),
                client,
            )
        }
        Pipeline::Passthrough => {
            // Nothing is transformed; what happens is still recorded.
            let tokenizer = devboy_session::default_tokenizer(planning);
            let telemetry = devboy_telemetry::Telemetry::for_session(
                &planning.telemetry,
                &tokenizer.to_string(),
            );
            let events = processor::PassthroughEvents::new(telemetry, tokenizer);
            (
                Session::new(proxy.clone(), Arc::new(Passthrough)).with_events(Arc::new(events)),
                ClientProfile::Auto,
            )
        }
    };
    session = session
        .with_partition(partition)
        .with_client(client)
        .with_classes(planning.clone());
    if planning.enrichment.enabled || has_fail_fast(planning) {
        let planner = speculation::ConfiguredPlanner::new(planning.clone(), proxy.clone());
        session = session.with_speculation(Arc::new(planner));
    }
    session
}

/// How long devboy's ending takes at most once asked to end (a signal, or
/// stdin closed), whatever is running: a quarter for answers under way,
/// then prefetches, the session summary and the upstreams, each by its
/// share. With the runtime's own wait for stray tasks (the binary's
/// `serve.rs`, 50 ms) the process is gone within half a second, which is
/// what Claude Code allows: on `/exit` it sends SIGINT, SIGTERM 100 ms
/// later and SIGKILL 400 ms after that, and a devboy killed cannot stop
/// its upstreams.
pub const ENDING: std::time::Duration = std::time::Duration::from_millis(400);

/// Resolves on SIGTERM or SIGINT with the signal's name.
pub(crate) async fn termination() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            _ => std::future::pending().await,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "ctrl-c"
    }
}

/// Whether any `[tools."GLOB"]` table asks for `fail_fast_after_n` (which
/// the speculation engine serves even with prefetching off).
fn has_fail_fast(config: &PipelineConfig) -> bool {
    config
        .tools
        .iter()
        .any(|rule| rule.fail_fast_after_n.is_some())
}
