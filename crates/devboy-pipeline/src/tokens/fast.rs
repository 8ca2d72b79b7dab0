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
//! Pieces are then counted with the vocabulary's own ranks, read once from
//! `tiktoken-rs` through its public decoder, and its public
//! [`tiktoken_rs::byte_pair_split`]: the count is `tiktoken-rs`'s by
//! construction, and a property test compares the two on generated text
//! mixing every class the pattern distinguishes (`tokens.rs`).

use std::sync::LazyLock;

use regex::Regex;
use rustc_hash::FxHashMap;
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
const VOCABULARY: Rank = 199_998;

struct Counter {
    split: Regex,
    ranks: FxHashMap<Vec<u8>, Rank>,
}

/// Built on first use; `None` if anything about `tiktoken-rs`'s data is not
/// what this module expects, and then the caller counts with `tiktoken-rs`.
static COUNTER: LazyLock<Option<Counter>> = LazyLock::new(build);

fn build() -> Option<Counter> {
    // The pattern this module mirrors must still be the one tiktoken-rs
    // uses; a newer tiktoken-rs with another pattern turns this path off.
    let expected = PATTERN.replace(r"|\s*[\r\n]+|\s+", r"|\s*[\r\n]+|\s+(?!\S)|\s+");
    if expected != tiktoken_rs::O200K_BASE_PAT_STR {
        return None;
    }
    let bpe = tiktoken_rs::o200k_base_singleton();
    let mut ranks = FxHashMap::default();
    ranks.reserve(VOCABULARY as usize);
    for rank in 0..VOCABULARY {
        ranks.insert(bpe.decode_bytes(&[rank]).ok()?, rank);
    }
    let split = Regex::new(PATTERN).ok()?;
    Some(Counter { split, ranks })
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

/// The tokens of one piece: one if the vocabulary has it whole, else its
/// byte-pair merge.
fn pieces(counter: &Counter, piece: &[u8]) -> usize {
    match counter.ranks.get(piece) {
        Some(_) => 1,
        None => tiktoken_rs::byte_pair_split(piece, &counter.ranks).len(),
    }
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
