//! JSON text inside a string field: `{"content": "[\n  {\n    \"name\": …"}`.
//!
//! Some servers put a JSON document, already serialized, into a string
//! field of their structured result: `@modelcontextprotocol/server-filesystem`
//! answers `directory_tree` with
//! `structuredContent = {"content": JSON.stringify(tree, null, 2)}`. A
//! client that forwards `structuredContent` (Claude Code) shows the model
//! that string escaped a second time: every quote costs `\"`, every line
//! break `\n`, every indent its spaces. This template parses that one
//! field, so the body holds the document itself, and shows the body in its
//! cheapest lossless encoding ([`crate::encode::candidates`]) under a line
//! that says which field was JSON text and how it was laid out:
//!
//! ```text
//! > [encoded: "content" parsed from indented JSON text #830147352]
//! {"content":[{"name":"src","type":"directory","children":[{"name":"lib.rs","type":"file"}]}]}
//! ```
//!
//! Every other field of the body stays where it was, as it was (another
//! string holding JSON text too stays a string).
//!
//! # Grammar (the decoder's specification)
//!
//! ```text
//! text  = hint LF body
//! hint  = "> [encoded: " key " parsed from " style " JSON text" check "]"
//! check = " #" 9DIGIT       ; over the whole text, see crate::encode::check
//! key   = a JSON string literal, as serde_json writes it
//! style = "indented"        ; serde_json::to_string_pretty: 2-space indent,
//!                           ; `": "` after keys (= JSON.stringify(v, null, 2))
//!       | "compact"         ; serde_json::to_string (= JSON.stringify(v))
//! body  = any text crate::encode::decode reads; it may open with its own
//!         `> [encoded: …]` hint line (csv, kv, doc) without a check of its
//!         own (the check above covers it), or be compact JSON
//! ```
//!
//! `body` must decode to an object with a field `key` whose value is an
//! object or an array. The decoded body is that object with the value of
//! `key` replaced, in place, by the string that serializes it in `style`;
//! every other field, and the order of all fields, is as `body` gives it.
//! The hint's fixed words end the line, so a key holding `]` or
//! ` parsed from ` is still read back exactly: the literal is what is left
//! between the prefix and ` parsed from <style> JSON text]`, and must be
//! the key exactly as serde_json writes it (no spaces around it, no escape
//! it would not write). A text reading the same in both styles (`[]`,
//! `{}`) is called compact.
//!
//! Two hint lines, not one: when the body is not compact JSON it carries
//! its own hint (`> [encoded: doc; …]` or `> [encoded: kv]`, the body
//! being an object; its hint has no check of its own). Folding both into
//! one line would save 4 o200k tokens (35 for the two lines
//! `> [encoded: "content" parsed from indented JSON text #…]` and
//! `> [encoded: doc; k[N]: N rows; shared fields first]`, line breaks
//! and the check included, against 31 for one line joining them with `; `),
//! only for structured bodies, and would tie this grammar to the encoders'
//! hint words. Kept apart, `body` is a text [`crate::encode::decode`]
//! reads as is, and each line says one thing.
//!
//! # What is encoded, what is declined
//!
//! A JSON object with a top-level string field whose text is an object or
//! array (`{…}` or `[…]`) that serde_json (with this crate's features,
//! `preserve_order` and `float_roundtrip`) parses and writes back, in one
//! of the two styles, to exactly the same bytes. When several fields
//! qualify, the one with the longest text is parsed (the first on a tie);
//! the others stay strings. Anything else declines: other indents, a
//! trailing line break, spaces after `,` or `:`, number forms serde writes
//! differently (`1.50`, `1e2`), escapes it would not write (`\u0041`, `\/`),
//! duplicate keys, a document nested deeper than serde_json reads (128).
//! Like every template, the encoder returns text only after decoding it and
//! finding the input again, keys in order.

use serde_json::{Map, Value};

use super::{Template, TemplateDecodeError};
use crate::encode::{self, check};
use crate::exact::same;
use crate::route::estimate_tokens;
use crate::shape::{Classified, InnerFormat};

use crate::hints::ENCODED_PREFIX as PREFIX;
const MIDDLE: &str = " parsed from ";
const SUFFIX: &str = " JSON text]";

/// The hint of a text whose parsed field is `content` (what
/// server-filesystem uses) in the indented style.
pub const HINT: &str = "> [encoded: \"content\" parsed from indented JSON text]";

/// How the JSON text of the field was laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    Indented,
    Compact,
}

impl Style {
    /// In the order tried: `[]` and `{}` read the same in both, and are
    /// called compact.
    const ALL: [Style; 2] = [Style::Compact, Style::Indented];

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

/// Whether a string could be JSON text this template parses: it opens a
/// document. The cheap first test.
fn opens_document(text: &str) -> bool {
    text.starts_with(['{', '['])
}

/// `text` parsed, and the style that writes it back byte for byte.
fn parse_exact(text: &str) -> Option<(Value, Style)> {
    if !opens_document(text) {
        return None;
    }
    let inner: Value = serde_json::from_str(text).ok()?;
    let style = Style::ALL
        .into_iter()
        .find(|s| s.serialize(&inner).as_deref() == Some(text))?;
    Some((inner, style))
}

/// A cheap pre-check on a classified body: `false` means [`encode()`]
/// declines it. The body must be a JSON object with a top-level string
/// that opens a document, and the classifier must have seen JSON in a
/// string leaf ([`InnerFormat::Json`]; for a leaf longer than it reads,
/// a prefix that is valid so far, which every prefix of a document is).
pub fn may_apply(classified: &Classified) -> bool {
    let Some(Value::Object(map)) = &classified.json else {
        return false;
    };
    classified.inner.contains(InnerFormat::Json)
        && map.values().any(|v| v.as_str().is_some_and(opens_document))
}

/// Encodes `value`, or `None` when it is not an object with a field
/// holding exactly serialized JSON (see the module docs), or when the
/// result would not decode back to `value`.
///
/// The body is shown in the [`encode::candidates`] encoding with the
/// lowest [`estimate_tokens`]: the router ranks every candidate, this one
/// included, with the same estimate and counts exactly only the winner,
/// so an exact count here would cost a full tokenization per candidate to
/// refine a choice the router makes by estimate anyway.
pub fn encode(value: &Value) -> Option<String> {
    let Value::Object(map) = value else {
        return None;
    };
    let mut chosen: Option<(&String, Value, Style, usize)> = None;
    for (key, field) in map {
        let Value::String(text) = field else {
            continue;
        };
        if chosen.as_ref().is_some_and(|c| c.3 >= text.len()) {
            continue;
        }
        if let Some((inner, style)) = parse_exact(text) {
            chosen = Some((key, inner, style, text.len()));
        }
    }
    let (key, inner, style, _) = chosen?;
    let mut parsed = Map::with_capacity(map.len());
    let mut inner = Some(inner);
    for (k, v) in map {
        let v = if k == key { inner.take()? } else { v.clone() };
        parsed.insert(k.clone(), v);
    }
    let parsed = Value::Object(parsed);
    let hint = format!(
        "{PREFIX}{}{MIDDLE}{}{SUFFIX}\n",
        serde_json::to_string(key).ok()?,
        style.word()
    );
    // The body's own hint needs no check: the one on this text's hint
    // line covers every byte below it.
    let mut candidates: Vec<String> = encode::candidates(&parsed)
        .into_iter()
        .filter_map(|c| match c.format() {
            encode::Format::JsonCompact => Some(c.into_text()),
            _ => check::strip(c.text()),
        })
        .collect();
    // Stable: compact JSON, the first candidate, wins a tie.
    candidates.sort_by_key(|c| estimate_tokens(c));
    // The cheapest candidate that gives the body back exactly. The
    // encoders' own check ignores key order (a table lists its declared
    // columns first), but the serialized text does not; compact JSON,
    // always a candidate, keeps the order.
    candidates.into_iter().find_map(|best| {
        let text = check::seal(&format!("{hint}{best}"))?;
        let back = decode(&text).ok()?;
        same(&back, value).then_some(text)
    })
}

fn malformed(line: usize, reason: &'static str) -> TemplateDecodeError {
    TemplateDecodeError::Malformed {
        template: Template::JsonText,
        line,
        reason,
    }
}

/// Whether `line` is this template's hint line.
pub(super) fn is_hint(line: &str) -> bool {
    hint_parts(line).is_some()
}

/// The key and style a hint line names.
fn hint_parts(line: &str) -> Option<(String, Style)> {
    let rest = line.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let (literal, style) = Style::ALL.into_iter().find_map(|style| {
        let literal = rest.strip_suffix(style.word())?.strip_suffix(MIDDLE)?;
        Some((literal, style))
    })?;
    // Exactly as the encoder writes it: no spaces around it, no escapes
    // serde_json would not write.
    let key: String = serde_json::from_str(literal).ok()?;
    (serde_json::to_string(&key).ok()? == literal).then_some((key, style))
}

/// Decodes a text made by [`encode()`] back into the body. Never panics.
pub fn decode(text: &str) -> Result<Value, TemplateDecodeError> {
    let first = text.split('\n').next().unwrap_or_default();
    let Some(hint) = check::unchecked_hint(first) else {
        return Err(match is_hint(first) {
            true => TemplateDecodeError::Check {
                template: Template::JsonText,
                error: check::CheckError::Missing,
            },
            false => TemplateDecodeError::NotEncoded,
        });
    };
    let (key, style) = hint_parts(&hint).ok_or(TemplateDecodeError::NotEncoded)?;
    let opened = check::open(text).map_err(|error| TemplateDecodeError::Check {
        template: Template::JsonText,
        error,
    })?;
    let parsed = encode::decode_unchecked(opened.body())
        .map_err(|_| malformed(2, "not an encoded JSON body"))?;
    let Value::Object(mut map) = parsed else {
        return Err(malformed(2, "the body is not a JSON object"));
    };
    let Some(field) = map.get_mut(&key) else {
        return Err(malformed(1, "the body has no field of that name"));
    };
    if !matches!(field, Value::Object(_) | Value::Array(_)) {
        return Err(malformed(2, "the field is not an object or array"));
    }
    let text = style
        .serialize(field)
        .ok_or_else(|| malformed(2, "the field cannot be serialized"))?;
    *field = Value::String(text);
    Ok(Value::Object(map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::classify;
    use crate::template::DecodedBody;
    use crate::Tokenizer;
    use proptest::prelude::*;
    use serde_json::json;

    /// A tree as server-filesystem's `directory_tree` builds it: `name`,
    /// `type`, and `children` for every directory (empty or not).
    fn tree() -> Value {
        fn file(name: &str) -> Value {
            json!({"name": name, "type": "file"})
        }
        fn dir(name: &str, children: Vec<Value>) -> Value {
            json!({"name": name, "type": "directory", "children": children})
        }
        let mut top = Vec::new();
        for module in ["codegen", "lexer", "parser", "runtime"] {
            let mut kids = vec![file("Cargo.toml")];
            for sub in ["src", "tests"] {
                kids.push(dir(
                    sub,
                    (0..6)
                        .map(|i| file(&format!("{module}_{sub}_{i}.rs")))
                        .collect(),
                ));
            }
            kids.push(dir("empty", vec![]));
            top.push(dir(module, kids));
        }
        top.push(file("README.md"));
        Value::Array(top)
    }

    /// The text without its check, as the expected strings are written.
    fn shown(text: &str) -> String {
        check::strip(text).unwrap_or_else(|| panic!("no check: {text}"))
    }

    /// Decodes `text` with its check added, as the encoder would have.
    fn decode_sealed(text: &str) -> Result<Value, TemplateDecodeError> {
        decode(&check::seal(text).unwrap_or_else(|| panic!("cannot seal {text}")))
    }

    fn pretty(v: &Value) -> String {
        serde_json::to_string_pretty(v).unwrap()
    }

    fn compact(v: &Value) -> String {
        serde_json::to_string(v).unwrap()
    }

    /// `encode` applies, the text decodes to `body` with its keys in
    /// order, through this module and through `template::decode`.
    fn round_trip(body: &Value) -> String {
        let text = encode(body).unwrap_or_else(|| panic!("declined {body}"));
        let back = decode(&text).unwrap();
        assert!(same(&back, body), "{text}\n→ {back}\n≠ {body}");
        assert_eq!(
            crate::template::decode(&text),
            Ok(DecodedBody::Json(back)),
            "{text}"
        );
        text
    }

    #[test]
    fn a_directory_tree_in_a_string_costs_far_less() {
        let body = json!({"content": pretty(&tree())});
        let c = classify(&body.to_string());
        assert!(Template::JsonText.may_apply(&c));
        let text = round_trip(&body);
        assert!(shown(&text).starts_with(&format!("{HINT}\n")), "{text}");
        let before = Tokenizer::O200k.count(&body.to_string());
        let after = Tokenizer::O200k.count(&text);
        eprintln!("directory tree in a string: {before} → {after} o200k tokens");
        // Measured 1,955 → 837 (−57%) when written.
        assert!(after * 100 <= before * 45, "{before} → {after}");
    }

    #[test]
    fn compact_inner_text() {
        let inner = json!({"a": [1, 2], "b": {"c": null}, "d": "x\ny", "e": 1.0});
        let body = json!({"result": compact(&inner)});
        let text = round_trip(&body);
        assert!(
            shown(&text).starts_with("> [encoded: \"result\" parsed from compact JSON text]\n"),
            "{text}"
        );
        // 1.0 stays a float: the text it decodes to says `1.0`, not `1`.
        assert!(compact(&decode(&text).unwrap()).contains(r#"\"e\":1.0"#));
        // `[]` reads the same in both styles, and is called compact.
        let text = round_trip(&json!({"c": "[]", "d": 1}));
        assert!(shown(&text).starts_with("> [encoded: \"c\" parsed from compact JSON text]\n"));
    }

    #[test]
    fn other_fields_keep_their_place() {
        let inner = json!([{"id": 1, "tags": ["a", "b"]}, {"id": 2, "tags": []}]);
        let body = json!({"ok": true, "content": pretty(&inner), "note": "x", "n": 3});
        let text = round_trip(&body);
        assert!(
            shown(&text).starts_with("> [encoded: \"content\" parsed from indented JSON text]\n")
        );
        let body = json!({"content": compact(&inner), "after": {"k": [1]}});
        round_trip(&body);
        let body = json!({"before": null, "content": compact(&inner)});
        round_trip(&body);
    }

    #[test]
    fn the_longest_document_is_parsed_the_others_kept() {
        let small = compact(&json!([1]));
        let big = pretty(&json!({"x": [1, 2, 3], "y": "z"}));
        let body = json!({"a": small, "b": big, "c": "[not json"});
        let text = round_trip(&body);
        assert!(shown(&text).starts_with("> [encoded: \"b\" parsed from indented JSON text]\n"));
        // On a tie, the first.
        let body = json!({"a": "[1]", "b": "[2]"});
        let text = round_trip(&body);
        assert!(shown(&text).starts_with("> [encoded: \"a\" parsed from compact JSON text]\n"));
    }

    #[test]
    fn nested_arrays_and_awkward_keys() {
        let inner = json!([[1, [2, [3, []]]], [], [[{"k": [[]]}]]]);
        round_trip(&json!({"content": pretty(&inner)}));
        round_trip(&json!({"content": compact(&inner)}));
        for key in [
            "",
            "a \"quoted\" key",
            "ends with ]",
            "x parsed from indented JSON text]",
            "two\nlines",
            "日本",
        ] {
            let mut map = Map::new();
            map.insert(key.to_owned(), Value::String(pretty(&inner)));
            map.insert("z".to_owned(), json!(1));
            round_trip(&Value::Object(map));
        }
    }

    #[test]
    fn a_table_that_would_reorder_keys_gives_way_to_one_that_keeps_them() {
        // `type` is the same in every row, so a CSV block declares it above
        // the header and a decoded row lists it first: the text would
        // change. Compact JSON keeps the order.
        let rows: Vec<Value> = (0..8)
            .map(|i| json!({"name": format!("f{i}.rs"), "type": "file"}))
            .collect();
        round_trip(&json!({"content": pretty(&Value::Array(rows))}));
    }

    #[test]
    fn anything_not_serialized_exactly_so_is_declined() {
        let v = json!([{"n": 1}]);
        for text in [
            "[\n    {\n        \"n\": 1\n    }\n]".to_owned(), // 4-space indent
            "[\n\t{\n\t\t\"n\": 1\n\t}\n]".to_owned(),         // tabs
            format!("{}\n", pretty(&v)),                       // trailing newline
            format!(" {}", compact(&v)),                       // leading space
            "[{\"n\": 1}]".to_owned(),                         // space after `:`
            "[1, 2]".to_owned(),                               // space after `,`
            "[{\"n\":1e2}]".to_owned(),                        // serde writes 1e+2
            "[{\"n\":1.0E0}]".to_owned(),                      // serde writes 1.0e+0
            "[{\"n\":\"\\u0041\"}]".to_owned(),                // serde writes "A"
            "[{\"n\":\"a\\/b\"}]".to_owned(),                  // serde writes "a/b"
            "[{\"n\":1,\"n\":2}]".to_owned(),                  // duplicate key
            "[1]]".to_owned(),                                 // trailing garbage
            format!("{}{}", "[".repeat(200), "]".repeat(200)), // deeper than serde reads
            "plain text".to_owned(),
            "42".to_owned(),
            "\"[1]\"".to_owned(),
        ] {
            let body = json!({"content": text});
            assert_eq!(encode(&body), None, "{text}");
        }
        // `1.0` is how serde writes the float 1.0, and `1` the integer: both
        // are exact, and each comes back as itself.
        for text in ["[1.0]", "[1]", "[-0.0]", "[\"é\\n\\u001f\"]"] {
            round_trip(&json!({"content": text}));
        }
        assert_eq!(encode(&json!({})), None);
        assert_eq!(encode(&json!([pretty(&v)])), None, "not an object");
        assert_eq!(encode(&json!({"content": 1, "b": null})), None);
    }

    #[test]
    fn may_apply_is_a_cheap_necessary_condition() {
        let yes = |body: &Value| Template::JsonText.may_apply(&classify(&body.to_string()));
        assert!(yes(&json!({"content": "[1]"})));
        assert!(yes(&json!({"a": 1, "content": "{\"k\":2}"})));
        assert!(!yes(&json!({"content": "[DIR] src\n[FILE] a.rs"})));
        assert!(!yes(&json!({"content": " [1]"})));
        assert!(!yes(&json!({"a": {"content": "[1]"}})), "not top level");
        assert!(!yes(&json!(["[1]"])), "not an object");
        assert!(!Template::JsonText.may_apply(&classify("[1]")));
        // A string longer than the classifier reads of a leaf: its prefix
        // is valid so far, so still a candidate.
        let long = json!({"content": compact(&json!(vec!["x".repeat(100); 100]))});
        assert!(yes(&long));
        round_trip(&long);
    }

    #[test]
    fn decode_refuses_broken_texts() {
        assert_eq!(decode("plain"), Err(TemplateDecodeError::NotEncoded));
        for hint in [
            "> [encoded: content parsed from indented JSON text]", // key not a literal
            "> [encoded: \"c\" parsed from sideways JSON text]",
            "> [encoded: \"c\" parsed from indented JSON text] ",
            "> [encoded: \"c\"x\" parsed from compact JSON text]",
            "> [encoded: \"c\" parsed from compact JSON text",
            "> [encoded:  \"c\" parsed from compact JSON text]",
            "> [encoded: \"c\"  parsed from compact JSON text]",
            "> [encoded: \"\\u0063\" parsed from compact JSON text]",
        ] {
            assert_eq!(
                decode(&format!("{hint}\n{{}}")),
                Err(TemplateDecodeError::NotEncoded)
            );
            assert!(!is_hint(hint), "{hint}");
        }
        let hint = "> [encoded: \"c\" parsed from compact JSON text]";
        for (body, line) in [
            ("", 2),
            ("42", 2),
            ("[1]", 2),
            ("{\"d\":[1]}", 1),
            ("{\"c\":\"[1]\"}", 2),
            ("{\"c\":1}", 2),
            ("> [encoded: csv]\n", 2),
            ("{\"c\":[1]} x", 2),
        ] {
            assert!(
                matches!(
                    decode_sealed(&format!("{hint}\n{body}")),
                    Err(TemplateDecodeError::Malformed { line: l, .. }) if l == line
                ),
                "{body}"
            );
        }
        let text = format!("{hint}\n{{\"a\":1,\"c\":{{\"k\":[]}}}}");
        assert_eq!(decode_sealed(&text), Ok(json!({"a": 1, "c": "{\"k\":[]}"})));
        // Without its check, or with a body changed after it, refused.
        let missing = TemplateDecodeError::Check {
            template: Template::JsonText,
            error: check::CheckError::Missing,
        };
        assert_eq!(decode(&text), Err(missing.clone()));
        assert_eq!(crate::template::decode(&text), Err(missing));
        let changed = check::seal(&text).unwrap().replace("\"a\":1", "\"a\":2");
        assert!(matches!(
            decode(&changed),
            Err(TemplateDecodeError::Check {
                error: check::CheckError::Mismatch { .. },
                ..
            })
        ));
    }

    /// Random JSON: strings with quotes, escapes, line breaks, brackets and
    /// non-ASCII; integers and floats; nested arrays and objects with
    /// repeated keys across rows (so tables are candidates).
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            "[a-z ,\"{}\\[\\]:\n\\\\/é\u{1f}]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(("[a-e]{1,2}|[ .,\"]", inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn document() -> impl Strategy<Value = Value> {
        json_value().prop_filter("a document", |v| {
            matches!(v, Value::Object(_) | Value::Array(_))
        })
    }

    proptest! {
        #[test]
        fn pretty_documents_round_trip(v in document()) {
            let body = json!({"content": pretty(&v)});
            let text = encode(&body);
            prop_assert!(text.is_some(), "declined {}", body);
            prop_assert!(same(&decode(&text.unwrap()).unwrap(), &body));
        }

        #[test]
        fn compact_documents_among_other_fields_round_trip(v in document()) {
            let body = json!({"a": 1, "content": compact(&v), "z": "x"});
            let text = encode(&body);
            prop_assert!(text.is_some(), "declined {}", body);
            let text = text.unwrap();
            prop_assert!(shown(&text).starts_with("> [encoded: \"content\" parsed from compact JSON text]\n"));
            prop_assert!(same(&decode(&text).unwrap(), &body));
        }

        #[test]
        fn documents_between_random_fields_round_trip(
            v in document(),
            before in json_value(),
            after in json_value(),
            pretty_style in any::<bool>(),
        ) {
            let text = if pretty_style { pretty(&v) } else { compact(&v) };
            // The random fields may hold JSON text too (`"[]"`): whichever
            // field is parsed, the body comes back.
            let body = json!({"before": before, "content": text, "after": after});
            let text = encode(&body);
            prop_assert!(text.is_some(), "declined {}", body);
            prop_assert!(same(&decode(&text.unwrap()).unwrap(), &body));
        }

        #[test]
        fn decode_never_panics(rest in "\\PC{0,300}", key in "\\PC{0,6}", pretty in any::<bool>()) {
            let style = if pretty { "indented" } else { "compact" };
            let key = serde_json::to_string(&key).unwrap();
            let text = format!("> [encoded: {key} parsed from {style} JSON text]\n{rest}");
            let _ = decode(&text);
            let _ = crate::template::decode(&text);
            if let Some(sealed) = check::seal(&text) {
                let _ = decode(&sealed);
                let _ = crate::template::decode(&sealed);
            }
        }

        #[test]
        fn decode_never_panics_on_encoder_pieces(
            pieces in proptest::collection::vec(prop_oneof![
                Just("> [encoded: csv]\n"), Just("> [encoded: kv]\n"), Just("> [encoded: doc]\n"),
                Just("\"c\""), Just("c: "), Just("c[2]:\n"), Just("{"), Just("}"), Just("["),
                Just("]"), Just(","), Just("\n"), Just("{c}"), Just("1"), Just("\"x\""),
            ], 0..24),
        ) {
            let text = format!("{}\n{}", HINT.replace("content", "c"), pieces.concat());
            let _ = decode(&text);
            if let Some(sealed) = check::seal(&text) {
                let _ = decode(&sealed);
            }
        }
    }
}
