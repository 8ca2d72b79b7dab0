//! The dedup stage: one session's dedup decisions.
//!
//! [`DedupStage`] owns the session's [`DedupCache`], [`ExpandStore`] and
//! [`IdAllocator`] and turns "this body is about to reach the model" into
//! a [`DedupDecision`]:
//!
//! - a body the model already holds in full, in the current context, is
//!   replaced by a one-line reference naming the visible id it was shown
//!   with (`> [ref: kafrum3, unchanged; devboy_expand kafrum3]`);
//! - a fresh body large enough to be worth referencing later goes out in
//!   full with its id on one extra line (`> [id: kafrum3]`), so a later
//!   reference resolves by plain text match (invariant 2 in docs/invariants.md);
//! - a body of a polling call (same endpoint, same arguments) that differs
//!   from the last full delivery only in a few scalar fields, when the
//!   endpoint asks for it, becomes that delivery's id plus the exact
//!   changes ([`crate::near`]), with its own id for `devboy_expand`;
//! - a re-read whose text changed in a few lines since the version the
//!   model holds (the same call, or a read of the same path, delivered in
//!   full in this context) becomes that version's id plus a unified diff
//!   ([`crate::textdiff`]), when the endpoint allows it; the agent's own
//!   write of the path does not stop this (it stops plain references);
//! - anything else passes unchanged.
//!
//! Calls that may change what a tool would return invalidate by path and by
//! the endpoints configured for them ([`DedupStage::on_call`]); compaction
//! advances the partition ([`DedupStage::advance_partition`]). The stage does
//! no I/O and reads no clock.

use std::num::NonZeroUsize;

use lru::LruCache;
use serde_json::Value;

use crate::dedup::{DedupCache, DedupConfig, Delivered, RecordOutcome};
use crate::expand::{ExpandConfig, ExpandStore, Expansion, StoreOutcome};
use crate::fingerprint::Fingerprint;
use crate::hints;
use crate::ids::{EndpointKey, IdAllocator, ReferenceId, SessionTag};
use crate::near::{apply_changes, render_changes, scalar_changes};
use crate::time::Timestamp;

/// The stage's settings.
#[derive(Debug, Clone, Default)]
pub struct DedupStageConfig {
    /// The dedup cache's bounds.
    pub dedup: DedupConfig,
    /// The expand store's bounds.
    pub expand: ExpandConfig,
}

/// How one result may be treated: the endpoint's settings.
#[derive(Debug, Clone, Default)]
pub struct ResultPolicy {
    /// Overrides the stage's minimum body size for this endpoint.
    pub min_body_bytes: Option<usize>,
    /// Near-duplicate hints for this endpoint, if enabled.
    pub near: Option<NearPolicy>,
    /// What identifies the call (a fingerprint of its arguments): a
    /// near-duplicate is only ever computed against the same call.
    pub call: Option<Fingerprint>,
    /// How long this result may be referenced, if its tool says (else the
    /// cache's TTL).
    pub freshness: Option<std::time::Duration>,
    /// Re-reads said as diffs against the version the model holds, if
    /// enabled for this endpoint.
    pub text_diff: Option<TextDiffPolicy>,
    /// Texts the model holds in full, found inside this result, become
    /// references ([`crate::parts`]); and this result's texts are
    /// remembered for later results.
    pub parts: bool,
    /// Ids by expected saving ([`id_pays`]) rather than by size alone;
    /// off where an endpoint sets its own `min_body_bytes` (whoever set it
    /// wants ids down to that size).
    pub ids_by_saving: bool,
    /// What this body costs the model in tokens, when known (the pipeline
    /// fills it in when `ids_by_saving`): a fresh body then gets an id only
    /// where a later reference is expected to save more than the id line
    /// costs.
    pub body_tokens: Option<usize>,
    /// The call changed something (a write, an edit, a create): its result
    /// answers that one change and is not expected to come again, so its
    /// repeat rate has no prior ([`id_pays`] with `prior = false`).
    pub mutating: bool,
}

/// What an id line (`> [id: kafrum3]`) costs in o200k tokens at most (7
/// or 8 by the session's tag); pinned in `tokens.rs`.
pub const ID_LINE_TOKENS: usize = 8;

/// What a reference line costs in o200k tokens at most for the first 99
/// ids of a session; pinned in `tokens.rs`.
pub const REFERENCE_TOKENS: usize = 17;

/// The prior of the repeat rate: as if each endpoint had been seen
/// `PRIOR_RESULTS` times with one repeat among them.
const PRIOR_RESULTS: u32 = 6;

/// Whether an id line for a body of `tokens` pays, at an endpoint that
/// has given `results` bodies large enough for an id, `repeats` of them
/// repeats: the expected saving of a later reference, the repeat rate
/// (with a prior of one in [`PRIOR_RESULTS`], if `prior`) times what a
/// reference saves, must exceed the id line's cost. Without the prior an
/// endpoint gets ids only once it has repeated. A new endpoint gets an id for
/// any body over about 65 tokens; one whose bodies never repeat needs
/// ever larger bodies (over 300 tokens after 30 results).
pub fn id_pays(tokens: usize, results: u32, repeats: u32, prior: bool) -> bool {
    let p = f64::from(repeats + u32::from(prior)) / f64::from(results + PRIOR_RESULTS);
    p * tokens.saturating_sub(REFERENCE_TOKENS) as f64 > ID_LINE_TOKENS as f64
}

/// A text of a body delivered in full, for references to parts.
#[derive(Debug, Clone)]
struct HeldPart {
    /// The delivery it belongs to.
    id: ReferenceId,
    body_fp: Fingerprint,
    /// Where the text is in that body.
    pointer: Option<String>,
    /// Its first bytes, searched for before the whole is compared.
    anchor: String,
}

/// Re-read diff settings of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TextDiffPolicy {
    /// A diff is sent only when it is at most this share of the body.
    pub max_share: f64,
}

/// What a diff base is found by: the call that read it, or a path it was
/// read from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum BaseKey {
    Call(EndpointKey, Fingerprint),
    Path(String),
}

/// A body delivered in full that a later re-read may be a diff against,
/// while it is still in the model's context.
#[derive(Debug, Clone, Copy)]
struct TextBase {
    id: ReferenceId,
    fp: Fingerprint,
    partition: u64,
    delivered_at: Timestamp,
    ttl: std::time::Duration,
}

/// Near-duplicate settings of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NearPolicy {
    /// At most this many scalar fields may differ.
    pub max_changes: usize,
    /// Only bodies at least this large.
    pub min_body_bytes: usize,
}

/// How many calls' last full deliveries are kept as near-duplicate bases.
const NEAR_BASES: usize = 64;

/// How many calls' and paths' last full deliveries are kept as diff bases.
const TEXT_BASES: usize = 256;

/// What to do with one body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DedupDecision {
    /// Send it as it is.
    Unchanged,
    /// Send it in full, followed by `id_line` on a line of its own.
    Fresh {
        /// The id the body is now known by.
        id: ReferenceId,
        /// The line to append, e.g. `> [id: kafrum3]`.
        id_line: String,
    },
    /// Send `text` instead of the body: the hint naming the earlier full
    /// delivery `base`, then the changed fields. The body is stored as `id`
    /// for `devboy_expand`, but it is not remembered as delivered, since
    /// the model never saw it in full.
    NearRepeat {
        /// The full delivery the changes apply to.
        base: ReferenceId,
        /// The id `devboy_expand` returns this body under.
        id: ReferenceId,
        /// How many fields changed.
        changes: usize,
        /// Hint line and changes, to send instead of the body.
        text: String,
    },
    /// Send `body` instead of the original: texts the model holds in full
    /// replaced by reference lines. The original is stored as `id` for
    /// `devboy_expand` and remembered as delivered under it (the model was
    /// shown all of it, partly by reference).
    Parts {
        /// The id `devboy_expand` returns the original under.
        id: ReferenceId,
        /// The deliveries referenced, in order of first use.
        refs: Vec<ReferenceId>,
        /// The body with the reference lines (JSON stays JSON).
        body: String,
    },
    /// Send `hint` instead of the body: the model holds it already.
    Repeat {
        /// The id the model was shown with the earlier delivery.
        id: ReferenceId,
        /// The reference line that replaces the body.
        hint: String,
    },
}

/// Why `devboy_expand` cannot return bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// The text is not an id (letters, then a number).
    #[error("`{text}` is not a devboy id (this session's ids look like {example})")]
    Malformed {
        /// The text given.
        text: String,
        /// An id of this session, to show the form.
        example: ReferenceId,
    },
    /// Another devboy process printed the id (this one was restarted, or
    /// it is another server's): its bytes are not here, and the same
    /// number here names something else (invariant 10 in docs/invariants.md).
    #[error("`{0}` was not issued by this devboy session (an earlier session's, or mistyped); call the tool again")]
    OtherSession(ReferenceId),
    /// The id has this session's tag but was never issued.
    #[error("`{0}` was never issued by this devboy session; use an id from a hint")]
    Unknown(ReferenceId),
    /// The id was issued but its bytes no longer fit the store.
    #[error("`{0}` has expired from devboy's store; repeat the original call instead")]
    Expired(ReferenceId),
}

/// One session's dedup state; see the module docs.
#[derive(Debug)]
pub struct DedupStage {
    cache: DedupCache,
    store: ExpandStore,
    ids: IdAllocator,
    /// The configured minimum body size; the cache itself is built with no
    /// minimum so that an endpoint may lower it.
    min_body_bytes: usize,
    /// Per call (endpoint and arguments): the last body delivered in full.
    near_bases: LruCache<(EndpointKey, Fingerprint), (ReferenceId, Fingerprint)>,
    /// Per call and per path read: the last body delivered in full, kept
    /// through writes (never as a reference, only as a diff base).
    text_bases: LruCache<BaseKey, TextBase>,
    /// Texts of bodies delivered in full, by the fingerprint of the text.
    held_parts: LruCache<Fingerprint, HeldPart>,
    /// Per endpoint: bodies large enough for an id, and repeats among
    /// them (references, near-references, diffs, parts, and repeats of
    /// bodies sent without an id).
    repeat_rates: LruCache<EndpointKey, (u32, u32)>,
    /// Bodies sent without an id because it did not pay: a repeat of one
    /// still counts as a repeat.
    unlisted: LruCache<Fingerprint, ()>,
}

impl DedupStage {
    /// A stage with empty state, naming what it shows with `ids`.
    pub fn new(config: DedupStageConfig, ids: IdAllocator) -> Self {
        let mut dedup = config.dedup;
        let min_body_bytes = dedup.min_body_bytes;
        dedup.min_body_bytes = 1;
        Self {
            cache: DedupCache::new(dedup),
            store: ExpandStore::new(config.expand),
            ids,
            min_body_bytes,
            near_bases: LruCache::new(NonZeroUsize::new(NEAR_BASES).unwrap_or(NonZeroUsize::MIN)),
            text_bases: LruCache::new(NonZeroUsize::new(TEXT_BASES).unwrap_or(NonZeroUsize::MIN)),
            held_parts: LruCache::new(NonZeroUsize::new(TEXT_BASES).unwrap_or(NonZeroUsize::MIN)),
            repeat_rates: LruCache::new(NonZeroUsize::new(TEXT_BASES).unwrap_or(NonZeroUsize::MIN)),
            unlisted: LruCache::new(NonZeroUsize::new(2 * TEXT_BASES).unwrap_or(NonZeroUsize::MIN)),
        }
    }

    /// The dedup cache, for stats.
    pub fn cache(&self) -> &DedupCache {
        &self.cache
    }

    /// The expand store, for stats.
    pub fn store(&self) -> &ExpandStore {
        &self.store
    }

    /// Changes the TTL of results whose tool sets none, from now on.
    pub fn set_ttl(&mut self, ttl: std::time::Duration) {
        self.cache.set_ttl(ttl);
    }

    /// Decides what the model sees for `body`, produced by `endpoint` from
    /// `paths`, at `now`, under `policy`. A fresh body that is remembered
    /// is also stored so `devboy_expand` can return it.
    pub fn on_result(
        &mut self,
        endpoint: EndpointKey,
        body: &[u8],
        paths: Vec<String>,
        now: Timestamp,
        policy: &ResultPolicy,
    ) -> DedupDecision {
        let min = policy.min_body_bytes.unwrap_or(self.min_body_bytes).max(1);
        if body.len() < min || body.len() > self.cache.config().max_bytes {
            return DedupDecision::Unchanged;
        }
        let fp = Fingerprint::of(body);
        let unlisted = self.unlisted.contains(&fp);
        let decision = self.decide(endpoint.clone(), body, fp, paths, now, policy);
        let repeat = unlisted
            || matches!(
                decision,
                DedupDecision::Repeat { .. }
                    | DedupDecision::NearRepeat { .. }
                    | DedupDecision::Parts { .. }
            );
        let rate = self.repeat_rates.get_or_insert_mut(endpoint, || (0, 0));
        rate.0 = rate.0.saturating_add(1);
        rate.1 = rate.1.saturating_add(u32::from(repeat));
        decision
    }

    /// [`on_result`](Self::on_result) for a body of a size dedup handles.
    fn decide(
        &mut self,
        endpoint: EndpointKey,
        body: &[u8],
        fp: Fingerprint,
        paths: Vec<String>,
        now: Timestamp,
        policy: &ResultPolicy,
    ) -> DedupDecision {
        if let Some(delivered) = self.cache.lookup(fp, now) {
            let id = delivered.id;
            return DedupDecision::Repeat {
                id,
                hint: hints::reference(id),
            };
        }
        let call = policy.call.map(|call| (endpoint.clone(), call));
        if let (Some(near), Some(key)) = (policy.near, &call) {
            if let Some(outcome) = self.near_repeat(key, body, near, now) {
                return outcome;
            }
        }
        if let Some(diff) = policy.text_diff {
            if let Some(outcome) = self.text_repeat(&endpoint, policy, &paths, body, fp, diff, now)
            {
                return outcome;
            }
        }
        // A body's texts, read once: searched for held ones, then held.
        let texts = if policy.parts {
            crate::parts::texts(body, crate::parts::MIN_PART)
        } else {
            Vec::new()
        };
        if !texts.is_empty() && !self.held_parts.is_empty() {
            if let Some(outcome) =
                self.part_references(&endpoint, &paths, body, &texts, now, policy)
            {
                return outcome;
            }
        }
        if let Some(tokens) = policy.body_tokens {
            let (results, repeats) = self
                .repeat_rates
                .peek(&endpoint)
                .copied()
                .unwrap_or_default();
            let repeats = repeats + u32::from(self.unlisted.contains(&fp));
            if !id_pays(tokens, results, repeats, !policy.mutating) {
                // Remembered only to count it, should it come again.
                self.unlisted.put(fp, ());
                return DedupDecision::Unchanged;
            }
        }
        // Claim an id only for a body the cache will remember and the store
        // can give back: an id that can be neither referenced nor expanded
        // would be noise in the model's context.
        let id = self.ids.next();
        if self.store.insert(id, body) == StoreOutcome::TooLarge {
            return DedupDecision::Unchanged;
        }
        let bases: Vec<BaseKey> = if policy.text_diff.is_some() {
            call.iter()
                .map(|(endpoint, call)| BaseKey::Call(endpoint.clone(), *call))
                .chain(paths.iter().map(|p| BaseKey::Path(p.clone())))
                .collect()
        } else {
            Vec::new()
        };
        match self.cache.record_delivered(
            fp,
            Delivered::new(id, endpoint, paths).with_ttl(policy.freshness),
            body.len(),
            now,
        ) {
            RecordOutcome::Inserted | RecordOutcome::Refreshed => {
                if let Some(key) = call {
                    self.near_bases.put(key, (id, fp));
                }
                let base = TextBase {
                    id,
                    fp,
                    partition: self.cache.partition(),
                    delivered_at: now,
                    ttl: policy.freshness.unwrap_or(self.cache.config().ttl),
                };
                for key in bases {
                    self.text_bases.put(key, base);
                }
                for (pointer, text) in texts {
                    let held = HeldPart {
                        id,
                        body_fp: fp,
                        anchor: crate::parts::anchor(&text).to_owned(),
                        pointer,
                    };
                    self.held_parts.put(Fingerprint::of(text.as_bytes()), held);
                }
                DedupDecision::Fresh {
                    id,
                    id_line: hints::id_line(id),
                }
            }
            RecordOutcome::Skipped(_) => DedupDecision::Unchanged,
        }
    }

    /// The near-duplicate answer for `body`, if the same call's last full
    /// delivery is still in the context and differs only in a few scalars,
    /// and saying the changes is much shorter than the body.
    fn near_repeat(
        &mut self,
        key: &(EndpointKey, Fingerprint),
        body: &[u8],
        near: NearPolicy,
        now: Timestamp,
    ) -> Option<DedupDecision> {
        if body.len() < near.min_body_bytes {
            return None;
        }
        let &(base, base_fp) = self.near_bases.get(key)?;
        if self.cache.still_delivered(base_fp, now) != Some(base) {
            return None;
        }
        // Only bodies a value carries exactly (invariant 12): a key written
        // twice would be lost from the changes.
        let parsed = |bytes: &[u8]| -> Option<Value> {
            let text = std::str::from_utf8(bytes).ok()?;
            let value: Value = serde_json::from_str(text).ok()?;
            crate::exact::carries(text, &value).then_some(value)
        };
        let old = parsed(&self.store.get(base)?)?;
        let new = parsed(body)?;
        let changes = scalar_changes(&old, &new, near.max_changes)?;
        if changes.is_empty() {
            // Same value, other bytes (spacing, key order): not a delta.
            return None;
        }
        let delta = render_changes(&changes);
        // Exact or nothing: the model must be able to rebuild the body.
        if !crate::exact::same(&apply_changes(&old, &delta).ok()?, &new) {
            return None;
        }
        let id = self.ids.peek_next();
        let text = format!("{}\n{delta}", hints::near_reference(base, id));
        // Worth it only if it is much shorter than the body.
        if text.len().saturating_mul(2) > body.len() {
            return None;
        }
        let id = self.ids.next();
        if self.store.insert(id, body) == StoreOutcome::TooLarge {
            return None;
        }
        Some(DedupDecision::NearRepeat {
            base,
            id,
            changes: changes.len(),
            text,
        })
    }

    /// The diff answer for `body`: against the last full delivery of the
    /// same call, else of a path it reads, if that is still in the
    /// context (this partition, within its TTL: a write of the path since
    /// does not matter), the change is text, and the hint with the hunks
    /// costs at most `policy.max_share` of the body.
    ///
    /// A re-read identical to that version (a failed or no-op write since,
    /// which forgot the delivery) is a reference to it, remembered as
    /// delivered again.
    #[allow(clippy::too_many_arguments)]
    fn text_repeat(
        &mut self,
        endpoint: &EndpointKey,
        result: &ResultPolicy,
        paths: &[String],
        body: &[u8],
        fp: Fingerprint,
        policy: TextDiffPolicy,
        now: Timestamp,
    ) -> Option<DedupDecision> {
        let keys = result
            .call
            .map(|c| BaseKey::Call(endpoint.clone(), c))
            .into_iter()
            .chain(paths.iter().map(|p| BaseKey::Path(p.clone())));
        for key in keys {
            let Some(base) = self.text_bases.get(&key).copied() else {
                continue;
            };
            if base.partition != self.cache.partition()
                || now.saturating_since(base.delivered_at) >= base.ttl
            {
                self.text_bases.pop(&key);
                continue;
            }
            let Some(old) = self.store.get(base.id) else {
                continue;
            };
            if old == body {
                let delivered = Delivered::new(base.id, endpoint.clone(), paths.to_vec())
                    .with_ttl(result.freshness);
                return match self.cache.record_delivered(fp, delivered, body.len(), now) {
                    RecordOutcome::Inserted | RecordOutcome::Refreshed => {
                        Some(DedupDecision::Repeat {
                            id: base.id,
                            hint: hints::reference(base.id),
                        })
                    }
                    RecordOutcome::Skipped(_) => None,
                };
            }
            let Some(delta) = crate::textdiff::delta(&old, body) else {
                continue;
            };
            let id = self.ids.peek_next();
            let text = format!("{}\n{}", hints::near_reference(base.id, id), delta.text);
            if text.len() as f64 > policy.max_share * body.len() as f64 {
                continue;
            }
            let id = self.ids.next();
            if self.store.insert(id, body) == StoreOutcome::TooLarge {
                return None;
            }
            return Some(DedupDecision::NearRepeat {
                base: base.id,
                id,
                changes: delta.changed,
                text,
            });
        }
        None
    }

    /// `body` with every text the model holds in full (a text of a body
    /// still delivered in this context, at least [`crate::parts::MIN_PART`]
    /// bytes) replaced by a reference line where it occurs inside one of
    /// `body`'s texts; `None` when there is none.
    ///
    /// The result is then remembered as delivered under its new id (the
    /// line after it names that id): an identical later result is a
    /// reference to what the model was shown, references and all.
    fn part_references(
        &mut self,
        endpoint: &EndpointKey,
        paths: &[String],
        body: &[u8],
        texts: &[(Option<String>, String)],
        now: Timestamp,
        policy: &ResultPolicy,
    ) -> Option<DedupDecision> {
        use crate::parts;
        // Only the held parts whose anchors occur in one of the texts are
        // looked at further (cloned: the loop below needs `self`).
        let (held, anchors): (Vec<&HeldPart>, Vec<&str>) = self
            .held_parts
            .iter()
            .map(|(_, h)| (h, h.anchor.as_str()))
            .unzip();
        let anchors = parts::Anchors::new(&anchors);
        let found: Vec<Vec<HeldPart>> = texts
            .iter()
            .map(|(_, text)| {
                anchors
                    .found_in(text)
                    .into_iter()
                    .map(|i| held[i].clone())
                    .collect()
            })
            .collect();
        let mut refs = Vec::new();
        // The texts that got references: (pointer, new text).
        let mut changed: Vec<(Option<&str>, String)> = Vec::new();
        for ((pointer, original), found) in texts.iter().zip(&found) {
            let mut text = std::borrow::Cow::Borrowed(original.as_str());
            for part in found {
                if self.cache.still_delivered(part.body_fp, now) != Some(part.id) {
                    continue;
                }
                let Some(whole) = self
                    .store
                    .get(part.id)
                    .and_then(|b| parts::text_at(&b, part.pointer.as_deref()))
                else {
                    continue;
                };
                // The whole of this text is the body's: dedup's case, or
                // the result is that text with other fields.
                if whole.len() < parts::MIN_PART || *text == whole || !text.contains(&whole) {
                    continue;
                }
                text = std::borrow::Cow::Owned(text.replace(&whole, &hints::reference(part.id)));
                if !refs.contains(&part.id) {
                    refs.push(part.id);
                }
            }
            if let std::borrow::Cow::Owned(text) = text {
                changed.push((pointer.as_deref(), text));
            }
        }
        if refs.is_empty() {
            return None;
        }
        let rewritten = parts::with_texts(body, changed)?;
        let id = self.ids.next();
        if self.store.insert(id, body) == StoreOutcome::TooLarge {
            return None;
        }
        self.cache.record_delivered(
            Fingerprint::of(body),
            Delivered::new(id, endpoint.clone(), paths.to_vec()).with_ttl(policy.freshness),
            body.len(),
            now,
        );
        Some(DedupDecision::Parts {
            id,
            refs,
            body: rewritten,
        })
    }

    /// A call that may mutate is about to be forwarded (the caller decides
    /// which may, by the call's one side-effect class): forgets every body
    /// read from the paths in its arguments and every body of the
    /// endpoints `invalidates` picks (those configured for the tool).
    /// Returns how many bodies were forgotten.
    pub fn forget_changed(
        &mut self,
        paths: &[String],
        invalidates: impl Fn(&EndpointKey) -> bool,
    ) -> usize {
        let mut forgotten = 0;
        for path in paths {
            forgotten += self.cache.invalidate_path(path);
        }
        forgotten + self.cache.invalidate_endpoints(invalidates)
    }

    /// Stores `body` for `devboy_expand` under a new id without recording
    /// it as delivered (for a result that goes out shortened). `None` if
    /// the store cannot hold it.
    pub fn store_only(&mut self, body: &[u8]) -> Option<ReferenceId> {
        let id = self.ids.next();
        (self.store.insert(id, body) != StoreOutcome::TooLarge).then_some(id)
    }

    /// `body` did not reach the model in full after all (parts of it were
    /// elided): no later result may be a reference to it. Its id still
    /// expands.
    pub fn withdraw(&mut self, body: &[u8]) -> bool {
        let fp = Fingerprint::of(body);
        // Nor a diff against it: the model never saw it whole.
        let doomed: Vec<BaseKey> = self
            .text_bases
            .iter()
            .filter(|(_, base)| base.fp == fp)
            .map(|(key, _)| key.clone())
            .collect();
        for key in doomed {
            self.text_bases.pop(&key);
        }
        self.cache.withdraw(fp)
    }

    /// The model's context was compacted or cleared: nothing delivered
    /// before may be referenced again. Returns the new partition.
    pub fn advance_partition(&mut self) -> u64 {
        self.cache.advance_partition()
    }

    /// The tag of every id this stage prints.
    pub fn tag(&self) -> SessionTag {
        self.ids.tag()
    }

    /// The exact bytes an id stood for, from its text (`kafrum12`).
    pub fn expand(&mut self, id_text: &str) -> Result<std::borrow::Cow<'_, [u8]>, ExpandError> {
        let id: ReferenceId = match id_text.parse() {
            Ok(id) => id,
            Err(_) => {
                return Err(ExpandError::Malformed {
                    text: id_text.chars().take(64).collect(),
                    example: self.ids.peek_next(),
                })
            }
        };
        match self.store.expand(id, &self.ids) {
            Expansion::Bytes(bytes) => Ok(bytes),
            Expansion::Expired => Err(ExpandError::Expired(id)),
            Expansion::Unknown => Err(ExpandError::Unknown(id)),
            Expansion::OtherSession => Err(ExpandError::OtherSession(id)),
        }
    }
}

/// Whether a call that may mutate and names `written` can have changed
/// what was read from `read`: the rule [`DedupCache::invalidate_path`]
/// forgets by, for other holders of results (the prefetch store).
///
/// [`DedupCache::invalidate_path`]: crate::DedupCache::invalidate_path
pub fn write_covers(written: &str, read: &str) -> bool {
    crate::paths::covers(
        &crate::paths::normalize(written),
        &crate::paths::normalize(read),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stage() -> DedupStage {
        DedupStage::new(
            DedupStageConfig::default(),
            IdAllocator::new(SessionTag::FIXED),
        )
    }

    fn fs_read() -> EndpointKey {
        EndpointKey::new("fs", "read_text_file")
    }

    fn t(ms: u64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn an_id_is_printed_where_a_reference_is_expected_to_pay() {
        // A new endpoint: any body worth more than about 60 tokens.
        assert!(id_pays(70, 0, 0, true) && !id_pays(55, 0, 0, true));
        // Thirty bodies, no repeat: only large ones.
        assert!(!id_pays(250, 30, 0, true) && id_pays(320, 30, 0, true));
        // Thirty bodies, ten repeats: small ones again.
        assert!(id_pays(60, 30, 10, true));
        // A mutating call's result: none until its endpoint repeats.
        assert!(!id_pays(5_000, 0, 0, false) && id_pays(100, 3, 1, false));

        let mut stage = stage();
        let sized = |tokens| ResultPolicy {
            body_tokens: Some(tokens),
            ..ResultPolicy::default()
        };
        let ep = EndpointKey::new("fs", "search_files");
        let bodies: Vec<String> = (0..40).map(|i| format!("{i:04}").repeat(200)).collect();
        let mut ids = 0;
        for (i, body) in bodies.iter().enumerate() {
            let d = stage.on_result(
                ep.clone(),
                body.as_bytes(),
                vec![],
                t(i as u64),
                &sized(200),
            );
            ids += usize::from(matches!(d, DedupDecision::Fresh { .. }));
        }
        // Ids stop once the endpoint shows its bodies do not repeat.
        assert!((5..30).contains(&ids), "{ids} ids");
        // A repeat of a body sent without an id counts, and ids return.
        let last = &bodies[39];
        for i in 0..12 {
            stage.on_result(ep.clone(), last.as_bytes(), vec![], t(100 + i), &sized(200));
        }
        assert!(matches!(
            stage.on_result(ep.clone(), last.as_bytes(), vec![], t(200), &sized(200)),
            DedupDecision::Repeat { .. }
        ));
    }

    #[test]
    fn a_text_the_model_holds_becomes_a_reference_inside_a_longer_result() {
        let mut stage = stage();
        let policy = ResultPolicy {
            parts: true,
            ..ResultPolicy::default()
        };
        let a: String = (0..80)
            .map(|i| format!("def a{i}(): return {i}\n"))
            .collect();
        let b: String = (0..80)
            .map(|i| format!("def b{i}(): return {i}\n"))
            .collect();
        let read_a = json!({ "content": a }).to_string();
        let DedupDecision::Fresh { id: held, .. } = stage.on_result(
            fs_read(),
            read_a.as_bytes(),
            vec!["/r/a.py".into()],
            t(0),
            &policy,
        ) else {
            panic!("fresh");
        };
        let both = json!({ "content": format!("/r/a.py:\n{a}\n---\n/r/b.py:\n{b}") }).to_string();
        let many = EndpointKey::new("fs", "read_multiple_files");
        let paths = || vec!["/r/a.py".to_string(), "/r/b.py".into()];
        let DedupDecision::Parts { id, refs, body } =
            stage.on_result(many.clone(), both.as_bytes(), paths(), t(1), &policy)
        else {
            panic!("parts");
        };
        assert_eq!(refs, vec![held]);
        let shown: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            shown["content"],
            format!("/r/a.py:\n{}\n---\n/r/b.py:\n{b}", hints::reference(held))
        );
        assert_eq!(
            stage.expand(&id.to_string()).as_deref(),
            Ok(both.as_bytes())
        );
        // The same result again: a reference to what was shown.
        assert!(matches!(
            stage.on_result(many.clone(), both.as_bytes(), paths(), t(1), &policy),
            DedupDecision::Repeat { id: again, .. } if again == id
        ));
        // Plain text holds too.
        let text = format!("== a ==\n{a}== b ==\n{b}");
        let DedupDecision::Parts { body, .. } =
            stage.on_result(many.clone(), text.as_bytes(), paths(), t(2), &policy)
        else {
            panic!("parts of text");
        };
        assert_eq!(
            body,
            format!("== a ==\n{}== b ==\n{b}", hints::reference(held))
        );
        // A write of a.py: the model's copy may be stale, no reference.
        stage.forget_changed(&["/r/a.py".to_string()], |_| false);
        assert!(matches!(
            stage.on_result(many, both.as_bytes(), paths(), t(3), &policy),
            DedupDecision::Fresh { .. }
        ));
    }

    /// An `edit_file` that failed ("Could not find exact match") or wrote
    /// what was there: the re-read is byte for byte the version the model
    /// holds, so it is that version's reference, not the file again.
    #[test]
    fn a_re_read_after_a_failed_or_no_op_write_is_a_reference() {
        let mut stage = stage();
        let policy = ResultPolicy {
            call: Some(Fingerprint::of(b"api.py")),
            text_diff: Some(TextDiffPolicy { max_share: 0.25 }),
            ..ResultPolicy::default()
        };
        let file: String = (0..300).map(|i| format!("def f{i}(): pass\n")).collect();
        let path = || vec!["/r/api.py".to_string()];
        let DedupDecision::Fresh { id, .. } =
            stage.on_result(fs_read(), file.as_bytes(), path(), t(0), &policy)
        else {
            panic!("first read is fresh");
        };
        stage.forget_changed(&path(), |_| false);
        for ms in [10, 20] {
            assert!(matches!(
                stage.on_result(fs_read(), file.as_bytes(), path(), t(ms), &policy),
                DedupDecision::Repeat { id: again, .. } if again == id
            ));
        }
        // After a compaction the model holds nothing: in full again.
        stage.advance_partition();
        stage.forget_changed(&path(), |_| false);
        assert!(matches!(
            stage.on_result(fs_read(), file.as_bytes(), path(), t(30), &policy),
            DedupDecision::Fresh { .. }
        ));
    }

    #[test]
    fn a_re_read_after_a_write_is_a_diff_until_the_context_moves_on() {
        let mut stage = stage();
        let policy = ResultPolicy {
            call: Some(Fingerprint::of(b"a.rs")),
            text_diff: Some(TextDiffPolicy { max_share: 0.25 }),
            ..ResultPolicy::default()
        };
        let file: String = (0..200).map(|i| format!("line {i}\n")).collect();
        let edited = file.replace("line 7\n", "line seven\n");
        let path = || vec!["/r/a.rs".to_string()];
        let send = |stage: &mut DedupStage, body: &str, ms| {
            stage.on_result(fs_read(), body.as_bytes(), path(), t(ms), &policy)
        };
        let DedupDecision::Fresh { id: base, .. } = send(&mut stage, &file, 0) else {
            panic!("first read is fresh");
        };
        // The agent's write forgets the path for references, not as a base.
        stage.forget_changed(&path(), |_| false);
        let DedupDecision::NearRepeat {
            base: named,
            id,
            changes,
            text,
        } = send(&mut stage, &edited, 10)
        else {
            panic!("a diff");
        };
        assert_eq!((named, changes), (base, 2));
        let (_, diff) = text.split_once('\n').unwrap();
        assert_eq!(
            crate::textdiff::apply(&file, diff).as_deref(),
            Some(edited.as_str())
        );
        assert_eq!(
            stage.expand(&id.to_string()).as_deref(),
            Ok(edited.as_bytes())
        );
        // A rewrite of most lines is sent in full.
        let rewritten = file.replace("line", "row");
        assert!(matches!(
            send(&mut stage, &rewritten, 20),
            DedupDecision::Fresh { .. }
        ));
        // After a compaction the model holds no version: full again.
        let mut stage2 = self::stage();
        assert!(matches!(
            send(&mut stage2, &file, 0),
            DedupDecision::Fresh { .. }
        ));
        stage2.advance_partition();
        assert!(matches!(
            send(&mut stage2, &edited, 10),
            DedupDecision::Fresh { .. }
        ));
        // A body withdrawn (elided after all) is no base.
        let mut stage4 = self::stage();
        assert!(matches!(
            send(&mut stage4, &file, 0),
            DedupDecision::Fresh { .. }
        ));
        stage4.withdraw(file.as_bytes());
        assert!(matches!(
            send(&mut stage4, &edited, 10),
            DedupDecision::Fresh { .. }
        ));
        // Without the policy, no diff.
        let mut stage3 = self::stage();
        let plain = ResultPolicy::default();
        stage3.on_result(fs_read(), file.as_bytes(), path(), t(0), &plain);
        assert!(matches!(
            stage3.on_result(fs_read(), edited.as_bytes(), path(), t(1), &plain),
            DedupDecision::Fresh { .. }
        ));
    }

    #[test]
    fn fresh_then_repeat_names_the_id_it_was_shown_with() {
        let mut stage = stage();
        let body = "x".repeat(2000);
        let first = stage.on_result(
            fs_read(),
            body.as_bytes(),
            vec!["/r/a".into()],
            t(0),
            &ResultPolicy::default(),
        );
        let DedupDecision::Fresh { id, id_line } = first else {
            panic!("expected fresh, got {first:?}");
        };
        assert_eq!(id_line, format!("> [id: {id}]"));
        let second = stage.on_result(
            fs_read(),
            body.as_bytes(),
            vec!["/r/a".into()],
            t(10),
            &ResultPolicy::default(),
        );
        let DedupDecision::Repeat { id: again, hint } = second else {
            panic!("expected repeat, got {second:?}");
        };
        assert_eq!(again, id);
        // The id in the hint is found by text in what the model saw first.
        assert!(hint.contains(&id.to_string()) && id_line.contains(&id.to_string()));
        assert_eq!(
            stage.expand(&id.to_string()).as_deref(),
            Ok(body.as_bytes())
        );
    }

    #[test]
    fn small_bodies_pass_unchanged_and_claim_no_id() {
        let mut stage = stage();
        assert_eq!(
            stage.on_result(fs_read(), b"short", vec![], t(0), &ResultPolicy::default()),
            DedupDecision::Unchanged
        );
        assert_eq!(
            stage.expand("tagfix1"),
            Err(ExpandError::Unknown("tagfix1".parse().unwrap()))
        );
    }

    #[test]
    fn mutating_call_on_the_path_makes_the_next_read_full() {
        let mut stage = stage();
        let body = "y".repeat(2000);
        stage.on_result(
            fs_read(),
            body.as_bytes(),
            vec!["/r/a.txt".into()],
            t(0),
            &ResultPolicy::default(),
        );
        // (A read-only call forgets nothing: its caller never asks; see
        // devboy-mcp's processor tests.)
        assert!(matches!(
            stage.on_result(
                fs_read(),
                body.as_bytes(),
                vec!["/r/a.txt".into()],
                t(1),
                &ResultPolicy::default()
            ),
            DedupDecision::Repeat { .. }
        ));
        assert_eq!(stage.forget_changed(&["/r/a.txt".into()], |_| false), 1);
        assert!(matches!(
            stage.on_result(
                fs_read(),
                body.as_bytes(),
                vec!["/r/a.txt".into()],
                t(2),
                &ResultPolicy::default()
            ),
            DedupDecision::Fresh { .. }
        ));
    }

    #[test]
    fn configured_invalidations_forget_their_endpoints() {
        let mut stage = stage();
        let graph = EndpointKey::new("mem", "read_graph");
        let body = "g".repeat(2000);
        stage.on_result(
            graph.clone(),
            body.as_bytes(),
            vec![],
            t(0),
            &ResultPolicy::default(),
        );
        assert_eq!(stage.forget_changed(&[], |key| *key == graph), 1);
        assert!(matches!(
            stage.on_result(
                graph,
                body.as_bytes(),
                vec![],
                t(1),
                &ResultPolicy::default()
            ),
            DedupDecision::Fresh { .. }
        ));
    }

    #[test]
    fn compaction_makes_everything_full_again_but_ids_still_expand() {
        let mut stage = stage();
        let body = "z".repeat(2000);
        let DedupDecision::Fresh { id, .. } = stage.on_result(
            fs_read(),
            body.as_bytes(),
            vec![],
            t(0),
            &ResultPolicy::default(),
        ) else {
            panic!("fresh expected");
        };
        stage.advance_partition();
        let next = stage.on_result(
            fs_read(),
            body.as_bytes(),
            vec![],
            t(1),
            &ResultPolicy::default(),
        );
        assert!(
            matches!(next, DedupDecision::Fresh { id: new, .. } if new != id),
            "{next:?}"
        );
        assert_eq!(
            stage.expand(&id.to_string()).as_deref(),
            Ok(body.as_bytes())
        );
    }

    #[test]
    fn expand_rejects_what_is_not_an_id() {
        let mut stage = stage();
        let err = stage.expand("abc").unwrap_err();
        assert!(matches!(err, ExpandError::Malformed { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "`abc` is not a devboy id (this session's ids look like tagfix1)"
        );
    }

    #[test]
    fn an_id_from_another_session_is_stale_even_where_the_number_was_issued() {
        let body = "x".repeat(2000);
        let fresh = |stage: &mut DedupStage| match stage.on_result(
            fs_read(),
            body.as_bytes(),
            vec![],
            t(0),
            &ResultPolicy::default(),
        ) {
            DedupDecision::Fresh { id, .. } => id,
            other => panic!("fresh expected, got {other:?}"),
        };
        let mut earlier = DedupStage::new(DedupStageConfig::default(), IdAllocator::seeded(1));
        let mut now = DedupStage::new(DedupStageConfig::default(), IdAllocator::seeded(2));
        let old = fresh(&mut earlier);
        let new = fresh(&mut now);
        assert_eq!(old.sequence(), new.sequence());
        let err = now.expand(&old.to_string()).unwrap_err();
        assert_eq!(err, ExpandError::OtherSession(old));
        assert_eq!(
            err.to_string(),
            format!("`{old}` was not issued by this devboy session (an earlier session's, or mistyped); call the tool again")
        );
        // Upper-case or spaced, it is still that id; a number this session
        // never reached is its own.
        assert_eq!(
            now.expand(&format!(" {}\n", old.to_string().to_uppercase())),
            Err(ExpandError::OtherSession(old))
        );
        let unissued = format!("{}99", now.tag());
        assert!(now
            .expand(&unissued)
            .unwrap_err()
            .to_string()
            .contains("was never issued"));
        assert_eq!(now.expand(&new.to_string()).as_deref(), Ok(body.as_bytes()));
    }

    fn polling(call: &str) -> ResultPolicy {
        ResultPolicy {
            min_body_bytes: None,
            near: Some(NearPolicy {
                max_changes: 4,
                min_body_bytes: 256,
            }),
            call: Some(Fingerprint::of(call.as_bytes())),
            freshness: None,
            text_diff: None,
            parts: false,
            ids_by_saving: false,
            body_tokens: None,
            mutating: false,
        }
    }

    #[test]
    fn a_tool_freshness_bounds_its_references_and_the_session_ttl_can_change() {
        let mut stage = DedupStage::new(
            DedupStageConfig {
                dedup: DedupConfig {
                    ttl: std::time::Duration::from_secs(60),
                    ..DedupConfig::default()
                },
                ..DedupStageConfig::default()
            },
            IdAllocator::new(SessionTag::FIXED),
        );
        let short = ResultPolicy {
            freshness: Some(std::time::Duration::from_secs(5)),
            ..ResultPolicy::default()
        };
        let (a, b) = ("a".repeat(2000), "b".repeat(2000));
        let ep = fs_read();
        let send = |stage: &mut DedupStage, body: &str, ms, policy: &ResultPolicy| {
            stage.on_result(ep.clone(), body.as_bytes(), vec![], t(ms), policy)
        };
        assert!(matches!(
            send(&mut stage, &a, 0, &short),
            DedupDecision::Fresh { .. }
        ));
        assert!(matches!(
            send(&mut stage, &b, 0, &ResultPolicy::default()),
            DedupDecision::Fresh { .. }
        ));
        // 6 s later: the short-lived result is fresh again, the other a repeat.
        assert!(matches!(
            send(&mut stage, &a, 6_000, &short),
            DedupDecision::Fresh { .. }
        ));
        assert!(matches!(
            send(&mut stage, &b, 6_000, &ResultPolicy::default()),
            DedupDecision::Repeat { .. }
        ));
        // The session's TTL drops to 10 s: b, delivered at 6 s, is stale at 20 s.
        stage.set_ttl(std::time::Duration::from_secs(10));
        assert!(matches!(
            send(&mut stage, &b, 20_000, &ResultPolicy::default()),
            DedupDecision::Fresh { .. }
        ));
    }

    fn status_body(state: &str, step: u32) -> String {
        let jobs: Vec<_> = (0..20)
            .map(|i| json!({"id": i, "name": format!("job-{i}"), "state": "done", "log": "https://ci.example/jobs/log"}))
            .collect();
        json!({"pipeline": 7, "state": state, "step": step, "jobs": jobs}).to_string()
    }

    #[test]
    fn a_polled_body_with_few_changed_scalars_becomes_a_near_reference() {
        let mut stage = stage();
        let ci = EndpointKey::new("ci", "status");
        let first = status_body("running", 1);
        let DedupDecision::Fresh { id: base, .. } =
            stage.on_result(ci.clone(), first.as_bytes(), vec![], t(0), &polling("p7"))
        else {
            panic!("fresh expected");
        };
        let second = status_body("success", 2);
        let outcome = stage.on_result(ci.clone(), second.as_bytes(), vec![], t(1), &polling("p7"));
        let DedupDecision::NearRepeat {
            base: b,
            id,
            changes,
            text,
        } = outcome
        else {
            panic!("near repeat expected, got {outcome:?}");
        };
        assert_eq!((b, changes), (base, 2));
        assert_eq!(
            text,
            format!("> [near-ref: {base}, changed below; devboy_expand {id}]\n/state: \"success\"\n/step: 2")
        );
        // Exact: the earlier body plus the delta is the new body, and the
        // new body is there in full under its own id.
        let old: Value = serde_json::from_str(&first).unwrap();
        let delta = text.split_once('\n').unwrap().1;
        assert_eq!(
            apply_changes(&old, delta).unwrap(),
            serde_json::from_str::<Value>(&second).unwrap()
        );
        assert_eq!(
            stage.expand(&id.to_string()).as_deref(),
            Ok(second.as_bytes())
        );
        // The near-duplicate was never delivered in full, so it is not
        // referenced later; the next poll is again a delta against `base`.
        let again = stage.on_result(ci.clone(), second.as_bytes(), vec![], t(2), &polling("p7"));
        assert!(
            matches!(again, DedupDecision::NearRepeat { base: b, .. } if b == base),
            "{again:?}"
        );
    }

    #[test]
    fn near_references_need_the_same_call_a_live_base_and_few_changes() {
        let ci = EndpointKey::new("ci", "status");
        let first = status_body("running", 1);
        let second = status_body("success", 2);
        // Another call (other arguments): full.
        let mut stage = stage();
        stage.on_result(ci.clone(), first.as_bytes(), vec![], t(0), &polling("p7"));
        let other = stage.on_result(ci.clone(), second.as_bytes(), vec![], t(1), &polling("p8"));
        assert!(matches!(other, DedupDecision::Fresh { .. }), "{other:?}");
        // After compaction the base is gone from the context: full.
        let mut stage = stage_with_base(&ci, &first);
        stage.advance_partition();
        let after = stage.on_result(ci.clone(), second.as_bytes(), vec![], t(1), &polling("p7"));
        assert!(matches!(after, DedupDecision::Fresh { .. }), "{after:?}");
        // Too many changes: full.
        let mut stage = stage_with_base(&ci, &first);
        let mut policy = polling("p7");
        policy.near = Some(NearPolicy {
            max_changes: 1,
            min_body_bytes: 256,
        });
        let many = stage.on_result(ci.clone(), second.as_bytes(), vec![], t(1), &policy);
        assert!(matches!(many, DedupDecision::Fresh { .. }), "{many:?}");
        // Not enabled for the endpoint: full.
        let mut stage = stage_with_base(&ci, &first);
        let plain = ResultPolicy {
            near: None,
            ..polling("p7")
        };
        let off = stage.on_result(ci, second.as_bytes(), vec![], t(1), &plain);
        assert!(matches!(off, DedupDecision::Fresh { .. }), "{off:?}");
    }

    fn stage_with_base(ci: &EndpointKey, body: &str) -> DedupStage {
        let mut stage = stage();
        stage.on_result(ci.clone(), body.as_bytes(), vec![], t(0), &polling("p7"));
        stage
    }

    #[test]
    fn an_endpoint_may_lower_the_minimum_size() {
        let mut stage = stage();
        let body = "q".repeat(100);
        let small = ResultPolicy {
            min_body_bytes: Some(64),
            ..Default::default()
        };
        assert_eq!(
            stage.on_result(
                fs_read(),
                body.as_bytes(),
                vec![],
                t(0),
                &ResultPolicy::default()
            ),
            DedupDecision::Unchanged
        );
        assert!(matches!(
            stage.on_result(fs_read(), body.as_bytes(), vec![], t(1), &small),
            DedupDecision::Fresh { .. }
        ));
    }
}
