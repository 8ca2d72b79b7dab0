//! A coding session as a user has it, in the real Claude Code CLI: the same
//! 24 tool calls over `server-filesystem`, `mcp-server-git`,
//! `server-memory` and `mcp-server-time`, on a real Python code base with
//! a history (GitPython's own sources, from the test virtualenv, committed
//! in 30 commits), once through devboy and once with the servers
//! registered directly. A scripted model makes the calls and records every
//! `tool_result` it is sent; the test reports the o200k tokens of each step
//! both ways and holds the session's total to its target.
//!
//! The session: list, tree, search, read three modules, git log, git show,
//! re-read a module, edit one line of another, re-read it, git diff and
//! status, read two files at once (one already read in full), memory notes
//! about 40 modules and their imports, the graph, the time, more listings, and the repeats
//! an agent makes (the same search, the same log, a file read again).

mod common;

use std::path::{Path, PathBuf};

use devboy_pipeline::Tokenizer;
use devboy_testkit::peers::{self, PeerCommand};
use devboy_testkit::{ClaudeCode, Script, ScriptedModel, ToolResultSeen};
use serde_json::{json, Value};

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");

/// The session's target: what the model receives through devboy, as a
/// share of what it receives directly (docs/measurements.md records it).
const TARGET: f64 = 0.55;

/// Runs git in `repo` as `author`, dated by `n` (the n-th commit).
fn git(repo: &Path, author: &str, n: usize, args: &[&str]) -> String {
    let date = format!(
        "2026-10-{:02}T{:02}:{:02}:00+00:00",
        n / 2 + 1,
        9 + n % 8,
        n % 60
    );
    common::git_as(repo, author, Some(&date), args)
}

/// GitPython's package from the test virtualenv: real Python modules.
fn gitpython_sources() -> PathBuf {
    let lib = peers::peers_dir().join(".venv").join("lib");
    let python = std::fs::read_dir(&lib)
        .unwrap_or_else(|e| panic!("{}: {e}: run tests/peers/install.sh", lib.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python3"))
        })
        .expect("a python3.x directory in the virtualenv");
    let git = python.join("site-packages").join("git");
    assert!(
        git.join("diff.py").is_file(),
        "{}: GitPython is missing",
        git.display()
    );
    git
}

/// Every `.py` file under `dir`, relative to `dir`, sorted.
fn python_files(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let name = rel.join(path.file_name().unwrap());
        if path.is_dir() {
            python_files(&path, &name, out);
        } else if path.extension().is_some_and(|e| e == "py") {
            out.push(name);
        }
    }
}

/// The project: `git/` (GitPython's modules) committed over 30 commits by
/// three people, messages short and long. Returns the module paths.
fn make_project(root: &Path) -> Vec<PathBuf> {
    let source = gitpython_sources();
    let mut files = Vec::new();
    python_files(&source, Path::new("git"), &mut files);
    assert!(files.len() >= 30, "{files:?}");
    git(root, "Ann Lee", 0, &["init", "-q"]);
    let authors = ["Ann Lee", "Bo Chen", "Cy Park"];
    let per_commit = files.len().div_ceil(30);
    for (n, chunk) in files.chunks(per_commit).enumerate() {
        for file in chunk {
            let to = root.join(file);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(source.join(file.strip_prefix("git").unwrap()), &to).unwrap();
            git(
                root,
                authors[n % 3],
                n,
                &["add", &file.display().to_string()],
            );
        }
        let names: Vec<String> = chunk.iter().map(|f| f.display().to_string()).collect();
        let message = if n % 4 == 1 {
            format!(
                "Add {}\n\nThe module keeps its public names; callers need no change.\nTested against the repository fixtures, with and without a work tree.",
                names.join(", ")
            )
        } else {
            format!("Add {}", names.join(", "))
        };
        git(root, authors[n % 3], n, &["commit", "-q", "-m", &message]);
    }
    files
}

/// Memory notes about the modules: one entity each, with what a reader
/// would note (its size, its classes).
fn module_notes(root: &Path, files: &[PathBuf]) -> Value {
    let entities: Vec<Value> = files
        .iter()
        .take(40)
        .map(|file| {
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            let classes: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("class "))
                .filter_map(|l| l.split(['(', ':']).next())
                .take(3)
                .collect();
            let mut observations = vec![format!("{} lines", text.lines().count())];
            if !classes.is_empty() {
                observations.push(format!("defines {}", classes.join(", ")));
            }
            if text.contains("import os") {
                observations.push("uses os".to_string());
            }
            json!({
                "name": file.display().to_string(),
                "entityType": "module",
                "observations": observations,
            })
        })
        .collect();
    json!({ "entities": entities })
}

/// Memory relations between the noted modules: `imports`, read from each
/// module's `from git.x import` lines.
fn module_relations(root: &Path, files: &[PathBuf]) -> Value {
    let noted: Vec<String> = files
        .iter()
        .take(40)
        .map(|f| f.display().to_string())
        .collect();
    let mut relations = Vec::new();
    for from in &noted {
        let text = std::fs::read_to_string(root.join(from)).unwrap();
        for line in text.lines() {
            let Some(module) = line
                .strip_prefix("from ")
                .and_then(|l| l.split_once(" import"))
                .map(|(m, _)| m.trim())
            else {
                continue;
            };
            let path = module.replace('.', "/");
            let to = [format!("{path}.py"), format!("{path}/__init__.py")]
                .into_iter()
                .find(|t| noted.contains(t) && t != from);
            if let Some(to) = to {
                let relation = json!({"from": from, "to": to, "relationType": "imports"});
                if !relations.contains(&relation) {
                    relations.push(relation);
                }
            }
        }
    }
    assert!(relations.len() >= 20, "{relations:?}");
    json!({ "relations": relations })
}

/// One step of the session: server, tool, arguments.
type Step = (&'static str, &'static str, Value);

fn steps(root: &Path, files: &[PathBuf]) -> Vec<Step> {
    let p = |rel: &str| root.join(rel).display().to_string();
    let repo = root.display().to_string();
    vec![
        ("fs", "list_directory", json!({"path": p("git")})),
        ("fs", "directory_tree", json!({"path": p("git/objects")})),
        (
            "fs",
            "search_files",
            json!({"path": repo, "pattern": "**/*.py"}),
        ),
        ("fs", "read_text_file", json!({"path": p("git/diff.py")})),
        (
            "fs",
            "read_text_file",
            json!({"path": p("git/objects/commit.py")}),
        ),
        ("fs", "read_text_file", json!({"path": p("git/exc.py")})),
        (
            "git",
            "git_log",
            json!({"repo_path": repo, "max_count": 30}),
        ),
        (
            "git",
            "git_show",
            json!({"repo_path": repo, "revision": "HEAD~3"}),
        ),
        ("fs", "read_text_file", json!({"path": p("git/diff.py")})),
        (
            "fs",
            "edit_file",
            json!({"path": p("git/objects/commit.py"), "edits": [{
                "oldText": "    default_encoding = \"UTF-8\"",
                "newText": "    default_encoding = \"utf-8\"",
            }]}),
        ),
        (
            "fs",
            "read_text_file",
            json!({"path": p("git/objects/commit.py")}),
        ),
        ("git", "git_diff_unstaged", json!({"repo_path": repo})),
        ("git", "git_status", json!({"repo_path": repo})),
        (
            "fs",
            "read_multiple_files",
            json!({"paths": [p("git/diff.py"), p("git/objects/tag.py")]}),
        ),
        ("mem", "create_entities", module_notes(root, files)),
        ("mem", "create_relations", module_relations(root, files)),
        ("mem", "read_graph", json!({})),
        (
            "mem",
            "add_observations",
            json!({"observations": [{"entityName": "git/diff.py", "contents": ["re-read twice this session"]}]}),
        ),
        ("time", "get_current_time", json!({"timezone": "UTC"})),
        ("fs", "list_directory", json!({"path": p("git/refs")})),
        (
            "fs",
            "search_files",
            json!({"path": repo, "pattern": "**/*.py"}),
        ),
        (
            "git",
            "git_log",
            json!({"repo_path": repo, "max_count": 30}),
        ),
        ("fs", "read_text_file", json!({"path": p("git/exc.py")})),
        ("mem", "search_nodes", json!({"query": "commit"})),
    ]
}

fn servers(root: &Path, memory: &Path) -> Vec<(&'static str, PeerCommand)> {
    vec![
        ("fs", peers::server_filesystem(root)),
        ("git", peers::server_git(root)),
        ("mem", peers::server_memory(memory)),
        ("time", peers::server_time()),
    ]
}

fn devboy_toml(servers: &[(&str, PeerCommand)]) -> String {
    servers
        .iter()
        .map(|(name, peer)| common::peer_toml(name, peer))
        .collect()
}

/// What the model was sent of one run: each tool result, the MCP tool
/// definitions of the last request (`mcp__…` only: Claude Code's own are
/// the same either way), and the MCP definition tokens of every request.
struct Seen {
    results: Vec<ToolResultSeen>,
    /// For each result Claude Code moved to a file, the file's text (read
    /// before its home directory goes).
    saved: Vec<Option<String>>,
    definitions: Vec<Value>,
    /// O200k tokens of the MCP tool definitions each main request carried.
    per_request: Vec<usize>,
}

impl Seen {
    /// The definitions priced as providers price prompt caching: written
    /// at 1.25x by a request whose tools differ from the one before (the
    /// first, or after the list changed), read at 0.1x by the others.
    fn cached_definitions(&self) -> f64 {
        let mut cost = 0.0;
        let mut before: Option<usize> = None;
        for &tokens in &self.per_request {
            let rate = if before == Some(tokens) { 0.1 } else { 1.25 };
            cost += tokens as f64 * rate;
            before = Some(tokens);
        }
        cost
    }
}

/// The o200k tokens of definitions as Claude Code sent them, by the one
/// measure telemetry records too ([`Tokenizer::count_definition`]).
fn definition_tokens(definitions: &[Value]) -> usize {
    let no_schema = serde_json::Map::new();
    definitions
        .iter()
        .map(|d| {
            Tokenizer::O200k.count_definition(
                d["name"].as_str().unwrap_or_default(),
                d["description"].as_str(),
                d["input_schema"].as_object().unwrap_or(&no_schema),
            )
        })
        .sum()
}

/// The MCP tools (`mcp__…`) a request defines.
fn mcp_definitions(request: &Value) -> Vec<Value> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["name"].as_str().is_some_and(|n| n.starts_with("mcp__")))
        .cloned()
        .collect()
}

/// The session's calls with tools named `prefix` + server + `__` + tool.
fn calls(steps: &[Step], prefix: &str) -> Vec<(String, Value)> {
    steps
        .iter()
        .map(|(server, tool, args)| (format!("{prefix}{server}__{tool}"), args.clone()))
        .collect()
}

/// Runs `calls` in Claude Code; returns what the model was sent.
fn run(claude: ClaudeCode, calls: &[(String, Value)], register: impl FnOnce(&ClaudeCode)) -> Seen {
    let script = calls
        .iter()
        .fold(Script::new(), |s, (name, args)| {
            s.tool_use(name.clone(), args.clone())
        })
        .final_text("done");
    let model = ScriptedModel::start(script).unwrap();
    let claude = claude.model(&model);
    register(&claude);
    let mut allowed: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
    allowed.sort();
    allowed.dedup();
    claude
        .run_print(
            "Look around the repository, fix the encoding default, take notes.",
            &allowed,
        )
        .unwrap()
        .assert_success();
    let results = model.tool_results();
    assert_eq!(results.len(), calls.len(), "{results:#?}");
    for (result, (name, _)) in results.iter().zip(calls) {
        assert_eq!(result.tool_name.as_deref(), Some(name.as_str()));
    }
    let requests = model.main_requests();
    let saved = results
        .iter()
        .map(|r| {
            let path = saved_path(&r.text())?;
            Some(std::fs::read_to_string(path.trim()).unwrap_or_else(|e| {
                panic!("the file Claude Code saved the result to, {path}: {e}")
            }))
        })
        .collect();
    Seen {
        results,
        saved,
        definitions: requests.last().map(mcp_definitions).unwrap_or_default(),
        per_request: requests
            .iter()
            .map(|r| definition_tokens(&mcp_definitions(r)))
            .collect(),
    }
}

/// How Claude Code begins what it shows of a result it moved to a file:
/// the file's path and a 2 KB preview.
const PERSISTED: &str = "<persisted-output>";

/// Claude Code shows a result of up to this many characters inline.
const INLINE_CHARS: usize = 50_000;

/// Where Claude Code saved a result it shows as a preview.
fn saved_path(shown: &str) -> Option<String> {
    let rest = shown.strip_prefix(PERSISTED)?;
    let (_, rest) = rest.split_once("saved to: ")?;
    rest.lines().next().map(str::to_owned)
}

/// What a result shown to the model directly costs. One that Claude Code
/// moved to a file (over 50,000 characters) shows only a preview; a model
/// that needs it reads the file, so it counts as what devboy shows of such
/// a result inline: its first 50,000 characters (and at least the
/// preview). Counted as the preview alone, the session's figure is the
/// one printed beside it.
fn direct_cost(tok: &Tokenizer, shown: &str, saved: Option<&str>, previews: &mut usize) -> usize {
    let Some(file) = saved else {
        return tok.count(shown);
    };
    *previews += 1;
    let file = file.to_owned();
    // The saved result is its content blocks as JSON.
    let text = match serde_json::from_str::<Value>(&file) {
        Ok(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => file,
    };
    let head: String = text.chars().take(INLINE_CHARS).collect();
    tok.count(&head).max(tok.count(shown))
}

#[test]
fn a_coding_session_costs_the_model_at_most_the_target_share_of_its_tokens() {
    let dir = common::TempDir::new("coding-session");
    let root = dir.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let files = make_project(&root);
    let steps = steps(&root, &files);
    let session = |claude: ClaudeCode| {
        claude
            .timeout(std::time::Duration::from_secs(600))
            .project_dir(&root)
            .unwrap()
    };

    // Through devboy, with its default pipeline.
    let claude = session(ClaudeCode::new().unwrap());
    let memory = dir.path().join("memory-via.jsonl");
    let config = dir.path().join("devboy.toml");
    std::fs::write(&config, devboy_toml(&servers(&root, &memory))).unwrap();
    let via_seen = run(claude, &calls(&steps, "mcp__devboy__"), |claude| {
        claude
            .mcp_add(
                "devboy",
                DEVBOY,
                &["mcp", "--config", config.to_str().unwrap()],
            )
            .unwrap();
        common::keep_listings(claude, &config, &[], &["fs", "git", "mem", "time"]);
    });

    // The edit is undone; directly, the same calls on the same tree.
    git(&root, "Ann Lee", 0, &["checkout", "--", "."]);
    let plain = session(ClaudeCode::new().unwrap());
    let memory = dir.path().join("memory-direct.jsonl");
    let direct_seen = run(plain, &calls(&steps, "mcp__"), |claude| {
        for (name, peer) in servers(&root, &memory) {
            claude.mcp_add_peer(name, &peer).unwrap();
        }
    });
    let (direct, via) = (&direct_seen.results, &via_seen.results);

    // For a closer look: DEVBOY_SESSION_DUMP=DIR writes what the model saw.
    if let Some(out) = std::env::var_os("DEVBOY_SESSION_DUMP") {
        let out = PathBuf::from(out);
        std::fs::create_dir_all(&out).unwrap();
        for (n, (d, v)) in direct.iter().zip(via).enumerate() {
            std::fs::write(out.join(format!("{:02}-direct.txt", n + 1)), d.text()).unwrap();
            std::fs::write(out.join(format!("{:02}-devboy.txt", n + 1)), v.text()).unwrap();
        }
    }
    let tok = Tokenizer::O200k;
    let (mut total_direct, mut total_via) = (0usize, 0usize);
    let mut previews = 0usize;
    eprintln!("step | call | direct | devboy | ratio");
    for (n, ((step, d), v)) in steps.iter().zip(direct).zip(via).enumerate() {
        let saved = direct_seen.saved[n].as_deref();
        assert_eq!(d.is_error, v.is_error, "step {}: {d:?} / {v:?}", n + 1);
        assert!(!d.is_error, "step {} failed: {d:?}", n + 1);
        // Through devboy every result is shown inline.
        assert!(
            !v.text().starts_with(PERSISTED),
            "step {}: Claude Code moved devboy's result to a file",
            n + 1
        );
        let dt = direct_cost(&tok, &d.text(), saved, &mut previews);
        let vt = tok.count(&v.text());
        total_direct += dt;
        total_via += vt;
        eprintln!(
            "{:2} | {}__{} | {dt} | {vt} | {:.2}",
            n + 1,
            step.0,
            step.1,
            vt as f64 / dt.max(1) as f64
        );
    }
    // The steps with targets of their own: the re-read after a one-line edit is at
    // most 5% of the file, `read_graph` at most 0.6 of direct.
    let share = |step: usize| {
        tok.count(&via[step - 1].text()) as f64 / tok.count(&direct[step - 1].text()) as f64
    };
    assert_eq!(steps[10].1, "read_text_file");
    assert!(
        share(11) <= 0.05,
        "re-read after the edit: {:.3}",
        share(11)
    );
    assert_eq!(steps[16].1, "read_graph");
    assert!(share(17) <= 0.6, "read_graph: {:.3}", share(17));
    let ratio = total_via as f64 / total_direct as f64;
    eprintln!("total | {total_direct} | {total_via} | {ratio:.3}");
    let as_previews: usize = direct
        .iter()
        .enumerate()
        .map(|(n, d)| match direct_seen.saved[n] {
            Some(_) => tok.count(&d.text()),
            None => 0,
        })
        .sum();
    let read_back: usize = direct
        .iter()
        .enumerate()
        .filter(|(n, _)| direct_seen.saved[*n].is_some())
        .map(|(n, d)| direct_cost(&tok, &d.text(), direct_seen.saved[n].as_deref(), &mut 0))
        .sum();
    let preview_only = total_direct - read_back + as_previews;
    eprintln!(
        "({previews} direct result(s) Claude Code moved to a file, counted as read back; as their preview alone: direct {preview_only}, {:.3})",
        total_via as f64 / preview_only.max(1) as f64
    );
    // The definitions every request carries, and the session
    // priced as providers price prompt caching: the definitions written
    // once at 1.25x and read at 0.1x by every later request.
    let (defs_direct, defs_via) = (
        definition_tokens(&direct_seen.definitions),
        definition_tokens(&via_seen.definitions),
    );
    let (cost_direct, cost_via) = (
        direct_seen.cached_definitions() + total_direct as f64,
        via_seen.cached_definitions() + total_via as f64,
    );
    eprintln!(
        "MCP tool definitions per request: direct {defs_direct} ({} tools), devboy {defs_via} ({} tools), {:.3}",
        direct_seen.definitions.len(),
        via_seen.definitions.len(),
        defs_via as f64 / defs_direct.max(1) as f64
    );
    eprintln!(
        "the session with cached definitions ({} requests): direct {cost_direct:.0}, devboy {cost_via:.0} tokens, {:.3}",
        via_seen.per_request.len(),
        cost_via / cost_direct.max(1.0)
    );
    assert_eq!(direct_seen.per_request.len(), via_seen.per_request.len());

    assert!(
        ratio <= TARGET,
        "the session cost {total_via} tokens through devboy, {total_direct} directly ({ratio:.3} > {TARGET})"
    );
}
