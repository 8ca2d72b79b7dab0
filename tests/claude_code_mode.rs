//! Code mode inside the real Claude Code CLI, offline: a scripted model
//! calls `devboy_run` with a script over the real `server-filesystem`
//! behind devboy, in print mode and in an interactive session (a
//! terminal, as a person uses it). The next model request shows exactly
//! what the model was shown: the script's answer, none of the files it
//! read, and a refused write as the script's own error.

mod common;

use std::path::Path;

use devboy_testkit::{peers, ClaudeCode, Script, ScriptedModel, TerminalSession, Turn};
use serde_json::json;

const RUN: &str = "mcp__devboy__devboy_run";

/// devboy proxying server-filesystem rooted at `root` as `fs`, registered
/// with Claude Code as `devboy`, its listing kept (as `devboy doctor`
/// does for a user).
fn add_devboy_with_fs(claude: &ClaudeCode, root: &Path) {
    common::add_devboy_with(claude, &[("fs", peers::server_filesystem(root))]);
}

/// Twelve notes in the project, three of them marked, each with filler the
/// model never needs to read.
fn notes(project: &Path) -> String {
    let root = std::fs::canonicalize(project).unwrap();
    for i in 0..12 {
        let marked = if i % 4 == 1 {
            "STATUS: blocked\n"
        } else {
            "STATUS: fine\n"
        };
        let filler = format!("note {i}: {}\n", "words that only take room ".repeat(80));
        std::fs::write(
            root.join(format!("note-{i:02}.txt")),
            format!("{marked}{filler}"),
        )
        .unwrap();
    }
    root.display().to_string()
}

/// The script the model writes: which notes are blocked, without reading
/// one of them itself; and a write it tries, which must be refused.
fn script(root: &str) -> String {
    format!(
        "const found = await tools.fs.search_files({{path: {root:?}, pattern: 'note-*.txt'}});\n\
         const files = found.content.split('\\n').sort();\n\
         const blocked = [];\n\
         for (const f of files) {{\n\
           const text = (await tools.fs.read_text_file({{path: f}})).content;\n\
           if (text.startsWith('STATUS: blocked')) blocked.push(f.split('/').pop());\n\
         }}\n\
         let write;\n\
         try {{ await tools.fs.write_file({{path: {root:?} + '/out.txt', content: 'x'}}); write = 'written'; }}\n\
         catch (e) {{ write = e.message.split(';')[0]; }}\n\
         return {{blocked, write}};"
    )
}

const ANSWER: &str = r#"{"blocked":["note-01.txt","note-05.txt","note-09.txt"],"write":"fs__write_file may write (its class is destructive)"}"#;

#[test]
fn print_mode_runs_a_script_and_the_model_sees_only_its_answer() {
    let claude = ClaudeCode::new().unwrap();
    let root = notes(claude.project());
    let model = ScriptedModel::start(
        Script::new()
            .tool_use(RUN, json!({"code": script(&root)}))
            .final_text("three notes are blocked"),
    )
    .unwrap();
    let claude = claude.model(&model);
    add_devboy_with_fs(&claude, claude.project());
    let out = claude
        .run_print("Which notes are blocked?", &[RUN])
        .unwrap();
    out.assert_success();
    assert!(
        model.tools_offered().iter().any(|t| t == RUN),
        "devboy_run is offered: {:?}",
        model.tools_offered()
    );
    let results = model.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].is_error, "{:?}", results[0]);
    let seen = results[0].text();
    assert_eq!(seen, ANSWER, "the model sees the answer and nothing else");
    assert!(
        !Path::new(&root).join("out.txt").exists(),
        "nothing was written"
    );
}

#[test]
fn an_interactive_session_runs_a_script_typed_for_by_a_person() {
    let claude = ClaudeCode::new().unwrap();
    let root = notes(claude.project());
    // Interactive Claude Code sends a request of its own at startup: the
    // script is queued only once the person's prompt is due.
    let model = ScriptedModel::start(Script::new().final_text("ok")).unwrap();
    let claude = claude.model(&model);
    add_devboy_with_fs(&claude, claude.project());
    let terminal = TerminalSession::start(&claude, &["--allowedTools", RUN]).unwrap();
    terminal.ask(&model, "Hello.").unwrap();
    model.push(Turn::tool_use(RUN, json!({"code": script(&root)})));
    terminal.type_line("Which notes are blocked?").unwrap();
    let results = terminal.tool_results(&model).unwrap();
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert_eq!(results[0].text(), ANSWER);
    assert!(
        !Path::new(&root).join("out.txt").exists(),
        "nothing was written"
    );
}
