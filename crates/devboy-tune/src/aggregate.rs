//! Aggregation of an [`EventTable`]: per endpoint, per session, and the
//! sequence facts only recorded order reveals.
//!
//! Two duplicate rates are kept apart on purpose:
//!
//! - the **recorded** rate: the share of results L0 actually replaced
//!   (`dedup` = `hit` or `near`), i.e. what the settings of the time did;
//! - the **implied** rate: the share of results whose fingerprint had
//!   already been delivered in full earlier in the same session and
//!   context partition, i.e. what an unbounded, never-expiring cache with
//!   dedup on everywhere would have caught. It is the ceiling the tuner
//!   reasons about when dedup is off for an endpoint (where the recorded
//!   rate is zero by construction).
//!
//! Sequence facts need every event of a session in order, so sessions
//! whose summary says events were sampled (`sample_rate` < 1) or dropped
//! are left out of them (their gaps would hide repeats); their events
//! still count in every sum. Errors and events without a fingerprint are never sequenced.
//!
//! # Sampled sessions: estimates and evidence
//!
//! A session sampled at rate `p` wrote about `p` of its result events, so
//! each of its events stands for `1/p` results: its **weight**, taken from
//! the session's summary (sessions without a summary, still running or
//! killed, have weight 1 and are counted in
//! [`SessionProfile::unsummarized`]). The volume figures of an endpoint —
//! [`EndpointStats::calls`], the token totals and the savings — are sums of
//! weighted events, i.e. estimates of what all results did, as soon as
//! any weight is not 1 ([`EndpointStats::scaled`]). Every other figure
//! (the outcome, shape and format counts, the sequence facts, and
//! [`EndpointStats::observed`]) counts each observed event once: those are
//! the evidence, and the rules' minimum support is measured on them, not
//! on estimated volume. Rates and means are over observed events.
//!
//! # Expansions
//!
//! What `devboy_expand` delivered ([`ExpansionRecord`]) is part of what the
//! model received, so the volume figures ([`WeightedSums`], and through
//! it [`EndpointStats`]' token totals and savings) count it, under the
//! tool whose result the id stood for, by telemetry's one rule: a repeat
//! of what the model was shown takes its tokens back from the saving, new
//! parts are received at an equal baseline. Expansions are never sampled
//! (weight 1). They are no results: they add no call, and nothing that
//! models results (the sequence facts, the evidence counts, the shared
//! fingerprints, which read [`EndpointStats::results_figures`]) sees them.

use std::collections::HashMap;

use crate::event::{
    ClientKind, DedupOutcome, ExpandedSummary, ExpansionRecord, Record, SessionRecord,
    TokenFigures, Vocabulary, NONE,
};
use crate::read::EventTable;

/// A reference hint's cost when no recorded hit says otherwise
/// (`> [ref: kafrum12, unchanged; devboy_expand kafrum12]` in o200k).
pub const DEFAULT_REF_TOKENS: f64 = 17.0;
/// An id line's cost when no recorded fresh result says otherwise
/// (`> [id: kafrum12]`; one token more than untagged ids cost).
pub const DEFAULT_ID_TOKENS: f64 = 7.0;
/// A near-reference's cost when none was recorded: the hint plus a few
/// changed fields.
pub const DEFAULT_NEAR_TOKENS: f64 = 40.0;

/// The JSON shapes (`devboy_pipeline::Shape::name()` of a JSON body):
/// near-references only apply to JSON.
const JSON_SHAPES: &[&str] = &[
    "array_of_objects",
    "flat_object",
    "nested_object",
    "array_of_scalars",
    "mixed_array",
    "json_scalar",
];

/// Parameters of the sequence analysis, from the current config.
#[derive(Clone, Copy, Debug)]
pub struct SequenceParams {
    /// `dedup.near_ref.min_body_bytes`: smaller bodies are never near
    /// candidates.
    pub near_min_body_bytes: usize,
    /// `dedup.ttl`, in milliseconds: a near candidate's predecessor must
    /// be younger.
    pub ttl_ms: u64,
}

/// Per-event facts from the sequence analysis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventFacts {
    /// In a fully recorded session, not an error, with a fingerprint.
    pub sequenced: bool,
    /// Its fingerprint was delivered in full earlier in the same session
    /// and partition.
    pub implied_repeat: bool,
    /// Not an implied repeat, but the endpoint's previous result in the
    /// same partition had another fingerprint and nearly the same size:
    /// the pattern of a polled status that changed in a few fields.
    pub near_candidate: bool,
}

/// One endpoint's aggregate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndpointStats {
    /// `h(exposed tool name)`.
    pub tool: u64,
    /// Results, estimated: each event weighted by `1/sample_rate` of its
    /// session (equal to [`Self::observed`] when nothing was sampled).
    pub calls: u64,
    /// Result events observed (unweighted): the evidence the rules'
    /// minimum support is measured on.
    pub observed: u64,
    /// Some of the events had a weight other than 1, so `calls`, the token
    /// totals and the savings are estimates.
    pub scaled: bool,
    /// Error results.
    pub errors: u64,
    /// Results by [`DedupOutcome`] index.
    pub dedup: [u64; 4],
    /// Sum of `response_chars`.
    pub chars: u64,
    /// Results per shape index.
    pub shapes: HashMap<u8, u64>,
    /// Results per inner-format index.
    pub inner: HashMap<u8, u64>,
    /// Results per template index (re-encoded by an L1 template).
    pub templates: HashMap<u8, u64>,
    /// Results per format index (re-encoded at all).
    pub formats: HashMap<u8, u64>,
    /// Results per endpoint-class index.
    pub classes: HashMap<u8, u64>,
    /// Sum of `tokens_baseline`, weighted like `calls`, and of what the
    /// expansions add (see the module docs).
    pub tokens_baseline: u64,
    /// Sum of `tokens_final`, weighted like `calls`, expansions included.
    pub tokens_final: u64,
    /// Sum of `dedup_saved`, weighted like `calls`, less what expansions
    /// delivered again of references and whole results.
    pub dedup_saved: i64,
    /// Sum of `encoder_saved`, weighted like `calls`, less what expansions
    /// delivered again of elided results.
    pub encoder_saved: i64,
    /// What `devboy_expand` delivered of the endpoint's results.
    pub expanded: ExpandedSummary,
    /// What those expansions add to the four sums above.
    pub expanded_figures: TokenFigures,
    /// What the id lines on fresh results cost (sum of negative
    /// `dedup_saved` on misses).
    pub id_line_cost: i64,
    /// What references and near-references saved (sum of `dedup_saved` on
    /// hits and nears).
    pub reference_saved: i64,
    /// Baseline tokens of results sent as bodies (miss or off, no error).
    pub body_baseline: u64,
    /// `encoder_saved` of those.
    pub body_encoder_saved: i64,
    /// Sequenced results.
    pub sequenced: u64,
    /// Sequenced results that were not replaced (miss or off).
    pub sequenced_bodies: u64,
    /// Sequenced implied repeats.
    pub implied_repeats: u64,
    /// Sequenced near candidates.
    pub near_candidates: u64,
    /// The median `tokens_baseline` of the observed events (the upper one
    /// of an even count), unweighted: what one result typically costs
    /// before devboy touches it. Sampling keeps events at random, so the
    /// observed median estimates the median of all results.
    pub median_tokens: u64,
}

impl EndpointStats {
    /// The recorded duplicate rate: results L0 replaced, of all observed
    /// results.
    pub fn dup_rate(&self) -> f64 {
        ratio(
            self.dedup[DedupOutcome::Hit as usize] + self.dedup[DedupOutcome::Near as usize],
            self.observed,
        )
    }

    /// The implied duplicate rate, of sequenced results.
    pub fn implied_dup_rate(&self) -> f64 {
        ratio(self.implied_repeats, self.sequenced)
    }

    /// Near candidates among the sequenced results sent as bodies.
    pub fn near_share(&self) -> f64 {
        ratio(self.near_candidates, self.sequenced_bodies)
    }

    /// Mean `response_chars` of the observed results.
    pub fn avg_chars(&self) -> f64 {
        if self.observed == 0 {
            0.0
        } else {
            self.chars as f64 / self.observed as f64
        }
    }

    /// The most frequent shape and its share of results with a shape.
    pub fn dominant_shape(&self) -> Option<(u8, f64)> {
        dominant(&self.shapes)
    }

    /// The most frequent endpoint class.
    pub fn dominant_class(&self) -> Option<u8> {
        dominant(&self.classes).map(|(i, _)| i)
    }

    /// Inner formats by frequency, most frequent first, at most `n`.
    pub fn top_inner(&self, n: usize) -> Vec<u8> {
        let mut v: Vec<(u8, u64)> = self.inner.iter().map(|(k, c)| (*k, *c)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.into_iter().take(n).map(|(k, _)| k).collect()
    }

    /// Results re-encoded at all.
    pub fn encoded(&self) -> u64 {
        self.formats.values().sum()
    }

    /// The mean share of baseline tokens the encoder saved on bodies.
    pub fn encoder_ratio(&self) -> f64 {
        if self.body_baseline == 0 {
            0.0
        } else {
            (self.body_encoder_saved as f64 / self.body_baseline as f64).clamp(0.0, 1.0)
        }
    }

    /// `(dedup %, encoder %, combined %)` of the baseline.
    pub fn split_pct(&self) -> (f64, f64, f64) {
        split_pct(self.tokens_baseline, self.dedup_saved, self.encoder_saved)
    }

    /// The volume figures (calls, tokens, savings), as [`WeightedSums`]
    /// summed them.
    pub fn tally(&self) -> Tally {
        Tally {
            calls: self.calls,
            tokens_baseline: self.tokens_baseline,
            tokens_final: self.tokens_final,
            dedup_saved: self.dedup_saved,
            encoder_saved: self.encoder_saved,
            scaled: self.scaled,
            expanded: self.expanded,
        }
    }

    /// The token figures of the results alone, without what expansions
    /// added: what models results (the shared fingerprints) reads.
    pub fn results_figures(&self) -> TokenFigures {
        let x = &self.expanded_figures;
        TokenFigures {
            tokens_baseline: self.tokens_baseline.saturating_sub(x.tokens_baseline),
            tokens_final: self.tokens_final.saturating_sub(x.tokens_final),
            dedup_saved: self.dedup_saved - x.dedup_saved,
            encoder_saved: self.encoder_saved - x.encoder_saved,
        }
    }
}

/// `(dedup %, encoder %, combined %)` of `baseline`.
pub fn split_pct(baseline: u64, dedup: i64, encoder: i64) -> (f64, f64, f64) {
    let pct = |x: i64| {
        if baseline == 0 {
            0.0
        } else {
            x as f64 * 100.0 / baseline as f64
        }
    };
    (pct(dedup), pct(encoder), pct(dedup + encoder))
}

/// `a / b`, 0 when `b` is 0 (no evidence).
pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn dominant(counts: &HashMap<u8, u64>) -> Option<(u8, f64)> {
    let total: u64 = counts.values().sum();
    counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(k, c)| (*k, ratio(*c, total)))
}

/// What the sessions look like.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionProfile {
    /// Sessions with at least one result in the window.
    pub sessions: u64,
    /// Of those, sessions whose events were sampled or dropped: left out
    /// of the sequence analysis, the cache replay and the simulation.
    pub sampled: u64,
    /// Sessions sampled at a rate below 1, per rate (highest rate first).
    pub sampled_rates: Vec<(f64, u64)>,
    /// Sessions without a summary (still running, or killed): their events
    /// have weight 1.
    pub unsummarized: u64,
    /// Results recorded (events observed).
    pub results: u64,
    /// Partitions advanced, summed over sessions (from the session
    /// summaries, else from the partitions the events name).
    pub compactions: u64,
    /// Sessions with at least one compaction.
    pub sessions_compacted: u64,
    /// The median number of results per session.
    pub median_results: u64,
    /// Sessions whose summary names Claude Code as the client.
    pub claude_code: u64,
}

impl SessionProfile {
    /// Compactions per result.
    pub fn compaction_rate(&self) -> f64 {
        ratio(self.compactions, self.results)
    }

    /// Results per context partition.
    pub fn results_per_partition(&self) -> f64 {
        ratio(self.results, self.sessions + self.compactions)
    }
}

/// The aggregate of a table, with the per-event sequence facts.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    /// Endpoints, most baseline tokens first.
    pub endpoints: Vec<EndpointStats>,
    /// All endpoints together.
    pub total: EndpointStats,
    /// Sessions.
    pub sessions: SessionProfile,
    /// Record indexes of each session, in recorded order, with whether the
    /// session was fully recorded (not sampled).
    pub by_session: Vec<(u64, bool, Vec<u32>)>,
    /// Per-record facts, aligned with the table's records.
    pub facts: Vec<EventFacts>,
    /// The measured cost of an id line.
    pub id_tokens: f64,
    /// The measured cost of a reference.
    pub ref_tokens: f64,
    /// The measured cost of a near-reference.
    pub near_tokens: f64,
    /// The tokenizer the events name (the most recent one seen).
    pub tokenizer: Option<String>,
    /// The weight (`1/sample_rate`) of each session whose weight is not 1.
    pub weights: HashMap<u64, f64>,
}

impl Analysis {
    /// The stats of `tool`, if it has any.
    pub fn endpoint(&self, tool: u64) -> Option<&EndpointStats> {
        self.endpoints.iter().find(|e| e.tool == tool)
    }

    /// The weight of each event of `session`: `1/sample_rate` from its
    /// summary, 1 without one.
    pub fn weight(&self, session: u64) -> f64 {
        self.weights.get(&session).copied().unwrap_or(1.0)
    }

    /// Whether any figure is scaled up from sampled events.
    pub fn scaled(&self) -> bool {
        !self.weights.is_empty()
    }
}

/// The weight of the events of a session with this summary.
pub fn session_weight(summary: Option<&SessionRecord>) -> f64 {
    match summary {
        Some(s) if s.sample_rate > 0.0 && s.sample_rate < 1.0 => 1.0 / s.sample_rate,
        _ => 1.0,
    }
}

/// The volume figures of a group of results: each result event weighted
/// by its session's [`session_weight`], summed, and rounded once
/// ([`WeightedSums::tally`]). With a weight other than 1 in the group they
/// are estimates of what all results did (`scaled`).
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
    /// Some event of the group weighed other than 1: the figures are
    /// scaled estimates.
    pub scaled: bool,
    /// What `devboy_expand` delivered in the group, counted in the figures
    /// above (its tokens in `tokens_final`).
    pub expanded: ExpandedSummary,
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
}

/// Weighted sums of a group of result events and expansions, rounded once
/// into a [`Tally`]: the one rule for how what the model received adds
/// up, used for the endpoints of `tune analyze` ([`EndpointStats`]) and
/// every group of `tune report` (days, sessions, servers, tools). Rounding
/// once, not per event, keeps three events at rate 0.3 at 10 results, not
/// 3 × 3 = 9.
#[derive(Clone, Copy, Debug, Default)]
pub struct WeightedSums {
    calls: f64,
    baseline: f64,
    fin: f64,
    dedup_saved: f64,
    encoder_saved: f64,
    scaled: bool,
    expanded: ExpandedSummary,
    expanded_figures: TokenFigures,
}

impl WeightedSums {
    /// Adds one event of weight `w` (its session's [`session_weight`]).
    pub fn add(&mut self, r: &Record, w: f64) {
        self.calls += w;
        self.baseline += w * f64::from(r.tokens_baseline);
        self.fin += w * f64::from(r.tokens_final);
        self.dedup_saved += w * f64::from(r.dedup_saved);
        self.encoder_saved += w * f64::from(r.encoder_saved);
        self.scaled |= w != 1.0;
    }

    /// Adds one `devboy_expand` delivery: no call, its figures
    /// ([`ExpansionRecord::figures`]) at weight 1 (expansions are never
    /// sampled).
    pub fn add_expansion(&mut self, x: &ExpansionRecord) {
        let f = x.figures();
        self.baseline += f.tokens_baseline as f64;
        self.fin += f.tokens_final as f64;
        self.dedup_saved += f.dedup_saved as f64;
        self.encoder_saved += f.encoder_saved as f64;
        self.expanded.add(x.delivered, x.tokens);
        self.expanded_figures += f;
    }

    /// Adds the sums of another group (unrounded).
    pub fn merge(&mut self, other: &WeightedSums) {
        self.calls += other.calls;
        self.baseline += other.baseline;
        self.fin += other.fin;
        self.dedup_saved += other.dedup_saved;
        self.encoder_saved += other.encoder_saved;
        self.scaled |= other.scaled;
        self.expanded += other.expanded;
        self.expanded_figures += other.expanded_figures;
    }

    /// The sums, rounded.
    pub fn tally(&self) -> Tally {
        Tally {
            calls: self.calls.round() as u64,
            tokens_baseline: self.baseline.round() as u64,
            tokens_final: self.fin.round() as u64,
            dedup_saved: self.dedup_saved.round() as i64,
            encoder_saved: self.encoder_saved.round() as i64,
            scaled: self.scaled,
            expanded: self.expanded,
        }
    }

    fn store(&self, e: &mut EndpointStats) {
        let t = self.tally();
        e.calls = t.calls;
        e.tokens_baseline = t.tokens_baseline;
        e.tokens_final = t.tokens_final;
        e.dedup_saved = t.dedup_saved;
        e.encoder_saved = t.encoder_saved;
        e.expanded = self.expanded;
        e.expanded_figures = self.expanded_figures;
    }
}

/// Aggregates `table`.
pub fn analyze(table: &EventTable, params: SequenceParams) -> Analysis {
    let records = &table.records;
    let mut by_session: HashMap<u64, Vec<u32>> = HashMap::new();
    let mut session_order: Vec<u64> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        by_session
            .entry(r.session)
            .or_insert_with(|| {
                session_order.push(r.session);
                Vec::new()
            })
            .push(i as u32);
    }
    let json_shape: Vec<bool> = (0..=u8::MAX)
        .map(|i| {
            table
                .vocab
                .shapes
                .get(i)
                .is_some_and(|s| JSON_SHAPES.contains(&s))
        })
        .collect();
    let mut facts = vec![EventFacts::default(); records.len()];
    let mut sessions = SessionProfile::default();
    let mut lengths = Vec::new();
    let mut grouped = Vec::with_capacity(session_order.len());
    let mut weights = HashMap::new();
    let mut rates: Vec<(f64, u64)> = Vec::new();
    for id in session_order {
        let indexes = by_session.remove(&id).unwrap_or_default();
        let summary = table.sessions.get(&id);
        let complete = summary.is_none_or(SessionRecord::complete);
        sessions.unsummarized += u64::from(summary.is_none());
        let weight = session_weight(summary);
        if weight != 1.0 {
            weights.insert(id, weight);
            let rate = summary.map_or(1.0, |s| s.sample_rate);
            match rates.iter_mut().find(|(r, _)| *r == rate) {
                Some((_, n)) => *n += 1,
                None => rates.push((rate, 1)),
            }
        }
        sessions.sessions += 1;
        sessions.results += indexes.len() as u64;
        lengths.push(indexes.len() as u64);
        let compactions = match summary {
            Some(s) => s.compactions,
            None => {
                let (lo, hi) = indexes.iter().fold((u32::MAX, 0), |(lo, hi), &i| {
                    let p = records[i as usize].partition;
                    (lo.min(p), hi.max(p))
                });
                u64::from(hi.saturating_sub(lo))
            }
        };
        sessions.compactions += compactions;
        sessions.sessions_compacted += u64::from(compactions > 0);
        sessions.claude_code +=
            u64::from(summary.is_some_and(|s| s.client == ClientKind::ClaudeCode));
        if complete {
            sequence(records, &indexes, &json_shape, params, &mut facts);
        } else {
            sessions.sampled += 1;
        }
        grouped.push((id, complete, indexes));
    }
    rates.sort_by(|a, b| b.0.total_cmp(&a.0));
    sessions.sampled_rates = rates;
    lengths.sort_unstable();
    sessions.median_results = lengths.get(lengths.len() / 2).copied().unwrap_or(0);

    let mut endpoints: HashMap<u64, EndpointStats> = HashMap::new();
    let mut total = EndpointStats::default();
    let mut weighted: HashMap<u64, WeightedSums> = HashMap::new();
    let mut weighted_total = WeightedSums::default();
    let (mut id_sum, mut id_n) = (0i64, 0u64);
    let (mut ref_sum, mut ref_n) = (0u64, 0u64);
    let (mut near_sum, mut near_n) = (0u64, 0u64);
    // Baseline tokens per endpoint, for the medians (4 bytes an event).
    let mut baselines: HashMap<u64, Vec<u32>> = HashMap::new();
    for (r, f) in records.iter().zip(&facts) {
        baselines.entry(r.tool).or_default().push(r.tokens_baseline);
        let e = endpoints.entry(r.tool).or_insert_with(|| EndpointStats {
            tool: r.tool,
            ..EndpointStats::default()
        });
        let w = weights.get(&r.session).copied().unwrap_or(1.0);
        add(e, r, f, w);
        add(&mut total, r, f, w);
        weighted.entry(r.tool).or_default().add(r, w);
        weighted_total.add(r, w);
        match r.dedup {
            DedupOutcome::Miss if r.dedup_saved < 0 => {
                id_sum -= i64::from(r.dedup_saved);
                id_n += 1;
            }
            DedupOutcome::Hit => {
                ref_sum += u64::from(r.tokens_final);
                ref_n += 1;
            }
            DedupOutcome::Near => {
                near_sum += u64::from(r.tokens_final);
                near_n += 1;
            }
            _ => {}
        }
    }
    // What the model received of each endpoint's results through
    // devboy_expand: in its sums, never in its evidence.
    for x in &table.expansions {
        endpoints.entry(x.tool).or_insert_with(|| EndpointStats {
            tool: x.tool,
            ..EndpointStats::default()
        });
        weighted.entry(x.tool).or_default().add_expansion(x);
        weighted_total.add_expansion(x);
    }
    for (tool, e) in endpoints.iter_mut() {
        if let Some(w) = weighted.get(tool) {
            w.store(e);
        }
        if let Some(v) = baselines.get_mut(tool).filter(|v| !v.is_empty()) {
            let mid = v.len() / 2;
            e.median_tokens = u64::from(*v.select_nth_unstable(mid).1);
        }
    }
    weighted_total.store(&mut total);
    let mut endpoints: Vec<EndpointStats> = endpoints.into_values().collect();
    endpoints.sort_by(|a, b| {
        b.tokens_baseline
            .cmp(&a.tokens_baseline)
            .then(a.tool.cmp(&b.tool))
    });
    let mean = |sum: f64, n: u64, default: f64| if n == 0 { default } else { sum / n as f64 };
    Analysis {
        endpoints,
        total,
        sessions,
        by_session: grouped,
        facts,
        id_tokens: mean(id_sum as f64, id_n, DEFAULT_ID_TOKENS),
        ref_tokens: mean(ref_sum as f64, ref_n, DEFAULT_REF_TOKENS),
        near_tokens: mean(near_sum as f64, near_n, DEFAULT_NEAR_TOKENS),
        tokenizer: last_name(&table.vocab),
        weights,
    }
}

fn last_name(vocab: &Vocabulary) -> Option<String> {
    let n = vocab.tokenizers.len();
    (n > 0)
        .then(|| vocab.tokenizers.get((n - 1) as u8).map(str::to_owned))
        .flatten()
}

/// Adds one event to `e`: the unweighted counts here; the weighted sums
/// (`calls`, tokens, savings) are stored from [`WeightedSums`] afterwards.
fn add(e: &mut EndpointStats, r: &Record, f: &EventFacts, weight: f64) {
    e.observed += 1;
    e.scaled |= weight != 1.0;
    e.errors += u64::from(r.is_error());
    e.dedup[r.dedup as usize] += 1;
    e.chars += u64::from(r.response_chars);
    let bump = |m: &mut HashMap<u8, u64>, k: u8| {
        if k != NONE {
            *m.entry(k).or_insert(0) += 1;
        }
    };
    bump(&mut e.shapes, r.shape);
    bump(&mut e.templates, r.template);
    bump(&mut e.formats, r.format);
    bump(&mut e.classes, r.class);
    let mut bits = r.inner;
    while bits != 0 {
        let bit = bits.trailing_zeros() as u8;
        bits &= bits - 1;
        *e.inner.entry(bit).or_insert(0) += 1;
    }
    match r.dedup {
        DedupOutcome::Hit | DedupOutcome::Near => e.reference_saved += i64::from(r.dedup_saved),
        DedupOutcome::Miss if r.dedup_saved < 0 => e.id_line_cost -= i64::from(r.dedup_saved),
        _ => {}
    }
    let body = !r.dedup.is_duplicate() && !r.is_error();
    if body {
        e.body_baseline += u64::from(r.tokens_baseline);
        e.body_encoder_saved += i64::from(r.encoder_saved);
    }
    if f.sequenced {
        e.sequenced += 1;
        e.sequenced_bodies += u64::from(body);
        e.implied_repeats += u64::from(f.implied_repeat);
        e.near_candidates += u64::from(f.near_candidate);
    }
}

/// The endpoint's previous result in the partition, for near candidates.
struct Previous {
    ts_ms: u64,
    chars: u32,
    fingerprint: u128,
}

/// Marks implied repeats and near candidates in one session.
fn sequence(
    records: &[Record],
    indexes: &[u32],
    json_shape: &[bool],
    params: SequenceParams,
    facts: &mut [EventFacts],
) {
    let mut partition = None;
    let mut delivered: HashMap<u128, ()> = HashMap::new();
    let mut previous: HashMap<u64, Previous> = HashMap::new();
    for &i in indexes {
        let r = &records[i as usize];
        if r.is_error() || !r.has_fingerprint() {
            continue;
        }
        if partition != Some(r.partition) {
            partition = Some(r.partition);
            delivered.clear();
            previous.clear();
        }
        let f = &mut facts[i as usize];
        f.sequenced = true;
        f.implied_repeat = delivered.contains_key(&r.fingerprint);
        if !f.implied_repeat && !r.elided() && !r.dedup.is_duplicate() {
            delivered.insert(r.fingerprint, ());
        }
        if !f.implied_repeat && !r.dedup.is_duplicate() {
            let json = r.shape == NONE || json_shape[usize::from(r.shape)];
            if let Some(prev) = previous.get(&r.tool) {
                let chars = r.response_chars;
                let slack = (chars / 50).max(16);
                f.near_candidate = json
                    && prev.fingerprint != r.fingerprint
                    && chars as usize >= params.near_min_body_bytes
                    && chars.abs_diff(prev.chars) <= slack
                    && r.ts_ms.saturating_sub(prev.ts_ms) < params.ttl_ms;
            }
        }
        previous.insert(
            r.tool,
            Previous {
                ts_ms: r.ts_ms,
                chars: r.response_chars,
                fingerprint: r.fingerprint,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Names, SessionRecord};

    pub(crate) const PARAMS: SequenceParams = SequenceParams {
        near_min_body_bytes: 1024,
        ttl_ms: 1_800_000,
    };

    fn rec(tool: u64, session: u64, ts: u64, fp: u128, chars: u32) -> Record {
        let mut r = Record::blank(tool, session).with_flags(false, false, true);
        r.ts_ms = ts;
        r.fingerprint = fp;
        r.response_chars = chars;
        r.tokens_baseline = chars / 4;
        r.tokens_final = chars / 4;
        r
    }

    fn table(records: Vec<Record>) -> EventTable {
        EventTable {
            records,
            ..EventTable::default()
        }
    }

    #[test]
    fn endpoint_aggregates_and_rates() {
        let mut records = Vec::new();
        let mut shapes = Names::default();
        let md = shapes.index("markdown_table");
        let prose = shapes.index("prose");
        for i in 0..10u64 {
            let mut r = rec(1, 7, i * 1000, u128::from(i % 5), 4000);
            r.shape = if i < 8 { md } else { prose };
            r.inner = 0b101;
            if i >= 5 {
                r.dedup = DedupOutcome::Hit;
                r.tokens_final = 15;
                r.dedup_saved = 985;
            } else {
                r.dedup_saved = -6;
                r.tokens_final = 600;
                r.encoder_saved = 406;
            }
            records.push(r);
        }
        let mut t = table(records);
        t.vocab.shapes = shapes;
        let a = analyze(&t, PARAMS);
        let e = a.endpoint(1).unwrap();
        assert_eq!(e.calls, 10);
        assert_eq!(e.dup_rate(), 0.5);
        assert_eq!(e.implied_dup_rate(), 0.5);
        assert_eq!(e.avg_chars(), 4000.0);
        assert_eq!(e.dominant_shape(), Some((md, 0.8)));
        assert_eq!(e.top_inner(3), vec![0, 2]);
        assert_eq!(e.id_line_cost, 30);
        assert_eq!(e.reference_saved, 5 * 985);
        assert!((e.encoder_ratio() - 406.0 / 1000.0).abs() < 1e-9);
        assert_eq!(a.id_tokens, 6.0);
        assert_eq!(a.ref_tokens, 15.0);
        let (d, enc, c) = e.split_pct();
        assert!((c - (d + enc)).abs() < 1e-9);
    }

    #[test]
    fn implied_repeats_reset_with_the_partition_and_session() {
        let mut a1 = rec(1, 1, 0, 9, 2000);
        let mut a2 = rec(1, 1, 10, 9, 2000);
        let mut a3 = rec(1, 1, 20, 9, 2000);
        a3.partition = 1;
        let other = rec(1, 2, 5, 9, 2000);
        let mut err = rec(1, 1, 30, 9, 2000);
        err = err.with_flags(false, true, true);
        a1.partition = 0;
        a2.partition = 0;
        let a = analyze(&table(vec![a1, other, a2, a3, err]), PARAMS);
        let repeats: Vec<bool> = a.facts.iter().map(|f| f.implied_repeat).collect();
        assert_eq!(repeats, vec![false, false, true, false, false]);
        assert!(!a.facts[4].sequenced);
        assert_eq!(a.sessions.sessions, 2);
        assert_eq!(a.sessions.compactions, 1, "derived from partitions");
    }

    #[test]
    fn sampled_sessions_are_not_sequenced() {
        let mut t = table(vec![rec(1, 1, 0, 9, 2000), rec(1, 1, 1, 9, 2000)]);
        t.sessions.insert(
            1,
            SessionRecord {
                results: 4,
                sample_rate: 0.5,
                compactions: 2,
                dropped: 0,
                client: ClientKind::ClaudeCode,
                speculation: None,
                tokens_final: 0,
                definitions: None,
            },
        );
        let a = analyze(&t, PARAMS);
        assert!(a.facts.iter().all(|f| !f.sequenced));
        assert_eq!(a.sessions.sampled, 1);
        assert_eq!(a.sessions.compactions, 2);
        let e = a.endpoint(1).unwrap();
        assert_eq!((e.calls, e.observed, e.scaled), (4, 2, true));
    }

    fn summary(sample_rate: f64) -> SessionRecord {
        SessionRecord {
            results: 0,
            sample_rate,
            compactions: 0,
            dropped: 0,
            client: ClientKind::Other,
            speculation: None,
            tokens_final: 0,
            definitions: None,
        }
    }

    /// Session 1 sampled at 0.5, session 2 at 1.0, session 3 without a
    /// summary; each event 400 baseline tokens, 300 sent, 100 saved by
    /// the encoder.
    fn mixed_rates() -> EventTable {
        let mut records = Vec::new();
        for (session, n) in [(1, 10), (2, 10), (3, 5)] {
            for i in 0..n {
                let mut r = rec(1, session, i * 1000, u128::from(session * 100 + i), 1600);
                r.tokens_final = 300;
                r.encoder_saved = 100;
                records.push(r);
            }
        }
        let mut t = table(records);
        t.sessions.insert(1, summary(0.5));
        t.sessions.insert(2, summary(1.0));
        t
    }

    #[test]
    fn sampled_events_are_weighted_by_the_inverse_rate_and_support_is_not() {
        let a = analyze(&mixed_rates(), PARAMS);
        let e = a.endpoint(1).unwrap();
        // 10 events at 0.5 stand for 20 results; 10 + 5 count as they are.
        assert_eq!(e.calls, 35);
        assert_eq!(e.observed, 25, "evidence stays unscaled");
        assert!(e.scaled);
        assert_eq!(e.tokens_baseline, 35 * 400);
        assert_eq!(e.tokens_final, 35 * 300);
        assert_eq!(e.encoder_saved, 35 * 100);
        assert_eq!(e.split_pct().1, 25.0);
        // Per-event facts: unscaled, and only the complete sessions sequenced.
        assert_eq!(e.sequenced, 15);
        assert_eq!(e.avg_chars(), 1600.0);
        assert_eq!(a.total.calls, 35);
        assert_eq!(a.total.observed, 25);
        assert_eq!(a.weight(1), 2.0);
        assert_eq!(a.weight(2), 1.0);
        assert_eq!(a.weight(3), 1.0);
        assert!(a.scaled());
        let s = &a.sessions;
        assert_eq!(s.sampled_rates, vec![(0.5, 1)]);
        assert_eq!((s.sampled, s.unsummarized, s.results), (1, 1, 25));
    }

    #[test]
    fn unsampled_events_are_not_estimates() {
        let mut t = mixed_rates();
        t.sessions.insert(1, summary(1.0));
        let a = analyze(&t, PARAMS);
        let e = a.endpoint(1).unwrap();
        assert_eq!((e.calls, e.observed, e.scaled), (25, 25, false));
        assert_eq!(e.tokens_baseline, 25 * 400);
        assert!(!a.scaled() && a.sessions.sampled_rates.is_empty());
    }

    #[test]
    fn uneven_rates_round_once() {
        // Three events at rate 0.3: 10 results, not 3 × round(3.33) = 9.
        let mut t = table((0..3).map(|i| rec(1, 1, i, u128::from(i), 4)).collect());
        t.sessions.insert(1, summary(0.3));
        let a = analyze(&t, PARAMS);
        let e = a.endpoint(1).unwrap();
        assert_eq!((e.calls, e.observed, e.tokens_baseline), (10, 3, 10));
    }

    #[test]
    fn near_candidates_need_same_endpoint_similar_size_and_json() {
        let mut shapes = Names::default();
        let json = shapes.index("flat_object");
        let text = shapes.index("prose");
        let mut v = Vec::new();
        for (i, (fp, chars, shape)) in [
            (1, 3000, json),
            (2, 3010, json), // near: same endpoint, +10 chars
            (3, 4000, json), // too different
            (4, 4001, text), // not JSON
            (5, 500, json),  // too small
            (6, 505, json),
        ]
        .into_iter()
        .enumerate()
        {
            let mut r = rec(1, 1, i as u64, fp, chars);
            r.shape = shape;
            v.push(r);
        }
        let mut t = table(v);
        t.vocab.shapes = shapes;
        let a = analyze(&t, PARAMS);
        let near: Vec<bool> = a.facts.iter().map(|f| f.near_candidate).collect();
        assert_eq!(near, vec![false, true, false, false, false, false]);
    }

    #[test]
    fn the_median_baseline_is_per_endpoint_and_unweighted() {
        // Endpoint 1: 100, 200, 300, 4000 tokens (one outlier) in a
        // session sampled at 0.5; endpoint 2: 40 tokens once.
        let mut records: Vec<Record> = [400, 800, 1200, 16_000]
            .iter()
            .enumerate()
            .map(|(i, c)| rec(1, 1, i as u64, i as u128, *c))
            .collect();
        records.push(rec(2, 1, 9, 99, 160));
        let mut t = table(records);
        t.sessions.insert(1, summary(0.5));
        let a = analyze(&t, PARAMS);
        // The upper median of four, untouched by the outlier and the weight.
        assert_eq!(a.endpoint(1).unwrap().median_tokens, 300);
        assert_eq!(a.endpoint(2).unwrap().median_tokens, 40);
    }
}
