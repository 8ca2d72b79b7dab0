//! A transport wrapper that forwards upstream progress in order.
//!
//! rmcp dispatches notifications to handlers on spawned tasks, so a progress
//! notification the upstream sent *before* its response could otherwise reach
//! the agent after it (or be dropped because the call already ended). The
//! tap sees every incoming message inside `receive()`, which the service loop
//! awaits sequentially: a progress notification is forwarded (and written to
//! the agent) before the next message, the response, is even read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{JsonRpcMessage, ProgressToken, ServerNotification};
use rmcp::service::Peer;
use rmcp::transport::Transport;
use rmcp::{RoleClient, RoleServer};

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

/// Wraps an upstream transport; see the module docs.
pub(crate) struct ProgressTap<T> {
    inner: T,
    routes: ProgressRoutes,
}

impl<T> ProgressTap<T> {
    /// Taps `inner`, forwarding progress along `routes`.
    pub(crate) fn new(inner: T, routes: ProgressRoutes) -> Self {
        Self { inner, routes }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressTap<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(note) = &message {
            if let ServerNotification::ProgressNotification(progress) = &note.notification {
                let target = lock(&self.routes)
                    .get(&progress.params.progress_token)
                    .cloned();
                // No route: the agent asked for no progress, or the call ended.
                if let Some(target) = target {
                    let mut params = progress.params.clone();
                    params.progress_token = target.token;
                    match tokio::time::timeout(FORWARD_LIMIT, target.peer.notify_progress(params))
                        .await
                    {
                        Ok(Ok(())) => {}
                        Ok(Err(error)) => tracing::debug!(%error, "progress not delivered"),
                        Err(_) => tracing::debug!("progress forwarding timed out"),
                    }
                }
            }
        }
        Some(message)
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
