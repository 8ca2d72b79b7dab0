//! Interactive Claude Code in a terminal: the mode people use, which
//! differs from print mode (`-p`, [`crate::claude_session`]) in ways that matter
//! to an MCP server. Claude Code 2.1.330, for one, runs the tools of a
//! server announced late by `list_changed` only in this mode.
//!
//! [`TerminalSession`] starts `claude` inside a private tmux server (its
//! own socket, so nothing of the user's tmux is touched), types lines into
//! it and reads the screen. The temporary `HOME` is first marked as past
//! the first-run screens (onboarding, the API key question, the folder
//! trust question), as they would be for a user on their second day.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

use crate::claude::ClaudeCode;
use crate::scripted_model::{ScriptedModel, ToolResultSeen};

/// One interactive Claude Code process in a detached tmux session; killed
/// on drop.
pub struct TerminalSession {
    socket: String,
}

impl TerminalSession {
    /// Starts `claude ARGS…` as [`ClaudeCode::command`] would run it, in a
    /// 200×50 terminal, and waits (up to 60 s) for its input prompt.
    pub fn start(claude: &ClaudeCode, args: &[&str]) -> anyhow::Result<Self> {
        skip_first_run_screens(claude)?;
        static N: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "devboy-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let template = claude.command();
        let mut tmux = Command::new("tmux");
        tmux.env_clear();
        for (key, value) in template.get_envs() {
            if let Some(value) = value {
                tmux.env(key, value);
            }
        }
        tmux.env("TERM", "xterm-256color");
        let mut line = shell_quote(&template.get_program().to_string_lossy());
        for arg in args {
            line.push(' ');
            line.push_str(&shell_quote(arg));
        }
        let status = tmux
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                "claude",
                "-x",
                "200",
                "-y",
                "50",
                "-c",
            ])
            .arg(claude.project())
            .arg(line)
            .status()
            .context("run tmux (tests/peers/install.sh installs it)")?;
        if !status.success() {
            bail!("tmux new-session failed: {status}");
        }
        let session = Self { socket };
        session.wait_for_screen("the input prompt", Duration::from_secs(60), |s| {
            s.contains('❯')
        })?;
        Ok(session)
    }

    /// What the terminal shows now.
    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "claude"])
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Whether Claude Code still runs (its tmux session ends with it).
    pub fn running(&self) -> bool {
        self.tmux(&["has-session", "-t", "claude"])
            .is_ok_and(|out| out.status.success())
    }

    /// Types `text` and presses Enter.
    pub fn type_line(&self, text: &str) -> anyhow::Result<()> {
        let out = self.tmux(&["send-keys", "-t", "claude", "-l", text])?;
        if !out.status.success() {
            bail!("tmux send-keys failed");
        }
        self.tmux(&["send-keys", "-t", "claude", "Enter"])?;
        Ok(())
    }

    /// Waits until `done()` holds, polling every 200 ms; on timeout the
    /// error carries the screen.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn() -> bool,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while !done() {
            if Instant::now() >= deadline {
                bail!(
                    "waited {timeout:?} for {what}; the screen:\n{}",
                    self.screen()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Types `prompt` and waits (up to 60 s) until the model has been
    /// sent it.
    pub fn ask(&self, model: &ScriptedModel, prompt: &str) -> anyhow::Result<()> {
        self.type_line(prompt)?;
        self.wait_until(
            "the prompt to reach the model",
            Duration::from_secs(60),
            || {
                model
                    .main_requests()
                    .iter()
                    .any(|r| r["messages"].to_string().contains(prompt))
            },
        )
    }

    /// Waits (up to 60 s) until the model has been shown a tool result;
    /// returns them all.
    pub fn tool_results(&self, model: &ScriptedModel) -> anyhow::Result<Vec<ToolResultSeen>> {
        self.wait_until("a tool result", Duration::from_secs(60), || {
            !model.tool_results().is_empty()
        })?;
        Ok(model.tool_results())
    }

    fn wait_for_screen(
        &self,
        what: &str,
        timeout: Duration,
        shows: impl Fn(&str) -> bool,
    ) -> anyhow::Result<()> {
        self.wait_until(what, timeout, || shows(&self.screen()))
    }

    fn tmux(&self, args: &[&str]) -> anyhow::Result<std::process::Output> {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .context("run tmux")
    }
}

impl Drop for TerminalSession {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// Records in `~/.claude.json` what a user answers once: onboarding done,
/// the test API key approved, the project folder trusted.
fn skip_first_run_screens(claude: &ClaudeCode) -> anyhow::Result<()> {
    let path = claude.home().join(".claude.json");
    let mut state: Value = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).context("~/.claude.json")?,
        Err(_) => json!({}),
    };
    let key = claude
        .command()
        .get_envs()
        .find(|(k, _)| *k == "ANTHROPIC_API_KEY")
        .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
        .unwrap_or_default();
    // Claude Code remembers an approved key by its last 20 characters.
    let tail: String = key
        .chars()
        .rev()
        .take(20)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    state["hasCompletedOnboarding"] = json!(true);
    state["customApiKeyResponses"] = json!({"approved": [tail], "rejected": []});
    let project = claude.project().to_string_lossy().into_owned();
    state["projects"][project.as_str()]["hasTrustDialogAccepted"] = json!(true);
    std::fs::write(&path, serde_json::to_string_pretty(&state)?)?;
    Ok(())
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
