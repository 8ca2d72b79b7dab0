//! `devboy login NAME` and `devboy logout NAME`: the OAuth login of an
//! HTTP server devboy wraps (see `devboy_mcp::oauth`).

use std::path::Path;

use anyhow::{bail, Context};
use devboy_core::config::{
    ConfigSource, OAuthGrant, ProxyConfig, UpstreamConfig, UpstreamTransport,
};
use devboy_mcp::oauth::{self, TokenFile};

/// The HTTP server `name` (its key, or its prefix) of `config`.
fn http_server<'c>(config: &'c ProxyConfig, name: &str) -> anyhow::Result<&'c UpstreamConfig> {
    let server = config
        .upstreams
        .iter()
        .find(|u| u.name == name)
        .or_else(|| config.upstream_by_prefix(name).filter(|_| !name.is_empty()));
    let Some(server) = server else {
        let names: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
        bail!(
            "no server `{name}` in {}; its servers: {}",
            match &config.source {
                ConfigSource::File(path) => path.display().to_string(),
                ConfigSource::Embedded => "the built-in default config".to_owned(),
            },
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        );
    };
    match &server.transport {
        UpstreamTransport::Http { .. } => Ok(server),
        other => bail!(
            "server `{}` is a {} server; only HTTP servers log in",
            server.name,
            other.kind()
        ),
    }
}

pub fn login(name: &str, config: Option<&Path>) -> anyhow::Result<()> {
    devboy_mcp::install_tls_provider();
    let config = crate::setup::config_here(config)?;
    let server = http_server(&config, name)?;
    let tokens = TokenFile::of(server).context("an HTTP server has a token file")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    if server.oauth.grant != OAuthGrant::AuthorizationCode {
        return runtime.block_on(check_machine_grant(server));
    }
    runtime
        .block_on(oauth::login(server, tokens.clone(), |url| {
            eprintln!("devboy: log in to `{}` at:\n  {url}", server.name);
            match oauth::open_in_browser(url) {
                Some(how) => {
                    eprintln!("devboy: opened with {how}; waiting for the browser to come back")
                }
                None => eprintln!("devboy: open it in a browser; waiting for it to come back"),
            }
        }))
        .map_err(|e| anyhow::anyhow!("login to `{}` failed: {e}", server.name))?;
    eprintln!(
        "devboy: logged in to `{}`; its tokens are in {} (yours only). A running devboy connects within a second.",
        server.name,
        tokens.path().display()
    );
    Ok(())
}

/// A server whose grant needs no browser has no login: devboy gets its
/// token on every connect. `devboy login` tries that grant now and says
/// whether it works, so that a user checking a setup learns it here.
async fn check_machine_grant(server: &UpstreamConfig) -> anyhow::Result<()> {
    let UpstreamTransport::Http { url, .. } = &server.transport else {
        bail!("server `{}` is not an HTTP server", server.name);
    };
    let grant = oauth::machine::grant_name(server.oauth.grant);
    match oauth::machine::manager(url, &server.oauth).await {
        Ok(Some(_)) => {
            eprintln!(
                "devboy: `{}` needs no login: devboy gets its token itself on every connect with its {grant}, and that works (a token was issued just now; none is kept)",
                server.name
            );
            Ok(())
        }
        Ok(None) => bail!("server `{}` has an incomplete {grant} setting", server.name),
        Err(e) => bail!("the {grant} of `{}` failed: {e}", server.name),
    }
}

pub fn logout(name: &str, config: Option<&Path>) -> anyhow::Result<()> {
    let config = crate::setup::config_here(config)?;
    let server = http_server(&config, name)?;
    let tokens = TokenFile::of(server).context("an HTTP server has a token file")?;
    if tokens
        .remove()
        .with_context(|| format!("removing {}", tokens.path().display()))?
    {
        eprintln!(
            "devboy: logged out of `{}` (removed {})",
            server.name,
            tokens.path().display()
        );
    } else {
        eprintln!("devboy: not logged in to `{}`", server.name);
    }
    Ok(())
}
