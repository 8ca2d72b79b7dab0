//! What the benches share: the test server binary and a scratch directory.

use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context as _, Result};

/// The test server next to the devboy binary, built (same profile) if missing.
pub fn test_server_bin() -> Result<PathBuf> {
    let dir = Path::new(env!("CARGO_BIN_EXE_devboy"))
        .parent()
        .context("devboy binary has no directory")?;
    let path = dir.join("devboy-test-server");
    if !path.exists() {
        let profile = match dir.file_name().and_then(|name| name.to_str()) {
            Some("debug") => "dev",
            Some(name) => name,
            None => "release",
        };
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "--profile", profile, "-p", "devboy-test-server"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .context("running cargo build")?;
        if !status.success() {
            bail!("building devboy-test-server failed: {status}");
        }
    }
    ensure!(path.exists(), "{} missing", path.display());
    Ok(path)
}

/// A temporary directory, removed on drop.
pub struct WorkDir(pub PathBuf);

impl WorkDir {
    /// A new directory named for `tag` and this process.
    pub fn new(tag: &str) -> Result<Self> {
        let path = std::env::temp_dir().join(format!("devboy-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
