//! A small HTTP/1.1 server on loopback for scripted stand-ins of remote
//! APIs: requests parsed (Content-Length or chunked bodies), each answered
//! by an async handler, on its own thread and Tokio runtime (so blocking
//! test code cannot starve it); it stops when dropped.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Context as _};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Largest request body accepted (Claude Code's requests are a few hundred KB).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Answers one request.
pub(crate) type Handler =
    Arc<dyn Fn(HttpRequest) -> Pin<Box<dyn Future<Output = HttpResponse> + Send>> + Send + Sync>;

/// A running server.
#[derive(Debug)]
pub(crate) struct LoopbackServer {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl LoopbackServer {
    /// Binds `127.0.0.1:0` and serves `handler` on a thread named `name`.
    pub(crate) fn start(name: &str, handler: Handler) -> anyhow::Result<Self> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .context("loopback server: bind 127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("loopback server: build runtime")?;
        let (tx, rx) = oneshot::channel::<()>();
        let thread_handler = handler;
        let thread = std::thread::Builder::new()
            .name(format!("{name}-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => {
                            eprintln!("loopback server: listener: {e}");
                            return;
                        }
                    };
                    tokio::pin!(rx);
                    loop {
                        tokio::select! {
                            _ = &mut rx => break,
                            accepted = listener.accept() => match accepted {
                                Ok((stream, _)) => {
                                    tokio::spawn(serve_connection(stream, Arc::clone(&thread_handler)));
                                }
                                Err(e) => eprintln!("loopback server: accept: {e}"),
                            },
                        }
                    }
                });
            })
            .context("loopback server: spawn thread")?;
        Ok(Self {
            addr,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A parsed HTTP/1.1 request.
pub(crate) struct HttpRequest {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl HttpRequest {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP response about to be written.
pub(crate) struct HttpResponse {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: Vec<u8>,
}

impl HttpResponse {
    pub(crate) fn json(status: u16, value: &Value) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
        }
    }

    pub(crate) fn error(status: u16, kind: &str, message: &str) -> Self {
        Self::json(
            status,
            &json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }
}

async fn serve_connection(stream: TcpStream, handler: Handler) {
    let (read_half, mut write_half) = stream.into_split();
    let mut reader = tokio::io::BufReader::new(read_half);
    loop {
        let request = match read_request(&mut reader).await {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                let resp = HttpResponse::error(400, "invalid_request_error", &e.to_string());
                let _ = write_response(&mut write_half, "POST", &resp, true).await;
                return;
            }
        };
        let close = request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let method = request.method.clone();
        let response = handler(request).await;
        if write_response(&mut write_half, &method, &response, close)
            .await
            .is_err()
            || close
        {
            return;
        }
    }
}

/// Reads one request; `Ok(None)` on a clean end of stream before a request.
async fn read_request<R: AsyncRead + Unpin>(
    reader: &mut tokio::io::BufReader<R>,
) -> anyhow::Result<Option<HttpRequest>> {
    use tokio::io::AsyncBufReadExt as _;
    let mut line = String::new();
    // Skip stray empty lines between requests.
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        bail!("malformed request line {line:?}");
    };
    let (method, target) = (method.to_owned(), target.to_owned());
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            bail!("connection closed inside headers");
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        let (k, v) = l
            .split_once(':')
            .with_context(|| format!("malformed header {l:?}"))?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let mut request = HttpRequest {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    if request
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        loop {
            line.clear();
            reader.read_line(&mut line).await?;
            let size_hex = line.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size_hex, 16)
                .with_context(|| format!("bad chunk size {size_hex:?}"))?;
            if request.body.len() + size > MAX_BODY {
                bail!("request body over {MAX_BODY} bytes");
            }
            if size == 0 {
                // Trailers until an empty line.
                loop {
                    line.clear();
                    if reader.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = request.body.len();
            request.body.resize(start + size, 0);
            reader.read_exact(&mut request.body[start..]).await?;
            line.clear();
            reader.read_line(&mut line).await?;
        }
    } else if let Some(len) = request.header("content-length") {
        let len: usize = len
            .parse()
            .with_context(|| format!("bad content-length {len:?}"))?;
        if len > MAX_BODY {
            bail!("request body over {MAX_BODY} bytes");
        }
        request.body.resize(len, 0);
        reader.read_exact(&mut request.body).await?;
    }
    Ok(Some(request))
}

async fn write_response(
    w: &mut tokio::net::tcp::OwnedWriteHalf,
    method: &str,
    response: &HttpResponse,
    close: bool,
) -> std::io::Result<()> {
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-cache\r\nrequest-id: req_scripted\r\nConnection: {}\r\n\r\n",
        response.status,
        reason,
        response.content_type,
        response.body.len(),
        if close { "close" } else { "keep-alive" },
    );
    w.write_all(head.as_bytes()).await?;
    if method != "HEAD" {
        w.write_all(&response.body).await?;
    }
    w.flush().await
}
