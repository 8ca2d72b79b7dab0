//! `devboy serve --http`: MCP over Streamable HTTP at `/mcp`, one devboy
//! for several clients.
//!
//! Every MCP session (`Mcp-Session-Id`) gets its own [`Session`] — its own
//! pipeline memory, references, partition and telemetry — over one shared
//! [`Proxy`]: the upstreams start once and serve everyone. rmcp's
//! Streamable HTTP service does the protocol (sessions, SSE, `DELETE`,
//! idle expiry, the `Host`/`Origin` checks against DNS rebinding, the body
//! size limit); devboy's [`Guard`] stands in front of it: the path, the
//! bearer token (compared in constant time, never logged) and a per-token
//! rate limit. Binding an address other than loopback without a token is
//! refused at start.
//!
//! A session ends on `DELETE`, after its idle timeout, or when its client
//! is gone: [`ClientConnections`] watches which connections carried each
//! session, and a session whose client had held its SSE stream open ends
//! once none of them is left (a client that exits without `DELETE`, as
//! Claude Code does, closes them all).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionId, SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use sha2::{Digest, Sha256};
pub use tokio_util::sync::CancellationToken;

use crate::partition::PartitionWatcher;
use crate::serve::ServeError;
use crate::sync::lock;
use tower_layer::Layer as _;

/// The one path devboy answers MCP on.
pub const MCP_PATH: &str = "/mcp";
/// The environment variable a bearer token may come from.
pub const TOKEN_ENV: &str = "DEVBOY_HTTP_TOKEN";
/// Requests per second one token (or, without a token, one client
/// address) may make, by default; twice as many may come at once.
pub const DEFAULT_RATE_PER_SECOND: u32 = 50;
/// How long an MCP session may stay idle before it is ended, by default.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 60);

/// How long a session whose client held its SSE stream may be without
/// any connection before its client is taken for gone and the session
/// ends: time enough for a stream to reconnect (the SDKs retry after one
/// to three seconds).
pub const CLIENT_GONE_AFTER: Duration = Duration::from_secs(10);

/// How `devboy serve --http` listens.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// The address to listen on.
    pub addr: SocketAddr,
    /// The bearer token every request must carry; required unless `addr`
    /// is loopback.
    pub token: Option<String>,
    /// Browser origins allowed to call (`https://app.example.com`); a
    /// request with any other `Origin` is refused. Clients that are not
    /// browsers send none.
    pub allowed_origins: Vec<String>,
    /// `Host` values accepted besides loopback names (the address a remote
    /// client uses); with a non-loopback address and none given, any host
    /// is accepted, the token guarding the door.
    pub allowed_hosts: Vec<String>,
    /// Requests per second per token ([`DEFAULT_RATE_PER_SECOND`]).
    pub rate_per_second: u32,
    /// Idle sessions end after this long ([`DEFAULT_IDLE`]).
    pub idle: Duration,
    /// The largest request body accepted (as on stdio).
    pub max_body_bytes: usize,
}

impl HttpOptions {
    /// Options for `addr` with the defaults.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            rate_per_second: DEFAULT_RATE_PER_SECOND,
            idle: DEFAULT_IDLE,
            max_body_bytes: crate::wire::MAX_MESSAGE_BYTES,
        }
    }

    /// Why these options must not be served, if they must not: a token is
    /// required off loopback, and an empty one protects nothing.
    pub fn refusal(&self) -> Option<String> {
        match &self.token {
            Some(token) if token.trim().is_empty() => {
                Some("the bearer token is empty; give a token of at least 16 characters".into())
            }
            Some(token) if token.trim().chars().count() < 16 => Some(format!(
                "the bearer token has {} characters; give at least 16",
                token.trim().chars().count()
            )),
            None if !self.addr.ip().is_loopback() => Some(format!(
                "{} is not a loopback address: a bearer token is required (--token-file FILE or {TOKEN_ENV})",
                self.addr
            )),
            _ => None,
        }
    }
}

/// What stands in front of the MCP service: the path, the token, the rate.
pub struct Guard {
    /// SHA-256 of the token, compared with the request's in constant time.
    token: Option<[u8; 32]>,
    rate_per_second: u32,
    buckets: Mutex<HashMap<BucketKey, Bucket>>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum BucketKey {
    Token,
    Address(IpAddr),
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A request refused before it reaches MCP.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: StatusCode,
    /// What the body says.
    pub message: &'static str,
    /// Seconds to wait before retrying (429).
    pub retry_after: Option<u64>,
}

impl Guard {
    /// A guard requiring `token` (when given), allowing `rate_per_second`
    /// requests per second per token or client address.
    pub fn new(token: Option<&str>, rate_per_second: u32) -> Self {
        Self {
            token: token.map(|t| digest(t.trim())),
            rate_per_second: rate_per_second.max(1),
            buckets: Mutex::default(),
        }
    }

    /// Whether a request for `path` with `authorization` (the header's
    /// value) from `peer` may go on, at `now`.
    pub fn check(
        &self,
        path: &str,
        authorization: Option<&[u8]>,
        peer: IpAddr,
        now: Instant,
    ) -> Result<(), Refusal> {
        if path != MCP_PATH {
            return Err(Refusal {
                status: StatusCode::NOT_FOUND,
                message: "Not Found: devboy serves MCP at /mcp\n",
                retry_after: None,
            });
        }
        let key = match &self.token {
            Some(expected) => {
                let given = authorization
                    .and_then(|v| v.strip_prefix(b"Bearer ".as_slice()))
                    .map(|t| digest_bytes(t.trim_ascii()));
                let refused = match given {
                    None => Some("Unauthorized: send Authorization: Bearer <token>\n"),
                    Some(given) if !constant_time_eq(&given, expected) => {
                        Some("Unauthorized: the bearer token is not devboy's\n")
                    }
                    Some(_) => None,
                };
                if let Some(message) = refused {
                    // Guesses are rate-limited too, per client address.
                    self.take(BucketKey::Address(peer), now)?;
                    return Err(Refusal {
                        status: StatusCode::UNAUTHORIZED,
                        message,
                        retry_after: None,
                    });
                }
                BucketKey::Token
            }
            None => BucketKey::Address(peer),
        };
        self.take(key, now)
    }

    /// One request from `key`'s bucket: `rate_per_second` refill per
    /// second, up to twice that held.
    fn take(&self, key: BucketKey, now: Instant) -> Result<(), Refusal> {
        let rate = f64::from(self.rate_per_second);
        let mut buckets = lock(&self.buckets);
        if buckets.len() > 10_000 {
            // Addresses seen once long ago: their buckets are full again.
            buckets.retain(|_, b| now.duration_since(b.at) < Duration::from_secs(2));
        }
        let bucket = buckets.entry(key).or_insert(Bucket {
            tokens: rate * 2.0,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate * 2.0);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Refusal {
                status: StatusCode::TOO_MANY_REQUESTS,
                message: "Too Many Requests: slow down\n",
                retry_after: Some(1),
            })
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    digest_bytes(token.as_bytes())
}

fn digest_bytes(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Equal without an early exit: the time taken does not tell how much of
/// a guess was right (and the digests hide the token's length).
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Which open connections carried each session, so that a session whose
/// client is gone ends without waiting for its idle timeout.
///
/// Only a session whose client opened its SSE stream (`GET`) is ended
/// this way: such a client holds a connection for as long as it lives,
/// so having none for [`CLIENT_GONE_AFTER`] means it is gone. A client
/// that never opens the stream may well connect anew for each request;
/// its session ends on `DELETE` or when idle.
#[derive(Default)]
struct ClientConnections {
    sessions: Mutex<HashMap<SessionId, Carriers>>,
}

struct Carriers {
    /// Open connections that carried the session.
    open: usize,
    /// Whether one of them held the session's SSE stream.
    streamed: bool,
    /// Counts the times `open` fell to zero, so that a wait begun before
    /// the client came back (and left again) ends nothing.
    left: u64,
}

impl ClientConnections {
    /// `connection` carried `session` (a request answered with success);
    /// `stream` when it was the session's SSE stream.
    fn carried(&self, connection: &Mutex<Vec<SessionId>>, session: SessionId, stream: bool) {
        let mut sessions = lock(&self.sessions);
        let carriers = sessions.entry(session.clone()).or_insert(Carriers {
            open: 0,
            streamed: false,
            left: 0,
        });
        carriers.streamed |= stream;
        let mut carried = lock(connection);
        if !carried.contains(&session) {
            carried.push(session);
            carriers.open += 1;
        }
    }

    /// `carried`'s connection closed: the sessions it was the last
    /// connection of and whose client had streamed, each with the count
    /// to hand to [`Self::gone`] once [`CLIENT_GONE_AFTER`] has passed.
    fn closed(&self, carried: Vec<SessionId>) -> Vec<(SessionId, u64)> {
        let mut sessions = lock(&self.sessions);
        let mut waiting = Vec::new();
        for session in carried {
            let Some(carriers) = sessions.get_mut(&session) else {
                continue;
            };
            carriers.open = carriers.open.saturating_sub(1);
            if carriers.open > 0 {
                continue;
            }
            if carriers.streamed {
                carriers.left += 1;
                waiting.push((session, carriers.left));
            } else {
                sessions.remove(&session);
            }
        }
        waiting
    }

    /// Whether `session`'s client is gone: no connection came back since
    /// it left the `left`th time. Forgets the session if so.
    fn gone(&self, session: &SessionId, left: u64) -> bool {
        let mut sessions = lock(&self.sessions);
        let gone = sessions
            .get(session)
            .is_some_and(|c| c.open == 0 && c.left == left);
        if gone {
            sessions.remove(session);
        }
        gone
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// The `Mcp-Session-Id` in `headers`, if any.
fn session_header(headers: &http::HeaderMap) -> Option<SessionId> {
    headers
        .get(rmcp::transport::common::http_header::HEADER_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(SessionId::from)
}

fn refusal_response(refusal: &Refusal) -> Response<Body> {
    let mut response = Response::builder()
        .status(refusal.status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8");
    if refusal.status == StatusCode::UNAUTHORIZED {
        response = response.header(header::WWW_AUTHENTICATE, "Bearer");
    }
    if let Some(seconds) = refusal.retry_after {
        response = response.header(header::RETRY_AFTER, seconds.to_string());
    }
    response
        .body(Full::new(Bytes::from_static(refusal.message.as_bytes())).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

/// Serves MCP over Streamable HTTP on `http.addr` until SIGTERM/SIGINT or
/// `stop` is cancelled, then ends every session and stops the upstreams.
/// `ready` gets the address actually bound (port 0 picks one).
pub async fn serve_http(
    serving: crate::serve::Serving,
    http: HttpOptions,
    stop: CancellationToken,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    if let Some(why) = http.refusal() {
        return Err(ServeError::Refused(why));
    }
    let (listener, bound) = bind(http.addr).await?;
    let reload = serving.reload.clone();
    if serving.capture.is_some() {
        tracing::warn!("a capture records one session; over HTTP none is written");
    }
    let host = Arc::new(crate::serve::Host::start(crate::serve::Serving {
        capture: None,
        ..serving
    }));
    let sessions_end = stop.child_token();
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(http.idle);
    let manager = Arc::new(manager);
    let live = LiveSessions::default();
    let _control = host.control(format!("http {bound}{MCP_PATH}"), live.report(&manager));
    let _reload = host.reload(reload, live.on_pipeline());
    let service = StreamableHttpService::new(
        live.factory(host.clone()),
        manager.clone(),
        service_config(&http, sessions_end.clone()),
    );
    let service = GuardLayer::new(&http).layer(service);
    let clients = Arc::new(ClientConnections::default());
    tracing::info!(address = %bound, path = MCP_PATH, token = http.token.is_some(), "serving MCP over HTTP");
    ready(bound);
    let connections = tokio_util::task::TaskTracker::new();
    while let Some((stream, peer)) = next_connection(&listener, &stop).await {
        let carrying = Carrying {
            clients: clients.clone(),
            sessions: manager.clone(),
        };
        connections.spawn(serve_connection(
            stream,
            peer,
            service.clone(),
            carrying,
            stop.clone(),
        ));
    }
    // Sessions end (their SSE streams close), connections drain briefly,
    // and the upstreams stop.
    sessions_end.cancel();
    connections.close();
    let _ = tokio::time::timeout(crate::serve::ENDING / 2, connections.wait()).await;
    let _ = tokio::time::timeout(crate::serve::ENDING / 2, host.proxy().shutdown()).await;
    Ok(())
}

/// The next connection, or `None` once `stop` is cancelled or a signal
/// asks devboy to end.
async fn next_connection(
    listener: &tokio::net::TcpListener,
    stop: &CancellationToken,
) -> Option<(tokio::net::TcpStream, SocketAddr)> {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => return None,
            signal = crate::serve::termination() => {
                tracing::info!(%signal, "stopping");
                return None;
            }
        };
        match accepted {
            Ok(connection) => return Some(connection),
            Err(error) => {
                // Out of file descriptors, say: wait a little, keep serving.
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The listener on `addr`, and the address it bound.
async fn bind(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), ServeError> {
    let refused = |e: std::io::Error| ServeError::Refused(format!("cannot listen on {addr}: {e}"));
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(refused)?;
    let bound = listener.local_addr().map_err(refused)?;
    Ok((listener, bound))
}

/// The browser origins a loopback devboy accepts without being told.
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

/// rmcp's Streamable HTTP settings for `http`: sessions end with `end`,
/// the body limit, and the `Origin` and `Host` checks (loopback accepts
/// its own names and the hosts given).
fn service_config(http: &HttpOptions, end: CancellationToken) -> StreamableHttpServerConfig {
    let loopback = http.addr.ip().is_loopback();
    let mut origins = http.allowed_origins.clone();
    if loopback {
        // A page served from this machine may call a loopback devboy (the
        // MCP spec's DNS-rebinding rule: localhost, 127.0.0.1 and [::1],
        // any port); any other origin only when given.
        origins.extend(LOOPBACK_ORIGINS.iter().map(|o| (*o).to_owned()));
    }
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(end)
        .with_max_request_body_bytes(http.max_body_bytes)
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    if loopback {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
            .iter()
            .map(|h| (*h).to_owned())
            .collect();
        hosts.extend(http.allowed_hosts.iter().cloned());
        config.with_allowed_hosts(hosts)
    } else if http.allowed_hosts.is_empty() {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(http.allowed_hosts.clone())
    }
}

/// The sessions of one HTTP devboy: new ones follow the pipeline config as
/// it is now (the host keeps it); live ones are told when it changes
/// (their processors, held weakly).
#[derive(Default)]
struct LiveSessions {
    processors: Arc<Mutex<Vec<std::sync::Weak<crate::processor::PipelineProcessor>>>>,
}

impl LiveSessions {
    /// The live sessions' figures for `devboy status`.
    fn report(&self, manager: &Arc<LocalSessionManager>) -> crate::control::SessionsReport {
        let (counted, reported) = (manager.clone(), self.processors.clone());
        Arc::new(move || {
            let live: Vec<serde_json::Value> = lock(&reported)
                .iter()
                .filter_map(std::sync::Weak::upgrade)
                .map(|processor| serde_json::json!({"savings": processor.report()}))
                .collect();
            serde_json::json!({
                "open": counted.sessions.try_read().map(|s| s.len()).ok(),
                "sessions": live,
            })
        })
    }

    /// What a pipeline config read again does to the live sessions: their
    /// processors follow it.
    fn on_pipeline(&self) -> crate::reload::ApplyPipeline {
        let processors = self.processors.clone();
        Arc::new(move |config| {
            lock(&processors).retain(|weak| match weak.upgrade() {
                Some(processor) => {
                    processor.set_config(config.clone());
                    true
                }
                None => false,
            });
        })
    }

    /// Makes each new MCP session, composed by `host`.
    fn factory(
        &self,
        host: Arc<crate::serve::Host>,
    ) -> impl Fn() -> Result<crate::session::Session, std::io::Error> + Send + Sync + 'static {
        let processors = self.processors.clone();
        move || {
            // HTTP clients are not in devboy's working directory: their
            // context partition advances through devboy_compact only.
            let session = host
                .session(PartitionWatcher::manual())
                .end_when_dropped()
                .build();
            if let Some(processor) = session.pipeline_memory() {
                let mut live = lock(&processors);
                live.retain(|weak| weak.strong_count() > 0);
                live.push(Arc::downgrade(processor));
            }
            Ok(session)
        }
    }
}

/// The client's address, put on each request by the connection that
/// carried it (for the guard's rate limit).
#[derive(Clone, Copy, Debug)]
struct PeerAddr(IpAddr);

/// The [`Guard`] as a tower layer around the MCP service: a request it
/// refuses is answered here and never reaches the service.
#[derive(Clone)]
pub struct GuardLayer {
    guard: Arc<Guard>,
}

impl GuardLayer {
    /// The guard `http` asks for (its token and rate).
    pub fn new(http: &HttpOptions) -> Self {
        Self {
            guard: Arc::new(Guard::new(http.token.as_deref(), http.rate_per_second)),
        }
    }
}

impl<S> tower_layer::Layer<S> for GuardLayer {
    type Service = Guarded<S>;

    fn layer(&self, inner: S) -> Guarded<S> {
        Guarded {
            inner,
            guard: self.guard.clone(),
        }
    }
}

/// A service behind the [`Guard`].
#[derive(Clone)]
pub struct Guarded<S> {
    inner: S,
    guard: Arc<Guard>,
}

impl<S, B> tower_service::Service<Request<B>> for Guarded<S>
where
    S: tower_service::Service<Request<B>, Response = Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let peer = request
            .extensions()
            .get::<PeerAddr>()
            .map_or(IpAddr::from([0, 0, 0, 0]), |p| p.0);
        let checked = self.guard.check(
            request.uri().path(),
            request
                .headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes()),
            peer,
            Instant::now(),
        );
        match checked {
            Ok(()) => Box::pin(self.inner.call(request)),
            Err(refusal) => {
                tracing::debug!(status = %refusal.status, %peer, "request refused");
                let response = refusal_response(&refusal);
                Box::pin(async move { Ok(response) })
            }
        }
    }
}

/// What a connection reports the sessions it carried to.
#[derive(Clone)]
struct Carrying {
    clients: Arc<ClientConnections>,
    sessions: Arc<LocalSessionManager>,
}

/// Serves one HTTP/1.1 connection through `service` until it ends or
/// `closing` asks it to, noting which sessions it carried; a session whose
/// client is then gone ends after [`CLIENT_GONE_AFTER`].
async fn serve_connection<S>(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    service: S,
    carrying: Carrying,
    closing: CancellationToken,
) where
    S: tower_service::Service<
            Request<hyper::body::Incoming>,
            Response = Response<Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let carried: Arc<Mutex<Vec<SessionId>>> = Arc::default();
    let (clients, connection_carried) = (carrying.clients.clone(), carried.clone());
    let handler = hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
        let mut service = service.clone();
        let (clients, carried) = (clients.clone(), connection_carried.clone());
        request.extensions_mut().insert(PeerAddr(peer.ip()));
        let ending = request.method() == http::Method::DELETE;
        let stream = request.method() == http::Method::GET;
        let asked = session_header(request.headers());
        async move {
            futures::future::poll_fn(|cx| service.poll_ready(cx)).await?;
            let mut response = service.call(request).await?;
            // An initialize answer names its new session.
            let session = session_header(response.headers()).or(asked);
            if let Some(session) = session {
                if response.status().is_success() && !ending {
                    clients.carried(&carried, session, stream);
                }
            }
            // The session is ended by then: say so (clients such as the
            // Python SDK expect 200 or 204).
            if ending && response.status() == StatusCode::ACCEPTED {
                *response.status_mut() = StatusCode::NO_CONTENT;
            }
            Ok::<_, Infallible>(response)
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(stream), handler);
    tokio::pin!(connection);
    tokio::select! {
        served = connection.as_mut() => {
            if let Err(error) = served {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        }
        () = closing.cancelled() => connection.as_mut().graceful_shutdown(),
    }
    let carried = std::mem::take(&mut *lock(&carried));
    for (session, left) in carrying.clients.closed(carried) {
        let Carrying { clients, sessions } = carrying.clone();
        tokio::spawn(async move {
            tokio::time::sleep(CLIENT_GONE_AFTER).await;
            if clients.gone(&session, left) {
                tracing::debug!(%session, "the client left without DELETE: ending its session");
                if let Err(error) = sessions.close_session(&session).await {
                    tracing::debug!(%error, %session, "ending a session failed");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn localhost() -> IpAddr {
        IpAddr::from([127, 0, 0, 1])
    }

    #[test]
    fn a_token_is_required_off_loopback_and_must_be_long_enough() {
        let mut options = HttpOptions::new("0.0.0.0:8080".parse().unwrap());
        assert!(options
            .refusal()
            .unwrap()
            .contains("bearer token is required"));
        options.token = Some("short".into());
        assert!(options.refusal().unwrap().contains("at least 16"));
        options.token = Some("a-token-of-enough-length".into());
        assert_eq!(options.refusal(), None);
        let local = HttpOptions::new("127.0.0.1:0".parse().unwrap());
        assert_eq!(local.refusal(), None);
        let mut empty = local.clone();
        empty.token = Some("  \n".into());
        assert!(empty.refusal().unwrap().contains("empty"));
    }

    #[test]
    fn the_guard_checks_path_then_token_then_rate() {
        let guard = Guard::new(Some("sixteen-chars-token\n"), 1);
        let now = Instant::now();
        let good = Some(b"Bearer sixteen-chars-token".as_slice());
        assert_eq!(
            guard
                .check("/other", good, localhost(), now)
                .unwrap_err()
                .status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            guard
                .check(MCP_PATH, None, localhost(), now)
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        let wrong = Some(b"Bearer sixteen-chars-tokeN".as_slice());
        assert_eq!(
            guard
                .check(MCP_PATH, wrong, localhost(), now)
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        let basic = Some(b"Basic c2l4dGVlbg==".as_slice());
        assert!(guard.check(MCP_PATH, basic, localhost(), now).is_err());
        // Two at once (twice the rate), then one per second.
        assert_eq!(guard.check(MCP_PATH, good, localhost(), now), Ok(()));
        assert_eq!(guard.check(MCP_PATH, good, localhost(), now), Ok(()));
        let limited = guard.check(MCP_PATH, good, localhost(), now).unwrap_err();
        assert_eq!(
            (limited.status, limited.retry_after),
            (StatusCode::TOO_MANY_REQUESTS, Some(1))
        );
        let later = now + Duration::from_millis(1_100);
        assert_eq!(guard.check(MCP_PATH, good, localhost(), later), Ok(()));
    }

    #[test]
    fn wrong_tokens_are_rate_limited_per_address() {
        let guard = Guard::new(Some("sixteen-chars-token"), 1);
        let now = Instant::now();
        let wrong = Some(b"Bearer guess-guess-guess".as_slice());
        for _ in 0..2 {
            let refused = guard.check(MCP_PATH, wrong, localhost(), now).unwrap_err();
            assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
        }
        let limited = guard.check(MCP_PATH, wrong, localhost(), now).unwrap_err();
        assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
        // The token's own bucket is untouched.
        let good = Some(b"Bearer sixteen-chars-token".as_slice());
        assert_eq!(guard.check(MCP_PATH, good, localhost(), now), Ok(()));
    }

    #[test]
    fn without_a_token_each_address_has_its_own_rate() {
        let guard = Guard::new(None, 1);
        let now = Instant::now();
        let other = IpAddr::from([127, 0, 0, 2]);
        for _ in 0..2 {
            assert_eq!(guard.check(MCP_PATH, None, localhost(), now), Ok(()));
        }
        assert!(guard.check(MCP_PATH, None, localhost(), now).is_err());
        assert_eq!(guard.check(MCP_PATH, None, other, now), Ok(()));
    }

    #[test]
    fn only_a_streamed_session_with_no_connection_left_is_gone() {
        let clients = ClientConnections::default();
        let (first, second) = (Mutex::default(), Mutex::default());
        let (streamed, posted) = (SessionId::from("s"), SessionId::from("p"));
        clients.carried(&first, streamed.clone(), true);
        clients.carried(&first, streamed.clone(), false);
        clients.carried(&second, streamed.clone(), false);
        clients.carried(&first, posted.clone(), false);
        // One connection of two closed: the client is still there; a
        // session that never streamed is only forgotten.
        assert_eq!(clients.closed(std::mem::take(&mut *lock(&first))), []);
        let waiting = clients.closed(std::mem::take(&mut *lock(&second)));
        assert_eq!(waiting, [(streamed.clone(), 1)]);
        // It came back (and left again) before the wait ended: the first
        // wait ends nothing, the second does.
        clients.carried(&first, streamed.clone(), false);
        assert!(!clients.gone(&streamed, 1));
        let again = clients.closed(std::mem::take(&mut *lock(&first)));
        assert_eq!(again, [(streamed.clone(), 2)]);
        assert!(!clients.gone(&streamed, 1));
        assert!(clients.gone(&streamed, 2));
        assert!(!clients.gone(&streamed, 2));
        assert!(!clients.gone(&posted, 1));
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(&digest("a"), &digest("a")));
        assert!(!constant_time_eq(&digest("a"), &digest("b")));
    }
}
