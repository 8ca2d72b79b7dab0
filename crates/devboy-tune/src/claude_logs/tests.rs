use std::path::Path;

use devboy_core::pipeline_config::PipelineConfig;

use super::*;
use crate::rules::{Rule, Setting};

#[test]
fn mangles_like_claude_code() {
    assert_eq!(
        mangle("/tmp/devboy-claude-CTqLZW/project"),
        "-tmp-devboy-claude-CTqLZW-project"
    );
    assert_eq!(mangle("/home/a.b/my_proj"), "-home-a-b-my-proj");
}

#[test]
fn side_effects_from_names() {
    let class = |tool| side_effect_from_name(tool).map(|(c, _)| c.name());
    assert_eq!(class("read_text_file"), Some("read_only"));
    assert_eq!(class("list_directory"), Some("read_only"));
    assert_eq!(class("getIssue"), Some("read_only"));
    assert_eq!(class("write_file"), Some("mutating"));
    assert_eq!(class("close_issue"), Some("mutating"));
    assert_eq!(class("delete-branch"), Some("destructive"));
    // A run may do anything; a name without a known verb says nothing.
    assert_eq!(class("run_tests"), None);
    assert_eq!(class("readme_lint"), None);
    assert_eq!(
        side_effect_from_name("git_status").map(|(_, verb)| verb),
        Some("status".to_owned())
    );
}

fn write_log(dir: &Path, project: &str, session: &str, lines: &[serde_json::Value]) {
    let d = dir.join(project);
    std::fs::create_dir_all(&d).unwrap();
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(
        d.join(format!("{session}.jsonl")),
        text.join("\n") + "\nnot json\n",
    )
    .unwrap();
}

fn assistant(session: &str, id: &str, model: &str, tools: &[&str]) -> serde_json::Value {
    let content: Vec<serde_json::Value> = tools
        .iter()
        .map(|t| serde_json::json!({"type": "tool_use", "id": "x", "name": t, "input": {}}))
        .collect();
    serde_json::json!({"type": "assistant", "sessionId": session,
        "message": {"id": id, "model": model, "role": "assistant", "content": content}})
}

#[test]
fn reads_models_tools_sessions_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    write_log(
        dir.path(),
        "-home-u-a",
        "s1",
        &[
            serde_json::json!({"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "hi"}}),
            assistant("s1", "m1", "claude-x", &["mcp__devboy__fs__read_text_file"]),
            // The same message continued in a second entry.
            assistant("s1", "m1", "claude-x", &["Read"]),
            assistant("s1", "m2", "<synthetic>", &[]),
            serde_json::json!({"type": "system", "subtype": "compact_boundary", "sessionId": "s1", "compactMetadata": {"trigger": "manual"}}),
            serde_json::json!({"type": "user", "sessionId": "s1", "isCompactSummary": true, "message": {"role": "user", "content": "summary"}}),
        ],
    );
    write_log(
        dir.path(),
        "-home-u-b",
        "s2",
        &[
            assistant("s2", "m3", "claude-x", &["mcp__devboy__fs__read_text_file"]),
            serde_json::json!({"type": "user", "sessionId": "s2", "isCompactSummary": true, "message": {"role": "user", "content": "summary"}}),
        ],
    );
    let s = read_logs(dir.path(), None).unwrap();
    assert_eq!(s.files, 2);
    assert_eq!(s.sessions, 2);
    assert_eq!(s.malformed, 2);
    assert_eq!(s.models.get("claude-x"), Some(&2));
    assert!(!s.models.contains_key("<synthetic>"));
    assert_eq!(s.tool_uses.get("mcp__devboy__fs__read_text_file"), Some(&2));
    assert_eq!(s.tool_uses.get("Read"), Some(&1));
    // s1: one boundary (its summary not counted again); s2: a summary only.
    assert_eq!(s.compaction_count(), 2);
    let only_b = read_logs(dir.path(), Some("u-b")).unwrap();
    assert_eq!(only_b.files, 1);
    assert_eq!(only_b.projects, vec!["-home-u-b".to_owned()]);
}

/// One entry of a synthetic session, written the way Claude Code
/// writes it (the entries `read_logs` reads, shaped as in the logs of
/// the real runs in tests/tune.rs).
enum Ev<'a> {
    /// An assistant message calling this tool.
    Tool(&'a str),
    /// A `compact_boundary` and the summary after it.
    Compact,
}

/// Writes `sessions` (one file each) answered by `model`.
fn write_sessions(dir: &Path, model: &str, sessions: &[Vec<Ev<'_>>]) {
    for (i, events) in sessions.iter().enumerate() {
        let session = format!("s{i}");
        let mut lines = vec![serde_json::json!({"type": "user", "sessionId": session,
            "message": {"role": "user", "content": "go"}})];
        for (j, e) in events.iter().enumerate() {
            lines.push(match e {
                Ev::Tool(t) => assistant(&session, &format!("m{i}-{j}"), model, &[t]),
                Ev::Compact => {
                    serde_json::json!({"type": "system", "subtype": "compact_boundary",
                    "sessionId": session, "compactMetadata": {"trigger": "auto"}})
                }
            });
            if let Ev::Compact = e {
                lines.push(serde_json::json!({"type": "user", "sessionId": session,
                    "isCompactSummary": true, "message": {"role": "user", "content": "summary"}}));
            }
        }
        write_log(dir, "-home-u-p", &session, &lines);
    }
}

/// `n` tool uses alternating over `tools`, then `compactions`.
fn session<'a>(tools: &[&'a str], n: usize, compactions: usize) -> Vec<Ev<'a>> {
    let mut v: Vec<Ev<'a>> = (0..n).map(|i| Ev::Tool(tools[i % tools.len()])).collect();
    v.extend((0..compactions).map(|_| Ev::Compact));
    v
}

struct Run {
    _dir: tempfile::TempDir,
    options: ClaudeLogOptions,
}

impl Run {
    fn new(config: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("pipeline_config.toml");
        if let Some(text) = config {
            std::fs::write(&output, text).unwrap();
        }
        let options = ClaudeLogOptions {
            input: dir.path().join("logs"),
            project: None,
            server: "devboy".into(),
            tools: true,
            dry_run: false,
            output,
            now_ms: 1_700_000_000_000,
            project_config: None,
        };
        std::fs::create_dir_all(&options.input).unwrap();
        Run { _dir: dir, options }
    }

    fn with(self, model: &str, sessions: &[Vec<Ev<'_>>]) -> Self {
        write_sessions(&self.options.input, model, sessions);
        self
    }

    fn run(&self) -> ClaudeLogReport {
        run(&self.options).unwrap()
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.options.output).unwrap()
    }
}

fn changes_of(r: &ClaudeLogReport, rule: Rule) -> Vec<(String, Setting)> {
    r.changes
        .iter()
        .filter(|c| c.rule == rule)
        .map(|c| (c.target.to_string(), c.to.clone()))
        .collect()
}

const READ: &str = "mcp__devboy__fs__read_text_file";
const LIST: &str = "mcp__devboy__fs__list_directory";
const ISSUE: &str = "mcp__devboy__gh__create_issue";

#[test]
fn p1_pins_the_dominant_model_and_says_what_it_resolves_to() {
    let r = Run::new(None).with("claude-opus-9", &[session(&[READ], 3, 0)]);
    let report = r.run();
    assert_eq!(
        changes_of(&report, Rule::P1),
        vec![(
            "[profiles] model".into(),
            Setting::Str("claude-opus-9".into())
        )]
    );
    let reason = &report.changes[0].reason;
    assert!(
        reason.contains("claude-opus-9 answers 100% of 3 messages; with the pin, a session whose client reports no model runs as claude-opus-9 with llm profile `claude`, tokenizer o200k (the profile's)"),
        "{reason}"
    );
    let text = r.text();
    assert!(
        text.contains("\nmodel = \"claude-opus-9\"  # tune: P1"),
        "{text}"
    );
    // A second run: already pinned, nothing to do.
    let again = r.run();
    assert!(changes_of(&again, Rule::P1).is_empty());
    assert!(
        again
            .notes
            .iter()
            .any(|n| n.contains("is already [profiles] model")),
        "{:?}",
        again.notes
    );
    // A version 1 file is resolved, reported, and left as it is.
    let v1 = "schema_version = 1\n[dedup]\nlru_size = 64\n";
    let r = Run::new(Some(v1)).with("claude-opus-9", &[session(&[READ], 3, 0)]);
    let report = r.run();
    assert!(
        report.changes[0].reason.contains(
            "reports model claude-opus-9 runs as claude-opus-9 with llm profile `claude`"
        ),
        "{report}"
    );
    assert!(report.written.is_none());
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("is in schema version 1; left unchanged")),
        "{report}"
    );
    assert_eq!(r.text(), v1);
    // An OpenAI id resolves through its own built-in profile.
    let r = Run::new(None).with("gpt-4-turbo", &[session(&[READ], 3, 0)]);
    let reason = r.run().changes[0].reason.clone();
    assert!(
        reason.contains("llm profile `openai_cl100k`, tokenizer cl100k"),
        "{reason}"
    );
}

#[test]
fn p1_needs_a_dominant_model_and_holds_for_a_hand_written_one() {
    let dir = tempfile::tempdir().unwrap();
    let r = Run::new(None);
    write_sessions(&r.options.input, "claude-a", &[session(&[READ], 7, 0)]);
    write_sessions(&dir.path().join("b"), "claude-b", &[session(&[READ], 3, 0)]);
    std::fs::rename(
        dir.path().join("b").join("-home-u-p").join("s0.jsonl"),
        r.options.input.join("-home-u-p").join("other.jsonl"),
    )
    .unwrap();
    let report = r.run();
    assert!(changes_of(&report, Rule::P1).is_empty(), "{report}");
    assert!(
        report
            .notes
            .iter()
            .any(|n| n
                .contains("no model answers 80% of messages (the most, claude-a, answers 70%)")),
        "{:?}",
        report.notes
    );
    let hand = "schema_version = 3\n[profiles]\nmodel = \"claude-mine\"\n";
    let r = Run::new(Some(hand)).with("claude-x", &[session(&[READ], 3, 0)]);
    let report = r.run();
    assert!(changes_of(&report, Rule::P1).is_empty());
    assert_eq!(report.held.len(), 1, "{report}");
    assert_eq!(report.held[0].by, "[profiles] model = \"claude-mine\"");
    assert!(r.text().starts_with(hand));
}

#[test]
fn p2_pins_marathon_when_most_long_sessions_compact_often() {
    let long = |c| session(&[READ, LIST], 20, c);
    // Two of three long sessions compacted twice; a short one does
    // not count.
    let r = Run::new(None).with(
        "claude-x",
        &[long(2), long(3), long(0), session(&[READ], 5, 4)],
    );
    let report = r.run();
    assert_eq!(
        changes_of(&report, Rule::P2),
        vec![("[profiles] agent".into(), Setting::Str("marathon".into()))]
    );
    assert!(
        report.changes.iter().any(|c| c.rule == Rule::P2
            && c.reason
                .starts_with("2 of 3 sessions with ≥ 20 tool uses compacted ≥ 2 times")),
        "{report}"
    );
    assert!(r.text().contains("\nagent = \"marathon\"  # tune: P2"));
    assert!(
        r.run()
            .notes
            .iter()
            .any(|n| n.contains("is already \"marathon\"")),
        "second run"
    );
}

#[test]
fn p2_reads_min_compactions_from_the_config_and_needs_support() {
    let long = |c| session(&[READ, LIST], 20, c);
    // Two long sessions are not enough to judge.
    let report = Run::new(None).with("m", &[long(2), long(2)]).run();
    assert!(changes_of(&report, Rule::P2).is_empty());
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("P2: sessions with ≥ 20 tool uses: 2 (3 needed to judge)")),
        "{:?}",
        report.notes
    );
    // marathon asking for 3 compactions: 1 of 3 sessions, fewer than half.
    let three = "schema_version = 3\n[profiles.agents.marathon]\nmin_compactions = 3\n";
    let report = Run::new(Some(three))
        .with("m", &[long(2), long(2), long(3)])
        .run();
    assert!(changes_of(&report, Rule::P2).is_empty());
    assert!(
        report.notes.iter().any(|n| n
            .contains("1 of 3 sessions with ≥ 20 tool uses compacted ≥ 3 times")
            && n.contains("fewer than half")),
        "{:?}",
        report.notes
    );
    // A selection written by hand holds.
    let hand =
        "schema_version = 3\n[profiles]\nagent = \"mine\"\n[profiles.agents.mine]\nttl_secs = 60\n";
    let r = Run::new(Some(hand)).with("m", &[long(2), long(2), long(2)]);
    let report = r.run();
    assert!(changes_of(&report, Rule::P2).is_empty());
    assert_eq!(report.held[0].by, "[profiles] agent = \"mine\"");
}

#[test]
fn p3_mines_follow_ups_from_consecutive_tool_uses() {
    // Pairs of READ and another: LIST 19 times, ISSUE 6, READ again 10
    // (re-reads), the built-in Bash 2, a devboy built-in 1. READ is
    // followed by a tool use 38 + 10 = 48 times (the second READ of a
    // re-read pair is followed by the next pair's READ).
    let mut s = Vec::new();
    for next in [
        (LIST, 19),
        (ISSUE, 6),
        (READ, 10),
        ("Bash", 2),
        ("mcp__devboy__devboy_expand", 1),
    ] {
        for _ in 0..next.1 {
            s.push(Ev::Tool(READ));
            s.push(Ev::Tool(next.0));
        }
    }
    let r = Run::new(Some("schema_version = 2\n")).with("claude-x", &[s]);
    let report = r.run();
    let p3: Vec<(String, Setting)> = changes_of(&report, Rule::P3)
        .into_iter()
        .filter(|(t, _)| t.ends_with("follow_up"))
        .collect();
    // READ→READ (20/48 = 0.42) is a self-loop and not listed; ISSUE
    // (6/48) is under min_probability 0.3; LIST is 19/48 = 0.40.
    assert_eq!(
        p3,
        vec![(
            "[tools.\"fs__read_text_file\"] follow_up".into(),
            Setting::FollowUps(vec![("fs__list_directory".into(), 40)])
        )],
        "{report}"
    );
    let reason = &report
        .changes
        .iter()
        .find(|c| c.target.to_string().ends_with("follow_up"))
        .unwrap()
        .reason;
    assert!(
        reason
            .ends_with("of 48 tool uses right after it in the same session: fs__list_directory 19"),
        "{reason}"
    );
    // Too few observations of the others.
    assert!(
        report.notes.iter().any(
            |n| n.contains("too few calls after fs__list_directory (19), gh__create_issue (6)")
        ),
        "{:?}",
        report.notes
    );
    // Written into a version 2 file: raised to 3, and devboy loads it.
    let text = r.text();
    assert!(
        text.starts_with("schema_version = 3  # tune: was 2;"),
        "{text}"
    );
    assert!(
        text.contains(
            "follow_up = [{ tool = \"fs__list_directory\", probability = 0.4 }]  # tune: P3"
        ),
        "{text}"
    );
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("schema_version 2 -> 3")),
        "{:?}",
        report.notes
    );
    PipelineConfig::from_str(&text, Path::new("x")).unwrap();
    assert!(r.run().changes.is_empty(), "a second run adds nothing");
}

#[test]
fn p3_keeps_the_top_three_in_order_and_leaves_out_tools_that_write() {
    // After READ, 40 observations: ISSUE 12, LIST 12, four others 4 each.
    let tools = [
        (ISSUE, 12),
        (LIST, 12),
        ("mcp__devboy__gh__get_a", 4),
        ("mcp__devboy__gh__get_b", 4),
        ("mcp__devboy__gh__get_c", 4),
        ("mcp__devboy__gh__get_d", 4),
    ];
    let mut s = Vec::new();
    for (next, n) in tools {
        for _ in 0..n {
            s.push(Ev::Tool(READ));
            s.push(Ev::Tool(next));
        }
    }
    // With min_probability 0.1: ties by name; at most three.
    let config = "schema_version = 3\n[enrichment]\nmin_probability = 0.1\n";
    let r = Run::new(Some(config)).with("m", &[s]);
    let report = r.run();
    let c = report
        .changes
        .iter()
        .find(|c| c.target.to_string() == "[tools.\"fs__read_text_file\"] follow_up")
        .unwrap_or_else(|| panic!("{report}"));
    // gh__create_issue follows as often as the listing, but it writes: an
    // edge to it would only ever be declined.
    assert_eq!(
        c.to,
        Setting::FollowUps(vec![
            ("fs__list_directory".into(), 30),
            ("gh__get_a".into(), 10),
            ("gh__get_b".into(), 10),
        ])
    );
    assert!(
        c.reason.ends_with("left out, since speculation never prefetches them (not pure or read-only): gh__create_issue"),
        "{}",
        c.reason
    );
}

#[test]
fn p3_follow_ups_need_support_and_hold_for_hand_edits() {
    let mut s = Vec::new();
    for _ in 0..19 {
        s.push(Ev::Tool(READ));
        s.push(Ev::Tool(LIST));
    }
    // 19 observations of READ: nothing.
    let report = Run::new(None).with("m", &[s]).run();
    assert!(
        report
            .changes
            .iter()
            .all(|c| !c.target.to_string().ends_with("follow_up")),
        "{report}"
    );
    // Across sessions the sequence does not continue: three sessions
    // of 7 pairs are 21 observations of READ but 18 of LIST (20 if the
    // last LIST of a session were followed by the next one's READ).
    let pairs = || session(&[READ, LIST], 14, 0);
    let r = Run::new(None).with("m", &[pairs(), pairs(), pairs()]);
    let report = r.run();
    let follow: Vec<String> = report
        .changes
        .iter()
        .filter(|c| c.target.to_string().ends_with("follow_up"))
        .map(|c| c.target.to_string())
        .collect();
    assert_eq!(follow, vec!["[tools.\"fs__read_text_file\"] follow_up"]);
    // By hand: holds.
    let hand = "schema_version = 3\n[tools.\"fs__*\"]\nfollow_up = [{ tool = \"x__y\", probability = 0.9 }]\n";
    let report = Run::new(Some(hand))
        .with("m", &[pairs(), pairs(), pairs()])
        .run();
    assert!(
        report.held.iter().any(|h| h.rule == Rule::P3
            && h.by
                .starts_with("[tools.\"fs__*\"] follow_up = [{ tool = \"x__y\"")),
        "{report}"
    );
}
