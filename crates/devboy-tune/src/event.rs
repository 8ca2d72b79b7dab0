//! The telemetry event schema as the tuner reads it (`docs/telemetry.md`,
//! schema version 1), and the compact [`Record`] each result event becomes.
//!
//! The line is read into the tuner's own borrowed, all-optional [`Line`]
//! rather than the writer's record types, so that a line missing what the
//! tuner does not need still counts, and reading stays allocation-free;
//! the fixed vocabularies ([`DedupOutcome`], [`ClientKind`]) are the
//! writer's own enums. A test in [`crate::read`] writes events through
//! `devboy_telemetry`'s recorder and sink and reads every field back.
//! Unknown fields are ignored (the schema grows by additions within
//! version 1); the fields the tuner needs are checked, and a line without
//! them is malformed, never an error.
//!
//! A [`Record`] is 72 bytes, about a tenth of a JSON line: a million events
//! fit in memory, which lets every analysis and every simulation run over
//! the same table in recorded order instead of re-reading files.

use std::borrow::Cow;

use serde::Deserialize;

/// The event's fixed vocabularies are the writer's own types
/// (`devboy_telemetry`), so the two sides cannot spell them differently.
pub use devboy_telemetry::{ClientKind, DedupOutcome, SpeculationKind, SpeculationSummary};

use devboy_core::speculation::{DeclineReason, PrefetchEnd, Served};

/// The schema version this reader understands.
pub const SCHEMA_VERSION: u32 = 1;

/// One JSONL line, result or session summary, with every field optional
/// so that a line's kind decides which ones must be present.
#[derive(Deserialize)]
pub(crate) struct Line<'a> {
    #[serde(default)]
    pub v: Option<u32>,
    #[serde(borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(default)]
    pub ts_ms: Option<u64>,
    #[serde(borrow, default)]
    pub session: Option<Cow<'a, str>>,
    // ---- result events
    #[serde(borrow, default)]
    pub tool: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub endpoint_class: Option<Cow<'a, str>>,
    #[serde(default)]
    pub response_chars: Option<u64>,
    #[serde(borrow, default)]
    pub shape: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub inner_formats: Option<Vec<Cow<'a, str>>>,
    #[serde(borrow, default)]
    pub fingerprint: Option<Cow<'a, str>>,
    #[serde(default)]
    pub dedup: Option<DedupOutcome>,
    #[serde(borrow, default)]
    pub format: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub template: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub tokenizer: Option<Cow<'a, str>>,
    #[serde(default)]
    pub tokens_baseline: Option<i64>,
    #[serde(default)]
    pub tokens_final: Option<i64>,
    #[serde(default)]
    pub dedup_saved: Option<i64>,
    #[serde(default)]
    pub encoder_saved: Option<i64>,
    #[serde(default)]
    pub elided: Option<bool>,
    #[serde(default)]
    pub context_partition: Option<u64>,
    #[serde(default)]
    pub is_error: Option<bool>,
    #[serde(borrow, default)]
    pub served: Option<Cow<'a, str>>,
    // ---- speculation events
    #[serde(default)]
    pub event: Option<SpeculationKind>,
    #[serde(borrow, default)]
    pub reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub end: Option<Cow<'a, str>>,
    #[serde(default)]
    pub predicted_tokens: Option<u64>,
    #[serde(default)]
    pub actual_tokens: Option<u64>,
    // ---- session summaries
    #[serde(default)]
    pub results: Option<u64>,
    #[serde(default)]
    pub sample_rate: Option<f64>,
    #[serde(default)]
    pub compactions: Option<u64>,
    #[serde(default)]
    pub dropped: Option<u64>,
    #[serde(default)]
    pub client: Option<ClientKind>,
    #[serde(default)]
    pub speculation: Option<SpeculationSummary>,
    // ---- retrieval events
    #[serde(borrow, default)]
    pub strategy: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub provider: Option<Cow<'a, str>>,
    #[serde(default)]
    pub calls: Option<u64>,
    #[serde(default)]
    pub failed_calls: Option<u64>,
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub cached_input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
}

/// "No name" in a [`Record`]'s small name indexes.
pub const NONE: u8 = u8::MAX;

/// One result event, compacted. Names that repeat (shape, format, …) are
/// indexes into the table's [`Vocabulary`]; tool and session hashes are
/// their 64-bit values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Record {
    /// Unix milliseconds.
    pub ts_ms: u64,
    /// The body fingerprint (valid when [`Record::has_fingerprint`]).
    pub fingerprint: u128,
    /// `h(exposed tool name)`.
    pub tool: u64,
    /// `h(session id)`.
    pub session: u64,
    /// The context partition.
    pub partition: u32,
    /// Characters of the forwarded body.
    pub response_chars: u32,
    /// Tokens the client would have forwarded.
    pub tokens_baseline: u32,
    /// Tokens sent.
    pub tokens_final: u32,
    /// Tokens saved by L0 (negative: the id line).
    pub dedup_saved: i32,
    /// Tokens saved by L1/L2.
    pub encoder_saved: i32,
    /// Inner formats, one bit per [`Vocabulary::inner`] index.
    pub inner: u32,
    /// [`Vocabulary::shapes`] index, or [`NONE`].
    pub shape: u8,
    /// [`Vocabulary::formats`] index, or [`NONE`].
    pub format: u8,
    /// [`Vocabulary::templates`] index, or [`NONE`].
    pub template: u8,
    /// [`Vocabulary::classes`] index, or [`NONE`].
    pub class: u8,
    /// What L0 did.
    pub dedup: DedupOutcome,
    pub(crate) flags: u8,
}

const ELIDED: u8 = 1;
const ERROR: u8 = 2;
const HAS_FINGERPRINT: u8 = 4;
/// Three bits at this shift: what served the call (0 upstream, 1 prefetch,
/// 2 joined, 3 fail-fast, 4 an inlined follow-up).
const SERVED_SHIFT: u8 = 3;
const SERVED_MASK: u8 = 7 << SERVED_SHIFT;

impl Record {
    /// Parts of the body were elided (so it was not delivered in full).
    pub fn elided(&self) -> bool {
        self.flags & ELIDED != 0
    }

    /// The result was an error (passed through untouched).
    pub fn is_error(&self) -> bool {
        self.flags & ERROR != 0
    }

    /// The event carried a well-formed fingerprint.
    pub fn has_fingerprint(&self) -> bool {
        self.flags & HAS_FINGERPRINT != 0
    }

    /// What answered the agent's call.
    pub fn served(&self) -> Served {
        match (self.flags & SERVED_MASK) >> SERVED_SHIFT {
            1 => Served::Prefetch,
            2 => Served::Joined,
            3 => Served::FailFast,
            4 => Served::Inline,
            _ => Served::Upstream,
        }
    }

    /// Sets what served the call.
    pub fn with_served(mut self, served: Served) -> Self {
        let bits = match served {
            Served::Upstream => 0,
            Served::Prefetch => 1,
            Served::Joined => 2,
            Served::FailFast => 3,
            Served::Inline => 4,
        };
        self.flags = (self.flags & !SERVED_MASK) | (bits << SERVED_SHIFT);
        self
    }

    /// Tokens saved in all (`baseline - final`).
    pub fn saved(&self) -> i64 {
        i64::from(self.tokens_baseline) - i64::from(self.tokens_final)
    }

    /// Sets the flags; for builders of synthetic tables (tests, benches).
    pub fn with_flags(mut self, elided: bool, is_error: bool, has_fingerprint: bool) -> Self {
        self.flags = (self.flags & SERVED_MASK)
            | (if elided { ELIDED } else { 0 })
            | (if is_error { ERROR } else { 0 })
            | (if has_fingerprint { HAS_FINGERPRINT } else { 0 });
        self
    }

    /// A record with every field zero or none, for builders.
    pub fn blank(tool: u64, session: u64) -> Self {
        Record {
            ts_ms: 0,
            fingerprint: 0,
            tool,
            session,
            partition: 0,
            response_chars: 0,
            tokens_baseline: 0,
            tokens_final: 0,
            dedup_saved: 0,
            encoder_saved: 0,
            inner: 0,
            shape: NONE,
            format: NONE,
            template: NONE,
            class: NONE,
            dedup: DedupOutcome::Miss,
            flags: 0,
        }
    }
}

/// A small name table: at most 254 names, the rest folded into `other`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Names {
    names: Vec<String>,
}

/// The name that absorbs overflow.
const OTHER: &str = "other";

impl Names {
    /// The index of `name`, added if new.
    pub fn index(&mut self, name: &str) -> u8 {
        if let Some(i) = self.find(name) {
            return i;
        }
        // 254 names at most (indexes 0..=253; 255 is NONE), the last slot
        // kept for `other`.
        const LIMIT: usize = NONE as usize - 1;
        if self.names.len() + 1 < LIMIT || (self.names.len() + 1 == LIMIT && name == OTHER) {
            self.names.push(name.to_owned());
            return (self.names.len() - 1) as u8;
        }
        match self.find(OTHER) {
            Some(i) => i,
            None => {
                self.names.push(OTHER.to_owned());
                (self.names.len() - 1) as u8
            }
        }
    }

    /// The name at `index` (`None` for [`NONE`]).
    pub fn get(&self, index: u8) -> Option<&str> {
        self.names.get(usize::from(index)).map(String::as_str)
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The index of `name`, if present.
    pub fn find(&self, name: &str) -> Option<u8> {
        self.names.iter().position(|n| n == name).map(|i| i as u8)
    }

    /// Maps every index of `other` into this table (adding names).
    pub(crate) fn absorb(&mut self, other: &Names) -> Vec<u8> {
        other.names.iter().map(|n| self.index(n)).collect()
    }
}

/// The name tables of a record table.
#[derive(Clone, Debug, Default)]
pub struct Vocabulary {
    /// Shapes (`markdown_table`, `array_of_objects`, …).
    pub shapes: Names,
    /// Encoders or templates used (`format`).
    pub formats: Names,
    /// L1 templates used (`template`).
    pub templates: Names,
    /// Inner formats; at most 32 (a record holds them as bits), the rest
    /// are dropped.
    pub inner: Names,
    /// Endpoint classes (`read`, `list`, …).
    pub classes: Names,
    /// Tokenizers named by the events.
    pub tokenizers: Names,
}

/// Why a line was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Skip {
    /// Not JSON, or a required field missing or of the wrong type.
    Malformed,
    /// A schema version this reader does not know.
    Unsupported,
    /// A `kind` this reader does not use.
    OtherKind,
    /// Before the time window.
    Old,
}

/// One session summary event, compacted to what the tuner uses.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionRecord {
    /// Results processed (before sampling).
    pub results: u64,
    /// The sampling rate applied to result events.
    pub sample_rate: f64,
    /// Partitions advanced (compactions and context resets).
    pub compactions: u64,
    /// Sampled events the writer dropped because it fell behind.
    pub dropped: u64,
    /// Which client the session served.
    pub client: ClientKind,
    /// What speculation did in the session, when it did anything.
    pub speculation: Option<SpeculationSummary>,
}

/// One speculation event (`"kind": "speculation"`), compacted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpeculationRecord {
    /// `h(session id)`.
    pub session: u64,
    /// `h(exposed tool name)` of the follow-up's tool.
    pub tool: u64,
    /// What happened.
    pub kind: SpeculationKind,
    /// `declined`: why (`None` for a reason this reader does not know).
    pub reason: Option<DeclineReason>,
    /// `ended`: how (`None` for an end this reader does not know).
    pub end: Option<PrefetchEnd>,
    /// The planner's prediction, in tokens.
    pub predicted_tokens: u64,
    /// `ended`: the landed result's tokens (0: it never landed).
    pub actual_tokens: u64,
}

impl SessionRecord {
    /// Whether every result of the session has its event: not sampled,
    /// nothing dropped.
    pub fn complete(&self) -> bool {
        self.sample_rate >= 1.0 && self.dropped == 0
    }
}

/// One `find_files` query (`"kind": "retrieval"`), compacted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetrievalRecord {
    /// A model is configured for `find_files`.
    pub configured: bool,
    /// The model answered (the strategy was `beam` or `block`).
    pub answered: bool,
    /// Model calls answered.
    pub calls: u64,
    /// Model calls that failed after their retries.
    pub failed_calls: u64,
    /// Input tokens, cached or not.
    pub input_tokens: u64,
    /// Of them, read from the provider's cache.
    pub cached_input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

/// What one line turned into.
pub(crate) enum Parsed {
    Result(Record),
    Session(u64, SessionRecord),
    Speculation(SpeculationRecord),
    Retrieval(RetrievalRecord),
}

/// Parses one line. `since_ms` drops older events; `vocab` collects names;
/// `odd_ids` keeps identifiers that are not 16 hex digits (so they can be
/// shown as written).
pub(crate) fn parse_line(
    bytes: &[u8],
    since_ms: u64,
    vocab: &mut Vocabulary,
    odd_ids: &mut Vec<(u64, String)>,
) -> Result<Parsed, Skip> {
    let line: Line<'_> = serde_json::from_slice(bytes).map_err(|_| Skip::Malformed)?;
    match line.v {
        Some(v) if v > SCHEMA_VERSION => return Err(Skip::Unsupported),
        _ => {}
    }
    let ts_ms = line.ts_ms.ok_or(Skip::Malformed)?;
    let session = line.session.as_deref().ok_or(Skip::Malformed)?;
    match line.kind.as_deref() {
        Some("result") => {}
        Some("session") => {
            if ts_ms < since_ms {
                return Err(Skip::Old);
            }
            let summary = SessionRecord {
                results: line.results.unwrap_or(0),
                sample_rate: line
                    .sample_rate
                    .filter(|r| r.is_finite() && *r > 0.0)
                    .unwrap_or(1.0),
                compactions: line.compactions.unwrap_or(0),
                dropped: line.dropped.unwrap_or(0),
                client: line.client.unwrap_or(ClientKind::Other),
                speculation: line.speculation.filter(|s| !s.is_empty()),
            };
            return Ok(Parsed::Session(id64(session, odd_ids), summary));
        }
        Some("speculation") => {
            let tool = line.tool.as_deref().ok_or(Skip::Malformed)?;
            let kind = line.event.ok_or(Skip::Malformed)?;
            if ts_ms < since_ms {
                return Err(Skip::Old);
            }
            return Ok(Parsed::Speculation(SpeculationRecord {
                session: id64(session, odd_ids),
                tool: id64(tool, odd_ids),
                kind,
                reason: line.reason.as_deref().and_then(DeclineReason::from_name),
                end: line.end.as_deref().and_then(PrefetchEnd::from_name),
                predicted_tokens: line.predicted_tokens.unwrap_or(0),
                actual_tokens: line.actual_tokens.unwrap_or(0),
            }));
        }
        Some("retrieval") => {
            let strategy = line.strategy.as_deref().ok_or(Skip::Malformed)?;
            if ts_ms < since_ms {
                return Err(Skip::Old);
            }
            return Ok(Parsed::Retrieval(RetrievalRecord {
                configured: line.provider.is_some(),
                answered: strategy != "offline",
                calls: line.calls.unwrap_or(0),
                failed_calls: line.failed_calls.unwrap_or(0),
                input_tokens: line.input_tokens.unwrap_or(0),
                cached_input_tokens: line.cached_input_tokens.unwrap_or(0),
                output_tokens: line.output_tokens.unwrap_or(0),
            }));
        }
        Some(_) => return Err(Skip::OtherKind),
        None => return Err(Skip::Malformed),
    }
    let tool = line.tool.as_deref().ok_or(Skip::Malformed)?;
    let baseline = line.tokens_baseline.ok_or(Skip::Malformed)?;
    let fin = line.tokens_final.ok_or(Skip::Malformed)?;
    let dedup = line.dedup.ok_or(Skip::Malformed)?;
    if ts_ms < since_ms {
        return Err(Skip::Old);
    }
    let fingerprint = line.fingerprint.as_deref().and_then(parse_fingerprint);
    let mut inner = 0u32;
    for name in line.inner_formats.iter().flatten() {
        let i = vocab.inner.index(name);
        if i < 32 {
            inner |= 1 << i;
        }
    }
    let record = Record {
        ts_ms,
        fingerprint: fingerprint.unwrap_or(0),
        tool: id64(tool, odd_ids),
        session: id64(session, odd_ids),
        partition: clamp_u32(line.context_partition.unwrap_or(0) as i64),
        response_chars: clamp_u32(line.response_chars.unwrap_or(0) as i64),
        tokens_baseline: clamp_u32(baseline),
        tokens_final: clamp_u32(fin),
        dedup_saved: clamp_i32(line.dedup_saved.unwrap_or(0)),
        encoder_saved: clamp_i32(line.encoder_saved.unwrap_or(0)),
        inner,
        shape: name_index(&mut vocab.shapes, line.shape.as_deref()),
        format: name_index(&mut vocab.formats, line.format.as_deref()),
        template: name_index(&mut vocab.templates, line.template.as_deref()),
        class: name_index(&mut vocab.classes, line.endpoint_class.as_deref()),
        dedup,
        flags: 0,
    }
    .with_flags(
        line.elided.unwrap_or(false),
        line.is_error.unwrap_or(false),
        fingerprint.is_some(),
    )
    .with_served(match line.served.as_deref() {
        Some("prefetch") => Served::Prefetch,
        Some("joined") => Served::Joined,
        Some("fail_fast") => Served::FailFast,
        Some("inline") => Served::Inline,
        _ => Served::Upstream,
    });
    if let Some(t) = line.tokenizer.as_deref() {
        vocab.tokenizers.index(t);
    }
    Ok(Parsed::Result(record))
}

fn name_index(names: &mut Names, name: Option<&str>) -> u8 {
    match name {
        Some(n) if !n.is_empty() => names.index(n),
        _ => NONE,
    }
}

fn parse_fingerprint(s: &str) -> Option<u128> {
    if s.is_empty() || s.len() > 32 {
        return None;
    }
    u128::from_str_radix(s, 16).ok()
}

/// A hashed identifier as 64 bits: its value when it is 16 hex digits (as
/// the schema says), else a stable hash of the text, remembered in
/// `odd_ids` so that it can be shown as written.
pub(crate) fn id64(s: &str, odd_ids: &mut Vec<(u64, String)>) -> u64 {
    if s.len() == 16
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        if let Ok(v) = u64::from_str_radix(s, 16) {
            return v;
        }
    }
    let v = devboy_core::hash::fnv1a64(s.as_bytes());
    if !odd_ids.iter().any(|(k, _)| *k == v) {
        odd_ids.push((v, s.to_owned()));
    }
    v
}

/// The text of an identifier: 16 lower-case hex digits, or the odd form it
/// was written in.
pub fn id_text(id: u64, odd_ids: &[(u64, String)]) -> String {
    odd_ids
        .iter()
        .find(|(k, _)| *k == id)
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| format!("{id:016x}"))
}

fn clamp_u32(v: i64) -> u32 {
    v.clamp(0, i64::from(u32::MAX)) as u32
}

fn clamp_i32(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESULT: &str = r#"{"v":1,"kind":"result","ts_ms":1700000000000,"session":"00000000000000aa","call":"x","tool":"00000000000000bb","upstream":"u","endpoint_class":"list","response_chars":2048,"shape":"markdown_table","inner_formats":["url","hash"],"fingerprint":"0000000000000000000000000000beef","path_hashes":[],"dedup":"miss","layer":"L1","action":"encoded","format":"md_tables_csv","template":"md_tables_csv","tokenizer":"o200k_base","tokens_baseline":600,"tokens_final":250,"dedup_saved":-6,"encoder_saved":356,"elided":false,"context_partition":2,"is_error":false,"prefetched":null,"prefetch_hit":null,"future_field":{"x":1}}"#;

    fn parse(line: &str, since: u64) -> Result<Parsed, Skip> {
        parse_line(
            line.as_bytes(),
            since,
            &mut Vocabulary::default(),
            &mut Vec::new(),
        )
    }

    #[test]
    fn result_line_with_unknown_fields() {
        let mut vocab = Vocabulary::default();
        let Ok(Parsed::Result(r)) = parse_line(RESULT.as_bytes(), 0, &mut vocab, &mut Vec::new())
        else {
            panic!("not a result");
        };
        assert_eq!(r.tool, 0xbb);
        assert_eq!(r.session, 0xaa);
        assert_eq!(r.fingerprint, 0xbeef);
        assert!(r.has_fingerprint() && !r.elided() && !r.is_error());
        assert_eq!(
            (
                r.tokens_baseline,
                r.tokens_final,
                r.dedup_saved,
                r.encoder_saved
            ),
            (600, 250, -6, 356)
        );
        assert_eq!(r.partition, 2);
        assert_eq!(vocab.shapes.get(r.shape), Some("markdown_table"));
        assert_eq!(vocab.templates.get(r.template), Some("md_tables_csv"));
        assert_eq!(r.inner.count_ones(), 2);
        assert_eq!(r.dedup, DedupOutcome::Miss);
    }

    #[test]
    fn malformed_unsupported_other_and_old() {
        assert_eq!(parse("not json", 0).err(), Some(Skip::Malformed));
        assert_eq!(
            parse("{\"kind\":\"result\"", 0).err(),
            Some(Skip::Malformed)
        );
        let no_tool = RESULT.replace("\"tool\":\"00000000000000bb\",", "");
        assert_eq!(parse(&no_tool, 0).err(), Some(Skip::Malformed));
        let bad_dedup = RESULT.replace("\"dedup\":\"miss\"", "\"dedup\":\"maybe\"");
        assert_eq!(parse(&bad_dedup, 0).err(), Some(Skip::Malformed));
        let v2 = RESULT.replace("\"v\":1", "\"v\":2");
        assert_eq!(parse(&v2, 0).err(), Some(Skip::Unsupported));
        let other = RESULT.replace("\"kind\":\"result\"", "\"kind\":\"heartbeat\"");
        assert_eq!(parse(&other, 0).err(), Some(Skip::OtherKind));
        assert_eq!(parse(RESULT, 1_800_000_000_000).err(), Some(Skip::Old));
    }

    #[test]
    fn escaped_strings_are_read() {
        let escaped = RESULT.replace("\"markdown_table\"", "\"markdown\\u005ftable\"");
        let mut vocab = Vocabulary::default();
        let Ok(Parsed::Result(r)) = parse_line(escaped.as_bytes(), 0, &mut vocab, &mut Vec::new())
        else {
            panic!("not a result");
        };
        assert_eq!(vocab.shapes.get(r.shape), Some("markdown_table"));
    }

    #[test]
    fn session_line() {
        let line = r#"{"v":1,"kind":"session","ts_ms":5,"session":"00000000000000aa","started_ms":1,"ended_ms":5,"events":10,"results":20,"sample_rate":0.5,"tokens_baseline":1,"tokens_final":1,"dedup_saved":0,"encoder_saved":0,"compactions":3,"client":"claude-code"}"#;
        let Ok(Parsed::Session(id, s)) = parse(line, 0) else {
            panic!("not a session");
        };
        assert_eq!(id, 0xaa);
        assert_eq!(s.results, 20);
        assert_eq!(s.sample_rate, 0.5);
        assert_eq!(s.compactions, 3);
        assert_eq!(s.dropped, 0);
        assert_eq!(s.client, ClientKind::ClaudeCode);
    }

    #[test]
    fn odd_ids_are_kept_as_written() {
        let mut odd = Vec::new();
        let a = id64("not-hex", &mut odd);
        assert_eq!(id_text(a, &odd), "not-hex");
        let b = id64("00000000000000ff", &mut odd);
        assert_eq!(b, 0xff);
        assert_eq!(id_text(b, &odd), "00000000000000ff");
    }

    #[test]
    fn names_overflow_into_other() {
        let mut names = Names::default();
        for i in 0..300 {
            names.index(&format!("n{i}"));
        }
        assert_eq!(names.len(), 254);
        let i = names.index("n299");
        assert_eq!(names.get(i), Some("other"));
    }
}
