//! devboy's own stdin and stdout, as its client connected them, read and
//! written without a blocked thread.
//!
//! rmcp's `stdio_pipes` makes pipes non-blocking and falls back to
//! Tokio's blocking stdio for anything else. Claude Code (Node) connects
//! a stdio server over Unix socket pairs, not pipes, so devboy would read
//! its client on a blocking-pool thread, stuck in `read` until the next
//! byte: a devboy asked to end by a signal then waits for that thread as
//! its runtime shuts down. A socket is made non-blocking here and read
//! through Tokio's reactor instead.

use tokio::io::{AsyncRead, AsyncWrite};

/// The client's end of the connection to read.
pub(crate) type ClientReader = Box<dyn AsyncRead + Send + Unpin>;
/// The client's end of the connection to write.
pub(crate) type ClientWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// devboy's stdin and stdout: Unix sockets through the reactor, pipes as
/// rmcp opens them, anything else (a terminal, a file) blocking.
///
/// Must be called inside a Tokio runtime with I/O enabled.
pub(crate) fn open() -> (ClientReader, ClientWriter) {
    #[cfg(unix)]
    if let Some((read, write)) = unix_sockets() {
        tracing::debug!("client stdio: Unix sockets, non-blocking");
        return (Box::new(read), Box::new(write));
    }
    let (read, write) = rmcp::transport::stdio_pipes();
    (Box::new(read), Box::new(write))
}

/// stdin and stdout as Tokio streams when both are Unix sockets.
///
/// The descriptors are duplicated, so `O_NONBLOCK` is set on the open file
/// descriptions devboy shares with nobody: the client holds the other end
/// of each socket pair, and devboy's upstreams get pipes of their own.
#[cfg(unix)]
fn unix_sockets() -> Option<(tokio::net::UnixStream, tokio::net::UnixStream)> {
    use std::os::fd::AsFd;
    let stream = |fd: std::os::fd::BorrowedFd<'_>| {
        let socket = std::os::unix::net::UnixStream::from(fd.try_clone_to_owned().ok()?);
        // Only a Unix socket has a Unix socket address (a pipe, a file or
        // a TCP socket fails here).
        socket.local_addr().ok()?;
        socket.set_nonblocking(true).ok()?;
        tokio::net::UnixStream::from_std(socket).ok()
    };
    let read = stream(std::io::stdin().as_fd())?;
    let write = stream(std::io::stdout().as_fd())?;
    Some((read, write))
}
