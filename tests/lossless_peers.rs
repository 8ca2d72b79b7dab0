//! Invariant 1 against real servers: with the full pipeline on, every result
//! of `server-filesystem`, `server-memory` and `server-everything` that
//! devboy rewrites decodes back to exactly what the same call returns
//! without devboy, for both client profiles (a client that shows the model
//! the text blocks, and one that shows `structuredContent`, as Claude Code
//! does). Errors and non-text results pass untouched.

mod common;

use common::{Devboy, Recorder};
use devboy_pipeline::{encode, template, DecodedBody};
use devboy_testkit::peers::{self, PeerCommand};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

type Client = RunningService<RoleClient, Recorder>;

fn server_toml(name: &str, peer: &PeerCommand) -> String {
    common::peer_toml(name, peer)
}

async fn direct(peer: &PeerCommand) -> Client {
    let mut cmd = tokio::process::Command::new(&peer.program);
    cmd.args(&peer.args);
    for (k, v) in &peer.env {
        cmd.env(k, v);
    }
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn peer");
    Recorder::default()
        .serve(transport)
        .await
        .expect("initialize peer")
}

async fn call_direct(client: &Client, tool: &str, args: &Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    client.peer().call_tool(params).await.expect("direct call")
}

/// What the model would see without devboy, under the profile.
fn forwarded(result: &CallToolResult, structured: bool) -> Option<String> {
    if structured {
        if let Some(value) = &result.structured_content {
            return Some(value.to_string());
        }
    }
    match result.content.as_slice() {
        [one] => one.as_text().map(|t| t.text.clone()),
        _ => None,
    }
}

/// Checks one call; returns whether devboy rewrote it.
fn check(tool: &str, straight: &CallToolResult, via: &CallToolResult, structured: bool) -> bool {
    let as_json = |r: &CallToolResult| serde_json::to_value(r).unwrap();
    if as_json(via) == as_json(straight) {
        return false;
    }
    if straight.is_error == Some(true) || forwarded(straight, structured).is_none() {
        assert_eq!(
            as_json(via),
            as_json(straight),
            "{tool}: must pass untouched"
        );
        return false;
    }
    let original = forwarded(straight, structured).unwrap();
    let mut texts: Vec<&str> = via
        .content
        .iter()
        .map(|c| c.as_text().map(|t| t.text.as_str()).expect("text blocks"))
        .collect();
    if texts.len() == 2 && texts[1].starts_with("> [id: ") {
        texts.pop();
    }
    assert_eq!(texts.len(), 1, "{tool}: {via:?}");
    let shown = texts[0];
    assert_eq!(via.meta, straight.meta, "{tool}: _meta kept");
    if structured && straight.structured_content.is_some() {
        assert_eq!(
            via.structured_content, None,
            "{tool}: shown as text instead"
        );
    } else {
        assert_eq!(
            via.structured_content, straight.structured_content,
            "{tool}"
        );
    }
    if shown == original {
        return false;
    }
    let decoded = match template::decode(shown) {
        Ok(DecodedBody::Text(text)) => Value::String(text),
        Ok(DecodedBody::Json(value)) => value,
        Err(_) => encode::decode(shown)
            .unwrap_or_else(|e| panic!("{tool}: cannot decode ({e}):\n{shown}")),
    };
    let expected = match &decoded {
        Value::String(_) => Value::String(original.clone()),
        _ => serde_json::from_str(&original).expect("a JSON original"),
    };
    assert_eq!(
        decoded, expected,
        "{tool}: decoded differs from the original"
    );
    true
}

#[tokio::test(flavor = "multi_thread")]
async fn rewritten_results_of_real_servers_decode_to_the_originals() {
    let root = common::TempDir::new("lossless-fs");
    let dir = root.path().canonicalize().unwrap();
    std::fs::write(
        dir.join("table.md"),
        "# Services\n\n| name | port | owner |\n|---|---|---|\n| api | 8080 | alpha |\n| web | 8081 | beta |\n| db | 5432 | gamma |\n| cache | 6379 | alpha |\n\nSee the runbook.\n",
    )
    .unwrap();
    for sub in ["src", "tests", "docs"] {
        std::fs::create_dir_all(dir.join("repo").join(sub)).unwrap();
        for i in 0..8 {
            std::fs::write(
                dir.join("repo").join(sub).join(format!("{sub}_{i}.rs")),
                "//\n",
            )
            .unwrap();
        }
    }
    let fs = peers::server_filesystem(&dir);
    let everything = peers::server_everything();
    let d = dir.display().to_string();
    let entities: Vec<Value> = (0..25)
        .map(|i| json!({"name": format!("svc-{i}"), "entityType": "service", "observations": [format!("port {}", 9000 + i)]}))
        .collect();
    let calls: Vec<(&str, &str, Value)> = vec![
        (
            "fs",
            "read_text_file",
            json!({"path": format!("{d}/table.md")}),
        ),
        (
            "fs",
            "list_directory",
            json!({"path": format!("{d}/repo/src")}),
        ),
        ("fs", "directory_tree", json!({"path": format!("{d}/repo")})),
        (
            "fs",
            "get_file_info",
            json!({"path": format!("{d}/table.md")}),
        ),
        ("fs", "search_files", json!({"path": d, "pattern": "*.rs"})),
        (
            "fs",
            "read_text_file",
            json!({"path": format!("{d}/missing.txt")}),
        ),
        ("mem", "create_entities", json!({"entities": entities})),
        ("mem", "read_graph", json!({})),
        ("mem", "search_nodes", json!({"query": "svc-1"})),
        ("all", "echo", json!({"message": "hello"})),
        ("all", "get-sum", json!({"a": 2, "b": 40})),
        (
            "all",
            "get-structured-content",
            json!({"location": "Chicago"}),
        ),
    ];

    let mut rewritten = 0;
    for structured in [false, true] {
        // Separate memory stores so both sides start empty.
        let via_mem = root.path().join(format!("via-{structured}.jsonl"));
        let direct_mem = root.path().join(format!("direct-{structured}.jsonl"));
        let config = format!(
            "{}{}{}",
            server_toml("fs", &fs),
            server_toml("mem", &peers::server_memory(&via_mem)),
            server_toml("all", &everything)
        );
        let profile = if structured { "structured" } else { "content" };
        let pipeline = format!("[profiles]\nclient = \"{profile}\"\n");
        let devboy = Devboy::start_with_pipeline(&config, &pipeline).await;
        let straight_fs = direct(&fs).await;
        let straight_mem = direct(&peers::server_memory(&direct_mem)).await;
        let straight_all = direct(&everything).await;
        for (prefix, tool, args) in &calls {
            let client = match *prefix {
                "fs" => &straight_fs,
                "mem" => &straight_mem,
                _ => &straight_all,
            };
            let straight = call_direct(client, tool, args).await;
            let via = devboy
                .call(&format!("{prefix}__{tool}"), args.clone())
                .await;
            if check(tool, &straight, &via, structured) {
                rewritten += 1;
            }
        }
    }
    eprintln!("{rewritten} of {} results were rewritten", 2 * calls.len());
    // The pipeline really did rewrite results (tables, documents, csv).
    assert!(rewritten >= 6, "only {rewritten} results were rewritten");
}

/// Runs git in `repo` as `author` on day `day` of November 2026.
fn git_as(repo: &std::path::Path, author: &str, day: usize, args: &[&str]) {
    let date = format!("2026-11-{:02}T10:{:02}:00+00:00", day % 28 + 1, day % 60);
    common::git_as(repo, author, Some(&date), args);
}

/// `mcp-server-git`'s logs are repeated `Commit: / Author: / Date: /
/// Message:` blocks: through devboy they become one table with the keys
/// written once, which decodes to exactly what the server wrote — on a
/// history with multi-line messages, trailers, quotes and commas (one
/// author, so the author is written once too, and two authors), and on
/// this repository's own history.
#[tokio::test(flavor = "multi_thread")]
async fn git_logs_become_record_tables_that_decode_to_the_originals() {
    let root = common::TempDir::new("lossless-git");
    let messages = [
        "Initial commit",
        "Reader: parse \"quoted\" keys, and commas\n\nA longer body\nover two lines.",
        "Fix: Commit: lines inside a message stay in it\n\nSigned-off-by: Ann Lee <ann@example.invalid>",
        "Docs",
        "Bump version to 0.2.0",
        "Tests: one per \"record\" form",
    ];
    let mut repos = Vec::new();
    for (name, authors) in [("one", &["Ann Lee"][..]), ("two", &["Ann Lee", "Bo Chen"])] {
        let repo = root.path().join(name);
        std::fs::create_dir_all(&repo).unwrap();
        let repo = repo.canonicalize().unwrap();
        git_as(&repo, authors[0], 0, &["init", "-q"]);
        for (i, message) in messages.iter().enumerate() {
            let author = authors[i % authors.len()];
            std::fs::write(repo.join("notes.txt"), format!("{i}\n")).unwrap();
            git_as(&repo, author, i, &["add", "notes.txt"]);
            git_as(&repo, author, i, &["commit", "-q", "-m", message]);
        }
        repos.push(repo);
    }
    let own = devboy_testkit::peers::workspace_root()
        .canonicalize()
        .unwrap();
    for repo in repos.iter().chain([&own]) {
        let git = peers::server_git(repo);
        let devboy = Devboy::start(&server_toml("git", &git)).await;
        let straight = direct(&git).await;
        let args = json!({"repo_path": repo.display().to_string(), "max_count": 30});
        let direct_log = call_direct(&straight, "git_log", &args).await;
        let via = devboy.call("git__git_log", args.clone()).await;
        let rewritten = check("git_log", &direct_log, &via, false);
        if repo != &own {
            // The made-up histories are surely records; this repository's
            // own may be a shallow clone of one commit, so only checked.
            assert!(rewritten, "{}: not rewritten: {via:?}", repo.display());
            let shown = via.content[0].as_text().unwrap().text.as_str();
            assert!(shown.starts_with("> [encoded: records as csv"), "{shown}");
            let header = shown.lines().nth(3).unwrap();
            if repo.ends_with("one") {
                assert_eq!(header, "Commit,Author=Ann Lee,Date,Message", "{shown}");
            } else {
                assert_eq!(header, "Commit,Author,Date,Message", "{shown}");
            }
        }
    }
}
