//! The records of a telemetry file, schema version 1 (docs/telemetry.md).
//!
//! Every field is a count, a flag, a fixed vocabulary word or a salted
//! hash ([`Hash64`], [`Hash128`]): the types leave no room for a name, an
//! argument or a piece of a result. The free-form strings that remain
//! (`shape`, `action`, `format`, `template`, `tokenizer`, `inner_formats`)
//! are filled only from the pipeline's own `&'static str` vocabularies.
//!
//! Readers ignore fields they do not know, so fields can be added without
//! changing [`SCHEMA_VERSION`]. `devboy tune` reads these records with
//! its own line type and these enums; a test in its `read` module writes
//! through [`crate::Telemetry`] and reads every field back.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hash::{Hash128, Hash64};

/// The `v` of every record this crate writes.
pub const SCHEMA_VERSION: u32 = 1;

/// One line of a telemetry file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// One tool result.
    Result(ResultEvent),
    /// One session, written when it ends.
    Session(SessionSummary),
    /// One thing read-only speculation did (a prefetch sent, a candidate
    /// declined, a prefetch ended).
    Speculation(SpeculationRecord),
    /// One `find_files` query: how it was answered and what its model
    /// calls cost.
    Retrieval(RetrievalRecord),
    /// One `devboy_expand` delivery: what the model received of a result
    /// it had an id for.
    Expansion(ExpansionRecord),
    /// One `devboy_run` script: the calls it made and what their results
    /// would have cost the model, against what it was shown.
    CodeRun(CodeRunRecord),
}

/// An `f64` field of a variant of [`Event`]: an internally tagged enum
/// is read through serde's buffer, where serde_json (the workspace keeps
/// numbers' text, `arbitrary_precision`) hands a float over as its number
/// map, which only `Number` reads back.
fn buffered_f64<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    use serde::de::Error;
    let number = serde_json::Number::deserialize(deserializer)?;
    number
        .as_f64()
        .ok_or_else(|| D::Error::custom(format_args!("{number} is out of range")))
}

impl Event {
    /// The `kind` of each variant, as written.
    pub const KINDS: [&'static str; 6] = [
        "result",
        "session",
        "speculation",
        "retrieval",
        "expansion",
        "code_run",
    ];

    /// Parses one line of a telemetry file.
    pub fn parse_line(line: &str) -> serde_json::Result<Event> {
        serde_json::from_str(line)
    }

    /// The record's schema version (`v`).
    pub fn version(&self) -> u32 {
        match self {
            Event::Result(r) => r.v,
            Event::Session(s) => s.v,
            Event::Speculation(s) => s.v,
            Event::Retrieval(r) => r.v,
            Event::Expansion(x) => x.v,
            Event::CodeRun(c) => c.v,
        }
    }

    /// When the record was written, in Unix milliseconds.
    pub fn ts_ms(&self) -> u64 {
        match self {
            Event::Result(r) => r.ts_ms,
            Event::Session(s) => s.ts_ms,
            Event::Speculation(s) => s.ts_ms,
            Event::Retrieval(r) => r.ts_ms,
            Event::Expansion(x) => x.ts_ms,
            Event::CodeRun(c) => c.ts_ms,
        }
    }
}

/// One processed tool result (`"kind": "result"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultEvent {
    /// Schema version, [`SCHEMA_VERSION`].
    pub v: u32,
    /// Unix milliseconds.
    pub ts_ms: u64,
    /// `h(session id)`.
    pub session: Hash64,
    /// `h(session id ‖ call sequence number)`.
    pub call: Hash64,
    /// `h(exposed tool name)`.
    pub tool: Hash64,
    /// `h(upstream name)`.
    pub upstream: Hash64,
    /// The coarse verb class of the tool's name.
    pub endpoint_class: EndpointClass,
    /// Characters of the forwarded body.
    pub response_chars: u64,
    /// The body's shape, when the pipeline classified it.
    pub shape: Option<Cow<'static, str>>,
    /// The inner formats found in the body.
    #[serde(default)]
    pub inner_formats: Vec<Cow<'static, str>>,
    /// `h128(salt ‖ body)`: equal bodies, equal fingerprints.
    pub fingerprint: Hash128,
    /// `h(path)` of each path argument.
    #[serde(default)]
    pub path_hashes: Vec<Hash64>,
    /// What L0 dedup did.
    pub dedup: DedupOutcome,
    /// The terminal layer.
    pub layer: ResultLayer,
    /// The pipeline's action name (`fresh`, `reference`, `encoded`, …).
    pub action: Cow<'static, str>,
    /// The encoder or template used.
    pub format: Option<Cow<'static, str>>,
    /// The L1 template, when one was used.
    pub template: Option<Cow<'static, str>>,
    /// The tokenizer the token counts are in.
    pub tokenizer: Cow<'static, str>,
    /// Tokens of what the client would have forwarded.
    pub tokens_baseline: u64,
    /// Tokens of what was sent.
    pub tokens_final: u64,
    /// Tokens saved by L0 (negative: the id line's cost).
    pub dedup_saved: i64,
    /// Tokens saved by L1/L2.
    pub encoder_saved: i64,
    /// Parts were elided.
    pub elided: bool,
    /// The session's context partition.
    pub context_partition: u64,
    /// The result was an error (passed through).
    pub is_error: bool,
    /// Enrichment: the result was prefetched (null until speculation exists).
    pub prefetched: Option<bool>,
    /// Enrichment: a prefetch was used (null until speculation exists).
    pub prefetch_hit: Option<bool>,
    /// Where the result came from ([`Served::name`](devboy_core::speculation::Served::name): `prefetch`, `joined`,
    /// `fail_fast`); omitted when the upstream answered the agent's call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served: Option<Cow<'static, str>>,
    /// Served from a prefetch: the tokens the planner predicted for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_tokens: Option<u64>,
    /// `hs(tool ‖ canonical arguments)` with the session's own salt (see
    /// [`SpeculationRecord::call_key`]), when the call's arguments were
    /// known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_key: Option<Hash64>,
}

/// What a [`SpeculationRecord`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpeculationKind {
    /// A prefetch was sent (`predicted_tokens`).
    Dispatched,
    /// The planner did not prefetch a candidate (`reason`).
    Declined,
    /// A dispatched prefetch ended (`end`, `predicted_tokens`,
    /// `actual_tokens`).
    Ended,
}

/// One speculation event (`"kind": "speculation"`). Never sampled: there
/// are a few per call at most.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeculationRecord {
    /// Schema version, [`SCHEMA_VERSION`].
    pub v: u32,
    /// Unix milliseconds.
    pub ts_ms: u64,
    /// `h(session id)`.
    pub session: Hash64,
    /// `h(exposed tool name)` of the follow-up's tool.
    pub tool: Hash64,
    /// What happened.
    pub event: SpeculationKind,
    /// `dispatched`, `ended`: the tokens the planner predicted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_tokens: Option<u64>,
    /// `declined`: the [`DeclineReason::name`](devboy_core::speculation::DeclineReason::name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Cow<'static, str>>,
    /// `ended`: the [`PrefetchEnd::name`](devboy_core::speculation::PrefetchEnd::name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<Cow<'static, str>>,
    /// `ended`: tokens of the landed result as the session counts them; 0
    /// if it never landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual_tokens: Option<u64>,
    /// `declined`: `hs(tool ‖ canonical arguments)`, where `hs` is SHA-256
    /// under a salt made at random for the session and never written. It
    /// matches a decline with a later result event of the same session
    /// carrying the same key (the agent made that very call), and with
    /// nothing else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_key: Option<Hash64>,
}

/// One `find_files` query (`"kind": "retrieval"`): counts and fixed words
/// only — no query, no path, no model name. Never sampled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RetrievalRecord {
    /// Schema version, [`SCHEMA_VERSION`].
    pub v: u32,
    /// Unix milliseconds.
    pub ts_ms: u64,
    /// `h(session id)`.
    pub session: Hash64,
    /// What answered: `offline`, `beam` or `block`.
    pub strategy: Cow<'static, str>,
    /// The configured model's API (`anthropic`, `openai`, `mcp-sampling`),
    /// if one is configured.
    pub provider: Option<Cow<'static, str>>,
    /// A configured model did not answer (it failed, picked no file, or
    /// could not be used), so the offline ranker did.
    pub fell_back: bool,
    /// Files returned.
    pub files: u32,
    /// Nodes of the tree navigated.
    pub tree_nodes: u64,
    /// Model calls answered.
    pub calls: u32,
    /// Model calls that failed after their retries.
    pub failed_calls: u32,
    /// Attempts beyond the first.
    pub retries: u32,
    /// Ids the model returned that it had not been offered.
    pub invalid_ids: u32,
    /// Input tokens of all calls, cached or not.
    pub input_tokens: u64,
    /// Of them, read from the provider's cache.
    pub cached_input_tokens: u64,
    /// Of them, written to the cache.
    pub cache_write_tokens: u64,
    /// Output tokens of all calls.
    pub output_tokens: u64,
    /// Wall time of the query.
    pub ms: u64,
}

/// One `devboy_run` script (`"kind": "code_run"`): counts and a fixed
/// word only — never the code, a tool's name or a result. Never sampled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CodeRunRecord {
    /// Schema version, [`SCHEMA_VERSION`].
    pub v: u32,
    /// Unix milliseconds.
    pub ts_ms: u64,
    /// `h(session id)`.
    pub session: Hash64,
    /// Tool calls the script made (refused ones included).
    pub calls: u32,
    /// Of them, refused because the tool may write.
    pub refused_calls: u32,
    /// Of them, answered with an error.
    pub failed_calls: u32,
    /// What the results of its calls would have cost the model, each
    /// shown whole as the client shows a tool result.
    pub direct_tokens: u64,
    /// The script's own text, which the model wrote.
    pub code_tokens: u64,
    /// What the model was shown of the run (its logs and value, or the
    /// error), before the pipeline.
    pub answer_tokens: u64,
    /// How it ended: `done`, `script_error`, `timeout`, `memory`, `calls`,
    /// `output`, `cancelled`, `killed`, `crashed` or `protocol`.
    pub end: Cow<'static, str>,
    /// Wall time of the run.
    pub ms: u64,
}

/// What one `devboy_expand` delivery gave the model, which decides how its
/// tokens count ([`Delivered::figures`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivered {
    /// Again what the model was shown in full: the id of a result that
    /// went out whole (fresh, re-encoded, or with parts referenced), or
    /// the id a reference or near-reference named. A cost taken back from
    /// dedup's saving.
    Again,
    /// Again what an elided result showed: the whole of it asked for
    /// without a range, which shows its kept part (the head) once more. A
    /// cost taken back from the encoder's saving (elision is the router's).
    AgainElided,
    /// Parts of an elided result the model was never shown: the lines or
    /// items its hint named. New content, counted as received with an
    /// equal baseline (without devboy the result would have carried them).
    New,
}

impl Delivered {
    /// The wire name (`again`, `again_elided`, `new`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Again => "again",
            Self::AgainElided => "again_elided",
            Self::New => "new",
        }
    }

    /// What a delivery of `tokens` adds to a sum of results: the one rule
    /// by which the live status, the session summary, `tune report` and
    /// `tune analyze` count expansions. A repeat is received at no
    /// baseline (without devboy the model would have had it already) and
    /// its tokens are taken from the saving that stood in for it; new
    /// parts are received at an equal baseline and save nothing. Either
    /// way `tokens_baseline - tokens_final = dedup_saved + encoder_saved`,
    /// as for a result.
    pub fn figures(self, tokens: u64) -> TokenFigures {
        let cost = i64::try_from(tokens).unwrap_or(i64::MAX);
        match self {
            Self::Again => TokenFigures {
                tokens_final: tokens,
                dedup_saved: -cost,
                ..TokenFigures::default()
            },
            Self::AgainElided => TokenFigures {
                tokens_final: tokens,
                encoder_saved: -cost,
                ..TokenFigures::default()
            },
            Self::New => TokenFigures {
                tokens_baseline: tokens,
                tokens_final: tokens,
                ..TokenFigures::default()
            },
        }
    }
}

/// The token figures a sum of results adds up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenFigures {
    /// Tokens the model would have received without devboy.
    pub tokens_baseline: u64,
    /// Tokens it received.
    pub tokens_final: u64,
    /// Of the saving, dedup's.
    pub dedup_saved: i64,
    /// Of the saving, the encoder's.
    pub encoder_saved: i64,
}

impl std::ops::AddAssign for TokenFigures {
    fn add_assign(&mut self, other: Self) {
        self.tokens_baseline += other.tokens_baseline;
        self.tokens_final += other.tokens_final;
        self.dedup_saved += other.dedup_saved;
        self.encoder_saved += other.encoder_saved;
    }
}

/// One `devboy_expand` delivery (`"kind": "expansion"`): which tool's
/// result the id stood for, what was delivered and its tokens; no id, no
/// range, no content. Never sampled (one per expand call).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExpansionRecord {
    /// Schema version, [`SCHEMA_VERSION`].
    pub v: u32,
    /// Unix milliseconds.
    pub ts_ms: u64,
    /// `h(session id)`.
    pub session: Hash64,
    /// `h(exposed tool name)` of the tool whose result the id stood for
    /// (the result that last named it), never `devboy_expand`'s.
    pub tool: Hash64,
    /// `h(upstream name)` of that tool.
    pub upstream: Hash64,
    /// What the model received.
    pub delivered: Delivered,
    /// The tokenizer `tokens` is in.
    pub tokenizer: Cow<'static, str>,
    /// Tokens of what `devboy_expand` delivered.
    pub tokens: u64,
}

impl ExpansionRecord {
    /// What it adds to a sum of results ([`Delivered::figures`]).
    pub fn figures(&self) -> TokenFigures {
        self.delivered.figures(self.tokens)
    }
}

/// The `devboy_expand` deliveries of a session, in its summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExpandedSummary {
    /// Deliveries.
    pub calls: u64,
    /// Their tokens (all of them part of the summary's `tokens_final`).
    pub tokens: u64,
    /// Of those, the tokens delivered again ([`Delivered::Again`] and
    /// [`Delivered::AgainElided`]): taken back from the savings.
    pub again_tokens: u64,
}

impl ExpandedSummary {
    /// Counts one delivery of `tokens`.
    pub fn add(&mut self, delivered: Delivered, tokens: u64) {
        self.calls += 1;
        self.tokens += tokens;
        if delivered != Delivered::New {
            self.again_tokens += tokens;
        }
    }

    /// Tokens of parts the model was never shown ([`Delivered::New`]).
    pub fn new_tokens(&self) -> u64 {
        self.tokens - self.again_tokens
    }
}

impl std::ops::AddAssign for ExpandedSummary {
    fn add_assign(&mut self, other: Self) {
        self.calls += other.calls;
        self.tokens += other.tokens;
        self.again_tokens += other.again_tokens;
    }
}

/// One session's speculation, in its summary: what was prefetched and what
/// became of it, what was declined, and what the agent got from it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SpeculationSummary {
    /// Prefetches sent.
    pub dispatched: u64,
    /// Prefetches that answered the agent's call after landing.
    pub used: u64,
    /// Prefetches the agent's call joined in flight.
    pub joined: u64,
    /// Prefetches appended to the answer that planned them (inline mode).
    pub inlined: u64,
    /// Prefetches that ended unused, by [`PrefetchEnd::name`](devboy_core::speculation::PrefetchEnd::name).
    pub wasted: BTreeMap<String, u64>,
    /// Candidates declined, by [`DeclineReason::name`](devboy_core::speculation::DeclineReason::name).
    pub declined: BTreeMap<String, u64>,
    /// Declines whose very call (same tool, same arguments) the agent
    /// made later in the session, by reason.
    pub late_invoked: BTreeMap<String, u64>,
    /// Prefetches that landed with a predicted cost, so the prediction
    /// could be checked.
    pub predictions: u64,
    /// Of those, the ones whose result came to at least 130% of the
    /// prediction.
    pub overruns: u64,
    /// Agent calls served without an upstream call of their own, by how:
    /// from a landed prefetch, by joining one in flight, or by fail-fast.
    pub calls_saved: CallsSaved,
    /// Tokens the pipeline saved (baseline − final) on the results served
    /// from speculation.
    pub tokens_saved: i64,
    /// Tokens of prefetches that landed and were never used (upstream
    /// work, never shown to the model).
    pub tokens_wasted: u64,
}

/// Agent calls speculation answered, by bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CallsSaved {
    /// Answered at once by a landed prefetch (`served: prefetch`).
    pub prefetch: u64,
    /// Joined a prefetch in flight: one upstream call served both
    /// (`served: joined`).
    pub dedup: u64,
    /// Answered by devboy without a call (`served: fail_fast`).
    pub fail_fast: u64,
}

impl SpeculationSummary {
    /// Whether anything happened.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Whether a landed result of `actual` tokens overran a prediction of
    /// `predicted` (at least 130% of it).
    pub fn overran(predicted: u64, actual: u64) -> bool {
        predicted > 0 && actual.saturating_mul(10) >= predicted.saturating_mul(13)
    }
}

/// One session (`"kind": "session"`), written when it ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// Schema version, [`SCHEMA_VERSION`].
    pub v: u32,
    /// Unix milliseconds when written.
    pub ts_ms: u64,
    /// `h(session id)`.
    pub session: Hash64,
    /// Unix milliseconds when the session started.
    pub started_ms: u64,
    /// Unix milliseconds when it ended.
    pub ended_ms: u64,
    /// Result events queued for writing (after sampling, without drops).
    pub events: u64,
    /// Results processed (before sampling).
    pub results: u64,
    /// The sampling rate applied to result events.
    #[serde(deserialize_with = "buffered_f64")]
    pub sample_rate: f64,
    /// Sampled result events dropped because the writer fell behind.
    #[serde(default)]
    pub dropped: u64,
    /// Sum of `tokens_baseline` over all results, sampled or not, and
    /// expansions ([`Delivered::figures`]).
    pub tokens_baseline: u64,
    /// Sum of `tokens_final` over all results and expansions.
    pub tokens_final: u64,
    /// Sum of `dedup_saved` over all results and expansions.
    pub dedup_saved: i64,
    /// Sum of `encoder_saved` over all results and expansions.
    pub encoder_saved: i64,
    /// Context partitions advanced (compactions).
    pub compactions: u64,
    /// Which client the session served.
    pub client: ClientKind,
    /// What speculation did; omitted when it did nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<SpeculationSummary>,
    /// The tool definitions devboy served the agent; omitted when the
    /// session never listed tools, and absent from files written before
    /// devboy recorded them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definitions: Option<DefinitionsSummary>,
    /// What `devboy_expand` delivered; omitted when it delivered nothing,
    /// and absent from files written before devboy recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expanded: Option<ExpandedSummary>,
}

/// The tool lists a session served (`tools/list`), in its summary: counts
/// only, no tool name. Every definition (name, description, input schema)
/// rides on every model request, so the last list served is what each
/// later request carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DefinitionsSummary {
    /// Tokens of the last list's definitions as Claude Code sends them
    /// (`devboy_pipeline::Tokenizer::count_definition`), in the session's
    /// tokenizer, the one its results are counted in.
    pub tokens: u64,
    /// Tools in the last list.
    pub tools: u64,
    /// Lists served (more than one when the tools changed and the client
    /// listed again after `list_changed`).
    pub lists: u64,
}

/// The client of a session, coarsely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientKind {
    /// Claude Code (a client name starting with `claude`).
    ClaudeCode,
    /// Anything else, or not known.
    #[serde(other)]
    Other,
}

impl ClientKind {
    /// The kind of a client that introduced itself as `name`.
    pub fn of(name: Option<&str>) -> Self {
        match name {
            Some(n) if n.to_ascii_lowercase().starts_with("claude") => Self::ClaudeCode,
            _ => Self::Other,
        }
    }
}

/// What L0 dedup did with a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DedupOutcome {
    /// Dedup was off for the endpoint (or the result was an error).
    Off,
    /// Not a repeat: sent in full.
    Miss,
    /// A repeat: sent as a reference.
    Hit,
    /// A near-repeat: sent as its changes.
    Near,
}

impl DedupOutcome {
    /// Whether L0 replaced the body (`hit` or `near`).
    pub fn is_duplicate(self) -> bool {
        matches!(self, Self::Hit | Self::Near)
    }
}

/// The layer that decided what was sent. Written as the layer's number,
/// `"L0"` to `"L3"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResultLayer {
    /// `L0`: dedup sent a reference or near-reference.
    #[serde(rename = "L0")]
    Dedup,
    /// `L1`: a template encoded the body.
    #[serde(rename = "L1")]
    Template,
    /// `L2`: the generic JSON encoder, or elision.
    #[serde(rename = "L2")]
    Encoder,
    /// `L3`: passed through unchanged.
    #[serde(rename = "L3")]
    Passthrough,
}

/// The verb class of a result's tool: devboy-core's one classifier of
/// tool names, written as `endpoint_class`.
pub use devboy_core::tool_verb::VerbClass as EndpointClass;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_come_from_the_first_verb_in_the_name() {
        use EndpointClass::*;
        for (name, class) in [
            ("fs__read_text_file", Read),
            ("fs__readTextFile", Read),
            ("fs__list_directory", List),
            ("fs__directory_tree", List),
            ("gh__list_issues", List),
            ("gh__search_code", Search),
            ("gh__get_issue", Get),
            ("git__git_status", Get),
            ("fs__write_file", Write),
            ("fs__edit_file", Write),
            ("gh__create_issue", Create),
            ("gh__update_issue", Update),
            ("fs__move_file", Update),
            ("gh__delete_branch", Delete),
            ("ci__run-tests", Run),
            ("t__echo", Other),
            ("t__payload", Other),
            ("plain", Other),
            ("", Other),
            // The prefix is not the tool: `list__echo` is no listing.
            ("list__echo", Other),
        ] {
            assert_eq!(EndpointClass::of_exposed(name), class, "{name}");
        }
    }

    #[test]
    fn records_round_trip_and_unknown_fields_are_ignored() {
        let summary = Event::Session(SessionSummary {
            v: SCHEMA_VERSION,
            ts_ms: 3,
            session: Hash64(1),
            started_ms: 1,
            ended_ms: 3,
            events: 2,
            results: 4,
            sample_rate: 0.5,
            dropped: 0,
            tokens_baseline: 100,
            tokens_final: 60,
            dedup_saved: 30,
            encoder_saved: 10,
            compactions: 1,
            client: ClientKind::ClaudeCode,
            speculation: None,
            definitions: None,
            expanded: None,
        });
        let line = serde_json::to_string(&summary).unwrap();
        assert!(line.starts_with(r#"{"kind":"session","v":1,"#), "{line}");
        assert!(line.contains(r#""client":"claude-code""#), "{line}");
        assert_eq!(Event::parse_line(&line).unwrap(), summary);
        let extended = line.replacen('{', r#"{"future_field":[1,2],"#, 1);
        assert_eq!(Event::parse_line(&extended).unwrap(), summary);
        let odd = line.replace("claude-code", "some-future-client");
        let Event::Session(parsed) = Event::parse_line(&odd).unwrap() else {
            panic!("a session")
        };
        assert_eq!(parsed.client, ClientKind::Other);
        assert_eq!(ClientKind::of(Some("claude-code")), ClientKind::ClaudeCode);
        assert_eq!(ClientKind::of(Some("inspector")), ClientKind::Other);
        assert_eq!(ClientKind::of(None), ClientKind::Other);
    }

    #[test]
    fn speculation_wire_names_are_pinned() {
        let record = Event::Speculation(SpeculationRecord {
            v: SCHEMA_VERSION,
            ts_ms: 1,
            session: Hash64(2),
            tool: Hash64(3),
            event: SpeculationKind::Ended,
            predicted_tokens: Some(10),
            reason: None,
            end: Some("timed_out".into()),
            actual_tokens: Some(0),
            call_key: None,
        });
        let line = serde_json::to_string(&record).unwrap();
        assert_eq!(
            line,
            r#"{"kind":"speculation","v":1,"ts_ms":1,"session":"0000000000000002","tool":"0000000000000003","event":"ended","predicted_tokens":10,"end":"timed_out","actual_tokens":0}"#
        );
        assert_eq!(Event::parse_line(&line).unwrap(), record);
        for (kind, wire) in [
            (SpeculationKind::Dispatched, "dispatched"),
            (SpeculationKind::Declined, "declined"),
            (SpeculationKind::Ended, "ended"),
        ] {
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{wire}\""));
        }
        let summary = SpeculationSummary {
            dispatched: 1,
            calls_saved: CallsSaved {
                prefetch: 1,
                dedup: 2,
                fail_fast: 3,
            },
            ..SpeculationSummary::default()
        };
        let value = serde_json::to_value(&summary).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "dispatched",
                "used",
                "joined",
                "inlined",
                "wasted",
                "declined",
                "late_invoked",
                "predictions",
                "overruns",
                "calls_saved",
                "tokens_saved",
                "tokens_wasted"
            ]
        );
        assert_eq!(
            value["calls_saved"],
            serde_json::json!({"prefetch": 1, "dedup": 2, "fail_fast": 3})
        );
        assert!(SpeculationSummary::overran(100, 130));
        assert!(!SpeculationSummary::overran(100, 129));
        assert!(!SpeculationSummary::overran(0, 5));
    }

    #[test]
    fn result_lines_of_before_speculation_still_read() {
        // A result line as written before `served`, `predicted_tokens`
        // and `call_key` existed.
        let old = r#"{"kind":"result","v":1,"ts_ms":1,"session":"0000000000000001","call":"0000000000000002","tool":"0000000000000003","upstream":"0000000000000004","endpoint_class":"read","response_chars":3,"shape":null,"inner_formats":[],"fingerprint":"00000000000000000000000000000005","path_hashes":[],"dedup":"miss","layer":"L3","action":"unchanged","format":null,"template":null,"tokenizer":"o200k_base","tokens_baseline":1,"tokens_final":1,"dedup_saved":0,"encoder_saved":0,"elided":false,"context_partition":0,"is_error":false,"prefetched":null,"prefetch_hit":null}"#;
        let Event::Result(r) = Event::parse_line(old).unwrap() else {
            panic!("a result")
        };
        assert_eq!(
            (&r.served, r.predicted_tokens, r.call_key),
            (&None, None, None)
        );
        // And written back the same, with no new field.
        assert_eq!(serde_json::to_string(&Event::Result(r)).unwrap(), old);
    }

    #[test]
    fn session_lines_of_before_definitions_still_read() {
        // A summary as written before `definitions` existed: none, and
        // written back the same, with no new field.
        let old = r#"{"kind":"session","v":1,"ts_ms":5,"session":"00000000000000aa","started_ms":1,"ended_ms":5,"events":2,"results":2,"sample_rate":1.0,"dropped":0,"tokens_baseline":10,"tokens_final":8,"dedup_saved":2,"encoder_saved":0,"compactions":0,"client":"other"}"#;
        let Event::Session(s) = Event::parse_line(old).unwrap() else {
            panic!("a session")
        };
        assert_eq!(s.definitions, None);
        assert_eq!(
            serde_json::to_string(&Event::Session(s.clone())).unwrap(),
            old
        );
        // With them: the wire names are pinned.
        let listed = SessionSummary {
            definitions: Some(DefinitionsSummary {
                tokens: 4187,
                tools: 46,
                lists: 2,
            }),
            ..s
        };
        let line = serde_json::to_string(&Event::Session(listed.clone())).unwrap();
        assert!(
            line.ends_with(r#","definitions":{"tokens":4187,"tools":46,"lists":2}}"#),
            "{line}"
        );
        assert_eq!(Event::parse_line(&line).unwrap(), Event::Session(listed));
    }

    #[test]
    fn expansion_wire_names_and_figures_are_pinned() {
        let record = Event::Expansion(ExpansionRecord {
            v: SCHEMA_VERSION,
            ts_ms: 1,
            session: Hash64(2),
            tool: Hash64(3),
            upstream: Hash64(4),
            delivered: Delivered::AgainElided,
            tokenizer: "o200k_base".into(),
            tokens: 812,
        });
        let line = serde_json::to_string(&record).unwrap();
        assert_eq!(
            line,
            r#"{"kind":"expansion","v":1,"ts_ms":1,"session":"0000000000000002","tool":"0000000000000003","upstream":"0000000000000004","delivered":"again_elided","tokenizer":"o200k_base","tokens":812}"#
        );
        assert_eq!(Event::parse_line(&line).unwrap(), record);
        for delivered in [Delivered::Again, Delivered::AgainElided, Delivered::New] {
            assert_eq!(
                serde_json::to_string(&delivered).unwrap(),
                format!("\"{}\"", delivered.name())
            );
            // Every delivery adds up as a result does.
            let f = delivered.figures(100);
            assert_eq!(f.tokens_final, 100);
            assert_eq!(
                f.tokens_baseline as i64 - f.tokens_final as i64,
                f.dedup_saved + f.encoder_saved
            );
        }
        let cost = |d: Delivered| {
            let f = d.figures(100);
            (f.tokens_baseline, f.dedup_saved, f.encoder_saved)
        };
        assert_eq!(cost(Delivered::Again), (0, -100, 0));
        assert_eq!(cost(Delivered::AgainElided), (0, 0, -100));
        assert_eq!(cost(Delivered::New), (100, 0, 0));
    }

    #[test]
    fn session_lines_carry_what_was_expanded() {
        let old = r#"{"kind":"session","v":1,"ts_ms":5,"session":"00000000000000aa","started_ms":1,"ended_ms":5,"events":2,"results":2,"sample_rate":1.0,"dropped":0,"tokens_baseline":10,"tokens_final":8,"dedup_saved":2,"encoder_saved":0,"compactions":0,"client":"other"}"#;
        let Event::Session(s) = Event::parse_line(old).unwrap() else {
            panic!("a session")
        };
        assert_eq!(s.expanded, None);
        let expanded = SessionSummary {
            expanded: Some(ExpandedSummary {
                calls: 2,
                tokens: 900,
                again_tokens: 800,
            }),
            ..s
        };
        let line = serde_json::to_string(&Event::Session(expanded.clone())).unwrap();
        assert!(
            line.ends_with(r#","expanded":{"calls":2,"tokens":900,"again_tokens":800}}"#),
            "{line}"
        );
        assert_eq!(Event::parse_line(&line).unwrap(), Event::Session(expanded));
    }

    #[test]
    fn wire_words_are_pinned() {
        for (layer, wire) in [
            (ResultLayer::Dedup, "L0"),
            (ResultLayer::Template, "L1"),
            (ResultLayer::Encoder, "L2"),
            (ResultLayer::Passthrough, "L3"),
        ] {
            assert_eq!(
                serde_json::to_string(&layer).unwrap(),
                format!("\"{wire}\"")
            );
        }
        for (dedup, wire) in [
            (DedupOutcome::Off, "off"),
            (DedupOutcome::Miss, "miss"),
            (DedupOutcome::Hit, "hit"),
            (DedupOutcome::Near, "near"),
        ] {
            assert_eq!(
                serde_json::to_string(&dedup).unwrap(),
                format!("\"{wire}\"")
            );
        }
    }
}
