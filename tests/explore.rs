//! `devboy explore` and `devboy_explore` on a generated fixture repository:
//! a flow (a pipeline running stages through a chain) whose stages are
//! four interchangeable implementations of one interface, plus a distinct
//! class the question names that implements nothing.
//!
//! Adaptive sizing (the regression test the design note never had): the
//! off-spine stages are skeletons, the spine and the distinct class are
//! in full, the answer is smaller than without it; `DEVBOY_ADAPTIVE_EXPLORE=0`
//! turns it off. Also: the index is kept under `DEVBOY_CACHE_DIR` and only
//! changed files are parsed again; the built-in tool answers through
//! `devboy mcp`.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");

/// Runs `devboy ARGS`, with its index kept in `cache` when given.
fn devboy(args: &[&str], cache: Option<&Path>) -> std::process::Output {
    let mut cmd = Command::new(DEVBOY);
    cmd.args(args);
    if let Some(cache) = cache {
        // No user config either: find-files would read its model there.
        cmd.env("DEVBOY_CACHE_DIR", cache)
            .env("DEVBOY_CONFIG_DIR", cache.join("no-config"));
    }
    cmd.output().expect("devboy runs")
}

/// The JSON a successful run printed.
fn json_of(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// `devboy mcp` with no config, serving `project` (its working
/// directory, where `root` must lie), its index kept in `cache`.
async fn mcp(project: &Path, cache: &Path) -> (common::RawClient, common::TempDir) {
    let empty = common::TempDir::new("explore-mcp-config");
    let client = common::RawClient::start_command_in(
        &["mcp"],
        &[
            ("DEVBOY_CONFIG_DIR", path(empty.path())),
            ("DEVBOY_CACHE_DIR", path(cache)),
        ],
        Some(project),
    )
    .await;
    (client, empty)
}

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A stage implementation with a body of some length.
fn stage(name: &str, verb: &str) -> String {
    let steps: String = (0..25)
        .map(|i| format!("        ctx.note(\"{verb} step {i}\")\n"))
        .collect();
    format!(
        "package demo.stages\n\nimport demo.Context\nimport demo.Stage\n\n/** {name}: {verb}s the document. */\nclass {name} : Stage {{\n    @Throws(IllegalStateException::class)\n    override fun run(ctx: Context): Context {{\n{steps}        return ctx\n    }}\n\n    private fun describe(): String = \"{verb}\"\n}}\n"
    )
}

fn fixture(root: &Path) {
    write(
        root,
        "src/demo/Stage.kt",
        "package demo\n\n/** One step of the pipeline. */\nfun interface Stage {\n    fun run(ctx: Context): Context\n}\n\nclass Context {\n    fun note(text: String) {}\n}\n",
    );
    write(
        root,
        "src/demo/Pipeline.kt",
        "package demo\n\n/** Runs its stages in order over a document. */\nclass Pipeline(private val stages: List<Stage>) {\n    fun execute(ctx: Context): Context {\n        val chain = StageChain(stages, 0)\n        return chain.proceed(ctx)\n    }\n}\n",
    );
    write(
        root,
        "src/demo/StageChain.kt",
        "package demo\n\n/** Hands the context to one stage after another. */\nclass StageChain(private val stages: List<Stage>, private val index: Int) {\n    fun proceed(ctx: Context): Context {\n        if (index == stages.size) return ctx\n        val stage = stages[index]\n        return StageChain(stages, index + 1).proceed(stage.run(ctx))\n    }\n}\n",
    );
    write(
        root,
        "src/demo/StageRegistry.kt",
        "package demo\n\n/** Where the pipeline's stages are registered by name. */\nclass StageRegistry {\n    private val byName = mutableMapOf<String, Stage>()\n\n    fun register(name: String, stage: Stage) {\n        byName[name] = stage\n    }\n\n    fun pipeline(names: List<String>): Pipeline = Pipeline(names.map { byName.getValue(it) })\n}\n",
    );
    for (name, verb) in [
        ("ParseStage", "parse"),
        ("ValidateStage", "validate"),
        ("TransformStage", "transform"),
        ("EmitStage", "emit"),
    ] {
        write(
            root,
            &format!("src/demo/stages/{name}.kt"),
            &stage(name, verb),
        );
    }
    // Not source: ignored, vendored, or another language's noise.
    write(root, "node_modules/x/index.js", "function Stage() {}\n");
    write(root, "README.md", "# demo\n");
}

fn explore(root: &Path, cache: &Path, adaptive: bool, query: &str) -> Value {
    let out = Command::new(DEVBOY)
        .args(["explore", query, "--format", "json", "--root"])
        .arg(root)
        .env("DEVBOY_CACHE_DIR", cache)
        .env("DEVBOY_ADAPTIVE_EXPLORE", if adaptive { "1" } else { "0" })
        .output()
        .expect("devboy runs");
    json_of(&out)
}

/// A family of four off the flow: one member whole, three skeletons.
fn one_exemplar_three_skeletons(renders: &[&str], text: &str) {
    let count = |r: &str| renders.iter().filter(|x| **x == r).count();
    assert_eq!(count("full"), 1, "{renders:?}: {text}");
    assert_eq!(count("skeleton"), 3, "{renders:?}: {text}");
}

fn render_of<'a>(answer: &'a Value, file: &str) -> Option<&'a str> {
    answer["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().is_some_and(|p| p.ends_with(file)))
        .and_then(|f| f["render"].as_str())
}

const QUERY: &str = "How does the pipeline run its stages through the stage chain, and where are stages registered?";

#[test]
fn off_spine_siblings_are_skeletons_and_the_flow_is_in_full() {
    let dir = common::TempDir::new("explore");
    let (root, cache) = (dir.path().join("repo"), dir.path().join("cache"));
    fixture(&root);

    let on = explore(&root, &cache, true, QUERY);
    let text = on["text"].as_str().unwrap();
    let spine: Vec<&str> = on["spine"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(spine.contains(&"Pipeline.execute"), "{spine:?}");
    assert!(spine.contains(&"StageChain.proceed"), "{spine:?}");
    assert!(spine.contains(&"Stage.run"), "the contract: {spine:?}");
    assert!(
        text.contains("Flow: Pipeline.execute → StageChain.proceed → Stage.run"),
        "{text}"
    );
    // The spine and the distinct class: in full.
    for file in [
        "Pipeline.kt",
        "StageChain.kt",
        "Stage.kt",
        "StageRegistry.kt",
    ] {
        assert_eq!(render_of(&on, file), Some("full"), "{file}: {text}");
    }
    // The four interchangeable stages: one exemplar in full (none is on
    // the spine), the others skeletons, with their signature lines (past
    // the annotation) and no bodies.
    let stages = ["ParseStage", "ValidateStage", "TransformStage", "EmitStage"];
    let renders: Vec<&str> = stages
        .iter()
        .map(|stage| render_of(&on, &format!("{stage}.kt")).unwrap_or("absent"))
        .collect();
    one_exemplar_three_skeletons(&renders, text);
    for stage in stages {
        assert!(
            text.contains(&format!("class {stage} : Stage {{")),
            "{text}"
        );
    }
    assert!(
        text.contains("    9      override fun run(ctx: Context): Context {"),
        "{text}"
    );
    let bodies = ["parse", "validate", "transform", "emit"]
        .iter()
        .filter(|verb| text.contains(&format!("{verb} step 3")))
        .count();
    assert_eq!(bodies, 1, "one stage body, the exemplar's: {text}");
    assert!(
        text.contains("skeleton (signatures only; read the file for a body)"),
        "{text}"
    );
    assert_eq!(on["index"]["files"], 8, "{on}");

    // The escape hatch: no skeletons, the stages in full, a larger answer.
    let off = explore(&root, &cache, false, QUERY);
    for stage in ["ParseStage", "ValidateStage", "TransformStage", "EmitStage"] {
        assert_eq!(
            render_of(&off, &format!("{stage}.kt")),
            Some("full"),
            "{off}"
        );
    }
    let size = |a: &Value| a["text"].as_str().unwrap().len();
    assert!(
        size(&on) * 10 < size(&off) * 6,
        "{} vs {}",
        size(&on),
        size(&off)
    );

    // The config key does the same as the variable.
    let config = dir.path().join("pipeline_config.toml");
    std::fs::write(&config, "schema_version = 3\n[explore]\nadaptive = false\n").unwrap();
    let out = Command::new(DEVBOY)
        .args(["explore", QUERY, "--format", "json", "--root"])
        .arg(&root)
        .arg("--pipeline-config")
        .arg(&config)
        .env("DEVBOY_CACHE_DIR", &cache)
        .env_remove("DEVBOY_ADAPTIVE_EXPLORE")
        .output()
        .expect("devboy runs");
    assert!(out.status.success(), "{out:?}");
    let configured: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        render_of(&configured, "EmitStage.kt"),
        Some("full"),
        "{configured}"
    );

    // Without a spine (a question naming one stage), nothing is a skeleton.
    let one = explore(&root, &cache, true, "What does the TransformStage do?");
    assert_eq!(render_of(&one, "TransformStage.kt"), Some("full"), "{one}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_index_is_kept_and_refreshed_and_the_tool_answers_over_mcp() {
    let dir = common::TempDir::new("explore-mcp");
    let (root, cache) = (dir.path().join("repo"), dir.path().join("cache"));
    fixture(&root);
    explore(&root, &cache, true, QUERY);
    let stored: Vec<_> = std::fs::read_dir(cache.join("explore")).unwrap().collect();
    assert_eq!(stored.len(), 1, "one index file per root");

    // A changed file is seen at once.
    write(
        &root,
        "src/demo/StageRegistry.kt",
        "package demo\n\nclass StageRegistry {\n    fun registerAll() {}\n}\n",
    );
    let after = explore(
        &root,
        &cache,
        true,
        "Where does the registry registerAll stages?",
    );
    assert!(
        after["text"]
            .as_str()
            .unwrap()
            .contains("fun registerAll()"),
        "{after}"
    );

    // Through `devboy mcp`: the built-in tool, with `root`.
    {
        let (mut client, _config) = mcp(dir.path(), &cache).await;
        client
            .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "devboy_explore", "arguments": {"query": QUERY, "root": root}}}))
            .await;
        let answer = client.recv_response(1).await;
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            text.contains("Flow: Pipeline.execute → StageChain.proceed"),
            "{answer}"
        );
        assert!(text.contains("class EmitStage : Stage {"), "{answer}");
        // The process keeps the index and graph between calls; a file
        // changed since is seen by the next call, in the same process.
        write(
            &root,
            "src/demo/StageRegistry.kt",
            "package demo\n\nclass StageRegistry {\n    fun registerAll() {}\n    fun reloadEverything() = registerAll()\n}\n",
        );
        client
            .send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "devboy_explore", "arguments": {
                    "query": "How does the registry reloadEverything?", "root": root}}}))
            .await;
        let changed = client.recv_response(3).await;
        assert!(
            changed["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .contains("fun reloadEverything() = registerAll()"),
            "{changed}"
        );
        client
            .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "devboy_explore", "arguments": {"root": root}}}))
            .await;
        let missing = client.recv_response(2).await;
        assert_eq!(missing["result"]["isError"], true, "{missing}");
        assert!(missing["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("`query` is missing"));
    }
}

/// A question that names the project itself ("How does
/// DemoKit …") matched the files named after the project (version
/// constants) whenever the checkout's folder was not named after it. The
/// project's name is read from its build files and git remote too.
#[test]
fn the_projects_own_name_does_not_pull_in_files_named_after_it() {
    let dir = common::TempDir::new("explore-name");
    let question = "How does DemoKit run a document through its StageChain?";
    let answer_in = |folder: &str, named_by: &[(&str, &str)]| {
        let root = dir.path().join(folder);
        fixture(&root);
        write(
            &root,
            "src/demo/DemoKit.kt",
            "package demo\n\n/** DemoKit's version. */\nobject DemoKit {\n    const val VERSION = \"1.2.3\"\n    const val USER_AGENT = \"demokit/$VERSION\"\n}\n",
        );
        for (file, text) in named_by {
            write(&root, file, text);
        }
        explore(&root, &dir.path().join("cache"), true, question)
    };
    // The control: with a folder named otherwise and no build file, the
    // name is an ordinary identifier and its file is shown.
    let plain = answer_in("checkout-1", &[]);
    assert!(render_of(&plain, "DemoKit.kt").is_some(), "{plain}");
    for (folder, named_by) in [
        (
            "checkout-2",
            &[(
                "settings.gradle.kts",
                "rootProject.name = \"demokit-parent\"\n",
            )][..],
        ),
        (
            "checkout-3",
            &[(
                ".git/config",
                "[remote \"origin\"]\n\turl = git@github.com:example/demo-kit.git\n",
            )][..],
        ),
        ("demokit", &[][..]),
    ] {
        let answer = answer_in(folder, named_by);
        assert_eq!(render_of(&answer, "DemoKit.kt"), None, "{folder}: {answer}");
        assert!(
            render_of(&answer, "StageChain.kt").is_some(),
            "{folder}: {answer}"
        );
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    common::git_as(dir, "Eval", None, args)
}

/// `devboy eval explore` on a dataset of two rows over two repositories
/// (one a working tree, one bare in a `repo/` folder), each tree exported
/// at its base commit — the registry exists only at the first commit.
#[test]
fn eval_explore_reports_gold_file_recall_per_repository() {
    let dir = common::TempDir::new("explore-eval");
    let repos = dir.path().join("repos");
    let work = repos.join("demo+pipeline");
    fixture(&work);
    git(&work, &["init", "-q"]);
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "pipeline"]);
    let base = git(&work, &["rev-parse", "HEAD"]);
    std::fs::remove_file(work.join("src/demo/StageRegistry.kt")).unwrap();
    git(&work, &["commit", "-q", "-am", "no registry"]);
    std::fs::create_dir_all(repos.join("demo+bare")).unwrap();
    git(
        &repos,
        &["clone", "-q", "--bare", "demo+pipeline", "demo+bare/repo"],
    );
    let rows = [
        json!({"instance_id": "demo__pipeline-1", "repo": "demo/pipeline", "base_commit": base,
               "problem_statement": "StageRegistry.pipeline builds a Pipeline whose StageChain skips the last stage",
               "gold_files": ["src/demo/StageRegistry.kt", "src/demo/StageChain.kt"]}),
        json!({"instance_id": "demo__bare-1", "repo": "demo/bare", "base_commit": "HEAD",
               "problem_statement": "The EmitStage does not emit anything",
               "gold_files": ["src/demo/stages/EmitStage.kt", "src/demo/Missing.kt"]}),
    ];
    let dataset = dir.path().join("dataset.jsonl");
    std::fs::write(
        &dataset,
        rows.iter().map(|r| format!("{r}\n")).collect::<String>(),
    )
    .unwrap();
    let args = ["eval", "explore", path(&dataset), "--repos", path(&repos)];
    let out = devboy(&[&args[..], &["--format", "json"]].concat(), None);
    let report = json_of(&out);
    assert_eq!(report["overall"]["instances"], 2, "{report}");
    assert_eq!(
        report["repos"]["demo/pipeline"]["gold_file_recall"], 1.0,
        "{report}"
    );
    assert_eq!(
        report["repos"]["demo/bare"]["gold_file_recall"], 0.5,
        "{report}"
    );
    assert_eq!(report["overall"]["gold_file_recall"], 0.75, "{report}");
    assert!(
        report["overall"]["avg_tokens"].as_f64().unwrap() > 50.0,
        "{report}"
    );
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(
        progress.contains("[2/2] demo__bare-1 recall 0.50"),
        "{progress}"
    );

    // Two datasets in one run: each a split named by its file, reported on
    // its own and side by side; the top level still holds all rows.
    let (tune, validate) = (
        dir.path().join("tune.jsonl"),
        dir.path().join("validate.jsonl"),
    );
    std::fs::write(&tune, format!("{}\n", rows[0])).unwrap();
    std::fs::write(&validate, format!("{}\n", rows[1])).unwrap();
    let both = [
        "eval",
        "explore",
        path(&tune),
        path(&validate),
        "--repos",
        path(&repos),
    ];
    let split = json_of(&devboy(&[&both[..], &["--format", "json"]].concat(), None));
    assert_eq!(
        split["splits"]["tune"]["overall"]["gold_file_recall"], 1.0,
        "{split}"
    );
    assert_eq!(
        split["splits"]["validate"]["overall"]["gold_file_recall"], 0.5,
        "{split}"
    );
    assert_eq!(
        split["splits"]["validate"]["repos"]["demo/bare"]["instances"], 1,
        "{split}"
    );
    assert_eq!(split["overall"]["gold_file_recall"], 0.75, "{split}");
    assert_eq!(split["instances"][1]["split"], "validate", "{split}");
    let text = devboy(&both, None);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("devboy eval explore, tune: 1 instances"),
        "{text}"
    );
    let side = text.split("side by side:").nth(1).unwrap_or_default();
    assert!(
        side.lines()
            .any(|l| l.starts_with("tune ") && l.contains("1.000"))
            && side
                .lines()
                .any(|l| l.starts_with("validate ") && l.contains("0.500")),
        "{text}"
    );

    // A row whose repository is missing fails alone, named.
    std::fs::write(
        &dataset,
        format!("{}\n{{\"instance_id\": \"x\", \"repo\": \"no/where\", \"base_commit\": \"HEAD\", \"problem_statement\": \"q\", \"gold_files\": []}}\n", rows[0]),
    )
    .unwrap();
    let out = devboy(&args, None);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no git repository for no/where"),
        "{out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("demo/pipeline"),
        "{out:?}"
    );
}

/// Families with no supertype (item 5 of the explore issue): handler
/// functions gathered in a registry literal, in files of their own, off
/// the flow. One is kept whole as the example, the others are skeletons.
#[test]
fn a_registry_of_handler_functions_is_a_family() {
    let dir = common::TempDir::new("explore-registry");
    let (root, cache) = (dir.path().join("repo"), dir.path().join("cache"));
    write(
        &root,
        "app/server.py",
        "from app.registry import HANDLERS\n\n\nclass Server:\n    \"\"\"Serves requests.\"\"\"\n\n    def serve(self, request):\n        return self.dispatch(request)\n\n    def dispatch(self, request):\n        handler = HANDLERS[request.kind]\n        return handler(request)\n",
    );
    let mut registry = String::from("HANDLERS = {\n");
    for (n, kind) in ["json", "html", "text", "csv"].iter().enumerate() {
        let body: String = (0..(12 + n * 4))
            .map(|i| format!("    out.append(\"{kind} {i}\")\n"))
            .collect();
        write(
            &root,
            &format!("app/handlers/{kind}_out.py"),
            &format!("def render_{kind}(request):\n    \"\"\"Renders {kind}.\"\"\"\n    out = []\n{body}    return out\n"),
        );
        registry.push_str(&format!("    \"{kind}\": render_{kind},\n"));
    }
    registry.push_str("}\n");
    write(&root, "app/registry.py", &registry);
    let answer = explore(
        &root,
        &cache,
        true,
        "How does the Server serve and dispatch a request to the render handlers?",
    );
    let text = answer["text"].as_str().unwrap();
    assert!(
        text.contains("Flow: Server.serve → Server.dispatch"),
        "{text}"
    );
    let renders: Vec<&str> = ["json", "html", "text", "csv"]
        .iter()
        .filter_map(|k| render_of(&answer, &format!("{k}_out.py")))
        .collect();
    assert_eq!(renders.len(), 4, "{text}");
    one_exemplar_three_skeletons(&renders, text);
    // The example is the shortest: json's.
    assert_eq!(render_of(&answer, "json_out.py"), Some("full"), "{text}");
}

/// `devboy find-files` (offline: no model) on the fixture, through the
/// command and the built-in tool; `devboy eval find-files` reports the
/// ranking metrics per repository.
#[tokio::test(flavor = "multi_thread")]
async fn find_files_ranks_the_files_an_issue_is_about() {
    let dir = common::TempDir::new("find-files");
    let (root, cache) = (dir.path().join("repo"), dir.path().join("cache"));
    fixture(&root);
    let issue = "StageChain.proceed skips the last stage when the pipeline has an EmitStage";
    let args = [
        "find-files",
        issue,
        "--k",
        "3",
        "--format",
        "json",
        "--root",
        path(&root),
    ];
    let found = json_of(&devboy(&args, Some(&cache)));
    let paths: Vec<&str> = found["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert_eq!(paths.len(), 3, "{found}");
    assert_eq!(paths[0], "src/demo/StageChain.kt", "{found}");
    assert!(paths.contains(&"src/demo/stages/EmitStage.kt"), "{found}");
    assert_eq!(found["strategy"], "offline");
    assert_eq!(found["llm"]["calls"], 0);

    // LLM strategies say what they need.
    let args = [
        "find-files",
        issue,
        "--strategy",
        "block",
        "--root",
        path(&root),
    ];
    let out = devboy(&args, Some(&cache));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("navigates the tree with a model, and none is configured"),
        "{out:?}"
    );

    // The tool.
    let (mut client, _config) = mcp(dir.path(), &cache).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "devboy_find_files", "arguments": {"query": issue, "root": root, "k": 2}}}))
        .await;
    let answer = client.recv_response(1).await;
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("1. src/demo/StageChain.kt\n"), "{answer}");
    assert!(!text.contains("3. "), "k = 2: {answer}");

    // The evaluation, on the fixture as a repository.
    let repos = dir.path().join("repos");
    let work = repos.join("demo+pipeline");
    fixture(&work);
    git(&work, &["init", "-q"]);
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "pipeline"]);
    let dataset = dir.path().join("dataset.jsonl");
    std::fs::write(
        &dataset,
        format!(
            "{}\n",
            json!({"instance_id": "demo__pipeline-2", "repo": "demo/pipeline", "base_commit": "HEAD",
                   "problem_statement": issue,
                   "gold_files": ["src/demo/StageChain.kt", "src/demo/stages/EmitStage.kt"]})
        ),
    )
    .unwrap();
    let args = [
        "eval",
        "find-files",
        path(&dataset),
        "--repos",
        path(&repos),
        "--format",
        "json",
    ];
    let report = json_of(&devboy(&args, None));
    let overall = &report["overall"];
    assert_eq!(overall["instances"], 1, "{report}");
    assert_eq!(overall["recall_at_10"], 1.0, "{report}");
    assert_eq!(overall["mrr"], 1.0, "{report}");
    assert!(
        overall["recall_at_gold"].as_f64().unwrap() >= 0.5,
        "{report}"
    );
    assert_eq!(overall["llm_calls"], 0.0, "{report}");
}

/// Calls `tool` with `arguments` as request `id` and returns its result,
/// answering devboy's `roots/list` requests on the way with `roots` (as
/// `file://` URIs); also how many it asked.
async fn call_answering_roots(
    client: &mut common::RawClient,
    id: i64,
    tool: &str,
    arguments: Value,
    roots: &[&Path],
) -> (Value, usize) {
    client
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}))
        .await;
    let mut asked = 0;
    loop {
        let message = client.recv().await;
        if message["method"] == "roots/list" {
            asked += 1;
            let listed: Vec<Value> = roots
                .iter()
                .map(|r| json!({"uri": format!("file://{}", r.display()), "name": "declared"}))
                .collect();
            client
                .send(json!({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": listed}}))
                .await;
        } else if message["id"] == json!(id) {
            return (message["result"].clone(), asked);
        }
    }
}

fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// `root: "/"` used to index the whole disk and answer
/// with source from anywhere. A root outside the project devboy serves
/// (after `..` and symlinks) is refused before anything is read, saying
/// how to allow it; a root the client declares (`roots/list`) or one of
/// `[explore] allowed_roots` is allowed.
#[tokio::test(flavor = "multi_thread")]
async fn a_root_outside_the_project_is_refused_unless_the_client_or_the_config_allows_it() {
    let dir = common::TempDir::new("explore-roots");
    let (project, outside, cache) = (
        dir.path().join("project"),
        dir.path().join("outside"),
        dir.path().join("cache"),
    );
    fixture(&project);
    // Planted beside the project: never to be read without leave.
    write(
        &outside,
        "src/Planted.kt",
        "package planted\n\n/** Planted outside the project. */\nclass PlantedSecret {\n    fun leak(): String = \"CANARY-7f3a\"\n}\n",
    );
    std::os::unix::fs::symlink(&outside, project.join("link")).unwrap();
    let query = json!("Where is PlantedSecret.leak?");

    // devboy serving the project, with no roots declared or configured.
    let (mut client, _config) = mcp(&project, &cache).await;
    let dotdot = project.join("..").join("outside");
    let refused: [&str; 5] = [path(&outside), "/", "../outside", "link", path(&dotdot)];
    let mut id = 0;
    for root in refused {
        for tool in ["devboy_explore", "devboy_find_files"] {
            id += 1;
            let args = json!({"query": query, "root": root});
            let (result, asked) = call_answering_roots(&mut client, id, tool, args, &[]).await;
            let text = text_of(&result);
            assert_eq!(result["isError"], true, "{tool} {root}: {result}");
            assert!(
                text.contains("is outside the directories devboy may read")
                    && text.contains("`allowed_roots` under `[explore]`")
                    && text.contains("the client declares none"),
                "{tool} {root}: {text}"
            );
            assert!(!text.contains("CANARY"), "{text}");
            assert_eq!(
                asked, 0,
                "a client without the roots capability is not asked"
            );
        }
    }
    assert!(
        !cache.join("explore").exists(),
        "nothing was indexed for a refused root"
    );
    // Inside the project, relative or absolute: answered.
    for root in ["src", path(&project.join("src/demo"))] {
        id += 1;
        let args = json!({"query": QUERY, "root": root});
        let (result, _) = call_answering_roots(&mut client, id, "devboy_explore", args, &[]).await;
        assert_eq!(result["isError"], false, "{root}: {result}");
        assert!(text_of(&result).contains("class StageChain"), "{result}");
    }
    client.stop().await;

    // `[explore] allowed_roots` in pipeline_config.toml.
    let config = common::TempDir::new("explore-roots-config");
    std::fs::write(
        config.path().join("pipeline_config.toml"),
        format!(
            "schema_version = 3\n[explore]\nallowed_roots = [{:?}]\n",
            path(&outside)
        ),
    )
    .unwrap();
    let mut client = common::RawClient::start_command_in(
        &["mcp"],
        &[
            ("DEVBOY_CONFIG_DIR", path(config.path())),
            ("DEVBOY_CACHE_DIR", path(&cache)),
        ],
        Some(&project),
    )
    .await;
    let args = json!({"query": query, "root": outside});
    let (result, _) = call_answering_roots(&mut client, 1, "devboy_explore", args, &[]).await;
    assert_eq!(result["isError"], false, "{result}");
    assert!(text_of(&result).contains("class PlantedSecret"), "{result}");
    // Its neighbour is not.
    let args = json!({"query": query, "root": dir.path()});
    let (result, _) = call_answering_roots(&mut client, 2, "devboy_explore", args, &[]).await;
    assert_eq!(result["isError"], true, "{result}");
    client.stop().await;

    // A client that declares roots: asked, and its roots are allowed.
    let empty = common::TempDir::new("explore-roots-none");
    let mut client = common::RawClient::start_declaring(
        &["mcp"],
        &[
            ("DEVBOY_CONFIG_DIR", path(empty.path())),
            ("DEVBOY_CACHE_DIR", path(&cache)),
        ],
        Some(&project),
        json!({"roots": {"listChanged": true}}),
    )
    .await;
    let args = json!({"query": "PlantedSecret leak", "root": outside.join("src")});
    let (result, asked) =
        call_answering_roots(&mut client, 1, "devboy_find_files", args, &[&outside]).await;
    assert_eq!(asked, 1, "{result}");
    assert_eq!(result["isError"], false, "{result}");
    assert!(text_of(&result).contains("1. Planted.kt"), "{result}");
    let args = json!({"query": query, "root": "/"});
    let (result, asked) =
        call_answering_roots(&mut client, 2, "devboy_explore", args, &[&outside]).await;
    assert_eq!(
        (result["isError"].clone(), asked),
        (json!(true), 1),
        "{result}"
    );
    assert!(text_of(&result).contains(path(&outside)), "{result}");
    // Inside the project the client is not asked.
    let args = json!({"query": QUERY});
    let (result, asked) =
        call_answering_roots(&mut client, 3, "devboy_explore", args, &[&outside]).await;
    assert_eq!(
        (result["isError"].clone(), asked),
        (json!(false), 0),
        "{result}"
    );
    client.stop().await;
}

/// Built-in answers carried an id line on every call
/// (find_files −5.1% in `tune analyze`): they went through the seam as an
/// upstream's results, whose repeat rate starts from a prior of one in
/// six. A query's answer is not expected to come again: it gets an id only
/// once its tool's answers repeat, and then a repeat is a reference.
#[tokio::test(flavor = "multi_thread")]
async fn a_built_in_answer_gets_an_id_only_once_it_repeats() {
    let dir = common::TempDir::new("explore-ids");
    let (root, cache, config) = (
        dir.path().join("repo"),
        dir.path().join("cache"),
        dir.path().join("config"),
    );
    fixture(&root);
    std::fs::create_dir_all(&config).unwrap();
    // Past the deadline a result goes out unprocessed, which would hide
    // the decision on a busy machine.
    std::fs::write(
        config.join("pipeline_config.toml"),
        "schema_version = 3\n[encoding]\ndeadline_ms = 120000\n",
    )
    .unwrap();
    let mut client = common::RawClient::start_command_in(
        &["mcp"],
        &[
            ("DEVBOY_CONFIG_DIR", path(&config)),
            ("DEVBOY_CACHE_DIR", path(&cache)),
        ],
        Some(&root),
    )
    .await;
    let mut answers = Vec::new();
    for id in 1..=3 {
        let args = json!({"query": QUERY});
        let (result, _) = call_answering_roots(&mut client, id, "devboy_explore", args, &[]).await;
        assert_eq!(result["isError"], false, "{result}");
        let blocks: Vec<String> = result["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["text"].as_str().unwrap_or_default().to_owned())
            .collect();
        answers.push(blocks);
    }
    let first = &answers[0];
    assert!(first[0].len() > 2000, "a large answer: {first:?}");
    assert_eq!(first.len(), 1, "no id line on a first answer: {first:?}");
    // The same answer again: now the tool has repeated, the id pays.
    assert_eq!(answers[1][0], first[0]);
    assert!(
        answers[1].len() == 2 && answers[1][1].starts_with("> [id: "),
        "{:?}",
        answers[1]
    );
    // And the third is a reference to it.
    let id = answers[1][1]
        .trim_start_matches("> [id: ")
        .trim_end_matches(']');
    assert!(
        answers[2].len() == 1 && answers[2][0].starts_with(&format!("> [ref: {id}")),
        "{:?}",
        answers[2]
    );
    client.stop().await;
}
