//! The exact bytes behind every id a hint names, for the built-in
//! `devboy_expand` tool.
//!
//! Whatever a reference or an elision stands for is stored here under the
//! [`ReferenceId`] the model was shown. Unlike the dedup cache, the store
//! does not care what is still in the model's context: an id keeps naming
//! the same bytes for the whole session, across compactions and writes
//! (it returns what the id stood for when it was emitted, not the current
//! state of a file). Its only bound is memory, least recently used first.
//!
//! An id whose bytes were evicted (or never fit) must be answered with a
//! clear "expired" message that says how to get the content again (the
//! original call), never with other bytes: [`ExpandStore::expand`] tells
//! that apart from an id this session never issued and from another
//! session's id (its tag differs; invariant 10 in docs/invariants.md). Because [`IdAllocator`]
//! never reuses an id and ids carry their session's tag, no id can come to
//! name different bytes.
//!
//! Bodies of [`PACK_MIN`] bytes or more are kept Snappy-compressed when
//! that saves an eighth or more (logs, JSON and source text: 2–4×), and the
//! bound counts the bytes kept, so the same memory holds several times the
//! results. Expanding one decompresses it (about a gigabyte a second).

use std::borrow::Cow;

use lru::LruCache;

use crate::ids::{IdAllocator, ReferenceId};

/// Bounds of an [`ExpandStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpandConfig {
    /// Most bytes kept, counted as kept (compressed where that pays).
    /// Default 32 MiB: with text's usual 2–4× that is 64–128 MiB of
    /// results, several hundred at Claude Code's 25,000-token cap, a small
    /// part of a developer machine's memory, held for one session.
    pub max_bytes: usize,
}

impl Default for ExpandConfig {
    fn default() -> Self {
        Self {
            max_bytes: 32 << 20,
        }
    }
}

/// Bodies shorter than this are kept as they are: compressing them saves
/// little and costs a call per store.
pub const PACK_MIN: usize = 1024;

/// What [`ExpandStore::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOutcome {
    /// The bytes are kept under the id (replacing any earlier bytes).
    Stored,
    /// Longer than [`ExpandConfig::max_bytes`] even compressed: not kept, and any earlier
    /// bytes under the id were dropped. The caller must not promise
    /// expansion for this id; it should name the original call instead.
    TooLarge,
}

/// What an id expands to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expansion<'a> {
    /// The exact bytes the id stood for (decompressed if they were kept
    /// so).
    Bytes(Cow<'a, [u8]>),
    /// This session issued the id, but its bytes are no longer kept.
    Expired,
    /// The id carries this session's tag, but was never issued.
    Unknown,
    /// The id carries another session's tag: an earlier devboy process
    /// (before a restart) or another one printed it.
    OtherSession,
}

/// Counters of an [`ExpandStore`] since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpandStats {
    /// Bodies stored.
    pub stored: u64,
    /// Bodies refused as too large.
    pub too_large: u64,
    /// Bodies evicted to stay within the byte bound.
    pub evicted: u64,
    /// Lookups answered with bytes.
    pub hits: u64,
    /// Lookups of ids whose bytes were not there.
    pub misses: u64,
    /// Bodies kept compressed.
    pub packed: u64,
    /// Bytes of the bodies stored, as they came (beside the store's
    /// [`ExpandStore::total_bytes`], what compression saved).
    pub stored_bytes: u64,
    /// Bytes they were kept in.
    pub kept_bytes: u64,
}

/// One body as kept: as it came, or Snappy-compressed.
#[derive(Debug)]
struct Kept {
    bytes: Box<[u8]>,
    packed: bool,
}

impl Kept {
    fn new(body: Vec<u8>) -> Self {
        if body.len() >= PACK_MIN {
            if let Ok(packed) = snap::raw::Encoder::new().compress_vec(&body) {
                if packed.len() <= body.len() - body.len() / 8 {
                    return Self {
                        bytes: packed.into_boxed_slice(),
                        packed: true,
                    };
                }
            }
        }
        Self {
            bytes: body.into_boxed_slice(),
            packed: false,
        }
    }

    /// The body, or `None` if its compressed bytes do not decode (memory
    /// gone bad): never other bytes.
    fn body(&self) -> Option<Cow<'_, [u8]>> {
        if !self.packed {
            return Some(Cow::Borrowed(&self.bytes));
        }
        snap::raw::Decoder::new()
            .decompress_vec(&self.bytes)
            .ok()
            .map(Cow::Owned)
    }
}

/// The bytes behind a session's ids, bounded by bytes, least recently used
/// evicted first.
#[derive(Debug)]
pub struct ExpandStore {
    config: ExpandConfig,
    entries: LruCache<ReferenceId, Kept>,
    total_bytes: usize,
    stats: ExpandStats,
}

impl ExpandStore {
    /// An empty store.
    pub fn new(config: ExpandConfig) -> Self {
        Self {
            config,
            entries: LruCache::unbounded(),
            total_bytes: 0,
            stats: ExpandStats::default(),
        }
    }

    /// Keep `bytes` as what `id` stands for. Takes a `Vec<u8>` or `String`
    /// without copying (a body that compresses is kept compressed).
    pub fn insert(&mut self, id: ReferenceId, bytes: impl Into<Vec<u8>>) -> StoreOutcome {
        let bytes = bytes.into();
        // Whatever happens next, earlier bytes under this id are no longer
        // what it stands for.
        if let Some(old) = self.entries.pop(&id) {
            self.total_bytes -= old.bytes.len();
        }
        let came = bytes.len();
        let kept = Kept::new(bytes);
        let len = kept.bytes.len();
        if len > self.config.max_bytes {
            self.stats.too_large += 1;
            return StoreOutcome::TooLarge;
        }
        self.total_bytes += len;
        self.stats.stored += 1;
        self.stats.packed += u64::from(kept.packed);
        self.stats.stored_bytes += came as u64;
        self.stats.kept_bytes += len as u64;
        self.entries.put(id, kept);
        while self.total_bytes > self.config.max_bytes {
            // The newest entry fits alone, so it is never the victim.
            let Some((_, victim)) = self.entries.pop_lru() else {
                break;
            };
            self.total_bytes -= victim.bytes.len();
            self.stats.evicted += 1;
        }
        StoreOutcome::Stored
    }

    /// The exact bytes `id` stands for, if still kept (a hit makes them
    /// most recently used). `None` means "not here", never "empty": use
    /// [`expand`](Self::expand) to tell an expired id from an unknown one.
    pub fn get(&mut self, id: ReferenceId) -> Option<Cow<'_, [u8]>> {
        match self.entries.get(&id).and_then(Kept::body) {
            Some(bytes) => {
                self.stats.hits += 1;
                Some(bytes)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Whether `id`'s bytes are still kept (neither counted as a lookup nor
    /// made more recently used): what may still be expanded, for those who
    /// keep facts about ids beside the store.
    pub fn holds(&self, id: ReferenceId) -> bool {
        self.entries.contains(&id)
    }

    /// What `id` expands to, given the allocator that issues this
    /// session's ids.
    pub fn expand(&mut self, id: ReferenceId, ids: &IdAllocator) -> Expansion<'_> {
        // A store only holds its own session's ids: no lookup needed.
        if ids.is_foreign(id) {
            self.stats.misses += 1;
            return Expansion::OtherSession;
        }
        let issued = ids.was_issued(id);
        match self.get(id) {
            Some(bytes) => Expansion::Bytes(bytes),
            None if issued => Expansion::Expired,
            None => Expansion::Unknown,
        }
    }

    /// Bodies kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes kept (compressed bodies counted as kept).
    pub fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// Counters since the store was made.
    pub fn stats(&self) -> ExpandStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SessionTag;

    fn store(max_bytes: usize) -> ExpandStore {
        ExpandStore::new(ExpandConfig { max_bytes })
    }

    #[test]
    fn gives_back_the_exact_bytes() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let mut s = store(100);
        let a = ids.next();
        assert_eq!(s.insert(a, "hello"), StoreOutcome::Stored);
        assert_eq!(s.get(a).as_deref(), Some(&b"hello"[..]));
        assert_eq!(s.expand(a, &ids), Expansion::Bytes(b"hello"[..].into()));
        let empty = ids.next();
        assert_eq!(s.insert(empty, Vec::new()), StoreOutcome::Stored);
        assert_eq!(s.expand(empty, &ids), Expansion::Bytes(b""[..].into()));
    }

    #[test]
    fn evicted_ids_expire_and_unissued_ids_are_unknown() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let mut s = store(10);
        let a = ids.next();
        let b = ids.next();
        let c = ids.next();
        assert_eq!(s.insert(a, vec![1; 4]), StoreOutcome::Stored);
        assert_eq!(s.insert(b, vec![2; 4]), StoreOutcome::Stored);
        assert!(s.get(a).is_some()); // b is now least recently used
        assert_eq!(s.insert(c, vec![3; 4]), StoreOutcome::Stored);
        assert_eq!(s.expand(b, &ids), Expansion::Expired);
        assert!(!s.holds(b) && s.holds(a) && s.holds(c));
        assert_eq!(s.expand(a, &ids), Expansion::Bytes(vec![1; 4].into()));
        assert_eq!(s.expand(c, &ids), Expansion::Bytes(vec![3; 4].into()));
        assert_eq!(
            s.expand("tagfix99".parse().unwrap(), &ids),
            Expansion::Unknown
        );
        assert_eq!((s.len(), s.total_bytes()), (2, 8));
        let st = s.stats();
        assert_eq!((st.stored, st.evicted, st.misses), (3, 1, 2));
    }

    #[test]
    fn another_sessions_id_is_never_this_sessions_bytes() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let mut earlier = IdAllocator::new(SessionTag::new("kafrum").unwrap());
        let mut s = store(100);
        let ours = ids.next();
        let theirs = earlier.next();
        assert_eq!(ours.sequence(), theirs.sequence());
        let _ = s.insert(ours, "new process");
        assert_eq!(s.expand(theirs, &ids), Expansion::OtherSession);
        assert_eq!(
            s.expand(ours, &ids),
            Expansion::Bytes(b"new process"[..].into())
        );
    }

    #[test]
    fn too_large_is_refused_and_drops_earlier_bytes_under_the_id() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let mut s = store(10);
        let a = ids.next();
        assert_eq!(s.insert(a, vec![1; 10]), StoreOutcome::Stored);
        assert_eq!(s.insert(a, vec![2; 11]), StoreOutcome::TooLarge);
        assert_eq!(s.expand(a, &ids), Expansion::Expired);
        assert_eq!(s.total_bytes(), 0);
        assert!(s.is_empty());
        assert_eq!(s.stats().too_large, 1);
    }

    #[test]
    fn replacing_bytes_keeps_the_accounting() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let mut s = store(10);
        let a = ids.next();
        let _ = s.insert(a, vec![1; 6]);
        let _ = s.insert(a, vec![2; 8]);
        assert_eq!(s.total_bytes(), 8);
        assert_eq!(s.get(a).as_deref(), Some(&[2u8; 8][..]));
    }

    /// About `len` bytes of log lines, as a long tool result has.
    fn log(len: usize, seed: usize) -> Vec<u8> {
        let mut out = String::new();
        let mut i = 0;
        while out.len() < len {
            out.push_str(&format!(
                "2026-12-03T10:{:02}:{:02} worker-{} handled /api/items/{} in {} ms\n",
                (seed + i) % 60,
                i % 60,
                (seed * 7 + i) % 13,
                seed * 1000 + i,
                (i * 37) % 500
            ));
            i += 1;
        }
        out.into_bytes()
    }

    #[test]
    fn text_is_kept_compressed_and_given_back_exactly() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let mut s = store(1 << 20);
        let body = log(64 * 1024, 1);
        let a = ids.next();
        assert_eq!(s.insert(a, body.clone()), StoreOutcome::Stored);
        assert!(
            s.total_bytes() * 2 < body.len(),
            "{} kept for {}",
            s.total_bytes(),
            body.len()
        );
        assert_eq!(s.expand(a, &ids), Expansion::Bytes(body.clone().into()));
        let st = s.stats();
        assert_eq!((st.packed, st.stored_bytes), (1, body.len() as u64));
        assert_eq!(st.kept_bytes, s.total_bytes() as u64);
    }

    #[test]
    fn what_does_not_compress_is_kept_as_it_came() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let mut s = store(1 << 20);
        // Bytes of a simple generator: no repeats for Snappy to find.
        let mut x: u32 = 12345;
        let noise: Vec<u8> = (0..8192)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        let a = ids.next();
        let _ = s.insert(a, noise.clone());
        assert_eq!(s.total_bytes(), noise.len());
        assert_eq!(s.stats().packed, 0);
        assert_eq!(s.get(a).as_deref(), Some(&noise[..]));
        // Nor is a short body, however repetitive.
        let b = ids.next();
        let _ = s.insert(b, vec![b'a'; PACK_MIN - 1]);
        assert_eq!(s.stats().packed, 0);
    }

    #[test]
    fn the_bound_counts_bytes_as_kept_so_it_holds_more_results() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let mut s = store(256 * 1024);
        let bodies: Vec<(ReferenceId, Vec<u8>)> =
            (0..8).map(|n| (ids.next(), log(64 * 1024, n))).collect();
        for (id, body) in &bodies {
            let _ = s.insert(*id, body.clone());
        }
        // 512 KiB of results in a 256 KiB store: all still there.
        assert_eq!(s.stats().evicted, 0);
        for (id, body) in &bodies {
            assert_eq!(s.get(*id).as_deref(), Some(&body[..]));
        }
        assert!(s.total_bytes() <= 256 * 1024);
    }

    #[test]
    fn too_large_counts_the_kept_size() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let mut s = store(16 * 1024);
        let a = ids.next();
        // 64 KiB of text kept in under 16 KiB fits.
        let body = vec![b'x'; 64 * 1024];
        assert_eq!(s.insert(a, body.clone()), StoreOutcome::Stored);
        assert_eq!(s.get(a).as_deref(), Some(&body[..]));
    }

    #[test]
    fn default_is_32_mib_kept() {
        assert_eq!(ExpandConfig::default().max_bytes, 32 * 1024 * 1024);
    }
}
