//! devboy's own line framing of JSON-RPC, for the agent's stdio and for
//! stdio upstreams.
//!
//! rmcp's line transport drops a line over 16 MiB with an error log and an
//! unparsable line with a debug log, so an oversized upstream result showed
//! up as a timeout and a client's broken request was never answered. Here
//! every line gets an outcome:
//!
//! - a message rmcp can type goes to rmcp;
//! - a line that is not JSON is answered `-32700` with `id: null`;
//! - a request whose params do not fit its method is answered `-32602`
//!   with its own id (rmcp would route it as an unknown method, or answer
//!   without an id);
//! - a line over [`MAX_MESSAGE_BYTES`] is skipped without being held in
//!   memory, while its top-level `id` and `method` are picked out on the
//!   way (`Skim`); a request is answered at once with its size and the
//!   limit, and a response from an upstream becomes an error response to
//!   the pending call, so the caller never waits for a timeout.
//!
//! Everything written goes through one writer task per connection, so an
//! error reply never interleaves with rmcp's own writes.

use std::borrow::Cow;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestMethod, CallToolResult, ClientRequest, CompleteRequest,
    CompleteRequestMethod, ConstString, ErrorCode, ErrorData, GetPromptRequest,
    GetPromptRequestMethod, InitializeRequest, InitializeResultMethod, JsonRpcMessage,
    JsonRpcRequest, JsonRpcResponse, ListPromptsRequest, ListPromptsRequestMethod,
    ListResourceTemplatesRequest, ListResourceTemplatesRequestMethod, ListResourcesRequest,
    ListResourcesRequestMethod, ListToolsRequest, ListToolsRequestMethod, PingRequest,
    PingRequestMethod, ReadResourceRequest, ReadResourceRequestMethod, RequestId, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleClient, RoleServer};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// The largest JSON-RPC message devboy reads, in either direction.
///
/// A limit has to exist: a peer that never sends a newline would otherwise
/// grow the buffer until the process dies. 64 MiB is four times rmcp's
/// 16 MiB and far above what a model can take (Claude Code shows at most
/// 25,000 tokens of a result), yet a result must be read whole before
/// devboy's pipeline can shrink it, and a parsed result costs a few times
/// its size in memory, so the limit stays well below what a laptop can
/// spare for one call.
pub(crate) const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The longest line devboy writes. A client drops the whole connection for
/// one line it cannot take (Claude Code past 16 MB); results are cut far
/// below this (`frame.rs`), so a longer line is a bug, and the answer is
/// an error for its request rather than the connection.
pub(crate) const MAX_WRITTEN_BYTES: usize = 12 * 1024 * 1024;

/// JSON-RPC 2.0 "Parse error".
const PARSE_ERROR: i32 = -32700;
/// JSON-RPC 2.0 "Invalid Request".
const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC 2.0 "Invalid params".
const INVALID_PARAMS: i32 = -32602;
/// How many writes may queue before senders wait for the writer.
const WRITE_QUEUE: usize = 16;
/// How long closing waits for queued writes to drain.
const CLOSE_DRAIN: Duration = Duration::from_secs(5);
/// Longest raw `id`/`method` value [`Skim`] keeps from an oversized line.
const SKIM_VALUE_MAX: usize = 1024;

/// A size for people: `70.0 MiB (73400320 bytes)`.
fn describe_size(bytes: usize) -> String {
    format!(
        "{:.1} MiB ({bytes} bytes)",
        bytes as f64 / (1024.0 * 1024.0)
    )
}

/// One unit read off the stream.
#[derive(Debug)]
enum Frame {
    /// A complete line, without its `\n`.
    Line(Vec<u8>),
    /// A line longer than the limit, already skipped.
    Oversized(Skimmed),
    /// The peer closed the stream.
    Eof,
}

/// Reads `\n`-terminated lines of at most `limit` bytes.
///
/// Cancel-safe: all state lives in the struct and bytes are consumed from
/// the buffered reader only after they were copied (or skimmed), with no
/// await in between, so `receive()` may be dropped inside rmcp's `select!`
/// without losing or duplicating input.
struct LineReader<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
    /// Set while the rest of an oversized line is being skipped.
    skim: Option<Skim>,
    limit: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(reader: R, limit: usize) -> Self {
        Self {
            reader: BufReader::with_capacity(64 * 1024, reader),
            line: Vec::new(),
            skim: None,
            limit,
        }
    }

    async fn next_frame(&mut self) -> io::Result<Frame> {
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                // An unterminated last line still counts: the peer may have
                // closed right after writing it.
                if let Some(skim) = self.skim.take() {
                    return Ok(Frame::Oversized(skim.finish()));
                }
                if self.line.is_empty() {
                    return Ok(Frame::Eof);
                }
                return Ok(Frame::Line(std::mem::take(&mut self.line)));
            }
            let newline = memchr::memchr(b'\n', available);
            let chunk = &available[..newline.unwrap_or(available.len())];
            let consumed = newline.map_or(available.len(), |at| at + 1);
            if let Some(skim) = &mut self.skim {
                skim.feed(chunk);
            } else if self.line.len() + chunk.len() > self.limit {
                let mut skim = Skim::default();
                skim.feed(&self.line);
                skim.feed(chunk);
                // Give the memory back now, not at the next large line.
                self.line = Vec::new();
                self.skim = Some(skim);
            } else {
                self.line.extend_from_slice(chunk);
            }
            self.reader.consume(consumed);
            if newline.is_some() {
                if let Some(skim) = self.skim.take() {
                    return Ok(Frame::Oversized(skim.finish()));
                }
                return Ok(Frame::Line(std::mem::take(&mut self.line)));
            }
        }
    }
}

/// Where [`Skim`] is within the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Top {
    /// Not inside a top-level object (before it, or in an array).
    #[default]
    Outside,
    /// Expecting a member name (after `{` or `,`).
    Key,
    /// Inside a member name.
    InKey,
    /// After a member name, before `:`.
    AfterKey,
    /// Inside a member value.
    Value,
}

/// Picks the top-level `id` and `method` out of a JSON text fed in pieces,
/// in constant memory: a streaming tokenizer that tracks nesting and
/// strings only, enough to know which bytes form a top-level member.
#[derive(Debug, Default)]
struct Skim {
    bytes: usize,
    depth: u32,
    in_string: bool,
    escaped: bool,
    top: Top,
    key: Vec<u8>,
    /// Raw bytes of the value being kept, and for which member.
    capture: Option<(Member, Vec<u8>)>,
    id: Option<Vec<u8>>,
    method: Option<Vec<u8>>,
    has_result: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Id,
    Method,
}

/// What was picked out of a line over the limit.
#[derive(Debug, Default)]
pub(crate) struct Skimmed {
    /// The line's length in bytes.
    pub bytes: usize,
    /// Its top-level `id`, when it had a short one.
    pub id: Option<Value>,
    /// Its top-level `method`, when it had one.
    pub method: Option<String>,
    /// Whether it had a top-level `result` or `error`: a response.
    pub response: bool,
}

impl Skim {
    fn feed(&mut self, chunk: &[u8]) {
        self.bytes += chunk.len();
        let mut at = 0;
        while at < chunk.len() {
            // The bulk of a large message is string content nobody keeps:
            // jump to the next byte that can end the string.
            if self.in_string && !self.escaped && self.capture.is_none() && self.top != Top::InKey {
                match memchr::memchr2(b'"', b'\\', &chunk[at..]) {
                    Some(skip) => at += skip,
                    None => return,
                }
            }
            self.step(chunk[at]);
            at += 1;
        }
    }

    fn step(&mut self, b: u8) {
        if self.in_string {
            if self.top == Top::InKey && self.depth == 1 {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    self.top = Top::AfterKey;
                    return;
                }
                // Only short names matter; a long one is none of ours.
                if self.key.len() <= 8 {
                    self.key.push(b);
                }
                return;
            }
            self.keep(b);
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.top == Top::Key {
                    self.top = Top::InKey;
                    self.key.clear();
                } else {
                    self.keep(b);
                }
            }
            b'{' | b'[' => {
                self.keep(b);
                self.depth += 1;
                if self.depth == 1 {
                    self.top = if b == b'{' { Top::Key } else { Top::Outside };
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                    self.top = Top::Outside;
                } else {
                    self.keep(b);
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 && self.top == Top::AfterKey => {
                self.top = Top::Value;
                let member = match self.key.as_slice() {
                    b"id" => Some(Member::Id),
                    b"method" => Some(Member::Method),
                    b"result" | b"error" => {
                        self.has_result = true;
                        None
                    }
                    _ => None,
                };
                self.capture = member.map(|m| (m, Vec::new()));
            }
            b',' if self.depth == 1 && self.top != Top::Outside => {
                self.end_value();
                self.top = Top::Key;
            }
            _ => self.keep(b),
        }
    }

    fn keep(&mut self, b: u8) {
        if let Some((_, raw)) = &mut self.capture {
            if raw.len() < SKIM_VALUE_MAX {
                raw.push(b);
            } else {
                // Too long to be an id or a method name.
                self.capture = None;
            }
        }
    }

    fn end_value(&mut self) {
        if let Some((member, raw)) = self.capture.take() {
            match member {
                Member::Id => self.id = Some(raw),
                Member::Method => self.method = Some(raw),
            }
        }
    }

    fn finish(mut self) -> Skimmed {
        // A line cut off inside the value still yields what was read.
        self.end_value();
        let parse =
            |raw: Option<Vec<u8>>| raw.and_then(|r| serde_json::from_slice::<Value>(&r).ok());
        Skimmed {
            bytes: self.bytes,
            id: parse(self.id),
            method: parse(self.method).and_then(|m| m.as_str().map(str::to_owned)),
            response: self.has_result,
        }
    }
}

/// The outcome of one line, decided by the side of the connection.
pub(crate) enum Verdict<R: ServiceRole> {
    /// Hand this to rmcp.
    Deliver(RxJsonRpcMessage<R>),
    /// Write this line back to the peer (an error reply).
    Answer(Vec<u8>),
    /// Nothing to do (already logged).
    Skip,
}

/// How one side of a connection judges what its peer sent. Implemented for
/// [`RoleServer`] (devboy facing the agent) and [`RoleClient`] (devboy
/// facing an upstream).
pub(crate) trait WireRole: ServiceRole {
    /// The longest line written to the peer: an answer past it is
    /// replaced by an error for its request (`None`: no limit; devboy's
    /// requests to an upstream carry what the agent sent).
    const WRITE_LIMIT: Option<usize>;
    /// A complete line within the limit.
    fn judge_line(line: &[u8], peer: &str) -> Verdict<Self>;
    /// A line over `limit`, already skipped.
    fn judge_oversized(skimmed: &Skimmed, peer: &str, limit: usize) -> Verdict<Self>;
}

/// A request id that JSON-RPC allows (a string or an integer).
fn usable_id(id: &Value) -> bool {
    serde_json::from_value::<RequestId>(id.clone()).is_ok()
}

/// One JSON-RPC error response as a line.
fn error_line(id: Option<&Value>, code: i32, message: String, data: Option<Value>) -> Vec<u8> {
    let mut error = json!({ "code": code, "message": message });
    if let Some(data) = data {
        error["data"] = data;
    }
    let reply = json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": error,
    });
    let mut line = reply.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// The line without a UTF-8 byte order mark, `\r` and surrounding blanks.
fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    line.trim_ascii()
}

fn typed_error<T: DeserializeOwned>(request: Value) -> Option<String> {
    serde_json::from_value::<T>(request)
        .err()
        .map(|e| e.to_string())
}

type ParamsCheck = fn(Value) -> Option<String>;

/// The client requests rmcp types; anything else with these names that
/// rmcp could not type has params that do not fit.
const TYPED_REQUESTS: &[(&str, ParamsCheck)] = &[
    (CallToolRequestMethod::VALUE, typed_error::<CallToolRequest>),
    (
        ListToolsRequestMethod::VALUE,
        typed_error::<ListToolsRequest>,
    ),
    (
        ReadResourceRequestMethod::VALUE,
        typed_error::<ReadResourceRequest>,
    ),
    (
        ListResourcesRequestMethod::VALUE,
        typed_error::<ListResourcesRequest>,
    ),
    (
        ListResourceTemplatesRequestMethod::VALUE,
        typed_error::<ListResourceTemplatesRequest>,
    ),
    (
        GetPromptRequestMethod::VALUE,
        typed_error::<GetPromptRequest>,
    ),
    (
        ListPromptsRequestMethod::VALUE,
        typed_error::<ListPromptsRequest>,
    ),
    (
        InitializeResultMethod::VALUE,
        typed_error::<InitializeRequest>,
    ),
    (PingRequestMethod::VALUE, typed_error::<PingRequest>),
    (CompleteRequestMethod::VALUE, typed_error::<CompleteRequest>),
];

/// Why `params` do not fit `method`, for a method rmcp types; `None` when
/// they do or the method is not one of those.
fn params_mismatch(method: &str, params: Option<&Value>) -> Option<String> {
    let (_, check) = TYPED_REQUESTS.iter().find(|(name, _)| *name == method)?;
    let mut request = json!({ "method": method });
    if let Some(params) = params {
        request["params"] = params.clone();
    }
    check(request)
}

/// The reply to a request (valid JSON with `method` and `id`) that rmcp
/// could not type; `None` when it is not a request.
fn reply_to_untyped_request(message: &Value, detail: &str) -> Option<Vec<u8>> {
    let object = message.as_object()?;
    let id = object.get("id")?;
    if !usable_id(id) {
        return Some(error_line(
            None,
            INVALID_REQUEST,
            format!("invalid request: `id` must be a string or an integer, got {id}"),
            None,
        ));
    }
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        // `id` without a method is a response, unless there is nothing else.
        if object.contains_key("result") || object.contains_key("error") {
            return None;
        }
        return Some(error_line(
            Some(id),
            INVALID_REQUEST,
            "invalid request: `method` must be a string".into(),
            None,
        ));
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(error_line(
            Some(id),
            INVALID_REQUEST,
            "invalid request: `jsonrpc` must be \"2.0\"".into(),
            None,
        ));
    }
    let detail = params_mismatch(method, object.get("params")).unwrap_or_else(|| detail.into());
    Some(error_line(
        Some(id),
        INVALID_PARAMS,
        format!("invalid params for `{method}`: {detail}"),
        None,
    ))
}

/// A client's `tools/call`, read straight into its type, for the reason
/// [`tool_call_answer`] gives: rmcp buffers the message once to tell its
/// shape and again to tell its method. A line that reads whole as a
/// JSON-RPC request of `tools/call` (rmcp's own request type checks the
/// method and reads `_meta` as it does) is the message rmcp makes of it; a
/// line with a `"result"` or `"error"` key anywhere, or without
/// `"tools/call"`, goes rmcp's way.
fn tool_call_request(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    let has = |key: &[u8]| memchr::memmem::find(line, key).is_some();
    if !has(b"\"tools/call\"") || has(b"\"result\"") || has(b"\"error\"") {
        return None;
    }
    let request: JsonRpcRequest<CallToolRequest> = serde_json::from_slice(line).ok()?;
    Some(JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc: request.jsonrpc,
        id: request.id,
        request: ClientRequest::CallToolRequest(request.request),
    }))
}

impl WireRole for RoleServer {
    const WRITE_LIMIT: Option<usize> = Some(MAX_WRITTEN_BYTES);

    fn judge_line(line: &[u8], peer: &str) -> Verdict<Self> {
        let line = trim_line(line);
        if line.is_empty() {
            return Verdict::Skip;
        }
        if let Some(call) = tool_call_request(line) {
            return Verdict::Deliver(call);
        }
        let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
            Ok(JsonRpcMessage::Request(request)) => {
                // rmcp falls back to a custom request when params do not fit
                // a method it knows, and would answer "method not found".
                if let ClientRequest::CustomRequest(custom) = &request.request {
                    if let Some(detail) = params_mismatch(&custom.method, custom.params.as_ref()) {
                        tracing::warn!(%peer, method = %custom.method, %detail, "request with invalid params; answered -32602");
                        let id = serde_json::to_value(&request.id).unwrap_or(Value::Null);
                        return Verdict::Answer(error_line(
                            Some(&id),
                            INVALID_PARAMS,
                            format!("invalid params for `{}`: {detail}", custom.method),
                            None,
                        ));
                    }
                }
                return Verdict::Deliver(JsonRpcMessage::Request(request));
            }
            Ok(message) => return Verdict::Deliver(message),
            Err(error) => error,
        };
        let value = match serde_json::from_slice::<Value>(line) {
            Ok(value) => value,
            Err(parse) => {
                tracing::warn!(%peer, bytes = line.len(), error = %parse, "line is not JSON; answered -32700");
                return Verdict::Answer(error_line(
                    None,
                    PARSE_ERROR,
                    format!("parse error: {parse}"),
                    None,
                ));
            }
        };
        if let Some(reply) = reply_to_untyped_request(&value, &error.to_string()) {
            tracing::warn!(%peer, %error, "request rmcp cannot read; answered with an error");
            return Verdict::Answer(reply);
        }
        if value.is_object() {
            // A notification or a response: JSON-RPC gives it no reply.
            tracing::warn!(%peer, %error, "message not understood; ignored");
            return Verdict::Skip;
        }
        tracing::warn!(%peer, "not a JSON-RPC message object; answered -32600");
        let what = if value.is_array() {
            "batches are not supported; send one message per line"
        } else {
            "a message must be a JSON object"
        };
        Verdict::Answer(error_line(
            None,
            INVALID_REQUEST,
            format!("invalid request: {what}"),
            None,
        ))
    }

    fn judge_oversized(skimmed: &Skimmed, peer: &str, limit: usize) -> Verdict<Self> {
        let size = describe_size(skimmed.bytes);
        let limit_text = describe_size(limit);
        match (&skimmed.id, &skimmed.method) {
            (Some(id), Some(method)) if usable_id(id) => {
                tracing::warn!(%peer, %method, bytes = skimmed.bytes, limit, "request over the size limit; answered with an error");
                Verdict::Answer(error_line(
                    Some(id),
                    INVALID_REQUEST,
                    format!(
                        "the `{method}` request is {size}, over devboy's limit of {limit_text} per message; it was not read"
                    ),
                    Some(json!({ "bytes": skimmed.bytes, "limit": limit })),
                ))
            }
            _ => {
                tracing::warn!(%peer, bytes = skimmed.bytes, limit, "message over the size limit and not a request; skipped");
                Verdict::Skip
            }
        }
    }
}

/// An error response from `peer` to the call `id`, so the pending call
/// fails now instead of at its timeout.
fn fail_pending(id: &Value, message: String, data: Value) -> Option<RxJsonRpcMessage<RoleClient>> {
    let id = serde_json::from_value::<RequestId>(id.clone()).ok()?;
    Some(JsonRpcMessage::error(
        ErrorData::new(ErrorCode::INTERNAL_ERROR, Cow::Owned(message), Some(data)),
        Some(id),
    ))
}

/// An upstream's answer to a `tools/call`, read straight into its type.
///
/// rmcp reads a response by buffering the whole message and then trying
/// each result type of the protocol in turn; a tool's result is the 16th,
/// so it was read into a buffer, then fifteen times in part, each failure
/// with an error message formatted, before it was read for good: for a
/// passthrough call, more of devboy's time than anything else it does.
/// A line that reads whole as a JSON-RPC response with a tool result in it
/// is the message rmcp makes of it (no result type before it in rmcp's
/// order reads a tool result's fields), so it is delivered as that. A line
/// with a `"method"` or `"error"` key anywhere, or no `"content"` one,
/// goes rmcp's way, which tells the shapes of a message apart.
fn tool_call_answer(line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
    let has = |key: &[u8]| memchr::memmem::find(line, key).is_some();
    if !has(b"\"content\"") || has(b"\"method\"") || has(b"\"error\"") {
        return None;
    }
    let response: JsonRpcResponse<CallToolResult> = serde_json::from_slice(line).ok()?;
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: response.jsonrpc,
        id: response.id,
        result: ServerResult::CallToolResult(response.result),
    }))
}

impl WireRole for RoleClient {
    const WRITE_LIMIT: Option<usize> = None;

    fn judge_line(line: &[u8], peer: &str) -> Verdict<Self> {
        let line = trim_line(line);
        if line.is_empty() {
            return Verdict::Skip;
        }
        if let Some(answer) = tool_call_answer(line) {
            return Verdict::Deliver(answer);
        }
        let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(line) {
            Ok(message) => return Verdict::Deliver(message),
            Err(error) => error,
        };
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            // Once per line would flood stderr for a server that logs to
            // stdout; the first such line is in status and in its errors
            // (child.rs, `NoiseWatch`).
            tracing::debug!(%peer, bytes = line.len(), %error, "upstream wrote a line that is not JSON; ignored");
            return Verdict::Skip;
        };
        let object = value.as_object();
        let id = object.and_then(|o| o.get("id"));
        let is_response =
            object.is_some_and(|o| o.contains_key("result") || o.contains_key("error"));
        if let (Some(id), true) = (id, is_response) {
            let message = format!("{peer} sent a response devboy cannot read: {error}");
            if let Some(failure) =
                fail_pending(id, message, json!({ "upstream_error": error.to_string() }))
            {
                tracing::warn!(%peer, %error, "unreadable response; failing the call");
                return Verdict::Deliver(failure);
            }
        }
        if let Some(reply) = reply_to_untyped_request(&value, &error.to_string()) {
            tracing::warn!(%peer, %error, "request from the upstream rmcp cannot read; answered with an error");
            return Verdict::Answer(reply);
        }
        tracing::warn!(%peer, %error, "message from the upstream not understood; ignored");
        Verdict::Skip
    }

    fn judge_oversized(skimmed: &Skimmed, peer: &str, limit: usize) -> Verdict<Self> {
        let size = describe_size(skimmed.bytes);
        let limit_text = describe_size(limit);
        if let (Some(id), None) = (&skimmed.id, &skimmed.method) {
            let message = format!(
                "{peer} sent a result of {size}, over devboy's limit of {limit_text} per message; the result was dropped"
            );
            let data = json!({ "bytes": skimmed.bytes, "limit": limit });
            if let Some(failure) = fail_pending(id, message, data) {
                tracing::warn!(%peer, bytes = skimmed.bytes, limit, "result over the size limit; failing the call");
                return Verdict::Deliver(failure);
            }
        }
        if let (Some(id), Some(method)) = (&skimmed.id, &skimmed.method) {
            if usable_id(id) {
                tracing::warn!(%peer, %method, bytes = skimmed.bytes, limit, "upstream request over the size limit; answered with an error");
                return Verdict::Answer(error_line(
                    Some(id),
                    INVALID_REQUEST,
                    format!("the `{method}` request is {size}, over devboy's limit of {limit_text} per message"),
                    None,
                ));
            }
        }
        tracing::warn!(%peer, bytes = skimmed.bytes, limit, response = skimmed.response, "message over the size limit without a usable id; skipped");
        Verdict::Skip
    }
}

/// The error that answers instead of a response too long to write: the
/// request is answered, the connection stays. `None` for a message that is
/// no response.
fn oversized_reply(line: &[u8]) -> Option<Vec<u8>> {
    let mut skim = Skim::default();
    skim.feed(line);
    let skimmed = skim.finish();
    let id = skimmed.id.filter(|id| skimmed.response && usable_id(id))?;
    tracing::error!(
        bytes = line.len(),
        "an answer too long to write was replaced by an error"
    );
    Some(error_line(
        Some(&id),
        -32603,
        format!(
            "devboy: the answer is {}, more than one message may carry ({}); ask for less",
            describe_size(line.len()),
            describe_size(MAX_WRITTEN_BYTES)
        ),
        None,
    ))
}

/// What the writer task writes next.
enum Outgoing<R: ServiceRole> {
    /// A message from rmcp, and who waits for it to be written.
    Message {
        message: TxJsonRpcMessage<R>,
        written: oneshot::Sender<io::Result<()>>,
    },
    /// One of the transport's own error replies, a complete line.
    Reply(Vec<u8>),
}

/// The one task that writes to the stream: rmcp's messages and the
/// transport's own error replies leave in the order they were queued.
/// Messages are serialized here, off rmcp's service loop.
async fn write_lines<R: WireRole, W: AsyncWrite + Unpin>(
    mut out: W,
    mut queue: mpsc::Receiver<Outgoing<R>>,
) {
    let mut broken: Option<io::ErrorKind> = None;
    while let Some(next) = queue.recv().await {
        let (line, written) = match next {
            Outgoing::Message { message, written } => match serde_json::to_vec(&message) {
                Ok(line) if R::WRITE_LIMIT.is_some_and(|max| line.len() > max) => {
                    match oversized_reply(&line) {
                        Some(reply) => (reply, Some(written)),
                        None => {
                            let _ = written.send(Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!(
                                    "a message of {} is more than devboy writes",
                                    describe_size(line.len())
                                ),
                            )));
                            continue;
                        }
                    }
                }
                Ok(mut line) => {
                    line.push(b'\n');
                    (line, Some(written))
                }
                Err(error) => {
                    let _ = written.send(Err(io::Error::new(io::ErrorKind::InvalidData, error)));
                    continue;
                }
            },
            Outgoing::Reply(line) => (line, None),
        };
        let result = match broken {
            Some(kind) => Err(io::Error::new(kind, "the output stream failed earlier")),
            None => match out.write_all(&line).await {
                Ok(()) => out.flush().await,
                Err(error) => Err(error),
            },
        };
        if let Err(error) = &result {
            broken.get_or_insert(error.kind());
        }
        if let Some(written) = written {
            let _ = written.send(result);
        }
    }
    let _ = out.shutdown().await;
}

/// A JSON-RPC transport over a byte stream pair, one message per line; see
/// the module docs. `R` is the side devboy plays on this connection.
pub(crate) struct LineTransport<R: ServiceRole, Rd> {
    reader: LineReader<Rd>,
    queue: Option<mpsc::Sender<Outgoing<R>>>,
    writer: Option<JoinHandle<()>>,
    /// An error reply waiting for room in the write queue.
    reply: Option<Vec<u8>>,
    /// Who is on the other side, for logs and messages.
    peer: Arc<str>,
    /// Cancelled when the input ends (end of file or a failed read).
    input_closed: Option<tokio_util::sync::CancellationToken>,
}

impl<R, Rd> LineTransport<R, Rd>
where
    R: WireRole,
    Rd: AsyncRead + Send + Unpin + 'static,
{
    /// A transport reading `read` and writing `write`, with messages of at
    /// most `limit` bytes; `peer` names the other side in messages
    /// ("the client", "upstream `fs`").
    pub(crate) fn new<Wr>(read: Rd, write: Wr, limit: usize, peer: impl Into<Arc<str>>) -> Self
    where
        Wr: AsyncWrite + Send + Unpin + 'static,
    {
        let (queue, pending) = mpsc::channel(WRITE_QUEUE);
        Self {
            reader: LineReader::new(read, limit),
            queue: Some(queue),
            writer: Some(tokio::spawn(write_lines(write, pending))),
            reply: None,
            peer: peer.into(),
            input_closed: None,
        }
    }

    /// This transport cancelling `token` when its input ends, so the
    /// owner can bound how long the service drains after that.
    pub(crate) fn signal_input_closed(
        mut self,
        token: tokio_util::sync::CancellationToken,
    ) -> Self {
        self.input_closed = Some(token);
        self
    }

    fn input_ended(&self) {
        if let Some(token) = &self.input_closed {
            token.cancel();
        }
    }

    /// Queues a pending error reply. Cancel-safe: the reply stays in
    /// `self.reply` until a queue slot is held, and is moved into it
    /// without an await in between (so a client that floods bad lines
    /// without reading waits, instead of growing a queue). `None` when the
    /// writer is gone.
    async fn queue_reply(&mut self) -> Option<()> {
        if self.reply.is_none() {
            return Some(());
        }
        let permit = self.queue.as_ref()?.reserve().await.ok()?;
        if let Some(line) = self.reply.take() {
            permit.send(Outgoing::Reply(line));
        }
        Some(())
    }
}

impl<R, Rd> Transport<R> for LineTransport<R, Rd>
where
    R: WireRole,
    Rd: AsyncRead + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<R>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        fn closed() -> io::Error {
            io::Error::new(io::ErrorKind::NotConnected, "the transport is closed")
        }
        let (written, done) = oneshot::channel();
        let message = Outgoing::Message {
            message: item,
            written,
        };
        // Queued now when there is room, so lines leave in the order rmcp
        // called `send`, not in the order its spawned futures happen to run.
        let queued = match &self.queue {
            None => Err(closed()),
            Some(queue) => match queue.try_send(message) {
                Ok(()) => Ok(None),
                Err(mpsc::error::TrySendError::Full(message)) => Ok(Some((queue.clone(), message))),
                Err(mpsc::error::TrySendError::Closed(_)) => Err(closed()),
            },
        };
        async move {
            if let Some((queue, message)) = queued? {
                queue.send(message).await.map_err(|_| closed())?;
            }
            done.await.map_err(|_| closed())?
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<R>> {
        loop {
            self.queue_reply().await?;
            let frame = match self.reader.next_frame().await {
                Ok(frame) => frame,
                Err(error) => {
                    tracing::warn!(peer = %self.peer, %error, "reading failed; closing the connection");
                    self.input_ended();
                    return None;
                }
            };
            let verdict = match frame {
                Frame::Eof => {
                    self.input_ended();
                    return None;
                }
                Frame::Line(line) => R::judge_line(&line, &self.peer),
                Frame::Oversized(skimmed) => {
                    R::judge_oversized(&skimmed, &self.peer, self.reader.limit)
                }
            };
            match verdict {
                Verdict::Deliver(message) => return Some(message),
                Verdict::Answer(line) => self.reply = Some(line),
                Verdict::Skip => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // The writer ends (and closes the stream) once every sender is gone.
        self.queue.take();
        if let Some(writer) = self.writer.take() {
            if tokio::time::timeout(CLOSE_DRAIN, writer).await.is_err() {
                tracing::debug!(peer = %self.peer, "output not drained on close");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skim(text: &str) -> Skimmed {
        let mut skim = Skim::default();
        // Feed in small pieces to cross every boundary.
        for piece in text.as_bytes().chunks(3) {
            skim.feed(piece);
        }
        skim.finish()
    }

    #[test]
    fn skim_finds_id_and_method_anywhere_at_the_top() {
        let found = skim(
            r#"{"jsonrpc":"2.0","params":{"id":9,"x":"\"id\":7"},"id":"a,}b","method":"tools/call"}"#,
        );
        assert_eq!(found.id, Some(json!("a,}b")));
        assert_eq!(found.method.as_deref(), Some("tools/call"));
        assert!(!found.response);
        let found =
            skim(r#"{"result":{"content":[{"text":"{\"id\":1}"}]},"jsonrpc":"2.0","id":42}"#);
        assert_eq!(found.id, Some(json!(42)));
        assert!(found.response);
        assert_eq!(found.method, None);
    }

    #[test]
    fn an_answer_too_long_to_write_becomes_an_error_for_its_request() {
        let big = "x".repeat(MAX_WRITTEN_BYTES);
        let response = format!(
            r#"{{"jsonrpc":"2.0","id":5,"result":{{"content":[{{"type":"text","text":"{big}"}}]}}}}"#
        );
        let reply: Value =
            serde_json::from_slice(&oversized_reply(response.as_bytes()).unwrap()).unwrap();
        assert_eq!(reply["id"], 5);
        assert_eq!(reply["error"]["code"], -32603);
        assert!(reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ask for less"));
        let note = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"{big}"}}}}"#
        );
        assert!(oversized_reply(note.as_bytes()).is_none());
    }

    #[test]
    fn skim_survives_garbage() {
        let found = skim(r#"[{"id":1}]"#);
        assert_eq!(found.id, None);
        let found = skim("not json at all }}}]]]\"");
        assert_eq!(found.id, None);
        let found = skim(r#"{"id":3,"result":"cut off"#);
        assert_eq!(found.id, Some(json!(3)));
    }

    fn answer(line: &str) -> Value {
        match <RoleServer as WireRole>::judge_line(line.as_bytes(), "the client") {
            Verdict::Answer(reply) => serde_json::from_slice(&reply).expect("reply is JSON"),
            Verdict::Deliver(message) => panic!("delivered {message:?}"),
            Verdict::Skip => panic!("skipped"),
        }
    }

    #[test]
    fn server_answers_what_rmcp_cannot_read() {
        let reply = answer("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":");
        assert_eq!(reply["id"], Value::Null);
        assert_eq!(reply["error"]["code"], PARSE_ERROR);
        for (params, id) in [
            (json!({"name": "echo", "arguments": "x"}), json!(7)),
            (json!({"name": "echo", "arguments": [1]}), json!("s")),
            (json!({"name": 5}), json!(8)),
            (json!("x"), json!(9)),
        ] {
            let line =
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
            let reply = answer(&line.to_string());
            assert_eq!(reply["id"], id, "{line}");
            assert_eq!(reply["error"]["code"], INVALID_PARAMS, "{line}: {reply}");
        }
        let reply = answer(r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}"#);
        assert_eq!(reply["id"], Value::Null);
        assert_eq!(reply["error"]["code"], INVALID_REQUEST);
    }

    #[test]
    fn server_delivers_good_and_unknown_requests() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"vendor/thing","params":{"a":1}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ] {
            assert!(
                matches!(
                    <RoleServer as WireRole>::judge_line(line.as_bytes(), "c"),
                    Verdict::Deliver(_)
                ),
                "{line}"
            );
        }
    }

    /// The tool-call fast path makes of a client's request what rmcp
    /// makes of it, `_meta` and progress token included.
    #[test]
    fn a_tool_call_reads_as_rmcp_reads_it() {
        for params in [
            json!({"name": "fs__read", "arguments": {"path": "a.txt", "n": [1, {"x": null}]}}),
            json!({"name": "t", "_meta": {"progressToken": 7, "k": "v"}}),
            json!({"name": "t", "arguments": {"text": "quoted \"x\" and \\ and é"}}),
        ] {
            let line = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
                .to_string();
            let fast = tool_call_request(line.as_bytes()).expect("read on the fast path");
            let rmcp: RxJsonRpcMessage<RoleServer> = serde_json::from_str(&line).unwrap();
            let (JsonRpcMessage::Request(f), JsonRpcMessage::Request(r)) = (&fast, &rmcp) else {
                panic!("both are requests: {line}");
            };
            use rmcp::model::GetMeta as _;
            assert_eq!(f.request.get_meta(), r.request.get_meta(), "{line}");
            let (ClientRequest::CallToolRequest(f), ClientRequest::CallToolRequest(r)) =
                (&f.request, &r.request)
            else {
                panic!("both are tool calls: {line}");
            };
            assert_eq!(f.params, r.params, "{line}");
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                serde_json::to_value(&rmcp).unwrap()
            );
        }
        for line in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "t"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"nom": "t"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"},
                   "result": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"note": "tools/call"}}),
        ] {
            assert!(
                tool_call_request(line.to_string().as_bytes()).is_none(),
                "{line}"
            );
        }
    }

    /// The tool-result fast path makes of every line what rmcp makes of
    /// it, and leaves rmcp every line it must judge itself.
    #[test]
    fn a_tool_result_reads_as_rmcp_reads_it() {
        let results = [
            json!({"content": [{"type": "text", "text": "héllo \"quoted\" \n line"}]}),
            json!({"content": [{"type": "text", "text": "x", "annotations": {"priority": 0.5}}],
                   "isError": true, "_meta": {"k": 1}}),
            json!({"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"},
                               {"type": "resource", "resource": {"uri": "file:///a", "text": "t"}}],
                   "structuredContent": {"rows": [1, 2]}}),
            json!({"content": [], "structuredContent": null}),
        ];
        for (n, result) in results.into_iter().enumerate() {
            for id in [json!(n), json!(format!("s{n}"))] {
                let line = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
                let fast = tool_call_answer(line.as_bytes()).expect("read on the fast path");
                let rmcp: RxJsonRpcMessage<RoleClient> = serde_json::from_str(&line).unwrap();
                assert!(
                    matches!(&rmcp, JsonRpcMessage::Response(r)
                        if matches!(r.result, ServerResult::CallToolResult(_))),
                    "{line}"
                );
                assert_eq!(
                    serde_json::to_value(&fast).unwrap(),
                    serde_json::to_value(&rmcp).unwrap(),
                    "{line}"
                );
            }
        }
        for line in [
            // Not a tool result, a request, an error, both, a result whose
            // own text names a key (still read as rmcp reads it, or left).
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage",
                   "params": {"content": "x"}}),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "content"}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}, "error": {"code": 1, "message": "m"}}),
            json!({"jsonrpc": "2.0", "result": {"content": []}, "id": 1, "method": "x"}),
        ] {
            assert!(
                tool_call_answer(line.to_string().as_bytes()).is_none(),
                "{line}"
            );
        }
        // Not JSON, or cut short: rmcp's path says what is wrong.
        assert!(tool_call_answer(br#"{"jsonrpc":"2.0","id":1,"result":{"content":["#).is_none());
    }

    #[test]
    fn client_fails_the_call_of_an_oversized_result() {
        let skimmed = skim(r#"{"jsonrpc":"2.0","id":4,"result":{}}"#);
        match <RoleClient as WireRole>::judge_oversized(&skimmed, "upstream `fs`", 10) {
            Verdict::Deliver(JsonRpcMessage::Error(error)) => {
                assert_eq!(error.id, Some(RequestId::Number(4)));
                assert!(error.error.message.contains("upstream `fs`"));
            }
            _ => panic!("expected an error response"),
        }
    }

    #[tokio::test]
    async fn reader_skips_an_oversized_line_and_reads_on() {
        let input = format!("{}\n{{\"id\":1}}\r\nlast", "x".repeat(100));
        let mut reader = LineReader::new(input.as_bytes(), 50);
        assert!(
            matches!(reader.next_frame().await.unwrap(), Frame::Oversized(s) if s.bytes == 100)
        );
        assert!(
            matches!(reader.next_frame().await.unwrap(), Frame::Line(l) if l == b"{\"id\":1}\r")
        );
        assert!(matches!(reader.next_frame().await.unwrap(), Frame::Line(l) if l == b"last"));
        assert!(matches!(reader.next_frame().await.unwrap(), Frame::Eof));
    }
}
