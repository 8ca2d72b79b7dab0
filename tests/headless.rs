//! Headless completeness: in print mode (`claude -p`, the Agent SDK, CI)
//! Claude Code runs only the tools of its first `tools/list`, so devboy
//! answers it with every configured server's tools, from the listing each
//! server gave the last time it ran (kept by any `devboy mcp`, `devboy
//! doctor` or `devboy init`). A slow server's tool is then callable in
//! every run after the first, and in the first after `devboy doctor`; a
//! down server's kept tools stay listed and their calls say why; a changed
//! entry never reuses its old listing; a broken cache file costs one
//! warning.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{test_server_bin, toml_str, upstream, RawClient, TempDir};
use devboy_testkit::{ClaudeCode, Script, ScriptedModel};
use serde_json::{json, Value};

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");
const SLOW_TOOL: &str = "mcp__devboy__slow__echo";

/// An executable `sh` script at `path` with `body` after the shebang.
fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    // Written beside and renamed: a script being replaced while a shell
    // reads it would run half of each.
    let temp = path.with_extension("tmp");
    std::fs::write(&temp, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// A devboy.toml whose one server, `slow`, is the test server behind the
/// script `slow.sh` answering `initialize` 6 s after it starts; returns
/// the config and the script (which a test may rewrite: the entry, and so
/// its kept listing, stays the same).
fn slow_server(claude: &ClaudeCode) -> (PathBuf, PathBuf) {
    let dir = claude.scratch_dir();
    let script = dir.join("slow.sh");
    write_script(
        &script,
        &format!(
            "exec {}",
            toml_str(&test_server_bin().display().to_string())
        ),
    );
    let config = dir.join("devboy.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.slow]\ncommand = {}\nenv = {{ DEVBOY_TEST_STARTUP_DELAY_MS = \"6000\" }}\n",
            toml_str(&script.display().to_string())
        ),
    )
    .unwrap();
    // Registered as a user would: devboy's defaults, no longer grace.
    claude
        .mcp_add(
            "devboy",
            DEVBOY,
            &["mcp", "--config", config.to_str().unwrap()],
        )
        .unwrap();
    (config, script)
}

/// One `claude -p` run whose model calls `slow`'s echo with `text`;
/// returns what the model got back.
fn print_run(claude: ClaudeCode, text: &str) -> (ClaudeCode, devboy_testkit::ToolResultSeen) {
    let model = ScriptedModel::start(
        Script::new()
            .tool_use(SLOW_TOOL, json!({"text": text}))
            .final_text("done"),
    )
    .unwrap();
    let claude = claude.model(&model);
    claude
        .run_print("Echo something.", &[SLOW_TOOL])
        .unwrap()
        .assert_success();
    let results = model.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    (claude, results[0].clone())
}

/// Today's first run of a server 6 s slow cannot use it (it is not in the
/// first listing), but that run keeps its listing once the server is up,
/// and every later run lists it at once and runs it.
#[test]
fn a_slow_servers_tool_runs_in_print_mode_on_every_run_after_the_first() {
    let claude = ClaudeCode::new().unwrap();
    slow_server(&claude);
    let listings = claude.home().join(".cache/devboy/listings");
    // The first session does other work while the server starts (here a
    // shell command that ends once devboy has kept the listing).
    let wait = format!(
        "for i in $(seq 1 600); do ls {}/slow-*.json >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1",
        listings.display()
    );
    let model = ScriptedModel::start(
        Script::new()
            .tool_use("Bash", json!({"command": wait, "description": "wait"}))
            .final_text("done"),
    )
    .unwrap();
    let claude = claude.model(&model);
    claude
        .run_print("Wait for the build.", &["Bash"])
        .unwrap()
        .assert_success();
    let kept = model
        .tool_results()
        .first()
        .is_some_and(|waited| !waited.is_error);
    let mut claude = claude;
    for run in ["second run", "third run"] {
        let (next, result) = print_run(claude, run);
        claude = next;
        assert!(
            !result.is_error,
            "{run} (listing kept in the first: {kept}): {result:?}"
        );
        assert_eq!(result.text(), run);
    }
}

/// `devboy doctor` starts every server, so the first session after it
/// already has the slow server's tool. When that server then breaks, its
/// tool is still listed, and the model's call of it says since when and
/// why the server is down instead of "No such tool available".
#[test]
fn after_doctor_the_first_run_has_the_tool_and_a_down_server_says_why() {
    let claude = ClaudeCode::new().unwrap();
    let (config, script) = slow_server(&claude);
    let doctor = claude
        .shell(
            &format!("{DEVBOY} doctor --config {}", config.display()),
            &[],
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.status.success(), "{stdout}");
    assert!(
        stdout.contains("✔ slow (stdio, prefix slow): ready"),
        "{stdout}"
    );

    let (claude, result) = print_run(claude, "first run");
    assert!(!result.is_error, "{result:?}");
    assert_eq!(result.text(), "first run");

    write_script(&script, "echo 'slow: cannot open its database' >&2; exit 1");
    let (_claude, result) = print_run(claude, "while down");
    assert!(result.is_error, "{result:?}");
    let text = result.text();
    assert!(
        text.contains("its server `slow` is down for")
            && text.contains("exited with code 1")
            && text.contains("cannot open its database"),
        "{text}"
    );
}

/// Upstream `name`'s entry in `devboy_status`, as request `id`.
async fn upstream_status(client: &mut RawClient, id: i64, name: &str) -> Value {
    upstream(&client.status(id).await, name).clone()
}

/// A server behind `gate.sh`: the test server with tool names prefixed by
/// `prefix`, started only once the file `open` exists (so a test decides
/// when it comes up, and no clock does).
struct GatedServer {
    dir: TempDir,
}

impl GatedServer {
    fn new(tag: &str) -> Self {
        Self {
            dir: TempDir::new(tag),
        }
    }

    fn script(&self) -> PathBuf {
        self.dir.path().join("gate.sh")
    }

    fn cache(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    fn open_file(&self) -> PathBuf {
        self.dir.path().join("open")
    }

    /// Serves tools named `<prefix><tool>` once the gate is open.
    fn serve(&self, prefix: &str) {
        write_script(
            &self.script(),
            &format!(
                "while [ ! -f {} ]; do sleep 0.05; done\nexport DEVBOY_TEST_TOOL_PREFIX={prefix}\nexec {}",
                self.open_file().display(),
                toml_str(&test_server_bin().display().to_string())
            ),
        );
    }

    fn open(&self) {
        std::fs::write(self.open_file(), b"").unwrap();
    }

    fn close(&self) {
        let _ = std::fs::remove_file(self.open_file());
    }

    /// A devboy.toml with server `t` on the gate script and `extra` lines
    /// in its table.
    fn config(&self, extra: &str) -> String {
        let path = self.dir.path().join("devboy.toml");
        std::fs::write(
            &path,
            format!(
                "[servers.t]\ncommand = {}\n{extra}\n",
                toml_str(&self.script().display().to_string())
            ),
        )
        .unwrap();
        path.display().to_string()
    }

    /// devboy on `config`, keeping listings in this server's cache, with
    /// a first listing that would wait 30 s for a server without one.
    async fn devboy(&self, config: &str) -> RawClient {
        self.devboy_with_grace(config, "30000").await
    }

    /// [`devboy`](Self::devboy) with this list grace, in milliseconds.
    async fn devboy_with_grace(&self, config: &str, grace_ms: &str) -> RawClient {
        let cache = self.cache().display().to_string();
        RawClient::start_command(
            &["mcp", "--config", config, "--list-grace-ms", grace_ms],
            &[("DEVBOY_CACHE_DIR", &cache)],
        )
        .await
    }

    fn kept_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.cache().join("listings"))
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    }
}

/// Polls `t`'s status until it is ready (a live listing is kept before
/// the server reports ready).
async fn wait_ready(client: &mut RawClient, first_id: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut id = first_id;
    loop {
        let entry = upstream_status(client, id, "t").await;
        if entry["state"] == "ready" {
            assert_eq!(entry["listing"], "live", "{entry}");
            return;
        }
        assert!(Instant::now() < deadline, "never ready: {entry}");
        id += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kept_listing_is_filtered_replaced_when_it_changed_and_never_used_for_another_entry() {
    let server = GatedServer::new("headless-kept");
    let plain = server.config("");
    server.serve("a_");
    server.open();
    let mut devboy = server.devboy(&plain).await;
    assert!(devboy.tool_names(1).await.contains(&"t__a_echo".to_owned()));
    wait_ready(&mut devboy, 2).await;
    devboy.stop().await;

    // The same entry, its server not up (and listing other tools once it
    // is), with a deny glob: the first listing is the kept one, at once
    // (a listing that waited would outlast the client's 20 s read), and
    // filtered.
    server.close();
    server.serve("b_");
    let filtered = server.config("deny = [\"a_fail\"]");
    let mut devboy = server.devboy(&filtered).await;
    let names = devboy.tool_names(1).await;
    assert!(names.contains(&"t__a_echo".to_owned()), "{names:?}");
    assert!(!names.contains(&"t__a_fail".to_owned()), "{names:?}");
    let entry = upstream_status(&mut devboy, 2, "t").await;
    assert_eq!(entry["state"], "starting", "{entry}");
    assert_eq!(entry["listing"], "cached", "{entry}");
    // The server comes up listing other tools: announced, listed, kept.
    server.open();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no list_changed within 30 s");
        if devboy.recv().await["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    let names = devboy.tool_names(3).await;
    assert!(
        names.contains(&"t__b_echo".to_owned()) && !names.contains(&"t__a_echo".to_owned()),
        "{names:?}"
    );
    wait_ready(&mut devboy, 4).await;
    devboy.stop().await;

    server.close();
    let mut devboy = server.devboy(&filtered).await;
    let names = devboy.tool_names(1).await;
    assert!(names.contains(&"t__b_echo".to_owned()), "{names:?}");
    devboy.stop().await;

    // A changed entry (one more variable) finds nothing kept: its first
    // listing waits for the server, here for the short grace given.
    let changed = server.config("env = { DEVBOY_TEST_EXTRA = \"1\" }");
    let mut devboy = server.devboy_with_grace(&changed, "300").await;
    let names = devboy.tool_names(1).await;
    assert!(!names.iter().any(|n| n.starts_with("t__")), "{names:?}");
    let entry = upstream_status(&mut devboy, 2, "t").await;
    assert_eq!(entry["listing"], "none", "{entry}");
    devboy.stop().await;
    assert_eq!(server.kept_files().len(), 1, "{:?}", server.kept_files());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_kept_listing_costs_one_warning_and_is_replaced() {
    let server = GatedServer::new("headless-broken");
    let config = server.config("");
    server.serve("");
    server.open();
    let mut devboy = server.devboy(&config).await;
    devboy.tool_names(1).await;
    wait_ready(&mut devboy, 2).await;
    devboy.stop().await;
    let kept = server.kept_files();
    assert_eq!(kept.len(), 1, "{kept:?}");
    std::fs::write(&kept[0], b"{\"format\": 1, \"tools\": [tru").unwrap();

    // The log file gets what stderr gets.
    let log = server.dir.path().join("devboy.log");
    let log_arg = log.display().to_string();
    let cache = server.cache().display().to_string();
    let mut devboy = RawClient::start_command(
        &["--log-file", &log_arg, "mcp", "--config", &config],
        &[("DEVBOY_CACHE_DIR", &cache)],
    )
    .await;
    let names = devboy.tool_names(1).await;
    assert!(names.contains(&"t__echo".to_owned()), "{names:?}");
    wait_ready(&mut devboy, 2).await;
    devboy.stop().await;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let warnings = logged
        .lines()
        .filter(|l| l.contains("ignoring the cached tool list"))
        .count();
    assert_eq!(warnings, 1, "{logged}");
    let text = std::fs::read_to_string(&kept[0]).unwrap();
    assert!(
        text.contains("\"echo\""),
        "rewritten with the live listing: {text}"
    );
}

/// `devboy init` starts each server it wrote once, so the first session
/// lists its tools at once: here a server 3 s slow is in devboy's first
/// listing with no grace at all.
#[tokio::test(flavor = "multi_thread")]
async fn init_keeps_each_servers_listing_for_the_first_session() {
    let home = TempDir::new("headless-init");
    let servers = home.path().join("servers.mcp.json");
    std::fs::write(
        &servers,
        json!({"mcpServers": {"t": {"command": test_server_bin(),
            "env": {"DEVBOY_TEST_STARTUP_DELAY_MS": "3000"}}}})
        .to_string(),
    )
    .unwrap();
    let init = std::process::Command::new(DEVBOY)
        .args(["init", "--from", &servers.display().to_string()])
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("DEVBOY_TELEMETRY", "off")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("DEVBOY_CONFIG_DIR")
        .env_remove("DEVBOY_CACHE_DIR")
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&init.stdout);
    assert!(init.status.success(), "{stdout}");
    assert!(stdout.contains("✔ t (stdio, prefix t): ready"), "{stdout}");

    let home_dir = home.path().display().to_string();
    let config = home.path().join(".config/devboy/devboy.toml");
    let cache = home.path().join(".cache/devboy").display().to_string();
    let mut devboy = RawClient::start_command(
        &[
            "mcp",
            "--config",
            &config.display().to_string(),
            "--list-grace-ms",
            "0",
        ],
        &[("HOME", &home_dir), ("DEVBOY_CACHE_DIR", &cache)],
    )
    .await;
    let names = devboy.tool_names(1).await;
    assert!(names.contains(&"t__echo".to_owned()), "{names:?}");
    devboy.stop().await;
}
