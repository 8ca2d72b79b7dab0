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
//!   list ([`devboy_core::tool_verb::VerbClass`], by which telemetry also
//!   classifies endpoints) decides: reading, listing, searching and
//!   getting (`read`, `list`, `search`, `get`, `status`, …) →
//!   `read_only`; writing, creating and changing (`write`, `create`,
//!   `update`, `close`, `push`, `download`, …) → `mutating`; deleting
//!   (`delete`, `remove`, `truncate`, …) → `destructive`; running (`run`,
//!   `exec`, …) says nothing.
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

mod parse;
mod rules;

use std::fmt;
use std::path::PathBuf;

use devboy_core::pipeline_config::PipelineConfig;

use crate::edit::ConfigFile;
use crate::error::TuneError;
use crate::rules::{Change, Held};
use crate::table::{int, Align, TextTable};

pub use parse::{mangle, read_logs, LogStats};
use rules::{agent_rule, follow_up_rule, model_rule, side_effect_rule};
pub use rules::{
    side_effect_from_name, DOMINANT_SHARE, LONG_SESSION_TOOL_USES, MARATHON, MAX_FOLLOW_UPS,
    MIN_FOLLOW_SUPPORT, MIN_LONG_SESSIONS,
};

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
    /// The project's committed `.devboy/pipeline_config.toml`, which
    /// `output` is read on top of, if there is one.
    pub project_config: Option<PathBuf>,
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

/// Runs `from-claude-logs`.
pub fn run(options: &ClaudeLogOptions) -> Result<ClaudeLogReport, TuneError> {
    if !options.input.is_dir() {
        return Err(TuneError::Refused(format!(
            "{} is not a directory of Claude Code session logs (they live in ~/.claude/projects)",
            options.input.display()
        )));
    }
    let stats = read_logs(&options.input, options.project.as_deref())?;
    let file = ConfigFile::open_over(&options.output, options.project_config.as_deref())?;
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
        crate::analyze_report::write_outcome(
            f,
            self.written.as_deref(),
            self.options.dry_run,
            &self.options.output,
            &self.snippet,
        )
    }
}

#[cfg(test)]
mod tests;
