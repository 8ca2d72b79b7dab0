//! Names the model and the caller use: the visible ids of delivered bodies
//! and elisions, the session tag that makes them one process's own, and the
//! endpoint a body came from.

use std::cell::OnceCell;
use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;
use std::sync::Arc;

use crate::tokens::Tokenizer;

/// The letters every id of one devboy process starts with (`kafrum` in
/// `kafrum12`), so an id never resolves in a process that did not print it
/// (invariant 10 in docs/invariants.md): the model keeps its context across a restart of devboy,
/// and a later process counts its ids from 1 again.
///
/// A tag is 1 to [`SessionTag::MAX_LEN`] lower-case ASCII letters. Drawn
/// tags ([`SessionTag::from_seed`]) are [`SessionTag::DRAWN_LEN`] letters
/// that o200k splits into exactly two tokens after a space, which is how
/// every hint prints an id: an id then costs one token more than the untagged
/// `r12` did, with about 14.8 million tags to draw from
/// (docs/measurements.md, "Session tags in ids").
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionTag {
    letters: [u8; SessionTag::MAX_LEN],
    len: u8,
}

/// Why a text is not a [`SessionTag`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a session tag: expected 1 to 8 lower-case letters a-z")]
pub struct InvalidSessionTag(pub String);

impl SessionTag {
    /// The longest tag.
    pub const MAX_LEN: usize = 8;
    /// The length of a drawn tag.
    pub const DRAWN_LEN: usize = 6;
    /// The tag of runs that must be repeatable (`devboy replay`, tests).
    /// Like a drawn tag it costs two o200k tokens after a space, so replay
    /// counts what a live session pays.
    pub const FIXED: SessionTag = SessionTag {
        letters: *b"tagfix\0\0",
        len: 6,
    };

    /// The tag spelled `text`.
    pub fn new(text: &str) -> Result<Self, InvalidSessionTag> {
        let bytes = text.as_bytes();
        if bytes.is_empty()
            || bytes.len() > Self::MAX_LEN
            || !bytes.iter().all(u8::is_ascii_lowercase)
        {
            return Err(InvalidSessionTag(text.chars().take(64).collect()));
        }
        let mut letters = [0; Self::MAX_LEN];
        letters[..bytes.len()].copy_from_slice(bytes);
        Ok(Self {
            letters,
            len: bytes.len() as u8,
        })
    }

    /// The tag drawn from `seed`: the first run of [`SessionTag::DRAWN_LEN`]
    /// letters, from a SplitMix64 stream, that costs exactly two o200k
    /// tokens after a space (about one draw in 21 does). The caller brings
    /// the randomness (one seed per process); the same seed always gives
    /// the same tag. Needs the o200k vocabulary, so [`IdAllocator::seeded`]
    /// defers this to the first id.
    pub fn from_seed(seed: u64) -> Self {
        let mut state = seed;
        let mut draw = || {
            // SplitMix64 (Steele, Lea, Flood 2014): one multiply-xorshift
            // finalizer per step, enough to spread a seed evenly.
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut candidate = Self::FIXED;
        // One draw in about 21 is accepted, so 2,000 draws fail to find one
        // with odds below 10⁻⁴⁰; the last candidate is kept then (an id one
        // token dearer, still unique).
        for _ in 0..2_000 {
            let mut bits = draw();
            let mut letters = [0; Self::MAX_LEN];
            for letter in letters.iter_mut().take(Self::DRAWN_LEN) {
                // 26 of 32 five-bit values: no modulo bias.
                let mut five = bits & 31;
                bits >>= 5;
                while five >= 26 {
                    if bits == 0 {
                        bits = draw();
                    }
                    five = bits & 31;
                    bits >>= 5;
                }
                *letter = b'a' + five as u8;
            }
            candidate = Self {
                letters,
                len: Self::DRAWN_LEN as u8,
            };
            if Tokenizer::O200k.count(&format!(" {candidate}")) == 2 {
                break;
            }
        }
        candidate
    }

    /// The letters.
    pub fn as_str(&self) -> &str {
        // Only ASCII letters are ever stored.
        std::str::from_utf8(&self.letters[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl fmt::Display for SessionTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for SessionTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionTag({})", self.as_str())
    }
}

/// A short visible id a devboy process assigned to something the model was
/// shown (a body delivered in full) or can get back (an elision).
///
/// Prints as the process's [`SessionTag`] followed by a sequence number
/// (`kafrum1`, `kafrum12`), found by plain text match in what the model saw
/// (invariant 2 in docs/invariants.md). Sequence numbers keep ids short and let [`IdAllocator`]
/// promise that an id is never reused; the tag keeps another process's ids
/// apart, so an id from before a restart is recognised as stale instead of
/// naming whatever the new process numbered the same (invariant 10 in docs/invariants.md).
/// Parsing accepts exactly what [`Display`](fmt::Display) prints (plus
/// surrounding whitespace and upper-case letters), so text and id map one to
/// one; letters then digits split only one way, so ids of two tags never
/// parse as each other.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReferenceId {
    tag: SessionTag,
    sequence: NonZeroU64,
}

impl ReferenceId {
    /// The id of `tag`'s session with sequence number `n`.
    pub const fn new(tag: SessionTag, n: NonZeroU64) -> Self {
        Self { tag, sequence: n }
    }

    /// The tag of the session that issued it.
    pub const fn tag(self) -> SessionTag {
        self.tag
    }

    /// The sequence number (1 for the first id of a session).
    pub const fn sequence(self) -> u64 {
        self.sequence.get()
    }
}

impl fmt::Display for ReferenceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.tag, self.sequence)
    }
}

impl fmt::Debug for ReferenceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a text is not a [`ReferenceId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a devboy id: expected letters followed by a number, as a hint prints it")]
pub struct ParseReferenceIdError {
    /// The text that was given (trimmed, at most 64 characters).
    pub text: String,
}

impl FromStr for ReferenceId {
    type Err = ParseReferenceIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim();
        let err = || ParseReferenceIdError {
            text: trimmed.chars().take(64).collect(),
        };
        let split = trimmed
            .find(|c: char| !c.is_ascii_alphabetic())
            .ok_or_else(err)?;
        let (letters, digits) = trimmed.split_at(split);
        let tag = SessionTag::new(&letters.to_ascii_lowercase()).map_err(|_| err())?;
        // Digits only and no leading zero: `kafrum012` would not be found
        // by text.
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        if digits.starts_with('0') {
            return Err(err());
        }
        let n: u64 = digits.parse().map_err(|_| err())?;
        NonZeroU64::new(n)
            .map(|n| Self::new(tag, n))
            .ok_or_else(err)
    }
}

/// Hands out a session's [`ReferenceId`]s: `kafrum1`, `kafrum2`, … in
/// order, under one [`SessionTag`].
///
/// An id is never handed out twice, whatever happens to the thing it names
/// (evicted, invalidated, a new context partition), and no other allocator
/// shares its tag unless given it. So an old id the model still quotes
/// either resolves to the bytes it stood for, or is reported as expired or
/// as another session's; it can never name different bytes.
#[derive(Debug, Clone)]
pub struct IdAllocator {
    /// The tag, once known (a seeded allocator draws it on first use).
    tag: OnceCell<SessionTag>,
    seed: u64,
    last: u64,
}

impl IdAllocator {
    /// An allocator whose ids carry `tag`; the first is `{tag}1`.
    pub fn new(tag: SessionTag) -> Self {
        Self {
            tag: OnceCell::from(tag),
            seed: 0,
            last: 0,
        }
    }

    /// An allocator whose tag is [`SessionTag::from_seed`]`(seed)`, drawn
    /// when first needed: drawing loads the o200k vocabulary, which a
    /// process should not wait for before it can answer its client.
    pub fn seeded(seed: u64) -> Self {
        Self {
            tag: OnceCell::new(),
            seed,
            last: 0,
        }
    }

    /// The tag every id of this allocator carries.
    pub fn tag(&self) -> SessionTag {
        *self.tag.get_or_init(|| SessionTag::from_seed(self.seed))
    }

    /// The next id.
    // Not an `Iterator`: it never ends and is used one id at a time.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> ReferenceId {
        // 2⁶⁴ ids are out of reach for a session (584 years at one per ns);
        // saturating keeps the type total without a panic path.
        self.last = self.last.saturating_add(1);
        ReferenceId::new(
            self.tag(),
            NonZeroU64::new(self.last).unwrap_or(NonZeroU64::MAX),
        )
    }

    /// The id the next call to [`IdAllocator::next`] will return.
    pub fn peek_next(&self) -> ReferenceId {
        ReferenceId::new(
            self.tag(),
            NonZeroU64::new(self.last.saturating_add(1)).unwrap_or(NonZeroU64::MAX),
        )
    }

    /// The last id handed out, if any.
    pub fn last_issued(&self) -> Option<ReferenceId> {
        NonZeroU64::new(self.last).map(|n| ReferenceId::new(self.tag(), n))
    }

    /// Whether `id` carries another session's tag.
    pub fn is_foreign(&self, id: ReferenceId) -> bool {
        id.tag() != self.tag()
    }

    /// Whether this allocator has handed out `id`.
    pub fn was_issued(&self, id: ReferenceId) -> bool {
        !self.is_foreign(id) && id.sequence() <= self.last
    }
}
/// The endpoint a body came from: an upstream server and one of its tools,
/// printed as `upstream/tool`.
///
/// Both parts are kept apart, so `("a/b", "c")` and `("a", "b/c")` are
/// different endpoints even though they print alike. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointKey {
    text: Arc<str>,
    split: usize,
}

impl EndpointKey {
    /// The endpoint of `tool` on `upstream`.
    pub fn new(upstream: &str, tool: &str) -> Self {
        Self {
            text: format!("{upstream}/{tool}").into(),
            split: upstream.len(),
        }
    }

    /// `upstream/tool`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The upstream server's name.
    pub fn upstream(&self) -> &str {
        &self.text[..self.split]
    }

    /// The tool's name on that upstream.
    pub fn tool(&self) -> &str {
        &self.text[self.split + 1..]
    }
}

impl fmt::Display for EndpointKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for EndpointKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EndpointKey({:?})", &*self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(text: &str) -> SessionTag {
        SessionTag::new(text).unwrap()
    }

    #[test]
    fn allocator_counts_from_one_and_never_repeats() {
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        assert_eq!(ids.last_issued(), None);
        let a = ids.next();
        let b = ids.next();
        assert_eq!(a.to_string(), "tagfix1");
        assert_eq!(b.to_string(), "tagfix2");
        assert_eq!(ids.last_issued(), Some(b));
        assert!(ids.was_issued(a) && ids.was_issued(b));
        assert!(!ids.was_issued("tagfix3".parse().unwrap()));
    }

    #[test]
    fn id_text_round_trips() {
        for t in [SessionTag::FIXED, tag("r"), tag("abcdefgh")] {
            for n in [1u64, 9, 10, 12, 99_999, u64::MAX] {
                let id = ReferenceId::new(t, NonZeroU64::new(n).unwrap());
                assert_eq!(id.to_string().parse::<ReferenceId>(), Ok(id));
                assert_eq!((id.tag(), id.sequence()), (t, n));
            }
        }
        let id = " Tagfix12\n".parse::<ReferenceId>().unwrap();
        assert_eq!(id.to_string(), "tagfix12");
    }

    #[test]
    fn id_parse_rejects_what_display_never_prints() {
        for bad in [
            "",
            "r",
            "12",
            "r0",
            "r012",
            "r-1",
            "r+1",
            "r1.0",
            "r 1",
            "r1a",
            "abcdefghi1",
            "kä1",
            "r18446744073709551616",
        ] {
            let err = bad.parse::<ReferenceId>().unwrap_err();
            assert!(err.to_string().contains("not a devboy id"), "{bad}");
        }
        let long = format!("r{}", "x".repeat(500));
        assert_eq!(long.parse::<ReferenceId>().unwrap_err().text.len(), 64);
    }

    #[test]
    fn ids_of_two_tags_never_parse_as_each_other() {
        let mut one = IdAllocator::seeded(1);
        let mut two = IdAllocator::seeded(2);
        assert_ne!(one.tag(), two.tag());
        for _ in 0..300 {
            let (a, b) = (one.next(), two.next());
            let (a_text, b_text) = (a.to_string(), b.to_string());
            assert_ne!(a_text, b_text);
            assert_eq!(a_text.parse::<ReferenceId>(), Ok(a));
            assert_eq!(b_text.parse::<ReferenceId>(), Ok(b));
            assert!(one.is_foreign(b) && two.is_foreign(a));
            assert!(!one.was_issued(b) && !two.was_issued(a));
        }
        // A tag that is a prefix of another still splits one way only.
        let short = ReferenceId::new(tag("kaf"), NonZeroU64::new(12).unwrap());
        let long = ReferenceId::new(tag("kafr"), NonZeroU64::new(12).unwrap());
        assert_ne!(short.to_string().parse::<ReferenceId>(), Ok(long));
    }

    #[test]
    fn drawn_tags_are_six_letters_costing_two_tokens_and_repeatable() {
        let mut seen = std::collections::HashSet::new();
        for seed in 0..200u64 {
            let t = SessionTag::from_seed(seed);
            assert_eq!(t, SessionTag::from_seed(seed), "same seed, same tag");
            assert_eq!(t.as_str().len(), SessionTag::DRAWN_LEN);
            assert!(t.as_str().bytes().all(|b| b.is_ascii_lowercase()), "{t}");
            assert_eq!(Tokenizer::O200k.count(&format!(" {t}")), 2, "{t}");
            seen.insert(t);
        }
        // 200 draws from ~14.8 million: a repeat would mean a broken draw.
        assert_eq!(seen.len(), 200);
        assert_eq!(
            Tokenizer::O200k.count(&format!(" {}", SessionTag::FIXED)),
            2
        );
    }

    #[test]
    fn a_seeded_allocator_draws_its_tag_once() {
        let mut ids = IdAllocator::seeded(7);
        let first = ids.next();
        assert_eq!(first.tag(), SessionTag::from_seed(7));
        assert_eq!(ids.peek_next().tag(), first.tag());
        assert_eq!(ids.tag(), first.tag());
    }

    #[test]
    fn tags_are_lower_case_letters() {
        assert_eq!(tag("abc").as_str(), "abc");
        for bad in ["", "ABC", "ab1", "abcdefghi", "a b", "ä"] {
            assert!(SessionTag::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn endpoint_parts_are_kept_apart() {
        let e = EndpointKey::new("fs", "read_file");
        assert_eq!(e.as_str(), "fs/read_file");
        assert_eq!((e.upstream(), e.tool()), ("fs", "read_file"));
        assert_eq!(e.to_string(), "fs/read_file");
        assert_ne!(EndpointKey::new("a/b", "c"), EndpointKey::new("a", "b/c"));
        assert_eq!(EndpointKey::new("a", "b"), EndpointKey::new("a", "b"));
        assert_eq!(EndpointKey::new("", "").tool(), "");
    }
}
