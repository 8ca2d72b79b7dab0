//! Endpoint fingerprints: what the rules know of one endpoint, and all a
//! member ever shares with a team or a provider (docs/team.md).
//!
//! A [`Fingerprint`] is a handful of counts and rates per endpoint: how
//! often it is called, in how many sessions, how often its results repeat
//! (as recorded, and as the fingerprints imply), how often a body looks
//! like a polled status, its size distribution, its dominant shape and
//! inner formats, the template the router chose, and what devboy saved.
//! Nothing in it is a body, a path, an argument or a session id: the
//! endpoint is the tool's exposed name, and the free-form strings are the
//! pipeline's own vocabulary words.
//!
//! Four operations, all pure:
//!
//! - [`fingerprints`]: a member's rows, from its own event table;
//! - [`k_anonymous`]: only endpoints seen in at least `k` sessions leave
//!   the machine;
//! - [`merge`]: the team's rows, from every member's, weighted by session
//!   count; an endpoint stays only with `k` sessions overall and at least
//!   [`MIN_MEMBERS`] members;
//! - [`blend`]: a prior (the team's row, or a provider's) and the member's
//!   own row into the figures the rules read ([`Fingerprint::to_stats`]).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::aggregate::{ratio, Analysis, EndpointStats};
use crate::event::{DedupOutcome, Vocabulary, NONE};
use crate::names::ExposedNames;
use crate::read::EventTable;

/// The version of the fingerprint format (the Parquet files and the
/// provider document). A reader skips rows of a newer version.
pub const FINGERPRINT_SCHEMA_VERSION: u32 = 1;

/// An endpoint of the team's aggregate must have been seen by at least
/// this many members: one member's endpoint is that member's.
pub const MIN_MEMBERS: u32 = 2;

/// Milliseconds in a day.
const DAY_MS: u64 = 86_400_000;

/// One endpoint's figures, of one member or of a whole team.
///
/// Rates are over the count named in their documentation; a rate whose
/// count is zero is 0 and means "no evidence".
///
/// As JSON (a provider's document, docs/team.md) the endpoint is
/// `endpoint_class` and every other field may be left out (0, empty: no
/// evidence).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Fingerprint {
    /// The tool's exposed name (`<prefix>__<tool>`); in a provider's
    /// document, the upstream's own tool name.
    #[serde(rename = "endpoint_class")]
    pub endpoint: String,
    /// Members whose rows were merged into this one (1 for a member's own).
    pub members: u32,
    /// Sessions with at least one result of the endpoint.
    pub sessions: u64,
    /// Results observed.
    pub calls: u64,
    /// Of those, error results.
    pub errors: u64,
    /// Results that went through L0 dedup (dedup on).
    pub deduped: u64,
    /// Results L0 replaced by a reference, of `calls`.
    pub dup_rate: f64,
    /// Results in fully recorded sessions (the sequence analysis).
    pub sequenced: u64,
    /// Of `sequenced`, results whose body was already in the context.
    pub implied_dup_rate: f64,
    /// Sequenced results sent as bodies.
    pub sequenced_bodies: u64,
    /// Of `sequenced_bodies`, those that look like a polled status that
    /// changed in a few fields.
    pub near_share: f64,
    /// Tokens id lines cost, per result.
    pub id_line_tokens: f64,
    /// Tokens references saved, per result.
    pub reference_saved_tokens: f64,
    /// Mean characters of a result.
    pub chars_mean: f64,
    /// Median tokens of a result before devboy.
    pub tokens_p50: u64,
    /// 90th percentile of the same.
    pub tokens_p90: u64,
    /// Results with a recognised shape.
    pub shaped: u64,
    /// The most common shape.
    pub shape_dominant: Option<String>,
    /// Its share of `shaped`.
    pub shape_share: f64,
    /// The three most common inner formats, most common first.
    pub inner_formats_top3: Vec<String>,
    /// Results the encoder re-encoded.
    pub encoded: u64,
    /// The template the router chose most often.
    pub template_top: Option<String>,
    /// Its share of `encoded`.
    pub template_share: f64,
    /// Mean tokens of a result before devboy.
    pub baseline_tokens: f64,
    /// Mean tokens L0 saved per result.
    pub dedup_saved_tokens: f64,
    /// Mean tokens the encoder saved per result.
    pub encoder_saved_tokens: f64,
    /// First day seen (days since 1970-01-01, UTC).
    pub first_day: i32,
    /// Last day seen.
    pub last_day: i32,
    /// The devboy version that wrote the row.
    pub devboy_version: String,
    /// The tokenizer its token figures are in.
    pub tokenizer: String,
}

/// The devboy version writing fingerprints.
pub const DEVBOY_VERSION: &str = env!("CARGO_PKG_VERSION");

fn per(sum: i64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        sum as f64 / n as f64
    }
}

/// The day of a Unix-millisecond time.
pub fn day_of(ms: u64) -> i32 {
    (ms / DAY_MS) as i32
}

/// The fingerprints of every named endpoint of `table`, most calls first.
/// Endpoints without a name in `names` are left out: a hash means nothing
/// to anyone else.
pub fn fingerprints(
    table: &EventTable,
    analysis: &Analysis,
    names: &ExposedNames,
) -> Vec<Fingerprint> {
    #[derive(Default)]
    struct Extra {
        sessions: HashSet<u64>,
        baselines: Vec<u32>,
        first_ms: u64,
        last_ms: u64,
    }
    let mut extra: HashMap<u64, Extra> = HashMap::new();
    for r in &table.records {
        let x = extra.entry(r.tool).or_insert_with(|| Extra {
            first_ms: u64::MAX,
            ..Extra::default()
        });
        x.sessions.insert(r.session);
        x.baselines.push(r.tokens_baseline);
        x.first_ms = x.first_ms.min(r.ts_ms);
        x.last_ms = x.last_ms.max(r.ts_ms);
    }
    let tokenizer = analysis
        .tokenizer
        .clone()
        .unwrap_or_else(|| "o200k_base".to_owned());
    let mut rows: Vec<Fingerprint> = analysis
        .endpoints
        .iter()
        .filter_map(|e| {
            let name = names.get(e.tool)?;
            let x = extra.get_mut(&e.tool)?;
            x.baselines.sort_unstable();
            let p90 = x
                .baselines
                .get((x.baselines.len() * 9 / 10).min(x.baselines.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0);
            Some(Fingerprint::of_stats(
                e,
                name,
                &table.vocab,
                x.sessions.len() as u64,
                u64::from(p90),
                (day_of(x.first_ms), day_of(x.last_ms)),
                &tokenizer,
            ))
        })
        .collect();
    rows.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.endpoint.cmp(&b.endpoint)));
    rows
}

impl Fingerprint {
    /// Whether the row can be what a devboy wrote on `today` (days since
    /// 1970): rates from 0 to 1, finite means, no count above the results
    /// it counts, at least one result per session, days not in the
    /// future. A damaged or hand-made row that fails must not weigh in a
    /// team's figures.
    pub fn check(&self, today: i32) -> Result<(), String> {
        let name_ok = !self.endpoint.is_empty() && self.endpoint.len() <= 256;
        if !name_ok {
            return Err("no endpoint name, or one over 256 bytes".into());
        }
        for (name, rate) in [
            ("dup_rate", self.dup_rate),
            ("implied_dup_rate", self.implied_dup_rate),
            ("near_share", self.near_share),
            ("shape_share", self.shape_share),
            ("template_share", self.template_share),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!("{name} {rate} is not from 0 to 1"));
            }
        }
        for (name, value) in [
            ("id_line_tokens", self.id_line_tokens),
            ("reference_saved_tokens", self.reference_saved_tokens),
            ("chars_mean", self.chars_mean),
            ("baseline_tokens", self.baseline_tokens),
        ] {
            if !value.is_finite() || value < 0.0 {
                return Err(format!(
                    "{name} {value} is not a finite non-negative number"
                ));
            }
        }
        for (name, value) in [
            ("dedup_saved_tokens", self.dedup_saved_tokens),
            ("encoder_saved_tokens", self.encoder_saved_tokens),
        ] {
            if !value.is_finite() {
                return Err(format!("{name} is not a finite number"));
            }
        }
        let n = self.calls;
        for (name, count, most) in [
            ("sessions", self.sessions, n),
            ("errors", self.errors, n),
            ("deduped", self.deduped, n),
            ("sequenced", self.sequenced, n),
            ("sequenced_bodies", self.sequenced_bodies, self.sequenced),
            ("shaped", self.shaped, n),
            ("encoded", self.encoded, n),
        ] {
            if count > most {
                return Err(format!("{name} {count} is more than the {most} it counts"));
            }
        }
        if self.sessions == 0 {
            return Err("no sessions".into());
        }
        if self.tokens_p50 > self.tokens_p90 {
            return Err("tokens_p50 is above tokens_p90".into());
        }
        if self.first_day > self.last_day || self.last_day > today + 1 {
            return Err(format!(
                "days {}..{} are not a span up to today",
                self.first_day, self.last_day
            ));
        }
        Ok(())
    }

    /// One endpoint's row from its aggregate.
    fn of_stats(
        e: &EndpointStats,
        name: &str,
        vocab: &Vocabulary,
        sessions: u64,
        tokens_p90: u64,
        (first_day, last_day): (i32, i32),
        tokenizer: &str,
    ) -> Self {
        let n = e.observed;
        let shaped: u64 = e.shapes.values().sum();
        let (shape_dominant, shape_share) = match e.dominant_shape() {
            Some((i, share)) => (vocab.shapes.get(i).map(str::to_owned), share),
            None => (None, 0.0),
        };
        let encoded = e.encoded();
        let template = e
            .templates
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(i, c)| {
                (
                    vocab.templates.get(*i).map(str::to_owned),
                    ratio(*c, encoded),
                )
            });
        let (template_top, template_share) = template.unwrap_or((None, 0.0));
        let results = e.results_figures();
        Fingerprint {
            endpoint: name.to_owned(),
            members: 1,
            sessions,
            calls: n,
            errors: e.errors,
            deduped: n - e.dedup[DedupOutcome::Off as usize].min(n),
            dup_rate: e.dup_rate(),
            sequenced: e.sequenced,
            implied_dup_rate: e.implied_dup_rate(),
            sequenced_bodies: e.sequenced_bodies,
            near_share: e.near_share(),
            id_line_tokens: per(e.id_line_cost, n),
            reference_saved_tokens: per(e.reference_saved, n),
            chars_mean: e.avg_chars(),
            tokens_p50: e.median_tokens,
            tokens_p90,
            shaped,
            shape_dominant,
            shape_share,
            inner_formats_top3: e
                .top_inner(3)
                .into_iter()
                .filter_map(|i| vocab.inner.get(i).map(str::to_owned))
                .collect(),
            encoded,
            template_top,
            template_share,
            // Of the results alone: an expansion is no result.
            baseline_tokens: per(results.tokens_baseline as i64, e.calls),
            dedup_saved_tokens: per(results.dedup_saved, e.calls),
            encoder_saved_tokens: per(results.encoder_saved, e.calls),
            first_day,
            last_day,
            devboy_version: DEVBOY_VERSION.to_owned(),
            tokenizer: tokenizer.to_owned(),
        }
    }

    /// The aggregate the rules read, with counts that give this row's
    /// rates; names are added to `vocab` as needed. `tool` is the id the
    /// endpoint has in this run.
    pub fn to_stats(&self, tool: u64, vocab: &mut Vocabulary) -> EndpointStats {
        let round = |rate: f64, n: u64| ((rate * n as f64).round() as u64).min(n);
        let n = self.calls;
        let mut dedup = [0u64; 4];
        let replaced = round(self.dup_rate, n);
        dedup[DedupOutcome::Off as usize] = n - self.deduped.min(n);
        dedup[DedupOutcome::Hit as usize] = replaced.min(self.deduped);
        dedup[DedupOutcome::Miss as usize] =
            self.deduped.min(n) - dedup[DedupOutcome::Hit as usize];
        let mut shapes = HashMap::new();
        if let Some(shape) = &self.shape_dominant {
            let top = round(self.shape_share, self.shaped);
            shapes.insert(vocab.shapes.index(shape), top);
            if self.shaped > top {
                *shapes.entry(vocab.shapes.index("other")).or_insert(0) += self.shaped - top;
            }
        }
        let mut inner = HashMap::new();
        for (rank, format) in self.inner_formats_top3.iter().enumerate() {
            let i = vocab.inner.index(format);
            if i != NONE {
                inner.insert(i, 3 - rank as u64);
            }
        }
        let mut templates = HashMap::new();
        let mut formats = HashMap::new();
        if self.encoded > 0 {
            // Only their total is read (the results re-encoded at all).
            formats.insert(vocab.formats.index("shared"), self.encoded);
            if let Some(t) = &self.template_top {
                templates.insert(
                    vocab.templates.index(t),
                    round(self.template_share, self.encoded),
                );
            }
        }
        let total = |per_call: f64| (per_call * n as f64).round() as i64;
        EndpointStats {
            tool,
            calls: n,
            observed: n,
            scaled: false,
            errors: self.errors,
            dedup,
            chars: (self.chars_mean * n as f64).round() as u64,
            shapes,
            inner,
            templates,
            formats,
            classes: HashMap::new(),
            tokens_baseline: total(self.baseline_tokens).max(0) as u64,
            tokens_final: total(
                self.baseline_tokens - self.dedup_saved_tokens - self.encoder_saved_tokens,
            )
            .max(0) as u64,
            dedup_saved: total(self.dedup_saved_tokens),
            encoder_saved: total(self.encoder_saved_tokens),
            // A fingerprint is of results alone.
            expanded: Default::default(),
            expanded_figures: Default::default(),
            id_line_cost: total(self.id_line_tokens),
            reference_saved: total(self.reference_saved_tokens),
            body_baseline: 0,
            body_encoder_saved: 0,
            sequenced: self.sequenced,
            sequenced_bodies: self.sequenced_bodies,
            implied_repeats: round(self.implied_dup_rate, self.sequenced),
            near_candidates: round(self.near_share, self.sequenced_bodies),
            median_tokens: self.tokens_p50,
        }
    }
}

/// The rows of `rows` seen in at least `k` sessions, and how many were
/// withheld.
pub fn k_anonymous(rows: Vec<Fingerprint>, k: u32) -> (Vec<Fingerprint>, usize) {
    let before = rows.len();
    let kept: Vec<Fingerprint> = rows
        .into_iter()
        .filter(|r| r.sessions >= u64::from(k))
        .collect();
    let withheld = before - kept.len();
    (kept, withheld)
}

/// A weighted mean over the rows that have evidence for it.
#[derive(Clone, Copy, Debug, Default)]
struct Mean {
    sum: f64,
    weight: f64,
}

impl Mean {
    fn add(&mut self, value: f64, weight: f64, evidence: bool) {
        if evidence && weight > 0.0 {
            self.sum += value * weight;
            self.weight += weight;
        }
    }
    fn get(&self) -> f64 {
        if self.weight == 0.0 {
            0.0
        } else {
            self.sum / self.weight
        }
    }
}

/// Scores by name; the winner and its score's share of `total`.
fn winner<K: AsRef<str>>(scores: &HashMap<K, f64>, total: f64) -> (Option<String>, f64) {
    scores
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.as_ref().cmp(a.0.as_ref())))
        .map(|(name, s)| {
            (
                Some(name.as_ref().to_owned()),
                if total > 0.0 { s / total } else { 0.0 },
            )
        })
        .unwrap_or((None, 0.0))
}

/// The name with the highest count (ties: the smaller name).
fn most(counts: &HashMap<String, u64>) -> String {
    counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(s, _)| s.clone())
        .unwrap_or_default()
}

/// One endpoint's running merge.
#[derive(Debug, Default)]
struct Merging {
    members: u32,
    sessions: u64,
    calls: u64,
    errors: u64,
    deduped: u64,
    sequenced: u64,
    sequenced_bodies: u64,
    shaped: u64,
    encoded: u64,
    dup_rate: Mean,
    implied_dup_rate: Mean,
    near_share: Mean,
    id_line_tokens: Mean,
    reference_saved_tokens: Mean,
    chars_mean: Mean,
    tokens_p50: Mean,
    tokens_p90: Mean,
    baseline_tokens: Mean,
    dedup_saved_tokens: Mean,
    encoder_saved_tokens: Mean,
    shapes: HashMap<String, f64>,
    shaped_weight: f64,
    templates: HashMap<String, f64>,
    encoded_weight: f64,
    inner: HashMap<String, f64>,
    versions: HashMap<String, u64>,
    tokenizers: HashMap<String, u64>,
    first_day: Option<i32>,
    last_day: Option<i32>,
}

impl Merging {
    fn add(&mut self, r: &Fingerprint) {
        let w = r.sessions as f64;
        self.members = self.members.saturating_add(r.members);
        self.sessions = self.sessions.saturating_add(r.sessions);
        self.calls = self.calls.saturating_add(r.calls);
        self.errors = self.errors.saturating_add(r.errors);
        self.deduped = self.deduped.saturating_add(r.deduped);
        self.sequenced = self.sequenced.saturating_add(r.sequenced);
        self.sequenced_bodies = self.sequenced_bodies.saturating_add(r.sequenced_bodies);
        self.shaped = self.shaped.saturating_add(r.shaped);
        self.encoded = self.encoded.saturating_add(r.encoded);
        let by_calls = r.calls > 0;
        self.dup_rate.add(r.dup_rate, w, by_calls);
        self.implied_dup_rate
            .add(r.implied_dup_rate, w, r.sequenced > 0);
        self.near_share.add(r.near_share, w, r.sequenced_bodies > 0);
        self.id_line_tokens.add(r.id_line_tokens, w, by_calls);
        self.reference_saved_tokens
            .add(r.reference_saved_tokens, w, by_calls);
        self.chars_mean.add(r.chars_mean, w, by_calls);
        self.tokens_p50.add(r.tokens_p50 as f64, w, by_calls);
        self.tokens_p90.add(r.tokens_p90 as f64, w, by_calls);
        self.baseline_tokens.add(r.baseline_tokens, w, by_calls);
        self.dedup_saved_tokens
            .add(r.dedup_saved_tokens, w, by_calls);
        self.encoder_saved_tokens
            .add(r.encoder_saved_tokens, w, by_calls);
        if r.shaped > 0 {
            self.shaped_weight += w;
            if let Some(s) = &r.shape_dominant {
                *self.shapes.entry(s.clone()).or_default() += w * r.shape_share;
            }
        }
        if r.encoded > 0 {
            self.encoded_weight += w;
            if let Some(t) = &r.template_top {
                *self.templates.entry(t.clone()).or_default() += w * r.template_share;
            }
        }
        for (rank, f) in r.inner_formats_top3.iter().take(3).enumerate() {
            *self.inner.entry(f.clone()).or_default() += w * (3 - rank) as f64;
        }
        *self.versions.entry(r.devboy_version.clone()).or_default() += r.sessions;
        *self.tokenizers.entry(r.tokenizer.clone()).or_default() += r.sessions;
        self.first_day = Some(self.first_day.map_or(r.first_day, |d| d.min(r.first_day)));
        self.last_day = Some(self.last_day.map_or(r.last_day, |d| d.max(r.last_day)));
    }

    fn finish(self, endpoint: String) -> Fingerprint {
        let (shape_dominant, shape_share) = winner(&self.shapes, self.shaped_weight);
        let (template_top, template_share) = winner(&self.templates, self.encoded_weight);
        let mut inner: Vec<(String, f64)> = self.inner.into_iter().collect();
        inner.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Fingerprint {
            endpoint,
            members: self.members,
            sessions: self.sessions,
            calls: self.calls,
            errors: self.errors,
            deduped: self.deduped,
            dup_rate: self.dup_rate.get(),
            sequenced: self.sequenced,
            implied_dup_rate: self.implied_dup_rate.get(),
            sequenced_bodies: self.sequenced_bodies,
            near_share: self.near_share.get(),
            id_line_tokens: self.id_line_tokens.get(),
            reference_saved_tokens: self.reference_saved_tokens.get(),
            chars_mean: self.chars_mean.get(),
            tokens_p50: self.tokens_p50.get().round() as u64,
            tokens_p90: self.tokens_p90.get().round() as u64,
            shaped: self.shaped,
            shape_dominant,
            shape_share,
            inner_formats_top3: inner.into_iter().take(3).map(|(f, _)| f).collect(),
            encoded: self.encoded,
            template_top,
            template_share,
            baseline_tokens: self.baseline_tokens.get(),
            dedup_saved_tokens: self.dedup_saved_tokens.get(),
            encoder_saved_tokens: self.encoder_saved_tokens.get(),
            first_day: self.first_day.unwrap_or(0),
            last_day: self.last_day.unwrap_or(0),
            devboy_version: most(&self.versions),
            tokenizer: most(&self.tokenizers),
        }
    }
}

/// The team's rows, merged one member's rows at a time: memory holds one
/// running sum per endpoint, never the members' rows, so the cost grows
/// linearly with members × endpoints ([`merge`] says how each figure is
/// merged).
#[derive(Debug, Default)]
pub struct Merger {
    endpoints: HashMap<String, Merging>,
}

impl Merger {
    /// Adds one member's rows: each endpoint once (the first row), counted
    /// as one member whatever the row says, and only rows that pass
    /// [`Fingerprint::check`] for `today`. Returns why each refused row was
    /// refused.
    pub fn add_member(&mut self, rows: Vec<Fingerprint>, today: i32) -> Vec<String> {
        let mut seen = HashSet::new();
        let mut refused = Vec::new();
        for row in rows {
            if !seen.insert(row.endpoint.clone()) {
                refused.push(format!("{}: listed twice", row.endpoint));
                continue;
            }
            if let Err(why) = row.check(today) {
                refused.push(format!("{}: {why}", row.endpoint));
                continue;
            }
            self.add(&Fingerprint { members: 1, ..row });
        }
        refused
    }

    /// Adds one row.
    fn add(&mut self, row: &Fingerprint) {
        match self.endpoints.get_mut(&row.endpoint) {
            Some(m) => m.add(row),
            None => {
                let mut m = Merging::default();
                m.add(row);
                self.endpoints.insert(row.endpoint.clone(), m);
            }
        }
    }

    /// Endpoints seen so far.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The merged rows of endpoints with at least `k` sessions and
    /// [`MIN_MEMBERS`] members, most calls first.
    pub fn finish(self, k: u32) -> Vec<Fingerprint> {
        let mut merged: Vec<Fingerprint> = self
            .endpoints
            .into_iter()
            .filter(|(_, m)| m.members >= MIN_MEMBERS && m.sessions >= u64::from(k))
            .map(|(endpoint, m)| m.finish(endpoint))
            .collect();
        merged.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.endpoint.cmp(&b.endpoint)));
        merged
    }
}

/// The team's rows: every member's rows (one list per member, checked as
/// [`Merger::add_member`] does) of the same endpoint merged, each member
/// weighing by its session count; counts are summed. Endpoints
/// with fewer than `k` sessions overall or fewer than [`MIN_MEMBERS`]
/// members are dropped. Linear in the number of rows ([`Merger`]).
///
/// A merged share (shape, template) is the sessions-weighted mean of the
/// members' shares of the winning name, a member whose dominant name is
/// another counting 0 for it: a lower bound. Percentiles are the
/// sessions-weighted mean of the members' percentiles, an approximation.
pub fn merge(
    members: impl IntoIterator<Item = Vec<Fingerprint>>,
    k: u32,
    today: i32,
) -> Vec<Fingerprint> {
    let mut merger = Merger::default();
    for rows in members {
        merger.add_member(rows, today);
    }
    merger.finish(k)
}

/// Where a prior came from.
#[derive(Clone, Debug, PartialEq)]
pub enum SharedSource {
    /// The team's aggregate, fresh.
    Team,
    /// The team's aggregate, older than the TTL: demoted to a provider's
    /// rank.
    StaleTeam,
    /// A provider's published document (its location).
    Provider(String),
}

impl std::fmt::Display for SharedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SharedSource::Team => f.write_str("team"),
            SharedSource::StaleTeam => f.write_str("team (stale)"),
            SharedSource::Provider(p) => write!(f, "provider {p}"),
        }
    }
}

/// A row someone else measured, with the weight it may have.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedRow {
    /// The figures.
    pub row: Fingerprint,
    /// Where they came from.
    pub source: SharedSource,
    /// Their share of a blend with the member's own figures.
    pub weight: f64,
}

/// What the member's own figures and the priors make of the endpoints.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SharedFigures {
    /// Team rows by endpoint.
    pub team: HashMap<String, Fingerprint>,
    /// Provider rows by exposed endpoint name, with the source and weight.
    pub providers: HashMap<String, SharedRow>,
    /// The team's share of a blend.
    pub team_weight: f64,
    /// Days after which a team row is demoted.
    pub ttl_days: u32,
}

/// The most a demoted team row or a provider may weigh.
pub const MAX_SHARED_WEIGHT: f64 = devboy_core::config::team::MAX_PROVIDER_WEIGHT;

impl SharedFigures {
    /// Whether there is nothing to blend.
    pub fn is_empty(&self) -> bool {
        self.team.is_empty() && self.providers.is_empty()
    }

    /// The prior for `endpoint` given the member's own row and today's
    /// day: a fresh team row at the team's weight; else a provider's row,
    /// or a stale team row, at most [`MAX_SHARED_WEIGHT`] and only while
    /// the member has fewer than `min_support` results of its own.
    pub fn shared_for(
        &self,
        endpoint: &str,
        own_calls: u64,
        min_support: u64,
        today: i32,
    ) -> Option<SharedRow> {
        let team = self.team.get(endpoint);
        if let Some(row) = team {
            if today - row.last_day <= self.ttl_days as i32 {
                return Some(SharedRow {
                    row: row.clone(),
                    source: SharedSource::Team,
                    weight: self.team_weight,
                });
            }
        }
        if own_calls >= min_support {
            return None;
        }
        if let Some(p) = self.providers.get(endpoint) {
            return Some(SharedRow {
                weight: p.weight.min(MAX_SHARED_WEIGHT),
                ..p.clone()
            });
        }
        team.map(|row| SharedRow {
            row: row.clone(),
            source: SharedSource::StaleTeam,
            weight: self.team_weight.min(MAX_SHARED_WEIGHT),
        })
    }
}

/// The figures the rules read for one endpoint: the prior's rates
/// weighted `prior.weight`, the member's own `1 - weight`, each rate only
/// where both have evidence for it (else the one that has); counts are the
/// larger of the two for a team's row (which may hold the member's own)
/// and the sum for a provider's, so the shared evidence counts toward the
/// rules' minimum support. Without an own row the prior stands alone.
pub fn blend(own: Option<&Fingerprint>, prior: &SharedRow) -> Fingerprint {
    let p = &prior.row;
    let Some(s) = own else {
        return p.clone();
    };
    // A team's row may already hold this member's own (when it shared):
    // its counts are the larger of the two, never their sum. A
    // provider's never does.
    let within = !matches!(prior.source, SharedSource::Provider(_));
    let add = |a: u64, b: u64| {
        if within {
            a.max(b)
        } else {
            a.saturating_add(b)
        }
    };
    let w = prior.weight.clamp(0.0, 1.0);
    let rate = |pv: f64, pn: u64, sv: f64, sn: u64| match (pn > 0, sn > 0) {
        (true, true) => w * pv + (1.0 - w) * sv,
        (true, false) => pv,
        _ => sv,
    };
    let named = |pn: Option<&String>, ps: f64, sn: Option<&String>, ss: f64, pe: u64, se: u64| {
        let mut scores: HashMap<&str, f64> = HashMap::new();
        let (wp, ws) = match (pe > 0, se > 0) {
            (true, true) => (w, 1.0 - w),
            (true, false) => (1.0, 0.0),
            _ => (0.0, 1.0),
        };
        if let Some(n) = pn {
            *scores.entry(n).or_default() += wp * ps;
        }
        if let Some(n) = sn {
            *scores.entry(n).or_default() += ws * ss;
        }
        winner(&scores, 1.0)
    };
    let (shape_dominant, shape_share) = named(
        p.shape_dominant.as_ref(),
        p.shape_share,
        s.shape_dominant.as_ref(),
        s.shape_share,
        p.shaped,
        s.shaped,
    );
    let (template_top, template_share) = named(
        p.template_top.as_ref(),
        p.template_share,
        s.template_top.as_ref(),
        s.template_share,
        p.encoded,
        s.encoded,
    );
    let mut inner: HashMap<&str, f64> = HashMap::new();
    for (rows, weight) in [(&p.inner_formats_top3, w), (&s.inner_formats_top3, 1.0 - w)] {
        for (rank, f) in rows.iter().enumerate() {
            *inner.entry(f).or_default() += weight * (3 - rank) as f64;
        }
    }
    let mut inner: Vec<(&str, f64)> = inner.into_iter().collect();
    inner.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let calls = (p.calls, s.calls);
    Fingerprint {
        endpoint: s.endpoint.clone(),
        members: if within { p.members } else { p.members + 1 },
        sessions: add(p.sessions, s.sessions),
        calls: add(p.calls, s.calls),
        errors: add(p.errors, s.errors),
        deduped: add(p.deduped, s.deduped),
        dup_rate: rate(p.dup_rate, calls.0, s.dup_rate, calls.1),
        sequenced: add(p.sequenced, s.sequenced),
        implied_dup_rate: rate(
            p.implied_dup_rate,
            p.sequenced,
            s.implied_dup_rate,
            s.sequenced,
        ),
        sequenced_bodies: add(p.sequenced_bodies, s.sequenced_bodies),
        near_share: rate(
            p.near_share,
            p.sequenced_bodies,
            s.near_share,
            s.sequenced_bodies,
        ),
        id_line_tokens: rate(p.id_line_tokens, calls.0, s.id_line_tokens, calls.1),
        reference_saved_tokens: rate(
            p.reference_saved_tokens,
            calls.0,
            s.reference_saved_tokens,
            calls.1,
        ),
        chars_mean: rate(p.chars_mean, calls.0, s.chars_mean, calls.1),
        tokens_p50: rate(p.tokens_p50 as f64, calls.0, s.tokens_p50 as f64, calls.1).round() as u64,
        tokens_p90: rate(p.tokens_p90 as f64, calls.0, s.tokens_p90 as f64, calls.1).round() as u64,
        shaped: add(p.shaped, s.shaped),
        shape_dominant,
        shape_share,
        inner_formats_top3: inner
            .into_iter()
            .take(3)
            .map(|(f, _)| f.to_owned())
            .collect(),
        encoded: add(p.encoded, s.encoded),
        template_top,
        template_share,
        baseline_tokens: rate(p.baseline_tokens, calls.0, s.baseline_tokens, calls.1),
        dedup_saved_tokens: rate(p.dedup_saved_tokens, calls.0, s.dedup_saved_tokens, calls.1),
        encoder_saved_tokens: rate(
            p.encoder_saved_tokens,
            calls.0,
            s.encoder_saved_tokens,
            calls.1,
        ),
        first_day: p.first_day.min(s.first_day),
        last_day: p.last_day.max(s.last_day),
        devboy_version: s.devboy_version.clone(),
        tokenizer: s.tokenizer.clone(),
    }
}

/// An id for an endpoint this member has no events of (a team or
/// provider row): FNV-1a of its name with the top bit set, apart from the
/// salted hashes real events carry.
pub fn foreign_id(endpoint: &str) -> u64 {
    devboy_core::hash::fnv1a64(endpoint.as_bytes()) | (1 << 63)
}

#[cfg(test)]
mod tests;
