//! `devboy tune` end to end: the real binary on generated telemetry files,
//! and on the session logs a real Claude Code run wrote.
//!
//! Every run gets its own `DEVBOY_CONFIG_DIR` and `DEVBOY_TELEMETRY_DIR`
//! (temporary), so the user's files are never read or touched.

use std::path::PathBuf;
use std::process::{Command, Output};

use devboy_testkit::{peers, ClaudeCode, Script, ScriptedModel, Turn};
use devboy_tune::synthetic::{EndpointSpec, Workload};
use serde_json::json;

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");

/// A temporary config and telemetry directory, removed on drop.
struct Dirs {
    root: PathBuf,
    config: PathBuf,
    telemetry: PathBuf,
}

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Dirs {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "devboy-tune-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        let config = root.join("config");
        let telemetry = root.join("telemetry");
        std::fs::create_dir_all(&config).unwrap();
        Dirs {
            root,
            config,
            telemetry,
        }
    }

    fn pipeline_config(&self) -> PathBuf {
        self.config.join("pipeline_config.toml")
    }

    /// `devboy ARGS…` with the directories set.
    fn devboy(&self, args: &[&str]) -> Output {
        Command::new(DEVBOY)
            .args(args)
            .env("DEVBOY_CONFIG_DIR", &self.config)
            .env("DEVBOY_TELEMETRY_DIR", &self.telemetry)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("DEVBOY_TELEMETRY")
            .output()
            .unwrap()
    }
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "devboy failed: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A week of a small team's work: issue tables that repeat, code search
/// that never does, a polled CI status.
fn workload() -> Workload {
    let now = devboy_tune::now_ms();
    let spec = EndpointSpec::new;
    Workload {
        endpoints: vec![
            EndpointSpec {
                shape: "markdown_table",
                inner: vec!["url"],
                chars: 8000,
                dup_rate: 0.3,
                template: Some("md_tables_csv"),
                encoder_ratio: 0.45,
                weight: 3,
                ..spec("gh__list_issues")
            },
            EndpointSpec {
                inner: vec!["url", "hash"],
                chars: 3000,
                encoder_ratio: 0.2,
                weight: 2,
                ..spec("gh__search_code")
            },
            EndpointSpec {
                shape: "nested_object",
                inner: vec!["url", "log_line"],
                chars: 2500,
                polling: true,
                weight: 1,
                ..spec("ci__get_pipeline_status")
            },
            EndpointSpec {
                weight: 1,
                dup_rate: 0.2,
                ..spec("unnamed__tool")
            },
        ],
        sessions: 6,
        events_per_session: 300,
        compactions_per_session: 1,
        interval_ms: 2000,
        start_ms: now - 3 * 86_400_000,
        malformed_every: 100,
        seed: 42,
    }
}

/// Writes the workload's events and its names (without `unnamed__tool`).
fn write_telemetry(dirs: &Dirs, workload: &Workload) {
    workload.write(&dirs.telemetry.join("events")).unwrap();
    let names: serde_json::Map<String, serde_json::Value> = workload
        .endpoints
        .iter()
        .filter(|e| !e.name.starts_with("unnamed"))
        .map(|e| (e.hash(), json!(e.name)))
        .collect();
    std::fs::write(
        dirs.config
            .join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME),
        serde_json::Value::Object(names).to_string(),
    )
    .unwrap();
}

const HAND_EDITED: &str = r#"# My pipeline settings. Keep this comment.
schema_version = 2

[dedup]
ttl_secs = 1200          # shorter than the default, on purpose

[encoding]
budget_tokens = 20000

[endpoints."gh__list_*"]
encode = true            # I want these re-encoded

[tools."fs__write_*"]
side_effect = "mutating"
invalidates = ["fs__read_*"]
"#;

#[test]
fn analyze_writes_the_config_and_keeps_hand_edits() {
    let dirs = Dirs::new();
    let workload = workload();
    write_telemetry(&dirs, &workload);
    std::fs::write(dirs.pipeline_config(), HAND_EDITED).unwrap();

    let out = stdout(&dirs.devboy(&["tune", "analyze"]));
    // Read: 1800 events, malformed lines counted and skipped.
    assert!(
        out.contains("read 1,800 result events and 6 session summaries from 6 files"),
        "{out}"
    );
    assert!(out.contains("skipped: 18 malformed lines"), "{out}");
    // The table: names, figures, the baseline and tokenizer named, a total.
    for name in [
        "gh__list_issues",
        "gh__search_code",
        "ci__get_pipeline_status",
        "total",
    ] {
        assert!(out.contains(name), "{name} missing:\n{out}");
    }
    assert!(out.contains("dedup %") && out.contains("enc %") && out.contains("comb %"));
    assert!(
        out.contains("baseline `raw`") && out.contains("o200k_base"),
        "{out}"
    );
    assert!(out.contains("markdown_table"), "{out}");
    // Each change with its rule, reason and simulated effect.
    assert!(
        out.contains("kept    [endpoints.\"gh__search_code\"] dedup: true -> false  (D1)"),
        "{out}"
    );
    assert!(
        out.contains(
            "kept    [endpoints.\"ci__get_pipeline_status\"] near_ref: false -> true  (N1)"
        ),
        "{out}"
    );
    assert!(
        out.contains("why: ") && out.contains("simulated: saved "),
        "{out}"
    );
    // The hand-set TTL holds any TTL rule off; the unnamed endpoint is reported.
    assert!(out.contains("endpoints without a name"), "{out}");
    assert!(out.contains(&workload.endpoints[3].hash()), "{out}");
    let written = dirs.pipeline_config();
    assert!(
        out.contains(&format!("wrote {}", written.display())),
        "{out}"
    );

    let text = std::fs::read_to_string(&written).unwrap();
    for line in HAND_EDITED
        .lines()
        .filter(|l| !l.starts_with("schema_version"))
    {
        assert!(text.contains(line), "hand edit lost: {line:?}\n{text}");
    }
    // V1: typical_tokens for each named endpoint (a version 3 key, so the
    // version 2 file says 3 now), reported apart from the simulated changes.
    assert!(
        text.contains("\nschema_version = 3  # tune: was 2; "),
        "{text}"
    );
    for name in [
        "gh__list_issues",
        "gh__search_code",
        "ci__get_pipeline_status",
    ] {
        assert!(
            text.contains(&format!("[tools.\"{name}\"]\ntypical_tokens = ")),
            "{name}: {text}"
        );
    }
    assert!(
        out.contains("value-model priors (inputs of speculation; they change no token sent, so they are not simulated):\n  set     [tools.\""),
        "{out}"
    );
    assert!(out.contains("schema_version 2 -> 3, because"), "{out}");
    assert!(text.contains("dedup = false  # tune: D1"), "{text}");
    assert!(text.contains("near_ref = true  # tune: N1"), "{text}");
    assert!(!text.contains("unnamed"), "{text}");
    // devboy itself loads the written file.
    let check = Command::new(DEVBOY)
        .args(["encode", "--pipeline-config"])
        .arg(&written)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");

    // `tune show`: the written file, its version, the endpoints by name
    // with their effective settings.
    let show = stdout(&dirs.devboy(&["tune", "show"]));
    assert!(
        show.contains(&format!("pipeline config: {}", written.display())),
        "{show}"
    );
    assert!(show.contains("schema version: 3\n"), "{show}");
    assert!(
        show.contains("\"gh__list_issues\": typical_tokens = 2000 (tune)"),
        "{show}"
    );
    assert!(show.contains("ttl_secs          = 1200"), "{show}");
    assert!(
        show.contains("\"gh__search_code\": dedup = false (tune)"),
        "{show}"
    );
    assert!(show.contains("\"gh__list_*\": encode = true\n"), "{show}");
    let row = show
        .lines()
        .find(|l| l.trim_start().starts_with("gh__search_code "))
        .unwrap_or_else(|| panic!("no gh__search_code row:\n{show}"));
    assert!(row.contains(" off "), "{row}");
    assert!(show.contains("endpoints have no name"), "{show}");

    // Again: nothing more to do, the file stays as it is.
    let again = stdout(&dirs.devboy(&["tune", "analyze"]));
    assert!(again.contains("unchanged"), "{again}");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), text);
}

#[test]
fn analyze_options_dry_run_input_output_and_days() {
    let dirs = Dirs::new();
    let workload = workload();
    write_telemetry(&dirs, &workload);
    let elsewhere = dirs.telemetry.join("copy");
    std::fs::create_dir_all(&elsewhere).unwrap();
    for entry in std::fs::read_dir(dirs.telemetry.join("events")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, elsewhere.join(path.file_name().unwrap())).unwrap();
    }
    let output = dirs.config.join("other.toml");
    let out = stdout(&dirs.devboy(&[
        "tune",
        "analyze",
        "--dry-run",
        "--input-dir",
        elsewhere.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]));
    assert!(
        out.contains(&format!("of {}", elsewhere.display())),
        "{out}"
    );
    assert!(out.contains("dry run: nothing written"), "{out}");
    assert!(out.contains("dedup = false  # tune: D1"), "{out}");
    assert!(!output.exists());
    assert!(!dirs.pipeline_config().exists());
    assert!(!dirs.telemetry.join("tune-summary.json").exists());
    // Events three days old are outside a one-day window.
    let out = stdout(&dirs.devboy(&["tune", "analyze", "--dry-run", "--days", "1"]));
    assert!(out.contains("nothing to tune"), "{out}");
    assert!(out.contains("before the window"), "{out}");
}

#[test]
fn analyze_refuses_a_config_it_cannot_load_and_says_where() {
    let dirs = Dirs::new();
    std::fs::write(dirs.pipeline_config(), "[dedup]\nmax_entires = 5\n").unwrap();
    let out = dirs.devboy(&["tune", "analyze", "--dry-run"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pipeline_config.toml") && err.contains("max_entires"),
        "{err}"
    );
}

/// Tool uses of the scripted session: 21 reads, each followed by a listing.
const READS: usize = 21;

/// Runs real Claude Code against devboy (proxying server-filesystem): a
/// read and a listing in two turns, then 20 more of each, alternating, in
/// four turns of parallel tool uses (so 42 consecutive devboy tool uses
/// cost six model requests, not 42), then a `/compact` of the same
/// session. Returns the isolated installation (its HOME holds the logs)
/// and the project path.
fn claude_code_session() -> (ClaudeCode, ScriptedModel) {
    let claude = ClaudeCode::new().unwrap();
    let file = claude.project().join("notes.txt");
    std::fs::write(&file, "a note\n".repeat(40)).unwrap();
    let read = "mcp__devboy__fs__read_text_file";
    let list = "mcp__devboy__fs__list_directory";
    let read_input = json!({"path": file.to_str().unwrap()});
    let list_input = json!({"path": claude.project().to_str().unwrap()});
    let mut script = Script::new()
        .tool_use(read, read_input.clone())
        .tool_use(list, list_input.clone());
    for _ in 0..(READS - 1) / 5 {
        let pairs = (0..5)
            .flat_map(|_| {
                [
                    (read.to_owned(), read_input.clone()),
                    (list.to_owned(), list_input.clone()),
                ]
            })
            .collect();
        script = script.turn(Turn::ParallelToolUse(pairs));
    }
    let model = ScriptedModel::start(script.final_text("read and listed")).unwrap();
    let claude = claude.model(&model);
    let fs = peers::server_filesystem(claude.project());
    let config = claude.scratch_dir().join("devboy.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.fs]\ncommand = {}\nargs = [{}]\n",
            json!(fs.program_str()),
            json!(fs.args[0])
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
    claude
        .run_print("Read notes.txt and list the project.", &[read, list])
        .unwrap()
        .assert_success();
    claude
        .run(&["-p", "--continue", "/compact"])
        .unwrap()
        .assert_success();
    (claude, model)
}

#[test]
fn from_claude_logs_reads_what_real_claude_code_wrote() {
    let (claude, _model) = claude_code_session();
    let logs = claude.session_logs();
    assert!(!logs.is_empty(), "Claude Code wrote no session log");
    let projects = claude.home().join(".claude").join("projects");
    let dirs = Dirs::new();
    let input = projects.to_str().unwrap();

    let out = stdout(&dirs.devboy(&[
        "tune",
        "from-claude-logs",
        "--input-dir",
        input,
        "--dry-run",
    ]));
    assert!(
        out.contains(&format!("files: {}, projects: 1,", logs.len())),
        "{out}"
    );
    let uses = 2 * READS;
    assert!(
        out.contains(&format!(
            "sessions: 1, tool uses: {uses} ({uses} of MCP tools), compactions: 1 (1 manual)"
        )),
        "{out}"
    );
    let model_line = out
        .lines()
        .skip_while(|l| !l.starts_with("models"))
        .nth(3)
        .unwrap_or_default();
    assert!(model_line.trim_start().starts_with("claude"), "{out}");
    let model = model_line.split_whitespace().next().unwrap().to_owned();
    assert!(out.contains("mcp__devboy__fs__read_text_file"), "{out}");
    assert!(out.contains("mcp__devboy__fs__list_directory"), "{out}");
    // P1: the one model is pinned, and the report says what that means by
    // devboy's own resolution: the built-in `claude` profile, o200k.
    assert!(
        out.contains(&format!(
            "[profiles] model: unset -> \"{model}\"  (P1) {model} answers 100% of"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "with the pin, a session whose client reports no model runs as {model} with llm profile `claude`, tokenizer o200k (the profile's)"
        )),
        "{out}"
    );
    // P2: one long session is too little to judge the agent profile.
    assert!(
        out.contains("P2: sessions with ≥ 20 tool uses: 1 (3 needed to judge)"),
        "{out}"
    );
    assert!(out.contains("devboy hook install"), "{out}");
    assert!(out.contains("run with --tools"), "{out}");
    assert!(out.contains("dry run: nothing written"), "{out}");
    assert!(!dirs.pipeline_config().exists());

    // --tools: side effects from the names, as a dry run.
    let hand = "schema_version = 2\n\n[tools.\"fs__list_*\"]\nside_effect = \"unknown\"   # not sure yet\n";
    std::fs::write(dirs.pipeline_config(), hand).unwrap();
    let project = claude.project().to_str().unwrap().to_owned();
    let out = stdout(&dirs.devboy(&[
        "tune",
        "from-claude-logs",
        "--input-dir",
        input,
        "--project",
        &project,
        "--tools",
        "--dry-run",
    ]));
    assert!(out.contains(&format!("(project {project})")), "{out}");
    assert!(
        out.contains(
            "[tools.\"fs__read_text_file\"] side_effect: \"unknown\" -> \"read_only\"  (P3)"
        ),
        "{out}"
    );
    assert!(out.contains("a heuristic on the name"), "{out}");
    assert!(
        out.contains("but `[tools.\"fs__list_*\"] side_effect = \"unknown\"` was written by hand"),
        "{out}"
    );
    // P3 follow-ups from the consecutive tool uses in the real log: every
    // read was followed by a listing and every listing but the last by a
    // read. The listings' class was set to `unknown` by hand, so speculation
    // never prefetches them and no edge to them is written.
    assert!(
        out.contains(&format!(
            "P3: after fs__read_text_file ({READS} observations) no other devboy tool that may be prefetched follows at least 0.3 of the time; no follow_up; left out, since speculation never prefetches them (not pure or read-only): fs__list_directory"
        )),
        "{out}"
    );
    assert!(
        !out.contains("[tools.\"fs__read_text_file\"] follow_up"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "[tools.\"fs__list_directory\"] follow_up: unset -> [{{ tool = \"fs__read_text_file\", probability = 1.0 }}]  (P3) of {} tool uses",
            READS - 1
        )),
        "{out}"
    );
    assert!(
        out.contains("schema_version 2 -> 3 (would be), because a key written is new in version 3"),
        "{out}"
    );
    assert!(out.contains("dry run: nothing written"), "{out}");
    assert_eq!(
        std::fs::read_to_string(dirs.pipeline_config()).unwrap(),
        hand
    );

    // Written for real: the hand edit stays, the version 2 file is raised
    // to 3 (it gets version 3 keys), a second run has nothing to add.
    let out = stdout(&dirs.devboy(&["tune", "from-claude-logs", "--input-dir", input, "--tools"]));
    assert!(out.contains("wrote "), "{out}");
    assert!(out.contains("schema_version 2 -> 3, because"), "{out}");
    let text = std::fs::read_to_string(dirs.pipeline_config()).unwrap();
    assert!(
        text.starts_with("schema_version = 3  # tune: was 2; "),
        "{text}"
    );
    assert!(
        text.contains(hand.trim_start_matches("schema_version = 2\n")),
        "{text}"
    );
    assert!(
        text.contains("[tools.\"fs__read_text_file\"]\nside_effect = \"read_only\"  # tune: P3"),
        "{text}"
    );
    assert!(
        text.contains(&format!("\nmodel = \"{model}\"  # tune: P1")),
        "{text}"
    );
    assert!(
        text.contains(
            "follow_up = [{ tool = \"fs__read_text_file\", probability = 1.0 }]  # tune: P3"
        ),
        "{text}"
    );
    assert!(!text.contains("tool = \"fs__list_directory\""), "{text}");
    // devboy loads it, and `tune show` says what the pin resolves to.
    let show = stdout(&dirs.devboy(&["tune", "show"]));
    assert!(show.contains("schema version: 3\n"), "{show}");
    assert!(
        show.contains(&format!("  model             = \"{model}\" (tune)\n")),
        "{show}"
    );
    assert!(
        show.contains(&format!(
            "a session whose client reports no model: model {model} (pinned in [profiles] model), llm profile `claude`, tokenizer o200k"
        )),
        "{show}"
    );
    assert!(
        show.contains("\"fs__read_text_file\": side_effect = read_only (tune)\n"),
        "{show}"
    );
    assert!(
        show.contains("\"fs__list_directory\": follow_up = [{ tool = \"fs__read_text_file\", probability = 1.0 }] (tune)"),
        "{show}"
    );
    let again =
        stdout(&dirs.devboy(&["tune", "from-claude-logs", "--input-dir", input, "--tools"]));
    assert!(again.contains("no changes to propose"), "{again}");

    // The same run left devboy's own telemetry under the temporary HOME
    // (XDG_CONFIG_HOME is HOME/.config there): the tuner reads what the
    // writer wrote, names included.
    let devboy_dir = claude.home().join(".config").join("devboy");
    let out = Command::new(DEVBOY)
        .args(["tune", "analyze", "--dry-run"])
        .env("DEVBOY_CONFIG_DIR", &devboy_dir)
        .env_remove("DEVBOY_TELEMETRY_DIR")
        .env_remove("DEVBOY_TELEMETRY")
        .output()
        .unwrap();
    let out = stdout(&out);
    assert!(
        out.contains(&format!(
            "read {uses} result events and 1 session summaries"
        )),
        "{out}"
    );
    assert!(!out.contains("malformed"), "{out}");
    // Claude Code listed devboy's tools: the definitions it was served
    // are reported per request, next to the session's result tokens.
    assert!(
        out.contains("\n# tool definitions per session (1 of 1 sessions recorded them): "),
        "{out}"
    );
    for tool in ["fs__read_text_file", "fs__list_directory"] {
        assert!(
            out.lines().any(|l| l.starts_with(tool)),
            "{tool} not named in:\n{out}"
        );
    }

    // Another project's name filters everything out.
    let none = stdout(&dirs.devboy(&[
        "tune",
        "from-claude-logs",
        "--input-dir",
        input,
        "--project",
        "no-such-project",
        "--dry-run",
    ]));
    assert!(none.contains("no session logs found"), "{none}");
}

/// Session logs written the way Claude Code 2.1 writes them (the entries
/// the tuner reads, as in the logs of the real run above): `sessions`
/// sessions of `pairs` read/list pairs each, every one compacted
/// `compactions` times, answered by `model`.
fn write_claude_logs(
    dir: &std::path::Path,
    model: &str,
    sessions: usize,
    pairs: usize,
    compactions: usize,
) {
    let project = dir.join("-home-u-proj");
    std::fs::create_dir_all(&project).unwrap();
    for s in 0..sessions {
        let id = format!("00000000-0000-4000-8000-{s:012}");
        let mut lines = vec![
            json!({"type": "user", "sessionId": id, "isSidechain": false,
            "message": {"role": "user", "content": "work"}}),
        ];
        for i in 0..2 * pairs {
            let tool = if i % 2 == 0 {
                "fs__read_text_file"
            } else {
                "fs__list_directory"
            };
            lines.push(
                json!({"type": "assistant", "sessionId": id, "isSidechain": false,
                "message": {"id": format!("msg_{s}_{i}"), "model": model, "role": "assistant",
                    "content": [{"type": "tool_use", "id": format!("toolu_{s}_{i}"),
                        "name": format!("mcp__devboy__{tool}"), "input": {"path": "/x"}}]}}),
            );
        }
        for _ in 0..compactions {
            lines.push(
                json!({"type": "system", "subtype": "compact_boundary", "sessionId": id,
                "compactMetadata": {"trigger": "auto", "preTokens": 150000}}),
            );
            lines.push(
                json!({"type": "user", "sessionId": id, "isCompactSummary": true,
                "message": {"role": "user", "content": "summary"}}),
            );
        }
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(project.join(format!("{id}.jsonl")), text).unwrap();
    }
}

#[test]
fn from_claude_logs_pins_marathon_for_compacting_sessions_and_show_resolves_it() {
    let dirs = Dirs::new();
    let logs = dirs.root.join("projects");
    // Three long sessions (40 tool uses), each compacted twice: marathon's
    // min_compactions.
    write_claude_logs(&logs, "gpt-4o-2024-08-06", 3, 20, 2);
    std::fs::write(dirs.pipeline_config(), "schema_version = 2\n").unwrap();
    let input = logs.to_str().unwrap();
    let out = stdout(&dirs.devboy(&["tune", "from-claude-logs", "--input-dir", input]));
    assert!(
        out.contains("[profiles] agent: \"auto\" -> \"marathon\"  (P2) 3 of 3 sessions with ≥ 20 tool uses compacted ≥ 2 times"),
        "{out}"
    );
    assert!(
        out.contains("llm profile `openai_o200k`, tokenizer o200k (the profile's)"),
        "{out}"
    );
    assert!(out.contains("schema_version 2 -> 3, because"), "{out}");
    let show = stdout(&dirs.devboy(&["tune", "show"]));
    assert!(
        show.contains("a session whose client reports no model: model gpt-4o-2024-08-06 (pinned in [profiles] model), llm profile `openai_o200k`, tokenizer o200k, budget_tokens 25000; agent profile `marathon` from the start (ttl_secs 7200"),
        "{show}"
    );
    assert!(show.contains("always: named in [profiles] agent"), "{show}");
    let again = stdout(&dirs.devboy(&["tune", "from-claude-logs", "--input-dir", input]));
    assert!(again.contains("no changes to propose"), "{again}");
}

#[test]
fn from_claude_logs_without_logs_says_where_it_looked() {
    let dirs = Dirs::new();
    let missing = dirs.config.join("no-claude-here");
    let out = dirs.devboy(&[
        "tune",
        "from-claude-logs",
        "--input-dir",
        missing.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(missing.to_str().unwrap()) && err.contains(".claude/projects"),
        "{err}"
    );
}
