//! Names the model and the caller use: the visible ids of delivered bodies
//! and elisions, and the endpoint a body came from.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;
use std::sync::Arc;

/// A short visible id this session assigned to something the model was
/// shown (a body delivered in full) or can get back (an elision).
///
/// Prints as `r` followed by its sequence number (`r1`, `r12`): a few
/// o200k tokens, and found by plain text match in what the model saw
/// (DESIGN §4.2). Ids are sequence numbers rather than hashes so they stay
/// short and so [`IdAllocator`] can promise that an id is never reused.
/// Parsing accepts exactly what [`Display`](fmt::Display) prints (plus
/// surrounding whitespace and an upper-case `R`), so text and id map one to
/// one.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReferenceId(NonZeroU64);

impl ReferenceId {
    /// The letter every id starts with.
    pub const PREFIX: char = 'r';

    /// The id with sequence number `n`.
    pub const fn from_sequence(n: NonZeroU64) -> Self {
        Self(n)
    }

    /// The sequence number (1 for the first id of a session).
    pub const fn sequence(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for ReferenceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", Self::PREFIX, self.0)
    }
}

impl fmt::Debug for ReferenceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a text is not a [`ReferenceId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a devboy id: expected `r` followed by a number such as `r12`")]
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
        let digits = trimmed
            .strip_prefix(Self::PREFIX)
            .or_else(|| trimmed.strip_prefix('R'))
            .ok_or_else(err)?;
        // Digits only and no leading zero: `r012` would not be found by text.
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        if digits.starts_with('0') {
            return Err(err());
        }
        let n: u64 = digits.parse().map_err(|_| err())?;
        NonZeroU64::new(n).map(Self).ok_or_else(err)
    }
}

/// Hands out a session's [`ReferenceId`]s: `r1`, `r2`, … in order.
///
/// An id is never handed out twice, whatever happens to the thing it names
/// (evicted, invalidated, a new context partition). So an old id the model
/// still quotes either resolves to the bytes it stood for or is reported as
/// expired; it can never name different bytes.
#[derive(Debug, Clone, Default)]
pub struct IdAllocator {
    last: u64,
}

impl IdAllocator {
    /// An allocator whose first id is `r1`.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next id.
    // Not an `Iterator`: it never ends and is used one id at a time.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> ReferenceId {
        // 2⁶⁴ ids are out of reach for a session (584 years at one per ns);
        // saturating keeps the type total without a panic path.
        self.last = self.last.saturating_add(1);
        ReferenceId(NonZeroU64::new(self.last).unwrap_or(NonZeroU64::MAX))
    }

    /// The id the next call to [`IdAllocator::next`] will return.
    pub fn peek_next(&self) -> ReferenceId {
        ReferenceId(NonZeroU64::new(self.last.saturating_add(1)).unwrap_or(NonZeroU64::MAX))
    }

    /// The last id handed out, if any.
    pub fn last_issued(&self) -> Option<ReferenceId> {
        NonZeroU64::new(self.last).map(ReferenceId)
    }

    /// Whether this allocator has handed out `id`.
    pub fn was_issued(&self, id: ReferenceId) -> bool {
        id.sequence() <= self.last
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

    #[test]
    fn allocator_counts_from_one_and_never_repeats() {
        let mut ids = IdAllocator::new();
        assert_eq!(ids.last_issued(), None);
        let a = ids.next();
        let b = ids.next();
        assert_eq!(a.to_string(), "r1");
        assert_eq!(b.to_string(), "r2");
        assert_eq!(ids.last_issued(), Some(b));
        assert!(ids.was_issued(a) && ids.was_issued(b));
        assert!(!ids.was_issued("r3".parse().unwrap()));
    }

    #[test]
    fn id_text_round_trips() {
        for n in [1u64, 9, 10, 12, 99_999, u64::MAX] {
            let id = ReferenceId::from_sequence(NonZeroU64::new(n).unwrap());
            assert_eq!(id.to_string().parse::<ReferenceId>(), Ok(id));
            assert_eq!(id.sequence(), n);
        }
        assert_eq!(" R12\n".parse::<ReferenceId>().unwrap().to_string(), "r12");
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
            "x12",
            "r 1",
            "r1a",
            "r18446744073709551616",
        ] {
            let err = bad.parse::<ReferenceId>().unwrap_err();
            assert!(err.to_string().contains("not a devboy id"), "{bad}");
        }
        let long = format!("r{}", "x".repeat(500));
        assert_eq!(long.parse::<ReferenceId>().unwrap_err().text.len(), 64);
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
