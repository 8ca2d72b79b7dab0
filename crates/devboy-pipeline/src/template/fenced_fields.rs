//! JSON with multi-line strings as `key: value` lines and fenced blocks.
//!
//! Diffs, patches, file contents, stack traces and long Markdown arrive in
//! JSON as one string full of `\n` and `\"` escapes, each of which costs
//! tokens and hides the text's shape from the model. This template prints
//! the body as one line per field, with every multi-line string as raw
//! text in a fenced block (```` ```diff ```` for unified diffs), and keeps
//! every wrapper field around it (sha, filename, status, …). A GitHub
//! commit with its files reads:
//!
//! ````text
//! > [encoded: json as path: value, multiline strings fenced #275390217]
//! sha: 6dcb09b5b57875f334f61aebed695e2e4193db5e
//! author: {"login":"octocat","id":1}
//! stats: {"additions":2,"deletions":1,"total":3}
//! # files[0]
//! filename: src/lib.rs
//! additions: 2
//! binary: false
//! patch:
//! ```diff
//! @@ -1,2 +1,2 @@
//! -old
//! +new
//! ```
//! ````
//!
//! Only the containers that hold a multi-line string somewhere are opened
//! up; every other value stays on one line as compact JSON (`author:` above),
//! so it costs what it did. Each opened container gets a heading with its
//! path (`# files[0]`), and the lines under a heading name fields relative
//! to it, so a path is paid once per container, not once per field.
//!
//! # Grammar (the decoder's specification)
//!
//! ```text
//! encoded = HINT LF line *( LF line ) [ LF ]
//! HINT    = "> [encoded: json as path: value, multiline strings fenced" CHECK "]"
//! CHECK   = " #" 9DIGIT                     ; see crate::encode::check
//! line    = heading / entry
//! heading = "#" [ SP path ]                 ; the base for the entries below
//! entry   = path ":" SP value               ; a one-line value
//!         / path ":" LF block               ; a string, as raw text
//! path    = ( key / index ) *( "." key / index )
//! index   = "[" ( "0" / %x31-39 *DIGIT ) "]"
//! key     = bare / JSON-string              ; JSON-string as in RFC 8259
//! bare    = 1*( any char except "." "[" "]" ":" DQUOTE "`", white space
//!               and control characters ), not starting with "#"
//! value   = any text up to the line break, read as below
//! block   = FENCE [ info ] LF text LF FENCE ; FENCE = 3*"`", the same run both times
//! ```
//!
//! The base starts at the root; `#` alone returns to it, `# path` moves it
//! to `path` (counted from the root). An entry's field is its path appended
//! to the base. The encoder writes one-step entry paths (`filename`, `[2]`)
//! and a heading whenever the container it writes into changes.
//!
//! A `value` that parses as JSON (serde_json, whole line) is that JSON
//! value; any other `value` is a string, taken verbatim. The encoder prints
//! a string raw only when that reading gives it back: the string is not
//! empty, has no control characters, does not start or end with white
//! space, and does not itself parse as JSON (so `true`, `42`, `null`,
//! `"x"` and `[1]` are printed quoted, `[WIP] fix` is printed raw).
//! Numbers, bools, null, and containers without multi-line strings, are
//! printed as compact JSON. A key is printed bare when it is a `bare`,
//! otherwise as a JSON string (`"a.b"`, `"two words"`, `""`, `"#tag"`).
//!
//! A `block`'s `text` is the string exactly: everything between the line
//! break that ends the opening fence line and the line break before the
//! closing fence. A string that ends with a line break therefore shows a
//! blank line before the closing fence. `FENCE` is one backtick longer than
//! the longest run of backticks in the string (at least three), so no line
//! of the string can close it. `info` is a reading aid for the model
//! (`diff` for unified diffs) and is ignored by the decoder.
//!
//! The decoder builds the value entry by entry, in order: the first
//! segment of the first field's path says whether the body is an object or
//! an array; an object key is added where it first appears, so key order is
//! kept; an index must be the next one in its array, or the last one when
//! more of that element follows. A field that is set twice, skips an index,
//! or goes through a scalar is malformed.
//!
//! # What is encoded, what is declined
//!
//! An object or array is encoded iff some string inside it contains a line
//! feed; the encoder fences exactly those strings. Scalars, containers
//! with no multi-line string, and anything that would not decode back to
//! an equal value with its keys in the same order (a float whose shortest
//! form re-reads differently) are declined.

use serde_json::{Map, Value};

use super::{check, checked_body, fence_for, leading_backticks, Template, TemplateDecodeError};
use crate::exact::same;
use crate::shape::is_hunk_header;

/// The hint line of this template.
pub const HINT: &str = "> [encoded: json as path: value, multiline strings fenced]";

/// Encodes a JSON object or array holding at least one multi-line string,
/// or `None` when the template does not apply or cannot reproduce `value`.
pub fn encode(value: &Value) -> Option<String> {
    if !matches!(value, Value::Object(_) | Value::Array(_)) || !has_multiline(value) {
        return None;
    }
    let mut out = String::from(HINT);
    let mut writer = Writer {
        out: &mut out,
        path: String::new(),
        base: String::new(),
    };
    writer.container(value);
    let out = check::seal(&out)?;
    let back = decode(&out).ok()?;
    same(&back, value).then_some(out)
}

/// Decodes a text produced by [`encode`] back into the original value.
pub fn decode(text: &str) -> Result<Value, TemplateDecodeError> {
    let body = checked_body(text, Template::FencedFields)?;
    let mut root: Option<Value> = None;
    let mut base: Vec<Segment> = Vec::new();
    let mut rest = body;
    let mut line_no = 2usize;
    while !rest.is_empty() {
        let (line, after) = match rest.split_once('\n') {
            Some((line, after)) => (line, Some(after)),
            None => (rest, None),
        };
        let malformed = move |reason| TemplateDecodeError::Malformed {
            template: Template::FencedFields,
            line: line_no,
            reason,
        };
        if let Some(heading) = line.strip_prefix('#') {
            base = match heading.strip_prefix(' ') {
                Some(path) => parse_path(path, true).map_err(malformed)?.0,
                None if heading.is_empty() => Vec::new(),
                None => return Err(malformed("expected `#` or `# path`")),
            };
            rest = after.unwrap_or_default();
            line_no += 1;
            continue;
        }
        let (relative, tail) = parse_path(line, false).map_err(malformed)?;
        let (value, next) = if tail.is_empty() {
            let after = after.ok_or(malformed("a fenced block must follow"))?;
            let (text, next, lines) = read_block(after).map_err(malformed)?;
            line_no += lines;
            (Value::String(text.to_string()), next)
        } else {
            let raw = tail
                .strip_prefix(' ')
                .filter(|v| !v.is_empty())
                .ok_or(malformed("expected `: ` and a value after the path"))?;
            (read_value(raw), after.unwrap_or_default())
        };
        insert(&mut root, &base, &relative, value).map_err(malformed)?;
        rest = next;
        line_no += 1;
    }
    root.ok_or(TemplateDecodeError::Malformed {
        template: Template::FencedFields,
        line: line_no,
        reason: "no fields",
    })
}

/// Whether any string inside `value` contains a line feed.
fn has_multiline(value: &Value) -> bool {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s.contains('\n') => return true,
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    false
}

/// One step from a container to a child.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

impl Step<'_> {
    /// Appends the step to `path`: as the path's first step when `path` is
    /// empty, else after a `.` for keys.
    fn write(self, path: &mut String) {
        match self {
            Step::Key(key) => {
                if !path.is_empty() {
                    path.push('.');
                }
                write_key(key, path);
            }
            Step::Index(i) => {
                path.push('[');
                path.push_str(&i.to_string());
                path.push(']');
            }
        }
    }
}

/// Writes entries and headings: `path` is the container being written,
/// `base` the one the last heading named (the root at first).
struct Writer<'a> {
    out: &'a mut String,
    path: String,
    base: String,
}

impl Writer<'_> {
    /// Writes every child of `container`. Recursion is bounded by the
    /// depth of the value, which serde_json's parser limits to 128.
    fn container(&mut self, container: &Value) {
        match container {
            Value::Object(map) => {
                for (key, child) in map {
                    self.child(Step::Key(key), child);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    self.child(Step::Index(i), child);
                }
            }
            _ => {}
        }
    }

    fn child(&mut self, step: Step<'_>, child: &Value) {
        if matches!(child, Value::Object(_) | Value::Array(_)) && has_multiline(child) {
            let len = self.path.len();
            step.write(&mut self.path);
            self.container(child);
            self.path.truncate(len);
            return;
        }
        if self.base != self.path {
            self.out.push_str("\n#");
            if !self.path.is_empty() {
                self.out.push(' ');
                self.out.push_str(&self.path);
            }
            self.base.clone_from(&self.path);
        }
        self.out.push('\n');
        let mut relative = String::new();
        step.write(&mut relative);
        self.out.push_str(&relative);
        match child {
            Value::String(s) if s.contains('\n') => {
                let fence = fence_for(s);
                let info = if looks_like_diff(s) { "diff" } else { "" };
                self.out.push_str(":\n");
                self.out.push_str(&fence);
                self.out.push_str(info);
                self.out.push('\n');
                self.out.push_str(s);
                self.out.push('\n');
                self.out.push_str(&fence);
            }
            _ => {
                self.out.push_str(": ");
                write_value(child, self.out);
            }
        }
    }
}

fn looks_like_diff(s: &str) -> bool {
    let first = s.split('\n').next().unwrap_or_default();
    is_hunk_header(first) || first.starts_with("diff --git ") || first.starts_with("--- ")
}

fn is_bare_key(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with('#')
        && key.chars().all(|c| {
            !matches!(c, '.' | '[' | ']' | ':' | '"' | '`') && !c.is_whitespace() && !c.is_control()
        })
}

fn write_key(key: &str, out: &mut String) {
    if is_bare_key(key) {
        out.push_str(key);
    } else {
        out.push_str(&Value::from(key).to_string());
    }
}

/// The one-line form of a value (see the module docs).
fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::String(s) if is_raw_string(s) => out.push_str(s),
        other => out.push_str(&other.to_string()),
    }
}

fn is_raw_string(s: &str) -> bool {
    let edge_ok = |c: Option<char>| c.is_some_and(|c| !c.is_whitespace());
    edge_ok(s.chars().next())
        && edge_ok(s.chars().next_back())
        && !s.chars().any(char::is_control)
        && serde_json::from_str::<Value>(s).is_err()
}

/// The value of a one-line entry: JSON if it parses, else the raw string.
fn read_value(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// One step of a path.
#[derive(Debug, PartialEq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// Reads a path from the start of `text`. For an entry the path ends at
/// its `:` and the text after the `:` is returned; for a heading the path
/// is the whole text.
fn parse_path(text: &str, heading: bool) -> Result<(Vec<Segment>, &str), &'static str> {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        if heading && rest.is_empty() && !segments.is_empty() {
            return Ok((segments, rest));
        }
        if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']').ok_or("unclosed `[` in path")?;
            let digits = &after[..close];
            let canonical = digits == "0"
                || (!digits.starts_with('0')
                    && !digits.is_empty()
                    && digits.bytes().all(|b| b.is_ascii_digit()));
            if !canonical {
                return Err("bad array index in path");
            }
            let index = digits.parse().map_err(|_| "array index too large")?;
            segments.push(Segment::Index(index));
            rest = &after[close + 1..];
            continue;
        }
        let key_text = if segments.is_empty() {
            rest
        } else if let Some(after) = rest.strip_prefix('.') {
            after
        } else if let (false, Some(after)) = (heading, rest.strip_prefix(':')) {
            return Ok((segments, after));
        } else {
            return Err("expected `.`, `[` or `:` after a path segment");
        };
        let (key, after) = read_key(key_text)?;
        segments.push(Segment::Key(key));
        rest = after;
    }
}

/// Reads one key (bare or a JSON string) from the start of `text`.
fn read_key(text: &str) -> Result<(String, &str), &'static str> {
    if text.starts_with('"') {
        let bytes = text.as_bytes();
        let mut i = 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b'"' => {
                    let key = serde_json::from_str(&text[..=i]).map_err(|_| "bad quoted key")?;
                    return Ok((key, &text[i + 1..]));
                }
                _ => i += 1,
            }
        }
        Err("unclosed quoted key")
    } else {
        let end = text.find(['.', '[', ':']).unwrap_or(text.len());
        if end == 0 {
            return Err("empty key in path");
        }
        Ok((text[..end].to_string(), &text[end..]))
    }
}

/// Reads a fenced block at the start of `text`: the string, the text after
/// the closing fence line, and how many lines the block spans.
fn read_block(text: &str) -> Result<(&str, &str, usize), &'static str> {
    let fence_len = leading_backticks(text);
    if fence_len < 3 {
        return Err("expected a fence of three or more backticks");
    }
    let fence = &text[..fence_len];
    let opener_end = text.find('\n').ok_or("fenced block is not closed")?;
    let content_start = opener_end + 1;
    let mut from = content_start;
    loop {
        let at = text[from..]
            .find(fence)
            .map(|i| from + i)
            .ok_or("fenced block is not closed")?;
        let after = &text[at + fence_len..];
        let clean_end = after.is_empty() || after.starts_with('\n');
        let on_own_line = at > content_start && text.as_bytes()[at - 1] == b'\n';
        if clean_end && on_own_line {
            let content = &text[content_start..at - 1];
            let next = after.strip_prefix('\n').unwrap_or(after);
            let lines = text[..at].matches('\n').count() + 1;
            return Ok((content, next, lines));
        }
        from = at + 1;
    }
}

/// A fresh container of the kind `segment` steps into.
fn container_for(segment: &Segment) -> Value {
    match segment {
        Segment::Key(_) => Value::Object(Map::new()),
        Segment::Index(_) => Value::Array(Vec::new()),
    }
}

/// Puts `value` at `base` + `relative` under `root`, creating containers
/// on the way.
fn insert(
    root: &mut Option<Value>,
    base: &[Segment],
    relative: &[Segment],
    value: Value,
) -> Result<(), &'static str> {
    let path: Vec<&Segment> = base.iter().chain(relative).collect();
    let (first, _) = path.split_first().ok_or("empty path")?;
    let mut current = root.get_or_insert_with(|| container_for(first));
    let last = path.len() - 1;
    let mut value = Some(value);
    for (i, segment) in path.iter().enumerate() {
        let next = path.get(i + 1).copied();
        match (segment, current) {
            (Segment::Key(key), Value::Object(map)) => {
                if i == last {
                    if map.contains_key(key) {
                        return Err("field set twice");
                    }
                    map.insert(key.clone(), value.take().unwrap_or_default());
                    return Ok(());
                }
                let next = next.ok_or("empty path")?;
                current = map
                    .entry(key.clone())
                    .or_insert_with(|| container_for(next));
            }
            (Segment::Index(index), Value::Array(items)) => {
                if i == last {
                    if *index != items.len() {
                        return Err("array index out of order");
                    }
                    items.push(value.take().unwrap_or_default());
                    return Ok(());
                }
                if *index == items.len() {
                    let next = next.ok_or("empty path")?;
                    items.push(container_for(next));
                } else if *index + 1 != items.len() {
                    return Err("array index out of order");
                }
                current = items.last_mut().ok_or("array index out of order")?;
            }
            _ => return Err("path does not fit the value built so far"),
        }
    }
    Err("empty path")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(value: &Value) -> String {
        let encoded = encode(value).unwrap_or_else(|| panic!("declined {value}"));
        let back = decode(&encoded).expect("own output decodes");
        assert!(same(&back, value), "{encoded}\n→ {back}");
        encoded
    }

    /// The text after the hint line, which must be this template's, checked.
    fn body(encoded: &str) -> &str {
        let (hint, body) = encoded.split_once('\n').unwrap_or((encoded, ""));
        assert_eq!(check::unchecked_hint(hint).as_deref(), Some(HINT));
        body
    }

    /// Decodes `text` with its check added, as the encoder would have.
    fn decode_sealed(text: &str) -> Result<Value, TemplateDecodeError> {
        decode(&check::seal(text).unwrap_or_else(|| panic!("cannot seal {text}")))
    }

    #[test]
    fn github_file_entry() {
        let v = json!({
            "sha": "bbcd538c8e72b8c175046e27cc8f907076331401",
            "filename": "file1.txt",
            "status": "added",
            "additions": 103,
            "binary": false,
            "previous": null,
            "patch": "@@ -1,2 +1,2 @@\n-old \"q\"\n+new",
        });
        assert_eq!(
            body(&round_trip(&v)),
            "sha: bbcd538c8e72b8c175046e27cc8f907076331401\nfilename: file1.txt\n\
             status: added\nadditions: 103\nbinary: false\nprevious: null\n\
             patch:\n```diff\n@@ -1,2 +1,2 @@\n-old \"q\"\n+new\n```"
        );
    }

    #[test]
    fn array_of_objects_and_nested_paths() {
        let v = json!([
            {"filename": "a.rs", "patch": "@@ -1 +1 @@\n-a\n+b"},
            {"filename": "b.rs", "meta": {"x": 1}, "files": [{"body": "x\ny"}, {"n": 2}], "end": 3},
        ]);
        assert_eq!(
            body(&round_trip(&v)),
            "# [0]\nfilename: a.rs\npatch:\n```diff\n@@ -1 +1 @@\n-a\n+b\n```\n\
             # [1]\nfilename: b.rs\nmeta: {\"x\":1}\n\
             # [1].files[0]\nbody:\n```\nx\ny\n```\n# [1].files\n[1]: {\"n\":2}\n\
             # [1]\nend: 3"
        );
    }

    #[test]
    fn headings_return_to_the_root() {
        let v = json!({"a": 1, "b": {"c": "x\ny"}, "d": 2});
        assert_eq!(
            body(&round_trip(&v)),
            "a: 1\n# b\nc:\n```\nx\ny\n```\n#\nd: 2"
        );
    }

    #[test]
    fn decoder_accepts_longer_relative_paths() {
        let text = format!("{HINT}\n# a\nb.c: 1\nb.d[0]: 2\n#\na.e: 3");
        assert_eq!(
            decode_sealed(&text).unwrap(),
            json!({"a": {"b": {"c": 1, "d": [2]}, "e": 3}})
        );
    }

    #[test]
    fn ambiguous_strings_are_quoted() {
        let v = json!({
            "t": "true", "n": "42", "z": "null", "q": "\"x\"", "arr": "[1]",
            "e": "", "sp": " lead", "tr": "trail ", "tab": "a\tb",
            "raw": "[WIP] fix {it}", "quote": "\"hi\" there", "text": "a\nb",
        });
        assert_eq!(
            body(&round_trip(&v)),
            "t: \"true\"\nn: \"42\"\nz: \"null\"\nq: \"\\\"x\\\"\"\narr: \"[1]\"\n\
             e: \"\"\nsp: \" lead\"\ntr: \"trail \"\ntab: \"a\\tb\"\n\
             raw: [WIP] fix {it}\nquote: \"hi\" there\ntext:\n```\na\nb\n```"
        );
    }

    #[test]
    fn awkward_keys_are_quoted() {
        let v = json!({"a.b": 1, "two words": 2, "": 3, "[0]": 4, "x:y": 5, "#tag": 6, "a#": 7, "ok-key_1": "a\nb"});
        assert_eq!(
            body(&round_trip(&v)),
            "\"a.b\": 1\n\"two words\": 2\n\"\": 3\n\"[0]\": 4\n\"x:y\": 5\n\"#tag\": 6\na#: 7\n\
             ok-key_1:\n```\na\nb\n```"
        );
    }

    #[test]
    fn trailing_newlines_and_fence_collisions() {
        let v = json!({
            "one": "a\n",
            "two": "a\n\n",
            "only": "\n",
            "fenced": "text\n```rust\nfn x() {}\n```\n",
            "long": "````\n`",
        });
        let encoded = round_trip(&v);
        assert!(body(&encoded).starts_with("one:\n```\na\n\n```\ntwo:\n```\na\n\n\n```\n"));
        assert!(encoded.contains("fenced:\n````\ntext\n```rust\nfn x() {}\n```\n\n````"));
        assert!(encoded.contains("long:\n`````\n````\n`\n`````"));
    }

    #[test]
    fn key_order_is_kept() {
        let v: Value =
            serde_json::from_str(r#"{"z":1,"a":"x\ny","m":{"q":"1\n2","b":2}}"#).unwrap();
        let back = decode(&round_trip(&v)).unwrap();
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&v).unwrap()
        );
    }

    #[test]
    fn declines_what_it_should() {
        assert_eq!(encode(&json!({"a": 1, "b": "one line"})), None);
        assert_eq!(encode(&json!("a\nb")), None);
        assert_eq!(encode(&json!([])), None);
        assert_eq!(encode(&json!({})), None);
    }

    #[test]
    fn decoder_tolerates_a_final_line_break() {
        let encoded = round_trip(&json!({"a": "x\ny", "b": 1}));
        assert_eq!(
            decode(&format!("{encoded}\n")).unwrap(),
            json!({"a": "x\ny", "b": 1})
        );
    }

    #[test]
    fn decode_errors() {
        let bad = |b: &str| decode_sealed(&format!("{HINT}\n{b}"));
        let line = |r: Result<Value, TemplateDecodeError>| match r {
            Err(TemplateDecodeError::Malformed { line, .. }) => line,
            other => panic!("{other:?}"),
        };
        assert_eq!(line(bad("a: 1\na: 2")), 3);
        assert_eq!(line(bad("[1]: 1")), 2);
        assert_eq!(line(bad("[0]: 1\n[2]: 2")), 3);
        assert_eq!(line(bad("a: 1\n[0]: 2")), 3);
        assert_eq!(line(bad("a:\n```\nx")), 2);
        assert_eq!(line(bad("a:\nnot a fence")), 2);
        assert_eq!(line(bad("a")), 2);
        assert_eq!(line(bad("a:x")), 2);
        assert_eq!(line(bad("a: ")), 2);
        assert_eq!(line(bad("[01]: 1")), 2);
        assert_eq!(line(bad("\"a: 1")), 2);
        assert_eq!(line(bad("a.b: 1\na.b.c: 2")), 3);
        assert_eq!(line(bad("a:\n```\nx\ny\n```\nb")), 7);
        assert_eq!(line(bad("")), 2);
        assert_eq!(line(bad("a: 1\n#x")), 3);
        assert_eq!(line(bad("# a:b\nc: 1")), 2);
        assert_eq!(line(bad("# \nc: 1")), 2);
        assert_eq!(line(bad("#\n#")), 4);
        assert_eq!(line(bad("# a\nb: 1\n# a.b\nc: 2")), 5);
        assert_eq!(decode("a: 1"), Err(TemplateDecodeError::NotEncoded));
    }
}
