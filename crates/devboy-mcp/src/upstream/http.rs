//! Streamable HTTP upstreams, and what to tell people when one will not
//! initialize: rmcp's transport errors do not say why, so the URL is asked
//! once more directly.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use rmcp::service::{RunningService, ServiceExt};
use rmcp::RoleClient;

use super::settle::Settling;
use super::{ConnectError, Upstream, UpstreamClient};
use crate::oauth::{self, TokenFile};
use crate::tap::NotificationTap;

/// How a dropped HTTP connection is described. rmcp's HTTP client drops
/// the connection on a JSON body over its fixed 16 MiB limit, among others.
pub(super) const CONNECTION_LOST: &str =
    "lost its HTTP connection (a response over 16 MiB does this too)";

/// An MCP endpoint to reach, as the config gives it.
pub(super) struct Http {
    /// The endpoint, `http://` or `https://`.
    pub(super) url: String,
    /// Headers sent with every request.
    pub(super) headers: BTreeMap<String, String>,
}

impl Http {
    /// Connects and initializes.
    pub(super) async fn serve(
        &self,
        upstream: &Upstream,
        handler: UpstreamClient,
    ) -> Result<RunningService<RoleClient, UpstreamClient>, ConnectError> {
        let mut custom = HashMap::new();
        for (key, value) in &self.headers {
            // A header that is not valid HTTP never will be: no retry.
            let name = http::HeaderName::try_from(key.as_str())
                .map_err(|e| ConnectError::Permanent(format!("header name `{key}`: {e}")))?;
            let value = http::HeaderValue::try_from(value.as_str())
                .map_err(|e| ConnectError::Permanent(format!("header `{key}` value: {e}")))?;
            custom.insert(name, value);
        }
        let config =
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                self.url.as_str(),
            )
            .custom_headers(custom)
            .max_sse_event_size(crate::wire::MAX_MESSAGE_BYTES);
        // With tokens from `devboy login`, every request carries one
        // (refreshed before it expires); without, the server may still
        // answer, or say that it needs a login.
        let tokens = TokenFile::of(&upstream.config);
        let machine = oauth::machine::manager(&self.url, &upstream.config.oauth)
            .await
            .map_err(|e| {
                let grant = oauth::machine::grant_name(upstream.config.oauth.grant);
                format!("its {grant} failed: {e}")
            })?;
        let manager = match &tokens {
            _ if machine.is_some() => machine,
            Some(tokens) => {
                oauth::connecting_manager(&self.url, tokens.clone(), &upstream.config.oauth)
                    .await
                    .map_err(|e| {
                        format!(
                            "its login (`devboy login {}`) cannot be used: {e}",
                            upstream.config.name
                        )
                    })?
            }
            None => None,
        };
        let served = match manager {
            Some(manager) => {
                let (client, settled) = Settling::new(rmcp::transport::auth::AuthClient::new(
                    reqwest::Client::new(),
                    manager,
                ));
                let transport =
                    rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
                let served = handler
                    .serve(NotificationTap::new(
                        transport,
                        upstream.progress.clone(),
                        upstream.relay.clone(),
                    ))
                    .await;
                (served, settled)
            }
            None => {
                let (client, settled) = Settling::new(reqwest::Client::new());
                let transport =
                    rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
                let served = handler
                    .serve(NotificationTap::new(
                        transport,
                        upstream.progress.clone(),
                        upstream.relay.clone(),
                    ))
                    .await;
                (served, settled)
            }
        };
        let (served, settled) = served;
        match served {
            Ok(running) => {
                // Ready once the server can send devboy its own requests.
                settled.wait().await;
                Ok(running)
            }
            Err(error) if error.is_authorization_required() => match tokens {
                Some(tokens) => Err(ConnectError::NeedsLogin(tokens)),
                None => Err(oauth::needs_login(&upstream.config.name).into()),
            },
            // rmcp's transport errors end in its own type names and
            // do not chain their cause: ask the URL once more
            // directly to say what is wrong.
            Err(rmcp::service::ClientInitializeError::TransportError { .. }) => Err(format!(
                "initialize over HTTP failed: {}",
                probe_http(&self.url).await
            )
            .into()),
            Err(other) => Err(format!("initialize over HTTP failed: {other}").into()),
        }
    }
}

/// How long [`probe_http`] waits for an answer.
const HTTP_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What is wrong with an HTTP upstream that would not initialize, for
/// people: one plain request to its URL, and the innermost cause of its
/// failure (connection refused, a name that does not resolve, a TLS error,
/// a timeout), or the status it answered with when that says no.
async fn probe_http(url: &str) -> String {
    let client = reqwest::Client::builder()
        .timeout(HTTP_PROBE_TIMEOUT)
        .build()
        .unwrap_or_default();
    match client.get(url).send().await {
        Ok(response) => {
            let status = response.status();
            if status.is_client_error() && status != reqwest::StatusCode::METHOD_NOT_ALLOWED {
                format!("{url} answered HTTP {status} (check the URL and the headers it needs)")
            } else if status.is_server_error() {
                format!("{url} answered HTTP {status}")
            } else {
                format!("{url} is reachable (HTTP {status}) but did not complete the MCP handshake")
            }
        }
        Err(error) => describe_request_error(url, &error),
    }
}

/// The innermost cause of a failed request, with the URL.
fn describe_request_error(url: &str, error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return format!(
            "no answer from {url} within {} s",
            HTTP_PROBE_TIMEOUT.as_secs()
        );
    }
    let mut cause = error.to_string();
    let mut current: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => format!("connection refused at {url}"),
                std::io::ErrorKind::ConnectionReset => format!("connection reset by {url}"),
                std::io::ErrorKind::TimedOut => format!("connection to {url} timed out"),
                _ => format!("{io} ({url})"),
            };
        }
        cause = e.to_string();
        current = e.source();
    }
    format!("{cause} ({url})")
}
