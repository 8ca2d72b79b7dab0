//! `devboy doctor`'s live checks: start the configured upstreams the way
//! `devboy mcp` does and report how each one came up (keeping each
//! listing, so the next `devboy mcp` lists every tool at once), and start an MCP
//! server command, or ask an MCP server at a URL, the way Claude Code does
//! and time its `initialize` and `tools/list`. No MCP client is needed to
//! see what is wrong.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use devboy_core::config::ProxyConfig;
use rmcp::service::{Peer, RunningService};
use rmcp::{RoleClient, ServiceExt};

use crate::proxy::ProxyOptions;
use crate::sync::lock;
use crate::upstream::Phase;

/// The client name Claude Code gives at `initialize`. A server is asked as
/// Claude Code asks it, so devboy answers the check as it answers Claude
/// Code (the full listing: it has its own tool search), and the times
/// doctor prints are the ones Claude Code gets.
const CLAUDE_CODE_CLIENT: &str = "claude-code";

fn as_claude_code() -> rmcp::model::ClientConfig {
    rmcp::model::ClientConfig::new(
        rmcp::model::ClientCapabilities::default(),
        rmcp::model::Implementation::new(CLAUDE_CODE_CLIENT, env!("CARGO_PKG_VERSION")),
    )
}

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
    let started = Instant::now();
    let options = ProxyOptions {
        listing_cache,
        ..ProxyOptions::default()
    };
    let host = crate::serve::Host::start(crate::serve::Serving {
        config: config.clone(),
        options,
        reload: None,
        pipeline: crate::serve::Pipeline::Passthrough,
        pipeline_config: std::sync::Arc::new(
            devboy_core::pipeline_config::PipelineConfig::embedded_default(),
        ),
        capture: None,
    });
    let proxy = host.proxy();
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
                tools: catalog.tools_of(&config.name),
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
    /// From spawn (or the first request, for a URL) to the `initialize`
    /// answer.
    pub initialize_ms: u64,
    /// From spawn (or the first request) to the first `tools/list` answer.
    pub tools_list_ms: u64,
    /// Tools in that first answer.
    pub tools: usize,
    /// The server's name and version, from `initialize`.
    pub server: String,
    /// The server's name alone (`serverInfo.name`; devboy's is
    /// [`crate::upstream::SERVER_INFO_NAME`]).
    pub name: String,
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
    let client = match tokio::time::timeout(limit, as_claude_code().serve(transport)).await {
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
    let (name, server_name) = server_info(client.peer());
    let listed = tokio::time::timeout(limit, client.peer().list_tools(None)).await;
    let tools_list_ms = started.elapsed().as_millis() as u64;
    let _ = client.cancel().await;
    match listed {
        Ok(Ok(tools)) => Ok(ServerProbe {
            initialize_ms,
            tools_list_ms,
            tools: tools.tools.len(),
            server: server_name,
            name,
        }),
        Ok(Err(e)) => Err(format!("tools/list failed: {e}")),
        Err(_) => Err(format!(
            "no answer to tools/list within {:.1} s (Claude Code would report `tools fetch failed`)",
            limit.as_secs_f64()
        )),
    }
}

/// `serverInfo` of an initialized peer: its name, and its name and version.
fn server_info(peer: &Peer<RoleClient>) -> (String, String) {
    peer.peer_info()
        .and_then(|info| {
            info.server_info
                .as_ref()
                .map(|s| (s.name.clone(), format!("{} {}", s.name, s.version)))
        })
        .unwrap_or_else(|| ("unnamed".to_owned(), "unnamed".to_owned()))
}

/// An MCP server at a URL, as a client reaches it (Claude Code's `"type":
/// "http"` entries).
#[derive(Debug, Clone)]
pub struct ServerUrl {
    /// The endpoint.
    pub url: String,
    /// Headers sent with every request, as given (nothing expanded).
    pub headers: Vec<(String, String)>,
}

/// Why an MCP server at a URL did not answer as a client needs. Holds no
/// header value (a bearer token never reaches a message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlProbeError {
    /// Nothing accepts connections at the URL's host and port.
    #[error("nothing listens at {address} (connection refused)")]
    NotListening {
        /// `host:port`.
        address: String,
    },
    /// The server answered the `initialize` POST with an HTTP error.
    #[error("HTTP {status}{}", if said.is_empty() { String::new() } else { format!(": {said}") })]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The first line of its body (header values in it blanked out).
        said: String,
    },
    /// No answer in time.
    #[error("no answer to {request} within {:.1} s", limit.as_secs_f64())]
    Timeout {
        /// `initialize` or `tools/list`.
        request: &'static str,
        /// The time it had.
        limit: Duration,
    },
    /// Anything else: a header that is not valid HTTP, a name that does
    /// not resolve, TLS, an answer that is not MCP, an MCP error.
    #[error("{request} failed: {error}")]
    Failed {
        /// `initialize` or `tools/list`.
        request: &'static str,
        /// What went wrong.
        error: String,
    },
}

/// Asks the server at `server` as a Streamable HTTP client does (POST
/// `initialize` with its headers, then `tools/list`), each within `limit`
/// (Claude Code's is 5 s for `tools/list`), then ends the session.
pub async fn probe_url(server: &ServerUrl, limit: Duration) -> Result<ServerProbe, UrlProbeError> {
    let started = Instant::now();
    let client = connect_url(server, limit, true).await?;
    let initialize_ms = started.elapsed().as_millis() as u64;
    let (name, described) = server_info(client.peer());
    let listed = tokio::time::timeout(limit, client.peer().list_tools(None)).await;
    let tools_list_ms = started.elapsed().as_millis() as u64;
    let _ = tokio::time::timeout(limit, client.cancel()).await;
    match listed {
        Ok(Ok(tools)) => Ok(ServerProbe {
            initialize_ms,
            tools_list_ms,
            tools: tools.tools.len(),
            server: described,
            name,
        }),
        Ok(Err(e)) => Err(UrlProbeError::Failed {
            request: "tools/list",
            error: blank_out(&e.to_string(), &server.headers),
        }),
        Err(_) => Err(UrlProbeError::Timeout {
            request: "tools/list",
            limit,
        }),
    }
}

/// The `serverInfo.name` each of `servers` gives in `initialize`, asked
/// all at once, each within `limit`; `None` for one that does not answer
/// as an MCP server.
pub async fn server_names(servers: &[ServerUrl], limit: Duration) -> Vec<Option<String>> {
    futures::future::join_all(servers.iter().map(|server| async move {
        let client = connect_url(server, limit, false).await.ok()?;
        let (name, _) = server_info(client.peer());
        let _ = tokio::time::timeout(limit, client.cancel()).await;
        Some(name)
    }))
    .await
}

/// An initialized Streamable HTTP client of `server`; when it is not,
/// and `explain`, the request once more to say why.
async fn connect_url(
    server: &ServerUrl,
    limit: Duration,
    explain: bool,
) -> Result<RunningService<RoleClient, rmcp::model::ClientConfig>, UrlProbeError> {
    crate::serve::install_tls_provider();
    let invalid = |error: String| UrlProbeError::Failed {
        request: "initialize",
        error,
    };
    let mut headers = HashMap::new();
    for (key, value) in &server.headers {
        let name = http::HeaderName::try_from(key.as_str())
            .map_err(|_| invalid(format!("the header name `{key}` is not valid HTTP")))?;
        let value = http::HeaderValue::try_from(value.as_str())
            .map_err(|_| invalid(format!("the value of header `{key}` is not valid HTTP")))?;
        headers.insert(name, value);
    }
    let http = reqwest::Client::builder()
        .connect_timeout(limit)
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            server.url.as_str(),
        )
        .custom_headers(headers.clone());
    let transport =
        rmcp::transport::StreamableHttpClientTransport::with_client(http.clone(), config);
    match tokio::time::timeout(limit, as_claude_code().serve(transport)).await {
        Ok(Ok(client)) => Ok(client),
        // rmcp's errors do not say which status or which connection error:
        // the same request once more, plainly, does.
        Ok(Err(error)) if explain => {
            Err(initialize_refusal(&http, server, headers, limit, error.to_string()).await)
        }
        Ok(Err(error)) => Err(invalid(blank_out(&error.to_string(), &server.headers))),
        Err(_) => Err(UrlProbeError::Timeout {
            request: "initialize",
            limit,
        }),
    }
}

/// Why `initialize` failed at `server`, by one plain POST of it (its
/// session, if one opens after all, ended at once).
async fn initialize_refusal(
    http: &reqwest::Client,
    server: &ServerUrl,
    headers: HashMap<http::HeaderName, http::HeaderValue>,
    limit: Duration,
    rmcp_error: String,
) -> UrlProbeError {
    let initialize = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": CLAUDE_CODE_CLIENT, "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let mut request = http
        .post(&server.url)
        .timeout(limit)
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(initialize.to_string());
    for (name, value) in &headers {
        request = request.header(name, value);
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) if error.is_timeout() => {
            return UrlProbeError::Timeout {
                request: "initialize",
                limit,
            }
        }
        Err(error) => return request_failure(&server.url, &error),
    };
    let status = response.status();
    if status.is_success() {
        if let Some(session) = response.headers().get("mcp-session-id").cloned() {
            let mut end = http
                .delete(&server.url)
                .timeout(limit)
                .header("mcp-session-id", session);
            for (name, value) in &headers {
                end = end.header(name, value);
            }
            let _ = end.send().await;
        }
        return UrlProbeError::Failed {
            request: "initialize",
            error: format!(
                "HTTP {status}, but not a Streamable HTTP MCP answer ({})",
                blank_out(&rmcp_error, &server.headers)
            ),
        };
    }
    let body = tokio::time::timeout(limit, response.bytes())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let first_line = String::from_utf8_lossy(&body[..body.len().min(1024)])
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect::<String>();
    UrlProbeError::Refused {
        status: status.as_u16(),
        said: blank_out(&first_line, &server.headers),
    }
}

/// `text` with every header value of some length in it replaced by `…`: a
/// server that echoes a token back must not get it printed.
fn blank_out(text: &str, headers: &[(String, String)]) -> String {
    let mut text = text.to_owned();
    for (_, value) in headers {
        let secret = value.trim();
        let secret = secret.strip_prefix("Bearer ").unwrap_or(secret).trim();
        if secret.len() >= 6 {
            text = text.replace(secret, "…");
        }
    }
    text
}

/// A request that got no answer: nothing listening, or the innermost cause.
fn request_failure(url: &str, error: &reqwest::Error) -> UrlProbeError {
    let mut cause = error.to_string();
    let mut current: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                let address = reqwest::Url::parse(url)
                    .ok()
                    .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
                    .unwrap_or_else(|| url.to_owned());
                return UrlProbeError::NotListening { address };
            }
        }
        cause = e.to_string();
        current = e.source();
    }
    UrlProbeError::Failed {
        request: "initialize",
        error: format!("{cause} ({url})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_blanked_out_of_what_a_server_said() {
        let headers = vec![(
            "Authorization".to_owned(),
            "Bearer devboy-test-token-7f3a9c21".to_owned(),
        )];
        assert_eq!(
            blank_out("bad token devboy-test-token-7f3a9c21, sorry", &headers),
            "bad token …, sorry"
        );
        assert_eq!(blank_out("Unauthorized", &headers), "Unauthorized");
    }
}
