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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
