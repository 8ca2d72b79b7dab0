//! `devboy mcp`: serve MCP on stdio, proxying the configured upstreams;
//! `devboy serve --http`: the same over Streamable HTTP, for several clients.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use devboy_core::config::{ConfigSource, ProxyConfig};
use devboy_core::pipeline_config::PipelineConfig;

/// The arguments of `devboy mcp`.
#[derive(clap::Args)]
pub struct McpArgs {
    /// devboy.toml or a Claude Code .mcp.json. Default: devboy.toml in the
    /// config directory if it exists, else the embedded default (built-in
    /// tools only).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// How long the first tools/list may wait for upstreams still
    /// starting (from devboy's start); later ones are announced with
    /// list_changed. Claude Code gives tools/list 5 s in all.
    #[arg(long, default_value_t = devboy_mcp::DEFAULT_LIST_GRACE_MS, value_name = "MS")]
    list_grace_ms: u64,
    /// What happens to tool results: `full` answers a repeat the model
    /// already holds with a reference to it and re-encodes structured
    /// results losslessly when that costs fewer tokens; `dedup` only
    /// does the first; `passthrough` changes nothing.
    #[arg(long, value_enum, default_value_t = PipelineArg::Full)]
    pipeline: PipelineArg,
    /// The pipeline's knobs. Default: pipeline_config.toml in the config
    /// directory if it exists, else the embedded default.
    #[arg(long, value_name = "FILE")]
    pipeline_config: Option<PathBuf>,
    /// Write the session to FILE (JSONL, created or truncated) so that
    /// `devboy replay FILE` reproduces it exactly. The file holds
    /// tool-result content and call arguments as they were. Off by
    /// default.
    #[arg(long, value_name = "FILE")]
    capture: Option<PathBuf>,
}

/// `--pipeline`: which of the pipeline's stages run.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PipelineArg {
    Full,
    Dedup,
    Passthrough,
}

/// Loads the configs and serves until the client closes stdin.
pub fn mcp(args: McpArgs) -> anyhow::Result<()> {
    let loaded = load(args)?;
    let runtime = stdio_runtime()?;
    runtime.block_on(devboy_mcp::serve_stdio(loaded))?;
    // Upstream children are already stopped; do not wait for stray tasks
    // (devboy_mcp::ENDING counts on this being short).
    runtime.shutdown_timeout(Duration::from_millis(50));
    Ok(())
}

/// The arguments of `devboy serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Serve MCP over Streamable HTTP on ADDR (host:port) at /mcp; every
    /// client gets its own session over one set of upstreams.
    #[arg(long, value_name = "ADDR", value_parser = socket_address)]
    http: std::net::SocketAddr,
    /// A file holding the bearer token every request must carry
    /// (`Authorization: Bearer TOKEN`); or set DEVBOY_HTTP_TOKEN. Required
    /// unless ADDR is loopback.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// A browser origin allowed to call (repeatable), e.g.
    /// https://app.example.com; a request with another Origin is refused.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origins: Vec<String>,
    /// A Host value allowed besides loopback names (repeatable): the name
    /// remote clients reach devboy by.
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// Requests per second per token (per client address without one);
    /// twice as many may come at once.
    #[arg(long, default_value_t = devboy_mcp::http::DEFAULT_RATE_PER_SECOND, value_name = "N")]
    rate_limit: u32,
    /// Seconds an MCP session may stay idle before it ends.
    #[arg(long, default_value_t = devboy_mcp::http::DEFAULT_IDLE.as_secs(), value_name = "S")]
    idle_timeout: u64,
    #[command(flatten)]
    common: McpArgs,
}

/// Serves MCP over HTTP until SIGTERM/SIGINT.
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let token = match &args.token_file {
        Some(file) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                if let Ok(meta) = std::fs::metadata(file) {
                    if meta.permissions().mode() & 0o077 != 0 {
                        tracing::warn!(
                            file = %file.display(),
                            "the token file can be read by other users; chmod 600 it"
                        );
                    }
                }
            }
            Some(
                std::fs::read_to_string(file)
                    .with_context(|| format!("reading the token file {}", file.display()))?,
            )
        }
        None => std::env::var(devboy_mcp::http::TOKEN_ENV).ok(),
    };
    let mut http = devboy_mcp::http::HttpOptions::new(args.http);
    http.token = token.map(|t| t.trim().to_owned());
    http.allowed_origins = args.allow_origins;
    http.allowed_hosts = args.allow_hosts;
    http.rate_per_second = args.rate_limit;
    http.idle = Duration::from_secs(args.idle_timeout.max(1));
    if let Some(why) = http.refusal() {
        anyhow::bail!("not serving on {}: {why}", args.http);
    }
    if args.common.capture.is_some() {
        anyhow::bail!(
            "--capture records one session; devboy serve has many (use devboy mcp --capture)"
        );
    }
    let loaded = load(args.common)?;
    let runtime = runtime()?;
    runtime.block_on(devboy_mcp::http::serve_http(
        loaded,
        http,
        devboy_mcp::http::CancellationToken::new(),
        |bound| {
            // The address, for whoever started devboy (port 0 picks one).
            eprintln!(
                "devboy: serving MCP at http://{bound}{}",
                devboy_mcp::http::MCP_PATH
            );
            if bound.ip().is_unspecified() {
                eprintln!(
                    "devboy: (listening on every interface: clients use this machine's name or address, port {})",
                    bound.port()
                );
            }
        },
    ))?;
    runtime.shutdown_timeout(Duration::from_millis(50));
    Ok(())
}

/// One client on stdio: the protocol's work is parsing and writing lines,
/// and everything heavy (the pipeline, explore, code mode) already runs on
/// blocking threads, so one async thread serves it. With a worker per core
/// every message also woke a parked worker on the other core (three
/// futex calls and about seven context switches per call where one thread
/// needs four).
fn stdio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Loads devboy.toml (or a .mcp.json) and the pipeline config, reporting
/// what was loaded and every warning.
fn load(args: McpArgs) -> anyhow::Result<devboy_mcp::Serving> {
    let McpArgs {
        config,
        list_grace_ms,
        pipeline,
        pipeline_config,
        capture,
    } = args;
    // A client sees a server that exits at start as broken: serve, and
    // say once why nothing is captured.
    let capture = match capture {
        Some(file) if pipeline == PipelineArg::Passthrough => {
            tracing::warn!(
                file = %file.display(),
                "--capture records the pipeline's session and --pipeline passthrough runs none: serving without a capture"
            );
            None
        }
        other => other,
    };
    // A config that does not load stops nothing: what of it cannot be
    // used is left out, said once here, and shown in status until fixed.
    let mut config = ProxyConfig::resolve_or_default(config.as_deref())?;
    if let Some(parent) = std::env::var_os(devboy_mcp::NESTED_ENV) {
        // Started as an upstream of another devboy (its config lists
        // devboy itself). Starting this config's upstreams could
        // start devboy again, without end; the parent marks this
        // server failed when it sees devboy answer.
        tracing::warn!(
            parent = %parent.to_string_lossy(),
            "started as an upstream of another devboy; serving built-in tools only (devboy does not proxy itself)"
        );
        config.upstreams.clear();
    }
    match &config.source {
        ConfigSource::File(path) => {
            tracing::info!(config = %path.display(), upstreams = config.upstreams.len(), "config loaded")
        }
        ConfigSource::Embedded => {
            tracing::info!("no config file; serving built-in tools only")
        }
    }
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    for problem in &config.problems {
        tracing::error!("{problem}");
    }
    // Edits to either file apply while devboy runs (devboy_mcp::reload);
    // a nested devboy serves built-ins only and reads no servers.
    let nested = std::env::var_os(devboy_mcp::NESTED_ENV).is_some();
    let project = std::env::current_dir().ok();
    let reload = devboy_mcp::reload::ReloadSources {
        config: match &config.source {
            ConfigSource::File(path) if !nested => Some(path.clone()),
            _ => None,
        },
        pipeline_explicit: pipeline_config.clone(),
        project: project.clone(),
    };
    let options = devboy_mcp::ProxyOptions {
        list_grace: Duration::from_millis(list_grace_ms),
        listing_cache: Some(devboy_core::paths::listing_cache_dir()),
    };
    let pipeline_config =
        PipelineConfig::resolve_or_default(pipeline_config.as_deref(), project.as_deref())?;
    if let ConfigSource::File(path) = &pipeline_config.source {
        let layers: Vec<String> = pipeline_config
            .layers
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        tracing::info!(pipeline_config = %path.display(), layers = %layers.join(" < "), schema = pipeline_config.file_version, "pipeline config loaded");
    }
    for warning in &pipeline_config.warnings {
        tracing::warn!("{warning}");
    }
    for problem in &pipeline_config.problems {
        tracing::error!("{problem}");
    }
    let pipeline_config = Arc::new(pipeline_config);
    let pipeline = match pipeline {
        PipelineArg::Full => devboy_mcp::Pipeline::Full,
        PipelineArg::Dedup => devboy_mcp::Pipeline::Dedup,
        PipelineArg::Passthrough => devboy_mcp::Pipeline::Passthrough,
    };
    Ok(devboy_mcp::Serving {
        config,
        options,
        reload: Some(reload),
        pipeline,
        pipeline_config,
        capture,
    })
}

/// ADDR as `IP:PORT` or `HOST:PORT` (`localhost:8765`): a host name is
/// resolved once, at start, to its first address (IPv4 first).
fn socket_address(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    if !text.contains(':') {
        return Err(format!(
            "`{text}` has no port: give HOST:PORT, say 127.0.0.1:8765"
        ));
    }
    let found: Vec<std::net::SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| format!("`{text}`: {e} (give IP:PORT, say 127.0.0.1:8765)"))?
        .collect();
    found
        .iter()
        .find(|a| a.is_ipv4())
        .or(found.first())
        .copied()
        .ok_or_else(|| format!("`{text}` resolves to no address"))
}
