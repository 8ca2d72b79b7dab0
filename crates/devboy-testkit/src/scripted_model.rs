//! A scripted stand-in for the Anthropic Messages API, so the real Claude
//! Code CLI can run offline and a test can read exactly what the model saw.
//!
//! [`ScriptedModel::start`] binds `127.0.0.1:0` and serves, on its own thread
//! and Tokio runtime (so blocking test code cannot starve it):
//!
//! - `POST /v1/messages` (any query, e.g. `?beta=true`), streaming
//!   (`"stream": true`, server-sent events `message_start`, `ping`,
//!   `content_block_start` / `content_block_delta` / `content_block_stop`,
//!   `message_delta`, `message_stop`; tool input is sent as
//!   `input_json_delta` fragments) or not (one JSON message);
//! - `POST /v1/messages/count_tokens` (a rough estimate: bytes / 4);
//! - `HEAD` / `GET` on any path, answered `200` (Claude Code sends
//!   `HEAD /api/hello` as a connectivity probe unless
//!   `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`);
//! - anything else: `404` with an Anthropic-style error body.
//!
//! A request is a **main** request when it carries a non-empty `tools` array
//! (the agent loop always does); only main requests advance the [`Script`].
//! Claude Code's **compaction** request (`/compact`, or automatic compaction)
//! carries the tools too, but its last user message asks for a summary of the
//! conversation ([`COMPACTION_PROMPT_MARKER`]); it is answered with
//! [`COMPACTION_SUMMARY`] and does not advance the script, so a script only
//! lists the agent's own turns. Anything else sent to `/v1/messages` (title
//! generation, quota probes, summaries with a small model) is a **side**
//! request and is answered with the short text [`SIDE_TEXT`]. Once the script
//! is exhausted, main requests are answered with the script's final text.
//!
//! Every request is recorded; [`ScriptedModel::tool_results`] and
//! [`ScriptedModel::tools_offered`] read the main requests back.
//!
//! A tool call's input may say [`LAST_ID`] where a real model would copy the
//! id of devboy's last `> [id: …]` line, and [`NEXT_ID`] and [`NEXT_RANGE`]
//! where it would copy the call an elision hint names (`devboy_expand
//! kafrum4 lines=812-3094`): ids carry a tag drawn per devboy process, so
//! no script can know them in advance.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};

use crate::http::{HttpRequest, HttpResponse, LoopbackServer};

/// Text a main request gets once the script is exhausted, unless
/// [`Script::final_text`] sets another.
pub const DEFAULT_FINAL_TEXT: &str = "Done.";

/// In a scripted tool call's input, stands for the id in the last
/// `> [id: …]` line among the tool results of the request being answered.
pub const LAST_ID: &str = "{last_id}";

/// In a scripted tool call's input, stands for the id of the last elision
/// hint (`> [elided lines 812-3094 of 3094; devboy_expand kafrum4
/// lines=812-3094]`) among the tool results of the request being answered.
pub const NEXT_ID: &str = "{next_id}";

/// With [`NEXT_ID`]: that hint's range (`812-3094`).
pub const NEXT_RANGE: &str = "{next_range}";

/// Text every side request (one without `tools`) is answered with.
pub const SIDE_TEXT: &str = "ok";

/// Text that identifies Claude Code's compaction request: it appears in the
/// summarization prompt Claude Code (2.1.x) appends as the last user message.
pub const COMPACTION_PROMPT_MARKER: &str = "create a detailed summary of the conversation";

/// The summary the scripted model writes when Claude Code compacts: the
/// compacted conversation starts from it.
macro_rules! compaction_summary_text {
    () => {
        "The scripted model's summary of the conversation so far."
    };
}

/// The summary text inside [`COMPACTION_SUMMARY`]; the requests after a
/// compaction carry it.
pub const COMPACTION_SUMMARY_TEXT: &str = compaction_summary_text!();

/// The answer to every compaction request. Claude Code wants the summary
/// inside `<summary>` tags and asks again, with a stricter prompt, when they
/// are missing; with them, one request per compaction suffices.
pub const COMPACTION_SUMMARY: &str = concat!(
    "<analysis>Scripted compaction.</analysis>\n<summary>",
    compaction_summary_text!(),
    "</summary>"
);

/// Size of the pieces streamed text and tool input are cut into.
const DELTA_CHARS: usize = 24;

/// One answer of the scripted model to a main request.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Call one tool (`stop_reason: "tool_use"`).
    ToolUse {
        /// Tool name as the client lists it, e.g. `mcp__fs__read_text_file`.
        name: String,
        /// Tool input (a JSON object).
        input: Value,
    },
    /// Call several tools in one assistant message (name, input) pairs.
    ParallelToolUse(Vec<(String, Value)>),
    /// Answer with text (`stop_reason: "end_turn"`).
    Text(String),
}

impl Turn {
    /// A [`Turn::ToolUse`].
    pub fn tool_use(name: impl Into<String>, input: Value) -> Self {
        Turn::ToolUse {
            name: name.into(),
            input,
        }
    }

    /// A [`Turn::Text`].
    pub fn text(text: impl Into<String>) -> Self {
        Turn::Text(text.into())
    }
}

/// The queue of turns the model plays, in order, one per main request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    turns: VecDeque<Turn>,
    final_text: Option<String>,
}

impl Script {
    /// An empty script: every main request gets the final text.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a turn.
    pub fn turn(mut self, turn: Turn) -> Self {
        self.turns.push_back(turn);
        self
    }

    /// Appends a [`Turn::ToolUse`].
    pub fn tool_use(self, name: impl Into<String>, input: Value) -> Self {
        self.turn(Turn::tool_use(name, input))
    }

    /// Appends a [`Turn::Text`].
    pub fn text(self, text: impl Into<String>) -> Self {
        self.turn(Turn::text(text))
    }

    /// Sets the text main requests get once the turns are used up
    /// (default [`DEFAULT_FINAL_TEXT`]).
    pub fn final_text(mut self, text: impl Into<String>) -> Self {
        self.final_text = Some(text.into());
        self
    }

    /// Number of turns not yet played.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    /// Whether no turns are left.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

/// How the scripted model classified a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// `POST /v1/messages` with a non-empty `tools` array: advances the script.
    Main,
    /// Claude Code asking for a summary of the conversation to compact it
    /// (see [`COMPACTION_PROMPT_MARKER`]): answered with
    /// [`COMPACTION_SUMMARY`]; does not advance the script.
    Compaction,
    /// Any other `POST /v1/messages`: answered with [`SIDE_TEXT`].
    Side,
    /// `POST /v1/messages/count_tokens`.
    CountTokens,
    /// Anything else (`HEAD /api/hello`, unknown paths, malformed bodies).
    Other,
}

/// One HTTP request the scripted model received, and what it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// Request target including any query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    /// Request headers in arrival order (names as sent).
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Value::Null` when there was none or it was not JSON).
    pub body: Value,
    /// Classification.
    pub kind: RequestKind,
    /// The Messages API message answered (for `Main` and `Side`), whether it
    /// was streamed or not.
    pub answer: Option<Value>,
}

/// A `tool_result` block as the model received it in a main request.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultSeen {
    /// The `tool_use_id` it answers.
    pub tool_use_id: String,
    /// Name of the tool called (from the matching `tool_use` block), if found.
    pub tool_name: Option<String>,
    /// The block's `content`: a string or an array of content blocks.
    pub content: Value,
    /// The block's `is_error` flag (false when absent).
    pub is_error: bool,
}

impl ToolResultSeen {
    /// The text the model saw: the content string itself, or the `text` of
    /// every text block joined with `\n` (other blocks, e.g. images, are
    /// skipped).
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }
}

#[derive(Debug)]
struct State {
    script: Script,
    log: Vec<RecordedRequest>,
    next_id: u64,
}

/// The running scripted model; it stops when dropped.
#[derive(Debug)]
pub struct ScriptedModel {
    server: LoopbackServer,
    state: Arc<Mutex<State>>,
}

impl ScriptedModel {
    /// Binds `127.0.0.1:0` and starts serving `script` on a background thread.
    pub fn start(script: Script) -> anyhow::Result<Self> {
        let state = Arc::new(Mutex::new(State {
            script,
            log: Vec::new(),
            next_id: 1,
        }));
        let handler_state = Arc::clone(&state);
        let server = LoopbackServer::start(
            "scripted-model",
            Arc::new(move |request: HttpRequest| {
                let response = handle(&request, &handler_state);
                Box::pin(async move { response })
            }),
        )?;
        Ok(Self { server, state })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// `http://127.0.0.1:PORT`, the value for `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    /// Appends a turn to the script while the model runs.
    pub fn push(&self, turn: Turn) {
        self.lock().script.turns.push_back(turn);
    }

    /// Number of scripted turns not yet played.
    pub fn turns_remaining(&self) -> usize {
        self.lock().script.turns.len()
    }

    /// Every HTTP request received so far, in order.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.lock().log.clone()
    }

    /// The bodies of every Messages API request (`POST /v1/messages`: main,
    /// compaction and side), in order.
    pub fn requests(&self) -> Vec<Value> {
        self.bodies(|k| {
            matches!(
                k,
                RequestKind::Main | RequestKind::Compaction | RequestKind::Side
            )
        })
    }

    /// The bodies of the main requests (those that carried `tools`), in order.
    pub fn main_requests(&self) -> Vec<Value> {
        self.bodies(|k| k == RequestKind::Main)
    }

    /// The bodies of the compaction requests, in order: each holds the
    /// conversation as it was just before it was summarized.
    pub fn compaction_requests(&self) -> Vec<Value> {
        self.bodies(|k| k == RequestKind::Compaction)
    }

    /// The bodies of the side requests, in order.
    pub fn side_requests(&self) -> Vec<Value> {
        self.bodies(|k| k == RequestKind::Side)
    }

    /// The last main request's body.
    pub fn last_main_request(&self) -> Option<Value> {
        self.main_requests().pop()
    }

    /// Every `tool_result` block the model was shown in main requests, in
    /// order of first appearance, each once (later requests repeat the
    /// history; the first occurrence is kept).
    pub fn tool_results(&self) -> Vec<ToolResultSeen> {
        tool_results_in(&self.main_requests())
    }

    /// Names of the tools offered in the last main request.
    pub fn tools_offered(&self) -> Vec<String> {
        self.tool_definitions()
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect()
    }

    /// Full tool definitions (name, description, `input_schema`, …) of the
    /// last main request.
    pub fn tool_definitions(&self) -> Vec<Value> {
        self.last_main_request()
            .and_then(|r| r.get("tools").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    }

    fn bodies(&self, keep: impl Fn(RequestKind) -> bool) -> Vec<Value> {
        self.lock()
            .log
            .iter()
            .filter(|r| keep(r.kind))
            .map(|r| r.body.clone())
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Extracts the `tool_result` blocks of user messages from Messages API
/// request bodies, each `tool_use_id` once (first occurrence), naming the
/// tool from the matching assistant `tool_use` block.
pub fn tool_results_in(requests: &[Value]) -> Vec<ToolResultSeen> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for request in requests {
        let Some(messages) = request.get("messages").and_then(Value::as_array) else {
            continue;
        };
        let blocks = |role: &'static str| {
            messages
                .iter()
                .filter(move |m| m.get("role").and_then(Value::as_str) == Some(role))
                .filter_map(|m| m.get("content").and_then(Value::as_array))
                .flatten()
        };
        for block in blocks("user") {
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let id = block
                .get("tool_use_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if !seen.insert(id.clone()) {
                continue;
            }
            let tool_name = blocks("assistant")
                .find(|b| {
                    b.get("type").and_then(Value::as_str) == Some("tool_use")
                        && b.get("id").and_then(Value::as_str) == Some(id.as_str())
                })
                .and_then(|b| b.get("name").and_then(Value::as_str))
                .map(str::to_owned);
            out.push(ToolResultSeen {
                tool_use_id: id,
                tool_name,
                content: block.get("content").cloned().unwrap_or(Value::Null),
                is_error: block
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            });
        }
    }
    out
}

/// `turn` with [`LAST_ID`] in its tool inputs replaced by the last id the
/// request's tool results showed (left as it is when none did).
fn fill_last_id(turn: Turn, body: &Value) -> Turn {
    fn fill(value: &mut Value, marks: &[(&str, String)]) {
        match value {
            Value::String(s) => {
                for (mark, with) in marks {
                    if s.contains(mark) {
                        *s = s.replace(mark, with);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| fill(v, marks)),
            Value::Object(map) => map.values_mut().for_each(|v| fill(v, marks)),
            _ => {}
        }
    }
    let results = tool_results_in(std::slice::from_ref(body));
    let last = results.iter().rev().find_map(|r| {
        r.text().lines().rev().find_map(|l| {
            l.strip_prefix("> [id: ")?
                .strip_suffix(']')
                .map(str::to_owned)
        })
    });
    // `…; devboy_expand ID lines=A-B]`
    let next = results.iter().rev().find_map(|r| {
        r.text().lines().rev().find_map(|l| {
            let call = l.strip_prefix("> [elided ")?.strip_suffix(']')?;
            let (_, call) = call.rsplit_once("; devboy_expand ")?;
            let (id, range) = call.split_once(' ')?;
            let (_, range) = range.split_once('=')?;
            Some((id.to_owned(), range.to_owned()))
        })
    });
    let mut marks: Vec<(&str, String)> = Vec::new();
    if let Some(id) = last {
        marks.push((LAST_ID, id));
    }
    if let Some((id, range)) = next {
        marks.push((NEXT_ID, id));
        marks.push((NEXT_RANGE, range));
    }
    match turn {
        Turn::ToolUse { name, mut input } => {
            fill(&mut input, &marks);
            Turn::ToolUse { name, input }
        }
        Turn::ParallelToolUse(mut calls) => {
            calls.iter_mut().for_each(|(_, input)| fill(input, &marks));
            Turn::ParallelToolUse(calls)
        }
        text => text,
    }
}

fn handle(request: &HttpRequest, state: &Mutex<State>) -> HttpResponse {
    let path = request.target.split('?').next().unwrap_or("");
    let parsed: Option<Value> = serde_json::from_slice(&request.body).ok();
    let mut record = RecordedRequest {
        method: request.method.clone(),
        path: request.target.clone(),
        headers: request.headers.clone(),
        body: parsed.clone().unwrap_or(Value::Null),
        kind: RequestKind::Other,
        answer: None,
    };
    let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
    let response = match (request.method.as_str(), path) {
        ("POST", "/v1/messages") => match parsed {
            Some(body) if body.is_object() => {
                record.kind = classify(&body);
                let turn = match record.kind {
                    RequestKind::Main => {
                        let final_text = state
                            .script
                            .final_text
                            .clone()
                            .unwrap_or_else(|| DEFAULT_FINAL_TEXT.to_owned());
                        state
                            .script
                            .turns
                            .pop_front()
                            .unwrap_or(Turn::Text(final_text))
                    }
                    RequestKind::Compaction => Turn::text(COMPACTION_SUMMARY),
                    _ => Turn::text(SIDE_TEXT),
                };
                let turn = fill_last_id(turn, &body);
                let message = build_message(&mut state.next_id, &body, &turn, request.body.len());
                record.answer = Some(message.clone());
                if body.get("stream").and_then(Value::as_bool) == Some(true) {
                    HttpResponse {
                        status: 200,
                        content_type: "text/event-stream; charset=utf-8",
                        body: sse_events(&message).into_bytes(),
                    }
                } else {
                    HttpResponse::json(200, &message)
                }
            }
            _ => HttpResponse::error(400, "invalid_request_error", "body is not a JSON object"),
        },
        ("POST", "/v1/messages/count_tokens") => {
            record.kind = RequestKind::CountTokens;
            HttpResponse::json(
                200,
                &json!({"input_tokens": estimate_tokens(request.body.len())}),
            )
        }
        ("HEAD", _) | ("GET", _) => HttpResponse::json(200, &json!({})),
        _ => HttpResponse::error(404, "not_found_error", &format!("no route for {path}")),
    };
    state.log.push(record);
    response
}

/// Classifies a `POST /v1/messages` body: compaction when the last message
/// is a user message carrying [`COMPACTION_PROMPT_MARKER`], else main when it
/// offers tools, else side.
fn classify(body: &Value) -> RequestKind {
    let last = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last());
    let compaction = last.is_some_and(|m| {
        m.get("role").and_then(Value::as_str) == Some("user")
            && message_text(m).contains(COMPACTION_PROMPT_MARKER)
    });
    let tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    if compaction {
        RequestKind::Compaction
    } else if tools {
        RequestKind::Main
    } else {
        RequestKind::Side
    }
}

/// The text of a message: its string content, or its text blocks joined.
fn message_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64 / 4).max(1)
}

/// The complete assistant message for a turn.
fn build_message(next_id: &mut u64, request: &Value, turn: &Turn, request_bytes: usize) -> Value {
    let n = *next_id;
    *next_id += 1;
    let mut content = Vec::new();
    let mut stop_reason = "end_turn";
    match turn {
        Turn::Text(text) => content.push(json!({"type": "text", "text": text})),
        Turn::ToolUse { name, input } => {
            stop_reason = "tool_use";
            content.push(tool_use_block(n, 0, name, input));
        }
        Turn::ParallelToolUse(calls) => {
            stop_reason = "tool_use";
            for (i, (name, input)) in calls.iter().enumerate() {
                content.push(tool_use_block(n, i, name, input));
            }
        }
    }
    let output_tokens = estimate_tokens(Value::Array(content.clone()).to_string().len());
    json!({
        "id": format!("msg_scripted_{n:04}"),
        "type": "message",
        "role": "assistant",
        "model": request.get("model").cloned().unwrap_or_else(|| json!("scripted-model")),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {
            "input_tokens": estimate_tokens(request_bytes),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output_tokens,
        },
    })
}

fn tool_use_block(n: u64, i: usize, name: &str, input: &Value) -> Value {
    json!({
        "type": "tool_use",
        "id": format!("toolu_scripted_{n:04}_{i}"),
        "name": name,
        "input": input,
    })
}

/// Splits `s` into pieces of at most [`DELTA_CHARS`] characters (at least
/// one piece, possibly empty).
fn pieces(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(DELTA_CHARS)
        .map(|c| c.iter().collect())
        .collect()
}

/// The server-sent event stream that delivers `message`.
fn sse_events(message: &Value) -> String {
    let mut events: Vec<(&str, Value)> = Vec::new();
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    events.push((
        "message_start",
        json!({"type": "message_start", "message": start}),
    ));
    events.push(("ping", json!({"type": "ping"})));
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    for (index, block) in blocks.iter().enumerate() {
        match block["type"].as_str() {
            Some("tool_use") => {
                let mut open = block.clone();
                open["input"] = json!({});
                events.push((
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": open}),
                ));
                for piece in pieces(&block["input"].to_string()) {
                    events.push((
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    ));
                }
            }
            _ => {
                events.push((
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}}),
                ));
                for piece in pieces(block["text"].as_str().unwrap_or_default()) {
                    events.push((
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index,
                               "delta": {"type": "text_delta", "text": piece}}),
                    ));
                }
            }
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
               "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
        .into_iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_respect_char_boundaries() {
        let s = "é".repeat(30);
        let p = pieces(&s);
        assert_eq!(p.len(), 2);
        assert_eq!(p.concat(), s);
        assert_eq!(pieces(""), vec![String::new()]);
    }

    #[test]
    fn compaction_requests_are_told_apart_from_main_and_side() {
        let tools = json!([{"name": "Read", "input_schema": {"type": "object"}}]);
        let prompt =
            format!("CRITICAL: text only.\n\nYour task is to {COMPACTION_PROMPT_MARKER} so far.");
        let compaction = json!({"tools": tools, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "read a file"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
            {"role": "user", "content": prompt},
        ]});
        assert_eq!(classify(&compaction), RequestKind::Compaction);
        let quoted = json!({"tools": tools, "messages": [
            {"role": "user", "content": [{"type": "text", "text": prompt}]},
            {"role": "assistant", "content": [{"type": "text", "text": "no"}]},
        ]});
        assert_eq!(
            classify(&quoted),
            RequestKind::Main,
            "only the last message counts"
        );
        let main = json!({"tools": tools, "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(classify(&main), RequestKind::Main);
        let side = json!({"messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(classify(&side), RequestKind::Side);
    }

    #[test]
    fn tool_results_are_deduplicated_and_named() {
        let history = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "mcp__a__b", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}]},
        ]});
        let mut later = history.clone();
        later["messages"].as_array_mut().unwrap().extend([
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "mcp__a__c", "input": {}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": true}]}),
        ]);
        let seen = tool_results_in(&[history, later]);
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].tool_name.as_deref(), Some("mcp__a__b"));
        assert_eq!(seen[0].text(), "one\ntwo");
        assert!(!seen[0].is_error);
        assert_eq!(seen[1].tool_use_id, "t2");
        assert_eq!(seen[1].text(), "boom");
        assert!(seen[1].is_error);
    }
}
