//! A stdio upstream's process as an rmcp transport, framed by [`crate::wire`].
//!
//! rmcp's `TokioChildProcess` fixes its framing to rmcp's own (16 MiB per
//! line, oversized lines dropped silently), so devboy spawns the process
//! itself and keeps rmcp's shutdown sequence: close stdin, wait, SIGTERM
//! the process group, wait, kill.

use std::io;
use std::process::Stdio;
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::process::{ChildStderr, ChildStdout};

use crate::wire::{LineTransport, MAX_MESSAGE_BYTES};

/// How long each shutdown step waits for the process to exit.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// A running upstream process and the JSON-RPC connection over its stdio.
pub struct ChildTransport {
    child: Option<Box<dyn ChildWrapper>>,
    wire: LineTransport<RoleClient, ChildStdout>,
}

impl ChildTransport {
    /// Spawns `command` with piped stdin, stdout and stderr; `upstream`
    /// names it in messages. Returns the stderr for the caller to drain.
    pub fn spawn(
        mut command: CommandWrap,
        upstream: &str,
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
            stdout,
            stdin,
            MAX_MESSAGE_BYTES,
            format!("upstream `{upstream}`"),
        );
        Ok((
            Self {
                child: Some(child),
                wire,
            },
            stderr,
        ))
    }

    /// The process id, while the process runs.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    async fn shutdown(&mut self) -> io::Result<()> {
        // Closing stdin is the MCP way to ask a stdio server to exit.
        self.wire.close().await?;
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if exited(child).await {
            self.child = None;
            return Ok(());
        }
        #[cfg(unix)]
        if child.signal(libc::SIGTERM).is_ok() && exited(child).await {
            self.child = None;
            return Ok(());
        }
        let killed = Box::into_pin(child.kill()).await;
        self.child = None;
        killed
    }
}

/// Whether the child exits within [`EXIT_WAIT`].
async fn exited(child: &mut Box<dyn ChildWrapper>) -> bool {
    matches!(
        tokio::time::timeout(EXIT_WAIT, child.wait()).await,
        Ok(Ok(_))
    )
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        // Not shut down in order: kill the group and reap it.
        if let Some(mut child) = self.child.take() {
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

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.wire.receive()
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}
