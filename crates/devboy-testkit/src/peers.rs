//! Locating the pinned real test peers installed by `tests/peers/install.sh`.
//!
//! Every function returns an absolute path inside the workspace
//! (`tests/peers/node_modules/.bin/…` or `tests/peers/.venv/bin/…`) and
//! **panics** with `test peer X not installed: run tests/peers/install.sh`
//! when the peer is missing, so tests that need a peer fail loudly instead of
//! being skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The message every lookup panics with when a peer is missing.
fn missing(what: &str, path: &Path) -> ! {
    panic!(
        "test peer {what} not installed: run tests/peers/install.sh (looked for {})",
        path.display()
    )
}

/// Absolute path of the workspace root (the directory holding the top-level
/// `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// Absolute path of `tests/peers`, where the peers are pinned and installed.
pub fn peers_dir() -> PathBuf {
    workspace_root().join("tests").join("peers")
}

/// Absolute path of an npm executable `tests/peers/node_modules/.bin/NAME`,
/// e.g. `node_bin("mcp-server-everything")`.
///
/// # Panics
/// If the executable is not installed.
pub fn node_bin(name: &str) -> PathBuf {
    let path = peers_dir().join("node_modules").join(".bin").join(name);
    if !path.is_file() {
        missing(name, &path);
    }
    path
}

/// Absolute path of an installed npm package's directory
/// `tests/peers/node_modules/NAME`, e.g. `node_package_dir("@modelcontextprotocol/server-everything")`.
///
/// # Panics
/// If the package is not installed.
pub fn node_package_dir(name: &str) -> PathBuf {
    let path = peers_dir().join("node_modules").join(name);
    if !path.join("package.json").is_file() {
        missing(name, &path);
    }
    path
}

/// Absolute path of an executable of the Python virtualenv
/// `tests/peers/.venv/bin/NAME`, e.g. `venv_bin("mcp-server-time")`.
///
/// # Panics
/// If the executable is not installed.
pub fn venv_bin(name: &str) -> PathBuf {
    let path = peers_dir().join(".venv").join("bin").join(name);
    if !path.is_file() {
        missing(name, &path);
    }
    path
}

/// The virtualenv's Python interpreter; it can import the pinned `mcp`
/// Python SDK (2.x).
///
/// # Panics
/// If the virtualenv is not installed.
pub fn python() -> PathBuf {
    venv_bin("python")
}

/// The native Claude Code CLI (`@anthropic-ai/claude-code`).
///
/// # Panics
/// If Claude Code is not installed.
pub fn claude_bin() -> PathBuf {
    node_bin("claude")
}

/// A ready-to-spawn command line of a test peer: program, arguments and
/// extra environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCommand {
    /// Absolute path of the executable.
    pub program: PathBuf,
    /// Arguments after the program.
    pub args: Vec<String>,
    /// Extra environment variables the peer needs.
    pub env: Vec<(String, String)>,
}

impl PeerCommand {
    /// A `std::process::Command` for this peer (arguments and environment set,
    /// stdio left to the caller).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// The program as a UTF-8 string (for configs and `claude mcp add`).
    pub fn program_str(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }
}

/// `@modelcontextprotocol/server-everything` on stdio (tools `echo`,
/// `get-sum`, `get-structured-content`, `get-tiny-image`, …).
pub fn server_everything() -> PeerCommand {
    PeerCommand {
        program: node_bin("mcp-server-everything"),
        args: vec!["stdio".into()],
        env: Vec::new(),
    }
}

/// `@modelcontextprotocol/server-filesystem` allowed to access `root`
/// (tools `read_text_file`, `list_directory`, … — results carry
/// `structuredContent`).
pub fn server_filesystem(root: &Path) -> PeerCommand {
    PeerCommand {
        program: node_bin("mcp-server-filesystem"),
        args: vec![root.to_string_lossy().into_owned()],
        env: Vec::new(),
    }
}

/// `@modelcontextprotocol/server-memory` storing its knowledge graph in
/// `memory_file` (never in the shared package directory).
pub fn server_memory(memory_file: &Path) -> PeerCommand {
    PeerCommand {
        program: node_bin("mcp-server-memory"),
        args: Vec::new(),
        env: vec![(
            "MEMORY_FILE_PATH".into(),
            memory_file.to_string_lossy().into_owned(),
        )],
    }
}

/// PyPI `mcp-server-time` (tools `get_current_time`, `convert_time`).
pub fn server_time() -> PeerCommand {
    PeerCommand {
        program: venv_bin("mcp-server-time"),
        args: vec!["--local-timezone".into(), "UTC".into()],
        env: Vec::new(),
    }
}

/// PyPI `mcp-server-git` restricted to the repository at `repo`.
pub fn server_git(repo: &Path) -> PeerCommand {
    PeerCommand {
        program: venv_bin("mcp-server-git"),
        args: vec!["--repository".into(), repo.to_string_lossy().into_owned()],
        env: Vec::new(),
    }
}

/// Absolute path of `tests/conformance`: the official MCP conformance
/// suite and the Node 22 it needs, installed by `tests/peers/install.sh`,
/// beside devboy's conformance target server and client driver.
pub fn conformance_dir() -> PathBuf {
    workspace_root().join("tests").join("conformance")
}

/// Absolute path of `tests/conformance/node_modules/.bin/NAME`
/// (`conformance`, `node`).
///
/// # Panics
/// If the executable is not installed.
pub fn conformance_bin(name: &str) -> PathBuf {
    let path = conformance_dir()
        .join("node_modules")
        .join(".bin")
        .join(name);
    if !path.is_file() {
        missing(name, &path);
    }
    path
}
