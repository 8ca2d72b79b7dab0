//! The proxy: the set of upstreams, the current catalog, and their lifecycle.
//!
//! One [`Proxy`] per devboy process. It starts every upstream's supervisor
//! at once (concurrently; a slow or broken one delays nobody), and rebuilds
//! the [`Catalog`] whenever any upstream's listing changes. Agent sessions
//! ([`crate::session::Session`]) read the catalog and subscribe to its
//! changes to send `list_changed` notifications. With a listing cache
//! ([`ProxyOptions::listing_cache`]) each upstream starts from the listing
//! an earlier devboy kept, so the first `tools/list` need not wait for it.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use devboy_core::config::{CodeConfig, ProxyConfig, ToolsConfig};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::catalog::{BuiltinListing, Catalog, UpstreamListing};
use crate::listing_cache::ListingFile;
use crate::sync::{read, write};
use crate::upstream::{ChangeHook, Control, ListingSource, Phase, Upstream};

/// How long the first `tools/list` waits for upstreams still starting
/// that have no kept listing (a server's first run ever, or a changed
/// entry), counted from devboy's start, by default. Print mode runs only
/// the tools of that first list, so the wait is as long as `claude mcp
/// list` allows: it gives `tools/list` 5,000 ms from its request (a
/// timeout past that; measured connected up to a 4.9 s grace), and 1 s is
/// left for a busy machine. Later servers are announced with
/// `list_changed`, which interactive sessions honour.
pub const DEFAULT_LIST_GRACE_MS: u64 = 4_000;

/// Options that are not part of the config file.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// How long the first `tools/list` may wait for upstreams that are still
    /// starting and have no kept listing, counted from proxy start.
    /// `initialize` never waits.
    pub list_grace: Duration,
    /// Where each upstream's last listing is kept between runs
    /// (`devboy mcp` and `devboy doctor` use
    /// [`devboy_core::paths::listing_cache_dir`]); `None` keeps nothing.
    pub listing_cache: Option<PathBuf>,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            list_grace: Duration::from_millis(DEFAULT_LIST_GRACE_MS),
            listing_cache: None,
        }
    }
}

/// All upstreams and the catalog built from them.
pub struct Proxy {
    server_name: String,
    /// Where the config came from, for `devboy status`.
    config_label: String,
    /// `[tools]` (reloaded with the config).
    tools: RwLock<ToolsConfig>,
    /// `[code]` (reloaded with the config).
    code: RwLock<Arc<CodeConfig>>,
    /// devboy's own tools, as the catalog lists them first.
    builtins: Vec<BuiltinListing>,
    /// Every upstream this devboy has run, in config order; an entry that
    /// left the config (or changed) stays, retired (its counters and its
    /// ending are still its own); routes name the current one.
    upstreams: RwLock<Arc<Vec<Arc<Upstream>>>>,
    /// A weak handle to this proxy, for the change hooks of upstreams
    /// added by a reload.
    this: std::sync::Weak<Proxy>,
    catalog: RwLock<Arc<Catalog>>,
    updates: watch::Sender<Arc<Catalog>>,
    shutdown: CancellationToken,
    started: Instant,
    options: ProxyOptions,
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    rebuilding: std::sync::Mutex<()>,
    reloading: std::sync::Mutex<()>,
    /// What in the config files is wrong and not applied, while it is.
    config_problems: std::sync::Mutex<ConfigProblems>,
}

/// Which of devboy's two config files a problem is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigKind {
    /// `devboy.toml` or the `.mcp.json` devboy was started with.
    Proxy,
    /// The pipeline config's files.
    Pipeline,
}

/// The problems of each config file, one line each; each file's are
/// replaced whenever it is read again, so that a fixed file clears its own.
#[derive(Debug, Default)]
struct ConfigProblems {
    proxy: Vec<String>,
    pipeline: Vec<String>,
}

impl ConfigProblems {
    fn of(&mut self, kind: ConfigKind) -> &mut Vec<String> {
        match kind {
            ConfigKind::Proxy => &mut self.proxy,
            ConfigKind::Pipeline => &mut self.pipeline,
        }
    }
}

/// What a [`Proxy::reload`] did, by server name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// New entries, started.
    pub added: Vec<String>,
    /// Entries that left the config, stopped.
    pub removed: Vec<String>,
    /// Entries whose config changed, restarted from it.
    pub changed: Vec<String>,
    /// Entries unchanged, still running.
    pub kept: Vec<String>,
}

impl Reloaded {
    /// Whether the reload changed any server.
    pub fn changed_servers(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty())
    }
}

/// An upstream for `entry`, whose changes rebuild `proxy`'s catalog, with
/// its kept listing when enabled.
fn new_upstream(
    proxy: &std::sync::Weak<Proxy>,
    options: &ProxyOptions,
    entry: &devboy_core::config::UpstreamConfig,
) -> Arc<Upstream> {
    let weak = proxy.clone();
    let hook: ChangeHook = Arc::new(move || {
        if let Some(proxy) = weak.upgrade() {
            proxy.rebuild();
        }
    });
    let file = options
        .listing_cache
        .as_deref()
        .filter(|_| entry.enabled)
        .and_then(|dir| ListingFile::for_upstream(dir, entry));
    Upstream::with_listing_file(entry.clone(), hook, file)
}

/// The catalog of `builtins` and the enabled `upstreams`' listings now.
fn build_catalog(
    server_name: &str,
    builtins: &[BuiltinListing],
    upstreams: &[Arc<Upstream>],
    compact_schemas: bool,
) -> Catalog {
    let enabled: Vec<(&Arc<Upstream>, Arc<crate::catalog::UpstreamCatalog>)> = upstreams
        .iter()
        .filter(|u| u.is_enabled())
        .map(|u| (u, u.catalog()))
        .collect();
    let listings: Vec<UpstreamListing<'_>> = enabled
        .iter()
        .map(|(upstream, listing)| {
            let config = upstream.config();
            UpstreamListing {
                name: &config.name,
                prefix: &config.prefix,
                filter: &config.tools,
                listing,
                always_load: config.always_load,
            }
        })
        .collect();
    Catalog::build(server_name, builtins, &listings, compact_schemas)
}

impl Proxy {
    /// Starts every enabled upstream (in the background) and returns at
    /// once; the catalog lists `builtins` (devboy's own tools) first. Must
    /// be called inside a tokio runtime.
    pub fn start(
        config: &ProxyConfig,
        options: ProxyOptions,
        builtins: Vec<BuiltinListing>,
    ) -> Arc<Self> {
        let proxy = Arc::new_cyclic(|weak: &std::sync::Weak<Proxy>| {
            let upstreams: Vec<Arc<Upstream>> = config
                .upstreams
                .iter()
                .map(|u| new_upstream(weak, &options, u))
                .collect();
            let catalog = Arc::new(build_catalog(
                &config.server_name,
                &builtins,
                &upstreams,
                config.tools.compact_schemas,
            ));
            Self {
                server_name: config.server_name.clone(),
                config_label: match &config.source {
                    // Absolute, for `devboy status` read from another directory.
                    devboy_core::config::ConfigSource::File(path) => std::path::absolute(path)
                        .unwrap_or_else(|_| path.clone())
                        .display()
                        .to_string(),
                    devboy_core::config::ConfigSource::Embedded => "embedded default".to_owned(),
                },
                tools: RwLock::new(config.tools),
                code: RwLock::new(Arc::new(config.code.clone())),
                builtins,
                upstreams: RwLock::new(Arc::new(upstreams)),
                this: weak.clone(),
                catalog: RwLock::new(catalog.clone()),
                updates: watch::Sender::new(catalog),
                shutdown: CancellationToken::new(),
                started: Instant::now(),
                options,
                tasks: Default::default(),
                rebuilding: Default::default(),
                reloading: Default::default(),
                config_problems: std::sync::Mutex::new(ConfigProblems {
                    proxy: config.problems.clone(),
                    pipeline: Vec::new(),
                }),
            }
        });
        let tasks = proxy
            .upstreams()
            .iter()
            .map(|upstream| tokio::spawn(upstream.clone().supervise(proxy.shutdown.clone())))
            .collect();
        *crate::sync::lock(&proxy.tasks) = tasks;
        proxy
    }

    /// Every upstream this devboy has run, in config order, retired ones
    /// included ([`Upstream::is_retired`]); an index into it names the
    /// same upstream for the life of the proxy (routes name upstreams by
    /// their config key instead: [`upstream`](Self::upstream)).
    pub fn upstreams(&self) -> Arc<Vec<Arc<Upstream>>> {
        read(&self.upstreams).clone()
    }

    /// The upstreams of the config devboy runs now (not retired).
    pub fn current_upstreams(&self) -> Vec<Arc<Upstream>> {
        self.upstreams()
            .iter()
            .filter(|u| !u.is_retired())
            .cloned()
            .collect()
    }

    /// Applies a config read again while devboy runs: entries that are new
    /// start, entries that left stop, entries that changed restart from
    /// their new config (their tools withdrawn and offered again), and the
    /// untouched keep running with their connections. `[tools]` takes
    /// effect at once. What the reload did, for the log.
    pub fn reload(&self, config: &ProxyConfig) -> Reloaded {
        let _serial = crate::sync::lock(&self.reloading);
        *write(&self.tools) = config.tools;
        *write(&self.code) = Arc::new(config.code.clone());
        let mut reloaded = Reloaded::default();
        let current = self.current_upstreams();
        for upstream in &current {
            let name = &upstream.config().name;
            match config.upstreams.iter().find(|u| &u.name == name) {
                Some(entry) if entry == upstream.config() => reloaded.kept.push(name.clone()),
                Some(_) => reloaded.changed.push(name.clone()),
                None => reloaded.removed.push(name.clone()),
            }
        }
        let mut list: Vec<Arc<Upstream>> = self.upstreams().as_ref().clone();
        let mut started = Vec::new();
        for entry in &config.upstreams {
            let known = current.iter().find(|u| u.config().name == entry.name);
            if known.is_some_and(|u| u.config() == entry) {
                continue;
            }
            if known.is_none() {
                reloaded.added.push(entry.name.clone());
            }
            let upstream = new_upstream(&self.this, &self.options, entry);
            list.push(upstream.clone());
            started.push(upstream);
        }
        for upstream in &current {
            let name = &upstream.config().name;
            if reloaded.removed.contains(name) || reloaded.changed.contains(name) {
                upstream.retire();
            }
        }
        *write(&self.upstreams) = Arc::new(list);
        let mut tasks = crate::sync::lock(&self.tasks);
        for upstream in started {
            tasks.push(tokio::spawn(upstream.supervise(self.shutdown.clone())));
        }
        drop(tasks);
        self.rebuild();
        reloaded
    }

    /// The current upstream called `name` (its key in the config): the
    /// one a route names.
    pub fn upstream(&self, name: &str) -> Option<Arc<Upstream>> {
        read(&self.upstreams)
            .iter()
            .find(|u| !u.is_retired() && u.config().name == name)
            .cloned()
    }

    /// Where the config came from: its file, or `embedded default`.
    pub fn config_label(&self) -> &str {
        &self.config_label
    }

    /// What in the config files as they are now is wrong and not what
    /// runs (a key left out, a file that does not parse), one problem a
    /// line, devboy.toml's first; `None` when every file applies whole.
    /// Shown by `devboy_status` and `devboy status`.
    pub fn config_problem(&self) -> Option<String> {
        let problems = crate::sync::lock(&self.config_problems);
        let lines: Vec<&str> = problems
            .proxy
            .iter()
            .chain(&problems.pipeline)
            .map(String::as_str)
            .collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    /// Records what is wrong with the `kind` file as just read (empty: it
    /// applies whole), replacing what was recorded of it; returns the
    /// problems not recorded before, the ones to tell the user of.
    /// [`start`](Self::start) records the proxy config's; whoever starts the proxy
    /// records the pipeline config's.
    pub fn set_config_problems(&self, kind: ConfigKind, problems: Vec<String>) -> Vec<String> {
        let mut recorded = crate::sync::lock(&self.config_problems);
        let slot = recorded.of(kind);
        let new = problems
            .iter()
            .filter(|p| !slot.contains(p))
            .cloned()
            .collect();
        *slot = problems;
        new
    }

    /// `[tools]`: how tool definitions are passed on.
    pub fn tools_config(&self) -> ToolsConfig {
        *read(&self.tools)
    }

    /// `[code]`: code mode's limits and what a script may call.
    pub fn code_config(&self) -> Arc<CodeConfig> {
        read(&self.code).clone()
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        read(&self.catalog).clone()
    }

    /// A receiver that sees every new catalog.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Catalog>> {
        self.updates.subscribe()
    }

    /// Time since start.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Waits until no upstream is still starting without a listing (live
    /// or kept from an earlier run), or until the list grace period (from
    /// proxy start) is over.
    pub async fn settle(&self) {
        let deadline = tokio::time::Instant::from_std(self.started + self.options.list_grace);
        for upstream in self.current_upstreams() {
            let mut phase = upstream.watch_phase();
            loop {
                if *phase.borrow_and_update() != Phase::Starting
                    || upstream.listing_source() != ListingSource::None
                {
                    break;
                }
                match tokio::time::timeout_at(deadline, phase.changed()).await {
                    Ok(Ok(())) => continue,
                    _ => return,
                }
            }
        }
    }

    /// Whether every upstream has finished its first start (ready,
    /// failed, disabled or stopped).
    pub fn all_started(&self) -> bool {
        self.current_upstreams().iter().all(|u| !u.on_first_start())
    }

    /// When `tool` (an exposed name) carries the prefix of an upstream that
    /// is still on its first start, waits until that upstream is ready or
    /// has failed, at most its call timeout: a call to a tool whose server
    /// is a little slow should be answered, not refused.
    pub async fn wait_first_start(&self, tool: &str) {
        let Some((upstream, _)) = self.owner_of(tool) else {
            return;
        };
        let deadline = tokio::time::Instant::now() + upstream.config().timeout;
        let mut phase = upstream.watch_phase();
        while upstream.on_first_start() {
            match tokio::time::timeout_at(deadline, phase.changed()).await {
                Ok(Ok(())) => continue,
                _ => return,
            }
        }
    }

    /// The upstream an exposed name belongs to by its form, and the name
    /// on that upstream: the server whose prefix is before the first
    /// `__`, else the one that keeps its names (`prefix = ""`), if any.
    /// Not a route (the catalog has those): this names a server for a
    /// tool that is not, or not yet, in the catalog.
    pub fn owner_of<'n>(&self, exposed: &'n str) -> Option<(Arc<Upstream>, &'n str)> {
        let current = self.current_upstreams();
        if let Some((prefix, tool)) = exposed.split_once("__") {
            if let Some(upstream) = current.iter().find(|u| u.config().prefix == prefix) {
                return Some((upstream.clone(), tool));
            }
        }
        // Built-ins are `devboy_<x>`; they never wait for a server.
        let builtin = exposed
            .strip_prefix(devboy_core::config::RESERVED_PREFIX)
            .is_some_and(|rest| rest.starts_with('_'));
        if builtin {
            return None;
        }
        current
            .into_iter()
            .find(|u| u.config().keeps_names())
            .map(|u| (u, exposed))
    }

    /// The upstream called `name` (its key in the config), or whose prefix
    /// is `name`.
    pub fn upstream_named(&self, name: &str) -> Option<Arc<Upstream>> {
        let current = self.current_upstreams();
        current
            .iter()
            .find(|u| u.config().name == name)
            .or_else(|| current.iter().find(|u| u.config().prefix == name))
            .cloned()
    }

    /// Restarts, enables or disables the upstream `name` and waits (at
    /// most its startup timeout) until it has done so: ready or failed
    /// after a restart or an enable, disabled after a disable. Returns the
    /// phase it reached, or why there is no such upstream.
    pub async fn control(&self, name: &str, control: Control) -> Result<Phase, String> {
        let upstream = self.upstream_named(name).ok_or_else(|| {
            let current = self.current_upstreams();
            let names: Vec<&str> = current.iter().map(|u| u.config().name.as_str()).collect();
            if names.is_empty() {
                format!("no server `{name}`: devboy has no servers configured")
            } else {
                format!("no server `{name}`; the servers are {}", names.join(", "))
            }
        })?;
        let generation = upstream.generation();
        let mut phase = upstream.watch_phase();
        phase.borrow_and_update();
        tracing::info!(upstream = %upstream.config().name, ?control, "asked at runtime");
        upstream.control(control);
        let deadline = tokio::time::Instant::now() + upstream.config().startup_timeout;
        loop {
            let now = upstream.phase();
            let done = match control {
                Control::Disable => now == Phase::Disabled,
                Control::Restart | Control::Enable => match &now {
                    Phase::Ready => {
                        upstream.generation() > generation || control == Control::Enable
                    }
                    Phase::Failed { .. } => true,
                    _ => false,
                },
            };
            if done || matches!(now, Phase::Stopped) {
                return Ok(now);
            }
            match tokio::time::timeout_at(deadline, phase.changed()).await {
                Ok(Ok(())) => continue,
                _ => return Ok(upstream.phase()),
            }
        }
    }

    /// Stops every upstream (their child processes are terminated) and waits
    /// a bounded time for them to go.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let tasks = std::mem::take(&mut *crate::sync::lock(&self.tasks));
        let _ =
            tokio::time::timeout(Duration::from_secs(8), futures::future::join_all(tasks)).await;
    }

    /// Rebuilds the catalog from the upstreams' listings. Serialized so two
    /// upstreams publishing at once cannot store an older view last.
    fn rebuild(&self) {
        let _serial = crate::sync::lock(&self.rebuilding);
        let catalog = Arc::new(build_catalog(
            &self.server_name,
            &self.builtins,
            &self.upstreams(),
            self.tools_config().compact_schemas,
        ));
        for clash in &catalog.clashes {
            if !read(&self.catalog).clashes.contains(clash) {
                tracing::warn!("{clash}");
            }
        }
        for (original, exposed) in &catalog.renamed {
            let previously = read(&self.catalog)
                .renamed
                .iter()
                .any(|(o, e)| o == original && e == exposed);
            if !previously {
                tracing::warn!(original = %original, exposed = %exposed, server = %self.server_name, "tool name shortened to fit the client's 64-character limit");
            }
        }
        *write(&self.catalog) = catalog.clone();
        self.updates.send_replace(catalog);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_config_files_problems_are_kept_apart_and_cleared_by_its_own_reading() {
        let mut config = ProxyConfig::embedded_default();
        config.problems = vec!["devboy.toml:2:1: devboy.sever_name: unknown key".to_owned()];
        let proxy = Proxy::start(&config, ProxyOptions::default(), Vec::new());
        assert_eq!(
            proxy.config_problem().as_deref(),
            Some("devboy.toml:2:1: devboy.sever_name: unknown key"),
            "the problems the proxy started with"
        );
        let said = proxy.set_config_problems(
            ConfigKind::Pipeline,
            vec!["p.toml:2:18: dedup.min_body_bytes".to_owned()],
        );
        assert_eq!(said, ["p.toml:2:18: dedup.min_body_bytes"]);
        // Read again, the same problem and one more: only the new one to say.
        let said = proxy.set_config_problems(
            ConfigKind::Pipeline,
            vec![
                "p.toml:2:18: dedup.min_body_bytes".to_owned(),
                "p.toml:5:2: encodng".to_owned(),
            ],
        );
        assert_eq!(said, ["p.toml:5:2: encodng"]);
        assert_eq!(
            proxy.config_problem().as_deref(),
            Some("devboy.toml:2:1: devboy.sever_name: unknown key\np.toml:2:18: dedup.min_body_bytes\np.toml:5:2: encodng")
        );
        // devboy.toml fixed: the pipeline config's stay.
        assert!(proxy
            .set_config_problems(ConfigKind::Proxy, Vec::new())
            .is_empty());
        assert_eq!(
            proxy.config_problem().as_deref(),
            Some("p.toml:2:18: dedup.min_body_bytes\np.toml:5:2: encodng")
        );
        proxy.set_config_problems(ConfigKind::Pipeline, Vec::new());
        assert_eq!(proxy.config_problem(), None);
        proxy.shutdown().await;
    }
}
