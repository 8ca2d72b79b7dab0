//! `devboy tune report`: what devboy saved over time, per day, per
//! session, per server and per tool, as text tables for people, JSON for
//! scripts ([`SavingsReport::to_json`], keys in `docs/telemetry.md`) and
//! one self-contained HTML page with charts ([`html`]).
//!
//! The figures are sums over the result and expansion events of the
//! window, read by the tuner's one reader ([`crate::read`]):
//! `tokens_baseline` (what the client would have forwarded to the model
//! without devboy), `tokens_final` (what it forwarded, with what
//! `devboy_expand` delivered), and the saving split into L0 dedup and
//! L1/L2 encoders, less what expansions delivered again. Nothing comes from
//! a session summary's totals: a session that ended without one (killed,
//! or its client gone without a clean end) counts exactly what its events
//! say was delivered. Each group is summed by
//! [`crate::aggregate::WeightedSums`], the rule `tune analyze` sums its
//! endpoints with, so the two commands agree on the same telemetry: an
//! event of a sampled session weighs `1/sample_rate`
//! ([`crate::aggregate::session_weight`]), such figures are estimates and
//! the report marks them. Every table sums the same events, so each
//! table's total is the same. Tool definitions come from the session
//! summaries, the only place they are recorded.
//!
//! Every session of the window is accounted for: a session whose summary
//! is in the window but none of whose results is (its results were
//! sampled out, or came before the window) is a row with zero figures,
//! its definitions still shown. Days run without gaps from the first day
//! with results to the window's last day, days without results at zero
//! ([`SavingsReport::of`] says why from there).
//!
//! A server is the exposed tool name's prefix (before the first `__`);
//! names come from the user's own `endpoint-names.json`, and a tool whose
//! hash it does not name is shown by its hash under `(unnamed)`.

pub mod html;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;

use serde_json::{json, Value};

pub use crate::aggregate::Tally;
use crate::aggregate::{session_weight, WeightedSums};
use crate::error::TuneError;
use crate::event::{id_text, ClientKind, DefinitionsSummary};
use crate::names::ExposedNames;
use crate::read::{read_events, EventTable, ReadOptions, ReadStats};
use crate::table::{date, int, pct, Align, TextTable};

/// The version of [`SavingsReport::to_json`]'s layout: keys are only
/// added under it; a key removed or changing meaning bumps it. Version 2:
/// `days` has every day from the first with results on, and `sessions`
/// every session of the window (`first_ms`/`last_ms` null without a
/// result); version 1 listed only days and sessions with results.
pub const JSON_VERSION: u32 = 2;

/// The server of a tool whose name is not known here.
pub const UNNAMED_SERVER: &str = "(unnamed)";

/// A day in milliseconds.
const DAY_MS: u64 = 86_400_000;

/// What `devboy tune report` was asked to read.
#[derive(Clone, Debug)]
pub struct SavingsOptions {
    /// The events directory (or one file).
    pub input: PathBuf,
    /// `endpoint-names.json`.
    pub names_file: PathBuf,
    /// The window, in days before `now_ms`.
    pub days: u32,
    /// Now, in Unix milliseconds.
    pub now_ms: u64,
}

impl Tally {
    fn json(&self) -> serde_json::Map<String, Value> {
        let v = json!({
            "calls": self.calls,
            "tokens_baseline": self.tokens_baseline,
            "tokens_final": self.tokens_final,
            "tokens_saved": self.saved(),
            "saved_pct": self.saved_pct().map(|p| (p * 10.0).round() / 10.0),
            "dedup_saved": self.dedup_saved,
            "encoder_saved": self.encoder_saved,
            "expanded": {
                "calls": self.expanded.calls,
                "tokens": self.expanded.tokens,
                "again_tokens": self.expanded.again_tokens,
            },
        });
        match v {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        }
    }

    /// The figure cells of a table row; counts scaled up from sampled
    /// sessions carry `~`, as in `tune analyze`.
    fn cells(&self) -> Vec<String> {
        let mark = if self.scaled { "~" } else { "" };
        let n = |x: i64| format!("{mark}{}", int(x));
        vec![
            n(self.calls as i64),
            n(self.tokens_baseline as i64),
            n(self.tokens_final as i64),
            n(self.saved()),
            self.saved_pct().map_or_else(|| "-".to_owned(), pct),
            n(self.dedup_saved),
            n(self.encoder_saved),
        ]
    }
}

/// One day (UTC) of the window, from the first day with results to the
/// window's last day; a day without results has zero figures.
#[derive(Clone, Debug, PartialEq)]
pub struct DayRow {
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
    /// Its figures.
    pub figures: Tally,
}

/// One devboy session (one `devboy mcp` process, or one HTTP client) with
/// a result or a summary in the window.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionRow {
    /// `h(session id)`, as telemetry writes it.
    pub session: String,
    /// The client, from the session's summary (`None` without one: the
    /// session is still running, or was killed).
    pub client: Option<ClientKind>,
    /// Its first result in the window, Unix ms; `None` when none of its
    /// results is in the window.
    pub first_ms: Option<u64>,
    /// Its last result in the window, Unix ms.
    pub last_ms: Option<u64>,
    /// The sampling rate its summary names (1 without one).
    pub sample_rate: f64,
    /// Results it processed, as its summary counts them: all of them,
    /// before sampling, also those before the window (`None` without a
    /// summary).
    pub results: Option<u64>,
    /// Its figures.
    pub figures: Tally,
    /// The tool definitions it was served, when its summary recorded them.
    pub definitions: Option<DefinitionsSummary>,
}

/// One server (the exposed names' prefix).
#[derive(Clone, Debug, PartialEq)]
pub struct ServerRow {
    /// The prefix, or [`UNNAMED_SERVER`].
    pub server: String,
    /// Its figures.
    pub figures: Tally,
}

/// One tool.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolRow {
    /// The exposed name (`<prefix>__<tool>`), `None` when not known here.
    pub name: Option<String>,
    /// `h(exposed name)`.
    pub id: String,
    /// Its server, or [`UNNAMED_SERVER`].
    pub server: String,
    /// Its figures.
    pub figures: Tally,
}

impl ToolRow {
    /// Its name, or its hash when the name is not known.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| format!("#{}", self.id))
    }
}

/// Everything `devboy tune report` found; [`fmt::Display`] is the text
/// report.
#[derive(Clone, Debug)]
pub struct SavingsReport {
    /// The options it ran with.
    pub options: SavingsOptions,
    /// What was read and skipped.
    pub read: ReadStats,
    /// The tokenizers the events name (usually one).
    pub tokenizers: Vec<String>,
    /// Whether figures are scaled up from sampled sessions' events
    /// (estimates, marked `~`).
    pub estimated: bool,
    /// All results of the window.
    pub total: Tally,
    /// Per day, oldest first, without gaps; empty without results.
    pub days: Vec<DayRow>,
    /// Per session: by first result, then those without a result in the
    /// window.
    pub sessions: Vec<SessionRow>,
    /// Per server, most saved first.
    pub servers: Vec<ServerRow>,
    /// Per tool, most saved first.
    pub tools: Vec<ToolRow>,
    /// Why names are missing, when the names map could not be used.
    pub names_note: Option<String>,
    /// What `devboy_run` scripts kept out of the model's context.
    pub code_mode: CodeMode,
}

/// The `devboy_run` scripts of the window, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodeMode {
    /// Scripts run.
    pub runs: u64,
    /// Of them, those that ended with a value.
    pub done: u64,
    /// Tool calls they made.
    pub calls: u64,
    /// Of them, refused because the tool may write.
    pub refused_calls: u64,
    /// What those calls' results would have cost the model shown whole.
    pub direct_tokens: u64,
    /// What the model wrote (the scripts) and was shown (their answers).
    pub model_tokens: u64,
}

impl CodeMode {
    /// The sums of `runs`.
    pub fn of(runs: &[devboy_telemetry::CodeRunRecord]) -> Self {
        let mut sums = CodeMode::default();
        for run in runs {
            sums.runs += 1;
            sums.done += u64::from(run.end == "done");
            sums.calls += u64::from(run.calls);
            sums.refused_calls += u64::from(run.refused_calls);
            sums.direct_tokens += run.direct_tokens;
            sums.model_tokens += run.code_tokens + run.answer_tokens;
        }
        sums
    }

    /// One line for people, or `None` without a script.
    pub fn line(&self) -> Option<String> {
        (self.runs > 0).then(|| {
            let ratio = if self.direct_tokens > 0 {
                format!(
                    " ({:.3}×)",
                    self.model_tokens as f64 / self.direct_tokens as f64
                )
            } else {
                String::new()
            };
            let refused = if self.refused_calls > 0 {
                format!(", {} refused as writes", int(self.refused_calls as i64))
            } else {
                String::new()
            };
            format!(
                "code mode: {} ({} ended with an answer) made {}{refused}, whose results would have cost the model {} tokens; it wrote and was shown {}{ratio}",
                count(self.runs, "devboy_run script", "devboy_run scripts"),
                int(self.done as i64),
                count(self.calls, "tool call", "tool calls"),
                int(self.direct_tokens as i64),
                int(self.model_tokens as i64),
            )
        })
    }
}

/// Reads the window and builds the report.
pub fn run(options: &SavingsOptions) -> Result<SavingsReport, TuneError> {
    let table = read_events(&ReadOptions {
        input: options.input.clone(),
        since_ms: EventTable::since(options.now_ms, options.days),
    })
    .map_err(|e| TuneError::io(&options.input, e))?;
    let names = ExposedNames::load(&options.names_file);
    Ok(SavingsReport::of(&table, &names, options.clone()))
}

/// The server of an exposed tool name: its prefix before the first `__`.
pub fn server_of(name: &str) -> &str {
    name.split_once("__").map_or(name, |(prefix, _)| prefix)
}

/// `n` and the noun for it: `1 file`, `2 files`.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", int(n as i64), if n == 1 { one } else { many })
}

impl SavingsReport {
    /// The report of `table`, with names from `names`.
    pub fn of(table: &EventTable, names: &ExposedNames, options: SavingsOptions) -> Self {
        let mut total = WeightedSums::default();
        let mut days: BTreeMap<u64, WeightedSums> = BTreeMap::new();
        // session → (its first and last result, sums)
        let mut sessions: HashMap<u64, (Option<(u64, u64)>, WeightedSums)> = HashMap::new();
        let mut tools: HashMap<u64, WeightedSums> = HashMap::new();
        for r in &table.records {
            let w = session_weight(table.sessions.get(&r.session));
            total.add(r, w);
            days.entry(r.ts_ms / DAY_MS).or_default().add(r, w);
            let s = sessions.entry(r.session).or_default();
            let (first, last) = s.0.get_or_insert((r.ts_ms, r.ts_ms));
            *first = (*first).min(r.ts_ms);
            *last = (*last).max(r.ts_ms);
            s.1.add(r, w);
            tools.entry(r.tool).or_default().add(r, w);
        }
        // What devboy_expand delivered, under the tool whose result the id
        // stood for, by the same sums.
        for x in &table.expansions {
            total.add_expansion(x);
            days.entry(x.ts_ms / DAY_MS).or_default().add_expansion(x);
            sessions.entry(x.session).or_default().1.add_expansion(x);
            tools.entry(x.tool).or_default().add_expansion(x);
        }

        let row = |id: u64, span: Option<(u64, u64)>, figures: Tally| {
            let summary = table.sessions.get(&id);
            SessionRow {
                session: id_text(id),
                client: summary.map(|s| s.client),
                first_ms: span.map(|(first, _)| first),
                last_ms: span.map(|(_, last)| last),
                sample_rate: summary.map_or(1.0, |s| s.sample_rate),
                results: summary.map(|s| s.results),
                figures,
                definitions: summary.and_then(|s| s.definitions),
            }
        };
        let mut session_rows: Vec<SessionRow> = sessions
            .iter()
            .map(|(id, (span, sums))| row(*id, *span, sums.tally()))
            .collect();
        // A summary in the window says the session was, even when none of
        // its results is: they were all sampled out, or came before the
        // window. Its figures are zero, which keeps the rows' sum the total
        // (and not an estimate: no event was scaled up; the line under
        // the table says why they are zero).
        session_rows.extend(
            table
                .sessions
                .keys()
                .filter(|id| !sessions.contains_key(id))
                .map(|id| row(*id, None, Tally::default())),
        );
        session_rows.sort_by(|a, b| {
            (a.first_ms.is_none(), a.first_ms, &a.session).cmp(&(
                b.first_ms.is_none(),
                b.first_ms,
                &b.session,
            ))
        });

        let mut servers: BTreeMap<String, WeightedSums> = BTreeMap::new();
        let mut tool_rows: Vec<ToolRow> = tools
            .iter()
            .map(|(id, sums)| {
                let name = names.get(*id).map(str::to_owned);
                let server = name.as_deref().map_or(UNNAMED_SERVER, server_of).to_owned();
                servers.entry(server.clone()).or_default().merge(sums);
                ToolRow {
                    name,
                    id: id_text(*id),
                    server,
                    figures: sums.tally(),
                }
            })
            .collect();
        tool_rows.sort_by(|a, b| {
            b.figures
                .saved()
                .cmp(&a.figures.saved())
                .then_with(|| a.label().cmp(&b.label()))
        });
        let mut server_rows: Vec<ServerRow> = servers
            .into_iter()
            .map(|(server, sums)| ServerRow {
                server,
                figures: sums.tally(),
            })
            .collect();
        server_rows.sort_by(|a, b| {
            b.figures
                .saved()
                .cmp(&a.figures.saved())
                .then_with(|| a.server.cmp(&b.server))
        });

        // Days run from the first day with results, not from the window's
        // first day: days before any result say nothing (devboy was not
        // installed yet, or telemetry was off), and `--days 30` over three
        // days of data would squeeze them into a tenth of the chart behind
        // 27 empty bars. From there on every day is shown, up to the
        // window's last day (today), so a day without results, or a stop in
        // use, shows as a zero bar instead of two days drawn side by side.
        let day_rows = match (days.keys().next(), days.keys().next_back()) {
            (Some(&first), Some(&last)) => (first..=last.max(options.now_ms / DAY_MS))
                .map(|day| DayRow {
                    date: date(day * DAY_MS),
                    figures: days.get(&day).map(WeightedSums::tally).unwrap_or_default(),
                })
                .collect(),
            _ => Vec::new(),
        };

        let total = total.tally();
        let tokenizers = (0..table.vocab.tokenizers.len())
            .filter_map(|i| table.vocab.tokenizers.get(i as u8))
            .map(str::to_owned)
            .collect();
        SavingsReport {
            read: table.stats.clone(),
            tokenizers,
            estimated: total.scaled,
            total,
            days: day_rows,
            sessions: session_rows,
            servers: server_rows,
            tools: tool_rows,
            names_note: (!table.records.is_empty() && names.is_empty())
                .then(|| names.note.clone())
                .flatten(),
            code_mode: CodeMode::of(&table.code_runs),
            options,
        }
    }

    /// Whether the window holds neither a result nor a session.
    pub fn is_empty(&self) -> bool {
        self.days.is_empty() && self.sessions.is_empty()
    }

    /// Whether the window holds a result.
    pub fn has_results(&self) -> bool {
        !self.days.is_empty()
    }

    /// The report as one JSON object; its keys are documented in
    /// `docs/telemetry.md` ("devboy tune report --format json").
    pub fn to_json(&self) -> Value {
        let row = |mut head: serde_json::Map<String, Value>, t: &Tally| {
            head.extend(t.json());
            Value::Object(head)
        };
        let map = |v: Value| match v {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        let r = &self.read;
        json!({
            "version": JSON_VERSION,
            "window": {
                "days": self.options.days,
                "since_ms": EventTable::since(self.options.now_ms, self.options.days),
                "until_ms": self.options.now_ms,
                "input": self.options.input.display().to_string(),
            },
            "tokenizers": self.tokenizers,
            "estimated": self.estimated,
            "read": {
                "files": r.files,
                "results": r.results,
                "sessions": r.sessions,
                "malformed": r.malformed,
                "unsupported": r.unsupported,
                "other_kinds": r.other_kinds,
                "old": r.old,
                "unreadable": r.unreadable.len(),
                "expansions": r.expansions,
                "code_runs": r.code_runs,
            },
            "total": row(serde_json::Map::new(), &self.total),
            "days": self.days.iter().map(|d| row(map(json!({"date": d.date})), &d.figures)).collect::<Vec<_>>(),
            "sessions": self.sessions.iter().map(|s| row(map(json!({
                "session": s.session,
                "client": s.client.map(client_name),
                "first_ms": s.first_ms,
                "last_ms": s.last_ms,
                "sample_rate": s.sample_rate,
                "definitions": s.definitions.map(|d| json!({
                    "tokens": d.tokens, "tools": d.tools, "lists": d.lists,
                })),
            })), &s.figures)).collect::<Vec<_>>(),
            "servers": self.servers.iter().map(|s| row(map(json!({"server": s.server})), &s.figures)).collect::<Vec<_>>(),
            "tools": self.tools.iter().map(|t| row(map(json!({
                "tool": t.name, "id": t.id, "server": t.server,
            })), &t.figures)).collect::<Vec<_>>(),
            "code_mode": {
                "runs": self.code_mode.runs,
                "done": self.code_mode.done,
                "calls": self.code_mode.calls,
                "refused_calls": self.code_mode.refused_calls,
                "direct_tokens": self.code_mode.direct_tokens,
                "model_tokens": self.code_mode.model_tokens,
            },
        })
    }

    /// What was read, for people: `read 10 result events and 2 session
    /// summaries from 1 file` (and `, 3 expansions` when there were).
    pub fn read_line(&self) -> String {
        let r = &self.read;
        let expansions = if r.expansions > 0 {
            format!(", {}", count(r.expansions, "expansion", "expansions"))
        } else {
            String::new()
        };
        format!(
            "read {}{expansions} and {} from {}",
            count(r.results, "result event", "result events"),
            count(r.sessions, "session summary", "session summaries"),
            count(r.files as u64, "file", "files")
        )
    }

    /// One line on what `devboy_expand` delivered, or `None` when nothing.
    pub fn expanded_line(&self) -> Option<String> {
        let x = &self.total.expanded;
        (x.calls > 0).then(|| {
            format!(
                "received includes {} tokens devboy_expand delivered in {}: {} again of what the model had been shown (taken back from the savings), {} of parts it had not been shown (in the baseline too)",
                int(x.tokens as i64),
                count(x.calls, "call", "calls"),
                int(x.again_tokens as i64),
                int(x.new_tokens() as i64),
            )
        })
    }

    /// What was skipped while reading, for people; `None` when nothing.
    pub fn skipped(&self) -> Option<String> {
        let r = &self.read;
        let parts: Vec<String> = [
            (r.malformed, "damaged line", "damaged lines"),
            (
                r.unsupported,
                "line of a newer schema",
                "lines of a newer schema",
            ),
            (
                r.other_kinds,
                "line of another kind",
                "lines of other kinds",
            ),
            (
                r.unreadable.len() as u64,
                "unreadable file",
                "unreadable files",
            ),
        ]
        .iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, one, many)| count(*n, one, many))
        .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// The first line: the window, and what the figures are counted in.
    pub fn heading(&self) -> String {
        format!(
            "devboy tune report: the last {} days of {} (tokens counted with {}{})",
            self.options.days,
            self.options.input.display(),
            if self.tokenizers.is_empty() {
                "the session's tokenizer".to_owned()
            } else {
                self.tokenizers.join(", ")
            },
            if self.estimated {
                "; ~ marks estimates scaled up from sampled sessions"
            } else {
                ""
            }
        )
    }

    /// The message for a window without results (and, when
    /// [`Self::is_empty`], without sessions).
    pub fn empty_message(&self) -> String {
        if self.is_empty() {
            format!(
                "no tool results in the last {} days under {}: nothing to report yet. devboy records them while `devboy mcp` (or `devboy serve`) runs, unless telemetry is off.",
                self.options.days,
                self.options.input.display()
            )
        } else {
            format!(
                "no tool result events in the last {} days under {}: nothing saved to report; the window's sessions are below.",
                self.options.days,
                self.options.input.display(),
            )
        }
    }

    /// One line on the sessions without a result event in the window, or
    /// `None` when every session has one.
    pub fn sessions_without_results(&self) -> Option<String> {
        let without: Vec<&SessionRow> = self
            .sessions
            .iter()
            .filter(|s| s.first_ms.is_none())
            .collect();
        if without.is_empty() {
            return None;
        }
        let no_call = without.iter().filter(|s| s.results == Some(0)).count() as u64;
        let unrecorded = without.len() as u64 - no_call;
        let why: Vec<String> = [
            (no_call, "had no tool result"),
            (
                unrecorded,
                "had results, none recorded in the window (sampled out, dropped, or before the window)",
            ),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{} {what}", int(*n as i64)))
        .collect();
        Some(format!(
            "{} of {} {} no result event in the window (shown with 0 calls): {}",
            int(without.len() as i64),
            int(self.sessions.len() as i64),
            match (self.sessions.len(), without.len()) {
                (1, _) => "session has",
                (_, 1) => "sessions has",
                _ => "sessions have",
            },
            why.join("; ")
        ))
    }
}

/// The client's name as telemetry writes it.
pub fn client_name(client: ClientKind) -> &'static str {
    match client {
        ClientKind::ClaudeCode => "claude-code",
        ClientKind::Other => "other",
    }
}

/// `YYYY-MM-DD HH:MM` (UTC) of a Unix millisecond.
pub fn minute(unix_ms: u64) -> String {
    let minutes = unix_ms / 60_000 % 1440;
    format!("{} {:02}:{:02}", date(unix_ms), minutes / 60, minutes % 60)
}

/// What the figure columns mean, for the text and the page.
pub const LEGEND: &str = "calls: tool results; the other figures are tokens. baseline: what the model would have received without devboy; received: what it received, devboy_expand's deliveries included; saved = baseline - received (saved %: of the baseline), of which dedup (references to results already sent) and encoder (shorter lossless formats)";

/// What the definitions columns mean.
pub const DEFINITIONS_LEGEND: &str = "definitions: tokens of the tool definitions every model request of the session carried (the last tools/list devboy served; tools: how many), when its summary recorded them";

/// The figure columns every table ends with.
const FIGURES: [(&str, Align); 7] = [
    ("calls", Align::Right),
    ("baseline", Align::Right),
    ("received", Align::Right),
    ("saved", Align::Right),
    ("saved %", Align::Right),
    ("dedup", Align::Right),
    ("encoder", Align::Right),
];

/// A table whose leading columns are `head` and whose rows end with the
/// figures, closed by a totals row.
fn figures_table<'a>(
    head: &[(&str, Align)],
    rows: impl Iterator<Item = (Vec<String>, &'a Tally, Vec<String>)>,
    tail: &[(&str, Align)],
    total: &Tally,
) -> TextTable {
    let columns: Vec<(&str, Align)> = head
        .iter()
        .chain(FIGURES.iter())
        .chain(tail.iter())
        .copied()
        .collect();
    let mut t = TextTable::new(&columns);
    for (lead, figures, trail) in rows {
        let mut cells = lead;
        cells.extend(figures.cells());
        cells.extend(trail);
        t.row(cells);
    }
    t.rule();
    let mut cells = vec!["total".to_owned()];
    cells.resize(head.len(), String::new());
    cells.extend(total.cells());
    t.row(cells);
    t
}

impl SessionRow {
    /// Its first result, `-` when none is in the window.
    pub fn first_result(&self) -> String {
        self.first_ms.map_or_else(|| "-".to_owned(), minute)
    }

    /// The definitions cells: tokens and tools, `-` when not recorded.
    pub fn definition_cells(&self) -> [String; 2] {
        self.definitions.map_or_else(
            || ["-".to_owned(), "-".to_owned()],
            |d| [int(d.tokens as i64), int(d.tools as i64)],
        )
    }
}

impl SavingsReport {
    fn sessions_table(&self) -> TextTable {
        figures_table(
            &[
                ("session", Align::Left),
                ("client", Align::Left),
                ("first result (UTC)", Align::Left),
            ],
            self.sessions.iter().map(|s| {
                (
                    vec![
                        s.session.clone(),
                        s.client.map_or("-", client_name).to_owned(),
                        s.first_result(),
                    ],
                    &s.figures,
                    s.definition_cells().to_vec(),
                )
            }),
            &[("definitions", Align::Right), ("tools", Align::Right)],
            &self.total,
        )
    }

    fn write_sessions(&self, f: &mut fmt::Formatter<'_>, mark: &str) -> fmt::Result {
        writeln!(f, "\nSavings per session{mark}")?;
        write!(f, "{}", self.sessions_table().render())?;
        if let Some(line) = self.sessions_without_results() {
            writeln!(f, "{line}")?;
        }
        writeln!(f, "{DEFINITIONS_LEGEND}")
    }
}

impl fmt::Display for SavingsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.heading())?;
        writeln!(f, "{}", self.read_line())?;
        if let Some(skipped) = self.skipped() {
            writeln!(f, "skipped: {skipped}")?;
        }
        for (path, error) in &self.read.unreadable {
            writeln!(f, "unreadable, skipped: {}: {error}", path.display())?;
        }
        let mark = if self.estimated { " (~ estimates)" } else { "" };
        if !self.has_results() {
            writeln!(f, "\n{}", self.empty_message())?;
            if self.is_empty() {
                return Ok(());
            }
            return self.write_sessions(f, mark);
        }
        if let Some(note) = &self.names_note {
            writeln!(f, "names: {note}; tools are shown by their hash")?;
        }
        writeln!(f, "{LEGEND}")?;
        if let Some(line) = self.expanded_line() {
            writeln!(f, "{line}")?;
        }
        if let Some(line) = self.code_mode.line() {
            writeln!(f, "{line}")?;
        }

        writeln!(f, "\nSavings per day (UTC){mark}")?;
        let t = figures_table(
            &[("date", Align::Left)],
            self.days
                .iter()
                .map(|d| (vec![d.date.clone()], &d.figures, Vec::new())),
            &[],
            &self.total,
        );
        write!(f, "{}", t.render())?;

        self.write_sessions(f, mark)?;

        writeln!(f, "\nSavings per server{mark}")?;
        let t = figures_table(
            &[("server", Align::Left)],
            self.servers
                .iter()
                .map(|s| (vec![s.server.clone()], &s.figures, Vec::new())),
            &[],
            &self.total,
        );
        write!(f, "{}", t.render())?;

        writeln!(f, "\nSavings per tool{mark}")?;
        let t = figures_table(
            &[("tool", Align::Left)],
            self.tools
                .iter()
                .map(|t| (vec![t.label()], &t.figures, Vec::new())),
            &[],
            &self.total,
        );
        write!(f, "{}", t.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_runs_sum_to_one_line_of_what_they_kept_out() {
        let run = |calls, refused, direct, code, answer, end: &'static str| {
            devboy_telemetry::CodeRunRecord {
                calls,
                refused_calls: refused,
                direct_tokens: direct,
                code_tokens: code,
                answer_tokens: answer,
                end: end.into(),
                ..Default::default()
            }
        };
        let sums = CodeMode::of(&[
            run(40, 0, 90_000, 150, 50, "done"),
            run(3, 1, 10_000, 100, 700, "script_error"),
        ]);
        assert_eq!(
            sums,
            CodeMode {
                runs: 2,
                done: 1,
                calls: 43,
                refused_calls: 1,
                direct_tokens: 100_000,
                model_tokens: 1_000,
            }
        );
        assert_eq!(
            sums.line().unwrap(),
            "code mode: 2 devboy_run scripts (1 ended with an answer) made 43 tool calls, 1 refused as writes, whose results would have cost the model 100,000 tokens; it wrote and was shown 1,000 (0.010×)"
        );
        assert_eq!(CodeMode::of(&[]).line(), None);
    }

    /// Each day's date, calls and tokens saved.
    fn day_rows(r: &SavingsReport) -> Vec<(&str, u64, i64)> {
        r.days
            .iter()
            .map(|d| (d.date.as_str(), d.figures.calls, d.figures.saved()))
            .collect()
    }
    use crate::event::{Record, SessionRecord, Vocabulary};

    const DAY: u64 = 86_400_000;
    const T0: u64 = 1_764_201_600_000; // 2025-11-27 00:00 UTC

    fn record(tool: u64, session: u64, ts_ms: u64, figures: (u32, u32, i32, i32)) -> Record {
        Record {
            ts_ms,
            tokens_baseline: figures.0,
            tokens_final: figures.1,
            dedup_saved: figures.2,
            encoder_saved: figures.3,
            ..Record::blank(tool, session)
        }
    }

    fn summary(sample_rate: f64, definitions: Option<DefinitionsSummary>) -> SessionRecord {
        SessionRecord {
            results: 1,
            sample_rate,
            compactions: 0,
            dropped: 0,
            client: ClientKind::ClaudeCode,
            speculation: None,
            tokens_final: 0,
            definitions,
        }
    }

    fn options() -> SavingsOptions {
        SavingsOptions {
            input: PathBuf::from("/t/events"),
            names_file: PathBuf::from("/t/names.json"),
            days: 30,
            now_ms: T0 + 3 * DAY,
        }
    }

    fn names() -> ExposedNames {
        ExposedNames::from_pairs([
            (id_text(1), "fs__read_text_file".to_owned()),
            (id_text(2), "fs__list_directory".to_owned()),
            (id_text(3), "mem__read_graph".to_owned()),
        ])
    }

    /// The rows' figures added up, marked scaled when one is.
    fn sum(it: &mut dyn Iterator<Item = Tally>) -> Tally {
        it.fold(Tally::default(), |a, b| Tally {
            calls: a.calls + b.calls,
            tokens_baseline: a.tokens_baseline + b.tokens_baseline,
            tokens_final: a.tokens_final + b.tokens_final,
            dedup_saved: a.dedup_saved + b.dedup_saved,
            encoder_saved: a.encoder_saved + b.encoder_saved,
            scaled: a.scaled || b.scaled,
            expanded: {
                let mut x = a.expanded;
                x += b.expanded;
                x
            },
        })
    }

    fn expansion(
        tool: u64,
        session: u64,
        ts_ms: u64,
        delivered: crate::event::Delivered,
        tokens: u64,
    ) -> crate::event::ExpansionRecord {
        crate::event::ExpansionRecord {
            ts_ms,
            session,
            tool,
            delivered,
            tokens,
        }
    }

    fn table(records: Vec<Record>, sessions: Vec<(u64, SessionRecord)>) -> EventTable {
        EventTable {
            records,
            vocab: Vocabulary::default(),
            sessions: sessions.into_iter().collect(),
            ..EventTable::default()
        }
    }

    #[test]
    fn groups_by_day_session_server_and_tool_with_one_total() {
        let t = table(
            vec![
                record(1, 10, T0 + 1000, (1000, 100, 900, 0)),
                record(1, 10, T0 + 2000, (1000, 400, 0, 600)),
                record(2, 10, T0 + DAY + 5, (300, 200, -5, 105)),
                record(3, 20, T0 + DAY + 9, (500, 500, 0, 0)),
                record(9, 20, T0 + 2 * DAY, (50, 40, 0, 10)),
            ],
            vec![(
                10,
                summary(
                    1.0,
                    Some(DefinitionsSummary {
                        tokens: 4000,
                        tools: 20,
                        lists: 1,
                    }),
                ),
            )],
        );
        let r = SavingsReport::of(&t, &names(), options());
        assert_eq!(
            r.total,
            Tally {
                calls: 5,
                tokens_baseline: 2850,
                tokens_final: 1240,
                dedup_saved: 895,
                encoder_saved: 715,
                scaled: false,
                expanded: Default::default(),
            }
        );
        assert_eq!(r.total.saved(), 1610);
        assert_eq!(
            day_rows(&r),
            [
                ("2025-11-27", 2, 1500),
                ("2025-11-28", 2, 100),
                ("2025-11-29", 1, 10),
                ("2025-11-30", 0, 0),
            ]
        );
        let servers: Vec<(&str, i64)> = r
            .servers
            .iter()
            .map(|s| (s.server.as_str(), s.figures.saved()))
            .collect();
        assert_eq!(servers, [("fs", 1600), (UNNAMED_SERVER, 10), ("mem", 0)]);
        let tools: Vec<(String, &str, u64)> = r
            .tools
            .iter()
            .map(|t| (t.label(), t.server.as_str(), t.figures.calls))
            .collect();
        assert_eq!(
            tools,
            [
                ("fs__read_text_file".to_owned(), "fs", 2),
                ("fs__list_directory".to_owned(), "fs", 1),
                (format!("#{}", id_text(9)), UNNAMED_SERVER, 1),
                ("mem__read_graph".to_owned(), "mem", 1),
            ]
        );
        assert_eq!(r.sessions.len(), 2);
        let first = &r.sessions[0];
        assert_eq!(first.session, id_text(10));
        assert_eq!(
            (first.first_ms, first.last_ms),
            (Some(T0 + 1000), Some(T0 + DAY + 5))
        );
        assert_eq!(first.client, Some(ClientKind::ClaudeCode));
        assert_eq!(first.definitions.map(|d| d.tokens), Some(4000));
        assert_eq!(r.sessions[1].client, None, "no summary yet");
        // Each table sums to the total.
        assert_eq!(sum(&mut r.days.iter().map(|d| d.figures)), r.total);
        assert_eq!(sum(&mut r.sessions.iter().map(|d| d.figures)), r.total);
        assert_eq!(sum(&mut r.servers.iter().map(|d| d.figures)), r.total);
        assert_eq!(sum(&mut r.tools.iter().map(|d| d.figures)), r.total);
    }

    #[test]
    fn sampled_sessions_weigh_one_over_their_rate() {
        let t = table(
            vec![
                record(1, 10, T0, (100, 50, 0, 50)),
                record(1, 20, T0, (100, 50, 0, 50)),
            ],
            vec![(10, summary(0.25, None))],
        );
        let r = SavingsReport::of(&t, &names(), options());
        assert!(r.estimated);
        assert_eq!(r.total.calls, 5);
        assert_eq!(r.total.tokens_baseline, 500);
        assert_eq!(r.total.saved(), 250);
        let text = r.to_string();
        assert!(text.contains("~ marks estimates"), "{text}");
        // The sampled session's figures, and every total, carry the mark.
        let row = text
            .lines()
            .find(|l| l.starts_with(&id_text(10)))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(row.contains("    ~4  "), "{row}");
        let plain = text.lines().find(|l| l.starts_with(&id_text(20))).unwrap();
        assert!(!plain.contains('~'), "{plain}");
        assert!(
            text.contains("\ntotal  ") && text.contains("~5  "),
            "{text}"
        );
    }

    #[test]
    fn text_tables_are_aligned_with_a_total_row() {
        let t = table(
            vec![
                record(1, 10, T0, (12_000, 3_000, 1_000, 8_000)),
                record(3, 10, T0 + DAY, (500, 450, 0, 50)),
            ],
            Vec::new(),
        );
        let text = SavingsReport::of(&t, &names(), options()).to_string();
        assert!(
            text.contains(
                "date        calls  baseline  received  saved  saved %  dedup  encoder\n\
                 ---------------------------------------------------------------------\n\
                 2025-11-27      1    12,000     3,000  9,000     75.0  1,000    8,000\n\
                 2025-11-28      1       500       450     50     10.0      0       50\n\
                 2025-11-29      0         0         0      0        -      0        0\n\
                 2025-11-30      0         0         0      0        -      0        0\n\
                 ---------------------------------------------------------------------\n\
                 total           2    12,500     3,450  9,050     72.4  1,000    8,050\n"
            ),
            "{text}"
        );
        assert!(text.contains("\nSavings per server\nserver"), "{text}");
        assert!(text.contains("\nmem "), "{text}");
    }

    #[test]
    fn json_keys_are_stable() {
        let t = table(vec![record(1, 10, T0, (10, 4, 0, 6))], Vec::new());
        let j = SavingsReport::of(&t, &names(), options()).to_json();
        assert_eq!(j["version"], 2);
        assert_eq!(
            j["total"],
            json!({"calls": 1, "tokens_baseline": 10, "tokens_final": 4, "tokens_saved": 6,
                   "saved_pct": 60.0, "dedup_saved": 0, "encoder_saved": 6,
                   "expanded": {"calls": 0, "tokens": 0, "again_tokens": 0}})
        );
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            keys(&j),
            [
                "version",
                "window",
                "tokenizers",
                "estimated",
                "read",
                "total",
                "days",
                "sessions",
                "servers",
                "tools",
                "code_mode"
            ]
        );
        assert_eq!(j["days"][0]["date"], "2025-11-27");
        assert_eq!(j["servers"][0]["server"], "fs");
        assert_eq!(j["tools"][0]["tool"], "fs__read_text_file");
        assert_eq!(j["sessions"][0]["client"], Value::Null);
        assert_eq!(
            keys(&j["sessions"][0])[..3],
            ["session", "client", "first_ms"]
        );
    }

    #[test]
    fn an_empty_window_says_so() {
        let r = SavingsReport::of(&table(Vec::new(), Vec::new()), &names(), options());
        assert!(r.is_empty());
        let text = r.to_string();
        assert!(text.contains("nothing to report yet"), "{text}");
        assert_eq!(r.to_json()["days"], json!([]));
    }

    #[test]
    fn servers_are_prefixes() {
        assert_eq!(server_of("gh__list_issues"), "gh");
        assert_eq!(server_of("a__b__c"), "a");
        assert_eq!(server_of("plain"), "plain");
        assert_eq!(minute(T0 + 3_723_000), "2025-11-27 01:02");
    }

    fn definitions(tokens: u64, tools: u64) -> Option<DefinitionsSummary> {
        Some(DefinitionsSummary {
            tokens,
            tools,
            lists: 1,
        })
    }

    #[test]
    fn every_session_of_the_window_is_a_row_and_the_rows_sum_to_the_total() {
        let t = table(
            vec![
                record(1, 10, T0 + 1000, (1000, 400, 0, 600)),
                // Only errors: passed through, nothing saved, still results.
                record(2, 20, T0 + 2000, (80, 80, 0, 0)).with_flags(false, true, true),
            ],
            vec![
                (10, summary(1.0, definitions(4000, 20))),
                (20, summary(1.0, definitions(4000, 20))),
                // Speculated, no tool result.
                (
                    30,
                    SessionRecord {
                        results: 0,
                        ..summary(1.0, definitions(3100, 12))
                    },
                ),
                // Four results, sampled at 0.25, none kept.
                (
                    40,
                    SessionRecord {
                        results: 4,
                        ..summary(0.25, None)
                    },
                ),
            ],
        );
        let r = SavingsReport::of(&t, &names(), options());
        let rows: Vec<(String, Option<u64>, u64, Option<u64>)> = r
            .sessions
            .iter()
            .map(|s| {
                (
                    s.session.clone(),
                    s.first_ms,
                    s.figures.calls,
                    s.definitions.map(|d| d.tokens),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (id_text(10), Some(T0 + 1000), 1, Some(4000)),
                (id_text(20), Some(T0 + 2000), 1, Some(4000)),
                (id_text(30), None, 0, Some(3100)),
                (id_text(40), None, 0, None),
            ]
        );
        assert_eq!(sum(&mut r.sessions.iter().map(|s| s.figures)), r.total);
        assert_eq!(r.total.calls, 2);
        // Session 40's zero is no estimate: no event was scaled up.
        assert!(!r.estimated && !r.total.scaled);

        let text = r.to_string();
        let cells = |id: u64| -> Vec<&str> {
            text.lines()
                .find(|l| l.starts_with(&id_text(id)))
                .unwrap_or_else(|| panic!("{id} in {text}"))
                .split_whitespace()
                .collect()
        };
        assert_eq!(
            cells(30)[1..],
            [
                "claude-code",
                "-",
                "0",
                "0",
                "0",
                "0",
                "-",
                "0",
                "0",
                "3,100",
                "12"
            ]
        );
        assert_eq!(
            cells(20)[4..],
            ["1", "80", "80", "0", "0.0", "0", "0", "4,000", "20"],
            "errors only: results, nothing saved"
        );
        assert!(
            text.contains(
                "2 of 4 sessions have no result event in the window (shown with 0 calls): 1 had no tool result; 1 had results, none recorded in the window (sampled out, dropped, or before the window)\n"
            ),
            "{text}"
        );
        let j = r.to_json();
        let sessions = j["sessions"].as_array().unwrap();
        assert_eq!(sessions.len(), 4);
        assert_eq!(sessions[2]["first_ms"], Value::Null);
        assert_eq!(sessions[2]["calls"], 0);
        assert_eq!(sessions[2]["saved_pct"], Value::Null);
        assert_eq!(sessions[2]["definitions"]["tokens"], 3100);
        let html = html::page(&r);
        assert!(
            html.contains("2 of 4 sessions have no result event"),
            "{html}"
        );
        assert!(html.contains(&format!("<td>{}</td>", id_text(40))));
    }

    #[test]
    fn a_window_of_sessions_without_results_shows_them() {
        let t = table(
            Vec::new(),
            vec![(
                30,
                SessionRecord {
                    results: 0,
                    ..summary(1.0, definitions(3100, 12))
                },
            )],
        );
        let r = SavingsReport::of(&t, &names(), options());
        assert!(!r.is_empty() && !r.has_results());
        let text = r.to_string();
        assert!(text.contains("nothing saved to report"), "{text}");
        assert!(!text.contains("nothing to report yet"), "{text}");
        assert!(text.contains("\nSavings per session\n"), "{text}");
        assert!(text.contains("3,100"), "{text}");
        assert!(!text.contains("Savings per day"), "{text}");
        let html = html::page(&r);
        assert!(html.contains("3,100") && !html.contains("<svg"), "{html}");
        assert_eq!(r.to_json()["days"], json!([]));
    }

    #[test]
    fn days_without_results_are_zero_rows_from_the_first_result_to_today() {
        // A 30-day window, results on two days three days apart, today
        // two days after the last.
        let t = table(
            vec![
                record(1, 10, T0 + 5, (100, 40, 0, 60)),
                record(1, 10, T0 + 3 * DAY + 5, (300, 100, 0, 200)),
            ],
            Vec::new(),
        );
        let r = SavingsReport::of(
            &t,
            &names(),
            SavingsOptions {
                now_ms: T0 + 5 * DAY + 7,
                ..options()
            },
        );
        assert_eq!(
            day_rows(&r),
            [
                ("2025-11-27", 1, 60),
                ("2025-11-28", 0, 0),
                ("2025-11-29", 0, 0),
                ("2025-11-30", 1, 200),
                ("2025-12-01", 0, 0),
                ("2025-12-02", 0, 0),
            ]
        );
        assert_eq!(sum(&mut r.days.iter().map(|d| d.figures)), r.total);
        let j = r.to_json();
        assert_eq!(j["days"].as_array().unwrap().len(), 6);
        assert_eq!(
            j["days"][1],
            json!({"date": "2025-11-28", "calls": 0, "tokens_baseline": 0, "tokens_final": 0,
                   "tokens_saved": 0, "saved_pct": null, "dedup_saved": 0, "encoder_saved": 0,
                   "expanded": {"calls": 0, "tokens": 0, "again_tokens": 0}})
        );
        let text = r.to_string();
        assert!(
            text.contains(
                "\n2025-11-29      0         0         0      0        -      0        0\n"
            ),
            "{text}"
        );
    }

    /// A reference saved 480 tokens of fs__read_text_file; the model then
    /// expanded its id and received 500 again. mem__read_graph's elided
    /// result saved 900 by the encoder; its head came again (300), and the
    /// range its hint named (200) was new.
    #[test]
    fn what_expand_delivered_is_taken_from_the_savings_of_its_tool() {
        use crate::event::Delivered;
        let mut t = table(
            vec![
                record(1, 10, T0 + 1000, (500, 507, -7, 0)),
                record(1, 10, T0 + 2000, (500, 20, 480, 0)),
                record(3, 10, T0 + 3000, (1200, 300, 0, 900)),
            ],
            vec![(10, summary(1.0, None))],
        );
        t.expansions = vec![
            expansion(1, 10, T0 + 2500, Delivered::Again, 500),
            expansion(3, 10, T0 + DAY, Delivered::AgainElided, 300),
            expansion(3, 10, T0 + DAY + 1, Delivered::New, 200),
        ];
        t.stats = ReadStats {
            files: 1,
            results: 3,
            sessions: 1,
            expansions: 3,
            ..ReadStats::default()
        };
        let r = SavingsReport::of(&t, &names(), options());
        let tool = |name: &str| {
            r.tools
                .iter()
                .find(|t| t.name.as_deref() == Some(name))
                .unwrap()
                .figures
        };
        let fs = tool("fs__read_text_file");
        assert_eq!(
            (fs.calls, fs.tokens_baseline, fs.tokens_final),
            (2, 1000, 1027)
        );
        assert_eq!((fs.dedup_saved, fs.encoder_saved), (473 - 500, 0));
        assert_eq!(
            fs.saved(),
            -27,
            "the reference saved less than was expanded"
        );
        let mem = tool("mem__read_graph");
        assert_eq!(
            (mem.calls, mem.tokens_baseline, mem.tokens_final),
            (1, 1400, 800)
        );
        assert_eq!((mem.dedup_saved, mem.encoder_saved), (0, 600));
        assert_eq!(
            mem.expanded,
            crate::event::ExpandedSummary {
                calls: 2,
                tokens: 500,
                again_tokens: 300
            }
        );
        // Each table sums to the one total; the split still adds up.
        let total = r.total;
        assert_eq!(total.calls, 3, "an expansion is no call");
        assert_eq!(total.saved(), total.dedup_saved + total.encoder_saved);
        assert_eq!(total.saved(), (-7 + 480 + 900) - 500 - 300);
        assert_eq!(sum(&mut r.days.iter().map(|d| d.figures)), total);
        assert_eq!(sum(&mut r.sessions.iter().map(|d| d.figures)), total);
        assert_eq!(sum(&mut r.servers.iter().map(|d| d.figures)), total);
        assert_eq!(sum(&mut r.tools.iter().map(|d| d.figures)), total);
        assert_eq!(day_rows(&r)[1], ("2025-11-28", 0, -300));

        let j = r.to_json();
        assert_eq!(
            j["total"]["expanded"],
            json!({"calls": 3, "tokens": 1000, "again_tokens": 800})
        );
        assert_eq!(j["read"]["expansions"], 3);
        let text = r.to_string();
        assert!(
            text.contains("received includes 1,000 tokens devboy_expand delivered in 3 calls: 800 again of what the model had been shown (taken back from the savings), 200 of parts it had not been shown (in the baseline too)\n"),
            "{text}"
        );
        assert!(
            text.contains("read 3 result events, 3 expansions and 1 session summary from 1 file\n"),
            "{text}"
        );
        assert!(html::page(&r).contains("received includes 1,000 tokens"));
    }

    /// A session killed mid-way (no summary) counts what its events say it
    /// delivered, expansions included; a summary's own totals never enter
    /// a figure, even when they disagree with the events.
    #[test]
    fn a_session_without_a_summary_counts_its_events_and_no_total() {
        use crate::event::Delivered;
        let mut t = table(
            vec![
                record(1, 10, T0 + 1000, (500, 507, -7, 0)),
                record(1, 10, T0 + 2000, (500, 20, 480, 0)),
                record(2, 20, T0 + 3000, (100, 40, 0, 60)),
            ],
            vec![(
                20,
                SessionRecord {
                    // A total that is not the sum of the events.
                    tokens_final: 999_999,
                    ..summary(1.0, None)
                },
            )],
        );
        t.expansions = vec![
            expansion(1, 10, T0 + 2500, Delivered::Again, 500),
            // Its results came before the window; its expansion is in it.
            expansion(3, 30, T0 + 4000, Delivered::Again, 70),
        ];
        let r = SavingsReport::of(&t, &names(), options());
        let row = |id: u64| {
            r.sessions
                .iter()
                .find(|s| s.session == id_text(id))
                .unwrap_or_else(|| panic!("session {id}"))
        };
        let killed = row(10);
        assert_eq!(killed.client, None, "no summary");
        assert_eq!(killed.results, None);
        assert_eq!(
            (
                killed.figures.calls,
                killed.figures.tokens_baseline,
                killed.figures.tokens_final
            ),
            (2, 1000, 527 + 500)
        );
        assert_eq!(killed.figures.dedup_saved, 473 - 500);
        assert_eq!(row(20).figures.tokens_final, 40, "the events, not 999,999");
        let late = row(30);
        assert_eq!((late.first_ms, late.figures.calls), (None, 0));
        assert_eq!(late.figures.tokens_final, 70);
        assert_eq!(late.figures.dedup_saved, -70);
        assert_eq!(sum(&mut r.sessions.iter().map(|s| s.figures)), r.total);
        assert_eq!(r.total.tokens_final, 527 + 500 + 40 + 70);
        assert!(!r.total.scaled);
    }

    #[test]
    fn report_and_analyze_sum_results_alike() {
        // Three sessions: sampled at 0.3 (uneven weights), complete, and
        // without a summary; three tools.
        let mut records = Vec::new();
        for (session, n) in [(1u64, 7u64), (2, 5), (3, 4)] {
            for i in 0..n {
                let tool = 1 + (session + i) % 3;
                let b = 100 + 37 * i as u32 + 11 * session as u32;
                let ds = if i % 2 == 0 { -6 } else { 40 };
                let f = b - 30 - ds.max(0) as u32;
                records.push(record(
                    tool,
                    session,
                    T0 + i * DAY / 3,
                    (b, f, ds, 30 + ds.min(0).abs()),
                ));
            }
        }
        let mut t = table(
            records,
            vec![(1, summary(0.3, None)), (2, summary(1.0, None))],
        );
        // Expansions, never sampled, in every session; one of a tool with
        // no result in the window.
        use crate::event::Delivered;
        t.expansions = vec![
            expansion(1, 1, T0 + 5, Delivered::Again, 120),
            expansion(2, 2, T0 + 6, Delivered::AgainElided, 40),
            expansion(3, 3, T0 + 7, Delivered::New, 33),
            expansion(9, 2, T0 + 8, Delivered::Again, 11),
        ];
        let report = SavingsReport::of(&t, &names(), options());
        let analysis = crate::aggregate::analyze(
            &t,
            crate::aggregate::SequenceParams {
                near_min_body_bytes: 1024,
                ttl_ms: 1_800_000,
            },
        );
        assert_eq!(report.total, analysis.total.tally());
        assert!(report.total.scaled);
        assert_eq!(report.tools.len(), analysis.endpoints.len());
        for e in &analysis.endpoints {
            let row = report
                .tools
                .iter()
                .find(|t| t.id == id_text(e.tool))
                .unwrap_or_else(|| panic!("tool {} in the report", e.tool));
            assert_eq!(row.figures, e.tally(), "tool {}", e.tool);
        }
        assert_eq!(report.total.expanded.calls, 4);
        // What models results sees none of it: no call, no evidence, and
        // the results' own figures as without the expansions.
        let without = crate::aggregate::analyze(
            &EventTable {
                expansions: Vec::new(),
                ..t.clone()
            },
            crate::aggregate::SequenceParams {
                near_min_body_bytes: 1024,
                ttl_ms: 1_800_000,
            },
        );
        for e in &without.endpoints {
            let with = analysis.endpoint(e.tool).unwrap();
            assert_eq!((with.calls, with.observed), (e.calls, e.observed));
            let f = e.tally();
            assert_eq!(
                with.results_figures(),
                crate::event::TokenFigures {
                    tokens_baseline: f.tokens_baseline,
                    tokens_final: f.tokens_final,
                    dedup_saved: f.dedup_saved,
                    encoder_saved: f.encoder_saved,
                }
            );
        }
        assert_eq!(analysis.endpoint(9).map(|e| e.observed), Some(0));
    }
}
