//! One Claude Code process driven turn by turn.
//!
//! `claude -p PROMPT` plays a single user turn, and `--continue` starts a new
//! process, with new MCP servers. To put several user turns into one process
//! (and so into one life of each MCP server it started), [`ClaudeSession`]
//! runs Claude Code in its streaming mode:
//!
//! ```text
//! claude -p --input-format stream-json --output-format stream-json --verbose
//! ```
//!
//! It reads one JSON user message per line on stdin
//! (`{"type":"user","message":{"role":"user","content":"…"}}`), writes one
//! JSON event per line on stdout (`system`, `assistant`, `user`, …), keeps
//! the conversation between messages, and exits when stdin closes. Every user
//! message ends with exactly one `{"type":"result",…}` event, slash commands
//! included: in this mode Claude Code 2.1.x runs a message `/compact` as the
//! command. It runs the `PreCompact` hook, asks the model for a summary (see
//! [`crate::scripted_model`]), runs the `SessionStart` hook with source
//! `compact`, emits a `compact_boundary` event, and the next message starts
//! from the summary. With a scripted model all of that takes well under a
//! second, so a test that needs something to follow a hook (devboy polls a
//! file) must wait for it itself before the next turn.
//!
//! Permission prompts would go to the host over the same stdin, which the
//! session does not answer, so it passes `--permission-prompts none`: as with
//! `claude -p`, a tool not allowed comes back to the model as an error
//! result instead of hanging the session.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

use crate::claude::{exited_unreaped, kill_group, ClaudeOutput};

/// How long to wait for the last stdout lines once the process is gone.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// A running `claude` in streaming mode (see the module docs); started by
/// [`ClaudeCode::start_session`](crate::ClaudeCode::start_session). Its
/// process group (Claude Code and the MCP servers it started) is killed when
/// the session drops without [`finish`](Self::finish).
#[derive(Debug)]
pub struct ClaudeSession {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr_reader: Option<JoinHandle<Vec<u8>>>,
    stdout: String,
    stderr: String,
    events: Vec<Value>,
    timeout: Duration,
    status: Option<ExitStatus>,
}

impl ClaudeSession {
    /// Spawns `cmd` (a `claude` command with the streaming flags) in its own
    /// process group; `timeout` bounds each wait.
    pub(crate) fn spawn(mut cmd: Command, timeout: Duration) -> anyhow::Result<Self> {
        use std::os::unix::process::CommandExt as _;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("spawn {:?}", cmd.get_program()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("piped stdout")?;
        let mut stderr = child.stderr.take().context("piped stderr")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            buf
        });
        Ok(Self {
            child,
            stdin,
            lines,
            stderr_reader: Some(stderr_reader),
            stdout: String::new(),
            stderr: String::new(),
            events: Vec::new(),
            timeout,
            status: None,
        })
    }

    /// Sends one user message (a prompt, or a slash command such as
    /// `/compact`) without waiting for its answer.
    pub fn send(&mut self, text: &str) -> anyhow::Result<()> {
        let message = json!({"type": "user", "message": {"role": "user", "content": text}});
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        writeln!(stdin, "{message}")
            .and_then(|()| stdin.flush())
            .context("write a user message to claude")
    }

    /// Sends one user message and waits for the `result` event that ends
    /// it; returns that event.
    pub fn turn(&mut self, text: &str) -> anyhow::Result<Value> {
        self.send(text)?;
        self.wait_result()
            .with_context(|| format!("user turn {text:?}"))
    }

    /// Waits for the next `result` event (at most the timeout) and returns
    /// it. If Claude Code exits or the time runs out first, the session is
    /// stopped and the error carries everything it printed.
    pub fn wait_result(&mut self) -> anyhow::Result<Value> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(result) = self.record(line) {
                        return Ok(result);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let output = self.stop();
                    bail!("no result event within {:?}: {output}", self.timeout);
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let output = self.stop();
                    bail!("claude closed stdout before the turn ended: {output}");
                }
            }
        }
    }

    /// Every stdout event so far, in order (a line that is not JSON is kept
    /// as a JSON string).
    pub fn events(&self) -> &[Value] {
        &self.events
    }

    /// Closes stdin, which ends the session, and waits (at most the timeout)
    /// for Claude Code to exit. Returns everything it printed, whatever the
    /// exit status; errors only on timeout.
    pub fn finish(mut self) -> anyhow::Result<ClaudeOutput> {
        drop(self.stdin.take());
        let deadline = Instant::now() + self.timeout;
        let timed_out = loop {
            if exited_unreaped(self.child.id())? {
                break false;
            }
            if Instant::now() >= deadline {
                break true;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let output = self.stop();
        if timed_out {
            bail!("claude did not exit within {:?}: {output}", self.timeout);
        }
        Ok(output)
    }

    /// Records one stdout line; returns it when it is a `result` event.
    fn record(&mut self, line: String) -> Option<Value> {
        self.stdout.push_str(&line);
        self.stdout.push('\n');
        let event = serde_json::from_str(&line).unwrap_or(Value::String(line));
        self.events.push(event.clone());
        (event.get("type").and_then(Value::as_str) == Some("result")).then_some(event)
    }

    /// Kills the process group (while the leader is unreaped, so the group
    /// id cannot have been reused), reaps Claude Code, and collects what it
    /// printed. Safe to call more than once.
    fn stop(&mut self) -> ClaudeOutput {
        drop(self.stdin.take());
        if self.status.is_none() {
            kill_group(self.child.id());
            self.status = self.child.wait().ok();
        }
        while let Ok(line) = self.lines.recv_timeout(DRAIN_WAIT) {
            self.record(line);
        }
        if let Some(reader) = self.stderr_reader.take() {
            self.stderr = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
        }
        ClaudeOutput {
            status: self
                .status
                .unwrap_or_else(|| std::os::unix::process::ExitStatusExt::from_raw(-1)),
            stdout: self.stdout.clone(),
            stderr: self.stderr.clone(),
        }
    }
}

impl Drop for ClaudeSession {
    fn drop(&mut self) {
        if self.status.is_none() {
            kill_group(self.child.id());
            let _ = self.child.wait();
        }
    }
}
