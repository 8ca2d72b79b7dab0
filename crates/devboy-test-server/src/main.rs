//! `devboy-test-server`: a small, deterministic stdio MCP server used by
//! devboy's own tests and benchmarks.
//!
//! devboy is an MCP proxy that sits between Claude Code and real MCP servers.
//! To test the proxy without depending on third-party servers, its tests spawn
//! this binary as the "upstream" and drive it through the proxy. Every tool
//! here exists to provoke one behaviour the proxy must handle:
//!
//! | tool        | arguments                    | what it does                                              |
//! |-------------|------------------------------|-----------------------------------------------------------|
//! | `echo`      | `text`                       | returns `text` as a text block                            |
//! | `payload`   | `bytes`                      | one text block of exactly `bytes` bytes (benchmarks)      |
//! | `structured`| `n`                          | `structuredContent` `{"items":[…]}` + the same JSON as text, with an `outputSchema` |
//! | `rich`      | –                            | annotated text, image, resource_link, embedded resource, result `_meta`; tool has annotations and `_meta` |
//! | `fail`      | –                            | a result with `isError: true`                             |
//! | `sleep`     | `ms`, `progress_steps?`      | waits; sends progress if asked; stops early on cancellation |
//! | `crash`     | `code?`                      | exits the process at once (default code 3), no answer     |
//! | `add_tool`  | `name`                       | adds an echoing tool `name`, sends `tools/list_changed`   |
//! | `pid`       | –                            | the process id (tells a restart happened)                 |
//! | `count`     | –                            | number of `tools/call` requests served, this one included |
//! | `poll`      | –                            | a CI-like status as JSON text: 40 jobs, `calls` and `state` change per call |
//! | `length`    | `text`                       | the length of `text` in bytes (a request of any size)    |
//!
//! It also serves one static resource (`test://greeting`, text `hello`), one
//! resource template (`test://echo/{text}`), and one prompt (`greet {name}`).
//!
//! Environment knobs:
//!
//! * `DEVBOY_TEST_STARTUP_DELAY_MS` – sleep this long before serving (slow upstream).
//! * `DEVBOY_TEST_FAIL_START` – if set, print a message to stderr and exit 1 at once.
//! * `DEVBOY_TEST_TOOL_PREFIX` – prefix every built-in tool name (name collisions).
//! * `DEVBOY_TEST_PAGE_SIZE` – paginate `tools/list` with this page size; the
//!   cursor is the decimal offset of the next page.
//! * `DEVBOY_TEST_CANCEL_LOG` – when `sleep` is cancelled, append a line to this file.
//!
//! `devboy-test-server relay --delay-ms N -- CMD ARGS…` serves nothing
//! itself: it runs another stdio server and delays its responses by N ms
//! (see `relay.rs`), to measure what waiting on a slow server costs.
//!
//! stdout carries the protocol only; all logging goes to stderr.

mod floor;
mod relay;

use std::{
    borrow::Cow,
    io::Write as _,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use rmcp::{
    model::{
        object, Annotations, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
        GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, JsonObject,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
        MetaObject, PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument,
        PromptMessage, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
        ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities,
        ServerConfig, SubscriptionFilter, TextContent, Tool, ToolAnnotations,
    },
    service::{RequestContext, SubscriptionContext},
    ErrorData as McpError, RoleServer, ServerHandler, ServiceExt,
};
use serde_json::{json, Value};
use tokio::sync::broadcast;

/// Names of the built-in tools, before `DEVBOY_TEST_TOOL_PREFIX` is applied.
const BUILTIN_TOOLS: &[&str] = &[
    "echo",
    "payload",
    "structured",
    "rich",
    "fail",
    "sleep",
    "crash",
    "add_tool",
    "pid",
    "count",
    "poll",
    "length",
];

/// A 1×1 transparent PNG.
const TINY_PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// Upper bound for `payload {bytes}`, so a typo cannot exhaust memory.
const MAX_PAYLOAD_BYTES: u64 = 256 * 1024 * 1024;

/// Exit code of `crash` when none is given.
const DEFAULT_CRASH_CODE: i32 = 3;

macro_rules! log {
    ($($arg:tt)*) => {
        eprintln!("devboy-test-server[{}]: {}", std::process::id(), format_args!($($arg)*))
    };
}

/// Settings read from the environment at startup.
#[derive(Debug, Clone, Default)]
struct Config {
    prefix: String,
    page_size: Option<usize>,
    cancel_log: Option<String>,
}

impl Config {
    fn from_env() -> Result<Self, String> {
        let page_size = match std::env::var("DEVBOY_TEST_PAGE_SIZE") {
            Ok(raw) if !raw.trim().is_empty() => {
                let size: usize = raw.trim().parse().map_err(|_| {
                    format!("DEVBOY_TEST_PAGE_SIZE must be a positive integer, got {raw:?}")
                })?;
                if size == 0 {
                    return Err("DEVBOY_TEST_PAGE_SIZE must be at least 1".into());
                }
                Some(size)
            }
            _ => None,
        };
        Ok(Self {
            prefix: std::env::var("DEVBOY_TEST_TOOL_PREFIX").unwrap_or_default(),
            page_size,
            cancel_log: std::env::var("DEVBOY_TEST_CANCEL_LOG")
                .ok()
                .filter(|path| !path.is_empty()),
        })
    }
}

struct TestServer {
    config: Config,
    /// Tools added at runtime through `add_tool`, in insertion order.
    added: Mutex<Vec<String>>,
    /// `tools/call` requests received by this process.
    calls: AtomicU64,
    /// Fires whenever the tool list changes; feeds `subscriptions/listen`
    /// streams of clients on protocol 2026-07-28 or later.
    tools_changed: broadcast::Sender<()>,
}

impl TestServer {
    fn new(config: Config) -> Self {
        let (tools_changed, _) = broadcast::channel(16);
        Self {
            config,
            added: Mutex::new(Vec::new()),
            calls: AtomicU64::new(0),
            tools_changed,
        }
    }

    fn added_tools(&self) -> Vec<String> {
        self.added.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// All tools, in a stable order: built-ins first, then runtime additions.
    fn tools(&self) -> Vec<Tool> {
        let mut tools: Vec<Tool> = BUILTIN_TOOLS
            .iter()
            .map(|base| builtin_tool(base, format!("{}{base}", self.config.prefix)))
            .collect();
        tools.extend(self.added_tools().into_iter().map(added_tool));
        tools
    }

    fn cancelled(&self, context: &RequestContext<RoleServer>, what: &str) {
        log!("cancelled: request {} ({what})", context.id);
        if let Some(path) = &self.config.cancel_log {
            let line = format!("cancelled request={} {what}\n", context.id);
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(line.as_bytes()));
            if let Err(error) = written {
                log!("could not write DEVBOY_TEST_CANCEL_LOG {path}: {error}");
            }
        }
    }

    async fn dispatch(
        &self,
        base: &str,
        args: &JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        match base {
            "echo" => Ok(text_result(required_str(args, "text")?)),
            "payload" => {
                let bytes = required_u64(args, "bytes")?;
                if bytes > MAX_PAYLOAD_BYTES {
                    return Err(McpError::invalid_params(
                        format!("bytes must be at most {MAX_PAYLOAD_BYTES}"),
                        None,
                    ));
                }
                Ok(text_result(payload_text(bytes as usize)))
            }
            "structured" => {
                let n = required_u64(args, "n")?;
                if n > 1_000_000 {
                    return Err(McpError::invalid_params("n must be at most 1000000", None));
                }
                Ok(CallToolResult::structured(structured_value(n)))
            }
            "rich" => Ok(rich_result()),
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text(
                "the `fail` tool always fails: this result carries isError: true on purpose",
            )])),
            "sleep" => self.sleep(args, context).await,
            "crash" => {
                let code = optional_i64(args, "code")?
                    .map(|code| code as i32)
                    .unwrap_or(DEFAULT_CRASH_CODE);
                log!("crash requested: exiting with code {code} without answering");
                std::process::exit(code);
            }
            "add_tool" => self.add_tool(args, context).await,
            "pid" => Ok(text_result(std::process::id().to_string())),
            "count" => Ok(text_result(self.calls.load(Ordering::SeqCst).to_string())),
            "poll" => Ok(text_result(poll_status(self.calls.load(Ordering::SeqCst)))),
            "length" => Ok(text_result(required_str(args, "text")?.len().to_string())),
            other => Err(McpError::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }

    async fn sleep(
        &self,
        args: &JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let ms = required_u64(args, "ms")?;
        let steps = optional_u64(args, "progress_steps")?.unwrap_or(0);
        let token = context.meta.get_progress_token();
        // Progress is only sent when the caller asked for it with a token.
        let steps = if token.is_some() { steps } else { 0 };
        let segments = steps.max(1);
        let start = tokio::time::Instant::now();
        for i in 1..=segments {
            // Integer arithmetic keeps the schedule exact: the last step ends at `ms`.
            let deadline = start + Duration::from_millis(ms * i / segments);
            tokio::select! {
                biased;
                _ = context.ct.cancelled() => {
                    self.cancelled(&context, &format!("sleep ms={ms} step={}/{steps}", i - 1));
                    return Ok(CallToolResult::error(vec![ContentBlock::text("cancelled")]));
                }
                _ = tokio::time::sleep_until(deadline) => {}
            }
            if let (Some(token), true) = (&token, steps > 0) {
                let progress = ProgressNotificationParam::new(token.clone(), i as f64)
                    .with_total(steps as f64)
                    .with_message(format!("step {i} of {steps}"));
                if let Err(error) = context.peer.notify_progress(progress).await {
                    log!("could not send progress: {error}");
                }
            }
        }
        Ok(text_result(format!("slept {ms} ms")))
    }

    async fn add_tool(
        &self,
        args: &JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let name = required_str(args, "name")?;
        if name.is_empty() {
            return Err(McpError::invalid_params("name must not be empty", None));
        }
        {
            let mut added = self.added.lock().unwrap_or_else(|e| e.into_inner());
            if !added.contains(&name) {
                added.push(name.clone());
            }
        }
        log!("added tool {name}");
        // Subscribers on protocol 2026-07-28+ get it on their listen stream.
        let _ = self.tools_changed.send(());
        // Sessions that started with `initialize` get the classic unscoped notification,
        // sent before the result so the client sees it first.
        let modern = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        if !modern {
            if let Err(error) = context.peer.notify_tool_list_changed().await {
                log!("could not send tools/list_changed: {error}");
            }
        }
        Ok(text_result("added"))
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "devboy-test-server",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "A test server for devboy. Its tools exist to provoke proxy behaviour.",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.tools();
        let Some(page_size) = self.config.page_size else {
            return Ok(ListToolsResult::with_all_items(tools));
        };
        let offset = match request.and_then(|params| params.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|offset| *offset <= tools.len())
                .ok_or_else(|| {
                    McpError::invalid_params(format!("invalid cursor {cursor:?}"), None)
                })?,
        };
        let end = (offset + page_size).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[offset..end].to_vec());
        if end < tools.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let served = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let name = request.name.as_ref();
        let args = request.arguments.clone().unwrap_or_default();
        log!("call #{served}: {name}");
        let builtin = name
            .strip_prefix(self.config.prefix.as_str())
            .filter(|base| BUILTIN_TOOLS.contains(base));
        let result = match builtin {
            Some(base) => self.dispatch(base, &args, context).await?,
            None if self.added_tools().iter().any(|added| added == name) => {
                text_result(required_str(&args, "text")?)
            }
            None => {
                return Err(McpError::invalid_params(
                    format!("unknown tool {name}"),
                    None,
                ))
            }
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(vec![Resource::new(
            "test://greeting",
            "greeting",
        )
        .with_description("A static greeting")
        .with_mime_type("text/plain")]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("test://echo/{text}", "echo")
                .with_description("Reads back the {text} part of the URI")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri;
        let text = if uri == "test://greeting" {
            "hello".to_string()
        } else if let Some(text) = uri.strip_prefix("test://echo/") {
            text.to_string()
        } else {
            return Err(McpError::resource_not_found(
                format!("no resource {uri}"),
                None,
            ));
        };
        Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri)]).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            "greet",
            Some("Greets someone by name"),
            Some(vec![PromptArgument::new("name")
                .with_description("Who to greet")
                .with_required(true)]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name != "greet" {
            return Err(McpError::invalid_params(
                format!("unknown prompt {}", request.name),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let name = required_str(&args, "name")?;
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            format!("Hello, {name}!"),
        )])
        .with_description("A greeting")
        .into())
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut changes = self.tools_changed.subscribe();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        if context.accepted().tools_list_changed == Some(true) {
                            if let Err(error) = context.sink().notify_tool_list_changed().await {
                                log!("could not send tools/list_changed to a subscription: {error}");
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(object(value))
}

fn empty_schema() -> Arc<JsonObject> {
    schema(json!({ "type": "object", "properties": {} }))
}

/// The definition of built-in tool `base`, exposed as `name`.
fn builtin_tool(base: &str, name: String) -> Tool {
    let name: Cow<'static, str> = Cow::Owned(name);
    match base {
        "echo" => Tool::new(
            name,
            "Returns the given text unchanged.",
            schema(json!({
                "type": "object",
                "properties": { "text": { "type": "string", "description": "Text to echo back" } },
                "required": ["text"]
            })),
        ),
        "payload" => Tool::new(
            name,
            "Returns one text block of exactly `bytes` bytes of deterministic JSON-like text.",
            schema(json!({
                "type": "object",
                "properties": {
                    "bytes": { "type": "integer", "minimum": 0, "description": "Size of the text in bytes" }
                },
                "required": ["bytes"]
            })),
        ),
        "structured" => Tool::new(
            name,
            "Returns `n` items as structuredContent and as the same JSON in a text block.",
            schema(json!({
                "type": "object",
                "properties": { "n": { "type": "integer", "minimum": 0, "description": "Number of items" } },
                "required": ["n"]
            })),
        )
        .with_raw_output_schema(schema(json!({
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": { "type": "integer" },
                            "name": { "type": "string" }
                        },
                        "required": ["id", "name"]
                    }
                }
            },
            "required": ["items"]
        }))),
        "rich" => Tool::new(
            name,
            "Returns every content kind: annotated text, image, resource_link, embedded resource, plus result _meta.",
            empty_schema(),
        )
        .with_title("Rich content")
        .with_annotations(ToolAnnotations::with_title("Rich content").read_only(true))
        .with_meta(meta(json!({ "anthropic/alwaysLoad": true }))),
        "fail" => Tool::new(
            name,
            "Always returns a result with isError: true.",
            empty_schema(),
        ),
        "sleep" => Tool::new(
            name,
            "Waits `ms` milliseconds, sending `progress_steps` progress notifications when the request has a progress token. Stops early when cancelled.",
            schema(json!({
                "type": "object",
                "properties": {
                    "ms": { "type": "integer", "minimum": 0, "description": "How long to wait" },
                    "progress_steps": { "type": "integer", "minimum": 0, "description": "Progress notifications to send over the wait" }
                },
                "required": ["ms"]
            })),
        ),
        "crash" => Tool::new(
            name,
            "Exits the server process immediately without answering.",
            schema(json!({
                "type": "object",
                "properties": {
                    "code": { "type": "integer", "description": "Exit code (default 3)" }
                }
            })),
        ),
        "add_tool" => Tool::new(
            name,
            "Adds an echoing tool with the given name and sends notifications/tools/list_changed.",
            schema(json!({
                "type": "object",
                "properties": { "name": { "type": "string", "description": "Name of the new tool" } },
                "required": ["name"]
            })),
        ),
        "pid" => Tool::new(name, "Returns the server's process id.", empty_schema()),
        "count" => Tool::new(
            name,
            "Returns how many tool calls this process has served, this one included.",
            empty_schema(),
        ),
        "poll" => Tool::new(
            name,
            "Returns a CI pipeline status (JSON text) in which only `calls` and `state` change between calls.",
            empty_schema(),
        ),
        "length" => Tool::new(
            name,
            "Returns the length of `text` in bytes (for large requests).",
            schema(json!({
                "type": "object",
                "properties": { "text": { "type": "string", "description": "Any text" } },
                "required": ["text"]
            })),
        ),
        other => unreachable!("no definition for built-in tool {other}"),
    }
}

/// What `poll` returns on the `calls`-th call: a large status in which only
/// two scalar fields move, like a CI status being polled.
fn poll_status(calls: u64) -> String {
    let jobs: Vec<Value> = (0..40)
        .map(|i| {
            json!({
                "id": 1000 + i,
                "name": format!("test-shard-{i}"),
                "stage": "test",
                "status": "success",
                "web_url": format!("https://ci.example.test/p/42/jobs/{}", 1000 + i),
            })
        })
        .collect();
    let state = if calls.is_multiple_of(2) {
        "running"
    } else {
        "pending"
    };
    json!({"pipeline": 42, "calls": calls, "state": state, "jobs": jobs}).to_string()
}

/// The definition of a tool added with `add_tool`.
fn added_tool(name: String) -> Tool {
    Tool::new(
        name,
        "Added at runtime by add_tool; returns the given text unchanged.",
        schema(json!({
            "type": "object",
            "properties": { "text": { "type": "string" } },
            "required": ["text"]
        })),
    )
}

fn meta(value: Value) -> MetaObject {
    MetaObject(object(value))
}

/// Exactly `bytes` bytes of `[{"id":0,"name":"item-0"},{"id":1,…` (ASCII, cut at the end).
fn payload_text(bytes: usize) -> String {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(bytes + 48);
    text.push('[');
    let mut id = 0u64;
    while text.len() < bytes {
        let _ = write!(text, "{{\"id\":{id},\"name\":\"item-{id}\"}},");
        id += 1;
    }
    text.truncate(bytes);
    text
}

fn structured_value(n: u64) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|id| json!({ "id": id, "name": format!("a{id}") }))
        .collect();
    json!({ "items": items })
}

fn rich_result() -> CallToolResult {
    let text = TextContent::new("rich text for the user").with_annotations(
        Annotations::default()
            .with_audience(vec![Role::User])
            .with_priority(0.5),
    );
    let link = Resource::new("test://greeting", "greeting")
        .with_description("A static greeting")
        .with_mime_type("text/plain");
    let embedded = ResourceContents::text("embedded hello", "test://embedded");
    CallToolResult::success(vec![
        ContentBlock::Text(text),
        ContentBlock::image(TINY_PNG_BASE64, "image/png"),
        ContentBlock::resource_link(link),
        ContentBlock::resource(embedded),
    ])
    .with_meta(Some(meta(json!({
        "anthropic/maxResultSizeChars": 1000,
        "test/key": "v"
    }))))
}

fn required_str(args: &JsonObject, key: &str) -> Result<String, McpError> {
    match args.get(key) {
        Some(Value::String(value)) => Ok(value.clone()),
        Some(_) => Err(McpError::invalid_params(
            format!("`{key}` must be a string"),
            None,
        )),
        None => Err(McpError::invalid_params(
            format!("missing argument `{key}`"),
            None,
        )),
    }
}

fn optional_u64(args: &JsonObject, key: &str) -> Result<Option<u64>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_u64().map(Some).ok_or_else(|| {
            McpError::invalid_params(format!("`{key}` must be a non-negative integer"), None)
        }),
    }
}

fn required_u64(args: &JsonObject, key: &str) -> Result<u64, McpError> {
    optional_u64(args, key)?
        .ok_or_else(|| McpError::invalid_params(format!("missing argument `{key}`"), None))
}

fn optional_i64(args: &JsonObject, key: &str) -> Result<Option<i64>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_i64()
            .map(Some)
            .ok_or_else(|| McpError::invalid_params(format!("`{key}` must be an integer"), None)),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("floor") {
        std::process::exit(floor::run(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("relay") {
        std::process::exit(relay::run(&args[1..]).await);
    }
    if std::env::var_os("DEVBOY_TEST_FAIL_START").is_some() {
        log!("DEVBOY_TEST_FAIL_START is set: failing on purpose before serving");
        std::process::exit(1);
    }
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(message) => {
            log!("{message}");
            std::process::exit(2);
        }
    };
    if let Ok(raw) = std::env::var("DEVBOY_TEST_STARTUP_DELAY_MS") {
        match raw.trim().parse::<u64>() {
            Ok(ms) => {
                log!("startup delay {ms} ms");
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Err(_) => log!("ignoring DEVBOY_TEST_STARTUP_DELAY_MS={raw:?}: not an integer"),
        }
    }
    log!("serving on stdio (config: {config:?})");
    // Lines up to MAX_PAYLOAD_BYTES: rmcp's default of 16 MiB would drop
    // the large requests the proxy's tests send through.
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(stdin, stdout)
        .with_max_line_length(MAX_PAYLOAD_BYTES as usize);
    let service = match TestServer::new(config).serve(transport).await {
        Ok(service) => service,
        Err(error) => {
            log!("initialization failed: {error}");
            std::process::exit(1);
        }
    };
    match service.waiting().await {
        Ok(reason) => log!("stopped: {reason:?}"),
        Err(error) => log!("stopped with an error: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_has_exact_size() {
        for bytes in [0, 1, 2, 25, 26, 27, 1000, 65_537] {
            let text = payload_text(bytes);
            assert_eq!(text.len(), bytes);
        }
        assert!(payload_text(60).starts_with(r#"[{"id":0,"name":"item-0"},{"id":1"#));
    }

    #[test]
    fn structured_items() {
        assert_eq!(
            structured_value(2),
            json!({ "items": [ { "id": 0, "name": "a0" }, { "id": 1, "name": "a1" } ] })
        );
    }

    #[test]
    fn every_builtin_has_a_definition() {
        for base in BUILTIN_TOOLS {
            let tool = builtin_tool(base, format!("p_{base}"));
            assert_eq!(tool.name, format!("p_{base}"));
            assert!(tool.description.is_some());
        }
    }
}
