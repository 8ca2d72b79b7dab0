//! Lazy listing (`[tools] lazy`) over the five reference servers
//! (filesystem, memory, git, time, everything).
//!
//! - A client without tool search, the Python `mcp` SDK, runs a scripted
//!   session (`tests/python/lazy_client.py`): it is first listed only
//!   devboy's built-ins, finds tools with `devboy_find_tools`, calls them
//!   and others by full name, and every call succeeds; what each listing
//!   costs per request against the servers' own definitions is printed.
//! - Under `lazy = "auto"` the client decides: Claude Code (which defers
//!   MCP tools behind its own tool search) is listed everything, another
//!   client only past the budget; `off` lists everything to anyone.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{Devboy, Recorder, TempDir};
use devboy_mcp::definition_tokens;
use devboy_pipeline::Tokenizer;
use devboy_testkit::peers::{self, PeerCommand};
use rmcp::model::Tool;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::Value;

/// The five reference servers as `(name, command)`; the names are the
/// prefixes devboy gives them.
fn servers(dir: &Path) -> (Vec<(&'static str, PeerCommand)>, std::path::PathBuf) {
    let root = dir.join("root");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&repo).unwrap();
    let repo = repo.canonicalize().unwrap();
    common::git_as(&repo, "init", None, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "lazy\n").unwrap();
    common::git_as(&repo, "dev", None, &["add", "README.md"]);
    common::git_as(&repo, "dev", None, &["commit", "-q", "-m", "first"]);
    let servers = vec![
        (
            "fs",
            peers::server_filesystem(&root.canonicalize().unwrap()),
        ),
        ("memory", peers::server_memory(&dir.join("memory.jsonl"))),
        ("git", peers::server_git(&repo)),
        ("time", peers::server_time()),
        ("everything", peers::server_everything()),
    ];
    (servers, repo)
}

fn config(servers: &[(&str, PeerCommand)], tools: &str) -> String {
    let mut text = format!("[tools]\n{tools}\n\n");
    for (name, peer) in servers {
        text.push_str(&common::peer_toml(name, peer));
    }
    text
}

/// A server's own definitions, listed directly (no devboy).
async fn direct_tools(peer: &PeerCommand) -> Vec<Tool> {
    let transport = TokioChildProcess::new(tokio::process::Command::from(peer.command()))
        .expect("spawn the server");
    let client = Recorder::default()
        .serve(transport)
        .await
        .expect("initialize");
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let _ = client.cancel().await;
    tools
}

/// Tokens of definitions given as the Python client received them.
fn listing_tokens(listing: &Value) -> usize {
    let tools: Vec<Tool> = listing
        .as_array()
        .expect("a listing is an array")
        .iter()
        .map(|d| {
            let schema = d["input_schema"].as_object().cloned().unwrap_or_default();
            Tool::new(
                d["name"].as_str().unwrap_or_default().to_owned(),
                d["description"].as_str().unwrap_or_default().to_owned(),
                std::sync::Arc::new(schema),
            )
        })
        .collect();
    definition_tokens(&tools, Tokenizer::O200k) as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_tool_search_finds_and_calls_every_tool_it_needs() {
    let dir = TempDir::new("lazy-sdk");
    let (servers, repo) = servers(dir.path());
    let file = dir.path().join("root/notes.txt");
    std::fs::write(&file, "found lazily\nread whole\n").unwrap();
    let file = file.canonicalize().unwrap();
    let mut direct = 0;
    let mut direct_count = 0;
    for (_, peer) in &servers {
        let tools = direct_tools(peer).await;
        direct_count += tools.len();
        direct += definition_tokens(&tools, Tokenizer::O200k) as usize;
    }
    // `auto` with a budget these five servers pass: the SDK client has no
    // tool search, so devboy holds the tools back.
    let path = dir.path().join("devboy.toml");
    std::fs::write(
        &path,
        config(&servers, "lazy = \"auto\"\nlazy_budget = 2000"),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(peers::python());
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/lazy_client.py"))
        .arg("--devboy")
        .arg(common::devboy_bin())
        .arg("--config")
        .arg(&path)
        .arg("--file")
        .arg(&file)
        .arg("--repo")
        .arg(&repo)
        .env("PYTHONUNBUFFERED", "1")
        .env("RUST_LOG", common::test_log_filter())
        .env("DEVBOY_CONFIG_DIR", dir.path())
        .env("DEVBOY_CACHE_DIR", dir.path().join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(150), cmd.output())
        .await
        .expect("the lazy session finished within 150 s")
        .expect("run the SDK client");
    let (summary, stderr) = common::python_summary(&output);
    assert_eq!(
        summary["ok"], true,
        "failed checks: {}\ncalls: {}\nstderr:\n{stderr}",
        summary["failed"], summary["calls"]
    );
    let calls = summary["calls"].as_array().unwrap();
    assert!(calls.len() >= 10, "{calls:?}");
    assert!(calls.iter().all(|c| c["is_error"] == false), "{calls:?}");

    for call in calls.iter().filter(|c| c["tool"] == "devboy_find_tools") {
        let text = call["text"].as_str().unwrap_or_default();
        let found: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("__") && !l.contains(' '))
            .collect();
        println!("{} -> {found:?}", text.lines().next().unwrap_or_default());
    }
    let listings = summary["listings"].as_array().unwrap();
    let first = listing_tokens(&listings[0]);
    let last = listing_tokens(listings.last().unwrap());
    let last_count = listings.last().unwrap().as_array().unwrap().len();
    println!(
        "definitions per request, o200k tokens (five reference servers, {direct_count} tools):"
    );
    println!("  direct                        {direct:>6}");
    println!(
        "  devboy lazy, first listing    {first:>6}  {:.3}x  ({} tools: the built-ins)",
        first as f64 / direct as f64,
        listings[0].as_array().unwrap().len()
    );
    println!(
        "  devboy lazy, end of session   {last:>6}  {:.3}x  ({last_count} tools: + {} found or used)",
        last as f64 / direct as f64,
        summary["final_listing"].as_array().unwrap().len()
            - listings[0].as_array().unwrap().len()
    );
    assert!(
        first * 4 <= direct,
        "a lazy listing costs at most a quarter of the servers' own: {first} vs {direct}"
    );
}

/// The tools a client named `client` is listed under `tools`.
async fn listed_to(
    client: &'static str,
    servers: &[(&str, PeerCommand)],
    tools: &str,
) -> Vec<String> {
    let recorder = Recorder {
        name: Some(client),
        ..Recorder::default()
    };
    let devboy = Devboy::start_as(
        recorder,
        &config(servers, tools),
        "devboy.toml",
        &["--list-grace-ms", "60000"],
        None,
        &[],
    )
    .await;
    devboy.tool_names().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_lists_everything_to_claude_code_and_past_the_budget_holds_back_for_others() {
    let dir = TempDir::new("lazy-auto");
    let (servers, _repo) = servers(dir.path());
    let small = "lazy = \"auto\"\nlazy_budget = 2000";

    let claude = listed_to("claude-code", &servers, small).await;
    assert!(
        claude.iter().any(|n| n == "fs__read_text_file"),
        "{claude:?}"
    );
    assert!(
        !claude.iter().any(|n| n == "devboy_find_tools"),
        "nothing to find when all is listed: {claude:?}"
    );

    let other = listed_to("some-editor", &servers, small).await;
    assert!(other.iter().all(|n| n.starts_with("devboy_")), "{other:?}");
    assert!(other.iter().any(|n| n == "devboy_find_tools"), "{other:?}");

    // Under the default budget (a tenth of 200k) these servers are small.
    let default = listed_to("some-editor", &servers, "").await;
    assert!(default.len() > 40, "{default:?}");
    let off = listed_to("some-editor", &servers, "lazy = \"off\"\nlazy_budget = 10").await;
    assert_eq!(off.len(), default.len(), "{off:?}");
}
