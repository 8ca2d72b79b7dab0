//! Serving: the one value serving starts from ([`Serving`]), the
//! composition root every transport shares ([`Host`]), and MCP on stdio.

use std::path::PathBuf;
use std::sync::Arc;

use devboy_core::config::ProxyConfig;
use devboy_core::pipeline_config::PipelineConfig;
use rmcp::ServiceExt;

use crate::builtin::BuiltinRegistry;
use crate::partition::PartitionWatcher;
use crate::proxy::{ConfigKind, Proxy, ProxyOptions};
use crate::seam::{Passthrough, SessionEvent};
use crate::session::{Session, SessionBuilder};
use crate::{client_stdio, control, processor, reload, speculation, wire};

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

/// Which of the response pipeline's stages a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipeline {
    /// Dedup, lossless re-encoding and budget elision, as the pipeline
    /// config says.
    Full,
    /// Dedup only: repeats become references the model resolves by text.
    Dedup,
    /// Every result exactly as the upstream sent it.
    Passthrough,
}

/// Installs the TLS crypto provider used by HTTP upstreams. Idempotent.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// What serving is given, derived once from the command line and the
/// configs: the one value every transport starts from.
#[derive(Debug, Clone)]
pub struct Serving {
    /// devboy.toml (or the `.mcp.json`) as loaded.
    pub config: ProxyConfig,
    /// What the proxy is told that is not in the config.
    pub options: ProxyOptions,
    /// Where the configs came from, to apply their edits while devboy
    /// runs ([`reload`]); `None` applies none.
    pub reload: Option<reload::ReloadSources>,
    /// Which of the pipeline's stages each session runs.
    pub pipeline: Pipeline,
    /// The pipeline config: the transform's settings, whose `[tools]`
    /// tables decide classes, whose value models and `[enrichment]` drive
    /// read-only speculation whatever the stages (a passthrough session
    /// still prefetches; `enrichment.enabled = false` turns it off), whose
    /// `[telemetry]` says what is recorded, and whose `[explore]` sets up
    /// the built-ins (at start: they and their listing do not follow a
    /// config read again).
    pub pipeline_config: Arc<PipelineConfig>,
    /// Write the session to this file, for `devboy replay` (it holds
    /// tool-result content and call arguments); stdio only, which serves
    /// one session.
    pub capture: Option<PathBuf>,
}

/// What one devboy process derives once from its configs and shares with
/// every session it serves: the proxy, the built-ins the proxy's catalog
/// lists, the stages sessions run and the pipeline config as it is now.
/// The one place sessions are composed, for every transport.
pub(crate) struct Host {
    proxy: Arc<Proxy>,
    builtins: BuiltinRegistry,
    pipeline: Pipeline,
    /// The pipeline config new sessions follow (replaced on reload).
    config: Arc<std::sync::RwLock<Arc<PipelineConfig>>>,
    capture: Option<PathBuf>,
}

impl Host {
    /// Starts the proxy over `serving`'s upstreams, serving the shipped
    /// built-ins its config enables, set up by its pipeline config.
    pub(crate) fn start(serving: Serving) -> Self {
        install_tls_provider();
        let config = serving.pipeline_config;
        let builtins = BuiltinRegistry::shipped_for(
            &config,
            serving.config.retrieval_llm.clone(),
            &serving.config.code,
        )
        .only(serving.config.builtins.as_deref())
        .loading_always(&serving.config.always_load);
        let builtins = if serving.config.code.enabled {
            builtins
        } else {
            builtins.without(crate::builtin::RUN)
        };
        let proxy = Proxy::start(&serving.config, serving.options, builtins.listing());
        // Said on stderr by whoever loaded it; shown in status until fixed.
        proxy.set_config_problems(ConfigKind::Pipeline, config.problems.clone());
        Self {
            proxy,
            builtins,
            pipeline: serving.pipeline,
            config: Arc::new(std::sync::RwLock::new(config)),
            capture: serving.capture,
        }
    }

    /// The proxy.
    pub(crate) fn proxy(&self) -> &Arc<Proxy> {
        &self.proxy
    }

    /// One agent connection's session: its own pipeline (memory,
    /// references, telemetry), context partition, client profile, classes
    /// and speculation, all by the pipeline config as it is now.
    pub(crate) fn session(&self, partition: PartitionWatcher) -> SessionBuilder {
        let config = crate::sync::read(&self.config).clone();
        let builder = match self.pipeline {
            Pipeline::Full | Pipeline::Dedup => {
                let processor = Arc::new(processor::PipelineProcessor::for_session(
                    config.clone(),
                    self.pipeline == Pipeline::Full,
                    self.capture.as_deref(),
                ));
                Session::builder(self.proxy.clone(), self.builtins.clone(), processor.clone())
                    .pipeline(processor)
                    .rules(config.clone())
                    .client(config.client)
            }
            Pipeline::Passthrough => {
                // Nothing is transformed; what happens is still recorded.
                let events = processor::PassthroughEvents::for_session(&config);
                Session::builder(
                    self.proxy.clone(),
                    self.builtins.clone(),
                    Arc::new(Passthrough),
                )
                .events(Arc::new(events))
            }
        };
        let builder = builder.partition(partition).classes(config.clone());
        if config.enrichment.enabled || has_fail_fast(&config) {
            let planner = speculation::ConfiguredPlanner::new(config, self.proxy.clone());
            builder.speculation(Arc::new(planner))
        } else {
            builder
        }
    }

    /// Applies the configs' edits while devboy runs: the proxy's
    /// upstreams; a pipeline config read again is what new sessions
    /// follow, and `live` tells the sessions already running.
    pub(crate) fn reload(
        &self,
        sources: Option<reload::ReloadSources>,
        live: reload::ApplyPipeline,
    ) -> Option<reload::Watcher> {
        let current = self.config.clone();
        let apply: reload::ApplyPipeline = Arc::new(move |config: Arc<PipelineConfig>| {
            follow(&current, config.clone());
            live(config);
        });
        sources.map(|sources| reload::watch(self.proxy.clone(), sources, apply))
    }

    /// Answers `devboy status` and `devboy ctl` for this process, named
    /// `label`, with `sessions` giving the sessions' figures.
    pub(crate) fn control(
        &self,
        label: String,
        sessions: control::SessionsReport,
    ) -> Option<control::ControlSocket> {
        control::listen(
            &devboy_core::paths::runtime_dir(),
            self.proxy.clone(),
            label,
            sessions,
        )
    }
}

/// New sessions of a host follow `config` (the pipeline config read
/// again), stored in the host's `current`.
fn follow(current: &std::sync::RwLock<Arc<PipelineConfig>>, config: Arc<PipelineConfig>) {
    *crate::sync::write(current) = config;
}

/// Serves MCP on this process's stdin/stdout until the client disconnects
/// or the process gets SIGTERM/SIGINT, then ends the session (speculation
/// in flight is cancelled and awaited, the session's events write their
/// telemetry summary, [`SessionEvent::Ended`]) and stops every upstream
/// (upstreams run in their own process groups, so nothing else would stop
/// them).
///
/// The configured pipelines record telemetry as the pipeline config's
/// `[telemetry]` section says (`DEVBOY_TELEMETRY=off` turns it off), to
/// [`devboy_core::paths::telemetry_dir`].
pub async fn serve_stdio(serving: Serving) -> Result<(), ServeError> {
    let reload = serving.reload.clone();
    let host = Host::start(serving);
    let session = host.session(project_partition()).build();
    let processor = session.pipeline_memory().cloned();
    let _reload = host.reload(
        reload,
        Arc::new(move |config| {
            if let Some(processor) = &processor {
                processor.set_config(config);
            }
        }),
    );
    let figures = session.figures().clone();
    let _control = host.control(
        "stdio".to_owned(),
        Arc::new(move || serde_json::json!([figures.figures()])),
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
    let (outcome, asked) = serve_until_asked(session.clone(), transport, input_closed).await;
    end_stdio(&session, host.proxy(), asked).await;
    outcome
}

/// The context partition of a session started in the project directory:
/// Claude Code starts MCP servers there, and its compaction hooks signal
/// the state file keyed by that directory.
fn project_partition() -> PartitionWatcher {
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
    partition
}

/// Serves `session` on `transport` until the client disconnects, its
/// input closes or a signal asks devboy to end; and when devboy was asked.
async fn serve_until_asked<T>(
    session: Session,
    transport: T,
    input_closed: tokio_util::sync::CancellationToken,
) -> (Result<(), ServeError>, tokio::time::Instant)
where
    T: rmcp::transport::IntoTransport<
        rmcp::RoleServer,
        std::io::Error,
        rmcp::transport::TransportAdapterIdentity,
    >,
{
    match session.serve(transport).await {
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
    }
}

/// devboy is ending (stdin closed, or a signal, at `asked`): whatever still
/// runs, it is gone within [`ENDING`] (invariant 13). What does not finish
/// in time is dropped: prefetches and upstream calls with their
/// connections (a child still running is killed as its transport drops), a
/// result still being processed with the runtime.
///
/// No orphan work: prefetches in flight are cancelled upstream and awaited
/// while the upstreams still run and before the summary. Each step has its
/// share of the time, so a slow one never costs the session summary its
/// turn.
async fn end_stdio(session: &Session, proxy: &Proxy, asked: tokio::time::Instant) {
    if tokio::time::timeout_at(asked + ENDING / 2, session.end_speculation())
        .await
        .is_err()
    {
        tracing::warn!("prefetches still in flight at the end; dropped");
    }
    // Before the upstreams stop: a client that kills devboy soon after
    // closing its stdin should still find the session summary written.
    let seam = session.seam().clone();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speculation::SpeculationMode;

    fn pipeline_config(text: &str) -> Arc<PipelineConfig> {
        let text = format!("[telemetry]\nenabled = false\n{text}");
        let config = PipelineConfig::embedded_default()
            .overlaid(&text, std::path::Path::new("pipeline_config.toml"))
            .expect("the test config");
        Arc::new(config)
    }

    /// A pipeline config read again reaches every part of a new session
    /// (its transform's settings, its classes and its speculation), not
    /// only the transform; sessions already running keep theirs.
    #[tokio::test]
    async fn new_sessions_follow_the_pipeline_config_read_again() {
        let host = Host::start(Serving {
            config: ProxyConfig::embedded_default(),
            options: ProxyOptions::default(),
            reload: None,
            pipeline: Pipeline::Full,
            pipeline_config: pipeline_config(""),
            capture: None,
        });
        let mode = |session: &Session| session.speculation().map(|engine| engine.settings().mode);
        let before = host.session(PartitionWatcher::manual()).build();
        assert_eq!(mode(&before), Some(SpeculationMode::Prefetch));
        follow(
            &host.config,
            pipeline_config("[enrichment]\nmode = \"inline\"\n"),
        );
        let after = host.session(PartitionWatcher::manual()).build();
        assert_eq!(mode(&after), Some(SpeculationMode::Inline));
        assert_eq!(mode(&before), Some(SpeculationMode::Prefetch));
        follow(
            &host.config,
            pipeline_config("[enrichment]\nenabled = false\n"),
        );
        let off = host.session(PartitionWatcher::manual()).build();
        assert_eq!(mode(&off), None, "no speculation");
        assert!(
            off.pipeline_memory().is_some(),
            "the stages stay the host's"
        );
        host.proxy().shutdown().await;
    }
}
