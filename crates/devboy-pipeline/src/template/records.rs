//! Repeated blocks of `Key: value` lines (a git log, many command
//! outputs) as one CSV table with the keys written once.
//!
//! `mcp-server-git`'s `git_log` answers thirty commits as thirty blocks of
//! `Commit: …`, `Author: …`, `Date: …`, `Message: …` lines. The keys, and
//! on a one-author repository the author, are most of what repeats. This
//! template writes the keys once, as the header of a fenced CSV table, one
//! row per block, and a value that every block shares once in the header:
//!
//! ````text
//! > [encoded: records as csv #102938475]
//! Commit history:
//! ```csv records apart=3
//! Commit,Author=Ann Lee,Date,Message
//! cb73864…,,2026-11-24 17:02:32+00:00,Fix the reader
//! aa0cc62…,,2026-11-24 16:44:40+00:00,"Speculation: cancel, then join\n\nLonger body."
//! ```
//!
//! ````
//!
//! # Grammar (the decoder's specification)
//!
//! ```text
//! encoded  = HINT LF preamble opener LF header LF 1*( row LF ) FENCE *LF
//! HINT     = "> [encoded: records as csv" CHECK "]"
//! CHECK    = " #" 9DIGIT                 ; see crate::encode::check
//! preamble = *( line LF )                ; verbatim; no line of it is an opener
//! opener   = FENCE "csv records" [ " apart=" 1*DIGIT ]
//! FENCE    = 3*"`"                       ; the closing line is exactly the same run
//! header   = CSV record of cells KEY or KEY "=" VALUE
//! row      = CSV record with as many fields as the header
//! KEY      = 1*( ALPHA / DIGIT / SP / "-" / "_" / "." / "/" / "(" / ")" ),
//!            starting with a letter or digit, not ending with a space
//! ```
//!
//! CSV records are those of the Markdown-table template: fields separated
//! by `,`, a field quoted as a JSON string iff it holds `,`, `"` or a line
//! break (or is the only field and empty). A header cell `KEY=VALUE` says
//! every record has `VALUE` under `KEY`; that column's row fields are empty.
//!
//! The text is the preamble, then each row as the lines `KEY: value`, one
//! per key in header order, joined by line breaks (only the last key's
//! value may hold line breaks), the records separated by `apart` line
//! breaks (1 when absent), then as many line breaks as follow the closing
//! fence.
//!
//! # What is converted
//!
//! A text whose records each start with a line `K₁: …`, where at least
//! [`MIN_RECORDS`] lines start so, and whose records all open with the
//! same [`MIN_KEYS`] or more keys, each on its own line. The last common
//! key's value runs to the end of the record, line breaks and all (so a
//! commit message with a body, or a trailer such as `Signed-off-by:`, stays
//! in it); so the last record may be at most twice as long as the longest
//! other (and [`TRAILING_SLACK`] bytes), or the text is taken to go on past
//! its records and declined. Anything the encoder cannot restore byte for
//! byte it declines.

use super::{csv, fence_for, leading_backticks, Template, TemplateDecodeError};
use crate::encode::check;
use crate::shape::Classified;

/// The hint line of every text this template encodes (without its check).
pub const HINT: &str = "> [encoded: records as csv]";

/// The fewest records worth a table.
pub const MIN_RECORDS: usize = 3;

/// The fewest keys a record must have.
pub const MIN_KEYS: usize = 2;

/// The longest key recognized.
const MAX_KEY: usize = 40;

/// How much longer than twice the longest other record the last may be.
const TRAILING_SLACK: usize = 200;

/// The lines looked at for the key that opens every record.
const FIRST_KEY_SCAN: usize = 8;

const OPENER: &str = "csv records";
const APART: &str = " apart=";

/// A cheap pre-check: a text, not JSON, with a `: ` in it.
pub fn may_apply(classified: &Classified) -> bool {
    classified.json.is_none()
}

/// Whether `text` reads as a list of `Key: value` records (a git log):
/// looked at over its first lines only, so it costs nothing on a big text.
/// Such a text is a list, whose first entries matter most.
pub fn looks_like_records(text: &str) -> bool {
    let (mut keyed, mut other, mut breaks) = (0usize, 0usize, 0usize);
    for line in text.lines().take(60) {
        if line.trim().is_empty() {
            breaks += 1;
        } else if key_of(line).is_some() {
            keyed += 1;
        } else {
            other += 1;
        }
    }
    breaks >= 2 && keyed >= MIN_RECORDS * MIN_KEYS && keyed >= 2 * other
}

/// The key of a `Key: value` line, if `line` is one.
fn key_of(line: &str) -> Option<&str> {
    let (key, _) = line.split_once(": ")?;
    valid_key(key).then_some(key)
}

fn valid_key(key: &str) -> bool {
    let first_ok = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    first_ok
        && key.len() <= MAX_KEY
        && !key.ends_with(' ')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " -_./()".contains(c))
}

/// Encodes `body`, or `None` when the template does not apply or cannot
/// restore it exactly.
pub fn encode(body: &str) -> Option<String> {
    // Line starts, as byte offsets.
    let starts: Vec<usize> = std::iter::once(0)
        .chain(body.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&i| i < body.len())
        .collect();
    let line_at = |i: usize| {
        let rest = &body[i..];
        &rest[..rest.find('\n').unwrap_or(rest.len())]
    };
    // The key that opens every record: the first key line (of the first
    // few) that at least MIN_RECORDS lines start with.
    let (_, record_starts) = starts
        .iter()
        .take(FIRST_KEY_SCAN)
        .filter_map(|&i| key_of(line_at(i)))
        .find_map(|key| {
            let opener = format!("{key}: ");
            let at: Vec<usize> = starts
                .iter()
                .copied()
                .filter(|&i| body[i..].starts_with(&opener))
                .collect();
            (at.len() >= MIN_RECORDS).then_some((key, at))
        })?;
    let preamble = &body[..record_starts[0]];
    let chunks: Vec<&str> = record_starts
        .iter()
        .enumerate()
        .map(|(n, &from)| &body[from..record_starts.get(n + 1).copied().unwrap_or(body.len())])
        .collect();
    // The last record's last value runs to the end of the text: a text
    // that goes on well past its records (a document with a few header
    // blocks on top) is not a table of records.
    let longest_inner = chunks[..chunks.len() - 1].iter().map(|c| c.len()).max()?;
    if chunks[chunks.len() - 1].len() > 2 * longest_inner + TRAILING_SLACK {
        return None;
    }
    // The keys every record opens with, each on its own line.
    let mut keys: Vec<&str> = chunks[0].split('\n').map_while(key_of).collect();
    for chunk in &chunks[1..] {
        let same = chunk
            .split('\n')
            .map_while(key_of)
            .zip(&keys)
            .take_while(|(a, b)| a == *b)
            .count();
        keys.truncate(same);
    }
    if keys.len() < MIN_KEYS {
        return None;
    }
    // Line breaks between records, and after the last.
    let trailing = |s: &str| s.len() - s.trim_end_matches('\n').len();
    let (inner, last) = chunks.split_at(chunks.len() - 1);
    let apart = inner.iter().map(|c| trailing(c)).min()?;
    let tail = trailing(last[0]);
    let mut rows: Vec<Vec<&str>> = Vec::with_capacity(chunks.len());
    for (n, chunk) in chunks.iter().enumerate() {
        let cut = if n + 1 < chunks.len() { apart } else { tail };
        let record = &chunk[..chunk.len() - cut];
        let mut values = Vec::with_capacity(keys.len());
        let mut rest = record;
        for (k, key) in keys.iter().enumerate() {
            let after = rest.strip_prefix(*key)?.strip_prefix(": ")?;
            if k + 1 == keys.len() {
                values.push(after);
            } else {
                let end = after.find('\n')?;
                values.push(&after[..end]);
                rest = &after[end + 1..];
            }
        }
        rows.push(values);
    }
    // A value every record shares goes into the header once.
    let shared: Vec<Option<&str>> = (0..keys.len())
        .map(|k| {
            let first = rows[0][k];
            (!first.is_empty() && rows.iter().all(|r| r[k] == first)).then_some(first)
        })
        .collect();
    let fence = fence_for(body);
    let mut out = String::with_capacity(body.len());
    out.push_str(HINT);
    out.push('\n');
    out.push_str(preamble);
    out.push_str(&fence);
    out.push_str(OPENER);
    if apart != 1 {
        out.push_str(APART);
        out.push_str(&apart.to_string());
    }
    out.push('\n');
    let header: Vec<String> = keys
        .iter()
        .zip(&shared)
        .map(|(key, value)| match value {
            Some(value) => format!("{key}={value}"),
            None => key.to_string(),
        })
        .collect();
    csv::write_record(&header, &mut out);
    out.push('\n');
    for row in &rows {
        let fields: Vec<&str> = row
            .iter()
            .zip(&shared)
            .map(|(v, s)| if s.is_some() { "" } else { v })
            .collect();
        csv::write_record(&fields, &mut out);
        out.push('\n');
    }
    out.push_str(&fence);
    out.push_str(&"\n".repeat(tail));
    let sealed = check::seal(&out)?;
    (decode(&sealed).ok()? == body).then_some(sealed)
}

fn malformed(line: usize, reason: &'static str) -> TemplateDecodeError {
    TemplateDecodeError::Malformed {
        template: Template::Records,
        line,
        reason,
    }
}

/// The `apart` an opener line names, or `None` if `line` is no opener.
fn opener_apart(line: &str) -> Option<(usize, usize)> {
    let ticks = leading_backticks(line);
    if ticks < 3 {
        return None;
    }
    let rest = line[ticks..].strip_prefix(OPENER)?;
    if rest.is_empty() {
        return Some((ticks, 1));
    }
    let digits = rest.strip_prefix(APART)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 6 {
        return None;
    }
    Some((ticks, digits.parse().ok()?))
}

/// Decodes a text made by [`encode`] back into the original. Never panics.
pub fn decode(text: &str) -> Result<String, TemplateDecodeError> {
    let body = super::checked_body(text, Template::Records)?;
    // The opener is the one with the longest fence: the encoder's fence
    // outgrows every run of backticks in the text, the preamble's too.
    let all: Vec<&str> = body.split('\n').collect();
    let (open_at, (ticks, apart)) = all
        .iter()
        .enumerate()
        .filter_map(|(i, line)| opener_apart(line).map(|o| (i, o)))
        .fold(
            None,
            |best: Option<(usize, (usize, usize))>, (i, o)| match best {
                Some((_, (t, _))) if t >= o.0 => best,
                _ => Some((i, o)),
            },
        )
        .ok_or_else(|| malformed(2, "no records block"))?;
    let mut out = String::with_capacity(body.len() * 2);
    for line in &all[..open_at] {
        out.push_str(line);
        out.push('\n');
    }
    // Line numbers in errors count the hint line.
    let mut lines = all
        .into_iter()
        .enumerate()
        .skip(open_at + 1)
        .map(|(i, l)| (i + 2, l));
    let fence = "`".repeat(ticks);
    let (at, header) = lines.next().ok_or_else(|| malformed(2, "no header"))?;
    let header = csv::read_record(header).ok_or_else(|| malformed(at, "bad header"))?;
    let mut keys = Vec::with_capacity(header.len());
    for cell in header {
        let (key, shared) = match cell.split_once('=') {
            Some((key, value)) => (key.to_string(), Some(value.to_string())),
            None => (cell, None),
        };
        if !valid_key(&key) {
            return Err(malformed(at, "bad key"));
        }
        keys.push((key, shared));
    }
    if keys.len() < MIN_KEYS {
        return Err(malformed(at, "too few keys"));
    }
    let mut records = 0usize;
    let tail = loop {
        let (at, line) = lines
            .next()
            .ok_or_else(|| malformed(at, "unclosed block"))?;
        if line == fence {
            break lines.try_fold(0usize, |n, (at, l)| {
                if l.is_empty() {
                    Ok(n + 1)
                } else {
                    Err(malformed(at, "text after the block"))
                }
            })?;
        }
        let fields = csv::read_record(line).ok_or_else(|| malformed(at, "bad row"))?;
        if fields.len() != keys.len() {
            return Err(malformed(at, "row and header differ in length"));
        }
        if records > 0 {
            out.push_str(&"\n".repeat(apart));
        }
        for (k, ((key, shared), field)) in keys.iter().zip(fields).enumerate() {
            let value = match shared {
                Some(value) if field.is_empty() => value.as_str(),
                Some(_) => return Err(malformed(at, "a shared column holds a value")),
                None => field.as_str(),
            };
            if k + 1 < keys.len() && value.contains('\n') {
                return Err(malformed(at, "a line break in an inner value"));
            }
            if k > 0 {
                out.push('\n');
            }
            out.push_str(key);
            out.push_str(": ");
            out.push_str(value);
        }
        records += 1;
    };
    if records == 0 {
        return Err(malformed(2, "no records"));
    }
    out.push_str(&"\n".repeat(tail));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tokenizer;
    use proptest::prelude::*;

    /// What mcp-server-git's `git_log` writes (its format, made-up commits).
    fn git_log(messages: &[&str]) -> String {
        let entries: Vec<String> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                format!(
                    "Commit: {:040x}\nAuthor: Ann Lee\nDate: 2026-11-{:02} 10:00:00+00:00\nMessage: {m}\n",
                    i * 7919 + 1,
                    i % 28 + 1
                )
            })
            .collect();
        format!("Commit history:\n{}", entries.join("\n"))
    }

    #[test]
    fn a_git_log_becomes_a_table_with_its_keys_once() {
        let log = git_log(&[
            "Fix the reader\n",
            "Speculation: cancel, then join\n\nA longer body, with \"quotes\".\n",
            "Docs\n\nSigned-off-by: Ann Lee <ann@example.com>\n",
            "Bump\n",
        ]);
        let encoded = encode(&log).expect("a git log");
        let lines: Vec<&str> = encoded.lines().collect();
        assert_eq!(check::strip(lines[0]).unwrap(), HINT);
        assert_eq!(lines[1], "Commit history:");
        assert_eq!(lines[2], "```csv records apart=3");
        assert_eq!(lines[3], "Commit,Author=Ann Lee,Date,Message");
        assert!(lines[4].ends_with(",,2026-11-01 10:00:00+00:00,Fix the reader"));
        assert!(
            lines[5].ends_with(
                r#","Speculation: cancel, then join\n\nA longer body, with \"quotes\".""#
            ),
            "{}",
            lines[5]
        );
        assert!(encoded.ends_with("```\n\n"), "{encoded:?}");
        assert_eq!(decode(&encoded), Ok(log.clone()));
        let (before, after) = (
            Tokenizer::O200k.count(&log),
            Tokenizer::O200k.count(&encoded),
        );
        assert!(after < before, "{after} of {before}");
    }

    #[test]
    fn records_without_a_preamble_or_a_shared_value() {
        let text = "Name: a\nSize: 1\nName: b\nSize: 22\nName: c\nSize: 3";
        let encoded = encode(text).unwrap();
        assert!(
            encoded.contains("\n```csv records\nName,Size\na,1\nb,22\nc,3\n```"),
            "{encoded}"
        );
        assert_eq!(decode(&encoded), Ok(text.to_string()));
    }

    #[test]
    fn declines_what_is_not_records() {
        assert_eq!(
            encode("Name: a\nSize: 1\nName: b\nSize: 2"),
            None,
            "two records"
        );
        assert_eq!(encode("Name: a\nName: b\nName: c\n"), None, "one key");
        assert_eq!(
            encode("Name: a\nSize: 1\nName: b\nKind: x\nName: c\nSize: 3"),
            None,
            "records differ in their second key"
        );
        assert_eq!(encode("plain\ntext\n"), None);
        let long_tail = format!(
            "Name: a\nSize: 1\nName: b\nSize: 2\nName: c\nSize: 3\n{}",
            "text\n".repeat(100)
        );
        assert_eq!(
            encode(&long_tail),
            None,
            "a document that goes on past its records"
        );
    }

    #[test]
    fn a_preamble_line_that_looks_like_an_opener_stays_text() {
        let text = "```csv records\nName: a\nSize: 1\nName: b\nSize: 2\nName: c\nSize: 3\n";
        let encoded = encode(text).unwrap();
        assert_eq!(decode(&encoded), Ok(text.to_string()));
    }

    #[test]
    fn altered_texts_fail() {
        let encoded = encode(&git_log(&["a\n", "b\n", "c\n"])).unwrap();
        assert!(matches!(
            decode(&encoded[..encoded.len() - 3]),
            Err(TemplateDecodeError::Check { .. })
        ));
        let unsealed = format!("{HINT}\n```csv records\nA,B\n1,2\n```");
        assert!(matches!(
            decode(&unsealed),
            Err(TemplateDecodeError::Check { .. })
        ));
        for bad in [
            "```csv records\nA\n1\n```",
            "```csv records\nA,B\n1\n```",
            "```csv records\nA=x,B\n1,2\n```",
            "```csv records\nA,B\n1,2\n",
            "```csv records\nA,B\n1,2\n```\ntext",
            "```csv records\nA,B\n\"x\\ny\",2\n```",
            "```csv records\n,B\n1,2\n```",
        ] {
            let sealed = check::seal(&format!("{HINT}\n{bad}")).unwrap();
            assert!(
                matches!(decode(&sealed), Err(TemplateDecodeError::Malformed { .. })),
                "{bad:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn round_trips_or_declines(
            preamble in "([A-Za-z ]{0,8}:?\n){0,2}",
            keys in prop::collection::vec("[A-Z][a-z]{0,5}", 2..4),
            values in prop::collection::vec(prop::collection::vec("[a-z ,\"`=:\n]{0,8}", 4), 3..6),
            apart in 1usize..4,
            tail in 0usize..3,
        ) {
            let records: Vec<String> = values
                .iter()
                .map(|vs| keys.iter().zip(vs).map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("\n"))
                .collect();
            let text = format!("{preamble}{}{}", records.join(&"\n".repeat(apart)), "\n".repeat(tail));
            if let Some(encoded) = encode(&text) {
                prop_assert_eq!(decode(&encoded), Ok(text));
            }
        }

        #[test]
        fn decode_never_panics(body in "[A-Za-z,=\"`\n ]{0,60}") {
            if let Some(sealed) = check::seal(&format!("{HINT}\n```csv records\n{body}")) {
                let _ = decode(&sealed);
            }
        }
    }
}
