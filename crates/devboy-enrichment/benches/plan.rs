//! `Planner::plan` per answered call on a realistic catalog: 60 tools
//! (filesystem, git, memory and GitHub servers as they name their tools,
//! plus filler tools), the shipped edges, a few user edges, and a
//! 50-line `search_files` answer. Also the cost of building the planner.

use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use devboy_core::pipeline_config::PipelineConfig;
use devboy_enrichment::{Annotations, Answered, PlanContext, Planner, ToolFacts};
use serde_json::{json, Map, Value};

fn schema(props: &[&str]) -> Map<String, Value> {
    let properties: Map<String, Value> = props
        .iter()
        .map(|p| ((*p).to_owned(), json!({"type": "string"})))
        .collect();
    json!({"type": "object", "properties": properties, "required": props})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn tool(upstream: &str, name: &str, props: &[&str]) -> ToolFacts {
    ToolFacts {
        exposed: format!("{upstream}__{name}"),
        upstream: upstream.to_owned(),
        tool: name.to_owned(),
        annotations: Annotations {
            read_only: Some(true),
            ..Annotations::default()
        },
        input_schema: schema(props),
        remote_upstream: false,
    }
}

fn catalog() -> Vec<ToolFacts> {
    let mut tools = Vec::new();
    for name in [
        "read_text_file",
        "read_file",
        "read_multiple_files",
        "list_directory",
        "directory_tree",
        "get_file_info",
        "list_allowed_directories",
    ] {
        tools.push(tool("fs", name, &["path"]));
    }
    tools.push(tool("fs", "search_files", &["path", "pattern"]));
    for name in ["git_status", "git_diff_unstaged", "git_log", "git_branch"] {
        tools.push(tool("git", name, &["repo_path"]));
    }
    tools.push(tool("git", "git_show", &["repo_path", "revision"]));
    for name in ["search_nodes", "open_nodes", "read_graph"] {
        tools.push(tool("memory", name, &[]));
    }
    for name in [
        "list_issues",
        "get_issue",
        "get_file_contents",
        "search_code",
    ] {
        tools.push(tool("gh", name, &["owner", "repo"]));
    }
    while tools.len() < 60 {
        let n = tools.len();
        tools.push(tool("misc", &format!("get_thing_{n}"), &["id"]));
    }
    tools
}

const USER_CONFIG: &str = r#"
[enrichment]
per_host = 3
[tools."fs__search_files"]
follow_up = [
  { tool = "fs__read_text_file", probability = 0.7 },
  { tool = "fs__get_file_info", probability = 0.35, args = { path = "$lines" }, limit = 2 },
]
[tools."fs__read_text_file"]
typical_tokens = 1200
[tools."fs__get_file_info"]
typical_tokens = 150
value_class = "optional"
"#;

fn bench(c: &mut Criterion) {
    let config =
        PipelineConfig::from_str(USER_CONFIG, Path::new("bench.toml")).expect("the bench config");
    let tools = catalog();
    let planner = Planner::new(tools.clone(), &config);
    let text: String = (0..50)
        .map(|i| format!("/home/dev/project/src/module_{i}/file_{i}.rs\n"))
        .collect();
    let arguments = json!({"path": "/home/dev/project", "pattern": "**/*.rs"});
    let answered = Answered {
        exposed: "fs__search_files",
        arguments: arguments.as_object(),
        structured: None,
        text: &text,
    };
    let words = vec!["module_3".to_owned(), "file".to_owned()];
    let ctx = PlanContext {
        held: &|_, _| false,
        median_tokens: &|_| None,
        recent_words: &words,
        in_flight: 0,
        in_flight_on: &|_| 0,
    };
    assert_eq!(planner.plan(&answered, &ctx).chosen.len(), 3);
    c.bench_function("plan/search_files_50_lines_60_tools", |b| {
        b.iter(|| planner.plan(std::hint::black_box(&answered), &ctx))
    });
    c.bench_function("planner_new/60_tools", |b| {
        b.iter_batched(
            || tools.clone(),
            |tools| Planner::new(tools, &config),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
