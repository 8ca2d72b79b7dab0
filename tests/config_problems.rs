//! A config that does not load never stops devboy: started with a broken
//! `pipeline_config.toml`, a misspelt `[devboy]` key or a devboy.toml that
//! is not TOML at all, `devboy mcp` and `devboy serve --http` answer
//! `initialize` and `tools/list`, their tools work, and the problem, with
//! its file, line:col and key, shows in `devboy_status`, in `devboy status`
//! (over the control socket), in `devboy doctor`, and once on stderr,
//! until the file is fixed while devboy runs. Against the real binary and
//! the devboy test server (`t`).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{text_of, toml_str, Recorder, TempDir};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

fn t_entry() -> String {
    format!(
        "[servers.t]\ncommand = {}\n",
        toml_str(&common::test_server_bin().display().to_string())
    )
}

/// What a devboy process wrote to stderr so far, collected as it comes.
#[derive(Clone, Default)]
struct Stderr(Arc<Mutex<String>>);

impl Stderr {
    /// Reads `stream` to its end in the background.
    fn collect(
        &self,
        stream: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        use tokio::io::AsyncBufReadExt;
        let text = self.0.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[devboy] {line}");
                let mut text = text.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        })
    }

    /// How many lines contain `part`.
    fn lines_with(&self, part: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .lines()
            .filter(|l| l.contains(part))
            .count()
    }
}

/// `devboy mcp --config DIR/devboy.toml` in `dir`, whose config
/// directory, runtime directory and cache are all under `dir`.
struct StdioDevboy {
    client: RunningService<RoleClient, Recorder>,
    stderr: Stderr,
    reader: tokio::task::JoinHandle<()>,
}

fn hermetic(cmd: &mut Command, dir: &Path) {
    cmd.current_dir(dir)
        .env("RUST_LOG", common::test_log_filter())
        .env("HOME", dir)
        .env("DEVBOY_CONFIG_DIR", dir)
        .env("DEVBOY_CACHE_DIR", dir.join("cache"))
        .env("DEVBOY_RUNTIME_DIR", dir.join("run"))
        .env("DEVBOY_TELEMETRY", "off");
}

async fn start_stdio(dir: &Path) -> StdioDevboy {
    let mut cmd = Command::new(common::devboy_bin());
    cmd.args(["mcp", "--list-grace-ms", "30000", "--config"])
        .arg(dir.join("devboy.toml"));
    hermetic(&mut cmd, dir);
    let (transport, stderr) = TokioChildProcess::builder(tokio::process::Command::from(cmd))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn devboy");
    let collected = Stderr::default();
    let reader = collected.collect(stderr.expect("stderr piped"));
    let client = tokio::time::timeout(
        Duration::from_secs(30),
        Recorder::default().serve(transport),
    )
    .await
    .expect("initialize within 30 s")
    .expect("initialize");
    StdioDevboy {
        client,
        stderr: collected,
        reader,
    }
}

impl StdioDevboy {
    /// Ends the session and waits until devboy has written all it will.
    async fn stop(self) -> Stderr {
        let _ = self.client.cancel().await;
        tokio::time::timeout(Duration::from_secs(20), self.reader)
            .await
            .expect("devboy ends within 20 s")
            .unwrap();
        self.stderr
    }
}

async fn call(
    client: &RunningService<RoleClient, Recorder>,
    name: &str,
    args: Value,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = args.as_object().cloned();
    client
        .peer()
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("call {name}: {e}"))
}

async fn tool_names(client: &RunningService<RoleClient, Recorder>) -> Vec<String> {
    client
        .peer()
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

async fn status(client: &RunningService<RoleClient, Recorder>) -> Value {
    let result = call(client, "devboy_status", json!({})).await;
    assert_ne!(result.is_error, Some(true), "{}", text_of(&result));
    serde_json::from_str(&text_of(&result)).expect("status is JSON")
}

/// `devboy_status`'s `config_problem` (empty when none).
async fn problem(client: &RunningService<RoleClient, Recorder>) -> String {
    status(client).await["config_problem"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `devboy ARGS` run in `dir` as the devboys there are: (success, stdout).
fn devboy_cli(dir: &Path, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(common::devboy_bin());
    cmd.args(args).stdin(Stdio::null());
    hermetic(&mut cmd, dir);
    let output = cmd.output().expect("run devboy");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (output.status.success(), format!("{stdout}{stderr}"))
}

/// A file replaced as editors save it: a new file renamed over the old.
fn rewrite(path: &Path, text: &str) {
    let next = path.with_extension("new");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_pipeline_config_at_start_is_served_shown_everywhere_and_cleared_once_fixed() {
    let dir = TempDir::new("problems-pipeline");
    std::fs::write(dir.path().join("devboy.toml"), t_entry()).unwrap();
    let pipeline = dir.path().join("pipeline_config.toml");
    std::fs::write(
        &pipeline,
        "[dedup]\nmin_body_bytes = \"512\"\nttl = 3\nmax_entries = 99\n",
    )
    .unwrap();
    let devboy = start_stdio(dir.path()).await;

    let names = tool_names(&devboy.client).await;
    for name in ["devboy_status", "devboy_servers", "devboy_expand", "t__pid"] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    let pid = call(&devboy.client, "t__pid", json!({})).await;
    assert_ne!(pid.is_error, Some(true), "{}", text_of(&pid));
    let servers = call(&devboy.client, "devboy_servers", json!({"action": "list"})).await;
    assert_ne!(servers.is_error, Some(true), "{}", text_of(&servers));

    let file = pipeline.display().to_string();
    let bad_value = format!("{file}:2:18: dedup.min_body_bytes: expected an integer of at least 1, found the string \"512\"; ignored");
    let unknown = format!(
        "{file}:3:1: dedup.ttl: unknown key; expected one of: enabled, min_body_bytes, ttl_secs"
    );
    let said = problem(&devboy.client).await;
    assert!(
        said.contains(&bad_value) && said.contains(&unknown),
        "{said}"
    );
    assert_eq!(said.lines().count(), 2, "{said}");

    let (ok, text) = devboy_cli(dir.path(), &["status"]);
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!("  config problem: {bad_value}"))
            && text.contains(&format!("  config problem: {unknown}")),
        "{text}"
    );

    let config = dir.path().join("devboy.toml").display().to_string();
    let (ok, text) = devboy_cli(
        dir.path(),
        &["doctor", "--config", &config, "--wait-ms", "10000"],
    );
    assert!(!ok, "a problem makes doctor fail:\n{text}");
    assert!(
        text.contains(&format!("pipeline config: {file}"))
            && text.contains(&format!("  ✘ {bad_value}"))
            && text.contains(&format!("  ✘ {unknown}")),
        "{text}"
    );

    // Edited, still with the same problems and one more: only the new one
    // is said.
    rewrite(
        &pipeline,
        "[dedup]\nmin_body_bytes = \"512\"\nttl = 3\n\n[encodng]\nenabled = false\n",
    );
    common::until("the new problem shown", async || {
        problem(&devboy.client)
            .await
            .contains("encodng: unknown key")
    })
    .await;
    // Fixed: the problems clear and the file applies.
    rewrite(&pipeline, "[dedup]\nmin_body_bytes = 512\n");
    common::until("the problems cleared", async || {
        status(&devboy.client).await["config_problem"].is_null()
    })
    .await;
    let (_, text) = devboy_cli(dir.path(), &["status"]);
    assert!(!text.contains("config problem"), "{text}");

    let stderr = devboy.stop().await;
    assert_eq!(stderr.lines_with(&bad_value), 1, "said once");
    assert_eq!(stderr.lines_with(&unknown), 1, "said once");
    assert_eq!(stderr.lines_with("encodng: unknown key"), 1, "said once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misspelt_devboy_key_at_start_leaves_the_rest_of_the_file_running() {
    let dir = TempDir::new("problems-devboy-key");
    // Two bad keys in one server entry: both named.
    std::fs::write(
        dir.path().join("devboy.toml"),
        format!(
            "[devboy]\nsever_name = \"dev\"\n\n{}\n[servers.bad]\ncomand = \"x\"\ntimeout_ms = \"5s\"\n",
            t_entry()
        ),
    )
    .unwrap();
    let devboy = start_stdio(dir.path()).await;

    let names = tool_names(&devboy.client).await;
    assert!(names.iter().any(|n| n == "t__pid"), "{names:?}");
    let pid = call(&devboy.client, "t__pid", json!({})).await;
    assert_ne!(pid.is_error, Some(true), "{}", text_of(&pid));

    let file = dir.path().join("devboy.toml").display().to_string();
    let misspelt = format!(
        "{file}:2:1: devboy.sever_name: unknown key; expected one of: server_name (did you mean `server_name`?); ignored"
    );
    let report = status(&devboy.client).await;
    assert_eq!(report["config_problem"], json!(misspelt), "{report}");
    let bad = common::upstream(&report, "bad");
    let error = bad["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("{file}:8:1: servers.bad.comand: unknown key"))
            && error.contains("(did you mean `command`?)")
            && error.contains(&format!(
                "{file}:9:14: servers.bad.timeout_ms: expected a positive integer"
            )),
        "{bad}"
    );

    let (ok, text) = devboy_cli(dir.path(), &["status"]);
    assert!(
        ok && text.contains(&format!("  config problem: {misspelt}")),
        "{text}"
    );
    let (ok, text) = devboy_cli(
        dir.path(),
        &["doctor", "--config", &file, "--wait-ms", "10000"],
    );
    assert!(!ok, "{text}");
    assert!(text.contains(&format!("  ✘ {misspelt}")), "{text}");
    assert!(
        text.contains("servers.bad.comand") && text.contains("servers.bad.timeout_ms"),
        "{text}"
    );

    let stderr = devboy.stop().await;
    assert_eq!(stderr.lines_with(&misspelt), 1, "said once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_devboy_toml_that_is_not_toml_serves_the_built_ins_until_it_is_fixed() {
    let dir = TempDir::new("problems-not-toml");
    let config = dir.path().join("devboy.toml");
    std::fs::write(&config, "[servers.t\ncommand = ").unwrap();
    let devboy = start_stdio(dir.path()).await;

    let names = tool_names(&devboy.client).await;
    assert!(names.iter().any(|n| n == "devboy_status"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("t__")), "{names:?}");
    let said = problem(&devboy.client).await;
    assert!(
        said.starts_with(&format!("{}:1:", config.display()))
            && said.contains("invalid TOML")
            && said.contains("built-in tools only (no servers) until the file is fixed"),
        "{said}"
    );

    // Fixed while devboy runs: its servers start, the problem clears.
    rewrite(&config, &t_entry());
    common::until("t's tools", async || {
        tool_names(&devboy.client)
            .await
            .iter()
            .any(|n| n == "t__pid")
    })
    .await;
    assert!(status(&devboy.client).await["config_problem"].is_null());
    let stderr = devboy.stop().await;
    assert_eq!(stderr.lines_with("invalid TOML"), 1, "said once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_http_with_a_broken_project_pipeline_layer_serves_and_says_so() {
    let dir = TempDir::new("problems-http");
    std::fs::write(dir.path().join("devboy.toml"), t_entry()).unwrap();
    // The project's committed layer, found from devboy's directory.
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::create_dir_all(dir.path().join(".devboy")).unwrap();
    let layer = dir.path().join(".devboy").join("pipeline_config.toml");
    std::fs::write(
        &layer,
        "[encoding]\nbudget_tokens = -1\n[telemetry]\nenabld = true\n",
    )
    .unwrap();

    let mut cmd = Command::new(common::devboy_bin());
    cmd.args([
        "serve",
        "--http",
        "127.0.0.1:0",
        "--list-grace-ms",
        "30000",
        "--config",
    ])
    .arg(dir.path().join("devboy.toml"))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    hermetic(&mut cmd, dir.path());
    let mut child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .expect("start devboy serve");
    let stderr = Stderr::default();
    let reader = stderr.collect(child.stderr.take().unwrap());
    let url = {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let found = stderr
                .0
                .lock()
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("devboy: serving MCP at ").map(str::to_owned));
            if let Some(url) = found {
                break url;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "devboy serve did not say where it serves"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };

    // reqwest, under rmcp's client, needs a TLS provider even for http://.
    devboy_mcp::install_tls_provider();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.as_str());
    let client = Recorder::default()
        .serve(transport)
        .await
        .expect("initialize over HTTP");
    let names = tool_names(&client).await;
    assert!(
        names.iter().any(|n| n == "t__pid") && names.iter().any(|n| n == "devboy_status"),
        "{names:?}"
    );
    let file = layer.display().to_string();
    let said = problem(&client).await;
    assert!(
        said.contains(&format!("{file}:2:17: encoding.budget_tokens"))
            && said.contains(&format!("{file}:4:1: telemetry.enabld: unknown key"))
            && said.contains("did you mean `enabled`?"),
        "{said}"
    );
    let (ok, text) = devboy_cli(dir.path(), &["status"]);
    assert!(
        ok && text.contains("serving http")
            && text.contains(&format!("  config problem: {file}:4:1: telemetry.enabld")),
        "{text}"
    );
    let _ = client.cancel().await;
    let _ = child.kill().await;
    tokio::time::timeout(Duration::from_secs(20), reader)
        .await
        .expect("stderr ends with devboy")
        .unwrap();
    assert_eq!(
        stderr.lines_with("telemetry.enabld: unknown key"),
        1,
        "said once"
    );
}
