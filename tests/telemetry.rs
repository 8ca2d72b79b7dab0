//! Telemetry through the real binary: one event per tool result and one
//! summary per session, in the directory `DEVBOY_TELEMETRY_DIR` names,
//! holding no names, arguments, paths or content (invariant 6 in docs/invariants.md), with the
//! hashes mapped back only in the config directory's
//! `endpoint-names.json`; and nothing at all when telemetry is off.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{text_of, Devboy, TempDir};
use serde_json::{json, Value};

const CANARY: &str = "CANARY-7f3a-SECRET";
const CANARY_TOOL: &str = "canary_7f3a_tool";
const CANARY_PATH: &str = "/srv/CANARY-7f3a-SECRET/quarterly-report.txt";

const CONFIG: &str = r#"
[servers.secretsrv]
command = "{server}"
"#;

/// Every file under `dir`, with its bytes.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.exists() {
            let bytes = std::fs::read(&path).unwrap();
            out.push((path, bytes));
        }
    }
    out.sort();
    out
}

/// Every record in the events files under `dir`, in file then line order.
fn records(dir: &Path) -> Vec<Value> {
    files_under(&dir.join("events"))
        .into_iter()
        .flat_map(|(path, bytes)| {
            let text = String::from_utf8(bytes).expect("events files are UTF-8");
            assert!(
                text.ends_with('\n'),
                "{} ends with a whole line",
                path.display()
            );
            text.lines()
                .map(|line| serde_json::from_str::<Value>(line).expect("each line is JSON"))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Stops devboy (the client closes its stdin) and waits for the session
/// summary to be written, if `expect_summary`.
async fn stop(devboy: Devboy, telemetry: &Path, expect_summary: bool) -> TempDir {
    let Devboy { client, dir, .. } = devboy;
    let _ = client.cancel().await;
    if expect_summary {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        while !records(telemetry).iter().any(|r| r["kind"] == "session") {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no session summary within 15 s of stopping"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    dir
}

fn hex_of_len(value: &Value, len: usize) -> bool {
    value.as_str().is_some_and(|s| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

fn one_of(value: &Value, words: &[&str]) -> bool {
    value.as_str().is_some_and(|s| words.contains(&s))
}

fn string_or_null(value: &Value) -> bool {
    value.is_null() || value.is_string()
}

/// Checks every field of a result event against docs/telemetry.md.
fn assert_result_schema(r: &Value) {
    let ok = r["v"] == 1
        && r["kind"] == "result"
        && r["ts_ms"].is_u64()
        && hex_of_len(&r["session"], 16)
        && hex_of_len(&r["call"], 16)
        && hex_of_len(&r["tool"], 16)
        && hex_of_len(&r["upstream"], 16)
        && one_of(
            &r["endpoint_class"],
            &[
                "read", "list", "search", "get", "write", "create", "update", "delete", "run",
                "other",
            ],
        )
        && r["response_chars"].is_u64()
        && string_or_null(&r["shape"])
        && r["inner_formats"]
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string))
        && hex_of_len(&r["fingerprint"], 32)
        && r["path_hashes"]
            .as_array()
            .is_some_and(|a| a.iter().all(|h| hex_of_len(h, 16)))
        && one_of(&r["dedup"], &["off", "miss", "hit", "near"])
        && one_of(&r["layer"], &["L0", "L1", "L2", "L3"])
        && r["action"].is_string()
        && string_or_null(&r["format"])
        && string_or_null(&r["template"])
        && r["tokenizer"] == "o200k_base"
        && r["tokens_baseline"].is_u64()
        && r["tokens_final"].is_u64()
        && r["dedup_saved"].is_i64()
        && r["encoder_saved"].is_i64()
        && r["elided"].is_boolean()
        && r["context_partition"].is_u64()
        && r["is_error"].is_boolean()
        && r["prefetched"].is_null()
        && r["prefetch_hit"].is_null();
    assert!(ok, "result event off schema: {r:#}");
}

/// Calls the tool the test server added, once the catalog has it.
async fn call_added(devboy: &Devboy, name: &str, args: Value) -> rmcp::model::CallToolResult {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if devboy.tool_names().await.iter().any(|n| n == name) {
            return devboy.call(name, args).await;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never listed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn events_hold_hashes_and_counts_only() {
    let telemetry = TempDir::new("telemetry-out");
    let devboy = Devboy::start_with_env(
        CONFIG,
        None,
        &[("DEVBOY_TELEMETRY_DIR", telemetry.path().as_os_str())],
    )
    .await;
    let echo_text = format!("{CANARY} {}", "the same words again and again ".repeat(40));
    let first = devboy
        .call("secretsrv__echo", json!({"text": echo_text}))
        .await;
    assert!(text_of(&first).contains(CANARY), "the client still gets it");
    let repeat = devboy
        .call("secretsrv__echo", json!({"text": echo_text}))
        .await;
    assert!(text_of(&repeat).starts_with("> [ref: "), "{repeat:?}");
    devboy
        .call(
            "secretsrv__payload",
            json!({"bytes": 4096, "path": CANARY_PATH, "note": CANARY}),
        )
        .await;
    devboy.call("secretsrv__structured", json!({"n": 30})).await;
    let failed = devboy.call("secretsrv__fail", json!({"why": CANARY})).await;
    assert_eq!(failed.is_error, Some(true));
    devboy
        .call("secretsrv__add_tool", json!({"name": CANARY_TOOL}))
        .await;
    let canary_tool = format!("secretsrv__{CANARY_TOOL}");
    call_added(&devboy, &canary_tool, json!({"text": CANARY})).await;
    // Built-in tools are not upstream results: no events.
    devboy.status().await;
    let calls = [
        "secretsrv__echo",
        "secretsrv__echo",
        "secretsrv__payload",
        "secretsrv__structured",
        "secretsrv__fail",
        "secretsrv__add_tool",
        canary_tool.as_str(),
    ];
    let config_dir = stop(devboy, telemetry.path(), true).await;

    let all = records(telemetry.path());
    let results: Vec<&Value> = all.iter().filter(|r| r["kind"] == "result").collect();
    let sessions: Vec<&Value> = all.iter().filter(|r| r["kind"] == "session").collect();
    assert_eq!(
        results.len(),
        calls.len(),
        "one event per upstream result: {all:#?}"
    );
    assert_eq!(sessions.len(), 1, "one session summary");
    assert_eq!(all.last().unwrap()["kind"], "session", "written last");
    for r in &results {
        assert_result_schema(r);
        assert_eq!(r["session"], sessions[0]["session"]);
    }

    // What each call did.
    let (fresh, hit, payload, _structured, error) =
        (results[0], results[1], results[2], results[3], results[4]);
    assert_eq!(
        (&fresh["dedup"], &fresh["layer"]),
        (&json!("miss"), &json!("L3"))
    );
    assert_eq!(fresh["action"], "fresh");
    assert_eq!(fresh["response_chars"], echo_text.chars().count());
    assert_eq!(
        (&hit["dedup"], &hit["layer"]),
        (&json!("hit"), &json!("L0"))
    );
    assert_eq!(hit["fingerprint"], fresh["fingerprint"], "same body");
    assert_eq!(hit["tool"], fresh["tool"]);
    assert!(hit["dedup_saved"].as_i64().unwrap() > 0);
    assert_eq!(payload["path_hashes"].as_array().unwrap().len(), 1);
    assert_ne!(payload["tool"], fresh["tool"]);
    assert_eq!(payload["upstream"], fresh["upstream"]);
    assert_eq!(error["is_error"], true);
    assert_eq!(
        (&error["dedup"], &error["layer"]),
        (&json!("off"), &json!("L3"))
    );
    let mut call_ids: Vec<&str> = results
        .iter()
        .map(|r| r["call"].as_str().unwrap())
        .collect();
    call_ids.sort();
    call_ids.dedup();
    assert_eq!(call_ids.len(), results.len(), "call hashes are distinct");

    // The summary adds up.
    let s = sessions[0];
    assert_eq!(s["v"], 1);
    assert_eq!(s["results"], calls.len());
    assert_eq!(s["events"], calls.len());
    assert_eq!(s["sample_rate"], 1.0);
    assert_eq!(s["compactions"], 0);
    assert_eq!(s["client"], "other", "the test client is not Claude Code");
    assert!(s["started_ms"].as_u64() <= s["ended_ms"].as_u64());
    for field in [
        "tokens_baseline",
        "tokens_final",
        "dedup_saved",
        "encoder_saved",
    ] {
        let sum: i64 = results.iter().map(|r| r[field].as_i64().unwrap()).sum();
        assert_eq!(s[field].as_i64(), Some(sum), "{field}");
    }
    assert!(s["tokens_final"].as_u64() < s["tokens_baseline"].as_u64());

    // No names, arguments, paths or content anywhere in the directory.
    let files = files_under(telemetry.path());
    assert!(files.iter().any(|(p, _)| p.ends_with("salt")));
    for (path, bytes) in &files {
        let text = String::from_utf8_lossy(bytes);
        for secret in calls.iter().copied().chain([
            CANARY,
            CANARY_TOOL,
            CANARY_PATH,
            "quarterly-report",
            "secretsrv",
            "payload",
        ]) {
            assert!(
                !text.contains(secret),
                "{secret:?} found in {}",
                path.display()
            );
        }
    }

    // The names map, in the config directory, maps the hashes back.
    let names: BTreeMap<String, String> = serde_json::from_slice(
        &std::fs::read(
            config_dir
                .path()
                .join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME),
        )
        .expect("the names file in the config dir"),
    )
    .unwrap();
    for (r, name) in results.iter().zip(calls) {
        assert_eq!(
            names.get(r["tool"].as_str().unwrap()).map(String::as_str),
            Some(name)
        );
        assert_eq!(
            names
                .get(r["upstream"].as_str().unwrap())
                .map(String::as_str),
            Some("secretsrv")
        );
    }
    assert!(
        !telemetry
            .path()
            .join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME)
            .exists(),
        "names never go under the telemetry dir"
    );
}

/// Runs a short session and returns (telemetry dir, config dir) contents.
async fn session_with(pipeline: Option<&str>, env: &[(&str, &OsStr)]) -> (TempDir, TempDir) {
    let telemetry = TempDir::new("telemetry-off");
    let mut full_env = vec![("DEVBOY_TELEMETRY_DIR", telemetry.path().as_os_str())];
    full_env.extend_from_slice(env);
    let devboy = Devboy::start_with_env(CONFIG, pipeline, &full_env).await;
    let text = format!("{CANARY} {}", "x".repeat(2000));
    for _ in 0..2 {
        devboy
            .call(
                "secretsrv__echo",
                json!({"text": text, "path": CANARY_PATH}),
            )
            .await;
    }
    devboy.call("secretsrv__fail", json!({})).await;
    let config_dir = stop(devboy, telemetry.path(), false).await;
    (telemetry, config_dir)
}

fn assert_nothing_written(telemetry: &TempDir, config_dir: &TempDir) {
    assert_eq!(
        files_under(telemetry.path()),
        vec![],
        "telemetry dir stays empty"
    );
    assert!(!config_dir.path().join("telemetry").exists());
    assert!(!config_dir
        .path()
        .join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME)
        .exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn devboy_telemetry_off_writes_nothing() {
    let (telemetry, config_dir) =
        session_with(None, &[("DEVBOY_TELEMETRY", OsStr::new("off"))]).await;
    assert_nothing_written(&telemetry, &config_dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn enabled_false_writes_nothing() {
    let (telemetry, config_dir) = session_with(Some("[telemetry]\nenabled = false\n"), &[]).await;
    assert_nothing_written(&telemetry, &config_dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zero_sample_rate_keeps_only_the_summary() {
    let (telemetry, _config_dir) =
        session_with(Some("[telemetry]\nsample_rate = 0.0\n"), &[]).await;
    // The summary is written on the way out; give it the same grace.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let all = loop {
        let all = records(telemetry.path());
        if !all.is_empty() || tokio::time::Instant::now() > deadline {
            break all;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0]["kind"], "session");
    assert_eq!(
        (&all[0]["results"], &all[0]["events"]),
        (&json!(3), &json!(0))
    );
    assert_eq!(all[0]["sample_rate"], 0.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_still_writes_the_summary() {
    let work = TempDir::new("telemetry-term");
    let config = work.path().join("devboy.toml");
    let text = CONFIG.replace("{server}", &common::test_server_bin().display().to_string());
    std::fs::write(&config, text).unwrap();
    let telemetry = work.path().join("telemetry");
    let config_arg = config.display().to_string();
    let telemetry_arg = telemetry.display().to_string();
    let config_dir = work.path().display().to_string();
    let mut client = common::RawClient::start_command(
        &["mcp", "--config", &config_arg],
        &[
            ("DEVBOY_TELEMETRY", "on"),
            ("DEVBOY_TELEMETRY_DIR", &telemetry_arg),
            ("DEVBOY_CONFIG_DIR", &config_dir),
        ],
    )
    .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "secretsrv__echo", "arguments": {"text": "hello"}}}))
        .await;
    let answer = client.recv_response(1).await;
    assert!(answer.get("result").is_some(), "{answer}");
    let status = client.kill_with("TERM").await;
    assert!(status.success(), "a clean stop: {status:?}");
    let all = records(&telemetry);
    let kinds: Vec<&Value> = all.iter().map(|r| &r["kind"]).collect();
    assert_eq!(kinds, [&json!("result"), &json!("session")]);
    assert_eq!(all[1]["results"], 1);
}

/// An error devboy makes itself (here a call timeout) is recorded like an
/// upstream's error: one `is_error` event, passed through untouched.
#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_devboy_reports_is_recorded_as_an_error() {
    let telemetry = TempDir::new("telemetry-timeout");
    let config = format!("{CONFIG}timeout_ms = 300\n");
    let env = [("DEVBOY_TELEMETRY_DIR", telemetry.path().as_os_str())];
    let devboy = Devboy::start_with_env(&config, None, &env).await;
    let result = devboy.call("secretsrv__sleep", json!({"ms": 3000})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(
        common::text_of(&result).starts_with("devboy: "),
        "{result:?}"
    );
    let _config_dir = stop(devboy, telemetry.path(), true).await;
    let all = records(telemetry.path());
    let results: Vec<&Value> = all.iter().filter(|r| r["kind"] == "result").collect();
    assert_eq!(results.len(), 1, "{all:?}");
    assert_result_schema(results[0]);
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(results[0]["layer"], "L3");
}

/// One `devboy mcp` session over stdio with telemetry on in `telemetry`
/// (config dir `config_dir`): `initialize`, then, if `call`, one call of
/// the test server's `echo`; then stdin closes. Returns devboy's stderr.
fn stderr_of_session(telemetry: &Path, config_dir: &Path, call: bool) -> String {
    use std::io::{BufRead, BufReader, Write};
    let config = config_dir.join("devboy.toml");
    let text = CONFIG.replace("{server}", &common::test_server_bin().display().to_string());
    std::fs::write(&config, text).unwrap();
    // A busy machine may take longer than the default deadline for the
    // first result (the vocabulary loads), and a result past it records
    // no event.
    std::fs::write(
        config_dir.join("pipeline_config.toml"),
        "schema_version = 3\n[encoding]\ndeadline_ms = 120000\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(common::devboy_bin())
        .arg("mcp")
        .arg("--config")
        .arg(&config)
        .env_remove("RUST_LOG")
        .env("DEVBOY_TELEMETRY", "on")
        .env("DEVBOY_TELEMETRY_DIR", telemetry)
        .env("DEVBOY_CONFIG_DIR", config_dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |id: u64, message: Value| {
        writeln!(stdin, "{message}").unwrap();
        loop {
            let line = lines.next().expect("an answer").unwrap();
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == id {
                assert!(answer.get("result").is_some(), "{answer}");
                break;
            }
        }
    };
    ask(
        0,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "telemetry-test", "version": "0"}}}),
    );
    if call {
        ask(
            1,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "secretsrv__echo", "arguments": {"text": "hello"}}}),
        );
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Telemetry whose events folder is a file, or cannot
/// be written, turned itself off silently (at best at its first event).
/// It says so once, on stderr, with the reason, as the session starts.
#[test]
fn telemetry_that_cannot_write_says_once_why_it_is_off() {
    let work = TempDir::new("telemetry-unwritable");
    let telemetry = work.path().join("telemetry");
    std::fs::create_dir_all(&telemetry).unwrap();
    // The events folder is a file.
    std::fs::write(telemetry.join("events"), "not a folder").unwrap();
    for call in [false, true] {
        let stderr = stderr_of_session(&telemetry, work.path(), call);
        let off: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("telemetry is off"))
            .collect();
        assert_eq!(off.len(), 1, "one warning (call: {call}):\n{stderr}");
        assert!(
            off[0].contains(" WARN ") && off[0].contains("events is not a directory"),
            "{stderr}"
        );
    }
    // An events folder nothing can be written in: a read-only one for a
    // user, for root (who writes anyway) a link into sysfs, where no one
    // can create a file.
    std::fs::remove_file(telemetry.join("events")).unwrap();
    let probe = work.path().join("owner-probe");
    std::fs::write(&probe, "").unwrap();
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&probe).unwrap()) == 0;
    if root {
        std::os::unix::fs::symlink("/sys/kernel", telemetry.join("events")).unwrap();
    } else {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::create_dir(telemetry.join("events")).unwrap();
        std::fs::set_permissions(
            telemetry.join("events"),
            std::fs::Permissions::from_mode(0o500),
        )
        .unwrap();
    }
    let stderr = stderr_of_session(&telemetry, work.path(), true);
    let off: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("telemetry is off"))
        .collect();
    assert_eq!(off.len(), 1, "{stderr}");
    assert!(off[0].contains("cannot write in"), "{stderr}");
}

/// A salt file cut short kept telemetry off until a
/// person fixed it. It is replaced by a fresh salt, with a warning, and
/// the session's events are written under it.
#[test]
fn a_damaged_salt_is_replaced_with_a_warning_and_telemetry_goes_on() {
    let work = TempDir::new("telemetry-salt");
    let telemetry = work.path().join("telemetry");
    std::fs::create_dir_all(&telemetry).unwrap();
    // Cut short, as a full disk leaves it.
    std::fs::write(telemetry.join("salt"), "3f9a0c").unwrap();
    let stderr = stderr_of_session(&telemetry, work.path(), true);
    let warned: Vec<&str> = stderr.lines().filter(|l| l.contains("salt")).collect();
    assert_eq!(warned.len(), 1, "{stderr}");
    assert!(
        warned[0].contains(" WARN ") && warned[0].contains("replaced by a fresh one"),
        "{stderr}"
    );
    let salt = std::fs::read_to_string(telemetry.join("salt")).unwrap();
    assert!(
        salt.len() == 65 && salt.trim().bytes().all(|b| b.is_ascii_hexdigit()),
        "{salt:?}"
    );
    let kinds: Vec<Value> = records(&telemetry)
        .iter()
        .map(|r| r["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("result"), json!("session")]);
    // The next session keeps it, without a word.
    let stderr = stderr_of_session(&telemetry, work.path(), false);
    assert!(!stderr.contains("salt"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(telemetry.join("salt")).unwrap(),
        salt
    );
}

/// A session over real servers (the reference filesystem and memory
/// servers) records in its summary the tool list it served: the tools the
/// client received, their definitions' tokens by the one measure
/// (`Tokenizer::count_definition`, over what the client got), and how many
/// lists; no tool name. `devboy tune analyze` then reports the figure.
#[tokio::test(flavor = "multi_thread")]
async fn the_summary_records_the_definitions_the_client_was_served() {
    use devboy_testkit::peers;

    let root = TempDir::new("definitions-root");
    let notes = root.path().join("notes.txt");
    std::fs::write(&notes, "definitions ride on every request\n").unwrap();
    let memory = TempDir::new("definitions-memory");
    let config = common::peer_toml("fs", &peers::server_filesystem(root.path()))
        + &common::peer_toml(
            "mem",
            &peers::server_memory(&memory.path().join("memory.jsonl")),
        );
    let telemetry = TempDir::new("definitions-telemetry");
    let devboy = Devboy::start_with_env(
        &config,
        None,
        &[("DEVBOY_TELEMETRY_DIR", telemetry.path().as_os_str())],
    )
    .await;
    let list = || async {
        devboy
            .client
            .peer()
            .list_all_tools()
            .await
            .expect("tools/list")
    };
    let first = list().await;
    for server in ["fs__", "mem__"] {
        assert!(
            first.iter().any(|t| t.name.starts_with(server)),
            "{server} tools listed: {first:?}"
        );
    }
    let read = devboy
        .call(
            "fs__read_text_file",
            json!({"path": notes.display().to_string()}),
        )
        .await;
    assert_ne!(read.is_error, Some(true), "{read:?}");
    // The client lists again (as after list_changed): the later list is
    // what the summary keeps.
    let last = list().await;
    let config_dir = stop(devboy, telemetry.path(), true).await;

    let all = records(telemetry.path());
    let sessions: Vec<&Value> = all.iter().filter(|r| r["kind"] == "session").collect();
    assert_eq!(sessions.len(), 1, "{all:#?}");
    let expected = devboy_mcp::definition_tokens(&last, devboy_pipeline::Tokenizer::O200k);
    assert!(
        expected > 1_000,
        "{expected} tokens for {} tools",
        last.len()
    );
    assert_eq!(
        sessions[0]["definitions"],
        json!({"tokens": expected, "tools": last.len(), "lists": 2}),
        "{:#}",
        sessions[0]
    );
    // Counts only: no tool's name reaches the telemetry directory.
    for (path, bytes) in files_under(telemetry.path()) {
        let text = String::from_utf8_lossy(&bytes);
        for tool in &last {
            assert!(
                !text.contains(tool.name.as_ref()),
                "{} found in {}",
                tool.name,
                path.display()
            );
        }
    }

    // The tuner reports it, next to the session's result tokens.
    let out = std::process::Command::new(common::devboy_bin())
        .args(["tune", "analyze", "--dry-run"])
        .env("DEVBOY_CONFIG_DIR", config_dir.path())
        .env("DEVBOY_TELEMETRY_DIR", telemetry.path())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("DEVBOY_TELEMETRY")
        .output()
        .expect("run devboy tune analyze");
    let report = String::from_utf8_lossy(&out.stdout);
    println!("{report}");
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tokens = sessions[0]["tokens_final"].as_u64().unwrap();
    let line = format!(
        "# tool definitions per session (1 of 1 sessions recorded them): {} tokens on every model request, for {} tools (name, description and input schema of the last tools/list devboy served; 2.0 lists per session); tool results sent to the model: {} tokens over the whole session\n",
        devboy_tune::table::int(expected as i64),
        last.len(),
        devboy_tune::table::int(tokens as i64)
    );
    assert!(report.contains(&line), "{line:?} not in:\n{report}");
}
