//! The planner's rules on made-up catalogs: the merge of shipped
//! defaults, annotations and config; every reason a candidate is
//! declined; and the limits of the choice.

use std::path::Path;
use std::time::Duration;

use devboy_core::call::CallKey;
use devboy_core::pipeline_config::{PipelineConfig, SideEffectClass};
use devboy_core::speculation::DeclineReason;
use devboy_core::value_model::ValueClass;
use devboy_enrichment::{Annotations, Answered, Plan, PlanContext, Planner, ToolFacts};
use serde_json::{json, Map, Value};

fn config(text: &str) -> PipelineConfig {
    PipelineConfig::from_str(text, Path::new("test.toml")).unwrap()
}

fn schema(props: &[&str], required: &[&str]) -> Map<String, Value> {
    let properties: Map<String, Value> = props
        .iter()
        .map(|p| ((*p).to_owned(), json!({"type": "string"})))
        .collect();
    json!({"type": "object", "properties": properties, "required": required})
        .as_object()
        .unwrap()
        .clone()
}

fn tool(upstream: &str, name: &str, props: &[&str], read_only: Option<bool>) -> ToolFacts {
    ToolFacts {
        exposed: format!("{upstream}__{name}"),
        upstream: upstream.to_owned(),
        tool: name.to_owned(),
        annotations: Annotations {
            read_only,
            ..Annotations::default()
        },
        input_schema: schema(props, props),
        remote_upstream: false,
    }
}

/// The filesystem server as it names its tools, without annotations.
fn fs_catalog() -> Vec<ToolFacts> {
    vec![
        tool("fs", "search_files", &["path", "pattern"], None),
        tool("fs", "read_text_file", &["path"], None),
        tool("fs", "list_allowed_directories", &[], None),
        tool("fs", "write_file", &["path", "content"], None),
    ]
}

fn plan_with(planner: &Planner, answered: &Answered<'_>, in_flight: usize) -> Plan {
    let ctx = PlanContext {
        held: &|_, _| false,
        median_tokens: &|_| None,
        recent_words: &[],
        in_flight,
        in_flight_on: &|_| 0,
    };
    planner.plan(answered, &ctx)
}

fn search_answer(text: &str) -> Answered<'_> {
    Answered {
        exposed: "fs__search_files",
        arguments: None,
        structured: None,
        text,
    }
}

fn reasons(plan: &Plan) -> Vec<(String, DeclineReason)> {
    plan.declined
        .iter()
        .map(|d| (d.exposed.clone(), d.reason))
        .collect()
}

#[test]
fn shipped_edges_apply_to_a_recognised_server_and_skip_lines_that_are_not_paths() {
    let planner = Planner::new(fs_catalog(), &config(""));
    let read = planner.tool("fs__read_text_file").unwrap();
    assert_eq!(read.side_effect.class, SideEffectClass::ReadOnly);
    assert_eq!(read.value_class, ValueClass::Critical);
    assert_eq!(
        read.freshness,
        Duration::from_secs(60),
        "enrichment.ttl_secs"
    );
    assert!(planner.tool("fs__write_file").unwrap().writes);

    let text = "/r/a.rs\n/r/b.rs\n/r/c.rs\n/r/d.rs\n";
    // The default caps take the edge's limit of three reads.
    let plan = plan_with(&planner, &search_answer(text), 0);
    assert_eq!(plan.chosen.len(), 3, "{plan:?}");
    assert!(plan.declined.is_empty(), "{plan:?}");
    let planner = Planner::new(fs_catalog(), &config("[enrichment]\nper_host = 2\n"));
    let plan = plan_with(&planner, &search_answer(text), 0);
    assert_eq!(
        plan.chosen.len(),
        2,
        "enrichment.per_host = 2 on one upstream"
    );
    assert_eq!(
        reasons(&plan),
        [("fs__read_text_file".to_owned(), DeclineReason::HostBusy)]
    );
    let planner = Planner::new(fs_catalog(), &config("[enrichment]\nper_host = 5\n"));
    let plan = plan_with(&planner, &search_answer(text), 0);
    let paths: Vec<&Value> = plan.chosen.iter().map(|p| &p.arguments["path"]).collect();
    assert_eq!(
        paths,
        [&json!("/r/a.rs"), &json!("/r/b.rs"), &json!("/r/c.rs")]
    );
    assert!(plan
        .chosen
        .iter()
        .all(|p| p.exposed == "fs__read_text_file"));

    let none = plan_with(&planner, &search_answer("No matches found"), 0);
    assert!(none.chosen.is_empty());
    assert_eq!(
        reasons(&none),
        [("fs__read_text_file".to_owned(), DeclineReason::NoArguments)]
    );

    // The same tool names on an upstream without the signature are not
    // the filesystem server: nothing is shipped for them (only the verb
    // of the name speaks, which never allows a prefetch).
    let stranger = vec![
        tool("x", "search_files", &["path", "pattern"], None),
        tool("x", "read_text_file", &["path"], None),
    ];
    let planner = Planner::new(stranger, &config(""));
    let read = planner.tool("x__read_text_file").unwrap().side_effect;
    assert_eq!(read.source, devboy_core::call::ClassSource::Verb);
    assert!(!read.may_prefetch());
    assert!(planner.tool("x__search_files").unwrap().edges.is_empty());
}

#[test]
fn the_config_overrides_and_a_tuner_item_keeps_the_shipped_projection() {
    let planner = Planner::new(
        fs_catalog(),
        &config(
            r#"
[tools."fs__search_files"]
follow_up = [{ tool = "fs__read_text_file", probability = 0.9 }]
[tools."fs__read_text_file"]
freshness_secs = 5
typical_tokens = 100
value_class = "optional"
"#,
        ),
    );
    let edges = &planner.tool("fs__search_files").unwrap().edges;
    assert_eq!(edges.len(), 1);
    assert_eq!(edges[0].probability, 0.9);
    assert_eq!(edges[0].limit, 3, "the shipped edge's limit");
    let plan = plan_with(&planner, &search_answer("/r/a.rs\n"), 0);
    let p = &plan.chosen[0];
    assert_eq!(
        (p.predicted_tokens, p.freshness),
        (100, Duration::from_secs(5))
    );
    assert!((p.value - 0.3 * 0.9).abs() < 1e-12, "{}", p.value);
}

#[test]
fn every_filter_declines_with_its_reason() {
    let mut tools = fs_catalog();
    tools.push(tool("fs", "get_file_info", &["path"], Some(true)));
    tools.push(tool("fs", "stat_ro", &["path"], Some(false)));
    tools.push(tool("fs", "peek", &["path"], None));
    tools.push(tool("fs", "annotated", &["path"], Some(true)));
    let mut remote = tool("web", "fetch_page", &["path"], Some(true));
    remote.remote_upstream = true;
    tools.push(remote);
    let mut open = tool("fs", "open_world", &["path"], Some(true));
    open.annotations.open_world = Some(true);
    tools.push(open);
    let planner = Planner::new(
        tools,
        &config(
            r#"
[tools."fs__search_files"]
follow_up = [
  { tool = "fs__nope", probability = 0.9, args = { path = "$lines" } },
  { tool = "fs__write_file", probability = 0.9, args = { path = "$lines", content = "$lines" } },
  { tool = "fs__stat_ro", probability = 0.9, args = { path = "$lines" } },
  { tool = "fs__peek", probability = 0.9, args = { path = "$lines" } },
  { tool = "fs__get_file_info", probability = 0.1, args = { path = "$lines" } },
  { tool = "fs__annotated", probability = 0.9, args = { path = "$lines" } },
  { tool = "web__fetch_page", probability = 0.9, args = { path = "$lines" } },
  { tool = "fs__open_world", probability = 0.9, args = { path = "$lines" } },
  { tool = "fs__search_files", probability = 0.9, args = { path = "$args/path", pattern = "$args/pattern" } },
  { tool = "fs__read_text_file", probability = 0.9, args = { wrong = "$lines" } },
]
[tools."fs__write_file"]
side_effect = "read_only"
speculate = true
[tools."fs__stat_ro"]
side_effect = "read_only"
[tools."fs__annotated"]
speculate = false
"#,
        ),
    );
    let args = json!({"path": "/r", "pattern": "*.rs"});
    let answered = Answered {
        exposed: "fs__search_files",
        arguments: args.as_object(),
        structured: None,
        text: "/r/a.rs\n",
    };
    let plan = plan_with(&planner, &answered, 0);
    let want = [
        ("fs__nope", DeclineReason::UnknownTool),
        ("fs__write_file", DeclineReason::Writes),
        ("fs__stat_ro", DeclineReason::Writes),
        ("fs__peek", DeclineReason::NotReadOnly),
        ("fs__get_file_info", DeclineReason::LowProbability),
        ("fs__annotated", DeclineReason::SpeculateOff),
        ("web__fetch_page", DeclineReason::Remote),
        ("fs__open_world", DeclineReason::Remote),
        ("fs__search_files", DeclineReason::SelfLoop),
        ("fs__read_text_file", DeclineReason::NoArguments),
    ];
    let got = reasons(&plan);
    for (tool, reason) in want {
        assert!(
            got.contains(&(tool.to_owned(), reason)),
            "{tool}: {reason:?} not in {got:?}"
        );
    }
    assert!(plan.chosen.is_empty(), "{:?}", plan.chosen);

    // Remote tools are allowed by enrichment.remote, or by their own
    // speculate = true.
    let remote_on = planner_with_remote();
    let plan = plan_with(&remote_on, &answered, 0);
    assert_eq!(plan.chosen.len(), 1);
    assert_eq!(plan.chosen[0].host, "web");
}

fn planner_with_remote() -> Planner {
    let mut remote = tool("web", "fetch_page", &["path"], Some(true));
    remote.remote_upstream = true;
    let mut tools = fs_catalog();
    tools.push(remote);
    Planner::new(
        tools,
        &config(
            r#"
[enrichment]
remote = true
[tools."fs__search_files"]
follow_up = [{ tool = "web__fetch_page", probability = 0.9, args = { path = "$lines" } }, { tool = "fs__read_text_file", probability = 0.9, args = { path = "$lines" }, limit = 1 }]
[tools."fs__read_text_file"]
speculate = false
"#,
        ),
    )
}

#[test]
fn held_calls_budget_slots_and_hosts_limit_the_choice() {
    let planner = Planner::new(
        fs_catalog(),
        &config(
            r#"
[enrichment]
budget_tokens = 2500
per_host = 2
max_parallel = 3
"#,
        ),
    );
    let text = "/r/a\n/r/b\n/r/c\n";
    let held_path = json!({"path": "/r/a"});
    let held = |exposed: &str, args: &Map<String, Value>| {
        CallKey::new(exposed, Some(args))
            == CallKey::new("fs__read_text_file", held_path.as_object())
    };
    let ctx = PlanContext {
        held: &held,
        median_tokens: &|_| Some(1000),
        recent_words: &[],
        in_flight: 0,
        in_flight_on: &|_| 0,
    };
    let plan = planner.plan(&search_answer(text), &ctx);
    assert_eq!(plan.chosen.len(), 2);
    assert_eq!(
        reasons(&plan),
        [("fs__read_text_file".to_owned(), DeclineReason::AlreadyHeld)]
    );

    // One slot left on the host: the other candidates are HostBusy.
    let ctx = PlanContext {
        held: &|_, _| false,
        in_flight_on: &|host| usize::from(host == "fs"),
        ..ctx
    };
    let plan = planner.plan(&search_answer(text), &ctx);
    assert_eq!(plan.chosen.len(), 1);
    assert_eq!(
        plan.declined
            .iter()
            .filter(|d| d.reason == DeclineReason::HostBusy)
            .count(),
        2
    );

    // Budget: 2500 tokens hold two results of 1000.
    let planner = Planner::new(
        fs_catalog(),
        &config("[enrichment]\nbudget_tokens = 2500\nper_host = 5\n"),
    );
    let ctx = PlanContext {
        in_flight_on: &|_| 0,
        ..ctx
    };
    let plan = planner.plan(&search_answer(text), &ctx);
    assert_eq!(plan.chosen.len(), 2);
    assert_eq!(
        reasons(&plan),
        [("fs__read_text_file".to_owned(), DeclineReason::OverBudget)]
    );

    // Slots: two in flight of three.
    let ctx = PlanContext {
        in_flight: 2,
        ..ctx
    };
    let plan = planner.plan(&search_answer(text), &ctx);
    assert_eq!(plan.chosen.len(), 1);
    assert!(plan
        .declined
        .iter()
        .all(|d| d.reason == DeclineReason::OverParallel));

    // Off: nothing planned.
    let off = Planner::new(fs_catalog(), &config("[enrichment]\nenabled = false\n"));
    assert_eq!(off.plan(&search_answer(text), &ctx), Plan::default());
}

#[test]
fn recent_words_raise_the_value_of_matching_calls() {
    let planner = Planner::new(fs_catalog(), &config(""));
    let words = vec!["parser".to_owned()];
    let ctx = PlanContext {
        held: &|_, _| false,
        median_tokens: &|_| None,
        recent_words: &words,
        in_flight: 0,
        in_flight_on: &|_| 0,
    };
    let plan = planner.plan(&search_answer("/r/lexer.rs\n/r/parser.rs\n"), &ctx);
    let value = |p: &str| {
        plan.chosen
            .iter()
            .find(|c| c.arguments["path"] == json!(p))
            .unwrap()
            .value
    };
    assert!((value("/r/parser.rs") / value("/r/lexer.rs") - 1.25).abs() < 1e-12);
    assert_eq!(
        plan.chosen[0].arguments["path"],
        json!("/r/parser.rs"),
        "densest first"
    );
}
