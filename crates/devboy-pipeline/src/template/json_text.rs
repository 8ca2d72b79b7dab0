//! JSON text inside a string: `{"content": "[\n  {\n    \"name\": …"}`.
//!
//! Some servers put a JSON document, already serialized, into a string
//! field of their structured result (`@modelcontextprotocol/server-filesystem`
//! answers `directory_tree` with `{"content": JSON.stringify(tree, null, 2)}`).
//! A client that forwards `structuredContent` (Claude Code) then shows the
//! model that string escaped once more: every quote costs `\"`, every line
//! break `\n`, every indent its spaces. This template shows the inner
//! document itself, in its cheapest lossless encoding, under one line that
//! says where it came from.
//!
//! # Grammar
//!
//! ```text
//! text  = hint LF inner
//! hint  = "> [encoded: " key " holds this JSON as " style " text]"
//! key   = a JSON string literal                 ; the object's one key
//! style = "indented"                            ; serde_json's pretty form,
//!                                               ; 2 spaces (= JSON.stringify(v, null, 2))
//!       | "compact"                             ; serde_json's compact form
//! inner = any text `encode::decode` accepts     ; compact JSON, or a
//!                                               ; `> [encoded: csv …]` text
//! ```
//!
//! The body is `{key: string}` where `string` is `inner`'s value serialized
//! in `style`. The template applies only to an object with exactly that one
//! field whose string is an object or array serialized exactly so (any
//! other spacing, escaping or number form declines), and only after its
//! own output decodes back to the input.

use serde_json::Value;

use super::{same_json, DecodeError, Template};
use crate::encode;
use crate::route::estimate_tokens;

const PREFIX: &str = "> [encoded: ";
const MIDDLE: &str = " holds this JSON as ";
const SUFFIX: &str = " text]";

/// How the inner JSON was serialized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    Indented,
    Compact,
}

impl Style {
    fn word(self) -> &'static str {
        match self {
            Style::Indented => "indented",
            Style::Compact => "compact",
        }
    }

    fn serialize(self, value: &Value) -> Option<String> {
        match self {
            Style::Indented => serde_json::to_string_pretty(value).ok(),
            Style::Compact => serde_json::to_string(value).ok(),
        }
    }
}

/// The hint of a text whose field is named `content`, the common case.
pub const HINT: &str = "> [encoded: \"content\" holds this JSON as indented text]";

/// The one field and its inner document, if `value` is such a body.
fn parts(value: &Value) -> Option<(&str, Value, Style)> {
    let Value::Object(map) = value else {
        return None;
    };
    if map.len() != 1 {
        return None;
    }
    let (key, Value::String(text)) = map.iter().next()? else {
        return None;
    };
    if !text.starts_with(['{', '[']) {
        return None;
    }
    let inner: Value = serde_json::from_str(text).ok()?;
    let style = [Style::Indented, Style::Compact]
        .into_iter()
        .find(|s| s.serialize(&inner).as_deref() == Some(text.as_str()))?;
    Some((key, inner, style))
}

/// Whether `value` looks like a body this template takes (a cheap check:
/// one field holding a string that starts like a JSON document).
pub fn may_apply(value: &Value) -> bool {
    matches!(value, Value::Object(map) if map.len() == 1
        && map.values().next().and_then(Value::as_str).is_some_and(|s| s.starts_with(['{', '['])))
}

/// Encodes `value`, or `None` if it is not one field holding exactly
/// serialized JSON.
pub fn encode(value: &Value) -> Option<String> {
    let (key, inner, style) = parts(value)?;
    let key = serde_json::to_string(key).ok()?;
    let mut candidates = encode::candidates(&inner);
    candidates.sort_by_key(|c| estimate_tokens(c.text()));
    // The cheapest candidate that gives the text back exactly. The
    // encoders' own check ignores key order (a table lists its declared
    // columns first), but the serialized text does not; compact JSON,
    // always a candidate, keeps the order.
    candidates.into_iter().find_map(|best| {
        let text = format!(
            "{PREFIX}{key}{MIDDLE}{}{SUFFIX}\n{}",
            style.word(),
            best.text()
        );
        let back = decode(&text).ok()?;
        same_json(&back, value).then_some(text)
    })
}

fn malformed(line: usize, reason: &'static str) -> DecodeError {
    DecodeError::Malformed {
        template: Template::JsonText,
        line,
        reason,
    }
}

/// Whether `line` is this template's hint line.
pub(super) fn is_hint(line: &str) -> bool {
    hint_parts(line).is_some()
}

fn hint_parts(line: &str) -> Option<(String, Style)> {
    let rest = line.strip_prefix(PREFIX)?;
    let (key, style) = if let Some(k) = rest.strip_suffix(&format!("{MIDDLE}indented{SUFFIX}")) {
        (k, Style::Indented)
    } else {
        let k = rest.strip_suffix(&format!("{MIDDLE}compact{SUFFIX}"))?;
        (k, Style::Compact)
    };
    if !key.starts_with('"') {
        return None;
    }
    Some((serde_json::from_str::<String>(key).ok()?, style))
}

/// Decodes a text made by [`encode`] back into the body.
pub fn decode(text: &str) -> Result<Value, DecodeError> {
    let (first, inner) = text.split_once('\n').unwrap_or((text, ""));
    let (key, style) = hint_parts(first).ok_or(DecodeError::NotEncoded)?;
    let value = encode::decode(inner).map_err(|_| malformed(2, "not an encoded JSON document"))?;
    if !matches!(value, Value::Object(_) | Value::Array(_)) {
        return Err(malformed(2, "the document is not an object or array"));
    }
    let text = style
        .serialize(&value)
        .ok_or_else(|| malformed(2, "the document cannot be serialized"))?;
    let mut map = serde_json::Map::new();
    map.insert(key, Value::String(text));
    Ok(Value::Object(map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tokenizer;
    use proptest::prelude::*;
    use serde_json::json;

    fn tree() -> Value {
        fn file(name: &str) -> Value {
            json!({"name": name, "type": "file"})
        }
        fn dir(name: &str, children: Vec<Value>) -> Value {
            json!({"name": name, "type": "directory", "children": children})
        }
        let mut top = Vec::new();
        for d in 0..6 {
            let mut kids: Vec<Value> = (0..5)
                .map(|f| file(&format!("module_{d}_{f}.rs")))
                .collect();
            kids.push(dir(
                "tests",
                (0..3).map(|f| file(&format!("case_{f}.rs"))).collect(),
            ));
            kids.push(dir("empty", vec![]));
            top.push(dir(&format!("crate_{d}"), kids));
        }
        top.push(file("Cargo.toml"));
        Value::Array(top)
    }

    fn wrap(key: &str, text: String) -> Value {
        let mut map = serde_json::Map::new();
        map.insert(key.to_owned(), Value::String(text));
        Value::Object(map)
    }

    #[test]
    fn a_directory_tree_in_a_string_round_trips_and_costs_far_less() {
        let body = wrap("content", serde_json::to_string_pretty(&tree()).unwrap());
        let text = encode(&body).expect("applies");
        assert!(text.starts_with(HINT), "{text}");
        assert!(same_json(&decode(&text).unwrap(), &body));
        assert!(super::super::decode(&text) == Ok(super::super::DecodedBody::Json(body.clone())));
        let before = Tokenizer::O200k.count(&body.to_string());
        let after = Tokenizer::O200k.count(&text);
        eprintln!("directory tree in a string: {before} → {after} o200k tokens");
        // Measured 1,927 → 805 (−58%) when written.
        assert!(after * 100 <= before * 50, "{before} → {after}");
    }

    #[test]
    fn a_table_that_would_reorder_keys_gives_way_to_one_that_keeps_them() {
        // "type" is the same in every row, so the CSV declares it above the
        // header, and a decoded row lists it first: the text would change.
        let rows = json!([{"name": "a.rs", "type": "file"}, {"name": "b.rs", "type": "file"}, {"name": "c.rs", "type": "file"}]);
        let body = wrap("content", serde_json::to_string_pretty(&rows).unwrap());
        let text = encode(&body).expect("compact JSON keeps the order");
        assert!(same_json(&decode(&text).unwrap(), &body), "{text}");
    }

    #[test]
    fn compact_inner_text_and_other_keys() {
        let inner = json!({"a": [1, 2], "b": {"c": null}, "d": "x\ny"});
        let body = wrap("result", serde_json::to_string(&inner).unwrap());
        let text = encode(&body).unwrap();
        assert!(text.starts_with("> [encoded: \"result\" holds this JSON as compact text]\n"));
        assert!(same_json(&decode(&text).unwrap(), &body));
        let odd = wrap("a \"quoted\" key", serde_json::to_string(&inner).unwrap());
        let text = encode(&odd).unwrap();
        assert!(same_json(&decode(&text).unwrap(), &odd));
    }

    #[test]
    fn anything_not_serialized_exactly_so_is_declined() {
        let v = json!([{"n": 1}]);
        for text in [
            "[\n    {\n        \"n\": 1\n    }\n]".to_owned(), // 4 spaces
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap()), // trailing newline
            "[{\"n\":1.50}]".to_owned(),                       // 1.50 prints back as 1.5
            "[{\"n\":\"\\u0041\"}]".to_owned(),                // an escape serde would not write
            "[{\"n\":1,\"n\":2}]".to_owned(),                  // duplicate key
            "plain text".to_owned(),
            "42".to_owned(),
        ] {
            assert_eq!(encode(&wrap("content", text.clone())), None, "{text}");
        }
        // Two fields, or none: not this template.
        assert_eq!(encode(&json!({"content": "[1]", "other": 1})), None);
        assert_eq!(encode(&json!({})), None);
        assert!(!may_apply(&json!({"content": "x"})));
        assert!(may_apply(&json!({"content": "[1]"})));
    }

    #[test]
    fn decode_refuses_broken_texts() {
        assert_eq!(decode("plain"), Err(DecodeError::NotEncoded));
        assert_eq!(
            decode("> [encoded: content holds this JSON as indented text]\n[]"),
            Err(DecodeError::NotEncoded),
            "the key must be a JSON string"
        );
        assert!(matches!(
            decode("> [encoded: \"c\" holds this JSON as compact text]\n42"),
            Err(DecodeError::Malformed { .. })
        ));
        assert!(matches!(
            decode("> [encoded: \"c\" holds this JSON as compact text]\n> [encoded: csv]\n"),
            Err(DecodeError::Malformed { .. })
        ));
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            (-1.0e6f64..1.0e6).prop_map(|f| json!(f)),
            "[a-z ,\"{}\\[\\]:\n]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(("[a-z]{1,4}", inner), 0..6)
                    .prop_map(|kv| { Value::Object(kv.into_iter().collect()) }),
            ]
        })
    }

    proptest! {
        #[test]
        fn random_documents_round_trip(value in json_value(), pretty in any::<bool>()) {
            prop_assume!(matches!(value, Value::Object(_) | Value::Array(_)));
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            let body = wrap("content", text);
            let encoded = encode(&body);
            prop_assert!(encoded.is_some(), "declined {}", body);
            let back = decode(&encoded.unwrap()).unwrap();
            prop_assert!(same_json(&back, &body));
        }

        #[test]
        fn decode_never_panics(rest in "\\PC{0,200}", pretty in any::<bool>()) {
            let style = if pretty { "indented" } else { "compact" };
            let _ = decode(&format!("> [encoded: \"k\" holds this JSON as {style} text]\n{rest}"));
        }
    }
}
