//! The biggest results, in the real Claude Code CLI (print mode): a
//! 400-commit `git_log`, a 3,094-line file and a 20 MB file reach the model
//! inline and within Claude Code's own limits (50,000 characters shown
//! inline, 25,000 tokens), each with its contiguous head kept and one hint
//! naming the call that gives the rest; that call pages on; and after the
//! 20 MB read the session, the other server and an earlier id are all
//! still there. Without devboy Claude Code moves each of these results to
//! a file and shows the model a 2 KB preview (the 20 MB one would drop
//! the connection: a line over 16 MB).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use devboy_pipeline::Tokenizer;
use devboy_testkit::scripted_model::{LAST_ID, NEXT_ID, NEXT_RANGE};
use devboy_testkit::{peers, ClaudeCode, Script, ScriptedModel, ToolResultSeen};
use serde_json::json;

/// Claude Code's inline limit and token cap (2.1.330, measured).
const INLINE_CHARS: usize = 50_000;
const MAX_TOKENS: usize = 25_000;

/// A repository of `commits` commits with messages of a few lines each,
/// written with `git fast-import` (a commit per second of 2026-10-01).
fn make_repo(repo: &Path, commits: usize) {
    std::fs::create_dir_all(repo).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(repo)
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    let mut stream = String::new();
    for i in 1..=commits {
        let message = format!(
            "Parser: handle case {i} of nested brackets\n\nThe tokenizer read a closing bracket at depth {} as the end of\nthe input; it now keeps a stack. Reported in issue {}.\n",
            i % 17,
            1000 + i * 7
        );
        let file = format!("version {i}\n");
        let ts = 1_790_000_000 + i;
        stream.push_str(&format!(
            "commit refs/heads/main\nmark :{i}\nauthor Ann Lee <ann@example.invalid> {ts} +0000\ncommitter Ann Lee <ann@example.invalid> {ts} +0000\ndata {}\n{message}\n",
            message.len()
        ));
        if i > 1 {
            stream.push_str(&format!("from :{}\n", i - 1));
        }
        stream.push_str(&format!(
            "M 644 inline VERSION\ndata {}\n{file}\n",
            file.len()
        ));
    }
    let mut import = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(repo)
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import");
    use std::io::Write;
    import
        .stdin
        .take()
        .unwrap()
        .write_all(stream.as_bytes())
        .unwrap();
    assert!(import.wait().unwrap().success());
    git(&["reset", "-q", "--hard", "main"]);
}

/// A long test module: 3,094 lines of different lengths.
fn test_module() -> String {
    let mut text = String::from("\"\"\"Tests for the request parser.\"\"\"\n\nimport pytest\n\n");
    let mut i = 0;
    while text.lines().count() < 3_094 {
        i += 1;
        text.push_str(&format!(
            "\n\ndef test_case_{i}():\n    body = build(\"payload-{i}\", depth={})\n    assert parse(body).status == {}\n",
            i % 9,
            200 + i % 5
        ));
        if i % 23 == 0 {
            text.push_str(&format!(
                "    assert parse(body).text == \"{}\"\n",
                "chunk ".repeat(60)
            ));
        }
    }
    text.lines().take(3_094).map(|l| format!("{l}\n")).collect()
}

/// 20 MB of log lines.
fn big_log() -> String {
    let mut text = String::with_capacity(21 << 20);
    let mut i = 0u64;
    while text.len() < 20 << 20 {
        i += 1;
        text.push_str(&format!(
            "2026-11-30T12:{:02}:{:02}Z INFO worker-{} processed job {i} in {} ms status=ok\n",
            i / 60 % 60,
            i % 60,
            i % 7,
            i * 37 % 999
        ));
    }
    text
}

/// The one elision hint of `text`: its first and last numbers, and the id.
fn elided_range(text: &str) -> (usize, usize, String) {
    let hints: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("> [elided "))
        .collect();
    assert_eq!(hints.len(), 1, "one contiguous range left out: {hints:?}");
    let hint = hints[0];
    let call = hint.rsplit_once("; devboy_expand ").unwrap().1;
    let (id, range) = call.trim_end_matches(']').split_once(" lines=").unwrap();
    let (first, last) = range.split_once('-').unwrap();
    (first.parse().unwrap(), last.parse().unwrap(), id.to_owned())
}

/// What the model saw of a result, checked to be inline and within
/// Claude Code's limits, with its size printed.
fn inline(seen: &ToolResultSeen, what: &str) -> String {
    let text = seen.text();
    assert!(!seen.is_error, "{what}: {}", &text[..text.len().min(400)]);
    assert!(
        !text.starts_with("<persisted-output>"),
        "{what}: Claude Code moved the result to a file: {}",
        &text[..text.len().min(400)]
    );
    let chars = text.encode_utf16().count();
    let tokens = Tokenizer::O200k.count(&text);
    eprintln!("{what}: {chars} characters, {tokens} o200k tokens, shown inline");
    assert!(chars <= INLINE_CHARS, "{what}: {chars} characters");
    assert!(tokens <= MAX_TOKENS, "{what}: {tokens} tokens");
    text
}

#[test]
fn big_results_reach_the_model_inline_bounded_and_paged_through() {
    let claude = ClaudeCode::new()
        .unwrap()
        .timeout(std::time::Duration::from_secs(600));
    let project = claude.project().to_path_buf();
    let repo = project.join("repo");
    make_repo(&repo, 400);
    let module = test_module();
    let module_path = repo.join("test_requests.py");
    std::fs::write(&module_path, &module).unwrap();
    let log = big_log();
    let log_path = project.join("worker.log");
    std::fs::write(&log_path, &log).unwrap();
    let readme = "# The project\n\nA parser and its tests. ".repeat(40);
    let readme_path = project.join("README.md");
    std::fs::write(&readme_path, &readme).unwrap();

    common::add_devboy_with(
        &claude,
        &[
            ("fs", peers::server_filesystem(&project)),
            ("git", peers::server_git(&repo)),
        ],
    );

    let repo_arg = repo.to_str().unwrap();
    let page = json!({"id": NEXT_ID, "lines": NEXT_RANGE});
    let model = ScriptedModel::start(
        Script::new()
            .tool_use(
                "mcp__devboy__git__git_log",
                json!({"repo_path": repo_arg, "max_count": 400}),
            )
            .tool_use(
                "mcp__devboy__fs__read_text_file",
                json!({"path": module_path.to_str().unwrap()}),
            )
            .tool_use("mcp__devboy__devboy_expand", page.clone())
            .tool_use(
                "mcp__devboy__fs__read_text_file",
                json!({"path": readme_path.to_str().unwrap()}),
            )
            .tool_use(
                "mcp__devboy__fs__read_text_file",
                json!({"path": log_path.to_str().unwrap()}),
            )
            .tool_use("mcp__devboy__devboy_expand", page)
            .tool_use(
                "mcp__devboy__git__git_status",
                json!({"repo_path": repo_arg}),
            )
            .tool_use("mcp__devboy__devboy_expand", json!({"id": LAST_ID}))
            .final_text("done"),
    )
    .unwrap();
    let claude = claude.model(&model);
    claude
        .run_print(
            "Read the history, the tests and the worker log.",
            &[
                "mcp__devboy__git__git_log",
                "mcp__devboy__git__git_status",
                "mcp__devboy__fs__read_text_file",
                "mcp__devboy__devboy_expand",
            ],
        )
        .unwrap()
        .assert_success();
    let seen = model.tool_results();
    assert_eq!(seen.len(), 8, "{seen:#?}");

    // The log: a list of records, so its newest commits, and the oldest
    // named by the call that gives them.
    let history = inline(&seen[0], "git_log of 400 commits");
    let newest = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&repo)
        .output()
        .unwrap();
    let newest = String::from_utf8_lossy(&newest.stdout).trim().to_owned();
    assert!(history.contains(&newest), "the newest commit is shown");
    let (first, last, _) = elided_range(&history);
    assert!(first > 1 && last > first, "{first}-{last}");
    eprintln!("git_log: lines 1-{} of {last} shown", first - 1);

    // The file: its head, whole and raw, then the next lines in order.
    let lines: Vec<&str> = module.split_inclusive('\n').collect();
    let shown = inline(&seen[1], "read of a 3,094-line file");
    let (from, to, _) = elided_range(&shown);
    assert_eq!(to, lines.len(), "the rest of the file is named");
    eprintln!("the file: lines 1-{} of {to} shown", from - 1);
    assert!(
        shown.contains(&lines[..from - 1].concat()),
        "lines 1-{} shown whole and raw",
        from - 1
    );
    let next = inline(&seen[2], "devboy_expand of the rest of the file");
    let page_end = match next.lines().find(|l| l.starts_with("> [elided ")) {
        Some(_) => elided_range(&next).0 - 1,
        None => lines.len(),
    };
    assert!(
        next.contains(&lines[from - 1..page_end].concat()),
        "lines {from}-{page_end} shown whole and raw"
    );

    // 20 MB: its head, and the next page.
    let log_lines: Vec<&str> = log.split_inclusive('\n').collect();
    let shown = inline(&seen[4], "read of a 20 MB file");
    let (from, to, _) = elided_range(&shown);
    assert_eq!(to, log_lines.len());
    eprintln!("the 20 MB file: lines 1-{} of {to} shown", from - 1);
    assert!(
        shown.contains(log_lines[0].trim_end()) && shown.contains(log_lines[from - 2].trim_end())
    );
    let next = inline(&seen[5], "devboy_expand of the 20 MB file's next lines");
    assert!(
        next.contains(log_lines[from - 1].trim_end()),
        "line {from} follows"
    );

    // The session, the other server and an earlier id are all still there.
    let status = inline(&seen[6], "git_status after the 20 MB read");
    assert!(status.contains("branch"), "{status}");
    let again = inline(
        &seen[7],
        "devboy_expand of an id shown before the 20 MB read",
    );
    assert!(again.contains("# The project"), "{again}");
    assert_eq!(
        seen[3]
            .text()
            .lines()
            .last()
            .map(|l| l.starts_with("> [id: ")),
        Some(true)
    );
}

/// Claude Code started with `MAX_MCP_OUTPUT_TOKENS` lower than devboy's
/// budget: devboy, which Claude Code starts with its environment, keeps a
/// result within that cap instead (else Claude Code would cut it itself,
/// with no way back to the rest).
#[test]
fn a_lower_max_mcp_output_tokens_of_claude_code_bounds_devboy_s_results() {
    let claude = ClaudeCode::new()
        .unwrap()
        .env("MAX_MCP_OUTPUT_TOKENS", "6000")
        .timeout(std::time::Duration::from_secs(300));
    let project = claude.project().to_path_buf();
    let module = test_module();
    let module_path = project.join("test_requests.py");
    std::fs::write(&module_path, &module).unwrap();
    common::add_devboy_with(&claude, &[("fs", peers::server_filesystem(&project))]);
    let model = ScriptedModel::start(
        Script::new()
            .tool_use(
                "mcp__devboy__fs__read_text_file",
                json!({"path": module_path.to_str().unwrap()}),
            )
            .final_text("done"),
    )
    .unwrap();
    let claude = claude.model(&model);
    claude
        .run_print("Read the tests.", &["mcp__devboy__fs__read_text_file"])
        .unwrap()
        .assert_success();
    let seen = model.tool_results();
    let shown = inline(&seen[0], "read under MAX_MCP_OUTPUT_TOKENS=6000");
    let tokens = Tokenizer::O200k.count(&shown);
    assert!(tokens <= 6_000 && tokens > 4_000, "{tokens} tokens");
    let lines: Vec<&str> = module.split_inclusive('\n').collect();
    let (from, _, _) = elided_range(&shown);
    assert!(shown.contains(&lines[..from - 1].concat()));
}

/// The same in an interactive Claude Code session (in a terminal): a 20 MB
/// read and the next page of it, then a 3,094-line file, each inline.
#[test]
fn big_results_reach_the_model_inline_in_an_interactive_session() {
    let claude = ClaudeCode::new().unwrap();
    let project = claude.project().to_path_buf();
    let log = big_log();
    let log_path = project.join("worker.log");
    std::fs::write(&log_path, &log).unwrap();
    let module = test_module();
    let module_path = project.join("test_requests.py");
    std::fs::write(&module_path, &module).unwrap();
    common::add_devboy_with(&claude, &[("fs", peers::server_filesystem(&project))]);
    let model = ScriptedModel::start(
        Script::new()
            .tool_use(
                "mcp__devboy__fs__read_text_file",
                json!({"path": log_path.to_str().unwrap()}),
            )
            .tool_use(
                "mcp__devboy__devboy_expand",
                json!({"id": NEXT_ID, "lines": NEXT_RANGE}),
            )
            .tool_use(
                "mcp__devboy__fs__read_text_file",
                json!({"path": module_path.to_str().unwrap()}),
            )
            .final_text("done"),
    )
    .unwrap();
    let claude = claude.model(&model);
    let terminal = devboy_testkit::TerminalSession::start(
        &claude,
        &[
            "--allowedTools",
            "mcp__devboy__fs__read_text_file,mcp__devboy__devboy_expand",
        ],
    )
    .unwrap();
    terminal
        .type_line("Read the worker log and the tests.")
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while model.tool_results().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of 3 results reached the model",
            model.tool_results().len()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let seen = model.tool_results();
    let log_lines: Vec<&str> = log.split_inclusive('\n').collect();
    let shown = inline(&seen[0], "interactive: read of a 20 MB file");
    let (from, to, _) = elided_range(&shown);
    assert_eq!(to, log_lines.len());
    let next = inline(&seen[1], "interactive: its next lines");
    assert!(next.contains(log_lines[from - 1].trim_end()));
    let shown = inline(&seen[2], "interactive: read of a 3,094-line file");
    let lines: Vec<&str> = module.split_inclusive('\n').collect();
    let (from, _, _) = elided_range(&shown);
    assert!(shown.contains(&lines[..from - 1].concat()));
}
