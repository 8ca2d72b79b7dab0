//! Reading Claude Code's JSONL session logs into [`LogStats`]: which
//! models answered, which tools were used and in what order, and the
//! compactions (the file format is described in the parent module).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::TuneError;

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
            let files = devboy_core::transcripts::files_under(&dir);
            out.extend(files.into_iter().map(|f| (name.clone(), f)));
        }
    }
    Ok(out)
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
