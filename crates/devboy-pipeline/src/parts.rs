//! References to parts: a large text the model holds in full, found whole
//! inside a new result, is replaced there by a reference line.
//!
//! `read_multiple_files` of a file read a minute ago, a section quoted
//! again in a longer document, a log that grew: the result is new, so dedup
//! cannot reference it, but most of its bytes are something the model
//! already has. The unit is a *text* of a body: a string leaf of a JSON
//! body (RFC 6901 pointer), or the whole body when it is not JSON. Texts
//! of at least [`MIN_PART`] bytes of every body delivered in full are
//! remembered; a later result whose texts contain one of them verbatim
//! gets `> [ref: ID, unchanged; devboy_expand ID]` in its place, and the
//! rest stays as it was. The boundaries are the content's own (where the
//! held text begins and ends), not a tool's format, so this works for any
//! server.

use serde_json::Value;

/// The smallest text worth a reference: below it the reference line and
/// the bookkeeping cost more than they save.
pub const MIN_PART: usize = 1024;

/// How much of a held text is searched for first (then the whole is
/// compared).
pub const ANCHOR: usize = 64;

/// The texts of `body` at least `min` bytes long: its string leaves with
/// their pointers when it is JSON, else the whole body (`None` pointer)
/// when it is UTF-8.
pub fn texts(body: &[u8], min: usize) -> Vec<(Option<String>, String)> {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => {
            let mut out = Vec::new();
            let mut pointer = String::new();
            leaves(&value, &mut pointer, min, &mut out);
            out
        }
        Err(_) => match std::str::from_utf8(body) {
            Ok(text) if text.len() >= min => vec![(None, text.to_owned())],
            _ => Vec::new(),
        },
    }
}

fn leaves(
    value: &Value,
    pointer: &mut String,
    min: usize,
    out: &mut Vec<(Option<String>, String)>,
) {
    match value {
        Value::String(s) if s.len() >= min => out.push((Some(pointer.clone()), s.clone())),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                leaves(item, pointer, min, out);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                leaves(item, pointer, min, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// The text at `pointer` of `body` (the whole body for `None`).
pub fn text_at(body: &[u8], pointer: Option<&str>) -> Option<String> {
    match pointer {
        None => std::str::from_utf8(body).ok().map(str::to_owned),
        Some(p) => {
            let value: Value = serde_json::from_slice(body).ok()?;
            value.pointer(p)?.as_str().map(str::to_owned)
        }
    }
}

/// `body` with the text at each pointer replaced (compact JSON, key order
/// kept, parsed once; for a `None` pointer, the whole body is that text).
pub fn with_texts(body: &[u8], texts: Vec<(Option<&str>, String)>) -> Option<String> {
    let mut value: Option<Value> = None;
    for (pointer, text) in texts {
        match pointer {
            None => return Some(text),
            Some(p) => {
                if value.is_none() {
                    let text = std::str::from_utf8(body).ok()?;
                    let parsed: Value = serde_json::from_str(text).ok()?;
                    // Rewritten only when a value carries all of the body
                    // (no key written twice): invariant 12.
                    if !crate::exact::carries(text, &parsed) {
                        return None;
                    }
                    value = Some(parsed);
                }
                *value.as_mut()?.pointer_mut(p)? = Value::String(text);
            }
        }
    }
    serde_json::to_string(&value?).ok()
}

/// The first `ANCHOR` bytes of `text`, cut at a character boundary.
pub fn anchor(text: &str) -> &str {
    let mut end = ANCHOR.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A set of anchors to look for in texts, built once for all the texts
/// of a result. What a multi-pattern automaton answers, without compiling
/// one for every result: the set of held texts changes with almost every
/// delivery, and compiling an automaton over a few hundred anchors cost
/// more than everything else the pipeline does with a 4 KiB result. Each
/// anchor's first [`WINDOW`] bytes are hashed into a small table; one
/// rolling hash passes over a text, and a position whose window hashes to
/// an anchor's is compared with that anchor whole.
pub struct Anchors<'a> {
    anchors: &'a [&'a str],
    /// Window hash → the anchors (indices) that start with such a window.
    by_hash: rustc_hash::FxHashMap<u64, Vec<usize>>,
    /// One bit per hash bucket, to turn away most positions with one test.
    filter: Vec<u64>,
    /// The anchors shorter than a window, looked for one by one.
    short: Vec<usize>,
}

impl<'a> Anchors<'a> {
    /// The table for `anchors` (indices below are into this slice).
    pub fn new(anchors: &'a [&'a str]) -> Self {
        let mut set = Self {
            anchors,
            by_hash: Default::default(),
            filter: vec![0u64; FILTER_BITS / 64],
            short: Vec::new(),
        };
        for (i, anchor) in anchors.iter().enumerate() {
            let anchor = anchor.as_bytes();
            if anchor.len() < WINDOW {
                set.short.push(i);
                continue;
            }
            let hash = window_hash(&anchor[..WINDOW]);
            let bit = filter_bit(hash);
            set.filter[bit / 64] |= 1 << (bit % 64);
            set.by_hash.entry(hash).or_default().push(i);
        }
        set
    }

    /// Which anchors occur in `text`: their indices, in order, each once.
    pub fn found_in(&self, text: &str) -> Vec<usize> {
        let text = text.as_bytes();
        let mut found = vec![false; self.anchors.len()];
        for &i in &self.short {
            found[i] = memchr::memmem::find(text, self.anchors[i].as_bytes()).is_some();
        }
        if !self.by_hash.is_empty() && text.len() >= WINDOW {
            // BASE^(WINDOW-1): what the byte leaving the window weighs.
            let top = (1..WINDOW).fold(1u64, |p, _| p.wrapping_mul(HASH_BASE));
            let mut hash = window_hash(&text[..WINDOW]);
            for start in 0..=text.len() - WINDOW {
                if start > 0 {
                    let (out, inn) = (text[start - 1], text[start + WINDOW - 1]);
                    hash = hash
                        .wrapping_sub(u64::from(out).wrapping_mul(top))
                        .wrapping_mul(HASH_BASE)
                        .wrapping_add(u64::from(inn));
                }
                let bit = filter_bit(hash);
                if self.filter[bit / 64] & (1 << (bit % 64)) == 0 {
                    continue;
                }
                for &i in self.by_hash.get(&hash).into_iter().flatten() {
                    if !found[i] && text[start..].starts_with(self.anchors[i].as_bytes()) {
                        found[i] = true;
                    }
                }
            }
        }
        (0..self.anchors.len()).filter(|&i| found[i]).collect()
    }
}

/// The bytes of an anchor that [`Anchors`] hashes (every anchor of a
/// held text is longer: [`ANCHOR`] bytes less a cut character).
const WINDOW: usize = 32;
/// The rolling hash's multiplier (odd, so no byte's weight is lost mod
/// 2^64).
const HASH_BASE: u64 = 0x100_0000_01b3;
/// Bits in the table that turns away most positions with one test.
const FILTER_BITS: usize = 1 << 14;

fn window_hash(window: &[u8]) -> u64 {
    window.iter().fold(0u64, |h, &b| {
        h.wrapping_mul(HASH_BASE).wrapping_add(u64::from(b))
    })
}

fn filter_bit(hash: u64) -> usize {
    // The high bits of a multiplicative mix: the rolling hash's own low
    // bits depend on the last bytes only.
    (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - FILTER_BITS.trailing_zeros())) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The rolling search finds exactly the anchors a plain substring
    /// test finds: at the start, the end, overlapping, repeated, equal
    /// anchors, ones shorter than the window, multi-byte text.
    #[test]
    fn anchors_finds_what_contains_finds() {
        use proptest::prelude::*;
        let alphabet = prop::sample::select(vec!["a", "b", "é", " ", "\n", "ab", "x"]);
        let text = prop::collection::vec(alphabet, 0..300).prop_map(|v| v.concat());
        proptest!(ProptestConfig::with_cases(400), |(
            text in text,
            cuts in prop::collection::vec((0usize..400, 1usize..80), 0..12),
            others in prop::collection::vec("[abx é]{1,70}", 0..4),
        )| {
            let mut anchors: Vec<String> = cuts
                .iter()
                .filter_map(|&(at, len)| {
                    let at = at.min(text.len());
                    let end = (at + len).min(text.len());
                    text.get(at..end).filter(|s| !s.is_empty()).map(str::to_owned)
                })
                .collect();
            anchors.extend(others);
            if let Some(first) = anchors.first().cloned() {
                anchors.push(first);
            }
            let refs: Vec<&str> = anchors.iter().map(String::as_str).collect();
            let want: Vec<usize> =
                (0..refs.len()).filter(|&i| text.contains(refs[i])).collect();
            prop_assert_eq!(Anchors::new(&refs).found_in(&text), want);
        });
    }

    #[test]
    fn texts_are_long_string_leaves_or_the_whole_text() {
        let long = "x".repeat(20);
        let body = json!({"a": long, "b": [1, {"c/d": long}], "e": "short"}).to_string();
        let found = texts(body.as_bytes(), 10);
        assert_eq!(
            found,
            vec![
                (Some("/a".into()), long.clone()),
                (Some("/b/1/c~1d".into()), long.clone())
            ]
        );
        assert_eq!(
            text_at(body.as_bytes(), Some("/b/1/c~1d")),
            Some(long.clone())
        );
        assert_eq!(
            texts(b"plain text here", 5),
            vec![(None, "plain text here".into())]
        );
        assert!(texts(b"tiny", 5).is_empty());
        let replaced = with_texts(body.as_bytes(), vec![(Some("/a"), "y".into())]).unwrap();
        assert!(replaced.starts_with(r#"{"a":"y","b""#), "{replaced}");
        assert_eq!(anchor("é".repeat(40).as_str()).len(), 64);
    }
}
