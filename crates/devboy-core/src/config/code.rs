//! `[code]`: code mode (`devboy_run`), its limits and the tools a script
//! may call although they may write.

use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};

/// `[code]` in devboy.toml.
#[derive(Clone, Debug)]
pub struct CodeConfig {
    /// `enabled` (default true): whether `devboy_run` is offered.
    pub enabled: bool,
    /// `timeout_secs` (default 30): a run's wall time.
    pub timeout: Duration,
    /// `memory_mib` (default 64): the script engine's heap.
    pub memory_bytes: usize,
    /// `max_calls` (default 200): tool calls per run.
    pub max_calls: u64,
    /// `max_in_flight` (default 8): tool calls of one run at a time.
    pub max_in_flight: usize,
    /// `max_output_bytes` (default 1 MiB): the run's logs and value
    /// together, before the pipeline.
    pub max_output_bytes: usize,
    /// `allow` (default none): globs of exposed tool names a script may
    /// call although they may write.
    pub allow: Vec<String>,
    allow_set: GlobSet,
}

impl Default for CodeConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout: Duration::from_secs(30),
            memory_bytes: 64 * 1024 * 1024,
            max_calls: 200,
            max_in_flight: 8,
            max_output_bytes: 1024 * 1024,
            allow: Vec::new(),
            allow_set: GlobSet::empty(),
        }
    }
}

impl PartialEq for CodeConfig {
    fn eq(&self, other: &Self) -> bool {
        (
            self.enabled,
            self.timeout,
            self.memory_bytes,
            self.max_calls,
            self.max_in_flight,
            self.max_output_bytes,
            &self.allow,
        ) == (
            other.enabled,
            other.timeout,
            other.memory_bytes,
            other.max_calls,
            other.max_in_flight,
            other.max_output_bytes,
            &other.allow,
        )
    }
}

impl CodeConfig {
    /// This config allowing the tools `globs` match; a glob that does not
    /// parse is the error, naming it.
    pub fn with_allow(mut self, globs: Vec<String>) -> Result<Self, String> {
        let mut set = GlobSetBuilder::new();
        for glob in &globs {
            set.add(Glob::new(glob).map_err(|e| format!("{glob:?}: {e}"))?);
        }
        self.allow_set = set.build().map_err(|e| e.to_string())?;
        self.allow = globs;
        Ok(self)
    }

    /// Whether a script may call `exposed` although it may write.
    pub fn allows(&self, exposed: &str) -> bool {
        self.allow_set.is_match(exposed)
    }
}
