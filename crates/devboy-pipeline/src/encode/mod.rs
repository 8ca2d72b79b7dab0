//! Lossless re-encodings of JSON tool results, and their one decoder.
//!
//! An encoder turns a [`Value`] into text a model reads with fewer tokens;
//! [`decode`] turns that text back into the same [`Value`] (invariant 1 in docs/invariants.md).
//! Every [`Encoded`] this module hands out has been decoded and compared
//! with its input before it is returned: an encoder that cannot reproduce
//! an input exactly declines it, and [`candidates`] simply has one fewer
//! entry. [`encode_best`] picks the candidate with the fewest tokens;
//! `json_compact` is a candidate, so the choice never costs more than
//! compact JSON.
//!
//! # Formats
//!
//! | [`Format`] | for | text |
//! |---|---|---|
//! | `json_compact` | anything | `serde_json::to_string`; no hint |
//! | `csv` | a non-empty array of objects | hint, then a table block |
//! | `kv` | a non-empty object | hint, then `key: value` lines |
//! | `document` | an object holding arrays of objects | `kv` lines and `key[N]:` tables |
//! | `refs` | a value in which objects repeat | a `doc` of the repeated objects, defined once, and the value referencing them as `&N` (see `refs`) |
//!
//! What the model sees for three GitHub labels (the hint tells it how to
//! read the rest, and tells [`decode`] which grammar follows; `*2` is
//! where the two shared fields sit in each label's own key order):
//!
//! ```text
//! > [encoded: csv; shared fields first; {x}=field x; *N=N shared #538993380]
//! url: https://api.github.com/repos/o/r/labels/{name}
//! default: true
//! id,name,*2
//! 1,bug
//! 2,docs
//! 3,ci
//! ```
//!
//! # Grammar
//!
//! This is the specification the decoder implements. `LF` is `\n`; nothing
//! else ends a line.
//!
//! ```text
//! text     = json                                 ; no hint: JSON
//!          | "> [encoded: " word [ ";" note ] check "]" LF body
//! check    = " #" 9DIGIT                          ; over the whole text
//! word     = "csv"                                ; body = block, rows to the end
//!          | "kv" | "doc"                         ; body = entry *( LF entry )
//!          | "refs"                               ; as "doc", then references
//!                                                 ; expanded (see `refs`)
//! entry    = key ": " value                       ; one field (or a pattern)
//!          | key ":" value                        ; a value that starts
//!                                                 ; with a digit
//!          | path ":" LF 1*( " " entry LF )      ; a section (below)
//!          | key "[" N "]:" LF block(N)           ; an array of N objects
//! block    = *( entry LF ) names LF row *( LF row )
//!          | 1*( entry LF )                       ; nested only: the empty
//!                                                 ; header line ends it and
//!                                                 ; all N rows are alike
//! names    = item *( "," item )                   ; the columns stored per row
//! item     = key | "*" [N]                        ; `*N`: where the next N
//!                                                 ; declared columns go
//! row      = [cell] *( "," [cell] )               ; one cell per name
//! ```
//!
//! - **Check.** The nine digits are a hash of the whole text without the
//!   check (hint words and body); a text whose check is missing or does
//!   not match is refused before its body is read, so a cut or altered
//!   text fails instead of decoding to something else. See [`check`].
//! - **Keys.** A bare key is segments joined by `.`, a path into nested
//!   objects (`user.login`); a segment is a non-empty run of characters
//!   other than `, " : . { } [ ]` and line breaks. A quoted key (`"a.b"`,
//!   a JSON string) is one literal key. So a line is an entry exactly
//!   when a key is followed by `": "` or `"["`, and the first line of a
//!   block that is not an entry is its header.
//! - **Sections.** A line `a.b:`, nothing after the colon, opens a
//!   section: the indented lines after it (one space) are keyed under
//!   `a.b` (` login: x` there is `a.b.login: x`), and the first line
//!   without the space closes it. Keys, and so references, stay the full
//!   paths they stand for.
//! - **Tilde.** A hint note `~={x}` makes a line value (not a cell)
//!   that starts with `~` read as if it started with `{x}`: `~/forks` is
//!   `{x}/forks`. Line strings that start with `~` are always quoted.
//! - **Values** (a `cell` ends at `,` or the line end, a `value` at the
//!   line end): `"…"`, a JSON string (RFC 8259 escapes, never spanning
//!   lines: what the model copies out of it is the string), is a
//!   string; `null`, `true`, `false` and RFC 8259 numbers are themselves;
//!   text starting with `{` or `[` is one JSON object or array (a line's
//!   must fill the line); an empty cell means the key is absent from that
//!   row; any other text is a string. So `null`, `""`, `"null"` and an
//!   absent key are four different things, and `1` and `"1"` two.
//! - **Patterns.** Unquoted line text with `{name}` in it, where `name`
//!   resolves to a column (or a group of columns, `user` for `user.*`) of
//!   the same block, or a key of the same object: in the line of key
//!   `a.b.c`, `{x}` is `a.b.x` if that exists, else `a.x`, else `x`. A `{`
//!   that does not start such a reference is a literal character
//!   (GitHub's `…/labels{/name}` needs no escaping). Per row, `{x}` alone
//!   is the value of `x`, of any type; `[{x},{y}]` is the array of those
//!   values; anything else is a string with each reference replaced by
//!   its value (a string as is, a number as JSON).
//! - **Blocks.** Entries above the header hold for every row (constants,
//!   patterns, aliases, nested tables); then each row's object is its
//!   cells plus those entries, nested along the keys' paths. References
//!   must not form a cycle. Tables nest at most 6 deep.
//!
//! Key order: `kv` and `document` keep every object's key order, and a
//! table its rows' (the header's `*N` items place the declared columns
//! among the stored ones; see `table`). Numbers keep their text. Every
//! encoding is checked against its input with [`crate::exact::same`],
//! which sees both (invariant 12): rows whose keys come in different
//! orders make a table that is not used.
//!
//! # Modules
//!
//! - `check`: the check on the hint line, added and verified.
//! - `cell`: values and keys, both directions.
//! - `pattern`: references and how names resolve.
//! - `table`: table blocks and entries; `lines`: `kv` and `document`.
//! - `refs`: repeated objects defined once and referenced.
//! - `plan`: what the encoder does with the data: flattening, aliases,
//!   constants, patterns, nested tables.
//! - `records`: how the decoder rebuilds rows from a block's columns.
//! - `scan`: the decoder's cursor.
//!
//! # Example
//!
//! ```
//! use devboy_pipeline::encode::{decode, encode_best, Format};
//! use devboy_pipeline::Tokenizer;
//! use serde_json::json;
//!
//! let labels = json!([
//!     {"id": 1, "name": "bug", "url": "https://api.github.com/repos/o/r/labels/bug", "default": true},
//!     {"id": 2, "name": "docs", "url": "https://api.github.com/repos/o/r/labels/docs", "default": true},
//!     {"id": 3, "name": "ci", "url": "https://api.github.com/repos/o/r/labels/ci", "default": true},
//! ]);
//! let best = encode_best(&labels, Tokenizer::O200k);
//! assert_eq!(best.format(), Format::Csv);
//! assert_eq!(
//!     best.text(),
//!     "> [encoded: csv; shared fields first; {x}=field x; *N=N shared #538993380]\n\
//!      url: https://api.github.com/repos/o/r/labels/{name}\n\
//!      default: true\n\
//!      id,name,*2\n\
//!      1,bug\n\
//!      2,docs\n\
//!      3,ci"
//! );
//! assert_eq!(decode(best.text()).unwrap(), labels);
//! // Cut after the first row, it fails its check instead of losing a row.
//! let cut = &best.text()[..best.text().len() - "\n3,ci".len()];
//! assert!(decode(cut).unwrap_err().to_string().starts_with("checksum mismatch"));
//! ```

mod cell;
pub mod check;
mod lines;
mod pattern;
mod plan;
mod records;
mod refs;
mod scan;
mod table;

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

use crate::tokens::Tokenizer;
pub use check::CheckError;
use scan::Scanner;

use crate::hints::ENCODED_PREFIX as HINT_PREFIX;

/// A lossless encoding of a JSON value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `serde_json::to_string`: self-describing, no hint.
    JsonCompact,
    /// A non-empty array of objects as a table block.
    Csv,
    /// A non-empty object as `key: value` lines.
    Kv,
    /// An object as `key: value` lines with at least one array of objects
    /// as a nested table block.
    Document,
    /// A document of the objects that repeat in the value, each defined
    /// once, and the value with `&N` where they were.
    Refs,
}

impl Format {
    /// Every format, in the order [`candidates`] tries them.
    pub const ALL: [Format; 5] = [
        Self::JsonCompact,
        Self::Csv,
        Self::Kv,
        Self::Document,
        Self::Refs,
    ];

    /// A short, stable name for reports: `json_compact`, `csv`, `kv`,
    /// `document`, `refs`.
    pub fn name(self) -> &'static str {
        match self {
            Self::JsonCompact => "json_compact",
            Self::Csv => "csv",
            Self::Kv => "kv",
            Self::Document => "document",
            Self::Refs => "refs",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Text that [`decode`] turns back into exactly the value it was made from.
///
/// Only this module makes one, and only after decoding its text and
/// comparing the result with the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    format: Format,
    text: String,
}

impl Encoded {
    /// The format of [`Encoded::text`].
    pub fn format(&self) -> Format {
        self.format
    }

    /// The text the model sees.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text, by value.
    pub fn into_text(self) -> String {
        self.text
    }
}

/// Why encoded text could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum FormatDecodeError {
    /// The text has no hint and is not JSON.
    #[error("not JSON and no `> [encoded: …]` hint: {0}")]
    Json(#[from] serde_json::Error),
    /// The hint names a format this decoder does not know.
    #[error("unknown encoding `{0}` in the hint line")]
    UnknownFormat(String),
    /// The body does not follow its format's grammar.
    #[error("line {line}: {message}")]
    Syntax {
        /// 1-based line of the text (the hint is line 1).
        line: usize,
        /// What was expected.
        message: String,
    },
    /// The body parses but does not describe a value (a pattern cycle, a
    /// reference to an absent value, a key given twice).
    #[error("{0}")]
    Invalid(String),
    /// The text is not what was encoded: cut, altered, or without a check.
    #[error(transparent)]
    Check(#[from] CheckError),
}

/// Decodes text made by any encoder here: a hint line selects the grammar,
/// after the text has passed its [check](check); text without a hint is
/// parsed as JSON. Never panics, whatever the input.
pub fn decode(text: &str) -> Result<Value, FormatDecodeError> {
    if !text.starts_with(HINT_PREFIX) {
        return Ok(serde_json::from_str(text)?);
    }
    let opened = check::open(text)?;
    decode_hinted(&opened.hint, opened.text, opened.body_start)
}

/// [`decode`] for a text held inside a checked one (the body of a
/// [`crate::template::json_text`] text): the outer check covers it, so its
/// hint line, if it has one, carries none.
pub(crate) fn decode_unchecked(text: &str) -> Result<Value, FormatDecodeError> {
    if !text.starts_with(HINT_PREFIX) {
        return Ok(serde_json::from_str(text)?);
    }
    let line_end = text.find('\n');
    let hint = &text[..line_end.unwrap_or(text.len())];
    decode_hinted(hint, text, line_end.map(|end| end + 1))
}

/// Decodes the body of `text`, which starts at `body_start`, by the
/// grammar `hint` (a hint line without its check) names.
fn decode_hinted<'a>(
    hint: &'a str,
    text: &'a str,
    body_start: Option<usize>,
) -> Result<Value, FormatDecodeError> {
    let words = hint.strip_prefix(HINT_PREFIX).unwrap_or(hint);
    let Some(words) = words.strip_suffix(']') else {
        return Err(Scanner::new(text, 0).error("the hint line must end with `]`"));
    };
    let word = &words[..words.find(';').unwrap_or(words.len())];
    let Some(body_start) = body_start else {
        return Err(Scanner::new(text, 0).error("nothing after the hint line"));
    };
    let tilde = words
        .split("; ")
        .find_map(|note| note.strip_prefix(TILDE_NOTE)?.strip_suffix('}'));
    let caret = words
        .split("; ")
        .find_map(|note| note.strip_prefix(CARET_NOTE));
    let mut sc = Scanner::new(text, body_start).with_leads(tilde, caret);
    let value = match word {
        "csv" => Value::Array(table::parse_block(
            &mut sc,
            table::Rows::ToEnd,
            table::MAX_NESTING,
        )?),
        "kv" | "doc" => lines::parse(&mut sc)?,
        "refs" => refs::resolve(lines::parse(&mut sc)?, text.len())?,
        other => return Err(FormatDecodeError::UnknownFormat(other.to_owned())),
    };
    if !sc.at_end() {
        return Err(sc.error("unexpected text after the body"));
    }
    Ok(value)
}

/// Ends a hint line with the notes `block` needs: nested tables, fields
/// declared above a header for every row, references.
fn push_notes(text: &mut String, block: &table::Block) {
    if block.tables {
        text.push_str("; k[N]: N rows");
    }
    if block.declared {
        text.push_str("; shared fields first");
    }
    if block.references {
        text.push_str("; {x}=field x");
    }
    if block.lists {
        text.push_str("; k[]: rest of row");
    }
    if block.placed {
        text.push_str("; *N=N shared");
    }
    text.push_str("]\n");
}

/// How a hint declares what a line value's leading `~` stands for:
/// `~={url}`.
const TILDE_NOTE: &str = "~={";

/// The fewest lines a `~` must shorten to pay for its note in the hint
/// (`; ~={url}`, 5 o200k tokens; `~` saves 2 on `{url}`, the usual case).
const MIN_TILDE_LINES: usize = 3;

/// `text` (a hinted text from [`render`], not yet sealed) with `~` for the
/// reference that starts the most `key: value` lines, and the note that
/// declares it; `None` if no reference starts enough lines to pay. Lines
/// are recognised by their text alone: the caller keeps this text only if
/// it decodes back exactly.
fn with_tilde(text: &str) -> Option<String> {
    let (hint, body) = text.split_once('\n')?;
    // The reference name at the start of a line's value, and where the
    // value starts.
    let lead = |line: &str| -> Option<(usize, usize)> {
        let key = line.find(": {")?;
        if key == 0 || line[..key].contains([',', '"', ':', '{', '}', '[', ']']) {
            return None;
        }
        let name = &line[key + 3..];
        let len = name.find('}')?;
        let bare = !name[..len].contains(['{', '"', ';', ']', ' ']);
        (len > 0 && bare).then_some((key + 2, len))
    };
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for line in body.split('\n') {
        if let Some((at, len)) = lead(line) {
            let name = &line[at + 1..at + 1 + len];
            match counts.iter_mut().find(|(n, _)| *n == name) {
                Some((_, count)) => *count += 1,
                None => counts.push((name, 1)),
            }
        }
    }
    // The most used, the first seen on a tie.
    let (name, count) = counts
        .iter()
        .copied()
        .reduce(|best, next| if next.1 > best.1 { next } else { best })?;
    if count < MIN_TILDE_LINES {
        return None;
    }
    let hint = hint.strip_suffix(']')?;
    let mut out = String::with_capacity(text.len());
    out.push_str(hint);
    out.push_str("; ");
    out.push_str(TILDE_NOTE);
    out.push_str(name);
    out.push_str("}]");
    for line in body.split('\n') {
        out.push('\n');
        match lead(line) {
            Some((at, len)) if &line[at + 1..at + 1 + len] == name => {
                out.push_str(&line[..at]);
                out.push(cell::TILDE);
                out.push_str(&line[at + len + 2..]);
            }
            _ => out.push_str(line),
        }
    }
    Some(out)
}

/// How a hint declares what a line value's leading `^` stands for:
/// `^=https://x/y`.
const CARET_NOTE: &str = "^=";

/// The shortest text worth a `^` (its note costs about its own length;
/// 16 measured best on the fixtures, 8 to 32 tried).
const MIN_CARET_TEXT: usize = 16;

/// Where the value of `line` starts, if the line reads as `key: value`
/// (a bare key, perhaps indented under a section). Lines are recognised
/// by their text alone: a text made with this is kept only if it decodes
/// back exactly.
fn line_value_start(line: &str) -> Option<usize> {
    let key = line.find(": ")?;
    let bad_key = line[..key].contains([',', '"', ':', '{', '}', '[', ']']);
    (key > 0 && !bad_key).then_some(key + 2)
}

/// `text` (a hinted text, not yet sealed) with `^` for the longest-paying
/// text up to a `/` that starts the values of two or more `key: value`
/// lines, and the note that declares it; `None` if none pays. The text
/// is declared in the hint, so it holds no `;`, `]`, `#`, braces or
/// whitespace.
fn with_caret(text: &str) -> Option<String> {
    let (hint, body) = text.split_once('\n')?;
    let value = |line: &str| -> Option<(usize, usize)> {
        let at = line_value_start(line)?;
        let v = &line[at..];
        let plain = !v.starts_with(['{', '"', '[', cell::TILDE, cell::CARET]);
        // The declarable part: up to the first character a note cannot hold.
        let len = v
            .find(|c: char| matches!(c, ';' | ']' | '#' | '{' | '}') || c.is_whitespace())
            .unwrap_or(v.len());
        plain.then_some((at, len))
    };
    // Each candidate's count and first line, by text.
    let mut counts: HashMap<&str, (usize, usize), FastHash> = HashMap::default();
    for (i, line) in body.split('\n').enumerate() {
        let Some((at, len)) = value(line) else {
            continue;
        };
        let v = &line[at..at + len];
        for (slash, _) in v.match_indices('/').take(16) {
            if slash >= MIN_CARET_TEXT {
                counts.entry(&v[..slash]).or_insert((0, i)).0 += 1;
            }
        }
    }
    let (prefix, _) = counts
        .iter()
        .filter(|(_, &(count, _))| count >= 2)
        .max_by_key(|(p, &(count, first))| ((count - 1) * p.len(), std::cmp::Reverse(first)))?;
    let hint = hint.strip_suffix(']')?;
    let mut out = String::with_capacity(text.len());
    out.push_str(hint);
    out.push_str("; ");
    out.push_str(CARET_NOTE);
    out.push_str(prefix);
    out.push(']');
    for line in body.split('\n') {
        out.push('\n');
        match value(line) {
            Some((at, len)) if line[at..at + len].starts_with(prefix) => {
                out.push_str(&line[..at]);
                out.push(cell::CARET);
                out.push_str(&line[at + prefix.len()..]);
            }
            _ => out.push_str(line),
        }
    }
    Some(out)
}

/// Encodes `value` in `format`, if that format applies and reproduces
/// `value` exactly. [`Format::Kv`] writes arrays of objects inline;
/// [`Format::Document`] declines an object it would write without a table.
pub fn encode(value: &Value, format: Format) -> Option<Encoded> {
    let (made, text) = render(value, format)?;
    if made != format {
        return None;
    }
    verified_shortest(value, made, text)
}

/// [`verified_for`] of the shortest of `text` with a `~` and a `^` (see
/// [`with_tilde`], [`with_caret`]), `text` with a `~`, and `text` itself,
/// that decodes exactly.
fn verified_shortest(value: &Value, format: Format, text: String) -> Option<Encoded> {
    if format != Format::JsonCompact {
        let tilde = with_tilde(&text);
        let both = with_caret(tilde.as_deref().unwrap_or(&text));
        for short in [both, tilde].into_iter().flatten() {
            if let Some(encoded) = verified_for(value, format, short) {
                return Some(encoded);
            }
        }
    }
    verified_for(value, format, text)
}

/// `text` (made by [`render`]) as an [`Encoded`], its hint line sealed
/// with its check, if it decodes back to exactly `value`.
fn verified_for(value: &Value, format: Format, text: String) -> Option<Encoded> {
    let text = match format {
        Format::JsonCompact => text,
        _ => check::seal(&text)?,
    };
    let decoded = decode(&text).ok()?;
    crate::exact::same(&decoded, value).then_some(Encoded { format, text })
}

/// The text of `value` in `format`, not yet checked, and the format it is:
/// asked for a document, an object that needs no table comes back as `kv`.
fn render(value: &Value, format: Format) -> Option<(Format, String)> {
    match (format, value) {
        (Format::JsonCompact, _) => Some((format, serde_json::to_string(value).ok()?)),
        (Format::Csv, Value::Array(items)) => {
            let block = table::block(items, table::MAX_NESTING, false)?;
            let mut text = format!("{HINT_PREFIX}csv");
            push_notes(&mut text, &block);
            text.push_str(&block.text);
            Some((format, text))
        }
        (Format::Refs, Value::Array(_) | Value::Object(_)) => {
            let factored = refs::factor(value)?;
            let body = lines::encode(&factored, true)?;
            let mut text = format!("{HINT_PREFIX}refs{}", refs::NOTE);
            push_notes(&mut text, &body);
            text.push_str(&body.text);
            Some((format, text))
        }
        (Format::Kv | Format::Document, Value::Object(object)) => {
            let body = lines::encode(object, format == Format::Document)?;
            let (made, word) = if body.tables {
                (Format::Document, "doc")
            } else {
                (Format::Kv, "kv")
            };
            let mut text = format!("{HINT_PREFIX}{word}");
            push_notes(&mut text, &body);
            text.push_str(&body.text);
            Some((made, text))
        }
        _ => None,
    }
}

/// Every format that applies to `value`, each already checked to decode
/// back to `value`: `json_compact` first, then `csv` for an array of
/// objects, or `document` (if a table pays) or else `kv` for an object,
/// then `refs` when objects repeat in it.
/// `json_compact` is missing only for a value `serde_json` cannot read
/// back from its own output (nesting deeper than 128; without its
/// `float_roundtrip` feature, some floats).
pub fn candidates(value: &Value) -> Vec<Encoded> {
    let mut out = Vec::with_capacity(2);
    out.extend(encode(value, Format::JsonCompact));
    let structured = match value {
        Value::Array(_) => render(value, Format::Csv),
        Value::Object(_) => render(value, Format::Document),
        _ => None,
    };
    if let Some((format, text)) = structured {
        out.extend(verified_shortest(value, format, text));
    }
    out.extend(encode(value, Format::Refs));
    out
}

/// The candidate with the fewest `tokenizer` tokens (the earlier one on a
/// tie, so `json_compact` wins ties). If there is no candidate at all (see
/// [`candidates`]), compact JSON, unchecked: the best that can be done.
pub fn encode_best(value: &Value, tokenizer: Tokenizer) -> Encoded {
    let mut best: Option<(usize, Encoded)> = None;
    for candidate in candidates(value) {
        let cost = tokenizer.count(candidate.text());
        if best.as_ref().is_none_or(|(least, _)| cost < *least) {
            best = Some((cost, candidate));
        }
    }
    match best {
        Some((_, encoded)) => encoded,
        None => Encoded {
            format: Format::JsonCompact,
            text: value.to_string(),
        },
    }
}

/// The hasher of the encoders' own maps and sets (column names, scopes,
/// first-row JSON). The keys come from upstream servers, so the standard
/// randomly keyed SipHash: a fixed, unkeyed hash would let a hostile server
/// craft colliding column names and make planning quadratic. (A
/// multiply-rotate hash measured 5–8% faster at 1 KiB; not worth that.)
pub(crate) type FastHash = std::hash::RandomState;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The text without its check, as the expected strings are written.
    fn shown(encoded: &Encoded) -> String {
        match encoded.format() {
            Format::JsonCompact => encoded.text().to_owned(),
            _ => check::strip(encoded.text()).expect("a check"),
        }
    }

    /// Decodes `text` with its check added, as an encoder would have.
    fn decode_sealed(text: &str) -> Result<Value, FormatDecodeError> {
        decode(&check::seal(text).expect("a hint line to seal"))
    }

    fn formats(value: &Value) -> Vec<Format> {
        candidates(value).iter().map(Encoded::format).collect()
    }

    #[test]
    fn names_are_stable() {
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names, ["json_compact", "csv", "kv", "document", "refs"]);
        assert_eq!(Format::Csv.to_string(), "csv");
    }

    #[test]
    fn json_compact_is_self_describing() {
        let value = json!({"a": [1, 2.5, null, "x"]});
        let encoded = encode(&value, Format::JsonCompact).unwrap();
        assert_eq!(encoded.text(), r#"{"a":[1,2.5,null,"x"]}"#);
        assert_eq!(decode(encoded.text()).unwrap(), value);
        assert_eq!(decode(" [1, 2] ").unwrap(), json!([1, 2]));
    }

    #[test]
    fn which_formats_apply() {
        assert_eq!(formats(&json!("text")), [Format::JsonCompact]);
        assert_eq!(formats(&json!([])), [Format::JsonCompact]);
        assert_eq!(formats(&json!([1, 2])), [Format::JsonCompact]);
        assert_eq!(formats(&json!([{}, {}])), [Format::JsonCompact]);
        assert_eq!(formats(&json!({})), [Format::JsonCompact]);
        assert_eq!(
            formats(&json!([{"a": 1}])),
            [Format::JsonCompact, Format::Csv]
        );
        assert_eq!(formats(&json!({"a": 1})), [Format::JsonCompact, Format::Kv]);
        let page = json!({"total_count": 2, "items": [{"id": 1, "t": "a"}, {"id": 2, "t": "b"}]});
        assert_eq!(formats(&page), [Format::JsonCompact, Format::Document]);
        assert!(encode(&json!({"a": 1}), Format::Document).is_none());
        assert!(encode(&json!({"a": 1}), Format::Csv).is_none());
        let kv = encode(&page, Format::Kv).unwrap();
        assert!(kv.text().contains("items: [{"), "{}", kv.text());
    }

    #[test]
    fn flat_object_as_key_value_lines() {
        let value =
            json!({"login": "octocat", "id": 1, "site_admin": false, "bio": null, "blog": ""});
        let encoded = encode(&value, Format::Kv).unwrap();
        assert_eq!(
            shown(&encoded),
            "> [encoded: kv]\nlogin: octocat\nid:1\nsite_admin: false\nbio: null\nblog: \"\""
        );
    }

    #[test]
    fn document_of_scalars_and_a_table() {
        let value = json!({
            "total_count": 2,
            "incomplete_results": false,
            "items": [
                {"number": 1, "title": "Found a bug", "state": "open"},
                {"number": 2, "title": "Docs, please", "state": "open"}
            ]
        });
        let encoded = encode(&value, Format::Document).unwrap();
        assert_eq!(
            shown(&encoded),
            "> [encoded: doc; k[N]: N rows; shared fields first; *N=N shared]\n\
             total_count:2\nincomplete_results: false\nitems[2]:\n\
             state: open\nnumber,title,*\n1,Found a bug\n2,\"Docs, please\""
        );
    }

    /// Rows that leave out different keys keep their own key order: the
    /// columns follow an order every row agrees with. Rows that disagree
    /// make no table at all.
    #[test]
    fn tables_keep_every_rows_key_order_or_are_not_used() {
        let sparse: Value =
            serde_json::from_str(r#"[{"a":1,"c":3},{"a":1,"b":2,"c":3},{"b":5,"c":6,"d":7}]"#)
                .unwrap();
        let encoded = encode(&sparse, Format::Csv).expect("an order all rows agree with");
        let back = decode(encoded.text()).unwrap();
        assert_eq!(back.to_string(), sparse.to_string(), "{}", encoded.text());
        let disagree: Value = serde_json::from_str(r#"[{"a":1,"b":2},{"b":3,"a":4}]"#).unwrap();
        assert_eq!(encode(&disagree, Format::Csv), None);
    }

    #[test]
    fn nested_tables_aliases_and_rows_alike() {
        let user = json!({"login": "octocat", "url": "https://api.github.com/users/octocat"});
        let value = json!([{
            "id": 7,
            "user": user,
            "assignees": [user],
            "steps": [{"name": "build", "ok": true}, {"name": "test", "ok": true}],
            "same": [{"k": 1}, {"k": 1}]
        }]);
        let encoded = encode(&value, Format::Csv).unwrap();
        assert_eq!(
            shown(&encoded),
            "> [encoded: csv; k[N]: N rows; shared fields first; {x}=field x; *N=N shared]\n\
             assignees: [{user}]\n\
             steps[2]:\nok: true\nname,*\nbuild\ntest\n\
             same[2]:\nk:1\n\n\
             id,user.login,user.url,*3\n\
             7,octocat,https://api.github.com/users/octocat"
        );
        assert_eq!(decode(encoded.text()).unwrap(), value);
    }

    #[test]
    fn references_resolve_from_the_nearest_group() {
        let value = json!({
            "url": "https://api.github.com/repos/o/r",
            "owner": {"url": "https://api.github.com/users/o",
                      "repos_url": "https://api.github.com/users/o/repos",
                      "home": "https://api.github.com/repos/o/r/home"}
        });
        let encoded = encode(&value, Format::Kv).unwrap();
        assert_eq!(
            shown(&encoded),
            "> [encoded: kv; {x}=field x; ^=https://api.github.com]\n\
             url: ^/repos/o/r\n\
             owner:\n url: ^/users/o\n\
             \x20repos_url: {url}/repos\n\
             \x20home: ^/repos/o/r/home"
        );
    }

    /// The reference that starts most lines is written `~` after the hint
    /// declares it; a string that starts with `~` is quoted, and a `~`
    /// that no hint declares, or in a cell, is a plain character.
    #[test]
    fn a_leading_reference_is_declared_once_as_tilde() {
        let base = "https://api.github.com/repos/o/r";
        let value = json!({
            "url": base,
            "forks_url": format!("{base}/forks"),
            "keys_url": format!("{base}/keys{{/key_id}}"),
            "hooks_url": format!("{base}/hooks"),
            "tags_url": format!("{base}/tags"),
            "home": "~/src",
            "size": 0,
        });
        let encoded = encode(&value, Format::Kv).unwrap();
        assert_eq!(
            shown(&encoded),
            "> [encoded: kv; {x}=field x; ~={url}]\n\
             url: https://api.github.com/repos/o/r\n\
             forks_url: ~/forks\nkeys_url: ~/keys{/key_id}\nhooks_url: ~/hooks\n\
             tags_url: ~/tags\nhome: \"~/src\"\nsize:0"
        );
        assert_eq!(decode(encoded.text()).unwrap(), value);
        // Two such lines do not pay for the note.
        let mut fewer = value.clone();
        fewer.as_object_mut().unwrap().remove("tags_url");
        fewer.as_object_mut().unwrap().remove("hooks_url");
        let encoded = encode(&fewer, Format::Kv).unwrap();
        assert!(!encoded.text().contains('~') || !encoded.text().contains("~ = "));
        assert!(encoded.text().contains("forks_url: {url}/forks"));
        // Undeclared, or in a cell, `~` is itself.
        assert_eq!(
            decode_sealed("> [encoded: kv]\na: ~/x").unwrap(),
            json!({"a": "~/x"})
        );
        assert_eq!(
            decode_sealed("> [encoded: csv; ~={a}]\nb: ~/y\na,c\nx,~\nz,~q").unwrap(),
            json!([{"b": "x/y", "a": "x", "c": "~"}, {"b": "z/y", "a": "z", "c": "~q"}])
        );
    }

    /// A text up to a `/` that starts two or more line values, and is long
    /// enough to pay, is declared once and written `^`; a string that
    /// starts with `^` is quoted, and an undeclared `^` is itself.
    #[test]
    fn a_shared_value_start_is_declared_once_as_caret() {
        let base = "https://api.github.com/repos/octokit/rest.js/branches/main";
        let value = json!({
            "url": format!("{base}/protection"),
            "rules": format!("{base}/rules"),
            "regex": "^v[0-9]+$",
            "name": "main",
        });
        let encoded = encode(&value, Format::Kv).unwrap();
        assert_eq!(
            shown(&encoded),
            format!(
                "> [encoded: kv; ^={base}]\n\
                 url: ^/protection\nrules: ^/rules\n\
                 regex: \"^v[0-9]+$\"\nname: main"
            )
        );
        assert_eq!(decode(encoded.text()).unwrap(), value);
        // Too short a shared start is not worth its note.
        let short = json!({"a": "https://x.io/a/b", "b": "https://x.io/a/c"});
        assert!(!encode(&short, Format::Kv).unwrap().text().contains('^'));
        assert_eq!(
            decode_sealed("> [encoded: kv]\na: ^/x").unwrap(),
            json!({"a": "^/x"})
        );
    }

    /// A value that starts with a digit follows its colon directly: o200k
    /// would spend a token on the space.
    #[test]
    fn digits_follow_the_colon() {
        let value = json!({"id": 7, "at": "2011-04-22T13:33:48Z", "n": -1, "v": "1.0"});
        let encoded = encode(&value, Format::Kv).unwrap();
        assert_eq!(
            shown(&encoded),
            "> [encoded: kv]\nid:7\nat:2011-04-22T13:33:48Z\nn: -1\nv: \"1.0\""
        );
        assert_eq!(decode(encoded.text()).unwrap(), value);
        assert_eq!(
            decode_sealed("> [encoded: kv]\na: 1\nb:2").unwrap(),
            json!({"a": 1, "b": 2})
        );
        assert!(decode_sealed("> [encoded: kv]\na:x").is_err());
    }

    #[test]
    fn best_is_never_worse_than_compact() {
        for value in [
            json!(1),
            json!({"a": 1}),
            json!([{"a": 1}]),
            json!([{"id": 1, "url": "https://x/1"}, {"id": 2, "url": "https://x/2"}]),
        ] {
            for tok in [Tokenizer::O200k, Tokenizer::CharsPerToken(4.0)] {
                let best = encode_best(&value, tok);
                assert!(tok.count(best.text()) <= tok.count(&value.to_string()));
                assert_eq!(decode(best.text()).unwrap(), value);
            }
        }
        // Ties go to json_compact.
        assert_eq!(
            encode_best(&json!({"a": 1}), Tokenizer::O200k).format(),
            Format::JsonCompact
        );
    }

    #[test]
    fn decode_errors() {
        assert!(matches!(decode("nope"), Err(FormatDecodeError::Json(_))));
        assert!(
            matches!(decode_sealed("> [encoded: xml]\na"), Err(FormatDecodeError::UnknownFormat(w)) if w == "xml")
        );
        assert!(matches!(
            decode_sealed("> [encoded: csv]"),
            Err(FormatDecodeError::Syntax { line: 1, .. })
        ));
        // A hint line without a check is refused, whatever follows it.
        for unchecked in [
            "> [encoded: csv\na\n1",
            "> [encoded: csv]\na\n1",
            "> [encoded: kv]",
        ] {
            assert!(
                matches!(
                    decode(unchecked),
                    Err(FormatDecodeError::Check(CheckError::Missing))
                ),
                "{unchecked}"
            );
        }
        assert!(matches!(
            decode_sealed("> [encoded: csv]\na,b\n1"),
            Err(FormatDecodeError::Syntax { line: 3, .. })
        ));
        assert!(matches!(
            decode_sealed("> [encoded: kv]\na: {b}\nb: {a}"),
            Err(FormatDecodeError::Invalid(_))
        ));
        assert!(matches!(
            decode_sealed("> [encoded: kv]\na: 1\na: 2"),
            Err(FormatDecodeError::Invalid(_))
        ));
        assert!(decode_sealed("> [encoded: doc]\na[99999999999999999999]:\nx").is_err());
        let deep = format!("> [encoded: doc]\n{}", "a[1]:\n".repeat(100));
        assert!(decode_sealed(&deep).is_err());
        assert!(decode_sealed(&format!("> [encoded: kv]\na: {}", "[".repeat(10_000))).is_ok());
    }

    /// The issue's example: a CSV cut at a line boundary, and inside a
    /// number (`21.5` → `21.`), used to decode to fewer rows and a string
    /// with exit code 0. Now both fail their check and say so.
    #[test]
    fn a_cut_csv_fails_its_check() {
        let rows = json!([
            {"city": "Oslo", "temp": 21.5},
            {"city": "Bergen", "temp": 18.25},
            {"city": "Tromsø", "temp": 9.0}
        ]);
        let encoded = encode(&rows, Format::Csv).unwrap();
        let text = encoded.text();
        assert!(text.ends_with("\nBergen,18.25\nTromsø,9.0"), "{text}");
        let by_row = &text[..text.rfind('\n').unwrap()];
        let in_number = &text[..text.find("21.5").unwrap() + 3];
        for cut in [by_row, in_number] {
            let error = decode(cut).unwrap_err();
            assert!(
                matches!(error, FormatDecodeError::Check(CheckError::Mismatch { .. })),
                "{cut}"
            );
            assert!(
                error
                    .to_string()
                    .starts_with("checksum mismatch: the hint says #"),
                "{error}"
            );
        }
        assert_eq!(decode(text).unwrap(), rows);
    }

    /// Pins what each hint costs in o200k tokens, so a wording change shows
    /// its price here: the words, and the check, which adds 4 whatever its
    /// digits (` #` and three runs of three digits).
    #[test]
    fn hint_costs_are_pinned() {
        let tok = Tokenizer::O200k;
        for (hint, cost) in [
            ("> [encoded: kv]", 6),
            ("> [encoded: kv; {x}=field x]", 12),
            ("> [encoded: csv]", 6),
            ("> [encoded: csv; shared fields first]", 10),
            ("> [encoded: csv; shared fields first; {x}=field x]", 16),
            (
                "> [encoded: csv; k[N]: N rows; shared fields first; {x}=field x]",
                22,
            ),
            ("> [encoded: doc; k[N]: N rows]", 12),
            (
                "> [encoded: doc; k[N]: N rows; shared fields first; k[]: rest of row]",
                23,
            ),
        ] {
            assert_eq!(tok.count(hint), cost, "{hint}");
            for digits in ["000000000", "991468368", "100200300", "012345678"] {
                let checked = format!("{} #{digits}]\n", hint.strip_suffix(']').unwrap());
                assert_eq!(tok.count(&checked), cost + 4, "{checked}");
            }
        }
    }
}
