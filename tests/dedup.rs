//! L0 dedup through the real binary: fresh results carry a visible id, a
//! repeat becomes a reference naming it, `devboy_expand` gives the exact
//! bytes back, and writes and compaction make the next result full again.

mod common;

use common::{text_of, Devboy};
use devboy_pipeline::hints;
use devboy_testkit::peers;
use serde_json::{json, Value};

const ONE: &str = r#"
[servers.t]
command = "{server}"
"#;

/// The id a fresh result was shown with (`> [id: kafrum3]` → `kafrum3`).
fn id_of(result: &rmcp::model::CallToolResult) -> String {
    let last = result
        .content
        .last()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default();
    hints::parse_id_line(&last)
        .unwrap_or_else(|| panic!("no id line in {result:?}"))
        .to_owned()
}

fn is_reference_to(result: &rmcp::model::CallToolResult, id: &str) -> bool {
    result.content.len() == 1 && hints::parse_reference(&text_of(result)) == Some(id)
}

#[tokio::test(flavor = "multi_thread")]
async fn repeat_becomes_a_reference_the_model_can_resolve() {
    let devboy = Devboy::start(ONE).await;
    let first = devboy.call("t__payload", json!({"bytes": 4096})).await;
    assert_eq!(first.content.len(), 2, "payload + id line: {first:?}");
    let body = first.content[0].as_text().unwrap().text.clone();
    assert_eq!(body.len(), 4096);
    let id = id_of(&first);

    let second = devboy.call("t__payload", json!({"bytes": 4096})).await;
    assert!(is_reference_to(&second, &id), "{second:?}");
    // The id in the reference is found by plain text in the first result.
    assert!(text_of(&first).contains(&format!("[id: {id}]")));

    let expanded = devboy
        .call("devboy_expand", json!({"id": id, "raw": true}))
        .await;
    assert_ne!(expanded.is_error, Some(true));
    assert_eq!(text_of(&expanded), body, "raw: the exact bytes");

    // Small results are left alone; errors and unknown ids are clear.
    let small = devboy.call("t__echo", json!({"text": "tiny"})).await;
    assert_eq!(text_of(&small), "tiny");
    let tag = id.trim_end_matches(|c: char| c.is_ascii_digit());
    let unknown = devboy
        .call("devboy_expand", json!({"id": format!("{tag}999")}))
        .await;
    assert_eq!(unknown.is_error, Some(true));
    assert!(
        text_of(&unknown).contains("was never issued"),
        "{unknown:?}"
    );
    let malformed = devboy.call("devboy_expand", json!({"id": "12"})).await;
    assert_eq!(malformed.is_error, Some(true));
    assert!(
        text_of(&malformed).contains("is not a devboy id"),
        "{malformed:?}"
    );
}

/// invariant 10 (docs/invariants.md) across a restart (Claude Code reconnecting the server, or
/// `/mcp`): the model still holds an id of the first devboy process, and
/// the second, with the same config, has numbered other content from 1
/// again. Asked for the old id, it says so; it never returns that content.
#[tokio::test(flavor = "multi_thread")]
async fn an_id_from_before_a_restart_is_stale_never_other_content() {
    let first = Devboy::start(ONE).await;
    let shown = first.call("t__payload", json!({"bytes": 4096})).await;
    let id = id_of(&shown);
    first.client.cancel().await.expect("stop devboy 1");

    let second = Devboy::start(ONE).await;
    let other = second.call("t__payload", json!({"bytes": 3000})).await;
    let other_body = other.content[0].as_text().unwrap().text.clone();
    let expanded = second.call("devboy_expand", json!({"id": id})).await;
    assert_ne!(text_of(&expanded), other_body, "another process's content");
    assert_eq!(expanded.is_error, Some(true), "{expanded:?}");
    assert_eq!(
        text_of(&expanded),
        format!("devboy: `{id}` was not issued by this devboy session (an earlier session's, or mistyped); call the tool again")
    );
    // The second process's own ids are its own and resolve.
    let other_id = id_of(&other);
    assert_ne!(other_id, id);
    let own = second
        .call("devboy_expand", json!({"id": other_id, "raw": true}))
        .await;
    assert_eq!(text_of(&own), other_body);
}

#[tokio::test(flavor = "multi_thread")]
async fn compaction_makes_the_next_result_full() {
    let devboy = Devboy::start(ONE).await;
    let first = devboy.call("t__payload", json!({"bytes": 2048})).await;
    let id = id_of(&first);
    devboy.call("devboy_compact", json!({})).await;
    let after = devboy.call("t__payload", json!({"bytes": 2048})).await;
    assert_eq!(after.content.len(), 2, "{after:?}");
    assert_ne!(id_of(&after), id, "a new id in the new context");
    // And the next repeat refers to the new delivery.
    let again = devboy.call("t__payload", json!({"bytes": 2048})).await;
    assert!(is_reference_to(&again, &id_of(&after)), "{again:?}");
}

/// devboy over the real server-filesystem serving `root`.
async fn devboy_over_fs(root: &std::path::Path) -> Devboy {
    let fs = peers::server_filesystem(root);
    let args: Vec<String> = fs.args.iter().map(|a| common::toml_str(a)).collect();
    let config = format!(
        "[servers.fs]\ncommand = {}\nargs = [{}]\n",
        common::toml_str(&fs.program_str()),
        args.join(", ")
    );
    Devboy::start_with(&config, "devboy.toml", &[]).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_to_the_file_makes_the_next_read_full() {
    let data = common::TempDir::new("dedup-fs");
    let root = data.path().canonicalize().unwrap();
    let file = root.join("notes.txt");
    std::fs::write(&file, "line of notes\n".repeat(100)).unwrap();
    let devboy = devboy_over_fs(&root).await;
    let path = file.to_str().unwrap();
    let read = || devboy.call("fs__read_text_file", json!({"path": path}));
    let first = read().await;
    let id = id_of(&first);
    assert!(is_reference_to(&read().await, &id));

    // write_file is not read-only: it forgets what was read from the
    // path. (Writing what was there changes nothing: the re-read is still
    // the reference; see the `claude_code` test of a no-op write.)
    let content = "line of new notes\n".repeat(100);
    let write = devboy
        .call("fs__write_file", json!({"path": path, "content": content}))
        .await;
    assert_ne!(write.is_error, Some(true), "{write:?}");
    let after = read().await;
    assert_eq!(
        after.content.len(),
        2,
        "full again after the write: {after:?}"
    );
    // A read-only tool on the same path does not forget it.
    let info = devboy
        .call("fs__get_file_info", json!({"path": path}))
        .await;
    assert_ne!(info.is_error, Some(true));
    assert!(is_reference_to(&read().await, &id_of(&after)));
}

/// The newcomer's case: read a file, an `edit_file` that fails ("Could not
/// find exact match"), read it again. The file is byte for byte the
/// version the model holds, so the re-read is that version's reference,
/// not the whole file under a new id.
#[tokio::test(flavor = "multi_thread")]
async fn a_re_read_after_a_failed_edit_is_the_reference_the_model_holds() {
    let data = common::TempDir::new("dedup-failed-edit");
    let root = data.path().canonicalize().unwrap();
    let file = root.join("api.py");
    let source: String = (0..120)
        .map(|i| format!("def handler_{i}(request):\n    return respond(request, {i})\n"))
        .collect();
    std::fs::write(&file, &source).unwrap();
    let devboy = devboy_over_fs(&root).await;
    let path = file.to_str().unwrap();
    let first = devboy
        .call("fs__read_text_file", json!({"path": path}))
        .await;
    let id = id_of(&first);
    let edit = devboy
        .call(
            "fs__edit_file",
            json!({"path": path, "edits": [{"oldText": "def no_such_function():", "newText": "x"}]}),
        )
        .await;
    assert_eq!(edit.is_error, Some(true), "the edit fails: {edit:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), source);
    let again = devboy
        .call("fs__read_text_file", json!({"path": path}))
        .await;
    assert!(is_reference_to(&again, &id), "{again:?}");
}

/// The agent reads a source file, edits one line through the server's
/// own `edit_file`, and reads it again: the second read is the first's id
/// and a unified diff, a few percent of the file, that rebuilds the new
/// file exactly; `devboy_expand` gives the whole new file.
#[tokio::test(flavor = "multi_thread")]
async fn a_re_read_after_a_one_line_edit_is_a_diff() {
    let data = common::TempDir::new("dedup-diff");
    let root = data.path().canonicalize().unwrap();
    let file = root.join("layers.rs");
    // A real source file of this repository, several hundred lines.
    let source = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/devboy-mcp/src/stack/layers.rs"),
    )
    .unwrap();
    std::fs::write(&file, &source).unwrap();
    let devboy = devboy_over_fs(&root).await;
    let path = file.to_str().unwrap();
    let read = || devboy.call("fs__read_text_file", json!({"path": path}));
    let first = read().await;
    let base = id_of(&first);
    let shown_first = text_of(&first);
    assert!(
        shown_first.contains("async fn inline_follow_ups("),
        "{shown_first}"
    );

    let (old_line, new_line) = (
        "        let Some(engine) = &self.speculation else {\n            return answered;",
        "        let Some(engine) = self.speculation.as_ref() else {\n            return answered;",
    );
    assert!(source.contains(old_line));
    let edit = devboy
        .call(
            "fs__edit_file",
            json!({"path": path, "edits": [{"oldText": old_line, "newText": new_line}]}),
        )
        .await;
    assert_ne!(edit.is_error, Some(true), "{edit:?}");
    let edited = std::fs::read_to_string(&file).unwrap();
    assert_ne!(edited, source);

    let again = read().await;
    let shown = text_of(&again);
    let (hint, diff) = shown.split_once('\n').unwrap();
    let (named_base, new_id) =
        hints::parse_near_reference(hint).unwrap_or_else(|| panic!("a near-reference: {shown}"));
    assert_eq!(named_base, base);
    assert!(
        diff.contains("-        let Some(engine) = &self.speculation else {\n+        let Some(engine) = self.speculation.as_ref() else {"),
        "{diff}"
    );
    // Exact: the diff turns the file the model was shown into the new one.
    assert_eq!(
        devboy_pipeline::textdiff::apply(&source, diff).as_deref(),
        Some(edited.as_str())
    );
    let tokens = devboy_pipeline::Tokenizer::O200k;
    let (full, sent) = (tokens.count(&shown_first), tokens.count(&shown));
    assert!(sent * 20 <= full, "{sent} tokens of {full}: {shown}");
    let expanded = devboy.call("devboy_expand", json!({"id": new_id})).await;
    assert!(text_of(&expanded).contains(&edited), "{expanded:?}");
}

/// Claude Code is shown a `server-filesystem` read as the file's text,
/// fenced and unescaped (it forwards `structuredContent`, which holds the
/// file as a JSON string). `devboy_expand` gives that same readable text,
/// not the JSON string the model could copy wrongly into an edit; `raw`
/// gives the server's exact text.
#[tokio::test(flavor = "multi_thread")]
async fn expand_gives_a_file_read_as_a_full_delivery_shows_it() {
    let data = common::TempDir::new("dedup-expand");
    let root = data.path().canonicalize().unwrap();
    let file = root.join("quoting.py");
    let source: String = (0..80)
        .map(|i| format!("print(\"line {i}: \\\\d+ and \\\"quoted\\\"\")  # tab\there\n"))
        .collect();
    std::fs::write(&file, &source).unwrap();
    let fs = peers::server_filesystem(&root);
    let args: Vec<String> = fs.args.iter().map(|a| common::toml_str(a)).collect();
    let config = format!(
        "[servers.fs]\ncommand = {}\nargs = [{}]\n",
        common::toml_str(&fs.program_str()),
        args.join(", ")
    );
    // As Claude Code: the structured copy is what the model reads.
    let pipeline = "schema_version = 3\n[profiles]\nclient = \"structured\"\n";
    let devboy = Devboy::start_with_pipeline(&config, pipeline).await;
    let path = file.to_str().unwrap();
    let read = devboy
        .call("fs__read_text_file", json!({"path": path}))
        .await;
    let shown = text_of(&read);
    let id = id_of(&read);
    assert!(
        shown.contains(&source),
        "the delivery shows the file as it is"
    );
    let expanded = text_of(&devboy.call("devboy_expand", json!({"id": id})).await);
    assert!(
        expanded.contains(&source),
        "expand shows it as it is: {expanded}"
    );
    assert_eq!(
        format!("{expanded}\n> [id: {id}]"),
        shown,
        "the same text as the full delivery"
    );
    let raw = text_of(
        &devboy
            .call("devboy_expand", json!({"id": id, "raw": true}))
            .await,
    );
    assert_eq!(raw, json!({"content": source}).to_string());
}

/// A file the model read in full comes back inside `read_multiple_files`:
/// there it is a reference to that read, the other file is shown, and
/// `devboy_expand` gives the whole result as the server sent it.
#[tokio::test(flavor = "multi_thread")]
async fn a_held_file_inside_read_multiple_files_is_a_reference() {
    let data = common::TempDir::new("dedup-parts");
    let root = data.path().canonicalize().unwrap();
    let module = |name: &str| -> String {
        (0..60)
            .map(|i| format!("def {name}_{i}(x):\n    return x + {i}\n"))
            .collect()
    };
    let (a, b) = (root.join("a.py"), root.join("b.py"));
    std::fs::write(&a, module("alpha")).unwrap();
    std::fs::write(&b, module("beta")).unwrap();
    let devboy = devboy_over_fs(&root).await;
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let first = devboy.call("fs__read_text_file", json!({"path": a})).await;
    let held = id_of(&first);
    let both = devboy
        .call("fs__read_multiple_files", json!({"paths": [a, b]}))
        .await;
    let shown = text_of(&both);
    assert!(
        shown.contains(&hints::reference(&held)),
        "a reference to the held read: {shown}"
    );
    assert!(!shown.contains("alpha_7"), "{shown}");
    assert!(shown.contains("def beta_7(x):"), "{shown}");
    let whole = shown
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("> [whole result: devboy_expand "))
        .and_then(|l| l.strip_suffix(']'))
        .unwrap_or_else(|| panic!("a whole-result line: {shown}"));
    let expanded = text_of(&devboy.call("devboy_expand", json!({"id": whole})).await);
    assert!(
        expanded.contains("def alpha_7(x):") && expanded.contains("def beta_7(x):"),
        "{expanded}"
    );
    let tokens = devboy_pipeline::Tokenizer::O200k;
    assert!(
        tokens.count(&shown) * 10 < tokens.count(&expanded) * 6,
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn status_reports_the_pipeline() {
    let devboy = Devboy::start(ONE).await;
    devboy.call("t__payload", json!({"bytes": 2048})).await;
    devboy.call("t__payload", json!({"bytes": 2048})).await;
    let status: Value = devboy.status().await;
    assert_eq!(status["session"]["pipeline"], "full", "{status}");
    assert_eq!(status["session"]["replaced"], 2, "{status}");
    let savings = &status["session"]["savings"];
    assert_eq!(savings["references"], 1, "{status}");
    assert_eq!(savings["bytes_referenced"], 2048, "{status}");
    assert_eq!(savings["ids_issued"], 1, "{status}");
    // Honest accounting: tokens of what the client would have forwarded,
    // and of what it was sent, in a named tokenizer.
    assert_eq!(savings["tokenizer"], "o200k_base", "{status}");
    let raw = savings["tokens_raw"].as_u64().unwrap();
    let fin = savings["tokens_final"].as_u64().unwrap();
    assert!(fin < raw, "{status}");
    assert!(
        savings["dedup_savings_pct"].as_f64().unwrap() > 40.0,
        "{status}"
    );
}

/// `[hints.near_ref] max_per_session`: past the limit, polls go out in
/// full (re-encoded, with their own id) instead of as changes.
#[tokio::test(flavor = "multi_thread")]
async fn past_its_hint_limit_a_poll_is_sent_in_full() {
    let pipeline = "schema_version = 3\n[endpoints.\"t__poll\"]\nnear_ref = true\n[hints.near_ref]\nmax_per_session = 1\n";
    let devboy = Devboy::start_with_pipeline(ONE, pipeline).await;
    devboy.call("t__poll", json!({})).await;
    let second = text_of(&devboy.call("t__poll", json!({})).await);
    assert!(second.starts_with("> [near-ref: "), "{second}");
    let third = devboy.call("t__poll", json!({})).await;
    let shown = third.content[0].as_text().unwrap().text.as_str();
    assert!(!shown.contains("near-ref"), "{shown}");
    let id = id_of(&third);
    let original = devboy
        .call("devboy_expand", json!({"id": id, "raw": true}))
        .await;
    let body: Value = serde_json::from_str(&text_of(&original)).unwrap();
    assert_eq!(devboy_pipeline::encode::decode(shown).unwrap(), body);
    let status = devboy.call("devboy_status", json!({})).await;
    let status: Value = serde_json::from_str(&text_of(&status)).unwrap();
    assert_eq!(
        status["session"]["savings"]["hints_sent"]["near_ref"], 1,
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_polled_status_becomes_a_near_reference_with_the_exact_changes() {
    let pipeline = "schema_version = 2\n[endpoints.\"t__poll\"]\nnear_ref = true\n";
    let devboy = Devboy::start_with_pipeline(ONE, pipeline).await;
    let first = devboy.call("t__poll", json!({})).await;
    let base = id_of(&first);
    // The first poll reaches the model re-encoded; its id expands to the
    // JSON the server sent.
    let original = devboy
        .call("devboy_expand", json!({"id": base, "raw": true}))
        .await;
    let first_body: Value = serde_json::from_str(&text_of(&original)).expect("poll returns JSON");
    let shown = first.content[0].as_text().unwrap().text.as_str();
    assert_eq!(devboy_pipeline::encode::decode(shown).unwrap(), first_body);

    let second = devboy.call("t__poll", json!({})).await;
    let text = text_of(&second);
    let (hint, delta) = text.split_once('\n').expect("hint line, then changes");
    let full_id = match hints::parse_near_reference(hint) {
        Some((from, id)) if from == base => id,
        _ => panic!("unexpected hint {hint:?}"),
    };
    assert_eq!(delta, "/calls: 2\n/state: \"running\"");

    // The whole body is there under the new id, and the earlier body plus
    // the changes is exactly that body.
    let expanded = devboy
        .call("devboy_expand", json!({"id": full_id, "raw": true}))
        .await;
    let second_body: Value = serde_json::from_str(&text_of(&expanded)).unwrap();
    assert_eq!(
        devboy_pipeline::near::apply_changes(&first_body, delta).unwrap(),
        second_body
    );
    assert!(
        text.len() * 10 < text_of(&expanded).len(),
        "{} vs {}",
        text.len(),
        text_of(&expanded).len()
    );

    let status: Value = devboy.status().await;
    let savings = &status["session"]["savings"];
    assert_eq!(savings["near_references"], 1, "{status}");
    // The config in effect is the one found in the config directory.
    let config = devboy.dir.path().join("pipeline_config.toml");
    assert_eq!(savings["config"], config.display().to_string(), "{status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_pipeline_config_names_the_file_and_key() {
    let dir = common::TempDir::new("badpipeline");
    let path = dir.path().join("pipeline_config.toml");
    std::fs::write(&path, "schema_version = 2\n[dedup]\nttl = 5\n").unwrap();
    let out = std::process::Command::new(common::devboy_bin())
        .args(["mcp", "--pipeline-config"])
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run devboy");
    assert!(out.stdout.is_empty(), "stdout is the protocol channel");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The bad key stops nothing: devboy ends only because no client spoke.
    assert!(
        stderr.contains("handshake with the client failed"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{}:3:1: dedup.ttl: unknown key", path.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("expected one of: enabled, min_body_bytes, ttl_secs"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_client_profile_can_be_set_for_clients_devboy_does_not_recognise() {
    // The test client is not Claude Code, so by default it keeps
    // structuredContent; `client = "structured"` says it shows the model
    // structuredContent, so devboy sends that serialization as text.
    let default = Devboy::start(ONE).await;
    let kept = default.call("t__structured", json!({"n": 40})).await;
    assert!(kept.structured_content.is_some(), "{kept:?}");

    let pipeline = "[profiles]\nclient = \"structured\"\n";
    let devboy = Devboy::start_with_pipeline(ONE, pipeline).await;
    let tools = devboy.client.peer().list_all_tools().await.unwrap();
    let tool = tools.iter().find(|t| t.name == "t__structured").unwrap();
    assert!(
        tool.output_schema.is_none(),
        "outputSchema no longer declared"
    );
    let fresh = devboy.call("t__structured", json!({"n": 40})).await;
    assert_eq!(fresh.structured_content, None);
    // What the model is shown is that value (re-encoded, losslessly).
    let shown = fresh.content[0].as_text().unwrap().text.clone();
    let value = devboy_pipeline::encode::decode(&shown).unwrap();
    assert_eq!(value["items"].as_array().map(Vec::len), Some(40));
    assert!(id_of(&fresh)
        .parse::<devboy_pipeline::ReferenceId>()
        .is_ok());
}
