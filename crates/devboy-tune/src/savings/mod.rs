//! `devboy tune report`: what devboy saved over time, per day, per
//! session, per server and per tool, as text tables for people, JSON for
//! scripts ([`SavingsReport::to_json`], keys in `docs/telemetry.md`) and
//! one self-contained HTML page with charts ([`html`]).
//!
//! The figures are sums over the result events of the window, read by the
//! tuner's one reader ([`crate::read`]): `tokens_baseline` (what the
//! client would have forwarded to the model without devboy),
//! `tokens_final` (what it forwarded), and the saving split into L0 dedup
//! and L1/L2 encoders. Every table sums the same events, so each table's
//! total is the same. Events of a sampled session weigh `1/sample_rate`
//! ([`crate::aggregate::session_weight`]), as in `tune analyze`; such
//! figures are estimates and the report says so. Tool definitions come
//! from the session summaries, the only place they are recorded.
//!
//! A server is the exposed tool name's prefix (before the first `__`);
//! names come from the user's own `endpoint-names.json`, and a tool whose
//! hash it does not name is shown by its hash under `(unnamed)`.

pub mod html;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;

use serde_json::{json, Value};

use crate::aggregate::session_weight;
use crate::error::TuneError;
use crate::event::{id_text, ClientKind, DefinitionsSummary, Record};
use crate::names::ExposedNames;
use crate::read::{read_events, EventTable, ReadOptions, ReadStats};
use crate::table::{date, int, pct, Align, TextTable};

/// The version of [`SavingsReport::to_json`]'s layout: keys are only
/// added under it; a key removed or changing meaning bumps it.
pub const JSON_VERSION: u32 = 1;

/// The server of a tool whose name is not known here.
pub const UNNAMED_SERVER: &str = "(unnamed)";

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

/// The token figures of a group of results. With sampled sessions in the
/// group they are estimates, rounded once from weighted sums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Results.
    pub calls: u64,
    /// Tokens the model would have received without devboy.
    pub tokens_baseline: u64,
    /// Tokens it received.
    pub tokens_final: u64,
    /// Of the saving, L0's (references to bodies already sent; negative
    /// when the id lines cost more than the references saved).
    pub dedup_saved: i64,
    /// Of the saving, L1/L2's (templates, encoders, elision).
    pub encoder_saved: i64,
}

impl Tally {
    /// Tokens saved: `tokens_baseline - tokens_final` (negative when
    /// devboy cost more than it saved).
    pub fn saved(&self) -> i64 {
        self.tokens_baseline as i64 - self.tokens_final as i64
    }

    /// The saving as a percentage of the baseline; `None` with no baseline.
    pub fn saved_pct(&self) -> Option<f64> {
        (self.tokens_baseline > 0)
            .then(|| self.saved() as f64 * 100.0 / self.tokens_baseline as f64)
    }

    fn json(&self) -> serde_json::Map<String, Value> {
        let v = json!({
            "calls": self.calls,
            "tokens_baseline": self.tokens_baseline,
            "tokens_final": self.tokens_final,
            "tokens_saved": self.saved(),
            "saved_pct": self.saved_pct().map(|p| (p * 10.0).round() / 10.0),
            "dedup_saved": self.dedup_saved,
            "encoder_saved": self.encoder_saved,
        });
        match v {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        }
    }

    fn cells(&self) -> Vec<String> {
        vec![
            int(self.calls as i64),
            int(self.tokens_baseline as i64),
            int(self.tokens_final as i64),
            int(self.saved()),
            self.saved_pct().map_or_else(|| "-".to_owned(), pct),
            int(self.dedup_saved),
            int(self.encoder_saved),
        ]
    }
}

/// Weighted sums of a group, rounded once into a [`Tally`].
#[derive(Clone, Copy, Debug, Default)]
struct Sums {
    calls: f64,
    baseline: f64,
    fin: f64,
    dedup: f64,
    encoder: f64,
}

impl Sums {
    fn add(&mut self, r: &Record, weight: f64) {
        self.calls += weight;
        self.baseline += f64::from(r.tokens_baseline) * weight;
        self.fin += f64::from(r.tokens_final) * weight;
        self.dedup += f64::from(r.dedup_saved) * weight;
        self.encoder += f64::from(r.encoder_saved) * weight;
    }

    fn merge(&mut self, other: &Sums) {
        self.calls += other.calls;
        self.baseline += other.baseline;
        self.fin += other.fin;
        self.dedup += other.dedup;
        self.encoder += other.encoder;
    }

    fn tally(&self) -> Tally {
        Tally {
            calls: self.calls.round() as u64,
            tokens_baseline: self.baseline.round() as u64,
            tokens_final: self.fin.round() as u64,
            dedup_saved: self.dedup.round() as i64,
            encoder_saved: self.encoder.round() as i64,
        }
    }
}

/// One day (UTC) of the window that has results.
#[derive(Clone, Debug, PartialEq)]
pub struct DayRow {
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
    /// Its figures.
    pub figures: Tally,
}

/// One devboy session (one `devboy mcp` process, or one HTTP client).
#[derive(Clone, Debug, PartialEq)]
pub struct SessionRow {
    /// `h(session id)`, as telemetry writes it.
    pub session: String,
    /// The client, from the session's summary (`None` without one: the
    /// session is still running, or was killed).
    pub client: Option<ClientKind>,
    /// Its first result in the window, Unix ms.
    pub first_ms: u64,
    /// Its last result in the window, Unix ms.
    pub last_ms: u64,
    /// The sampling rate its summary names (1 without one).
    pub sample_rate: f64,
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
    /// Whether figures are scaled up from sampled sessions.
    pub estimated: bool,
    /// All results of the window.
    pub total: Tally,
    /// Per day, oldest first.
    pub days: Vec<DayRow>,
    /// Per session, by first result.
    pub sessions: Vec<SessionRow>,
    /// Per server, most saved first.
    pub servers: Vec<ServerRow>,
    /// Per tool, most saved first.
    pub tools: Vec<ToolRow>,
    /// Why names are missing, when the names map could not be used.
    pub names_note: Option<String>,
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

impl SavingsReport {
    /// The report of `table`, with names from `names`.
    pub fn of(table: &EventTable, names: &ExposedNames, options: SavingsOptions) -> Self {
        let weights: HashMap<u64, f64> = table
            .sessions
            .iter()
            .map(|(id, s)| (*id, session_weight(Some(s))))
            .filter(|(_, w)| *w != 1.0)
            .collect();
        let mut total = Sums::default();
        let mut days: BTreeMap<u64, Sums> = BTreeMap::new();
        // session → (first, last, sums)
        let mut sessions: HashMap<u64, (u64, u64, Sums)> = HashMap::new();
        let mut tools: HashMap<u64, Sums> = HashMap::new();
        for r in &table.records {
            let w = weights.get(&r.session).copied().unwrap_or(1.0);
            total.add(r, w);
            days.entry(r.ts_ms / 86_400_000).or_default().add(r, w);
            let s = sessions
                .entry(r.session)
                .or_insert((r.ts_ms, r.ts_ms, Sums::default()));
            s.0 = s.0.min(r.ts_ms);
            s.1 = s.1.max(r.ts_ms);
            s.2.add(r, w);
            tools.entry(r.tool).or_default().add(r, w);
        }

        let mut session_rows: Vec<SessionRow> = sessions
            .iter()
            .map(|(id, (first, last, sums))| {
                let summary = table.sessions.get(id);
                SessionRow {
                    session: id_text(*id),
                    client: summary.map(|s| s.client),
                    first_ms: *first,
                    last_ms: *last,
                    sample_rate: summary.map_or(1.0, |s| s.sample_rate),
                    figures: sums.tally(),
                    definitions: summary.and_then(|s| s.definitions),
                }
            })
            .collect();
        session_rows.sort_by(|a, b| (a.first_ms, &a.session).cmp(&(b.first_ms, &b.session)));

        let mut servers: BTreeMap<String, Sums> = BTreeMap::new();
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

        let tokenizers = (0..table.vocab.tokenizers.len())
            .filter_map(|i| table.vocab.tokenizers.get(i as u8))
            .map(str::to_owned)
            .collect();
        SavingsReport {
            read: table.stats.clone(),
            tokenizers,
            estimated: !weights.is_empty(),
            total: total.tally(),
            days: days
                .into_iter()
                .map(|(day, sums)| DayRow {
                    date: date(day * 86_400_000),
                    figures: sums.tally(),
                })
                .collect(),
            sessions: session_rows,
            servers: server_rows,
            tools: tool_rows,
            names_note: (!table.records.is_empty() && names.is_empty())
                .then(|| names.note.clone())
                .flatten(),
            options,
        }
    }

    /// Whether the window holds no result.
    pub fn is_empty(&self) -> bool {
        self.total.calls == 0 && self.days.is_empty()
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
        .map(|(n, one, many)| format!("{} {}", int(*n as i64), if *n == 1 { one } else { many }))
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

    /// The message for a window without results.
    pub fn empty_message(&self) -> String {
        format!(
            "no tool results in the last {} days under {}: nothing to report yet. devboy records them while `devboy mcp` (or `devboy serve`) runs, unless telemetry is off.",
            self.options.days,
            self.options.input.display()
        )
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

impl fmt::Display for SavingsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.heading())?;
        let r = &self.read;
        writeln!(
            f,
            "read {} result events and {} session summaries from {} files",
            int(r.results as i64),
            int(r.sessions as i64),
            r.files
        )?;
        if let Some(skipped) = self.skipped() {
            writeln!(f, "skipped: {skipped}")?;
        }
        for (path, error) in &r.unreadable {
            writeln!(f, "unreadable, skipped: {}: {error}", path.display())?;
        }
        if self.is_empty() {
            return writeln!(f, "\n{}", self.empty_message());
        }
        if let Some(note) = &self.names_note {
            writeln!(f, "names: {note}; tools are shown by their hash")?;
        }
        writeln!(
            f,
            "baseline: tokens the model would have received without devboy; received: tokens it received; saved = baseline - received, of which dedup (references to results already sent) and encoder (shorter lossless formats)"
        )?;
        let mark = if self.estimated { " (~ estimates)" } else { "" };

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

        writeln!(f, "\nSavings per session{mark}")?;
        let t = figures_table(
            &[
                ("session", Align::Left),
                ("client", Align::Left),
                ("first result", Align::Left),
            ],
            self.sessions.iter().map(|s| {
                let definitions = s.definitions.map_or_else(
                    || vec!["-".to_owned(), "-".to_owned()],
                    |d| vec![int(d.tokens as i64), int(d.tools as i64)],
                );
                (
                    vec![
                        s.session.clone(),
                        s.client.map_or("-", client_name).to_owned(),
                        minute(s.first_ms),
                    ],
                    &s.figures,
                    definitions,
                )
            }),
            &[("definitions", Align::Right), ("tools", Align::Right)],
            &self.total,
        );
        write!(f, "{}", t.render())?;
        writeln!(
            f,
            "definitions: tokens of the tool definitions every model request of the session carried (the last tools/list devboy served), when its summary recorded them"
        )?;

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
    use crate::event::{SessionRecord, Vocabulary};

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
                encoder_saved: 715
            }
        );
        assert_eq!(r.total.saved(), 1610);
        let days: Vec<(&str, u64, i64)> = r
            .days
            .iter()
            .map(|d| (d.date.as_str(), d.figures.calls, d.figures.saved()))
            .collect();
        assert_eq!(
            days,
            [
                ("2025-11-27", 2, 1500),
                ("2025-11-28", 2, 100),
                ("2025-11-29", 1, 10)
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
        assert_eq!((first.first_ms, first.last_ms), (T0 + 1000, T0 + DAY + 5));
        assert_eq!(first.client, Some(ClientKind::ClaudeCode));
        assert_eq!(first.definitions.map(|d| d.tokens), Some(4000));
        assert_eq!(r.sessions[1].client, None, "no summary yet");
        // Each table sums to the total.
        let sum = |it: &mut dyn Iterator<Item = Tally>| {
            it.fold(Tally::default(), |a, b| Tally {
                calls: a.calls + b.calls,
                tokens_baseline: a.tokens_baseline + b.tokens_baseline,
                tokens_final: a.tokens_final + b.tokens_final,
                dedup_saved: a.dedup_saved + b.dedup_saved,
                encoder_saved: a.encoder_saved + b.encoder_saved,
            })
        };
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
        assert!(r.to_string().contains("~ marks estimates"));
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
        assert_eq!(j["version"], 1);
        assert_eq!(
            j["total"],
            json!({"calls": 1, "tokens_baseline": 10, "tokens_final": 4, "tokens_saved": 6,
                   "saved_pct": 60.0, "dedup_saved": 0, "encoder_saved": 6})
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
                "tools"
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
}
