//! devboy's built-in tools called the way a model new to them calls them,
//! through the binary over MCP: a value of the wrong type, a number out
//! of range, an argument the tool does not take, a required one left out,
//! a `root` that is a file or names nothing. Each is an `isError` result
//! of one line naming the argument, what was given and what the tool
//! takes, and the tool does not run. Also: the titles a person reads for
//! the built-ins in the client.

mod common;

use std::path::Path;
use std::process::Command;

use common::{RawClient, TempDir};
use serde_json::{json, Value};

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A one-file Python project in `dir/project`.
fn project(dir: &TempDir) -> std::path::PathBuf {
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(
        project.join("src/app.py"),
        "def handle_request(request):\n    return request\n",
    )
    .unwrap();
    project
}

/// `devboy mcp` started in `project` as Claude Code starts it, with no
/// config: the built-ins alone (`devboy_find_tools`, listed only to a
/// lazy session, answers a call all the same).
async fn serve(dir: &TempDir, project: &Path) -> RawClient {
    let config_dir = dir.path().join("no-user-config");
    let cache = dir.path().join("cache");
    RawClient::start_command_in(
        &["mcp"],
        &[
            ("DEVBOY_CONFIG_DIR", path(&config_dir)),
            ("DEVBOY_CACHE_DIR", path(&cache)),
        ],
        Some(project),
    )
    .await
}

/// The text of a `tools/call` response, and whether it is an error.
fn answer(response: &Value) -> (bool, String) {
    let result = &response["result"];
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {response}"));
    (result["isError"] == json!(true), text.to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_that_do_not_fit_the_schema_are_an_error_naming_the_argument() {
    let dir = TempDir::new("builtin-arguments");
    let project = project(&dir);
    let mut devboy = serve(&dir, &project).await;
    let query = "handle request";
    let cases = [
        (
            "devboy_find_files",
            json!({"query": query, "k": 0}),
            "devboy_find_files: `k` is 0; it takes an integer from 1 to 100: How many files (default 10)",
        ),
        (
            "devboy_find_files",
            json!({"query": query, "k": "abc"}),
            "devboy_find_files: `k` is \"abc\" (a string); it takes an integer from 1 to 100: How many files (default 10)",
        ),
        (
            "devboy_find_files",
            json!({"query": query, "k": 1000}),
            "devboy_find_files: `k` is 1000; it takes an integer from 1 to 100: How many files (default 10)",
        ),
        (
            "devboy_find_files",
            json!({"query": query, "limit": 3}),
            "devboy_find_files: unknown argument `limit`; it takes `query` (required), `k`, `root`",
        ),
        (
            "devboy_find_files",
            json!({"k": 3}),
            "devboy_find_files: `query` is missing; it takes a string: The task or issue text",
        ),
        (
            "devboy_find_files",
            json!({"query": "  "}),
            "devboy_find_files: `query` is blank; it takes the task or issue text",
        ),
        (
            "devboy_explore",
            json!({"query": query, "budget_chars": "abc"}),
            "devboy_explore: `budget_chars` is \"abc\" (a string); it takes an integer from 1000 to 200000: Answer size (default 16000)",
        ),
        (
            "devboy_explore",
            json!({"query": query, "budget_chars": 999}),
            "devboy_explore: `budget_chars` is 999; it takes an integer from 1000 to 200000: Answer size (default 16000)",
        ),
        (
            "devboy_explore",
            json!({"query": query, "root": 3}),
            "devboy_explore: `root` is 3 (an integer); it takes a string: Source tree (default: project)",
        ),
        (
            "devboy_servers",
            json!({"action": "stop"}),
            "devboy_servers: `action` is \"stop\"; it takes one of \"list\", \"restart\", \"enable\", \"disable\": Default list",
        ),
        (
            "devboy_status",
            json!({"verbose": true}),
            "devboy_status: unknown argument `verbose`; it takes no arguments",
        ),
        (
            "devboy_compact",
            json!({"now": true}),
            "devboy_compact: unknown argument `now`; it takes no arguments",
        ),
        (
            "devboy_run",
            json!({"code": "return 1", "timeout": 5}),
            "devboy_run: unknown argument `timeout`; it takes `code` (required)",
        ),
        (
            "devboy_find_tools",
            json!({"query": "read a file", "limit": 0}),
            "devboy_find_tools: `limit` is 0; it takes an integer from 1 to 30: Most tools returned (default 5)",
        ),
    ];
    let mut id = 0;
    for (tool, arguments, expected) in &cases {
        id += 1;
        let response = devboy.call_tool(id, tool, arguments.clone()).await;
        assert_eq!(
            answer(&response),
            (true, (*expected).to_owned()),
            "{tool} {arguments}"
        );
    }
    // `devboy_expand`'s own arguments are not this test's to spell out.
    id += 1;
    let (failed, text) = answer(&devboy.call_tool(id, "devboy_expand", json!({})).await);
    assert!(failed, "{text}");
    assert!(
        text.starts_with("devboy_expand: `id` is missing; it takes a string"),
        "{text}"
    );

    // A refused call never ran: the refused `devboy_compact` advanced no
    // partition, the one that fits does.
    id += 1;
    assert_eq!(devboy.status(id).await["session"]["context_partition"], 0);
    id += 1;
    let (failed, text) = answer(&devboy.call_tool(id, "devboy_compact", json!({})).await);
    assert!(!failed, "{text}");
    id += 1;
    assert_eq!(devboy.status(id).await["session"]["context_partition"], 1);

    // Arguments that fit are answered; `null` is an argument not given.
    id += 1;
    let arguments = json!({"query": query, "k": 1, "root": null});
    let (failed, text) = answer(&devboy.call_tool(id, "devboy_find_files", arguments).await);
    assert!(!failed, "{text}");
    assert!(text.contains("1. src/app.py"), "{text}");
    devboy.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_root_that_is_a_file_or_names_nothing_is_named_as_such() {
    let dir = TempDir::new("builtin-roots");
    let project = project(&dir);
    let mut devboy = serve(&dir, &project).await;
    let file = project.join("src/app.py");
    let missing = project.join("nope");
    let mut id = 0;
    for tool in ["devboy_explore", "devboy_find_files"] {
        for (root, expected) in [
            (
                "src/app.py",
                format!(
                    "{tool}: `root` {} is not a directory (give the source tree's directory, not a file in it)",
                    file.display()
                ),
            ),
            (
                "nope",
                format!("{tool}: `root` {} does not exist", missing.display()),
            ),
        ] {
            id += 1;
            let arguments = json!({"query": "handle request", "root": root});
            let response = devboy.call_tool(id, tool, arguments).await;
            assert_eq!(answer(&response), (true, expected), "{tool} {root}");
        }
    }
    devboy.stop().await;
    assert!(
        !dir.path().join("cache/explore").exists(),
        "nothing was indexed"
    );

    // On the command line too: an error and a failed exit, not an answer
    // that nothing matches.
    for command in ["explore", "find-files"] {
        let out = Command::new(common::devboy_bin())
            .args([command, "--root", "src/app.py", "handle request"])
            .current_dir(&project)
            .env("DEVBOY_CACHE_DIR", dir.path().join("cache"))
            .env("DEVBOY_CONFIG_DIR", dir.path().join("no-user-config"))
            .output()
            .expect("devboy runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command}: {out:?}");
        assert!(out.stdout.is_empty(), "{command}: {out:?}");
        assert!(
            stderr.contains(
                "src/app.py is not a directory (give the source tree's directory, not a file in it)"
            ),
            "{command}: {stderr}"
        );
    }
}

/// Claude Code shows a tool as "SERVER - TITLE (MCP)" (its
/// `userFacingName`), so a title says what the tool does and leaves
/// "devboy" to the server's name. (`devboy_find_tools`, listed only to a
/// lazy session, is "Find more tools": the unit test has every title.)
#[tokio::test(flavor = "multi_thread")]
async fn the_builtins_are_listed_with_titles_that_read_after_the_server_name() {
    let dir = TempDir::new("builtin-titles");
    let project = project(&dir);
    let mut devboy = serve(&dir, &project).await;
    devboy
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
        .await;
    let listed = devboy.recv_response(1).await;
    let titles: Vec<(String, String)> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list: {listed}"))
        .iter()
        .map(|tool| {
            (
                tool["name"].as_str().unwrap_or_default().to_owned(),
                tool["annotations"]["title"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    let expected = [
        ("devboy_status", "Proxy status"),
        ("devboy_servers", "Manage the servers"),
        ("devboy_compact", "Mark the context compacted"),
        ("devboy_expand", "Expand a result"),
        ("devboy_explore", "Explore how code works"),
        ("devboy_find_files", "Find the relevant files"),
        ("devboy_run", "Run a script over the tools"),
    ]
    .map(|(name, title)| (name.to_owned(), title.to_owned()));
    assert_eq!(titles, expected);
    devboy.stop().await;
}
