//! Running the real Claude Code CLI offline, isolated in a temporary `HOME`.
//!
//! [`ClaudeCode::new`] creates a fresh temporary directory holding a `home/`
//! (used as `HOME`, so `~/.claude.json`, `~/.claude/` and `~/.config` are
//! private to the test) and a `project/` working directory. Every invocation
//! runs with a cleared environment plus:
//!
//! | variable | value | why |
//! |---|---|---|
//! | `HOME` | the temp home | isolation; no login, no user config |
//! | `XDG_CONFIG_HOME` | `HOME/.config` | isolates devboy's own config too |
//! | `PATH` | inherited | MCP servers may be scripts (`#!/usr/bin/env node`) |
//! | `ANTHROPIC_API_KEY` | `sk-ant-devboy-test` | API-key auth, no login prompt |
//! | `ANTHROPIC_BASE_URL` | the scripted model, else `http://127.0.0.1:9` | never reaches the real API |
//! | `ENABLE_TOOL_SEARCH` | `false` | MCP tools are listed up front, not deferred behind `ToolSearch` |
//! | `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` | `1` | no `HEAD /api/hello` probe, no update checks |
//! | `DISABLE_TELEMETRY`, `DISABLE_AUTOUPDATER`, `DISABLE_ERROR_REPORTING` | `1` | offline, quiet |
//!
//! and `~/.claude/settings.json` sets `enableAllProjectMcpServers: true`, so a
//! project-scoped `.mcp.json` is trusted without an interactive approval.
//! Servers are added with `claude mcp add -s user` (written to the temp
//! `~/.claude.json`; needs no approval).
//!
//! [`ClaudeCode::start_session`] runs one process for several user turns
//! (`/compact` included); see [`crate::claude_session`].
//!
//! `claude -p` is run with `--allowedTools` naming the MCP tools it may call
//! (`--dangerously-skip-permissions` is refused when running as root, and a
//! tool not allowed comes back to the model as an `is_error` tool result
//! "Claude requested permissions to use …").

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::claude_session::ClaudeSession;
use crate::peers;
use crate::scripted_model::ScriptedModel;

/// Default hard timeout of one `claude` invocation.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Base URL used when no scripted model is attached: a closed local port, so
/// nothing can ever reach the real API.
const NO_MODEL_URL: &str = "http://127.0.0.1:9";

/// Captured result of one `claude` invocation.
#[derive(Debug, Clone)]
pub struct ClaudeOutput {
    /// Exit status.
    pub status: ExitStatus,
    /// Everything written to stdout (lossy UTF-8).
    pub stdout: String,
    /// Everything written to stderr (lossy UTF-8).
    pub stderr: String,
}

impl ClaudeOutput {
    /// Whether the process exited with status 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Panics with stdout and stderr unless the process exited with status 0.
    pub fn assert_success(&self) -> &Self {
        assert!(self.success(), "claude failed: {self}");
        self
    }
}

impl std::fmt::Display for ClaudeOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// A Claude Code installation isolated in a temporary `HOME`; the directory
/// is removed when this value drops.
#[derive(Debug)]
pub struct ClaudeCode {
    root: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    base_url: String,
    env: Vec<(String, String)>,
    timeout: Duration,
}

impl ClaudeCode {
    /// A fresh temporary `HOME` and project directory, with no model attached
    /// (see [`ClaudeCode::model`]).
    ///
    /// # Panics
    /// If Claude Code is not installed (`tests/peers/install.sh`).
    pub fn new() -> anyhow::Result<Self> {
        peers::claude_bin();
        let root = tempfile::Builder::new()
            .prefix("devboy-claude-")
            .tempdir()
            .context("create temporary HOME")?;
        let home = root.path().join("home");
        let project = root.path().join("project");
        std::fs::create_dir_all(home.join(".claude"))?;
        std::fs::create_dir_all(home.join(".config"))?;
        std::fs::create_dir_all(&project)?;
        std::fs::write(
            home.join(".claude").join("settings.json"),
            serde_json::to_string_pretty(&serde_json::json!({
                "enableAllProjectMcpServers": true,
            }))?,
        )?;
        Ok(Self {
            root,
            home,
            project,
            base_url: NO_MODEL_URL.to_owned(),
            env: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// Points Claude Code at a scripted model (`ANTHROPIC_BASE_URL`).
    pub fn model(self, model: &ScriptedModel) -> Self {
        self.base_url(model.base_url())
    }

    /// Sets `ANTHROPIC_BASE_URL` explicitly.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// Uses `dir` as the working directory instead of the temporary
    /// `project/` (created if missing).
    pub fn project_dir(mut self, dir: impl Into<PathBuf>) -> anyhow::Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        self.project = dir.canonicalize()?;
        Ok(self)
    }

    /// Adds (or overrides) an environment variable for every invocation.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Sets the hard timeout of each invocation (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The temporary `HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The working directory Claude Code runs in.
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// A scratch directory inside the temporary root (for test files, configs),
    /// outside `HOME` and the project; created if missing.
    ///
    /// # Panics
    /// If the directory cannot be created.
    pub fn scratch_dir(&self) -> PathBuf {
        let dir = self.root.path().join("scratch");
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        dir
    }

    /// A `claude` command with the isolated environment and working
    /// directory set and stdin closed; add arguments and run it yourself.
    pub fn command(&self) -> Command {
        self.command_for(peers::claude_bin().as_os_str())
    }

    /// `bash -c SCRIPT` in the same environment as [`ClaudeCode::command`],
    /// with `claude` and every directory of `path` first on `PATH`: a
    /// user's shell, for running documented commands as written.
    pub fn shell(&self, script: &str, path: &[&Path]) -> Command {
        let claude_dir = peers::claude_bin()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let mut dirs: Vec<PathBuf> = path.iter().map(|p| p.to_path_buf()).collect();
        dirs.push(claude_dir);
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let mut cmd = self.command_for("bash".as_ref());
        cmd.arg("-c")
            .arg(script)
            .env("PATH", std::env::join_paths(dirs).unwrap_or_default());
        cmd
    }

    fn command_for(&self, program: &std::ffi::OsStr) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("ANTHROPIC_API_KEY", "sk-ant-devboy-test")
            .env("ANTHROPIC_BASE_URL", &self.base_url)
            .env("ENABLE_TOOL_SEARCH", "false")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .stdin(Stdio::null());
        if let Some(tmp) = std::env::var_os("TMPDIR") {
            cmd.env("TMPDIR", tmp);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `claude ARGS…` to completion under the hard timeout.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<ClaudeOutput> {
        let mut cmd = self.command();
        cmd.args(args);
        run_with_timeout(cmd, self.timeout).with_context(|| format!("claude {}", args.join(" ")))
    }

    /// `claude mcp add -s user NAME -- COMMAND ARGS…` (a stdio server).
    pub fn mcp_add(&self, name: &str, command: &str, args: &[&str]) -> anyhow::Result<()> {
        self.mcp_add_with_env(name, command, args, &[])
    }

    /// Like [`ClaudeCode::mcp_add`], with environment variables for the server
    /// (`-e KEY=VALUE`).
    pub fn mcp_add_with_env(
        &self,
        name: &str,
        command: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        let env_args: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut argv = vec!["mcp", "add", "-s", "user", name];
        for e in &env_args {
            argv.extend(["-e", e.as_str()]);
        }
        argv.push("--");
        argv.push(command);
        argv.extend_from_slice(args);
        let out = self.run(&argv)?;
        if !out.success() {
            bail!("claude mcp add {name} failed: {out}");
        }
        Ok(())
    }

    /// Registers a test peer (see [`crate::peers`]) as stdio server `name`,
    /// with its arguments and environment.
    pub fn mcp_add_peer(&self, name: &str, peer: &peers::PeerCommand) -> anyhow::Result<()> {
        let args: Vec<&str> = peer.args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = peer
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.mcp_add_with_env(name, &peer.program_str(), &args, &env)
    }

    /// Writes `PROJECT/.mcp.json` as `{"mcpServers": mcp_servers}` (the
    /// project scope; trusted without a prompt by the temp settings) and
    /// returns its path.
    pub fn write_project_mcp_json(
        &self,
        mcp_servers: &serde_json::Value,
    ) -> anyhow::Result<PathBuf> {
        let path = self.project.join(".mcp.json");
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&serde_json::json!({ "mcpServers": mcp_servers }))?,
        )?;
        Ok(path)
    }

    /// `claude mcp list`: connects to every configured server (no model
    /// involved) and returns stdout, one line per server such as
    /// `fs: /path/to/cmd args - ✔ Connected` (or `✗ Failed to connect`).
    pub fn mcp_list(&self) -> anyhow::Result<String> {
        let out = self.run(&["mcp", "list"])?;
        if !out.success() {
            bail!("claude mcp list failed: {out}");
        }
        Ok(out.stdout)
    }

    /// `claude -p PROMPT --allowedTools T1,T2…`: one non-interactive agent
    /// session against the configured model. Returns the captured output
    /// whatever the exit status; errors only when it could not be run or hit
    /// the timeout.
    pub fn run_print(&self, prompt: &str, allowed_tools: &[&str]) -> anyhow::Result<ClaudeOutput> {
        let allowed = allowed_tools.join(",");
        let mut args = vec!["-p", prompt];
        if !allowed_tools.is_empty() {
            args.extend(["--allowedTools", allowed.as_str()]);
        }
        self.run(&args)
    }

    /// Starts one Claude Code process that takes user turns one at a time
    /// (see [`ClaudeSession`]); it may call `allowed_tools` without asking.
    /// Each wait on the session is bounded by the timeout
    /// ([`ClaudeCode::timeout`]).
    pub fn start_session(&self, allowed_tools: &[&str]) -> anyhow::Result<ClaudeSession> {
        let mut cmd = self.command();
        cmd.args([
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-prompts",
            "none",
        ]);
        if !allowed_tools.is_empty() {
            cmd.args(["--allowedTools", &allowed_tools.join(",")]);
        }
        ClaudeSession::spawn(cmd, self.timeout).context("claude stream-json session")
    }

    /// Claude Code's session transcripts under the temporary `HOME`
    /// (`~/.claude/projects/<mangled project path>/…/*.jsonl`), sorted.
    pub fn session_logs(&self) -> Vec<PathBuf> {
        devboy_core::transcripts::files_under(&self.home.join(".claude").join("projects"))
    }
}

/// Runs `cmd` in its own process group with stdout/stderr captured; on
/// timeout kills the whole group (Claude Code and the MCP servers it spawned)
/// and fails with what was captured so far.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> anyhow::Result<ClaudeOutput> {
    use std::os::unix::process::CommandExt as _;
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("spawn {:?}", cmd.get_program()))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + timeout;
    let timed_out = loop {
        if exited_unreaped(child.id())? {
            break false;
        }
        if Instant::now() >= deadline {
            break true;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Kill the whole group while the leader is still unreaped (so the group
    // id cannot have been reused): on timeout that is Claude Code itself, and
    // in any case children left behind (e.g. MCP servers that outlived it)
    // would keep the pipes open and the readers waiting.
    kill_group(child.id());
    let status = child.wait()?;
    let output = ClaudeOutput {
        status,
        stdout: String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned(),
    };
    if timed_out {
        bail!("timed out after {timeout:?}: {output}");
    }
    Ok(output)
}

/// Sends SIGKILL to the process group led by `leader`, a child spawned with
/// `process_group(0)`. Call it only while the leader is unreaped, so that the
/// group id cannot have been reused.
pub(crate) fn kill_group(leader: u32) {
    // SAFETY: kill(2) with a negative pid only sends a signal; the group is
    // the one our unreaped child leads (see above).
    unsafe {
        libc::kill(-(leader as libc::pid_t), libc::SIGKILL);
    }
}

/// Whether process `pid` (our child) has exited, without reaping it.
pub(crate) fn exited_unreaped(pid: u32) -> std::io::Result<bool> {
    // SAFETY: an all-zero siginfo_t is a valid value; waitid(2) fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child with WNOWAIT leaves it waitable.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: si_pid is meaningful after a successful waitid (0 = no change).
    Ok(unsafe { info.si_pid() } != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_kills_the_process_group() {
        let start = Instant::now();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 30"]);
        let err = run_with_timeout(cmd, Duration::from_millis(300)).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(10));
        let msg = format!("{err:#}");
        assert!(msg.contains("timed out"), "{msg}");
        assert!(msg.contains("started"), "{msg}");
    }

    #[test]
    fn leftover_children_do_not_block_the_capture() {
        let start = Instant::now();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & echo out; echo err >&2; exit 3"]);
        let out = run_with_timeout(cmd, Duration::from_secs(20)).unwrap();
        assert!(start.elapsed() < Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
    }
}
