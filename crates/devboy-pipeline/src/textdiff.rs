//! Text near-duplicates: a re-read that changed in a few lines, said as a
//! unified diff against the version the model holds.
//!
//! An agent reads a file, edits one line, and reads it again: dedup cannot
//! reference the second read (its bytes differ), and sending it in full
//! repeats hundreds of unchanged lines. [`delta`] compares the two bodies'
//! text, the whole body when it is text, or the one string leaf that
//! changed when both are JSON of the same structure (`server-filesystem`
//! answers `{"content": "…"}`), and writes the change as unified diff
//! hunks, every model's native format for "what changed in this file":
//!
//! ```text
//! --- /content
//! @@ -41,3 +41,3 @@
//!  fn total(items: &[u32]) -> u32 {
//! -    items.iter().sum()
//! +    items.iter().copied().sum()
//!  }
//! ```
//!
//! The `--- POINTER` line names the leaf (an RFC 6901 pointer) and is left
//! out for a text body. Hunk headers count lines as GNU diff does (a hunk
//! that only inserts names the line it follows); a last line without a
//! line break is followed by `\ No newline at end of file`. The delta is
//! exact: [`apply`] rebuilds the new text from the old one and the hunks,
//! and [`delta`] returns nothing unless that gives back the new body
//! exactly (for JSON, the same value).

use serde_json::Value;
use similar::{capture_diff_slices, group_diff_ops, Algorithm, DiffOp};

use crate::near::scalar_changes;

/// Lines of context around each change.
const CONTEXT: usize = 1;

/// The most lines (old and new together, between the common first and
/// last lines) the diff algorithm is run on: Myers' time grows with their
/// number times the number of changes, and a re-read worth a diff changed
/// little. Beyond it, or when more lines differ than `MAX_CHANGED_SHARE`
/// of them even by count, there is no delta.
const MAX_DIFF_LINES: usize = 20_000;

/// A lower bound of the changed lines (lines of one side the other lacks,
/// counted) above this share of all lines means no delta: such a diff would
/// cost more than the body anyway.
const MAX_CHANGED_SHARE: f64 = 0.5;

const NO_NEWLINE: &str = "\\ No newline at end of file";

/// A change said as diff hunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextDelta {
    /// What the model is shown after the near-reference line.
    pub text: String,
    /// Lines removed plus lines added.
    pub changed: usize,
}

/// The change from `old` to `new` as hunks, when both are text, or both
/// are JSON of the same structure differing in one string leaf; `None`
/// when they are neither, are identical, or the hunks would not rebuild
/// `new` exactly.
pub fn delta(old: &[u8], new: &[u8]) -> Option<TextDelta> {
    if old == new {
        return None;
    }
    let old_json = serde_json::from_slice::<Value>(old).ok();
    let new_json = serde_json::from_slice::<Value>(new).ok();
    match (old_json, new_json) {
        (Some(old), Some(new)) => leaf_delta(&old, &new),
        (None, None) => {
            let (old, new) = (
                std::str::from_utf8(old).ok()?,
                std::str::from_utf8(new).ok()?,
            );
            let (hunks, changed) = hunks_if_few(old, new)?;
            (apply(old, &hunks).as_deref() == Some(new)).then_some(TextDelta {
                text: hunks,
                changed,
            })
        }
        _ => None,
    }
}

/// The delta of the one string leaf where `new` differs from `old`.
fn leaf_delta(old: &Value, new: &Value) -> Option<TextDelta> {
    let changes = scalar_changes(old, new, 1)?;
    let [change] = changes.as_slice() else {
        return None;
    };
    let before = old.pointer(&change.pointer)?.as_str()?;
    let after = change.value.as_str()?;
    let (hunks, changed) = hunks_if_few(before, after)?;
    // Exact or nothing: the leaf rebuilt from the hunks, in the old value,
    // must give the new value.
    let mut rebuilt = old.clone();
    *rebuilt.pointer_mut(&change.pointer)? = Value::String(apply(before, &hunks)?);
    (rebuilt == *new).then(|| TextDelta {
        text: format!("--- {}\n{hunks}", change.pointer),
        changed,
    })
}

/// `text`'s lines, each with its line break (the last may have none).
fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// [`hunks`], unless the two differ in too many lines for a delta to pay,
/// or their differing middle is too long to diff cheaply.
fn hunks_if_few(old: &str, new: &str) -> Option<(String, usize)> {
    let (a, b) = (lines(old), lines(new));
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (middle_a, middle_b) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    if middle_a.len() + middle_b.len() > MAX_DIFF_LINES {
        return None;
    }
    // Lines of one side missing from the other, counted: every diff
    // removes and adds at least these.
    let mut counts: std::collections::HashMap<&str, i64> = std::collections::HashMap::new();
    for line in middle_a {
        *counts.entry(line).or_default() += 1;
    }
    for line in middle_b {
        *counts.entry(line).or_default() -= 1;
    }
    let unmatched: i64 = counts.values().map(|n| n.abs()).sum();
    if unmatched as f64 > MAX_CHANGED_SHARE * (a.len() + b.len()) as f64 {
        return None;
    }
    Some(hunks(old, new))
}

/// The hunks that turn `old` into `new`, and how many lines they remove
/// and add.
fn hunks(old: &str, new: &str) -> (String, usize) {
    let (a, b) = (lines(old), lines(new));
    let ops = capture_diff_slices(Algorithm::Myers, &a, &b);
    let mut out = String::new();
    let mut changed = 0;
    for group in group_diff_ops(ops, CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_range = first.old_range().start..last.old_range().end;
        let new_range = first.new_range().start..last.new_range().end;
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            span(old_range.start, old_range.len()),
            span(new_range.start, new_range.len())
        ));
        for op in &group {
            let (tag, old_lines, new_lines) = (op, op.old_range(), op.new_range());
            match tag {
                DiffOp::Equal { .. } => {
                    for line in &a[old_lines] {
                        push_line(&mut out, ' ', line);
                    }
                }
                _ => {
                    for line in &a[old_lines.clone()] {
                        push_line(&mut out, '-', line);
                    }
                    for line in &b[new_lines.clone()] {
                        push_line(&mut out, '+', line);
                    }
                    changed += old_lines.len() + new_lines.len();
                }
            }
        }
    }
    (out, changed)
}

/// A hunk's line span as GNU diff writes it: the first line (1-based) and
/// the count, the count left out when it is 1, and for an empty span the
/// line it follows.
fn span(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        n => format!("{},{n}", start + 1),
    }
}

fn push_line(out: &mut String, tag: char, line: &str) {
    out.push(tag);
    match line.strip_suffix('\n') {
        Some(body) => {
            out.push_str(body);
            out.push('\n');
        }
        None => {
            out.push_str(line);
            out.push('\n');
            out.push_str(NO_NEWLINE);
            out.push('\n');
        }
    }
}

/// `old` with the hunks of `diff` applied, or `None` when `diff` is not
/// hunks as [`delta`] writes them or does not fit `old` (a context or
/// removed line that is not there, hunks out of order).
pub fn apply(old: &str, diff: &str) -> Option<String> {
    let old_lines = lines(old);
    let mut out = String::with_capacity(old.len() + diff.len());
    let mut at = 0; // the next old line not yet copied
                    // Split on `\n` only: a line's `\r` is part of it.
    let mut rows = diff.split_terminator('\n').peekable();
    while let Some(header) = rows.next() {
        let (old_start, old_len) = parse_header(header)?;
        // The first old line the hunk covers (0-based).
        let start = if old_len == 0 {
            old_start
        } else {
            old_start.checked_sub(1)?
        };
        if start < at || start > old_lines.len() {
            return None;
        }
        for line in &old_lines[at..start] {
            out.push_str(line);
        }
        at = start;
        while let Some(row) = rows.peek() {
            if row.starts_with("@@ ") {
                break;
            }
            let row = rows.next()?;
            let (tag, body) = row.split_at_checked(1)?;
            let ends = rows.peek() != Some(&NO_NEWLINE);
            if !ends {
                rows.next();
            }
            let line = if ends {
                format!("{body}\n")
            } else {
                body.to_owned()
            };
            match tag {
                " " | "-" => {
                    if old_lines.get(at) != Some(&line.as_str()) {
                        return None;
                    }
                    at += 1;
                    if tag == " " {
                        out.push_str(&line);
                    }
                }
                "+" => out.push_str(&line),
                _ => return None,
            }
        }
    }
    for line in &old_lines[at..] {
        out.push_str(line);
    }
    Some(out)
}

/// The old span of a `@@ -A[,B] +C[,D] @@` header: `(A, B)`.
fn parse_header(line: &str) -> Option<(usize, usize)> {
    let rest = line.strip_prefix("@@ -")?.strip_suffix(" @@")?;
    let (old, new) = rest.split_once(" +")?;
    let number = |s: &str| -> Option<(usize, usize)> {
        match s.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    number(new)?;
    number(old)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn file(n: usize) -> String {
        (0..n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn a_one_line_edit_is_one_small_hunk() {
        let old = file(300);
        let new = old.replace("line 150\n", "line 150 edited\n");
        let d = delta(old.as_bytes(), new.as_bytes()).unwrap();
        assert_eq!(
            d.text,
            "@@ -150,3 +150,3 @@\n line 149\n-line 150\n+line 150 edited\n line 151\n"
        );
        assert_eq!(d.changed, 2);
        assert_eq!(apply(&old, &d.text).unwrap(), new);
    }

    #[test]
    fn a_json_leaf_is_diffed_as_its_text() {
        let old = json!({"content": file(50), "path": "a.rs"});
        let mut new = old.clone();
        new["content"] = json!(file(50).replace("line 0\n", "first\n") + "tail");
        let d = delta(old.to_string().as_bytes(), new.to_string().as_bytes()).unwrap();
        assert!(
            d.text
                .starts_with("--- /content\n@@ -1,2 +1,2 @@\n-line 0\n+first\n line 1\n"),
            "{}",
            d.text
        );
        assert!(
            d.text.ends_with("+tail\n\\ No newline at end of file\n"),
            "{}",
            d.text
        );
    }

    #[test]
    fn other_changes_are_not_text_deltas() {
        // Two leaves changed, a number changed, JSON against text, identical.
        let a = json!({"a": "x\ny", "b": "p\nq"});
        let two = json!({"a": "x\nz", "b": "p\nr"});
        assert_eq!(
            delta(a.to_string().as_bytes(), two.to_string().as_bytes()),
            None
        );
        let n = json!({"a": 1});
        let m = json!({"a": 2});
        assert_eq!(
            delta(n.to_string().as_bytes(), m.to_string().as_bytes()),
            None
        );
        assert_eq!(delta(b"{\"a\":1}", b"text\n"), None);
        assert_eq!(delta(b"same\n", b"same\n"), None);
    }

    #[test]
    fn wholesale_changes_are_not_diffed() {
        let old = file(400);
        let rewritten: String = (0..400).map(|i| format!("row {i}\n")).collect();
        assert_eq!(delta(old.as_bytes(), rewritten.as_bytes()), None);
        // A huge differing middle is not even diffed.
        let big_old = file(30_000);
        let big_new: String = (0..30_000).rev().map(|i| format!("line {i}\n")).collect();
        assert_eq!(hunks_if_few(&big_old, &big_new), None);
    }

    #[test]
    fn bad_hunks_do_not_apply() {
        let old = "a\nb\nc\n";
        assert_eq!(
            apply(old, "@@ -2 +2 @@\n-x\n+y\n"),
            None,
            "wrong removed line"
        );
        assert_eq!(apply(old, "@@ -9 +9 @@\n-a\n"), None, "past the end");
        assert_eq!(apply(old, "@@ -2 +2 @@\n*b\n"), None, "unknown tag");
        assert_eq!(apply(old, "not a header\n"), None);
        assert_eq!(
            apply(old, "@@ -3 +3 @@\n-c\n+d\n@@ -1 +1 @@\n-a\n+z\n"),
            None,
            "out of order"
        );
        assert_eq!(
            apply(old, "@@ -1,0 +2 @@\n+new\n").unwrap(),
            "a\nnew\nb\nc\n"
        );
    }

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(prop_oneof!["[a-c]{0,3}", Just(String::new())], 0..25)
            .prop_map(|lines| lines.join("\n"))
    }

    proptest! {
        #[test]
        fn hunks_rebuild_the_new_text(old in text(), new in text()) {
            let (diff, _) = hunks(&old, &new);
            prop_assert_eq!(apply(&old, &diff), Some(new));
        }

        #[test]
        fn apply_never_panics(old in text(), diff in "[-+ @,0-9a-c\\n\\\\]{0,60}") {
            let _ = apply(&old, &diff);
        }
    }
}
