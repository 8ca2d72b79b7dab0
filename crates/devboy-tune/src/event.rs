//! The compact form the tuner keeps of each telemetry record: a
//! [`Record`] per result event, with its names in a [`Vocabulary`], and an
//! [`ExpansionRecord`] per `devboy_expand` delivery (never a [`Record`]:
//! an expansion is no tool result, so nothing that models results — the
//! sequence facts, the cache simulation, the rules, the shared
//! fingerprints — sees it; only the sums of what the model received do).
//!
//! The records are read by `devboy_telemetry`'s own reader, the one parser
//! of the format (`docs/telemetry.md`, schema version 1), and compacted
//! here ([`crate::read`]); the fixed vocabularies ([`DedupOutcome`],
//! [`ClientKind`]) are the writer's own enums. A test in [`crate::read`]
//! writes events through `devboy_telemetry`'s recorder and sink and reads
//! every field back.
//!
//! A [`Record`] is 72 bytes, about a tenth of a JSON line: a year of a
//! heavy user's events fits in memory, which lets every analysis and every
//! simulation run over the same table in recorded order instead of
//! re-reading files.

/// The event's fixed vocabularies are the writer's own types
/// (`devboy_telemetry`), so the two sides cannot spell them differently.
pub use devboy_telemetry::{
    ClientKind, DedupOutcome, DefinitionsSummary, Delivered, ExpandedSummary, SpeculationKind,
    SpeculationSummary, TokenFigures, SCHEMA_VERSION,
};

use devboy_core::speculation::{DeclineReason, PrefetchEnd, Served};

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
    /// Tokens sent to the model over the session: every result, sampled
    /// or not, and what `devboy_expand` delivered.
    pub tokens_final: u64,
    /// The tool lists devboy served the session; `None` when it served
    /// none, or the summary was written before devboy recorded them.
    pub definitions: Option<DefinitionsSummary>,
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

/// One `devboy_expand` delivery (`"kind": "expansion"`), compacted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpansionRecord {
    /// Unix milliseconds.
    pub ts_ms: u64,
    /// `h(session id)`.
    pub session: u64,
    /// `h(exposed tool name)` of the tool whose result the id stood for.
    pub tool: u64,
    /// What the model received.
    pub delivered: Delivered,
    /// Its tokens.
    pub tokens: u64,
}

impl ExpansionRecord {
    /// What it adds to a sum of results, by telemetry's one rule
    /// ([`Delivered::figures`]).
    pub fn figures(&self) -> TokenFigures {
        self.delivered.figures(self.tokens)
    }

    /// The compact form of an expansion event; its tokenizer goes into
    /// `vocab`.
    pub(crate) fn of(event: &devboy_telemetry::ExpansionRecord, vocab: &mut Vocabulary) -> Self {
        vocab.tokenizers.index(&event.tokenizer);
        ExpansionRecord {
            ts_ms: event.ts_ms,
            session: event.session.0,
            tool: event.tool.0,
            delivered: event.delivered,
            tokens: event.tokens,
        }
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

impl Record {
    /// The compact form of a result event; its names go into `vocab`.
    pub(crate) fn of(event: &devboy_telemetry::ResultEvent, vocab: &mut Vocabulary) -> Record {
        let mut inner = 0u32;
        for name in &event.inner_formats {
            let i = vocab.inner.index(name);
            if i < 32 {
                inner |= 1 << i;
            }
        }
        vocab.tokenizers.index(&event.tokenizer);
        let served = [
            Served::Prefetch,
            Served::Joined,
            Served::FailFast,
            Served::Inline,
        ]
        .into_iter()
        .find(|s| event.served.as_deref() == Some(s.name()))
        .unwrap_or(Served::Upstream);
        Record {
            ts_ms: event.ts_ms,
            fingerprint: event.fingerprint.0,
            tool: event.tool.0,
            session: event.session.0,
            partition: clamp_u32(event.context_partition),
            response_chars: clamp_u32(event.response_chars),
            tokens_baseline: clamp_u32(event.tokens_baseline),
            tokens_final: clamp_u32(event.tokens_final),
            dedup_saved: clamp_i32(event.dedup_saved),
            encoder_saved: clamp_i32(event.encoder_saved),
            inner,
            shape: name_index(&mut vocab.shapes, event.shape.as_deref()),
            format: name_index(&mut vocab.formats, event.format.as_deref()),
            template: name_index(&mut vocab.templates, event.template.as_deref()),
            class: name_index(&mut vocab.classes, Some(event.endpoint_class.name())),
            dedup: event.dedup,
            flags: 0,
        }
        .with_flags(event.elided, event.is_error, true)
        .with_served(served)
    }
}

impl SessionRecord {
    /// The compact form of a session summary.
    pub(crate) fn of(summary: devboy_telemetry::SessionSummary) -> Self {
        SessionRecord {
            results: summary.results,
            sample_rate: Some(summary.sample_rate)
                .filter(|r| r.is_finite() && *r > 0.0)
                .unwrap_or(1.0),
            compactions: summary.compactions,
            dropped: summary.dropped,
            client: summary.client,
            speculation: summary.speculation.filter(|s| !s.is_empty()),
            tokens_final: summary.tokens_final,
            definitions: summary.definitions.filter(|d| d.lists > 0),
        }
    }
}

impl SpeculationRecord {
    /// The compact form of a speculation event.
    pub(crate) fn of(event: &devboy_telemetry::SpeculationRecord) -> Self {
        SpeculationRecord {
            session: event.session.0,
            tool: event.tool.0,
            kind: event.event,
            reason: event.reason.as_deref().and_then(DeclineReason::from_name),
            end: event.end.as_deref().and_then(PrefetchEnd::from_name),
            predicted_tokens: event.predicted_tokens.unwrap_or(0),
            actual_tokens: event.actual_tokens.unwrap_or(0),
        }
    }
}

impl RetrievalRecord {
    /// The compact form of a retrieval event.
    pub(crate) fn of(event: &devboy_telemetry::RetrievalRecord) -> Self {
        RetrievalRecord {
            configured: event.provider.is_some(),
            answered: event.strategy != "offline",
            calls: event.calls.into(),
            failed_calls: event.failed_calls.into(),
            input_tokens: event.input_tokens,
            cached_input_tokens: event.cached_input_tokens,
            output_tokens: event.output_tokens,
        }
    }
}

fn name_index(names: &mut Names, name: Option<&str>) -> u8 {
    match name {
        Some(n) if !n.is_empty() => names.index(n),
        _ => NONE,
    }
}

/// A hashed identifier written as text (in the names map, in the
/// summary): its value when it is 16 hex digits, as telemetry writes
/// them; else a stable hash of the text, which no record carries.
pub(crate) fn id64(s: &str) -> u64 {
    s.parse::<devboy_telemetry::Hash64>()
        .map_or_else(|_| devboy_core::hash::fnv1a64(s.as_bytes()), |h| h.0)
}

/// The text of an identifier: 16 lower-case hex digits, as telemetry
/// writes it.
pub fn id_text(id: u64) -> String {
    format!("{id:016x}")
}

fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn clamp_i32(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESULT: &str = r#"{"v":1,"kind":"result","ts_ms":1700000000000,"session":"00000000000000aa","call":"00000000000000cc","tool":"00000000000000bb","upstream":"00000000000000dd","endpoint_class":"list","response_chars":2048,"shape":"markdown_table","inner_formats":["url","hash"],"fingerprint":"0000000000000000000000000000beef","path_hashes":[],"dedup":"miss","layer":"L1","action":"encoded","format":"md_tables_csv","template":"md_tables_csv","tokenizer":"o200k_base","tokens_baseline":600,"tokens_final":250,"dedup_saved":-6,"encoder_saved":356,"elided":false,"context_partition":2,"is_error":false,"prefetched":null,"prefetch_hit":null,"future_field":{"x":1}}"#;

    fn record(line: &str, vocab: &mut Vocabulary) -> Record {
        match devboy_telemetry::read::parse_line(line.as_bytes()) {
            Ok(devboy_telemetry::Event::Result(r)) => Record::of(&r, vocab),
            other => panic!("not a result: {other:?}"),
        }
    }

    #[test]
    fn result_line_with_unknown_fields() {
        let mut vocab = Vocabulary::default();
        let r = record(RESULT, &mut vocab);
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
    fn escaped_strings_are_read() {
        let escaped = RESULT.replace("\"markdown_table\"", "\"markdown\\u005ftable\"");
        let mut vocab = Vocabulary::default();
        let r = record(&escaped, &mut vocab);
        assert_eq!(vocab.shapes.get(r.shape), Some("markdown_table"));
    }

    #[test]
    fn session_line() {
        let line = r#"{"v":1,"kind":"session","ts_ms":5,"session":"00000000000000aa","started_ms":1,"ended_ms":5,"events":10,"results":20,"sample_rate":0.5,"tokens_baseline":1,"tokens_final":1,"dedup_saved":0,"encoder_saved":0,"compactions":3,"client":"claude-code"}"#;
        let Ok(devboy_telemetry::Event::Session(summary)) =
            devboy_telemetry::read::parse_line(line.as_bytes())
        else {
            panic!("not a session");
        };
        assert_eq!(summary.session.0, 0xaa);
        let s = SessionRecord::of(summary);
        assert_eq!(s.results, 20);
        assert_eq!(s.sample_rate, 0.5);
        assert_eq!(s.compactions, 3);
        assert_eq!(s.dropped, 0);
        assert_eq!(s.client, ClientKind::ClaudeCode);
        // Written before devboy recorded tool lists: none, not zero.
        assert_eq!(s.definitions, None);
        assert_eq!(s.tokens_final, 1);

        let listed = line.replace(
            r#""client":"claude-code"}"#,
            r#""client":"claude-code","definitions":{"tokens":4187,"tools":46,"lists":2}}"#,
        );
        let Ok(devboy_telemetry::Event::Session(summary)) =
            devboy_telemetry::read::parse_line(listed.as_bytes())
        else {
            panic!("not a session: {listed}");
        };
        let d = SessionRecord::of(summary).definitions.unwrap();
        assert_eq!((d.tokens, d.tools, d.lists), (4187, 46, 2));
    }

    #[test]
    fn ids_read_as_written() {
        let b = id64("00000000000000ff");
        assert_eq!(b, 0xff);
        assert_eq!(id_text(b), "00000000000000ff");
        assert_ne!(id64("not-hex"), 0);
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
