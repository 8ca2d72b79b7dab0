//! `find_files` with a model: Beam and Block navigating real trees on disk,
//! ranked by a scripted model on loopback that steers like an oracle (it
//! picks what is, or holds, a gold file — reading the candidates out of
//! the prompt as a model would), through both wire formats devboy speaks
//! (Anthropic Messages, OpenAI chat completions). What is proven here is
//! the plumbing: prompts a model can answer, aliases mapped back, ids it
//! was not offered ignored and counted, retries, the prompt cache, the
//! fallback to the offline ranker, the eval, the tool over MCP and its
//! telemetry. The figures (calls, tokens, cached share) are printed.

mod common;

use std::path::Path;
use std::process::Command;

use devboy_testkit::{OracleLlm, OracleOptions};
use serde_json::{json, Value};

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");
const KEY_VAR: &str = "DEVBOY_TEST_ORACLE_KEY";

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A tree of a few hundred nodes: a package whose plugin directory alone
/// fills more than one block.
fn large_fixture(root: &Path) {
    write(root, "README.md", "# demo\n");
    write(
        root,
        "setup.py",
        "from setuptools import setup\nsetup(name='demo')\n",
    );
    write(root, "docs/index.md", "# Docs\n");
    write(root, "docs/usage.md", "# Usage\n");
    write(root, "pkg/__init__.py", "");
    for name in ["engine", "scheduler", "state", "events", "errors", "config"] {
        write(
            root,
            &format!("pkg/core/{name}.py"),
            &format!(
                "class {}:\n    def run(self):\n        return 1\n",
                name.to_uppercase()
            ),
        );
    }
    write(
        root,
        "pkg/io/readers.py",
        "def read(path):\n    return open(path).read()\n",
    );
    write(
        root,
        "pkg/io/writers.py",
        "def write(path, text):\n    open(path, 'w').write(text)\n",
    );
    for i in 0..300 {
        write(root, &format!("pkg/plugins/ext_{i:03}/__init__.py"), "");
        write(
            root,
            &format!("pkg/plugins/ext_{i:03}/handler.py"),
            &format!("def handle_{i}(event):\n    return event\n"),
        );
    }
    for name in ["test_engine", "test_io", "test_plugins"] {
        write(
            root,
            &format!("tests/{name}.py"),
            "def test_it():\n    assert True\n",
        );
    }
}

const LARGE_GOLD: [&str; 3] = [
    "pkg/core/engine.py",
    "pkg/plugins/ext_217/handler.py",
    "tests/test_engine.py",
];

/// A tree of under 50 nodes (Beam under `auto`).
fn small_fixture(root: &Path) {
    for f in [
        "app/main.py",
        "app/cli.py",
        "app/config.py",
        "app/db/models.py",
        "app/db/session.py",
        "tests/test_cli.py",
    ] {
        write(root, f, "def f():\n    return 1\n");
    }
    write(root, "README.md", "# small\n");
}

const SMALL_GOLD: [&str; 2] = ["app/cli.py", "app/db/session.py"];

fn oracle(gold: &[&str], tweak: impl FnOnce(&mut OracleOptions)) -> OracleLlm {
    let mut options = OracleOptions {
        gold: gold.iter().map(|g| g.to_string()).collect(),
        ..OracleOptions::default()
    };
    tweak(&mut options);
    OracleLlm::start(options).expect("oracle starts")
}

/// A devboy.toml whose model is `oracle`, through `provider`'s API.
fn config(dir: &Path, oracle: &OracleLlm, provider: &str) -> std::path::PathBuf {
    let base = match provider {
        "openai" => format!("{}/v1", oracle.base_url()),
        _ => oracle.base_url(),
    };
    let file = dir.join(format!("devboy-{provider}.toml"));
    std::fs::write(
        &file,
        format!(
            "[retrieval.llm]\nprovider = \"{provider}\"\nmodel = \"oracle-1\"\nbase_url = \"{base}\"\napi_key_env = \"{KEY_VAR}\"\nmax_parallel = 4\ntimeout_ms = 10000\n"
        ),
    )
    .unwrap();
    file
}

/// Runs `devboy ARGS` with the oracle's key set and its index under `cache`.
fn devboy(args: &[&str], cache: &Path, key: bool) -> std::process::Output {
    let mut cmd = Command::new(DEVBOY);
    cmd.args(args)
        .env("DEVBOY_CACHE_DIR", cache)
        .env_remove(KEY_VAR);
    if key {
        cmd.env(KEY_VAR, "test-key");
    }
    cmd.output().expect("devboy runs")
}

fn json_of(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

fn find(root: &Path, cache: &Path, config: &Path, query: &str, k: usize, strategy: &str) -> Value {
    let k = k.to_string();
    let args = [
        "find-files",
        query,
        "--root",
        path(root),
        "--k",
        &k,
        "--strategy",
        strategy,
        "--format",
        "json",
        "--config",
        path(config),
    ];
    json_of(&devboy(&args, cache, true))
}

fn files(found: &Value) -> Vec<String> {
    let mut files: Vec<String> = found["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f.as_str().expect("a path").to_owned())
        .collect();
    files.sort();
    files
}

fn sorted(gold: &[&str]) -> Vec<String> {
    let mut gold: Vec<String> = gold.iter().map(|g| g.to_string()).collect();
    gold.sort();
    gold
}

const QUERY: &str = "The engine drops events that the ext_217 plugin handler returns";

#[test]
fn the_oracle_reaches_every_gold_file_with_beam_and_block_through_both_apis() {
    let dir = common::TempDir::new("find-oracle");
    let (large, small, cache) = (
        dir.path().join("large"),
        dir.path().join("small"),
        dir.path().join("cache"),
    );
    large_fixture(&large);
    small_fixture(&small);

    let anthropic = oracle(&SMALL_GOLD, |_| {});
    let cfg = config(dir.path(), &anthropic, "anthropic");
    // A small tree: auto is Beam.
    let found = find(
        &small,
        &cache,
        &cfg,
        "the cli cannot open a db session",
        2,
        "auto",
    );
    assert_eq!(found["strategy"], "beam", "{found}");
    assert_eq!(files(&found), sorted(&SMALL_GOLD), "{found}");
    let beam_calls = found["llm"]["calls"].as_u64().unwrap();
    assert!(beam_calls >= 2, "{found}");
    let first = &anthropic.calls()[0].body;
    assert_eq!(
        first["tool_choice"],
        json!({"type": "tool", "name": "rank"}),
        "{first}"
    );
    assert_eq!(first["model"], "oracle-1");

    // A large tree: auto is Block; several blocks in one round, the
    // stable part marked for the cache.
    anthropic.set_gold(LARGE_GOLD.iter().map(|g| g.to_string()).collect());
    let before = anthropic.calls().len();
    let found = find(&large, &cache, &cfg, QUERY, 3, "auto");
    assert_eq!(found["strategy"], "block", "{found}");
    assert_eq!(files(&found), sorted(&LARGE_GOLD), "{found}");
    assert!(found["tree_nodes"].as_u64().unwrap() > 600, "{found}");
    let rounds = found["rounds"].as_array().unwrap();
    assert!(
        rounds.iter().any(|r| r["calls"].as_u64().unwrap() >= 2),
        "a round of several blocks: {found}"
    );
    let block_calls = &anthropic.calls()[before..];
    assert_eq!(
        block_calls.len() as u64,
        found["llm"]["calls"].as_u64().unwrap()
    );
    for call in block_calls {
        let content = &call.body["messages"][0]["content"];
        let blocks = content.as_array().unwrap();
        // The current block (last before the dynamic message) is marked.
        assert!(
            blocks[blocks.len() - 2]["cache_control"].is_object(),
            "{content}"
        );
        let marks = blocks
            .iter()
            .filter(|b| b.get("cache_control").is_some())
            .count();
        assert!(
            marks <= 3,
            "at most four breakpoints with the system's: {content}"
        );
        let dynamic = content.as_array().unwrap().last().unwrap()["text"]
            .as_str()
            .unwrap();
        assert!(dynamic.starts_with(&format!("Query: {QUERY}")), "{dynamic}");
        assert!(
            dynamic.contains("Selectable ids in the CURRENT BLOCK:\n- n1\n"),
            "{dynamic}"
        );
        assert!(
            call.body["system"][0]["cache_control"].is_object(),
            "{}",
            call.body
        );
    }
    let share = found["cached_share_after_first"]
        .as_f64()
        .expect("a cached share");
    assert!(share > 0.0, "the cache window is read back: {found}");
    let llm = &found["llm"];
    eprintln!(
        "figures: block (anthropic) on {} nodes: {} calls, {} input tokens, {} cached, {} output; cached share after the first call {share:.3}; beam on the small tree: {beam_calls} calls",
        found["tree_nodes"], llm["calls"], llm["input_tokens"], llm["cached_input_tokens"], llm["output_tokens"]
    );

    // Beam on the large tree too.
    let found = find(&large, &cache, &cfg, QUERY, 3, "beam");
    assert_eq!(found["strategy"], "beam", "{found}");
    assert_eq!(files(&found), sorted(&LARGE_GOLD), "{found}");
    eprintln!(
        "figures: beam on the large tree: {} calls, {} input tokens",
        found["llm"]["calls"], found["llm"]["input_tokens"]
    );

    // The same through an OpenAI-compatible server.
    let openai = oracle(&LARGE_GOLD, |_| {});
    let cfg = config(dir.path(), &openai, "openai");
    for strategy in ["block", "beam"] {
        let found = find(&large, &cache, &cfg, QUERY, 3, strategy);
        assert_eq!(found["strategy"], strategy, "{found}");
        assert_eq!(files(&found), sorted(&LARGE_GOLD), "{found}");
        assert_eq!(found["model"], "openai/oracle-1");
    }
    let calls = openai.calls();
    assert!(calls.iter().all(|c| c.api == "openai"));
    assert_eq!(calls[0].body["tool_choice"], "required");
    assert_eq!(calls[0].body["tools"][0]["function"]["name"], "rank");
    assert_eq!(calls[0].body["tools"].as_array().unwrap().len(), 1);
    assert_eq!(calls[0].body["messages"][0]["role"], "system");
    let system = calls[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are navigating"), "{system}");

    // The text the agent reads says how it was found.
    let out = devboy(
        &[
            "find-files",
            QUERY,
            "--root",
            path(&large),
            "--k",
            "3",
            "--config",
            path(&cfg),
        ],
        &cache,
        true,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(block over "), "{text}");
    assert!(text.contains("with openai/oracle-1: "), "{text}");
    assert!(
        text.lines()
            .any(|l| l.ends_with(". pkg/plugins/ext_217/handler.py")),
        "{text}"
    );
}

#[test]
fn failed_calls_are_retried_and_a_model_that_stays_down_leaves_the_offline_answer() {
    let dir = common::TempDir::new("find-retry");
    let (large, cache) = (dir.path().join("large"), dir.path().join("cache"));
    large_fixture(&large);

    // 429 then 503: retried with backoff, then answered.
    let flaky = oracle(&LARGE_GOLD, |o| o.fail_first = vec![429, 503]);
    let cfg = config(dir.path(), &flaky, "anthropic");
    let found = find(&large, &cache, &cfg, QUERY, 3, "block");
    assert_eq!(files(&found), sorted(&LARGE_GOLD), "{found}");
    assert_eq!(found["llm"]["retries"], 2, "{found}");
    assert_eq!(
        flaky.calls()[..2]
            .iter()
            .map(|c| c.status)
            .collect::<Vec<_>>(),
        [429, 503]
    );

    // 400 is not retried: the offline ranker answers, and says why.
    let broken = oracle(&LARGE_GOLD, |o| o.fail_first = vec![400; 50]);
    let cfg = config(dir.path(), &broken, "anthropic");
    let found = find(&large, &cache, &cfg, QUERY, 3, "auto");
    assert_eq!(found["strategy"], "offline", "{found}");
    assert_eq!(found["files"].as_array().unwrap().len(), 3, "{found}");
    let why = found["fallback"].as_str().unwrap_or_default();
    assert!(
        why.contains("anthropic/oracle-1 failed") && why.contains("400"),
        "{found}"
    );
    assert_eq!(broken.calls().len(), 1, "no retry of a 400");
    assert_eq!(
        found["llm"]["failed_calls"], 1,
        "the failed call is counted: {found}"
    );

    // A model that does not answer in time is not asked again.
    let slow = oracle(&LARGE_GOLD, |o| {
        o.latency = std::time::Duration::from_millis(1500)
    });
    let cfg_slow = config(dir.path(), &slow, "anthropic");
    let text = std::fs::read_to_string(&cfg_slow)
        .unwrap()
        .replace("timeout_ms = 10000", "timeout_ms = 300");
    std::fs::write(&cfg_slow, text).unwrap();
    let found = find(&large, &cache, &cfg_slow, QUERY, 3, "auto");
    assert_eq!(found["strategy"], "offline", "{found}");
    assert!(
        found["fallback"]
            .as_str()
            .unwrap_or_default()
            .contains("no answer in 300 ms"),
        "{found}"
    );
    std::thread::sleep(std::time::Duration::from_millis(2000));
    assert_eq!(slow.calls().len(), 1, "a timed-out call is not retried");

    // No key: the variable is named, and the offline ranker answers.
    let args = [
        "find-files",
        QUERY,
        "--root",
        path(&large),
        "--config",
        path(&cfg),
    ];
    let out = devboy(&args, &cache, false);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(KEY_VAR),
        "{out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("offline ranker"),
        "{out:?}"
    );
    // …but an explicit model strategy is refused, with the reason.
    let args = [
        "find-files",
        QUERY,
        "--root",
        path(&large),
        "--strategy",
        "beam",
        "--config",
        path(&cfg),
    ];
    let out = devboy(&args, &cache, false);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(KEY_VAR),
        "{out:?}"
    );
}

#[test]
fn ids_the_model_was_not_offered_are_ignored_and_counted() {
    let dir = common::TempDir::new("find-invalid");
    let (large, cache) = (dir.path().join("large"), dir.path().join("cache"));
    large_fixture(&large);
    let sloppy = oracle(&LARGE_GOLD, |o| {
        o.extra_ids = vec!["n999".into(), "../../etc/passwd".into(), "4242".into()]
    });
    let cfg = config(dir.path(), &sloppy, "anthropic");
    for strategy in ["block", "beam"] {
        let found = find(&large, &cache, &cfg, QUERY, 3, strategy);
        assert_eq!(files(&found), sorted(&LARGE_GOLD), "{found}");
        let calls = found["llm"]["calls"].as_u64().unwrap();
        // "4242" may name a node in Beam's id space but was not offered.
        assert_eq!(
            found["llm"]["invalid_ids"].as_u64().unwrap(),
            3 * calls,
            "{found}"
        );
    }
}

#[test]
fn eval_find_files_with_the_oracle_reaches_recall_one_and_reports_model_cost() {
    let dir = common::TempDir::new("find-eval");
    let repos = dir.path().join("repos");
    let work = repos.join("demo+plugins");
    large_fixture(&work);
    common::git_as(&work, "Eval", None, &["init", "-q"]);
    common::git_as(&work, "Eval", None, &["add", "."]);
    common::git_as(&work, "Eval", None, &["commit", "-q", "-m", "plugins"]);
    let rows = [
        json!({"instance_id": "demo__plugins-1", "repo": "demo/plugins", "base_commit": "HEAD",
               "problem_statement": QUERY, "gold_files": LARGE_GOLD}),
        json!({"instance_id": "demo__plugins-2", "repo": "demo/plugins", "base_commit": "HEAD",
               "problem_statement": "Readers fail on the config of ext_042",
               "gold_files": ["pkg/io/readers.py", "pkg/plugins/ext_042/handler.py", "pkg/core/config.py"]}),
    ];
    let dataset = dir.path().join("dataset.jsonl");
    std::fs::write(
        &dataset,
        rows.iter().map(|r| format!("{r}\n")).collect::<String>(),
    )
    .unwrap();
    let model = oracle(&LARGE_GOLD, |o| {
        o.gold_by_query = vec![(
            "ext_042".into(),
            vec![
                "pkg/io/readers.py".into(),
                "pkg/plugins/ext_042/handler.py".into(),
                "pkg/core/config.py".into(),
            ],
        )]
    });
    let cfg = config(dir.path(), &model, "anthropic");
    for strategy in ["auto", "beam"] {
        let args = [
            "eval",
            "find-files",
            path(&dataset),
            "--repos",
            path(&repos),
            "--k",
            "3",
            "--strategy",
            strategy,
            "--config",
            path(&cfg),
            "--format",
            "json",
        ];
        let report = json_of(&devboy(&args, &dir.path().join("cache"), true));
        let overall = &report["overall"];
        assert_eq!(overall["instances"], 2, "{report}");
        assert_eq!(overall["recall_at_gold"], 1.0, "{strategy}: {report}");
        assert_eq!(overall["exact_at_gold"], 1.0, "{strategy}: {report}");
        assert_eq!(overall["fallbacks"], 0, "{report}");
        assert!(overall["llm_calls"].as_f64().unwrap() >= 2.0, "{report}");
        assert!(
            overall["llm_input_tokens"].as_f64().unwrap() > 500.0,
            "{report}"
        );
        eprintln!(
            "figures: eval {strategy}: recall@gold {}, {} calls, {} input tokens, {} cached, {} output per query",
            overall["recall_at_gold"], overall["llm_calls"], overall["llm_input_tokens"],
            overall["llm_cached_input_tokens"], overall["llm_output_tokens"]
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tool_navigates_with_the_configured_model_and_records_its_cost_without_content() {
    let dir = common::TempDir::new("find-mcp");
    let (large, cache, telemetry) = (
        dir.path().join("large"),
        dir.path().join("cache"),
        dir.path().join("telemetry"),
    );
    large_fixture(&large);
    let model = oracle(&LARGE_GOLD, |_| {});
    let cfg = config(dir.path(), &model, "anthropic");
    // Served from the test's directory, which holds `large`.
    let mut client = common::RawClient::start_command_in(
        &["mcp", "--config", path(&cfg)],
        &[
            ("DEVBOY_CACHE_DIR", path(&cache)),
            ("DEVBOY_TELEMETRY", "on"),
            ("DEVBOY_TELEMETRY_DIR", path(&telemetry)),
            (KEY_VAR, "test-key"),
        ],
        Some(dir.path()),
    )
    .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "devboy_find_files", "arguments": {"query": QUERY, "root": large, "k": 3}}}))
        .await;
    let answer = client.recv_response(1).await;
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(text.contains("(block over "), "{answer}");
    for gold in LARGE_GOLD {
        assert!(
            text.lines().any(|l| l.ends_with(&format!(". {gold}"))),
            "{gold}: {answer}"
        );
    }
    client.stop().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let record = loop {
        let events: Vec<Value> = walk(&telemetry.join("events"))
            .iter()
            .flat_map(|t| {
                t.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .collect::<Vec<_>>()
            })
            .collect();
        if let Some(r) = events.into_iter().find(|e| e["kind"] == "retrieval") {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "no retrieval record");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(record["strategy"], "block", "{record}");
    assert_eq!(record["provider"], "anthropic", "{record}");
    assert_eq!(record["fell_back"], false, "{record}");
    assert_eq!(record["files"], 3, "{record}");
    assert!(record["calls"].as_u64().unwrap() >= 3, "{record}");
    assert!(record["input_tokens"].as_u64().unwrap() > 1000, "{record}");
    // Counts only: nothing of the query, the paths or the model's name.
    let all: String = walk(&telemetry).concat();
    for secret in ["engine", "ext_217", "oracle-1", "drops events", "test-key"] {
        assert!(!all.contains(secret), "{secret} in telemetry");
    }
}

/// The text of every file under `dir`.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(text) = std::fs::read_to_string(&p) {
            out.push(text);
        }
    }
    out
}

/// Runs `tests/python/sampling_client.py` (the Python MCP SDK, offering
/// sampling unless `sampling` is false) against `devboy mcp --config`.
async fn sampling_client(config: &Path, root: &Path, cache: &Path, sampling: bool) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sampling_client.py");
    let mut cmd = tokio::process::Command::new(devboy_testkit::peers::python());
    cmd.arg(script)
        .args(["--devboy", common::devboy_bin(), "--config", path(config)])
        .args(["--root", path(root), "--query", QUERY, "--gold"])
        .args(LARGE_GOLD)
        .env("DEVBOY_CACHE_DIR", cache)
        .env("DEVBOY_TELEMETRY", "off")
        .env("PYTHONUNBUFFERED", "1")
        // devboy inherits it: `root` lies inside the directory it serves.
        .current_dir(root.parent().unwrap_or(root))
        .kill_on_drop(true);
    if !sampling {
        cmd.arg("--no-sampling");
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
        .await
        .expect("the SDK client finished within 120 s")
        .expect("run the SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_offers_sampling_ranks_with_its_own_model() {
    let dir = common::TempDir::new("find-sampling");
    let (large, cache) = (dir.path().join("large"), dir.path().join("cache"));
    large_fixture(&large);
    let config = dir.path().join("devboy.toml");
    std::fs::write(&config, "[retrieval.llm]\nprovider = \"mcp-sampling\"\n").unwrap();

    let summary = sampling_client(&config, &large, &cache, true).await;
    let text = summary["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("(block over ") && text.contains("with mcp-sampling: "),
        "{summary}"
    );
    for gold in LARGE_GOLD {
        assert!(
            text.lines().any(|l| l.ends_with(&format!(". {gold}"))),
            "{gold}: {summary}"
        );
    }
    let requests = summary["sampling_requests"].as_array().unwrap();
    assert!(requests.len() >= 3, "{summary}");
    assert!(requests.iter().all(|r| r["system"] == true), "{summary}");

    // A client without sampling: the offline ranker answers, and says why.
    let summary = sampling_client(&config, &large, &cache, false).await;
    let text = summary["text"].as_str().unwrap_or_default();
    assert!(text.contains("does not offer sampling"), "{summary}");
    assert_eq!(summary["sampling_requests"], json!([]), "{summary}");
    assert!(text.contains("1. "), "{summary}");
}

#[test]
fn doctor_asks_the_configured_model_one_rank_question() {
    let dir = common::TempDir::new("find-doctor");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let model = oracle(&["src/server.py"], |_| {});
    let cfg = config(dir.path(), &model, "anthropic");
    let doctor = |key: bool| {
        let mut cmd = Command::new(DEVBOY);
        cmd.args(["doctor", "--config", path(&cfg)])
            .current_dir(dir.path())
            .env("HOME", &home)
            .env_remove(KEY_VAR);
        if key {
            cmd.env(KEY_VAR, "test-key");
        }
        cmd.output().expect("doctor runs")
    };
    let out = doctor(true);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("find_files' model ([retrieval.llm]):"),
        "{text}"
    );
    assert!(
        text.contains("✔ anthropic/oracle-1: answered a rank call in "),
        "{text}"
    );
    assert!(
        text.contains("picked [\"1\"]"),
        "the oracle picked src (node 1): {text}"
    );
    assert_eq!(model.calls().len(), 1);

    let out = doctor(false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        text.contains(&format!(
            "✘ anthropic/oracle-1: the API key variable {KEY_VAR} is not set"
        )),
        "{text}"
    );
}
