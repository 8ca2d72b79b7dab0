//! Tool definitions through devboy: every input schema of the reference
//! servers (filesystem, memory, git, time, everything), compacted by
//! `devboy_core::tool_schema::compact`, accepts and rejects exactly the
//! same argument objects as the original, as a JSON Schema validator
//! decides over arguments generated from each schema; and what the
//! compaction saves, in o200k tokens of what Claude Code sends per tool
//! (name, description, input schema), is printed.

mod common;

use devboy_core::tool_schema::compact;
use devboy_pipeline::Tokenizer;
use devboy_testkit::peers::{self, PeerCommand};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Map, Value};

async fn tools_of(peer: &PeerCommand) -> Vec<rmcp::model::Tool> {
    let transport = TokioChildProcess::new(tokio::process::Command::from(peer.command()))
        .expect("spawn the server");
    let client = common::Recorder::default()
        .serve(transport)
        .await
        .expect("initialize");
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let _ = client.cancel().await;
    tools
}

/// Values of every JSON type, a few of each.
fn samples() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(false),
        json!(0),
        json!(1),
        json!(-3),
        json!(1.5),
        json!(""),
        json!("x"),
        json!("2026-01-01"),
        json!([]),
        json!(["x"]),
        json!([1, 2]),
        json!({}),
        json!({"k": "v"}),
    ]
}

/// A value the property's schema most likely accepts.
fn plausible(schema: &Value) -> Value {
    if let Some(e) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return e.clone();
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(d) = schema.get("default") {
        return d.clone();
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.first().and_then(Value::as_str).unwrap_or("string"),
        _ => "string",
    };
    match ty {
        "integer" | "number" => json!(1),
        "boolean" => json!(true),
        "array" => json!([]),
        "object" => minimal(schema),
        "null" => Value::Null,
        _ => json!("x"),
    }
}

/// An object with every required property set plausibly.
fn minimal(schema: &Value) -> Value {
    let mut out = Map::new();
    let props = schema.get("properties").and_then(Value::as_object);
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let sub = props
            .and_then(|p| p.get(name))
            .cloned()
            .unwrap_or(json!({}));
        out.insert(name.to_owned(), plausible(&sub));
    }
    Value::Object(out)
}

/// Argument objects to try on a tool: not objects at all, the minimal
/// one, each required property left out, each property set to every
/// sample and to its plausible value (also inside nested objects), and an
/// unknown property.
fn instances(schema: &Value) -> Vec<Value> {
    let mut out = vec![Value::Null, json!([]), json!("x"), json!({})];
    let base = minimal(schema);
    out.push(base.clone());
    let mut all = base.clone();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            all[name] = plausible(sub);
            for value in samples()
                .into_iter()
                .chain([plausible(sub), json!(["x", "y"])])
            {
                let mut v = base.clone();
                v[name] = value;
                out.push(v);
            }
            if sub.get("properties").is_some() {
                for inner in instances(sub) {
                    let mut v = base.clone();
                    v[name] = inner;
                    out.push(v);
                }
            }
            if let Some(items) = sub.get("items") {
                for inner in [plausible(items), minimal(items), json!({"k": 1})] {
                    let mut v = base.clone();
                    v[name] = json!([inner]);
                    out.push(v);
                }
            }
            if let Some(obj) = base.as_object().filter(|o| o.contains_key(name)) {
                let mut without = obj.clone();
                without.remove(name);
                out.push(Value::Object(without));
            }
        }
    }
    out.push(all.clone());
    all["zz_not_a_parameter"] = json!(1);
    out.push(all);
    out
}

/// What one tool's compaction did: tokens of its definition (name,
/// description, input schema, as Claude Code sends them) before and
/// after, and how many argument objects both schemas judged alike. Panics
/// on the first object judged differently, or a changed description.
fn check_tool(
    label: &str,
    name: &str,
    description: &Value,
    original: &Map<String, Value>,
) -> (usize, usize, usize) {
    let compacted = compact(original, name);
    let cost = |schema: &Map<String, Value>| {
        Tokenizer::O200k.count_definition(name, description.as_str(), schema)
    };
    let (before, after) = (cost(original), cost(&compacted));
    let original_v = Value::Object(original.clone());
    let compacted_v = Value::Object(compacted);
    let a = jsonschema::validator_for(&original_v)
        .unwrap_or_else(|e| panic!("{label}/{name}: the original schema: {e}"));
    let b = jsonschema::validator_for(&compacted_v)
        .unwrap_or_else(|e| panic!("{label}/{name}: the compacted schema: {e}"));
    let mut n = 0;
    for args in instances(&original_v) {
        assert_eq!(
            a.is_valid(&args),
            b.is_valid(&args),
            "{label}/{name}: {args} is judged differently\noriginal: {original_v}\ncompacted: {compacted_v}"
        );
        n += 1;
    }
    // The descriptions are the author's words: untouched.
    assert_eq!(
        collect(&original_v, "description"),
        collect(&compacted_v, "description"),
        "{label}/{name}"
    );
    (before, after, n)
}

#[tokio::test(flavor = "multi_thread")]
async fn compacted_schemas_accept_exactly_what_the_originals_accept() {
    let root = common::TempDir::new("schemas");
    std::fs::write(root.path().join("a.txt"), "a").unwrap();
    let git = root.path().join("repo");
    std::fs::create_dir_all(&git).unwrap();
    common::git_as(&git, "t", None, &["init", "-q"]);
    let servers = [
        ("filesystem", peers::server_filesystem(root.path())),
        (
            "memory",
            peers::server_memory(&root.path().join("memory.jsonl")),
        ),
        ("git", peers::server_git(&git)),
        ("time", peers::server_time()),
        ("everything", peers::server_everything()),
    ];
    let (mut before_all, mut after_all, mut checked) = (0, 0, 0);
    println!(
        "{:<12} {:>6} {:>14} {:>14} {:>7} {:>10}",
        "server", "tools", "tokens before", "tokens after", "ratio", "arguments"
    );
    for (name, peer) in &servers {
        let tools = tools_of(peer).await;
        assert!(!tools.is_empty(), "{name} lists tools");
        let (mut before, mut after, mut n) = (0, 0, 0);
        for tool in &tools {
            let description = json!(tool.description);
            let (b, a, k) = check_tool(name, &tool.name, &description, &tool.input_schema);
            before += b;
            after += a;
            n += k;
        }
        println!(
            "{name:<12} {:>6} {before:>14} {after:>14} {:>7.3} {n:>10}",
            tools.len(),
            after as f64 / before as f64
        );
        assert!(after <= before, "{name}: compaction never costs tokens");
        before_all += before;
        after_all += after;
        checked += n;
    }
    println!(
        "{:<12} {:>6} {before_all:>14} {after_all:>14} {:>7.3} {checked:>10}",
        "all",
        "",
        after_all as f64 / before_all as f64
    );
    assert!(after_all < before_all, "something is saved");
}

/// The same for the GitHub MCP server's 117 tools, as its own repository
/// records them (tests/data/github-mcp-server-tools.json).
#[test]
fn the_github_servers_recorded_schemas_keep_their_meaning_compacted() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/github-mcp-server-tools.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let tools = doc["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 117);
    let (mut before, mut after, mut n) = (0, 0, 0);
    for tool in tools {
        let (b, a, k) = check_tool(
            "github",
            tool["name"].as_str().unwrap(),
            &tool["description"],
            tool["inputSchema"].as_object().unwrap(),
        );
        before += b;
        after += a;
        n += k;
    }
    println!(
        "github: 117 tools, {before} -> {after} o200k tokens ({:.3}), {n} argument objects judged alike",
        after as f64 / before as f64
    );
    assert!(after <= before);
}

/// Every `key` string in `value`, in document order.
fn collect(value: &Value, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(v: &Value, key: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if k == key {
                        if let Some(s) = x.as_str() {
                            out.push(s.to_owned());
                        }
                    }
                    walk(x, key, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, key, out)),
            _ => {}
        }
    }
    walk(value, key, &mut out);
    out
}

/// `[builtins] enabled` leaves out the built-ins a user does not want;
/// upstream tools are untouched.
#[tokio::test(flavor = "multi_thread")]
async fn builtins_enabled_offers_only_those() {
    let devboy = common::Devboy::start(
        "[builtins]\nenabled = [\"expand\", \"status\"]\n\n[servers.srv]\ncommand = \"{server}\"\n",
    )
    .await;
    let names = devboy.tool_names().await;
    let builtins: Vec<&String> = names.iter().filter(|n| n.starts_with("devboy_")).collect();
    assert_eq!(builtins, ["devboy_status", "devboy_expand"], "{names:?}");
    assert!(names.iter().any(|n| n == "srv__echo"), "{names:?}");
}

/// Through devboy a server's input schemas arrive compacted, and exactly
/// as the server sent them with `[tools] compact_schemas = false`.
#[tokio::test(flavor = "multi_thread")]
async fn compaction_is_applied_through_devboy_and_can_be_turned_off() {
    let direct = tools_of(&peers::server_time()).await;
    let time = common::peer_toml("time", &peers::server_time());
    for (compacting, extra) in [(true, ""), (false, "[tools]\ncompact_schemas = false\n\n")] {
        let devboy = common::Devboy::start(&format!("{extra}{time}")).await;
        devboy
            .wait_upstream("time", "ready", |u| u["state"] == "ready")
            .await;
        let via = devboy.client.peer().list_all_tools().await.unwrap();
        for tool in &direct {
            let exposed = via
                .iter()
                .find(|t| t.name == format!("time__{}", tool.name))
                .unwrap_or_else(|| panic!("{} not listed", tool.name));
            let expected = if compacting {
                compact(&tool.input_schema, &tool.name)
            } else {
                tool.input_schema.as_ref().clone()
            };
            assert_eq!(*exposed.input_schema, expected, "{}", tool.name);
        }
        if compacting {
            assert!(
                direct
                    .iter()
                    .any(|t| compact(&t.input_schema, &t.name) != *t.input_schema),
                "the time server has something to compact"
            );
        }
    }
}
