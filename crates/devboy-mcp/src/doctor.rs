//! `devboy doctor`'s live checks: start the configured upstreams the way
//! `devboy mcp` does and report how each one came up (keeping each
//! listing, so the next `devboy mcp` lists every tool at once), and start an MCP
//! server command the way Claude Code does and time its `initialize` and
//! `tools/list`. No MCP client is needed to see what is wrong.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use devboy_core::config::ProxyConfig;
use rmcp::ServiceExt;

use crate::proxy::{Proxy, ProxyOptions};
use crate::sync::lock;
use crate::upstream::Phase;

/// How one upstream came up.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UpstreamCheck {
    /// The server's key in the config.
    pub name: String,
    /// Its tools' prefix.
    pub prefix: String,
    /// `stdio`, `http`, or why it is unusable (`invalid`, `sse`).
    pub transport: String,
    /// As in `devboy_status`: `ready`, `failed`, `restarting`, `starting`
    /// (still, when the wait ran out), `disabled`.
    pub state: String,
    /// Tools it exposes (after allow/deny).
    pub tools: usize,
    /// Where those tools come from: `live`, `cached` (an earlier run's
    /// listing; the server did not list this time) or `none`.
    pub listing: &'static str,
    /// What went wrong, for people.
    pub error: Option<String>,
    /// The last lines it wrote to stderr, when it failed.
    pub stderr_tail: Vec<String>,
    /// How long it took to become ready.
    pub ready_ms: Option<u64>,
}

/// Starts every upstream of `config`, waits until each is ready or has
/// failed at least once (or `wait` is over), reports them and stops them.
/// Each listing is kept in `listing_cache` when given, as `devboy mcp`
/// keeps it. Must be called inside a tokio runtime.
pub async fn check_upstreams(
    config: &ProxyConfig,
    wait: Duration,
    listing_cache: Option<PathBuf>,
) -> Vec<UpstreamCheck> {
    crate::install_tls_provider();
    let started = Instant::now();
    let options = ProxyOptions {
        listing_cache,
        ..ProxyOptions::default()
    };
    let proxy = Proxy::start(config, options);
    let mut ready_ms: Vec<Option<u64>> = vec![None; proxy.upstreams().len()];
    let deadline = started + wait;
    loop {
        let mut settled = true;
        for (index, upstream) in proxy.upstreams().iter().enumerate() {
            if upstream.phase() == Phase::Ready {
                ready_ms[index].get_or_insert(started.elapsed().as_millis() as u64);
            }
            settled &= !upstream.on_first_start();
        }
        if settled || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let catalog = proxy.catalog();
    let checks = proxy
        .upstreams()
        .iter()
        .enumerate()
        .map(|(index, upstream)| {
            let config = upstream.config();
            let phase = upstream.phase();
            let failed = matches!(phase, Phase::Failed { .. } | Phase::Starting)
                && upstream.down_for().is_some();
            UpstreamCheck {
                name: config.name.clone(),
                prefix: config.prefix.clone(),
                transport: config.transport.kind().to_owned(),
                state: upstream.state_label().to_owned(),
                tools: catalog.tools_of(index),
                listing: upstream.listing_source().label(),
                error: match &phase {
                    Phase::Failed { error, .. } => Some(error.clone()),
                    _ if failed => lock(&upstream.stats.last_error).clone(),
                    _ => None,
                },
                stderr_tail: if failed {
                    upstream.stderr_tail()
                } else {
                    Vec::new()
                },
                ready_ms: ready_ms[index],
            }
        })
        .collect();
    proxy.shutdown().await;
    checks
}

/// An MCP server command as a client would start it.
#[derive(Debug, Clone)]
pub struct ServerCommand {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to the inherited environment.
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
}

/// What starting a server command showed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerProbe {
    /// From spawn to the `initialize` answer.
    pub initialize_ms: u64,
    /// From spawn to the first `tools/list` answer.
    pub tools_list_ms: u64,
    /// Tools in that first answer.
    pub tools: usize,
    /// The server's name and version, from `initialize`.
    pub server: String,
}

/// Starts `server`, initializes it and lists its tools once, each within
/// `limit` (Claude Code's is 5 s for `tools/list`), then stops it.
pub async fn probe_server(server: &ServerCommand, limit: Duration) -> Result<ServerProbe, String> {
    let mut cmd = tokio::process::Command::new(&server.command);
    cmd.args(&server.args).envs(&server.env);
    if let Some(cwd) = &server.cwd {
        cmd.current_dir(cwd);
    }
    let started = Instant::now();
    let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("`{}` was not found on PATH", server.command)
            }
            _ => format!("`{}` could not be started: {e}", server.command),
        })?;
    // What the server says on stderr, for when it fails.
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    if let Some(stderr) = stderr {
        let said = said.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if !line.trim().is_empty() {
                    *lock(&said) = line;
                }
            }
        });
    }
    let last_words = || {
        let line = lock(&said).clone();
        if line.is_empty() {
            String::new()
        } else {
            format!("; stderr: {line}")
        }
    };
    let client = match tokio::time::timeout(limit, ().serve(transport)).await {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => {
            // Let the last stderr line arrive.
            tokio::time::sleep(Duration::from_millis(100)).await;
            return Err(format!("initialize failed: {e}{}", last_words()));
        }
        Err(_) => {
            return Err(format!(
                "no answer to initialize within {:.1} s",
                limit.as_secs_f64()
            ))
        }
    };
    let initialize_ms = started.elapsed().as_millis() as u64;
    let server_name = client
        .peer()
        .peer_info()
        .and_then(|info| {
            info.server_info
                .as_ref()
                .map(|s| format!("{} {}", s.name, s.version))
        })
        .unwrap_or_else(|| "unnamed".to_owned());
    let listed = tokio::time::timeout(limit, client.peer().list_tools(None)).await;
    let tools_list_ms = started.elapsed().as_millis() as u64;
    let _ = client.cancel().await;
    match listed {
        Ok(Ok(tools)) => Ok(ServerProbe {
            initialize_ms,
            tools_list_ms,
            tools: tools.tools.len(),
            server: server_name,
        }),
        Ok(Err(e)) => Err(format!("tools/list failed: {e}")),
        Err(_) => Err(format!(
            "no answer to tools/list within {:.1} s (Claude Code would report `tools fetch failed`)",
            limit.as_secs_f64()
        )),
    }
}
