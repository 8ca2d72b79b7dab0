//! An HTTP upstream is ready once its server can reach devboy.
//!
//! After the handshake rmcp opens the session's standalone stream (a GET)
//! in a task of its own, and `serve` returns before that GET is answered.
//! A server sends the requests that are not replies to one of devboy's
//! (an elicitation or sampling request made inside a tool call, a
//! resource update) on that stream, and a server that has no stream open
//! for the session drops them: the official TypeScript SDK does. So a call
//! devboy forwards the moment `serve` returns, as a busy machine lets it,
//! could wait for an elicitation that was never sent. [`Settling`] wraps
//! the HTTP client and tells when the first standalone GET is answered
//! (with a stream, or with "no SSE here"), and [`Settled::wait`] holds the
//! upstream back until then, within [`SETTLE_BOUND`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};
use tokio::sync::watch;

/// The longest an upstream is held back for its stream: a server that
/// takes longer to answer a GET than this is not kept from its calls.
pub(super) const SETTLE_BOUND: Duration = Duration::from_secs(3);

/// What [`Settling`] has seen, shared with its clones (rmcp clones the
/// client into each request's task).
struct Seen {
    /// The server gave the session an id: rmcp opens a standalone stream
    /// only then.
    session: AtomicBool,
    /// `true` once the first standalone GET has been answered or failed.
    answered: watch::Sender<bool>,
}

/// An HTTP client for rmcp's streamable transport that notes when the
/// session's first standalone stream is answered; everything else it hands
/// to the client it wraps unchanged.
#[derive(Clone)]
pub(super) struct Settling<C> {
    inner: C,
    seen: Arc<Seen>,
}

/// The waiting side of a [`Settling`] client.
pub(super) struct Settled {
    seen: Arc<Seen>,
    answered: watch::Receiver<bool>,
}

impl<C> Settling<C> {
    pub(super) fn new(inner: C) -> (Self, Settled) {
        let (answered, receiver) = watch::channel(false);
        let seen = Arc::new(Seen {
            session: AtomicBool::new(false),
            answered,
        });
        (
            Self {
                inner,
                seen: seen.clone(),
            },
            Settled {
                seen,
                answered: receiver,
            },
        )
    }

    /// Notes whether a POST's answer gave the session an id; passes it on.
    fn note_session<E>(
        &self,
        response: Result<StreamableHttpPostResponse, E>,
    ) -> Result<StreamableHttpPostResponse, E> {
        if let Ok(
            StreamableHttpPostResponse::Json(_, Some(_))
            | StreamableHttpPostResponse::Sse(_, Some(_)),
        ) = &response
        {
            self.seen.session.store(true, Ordering::Relaxed);
        }
        response
    }

    /// A GET was answered; a resumption carries the last event's id, the
    /// first GET of a session does not.
    fn note_answer(&self, first: bool) {
        if first {
            self.seen.answered.send_replace(true);
        }
    }
}

/// What a GET gives: the server's events.
type SseStream = BoxStream<'static, Result<Sse, SseError>>;

impl Settled {
    /// Waits, after a handshake that gave a session, until its standalone
    /// stream is answered or [`SETTLE_BOUND`] has passed. Returns at once
    /// when there is no session (no standalone stream will be opened).
    pub(super) async fn wait(mut self) {
        if !self.seen.session.load(Ordering::Relaxed) {
            return;
        }
        let answered = tokio::time::timeout(SETTLE_BOUND, self.answered.wait_for(|done| *done));
        if answered.await.is_err() {
            tracing::debug!(
                "the upstream's standalone stream was not answered within {} s; going on",
                SETTLE_BOUND.as_secs()
            );
        }
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Settling<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let response = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.note_session(response)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let response = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.note_session(response)
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<SseStream, StreamableHttpError<Self::Error>> {
        let first = last_event_id.is_none();
        let stream = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.note_answer(first);
        stream
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<SseStream, StreamableHttpError<Self::Error>> {
        let first = last_event_id.is_none();
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.note_answer(first);
        stream
    }
}
