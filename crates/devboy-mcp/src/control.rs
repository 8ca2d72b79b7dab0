//! The control socket: how `devboy ctl` and `devboy status` reach a running
//! devboy from any terminal.
//!
//! Each serving devboy (stdio or HTTP) listens on a Unix socket
//! `<runtime dir>/ctl/<pid>.sock`, in a directory only its user may enter
//! (0700) and itself readable and writable by that user only (0600): the
//! user's own permissions are the authentication. One request per
//! connection, one JSON line each way: `{"action":"status"}`, or
//! `{"action":"restart"|"enable"|"disable"|"list","server":NAME}`. The socket
//! is removed when devboy ends; one whose process is gone is skipped (and
//! removed) by the readers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::builtin::{control_of, upstreams_report};
use crate::proxy::Proxy;

/// The directory of the control sockets of this user's devboy processes.
pub fn socket_dir(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("ctl")
}

/// What a process says of its sessions, for `devboy status`.
pub type SessionsReport = Arc<dyn Fn() -> Value + Send + Sync>;

/// A listening control socket; removed when dropped.
pub struct ControlSocket {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Listens on this process's control socket under `runtime_dir`, serving
/// `proxy`; `kind` (`stdio`, `http …`) and `sessions` describe the process
/// for `devboy status`. `None` (with a warning) when the socket cannot be
/// made: the control channel is a convenience, never a reason not to serve.
#[cfg(unix)]
pub fn listen(
    runtime_dir: &Path,
    proxy: Arc<Proxy>,
    kind: String,
    sessions: SessionsReport,
) -> Option<ControlSocket> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = socket_dir(runtime_dir);
    let made = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)));
    if let Err(error) = made {
        tracing::warn!(dir = %dir.display(), %error, "no control socket: devboy ctl and devboy status cannot reach this devboy");
        return None;
    }
    let path = dir.join(format!("{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = match tokio::net::UnixListener::bind(&path) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::warn!(socket = %path.display(), %error, "no control socket: devboy ctl and devboy status cannot reach this devboy");
            return None;
        }
    };
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    let config = proxy.config_label().to_owned();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (proxy, kind, sessions, config) = (
                proxy.clone(),
                kind.clone(),
                sessions.clone(),
                config.clone(),
            );
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                let mut reader = BufReader::new(read).take(64 * 1024);
                if reader.read_line(&mut line).await.is_err() {
                    return;
                }
                let answer = answer(&proxy, &kind, &config, &sessions, &line).await;
                let _ = write.write_all(format!("{answer}\n").as_bytes()).await;
                let _ = write.shutdown().await;
            });
        }
    });
    tracing::debug!(socket = %path.display(), "control socket listening");
    Some(ControlSocket { path, task })
}

/// Without Unix sockets there is no control channel.
#[cfg(not(unix))]
pub fn listen(
    _runtime_dir: &Path,
    _proxy: Arc<Proxy>,
    _kind: String,
    _sessions: SessionsReport,
) -> Option<ControlSocket> {
    None
}

/// The answer to one request line.
async fn answer(
    proxy: &Proxy,
    kind: &str,
    config: &str,
    sessions: &SessionsReport,
    line: &str,
) -> Value {
    let request: Value = match serde_json::from_str(line.trim()) {
        Ok(v) => v,
        Err(error) => return json!({"error": format!("not a JSON request: {error}")}),
    };
    let action = request["action"].as_str().unwrap_or("status");
    if action == "status" {
        return json!({
            "pid": std::process::id(),
            "devboy": env!("CARGO_PKG_VERSION"),
            "serving": kind,
            "config": config,
            "config_problem": proxy.config_problem(),
            "uptime_s": proxy.uptime().as_secs(),
            "upstreams": upstreams_report(proxy),
            "sessions": session_figures(sessions).await,
        });
    }
    match control_of(action) {
        Ok(None) => json!({"upstreams": upstreams_report(proxy)}),
        Ok(Some(control)) => {
            let Some(server) = request["server"].as_str() else {
                return json!({"error": format!("`{action}` needs a server's name")});
            };
            match proxy.control(server, control).await {
                Ok(phase) => json!({
                    "server": server,
                    "state": phase.label(),
                    "upstreams": upstreams_report(proxy),
                }),
                Err(message) => json!({"error": message}),
            }
        }
        Err(message) => json!({"error": message}),
    }
}

/// The sessions' figures, off the async workers and briefly: a session
/// busy with a large result says so rather than holding the answer.
async fn session_figures(sessions: &SessionsReport) -> Value {
    let sessions = sessions.clone();
    match tokio::time::timeout(
        std::time::Duration::from_millis(500),
        tokio::task::spawn_blocking(move || sessions()),
    )
    .await
    {
        Ok(Ok(figures)) => figures,
        _ => json!({"busy": "a result is being processed; ask again"}),
    }
}

/// The control sockets of this user's running devboy processes, by pid;
/// sockets left by processes that are gone are removed.
pub fn running(runtime_dir: &Path) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(socket_dir(runtime_dir)) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let path = e.path();
            let pid: u32 = path.file_stem()?.to_str()?.parse().ok()?;
            if alive(pid) {
                Some((pid, path))
            } else {
                let _ = std::fs::remove_file(&path);
                None
            }
        })
        .collect();
    out.sort();
    out
}

fn alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        // Signal 0: whether the process exists (EPERM: it does, another user's).
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: kill with signal 0 sends nothing; it only checks.
        let result = unsafe { libc::kill(pid, 0) };
        result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// Sends one request to the devboy listening on `socket`; its answer.
pub async fn request(socket: &Path, request: &Value) -> std::io::Result<Value> {
    #[cfg(unix)]
    {
        let stream = tokio::net::UnixStream::connect(socket).await?;
        let (read, mut write) = stream.into_split();
        write.write_all(format!("{request}\n").as_bytes()).await?;
        let mut line = String::new();
        BufReader::new(read).read_line(&mut line).await?;
        serde_json::from_str(line.trim())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }
    #[cfg(not(unix))]
    {
        let _ = (socket, request);
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "no control sockets on this platform",
        ))
    }
}
