//! `devboy eval code-mode`: multi-step read tasks on a real repository,
//! through real filesystem, git and memory servers, three ways:
//!
//! - **direct**: every result to the model, as the client shows it (a
//!   `devboy mcp --pipeline passthrough`, which passes results byte for
//!   byte: `tests/real_peers.rs`);
//! - **devboy per result**: the same calls through devboy's default
//!   pipeline (one session for the whole set, as an agent's would be);
//! - **code mode**: one `devboy_run` script per task.
//!
//! Model-visible tokens (o200k) are what the model writes and reads: for
//! the first two, each call's arguments and its result as delivered; for
//! code mode, the script and its answer as delivered. Each task computes
//! its answer twice, from the direct results in Rust (what the model would
//! work out reading them) and in its script, and the two must be equal.
//!
//! The tasks are written for this repository's tree (devboy's own
//! checkout); half are the tuning set, half a validation set kept apart.
//! The servers come from a devboy.toml: the one whose tools end in
//! `read_text_file` is the file system (it must be allowed the
//! repository), `git_log` git, `read_graph` memory (its graph is seeded
//! with a fixed team before the tasks).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use devboy_pipeline::Tokenizer;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Which tasks to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TaskSet {
    /// The tuning set.
    Tuning,
    /// The validation set, kept apart from tuning.
    Validation,
    /// Both.
    All,
}

/// The repository and the servers' prefixes.
struct Env {
    repo: String,
    fs: String,
    git: String,
    memory: String,
}

impl Env {
    fn path(&self, relative: &str) -> String {
        format!("{}/{relative}", self.repo)
    }

    fn relative<'a>(&self, path: &'a str) -> &'a str {
        path.strip_prefix(&self.repo)
            .map_or(path, |p| p.trim_start_matches('/'))
    }
}

/// A line-level MCP client of one `devboy mcp` child, announcing itself
/// as Claude Code (so devboy shows and counts results as for it).
struct Session {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: i64,
    home: PathBuf,
}

impl Session {
    async fn start(config: &Path, passthrough: bool) -> anyhow::Result<Self> {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let home =
            std::env::temp_dir().join(format!("devboy-eval-code-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&home)?;
        let exe = std::env::current_exe()?;
        let mut command = tokio::process::Command::new(exe);
        command
            .arg("mcp")
            .arg("--config")
            .arg(config)
            .args(["--list-grace-ms", "30000"]);
        if passthrough {
            command.args(["--pipeline", "passthrough"]);
        }
        // Its own config, cache and telemetry: the user's never apply.
        command
            .env("DEVBOY_CONFIG_DIR", home.join("config"))
            .env("DEVBOY_CACHE_DIR", home.join("cache"))
            .env("DEVBOY_TELEMETRY_DIR", home.join("telemetry"))
            .env("RUST_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().context("start devboy mcp")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let mut session = Self {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            next_id: 1,
            home,
        };
        session
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "claude-code", "version": "2.1.0"}}),
            )
            .await?;
        session
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(session)
    }

    async fn send(&mut self, message: Value) -> anyhow::Result<()> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(120), self.lines.next_line())
                .await
                .map_err(|_| anyhow!("{method}: no answer within 120 s"))??
                .ok_or_else(|| anyhow!("devboy closed its stdout"))?;
            let mut message: Value = serde_json::from_str(&line)?;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                if let Some(error) = message.get("error") {
                    bail!("{method}: {error}");
                }
                return Ok(message["result"].take());
            }
        }
    }

    async fn tools(&mut self) -> anyhow::Result<Vec<Value>> {
        let listed = self.request("tools/list", json!({})).await?;
        Ok(listed["tools"].as_array().cloned().unwrap_or_default())
    }

    async fn call(&mut self, name: &str, arguments: &Value) -> anyhow::Result<Value> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    async fn stop(mut self) {
        let _ = self.stdin.shutdown().await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// What the client shows the model of a result: its `structuredContent`
/// as JSON (Claude Code shows that instead of the text), else its text.
fn shown(result: &Value) -> String {
    if let Some(structured) = result.get("structuredContent").filter(|s| !s.is_null()) {
        return structured.to_string();
    }
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a script gets of a result: `structuredContent`, else the text
/// parsed as JSON, else the text.
fn value_of(result: &Value) -> Value {
    if let Some(structured) = result.get("structuredContent").filter(|s| !s.is_null()) {
        return structured.clone();
    }
    let text = shown(result);
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// The direct way: calls through the passthrough session, each recorded
/// (to replay through the pipeline) and counted.
struct Direct<'s> {
    session: &'s mut Session,
    tokenizer: Tokenizer,
    calls: Vec<(String, Value)>,
    tokens: u64,
}

impl Direct<'_> {
    async fn call(&mut self, name: &str, arguments: Value) -> anyhow::Result<Value> {
        let result = self.session.call(name, &arguments).await?;
        if result["isError"] == json!(true) {
            bail!("{name} {arguments}: {}", shown(&result));
        }
        self.tokens += self.tokenizer.count(&arguments.to_string()) as u64
            + self.tokenizer.count(&shown(&result)) as u64;
        self.calls.push((name.to_owned(), arguments));
        Ok(value_of(&result))
    }
}

type Answering<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<Value>> + 'a>>;

/// One task: what it asks, the direct calls and answer, and the script.
struct Task {
    name: &'static str,
    set: TaskSet,
    question: &'static str,
    direct: for<'a> fn(&'a mut Direct<'_>, &'a Env) -> Answering<'a>,
    script: fn(&Env) -> String,
}

fn text_field(value: &Value) -> String {
    value["content"]
        .as_str()
        .map_or_else(|| value.as_str().unwrap_or("").to_owned(), str::to_owned)
}

/// The files `search_files` found, as paths.
fn found(value: &Value) -> Vec<String> {
    let text = text_field(value);
    text.lines()
        .filter(|l| !l.is_empty() && *l != "No matches found")
        .map(str::to_owned)
        .collect()
}

/// `[[key, n]]` sorted by `n` descending, then key, at most `top`.
fn ranked(counts: HashMap<String, u64>, top: usize) -> Value {
    let mut rows: Vec<(String, u64)> = counts.into_iter().filter(|(_, n)| *n > 0).collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    rows.truncate(top);
    json!(rows
        .into_iter()
        .map(|(k, n)| json!([k, n]))
        .collect::<Vec<_>>())
}

/// Per file under `dir` matching `pattern`: how many of its lines `count`
/// says, ranked.
async fn count_in_files(
    direct: &mut Direct<'_>,
    env: &Env,
    dir: &str,
    count: fn(&str) -> u64,
    top: usize,
) -> anyhow::Result<Value> {
    let search = format!("{}__search_files", env.fs);
    let read = format!("{}__read_text_file", env.fs);
    let files = found(
        &direct
            .call(
                &search,
                json!({"path": env.path(dir), "pattern": "**/*.rs"}),
            )
            .await?,
    );
    let mut counts = HashMap::new();
    for file in files {
        let content = text_field(&direct.call(&read, json!({"path": file})).await?);
        counts.insert(env.relative(&file).to_owned(), count(&content));
    }
    Ok(ranked(counts, top))
}

const TASKS: &[Task] = &[
    Task {
        name: "longest_files",
        set: TaskSet::Tuning,
        question: "Which three .rs files under crates/devboy-mcp/src have the most lines?",
        direct: |d, env| {
            Box::pin(count_in_files(
                d,
                env,
                "crates/devboy-mcp/src",
                |text| text.split('\n').count() as u64,
                3,
            ))
        },
        script: |env| {
            format!(
                "{files}\
                 const rows = await Promise.all(files.map(async f =>\n\
                   [f.slice({cut}), (await tools.{fs}.read_text_file({{path: f}})).content.split('\\n').length]));\n\
                 rows.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));\n\
                 return rows.slice(0, 3);",
                fs = env.fs,
                files = found_files(env, "crates/devboy-mcp/src", "**/*.rs"),
                cut = env.repo.len() + 1,
            )
        },
    },
    Task {
        name: "commits_per_day",
        set: TaskSet::Tuning,
        question: "On which days were the last 60 commits made, and how many each day?",
        direct: |d, env| {
            Box::pin(async move {
                let log = d
                    .call(
                        &format!("{}__git_log", env.git),
                        json!({"repo_path": env.repo, "max_count": 60}),
                    )
                    .await?;
                let mut days: BTreeMap<String, u64> = BTreeMap::new();
                for line in text_field(&log).lines() {
                    if let Some(date) = line.strip_prefix("Date: ") {
                        *days.entry(date.chars().take(10).collect()).or_default() += 1;
                    }
                }
                Ok(json!(days
                    .into_iter()
                    .rev()
                    .map(|(d, n)| json!([d, n]))
                    .collect::<Vec<_>>()))
            })
        },
        script: |env| {
            format!(
                "const log = await tools.{git}.git_log({{repo_path: {repo}, max_count: 60}});\n\
                 const days = {{}};\n\
                 for (const line of log.split('\\n')) if (line.startsWith('Date: ')) {{\n\
                   const d = line.slice(6, 16); days[d] = (days[d] || 0) + 1; }}\n\
                 return Object.keys(days).sort().reverse().map(d => [d, days[d]]);",
                git = env.git,
                repo = js(&env.repo),
            )
        },
    },
    Task {
        name: "unwrap_calls",
        set: TaskSet::Tuning,
        question: "Which five files under crates/devboy-core/src call .unwrap() on the most lines?",
        direct: |d, env| {
            Box::pin(count_in_files(
                d,
                env,
                "crates/devboy-core/src",
                |text| text.lines().filter(|l| l.contains(".unwrap()")).count() as u64,
                5,
            ))
        },
        script: |env| {
            format!(
                "{files}\
                 const rows = [];\n\
                 for (const f of files) {{\n\
                   const text = (await tools.{fs}.read_text_file({{path: f}})).content;\n\
                   const n = text.split('\\n').filter(l => l.includes('.unwrap()')).length;\n\
                   if (n > 0) rows.push([f.slice({cut}), n]);\n\
                 }}\n\
                 rows.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));\n\
                 return rows.slice(0, 5);",
                fs = env.fs,
                files = found_files(env, "crates/devboy-core/src", "**/*.rs"),
                cut = env.repo.len() + 1,
            )
        },
    },
    Task {
        name: "project_members",
        set: TaskSet::Tuning,
        question: "Who works on project atlas, and how many observations does each have?",
        direct: |d, env| {
            Box::pin(async move {
                let graph = d
                    .call(&format!("{}__read_graph", env.memory), json!({}))
                    .await?;
                let members: Vec<&str> = graph["relations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r["to"] == "atlas" && r["relationType"] == "works_on")
                    .filter_map(|r| r["from"].as_str())
                    .collect();
                let mut rows: Vec<(String, usize)> = graph["entities"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|e| e["name"].as_str().is_some_and(|n| members.contains(&n)))
                    .map(|e| {
                        (
                            e["name"].as_str().unwrap_or("").to_owned(),
                            e["observations"].as_array().map_or(0, Vec::len),
                        )
                    })
                    .collect();
                rows.sort();
                Ok(json!(rows
                    .into_iter()
                    .map(|(n, k)| json!([n, k]))
                    .collect::<Vec<_>>()))
            })
        },
        script: |env| {
            format!(
                "const g = await tools.{memory}.read_graph({{}});\n\
                 const members = new Set(g.relations.filter(r => r.to === 'atlas' && r.relationType === 'works_on').map(r => r.from));\n\
                 return g.entities.filter(e => members.has(e.name)).map(e => [e.name, e.observations.length])\n\
                   .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));",
                memory = env.memory,
            )
        },
    },
    Task {
        name: "serde_json_users",
        set: TaskSet::Validation,
        question: "Which crates under crates/ list serde_json in their Cargo.toml?",
        direct: |d, env| {
            Box::pin(async move {
                let files = found(
                    &d.call(
                        &format!("{}__search_files", env.fs),
                        json!({"path": env.path("crates"), "pattern": "*/Cargo.toml"}),
                    )
                    .await?,
                );
                let mut crates = Vec::new();
                for file in files {
                    let text = text_field(
                        &d.call(
                            &format!("{}__read_text_file", env.fs),
                            json!({"path": file}),
                        )
                        .await?,
                    );
                    if text
                        .lines()
                        .any(|l| l.trim_start().starts_with("serde_json"))
                    {
                        let relative = env.relative(&file);
                        crates.push(relative.split('/').nth(1).unwrap_or(relative).to_owned());
                    }
                }
                crates.sort();
                Ok(json!(crates))
            })
        },
        script: |env| {
            format!(
                "{files}\
                 const texts = await Promise.all(files.map(f => tools.{fs}.read_text_file({{path: f}})));\n\
                 return files.filter((f, i) => texts[i].content.split('\\n').some(l => l.trimStart().startsWith('serde_json')))\n\
                   .map(f => f.slice({cut}).split('/')[1]).sort();",
                fs = env.fs,
                files = found_files(env, "crates", "*/Cargo.toml"),
                cut = env.repo.len() + 1,
            )
        },
    },
    Task {
        name: "hot_files",
        set: TaskSet::Validation,
        question: "Which five files changed in the most of the last 12 commits?",
        direct: |d, env| {
            Box::pin(async move {
                let log = d
                    .call(
                        &format!("{}__git_log", env.git),
                        json!({"repo_path": env.repo, "max_count": 12}),
                    )
                    .await?;
                let shas: Vec<String> = text_field(&log)
                    .lines()
                    .filter_map(|l| l.strip_prefix("Commit: "))
                    .map(|s| s.trim_matches('\'').to_owned())
                    .collect();
                let mut counts: HashMap<String, u64> = HashMap::new();
                for sha in shas {
                    let show = text_field(
                        &d.call(
                            &format!("{}__git_show", env.git),
                            json!({"repo_path": env.repo, "revision": sha}),
                        )
                        .await?,
                    );
                    let mut files: Vec<&str> = Vec::new();
                    let mut old = None;
                    for line in show.lines() {
                        if let Some(a) = line.strip_prefix("--- a/") {
                            old = Some(a);
                        } else if let Some(b) = line.strip_prefix("+++ b/") {
                            files.push(b);
                        } else if line == "+++ /dev/null" {
                            files.extend(old);
                        }
                    }
                    files.sort_unstable();
                    files.dedup();
                    for file in files {
                        *counts.entry(file.to_owned()).or_default() += 1;
                    }
                }
                Ok(ranked(counts, 5))
            })
        },
        script: |env| {
            format!(
                "const log = await tools.{git}.git_log({{repo_path: {repo}, max_count: 12}});\n\
                 const shas = log.split('\\n').filter(l => l.startsWith('Commit: ')).map(l => l.slice(8).replace(/'/g, ''));\n\
                 const counts = {{}};\n\
                 for (const sha of shas) {{\n\
                   const show = await tools.{git}.git_show({{repo_path: {repo}, revision: sha}});\n\
                   const files = new Set(); let old = null;\n\
                   for (const line of show.split('\\n')) {{\n\
                     if (line.startsWith('--- a/')) old = line.slice(6);\n\
                     else if (line.startsWith('+++ b/')) files.add(line.slice(6));\n\
                     else if (line === '+++ /dev/null' && old !== null) files.add(old);\n\
                   }}\n\
                   for (const f of files) counts[f] = (counts[f] || 0) + 1;\n\
                 }}\n\
                 return Object.entries(counts).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 5);",
                git = env.git,
                repo = js(&env.repo),
            )
        },
    },
    Task {
        name: "pub_fns",
        set: TaskSet::Validation,
        question: "How many `pub fn` lines does each file under crates/devboy-telemetry/src have?",
        direct: |d, env| {
            Box::pin(count_in_files(
                d,
                env,
                "crates/devboy-telemetry/src",
                |text| text.lines().filter(|l| l.contains("pub fn ")).count() as u64,
                100,
            ))
        },
        script: |env| {
            format!(
                "{files}\
                 const rows = [];\n\
                 for (const f of files) {{\n\
                   const n = (await tools.{fs}.read_text_file({{path: f}})).content.split('\\n').filter(l => l.includes('pub fn ')).length;\n\
                   if (n > 0) rows.push([f.slice({cut}), n]);\n\
                 }}\n\
                 return rows.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 100);",
                fs = env.fs,
                files = found_files(env, "crates/devboy-telemetry/src", "**/*.rs"),
                cut = env.repo.len() + 1,
            )
        },
    },
    Task {
        name: "kubernetes_projects",
        set: TaskSet::Validation,
        question:
            "On which projects do people who know kubernetes work, and how many of them each?",
        direct: |d, env| {
            Box::pin(async move {
                let found = d
                    .call(
                        &format!("{}__search_nodes", env.memory),
                        json!({"query": "kubernetes"}),
                    )
                    .await?;
                let people: Vec<&str> = found["entities"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|e| e["entityType"] == "person")
                    .filter_map(|e| e["name"].as_str())
                    .collect();
                let graph = d
                    .call(&format!("{}__read_graph", env.memory), json!({}))
                    .await?;
                let mut counts: HashMap<String, u64> = HashMap::new();
                for relation in graph["relations"].as_array().into_iter().flatten() {
                    let from = relation["from"].as_str().unwrap_or("");
                    if relation["relationType"] == "works_on" && people.contains(&from) {
                        let to = relation["to"].as_str().unwrap_or("").to_owned();
                        *counts.entry(to).or_default() += 1;
                    }
                }
                Ok(ranked(counts, 100))
            })
        },
        script: |env| {
            format!(
                "const found = await tools.{memory}.search_nodes({{query: 'kubernetes'}});\n\
                 const people = new Set(found.entities.filter(e => e.entityType === 'person').map(e => e.name));\n\
                 const g = await tools.{memory}.read_graph({{}});\n\
                 const counts = {{}};\n\
                 for (const r of g.relations) if (r.relationType === 'works_on' && people.has(r.from)) counts[r.to] = (counts[r.to] || 0) + 1;\n\
                 return Object.entries(counts).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));",
                memory = env.memory,
            )
        },
    },
];

/// The first lines of a script that lists the files under `dir` matching
/// `pattern`, as `files`, the way the direct calls read them ([`found`]).
fn found_files(env: &Env, dir: &str, pattern: &str) -> String {
    format!(
        "const found = await tools.{fs}.search_files({{path: {dir}, pattern: {pattern}}});\n\
         const files = found.content.split('\\n').filter(f => f && f !== 'No matches found');\n",
        fs = env.fs,
        dir = js(&env.path(dir)),
        pattern = js(pattern),
    )
}

/// `text` as a JavaScript string literal.
fn js(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// The team the memory tasks read: 48 people, 8 projects, who works on
/// what and what they know, made the same way every time.
fn seed_graph() -> (Value, Value) {
    const PROJECTS: [&str; 8] = [
        "atlas", "borealis", "cinder", "delta", "ember", "fjord", "granite", "harbor",
    ];
    const SKILLS: [&str; 10] = [
        "rust",
        "go",
        "kubernetes",
        "python",
        "postgres",
        "react",
        "terraform",
        "kafka",
        "grpc",
        "observability",
    ];
    let mut entities: Vec<Value> = PROJECTS
        .iter()
        .map(|p| {
            json!({"name": p, "entityType": "project",
                "observations": [format!("{p} is a service of the platform group")]})
        })
        .collect();
    let mut relations = Vec::new();
    for i in 0..48usize {
        let name = format!("person-{i:02}");
        let skills: Vec<&str> = (0..1 + i % 4)
            .map(|k| SKILLS[(i * 7 + k * 3) % 10])
            .collect();
        let mut observations = vec![
            format!("{name} joined in {}", 2015 + i % 10),
            format!("{name} is based in office {}", i % 5),
        ];
        observations.extend(skills.iter().map(|s| format!("{name} knows {s} well")));
        entities.push(json!({"name": name, "entityType": "person", "observations": observations}));
        for k in 0..1 + i % 3 {
            relations.push(
                json!({"from": name, "to": PROJECTS[(i + k * 5) % 8], "relationType": "works_on"}),
            );
        }
    }
    (
        json!({"entities": entities}),
        json!({"relations": relations}),
    )
}

/// One task's figures.
#[derive(Debug)]
struct Outcome {
    name: &'static str,
    set: TaskSet,
    calls: usize,
    direct: u64,
    per_result: u64,
    code: u64,
    same: bool,
    direct_answer: Value,
    code_answer: Value,
}

/// Runs the eval: prints the figures; an error when any answer differs.
pub fn eval_code_mode(
    config: &Path,
    repo: &Path,
    set: TaskSet,
    json_out: bool,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (outcomes, listing) = runtime.block_on(run(config, repo, set))?;
    let text = if json_out {
        let mut report = to_json(&outcomes);
        report["listing"] = json!({
            "functions": listing.functions,
            "api_tokens": listing.api_tokens,
            "upstream_tools": listing.upstream_tools,
            "definition_tokens": listing.definition_tokens,
        });
        format!("{report:#}\n")
    } else {
        let mut text = report(&outcomes, repo);
        text.push_str(&format!(
            "\napi(): {} functions in {} tokens; the {} upstream tools' definitions as listed: {} tokens\n",
            listing.functions, listing.api_tokens, listing.upstream_tools, listing.definition_tokens
        ));
        text
    };
    print!("{text}");
    let differ: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.same)
        .map(|o| o.name)
        .collect();
    if !differ.is_empty() {
        bail!("code mode answered differently on: {}", differ.join(", "));
    }
    Ok(())
}

/// What the model is told of the tools: `api()`'s signatures against the
/// upstream tools' definitions as listed.
#[derive(Debug)]
struct Listing {
    functions: usize,
    api_tokens: u64,
    upstream_tools: usize,
    definition_tokens: u64,
}

async fn run(config: &Path, repo: &Path, set: TaskSet) -> anyhow::Result<(Vec<Outcome>, Listing)> {
    let repo = std::fs::canonicalize(repo)
        .with_context(|| format!("the repository {}", repo.display()))?;
    let repo_text = repo.display().to_string();
    let tokenizer = Tokenizer::O200k;
    let mut direct = Session::start(config, true).await?;
    let tools = direct.tools().await?;
    let names: Vec<String> = tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    let prefix = |suffix: &str| -> anyhow::Result<String> {
        names
            .iter()
            .find_map(|n| n.strip_suffix(&format!("__{suffix}")))
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("no server of {} lists a `{suffix}` tool", config.display()))
    };
    let env = Env {
        repo: repo_text,
        fs: prefix("read_text_file")?,
        git: prefix("git_log")?,
        memory: prefix("read_graph")?,
    };
    let (entities, relations) = seed_graph();
    for (tool, arguments) in [
        ("create_entities", entities),
        ("create_relations", relations),
    ] {
        let seeded = direct
            .call(&format!("{}__{tool}", env.memory), &arguments)
            .await?;
        if seeded["isError"] == json!(true) {
            bail!("seeding the memory graph: {}", shown(&seeded));
        }
    }
    let api = shown(
        &direct
            .call("devboy_run", &json!({"code": "return api()"}))
            .await?,
    );
    let upstream: Vec<&Value> = tools
        .iter()
        .filter(|t| t["name"].as_str().is_some_and(|n| n.contains("__")))
        .collect();
    let listing = Listing {
        functions: api.lines().count().saturating_sub(1),
        api_tokens: tokenizer.count(&api) as u64,
        upstream_tools: upstream.len(),
        definition_tokens: tokenizer
            .count(&Value::from(upstream.into_iter().cloned().collect::<Vec<_>>()).to_string())
            as u64,
    };
    let mut per_result = Session::start(config, false).await?;
    let mut code = Session::start(config, false).await?;
    let mut outcomes = Vec::new();
    for task in TASKS.iter().filter(|t| set == TaskSet::All || t.set == set) {
        let mut way = Direct {
            session: &mut direct,
            tokenizer,
            calls: Vec::new(),
            tokens: 0,
        };
        let direct_answer = (task.direct)(&mut way, &env)
            .await
            .with_context(|| format!("task {} (direct)", task.name))?;
        let (calls, direct_tokens) = (way.calls, way.tokens);
        let mut per_result_tokens = 0;
        for (name, arguments) in &calls {
            let result = per_result.call(name, arguments).await?;
            per_result_tokens += tokenizer.count(&arguments.to_string()) as u64
                + tokenizer.count(&shown(&result)) as u64;
        }
        let script = (task.script)(&env);
        let arguments = json!({ "code": script });
        let delivered = code.call("devboy_run", &arguments).await?;
        if delivered["isError"] == json!(true) {
            bail!(
                "task {}: devboy_run failed: {}",
                task.name,
                shown(&delivered)
            );
        }
        let code_tokens = tokenizer.count(&arguments.to_string()) as u64
            + tokenizer.count(&shown(&delivered)) as u64;
        // The answer itself, unencoded, from the same script in the
        // passthrough session.
        let raw = direct.call("devboy_run", &arguments).await?;
        let code_answer = if raw["isError"] == json!(true) {
            json!({"error": shown(&raw)})
        } else {
            serde_json::from_str(&shown(&raw)).unwrap_or(Value::String(shown(&raw)))
        };
        outcomes.push(Outcome {
            name: task.name,
            set: task.set,
            calls: calls.len(),
            direct: direct_tokens,
            per_result: per_result_tokens,
            code: code_tokens,
            // What the model was shown must be that answer too, when it
            // went out as JSON (the pipeline may have encoded it).
            same: code_answer == direct_answer
                && serde_json::from_str::<Value>(&shown(&delivered))
                    .map_or(true, |shown| shown == code_answer),
            direct_answer,
            code_answer,
        });
        let _ = task.question;
    }
    direct.stop().await;
    per_result.stop().await;
    code.stop().await;
    Ok((outcomes, listing))
}

fn set_name(set: TaskSet) -> &'static str {
    match set {
        TaskSet::Tuning => "tuning",
        TaskSet::Validation => "validation",
        TaskSet::All => "all",
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn totals<'a>(outcomes: impl Iterator<Item = &'a Outcome>) -> (usize, u64, u64, u64, bool) {
    outcomes.fold((0, 0, 0, 0, true), |(c, d, p, k, s), o| {
        (
            c + o.calls,
            d + o.direct,
            p + o.per_result,
            k + o.code,
            s && o.same,
        )
    })
}

fn report(outcomes: &[Outcome], repo: &Path) -> String {
    let mut out = format!(
        "code mode on {} ({} tasks; o200k tokens the model writes and reads)\n\n",
        repo.display(),
        outcomes.len()
    );
    out.push_str(&format!(
        "{:<11} {:<20} {:>5} {:>9} {:>9} {:>7} {:>8} {:>8}  answers\n",
        "set", "task", "calls", "direct", "devboy", "code", "devboy×", "code×"
    ));
    let row = |set: &str, name: &str, (calls, d, p, k, same): (usize, u64, u64, u64, bool)| {
        format!(
            "{set:<11} {name:<20} {calls:>5} {d:>9} {p:>9} {k:>7} {:>8.3} {:>8.3}  {}\n",
            ratio(p, d),
            ratio(k, d),
            if same { "same" } else { "DIFFER" }
        )
    };
    for set in [TaskSet::Tuning, TaskSet::Validation] {
        let of_set: Vec<&Outcome> = outcomes.iter().filter(|o| o.set == set).collect();
        if of_set.is_empty() {
            continue;
        }
        for o in &of_set {
            out.push_str(&row(
                set_name(set),
                o.name,
                (o.calls, o.direct, o.per_result, o.code, o.same),
            ));
        }
        out.push_str(&row(set_name(set), "total", totals(of_set.into_iter())));
    }
    for o in outcomes.iter().filter(|o| !o.same) {
        out.push_str(&format!(
            "\n{}: direct {} but code mode {}\n",
            o.name, o.direct_answer, o.code_answer
        ));
    }
    out
}

fn to_json(outcomes: &[Outcome]) -> Value {
    let sets: Vec<Value> = [TaskSet::Tuning, TaskSet::Validation]
        .into_iter()
        .filter_map(|set| {
            let of_set: Vec<&Outcome> = outcomes.iter().filter(|o| o.set == set).collect();
            if of_set.is_empty() {
                return None;
            }
            let (calls, d, p, k, same) = totals(of_set.iter().copied());
            Some(json!({
                "set": set_name(set), "calls": calls, "direct_tokens": d, "devboy_tokens": p,
                "code_tokens": k, "devboy_ratio": ratio(p, d), "code_ratio": ratio(k, d),
                "answers_same": same,
                "tasks": of_set.iter().map(|o| json!({
                    "task": o.name, "calls": o.calls, "direct_tokens": o.direct,
                    "devboy_tokens": o.per_result, "code_tokens": o.code,
                    "code_ratio": ratio(o.code, o.direct), "answers_same": o.same,
                    "answer": o.direct_answer,
                })).collect::<Vec<_>>(),
            }))
        })
        .collect();
    json!({ "sets": sets })
}
