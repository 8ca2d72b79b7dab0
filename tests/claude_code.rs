//! devboy inside the real Claude Code CLI, offline: Claude Code connects to
//! `devboy mcp --config FILE`, which proxies `@modelcontextprotocol/server-filesystem`,
//! and a scripted model calls the proxied tool. The test reads the next model
//! request to see exactly what the model was shown.

use std::path::Path;

use devboy_testkit::{peers, ClaudeCode, Script, ScriptedModel};
use serde_json::{json, Value};

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");

/// A TOML basic string (JSON string escapes are valid TOML escapes).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Writes a devboy config proxying server-filesystem rooted at `root` as
/// upstream `fs`, and registers devboy with Claude Code as server `devboy`.
fn add_devboy_with_fs(claude: &ClaudeCode, root: &Path) {
    let fs = peers::server_filesystem(root);
    let args: Vec<String> = fs.args.iter().map(|a| toml_str(a)).collect();
    let config = claude.scratch_dir().join("devboy.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.fs]\ncommand = {}\nargs = [{}]\n",
            toml_str(&fs.program_str()),
            args.join(", ")
        ),
    )
    .unwrap();
    claude
        .mcp_add(
            "devboy",
            DEVBOY,
            &["mcp", "--config", config.to_str().unwrap()],
        )
        .unwrap();
}

#[test]
fn claude_mcp_list_reports_devboy_connected() {
    let claude = ClaudeCode::new().unwrap();
    add_devboy_with_fs(&claude, claude.project());
    let list = claude.mcp_list().unwrap();
    let line = list
        .lines()
        .find(|l| l.starts_with("devboy:"))
        .unwrap_or_else(|| panic!("devboy not listed:\n{list}"));
    assert!(line.contains("Connected"), "{list}");
}

#[test]
fn model_sees_file_text_read_through_devboy() {
    let claude = ClaudeCode::new().unwrap();
    let text = "devboy proxied marker 7319 through the filesystem server";
    let file = claude.project().join("marker.txt");
    std::fs::write(&file, text).unwrap();

    let tool = "mcp__devboy__fs__read_text_file";
    let model = ScriptedModel::start(
        Script::new()
            .tool_use(tool, json!({"path": file.to_str().unwrap()}))
            .final_text("file read"),
    )
    .unwrap();
    let claude = claude.model(&model);
    add_devboy_with_fs(&claude, claude.project());

    let out = claude.run_print("Read marker.txt.", &[tool]).unwrap();
    out.assert_success();

    let offered = model.tools_offered();
    assert!(
        offered.iter().any(|t| t == tool),
        "{tool} not offered to the model; MCP tools offered: {:?}",
        offered
            .iter()
            .filter(|t| t.starts_with("mcp__"))
            .collect::<Vec<_>>()
    );
    let results = model.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    let result = &results[0];
    assert_eq!(result.tool_name.as_deref(), Some(tool));
    assert!(!result.is_error, "{result:?}");
    let seen = result.text();
    assert!(
        seen.contains(text),
        "the model did not see the file's text; it saw {}",
        Value::from(seen.clone())
    );
}

/// `devboy hook install` writes settings the real Claude Code accepts, and
/// Claude Code runs the hook on `/compact`: the project's partition file
/// records the PreCompact (and SessionStart compact) signal.
#[test]
fn installed_compaction_hook_runs_in_claude_code() {
    let model = ScriptedModel::start(
        Script::new()
            .final_text("first answer")
            .final_text("summary of the conversation so far")
            .final_text("spare answer")
            .final_text("spare answer"),
    )
    .unwrap();
    let claude = ClaudeCode::new().unwrap().model(&model);
    let runtime = claude.scratch_dir().join("run");
    let claude = claude.env("DEVBOY_RUNTIME_DIR", runtime.to_str().unwrap());
    let out = std::process::Command::new(DEVBOY)
        .args(["hook", "install"])
        .current_dir(claude.project())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    // Claude Code accepts the settings file: a normal run still works.
    claude.run(&["-p", "hello"]).unwrap().assert_success();
    // Then compact that conversation.
    let compact = claude.run(&["-p", "--continue", "/compact"]).unwrap();
    compact.assert_success();

    let file =
        devboy_core::paths::partition_file(&runtime, &claude.project().canonicalize().unwrap());
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("no partition file {} ({e}): {compact:?}", file.display())),
    )
    .unwrap();
    // Exactly two signals: PreCompact, then SessionStart with source
    // `compact`. The `startup` of the first run and the `resume` of
    // `--continue` do not match the installed `compact|clear` matcher.
    assert_eq!(state["epoch"], json!(2), "{state}");
    assert_eq!(state["event"], json!("SessionStart:compact"), "{state}");
}
