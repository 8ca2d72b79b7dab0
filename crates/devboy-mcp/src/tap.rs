//! A transport wrapper that forwards upstream notifications in order:
//! progress, log messages and resource updates.
//!
//! rmcp dispatches notifications to handlers on spawned tasks, so a progress
//! notification or a log line the upstream sent *before* its response could
//! otherwise reach the agent after it (or be dropped because the call
//! already ended). The tap sees every incoming message inside `receive()`,
//! which the service loop awaits sequentially: a notification is forwarded
//! (and written to the agent) before the next message, the response, is
//! even read. Where log messages and updates go is the relay's to say
//! ([`crate::relay::Relay`]).
//!
//! The service loop races `receive()` against its other events and drops
//! the loser, so `receive()` must be cancel-safe: a message already taken
//! from the upstream is kept, with its forwarding, in the tap until it is
//! handed on. (Without that, a log line that arrived just as the request's
//! POST completed was lost, sometimes the first of a call's.)

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{JsonRpcMessage, ProgressToken, ServerNotification};
use rmcp::service::{Peer, RxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleClient, RoleServer};

use crate::relay::Relay;
use crate::sync::lock;

/// How long forwarding one progress notification may hold up the upstream.
const FORWARD_LIMIT: Duration = Duration::from_secs(2);

/// Where a progress notification from an upstream goes on the agent side.
#[derive(Clone)]
pub struct ProgressTarget {
    /// The agent connection.
    pub peer: Peer<RoleServer>,
    /// The token the agent put on its request.
    pub token: ProgressToken,
}

/// Upstream progress token → the agent's request, for calls in flight.
pub(crate) type ProgressRoutes = Arc<Mutex<HashMap<ProgressToken, ProgressTarget>>>;

/// A message taken from the upstream, forwarded to the agents as it
/// resolves, then handed on.
type Forwarding = Pin<Box<dyn Future<Output = RxJsonRpcMessage<RoleClient>> + Send>>;

/// Wraps an upstream transport; see the module docs.
pub(crate) struct NotificationTap<T> {
    inner: T,
    routes: ProgressRoutes,
    relay: Arc<Relay>,
    /// The message whose forwarding a dropped `receive()` left unfinished.
    forwarding: Option<Forwarding>,
}

impl<T> NotificationTap<T> {
    /// Taps `inner`, forwarding progress along `routes`, log messages and
    /// resource updates to the agents `relay` names.
    pub(crate) fn new(inner: T, routes: ProgressRoutes, relay: Arc<Relay>) -> Self {
        Self {
            inner,
            routes,
            relay,
            forwarding: None,
        }
    }
}

/// Sends one notification to an agent, within [`FORWARD_LIMIT`].
async fn deliver<E: std::fmt::Display>(
    what: &str,
    sent: impl std::future::Future<Output = Result<(), E>>,
) {
    match tokio::time::timeout(FORWARD_LIMIT, sent).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::debug!(%error, "{what} not delivered"),
        Err(_) => tracing::debug!("{what} forwarding timed out"),
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for NotificationTap<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        if self.forwarding.is_none() {
            // Cancel-safe as rmcp's transports are: nothing is taken
            // until this resolves, and nothing awaits between it and the
            // message being stored.
            let message = self.inner.receive().await?;
            self.forwarding = Some(Box::pin(forward(
                message,
                self.routes.clone(),
                self.relay.clone(),
            )));
        }
        let forwarding = self.forwarding.as_mut()?;
        let message = forwarding.await;
        self.forwarding = None;
        Some(message)
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Forwards `message` to the agents it concerns, then returns it.
async fn forward(
    message: RxJsonRpcMessage<RoleClient>,
    routes: ProgressRoutes,
    relay: Arc<Relay>,
) -> RxJsonRpcMessage<RoleClient> {
    let JsonRpcMessage::Notification(note) = &message else {
        return message;
    };
    match &note.notification {
        ServerNotification::ProgressNotification(progress) => {
            let target = lock(&routes).get(&progress.params.progress_token).cloned();
            // No route: the agent asked for no progress, or the call ended.
            if let Some(target) = target {
                let mut params = progress.params.clone();
                params.progress_token = target.token;
                deliver("progress", target.peer.notify_progress(params)).await;
            }
        }
        #[allow(deprecated)] // Logging is SEP-2577's legacy, still in use.
        ServerNotification::LoggingMessageNotification(log) => {
            // All at once: one agent slow to read holds up no other.
            let sends = relay.log_targets(log.params.level).into_iter().map(|agent| {
                let params = log.params.clone();
                async move { deliver("log message", agent.notify_logging_message(params)).await }
            });
            futures::future::join_all(sends).await;
        }
        ServerNotification::ResourceUpdatedNotification(updated) => {
            let sends = relay
                .subscribers(&updated.params.uri)
                .into_iter()
                .map(|agent| {
                    let params = updated.params.clone();
                    async move {
                        deliver("resource update", agent.notify_resource_updated(params)).await
                    }
                });
            futures::future::join_all(sends).await;
        }
        _ => {}
    }
    message
}
