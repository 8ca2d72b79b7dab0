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

mod diagnostics;
mod forward;
mod http;
mod settle;
mod stdio;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use devboy_core::config::{UpstreamConfig, UpstreamTransport};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, Peer, RunningService, ServiceError};
use rmcp::{ClientHandler, RoleClient};

use crate::catalog::UpstreamCatalog;
use crate::tap::ProgressRoutes;
pub use crate::tap::ProgressTarget;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub(crate) use crate::relay::{next_agent_id, AgentId, Relay};
pub use forward::CallFailure;
// The crate's lock helpers were defined here first; many modules still
// import them from this path.
pub(crate) use crate::sync::{lock, read, write};

/// First restart delay; doubles per failed attempt up to [`BACKOFF_MAX`].
const BACKOFF_START: Duration = Duration::from_millis(250);
/// Longest restart delay.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long stopping waits for a token refresh under way (see
/// [`crate::oauth::let_refreshes_finish`]), within devboy's own ending
/// bound.
const REFRESH_GRACE: Duration = Duration::from_secs(3);

/// How often a server that needs a login looks for the tokens of one.
const LOGIN_POLL: Duration = Duration::from_millis(500);
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

/// The environment variable devboy sets for the stdio upstreams it starts
/// (`<pid> <upstream name>`). A `devboy mcp` that finds it set was started
/// as an upstream of another devboy, so it starts no upstreams of its own.
pub const NESTED_ENV: &str = "DEVBOY_UPSTREAM_OF";

/// The name devboy gives in `initialize` (`serverInfo.name`); an upstream
/// that gives it is devboy itself and is not proxied.
pub const SERVER_INFO_NAME: &str = "devboy";

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

/// How an upstream is reached: one variant per transport devboy speaks,
/// each in a file of its own. What connects, and how a lost connection is
/// described, is decided by the variant.
enum Transport {
    /// A child process speaking MCP on stdin/stdout ([`stdio`]).
    Stdio(stdio::Stdio),
    /// Streamable HTTP ([`http`]).
    Http(http::Http),
}

impl Transport {
    /// The transport `config` describes, or why it cannot be used (which
    /// no retry changes).
    fn from_config(config: &UpstreamTransport) -> Result<Self, String> {
        match config {
            UpstreamTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => Ok(Transport::Stdio(stdio::Stdio {
                command: command.clone(),
                args: args.clone(),
                env: env.clone(),
                cwd: cwd.clone(),
                package_runner: config.runs_a_package_runner(),
            })),
            UpstreamTransport::Http { url, headers } => Ok(Transport::Http(http::Http {
                url: url.clone(),
                headers: headers.clone(),
            })),
            UpstreamTransport::Unsupported { .. } | UpstreamTransport::Invalid { .. } => {
                Err(config
                    .unusable()
                    .unwrap_or_else(|| "cannot be started".to_owned()))
            }
        }
    }

    /// How a connection that dropped under a call is described.
    fn connection_lost(&self) -> &'static str {
        match self {
            Transport::Stdio(_) => "exited",
            Transport::Http(_) => http::CONNECTION_LOST,
        }
    }
}

/// What the user wants of an upstream at runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Wanted {
    enabled: bool,
    /// Restarts asked for so far; a new one ends the current connection.
    restarts: u64,
}

/// A change asked of a running upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// End the connection (the process, for stdio) and start again now.
    Restart,
    /// Start it (again), whatever the config said.
    Enable,
    /// Stop it and withdraw its tools until enabled.
    Disable,
}

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// The server went away.
    Dropped,
    /// devboy ended it: shutdown, or a runtime change.
    Asked,
}

/// Called when an upstream's catalog changes.
pub(crate) type ChangeHook = Arc<dyn Fn() + Send + Sync>;

/// One configured upstream and its live connection, if any.
pub struct Upstream {
    config: UpstreamConfig,
    /// How it is reached, or why it cannot be.
    transport: Result<Transport, String>,
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
    /// The agents its requests, log messages and resource updates go to.
    relay: Arc<Relay>,
    /// Called (synchronously) whenever the catalog changes, before the
    /// phase says Ready, so a ready upstream's tools are always routable.
    on_change: ChangeHook,
    /// Counts the connections made: a result obtained under an earlier
    /// one may describe a server state that is gone.
    generation: AtomicU64,
    /// What the user asked for at runtime (`devboy_servers`, `devboy ctl`):
    /// enabled or not, and how many restarts.
    wanted: watch::Sender<Wanted>,
    /// Removed from the config (or replaced by a changed entry) while
    /// devboy runs: stopped for good, kept only so that indices into the
    /// proxy's list stay valid.
    retired: AtomicBool,
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
        let config_enabled = config.enabled;
        Arc::new(Self {
            transport: Transport::from_config(&config.transport),
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
            relay: Arc::default(),
            on_change,
            generation: AtomicU64::new(0),
            wanted: watch::Sender::new(Wanted {
                enabled: config_enabled,
                restarts: 0,
            }),
            retired: AtomicBool::new(false),
            stats: UpstreamStats::default(),
        })
    }

    /// Whether the upstream is enabled now: its config's `enabled`, unless
    /// changed at runtime ([`control`](Self::control)); never once retired.
    pub fn is_enabled(&self) -> bool {
        self.wanted.borrow().enabled && !self.is_retired()
    }

    /// Whether the upstream left the config while devboy ran
    /// ([`retire`](Self::retire)).
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    /// Stops the upstream for good: its entry left the config, or changed
    /// (a new upstream runs the new entry). Its supervisor ends (the
    /// process with it) and its tools are withdrawn.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        self.wanted.send_modify(|wanted| wanted.enabled = false);
        (self.on_change)();
    }

    /// Restarts, enables or disables the running upstream. Its tools are
    /// withdrawn while it is disabled (the catalog is rebuilt at once) and
    /// offered again once it lists after being enabled.
    pub fn control(&self, control: Control) {
        let before = self.is_enabled();
        self.wanted.send_modify(|wanted| match control {
            Control::Restart => {
                wanted.enabled = true;
                wanted.restarts += 1;
            }
            Control::Enable => wanted.enabled = true,
            Control::Disable => wanted.enabled = false,
        });
        if before != self.is_enabled() {
            (self.on_change)();
        }
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
        // The agent's catalog first: a first `tools/list` waits only while
        // the listing source is none, so once it is not, the tools must be
        // listed (the other order let a listing in between miss them).
        (self.on_change)();
        *lock(&self.listing_source) = ListingSource::Live;
        if let Some(file) = &self.listing_file {
            file.store(&catalog).await;
        }
    }

    /// Runs the upstream until `shutdown` fires: connect, serve, restart;
    /// while disabled (by the config or at runtime), wait to be enabled.
    pub async fn supervise(self: Arc<Self>, shutdown: CancellationToken) {
        let mut wanted = self.wanted.subscribe();
        loop {
            if self.is_retired() {
                self.set_phase(Phase::Stopped);
                return;
            }
            if !wanted.borrow_and_update().enabled {
                self.set_phase(Phase::Disabled);
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => {
                            self.set_phase(Phase::Stopped);
                            return;
                        }
                        changed = wanted.changed() => if changed.is_err() { return },
                    }
                    if self.is_retired() {
                        self.set_phase(Phase::Stopped);
                        return;
                    }
                    if wanted.borrow_and_update().enabled {
                        break;
                    }
                }
            }
            if let Err(error) = &self.transport {
                self.fail_for_good(error.clone(), &shutdown, &mut wanted)
                    .await;
            } else {
                self.run_enabled(&shutdown, &mut wanted).await;
            }
            if shutdown.is_cancelled() {
                self.set_phase(Phase::Stopped);
                return;
            }
        }
    }

    /// Connects, serves and restarts with backoff until `shutdown`, or
    /// until `wanted` says to stop (disabled) or to start afresh (a
    /// restart: the loop returns and [`supervise`](Self::supervise) comes
    /// straight back).
    async fn run_enabled(
        &self,
        shutdown: &CancellationToken,
        wanted: &mut watch::Receiver<Wanted>,
    ) {
        let name = self.config.name.clone();
        let mut backoff = BACKOFF_START;
        let mut last_logged: Option<String> = None;
        loop {
            self.set_phase(Phase::Starting);
            if self.stats.attempts.fetch_add(1, Ordering::Relaxed) > 0 {
                self.stats.restarts.fetch_add(1, Ordering::Relaxed);
            }
            let (refresh_tx, mut refresh_rx) = mpsc::unbounded_channel();
            let connecting = tokio::time::timeout(
                self.config.startup_timeout,
                self.connect(refresh_tx, shutdown),
            );
            tokio::pin!(connecting);
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => {
                    // A token refresh of this connection ends and is kept.
                    let _ = tokio::time::timeout(REFRESH_GRACE, async {
                        tokio::select! {
                            _ = &mut connecting => {}
                            _ = crate::oauth::let_refreshes_finish(REFRESH_GRACE) => {}
                        }
                    })
                    .await;
                    return;
                }
                _ = wanted.changed() => {
                    wanted.borrow_and_update();
                    *lock(&self.pid) = None;
                    return;
                }
                r = &mut connecting => r,
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
                    self.fail_for_good(error, shutdown, wanted).await;
                    return;
                }
                Ok(Err(ConnectError::NeedsLogin(tokens))) => {
                    if !self.wait_for_login(&tokens, shutdown, wanted).await {
                        return;
                    }
                    backoff = BACKOFF_START;
                    continue;
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
                    tokio::spawn(renew_for_agents(
                        peer.clone(),
                        self.relay.clone(),
                        self.config.timeout,
                    ));
                    let stop = running.cancellation_token();
                    let mut quit = Box::pin(running.waiting());
                    let ended = loop {
                        tokio::select! {
                            _ = &mut quit => break Ended::Dropped,
                            _ = shutdown.cancelled() => break Ended::Asked,
                            _ = wanted.changed() => {
                                wanted.borrow_and_update();
                                break Ended::Asked;
                            }
                            Some(kind) = refresh_rx.recv() => self.refresh(&peer, kind).await,
                        }
                    };
                    if ended == Ended::Asked {
                        crate::oauth::let_refreshes_finish(REFRESH_GRACE).await;
                        stop.cancel();
                        let _ = tokio::time::timeout(Duration::from_secs(5), &mut quit).await;
                    }
                    *write(&self.peer) = None;
                    *lock(&self.pid) = None;
                    if ended == Ended::Asked {
                        return;
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
                _ = shutdown.cancelled() => return,
                _ = wanted.changed() => {
                    wanted.borrow_and_update();
                    return;
                }
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// Marks the upstream as needing a login and waits until `tokens`
    /// change (a `devboy login` done meanwhile): true to connect again,
    /// false on shutdown or a change asked at runtime.
    async fn wait_for_login(
        &self,
        tokens: &crate::oauth::TokenFile,
        shutdown: &CancellationToken,
        wanted: &mut watch::Receiver<Wanted>,
    ) -> bool {
        let error = crate::oauth::needs_login(&self.config.name);
        tracing::warn!(upstream = %self.config.name, "{error}");
        lock(&self.down_since).get_or_insert_with(SystemTime::now);
        self.set_phase(Phase::Failed {
            error,
            retry_in: None,
        });
        let before = tokens.modified();
        let mut poll = tokio::time::interval(LOGIN_POLL);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = wanted.changed() => {
                    wanted.borrow_and_update();
                    return false;
                }
                _ = poll.tick() => {
                    let now = tokens.modified();
                    if now.is_some() && now != before {
                        return true;
                    }
                }
            }
        }
    }

    /// Marks the upstream failed with no retry (its config or what it is
    /// cannot work) and waits for shutdown or a change asked at runtime.
    async fn fail_for_good(
        &self,
        error: String,
        shutdown: &CancellationToken,
        wanted: &mut watch::Receiver<Wanted>,
    ) {
        tracing::warn!(upstream = %self.config.name, %error, "upstream not started");
        lock(&self.down_since).get_or_insert_with(SystemTime::now);
        self.set_phase(Phase::Failed {
            error,
            retry_in: None,
        });
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = wanted.changed() => {
                wanted.borrow_and_update();
            }
        }
    }

    /// How long the upstream has been down (failed, or restarting after a
    /// failure), when it is.
    pub fn down_for(&self) -> Option<Duration> {
        lock(&self.down_since).map(|since| since.elapsed().unwrap_or_default())
    }

    /// Connects, initializes and lists everything. Errors are for people.
    /// `shutdown` is devboy's ending, which a stdio process's stop heeds.
    async fn connect(
        &self,
        refresh: mpsc::UnboundedSender<ListKind>,
        shutdown: &CancellationToken,
    ) -> Result<RunningService<RoleClient, UpstreamClient>, ConnectError> {
        let handler = UpstreamClient {
            refresh,
            relay: self.relay.clone(),
            sampling: self.config.sampling,
        };
        let running = match &self.transport {
            Ok(Transport::Stdio(stdio)) => stdio.serve(self, handler, shutdown).await?,
            Ok(Transport::Http(http)) => http.serve(self, handler).await?,
            Err(error) => return Err(ConnectError::Permanent(error.clone())),
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
}

/// Why a connection attempt failed.
enum ConnectError {
    /// Worth another attempt after the backoff (the server may come up).
    Retry(String),
    /// Never worth another attempt: what the config says cannot work.
    Permanent(String),
    /// The server wants a login devboy does not have: worth another
    /// attempt once `devboy login` has written these tokens.
    NeedsLogin(crate::oauth::TokenFile),
}

impl From<String> for ConnectError {
    fn from(message: String) -> Self {
        ConnectError::Retry(message)
    }
}

/// Whether the server on the other end is devboy (by the name it gives in
/// `initialize`), which must never be proxied by devboy.
fn is_devboy(running: &RunningService<RoleClient, UpstreamClient>) -> bool {
    running.peer().peer_info().is_some_and(|info| {
        info.server_info
            .as_ref()
            .is_some_and(|server| server.name == SERVER_INFO_NAME)
    })
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

/// What the agents asked of an upstream's last connection, asked of a new
/// one: the log level, when it logs, and the resource subscriptions, when
/// it takes them.
#[allow(deprecated)] // Logging and resources/subscribe are SEP-2577's legacy.
async fn renew_for_agents(peer: Peer<RoleClient>, relay: Arc<Relay>, timeout: Duration) {
    let Some(capabilities) = peer.peer_info().map(|info| info.capabilities.clone()) else {
        return;
    };
    let options = || rmcp::service::PeerRequestOptions::with_timeout(timeout);
    let mut requests = Vec::new();
    if let (Some(level), Some(_)) = (relay.level(), capabilities.logging.as_ref()) {
        requests.push(rmcp::model::ClientRequest::SetLevelRequest(
            rmcp::model::SetLevelRequest::new(rmcp::model::SetLevelRequestParams::new(level)),
        ));
    }
    if capabilities
        .resources
        .as_ref()
        .is_some_and(|r| r.subscribe == Some(true))
    {
        for uri in relay.subscribed_uris() {
            requests.push(rmcp::model::ClientRequest::SubscribeRequest(
                rmcp::model::SubscribeRequest::new(rmcp::model::SubscribeRequestParams::new(uri)),
            ));
        }
    }
    for request in requests {
        let sent = match peer.send_request_with_option(request, options()).await {
            Ok(handle) => handle.await_response().await.map(|_| ()),
            Err(error) => Err(error),
        };
        if let Err(error) = sent {
            tracing::debug!(%error, "renewing an agent's level or subscription failed");
        }
    }
}

/// The client side of one upstream connection: its list changes, and what
/// it asks of the client, which goes to an agent (see [`crate::relay`]). Progress
/// and log messages are forwarded by the transport tap, in order, not here
/// (see [`crate::tap`]).
pub(crate) struct UpstreamClient {
    refresh: mpsc::UnboundedSender<ListKind>,
    relay: Arc<Relay>,
    /// Declares sampling (`[servers.NAME] sampling`).
    sampling: bool,
}

impl UpstreamClient {
    /// The agent to ask on the upstream's behalf, or why there is none.
    fn asker(&self, what: &str) -> Result<Peer<rmcp::RoleServer>, rmcp::ErrorData> {
        self.relay.asker().ok_or_else(|| {
            rmcp::ErrorData::internal_error(
                format!("devboy has no client connected to ask for {what}"),
                None,
            )
        })
    }
}

/// An agent's answer to a request devboy passed on, as the upstream's.
fn relayed<T>(answer: Result<T, ServiceError>) -> Result<T, rmcp::ErrorData> {
    answer.map_err(|error| match error {
        ServiceError::McpError(error) => error,
        other => {
            rmcp::ErrorData::internal_error(format!("the client did not answer: {other}"), None)
        }
    })
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        // What devboy passes on to its agents: elicitation (Claude Code
        // answers it; an agent that does not says so), and sampling where
        // the config says so (Claude Code does not sample).
        let mut capabilities = ClientCapabilities::builder().enable_elicitation().build();
        if self.sampling {
            capabilities.sampling = Some(Default::default());
        }
        let mut info = ClientConfig::new(
            capabilities,
            Implementation::new("devboy", env!("CARGO_PKG_VERSION")),
        );
        // Session-based lifecycle: list_changed arrives as plain notifications.
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info
    }

    #[allow(deprecated)] // Sampling: SEP-2577's legacy, still spoken.
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        relayed(self.asker("sampling")?.create_message(params).await)
    }

    async fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        relayed(self.asker("elicitation")?.create_elicitation(params).await)
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
