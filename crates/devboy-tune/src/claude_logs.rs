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
//! # Rules
//!
//! - **P1, the model.** When one model id answers at least
//!   [`DOMINANT_SHARE`] of the messages, its tokenizer is what costs should
//!   be counted in. Honestly, an id implies little: Claude models'
//!   tokenizer is not public, and `o200k` is devboy's documented stand-in
//!   for it, so a Claude model changes nothing; OpenAI ids behind a gateway
//!   map to their published tokenizers (`gpt-4o`, `gpt-4.1`, `gpt-5`, `o1`…
//!   `o4` → `o200k`; `gpt-4`, `gpt-3.5` → `cl100k`); any other id is
//!   reported and changes nothing. `[profiles] client` needs no pin:
//!   `auto` already recognises Claude Code by name.
//! - **P2, the sessions.** Long sessions with compactions are where
//!   dedup's compaction tracking matters; the report says so and points
//!   at `devboy hook install`. Schema 2 has no per-workload profile, so
//!   nothing is written.
//! - **P3, the tools** (with `--tools`). For each `mcp__<server>__<tool>`
//!   of devboy's server that was used, the exposed name (`<tool>`, e.g.
//!   `fs__read_text_file`) gets `[tools."<name>"] side_effect` **when the
//!   verb its name starts with makes it evident** (a heuristic on the
//!   name, not knowledge of the tool): `read`, `list`, `get`, `search`,
//!   `find`, `view`, `show`, `describe` → `read_only`; `write`, `create`,
//!   `update`, `edit`, `set`, `add`, `insert`, `move`, `rename`, `push`,
//!   `merge`, `close`, `upload`, `commit`, `apply` → `mutating`; `delete`,
//!   `remove`, `drop`, `destroy`, `purge`, `truncate` → `destructive`.
//!   Other names are listed and left to the server's annotations. devboy's
//!   built-in tools (no `__` in the exposed name) are skipped.
//!
//! Hand-written entries are never overwritten ([`crate::edit`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use devboy_core::pipeline_config::PipelineConfig;
use serde::Deserialize;

use crate::edit::ConfigFile;
use crate::error::TuneError;
use crate::rules::{Change, Held, Rule, Setting, Target};
use crate::table::{int, Align, TextTable};

/// P1: the share of messages one model must answer to be pinned.
pub const DOMINANT_SHARE: f64 = 0.8;

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

/// The tokenizer a model id implies, if it implies one devboy has.
pub fn tokenizer_for_model(model: &str) -> Option<&'static str> {
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m);
    if m.starts_with("claude") {
        // Not public; o200k is devboy's documented stand-in.
        return Some("o200k");
    }
    let o200k = [
        "gpt-4o",
        "gpt-4.1",
        "gpt-4.5",
        "gpt-5",
        "o1",
        "o3",
        "o4",
        "chatgpt-4o",
    ];
    if o200k.iter().any(|p| m.starts_with(p)) {
        return Some("o200k");
    }
    if m.starts_with("gpt-4") || m.starts_with("gpt-3.5") {
        return Some("cl100k");
    }
    None
}

/// The side-effect class a tool's name makes evident (P3's heuristic).
pub fn side_effect_from_name(tool: &str) -> Option<&'static str> {
    let verb: String = tool
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() && !c.is_ascii_uppercase())
        .collect::<String>()
        .to_ascii_lowercase();
    match verb.as_str() {
        "read" | "list" | "get" | "search" | "find" | "view" | "show" | "describe" => {
            Some("read_only")
        }
        "write" | "create" | "update" | "edit" | "set" | "add" | "insert" | "move" | "rename"
        | "push" | "merge" | "close" | "upload" | "commit" | "apply" => Some("mutating"),
        "delete" | "remove" | "drop" | "destroy" | "purge" | "truncate" => Some("destructive"),
        _ => None,
    }
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
    let mut proposed = Vec::new();
    let mut notes = Vec::new();

    // P1: the dominant model.
    let messages: u64 = stats.models.values().sum();
    if let Some((model, n)) = stats.models.iter().max_by_key(|(_, n)| **n) {
        let share = *n as f64 / messages as f64;
        let current = config.tokenizer.name();
        if share < DOMINANT_SHARE {
            notes.push(format!(
                "P1: no model answers {:.0}% of messages (the most, {model}, answers {:.0}%); the tokenizer stays {current}",
                DOMINANT_SHARE * 100.0,
                share * 100.0
            ));
        } else {
            match tokenizer_for_model(model) {
                Some(t) if t == current => notes.push(format!(
                    "P1: {model} answers {:.0}% of messages; its costs are best counted in {t}, which is already the tokenizer{}",
                    share * 100.0,
                    if model.to_ascii_lowercase().contains("claude") {
                        " (Claude's own tokenizer is not public; o200k is devboy's stand-in)"
                    } else {
                        ""
                    }
                )),
                Some(t) => proposed.push(Change {
                    rule: Rule::P1,
                    target: Target::Global {
                        section: "profiles",
                        key: "tokenizer",
                    },
                    from: Setting::Str(current.clone()),
                    to: Setting::Str(t.into()),
                    reason: format!(
                        "{model} answers {:.0}% of {messages} messages; its published tokenizer is {t}",
                        share * 100.0
                    ),
                }),
                None => notes.push(format!(
                    "P1: {model} answers {:.0}% of messages, but devboy knows no tokenizer for it; the tokenizer stays {current}",
                    share * 100.0
                )),
            }
        }
        notes.push(
            "P1: [profiles] client needs no pin: \"auto\" recognises Claude Code by name and acts on the structuredContent it forwards".into(),
        );
    }

    // P2: sessions and compactions.
    let compactions = stats.compaction_count();
    let compacted = stats.per_session.values().filter(|(_, c)| *c > 0).count();
    if compactions > 0 {
        notes.push(format!(
            "P2: {compactions} compactions in {compacted} of {} sessions: devboy must see them to keep references valid; install the hooks in each project with `devboy hook install` (schema 2 has no per-workload profile, so nothing is written)",
            stats.sessions
        ));
    }

    // P3: tools.
    let prefix = format!("mcp__{}__", options.server);
    let mut unclassified = Vec::new();
    if options.tools {
        for name in stats.tool_uses.keys() {
            let Some(exposed) = name.strip_prefix(&prefix) else {
                continue;
            };
            let Some((_, tool)) = exposed.rsplit_once("__") else {
                continue; // devboy's built-in tools
            };
            match side_effect_from_name(tool) {
                Some(class) => {
                    let current = config.side_effect(
                        exposed,
                        devboy_core::pipeline_config::SideEffectClass::Unknown,
                    );
                    if current.name() == class {
                        continue;
                    }
                    proposed.push(Change {
                        rule: Rule::P3,
                        target: Target::Tool {
                            name: exposed.to_owned(),
                            key: "side_effect",
                        },
                        from: Setting::Str(current.name().into()),
                        to: Setting::Str(class.into()),
                        reason: format!(
                            "used {} times; the name starts with `{}` (a heuristic on the name)",
                            stats.tool_uses[name],
                            tool.split(|c: char| !c.is_ascii_alphanumeric())
                                .next()
                                .unwrap_or(tool)
                        ),
                    });
                }
                None => unclassified.push(exposed.to_owned()),
            }
        }
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
    let date = crate::table::date(options.now_ms);
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
    if !changes.is_empty() && !options.dry_run {
        if file.schema_version() < 2 {
            notes.push(format!(
                "{} is in schema version {}; left unchanged (the tuner writes schema 2 keys only)",
                options.output.display(),
                file.schema_version()
            ));
        } else {
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
                "(run with --tools to propose [tools.\"…\"] side effects for the mcp__{}__* tools used)",
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
    fn model_tokenizers() {
        assert_eq!(tokenizer_for_model("claude-opus-5-5"), Some("o200k"));
        assert_eq!(tokenizer_for_model("gpt-4o-mini"), Some("o200k"));
        assert_eq!(tokenizer_for_model("openai/gpt-4.1"), Some("o200k"));
        assert_eq!(tokenizer_for_model("gpt-4-turbo"), Some("cl100k"));
        assert_eq!(tokenizer_for_model("glm-5.1"), None);
    }

    #[test]
    fn side_effects_from_names() {
        assert_eq!(side_effect_from_name("read_text_file"), Some("read_only"));
        assert_eq!(side_effect_from_name("list_directory"), Some("read_only"));
        assert_eq!(side_effect_from_name("getIssue"), Some("read_only"));
        assert_eq!(side_effect_from_name("write_file"), Some("mutating"));
        assert_eq!(side_effect_from_name("delete-branch"), Some("destructive"));
        assert_eq!(side_effect_from_name("fetch"), None);
        assert_eq!(side_effect_from_name("readme_lint"), None);
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
}
