//! Forwarding requests to an upstream: waiting for a connection a call can
//! use, the call with its cancellation and progress route, and what a
//! failure is called.

use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResult,
    ProgressToken, ReadResourceRequestParams, ReadResourceResult, RequestMetaObject, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use rmcp::{RoleClient, RoleServer};
use std::sync::atomic::Ordering;
use tokio_util::sync::CancellationToken;

use super::{Phase, Transport, Upstream};
use crate::relay::AgentId;
use crate::sync::{lock, read};
use crate::tap::{ProgressRoutes, ProgressTarget};

/// Why a forwarded request did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    /// The upstream is not connected and is not expected back in time.
    #[error("upstream `{upstream}` is unavailable: {reason}")]
    Unavailable {
        /// Upstream name.
        upstream: String,
        /// Why.
        reason: String,
    },
    /// The call ran past its timeout; the upstream was told to cancel it.
    #[error("upstream `{upstream}` did not answer within {seconds:.1} s; the call was cancelled")]
    Timeout {
        /// Upstream name.
        upstream: String,
        /// The timeout in seconds.
        seconds: f64,
    },
    /// The connection dropped while the call was in flight.
    #[error(
        "upstream `{upstream}` {how} while the call was in flight{detail}; it is being restarted, retry the call"
    )]
    ConnectionLost {
        /// Upstream name.
        upstream: String,
        /// What happened to the connection, by transport.
        how: &'static str,
        /// `: <last stderr line>` or empty.
        detail: String,
    },
    /// The server refused the call for want of a login (401: its tokens
    /// were revoked) or of a wider one (403 `insufficient_scope`).
    #[error("upstream `{upstream}` refused the call: {what}; then retry the call")]
    NeedsLogin {
        /// Upstream name.
        upstream: String,
        /// What it wants, with the command that gives it.
        what: String,
    },
    /// The agent cancelled the request.
    #[error("cancelled by the client")]
    Cancelled,
    /// The upstream answered with a JSON-RPC error.
    #[error("{0}")]
    Protocol(rmcp::ErrorData),
    /// Anything else from the transport layer.
    #[error("upstream `{upstream}`: {message}")]
    Other {
        /// Upstream name.
        upstream: String,
        /// What happened.
        message: String,
    },
}

impl Upstream {
    /// Waits (up to `deadline`) for a connection a call can use.
    async fn ready_peer(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<Peer<RoleClient>, CallFailure> {
        let mut phase = self.phase.subscribe();
        loop {
            let current = phase.borrow_and_update().clone();
            match current {
                Phase::Ready => {
                    if let Some(peer) = read(&self.peer).clone() {
                        return Ok(peer);
                    }
                }
                Phase::Disabled | Phase::Stopped => {
                    return Err(self.unavailable(current.label().to_owned()))
                }
                // Never came up: do not make the agent wait for the backoff.
                Phase::Failed { error, .. } if !self.ever_ready.load(Ordering::SeqCst) => {
                    return Err(self.unavailable(error))
                }
                Phase::Starting | Phase::Failed { .. } => {}
            }
            match tokio::time::timeout_at(deadline, phase.changed()).await {
                Ok(Ok(())) => continue,
                _ => {
                    let reason = match self.phase() {
                        Phase::Failed { error, .. } => format!("still restarting ({error})"),
                        other => format!("still {}", other.label()),
                    };
                    return Err(self.unavailable(reason));
                }
            }
        }
    }

    fn unavailable(&self, reason: String) -> CallFailure {
        CallFailure::Unavailable {
            upstream: self.config.name.clone(),
            reason,
        }
    }

    /// Forwards one `tools/call` and waits for its answer.
    ///
    /// `meta` is the agent's request `_meta`, passed on (rmcp replaces the
    /// progress token with its own; progress is mapped back via `progress`).
    ///
    /// `caller` is the agent that made the call (none for a prefetch):
    /// what the upstream asks the client while the call runs (sampling,
    /// elicitation) goes to it.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<rmcp::model::JsonObject>,
        meta: RequestMetaObject,
        progress: Option<ProgressTarget>,
        caller: Option<Peer<RoleServer>>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallFailure> {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let _in_flight = caller.map(|agent| self.relay.enter(agent));
        let outcome = self
            .call_tool_inner(tool, arguments, meta, progress, cancel)
            .await;
        match &outcome {
            Ok(result) if result.is_error == Some(true) => self
                .stats
                .record_error(&format!("`{tool}` returned isError")),
            Ok(_) => {}
            Err(CallFailure::Cancelled) => {}
            Err(failure) => {
                if matches!(failure, CallFailure::Timeout { .. }) {
                    self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
                }
                self.stats.record_error(&failure.to_string())
            }
        }
        outcome
    }

    async fn call_tool_inner(
        &self,
        tool: &str,
        arguments: Option<rmcp::model::JsonObject>,
        meta: RequestMetaObject,
        progress: Option<ProgressTarget>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallFailure> {
        let timeout = self.config.timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let peer = tokio::select! {
            _ = cancel.cancelled() => return Err(CallFailure::Cancelled),
            p = self.ready_peer(deadline) => p?,
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options = PeerRequestOptions::with_timeout(timeout)
            .with_meta(meta)
            .reset_timeout_on_progress();
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.service_failure(e, timeout))?;
        let id = handle.id.clone();
        let route = progress.map(|target| {
            let token = handle.progress_token.clone();
            lock(&self.progress).insert(token.clone(), target);
            RouteGuard {
                routes: self.progress.clone(),
                token,
            }
        });
        let response = tokio::select! {
            r = handle.await_response() => r,
            _ = cancel.cancelled() => {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("cancelled by the client".into()),
                    ))
                    .await;
                return Err(CallFailure::Cancelled);
            }
        };
        drop(route);
        match response.map_err(|e| self.service_failure(e, timeout))? {
            ServerResult::CallToolResult(result) => Ok(result),
            other => Err(self.unexpected("tools/call", &other)),
        }
    }

    /// Forwards `resources/read`.
    pub async fn read_resource(
        &self,
        params: ReadResourceRequestParams,
    ) -> Result<ReadResourceResult, CallFailure> {
        let request =
            ClientRequest::ReadResourceRequest(rmcp::model::ReadResourceRequest::new(params));
        match self.request(request).await? {
            ServerResult::ReadResourceResult(result) => Ok(result),
            other => Err(self.unexpected("resources/read", &other)),
        }
    }

    /// Forwards `prompts/get`.
    pub async fn get_prompt(
        &self,
        params: GetPromptRequestParams,
    ) -> Result<GetPromptResult, CallFailure> {
        let request = ClientRequest::GetPromptRequest(rmcp::model::GetPromptRequest::new(params));
        match self.request(request).await? {
            ServerResult::GetPromptResult(result) => Ok(result),
            other => Err(self.unexpected("prompts/get", &other)),
        }
    }

    /// Forwards `completion/complete`.
    pub async fn complete(
        &self,
        params: CompleteRequestParams,
    ) -> Result<CompleteResult, CallFailure> {
        let request = ClientRequest::CompleteRequest(rmcp::model::CompleteRequest::new(params));
        match self.request(request).await? {
            ServerResult::CompleteResult(result) => Ok(result),
            other => Err(self.unexpected("completion/complete", &other)),
        }
    }

    /// Whether the server, as it last initialized, declared `logging`.
    pub fn declares_logging(&self) -> bool {
        self.server_capabilities()
            .is_some_and(|c| c.logging.is_some())
    }

    /// Whether the server, as it last initialized, takes resource
    /// subscriptions.
    pub fn declares_subscriptions(&self) -> bool {
        self.server_capabilities().is_some_and(|c| {
            c.resources
                .as_ref()
                .is_some_and(|r| r.subscribe == Some(true))
        })
    }

    fn server_capabilities(&self) -> Option<rmcp::model::ServerCapabilities> {
        let peer = read(&self.peer).clone()?;
        peer.peer_info().map(|info| info.capabilities.clone())
    }

    /// `agent` (session `id`) asks for log messages at `level` and above:
    /// the upstream, when it logs, is set to the lowest level any agent
    /// asked for.
    #[allow(deprecated)] // Logging is deprecated by SEP-2577, but still in use.
    pub(crate) async fn set_level(
        &self,
        id: AgentId,
        agent: Peer<RoleServer>,
        level: rmcp::model::LoggingLevel,
    ) -> Result<(), CallFailure> {
        let level = self.relay.set_level(id, agent, level);
        if !self.declares_logging() {
            // Set when it comes up, if it logs (see `apply_agents`).
            return Ok(());
        }
        let request = ClientRequest::SetLevelRequest(rmcp::model::SetLevelRequest::new(
            rmcp::model::SetLevelRequestParams::new(level),
        ));
        self.request(request).await.map(|_| ())
    }

    /// Subscribes `agent` (session `id`) to `uri`; the upstream is asked
    /// once, for the first agent.
    #[allow(deprecated)] // resources/subscribe is what 2025-11-25 servers speak.
    pub(crate) async fn subscribe(
        &self,
        id: AgentId,
        agent: Peer<RoleServer>,
        uri: String,
    ) -> Result<(), CallFailure> {
        if !self.relay.subscribe(id, agent, &uri) {
            return Ok(());
        }
        let request = ClientRequest::SubscribeRequest(rmcp::model::SubscribeRequest::new(
            rmcp::model::SubscribeRequestParams::new(uri),
        ));
        self.request(request).await.map(|_| ())
    }

    /// Ends `agent`'s subscription to `uri`; the upstream is told when no
    /// agent is left subscribed.
    #[allow(deprecated)] // resources/unsubscribe, as 2025-11-25 servers speak it.
    pub(crate) async fn unsubscribe(&self, id: AgentId, uri: String) -> Result<(), CallFailure> {
        if !self.relay.unsubscribe(id, &uri) {
            return Ok(());
        }
        let request = ClientRequest::UnsubscribeRequest(rmcp::model::UnsubscribeRequest::new(
            rmcp::model::UnsubscribeRequestParams::new(uri),
        ));
        self.request(request).await.map(|_| ())
    }

    /// Sends `request` once a connection is ready and waits for the answer,
    /// both within the upstream's timeout.
    async fn request(&self, request: ClientRequest) -> Result<ServerResult, CallFailure> {
        let timeout = self.config.timeout;
        let peer = self
            .ready_peer(tokio::time::Instant::now() + timeout)
            .await?;
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await
            .map_err(|e| self.service_failure(e, timeout))?;
        handle
            .await_response()
            .await
            .map_err(|e| self.service_failure(e, timeout))
    }

    fn unexpected(&self, method: &str, result: &ServerResult) -> CallFailure {
        CallFailure::Other {
            upstream: self.config.name.clone(),
            message: format!("unexpected answer to {method}: {}", result_kind(result)),
        }
    }

    fn service_failure(&self, error: ServiceError, timeout: Duration) -> CallFailure {
        let upstream = self.config.name.clone();
        if let ServiceError::TransportSend(sent) = &error {
            if let Some(refusal) = login_refusal(sent) {
                return CallFailure::NeedsLogin {
                    what: self.needs_login(refusal),
                    upstream,
                };
            }
        }
        match error {
            ServiceError::McpError(e) => CallFailure::Protocol(e),
            ServiceError::Timeout { .. } => CallFailure::Timeout {
                upstream,
                seconds: timeout.as_secs_f64(),
            },
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                CallFailure::ConnectionLost {
                    upstream,
                    how: self
                        .transport
                        .as_ref()
                        .map_or("exited", Transport::connection_lost),
                    detail: self.stderr_detail(),
                }
            }
            ServiceError::Cancelled { .. } => CallFailure::Cancelled,
            other => CallFailure::Other {
                upstream,
                message: other.to_string(),
            },
        }
    }
}

/// Why an HTTP server refused a request for its login.
enum LoginRefusal {
    /// 401: no valid token (revoked, or never given).
    Login,
    /// 403 `insufficient_scope`, naming the scope it wants when it does.
    Scope(Option<String>),
}

/// The login refusal in `error`'s causes, if one is there (rmcp's HTTP
/// transport reports a 401 or 403 of a request as its send failing).
fn login_refusal(error: &rmcp::transport::DynamicTransportError) -> Option<LoginRefusal> {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if let Some(scope) = current.downcast_ref::<InsufficientScopeError>() {
            return Some(LoginRefusal::Scope(scope.required_scope.clone()));
        }
        if current.downcast_ref::<AuthRequiredError>().is_some() {
            return Some(LoginRefusal::Login);
        }
        cause = current.source();
    }
    None
}

impl Upstream {
    /// What to tell the agent of a login refusal; a wanted scope is kept
    /// for the next `devboy login`, which asks for it with those granted.
    fn needs_login(&self, refusal: LoginRefusal) -> String {
        let name = &self.config.name;
        match refusal {
            LoginRefusal::Login => crate::oauth::needs_login(name),
            LoginRefusal::Scope(scope) => {
                let scope = scope.filter(|s| !s.trim().is_empty());
                if let (Some(scope), Some(tokens)) =
                    (&scope, crate::oauth::TokenFile::of(&self.config))
                {
                    if let Err(error) = tokens.want_scope(scope) {
                        tracing::warn!(upstream = %name, %error, "cannot keep the scope it wants");
                    }
                }
                match scope {
                    Some(scope) => format!(
                        "it needs a login with scope `{scope}`: run `devboy login {name}` (it asks for that with the scopes already granted)"
                    ),
                    None => format!(
                        "it needs a login with a wider scope: run `devboy login {name}`"
                    ),
                }
            }
        }
    }
}

/// Removes a progress route when the call ends, however it ends.
struct RouteGuard {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        lock(&self.routes).remove(&self.token);
    }
}

fn result_kind(result: &ServerResult) -> String {
    serde_json::to_value(result)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>().join(","))
        })
        .unwrap_or_else(|| "unknown".into())
}
