//! devboy-enrichment's shipped edges against the real servers (in the
//! full tier, here, so that the crate's own tests need no peers): each
//! source tool is called on real data, its real answer and the real
//! `tools/list` schemas go to the planner, and every call it plans is
//! made on the same server, which
//! must accept it and answer with what the projection meant. GitHub needs
//! the network, so its edges are checked against a recorded real body
//! (`@octokit/fixtures`) and the tool schemas the edges assume.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use devboy_core::pipeline_config::PipelineConfig;
use devboy_enrichment::{Annotations, Answered, Plan, PlanContext, Planner, Prefetch, ToolFacts};
use devboy_testkit::peers::{self, PeerCommand};
use serde_json::{json, Map, Value};

/// A minimal MCP client over stdio: newline-delimited JSON-RPC.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    fn start(peer: PeerCommand) -> Server {
        let mut child = peer
            .command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut server = Server {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "devboy-enrichment-test", "version": "0"}}),
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("write");
        self.stdin.flush().expect("flush");
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read");
            assert!(n > 0, "the server closed its output during {method}");
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message.get("id") == Some(&json!(id)) {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    fn call(&mut self, tool: &str, arguments: &Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// The catalog as devboy would expose it under `upstream`.
    fn catalog(&mut self, upstream: &str) -> Vec<ToolFacts> {
        let list = self.request("tools/list", json!({}));
        list["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| facts(upstream, t))
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn facts(upstream: &str, tool: &Value) -> ToolFacts {
    let name = tool["name"].as_str().expect("name");
    let hint = |k: &str| tool["annotations"][k].as_bool();
    ToolFacts {
        exposed: format!("{upstream}__{name}"),
        upstream: upstream.to_owned(),
        tool: name.to_owned(),
        annotations: Annotations {
            read_only: hint("readOnlyHint"),
            destructive: hint("destructiveHint"),
            idempotent: hint("idempotentHint"),
            open_world: hint("openWorldHint"),
        },
        input_schema: tool["inputSchema"].as_object().cloned().unwrap_or_default(),
        remote_upstream: false,
    }
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn config(text: &str) -> PipelineConfig {
    PipelineConfig::from_str(text, Path::new("test.toml")).expect("config")
}

/// Plans after `exposed` answered `result` for `arguments`.
fn plan_after(planner: &Planner, exposed: &str, arguments: &Value, result: &Value) -> Plan {
    let text = text_of(result);
    let answered = Answered {
        exposed,
        arguments: arguments.as_object(),
        structured: result.get("structuredContent"),
        text: &text,
    };
    let ctx = PlanContext {
        held: &|_, _| false,
        median_tokens: &|_| None,
        recent_words: &[],
        in_flight: 0,
        in_flight_on: &|_| 0,
    };
    planner.plan(&answered, &ctx)
}

/// Makes a planned call on the server, which must accept it.
fn make(server: &mut Server, upstream: &str, prefetch: &Prefetch) -> String {
    let tool = prefetch
        .exposed
        .strip_prefix(&format!("{upstream}__"))
        .expect("an exposed name of this upstream");
    let result = server.call(tool, &Value::Object(prefetch.arguments.clone()));
    assert_ne!(
        result["isError"],
        json!(true),
        "{tool} refused {:?}: {result}",
        prefetch.arguments
    );
    text_of(&result)
}

#[test]
fn filesystem_search_is_followed_by_reading_the_files_it_found() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("src/sub")).unwrap();
    std::fs::create_dir_all(root.join("dir.rs")).unwrap();
    for (name, body) in [("src/a.rs", "fn a() {}\n"), ("src/sub/b.rs", "fn b() {}\n")] {
        std::fs::write(root.join(name), body).unwrap();
    }
    let mut server = Server::start(peers::server_filesystem(&root));
    let planner = Planner::new(
        server.catalog("fs"),
        &config("[enrichment]\nper_host = 5\n"),
    );
    let read = planner.tool("fs__read_text_file").expect("listed");
    assert!(
        read.side_effect.class == devboy_core::pipeline_config::SideEffectClass::Pure
            || read.side_effect.class == devboy_core::pipeline_config::SideEffectClass::ReadOnly
    );

    let args = json!({"path": root, "pattern": "**/*.rs"});
    let result = server.call("search_files", &args);
    let plan = plan_after(&planner, "fs__search_files", &args, &result);
    let paths: Vec<String> = plan
        .chosen
        .iter()
        .map(|p| p.arguments["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(plan.chosen.len(), 3, "two files and a directory: {plan:?}");
    for p in &plan.chosen {
        assert_eq!(p.exposed, "fs__read_text_file");
        let path = p.arguments["path"].as_str().unwrap();
        if Path::new(path).is_dir() {
            // A hit that is a directory: the prefetch fails upstream and
            // is dropped, never shown to the agent.
            continue;
        }
        let body = make(&mut server, "fs", p);
        assert_eq!(body, std::fs::read_to_string(path).unwrap(), "{path}");
    }
    assert!(paths.iter().any(|p| p.ends_with("src/a.rs")), "{paths:?}");
    assert!(
        paths.iter().any(|p| p.ends_with("src/sub/b.rs")),
        "{paths:?}"
    );

    let nothing = json!({"path": root, "pattern": "*.none"});
    let result = server.call("search_files", &nothing);
    assert_eq!(text_of(&result), "No matches found");
    assert!(plan_after(&planner, "fs__search_files", &nothing, &result)
        .chosen
        .is_empty());
}

fn git(repo: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(repo)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn head(repo: &Path) -> String {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn git_log_is_followed_by_the_newest_commit_and_status_by_the_diff() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().canonicalize().unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("notes.txt"), "one\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    std::fs::write(repo.join("notes.txt"), "one\ntwo\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "second commit"]);
    let newest = head(&repo);

    let mut server = Server::start(peers::server_git(&repo));
    let planner = Planner::new(server.catalog("git"), &config(""));
    let args = json!({"repo_path": repo});
    let result = server.call("git_log", &args);
    let plan = plan_after(&planner, "git__git_log", &args, &result);
    assert_eq!(plan.chosen.len(), 1, "{plan:?}");
    let show = &plan.chosen[0];
    assert_eq!(show.exposed, "git__git_show");
    assert_eq!(show.arguments["revision"], json!(newest));
    let shown = make(&mut server, "git", show);
    assert!(
        shown.contains(&newest) && shown.contains("second commit"),
        "{shown}"
    );

    std::fs::write(repo.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    let result = server.call("git_status", &args);
    let plan = plan_after(&planner, "git__git_status", &args, &result);
    assert_eq!(plan.chosen.len(), 1, "{plan:?}");
    assert_eq!(plan.chosen[0].exposed, "git__git_diff_unstaged");
    let diff = make(&mut server, "git", &plan.chosen[0]);
    assert!(diff.contains("+three"), "{diff}");

    // Write tools are never candidates, whatever they are linked from.
    for name in ["git__git_commit", "git__git_add", "git__git_reset"] {
        assert!(planner.tool(name).expect(name).writes, "{name}");
    }
}

#[test]
fn memory_search_is_followed_by_opening_the_found_entities() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(peers::server_memory(&dir.path().join("memory.jsonl")));
    let planner = Planner::new(server.catalog("mem"), &config(""));
    let created = server.call(
        "create_entities",
        &json!({"entities": [
            {"name": "tokenizer", "entityType": "module", "observations": ["counts tokens"]},
            {"name": "router", "entityType": "module", "observations": ["routes by tokens"]},
            {"name": "cache", "entityType": "module", "observations": ["remembers"]}
        ]}),
    );
    assert_ne!(created["isError"], json!(true));
    let args = json!({"query": "tokens"});
    let result = server.call("search_nodes", &args);
    let plan = plan_after(&planner, "mem__search_nodes", &args, &result);
    assert_eq!(plan.chosen.len(), 1, "{plan:?}");
    let open = &plan.chosen[0];
    assert_eq!(open.exposed, "mem__open_nodes");
    assert_eq!(open.arguments["names"], json!(["tokenizer", "router"]));
    let opened: Value = serde_json::from_str(&make(&mut server, "mem", open)).unwrap();
    let names: Vec<&str> = opened["entities"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["tokenizer", "router"]);
    assert!(planner.tool("mem__delete_entities").unwrap().writes);
}

/// The GitHub server's read tools as its schemas name their arguments
/// (`issue_number`; `pullNumber` in the server's newer versions).
fn github_catalog() -> Vec<ToolFacts> {
    let tool = |name: &str, props: &[&str]| {
        let properties: Map<String, Value> = props
            .iter()
            .map(|p| {
                let ty = if p.ends_with("umber") {
                    "number"
                } else {
                    "string"
                };
                ((*p).to_owned(), json!({"type": ty}))
            })
            .collect();
        ToolFacts {
            exposed: format!("gh__{name}"),
            upstream: "gh".to_owned(),
            tool: name.to_owned(),
            annotations: Annotations {
                read_only: Some(true),
                open_world: Some(true),
                ..Annotations::default()
            },
            input_schema: json!({"type": "object", "properties": properties, "required": props})
                .as_object()
                .cloned()
                .unwrap(),
            remote_upstream: true,
        }
    };
    vec![
        tool("list_issues", &["owner", "repo"]),
        tool("get_issue", &["owner", "repo", "issue_number"]),
        tool("list_pull_requests", &["owner", "repo"]),
        tool("get_pull_request", &["owner", "repo", "pullNumber"]),
        tool("get_pull_request_files", &["owner", "repo", "pullNumber"]),
        tool("search_code", &["query"]),
        tool("get_file_contents", &["owner", "repo", "path"]),
        tool("create_issue", &["owner", "repo", "title"]),
    ]
}

#[test]
fn github_list_issues_projects_issue_numbers_from_a_recorded_real_body() {
    let fixture = peers::node_package_dir("@octokit/fixtures")
        .join("scenarios/api.github.com/paginate-issues/raw-fixture.json");
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let body = recorded
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["method"] == "get" && r["path"].as_str().unwrap().contains("/issues?per_page=3")
        })
        .map(|r| r["response"].clone())
        .expect("the recorded list of issues");
    let numbers: Vec<Value> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["number"].clone())
        .collect();
    // The server answers with the REST body as JSON text.
    let text = body.to_string();
    let args = json!({"owner": "octokit-fixture-org", "repo": "tmp-scenario-paginate-issues"});
    let answered = |planner: &Planner| {
        let result = json!({"content": [{"type": "text", "text": text}]});
        plan_after(planner, "gh__list_issues", &args, &result)
    };

    // Remote: nothing unless enrichment.remote is on.
    let off = Planner::new(github_catalog(), &config(""));
    let plan = answered(&off);
    assert!(plan.chosen.is_empty());
    assert!(plan
        .declined
        .iter()
        .all(|d| d.reason == devboy_core::speculation::DeclineReason::Remote));

    let on = Planner::new(github_catalog(), &config("[enrichment]\nremote = true\n"));
    let edges = &on.tool("gh__list_pull_requests").unwrap().edges;
    assert!(
        edges
            .iter()
            .all(|e| e.args.iter().any(|(n, _)| n == "pullNumber")),
        "the schema picks the pullNumber spelling: {edges:?}"
    );
    let plan = answered(&on);
    assert_eq!(plan.chosen.len(), 2, "{plan:?}");
    for (p, number) in plan.chosen.iter().zip(&numbers) {
        assert_eq!(p.exposed, "gh__get_issue");
        assert_eq!(p.arguments["owner"], args["owner"]);
        assert_eq!(p.arguments["repo"], args["repo"]);
        assert_eq!(&p.arguments["issue_number"], number);
    }
}
