//! One upstream MCP server: connecting to it, supervising it, restarting it.
//!
//! Each configured upstream gets an [`Upstream`] and one supervisor task. The
//! supervisor connects (child process or streamable HTTP), lists what the
//! server offers, publishes that as an [`UpstreamCatalog`], and then watches
//! the connection. When the server exits, calls in flight fail with a clear
//! error, and the supervisor reconnects with exponential backoff. The last
//! known catalog stays published while it does, so the agent does not see
//! tools vanish and reappear on every hiccup. Before the first connection
//! the catalog may be the listing an earlier devboy kept on disk
//! ([`crate::listing_cache`]); each live listing replaces it and is kept.
//!
//! Nothing here knows about the agent side; the only outward signals are the
//! change hook (called on every catalog change) and the phase watch.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use devboy_core::config::{UpstreamConfig, UpstreamTransport};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, GetPromptRequestParams, GetPromptResult,
    Implementation, ProgressToken, Prompt, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResult, RequestMetaObject, Resource, ResourceTemplate, ServerResult, Tool,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RunningService, ServiceError, ServiceExt,
};
use rmcp::{ClientHandler, RoleClient};

pub use crate::tap::ProgressTarget;
use crate::tap::{ProgressRoutes, ProgressTap};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// Lines of an upstream's stderr kept for error messages and status.
const STDERR_TAIL_LINES: usize = 12;
/// Longest stderr line kept, in bytes.
const STDERR_LINE_MAX: usize = 400;
/// First restart delay; doubles per failed attempt up to [`BACKOFF_MAX`].
const BACKOFF_START: Duration = Duration::from_millis(250);
/// Longest restart delay.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A connection that stayed up this long resets the backoff.
const STABLE_UPTIME: Duration = Duration::from_secs(30);

/// Where an upstream is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// `enabled = false` in the config.
    Disabled,
    /// Connecting or initializing (first start or a restart).
    Starting,
    /// Connected and listed.
    Ready,
    /// The last attempt failed or the connection dropped; another attempt
    /// follows after `retry_in`, or never when it is `None` (a config that
    /// cannot work, such as an unsupported transport).
    Failed {
        /// What went wrong, for people.
        error: String,
        /// Delay before the next attempt.
        retry_in: Option<Duration>,
    },
    /// The proxy is shutting down.
    Stopped,
}

impl Phase {
    /// Short name for status output.
    pub fn label(&self) -> &'static str {
        match self {
            Phase::Disabled => "disabled",
            Phase::Starting => "starting",
            Phase::Ready => "ready",
            Phase::Failed { .. } => "failed",
            Phase::Stopped => "stopped",
        }
    }
}

/// Everything an upstream offers, as it last listed it.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct UpstreamCatalog {
    /// Tools, as listed (all pages), before allow/deny filtering.
    pub tools: Vec<Tool>,
    /// Resources (all pages).
    pub resources: Vec<Resource>,
    /// Resource templates (all pages).
    pub resource_templates: Vec<ResourceTemplate>,
    /// Prompts (all pages).
    pub prompts: Vec<Prompt>,
}

/// Where an upstream's current catalog came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListingSource {
    /// Nothing listed yet: no live listing and none kept on disk.
    None,
    /// The listing an earlier devboy kept for this entry; the server has
    /// not listed live since this devboy started.
    Cached,
    /// The server's own listing in this devboy's life.
    Live,
}

impl ListingSource {
    /// Short name for status output.
    pub fn label(self) -> &'static str {
        match self {
            ListingSource::None => "none",
            ListingSource::Cached => "cached",
            ListingSource::Live => "live",
        }
    }
}

/// Counters shown by `devboy_status`.
#[derive(Debug, Default)]
pub struct UpstreamStats {
    /// Tool calls forwarded.
    pub calls: AtomicU64,
    /// Calls that ended in an error of any kind (including `isError` results).
    pub errors: AtomicU64,
    /// Calls that ran past their timeout.
    pub timeouts: AtomicU64,
    /// Attempts to start the upstream (the first start included).
    pub attempts: AtomicU64,
    /// Attempts after the first: relaunches after a failure or an exit.
    pub restarts: AtomicU64,
    /// Last error seen, for people.
    pub last_error: Mutex<Option<String>>,
}

impl UpstreamStats {
    fn record_error(&self, message: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *lock(&self.last_error) = Some(message.to_owned());
    }
}

/// Which list an upstream said has changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    Tools,
    Resources,
    Prompts,
}

/// Why a forwarded request did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    /// The upstream is not connected and is not expected back in time.
    #[error("upstream `{upstream}` is unavailable: {reason}")]
    Unavailable {
        /// Upstream name.
        upstream: String,
        /// Why.
        reason: String,
    },
    /// The call ran past its timeout; the upstream was told to cancel it.
    #[error("upstream `{upstream}` did not answer within {seconds:.1} s; the call was cancelled")]
    Timeout {
        /// Upstream name.
        upstream: String,
        /// The timeout in seconds.
        seconds: f64,
    },
    /// The connection dropped while the call was in flight.
    #[error(
        "upstream `{upstream}` {how} while the call was in flight{detail}; it is being restarted, retry the call"
    )]
    ConnectionLost {
        /// Upstream name.
        upstream: String,
        /// What happened to the connection, by transport.
        how: &'static str,
        /// `: <last stderr line>` or empty.
        detail: String,
    },
    /// The agent cancelled the request.
    #[error("cancelled by the client")]
    Cancelled,
    /// The upstream answered with a JSON-RPC error.
    #[error("{0}")]
    Protocol(rmcp::ErrorData),
    /// Anything else from the transport layer.
    #[error("upstream `{upstream}`: {message}")]
    Other {
        /// Upstream name.
        upstream: String,
        /// What happened.
        message: String,
    },
}

/// Called when an upstream's catalog changes.
pub type ChangeHook = Arc<dyn Fn() + Send + Sync>;

/// One configured upstream and its live connection, if any.
pub struct Upstream {
    config: UpstreamConfig,
    phase: watch::Sender<Phase>,
    peer: RwLock<Option<Peer<RoleClient>>>,
    catalog: RwLock<Arc<UpstreamCatalog>>,
    listing_source: Mutex<ListingSource>,
    /// Where live listings are kept for the next devboy, if anywhere.
    listing_file: Option<crate::listing_cache::ListingFile>,
    ever_ready: AtomicBool,
    /// When the current run of failures began; `None` while it is up.
    down_since: Mutex<Option<SystemTime>>,
    /// What the current (or last) stdio process did, for error messages.
    child_report: Mutex<crate::child::SharedReport>,
    pid: Mutex<Option<u32>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    progress: ProgressRoutes,
    /// Called (synchronously) whenever the catalog changes, before the
    /// phase says Ready, so a ready upstream's tools are always routable.
    on_change: ChangeHook,
    /// Counts the connections made: a result obtained under an earlier
    /// one may describe a server state that is gone.
    generation: AtomicU64,
    /// Counters for status.
    pub stats: UpstreamStats,
}

impl Upstream {
    /// An upstream in its initial phase; call [`Upstream::supervise`] to run it.
    pub fn new(config: UpstreamConfig, on_change: ChangeHook) -> Arc<Self> {
        Self::with_listing_file(config, on_change, None)
    }

    /// [`new`](Self::new), keeping each live listing in `listing_file` and
    /// starting with the listing found there, if any: its tools are
    /// offered (and their calls wait for the server) before it is up.
    pub fn with_listing_file(
        config: UpstreamConfig,
        on_change: ChangeHook,
        listing_file: Option<crate::listing_cache::ListingFile>,
    ) -> Arc<Self> {
        let phase = if config.enabled {
            Phase::Starting
        } else {
            Phase::Disabled
        };
        let cached = listing_file
            .as_ref()
            .filter(|_| config.enabled)
            .and_then(|file| file.load());
        let source = if cached.is_some() {
            ListingSource::Cached
        } else {
            ListingSource::None
        };
        Arc::new(Self {
            config,
            phase: watch::Sender::new(phase),
            peer: RwLock::new(None),
            catalog: RwLock::new(Arc::new(cached.unwrap_or_default())),
            listing_source: Mutex::new(source),
            listing_file,
            ever_ready: AtomicBool::new(false),
            down_since: Mutex::new(None),
            child_report: Mutex::new(crate::child::SharedReport::default()),
            pid: Mutex::new(None),
            stderr_tail: Arc::new(Mutex::new(VecDeque::new())),
            progress: Arc::new(Mutex::new(HashMap::new())),
            on_change,
            generation: AtomicU64::new(0),
            stats: UpstreamStats::default(),
        })
    }

    /// The configuration this upstream runs from.
    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// How many times the upstream has connected (0 before the first):
    /// it changes on every restart.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase.borrow().clone()
    }

    /// Whether the upstream is still on its first start: starting, and
    /// never started before (a start after a failure is a restart).
    pub fn on_first_start(&self) -> bool {
        *self.phase.borrow() == Phase::Starting && self.stats.attempts.load(Ordering::Relaxed) <= 1
    }

    /// The phase as status shows it: a start after a failure is
    /// `restarting`, not `starting`, so an upstream that keeps failing
    /// never looks new.
    pub fn state_label(&self) -> &'static str {
        match self.phase() {
            Phase::Starting if !self.on_first_start() => "restarting",
            other => other.label(),
        }
    }

    /// A receiver that sees every phase change.
    pub fn watch_phase(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// What the upstream offered when it last listed.
    pub fn catalog(&self) -> Arc<UpstreamCatalog> {
        read(&self.catalog).clone()
    }

    /// Where the current catalog came from.
    pub fn listing_source(&self) -> ListingSource {
        *lock(&self.listing_source)
    }

    /// Process id of a stdio upstream's current child.
    pub fn pid(&self) -> Option<u32> {
        *lock(&self.pid)
    }

    /// The last lines the upstream wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        lock(&self.stderr_tail).iter().cloned().collect()
    }

    fn set_phase(&self, phase: Phase) {
        if let Phase::Failed { error, .. } = &phase {
            *lock(&self.stats.last_error) = Some(error.clone());
        }
        self.phase.send_replace(phase);
    }

    /// Publishes a live listing (the agent's catalog is rebuilt at once),
    /// then keeps it on disk for the next devboy when it changed.
    async fn publish(&self, catalog: UpstreamCatalog) {
        let catalog = Arc::new(catalog);
        *write(&self.catalog) = catalog.clone();
        *lock(&self.listing_source) = ListingSource::Live;
        (self.on_change)();
        if let Some(file) = &self.listing_file {
            file.store(&catalog).await;
        }
    }

    /// Runs the upstream until `shutdown` fires: connect, serve, restart.
    pub async fn supervise(self: Arc<Self>, shutdown: CancellationToken) {
        if !self.config.enabled {
            return;
        }
        let name = self.config.name.clone();
        if let Some(error) = self.config.transport.unusable() {
            self.fail_for_good(error, &shutdown).await;
            return;
        }
        let mut backoff = BACKOFF_START;
        let mut last_logged: Option<String> = None;
        loop {
            self.set_phase(Phase::Starting);
            if self.stats.attempts.fetch_add(1, Ordering::Relaxed) > 0 {
                self.stats.restarts.fetch_add(1, Ordering::Relaxed);
            }
            let (refresh_tx, mut refresh_rx) = mpsc::unbounded_channel();
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => break,
                r = tokio::time::timeout(self.config.startup_timeout, self.connect(refresh_tx)) => r,
            };
            let error = match attempt {
                Err(_) => format!(
                    "did not finish starting within {:.1} s{}{}",
                    self.config.startup_timeout.as_secs_f64(),
                    self.process_facts()
                        .map(|facts| format!("; {facts}"))
                        .unwrap_or_default(),
                    self.stderr_detail()
                ),
                Ok(Err(ConnectError::Retry(error))) => error,
                Ok(Err(ConnectError::Permanent(error))) => {
                    *lock(&self.pid) = None;
                    self.fail_for_good(error, &shutdown).await;
                    return;
                }
                Ok(Ok(running)) => {
                    let started = Instant::now();
                    self.ever_ready.store(true, Ordering::SeqCst);
                    *lock(&self.down_since) = None;
                    last_logged = None;
                    let peer = running.peer().clone();
                    self.generation.fetch_add(1, Ordering::SeqCst);
                    *write(&self.peer) = Some(peer.clone());
                    tracing::info!(upstream = %name, tools = self.catalog().tools.len(), "upstream ready");
                    self.set_phase(Phase::Ready);
                    let stop = running.cancellation_token();
                    let mut quit = Box::pin(running.waiting());
                    let stopped = loop {
                        tokio::select! {
                            _ = &mut quit => break false,
                            _ = shutdown.cancelled() => {
                                stop.cancel();
                                let _ = tokio::time::timeout(Duration::from_secs(5), &mut quit).await;
                                break true;
                            }
                            Some(kind) = refresh_rx.recv() => self.refresh(&peer, kind).await,
                        }
                    };
                    *write(&self.peer) = None;
                    *lock(&self.pid) = None;
                    if stopped {
                        break;
                    }
                    if started.elapsed() >= STABLE_UPTIME {
                        backoff = BACKOFF_START;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let what = self
                        .process_facts()
                        .unwrap_or_else(|| "connection closed (process exited)".to_owned());
                    format!("{what}{}", self.stderr_detail())
                }
            };
            lock(&self.down_since).get_or_insert_with(SystemTime::now);
            // Once per distinct error: a server that stays down would
            // otherwise write a line per backoff step, and Claude Code files
            // every stderr line of a server as an error.
            if last_logged.as_deref() != Some(error.as_str()) {
                tracing::warn!(upstream = %name, error = %error, "upstream down; retrying with backoff");
                last_logged = Some(error.clone());
            } else {
                tracing::debug!(upstream = %name, error = %error, retry_in_ms = backoff.as_millis() as u64, "upstream still down");
            }
            self.set_phase(Phase::Failed {
                error,
                retry_in: Some(backoff),
            });
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
        self.set_phase(Phase::Stopped);
    }

    /// Marks the upstream failed with no retry (its config or what it is
    /// cannot work) and waits for shutdown.
    async fn fail_for_good(&self, error: String, shutdown: &CancellationToken) {
        tracing::warn!(upstream = %self.config.name, %error, "upstream not started");
        lock(&self.down_since).get_or_insert_with(SystemTime::now);
        self.set_phase(Phase::Failed {
            error,
            retry_in: None,
        });
        shutdown.cancelled().await;
        self.set_phase(Phase::Stopped);
    }

    /// The first line the current stdio process wrote to stdout that is
    /// not JSON, if any (a server that breaks the protocol).
    pub fn stdout_noise(&self) -> Option<String> {
        let report = lock(&self.child_report).clone();
        let noise = lock(&report).stdout_noise.clone();
        noise
    }

    /// How long the upstream has been down (failed, or restarting after a
    /// failure), when it is.
    pub fn down_for(&self) -> Option<Duration> {
        lock(&self.down_since).map(|since| since.elapsed().unwrap_or_default())
    }

    /// What the last stdio process did that explains a failure: how it
    /// exited, and what it printed on stdout that is not JSON-RPC.
    fn process_facts(&self) -> Option<String> {
        let report = lock(&self.child_report).clone();
        let report = lock(&report).clone();
        let exit = report.exit.map(|status| match status.code() {
            Some(code) => format!("exited with code {code}"),
            None => {
                #[cfg(unix)]
                {
                    use std::os::unix::process::ExitStatusExt as _;
                    match status.signal() {
                        Some(signal) => format!("was killed by signal {signal}"),
                        None => "exited".to_owned(),
                    }
                }
                #[cfg(not(unix))]
                {
                    "exited".to_owned()
                }
            }
        });
        let noise = report.stdout_noise.map(|line| {
            format!("printed non-JSON on stdout ({line:?}), where MCP allows only JSON-RPC")
        });
        match (exit, noise) {
            (Some(exit), Some(noise)) => Some(format!("{exit}; it {noise}")),
            (Some(exit), None) => Some(exit),
            (None, Some(noise)) => Some(noise),
            (None, None) => None,
        }
    }

    fn stderr_detail(&self) -> String {
        match lock(&self.stderr_tail).back() {
            Some(line) => format!("; stderr: {line}"),
            None => String::new(),
        }
    }

    /// Connects, initializes and lists everything. Errors are for people.
    async fn connect(
        &self,
        refresh: mpsc::UnboundedSender<ListKind>,
    ) -> Result<RunningService<RoleClient, UpstreamClient>, ConnectError> {
        let handler = UpstreamClient { refresh };
        let running = match &self.config.transport {
            UpstreamTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env);
                // A devboy started as an upstream sees this and starts no
                // upstreams of its own: a config that lists devboy itself
                // must not multiply processes (see `is_devboy`).
                cmd.env(
                    crate::NESTED_ENV,
                    format!("{} {}", std::process::id(), self.config.name),
                );
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
                // Own process group: npx-style launchers spawn grandchildren
                // that must die with the upstream.
                wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
                let report = crate::child::SharedReport::default();
                *lock(&self.child_report) = report.clone();
                let (transport, stderr) = crate::child::ChildTransport::spawn(
                    wrapped,
                    &self.config.name,
                    report,
                    self.config.transport.runs_a_package_runner(),
                )
                .map_err(|e| spawn_error(command, &e))?;
                *lock(&self.pid) = transport.id();
                if let Some(stderr) = stderr {
                    tokio::spawn(drain_stderr(
                        self.config.name.clone(),
                        stderr,
                        self.stderr_tail.clone(),
                    ));
                }
                match handler
                    .serve(ProgressTap::new(transport, self.progress.clone()))
                    .await
                {
                    Ok(running) => running,
                    Err(e) => {
                        // Give the exit status and the last stderr line a
                        // moment to arrive: they say more than rmcp's error.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let what = self
                            .process_facts()
                            .unwrap_or_else(|| format!("initialize failed: {e}"));
                        return Err(format!("{what}{}", self.stderr_detail()).into());
                    }
                }
            }
            UpstreamTransport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (key, value) in headers {
                    // A header that is not valid HTTP never will be: no retry.
                    let name = http::HeaderName::try_from(key.as_str()).map_err(|e| {
                        ConnectError::Permanent(format!("header name `{key}`: {e}"))
                    })?;
                    let value = http::HeaderValue::try_from(value.as_str()).map_err(|e| {
                        ConnectError::Permanent(format!("header `{key}` value: {e}"))
                    })?;
                    custom.insert(name, value);
                }
                let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url.as_str(),
                )
                .custom_headers(custom)
                .max_sse_event_size(crate::wire::MAX_MESSAGE_BYTES);
                let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                    reqwest::Client::new(),
                    config,
                );
                match handler
                    .serve(ProgressTap::new(transport, self.progress.clone()))
                    .await
                {
                    Ok(running) => running,
                    // rmcp's transport errors end in its own type names and
                    // do not chain their cause: ask the URL once more
                    // directly to say what is wrong.
                    Err(rmcp::service::ClientInitializeError::TransportError { .. }) => {
                        return Err(format!(
                            "initialize over HTTP failed: {}",
                            probe_http(url).await
                        )
                        .into())
                    }
                    Err(other) => {
                        return Err(format!("initialize over HTTP failed: {other}").into())
                    }
                }
            }
            UpstreamTransport::Unsupported { .. } | UpstreamTransport::Invalid { .. } => {
                return Err(ConnectError::Permanent(
                    self.config
                        .transport
                        .unusable()
                        .unwrap_or_else(|| "cannot be started".to_owned()),
                ))
            }
        };
        if is_devboy(&running) {
            // devboy listed as its own upstream (a config that includes the
            // entry Claude Code starts devboy with). Its tools are devboy's
            // own, and retrying would only start it again.
            running.cancellation_token().cancel();
            let _ = tokio::time::timeout(Duration::from_secs(5), running.waiting()).await;
            return Err(ConnectError::Permanent(format!(
                "this server is devboy itself; devboy does not proxy itself (remove `{}` from the config devboy reads, or give devboy a config of its own)",
                self.config.name
            )));
        }
        // Always ask the upstream: a stale cached list would hide a crash.
        running
            .peer()
            .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
            .await;
        let catalog = list_catalog(running.peer())
            .await
            .map_err(|e| format!("listing failed: {e}"))?;
        self.publish(catalog).await;
        Ok(running)
    }

    /// Re-lists after a `list_changed` notification.
    async fn refresh(&self, peer: &Peer<RoleClient>, kind: ListKind) {
        let mut next = (*self.catalog()).clone();
        let result = match kind {
            ListKind::Tools => peer.list_all_tools().await.map(|t| next.tools = t),
            ListKind::Resources => peer.list_all_resources().await.map(|r| next.resources = r),
            ListKind::Prompts => peer.list_all_prompts().await.map(|p| next.prompts = p),
        };
        match result {
            Ok(()) => {
                tracing::info!(upstream = %self.config.name, ?kind, "upstream list changed");
                self.publish(next).await;
            }
            Err(e) => {
                tracing::warn!(upstream = %self.config.name, ?kind, error = %e, "re-listing failed")
            }
        }
    }

    /// Waits (up to `deadline`) for a connection a call can use.
    async fn ready_peer(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<Peer<RoleClient>, CallFailure> {
        let mut phase = self.phase.subscribe();
        loop {
            let current = phase.borrow_and_update().clone();
            match current {
                Phase::Ready => {
                    if let Some(peer) = read(&self.peer).clone() {
                        return Ok(peer);
                    }
                }
                Phase::Disabled | Phase::Stopped => {
                    return Err(self.unavailable(current.label().to_owned()))
                }
                // Never came up: do not make the agent wait for the backoff.
                Phase::Failed { error, .. } if !self.ever_ready.load(Ordering::SeqCst) => {
                    return Err(self.unavailable(error))
                }
                Phase::Starting | Phase::Failed { .. } => {}
            }
            match tokio::time::timeout_at(deadline, phase.changed()).await {
                Ok(Ok(())) => continue,
                _ => {
                    let reason = match self.phase() {
                        Phase::Failed { error, .. } => format!("still restarting ({error})"),
                        other => format!("still {}", other.label()),
                    };
                    return Err(self.unavailable(reason));
                }
            }
        }
    }

    fn unavailable(&self, reason: String) -> CallFailure {
        CallFailure::Unavailable {
            upstream: self.config.name.clone(),
            reason,
        }
    }

    /// Forwards one `tools/call` and waits for its answer.
    ///
    /// `meta` is the agent's request `_meta`, passed on (rmcp replaces the
    /// progress token with its own; progress is mapped back via `progress`).
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<rmcp::model::JsonObject>,
        meta: RequestMetaObject,
        progress: Option<ProgressTarget>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallFailure> {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let outcome = self
            .call_tool_inner(tool, arguments, meta, progress, cancel)
            .await;
        match &outcome {
            Ok(result) if result.is_error == Some(true) => self
                .stats
                .record_error(&format!("`{tool}` returned isError")),
            Ok(_) => {}
            Err(CallFailure::Cancelled) => {}
            Err(failure) => {
                if matches!(failure, CallFailure::Timeout { .. }) {
                    self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
                }
                self.stats.record_error(&failure.to_string())
            }
        }
        outcome
    }

    async fn call_tool_inner(
        &self,
        tool: &str,
        arguments: Option<rmcp::model::JsonObject>,
        meta: RequestMetaObject,
        progress: Option<ProgressTarget>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallFailure> {
        let timeout = self.config.timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let peer = tokio::select! {
            _ = cancel.cancelled() => return Err(CallFailure::Cancelled),
            p = self.ready_peer(deadline) => p?,
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options = PeerRequestOptions::with_timeout(timeout)
            .with_meta(meta)
            .reset_timeout_on_progress();
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.service_failure(e, timeout))?;
        let id = handle.id.clone();
        let route = progress.map(|target| {
            let token = handle.progress_token.clone();
            lock(&self.progress).insert(token.clone(), target);
            RouteGuard {
                routes: self.progress.clone(),
                token,
            }
        });
        let response = tokio::select! {
            r = handle.await_response() => r,
            _ = cancel.cancelled() => {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("cancelled by the client".into()),
                    ))
                    .await;
                return Err(CallFailure::Cancelled);
            }
        };
        drop(route);
        match response.map_err(|e| self.service_failure(e, timeout))? {
            ServerResult::CallToolResult(result) => Ok(result),
            other => Err(self.unexpected("tools/call", &other)),
        }
    }

    /// Forwards `resources/read`.
    pub async fn read_resource(
        &self,
        params: ReadResourceRequestParams,
    ) -> Result<ReadResourceResult, CallFailure> {
        let timeout = self.config.timeout;
        let peer = self
            .ready_peer(tokio::time::Instant::now() + timeout)
            .await?;
        let request =
            ClientRequest::ReadResourceRequest(rmcp::model::ReadResourceRequest::new(params));
        match self.request(&peer, request, timeout).await? {
            ServerResult::ReadResourceResult(result) => Ok(result),
            other => Err(self.unexpected("resources/read", &other)),
        }
    }

    /// Forwards `prompts/get`.
    pub async fn get_prompt(
        &self,
        params: GetPromptRequestParams,
    ) -> Result<GetPromptResult, CallFailure> {
        let timeout = self.config.timeout;
        let peer = self
            .ready_peer(tokio::time::Instant::now() + timeout)
            .await?;
        let request = ClientRequest::GetPromptRequest(rmcp::model::GetPromptRequest::new(params));
        match self.request(&peer, request, timeout).await? {
            ServerResult::GetPromptResult(result) => Ok(result),
            other => Err(self.unexpected("prompts/get", &other)),
        }
    }

    async fn request(
        &self,
        peer: &Peer<RoleClient>,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<ServerResult, CallFailure> {
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await
            .map_err(|e| self.service_failure(e, timeout))?;
        handle
            .await_response()
            .await
            .map_err(|e| self.service_failure(e, timeout))
    }

    fn unexpected(&self, method: &str, result: &ServerResult) -> CallFailure {
        CallFailure::Other {
            upstream: self.config.name.clone(),
            message: format!("unexpected answer to {method}: {}", result_kind(result)),
        }
    }

    fn service_failure(&self, error: ServiceError, timeout: Duration) -> CallFailure {
        let upstream = self.config.name.clone();
        match error {
            ServiceError::McpError(e) => CallFailure::Protocol(e),
            ServiceError::Timeout { .. } => CallFailure::Timeout {
                upstream,
                seconds: timeout.as_secs_f64(),
            },
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                CallFailure::ConnectionLost {
                    upstream,
                    how: match self.config.transport {
                        // rmcp's HTTP client drops the connection on a JSON
                        // body over its fixed 16 MiB limit, among others.
                        UpstreamTransport::Http { .. } => {
                            "lost its HTTP connection (a response over 16 MiB does this too)"
                        }
                        _ => "exited",
                    },
                    detail: self.stderr_detail(),
                }
            }
            ServiceError::Cancelled { .. } => CallFailure::Cancelled,
            other => CallFailure::Other {
                upstream,
                message: other.to_string(),
            },
        }
    }
}

/// Removes a progress route when the call ends, however it ends.
struct RouteGuard {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        lock(&self.routes).remove(&self.token);
    }
}

/// Why a connection attempt failed.
enum ConnectError {
    /// Worth another attempt after the backoff (the server may come up).
    Retry(String),
    /// Never worth another attempt: what the config says cannot work.
    Permanent(String),
}

impl From<String> for ConnectError {
    fn from(message: String) -> Self {
        ConnectError::Retry(message)
    }
}

/// How long [`probe_http`] waits for an answer.
const HTTP_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What is wrong with an HTTP upstream that would not initialize, for
/// people: one plain request to its URL, and the innermost cause of its
/// failure (connection refused, a name that does not resolve, a TLS error,
/// a timeout), or the status it answered with when that says no.
async fn probe_http(url: &str) -> String {
    let client = reqwest::Client::builder()
        .timeout(HTTP_PROBE_TIMEOUT)
        .build()
        .unwrap_or_default();
    match client.get(url).send().await {
        Ok(response) => {
            let status = response.status();
            if status.is_client_error() && status != reqwest::StatusCode::METHOD_NOT_ALLOWED {
                format!("{url} answered HTTP {status} (check the URL and the headers it needs)")
            } else if status.is_server_error() {
                format!("{url} answered HTTP {status}")
            } else {
                format!("{url} is reachable (HTTP {status}) but did not complete the MCP handshake")
            }
        }
        Err(error) => describe_request_error(url, &error),
    }
}

/// The innermost cause of a failed request, with the URL.
fn describe_request_error(url: &str, error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return format!(
            "no answer from {url} within {} s",
            HTTP_PROBE_TIMEOUT.as_secs()
        );
    }
    let mut cause = error.to_string();
    let mut current: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => format!("connection refused at {url}"),
                std::io::ErrorKind::ConnectionReset => format!("connection reset by {url}"),
                std::io::ErrorKind::TimedOut => format!("connection to {url} timed out"),
                _ => format!("{io} ({url})"),
            };
        }
        cause = e.to_string();
        current = e.source();
    }
    format!("{cause} ({url})")
}

/// Whether the server on the other end is devboy (by the name it gives in
/// `initialize`), which must never be proxied by devboy.
fn is_devboy(running: &RunningService<RoleClient, UpstreamClient>) -> bool {
    running.peer().peer_info().is_some_and(|info| {
        info.server_info
            .as_ref()
            .is_some_and(|server| server.name == crate::SERVER_INFO_NAME)
    })
}

fn result_kind(result: &ServerResult) -> String {
    serde_json::to_value(result)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>().join(","))
        })
        .unwrap_or_else(|| "unknown".into())
}

fn spawn_error(command: &str, error: &std::io::Error) -> String {
    if error.kind() == std::io::ErrorKind::NotFound {
        format!("command not found: `{command}` (check `command` and PATH)")
    } else {
        format!("failed to start `{command}`: {error}")
    }
}

async fn list_catalog(peer: &Peer<RoleClient>) -> Result<UpstreamCatalog, ServiceError> {
    let capabilities = peer
        .peer_info()
        .map(|info| info.capabilities.clone())
        .unwrap_or_default();
    let mut catalog = UpstreamCatalog::default();
    if capabilities.tools.is_some() {
        catalog.tools = peer.list_all_tools().await?;
    }
    if capabilities.resources.is_some() {
        catalog.resources = peer.list_all_resources().await?;
        // Templates are optional even for resource servers.
        catalog.resource_templates = peer.list_all_resource_templates().await.unwrap_or_default();
    }
    if capabilities.prompts.is_some() {
        catalog.prompts = peer.list_all_prompts().await?;
    }
    Ok(catalog)
}

async fn drain_stderr(
    upstream: String,
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(mut line)) = lines.next_line().await {
        tracing::debug!(upstream = %upstream, "stderr: {line}");
        if line.trim().is_empty() {
            continue;
        }
        if line.len() > STDERR_LINE_MAX {
            let mut cut = STDERR_LINE_MAX;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
        }
        let mut tail = lock(&tail);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}

/// The client side of one upstream connection. Progress is forwarded by
/// the transport tap, not here (see [`crate::tap`]).
pub struct UpstreamClient {
    refresh: mpsc::UnboundedSender<ListKind>,
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("devboy", env!("CARGO_PKG_VERSION")),
        );
        // Session-based lifecycle: list_changed arrives as plain notifications.
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.refresh.send(ListKind::Tools);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.refresh.send(ListKind::Resources);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.refresh.send(ListKind::Prompts);
    }
}

/// Poison-tolerant lock: a panicked holder must not take the proxy down.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}
