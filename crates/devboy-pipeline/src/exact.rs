//! What "the same JSON" means here: the compact form every encoding must
//! give back byte for byte (invariant 12 in docs/invariants.md).
//!
//! A JSON body's **compact form** is its text with the white space between
//! tokens removed and each string spelled in standard JSON escaping
//! (`serde_json`'s: `\"`, `\\`, `\n`, `\t`, `\r`, `\b`, `\f`, `\u00XX` for
//! other control characters, everything else raw), and nothing else
//! changed: every number's text as the server wrote it (`10.50`, `-0`,
//! `3e2`, `18446744073709551616`), keys in their order, a key written
//! twice written twice. String spelling is the one liberty: `\u00e9` and
//! `é` are the same characters, and the model is better served by the
//! second.
//!
//! Every encoding decodes to a `serde_json::Value`, and the crate's
//! `serde_json` keeps numbers as their text (`arbitrary_precision`) and
//! keys in order (`preserve_order`). What a `Value` cannot carry is a key
//! written twice (it keeps the last) and an exponent written `E` (it reads
//! as `e`). [`carries`] tells whether a parsed body lost neither: only then
//! may anything re-encode it, and the check after encoding compares the
//! decoded value's serialization with the body's compact form as bytes,
//! never as parsed numbers.

use serde_json::Value;

/// The compact form of `text` (see the module docs), or `None` when `text`
/// is not a sequence of JSON tokens (an unterminated string, say). It does
/// not check the grammar between tokens; callers parse the text too.
pub fn compact(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b' ' | b'\t' | b'\n' | b'\r' => at += 1,
            b'"' => {
                let end = string_end(bytes, at)?;
                let literal = &text[at..end];
                if literal.contains('\\') {
                    let value: String = serde_json::from_str(literal).ok()?;
                    out.push_str(&serde_json::to_string(&value).ok()?);
                } else {
                    out.push_str(literal);
                }
                at = end;
            }
            _ => {
                // A number, a literal or punctuation: as written, up to the
                // next white space, string or punctuation.
                let start = at;
                at += 1;
                while at < bytes.len()
                    && !matches!(
                        bytes[at],
                        b' ' | b'\t'
                            | b'\n'
                            | b'\r'
                            | b'"'
                            | b','
                            | b':'
                            | b'['
                            | b']'
                            | b'{'
                            | b'}'
                    )
                    && !matches!(bytes[start], b',' | b':' | b'[' | b']' | b'{' | b'}')
                {
                    at += 1;
                }
                out.push_str(&text[start..at]);
            }
        }
    }
    Some(out)
}

/// The end (exclusive) of the string literal opening at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

/// Whether `value`, parsed from `text`, carries all of it: its
/// serialization is `text`'s [`compact`] form. `false` for a key written
/// twice, an exponent written `E`, or a `value` that is not `text`'s.
pub fn carries(text: &str, value: &Value) -> bool {
    match (serde_json::to_string(value), compact(text)) {
        (Ok(serialized), Some(compact)) => serialized == compact,
        _ => false,
    }
}

/// Whether `a` and `b` serialize to the same bytes: the same keys in the
/// same order at every depth, numbers with the same text, the same
/// strings. `Value`'s own `==` ignores key order, so it is never the
/// check.
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((ka, va), (kb, vb))| ka == kb && same(va, vb))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(va, vb)| same(va, vb))
        }
        // Numbers compare as their text (`arbitrary_precision`).
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn numbers_keep_their_text() {
        for text in [
            r#"[{"id":18446744073709551616,"n":"a"}]"#,
            "-9223372036854775809",
            "0.1000000000000000055511151231257827",
            "-0",
            "3e+2",
            "10.50",
            "1e-7",
            "[1.0, 2.50e+3, -0.0]",
        ] {
            let value = parse(text);
            assert!(carries(text, &value), "{text}: {value}");
            assert_eq!(compact(text).unwrap(), value.to_string());
        }
    }

    #[test]
    fn what_a_value_cannot_carry_is_found() {
        // serde_json reads `3e2` as `3e+2` and `1E5` as `1e+5`.
        for text in [r#"{"a":1,"a":2}"#, "1E5", "3e2", r#"[{"k":1,"k":1}]"#] {
            assert!(!carries(text, &parse(text)), "{text}");
        }
    }

    #[test]
    fn white_space_goes_and_string_spelling_is_standard() {
        let text = "{ \"a\" : [ 1 , \"\\u00e9\\/x\" ],\n  \"b\":\t\"\\u0001\" }";
        assert_eq!(
            compact(text).unwrap(),
            "{\"a\":[1,\"é/x\"],\"b\":\"\\u0001\"}"
        );
        assert!(carries(text, &parse(text)));
    }

    #[test]
    fn key_order_counts_for_same_but_not_for_values() {
        let a = parse(r#"{"x":1,"y":2}"#);
        let b = parse(r#"{"y":2,"x":1}"#);
        assert_eq!(a, b, "Value's own equality ignores order");
        assert!(!same(&a, &b));
        assert!(same(&a, &a.clone()));
    }

    #[test]
    fn an_unterminated_string_has_no_compact_form() {
        assert_eq!(compact("[\"abc"), None);
    }
}
