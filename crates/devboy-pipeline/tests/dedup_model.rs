//! Property tests of the L0 dedup core against random sessions.
//!
//! A session is a random sequence of what the proxy does: deliver a body
//! (lookup, and on a miss send it in full and record it), deliver in full
//! without a lookup (dedup off for the endpoint, a prefetch served), look a
//! body up again, write a path, invalidate an endpoint, compact (advance
//! the partition), let time pass (past the TTL too), and bursts of fresh
//! bodies that force eviction.
//!
//! - `cache_agrees_with_model`: every lookup answers what a naive Vec-based
//!   model of the same rules answers, and the sizes agree.
//! - `no_reference_outlives_its_context`: judged only from a log of what
//!   happened, a hit always names a body delivered in full, byte-identical,
//!   in the current partition, less than a TTL ago, with no covering
//!   invalidation since.
//! - `expand_never_returns_other_bytes`: the expand store returns the last
//!   bytes stored under an id or nothing.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use devboy_pipeline::{
    DedupCache, DedupConfig, Delivered, EndpointKey, ExpandConfig, ExpandStore, Expansion,
    Fingerprint, IdAllocator, ReferenceId, SessionTag, StoreOutcome, Timestamp,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};

const BODIES: usize = 8;
const ENDPOINTS: usize = 3;
const PATHS: &[&str] = &[
    "/a",
    "/a/",
    "/a/b",
    "/a/b/",
    "/a/b/c.txt",
    "/a//b/c.txt",
    "/a/bc",
    "/a/./b/d.txt",
    "/",
    "/x/y.txt",
    ".",
    "a/b",
    "/a/b/c.txt/",
];

#[derive(Debug, Clone)]
enum Op {
    /// The L0 flow: lookup; on a miss deliver in full and record.
    Deliver {
        body: usize,
        endpoint: usize,
        paths: Vec<usize>,
    },
    /// Delivered in full without a lookup (dedup off, a prefetch served).
    DeliverFull {
        body: usize,
        endpoint: usize,
        paths: Vec<usize>,
    },
    /// Lookup only.
    Repeat(usize),
    /// A mutating call wrote this path.
    Write(usize),
    InvalidateEndpoint(usize),
    AdvancePartition,
    Tick(u64),
    /// This many fresh bodies through the L0 flow.
    Burst(usize),
    Purge,
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    let delivery = || (0..BODIES, 0..ENDPOINTS, vec(0..PATHS.len(), 0..3));
    prop_oneof![
        6 => delivery().prop_map(|(body, endpoint, paths)| Op::Deliver { body, endpoint, paths }),
        2 => delivery().prop_map(|(body, endpoint, paths)| Op::DeliverFull { body, endpoint, paths }),
        5 => (0..BODIES).prop_map(Op::Repeat),
        2 => (0..PATHS.len()).prop_map(Op::Write),
        1 => (0..ENDPOINTS).prop_map(Op::InvalidateEndpoint),
        1 => Just(Op::AdvancePartition),
        3 => prop_oneof![0..50u64, 900..1100u64].prop_map(Op::Tick),
        1 => (1..8usize).prop_map(Op::Burst),
        1 => Just(Op::Purge),
        1 => Just(Op::Clear),
    ]
}

/// Bounds small enough that every rule fires in short sessions.
fn small_config() -> DedupConfig {
    DedupConfig {
        max_entries: 4,
        max_bytes: 6_000,
        min_body_bytes: 500,
        ttl: Duration::from_millis(1_000),
    }
}

/// Body `k`'s length: below, at and above the minimum, up to above max_bytes.
const LENS: [usize; BODIES] = [100, 499, 500, 800, 1_500, 2_500, 6_000, 7_000];

/// The fingerprint of body `key` of `len` bytes. Memoised: SHA-256 in an
/// unoptimised test build dominates the run time otherwise.
fn body_fingerprint(key: usize, len: usize) -> Fingerprint {
    thread_local! {
        static MEMO: RefCell<HashMap<(usize, usize), Fingerprint>> = RefCell::default();
    }
    MEMO.with_borrow_mut(|memo| {
        *memo.entry((key, len)).or_insert_with(|| {
            let mut bytes = format!("body-{key}:").into_bytes();
            bytes.resize(len, b'.');
            Fingerprint::of(&bytes)
        })
    })
}

fn endpoint(e: usize) -> EndpointKey {
    EndpointKey::new(&format!("up{e}"), "tool")
}

// ---------------------------------------------------------------------------
// Path covering, written independently of the crate: by components.

fn components(path: &str) -> (bool, Vec<&str>) {
    let parts = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    (path.starts_with('/'), parts)
}

fn covered(scope: &str, path: &str) -> bool {
    let (scope_abs, scope_parts) = components(scope);
    let (path_abs, path_parts) = components(path);
    if !scope_abs && scope_parts.is_empty() {
        return true; // the current directory: unknown, so everything
    }
    scope_abs == path_abs && path_parts.starts_with(&scope_parts)
}

// ---------------------------------------------------------------------------
// The model: a Vec in recency order (least recent first), rules applied
// naively.

struct ModelEntry {
    fp: Fingerprint,
    id: ReferenceId,
    endpoint: usize,
    paths: Vec<&'static str>,
    len: usize,
    at: u64,
    partition: u64,
}

fn fresh(e: &ModelEntry, partition: u64, ttl: Duration, now: u64) -> bool {
    e.partition == partition && u128::from(now.saturating_sub(e.at)) < ttl.as_millis()
}

struct Model {
    config: DedupConfig,
    partition: u64,
    entries: Vec<ModelEntry>,
}

impl Model {
    fn new(config: DedupConfig) -> Self {
        Self {
            config,
            partition: 0,
            entries: Vec::new(),
        }
    }

    fn fresh(&self, e: &ModelEntry, now: u64) -> bool {
        fresh(e, self.partition, self.config.ttl, now)
    }

    fn lookup(&mut self, fp: Fingerprint, now: u64) -> Option<ReferenceId> {
        let pos = self.entries.iter().position(|e| e.fp == fp)?;
        let entry = self.entries.remove(pos);
        if !self.fresh(&entry, now) {
            return None;
        }
        let id = entry.id;
        self.entries.push(entry);
        Some(id)
    }

    fn record(&mut self, entry: ModelEntry) {
        if self.config.max_entries == 0
            || entry.len < self.config.min_body_bytes
            || entry.len > self.config.max_bytes
        {
            return;
        }
        self.entries.retain(|e| e.fp != entry.fp);
        self.entries.push(entry);
        while self.entries.len() > self.config.max_entries
            || self.total_bytes() > self.config.max_bytes
        {
            self.entries.remove(0);
        }
    }

    fn total_bytes(&self) -> usize {
        self.entries.iter().map(|e| e.len).sum()
    }

    fn write(&mut self, path: &str) {
        self.entries
            .retain(|e| !e.paths.iter().any(|p| covered(path, p)));
    }
}

// ---------------------------------------------------------------------------
// The log: what happened, from which safety is judged.

struct DeliveryRecord {
    fp: Fingerprint,
    endpoint: usize,
    paths: Vec<&'static str>,
    at: u64,
    partition: u64,
    seq: usize,
}

enum Invalidation {
    Path(&'static str),
    Endpoint(usize),
    All,
}

#[derive(Default)]
struct Log {
    deliveries: HashMap<ReferenceId, DeliveryRecord>,
    invalidations: Vec<(usize, Invalidation)>,
    partition: u64,
    seq: usize,
}

impl Log {
    /// Panics (failing the property) if a hit at `now` for `fp` naming `id`
    /// is not safe.
    fn check_hit(&self, id: ReferenceId, fp: Fingerprint, now: u64, ttl: Duration) {
        let d = self
            .deliveries
            .get(&id)
            .unwrap_or_else(|| panic!("{id} names no body delivered in full"));
        assert_eq!(d.fp, fp, "{id} names other bytes");
        assert_eq!(
            d.partition, self.partition,
            "{id} is from an earlier context"
        );
        assert!(
            u128::from(now.saturating_sub(d.at)) < ttl.as_millis(),
            "{id} is older than the TTL"
        );
        for (seq, inv) in &self.invalidations {
            if *seq < d.seq {
                continue;
            }
            let hit = match inv {
                Invalidation::Path(p) => d.paths.iter().any(|q| covered(p, q)),
                Invalidation::Endpoint(e) => *e == d.endpoint,
                Invalidation::All => true,
            };
            assert!(!hit, "{id} was invalidated after delivery");
        }
    }
}

// ---------------------------------------------------------------------------
// A session driving the cache, and optionally the model, while logging.

#[derive(Default, Debug, Clone, Copy)]
struct Tally {
    hits: u64,
    misses: u64,
}

struct Session {
    cache: DedupCache,
    model: Option<Model>,
    log: Log,
    ids: IdAllocator,
    now: u64,
    next_fresh: usize,
    tally: Tally,
}

impl Session {
    fn new(config: DedupConfig, with_model: bool) -> Self {
        Self {
            model: with_model.then(|| Model::new(config.clone())),
            cache: DedupCache::new(config),
            log: Log::default(),
            ids: IdAllocator::new(SessionTag::FIXED),
            now: 0,
            next_fresh: BODIES,
            tally: Tally::default(),
        }
    }

    fn lookup(&mut self, fp: Fingerprint) -> Option<ReferenceId> {
        let now = Timestamp::from_millis(self.now);
        let got = self.cache.lookup(fp, now).map(|d| d.id);
        if let Some(model) = &mut self.model {
            assert_eq!(
                got,
                model.lookup(fp, self.now),
                "lookup disagrees with model"
            );
        }
        match got {
            Some(id) => {
                self.tally.hits += 1;
                self.log
                    .check_hit(id, fp, self.now, self.cache.config().ttl);
            }
            None => self.tally.misses += 1,
        }
        got
    }

    fn deliver_full(&mut self, key: usize, len: usize, e: usize, paths: Vec<&'static str>) {
        let fp = body_fingerprint(key, len);
        let id = self.ids.next();
        self.log.seq += 1;
        let delivered = Delivered::new(id, endpoint(e), paths.iter().copied());
        let now = Timestamp::from_millis(self.now);
        let _ = self.cache.record_delivered(fp, delivered, len, now);
        self.log.deliveries.insert(
            id,
            DeliveryRecord {
                fp,
                endpoint: e,
                paths: paths.clone(),
                at: self.now,
                partition: self.log.partition,
                seq: self.log.seq,
            },
        );
        if let Some(model) = &mut self.model {
            model.record(ModelEntry {
                fp,
                id,
                endpoint: e,
                paths,
                len,
                at: self.now,
                partition: model.partition,
            });
        }
    }

    fn l0(&mut self, key: usize, len: usize, e: usize, paths: Vec<&'static str>) {
        let fp = body_fingerprint(key, len);
        if self.lookup(fp).is_none() {
            self.deliver_full(key, len, e, paths);
        }
        // On a hit the model is sent a reference: nothing is recorded.
    }

    fn invalidate(&mut self, inv: Invalidation) {
        self.log.seq += 1;
        match &inv {
            Invalidation::Path(p) => {
                self.cache.invalidate_path(p);
                if let Some(m) = &mut self.model {
                    m.write(p);
                }
            }
            Invalidation::Endpoint(e) => {
                self.cache.invalidate_endpoint(&endpoint(*e));
                if let Some(m) = &mut self.model {
                    m.entries.retain(|x| x.endpoint != *e);
                }
            }
            Invalidation::All => {
                self.cache.clear();
                if let Some(m) = &mut self.model {
                    m.entries.clear();
                }
            }
        }
        self.log.invalidations.push((self.log.seq, inv));
    }

    fn apply(&mut self, op: &Op) {
        let pick = |paths: &[usize]| paths.iter().map(|&i| PATHS[i]).collect::<Vec<_>>();
        match op {
            Op::Deliver {
                body,
                endpoint,
                paths,
            } => self.l0(*body, LENS[*body], *endpoint, pick(paths)),
            Op::DeliverFull {
                body,
                endpoint,
                paths,
            } => self.deliver_full(*body, LENS[*body], *endpoint, pick(paths)),
            Op::Repeat(body) => {
                self.lookup(body_fingerprint(*body, LENS[*body]));
            }
            Op::Write(p) => self.invalidate(Invalidation::Path(PATHS[*p])),
            Op::InvalidateEndpoint(e) => self.invalidate(Invalidation::Endpoint(*e)),
            Op::AdvancePartition => {
                self.cache.advance_partition();
                self.log.partition += 1;
                if let Some(m) = &mut self.model {
                    m.entries.clear();
                    m.partition += 1;
                }
            }
            Op::Tick(ms) => self.now += ms,
            Op::Burst(n) => {
                for i in 0..*n {
                    let key = self.next_fresh;
                    self.next_fresh += 1;
                    let len = LENS[2 + (key + i) % (BODIES - 2)];
                    self.l0(key, len, 0, vec!["/burst"]);
                }
            }
            Op::Purge => {
                self.cache.purge_expired(Timestamp::from_millis(self.now));
                if let Some(m) = &mut self.model {
                    let (partition, ttl, now) = (m.partition, m.config.ttl, self.now);
                    m.entries.retain(|e| fresh(e, partition, ttl, now));
                }
            }
            Op::Clear => self.invalidate(Invalidation::All),
        }
        if let Some(m) = &self.model {
            assert_eq!(self.cache.len(), m.entries.len(), "entry count");
            assert_eq!(self.cache.total_bytes(), m.total_bytes(), "byte count");
        }
        let c = self.cache.config();
        assert!(self.cache.len() <= c.max_entries);
        assert!(self.cache.total_bytes() <= c.max_bytes);
    }

    fn finish(&self) {
        let stats = self.cache.stats();
        assert_eq!(stats.hits, self.tally.hits);
        assert_eq!(stats.misses, self.tally.misses);
    }
}

fn run(ops: &[Op], config: DedupConfig, with_model: bool) -> Session {
    let mut session = Session::new(config, with_model);
    for op in ops {
        session.apply(op);
    }
    session.finish();
    session
}

proptest! {
    #![proptest_config(Config { cases: 512, ..Config::default() })]

    #[test]
    fn cache_agrees_with_model(ops in vec(op(), 1..120)) {
        run(&ops, small_config(), true);
    }

    #[test]
    fn no_reference_outlives_its_context(ops in vec(op(), 1..200)) {
        // Roomier bounds than the model test: more hits, so invalidation,
        // TTL and partitions are what stands between a hit and a dangling
        // reference.
        let config = DedupConfig {
            max_entries: 64,
            max_bytes: 1 << 20,
            min_body_bytes: 500,
            ttl: Duration::from_millis(1_000),
        };
        run(&ops, config, false);
    }
}

/// Guards against vacuous properties: over a fixed set of random sessions
/// every rule actually fires.
#[test]
fn random_sessions_exercise_every_rule() {
    let mut runner = TestRunner::deterministic();
    let strategy = vec(op(), 60..120);
    let mut hits = 0;
    let mut evictions = devboy_pipeline::Evictions::default();
    let mut refreshes = 0;
    for _ in 0..200 {
        let ops = strategy
            .new_tree(&mut runner)
            .map(|tree| tree.current())
            .unwrap_or_default();
        let session = run(&ops, small_config(), true);
        let st = session.cache.stats();
        hits += st.hits;
        refreshes += st.refreshes;
        evictions.entries += st.evictions.entries;
        evictions.bytes += st.evictions.bytes;
        evictions.ttl += st.evictions.ttl;
        evictions.partition += st.evictions.partition;
        evictions.invalidation += st.evictions.invalidation;
    }
    assert!(hits > 100, "hits {hits}");
    assert!(refreshes > 10, "refreshes {refreshes}");
    for (name, n) in [
        ("entries", evictions.entries),
        ("bytes", evictions.bytes),
        ("ttl", evictions.ttl),
        ("partition", evictions.partition),
        ("invalidation", evictions.invalidation),
    ] {
        assert!(n > 10, "{name} evictions: {n}");
    }
}

// ---------------------------------------------------------------------------
// The expand store.

#[derive(Debug, Clone)]
enum StoreOp {
    Insert { id: usize, len: usize, fill: u8 },
    Get(usize),
}

fn store_op() -> impl Strategy<Value = StoreOp> {
    prop_oneof![
        (0..12usize, 0..400usize, any::<u8>()).prop_map(|(id, len, fill)| StoreOp::Insert {
            id,
            len,
            fill
        }),
        (0..26usize).prop_map(StoreOp::Get),
    ]
}

proptest! {
    #![proptest_config(Config { cases: 256, ..Config::default() })]

    #[test]
    fn expand_never_returns_other_bytes(ops in vec(store_op(), 1..150)) {
        let mut store = ExpandStore::new(ExpandConfig { max_bytes: 1_000 });
        let mut allocator = IdAllocator::new(SessionTag::FIXED);
        let ids: Vec<ReferenceId> = (0..12).map(|_| allocator.next()).collect();
        let unissued = ReferenceId::new(SessionTag::FIXED, std::num::NonZeroU64::MIN.saturating_add(12));
        // The same numbers under an earlier process's tag.
        let mut earlier = IdAllocator::seeded(1);
        let foreign: Vec<ReferenceId> = (0..12).map(|_| earlier.next()).collect();
        let mut last: HashMap<ReferenceId, Vec<u8>> = HashMap::new();
        for op in ops {
            match op {
                StoreOp::Insert { id, len, fill } => {
                    let bytes = vec![fill; len];
                    let outcome = store.insert(ids[id], bytes.clone());
                    prop_assert_eq!(outcome, StoreOutcome::Stored);
                    last.insert(ids[id], bytes);
                }
                StoreOp::Get(i) => {
                    let id = match i {
                        0..12 => ids[i],
                        12 | 13 => unissued,
                        _ => foreign[i - 14],
                    };
                    match store.expand(id, &allocator) {
                        Expansion::Bytes(b) => prop_assert_eq!(Some(&b.to_vec()), last.get(&id)),
                        Expansion::Expired => prop_assert!(allocator.was_issued(id)),
                        Expansion::Unknown => prop_assert!(!allocator.was_issued(id)),
                        Expansion::OtherSession => prop_assert!(i >= 14),
                    }
                }
            }
            prop_assert!(store.total_bytes() <= 1_000);
        }
    }
}
