//! An upstream that needs an OAuth login, end to end and as a user meets
//! it: `tests/conformance/oauth-server.mjs` (the TypeScript SDK's
//! authorization router and bearer check, with a provider that consents at
//! once and access tokens that live 40 s, due for a refresh after 10)
//! wrapped by devboy, which
//! real Claude Code runs. Before the login devboy says to log in; `devboy
//! login` (with `$BROWSER` a script that follows the redirect) keeps the
//! tokens in a file only the user can read; devboy refreshes the due
//! access token by itself and Claude Code's model reads the tool's answer;
//! `devboy status` of a running devboy shows the server up; `devboy logout`
//! removes the tokens, and a devboy started then says to log in and has the
//! server up within seconds of the login, without a restart. No code or token the server issued appears in any
//! output or any other file devboy or Claude Code wrote, with devboy's log
//! at debug.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{start_until, Running};
use devboy_testkit::{peers, ClaudeCode, Script, ScriptedModel};
use serde_json::{json, Value};

/// The server's note, as its `secret_note` tool answers.
const NOTE: &str = "the note behind the login: 4417 tangerine";

/// The OAuth-protected server; returns it and its MCP URL.
fn oauth_server() -> (Running, String) {
    let mut command = Command::new(peers::conformance_bin("node"));
    command
        .arg(peers::conformance_dir().join("oauth-server.mjs"))
        .env("PORT", "0")
        .env("TOKEN_TTL", "40");
    start_until(command, "oauth server listening on ", false)
}

/// The server's `/stats`: its grant counts and every code and token it
/// issued.
fn stats(mcp_url: &str) -> Value {
    use std::io::{Read, Write};
    let host = mcp_url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(host).expect("connect to the server");
    write!(stream, "GET /stats HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read /stats");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("/stats: {e}: {answer}"))
}

/// Every file under `dir`, but `skip`.
fn files_under(dir: &Path, skip: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            files_under(&path, skip, out);
        } else if kind.is_file() && path != skip {
            out.push(path);
        }
    }
}

/// Runs `script` in Claude Code's environment with `env`; returns its
/// stdout and stderr together, after checking it succeeded (or not, as
/// `succeeds` says).
fn shell(claude: &ClaudeCode, script: &str, env: &[(&str, &str)], succeeds: bool) -> String {
    let out = claude
        .shell(script, &[])
        .envs(env.iter().copied())
        .output()
        .expect("run the shell");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.success(), succeeds, "`{script}`:\n{said}");
    said
}

#[test]
fn an_upstream_behind_a_login_is_logged_in_refreshed_and_served_to_claude_code() {
    let (_server, url) = oauth_server();
    let tool = "mcp__devboy__secure__secret_note";
    let model = ScriptedModel::start(
        Script::new()
            .tool_use(tool, json!({}))
            .final_text("note read"),
    )
    .unwrap();
    let claude = ClaudeCode::new().unwrap().model(&model);
    let scratch = claude.scratch_dir();
    let config = scratch.join("devboy.toml");
    std::fs::write(
        &config,
        format!("[servers.secure]\nurl = {}\n", common::toml_str(&url)),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_owned();
    let devboy = common::devboy_bin();
    let log = scratch.join("devboy-in-claude.log");
    // At debug, so the scan below covers what devboy writes when asked
    // for everything it has to say.
    let debug = [("RUST_LOG", "debug")];
    claude
        .mcp_add_with_env(
            "devboy",
            devboy,
            &[
                "mcp",
                "--config",
                &config,
                "--log-file",
                log.to_str().unwrap(),
            ],
            &debug,
        )
        .unwrap();
    let mut said = String::new();

    // Before the login: devboy says what to do.
    let before = shell(
        &claude,
        &format!("{devboy} doctor --config {config}"),
        &debug,
        false,
    );
    assert!(
        before.contains("needs a login: run `devboy login secure`"),
        "doctor before the login:\n{before}"
    );
    said += &before;

    let browser = format!(
        "python3 {}",
        peers::conformance_dir().join("browser.py").display()
    );
    let login = shell(
        &claude,
        &format!("{devboy} login secure --config {config}"),
        &[("RUST_LOG", "debug"), ("BROWSER", &browser)],
        true,
    );
    assert!(
        login.contains("logged in to `secure`"),
        "devboy login:\n{login}"
    );
    said += &login;
    let oauth_dir = claude.home().join(".config/devboy/oauth");
    let token_files: Vec<PathBuf> = std::fs::read_dir(&oauth_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", oauth_dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(token_files.len(), 1, "{token_files:?}");
    let token_file = token_files[0].clone();
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the token file is the user's only");
    }
    let after_login = stats(&url);
    assert_eq!(after_login["codeGrants"], 1, "{after_login}");
    assert_eq!(after_login["refreshGrants"], 0, "{after_login}");

    // The access token is due for a refresh (rmcp refreshes one with under
    // 30 s left) by the time devboy next connects.
    std::thread::sleep(Duration::from_millis(10_500));
    common::keep_listings(&claude, Path::new(&config), &debug, &["secure"]);
    let out = claude.run_print("Read the note.", &[tool]).unwrap();
    out.assert_success();
    said += &out.stdout;
    said += &out.stderr;
    let results = model.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert_eq!(results[0].text().trim(), NOTE, "what the model saw");
    let served = stats(&url);
    assert!(
        served["refreshGrants"].as_u64().unwrap() >= 1,
        "devboy refreshed the expired access token: {served}"
    );
    assert_eq!(served["codeGrants"], 1, "no second login: {served}");
    assert!(served["calls"].as_u64().unwrap() >= 1, "{served}");

    // A running devboy's status shows the server up.
    let serve_log = scratch.join("devboy-serve.log");
    let mut serve = claude.shell(
        &format!(
            "exec {devboy} serve --http 127.0.0.1:0 --config {config} --log-file {}",
            serve_log.display()
        ),
        &[],
    );
    serve.env("RUST_LOG", "debug");
    let (running, _) = start_until(serve, "devboy: serving MCP at ", true);
    let status = wait_for_status(&claude, "ready");
    assert!(
        status
            .lines()
            .any(|l| l.contains("secure") && l.contains("ready")),
        "devboy status of a running devboy:\n{status}"
    );
    said += &status;
    said += &shell(
        &claude,
        &format!("{devboy} status --format json"),
        &[],
        true,
    );
    drop(running);

    // No code or token the server issued is anywhere but the token file.
    let secrets: Vec<String> = stats(&url)["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    assert!(
        secrets.len() >= 5,
        "a code and two pairs of tokens: {secrets:?}"
    );
    let kept = std::fs::read_to_string(&token_file).unwrap_or_default();
    assert!(
        secrets.iter().any(|s| kept.contains(s.as_str())),
        "the scan looks for what the token file holds"
    );
    let mut files = Vec::new();
    files_under(claude.home().parent().unwrap(), &token_file, &mut files);
    assert!(
        files.contains(&log) && files.contains(&serve_log),
        "the logs are scanned: {files:?}"
    );
    let mut scanned = 0;
    for file in &files {
        let bytes = std::fs::read(file).unwrap_or_default();
        scanned += bytes.len();
        for secret in &secrets {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds an issued secret",
                file.display()
            );
        }
    }
    for secret in &secrets {
        assert!(
            !said.contains(secret.as_str()),
            "a command printed an issued secret"
        );
    }
    assert!(
        scanned > 10_000,
        "{scanned} bytes scanned in {} files",
        files.len()
    );

    // The logout removes the tokens, and devboy says to log in again.
    let logout = shell(
        &claude,
        &format!("{devboy} logout secure --config {config}"),
        &[],
        true,
    );
    assert!(!token_file.exists(), "{logout}");
    let again = shell(
        &claude,
        &format!("{devboy} doctor --config {config}"),
        &[],
        false,
    );
    assert!(
        again.contains("needs a login: run `devboy login secure`"),
        "doctor after the logout:\n{again}"
    );

    // A devboy that runs without the login says so, and has the server
    // up soon after the login, without a restart.
    let serve = claude.shell(
        &format!("exec {devboy} serve --http 127.0.0.1:0 --config {config}"),
        &[],
    );
    let (_running, _) = start_until(serve, "devboy: serving MCP at ", true);
    let waiting = wait_for_status(&claude, "needs a login: run `devboy login secure`");
    assert!(
        waiting.contains("needs a login"),
        "status before the login:\n{waiting}"
    );
    shell(
        &claude,
        &format!("{devboy} login secure --config {config}"),
        &[("BROWSER", &browser)],
        true,
    );
    let up = wait_for_status(&claude, "ready");
    assert!(
        up.lines()
            .any(|l| l.contains("secure") && l.contains("ready")),
        "status after the login:\n{up}"
    );
}

/// `devboy status` once it has a line with `secure` and `what`, polled for
/// up to 10 s; the last status either way.
fn wait_for_status(claude: &ClaudeCode, what: &str) -> String {
    let devboy = common::devboy_bin();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = shell(claude, &format!("{devboy} status"), &[], true);
        let found = status
            .lines()
            .any(|l| l.contains(what) && (l.contains("secure") || what.contains("secure")));
        if found || std::time::Instant::now() > deadline {
            return status;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
