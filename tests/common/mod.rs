//! Shared pieces of devboy's end-to-end tests: start the real `devboy`
//! binary with a config, talk to it with rmcp's client, record what it sends.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

#[allow(deprecated)] // LoggingMessageNotificationParam: SEP-2577's legacy.
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    LoggingMessageNotificationParam, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};

/// The devboy binary under test.
pub fn devboy_bin() -> &'static str {
    env!("CARGO_BIN_EXE_devboy")
}

/// The test MCP server binary (built on demand when a filtered test run did
/// not build it).
pub fn test_server_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = Path::new(devboy_bin()).parent().expect("binary dir");
            let path = dir.join("devboy-test-server");
            if !path.exists() {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                let status = std::process::Command::new(cargo)
                    .args(["build", "-q", "-p", "devboy-test-server"])
                    .current_dir(env!("CARGO_MANIFEST_DIR"))
                    .status()
                    .expect("run cargo build");
                assert!(status.success(), "building devboy-test-server failed");
            }
            assert!(path.exists(), "{} missing", path.display());
            path
        })
        .clone()
}

/// A TOML basic string (JSON string escapes are valid TOML escapes).
/// Runs `git ARGS` in `dir` as `author` (email derived from it), dated
/// `date` when given (author and committer), with no user or system
/// config; fails the test on error; returns stdout, trimmed.
#[allow(dead_code)]
pub fn git_as(dir: &Path, author: &str, date: Option<&str>, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new("git");
    cmd.args(["-c", &format!("user.name={author}")])
        .args([
            "-c",
            &format!("user.email={}@example.invalid", author.replace(' ', ".")),
        ])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir);
    if let Some(date) = date {
        cmd.env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date);
    }
    let output = cmd.output().expect("run git");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A `[servers.NAME]` table of devboy.toml that starts `peer`.
#[allow(dead_code)]
pub fn peer_toml(name: &str, peer: &devboy_testkit::peers::PeerCommand) -> String {
    let list = |items: Vec<String>| items.join(", ");
    format!(
        "[servers.{name}]\ncommand = {}\nargs = [{}]\nenv = {{ {} }}\n\n",
        toml_str(&peer.program_str()),
        list(peer.args.iter().map(|a| toml_str(a)).collect()),
        list(
            peer.env
                .iter()
                .map(|(k, v)| format!("{} = {}", toml_str(k), toml_str(v)))
                .collect()
        ),
    )
}

pub fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// Log filter for devboy processes started by tests: quiet unless
/// `DEVBOY_TEST_LOG` asks for more (e.g. `DEVBOY_TEST_LOG=devboy_mcp=debug`).
pub fn test_log_filter() -> String {
    std::env::var("DEVBOY_TEST_LOG").unwrap_or_else(|_| "warn".into())
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "devboy-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self(path)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the client saw besides responses.
#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// The log messages it was sent (`notifications/message`).
    #[allow(deprecated)] // Logging: SEP-2577's legacy, still spoken.
    pub logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    pub tool_list_changed: Arc<AtomicUsize>,
    pub changed: Arc<tokio::sync::Notify>,
    /// The client's name at `initialize` (`devboy-e2e` unless set).
    pub name: Option<&'static str>,
    /// Declares elicitation at `initialize`, as devboy does to its
    /// upstreams (and Claude Code to its servers).
    pub elicitation: bool,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.elicitation {
            capabilities.elicitation = Some(Default::default());
        }
        ClientConfig::new(
            capabilities,
            Implementation::new(self.name.unwrap_or("devboy-e2e"), "0"),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
        self.changed.notify_waiters();
    }

    #[allow(deprecated)] // Logging: SEP-2577's legacy, still spoken.
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params);
        self.changed.notify_waiters();
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tool_list_changed.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

/// A running devboy with a connected client.
pub struct Devboy {
    pub client: RunningService<RoleClient, Recorder>,
    pub recorder: Recorder,
    pub dir: TempDir,
}

impl Devboy {
    /// Starts devboy with `config` written to `devboy.toml` in a temp dir.
    /// `{dir}` in the config is replaced by that dir, `{server}` by the test
    /// server's path.
    pub async fn start(config: &str) -> Self {
        Self::start_with(config, "devboy.toml", &[]).await
    }

    pub async fn start_with(config: &str, file_name: &str, extra_args: &[&str]) -> Self {
        Self::start_full(config, file_name, extra_args, None, &[]).await
    }

    /// [`start`](Self::start) with extra environment variables (set after
    /// the hermetic defaults, so they override them) and, optionally, a
    /// `pipeline_config.toml` in devboy's config directory.
    pub async fn start_with_env(
        config: &str,
        pipeline: Option<&str>,
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Self {
        Self::start_full(config, "devboy.toml", &[], pipeline, env).await
    }

    /// [`start`](Self::start) with `pipeline` as the `pipeline_config.toml`
    /// of devboy's config directory (found there, not passed by flag).
    pub async fn start_with_pipeline(config: &str, pipeline: &str) -> Self {
        Self::start_full(config, "devboy.toml", &[], Some(pipeline), &[]).await
    }

    pub async fn start_full(
        config: &str,
        file_name: &str,
        extra_args: &[&str],
        pipeline: Option<&str>,
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Self {
        Self::start_as(
            Recorder::default(),
            config,
            file_name,
            extra_args,
            pipeline,
            env,
        )
        .await
    }

    /// [`start_full`](Self::start_full) with `recorder` as the client (its
    /// name, say).
    pub async fn start_as(
        recorder: Recorder,
        config: &str,
        file_name: &str,
        extra_args: &[&str],
        pipeline: Option<&str>,
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Self {
        let dir = TempDir::new("proxy");
        if let Some(pipeline) = pipeline {
            std::fs::write(dir.path().join("pipeline_config.toml"), pipeline)
                .expect("write pipeline config");
        }
        let text = config
            .replace("{dir}", &dir.path().display().to_string())
            .replace("{server}", &test_server_bin().display().to_string());
        let path = dir.path().join(file_name);
        std::fs::write(&path, text).expect("write config");
        let mut cmd = tokio::process::Command::new(devboy_bin());
        cmd.arg("mcp").arg("--config").arg(&path).args(extra_args);
        // These tests list tools right after starting and expect every
        // upstream's; a busy machine may start one later than devboy's
        // default grace. Tests of the grace itself set their own.
        if !extra_args.contains(&"--list-grace-ms") {
            cmd.args(["--list-grace-ms", "30000"]);
        }
        cmd.env("RUST_LOG", test_log_filter());
        // Hermetic: the user's own pipeline_config.toml never applies (and
        // telemetry goes to <dir>/telemetry), and no listing kept by an
        // earlier run (or another test) answers the first tools/list.
        cmd.env("DEVBOY_CONFIG_DIR", dir.path());
        cmd.env("DEVBOY_CACHE_DIR", dir.path().join("cache"));
        cmd.envs(env.iter().copied());
        let transport = TokioChildProcess::new(cmd).expect("spawn devboy");
        let client =
            tokio::time::timeout(Duration::from_secs(20), recorder.clone().serve(transport))
                .await
                .expect("initialize within 20 s")
                .expect("initialize");
        Self {
            client,
            recorder,
            dir,
        }
    }

    pub async fn call(&self, name: &str, args: Value) -> CallToolResult {
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = args.as_object().cloned();
        self.client
            .peer()
            .call_tool(params)
            .await
            .unwrap_or_else(|e| panic!("call {name}: {e}"))
    }

    pub async fn tool_names(&self) -> Vec<String> {
        self.client
            .peer()
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    pub async fn status(&self) -> Value {
        let result = self.call("devboy_status", json!({})).await;
        serde_json::from_str(&text_of(&result)).expect("status is JSON")
    }

    /// Polls status until `pred` holds for the named upstream, or panics.
    pub async fn wait_upstream(
        &self,
        name: &str,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let status = self.status().await;
            let entry = status["upstreams"]
                .as_array()
                .and_then(|a| a.iter().find(|u| u["name"] == name))
                .cloned()
                .unwrap_or(Value::Null);
            if pred(&entry) {
                return entry;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "upstream {name}: waited 30 s for {what}; last status {status}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// All text blocks of a result, joined by newlines.
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A client straight to an upstream command, bypassing devboy.
pub async fn direct_client(command: &Path) -> RunningService<RoleClient, Recorder> {
    let transport =
        TokioChildProcess::new(tokio::process::Command::new(command)).expect("spawn upstream");
    Recorder::default()
        .serve(transport)
        .await
        .expect("initialize upstream")
}

/// A line-level JSON-RPC client over devboy's stdio, for what rmcp's client
/// hides (it rewrites progress tokens, for one).
pub struct RawClient {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    pub dir: TempDir,
}

impl RawClient {
    pub async fn start(config: &str) -> Self {
        let dir = TempDir::new("raw");
        let text = config.replace("{server}", &test_server_bin().display().to_string());
        let path = dir.path().join("devboy.toml");
        std::fs::write(&path, text).expect("write config");
        let path = path.display().to_string();
        let mut client = Self::start_command(&["mcp", "--config", &path], &[]).await;
        client.dir = dir;
        client
    }

    /// devboy with exactly these arguments and extra environment.
    pub async fn start_command(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_command_in(args, env, None).await
    }

    /// [`start_command`](Self::start_command) in working directory `cwd`
    /// (the test's own when `None`).
    pub async fn start_command_in(args: &[&str], env: &[(&str, &str)], cwd: Option<&Path>) -> Self {
        Self::start_declaring(args, env, cwd, json!({})).await
    }

    /// [`start_command_in`](Self::start_command_in) as a client declaring
    /// `capabilities` in `initialize` (`{"roots": {}}`: the test answers
    /// devboy's `roots/list` itself).
    pub async fn start_declaring(
        args: &[&str],
        env: &[(&str, &str)],
        cwd: Option<&Path>,
        capabilities: Value,
    ) -> Self {
        use std::process::Stdio;
        use tokio::io::AsyncBufReadExt;
        let dir = TempDir::new("raw");
        let mut command = tokio::process::Command::new(devboy_bin());
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        let mut child = command
            .args(args)
            .env("RUST_LOG", test_log_filter())
            // Test runs write no telemetry to the user's own directory
            // (a test that wants it passes DEVBOY_TELEMETRY and a dir).
            .env("DEVBOY_TELEMETRY", "off")
            // Nor tool lists kept by earlier runs (a test that wants them
            // passes its own DEVBOY_CACHE_DIR).
            .env("DEVBOY_CACHE_DIR", dir.path().join("cache"))
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn devboy");
        let stdin = child.stdin.take().expect("stdin");
        let lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut client = Self {
            child,
            stdin,
            lines,
            dir,
        };
        client
            .send(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": capabilities,
                "clientInfo": {"name": "raw", "version": "0"}}}),
            )
            .await;
        let init = client.recv_response(0).await;
        assert!(init.get("result").is_some(), "initialize: {init}");
        client
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    pub async fn send(&mut self, message: Value) {
        use tokio::io::AsyncWriteExt;
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    /// Writes `bytes` to devboy's stdin as they are (no newline added).
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(bytes).await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    /// The next message, within 20 s.
    pub async fn recv(&mut self) -> Value {
        self.recv_within(Duration::from_secs(20)).await
    }

    /// The next message, within `limit`.
    pub async fn recv_within(&mut self, limit: Duration) -> Value {
        let line = tokio::time::timeout(limit, self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("a message within {limit:?}"))
            .expect("read")
            .expect("devboy closed stdout");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout is not JSON-RPC ({e}): {line}"))
    }

    /// Reads until the response with `id`; returns it. Notifications seen on
    /// the way are kept in `notes`.
    pub async fn recv_response_collecting(&mut self, id: i64, notes: &mut Vec<Value>) -> Value {
        loop {
            let message = self.recv().await;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            notes.push(message);
        }
    }

    pub async fn recv_response(&mut self, id: i64) -> Value {
        self.recv_response_collecting(id, &mut Vec::new()).await
    }

    /// Calls tool `name` with `arguments` as request `id`; returns the
    /// response.
    pub async fn call_tool(&mut self, id: i64, name: &str, arguments: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}))
            .await;
        self.recv_response(id).await
    }

    /// `devboy_status` as request `id`, parsed.
    pub async fn status(&mut self, id: i64) -> Value {
        let response = self.call_tool(id, "devboy_status", json!({})).await;
        let text = response["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("status is text: {response}"));
        serde_json::from_str(text).expect("status is JSON")
    }

    /// The exposed tool names of one `tools/list`, as request `id`.
    pub async fn tool_names(&mut self, id: i64) -> Vec<String> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}}))
            .await;
        let response = self.recv_response(id).await;
        response["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("tools/list: {response}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// devboy's process id.
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id().expect("devboy running")
    }

    /// Sends `kill -<signal>` to devboy and waits for it to exit.
    pub async fn kill_with(mut self, signal: &str) -> std::process::ExitStatus {
        let pid = self.child.id().expect("devboy running");
        let sent = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(sent.success());
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("devboy exits within 10 s of the signal")
            .expect("wait")
    }

    /// Closes devboy's stdin and waits up to `limit` for it to exit.
    pub async fn close_stdin_and_wait(
        mut self,
        limit: Duration,
    ) -> Option<std::process::ExitStatus> {
        drop(self.stdin);
        tokio::time::timeout(limit, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    pub async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// Upstream `name`'s entry in a `devboy_status` report.
pub fn upstream<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["upstreams"]
        .as_array()
        .and_then(|all| all.iter().find(|u| u["name"] == name))
        .unwrap_or_else(|| panic!("no upstream {name} in {status}"))
}

/// Whether `pid` is gone (or a zombie) right now.
pub fn process_gone(pid: u32) -> bool {
    !std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// Waits up to 10 s for process `pid` to be gone (or a zombie).
pub async fn wait_process_gone(pid: u32) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !process_gone(pid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    process_gone(pid)
}

/// The JSON summary a Python SDK test client (`tests/python/*.py`, their
/// `checks.finish`) printed last on stdout, and its stderr; panics with
/// both when there is none.
#[allow(dead_code)]
pub fn python_summary(output: &std::process::Output) -> (Value, String) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let summary = stdout
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(Value::is_object)
        })
        .unwrap_or_else(|| {
            panic!("no JSON summary from the SDK client\nstdout:\n{stdout}\nstderr:\n{stderr}")
        });
    (summary, stderr)
}

/// Runs `devboy doctor --config CONFIG` in `claude`'s environment (plus
/// `env`, what devboy's registration sets), as the README has a user do
/// after registering: it starts every server once and keeps its listing, so
/// print mode's one `tools/list` has every tool however slowly a server's
/// first start goes (a clean CI machine's first Python or npx start has
/// taken longer than the 4 s grace). Panics unless each of `servers` came
/// up.
pub fn keep_listings(
    claude: &devboy_testkit::ClaudeCode,
    config: &Path,
    env: &[(&str, &str)],
    servers: &[&str],
) {
    let out = claude
        .shell(
            &format!("{} doctor --config {}", devboy_bin(), config.display()),
            &[],
        )
        .envs(env.iter().copied())
        .output()
        .expect("run devboy doctor");
    let said = String::from_utf8_lossy(&out.stdout);
    for server in servers {
        assert!(
            said.lines()
                .any(|l| l.contains(&format!("✔ {server} (")) && l.contains("ready")),
            "devboy doctor did not find {server} ready:\n{said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Polls `check` every 100 ms until it holds, failing after 20 s with
/// `what` it waited for.
pub async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited 20 s for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Registers devboy with `claude` as server `devboy`, proxying `servers`
/// from a devboy.toml in its scratch directory, and keeps every server's
/// listing first as `devboy doctor` does for a user (so the first
/// `tools/list` has them all). Returns the config's path.
pub fn add_devboy_with(
    claude: &devboy_testkit::ClaudeCode,
    servers: &[(&str, devboy_testkit::peers::PeerCommand)],
) -> std::path::PathBuf {
    add_devboy_with_config(claude, servers, "")
}

/// [`add_devboy_with`], with `extra` lines after the server tables (still
/// in the last one's table until a header of their own).
pub fn add_devboy_with_config(
    claude: &devboy_testkit::ClaudeCode,
    servers: &[(&str, devboy_testkit::peers::PeerCommand)],
    extra: &str,
) -> std::path::PathBuf {
    let config = claude.scratch_dir().join("devboy.toml");
    let mut toml: String = servers
        .iter()
        .map(|(name, peer)| peer_toml(name, peer))
        .collect();
    toml.push_str(extra);
    std::fs::write(&config, toml).expect("write devboy.toml");
    claude
        .mcp_add(
            "devboy",
            devboy_bin(),
            &["mcp", "--config", config.to_str().expect("a UTF-8 path")],
        )
        .expect("claude mcp add devboy");
    let names: Vec<&str> = servers.iter().map(|(name, _)| *name).collect();
    keep_listings(claude, &config, &[], &names);
    config
}

/// Every line of the events files under `telemetry/events`, in file
/// order, parsed (none when the folder is not there yet).
pub fn events(telemetry: &Path) -> Vec<serde_json::Value> {
    let Ok(entries) = std::fs::read_dir(telemetry.join("events")) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A process killed when the test lets go of it.
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` and waits for the line of its `stream` that starts
/// with `marker`; returns the process and the rest of that line.
pub fn start_until(
    mut command: std::process::Command,
    marker: &'static str,
    from_stderr: bool,
) -> (Running, String) {
    if from_stderr {
        command
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
    } else {
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
    }
    let mut child = command
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("start the process");
    let stream: Box<dyn std::io::Read + Send> = if from_stderr {
        Box::new(child.stderr.take().unwrap())
    } else {
        Box::new(child.stdout.take().unwrap())
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stream)
            .lines()
            .map_while(Result::ok)
        {
            eprintln!("  | {line}");
            if let Some(rest) = line.strip_prefix(marker) {
                let _ = tx.send(rest.trim().to_owned());
            }
        }
    });
    let running = Running(child);
    let rest = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("no `{marker}` line within 60 s"));
    (running, rest)
}
