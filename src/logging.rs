//! Logging: stderr (never stdout, which is the protocol) and optionally a
//! file, at the level the command line or `RUST_LOG` gives.

use anyhow::Context;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

/// Where a filter that shows debug or trace holds rmcp's OAuth module: it
/// writes the authorization code at debug (its token types print redacted,
/// the code does not), and a login's secrets are never logged.
const SECRETS_KEPT: &str = "rmcp::transport::auth=info";

/// Installs the global subscriber: stderr, and `file` (appended) if given.
pub fn init(level: &str, file: Option<&std::path::Path>) -> anyhow::Result<()> {
    let filter = || -> anyhow::Result<EnvFilter> {
        let filter = filter_for(level)?;
        if filter
            .max_level_hint()
            .is_some_and(|max| max <= LevelFilter::INFO)
        {
            return Ok(filter);
        }
        let kept = SECRETS_KEPT
            .parse()
            .context("the built-in rmcp log directives")?;
        Ok(filter.add_directive(kept))
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

/// The filter `RUST_LOG` gives, else `level` with devboy's quieting of rmcp.
fn filter_for(level: &str) -> anyhow::Result<EnvFilter> {
    match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::try_new(&spec)
            .with_context(|| format!("RUST_LOG={spec:?} is not a valid filter")),
        _ => {
            let filter = EnvFilter::try_new(level).with_context(|| {
                format!("--log-level {level:?}: expected error, warn, info, debug or trace")
            })?;
            // rmcp warns about every error response it sends, and devboy
            // answers an unknown tool or an upstream's own error that
            // way: the caller is told, stderr need not repeat it.
            // Its transport worker logs an error per failed connection
            // attempt, which devboy reports itself, once (devboy-mcp's upstream module).
            let mut filter = filter;
            for directive in ["rmcp::service=error", "rmcp::transport::worker=off"] {
                filter = filter.add_directive(
                    directive
                        .parse()
                        .context("the built-in rmcp log directives")?,
                );
            }
            Ok(filter)
        }
    }
}
