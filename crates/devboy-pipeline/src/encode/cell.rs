//! The value grammar shared by CSV cells and `key: value` lines, in both
//! directions, and the grammar of keys (column names).
//!
//! A value is written in a *slot*: a CSV cell ends at the next `,` or line
//! end, a line value at the line end. In either slot:
//!
//! | text                              | value                              |
//! |-----------------------------------|------------------------------------|
//! | `"…"` (a JSON string, RFC 8259)   | that string, even `"null"`, `"1"`  |
//! | `null`, `true`, `false`           | those literals                     |
//! | an RFC 8259 JSON number           | that number                        |
//! | text starting with `{` or `[`     | one JSON object or array           |
//! | (cell only) nothing at all        | the key is absent from this row    |
//! | any other text                    | that string                        |
//!
//! A cell's JSON ends where the JSON value ends; a line's JSON must fill the
//! line, or the line is read as text. Line text (unquoted) may also be a
//! [pattern](super::pattern) when it names a column in braces.
//!
//! The encoder writes a string bare only when that reads back as the same
//! string and reads as plain text to a person: never empty, no control
//! characters, no leading or trailing whitespace, not starting with `"`, `{`
//! or `[`, nothing a float parser would take for a number (`1e5`, `inf`,
//! `007`), not `null`/`true`/`false` in any case, in a cell no `,` or `"`,
//! on a line nothing that reads as a pattern. Every other string is quoted,
//! as a JSON string: the model knows that escaping and copies text out of
//! it correctly (`\"`, `\n`), where CSV's doubled `""` would be copied as
//! is. So a quoted string never spans lines.
//!
//! Keys: a *bare* key is one or more segments joined by `.`, a path into
//! nested objects (`user.login`); a segment is a non-empty run of characters
//! other than `, " : . { } [ ]` and control characters. A *quoted* key
//! (`"a.b"`, a JSON string) is one literal key, never split.

use std::fmt::Write as _;

use serde_json::{Number, Value};

use super::pattern::Names;
use super::scan::Scanner;
use super::FormatDecodeError;

/// Where a value is written.
#[derive(Clone, Copy, Debug)]
pub(super) enum Slot<'a> {
    /// A CSV cell: ends at `,` or the end of the line.
    Cell,
    /// The line of a key whose parent path is the `&str` (`""` at the top),
    /// in a scope where patterns may reference these names: ends at the
    /// end of the line, and a string that would read as a pattern there is
    /// quoted.
    Line(&'a Names, &'a str),
}

/// Writes `value` so that reading it back in `slot` gives the same value.
pub(super) fn write_value(out: &mut String, value: &Value, slot: Slot<'_>) {
    match value {
        Value::String(s) => write_string(out, s, slot),
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        // Display of a Value is its compact JSON, the same text json_compact
        // has; it cannot fail for a Value, and a failure would show up in the
        // encoder's own round-trip check.
        Value::Number(_) | Value::Array(_) | Value::Object(_) => {
            let _ = write!(out, "{value}");
        }
    }
}

/// Writes a string bare when that is unambiguous, else quoted.
pub(super) fn write_string(out: &mut String, s: &str, slot: Slot<'_>) {
    if bare_string_ok(s, slot) {
        out.push_str(s);
    } else {
        write_quoted(out, s);
    }
}

/// The string as a JSON string literal.
pub(super) fn write_quoted(out: &mut String, s: &str) {
    // Serializing a str cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

/// True when `s` may be written without quotes in `slot` (see the module
/// doc for the rule).
pub(super) fn bare_string_ok(s: &str, slot: Slot<'_>) -> bool {
    let (Some(first), Some(last)) = (s.chars().next(), s.chars().next_back()) else {
        return false;
    };
    if matches!(first, '"' | '{' | '[') || first.is_whitespace() || last.is_whitespace() {
        return false;
    }
    let cell = matches!(slot, Slot::Cell);
    if s.chars()
        .any(|c| c.is_control() || (cell && matches!(c, ',' | '"')))
    {
        return false;
    }
    if looks_like_literal(s) {
        return false;
    }
    match slot {
        Slot::Cell => true,
        Slot::Line(names, parent) => first != TILDE && first != CARET && !names.has_ref(parent, s),
    }
}

/// Text a reader might take for a number or a JSON literal.
fn looks_like_literal(s: &str) -> bool {
    s.eq_ignore_ascii_case("null")
        || s.eq_ignore_ascii_case("true")
        || s.eq_ignore_ascii_case("false")
        || s.parse::<f64>().is_ok()
}

/// True for a key segment the encoder may write bare: the decoder's segment
/// characters, plus no leading `>` and no whitespace at either end, so the
/// line reads plainly.
pub(super) fn is_bare_segment(s: &str) -> bool {
    let (Some(first), Some(last)) = (s.chars().next(), s.chars().next_back()) else {
        return false;
    };
    // A header item starting with `*` places declared columns (`table`).
    first != '>'
        && first != '*'
        && !first.is_whitespace()
        && !last.is_whitespace()
        && s.chars().all(|c| is_segment_char(c) && !c.is_control())
}

/// A character that may appear in a bare key segment.
fn is_segment_char(c: char) -> bool {
    !matches!(
        c,
        ',' | '"' | ':' | '.' | '{' | '}' | '[' | ']' | '\n' | '\r'
    )
}

/// The most segments a bare key may have.
const MAX_KEY_DEPTH: usize = 64;

/// A key or column name as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Key {
    /// A bare key: a path of one or more segments.
    Path(Vec<String>),
    /// A quoted key: one literal key.
    Literal(String),
}

/// Reads a key: quoted, or bare segments joined by `.`.
pub(super) fn parse_key(sc: &mut Scanner<'_>) -> Result<Key, FormatDecodeError> {
    if sc.peek() == Some('"') {
        return parse_quoted(sc).map(Key::Literal);
    }
    let mut segments = Vec::new();
    loop {
        let rest = sc.rest();
        let len = rest
            .char_indices()
            .find(|&(_, c)| !is_segment_char(c))
            .map_or(rest.len(), |(i, _)| i);
        if len == 0 {
            return Err(sc.error("expected a key"));
        }
        if segments.len() == MAX_KEY_DEPTH {
            // Deeper paths would build values too deep to drop or compare
            // without overflowing the stack; the encoder stays far below.
            return Err(sc.error("key nested too deep"));
        }
        segments.push(rest[..len].to_owned());
        sc.advance(len);
        if !sc.eat(".") {
            return Ok(Key::Path(segments));
        }
    }
}

/// Reads a JSON string literal starting at the cursor's `"`.
pub(super) fn parse_quoted(sc: &mut Scanner<'_>) -> Result<String, FormatDecodeError> {
    if sc.peek() != Some('"') {
        return Err(sc.error("expected `\"`"));
    }
    let mut stream = serde_json::Deserializer::from_str(sc.rest()).into_iter::<String>();
    match stream.next() {
        Some(Ok(s)) => {
            let used = stream.byte_offset();
            sc.advance(used);
            Ok(s)
        }
        Some(Err(e)) => Err(sc.error(format!("bad quoted string: {e}"))),
        None => Err(sc.error("unterminated quoted string")),
    }
}

/// Reads one CSV cell; stops before the `,` or line end that follows it.
/// `None` is an empty cell: the key is absent from the row.
pub(super) fn parse_cell(sc: &mut Scanner<'_>) -> Result<Option<Value>, FormatDecodeError> {
    match sc.peek() {
        None | Some(',') | Some('\n') => Ok(None),
        Some('"') => parse_quoted(sc).map(|s| Some(Value::String(s))),
        Some('{') | Some('[') => {
            let line = sc.line_rest();
            let mut stream = serde_json::Deserializer::from_str(line).into_iter::<Value>();
            match stream.next() {
                Some(Ok(value)) => {
                    let used = stream.byte_offset();
                    sc.advance(used);
                    Ok(Some(value))
                }
                Some(Err(e)) => Err(sc.error(format!("bad JSON in a cell: {e}"))),
                None => Err(sc.error("bad JSON in a cell")),
            }
        }
        Some(_) => {
            // Up to the first `,` of the line (or its end).
            let rest = sc.rest();
            let end = rest
                .bytes()
                .position(|b| b == b',' || b == b'\n')
                .unwrap_or(rest.len());
            let token = &rest[..end];
            sc.advance(token.len());
            Ok(Some(
                bare_scalar(token).unwrap_or_else(|| Value::String(token.to_owned())),
            ))
        }
    }
}

/// `null`, `true`, `false` or a JSON number, read from bare text.
fn bare_scalar(token: &str) -> Option<Value> {
    match token {
        "null" => Some(Value::Null),
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        _ if token.starts_with(|c: char| c == '-' || c.is_ascii_digit()) => {
            // The number as its text (`arbitrary_precision`): `10.50`
            // stays `10.50`, never a float's shortest form.
            let number = serde_json::from_str::<Number>(token).ok()?;
            Some(Value::Number(number))
        }
        _ => None,
    }
}

/// A line value before patterns are known: a value, or text that is a
/// pattern if it names a column in braces and a string otherwise.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum LineValue {
    /// A quoted string, a literal, a number or JSON.
    Value(Value),
    /// Unquoted text.
    Text(String),
}

/// Reads a line value; stops before the line end.
pub(super) fn parse_line_value(sc: &mut Scanner<'_>) -> Result<LineValue, FormatDecodeError> {
    if sc.peek() == Some('"') {
        let s = parse_quoted(sc)?;
        return Ok(LineValue::Value(Value::String(s)));
    }
    let line = sc.line_rest();
    if line.is_empty() {
        return Err(sc.error("missing value after `: `"));
    }
    sc.advance(line.len());
    if let (Some(rest), Some(name)) = (line.strip_prefix(TILDE), sc.tilde()) {
        return Ok(classify_line(&format!("{{{name}}}{rest}")));
    }
    if let (Some(rest), Some(prefix)) = (line.strip_prefix(CARET), sc.caret()) {
        return Ok(classify_line(&format!("{prefix}{rest}")));
    }
    Ok(classify_line(line))
}

/// At the start of a line value, stands for the reference the hint
/// declares (`~={url}`: `~/forks` reads `{url}/forks`). A line string
/// that starts with it is always quoted, declared or not.
pub(super) const TILDE: char = '~';

/// At the start of a line value, stands for the text the hint declares
/// (`^=https://x/y`: `^/z` reads `https://x/y/z`). A line string that
/// starts with it is always quoted, declared or not.
pub(super) const CARET: char = '^';

/// What unquoted line text reads as.
pub(super) fn classify_line(text: &str) -> LineValue {
    if let Some(value) = bare_scalar(text) {
        return LineValue::Value(value);
    }
    if text.starts_with(['{', '[']) {
        if let Ok(value) = serde_json::from_str::<Value>(text) {
            return LineValue::Value(value);
        }
    }
    LineValue::Text(text.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cell(v: &Value) -> String {
        let mut out = String::new();
        write_value(&mut out, v, Slot::Cell);
        out
    }

    fn read_cell(text: &str) -> Option<Value> {
        let mut sc = Scanner::new(text, 0);
        let v = parse_cell(&mut sc).unwrap();
        assert!(sc.at_end(), "{text:?} left {:?}", sc.rest());
        v
    }

    #[test]
    fn typed_cells_round_trip() {
        for v in [
            json!(null),
            json!(""),
            json!("null"),
            json!("NULL"),
            json!("true"),
            json!(true),
            json!(false),
            json!(1),
            json!("1"),
            json!(-0.0),
            json!(1.5e300),
            json!(1.3676468359325435e188),
            json!("1e5"),
            json!("inf"),
            json!(u64::MAX),
            json!(i64::MIN),
            json!("a,b"),
            json!("say \"hi\""),
            json!("two\nlines\r\n"),
            json!(" lead"),
            json!("trail "),
            json!("{\"a\":1}"),
            json!("[x"),
            json!({"a": [1, {"b": null}]}),
            json!([]),
            json!("héllo wörld"),
            json!("2011-04-22T13:33:48Z"),
        ] {
            let text = cell(&v);
            assert_eq!(read_cell(&text), Some(v.clone()), "{text:?}");
        }
        assert_eq!(read_cell(""), None);
    }

    #[test]
    fn plain_strings_stay_bare() {
        assert_eq!(cell(&json!("octocat")), "octocat");
        assert_eq!(cell(&json!("Found a bug")), "Found a bug");
        assert_eq!(cell(&json!("1.0.0")), "1.0.0");
        assert_eq!(cell(&json!("")), "\"\"");
        assert_eq!(cell(&json!("null")), "\"null\"");
        assert_eq!(cell(&json!("12")), "\"12\"");
        assert_eq!(cell(&json!("a,b")), "\"a,b\"");
        assert_eq!(cell(&json!("a\"b")), r#""a\"b""#);
        assert_eq!(cell(&json!("x\ny")), r#""x\ny""#);
    }

    #[test]
    fn line_values() {
        let names = Names::from_names(["login"]);
        let mut out = String::new();
        write_value(&mut out, &json!("{login}/x"), Slot::Line(&names, ""));
        assert_eq!(out, "\"{login}/x\"");
        out.clear();
        write_value(&mut out, &json!("a, b: c"), Slot::Line(&names, ""));
        assert_eq!(out, "a, b: c");
        assert_eq!(
            classify_line("{\"a\":1}"),
            LineValue::Value(json!({"a": 1}))
        );
        assert_eq!(
            classify_line("{url}/comments"),
            LineValue::Text("{url}/comments".into())
        );
        assert_eq!(classify_line("-12"), LineValue::Value(json!(-12)));
        assert_eq!(classify_line("-x"), LineValue::Text("-x".into()));
    }

    #[test]
    fn keys() {
        let mut sc = Scanner::new("user.login: x", 0);
        assert_eq!(
            parse_key(&mut sc).unwrap(),
            Key::Path(vec!["user".into(), "login".into()])
        );
        assert!(sc.eat(": "));
        let mut sc = Scanner::new(r#""a.b\"": x"#, 0);
        assert_eq!(parse_key(&mut sc).unwrap(), Key::Literal("a.b\"".into()));
        let deep = "a.".repeat(64) + "a";
        for bad in ["", ".a", "a.", "a..b", ",", ":", deep.as_str()] {
            assert!(parse_key(&mut Scanner::new(bad, 0)).is_err(), "{bad:?}");
        }
        assert!(is_bare_segment("+1"));
        assert!(is_bare_segment("first name"));
        assert!(!is_bare_segment(""));
        assert!(!is_bare_segment("a.b"));
        assert!(!is_bare_segment(" a"));
        assert!(!is_bare_segment(">a"));
    }
}
