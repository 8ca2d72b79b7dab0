//! A stdio upstream's process as an rmcp transport, framed by [`crate::wire`].
//!
//! rmcp's `TokioChildProcess` fixes its framing to rmcp's own (16 MiB per
//! line, oversized lines dropped silently), so devboy spawns the process
//! itself and keeps rmcp's shutdown sequence: close stdin, wait, SIGTERM
//! the process group, wait, kill. How long it waits depends on why the
//! server stops ([`StopWaits`]).

use std::io;
use std::process::Stdio;
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::process::{ChildStderr, ChildStdout};
use tokio_util::sync::CancellationToken;

use crate::wire::{LineTransport, MAX_MESSAGE_BYTES};

/// How long a stop waits for the process to exit: after its stdin
/// closed, then after SIGTERM to its process group, before the group is
/// killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StopWaits {
    after_close: Duration,
    after_term: Duration,
}

/// The server alone stops (a restart, turned off at runtime, gone from
/// the config): it has time to exit by itself.
const ALONE: StopWaits = StopWaits {
    after_close: Duration::from_secs(3),
    after_term: Duration::from_secs(3),
};

/// devboy itself is ending, and its client will not wait: Claude Code
/// sends SIGINT, SIGTERM 100 ms later and SIGKILL 400 ms after that, and a
/// devboy killed leaves its servers behind. Python servers take 0.4–0.5 s
/// to exit once their stdin closes, so each gets SIGTERM after 50 ms.
const DEVBOY_ENDING: StopWaits = StopWaits {
    after_close: Duration::from_millis(50),
    after_term: Duration::from_millis(100),
};

/// Bytes of a non-JSON stdout line kept for the error message.
const NOISE_KEPT: usize = 80;

/// What the process did that explains a failure: for people, in
/// `last_error`, instead of "connection closed".
#[derive(Debug, Default, Clone)]
pub(crate) struct ChildReport {
    /// The first line it wrote to stdout that is not JSON (MCP servers may
    /// write only JSON-RPC there), cut to [`NOISE_KEPT`] bytes.
    pub stdout_noise: Option<String>,
    /// How it exited, once its stdout closed and it was reaped.
    pub exit: Option<std::process::ExitStatus>,
    /// It has written something to stdout (a package runner that has not
    /// may still be installing).
    pub spoke: bool,
}

/// Shared between a transport and the upstream that reports on it.
pub(crate) type SharedReport = std::sync::Arc<std::sync::Mutex<ChildReport>>;

/// A running upstream process and the JSON-RPC connection over its stdio.
pub(crate) struct ChildTransport {
    child: Option<Box<dyn ChildWrapper>>,
    wire: LineTransport<RoleClient, NoiseWatch<ChildStdout>>,
    report: SharedReport,
    /// Started through a package runner (`npx -y`, `uvx`, …).
    runner: bool,
    /// Cancelled once devboy is ending: a stop then waits [`DEVBOY_ENDING`].
    devboy_ending: CancellationToken,
}

impl ChildTransport {
    /// Spawns `command` with piped stdin, stdout and stderr; `upstream`
    /// names it in messages; `runner`: it is a package runner (see
    /// [`ChildTransport::spare`]); `devboy_ending` is cancelled when devboy
    /// ends, which shortens the stop. Returns the stderr for the caller to
    /// drain.
    pub(crate) fn spawn(
        mut command: CommandWrap,
        upstream: &str,
        report: SharedReport,
        runner: bool,
        devboy_ending: CancellationToken,
    ) -> io::Result<(Self, Option<ChildStderr>)> {
        command
            .command_mut()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn()?;
        let stdin = child
            .stdin()
            .take()
            .ok_or_else(|| io::Error::other("the child's stdin is not piped"))?;
        let stdout = child
            .stdout()
            .take()
            .ok_or_else(|| io::Error::other("the child's stdout is not piped"))?;
        let stderr = child.stderr().take();
        let wire = LineTransport::new(
            NoiseWatch::new(stdout, report.clone()),
            stdin,
            MAX_MESSAGE_BYTES,
            format!("upstream `{upstream}`"),
        );
        Ok((
            Self {
                child: Some(child),
                wire,
                report,
                runner,
                devboy_ending,
            },
            stderr,
        ))
    }

    /// After stdout closed: reaps the process if it exits soon, so the
    /// report can say how it ended.
    async fn record_exit(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if let Ok(Ok(status)) = tokio::time::timeout(Duration::from_millis(500), child.wait()).await
        {
            crate::sync::lock(&self.report).exit = Some(status);
            // Reaped: its pid may be reused, so nothing may signal it now.
            self.child = None;
        }
    }

    /// The process id, while the process runs.
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    /// A package runner that has not said a word yet may be halfway
    /// through installing its package, and one stopped there leaves an
    /// install that fails every later start (npx: `ERR_MODULE_NOT_FOUND`),
    /// which a client that starts devboy briefly (`claude mcp list`, a
    /// short `claude -p`) causes on a first run. Such a process is left to
    /// finish: with its stdin closed, the server it then starts reads end
    /// of input and exits by itself. Returns whether it was spared.
    fn spare(&mut self) -> bool {
        if !self.runner || crate::sync::lock(&self.report).spoke {
            return false;
        }
        match self.child.take() {
            Some(child) => {
                // Neither killed nor waited for: it outlives this transport.
                std::mem::forget(child);
                true
            }
            None => false,
        }
    }

    async fn shutdown(&mut self) -> io::Result<()> {
        // Closing stdin is the MCP way to ask a stdio server to exit.
        self.wire.close().await?;
        if self.spare() {
            return Ok(());
        }
        let waits = if self.devboy_ending.is_cancelled() {
            DEVBOY_ENDING
        } else {
            ALONE
        };
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if exited(child, waits.after_close).await {
            self.child = None;
            return Ok(());
        }
        #[cfg(unix)]
        if child.signal(libc::SIGTERM).is_ok() && exited(child, waits.after_term).await {
            self.child = None;
            return Ok(());
        }
        let killed = Box::into_pin(child.kill()).await;
        self.child = None;
        killed
    }
}

/// Whether the child exits within `wait`.
async fn exited(child: &mut Box<dyn ChildWrapper>, wait: Duration) -> bool {
    matches!(tokio::time::timeout(wait, child.wait()).await, Ok(Ok(_)))
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        // Not shut down in order: kill the group and reap it. A process
        // that already exited (the usual reason to get here) leaves its
        // status for the report first; a runner still installing is
        // spared (its stdin closes as the wire drops).
        if self.spare() {
            return;
        }
        if let Some(mut child) = self.child.take() {
            if let Ok(Some(status)) = child.try_wait() {
                crate::sync::lock(&self.report).exit = Some(status);
                return;
            }
            let _ = child.start_kill();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = child.wait().await;
                });
            }
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.wire.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.wire.receive().await;
        if message.is_none() {
            self.record_exit().await;
        }
        message
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}

/// Reads through to `inner`, noting the first line that does not start
/// with `{` (after blanks): a server that prints a banner or a log line on
/// stdout breaks the protocol, and saying so beats "did not answer".
pub(crate) struct NoiseWatch<R> {
    inner: R,
    report: SharedReport,
    /// At the start of a line (nothing but blanks seen on it yet).
    line_start: bool,
    /// Capturing the current line as noise.
    capturing: Option<Vec<u8>>,
    done: bool,
    /// Anything was read (noted in the report once).
    spoke: bool,
}

impl<R> NoiseWatch<R> {
    fn new(inner: R, report: SharedReport) -> Self {
        Self {
            inner,
            report,
            line_start: true,
            capturing: None,
            done: false,
            spoke: false,
        }
    }

    /// Looks at the next bytes the upstream wrote: the first line that
    /// does not start (after blanks) with `{` is kept, cut to
    /// [`NOISE_KEPT`] bytes. It reads only the start of each line; the rest
    /// of a line is skipped to its newline with `memchr`, so a large
    /// result costs a scan, not a copy and a loop over every byte.
    fn watch(&mut self, mut bytes: &[u8]) {
        while !self.done && !bytes.is_empty() {
            if let Some(kept) = &mut self.capturing {
                let room = NOISE_KEPT.saturating_sub(kept.len());
                let end = memchr::memchr(b'\n', &bytes[..bytes.len().min(room + 1)]);
                let take = end.unwrap_or(bytes.len().min(room));
                kept.extend_from_slice(&bytes[..take]);
                // A newline ends the line; a byte past the room cuts it.
                if end.is_some() || bytes.len() > take {
                    let text = String::from_utf8_lossy(kept).trim_end().to_owned();
                    crate::sync::lock(&self.report).stdout_noise = Some(text);
                    self.done = true;
                }
                return;
            }
            if self.line_start {
                let byte = bytes[0];
                bytes = &bytes[1..];
                match byte {
                    b'\n' | b' ' | b'\t' | b'\r' => {}
                    b'{' => self.line_start = false,
                    _ => {
                        self.line_start = false;
                        self.capturing = Some(vec![byte]);
                    }
                }
                continue;
            }
            match memchr::memchr(b'\n', bytes) {
                Some(at) => {
                    self.line_start = true;
                    bytes = &bytes[at + 1..];
                }
                None => return,
            }
        }
    }
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for NoiseWatch<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before && !self.spoke {
            self.spoke = true;
            crate::sync::lock(&self.report).spoke = true;
        }
        if !self.done {
            let this = &mut *self;
            this.watch(&buf.filled()[before..]);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(chunks: &[&str]) -> Option<String> {
        let report = SharedReport::default();
        let mut watch = NoiseWatch::new(tokio::io::empty(), report.clone());
        for chunk in chunks {
            watch.watch(chunk.as_bytes());
        }
        let noise = crate::sync::lock(&report).stdout_noise.clone();
        noise
    }

    #[test]
    fn the_first_non_json_line_is_noted_across_reads() {
        assert_eq!(noise(&["{\"a\":1}\n", "  {\"b\":2}\n"]), None);
        assert_eq!(
            noise(&["{\"a\":1}\nServer listen", "ing on stdio\n{}\nmore\n"]),
            Some("Server listening on stdio".to_owned())
        );
        let long = "x".repeat(200);
        assert_eq!(noise(&[&long]), Some("x".repeat(NOISE_KEPT)));
        // A JSON line cut across reads is skipped whole; what follows it counts.
        assert_eq!(
            noise(&["{\"a\":", "\"b\"}\n  {", "}\nlate ", "noise\n"]),
            Some("late noise".to_owned())
        );
        assert_eq!(
            noise(&["{\"a\":\"\nafter a raw newline\"}\n"]),
            Some("after a raw newline\"}".to_owned())
        );
        // Exactly the kept length, then a newline or one byte more, in
        // another read; and a line still open at the end of what was read.
        let kept = "y".repeat(NOISE_KEPT);
        assert_eq!(noise(&[&kept, "\n"]), Some(kept.clone()));
        assert_eq!(noise(&[&kept, "z"]), Some(kept.clone()));
        assert_eq!(noise(&[&kept]), None);
    }
}
