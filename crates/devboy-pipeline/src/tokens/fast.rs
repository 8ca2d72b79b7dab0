//! An exact `o200k_base` counter that splits text with the `regex` crate
//! instead of `fancy-regex`.
//!
//! `tiktoken-rs` splits text into pieces with o200k's pattern, then looks
//! each piece up in the vocabulary or byte-pair merges it. The pattern has
//! one look-around, `\s+(?!\S)`, so `tiktoken-rs` runs all of it on
//! `fancy-regex`'s backtracking engine, which is where most of a count's
//! time goes. This module runs the same pattern without that alternative on
//! the `regex` crate (a lazy DFA, with the same leftmost-first preference
//! between alternatives that a backtracker has) and applies the look-ahead
//! by hand:
//!
//! `\s+(?!\S)` sits between `\s*[\r\n]+` and a plain `\s+`. It can only
//! match where `\s*[\r\n]+` did not, so in a run of whitespace with no line
//! break. In such a run of `k` characters, greedy `\s+` followed by "not a
//! non-space" backtracks to `k - 1` characters when a non-space follows
//! (the last one is left to lead the next piece), takes all `k` at the end
//! of the text, and fails for `k = 1` before a non-space, where the plain
//! `\s+` then takes that one character. So: a whitespace-only piece from
//! the last alternative, followed by a non-space, with at least two
//! characters, gives up its last character. Every other alternative is the
//! same pattern in both engines.
//!
//! Pieces are then counted with the vocabulary's own ranks, unpacked once
//! from the copy devboy builds in ([`super::vocab`]) into one compact table
//! ([`Vocabulary`]: the tokens' bytes end to end and an index of them,
//! about 4 MB); `tiktoken-rs`'s own tables (tens of megabytes in small
//! allocations) are never built for o200k outside tests. Pieces the
//! vocabulary does not hold whole are byte-pair merged here, as tiktoken
//! merges them: property tests compare the merges with
//! [`tiktoken_rs::byte_pair_split`] and the counts with `tiktoken-rs`'s on
//! generated text mixing every class the pattern distinguishes
//! (`tokens.rs`).

use std::hash::BuildHasher;
use std::sync::LazyLock;

use regex::Regex;
use rustc_hash::{FxBuildHasher, FxHashMap};
use tiktoken_rs::Rank;

/// o200k's split pattern (`tiktoken_rs::O200K_BASE_PAT_STR`) without its
/// `\s+(?!\S)` alternative, which [`count`] applies by hand.
const PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"\p{N}{1,3}",
    "|",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    "|",
    r"\s*[\r\n]+",
    "|",
    r"\s+",
);

/// The ordinary vocabulary's size: ranks `0..VOCABULARY` are byte
/// sequences; the special tokens come after.
#[cfg(test)]
const VOCABULARY: Rank = 199_998;

struct Counter {
    split: Regex,
    ranks: Vocabulary,
}

/// o200k's ordinary tokens in one table: their bytes end to end in rank
/// order, where each starts, and an open-addressing index from bytes to
/// rank (at most half full, so a look-up rarely probes past its
/// first slot).
pub(super) struct Vocabulary {
    bytes: Vec<u8>,
    /// `starts[r]..starts[r + 1]` are the bytes of rank `r`.
    starts: Vec<u32>,
    /// `rank + 1` of the token hashed to each slot, or 0 for none.
    slots: Vec<u32>,
}

impl Vocabulary {
    /// The table of `tokens`, the byte sequences of ranks `0, 1, …`.
    fn new<'a>(tokens: impl ExactSizeIterator<Item = &'a [u8]>) -> Option<Self> {
        let count = tokens.len();
        let mut bytes = Vec::new();
        let mut starts = Vec::with_capacity(count + 1);
        for token in tokens {
            starts.push(u32::try_from(bytes.len()).ok()?);
            bytes.extend_from_slice(token);
        }
        starts.push(u32::try_from(bytes.len()).ok()?);
        bytes.shrink_to_fit();
        let mut table = Self {
            bytes,
            starts,
            slots: vec![0; (count * 2).next_power_of_two()],
        };
        let mask = table.slots.len() - 1;
        for rank in 0..count {
            let mut slot = table.home(table.token(rank));
            while table.slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            table.slots[slot] = u32::try_from(rank + 1).ok()?;
        }
        Some(table)
    }

    fn token(&self, rank: usize) -> &[u8] {
        &self.bytes[self.starts[rank] as usize..self.starts[rank + 1] as usize]
    }

    fn home(&self, bytes: &[u8]) -> usize {
        // The high half of an Fx hash is its best mixed.
        let hash = FxBuildHasher.hash_one(bytes);
        (hash >> 32) as usize & (self.slots.len() - 1)
    }

    /// The rank of `bytes`, if the vocabulary has them as one token.
    pub(super) fn get(&self, bytes: &[u8]) -> Option<Rank> {
        let mask = self.slots.len() - 1;
        let mut slot = self.home(bytes);
        loop {
            let entry = self.slots[slot];
            if entry == 0 {
                return None;
            }
            let rank = entry - 1;
            if self.token(rank as usize) == bytes {
                return Some(rank);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The bytes the table holds, index included.
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        self.bytes.capacity() + 4 * (self.starts.capacity() + self.slots.capacity())
    }
}

/// Built on first use; `None` if the split pattern is no longer
/// `tiktoken-rs`'s or the packed vocabulary does not unpack, and then the
/// caller counts with `tiktoken-rs`'s own encoder.
static COUNTER: LazyLock<Option<Counter>> = LazyLock::new(build);

fn build() -> Option<Counter> {
    // The pattern this module mirrors must still be the one tiktoken-rs
    // uses; a newer tiktoken-rs with another pattern turns this path off.
    let expected = PATTERN.replace(r"|\s*[\r\n]+|\s+", r"|\s*[\r\n]+|\s+(?!\S)|\s+");
    if expected != tiktoken_rs::O200K_BASE_PAT_STR {
        return None;
    }
    let ranks = {
        let unpacked = super::vocab::O200K.unpack()?;
        Vocabulary::new(unpacked.tokens())?
    };
    release_freed_memory();
    let split = Regex::new(PATTERN).ok()?;
    Some(Counter { split, ranks })
}

/// Hands the pages of freed allocations back to the system. glibc keeps
/// what a program frees for its next allocations, so the unpacked
/// vocabulary the table was read from would otherwise stay in devboy's
/// resident set for good.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns unused pages of glibc's heap to the
    // system; it touches no allocation in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether the fast path is available (its data checked and loaded).
#[cfg(test)]
pub(super) fn available() -> bool {
    COUNTER.is_some()
}

/// The number of o200k tokens in `text`, or `None` when the fast path is
/// not available.
pub(super) fn count(text: &str) -> Option<usize> {
    let counter = COUNTER.as_ref()?;
    let bytes = text.as_bytes();
    let mut tokens = 0;
    let mut at = 0;
    while at < bytes.len() {
        // ASCII text is split by hand; anywhere the split would depend on a
        // character outside ASCII, the regex decides that one piece.
        let end = match ascii_piece(bytes, at) {
            Some(end) => end,
            None => regex_piece(counter, text, at)?,
        };
        tokens += pieces(counter, &bytes[at..end]);
        at = end;
    }
    Some(tokens)
}

/// The end of the piece starting at `at` as the regex (with the look-ahead
/// rule) finds it.
fn regex_piece(counter: &Counter, text: &str, at: usize) -> Option<usize> {
    let found = counter.split.find_at(text, at)?;
    // Every character is matched by some alternative (`\s+` or the
    // others), so the next piece starts where the last one ended.
    debug_assert_eq!(found.start(), at);
    let mut end = found.end();
    if lookahead_trims(found.as_str(), &text[end..]) {
        end -= found.as_str().chars().next_back().map_or(0, char::len_utf8);
    }
    Some(end)
}

/// ASCII classes as o200k's pattern sees them.
fn is_space(b: u8) -> bool {
    // Unicode White_Space within ASCII: \t \n \v \f \r and space.
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

fn is_newline(b: u8) -> bool {
    matches!(b, b'\r' | b'\n')
}

/// `[^\s\p{L}\p{N}]` within ASCII: punctuation, symbols and the control
/// characters that are not white space.
fn is_other(b: u8) -> bool {
    b.is_ascii() && !is_space(b) && !b.is_ascii_alphanumeric()
}

/// The end of the piece starting at `at`, decided from ASCII characters
/// alone: `None` when the piece starts with, or its end depends on, a
/// character outside ASCII. Mirrors [`PATTERN`]'s alternatives in order.
fn ascii_piece(bytes: &[u8], at: usize) -> Option<usize> {
    // The byte at `i`, or `Err` if it is outside ASCII; `Ok(None)` at the
    // end of the text.
    let peek = |i: usize| -> Result<Option<u8>, ()> {
        match bytes.get(i) {
            None => Ok(None),
            Some(&b) if b.is_ascii() => Ok(Some(b)),
            Some(_) => Err(()),
        }
    };
    let c = peek(at).ok()??;
    // Alternatives 1 and 2: letters, optionally led by one character that
    // is not a line break, letter or digit.
    let letters_from = if c.is_ascii_alphabetic() {
        Some(at)
    } else if !is_newline(c) && !c.is_ascii_digit() {
        match peek(at + 1).ok()? {
            Some(n) if n.is_ascii_alphabetic() => Some(at + 1),
            _ => None,
        }
    } else {
        None
    };
    if let Some(start) = letters_from {
        return letters(bytes, start, &peek);
    }
    // Alternative 3: one to three digits.
    if c.is_ascii_digit() {
        let mut end = at + 1;
        while end - at < 3 {
            match peek(end).ok()? {
                Some(d) if d.is_ascii_digit() => end += 1,
                _ => break,
            }
        }
        return Some(end);
    }
    // Alternative 4: an optional space, symbols, then line breaks and
    // slashes.
    let symbols_from = if is_other(c) {
        Some(at)
    } else if c == b' ' {
        match peek(at + 1).ok()? {
            Some(n) if is_other(n) => Some(at + 1),
            _ => None,
        }
    } else {
        None
    };
    if let Some(mut end) = symbols_from {
        loop {
            match peek(end).ok()? {
                Some(b) if is_other(b) => end += 1,
                _ => break,
            }
        }
        while let Some(&b) = bytes.get(end) {
            if is_newline(b) || b == b'/' {
                end += 1;
            } else {
                break;
            }
        }
        return Some(end);
    }
    // Alternatives 5 to 7: white space (c is white space here).
    let mut run_end = at;
    let mut last_newline = None;
    loop {
        match peek(run_end).ok()? {
            Some(b) if is_space(b) => {
                if is_newline(b) {
                    last_newline = Some(run_end);
                }
                run_end += 1;
            }
            _ => break,
        }
    }
    if let Some(newline) = last_newline {
        // `\s*[\r\n]+`: through the run's last line break.
        return Some(newline + 1);
    }
    // `\s+(?!\S)`, else `\s+`: before a non-space, a run of two or more
    // leaves its last character to the next piece.
    if run_end < bytes.len() && run_end - at >= 2 {
        Some(run_end - 1)
    } else {
        Some(run_end)
    }
}

/// Alternatives 1 and 2 from the first letter at `start`: upper case then
/// lower case letters (or upper case alone), then an optional contraction.
fn letters(
    bytes: &[u8],
    start: usize,
    peek: &impl Fn(usize) -> Result<Option<u8>, ()>,
) -> Option<usize> {
    let mut end = start;
    // Upper case run, then lower case run. With ASCII letters the two
    // alternatives cover exactly "upper* lower*" with at least one letter,
    // which `start` guarantees.
    for class in [u8::is_ascii_uppercase, u8::is_ascii_lowercase] {
        loop {
            match peek(end).ok()? {
                Some(b) if class(&b) => end += 1,
                _ => break,
            }
        }
    }
    // The run ends at an ASCII non-letter (checked by `peek` above). Now
    // `(?i:'s|'t|'re|'ve|'m|'ll|'d)?`; case folding reaches outside ASCII
    // (`ſ` folds to `s`), so a non-ASCII character after `'` defers.
    if bytes.get(end) == Some(&b'\'') {
        let next = peek(end + 1).ok()?.map(|b| b.to_ascii_lowercase());
        let second = peek(end + 2).ok()?.map(|b| b.to_ascii_lowercase());
        let len = match (next, second) {
            (Some(b's' | b't' | b'm' | b'd'), _) => 2,
            (Some(b'r'), Some(b'e')) | (Some(b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => 3,
            _ => 0,
        };
        end += len;
    }
    Some(end)
}

/// Pieces up to this many bytes are merged by [`short_merged_len`], which
/// finds each merge by scanning every pair as tiktoken does: quadratic in
/// the piece (64 KB of one letter, one piece, took seconds, a megabyte
/// minutes), and the quickest way for the short pieces nearly all text is
/// made of. Longer ones are merged by [`merged_len`].
const SHORT_PIECE: usize = 64;

/// Pieces up to this many bytes are merged whole, exactly as `tiktoken-rs`
/// would; longer ones in chunks of this size (see [`chunked_len`]).
pub(super) const EXACT_PIECE: usize = 4096;

/// The tokens of one piece: one if the vocabulary has it whole, else its
/// byte-pair merge.
fn pieces(counter: &Counter, piece: &[u8]) -> usize {
    match counter.ranks.get(piece) {
        Some(_) => 1,
        None if piece.len() <= SHORT_PIECE => short_merged_len(piece, &counter.ranks),
        None if piece.len() <= EXACT_PIECE => merged_len(piece, &counter.ranks),
        None => chunked_len(piece, &counter.ranks),
    }
}

/// The number of parts a short `piece` byte-pair merges into: the same
/// merges as [`merged_len`] (the lowest rank first, the leftmost of
/// equals), found by a scan of the pairs left, which for a few dozen bytes
/// is quicker than a heap.
fn short_merged_len(piece: &[u8], ranks: &Vocabulary) -> usize {
    let n = piece.len();
    if n < 2 {
        return n;
    }
    // `parts[i]` is where part `i` starts (the last entry is the piece's
    // end); `joins[i]` the rank of joining part `i` with part `i + 1`.
    let mut parts: Vec<usize> = (0..=n).collect();
    let join = |parts: &[usize], i: usize| -> Rank {
        match parts.get(i + 2) {
            Some(&end) => ranks.get(&piece[parts[i]..end]).unwrap_or(Rank::MAX),
            None => Rank::MAX,
        }
    };
    let mut joins: Vec<Rank> = (0..n).map(|i| join(&parts, i)).collect();
    loop {
        let mut best = (Rank::MAX, 0);
        for (i, &rank) in joins.iter().enumerate() {
            if rank < best.0 {
                best = (rank, i);
            }
        }
        let (rank, i) = best;
        if rank == Rank::MAX {
            return parts.len() - 1;
        }
        parts.remove(i + 1);
        joins.remove(i + 1);
        joins[i] = join(&parts, i);
        if i > 0 {
            joins[i - 1] = join(&parts, i - 1);
        }
    }
}

/// A piece longer than [`EXACT_PIECE`], merged in chunks of that size,
/// each chunk counted once however often it repeats.
///
/// Only a run of one kind of character with nothing between (64 KB of
/// `=`, of spaces, of lower-case letters: filler and padding, never
/// prose or code) makes such a piece. Merged whole it costs `n log n`
/// with a heap the size of the piece; in chunks the cost per byte is that
/// of a 4 KB piece, and the run of one character that makes most such
/// pieces costs a hash per chunk. The count may then differ from the
/// whole merge where a chunk boundary cuts a token: by a few tokens per
/// 4 KB at most (one in 21,394 on 40 KB of random letters; none on runs
/// of one character, in the tests below), on a piece whose count is
/// a thousand or more.
fn chunked_len(piece: &[u8], ranks: &Vocabulary) -> usize {
    let mut counted: FxHashMap<&[u8], usize> = FxHashMap::default();
    piece
        .chunks(EXACT_PIECE)
        .map(|chunk| {
            *counted
                .entry(chunk)
                .or_insert_with(|| merged_len(chunk, ranks))
        })
        .sum()
}

/// The number of parts `piece` byte-pair merges into, in `O(n log n)`.
///
/// BPE as tiktoken applies it: start from single bytes; while some two
/// adjacent parts join into a vocabulary entry, join the pair whose join
/// has the lowest rank, the leftmost of equals. The quadratic version
/// rescans every pair for each merge; here the candidate joins wait in a
/// min-heap ordered by (rank, start), and a merge only changes the joins
/// of its two neighbours. An entry is stale when the part at its start no
/// longer joins its right neighbour at that rank (checked when it comes
/// off the heap), so the heap yields exactly the sequence of merges the
/// scan would make, and the count is the same (property-tested against
/// `byte_pair_split` below).
pub(super) fn merged_len(piece: &[u8], ranks: &Vocabulary) -> usize {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    let n = piece.len();
    if n < 2 {
        return n;
    }
    // Parts are kept by their start offset: `end[s]` is where the part
    // starting at `s` ends, `prev[s]` the start of the part before it.
    // `join[s]` is the rank of joining the part at `s` with the next one.
    let mut end: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|s| s.wrapping_sub(1)).collect();
    let mut join: Vec<Rank> = vec![Rank::MAX; n];
    let mut heap = BinaryHeap::with_capacity(n);
    let rank_of = |from: usize, to: usize| ranks.get(&piece[from..to]);
    for (s, slot) in join.iter_mut().enumerate().take(n - 1) {
        if let Some(rank) = rank_of(s, s + 2) {
            *slot = rank;
            heap.push(Reverse((rank, s)));
        }
    }
    let mut parts = n;
    while let Some(Reverse((rank, left))) = heap.pop() {
        if join[left] != rank {
            continue;
        }
        // Join `left` with the part after it.
        let right = end[left];
        end[left] = end[right];
        join[right] = Rank::MAX;
        parts -= 1;
        if end[left] < n {
            prev[end[left]] = left;
        }
        // The joins that touch the new part: with its right neighbour,
        // and its left neighbour's with it.
        join[left] = Rank::MAX;
        if end[left] < n {
            if let Some(rank) = rank_of(left, end[end[left]]) {
                join[left] = rank;
                heap.push(Reverse((rank, left)));
            }
        }
        if left > 0 {
            let before = prev[left];
            join[before] = Rank::MAX;
            if let Some(rank) = rank_of(before, end[left]) {
                join[before] = rank;
                heap.push(Reverse((rank, before)));
            }
        }
    }
    parts
}

/// Whether `\s+(?!\S)` would have matched `piece` less its last character:
/// a whitespace-only piece with no line break at its end (so from the last
/// alternatives), of at least two characters, followed by a non-space.
fn lookahead_trims(piece: &str, rest: &str) -> bool {
    let mut chars = piece.chars();
    let (Some(first), Some(last)) = (chars.next(), chars.next_back()) else {
        return false;
    };
    first.is_whitespace()
        && last.is_whitespace()
        && !matches!(last, '\r' | '\n')
        && piece.chars().all(char::is_whitespace)
        && rest.chars().next().is_some_and(|c| !c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn ranks() -> &'static Vocabulary {
        &COUNTER.as_ref().expect("the fast path is available").ranks
    }

    /// The vocabulary as tiktoken-rs's own merge takes it.
    fn tiktoken_ranks() -> &'static FxHashMap<Vec<u8>, Rank> {
        static RANKS: LazyLock<FxHashMap<Vec<u8>, Rank>> = LazyLock::new(|| {
            let bpe = tiktoken_rs::o200k_base_singleton();
            (0..VOCABULARY)
                .map(|rank| (bpe.decode_bytes(&[rank]).unwrap(), rank))
                .collect()
        });
        &RANKS
    }

    fn split_len(piece: &[u8]) -> usize {
        tiktoken_rs::byte_pair_split(piece, tiktoken_ranks()).len()
    }

    /// Every token of the vocabulary is found at its own rank, and bytes
    /// that are no token are not found; the table is a few megabytes.
    #[test]
    fn the_vocabulary_table_finds_every_token_and_nothing_else() {
        let bpe = tiktoken_rs::o200k_base_singleton();
        for rank in 0..VOCABULARY {
            let token = bpe.decode_bytes(&[rank]).unwrap();
            assert_eq!(ranks().get(&token), Some(rank), "{token:?}");
            let mut longer = token.clone();
            longer.extend_from_slice(b"\x00\xff\x00");
            assert_eq!(ranks().get(&longer), None, "{longer:?}");
        }
        assert_eq!(ranks().get(b""), None);
        let held = ranks().held_bytes();
        eprintln!("the o200k table holds {held} bytes");
        assert!(held < 6 << 20, "{held} bytes");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// Pieces as the split makes them: a run of letters, of digits and
        /// symbols, of spaces, up to a few hundred bytes; small alphabets
        /// so that merges collide and tie.
        #[test]
        fn the_heap_merge_is_tiktokens(
            alphabet in prop_oneof![
                Just(b"ab".to_vec()), Just(b"y".to_vec()), Just(b"=-".to_vec()),
                Just(b" ".to_vec()), Just(b"aeiounst".to_vec()), Just(b"xyzXYZ".to_vec()),
                Just("\u{e9}\u{4e2d}".as_bytes().to_vec()),
            ],
            picks in proptest::collection::vec(any::<prop::sample::Index>(), 2..400),
        ) {
            let piece: Vec<u8> = picks.iter().map(|i| alphabet[i.index(alphabet.len())]).collect();
            prop_assert_eq!(merged_len(&piece, ranks()), split_len(&piece));
        }

        #[test]
        fn the_heap_merge_is_tiktokens_on_any_bytes(piece in proptest::collection::vec(any::<u8>(), 2..300)) {
            prop_assert_eq!(merged_len(&piece, ranks()), split_len(&piece));
        }

        /// The scan that merges short pieces, on pieces of the same kinds.
        #[test]
        fn the_short_merge_is_tiktokens(
            alphabet in prop_oneof![
                Just(b"ab".to_vec()), Just(b"y".to_vec()), Just(b" ".to_vec()),
                Just(b"aeiounst".to_vec()), Just("\u{e9}\u{4e2d}".as_bytes().to_vec()),
            ],
            picks in proptest::collection::vec(any::<prop::sample::Index>(), 2..=SHORT_PIECE),
        ) {
            let piece: Vec<u8> = picks.iter().map(|i| alphabet[i.index(alphabet.len())]).collect();
            prop_assert_eq!(short_merged_len(&piece, ranks()), split_len(&piece));
        }

        #[test]
        fn the_short_merge_is_tiktokens_on_any_bytes(piece in proptest::collection::vec(any::<u8>(), 2..=SHORT_PIECE)) {
            prop_assert_eq!(short_merged_len(&piece, ranks()), split_len(&piece));
        }
    }

    /// Pieces past [`EXACT_PIECE`] are counted in chunks: how far that is
    /// from the whole merge on the long pieces text can hold.
    #[test]
    fn chunked_counts_stay_within_a_few_tokens_per_chunk() {
        let lower: Vec<u8> = (0..40_000u32)
            .map(|i| b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26)
            .collect();
        let inputs: [(&str, Vec<u8>); 5] = [
            ("y", vec![b'y'; 40_000]),
            ("=", vec![b'='; 40_000]),
            ("space", vec![b' '; 40_001]),
            ("ab", b"ab".repeat(20_000)),
            ("lower", lower),
        ];
        for (name, piece) in inputs {
            let whole = merged_len(&piece, ranks());
            let chunked = chunked_len(&piece, ranks());
            let chunks = piece.len().div_ceil(EXACT_PIECE);
            assert!(
                whole.abs_diff(chunked) <= chunks,
                "{name}: whole {whole}, chunked {chunked}"
            );
            eprintln!("{name}: whole {whole}, chunked {chunked}");
        }
    }

    #[test]
    fn long_runs_of_one_character_count_as_tiktoken_does() {
        for (byte, len) in [(b'y', 5_000), (b'=', 4_096), (b' ', 3_000), (b'0', 999)] {
            let piece = vec![byte; len];
            assert_eq!(
                merged_len(&piece, ranks()),
                split_len(&piece),
                "{len} × {byte}"
            );
        }
    }
}
