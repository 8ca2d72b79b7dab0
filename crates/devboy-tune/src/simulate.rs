//! What a config would have saved on the recorded events: a replay of L0's
//! cache over each session, and a per-event estimate of the tokens sent.
//!
//! # Method
//!
//! Each fully recorded session is replayed twice in recorded order, once
//! under the current settings and once under the proposed ones, through a
//! model of the dedup cache that mirrors `devboy_pipeline::dedup`: keyed by
//! body fingerprint, LRU-bounded by entries and bytes, a hit counted only
//! within the TTL from delivery (a hit promotes but does not refresh), a
//! new partition forgetting everything, bodies outside the endpoint's size
//! range or with dedup off not eligible, elided bodies never remembered.
//! Each replay classifies every event as not eligible, fresh, or a hit.
//! A property test drives the model and the real `DedupCache` through
//! generated sessions and requires them to agree on every lookup and
//! eviction.
//!
//! An event's estimate starts from what was **recorded** and changes only
//! where the two replays disagree (a delta, not a re-run), and only for
//! events whose record shows what the current-settings replay says
//! happened ([`agrees`]; the report gives the share, see
//! [`Simulator::reproduced`]):
//!
//! | replays say | estimate under the proposal |
//! |---|---|
//! | same outcome | the recorded tokens |
//! | hit → not a hit | the body's baseline minus the endpoint's mean encoder saving, plus an id line if fresh |
//! | not a hit → hit | a reference (the measured mean cost of one) |
//! | fresh → not eligible | the recorded tokens minus the recorded id line |
//! | not eligible → fresh | the recorded tokens plus an id line (measured mean) |
//!
//! plus near-references turned on (a near candidate sent as a body becomes
//! a near-reference at its measured mean cost, when that is at most half
//! the body, as the pipeline requires) or off (a recorded near-reference
//! becomes the body), and a template pin (a body the router encoded with
//! another format loses that saving).
//!
//! # What it cannot know
//!
//! - **Arguments and contents.** Telemetry has neither, so near candidates
//!   are a pattern (same endpoint, other fingerprint, size within 2%), not
//!   the pipeline's exact test (same call, at most `max_changes` scalar
//!   fields); their estimate is an upper bound. A pin's effect on bodies
//!   the router encoded otherwise is taken as the whole saving lost, a
//!   lower bound.
//! - **Invalidations.** Which calls mutated which paths is not recorded,
//!   so the replay takes a body a mutating call made the pipeline forget
//!   for a hit. That event's record (a miss) disagrees with the replay, so
//!   it keeps its recorded figures under any proposal: the estimate never
//!   extrapolates from what the model cannot explain, in either direction.
//! - **Second-order effects** of a change on other endpoints (through the
//!   shared cache) are estimated like the first-order ones, from the same
//!   replay; the final check runs all kept changes together.
//! - **Bytes.** `response_chars` stands for the body's bytes; they are
//!   equal for ASCII and chars are fewer otherwise, so size thresholds
//!   are applied slightly generously.
//! - **Sampled sessions** (and sessions whose writer dropped events)
//!   cannot be replayed: the missing events would hide hits and evictions.
//!   They are left out of the replay and of every estimate: their events
//!   keep their recorded figures on both sides, whatever the proposal
//!   (no near-reference or pin adjustment either), weighted by
//!   `1/sample_rate` like the aggregate's totals
//!   ([`crate::aggregate`]), so they add to the baseline and to both
//!   savings alike and never to a gain. [`Simulator::excluded`] counts
//!   them.
//! - **Encoder savings of bodies that were references**: estimated with
//!   the endpoint's mean ratio on the bodies it did send.

use std::collections::{HashMap, VecDeque};

use devboy_core::pipeline_config::{EndpointSettings, PipelineConfig};

use crate::aggregate::{Analysis, EventFacts};
use crate::event::{DedupOutcome, Record};
use crate::names::ExposedNames;
use crate::read::EventTable;

/// The settings the replay needs, resolved per endpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `dedup.max_entries`.
    pub max_entries: usize,
    /// `dedup.max_context_bytes`.
    pub max_bytes: usize,
    /// `dedup.ttl_secs`, in milliseconds.
    pub ttl_ms: u64,
    endpoints: HashMap<u64, EndpointSettings>,
    fallback: EndpointSettings,
}

impl Settings {
    /// The effective settings of `config` for every endpoint in `tools`:
    /// named endpoints resolve through [`PipelineConfig::endpoint`] (the
    /// same pure function devboy runs with); unnamed ones get the
    /// section defaults, since globs match names.
    pub fn from_config(
        config: &PipelineConfig,
        names: &ExposedNames,
        tools: impl IntoIterator<Item = u64>,
    ) -> Self {
        let fallback = EndpointSettings {
            dedup: config.dedup.enabled,
            min_body_bytes: config.dedup.min_body_bytes,
            near_ref: config.dedup.near_ref.enabled,
            encode: config.encoding.enabled,
            template: None,
        };
        let endpoints = tools
            .into_iter()
            .filter_map(|t| names.get(t).map(|n| (t, config.endpoint(n))))
            .collect();
        Settings {
            max_entries: config.dedup.max_entries,
            max_bytes: config.dedup.max_context_bytes,
            ttl_ms: config.dedup.ttl.as_millis() as u64,
            endpoints,
            fallback,
        }
    }

    /// The effective settings of `tool`.
    pub fn endpoint(&self, tool: u64) -> &EndpointSettings {
        self.endpoints.get(&tool).unwrap_or(&self.fallback)
    }

    /// A copy with other cache bounds (for the rules' what-ifs).
    pub fn with_cache(&self, max_entries: usize, ttl_ms: u64) -> Self {
        Settings {
            max_entries,
            ttl_ms,
            ..self.clone()
        }
    }
}

/// What the cache model did with one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayOutcome {
    /// Not replayed (sampled session, error, no fingerprint).
    Untouched,
    /// Dedup off for the endpoint, or the body outside its size range.
    NotEligible,
    /// Sent in full and remembered.
    Fresh,
    /// Answered with a reference.
    Hit,
}

/// Replays every fully recorded session under `settings`; events of
/// sampled sessions (or with dropped events) stay [`ReplayOutcome::Untouched`].
pub fn replay(table: &EventTable, analysis: &Analysis, settings: &Settings) -> Vec<ReplayOutcome> {
    let records = &table.records;
    let mut out = vec![ReplayOutcome::Untouched; records.len()];
    let mut cache = CacheModel::new(settings);
    for (_, complete, indexes) in &analysis.by_session {
        if !complete {
            continue;
        }
        cache.clear();
        let mut partition = None;
        for &i in indexes {
            let i = i as usize;
            if !analysis.facts[i].sequenced {
                continue;
            }
            let r = &records[i];
            if partition != Some(r.partition) {
                partition = Some(r.partition);
                cache.clear();
            }
            let s = settings.endpoint(r.tool);
            let len = r.response_chars as usize;
            let eligible = s.dedup && len >= s.min_body_bytes.max(1) && len <= settings.max_bytes;
            out[i] = if !eligible {
                ReplayOutcome::NotEligible
            } else if cache.lookup(r.fingerprint, r.ts_ms) {
                ReplayOutcome::Hit
            } else {
                let near_sent = r.dedup == DedupOutcome::Near && s.near_ref;
                if !r.elided() && !near_sent {
                    cache.record(r.fingerprint, len, r.ts_ms);
                }
                ReplayOutcome::Fresh
            };
        }
    }
    out
}

/// Hits in a replay.
pub fn hits(outcomes: &[ReplayOutcome]) -> u64 {
    outcomes
        .iter()
        .filter(|o| **o == ReplayOutcome::Hit)
        .count() as u64
}

/// The dedup cache's rules (`devboy_pipeline::DedupCache`), as far as the
/// replay needs them. A model rather than the real cache because the real
/// one is keyed by SHA-256 fingerprints of bodies and keeps a `Delivered`
/// record per entry, where the replay has a 128-bit telemetry hash and
/// nothing to deliver, over millions of events per replay and a replay per
/// candidate change. The property test
/// `the_cache_model_agrees_with_the_real_dedup_cache` keeps the two equal.
pub(crate) struct CacheModel {
    entries: HashMap<u128, Slot>,
    /// Use order, oldest first; an element is live only while its stamp
    /// is the slot's `used` (older ones are skipped on eviction).
    order: VecDeque<(u64, u128)>,
    clock: u64,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
    ttl_ms: u64,
}

struct Slot {
    delivered_ms: u64,
    len: usize,
    used: u64,
}

impl CacheModel {
    fn new(settings: &Settings) -> Self {
        Self::with_bounds(settings.max_entries, settings.max_bytes, settings.ttl_ms)
    }

    /// A cache with these bounds.
    pub(crate) fn with_bounds(max_entries: usize, max_bytes: usize, ttl_ms: u64) -> Self {
        CacheModel {
            entries: HashMap::new(),
            order: VecDeque::new(),
            clock: 0,
            bytes: 0,
            max_entries,
            max_bytes,
            ttl_ms,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
        self.bytes = 0;
    }

    pub(crate) fn lookup(&mut self, fp: u128, now: u64) -> bool {
        let Some(slot) = self.entries.get_mut(&fp) else {
            return false;
        };
        if now.saturating_sub(slot.delivered_ms) >= self.ttl_ms {
            self.remove(fp);
            return false;
        }
        self.clock += 1;
        slot.used = self.clock;
        self.order.push_back((self.clock, fp));
        true
    }

    pub(crate) fn record(&mut self, fp: u128, len: usize, now: u64) {
        if self.max_entries == 0 || len > self.max_bytes {
            return;
        }
        self.clock += 1;
        let slot = Slot {
            delivered_ms: now,
            len,
            used: self.clock,
        };
        if let Some(old) = self.entries.insert(fp, slot) {
            self.bytes -= old.len;
        }
        self.bytes += len;
        self.order.push_back((self.clock, fp));
        while self.entries.len() > self.max_entries || self.bytes > self.max_bytes {
            let Some((stamp, victim)) = self.order.pop_front() else {
                break;
            };
            if self.entries.get(&victim).is_some_and(|s| s.used == stamp) {
                self.remove(victim);
            }
        }
        // Keep the order queue from growing with stale stamps.
        if self.order.len() > 4 * self.entries.len() + 1024 {
            let mut live: Vec<(u64, u128)> =
                self.entries.iter().map(|(fp, s)| (s.used, *fp)).collect();
            live.sort_unstable();
            self.order = live.into();
        }
    }

    fn remove(&mut self, fp: u128) {
        if let Some(slot) = self.entries.remove(&fp) {
            self.bytes -= slot.len;
        }
    }
}

/// Tokens saved on one endpoint (or all), as recorded and as estimated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Estimate {
    /// Baseline tokens.
    pub baseline: u64,
    /// Saved as recorded (`baseline - final`).
    pub old_saved: i64,
    /// Saved under the proposal, estimated.
    pub new_saved: i64,
    /// Events whose estimate differs from the record.
    pub changed: u64,
}

impl Estimate {
    /// `new_saved - old_saved`.
    pub fn gain(&self) -> i64 {
        self.new_saved - self.old_saved
    }

    /// A saving as a percentage of the baseline.
    pub fn pct(&self, saved: i64) -> f64 {
        if self.baseline == 0 {
            0.0
        } else {
            saved as f64 * 100.0 / self.baseline as f64
        }
    }
}

/// The result of one simulation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Simulation {
    /// Per endpoint.
    pub endpoints: HashMap<u64, Estimate>,
    /// All events.
    pub total: Estimate,
}

/// Simulates proposals against one current config, replaying the current
/// settings once.
pub struct Simulator<'a> {
    table: &'a EventTable,
    analysis: &'a Analysis,
    current: Settings,
    current_outcomes: Vec<ReplayOutcome>,
    encoder_ratio: HashMap<u64, f64>,
    /// Per record: its session is left out (sampled or with dropped
    /// events).
    excluded: Vec<bool>,
    excluded_sessions: u64,
}

impl<'a> Simulator<'a> {
    /// A simulator for `current`.
    pub fn new(table: &'a EventTable, analysis: &'a Analysis, current: Settings) -> Self {
        let current_outcomes = replay(table, analysis, &current);
        let encoder_ratio = analysis
            .endpoints
            .iter()
            .map(|e| (e.tool, e.encoder_ratio()))
            .collect();
        let mut excluded = vec![false; table.records.len()];
        let mut excluded_sessions = 0;
        for (_, complete, indexes) in &analysis.by_session {
            if !complete {
                excluded_sessions += 1;
                for &i in indexes {
                    excluded[i as usize] = true;
                }
            }
        }
        Simulator {
            table,
            analysis,
            current,
            current_outcomes,
            encoder_ratio,
            excluded,
            excluded_sessions,
        }
    }

    /// What the replay and the estimates leave out, keeping its recorded
    /// figures: (sessions sampled or with dropped events, their events).
    pub fn excluded(&self) -> (u64, u64) {
        let events = self.excluded.iter().filter(|x| **x).count() as u64;
        (self.excluded_sessions, events)
    }

    /// The current settings.
    pub fn current(&self) -> &Settings {
        &self.current
    }

    /// The replay of the current settings.
    pub fn current_outcomes(&self) -> &[ReplayOutcome] {
        &self.current_outcomes
    }

    /// How well the model explains the record: (replayed events whose
    /// record agrees with the current-settings replay, replayed events).
    pub fn reproduced(&self) -> (u64, u64) {
        let mut agreeing = 0;
        let mut replayed = 0;
        for (o, r) in self.current_outcomes.iter().zip(&self.table.records) {
            if *o != ReplayOutcome::Untouched {
                replayed += 1;
                agreeing += u64::from(agrees(*o, r));
            }
        }
        (agreeing, replayed)
    }

    /// Estimates what `proposed` would have saved.
    pub fn run(&self, proposed: &Settings) -> Simulation {
        let outcomes = replay(self.table, self.analysis, proposed);
        let vocab = &self.table.vocab;
        let mut sim = Simulation::default();
        // Weighted recorded figures of excluded sessions sampled at a rate
        // below 1: (baseline, saved) per endpoint, rounded once at the end.
        let mut scaled: HashMap<u64, (f64, f64)> = HashMap::new();
        for (i, r) in self.table.records.iter().enumerate() {
            if self.excluded[i] {
                let w = self.analysis.weight(r.session);
                if w != 1.0 {
                    let s = scaled.entry(r.tool).or_default();
                    s.0 += w * f64::from(r.tokens_baseline);
                    s.1 += w * r.saved() as f64;
                    continue;
                }
                for e in [sim.endpoints.entry(r.tool).or_default(), &mut sim.total] {
                    e.baseline += u64::from(r.tokens_baseline);
                    e.old_saved += r.saved();
                    e.new_saved += r.saved();
                }
                continue;
            }
            let old_s = self.current.endpoint(r.tool);
            let new_s = proposed.endpoint(r.tool);
            let pin = (new_s.template != old_s.template)
                .then_some(new_s.template.as_deref())
                .flatten()
                .map(|t| vocab.templates.find(t));
            let fin = estimate(
                r,
                &self.analysis.facts[i],
                (self.current_outcomes[i], outcomes[i]),
                (old_s, new_s),
                pin,
                Costs {
                    id: self.analysis.id_tokens,
                    reference: self.analysis.ref_tokens,
                    near: self.analysis.near_tokens,
                    encoder_ratio: self.encoder_ratio.get(&r.tool).copied().unwrap_or(0.0),
                },
            );
            let baseline = i64::from(r.tokens_baseline);
            for e in [sim.endpoints.entry(r.tool).or_default(), &mut sim.total] {
                e.baseline += u64::from(r.tokens_baseline);
                e.old_saved += r.saved();
                e.new_saved += baseline - fin;
                e.changed += u64::from(fin != i64::from(r.tokens_final));
            }
        }
        let (mut total_baseline, mut total_saved) = (0.0, 0.0);
        for (tool, (baseline, saved)) in scaled {
            let e = sim.endpoints.entry(tool).or_default();
            e.baseline += baseline.round() as u64;
            e.old_saved += saved.round() as i64;
            e.new_saved += saved.round() as i64;
            total_baseline += baseline;
            total_saved += saved;
        }
        sim.total.baseline += total_baseline.round() as u64;
        sim.total.old_saved += total_saved.round() as i64;
        sim.total.new_saved += total_saved.round() as i64;
        sim
    }
}

/// Measured costs the estimate uses.
#[derive(Clone, Copy, Debug)]
struct Costs {
    id: f64,
    reference: f64,
    near: f64,
    encoder_ratio: f64,
}

/// Whether the record shows what the replay of the current settings
/// says happened to it. Only then does the estimate move it: an event the
/// model cannot reproduce (a mutating call invalidated it, the settings
/// differed when it was recorded) keeps its recorded figures, so the
/// model's errors are not extrapolated in either direction.
pub fn agrees(outcome: ReplayOutcome, r: &Record) -> bool {
    match outcome {
        ReplayOutcome::Untouched => false,
        ReplayOutcome::Hit => r.dedup == DedupOutcome::Hit,
        ReplayOutcome::Fresh => matches!(r.dedup, DedupOutcome::Miss | DedupOutcome::Near),
        ReplayOutcome::NotEligible => matches!(r.dedup, DedupOutcome::Off | DedupOutcome::Miss),
    }
}

/// The tokens `r` would have cost under the proposal; see the module docs.
/// `pin` is `Some(index of the pinned template, if any event used it)`
/// when the proposal pins a template the current settings do not.
fn estimate(
    r: &Record,
    facts: &EventFacts,
    (old, new): (ReplayOutcome, ReplayOutcome),
    (old_s, new_s): (&EndpointSettings, &EndpointSettings),
    pin: Option<Option<u8>>,
    costs: Costs,
) -> i64 {
    let baseline = i64::from(r.tokens_baseline);
    let recorded = i64::from(r.tokens_final);
    let replaced = r.dedup.is_duplicate();
    let id = costs.id.round() as i64;
    let id_recorded = if r.dedup == DedupOutcome::Miss && r.dedup_saved < 0 {
        -i64::from(r.dedup_saved)
    } else {
        0
    };
    let body = |with_id: bool| {
        baseline - (baseline as f64 * costs.encoder_ratio).round() as i64
            + if with_id { id } else { 0 }
    };
    let mut fin = recorded;
    if old != new && new != ReplayOutcome::Untouched && agrees(old, r) {
        match (old, new) {
            (_, ReplayOutcome::Hit) => fin = fin.min(costs.reference.round() as i64),
            (ReplayOutcome::Hit, _) => fin = body(new == ReplayOutcome::Fresh && !r.elided()),
            (ReplayOutcome::Fresh, ReplayOutcome::NotEligible) => fin -= id_recorded,
            (ReplayOutcome::NotEligible, ReplayOutcome::Fresh)
                if id_recorded == 0 && !r.elided() =>
            {
                fin += id;
            }
            _ => {}
        }
    }
    let near_old = old_s.dedup && old_s.near_ref;
    let near_new = new_s.dedup && new_s.near_ref;
    if near_new && !near_old && facts.near_candidate && new != ReplayOutcome::Hit && !replaced {
        let near = costs.near.round() as i64;
        if near * 2 <= fin {
            fin = near;
        }
    }
    if !near_new && r.dedup == DedupOutcome::Near {
        fin = body(new == ReplayOutcome::Fresh);
    }
    if let Some(pinned) = pin {
        let encoded_otherwise = r.encoder_saved > 0 && pinned != Some(r.template);
        if !replaced && fin == recorded && encoded_otherwise {
            fin += i64::from(r.encoder_saved);
        }
    }
    fin
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{analyze, SequenceParams};
    use crate::event::Names;

    const PARAMS: SequenceParams = SequenceParams {
        near_min_body_bytes: 1024,
        ttl_ms: 1_800_000,
    };

    fn settings(dedup: bool, max_entries: usize, ttl_ms: u64) -> Settings {
        Settings {
            max_entries,
            max_bytes: 4 << 20,
            ttl_ms,
            endpoints: HashMap::new(),
            fallback: EndpointSettings {
                dedup,
                min_body_bytes: 512,
                near_ref: false,
                encode: true,
                template: None,
            },
        }
    }

    /// A session of `fps` bodies (2000 chars, 500 tokens), one second
    /// apart, recorded as the given outcomes.
    fn session(fps: &[(u128, DedupOutcome)]) -> EventTable {
        let records = fps
            .iter()
            .enumerate()
            .map(|(i, (fp, d))| {
                let mut r = Record::blank(1, 1).with_flags(false, false, true);
                r.ts_ms = i as u64 * 1000;
                r.fingerprint = *fp;
                r.response_chars = 2000;
                r.tokens_baseline = 500;
                r.dedup = *d;
                match d {
                    DedupOutcome::Hit => {
                        r.tokens_final = 15;
                        r.dedup_saved = 485;
                    }
                    DedupOutcome::Miss => {
                        r.tokens_final = 506;
                        r.dedup_saved = -6;
                    }
                    _ => r.tokens_final = 500,
                }
                r
            })
            .collect();
        EventTable {
            records,
            ..EventTable::default()
        }
    }

    /// One step of a generated session, as [`replay`] drives the cache.
    #[derive(Clone, Debug)]
    enum Step {
        /// A result with the session's body `body`: looked up, and on a
        /// miss remembered if `delivered` (sent in full, not elided).
        Result { body: usize, delivered: bool },
        /// Milliseconds pass.
        Wait(u64),
        /// A compaction: a new context partition.
        Compaction,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0..8usize, proptest::bool::weighted(0.8))
                .prop_map(|(body, delivered)| Step::Result { body, delivered }),
            2 => (0..4u64).prop_map(|n| Step::Wait(n * 500)),
            1 => Just(Step::Compaction),
        ]
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// The replay's cache model and the pipeline's `DedupCache` agree
        /// on every lookup, and after every step on what is remembered
        /// (so on every eviction, by entries, bytes, TTL or partition).
        /// Eligibility (dedup off, the endpoint's size range) is decided
        /// before the cache by both, so the real cache runs with no minimum.
        #[test]
        fn the_cache_model_agrees_with_the_real_dedup_cache(
            max_entries in 0..6usize,
            // Sizes and times in coarse units, so that bounds are met
            // exactly as often as they are crossed.
            max_bytes in (0..60usize).prop_map(|n| n * 100),
            ttl_ms in (0..8u64).prop_map(|n| n * 1_000),
            lens in proptest::collection::vec((1..30usize).prop_map(|n| n * 100), 8),
            steps in proptest::collection::vec(step(), 1..80),
        ) {
            use std::time::Duration;

            use devboy_pipeline::{
                DedupCache, DedupConfig, Delivered, EndpointKey, Fingerprint, IdAllocator,
                Timestamp,
            };

            let mut model = CacheModel::with_bounds(max_entries, max_bytes, ttl_ms);
            let mut real = DedupCache::new(DedupConfig {
                max_entries,
                max_bytes,
                min_body_bytes: 0,
                ttl: Duration::from_millis(ttl_ms),
            });
            let fingerprints: Vec<Fingerprint> =
                (0..lens.len()).map(|b| Fingerprint::of(&[b as u8])).collect();
            let mut ids = IdAllocator::seeded(7);
            let endpoint = EndpointKey::new("up", "tool");
            let mut now = 0u64;
            for (n, step) in steps.iter().enumerate() {
                match *step {
                    Step::Result { body, delivered } => {
                        let (fp, len) = (body as u128, lens[body]);
                        let at = Timestamp::from_millis(now);
                        let model_hit = model.lookup(fp, now);
                        let real_hit = real.lookup(fingerprints[body], at).is_some();
                        proptest::prop_assert_eq!(model_hit, real_hit, "lookup at step {}", n);
                        if !model_hit && delivered {
                            model.record(fp, len, now);
                            let shown = Delivered::new(ids.next(), endpoint.clone(), Vec::<String>::new());
                            real.record_delivered(fingerprints[body], shown, len, at);
                        }
                    }
                    Step::Wait(ms) => now += ms,
                    Step::Compaction => {
                        model.clear();
                        real.advance_partition();
                    }
                }
                let at = Timestamp::from_millis(now);
                for (b, fp) in fingerprints.iter().enumerate() {
                    let in_model = model
                        .entries
                        .get(&(b as u128))
                        .is_some_and(|s| now.saturating_sub(s.delivered_ms) < ttl_ms);
                    let in_real = real.still_delivered(*fp, at).is_some();
                    proptest::prop_assert_eq!(in_model, in_real, "body {} after step {}", b, n);
                }
                proptest::prop_assert_eq!(model.entries.len(), real.len(), "entries after step {}", n);
                proptest::prop_assert_eq!(model.bytes, real.total_bytes(), "bytes after step {}", n);
            }
        }
    }

    #[test]
    fn cache_model_lru_ttl_and_promotion() {
        use DedupOutcome::Miss;
        let t = session(&[(1, Miss), (2, Miss), (3, Miss), (1, Miss), (2, Miss)]);
        let a = analyze(&t, PARAMS);
        // Two entries: 3 evicts 1 (LRU), then 1 misses and evicts 2.
        let o = replay(&t, &a, &settings(true, 2, 1_800_000));
        assert_eq!(hits(&o), 0);
        let o = replay(&t, &a, &settings(true, 3, 1_800_000));
        assert_eq!(o[3], ReplayOutcome::Hit);
        assert_eq!(hits(&o), 2);
        // TTL of 2.5 s: 1 delivered at 0 s is stale at 3 s; 2 (1 s) at 4 s too.
        let o = replay(&t, &a, &settings(true, 3, 2_500));
        assert_eq!(hits(&o), 0);
        let o = replay(&t, &a, &settings(false, 3, 1_800_000));
        assert!(o.iter().all(|x| *x == ReplayOutcome::NotEligible));
    }

    #[test]
    fn same_settings_change_nothing() {
        use DedupOutcome::{Hit, Miss};
        let t = session(&[(1, Miss), (1, Hit), (2, Miss)]);
        let a = analyze(&t, PARAMS);
        let s = settings(true, 256, 1_800_000);
        let sim = Simulator::new(&t, &a, s.clone()).run(&s);
        assert_eq!(sim.total.old_saved, sim.total.new_saved);
        assert_eq!(sim.total.changed, 0);
    }

    #[test]
    fn dedup_off_drops_id_lines_and_references() {
        use DedupOutcome::{Hit, Miss};
        let t = session(&[(1, Miss), (1, Hit), (2, Miss)]);
        let a = analyze(&t, PARAMS);
        let sim = Simulator::new(&t, &a, settings(true, 256, 1_800_000))
            .run(&settings(false, 256, 1_800_000));
        // Recorded: -6 + 485 - 6 = 473. Off: 0 + 0 (body, no encoder) + 0.
        assert_eq!(sim.total.old_saved, 473);
        assert_eq!(sim.total.new_saved, 0);
        assert_eq!(sim.total.changed, 3);
    }

    #[test]
    fn dedup_on_turns_repeats_into_references() {
        use DedupOutcome::Off;
        let t = session(&[(1, Off), (1, Off), (1, Off), (2, Off)]);
        let a = analyze(&t, PARAMS);
        let sim = Simulator::new(&t, &a, settings(false, 256, 1_800_000))
            .run(&settings(true, 256, 1_800_000));
        // Two fresh bodies pay an id line (7); two repeats cost 17 instead of 500.
        assert_eq!(sim.total.old_saved, 0);
        assert_eq!(sim.total.new_saved, 2 * 483 - 2 * 7);
    }

    #[test]
    fn a_pin_loses_savings_of_bodies_encoded_otherwise() {
        use DedupOutcome::Off;
        let mut t = session(&[(1, Off), (2, Off)]);
        let mut templates = Names::default();
        let md = templates.index("md_tables_csv");
        t.records[0].template = md;
        t.records[0].encoder_saved = 300;
        t.records[0].tokens_final = 200;
        t.records[1].encoder_saved = 100;
        t.records[1].tokens_final = 400;
        t.vocab.templates = templates;
        let a = analyze(&t, PARAMS);
        let old = settings(false, 256, 1_800_000);
        let mut new = old.clone();
        new.fallback.template = Some("md_tables_csv".into());
        let sim = Simulator::new(&t, &a, old).run(&new);
        assert_eq!(sim.total.old_saved, 400);
        assert_eq!(sim.total.new_saved, 300, "the other body loses its 100");
    }

    /// The session of [`dedup_off_drops_id_lines_and_references`] twice:
    /// as session 1, fully recorded, and as session 2, sampled at `rate`
    /// (with a near-reference added to it).
    fn with_sampled_copy(rate: f64) -> EventTable {
        use crate::event::{ClientKind, SessionRecord};
        use DedupOutcome::{Hit, Miss, Near};
        let mut t = session(&[(1, Miss), (1, Hit), (2, Miss)]);
        let mut copy = session(&[(1, Miss), (1, Hit), (2, Miss), (3, Near)]).records;
        copy[3].tokens_final = 40;
        copy[3].dedup_saved = 460;
        for r in &mut copy {
            r.session = 2;
        }
        t.records.extend(copy);
        for (id, sample_rate) in [(1, 1.0), (2, rate)] {
            t.sessions.insert(
                id,
                SessionRecord {
                    results: 4,
                    sample_rate,
                    compactions: 0,
                    dropped: 0,
                    client: ClientKind::ClaudeCode,
                    speculation: None,
                    tokens_final: 0,
                    definitions: None,
                },
            );
        }
        t
    }

    #[test]
    fn sampled_sessions_are_left_out_of_the_replay_and_keep_scaled_figures() {
        let t = with_sampled_copy(0.5);
        let a = analyze(&t, PARAMS);
        let simulator = Simulator::new(&t, &a, settings(true, 256, 1_800_000));
        assert_eq!(simulator.excluded(), (1, 4));
        assert!(simulator.current_outcomes()[3..]
            .iter()
            .all(|o| *o == ReplayOutcome::Untouched));
        assert_eq!(simulator.reproduced(), (3, 3), "only session 1 replayed");
        let sim = simulator.run(&settings(false, 256, 1_800_000));
        // Session 1 as in dedup_off_drops_id_lines_and_references: 473 -> 0.
        // Session 2 (saved -6 + 485 - 6 + 460 = 933, weight 2) is the same
        // on both sides, though near-references are off in the proposal.
        assert_eq!(sim.total.old_saved, 473 + 2 * 933);
        assert_eq!(sim.total.new_saved, 2 * 933);
        assert_eq!(sim.total.gain(), -473);
        assert_eq!(sim.total.baseline, 3 * 500 + 2 * 4 * 500);
        assert_eq!(sim.total.changed, 3);
        assert_eq!(sim.endpoints[&1], sim.total);
    }

    #[test]
    fn a_session_at_rate_one_is_replayed_with_the_others() {
        let t = with_sampled_copy(1.0);
        let a = analyze(&t, PARAMS);
        let simulator = Simulator::new(&t, &a, settings(true, 256, 1_800_000));
        assert_eq!(simulator.excluded(), (0, 0));
        assert!(simulator.current_outcomes()[3..]
            .iter()
            .all(|o| *o != ReplayOutcome::Untouched));
        let sim = simulator.run(&settings(false, 256, 1_800_000));
        assert_eq!(sim.total.baseline, 7 * 500);
        assert!(sim.total.changed > 3);
    }
}
