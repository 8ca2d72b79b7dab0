//! Hot reload: an edited `devboy.toml` (or `.mcp.json`) or
//! `pipeline_config.toml` takes effect while devboy runs, with no client
//! reconnecting.
//!
//! The files are looked at once a second (their modification time and
//! size; a file that appears or goes counts too). Polling, not a
//! notification API: editors save by writing a new file and renaming it
//! over the old one, which a watch on the old file misses, and a stat a
//! second costs nothing. A devboy config that changed is applied with
//! [`Proxy::reload`] (added servers start, removed ones stop, changed ones
//! restart, the rest keep running); a pipeline config that changed is
//! handed to every live session, which follows it from its next result.
//! A file read again is applied as it would be at start: a bad key is
//! left out, the rest applies. A file that no longer parses at all keeps
//! what runs as it was. Either way its problems replace the ones recorded
//! of it ([`Proxy::set_config_problems`], where a problem found at start
//! is too), each new one said once on stderr, so a fixed file clears them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use devboy_core::config::ProxyConfig;
use devboy_core::pipeline_config::PipelineConfig;

use crate::proxy::{ConfigKind, Proxy};

/// How often the files are looked at.
pub const POLL: Duration = Duration::from_secs(1);

/// Where the running configs came from, to read them again.
#[derive(Debug, Clone, Default)]
pub struct ReloadSources {
    /// The devboy config file (`None`: the embedded default, which never
    /// changes, or a nested devboy that serves built-ins only).
    pub config: Option<PathBuf>,
    /// `--pipeline-config`, when given; else the default layering
    /// (the project's `.devboy/pipeline_config.toml` under the user's
    /// `pipeline_config.toml`), whose files are watched even before they
    /// exist.
    pub pipeline_explicit: Option<PathBuf>,
    /// The project directory the layering starts from.
    pub project: Option<PathBuf>,
}

impl ReloadSources {
    fn pipeline_files(&self) -> Vec<PathBuf> {
        match &self.pipeline_explicit {
            Some(path) => vec![path.clone()],
            None => {
                let mut files = vec![devboy_core::pipeline_config::default_file()];
                if let Some(project) = &self.project {
                    files.push(
                        devboy_core::pipeline_config::project_file(project).unwrap_or_else(|| {
                            project.join(".devboy").join("pipeline_config.toml")
                        }),
                    );
                }
                files
            }
        }
    }

    fn load_pipeline(&self) -> Result<PipelineConfig, devboy_core::config::ConfigError> {
        PipelineConfig::resolve_in(self.pipeline_explicit.as_deref(), self.project.as_deref())
    }
}

/// What a file looked like: its modification time and size, or absent.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn stamps(paths: &[PathBuf]) -> Vec<Stamp> {
    paths.iter().map(|p| stamp(p)).collect()
}

/// Hands a changed pipeline config to the live sessions.
pub type ApplyPipeline = Arc<dyn Fn(Arc<PipelineConfig>) + Send + Sync>;

/// A running watch; dropping it stops watching.
pub struct Watcher(tokio::task::JoinHandle<()>);

impl Drop for Watcher {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Watches `sources` until the [`Watcher`] is dropped, applying each
/// change to `proxy` and, through `apply`, to the sessions.
pub fn watch(proxy: Arc<Proxy>, sources: ReloadSources, apply: ApplyPipeline) -> Watcher {
    Watcher(tokio::spawn(async move {
        let config_files: Vec<PathBuf> = sources.config.iter().cloned().collect();
        let pipeline_files = sources.pipeline_files();
        let mut config_seen = stamps(&config_files);
        let mut pipeline_seen = stamps(&pipeline_files);
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = stamps(&config_files);
            if now != config_seen {
                config_seen = now;
                if let Some(path) = &sources.config {
                    match ProxyConfig::resolve(Some(path)) {
                        Ok(config) => {
                            record(&proxy, ConfigKind::Proxy, config.problems.clone());
                            for warning in &config.warnings {
                                tracing::warn!("{warning}");
                            }
                            let reloaded = proxy.reload(&config);
                            tracing::info!(
                                config = %path.display(),
                                added = ?reloaded.added,
                                removed = ?reloaded.removed,
                                restarted = ?reloaded.changed,
                                "config reloaded"
                            );
                        }
                        Err(error) => record(
                            &proxy,
                            ConfigKind::Proxy,
                            vec![format!("{error}; devboy runs the last config that parsed")],
                        ),
                    }
                }
            }
            let now = stamps(&pipeline_files);
            if now != pipeline_seen {
                pipeline_seen = now;
                let sources = sources.clone();
                let loaded = tokio::task::spawn_blocking(move || sources.load_pipeline()).await;
                match loaded {
                    Ok(Ok(config)) => {
                        record(&proxy, ConfigKind::Pipeline, config.problems.clone());
                        for warning in &config.warnings {
                            tracing::warn!("{warning}");
                        }
                        let from = match &config.source {
                            devboy_core::config::ConfigSource::File(path) => {
                                path.display().to_string()
                            }
                            devboy_core::config::ConfigSource::Embedded => {
                                "embedded default".to_owned()
                            }
                        };
                        tracing::info!(pipeline_config = %from, "pipeline config reloaded");
                        apply(Arc::new(config));
                    }
                    Ok(Err(error)) => record(
                        &proxy,
                        ConfigKind::Pipeline,
                        vec![format!(
                            "{error}; sessions follow the last pipeline config that parsed"
                        )],
                    ),
                    Err(_) => {}
                }
            }
        }
    }))
}

/// Records the problems of the `kind` file as read now; says each one not
/// said before, so a file left broken is reported once.
fn record(proxy: &Proxy, kind: ConfigKind, problems: Vec<String>) {
    for problem in proxy.set_config_problems(kind, problems) {
        tracing::error!("{problem}");
    }
}
