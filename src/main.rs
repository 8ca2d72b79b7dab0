//! The `devboy` command: MCP middleware that makes tool results cost the
//! model fewer tokens. This binary is the only place that knows about the
//! command line, logging setup and process exit codes.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use devboy_core::config::{ConfigSource, ProxyConfig};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

#[derive(Parser)]
#[command(
    name = "devboy",
    version,
    about = "MCP middleware that makes every tool result cost the model fewer tokens"
)]
struct Cli {
    /// Log level for stderr and the log file (RUST_LOG, when set, wins).
    #[arg(long, global = true, default_value = "info", value_name = "LEVEL")]
    log_level: String,
    /// Also append logs to this file.
    #[arg(long, global = true, value_name = "FILE")]
    log_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP on stdio, proxying the configured upstream servers.
    Mcp {
        /// devboy.toml or a Claude Code .mcp.json. Default: devboy.toml in the
        /// config directory if it exists, else the embedded default (built-in
        /// tools only).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// How long the first tools/list may wait for upstreams still starting.
        #[arg(long, default_value_t = 10_000, value_name = "MS")]
        list_grace_ms: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(error) = init_logging(&cli.log_level, cli.log_file.as_deref()) {
        eprintln!("devboy: {error:#}");
        return ExitCode::from(2);
    }
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("devboy: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Mcp {
            config,
            list_grace_ms,
        } => {
            let config = ProxyConfig::resolve(config.as_deref())?;
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
            let options = devboy_mcp::ProxyOptions {
                list_grace: Duration::from_millis(list_grace_ms),
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            runtime.block_on(devboy_mcp::serve_stdio(&config, options))?;
            // Upstream children are already stopped; do not wait for stray tasks.
            runtime.shutdown_timeout(Duration::from_millis(200));
            Ok(())
        }
    }
}

fn init_logging(level: &str, file: Option<&std::path::Path>) -> anyhow::Result<()> {
    let filter = || -> anyhow::Result<EnvFilter> {
        match std::env::var("RUST_LOG") {
            Ok(spec) if !spec.is_empty() => EnvFilter::try_new(&spec)
                .with_context(|| format!("RUST_LOG={spec:?} is not a valid filter")),
            _ => EnvFilter::try_new(level).with_context(|| {
                format!("--log-level {level:?}: expected error, warn, info, debug or trace")
            }),
        }
    };
    let stderr = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(filter()?);
    let file_layer = match file {
        Some(path) => {
            let handle = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening log file {}", path.display()))?;
            Some(
                fmt::layer()
                    .with_writer(std::sync::Mutex::new(handle))
                    .with_ansi(false)
                    .with_filter(filter()?),
            )
        }
        None => None,
    };
    tracing_subscriber::registry()
        .with(stderr)
        .with(file_layer)
        .init();
    Ok(())
}
