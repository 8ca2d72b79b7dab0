//! Re-encoding end to end in the real Claude Code CLI: structured results of
//! real servers reach the model in fewer tokens through devboy than
//! without it, and what the model received decodes back to exactly what it
//! would have received without devboy.
//!
//! Two Claude Code runs against the same data, each with a scripted model
//! that records the `tool_result` blocks it is sent: one through devboy
//! (which proxies `server-memory` and `server-filesystem`), one with the
//! same servers registered directly.

mod common;

use common::toml_str;
use devboy_pipeline::Tokenizer;
use devboy_testkit::{peers, ClaudeCode, Script, ScriptedModel, ToolResultSeen};
use serde_json::{json, Value};

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");

/// A project tree for `directory_tree`: a few dozen files in nested dirs.
fn make_tree(root: &std::path::Path) {
    for module in ["parser", "lexer", "codegen", "runtime"] {
        for sub in ["src", "tests"] {
            let dir = root.join("repo").join(module).join(sub);
            std::fs::create_dir_all(&dir).unwrap();
            for i in 0..6 {
                std::fs::write(dir.join(format!("{module}_{sub}_{i}.rs")), "// x\n").unwrap();
            }
        }
    }
}

/// 40 entities with observations, as an agent would store them.
fn entities() -> Value {
    let entities: Vec<Value> = (0..40)
        .map(|i| {
            json!({
                "name": format!("service-{i:02}"),
                "entityType": "microservice",
                "observations": [
                    format!("owned by team {}", ["alpha", "beta", "gamma"][i % 3]),
                    format!("listens on port {}", 8000 + i),
                ]
            })
        })
        .collect();
    json!({ "entities": entities })
}

/// The text the model saw, without devboy's trailing id line.
fn without_id_line(seen: &str) -> &str {
    match seen.rsplit_once('\n') {
        Some((body, last)) if last.starts_with("> [id: ") => body,
        _ => seen,
    }
}

/// Decodes what devboy sent back into the JSON value it stands for.
fn decode(seen: &str) -> Value {
    if let Ok(devboy_pipeline::DecodedBody::Json(v)) = devboy_pipeline::template::decode(seen) {
        return v;
    }
    devboy_pipeline::encode::decode(seen)
        .unwrap_or_else(|e| panic!("cannot decode what the model saw ({e}): {seen}"))
}

fn result_of<'a>(results: &'a [ToolResultSeen], tool: &str) -> &'a ToolResultSeen {
    results
        .iter()
        .find(|r| r.tool_name.as_deref() == Some(tool))
        .unwrap_or_else(|| panic!("no result of {tool} in {results:?}"))
}

#[test]
fn memory_graph_and_directory_tree_cost_fewer_tokens_and_decode_back() {
    let data = ClaudeCode::new().unwrap();
    let memory_file = data.scratch_dir().join("memory.jsonl");
    make_tree(data.project());
    let tree_args = json!({"path": data.project().join("repo").to_str().unwrap()});

    // Through devboy: create the entities, then read them and the tree.
    let via = ScriptedModel::start(
        Script::new()
            .tool_use("mcp__devboy__mem__create_entities", entities())
            .tool_use("mcp__devboy__mem__read_graph", json!({}))
            .tool_use("mcp__devboy__fs__directory_tree", tree_args.clone())
            .final_text("done"),
    )
    .unwrap();
    let claude = ClaudeCode::new()
        .unwrap()
        .project_dir(data.project())
        .unwrap()
        .model(&via);
    let memory = peers::server_memory(&memory_file);
    let fs = peers::server_filesystem(data.project());
    let config = claude.scratch_dir().join("devboy.toml");
    let list = |args: &[String]| {
        args.iter()
            .map(|a| toml_str(a))
            .collect::<Vec<_>>()
            .join(", ")
    };
    std::fs::write(
        &config,
        format!(
            "[servers.mem]\ncommand = {}\nargs = [{}]\nenv = {{ MEMORY_FILE_PATH = {} }}\n\n\
             [servers.fs]\ncommand = {}\nargs = [{}]\n",
            toml_str(&memory.program_str()),
            list(&memory.args),
            toml_str(memory_file.to_str().unwrap()),
            toml_str(&fs.program_str()),
            list(&fs.args),
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
    common::keep_listings(&claude, &config, &[], &["mem", "fs"]);
    let tools = [
        "mcp__devboy__mem__create_entities",
        "mcp__devboy__mem__read_graph",
        "mcp__devboy__fs__directory_tree",
    ];
    claude
        .run_print(
            "Record the services, then show the graph and the repo tree.",
            &tools,
        )
        .unwrap()
        .assert_success();
    let via_results = via.tool_results();

    // Directly: the same servers, the same data, no devboy.
    let direct = ScriptedModel::start(
        Script::new()
            .tool_use("mcp__mem__read_graph", json!({}))
            .tool_use("mcp__fs__directory_tree", tree_args)
            .final_text("done"),
    )
    .unwrap();
    let plain = ClaudeCode::new()
        .unwrap()
        .project_dir(data.project())
        .unwrap()
        .model(&direct);
    plain.mcp_add_peer("mem", &memory).unwrap();
    plain.mcp_add_peer("fs", &fs).unwrap();
    plain
        .run_print(
            "Show the graph and the repo tree.",
            &["mcp__mem__read_graph", "mcp__fs__directory_tree"],
        )
        .unwrap()
        .assert_success();
    let direct_results = direct.tool_results();

    let tok = Tokenizer::O200k;
    for (via_tool, direct_tool, what) in [
        (
            "mcp__devboy__mem__read_graph",
            "mcp__mem__read_graph",
            "read_graph",
        ),
        (
            "mcp__devboy__fs__directory_tree",
            "mcp__fs__directory_tree",
            "directory_tree",
        ),
    ] {
        let seen_via = result_of(&via_results, via_tool).text();
        let seen_direct = result_of(&direct_results, direct_tool).text();
        let expected: Value = serde_json::from_str(&seen_direct).unwrap_or_else(|e| {
            panic!("without devboy, {what} reaches the model as JSON ({e}): {seen_direct}")
        });
        // Lossless: what the model got through devboy is the same value.
        assert_eq!(
            decode(without_id_line(&seen_via)),
            expected,
            "{what}: {seen_via}"
        );
        // Cheaper: fewer tokens, id line included.
        let (via_tokens, direct_tokens) = (tok.count(&seen_via), tok.count(&seen_direct));
        eprintln!("{what}: {direct_tokens} o200k tokens without devboy, {via_tokens} through it");
        assert!(
            via_tokens < direct_tokens,
            "{what}: {via_tokens} through devboy vs {direct_tokens} without\n{seen_via}"
        );
        if what == "directory_tree" {
            // The tree is JSON text inside `structuredContent.content`; the
            // json_text template shows the document itself (1,711 → 766
            // when measured).
            assert!(
                via_tokens * 100 <= direct_tokens * 55,
                "{what}: {via_tokens} through devboy vs {direct_tokens} without\n{seen_via}"
            );
        }
    }
    // The graph really holds the 40 entities.
    let graph = decode(without_id_line(
        &result_of(&via_results, "mcp__devboy__mem__read_graph").text(),
    ));
    assert_eq!(
        graph["entities"].as_array().map(Vec::len),
        Some(40),
        "{graph}"
    );
}
