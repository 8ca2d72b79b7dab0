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

use lru::LruCache;

use crate::ids::{IdAllocator, ReferenceId};

/// Bounds of an [`ExpandStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpandConfig {
    /// Most bytes kept. Default 64 MiB: a few hundred results at Claude
    /// Code's 25,000-token cap, a small part of a developer machine's memory,
    /// held for one session.
    pub max_bytes: usize,
}

impl Default for ExpandConfig {
    fn default() -> Self {
        Self {
            max_bytes: 64 << 20,
        }
    }
}

/// What [`ExpandStore::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOutcome {
    /// The bytes are kept under the id (replacing any earlier bytes).
    Stored,
    /// Longer than [`ExpandConfig::max_bytes`]: not kept, and any earlier
    /// bytes under the id were dropped. The caller must not promise
    /// expansion for this id; it should name the original call instead.
    TooLarge,
}

/// What an id expands to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expansion<'a> {
    /// The exact bytes the id stood for.
    Bytes(&'a [u8]),
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
}

/// The bytes behind a session's ids, bounded by bytes, least recently used
/// evicted first.
#[derive(Debug)]
pub struct ExpandStore {
    config: ExpandConfig,
    entries: LruCache<ReferenceId, Vec<u8>>,
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
    /// without copying.
    pub fn insert(&mut self, id: ReferenceId, bytes: impl Into<Vec<u8>>) -> StoreOutcome {
        let bytes = bytes.into();
        // Whatever happens next, earlier bytes under this id are no longer
        // what it stands for.
        if let Some(old) = self.entries.pop(&id) {
            self.total_bytes -= old.len();
        }
        if bytes.len() > self.config.max_bytes {
            self.stats.too_large += 1;
            return StoreOutcome::TooLarge;
        }
        self.total_bytes += bytes.len();
        self.entries.put(id, bytes);
        self.stats.stored += 1;
        while self.total_bytes > self.config.max_bytes {
            // The newest entry fits alone, so it is never the victim.
            let Some((_, victim)) = self.entries.pop_lru() else {
                break;
            };
            self.total_bytes -= victim.len();
            self.stats.evicted += 1;
        }
        StoreOutcome::Stored
    }

    /// The exact bytes `id` stands for, if still kept (a hit makes them
    /// most recently used). `None` means "not here", never "empty": use
    /// [`expand`](Self::expand) to tell an expired id from an unknown one.
    pub fn get(&mut self, id: ReferenceId) -> Option<&[u8]> {
        match self.entries.get(&id) {
            Some(bytes) => {
                self.stats.hits += 1;
                Some(bytes.as_slice())
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

    /// Bytes kept.
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
        assert_eq!(s.get(a), Some(&b"hello"[..]));
        assert_eq!(s.expand(a, &ids), Expansion::Bytes(b"hello"));
        let empty = ids.next();
        assert_eq!(s.insert(empty, Vec::new()), StoreOutcome::Stored);
        assert_eq!(s.expand(empty, &ids), Expansion::Bytes(b""));
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
        assert_eq!(s.expand(a, &ids), Expansion::Bytes(&[1; 4]));
        assert_eq!(s.expand(c, &ids), Expansion::Bytes(&[3; 4]));
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
        assert_eq!(s.expand(ours, &ids), Expansion::Bytes(b"new process"));
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
        assert_eq!(s.get(a), Some(&[2u8; 8][..]));
    }

    #[test]
    fn default_is_64_mib() {
        assert_eq!(ExpandConfig::default().max_bytes, 64 * 1024 * 1024);
    }
}
