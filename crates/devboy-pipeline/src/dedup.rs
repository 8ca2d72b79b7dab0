//! Dedup: which bodies the model has already received in full, so that a
//! later byte-identical body can be answered with a reference to it.
//!
//! The flow per result, in the caller:
//!
//! 1. `fp = Fingerprint::of(forwarded_body)`;
//! 2. [`DedupCache::lookup`]: on a hit, send a reference naming the
//!    [`Delivered::id`] the model saw with the earlier result;
//! 3. on a miss, send the body in full with a fresh id, then
//!    [`DedupCache::record_delivered`].
//!
//! A mutating call becomes [`DedupCache::invalidate_path`] /
//! [`DedupCache::invalidate_endpoint`]; a compaction or context reset
//! becomes [`DedupCache::advance_partition`].
//!
//! Invariant 3 of docs/invariants.md, "no dangling references": `lookup` returns an
//! entry only if it was recorded in the current partition, less than
//! [`DedupConfig::ttl`] before `now`, and no invalidation covering it ran
//! after it was recorded. Everything else here only ever forgets.

use std::borrow::Cow;
use std::time::Duration;

use lru::LruCache;

use crate::fingerprint::Fingerprint;
use crate::ids::{EndpointKey, ReferenceId};
use crate::paths;
use crate::time::Timestamp;

/// Bounds and thresholds of a [`DedupCache`].
///
/// Zero is allowed everywhere and means "remember nothing" for
/// `max_entries` and `max_bytes`, "every size" for `min_body_bytes`, and
/// "every entry is already expired" for `ttl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupConfig {
    /// Most entries remembered. Default 256: a context rarely holds more
    /// results above the minimum size than that, and invalidation scans
    /// every entry, so the bound keeps it cheap.
    pub max_entries: usize,
    /// Most body bytes remembered in total. No body is stored here, so this
    /// is not a memory budget but a bound on how much the cache claims is
    /// still in the model's context. Default 4 MiB: about a million tokens
    /// at ~4 bytes a token, the largest context a Claude model has.
    pub max_bytes: usize,
    /// Bodies shorter than this are not remembered (and so never become a
    /// reference). Default 512 bytes (~130 tokens): a reference costs ~12
    /// tokens and the visible id on every fresh result ~6; with about 30%
    /// of results repeating, bodies pay off above ~30 tokens, and 512 bytes
    /// keeps a wide margin for ids added to results that never repeat.
    pub min_body_bytes: usize,
    /// How long after delivery a body still counts as in context. Default
    /// 30 minutes: compaction is signalled by a hook, and this is the
    /// fallback for resets devboy cannot see (a missed hook, old tool
    /// results cleared by the client). It counts from delivery, not from
    /// the last hit: a reference does not bring the body back into view.
    pub ttl: Duration,
}

impl Default for DedupConfig {
    fn default() -> Self {
        Self {
            max_entries: 256,
            max_bytes: 4 << 20,
            min_body_bytes: 512,
            ttl: Duration::from_secs(30 * 60),
        }
    }
}

/// What the model was shown with a body delivered in full: the id printed
/// with it, the endpoint that produced it and the file paths it was read
/// from (for invalidation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// The visible id printed with the body.
    pub id: ReferenceId,
    /// The endpoint whose result this was.
    pub endpoint: EndpointKey,
    /// Paths the body was read from; a write to one of them (or to a
    /// directory above one) forgets the body. The cache keeps them
    /// normalised (no repeated, `.` or trailing slashes).
    pub paths: Vec<String>,
    /// How long this body may be referenced, when its tool says so
    /// (`freshness_secs`); else [`DedupConfig::ttl`] applies.
    pub ttl: Option<Duration>,
}

impl Delivered {
    /// A record of `id` delivered by `endpoint`, read from `paths`.
    pub fn new<P: Into<String>>(
        id: ReferenceId,
        endpoint: EndpointKey,
        paths: impl IntoIterator<Item = P>,
    ) -> Self {
        Self {
            id,
            endpoint,
            paths: paths.into_iter().map(Into::into).collect(),
            ttl: None,
        }
    }

    /// This record with its own TTL (`None`: the cache's).
    pub fn with_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.ttl = ttl;
        self
    }
}

/// What [`DedupCache::record_delivered`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOutcome {
    /// A new entry; lookups of this fingerprint now hit.
    Inserted,
    /// The fingerprint was remembered already; its record, delivery time
    /// and recency now are this delivery's.
    Refreshed,
    /// Not remembered; lookups of this fingerprint keep their answer.
    Skipped(SkipReason),
}

impl RecordOutcome {
    /// Whether the body is now remembered under this delivery.
    pub fn is_remembered(self) -> bool {
        !matches!(self, Self::Skipped(_))
    }
}

/// Why a delivered body was not remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Shorter than [`DedupConfig::min_body_bytes`].
    BelowMinSize,
    /// Longer than [`DedupConfig::max_bytes`] on its own.
    AboveMaxBytes,
    /// [`DedupConfig::max_entries`] is zero.
    Disabled,
}

/// Entries forgotten, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evictions {
    /// To stay within [`DedupConfig::max_entries`] (least recently used).
    pub entries: u64,
    /// To stay within [`DedupConfig::max_bytes`] (least recently used).
    pub bytes: u64,
    /// Older than [`DedupConfig::ttl`] when found.
    pub ttl: u64,
    /// Dropped by [`DedupCache::advance_partition`].
    pub partition: u64,
    /// Dropped by an invalidation or [`DedupCache::clear`].
    pub invalidation: u64,
}

impl Evictions {
    /// All evictions.
    pub fn total(&self) -> u64 {
        self.entries + self.bytes + self.ttl + self.partition + self.invalidation
    }

    fn count(&mut self, reason: Forget, n: usize) {
        let n = n as u64;
        match reason {
            Forget::Entries => self.entries += n,
            Forget::Bytes => self.bytes += n,
            Forget::Ttl => self.ttl += n,
            Forget::Partition => self.partition += n,
            Forget::Invalidation => self.invalidation += n,
        }
    }
}

/// Counters of a [`DedupCache`] since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DedupStats {
    /// Lookups that returned an entry.
    pub hits: u64,
    /// Lookups that did not (including entries found stale and dropped).
    pub misses: u64,
    /// Deliveries remembered under a new fingerprint.
    pub inserts: u64,
    /// Deliveries of a fingerprint already remembered.
    pub refreshes: u64,
    /// Deliveries not remembered (too small, too large, disabled).
    pub skipped: u64,
    /// Entries forgotten, by reason.
    pub evictions: Evictions,
    /// Body bytes of all hits: what references stood in for. Gross: the
    /// hint's own cost is the caller's to subtract (in tokens).
    pub bytes_saved: u64,
}

/// Why an entry is forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Forget {
    Entries,
    Bytes,
    Ttl,
    Partition,
    Invalidation,
}

#[derive(Debug)]
struct Entry {
    delivered: Delivered,
    body_len: usize,
    delivered_at: Timestamp,
    partition: u64,
}

/// The dedup cache of one session: fingerprints of bodies delivered in
/// full, with what the model was shown alongside them.
///
/// See the [module docs](self) for the flow and the invariant.
#[derive(Debug)]
pub struct DedupCache {
    config: DedupConfig,
    // Unbounded: the bounds are enforced here so each eviction has a reason.
    entries: LruCache<Fingerprint, Entry>,
    total_bytes: usize,
    partition: u64,
    stats: DedupStats,
}

impl DedupCache {
    /// An empty cache in partition 0.
    pub fn new(config: DedupConfig) -> Self {
        Self {
            config,
            entries: LruCache::unbounded(),
            total_bytes: 0,
            partition: 0,
            stats: DedupStats::default(),
        }
    }

    /// The bounds in force.
    pub fn config(&self) -> &DedupConfig {
        &self.config
    }

    /// Changes the TTL of entries without their own, from now on (the
    /// session's profile changed). Entries are judged by it at their next
    /// lookup; none is dropped here.
    pub fn set_ttl(&mut self, ttl: Duration) {
        self.config.ttl = ttl;
    }

    /// The current context partition (0 until the first advance).
    pub fn partition(&self) -> u64 {
        self.partition
    }

    /// Entries remembered (some may be expired but not yet found so).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sum of the remembered bodies' lengths.
    pub fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// Counters since the cache was made.
    pub fn stats(&self) -> DedupStats {
        self.stats
    }

    /// The delivery a body with fingerprint `fp` can refer to at `now`, if
    /// any. A hit makes the entry most recently used (it survives LRU
    /// eviction longer) but does not restart its TTL. An entry found stale
    /// is dropped.
    pub fn lookup(&mut self, fp: Fingerprint, now: Timestamp) -> Option<&Delivered> {
        let (stale, body_len) = match self.entries.peek(&fp) {
            None => {
                self.stats.misses += 1;
                return None;
            }
            Some(entry) => (self.staleness(entry, now), entry.body_len),
        };
        if let Some(reason) = stale {
            self.forget(fp, reason);
            self.stats.misses += 1;
            return None;
        }
        self.stats.hits += 1;
        self.stats.bytes_saved += body_len as u64;
        self.entries.get(&fp).map(|entry| &entry.delivered)
    }

    /// The id of the delivery `fp` may refer to at `now`, like
    /// [`DedupCache::lookup`] but without counting a hit or a miss and
    /// without touching the LRU order: for asking "is that earlier body
    /// still in the context?" when no reference to it is being sent.
    pub fn still_delivered(&self, fp: Fingerprint, now: Timestamp) -> Option<ReferenceId> {
        let entry = self.entries.peek(&fp)?;
        self.staleness(entry, now)
            .is_none()
            .then_some(entry.delivered.id)
    }

    /// Remember that a body with fingerprint `fp` and `body_len` bytes was
    /// just delivered to the model **in full**, shown with
    /// `delivered.id`. Call it only then: a body the model did not see (a
    /// prefetch not yet served, a result replaced by a hint) must never be
    /// recorded, or a later reference would point at nothing.
    pub fn record_delivered(
        &mut self,
        fp: Fingerprint,
        mut delivered: Delivered,
        body_len: usize,
        now: Timestamp,
    ) -> RecordOutcome {
        let skip = if self.config.max_entries == 0 {
            Some(SkipReason::Disabled)
        } else if body_len < self.config.min_body_bytes {
            Some(SkipReason::BelowMinSize)
        } else if body_len > self.config.max_bytes {
            Some(SkipReason::AboveMaxBytes)
        } else {
            None
        };
        if let Some(reason) = skip {
            self.stats.skipped += 1;
            return RecordOutcome::Skipped(reason);
        }
        for path in &mut delivered.paths {
            if let Cow::Owned(normal) = paths::normalize(path) {
                *path = normal;
            }
        }
        let entry = Entry {
            delivered,
            body_len,
            delivered_at: now,
            partition: self.partition,
        };
        let outcome = match self.entries.put(fp, entry) {
            Some(old) => {
                self.total_bytes -= old.body_len;
                self.stats.refreshes += 1;
                RecordOutcome::Refreshed
            }
            None => {
                self.stats.inserts += 1;
                RecordOutcome::Inserted
            }
        };
        self.total_bytes += body_len;
        self.evict_to_bounds(now);
        outcome
    }

    /// Start a new context partition (after a compaction or a context
    /// reset): every entry is forgotten, so no reference points into the
    /// earlier context. Returns the new partition.
    pub fn advance_partition(&mut self) -> u64 {
        self.forget_all(Forget::Partition);
        self.partition = self.partition.wrapping_add(1);
        self.partition
    }

    /// Forget every body read from `path` or from anything under it (a
    /// write to `/a/b` forgets bodies of `/a/b` and `/a/b/c.txt`, not of
    /// `/a/bc`). Trailing, repeated and `.` slashes do not matter; an empty
    /// path or `.` forgets every body with a path. Returns how many entries
    /// were forgotten.
    pub fn invalidate_path(&mut self, path: &str) -> usize {
        let scope = paths::normalize(path);
        self.forget_where(|entry| {
            entry
                .delivered
                .paths
                .iter()
                .any(|p| paths::covers(&scope, p))
        })
    }

    /// Forget every body `endpoint` produced. Returns how many entries were
    /// forgotten.
    pub fn invalidate_endpoint(&mut self, endpoint: &EndpointKey) -> usize {
        self.forget_where(|entry| entry.delivered.endpoint == *endpoint)
    }

    /// Forget the body with fingerprint `fp`: it turned out not to reach
    /// the model in full (a later stage elided parts of it). Counted as an
    /// invalidation. Returns whether it was remembered.
    pub fn withdraw(&mut self, fp: Fingerprint) -> bool {
        let known = self.entries.contains(&fp);
        self.forget(fp, Forget::Invalidation);
        known
    }

    /// Forget every body of an endpoint `doomed` picks. Returns how many
    /// entries were forgotten.
    pub fn invalidate_endpoints(&mut self, doomed: impl Fn(&EndpointKey) -> bool) -> usize {
        self.forget_where(|entry| doomed(&entry.delivered.endpoint))
    }

    /// Forget everything (counted as invalidation; the partition stays).
    /// Returns how many entries were forgotten.
    pub fn clear(&mut self) -> usize {
        self.forget_all(Forget::Invalidation)
    }

    /// Forget every entry that is stale at `now`. Lookups never return one
    /// anyway; this only frees their room early. Returns how many.
    pub fn purge_expired(&mut self, now: Timestamp) -> usize {
        let stale: Vec<(Fingerprint, Forget)> = self
            .entries
            .iter()
            .filter_map(|(fp, entry)| self.staleness(entry, now).map(|reason| (*fp, reason)))
            .collect();
        for &(fp, reason) in &stale {
            self.forget(fp, reason);
        }
        stale.len()
    }

    fn staleness(&self, entry: &Entry, now: Timestamp) -> Option<Forget> {
        if entry.partition != self.partition {
            // advance_partition drops everything; checked again because
            // this is the invariant that matters most.
            Some(Forget::Partition)
        } else if now.saturating_since(entry.delivered_at)
            >= entry.delivered.ttl.unwrap_or(self.config.ttl)
        {
            Some(Forget::Ttl)
        } else {
            None
        }
    }

    fn evict_to_bounds(&mut self, now: Timestamp) {
        loop {
            let over_entries = self.entries.len() > self.config.max_entries;
            if !over_entries && self.total_bytes <= self.config.max_bytes {
                return;
            }
            // The entry just recorded is most recently used and fits both
            // bounds alone, so it is never the victim.
            let Some((_, victim)) = self.entries.pop_lru() else {
                return;
            };
            self.total_bytes -= victim.body_len;
            let reason = match self.staleness(&victim, now) {
                Some(stale) => stale,
                None if over_entries => Forget::Entries,
                None => Forget::Bytes,
            };
            self.stats.evictions.count(reason, 1);
        }
    }

    fn forget(&mut self, fp: Fingerprint, reason: Forget) {
        if let Some(entry) = self.entries.pop(&fp) {
            self.total_bytes -= entry.body_len;
            self.stats.evictions.count(reason, 1);
        }
    }

    fn forget_where(&mut self, mut doomed: impl FnMut(&Entry) -> bool) -> usize {
        let victims: Vec<Fingerprint> = self
            .entries
            .iter()
            .filter(|(_, entry)| doomed(entry))
            .map(|(fp, _)| *fp)
            .collect();
        for &fp in &victims {
            self.forget(fp, Forget::Invalidation);
        }
        victims.len()
    }

    fn forget_all(&mut self, reason: Forget) -> usize {
        let n = self.entries.len();
        self.entries.clear();
        self.total_bytes = 0;
        self.stats.evictions.count(reason, n);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::IdAllocator;

    const TTL_MS: u64 = 60_000;

    fn config() -> DedupConfig {
        DedupConfig {
            max_entries: 3,
            max_bytes: 10_000,
            min_body_bytes: 100,
            ttl: Duration::from_millis(TTL_MS),
        }
    }

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn fp(n: u32) -> Fingerprint {
        Fingerprint::of(&n.to_le_bytes())
    }

    struct Session {
        cache: DedupCache,
        ids: IdAllocator,
        endpoint: EndpointKey,
    }

    impl Session {
        fn new(config: DedupConfig) -> Self {
            Self {
                cache: DedupCache::new(config),
                ids: IdAllocator::new(crate::ids::SessionTag::FIXED),
                endpoint: EndpointKey::new("fs", "read_file"),
            }
        }

        /// Deliver body `n` in full; returns its id.
        fn deliver(&mut self, n: u32, len: usize, paths: &[&str], now: u64) -> ReferenceId {
            let id = self.ids.next();
            let d = Delivered::new(id, self.endpoint.clone(), paths.iter().copied());
            assert!(self
                .cache
                .record_delivered(fp(n), d, len, at(now))
                .is_remembered());
            id
        }

        fn hit(&mut self, n: u32, now: u64) -> Option<ReferenceId> {
            self.cache.lookup(fp(n), at(now)).map(|d| d.id)
        }
    }

    #[test]
    fn a_delivered_body_is_found_with_its_record() {
        let mut s = Session::new(config());
        assert_eq!(s.hit(1, 0), None);
        let id = s.deliver(1, 500, &["/r/a.txt"], 0);
        let d = s.cache.lookup(fp(1), at(10)).cloned().unwrap();
        assert_eq!(d.id, id);
        assert_eq!(d.endpoint, s.endpoint);
        assert_eq!(d.paths, vec!["/r/a.txt".to_string()]);
        let st = s.cache.stats();
        assert_eq!((st.hits, st.misses, st.inserts), (1, 1, 1));
        assert_eq!(st.bytes_saved, 500);
        assert_eq!((s.cache.len(), s.cache.total_bytes()), (1, 500));
    }

    #[test]
    fn small_large_and_disabled_bodies_are_not_remembered() {
        let mut c = DedupCache::new(config());
        let d = Delivered::new(
            IdAllocator::new(crate::ids::SessionTag::FIXED).next(),
            EndpointKey::new("u", "t"),
            [""; 0],
        );
        let small = c.record_delivered(fp(1), d.clone(), 99, at(0));
        assert_eq!(small, RecordOutcome::Skipped(SkipReason::BelowMinSize));
        assert!(c
            .record_delivered(fp(2), d.clone(), 100, at(0))
            .is_remembered());
        let big = c.record_delivered(fp(3), d.clone(), 10_001, at(0));
        assert_eq!(big, RecordOutcome::Skipped(SkipReason::AboveMaxBytes));
        assert!(c.lookup(fp(1), at(0)).is_none());
        assert!(c.lookup(fp(3), at(0)).is_none());
        assert_eq!(c.stats().skipped, 2);
        // A body that alone fills max_bytes is fine and pushes the rest out.
        assert!(c
            .record_delivered(fp(4), d.clone(), 10_000, at(0))
            .is_remembered());
        assert_eq!(c.len(), 1);

        let mut off = DedupCache::new(DedupConfig {
            max_entries: 0,
            ..config()
        });
        let outcome = off.record_delivered(fp(1), d, 500, at(0));
        assert_eq!(outcome, RecordOutcome::Skipped(SkipReason::Disabled));
        assert!(off.is_empty());
    }

    #[test]
    fn ttl_counts_from_delivery_not_from_hits() {
        let mut s = Session::new(config());
        let id = s.deliver(1, 500, &[], 1_000);
        assert_eq!(s.hit(1, 1_000 + TTL_MS - 1), Some(id));
        // The hit above did not restart the TTL; age == ttl is expired.
        assert_eq!(s.hit(1, 1_000 + TTL_MS), None);
        assert_eq!(s.cache.stats().evictions.ttl, 1);
        assert!(s.cache.is_empty());
    }

    #[test]
    fn redelivery_refreshes_id_and_ttl() {
        let mut s = Session::new(config());
        s.deliver(1, 500, &[], 0);
        let second = s.ids.next();
        let d = Delivered::new(second, s.endpoint.clone(), ["/x"]);
        let outcome = s.cache.record_delivered(fp(1), d, 500, at(TTL_MS - 1));
        assert_eq!(outcome, RecordOutcome::Refreshed);
        assert_eq!(s.hit(1, TTL_MS + 5), Some(second));
        assert_eq!((s.cache.len(), s.cache.total_bytes()), (1, 500));
        assert_eq!(s.cache.stats().refreshes, 1);
    }

    #[test]
    fn a_new_partition_forgets_the_old_context() {
        let mut s = Session::new(config());
        s.deliver(1, 500, &[], 0);
        s.deliver(2, 500, &[], 0);
        assert_eq!(s.cache.advance_partition(), 1);
        assert_eq!(s.cache.partition(), 1);
        assert_eq!(s.hit(1, 1), None);
        assert_eq!(s.hit(2, 1), None);
        assert_eq!(s.cache.stats().evictions.partition, 2);
        assert_eq!(s.cache.total_bytes(), 0);
        // Delivered again in the new context, it is referencable again,
        // under a new id.
        let id = s.deliver(1, 500, &[], 2);
        assert_eq!(id.to_string(), "tagfix3");
        assert_eq!(s.hit(1, 3), Some(id));
    }

    #[test]
    fn lru_by_entries_keeps_what_was_used() {
        let mut s = Session::new(config()); // max 3 entries
        s.deliver(1, 500, &[], 0);
        s.deliver(2, 500, &[], 0);
        s.deliver(3, 500, &[], 0);
        assert!(s.hit(1, 1).is_some()); // 2 is now least recently used
        s.deliver(4, 500, &[], 2);
        assert_eq!(s.hit(2, 3), None);
        assert!(s.hit(1, 3).is_some() && s.hit(3, 3).is_some() && s.hit(4, 3).is_some());
        let ev = s.cache.stats().evictions;
        assert_eq!((ev.entries, ev.bytes), (1, 0));
    }

    #[test]
    fn lru_by_bytes() {
        let mut s = Session::new(DedupConfig {
            max_entries: 10,
            ..config() // max 10_000 bytes
        });
        s.deliver(1, 4_000, &[], 0);
        s.deliver(2, 4_000, &[], 0);
        s.deliver(3, 2_000, &[], 0);
        assert_eq!(s.cache.total_bytes(), 10_000);
        s.deliver(4, 5_000, &[], 0); // must drop 1 and 2
        assert_eq!(s.hit(1, 1), None);
        assert_eq!(s.hit(2, 1), None);
        assert!(s.hit(3, 1).is_some() && s.hit(4, 1).is_some());
        assert_eq!(s.cache.total_bytes(), 7_000);
        assert_eq!(s.cache.stats().evictions.bytes, 2);
    }

    #[test]
    fn an_expired_lru_victim_counts_as_ttl() {
        let mut s = Session::new(config());
        s.deliver(1, 500, &[], 0);
        s.deliver(2, 500, &[], TTL_MS);
        s.deliver(3, 500, &[], TTL_MS);
        s.deliver(4, 500, &[], TTL_MS);
        let ev = s.cache.stats().evictions;
        assert_eq!((ev.ttl, ev.entries), (1, 0));
    }

    #[test]
    fn writing_a_path_forgets_bodies_read_from_it_or_below() {
        let mut s = Session::new(DedupConfig {
            max_entries: 10,
            ..config()
        });
        s.deliver(1, 500, &["/repo/a/b.txt"], 0);
        s.deliver(2, 500, &["/repo/a/"], 0);
        s.deliver(3, 500, &["/repo/ab.txt"], 0);
        s.deliver(4, 500, &["/other", "/repo//a/c/d.txt"], 0);
        s.deliver(5, 500, &[], 0);
        assert_eq!(s.cache.invalidate_path("/repo/a/b.txt/"), 1);
        assert_eq!(s.hit(1, 1), None);
        assert_eq!(s.cache.invalidate_path("/repo/./a"), 2);
        assert_eq!(s.hit(2, 1), None);
        assert_eq!(s.hit(4, 1), None);
        assert!(s.hit(3, 1).is_some(), "/repo/a does not cover /repo/ab.txt");
        assert!(s.hit(5, 1).is_some());
        assert_eq!(s.cache.invalidate_path("/nothing"), 0);
        assert_eq!(s.cache.stats().evictions.invalidation, 3);
        // The root and the current directory cover every path.
        assert_eq!(s.cache.invalidate_path("."), 1);
        assert!(s.hit(5, 1).is_some(), "a body without paths stays");
    }

    #[test]
    fn remembered_paths_are_normalised() {
        let mut s = Session::new(config());
        s.deliver(1, 500, &["/a//b/./c/"], 0);
        let d = s.cache.lookup(fp(1), at(0)).unwrap();
        assert_eq!(d.paths, vec!["/a/b/c".to_string()]);
        assert_eq!(s.cache.invalidate_path("/"), 1);
    }

    #[test]
    fn invalidating_an_endpoint_and_clearing() {
        let mut s = Session::new(config());
        s.deliver(1, 500, &[], 0);
        s.endpoint = EndpointKey::new("gh", "get_issue");
        s.deliver(2, 500, &[], 0);
        s.deliver(3, 500, &[], 0);
        assert_eq!(
            s.cache
                .invalidate_endpoint(&EndpointKey::new("gh", "get_issue")),
            2
        );
        assert!(s.hit(1, 0).is_some());
        assert_eq!(s.hit(2, 0), None);
        assert_eq!(s.cache.clear(), 1);
        assert_eq!(s.hit(1, 0), None);
        assert_eq!(s.cache.partition(), 0);
        assert_eq!(s.cache.stats().evictions.invalidation, 3);
        assert_eq!(s.cache.stats().evictions.total(), 3);
    }

    #[test]
    fn purge_drops_only_the_stale() {
        let mut s = Session::new(config());
        s.deliver(1, 500, &[], 0);
        s.deliver(2, 700, &[], 10);
        assert_eq!(s.cache.purge_expired(at(TTL_MS + 5)), 1);
        assert_eq!((s.cache.len(), s.cache.total_bytes()), (1, 700));
        assert!(s.hit(2, TTL_MS + 5).is_some());
        assert_eq!(s.cache.stats().evictions.ttl, 1);
    }

    #[test]
    fn a_clock_that_runs_back_does_not_panic() {
        let mut s = Session::new(config());
        let id = s.deliver(1, 500, &[], 5_000);
        assert_eq!(s.hit(1, 0), Some(id));
    }

    #[test]
    fn zero_ttl_never_hits() {
        let mut s = Session::new(DedupConfig {
            ttl: Duration::ZERO,
            ..config()
        });
        s.deliver(1, 500, &[], 0);
        assert_eq!(s.hit(1, 0), None);
    }

    #[test]
    fn defaults_are_sane() {
        let c = DedupConfig::default();
        assert_eq!(c.max_entries, 256);
        assert_eq!(c.max_bytes, 4 * 1024 * 1024);
        assert_eq!(c.min_body_bytes, 512);
        assert_eq!(c.ttl, Duration::from_secs(1800));
    }
}
