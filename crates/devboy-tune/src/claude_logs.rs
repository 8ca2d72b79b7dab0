//! `devboy tune from-claude-logs`: what Claude Code's own session logs say,
//! for a user who has no devboy telemetry yet.
//!
//! # What Claude Code writes (2.1.330, checked on logs real runs wrote)
//!
//! `~/.claude/projects/<project>/<session id>.jsonl`, where `<project>` is
//! the working directory with every character other than ASCII letters and
//! digits replaced by `-`. One JSON object per line; `--continue` appends
//! to the same file. The entries read here:
//!
//! - `"type": "assistant"`: `message.model` (the model id the API
//!   answered with) and `message.content[]`, whose `tool_use` blocks carry
//!   the tool `name` (`mcp__<server>__<tool>` for MCP tools). One API
//!   message may be logged as several entries with the same `message.id`;
//!   models are counted per message id, tool uses per block.
//! - `"type": "system", "subtype": "compact_boundary"`: a compaction
//!   (`compactMetadata.trigger`: `manual` or `auto`). The next entry is a
//!   user message with `"isCompactSummary": true`; older versions wrote
//!   only that, so it is the fallback count for a file with no boundary.
//! - `sessionId` on every entry: sessions are counted by it.
//!
//! Everything else (attachments, request shapes, cost records, queue
//! operations) is skipped; a line that is not JSON is counted and skipped.
//!
//! - `isSidechain` on every entry: `true` for a subagent's messages when
//!   they are logged in the main file (newer versions write subagents to
//!   files of their own); it separates the threads of tool uses below.
//!
//! # Rules
//!
//! - **P1, the model.** When one model id answers at least
//!   [`DOMINANT_SHARE`] of the messages, `[profiles] model` is pinned to
//!   it: the model devboy assumes for a session whose client reports none
//!   (Claude Code reports it only through the `SessionStart` hook of
//!   `devboy hook install`). What the pin means is left to the config's
//!   own llm profiles: the report says which `[profiles.llms.*]` profile
//!   and tokenizer devboy's resolution
//!   ([`PipelineConfig::resolve_session`]) gives the file as it would be
//!   written (for Claude, the built-in `claude` profile and `o200k`, the
//!   documented stand-in for Claude's unpublished tokenizer).
//!   `[profiles] client` needs no pin: `auto` recognises Claude Code.
//! - **P2, the agent.** Per session, tool uses and compactions are
//!   counted. Of the sessions with at least [`LONG_SESSION_TOOL_USES`]
//!   tool uses (at least [`MIN_LONG_SESSIONS`] of them are needed), when at
//!   least half compacted as often as the `marathon` agent profile's
//!   `min_compactions` (read from the config, not assumed), `[profiles]
//!   agent = "marathon"` is pinned: such sessions then get the profile
//!   from their start instead of only after that many compactions.
//!   Otherwise `auto` stays, and the report says why.
//! - **P3, the tools** (with `--tools`). For each `mcp__<server>__<tool>`
//!   of devboy's server that was used, the exposed name (`<tool>`, e.g.
//!   `fs__read_text_file`) gets `[tools."<name>"] side_effect` **when the
//!   verb in its name makes it evident** (a heuristic on the name, not
//!   knowledge of the tool): the first word of the name in devboy's verb
//!   list ([`VerbClass`], the same list telemetry classifies endpoints
//!   by) decides: reading, listing, searching and getting (`read`,
//!   `list`, `search`, `get`, `status`, …) → `read_only`; writing,
//!   creating and changing (`write`, `create`, `update`, `close`, `push`,
//!   `download`, …) → `mutating`; deleting (`delete`, `remove`,
//!   `truncate`, …) → `destructive`; running (`run`, `exec`, …) says
//!   nothing.
//!   Other names are listed and left to the server's annotations. devboy's
//!   built-in tools (no `__` in the exposed name) are skipped.
//!
//!   And the calls that follow: within each session (and thread), in log
//!   order, each tool use A followed by another tool use is one
//!   observation of A, and P(B | A) = (A then B) / (observations of A).
//!   For each exposed A with at least [`MIN_FOLLOW_SUPPORT`] observations,
//!   `[tools."A"] follow_up` lists the (at most [`MAX_FOLLOW_UPS`]) exposed
//!   tools B ≠ A with P ≥ `enrichment.min_probability`, most likely first,
//!   probabilities to two decimals. Repeats of A itself are not listed
//!   (a re-read is dedup's business, not speculation's) but count as
//!   observations; so do non-devboy tools. Follow-ups that may mutate are
//!   listed too (speculation only ever calls `pure` and `read_only` tools,
//!   by their side-effect class); the report says which ones look
//!   read-only by the name heuristic above.
//!
//! Hand-written entries are never overwritten ([`crate::edit`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use devboy_core::pipeline_config::{PipelineConfig, Selection, SessionContext, SideEffectClass};
use devboy_core::tool_verb::VerbClass;
use serde::Deserialize;

use crate::edit::ConfigFile;
use crate::error::TuneError;
use crate::rules::{Change, Held, Rule, Setting, Target};
use crate::table::{int, Align, TextTable};

/// P1: the share of messages one model must answer to be pinned.
pub const DOMINANT_SHARE: f64 = 0.8;
/// P2: a session with at least this many tool uses is a long one.
pub const LONG_SESSION_TOOL_USES: u64 = 20;
/// P2: long sessions needed before the agent profile is pinned.
pub const MIN_LONG_SESSIONS: usize = 3;
/// P3: observations of a tool (it followed by any tool use) needed before
/// its follow-ups are written; the same minimum support as telemetry rules.
pub const MIN_FOLLOW_SUPPORT: u64 = crate::rules::MIN_SUPPORT;
/// P3: at most this many follow-ups per tool.
pub const MAX_FOLLOW_UPS: usize = 3;
/// The agent profile P2 pins.
pub const MARATHON: &str = "marathon";

/// What `from-claude-logs` was asked to do.
#[derive(Clone, Debug)]
pub struct ClaudeLogOptions {
    /// `~/.claude/projects`, or any directory of session logs.
    pub input: PathBuf,
    /// Only this project: a path (mangled as Claude Code does) or a part of
    /// the project directory's name.
    pub project: Option<String>,
    /// The MCP server name devboy is registered under in Claude Code.
    pub server: String,
    /// Propose `[tools.*]` entries.
    pub tools: bool,
    /// Print, write nothing.
    pub dry_run: bool,
    /// The config file to update.
    pub output: PathBuf,
    /// Now, Unix milliseconds (for the mark's date).
    pub now_ms: u64,
}

/// What the logs hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogStats {
    /// Files read.
    pub files: usize,
    /// Project directories they were in.
    pub projects: Vec<String>,
    /// Non-blank lines.
    pub lines: u64,
    /// Lines that are not JSON objects.
    pub malformed: u64,
    /// Distinct session ids.
    pub sessions: usize,
    /// Assistant messages per model id.
    pub models: BTreeMap<String, u64>,
    /// Tool uses per tool name.
    pub tool_uses: BTreeMap<String, u64>,
    /// `compact_boundary` entries, by trigger.
    pub compactions: BTreeMap<String, u64>,
    /// `isCompactSummary` messages.
    pub compact_summaries: u64,
    /// Per session: (tool uses, compactions).
    pub per_session: HashMap<String, (u64, u64)>,
    /// Tool use A → the tool uses right after it in the same session and
    /// thread, by name (full names, `mcp__…` included).
    pub next_tool: BTreeMap<String, BTreeMap<String, u64>>,
}

impl LogStats {
    /// Compactions: boundaries, or summaries where no boundary was logged.
    pub fn compaction_count(&self) -> u64 {
        self.per_session.values().map(|(_, c)| c).sum()
    }

    /// Tool uses of MCP tools.
    pub fn mcp_uses(&self) -> u64 {
        self.tool_uses
            .iter()
            .filter(|(n, _)| n.starts_with("mcp__"))
            .map(|(_, c)| c)
            .sum()
    }
}

/// The result of `from-claude-logs`; [`fmt::Display`] is the report.
#[derive(Debug)]
pub struct ClaudeLogReport {
    /// The options.
    pub options: ClaudeLogOptions,
    /// What the logs hold.
    pub stats: LogStats,
    /// Changes proposed (and written unless a dry run).
    pub changes: Vec<Change>,
    /// Rules held off by hand edits.
    pub held: Vec<Held>,
    /// Findings that change nothing.
    pub notes: Vec<String>,
    /// Tools of devboy's server with no evident class.
    pub unclassified: Vec<String>,
    /// The file written.
    pub written: Option<PathBuf>,
    /// The changes as TOML.
    pub snippet: String,
}

// ---------------------------------------------------------------- reading

#[derive(Deserialize)]
struct Entry<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    subtype: Option<Cow<'a, str>>,
    #[serde(rename = "sessionId", borrow, default)]
    session_id: Option<Cow<'a, str>>,
    #[serde(rename = "isCompactSummary", default)]
    is_compact_summary: Option<bool>,
    #[serde(rename = "isSidechain", default)]
    is_sidechain: Option<bool>,
    #[serde(rename = "compactMetadata", borrow, default)]
    compact: Option<CompactMetadata<'a>>,
    #[serde(borrow, default)]
    message: Option<Message<'a>>,
}

#[derive(Deserialize)]
struct CompactMetadata<'a> {
    #[serde(borrow, default)]
    trigger: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content<'a> {
    Blocks(#[serde(borrow)] Vec<Block<'a>>),
    Other(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

/// Claude Code's name for a project directory: every character other than
/// an ASCII letter or digit becomes `-`.
pub fn mangle(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The session log files under `input`, with their project directory
/// names, filtered by `project`.
fn log_files(input: &Path, project: Option<&str>) -> std::io::Result<Vec<(String, PathBuf)>> {
    let wanted = project.map(|p| {
        let path = Path::new(p);
        if p.contains('/') || path.exists() {
            let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            (mangle(&absolute.to_string_lossy()), true)
        } else {
            (p.to_owned(), false)
        }
    });
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(input)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if dir.is_file() {
            if wanted.is_none() && dir.extension().is_some_and(|e| e == "jsonl") {
                out.push((String::new(), dir));
            }
            continue;
        }
        let keep = match &wanted {
            None => true,
            Some((mangled, true)) => name == *mangled,
            Some((part, false)) => name.contains(part.as_str()),
        };
        if keep {
            let mut files = Vec::new();
            collect_jsonl(&dir, &mut files);
            files.sort();
            out.extend(files.into_iter().map(|f| (name.clone(), f)));
        }
    }
    Ok(out)
}

fn collect_jsonl(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_jsonl(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

/// Reads every session log under `input` (filtered by `project`).
pub fn read_logs(input: &Path, project: Option<&str>) -> Result<LogStats, TuneError> {
    let files = log_files(input, project).map_err(|e| TuneError::io(input, e))?;
    let mut stats = LogStats::default();
    let mut sessions: HashSet<String> = HashSet::new();
    let mut projects: Vec<String> = Vec::new();
    for (project, file) in files {
        let Ok(handle) = std::fs::File::open(&file) else {
            continue;
        };
        stats.files += 1;
        if !project.is_empty() && !projects.contains(&project) {
            projects.push(project);
        }
        let mut reader = BufReader::new(handle);
        let mut buf = Vec::new();
        let mut messages: HashSet<String> = HashSet::new();
        // Per session in this file: boundaries and summaries.
        let mut compactions: HashMap<String, (u64, u64)> = HashMap::new();
        // Per session and thread in this file: the last tool used. Not
        // carried across files: a session continued in another file (a
        // subagent's, or a resumed one) is another sequence.
        let mut last_tool: HashMap<(String, bool), String> = HashMap::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = buf.trim_ascii();
            if line.is_empty() {
                continue;
            }
            stats.lines += 1;
            let Ok(entry) = serde_json::from_slice::<Entry<'_>>(line) else {
                stats.malformed += 1;
                continue;
            };
            let session = entry.session_id.as_deref().unwrap_or("").to_owned();
            if !session.is_empty() && !sessions.contains(&session) {
                sessions.insert(session.clone());
            }
            match entry.kind.as_deref() {
                Some("assistant") => {
                    let Some(message) = entry.message else {
                        continue;
                    };
                    let first = match message.id.as_deref() {
                        Some(id) => messages.insert(id.to_owned()),
                        None => true,
                    };
                    if let (true, Some(model)) = (first, message.model.as_deref()) {
                        if model != "<synthetic>" {
                            *stats.models.entry(model.to_owned()).or_insert(0) += 1;
                        }
                    }
                    if let Some(Content::Blocks(blocks)) = message.content {
                        for block in blocks {
                            if let (Some("tool_use"), Some(name)) =
                                (block.kind.as_deref(), block.name.as_deref())
                            {
                                *stats.tool_uses.entry(name.to_owned()).or_insert(0) += 1;
                                stats.per_session.entry(session.clone()).or_default().0 += 1;
                                let thread = (session.clone(), entry.is_sidechain == Some(true));
                                if let Some(previous) = last_tool.insert(thread, name.to_owned()) {
                                    *stats
                                        .next_tool
                                        .entry(previous)
                                        .or_default()
                                        .entry(name.to_owned())
                                        .or_insert(0) += 1;
                                }
                            }
                        }
                    }
                }
                Some("system") if entry.subtype.as_deref() == Some("compact_boundary") => {
                    let trigger = entry
                        .compact
                        .and_then(|c| c.trigger.map(Cow::into_owned))
                        .unwrap_or_else(|| "unknown".into());
                    *stats.compactions.entry(trigger).or_insert(0) += 1;
                    compactions.entry(session).or_default().0 += 1;
                }
                Some("user") if entry.is_compact_summary == Some(true) => {
                    stats.compact_summaries += 1;
                    compactions.entry(session).or_default().1 += 1;
                }
                _ => {}
            }
        }
        for (session, (boundaries, summaries)) in compactions {
            let n = if boundaries > 0 {
                boundaries
            } else {
                summaries
            };
            stats.per_session.entry(session).or_default().1 += n;
        }
    }
    for s in &sessions {
        stats.per_session.entry(s.clone()).or_default();
    }
    stats.sessions = sessions.len();
    stats.projects = projects;
    Ok(stats)
}

// ---------------------------------------------------------------- rules

/// The side-effect class a tool's name makes evident (P3's heuristic),
/// with the verb that says so ([`VerbClass`], the word list telemetry's
/// `endpoint_class` also comes from).
pub fn side_effect_from_name(tool: &str) -> Option<(SideEffectClass, String)> {
    let (class, word) = VerbClass::of_tool(tool);
    Some((class.side_effect()?, word?))
}

/// Runs `from-claude-logs`.
pub fn run(options: &ClaudeLogOptions) -> Result<ClaudeLogReport, TuneError> {
    if !options.input.is_dir() {
        return Err(TuneError::Refused(format!(
            "{} is not a directory of Claude Code session logs (they live in ~/.claude/projects)",
            options.input.display()
        )));
    }
    let stats = read_logs(&options.input, options.project.as_deref())?;
    let file = ConfigFile::open(&options.output)?;
    let config = file.config()?;
    let defaults = PipelineConfig::embedded_default();
    let date = crate::table::date(options.now_ms);
    let mut proposed = Vec::new();
    let mut notes = Vec::new();

    model_rule(&stats, &file, &config, &date, &mut proposed, &mut notes)?;
    agent_rule(&stats, &config, &mut proposed, &mut notes);
    if stats.compaction_count() > 0 {
        let compacted = stats.per_session.values().filter(|(_, c)| *c > 0).count();
        notes.push(format!(
            "P2: {} compactions in {compacted} of {} sessions: devboy must see them to keep references valid; install the hooks in each project with `devboy hook install`",
            stats.compaction_count(),
            stats.sessions
        ));
    }

    let prefix = format!("mcp__{}__", options.server);
    let mut unclassified = Vec::new();
    if options.tools {
        side_effect_rule(&stats, &config, &prefix, &mut proposed, &mut unclassified);
        follow_up_rule(&stats, &config, &prefix, &mut proposed, &mut notes);
    }

    // Hand edits hold.
    let mut changes = Vec::new();
    let mut held = Vec::new();
    for c in proposed {
        match file.held_by_hand(&c.target, &defaults) {
            Some(by) => held.push(Held {
                rule: c.rule,
                target: c.target,
                to: c.to,
                by,
            }),
            None => changes.push(c),
        }
    }
    let mut edited = file.clone();
    changes.retain(|c| {
        let ok = edited.apply(c, &date);
        if !ok {
            notes.push(format!(
                "{}: not changed, its table is written inline ({{ … }})",
                c.target
            ));
        }
        ok
    });
    let refs: Vec<&Change> = changes.iter().collect();
    let snippet = crate::analyze::snippet(&refs, &date);
    let mut written = None;
    let old_schema = file.schema_version() < 2;
    if !changes.is_empty() && old_schema && !options.dry_run {
        notes.push(format!(
            "{} is in schema version {}; left unchanged (the tuner edits version 2 and 3 files only)",
            options.output.display(),
            file.schema_version()
        ));
    } else if !changes.is_empty() {
        if edited.bumped() {
            notes.push(crate::edit::bump_note(&options.output, options.dry_run));
        }
        if !options.dry_run {
            edited.write()?;
            written = Some(options.output.clone());
        }
    }
    Ok(ClaudeLogReport {
        options: options.clone(),
        stats,
        changes,
        held,
        notes,
        unclassified,
        written,
        snippet,
    })
}

/// P1: pin the dominant model; say what it resolves to.
fn model_rule(
    stats: &LogStats,
    file: &ConfigFile,
    config: &PipelineConfig,
    date: &str,
    proposed: &mut Vec<Change>,
    notes: &mut Vec<String>,
) -> Result<(), TuneError> {
    let messages: u64 = stats.models.values().sum();
    // The most messages; of equal counts, the first name (a stable choice).
    let Some((model, n)) = stats
        .models
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
    else {
        return Ok(());
    };
    let share = *n as f64 / messages as f64;
    let current = config.profiles.model.clone();
    let pinned = || match &current {
        Some(m) => format!("stays {m:?}"),
        None => "stays unset".to_owned(),
    };
    if share < DOMINANT_SHARE {
        notes.push(format!(
            "P1: no model answers {:.0}% of messages (the most, {model}, answers {:.0}%); [profiles] model {}",
            DOMINANT_SHARE * 100.0,
            share * 100.0,
            pinned()
        ));
    } else if current.as_deref() == Some(model.as_str()) {
        notes.push(format!(
            "P1: {model} answers {:.0}% of messages and is already [profiles] model; {}",
            share * 100.0,
            resolution(config, None)
        ));
    } else {
        let change = Change {
            rule: Rule::P1,
            target: Target::Global {
                section: "profiles",
                key: "model",
            },
            from: current.map_or(Setting::Unset, Setting::Str),
            to: Setting::Str(model.clone()),
            reason: String::new(),
        };
        // What the pin means, by devboy's own resolution of the text that
        // would be written; a file the pin cannot go into (version 1, left
        // unchanged below) is resolved with the model as if reported.
        let mut trial = file.clone();
        trial.apply(&change, date);
        let meaning = match trial.config() {
            Ok(pinned) => resolution(&pinned, None),
            Err(_) => resolution(config, Some(model)),
        };
        proposed.push(Change {
            reason: format!(
                "{model} answers {:.0}% of {messages} messages; with the pin, {meaning}",
                share * 100.0
            ),
            ..change
        });
    }
    notes.push(
        "P1: [profiles] client needs no pin: \"auto\" recognises Claude Code by name and acts on the structuredContent it forwards".into(),
    );
    Ok(())
}

/// What a session whose client reports `reported` (usually none) resolves
/// to under `config`, in words.
fn resolution(config: &PipelineConfig, reported: Option<&str>) -> String {
    let s = config.resolve_session(&SessionContext {
        model: reported.map(str::to_owned),
        ..SessionContext::default()
    });
    let llm = match (&s.llm, &config.profiles.llm) {
        (Some(l), Selection::Named(_)) => format!("llm profile `{l}` (named in [profiles] llm)"),
        (Some(l), Selection::Auto) => format!("llm profile `{l}`"),
        (None, _) => "no llm profile (none of [profiles.llms.*] matches it)".to_owned(),
    };
    let tokenizer = match (config.tokenizer, &s.llm) {
        (Some(_), _) => " (set in [profiles] tokenizer)",
        (None, Some(_)) => " (the profile's)",
        (None, None) => " (the default)",
    };
    format!(
        "a session whose client reports {} runs as {} with {llm}, tokenizer {}{tokenizer}",
        reported.map_or("no model".to_owned(), |m| format!("model {m}")),
        s.model.as_deref().unwrap_or("an unknown model"),
        s.tokenizer.name()
    )
}

/// P2: pin the `marathon` agent profile when most long sessions compact
/// as often as it asks.
fn agent_rule(
    stats: &LogStats,
    config: &PipelineConfig,
    proposed: &mut Vec<Change>,
    notes: &mut Vec<String>,
) {
    let Some(marathon) = config.profiles.agents.iter().find(|a| a.name == MARATHON) else {
        return;
    };
    let Some(need) = marathon.min_compactions.filter(|n| *n > 0) else {
        notes.push(format!(
            "P2: [profiles.agents.{MARATHON}] sets no min_compactions, so there is no compaction count to compare sessions with; [profiles] agent left as it is"
        ));
        return;
    };
    let long: Vec<u64> = stats
        .per_session
        .values()
        .filter(|(uses, _)| *uses >= LONG_SESSION_TOOL_USES)
        .map(|(_, c)| *c)
        .collect();
    if long.len() < MIN_LONG_SESSIONS {
        if stats.sessions > 0 {
            notes.push(format!(
                "P2: sessions with ≥ {LONG_SESSION_TOOL_USES} tool uses: {} ({MIN_LONG_SESSIONS} needed to judge); [profiles] agent left as it is",
                long.len()
            ));
        }
        return;
    }
    let marathons = long.iter().filter(|c| **c >= need).count();
    let evidence = format!(
        "{marathons} of {} sessions with ≥ {LONG_SESSION_TOOL_USES} tool uses compacted ≥ {need} times (`{MARATHON}`'s min_compactions)",
        long.len()
    );
    if marathons * 2 < long.len() {
        notes.push(format!(
            "P2: {evidence}, fewer than half: [profiles] agent stays {:?}; `{MARATHON}` still applies to a session from its compaction {need} on when agent is \"auto\"",
            config.profiles.agent.name()
        ));
        return;
    }
    if config.profiles.agent == Selection::Named(MARATHON.into()) {
        notes.push(format!(
            "P2: {evidence}; [profiles] agent is already \"{MARATHON}\""
        ));
        return;
    }
    proposed.push(Change {
        rule: Rule::P2,
        target: Target::Global {
            section: "profiles",
            key: "agent",
        },
        from: Setting::Str(config.profiles.agent.name().to_owned()),
        to: Setting::Str(MARATHON.into()),
        reason: format!(
            "{evidence}: at least half, so sessions get the profile from their start rather than after compaction {need}"
        ),
    });
}

/// P3: side effects evident from the names of devboy's tools.
fn side_effect_rule(
    stats: &LogStats,
    config: &PipelineConfig,
    prefix: &str,
    proposed: &mut Vec<Change>,
    unclassified: &mut Vec<String>,
) {
    for name in stats.tool_uses.keys() {
        let Some(exposed) = exposed_name(name, prefix) else {
            continue;
        };
        let tool = exposed.rsplit_once("__").map_or(exposed, |(_, t)| t);
        match side_effect_from_name(tool) {
            Some((class, verb)) => {
                let current = config.side_effect(exposed, SideEffectClass::Unknown);
                if current == class {
                    continue;
                }
                proposed.push(Change {
                    rule: Rule::P3,
                    target: Target::Tool {
                        name: exposed.to_owned(),
                        key: "side_effect",
                    },
                    from: Setting::Str(current.name().into()),
                    to: Setting::Str(class.name().into()),
                    reason: format!(
                        "used {} times; the name's verb is `{verb}` (a heuristic on the name)",
                        stats.tool_uses[name],
                    ),
                });
            }
            None => unclassified.push(exposed.to_owned()),
        }
    }
}

/// The exposed name of a tool of devboy's server (`mcp__<server>__` +
/// `<prefix>__<tool>`); `None` for other servers' tools and for devboy's
/// built-in tools (no `__` in the exposed name).
fn exposed_name<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    name.strip_prefix(prefix).filter(|e| e.contains("__"))
}

/// P3: the calls that follow each of devboy's tools.
fn follow_up_rule(
    stats: &LogStats,
    config: &PipelineConfig,
    prefix: &str,
    proposed: &mut Vec<Change>,
    notes: &mut Vec<String>,
) {
    let min_p = config.enrichment.min_probability;
    let mut thin = Vec::new();
    for (a_full, next) in &stats.next_tool {
        let Some(a) = exposed_name(a_full, prefix) else {
            continue;
        };
        let observed: u64 = next.values().sum();
        if observed < MIN_FOLLOW_SUPPORT {
            thin.push(format!("{a} ({observed})"));
            continue;
        }
        let mut links: Vec<(&str, u64)> = next
            .iter()
            .filter_map(|(b, n)| Some((exposed_name(b, prefix)?, *n)))
            .filter(|(b, n)| *b != a && *n as f64 / observed as f64 >= min_p)
            .collect();
        // Most likely first; equal counts (equal probabilities) by name.
        links.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(y.0)));
        links.truncate(MAX_FOLLOW_UPS);
        if links.is_empty() {
            notes.push(format!(
                "P3: after {a} ({observed} observations) no other devboy tool follows at least {min_p} of the time; no follow_up"
            ));
            continue;
        }
        let to = Setting::FollowUps(
            links
                .iter()
                .map(|(b, n)| {
                    let p = (*n as f64 * 100.0 / observed as f64).round() as u32;
                    ((*b).to_owned(), p)
                })
                .collect(),
        );
        let model = config.tool_model(a);
        let from = if model.follow_up.is_empty() {
            Setting::Unset
        } else {
            Setting::follow_ups(&model.follow_up)
        };
        if from == to {
            continue;
        }
        let counts: Vec<String> = links.iter().map(|(b, n)| format!("{b} {n}")).collect();
        let (read_only, other): (Vec<&str>, Vec<&str>) =
            links.iter().map(|(b, _)| *b).partition(|b| {
                let tool = b.rsplit_once("__").map_or(*b, |(_, t)| t);
                side_effect_from_name(tool).map(|(c, _)| c) == Some(SideEffectClass::ReadOnly)
            });
        let mut classes = Vec::new();
        if !read_only.is_empty() {
            classes.push(format!("read-only by the name: {}", read_only.join(", ")));
        }
        if !other.is_empty() {
            classes.push(format!(
                "not read-only by the name (never speculated unless their side_effect is pure or read_only): {}",
                other.join(", ")
            ));
        }
        proposed.push(Change {
            rule: Rule::P3,
            target: Target::Tool {
                name: a.to_owned(),
                key: "follow_up",
            },
            from,
            to,
            reason: format!(
                "of {observed} tool uses right after it in the same session: {}; {}",
                counts.join(", "),
                classes.join("; ")
            ),
        });
    }
    if !thin.is_empty() {
        notes.push(format!(
            "P3: too few calls after {} (fewer than {MIN_FOLLOW_SUPPORT} observations each) to write a follow_up",
            thin.join(", ")
        ));
    }
}

impl fmt::Display for ClaudeLogReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        writeln!(
            f,
            "devboy tune from-claude-logs: {}{}",
            self.options.input.display(),
            self.options
                .project
                .as_ref()
                .map(|p| format!(" (project {p})"))
                .unwrap_or_default()
        )?;
        writeln!(
            f,
            "files: {}, projects: {}, lines: {} ({} not JSON), sessions: {}, tool uses: {} ({} of MCP tools), compactions: {}{}",
            s.files,
            s.projects.len(),
            int(s.lines as i64),
            int(s.malformed as i64),
            s.sessions,
            int(s.tool_uses.values().sum::<u64>() as i64),
            int(s.mcp_uses() as i64),
            s.compaction_count(),
            if s.compactions.is_empty() {
                String::new()
            } else {
                let parts: Vec<String> =
                    s.compactions.iter().map(|(t, n)| format!("{n} {t}")).collect();
                format!(" ({})", parts.join(", "))
            }
        )?;
        if s.files == 0 {
            writeln!(f, "no session logs found: nothing to propose")?;
        }
        if !s.models.is_empty() {
            writeln!(f, "\nmodels (assistant messages):")?;
            let mut t = TextTable::new(&[("model", Align::Left), ("messages", Align::Right)]);
            let mut models: Vec<(&String, &u64)> = s.models.iter().collect();
            models.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for (m, n) in models {
                t.row(vec![m.clone(), int(*n as i64)]);
            }
            for line in t.render().lines() {
                writeln!(f, "  {line}")?;
            }
        }
        if !s.tool_uses.is_empty() {
            writeln!(f, "\ntool uses:")?;
            let mut t = TextTable::new(&[("tool", Align::Left), ("uses", Align::Right)]);
            let mut tools: Vec<(&String, &u64)> = s.tool_uses.iter().collect();
            tools.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for (name, n) in tools {
                t.row(vec![name.clone(), int(*n as i64)]);
            }
            for line in t.render().lines() {
                writeln!(f, "  {line}")?;
            }
        }
        writeln!(f)?;
        for note in &self.notes {
            writeln!(f, "{note}")?;
        }
        if !self.options.tools {
            writeln!(
                f,
                "(run with --tools to propose [tools.\"…\"] side effects and follow-ups for the mcp__{}__* tools used)",
                self.options.server
            )?;
        } else if !self.unclassified.is_empty() {
            writeln!(
                f,
                "P3: no side effect evident from the name of {}: left to the server's annotations",
                self.unclassified.join(", ")
            )?;
        }
        for h in &self.held {
            writeln!(
                f,
                "{} would set {} = {}, but `{}` was written by hand",
                h.rule, h.target, h.to, h.by
            )?;
        }
        if self.changes.is_empty() {
            writeln!(f, "\nno changes to propose")?;
            return Ok(());
        }
        writeln!(f, "\nproposed changes:")?;
        for c in &self.changes {
            writeln!(
                f,
                "  {}: {} -> {}  ({}) {}",
                c.target, c.from, c.to, c.rule, c.reason
            )?;
        }
        crate::report::write_outcome(
            f,
            self.written.as_deref(),
            self.options.dry_run,
            &self.options.output,
            &self.snippet,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            report.notes.iter().any(|n| n
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
        let hand = "schema_version = 3\n[profiles]\nagent = \"mine\"\n[profiles.agents.mine]\nttl_secs = 60\n";
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
            reason.contains("of 48 tool uses right after it in the same session: fs__list_directory 19; read-only by the name: fs__list_directory"),
            "{reason}"
        );
        // Too few observations of the others.
        assert!(
            report
                .notes
                .iter()
                .any(|n| n
                    .contains("too few calls after fs__list_directory (19), gh__create_issue (6)")),
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
    fn p3_keeps_the_top_three_in_order_and_labels_mutating_ones() {
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
        assert_eq!(
            c.to,
            Setting::FollowUps(vec![
                ("fs__list_directory".into(), 30),
                ("gh__create_issue".into(), 30),
                ("gh__get_a".into(), 10),
            ])
        );
        assert!(
            c.reason.contains("read-only by the name: fs__list_directory, gh__get_a; not read-only by the name (never speculated unless their side_effect is pure or read_only): gh__create_issue"),
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
}
