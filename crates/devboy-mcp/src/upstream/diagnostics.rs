//! What an upstream's process did, for people: the tail of its stderr,
//! how it exited, what it printed on stdout that is not JSON-RPC, and the
//! messages that say why an upstream is down.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncBufReadExt;

use super::Upstream;
use crate::sync::lock;

/// Lines of an upstream's stderr kept for error messages and status.
const STDERR_TAIL_LINES: usize = 12;
/// Longest stderr line kept, in bytes.
const STDERR_LINE_MAX: usize = 400;

impl Upstream {
    /// Process id of a stdio upstream's current child.
    pub fn pid(&self) -> Option<u32> {
        *lock(&self.pid)
    }

    /// The last lines the upstream wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        lock(&self.stderr_tail).iter().cloned().collect()
    }

    /// The first line the current stdio process wrote to stdout that is
    /// not JSON, if any (a server that breaks the protocol).
    pub fn stdout_noise(&self) -> Option<String> {
        let report = lock(&self.child_report).clone();
        let noise = lock(&report).stdout_noise.clone();
        noise
    }

    /// What the last stdio process did that explains a failure: how it
    /// exited, and what it printed on stdout that is not JSON-RPC.
    pub(super) fn process_facts(&self) -> Option<String> {
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

    pub(super) fn stderr_detail(&self) -> String {
        match lock(&self.stderr_tail).back() {
            Some(line) => format!("; stderr: {line}"),
            None => String::new(),
        }
    }
}

/// Keeps the last [`STDERR_TAIL_LINES`] non-empty lines of `stderr`, each
/// cut to [`STDERR_LINE_MAX`] bytes, in `tail` (and logs each at debug).
pub(super) async fn drain_stderr(
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
