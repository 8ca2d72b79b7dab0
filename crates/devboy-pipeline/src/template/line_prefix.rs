//! Lines that all start the same way (the paths of a search, a listing, a
//! list of URLs), with that start written once.
//!
//! `server-filesystem`'s `search_files` answers one absolute path per line,
//! and in a real project every one of them repeats the same dozen tokens
//! of directory before the part that differs. This template writes the
//! common prefix once, in the hint, and each line without it:
//!
//! ```text
//! > [encoded: lines under "/home/me/app/src/" #102938475]
//! main.rs
//! cli/args.rs
//! cli/run.rs
//! ```
//!
//! A JSON object with one field, a string of such lines (what
//! server-filesystem sends as `structuredContent`, which is what Claude
//! Code shows), names the field too: `> [encoded: "content" as lines under
//! "/home/me/app/src/" #…]`.
//!
//! # Grammar (the decoder's specification)
//!
//! ```text
//! encoded = HINT LF body
//! HINT    = "> [encoded: " [ FIELD " as " ] "lines under " PREFIX CHECK "]"
//! FIELD   = JSON-string                 ; as serde_json writes it
//! PREFIX  = JSON-string                 ; as serde_json writes it
//! CHECK   = " #" 9DIGIT                 ; see crate::encode::check
//! body    = line *( LF line ) [ LF ]
//! ```
//!
//! The text is every `line` with `PREFIX` in front, joined by line breaks,
//! and ends with a line break exactly when `body` does. With `FIELD` the
//! body is the JSON object `{FIELD: text}`; without, the text itself.
//!
//! The encoder applies only when there are at least three lines, every one
//! starts with the prefix, and the prefix (the longest common start, cut
//! back to just after its last `/` or `\`) is at least
//! [`MIN_PREFIX`] bytes long. It declines a text whose last line is the
//! prefix itself and that does not end with a line break (its body would
//! end with a line break it does not mean). Whether it is cheaper is the
//! router's question.

use serde_json::{Map, Value};

use super::{DecodedBody, Template, TemplateDecodeError};
use crate::encode::check;
use crate::exact::same;
use crate::hints::ENCODED_PREFIX;
use crate::shape::Classified;

/// The hint of a text whose lines share the prefix `/` (a representative:
/// the prefix and the field vary).
pub const HINT: &str = "> [encoded: lines under \"/\"]";

const UNDER: &str = "lines under ";
const AS: &str = " as ";

/// The shortest prefix worth writing once.
pub const MIN_PREFIX: usize = 8;

/// The fewest lines.
const MIN_LINES: usize = 3;

/// A cheap pre-check: a text that is not JSON, or a JSON object with one
/// field holding a multi-line string.
pub fn may_apply(classified: &Classified) -> bool {
    match &classified.json {
        None => true,
        Some(Value::Object(map)) => {
            map.len() == 1
                && map
                    .values()
                    .all(|v| v.as_str().is_some_and(|s| s.contains('\n')))
        }
        Some(_) => false,
    }
}

/// Encodes `body` (with its parsed JSON when it is JSON), or `None` when
/// the template does not apply.
pub fn encode(body: &str, json: Option<&Value>) -> Option<String> {
    let (field, text) = match json {
        None => (None, body),
        Some(Value::Object(map)) if map.len() == 1 => {
            let (key, value) = map.iter().next()?;
            (Some(key.as_str()), value.as_str()?)
        }
        Some(_) => return None,
    };
    let (lines, trailing) = split_lines(text);
    if lines.len() < MIN_LINES {
        return None;
    }
    let prefix = common_prefix(&lines);
    if prefix.len() < MIN_PREFIX || (!trailing && lines.last() == Some(&prefix)) {
        return None;
    }
    let mut out = String::from(ENCODED_PREFIX);
    if let Some(field) = field {
        out.push_str(&serde_json::to_string(field).ok()?);
        out.push_str(AS);
    }
    out.push_str(UNDER);
    out.push_str(&serde_json::to_string(prefix).ok()?);
    out.push(']');
    for line in &lines {
        out.push('\n');
        out.push_str(&line[prefix.len()..]);
    }
    if trailing {
        out.push('\n');
    }
    let sealed = check::seal(&out)?;
    let same = match (decode(&sealed).ok()?, json) {
        (DecodedBody::Text(back), None) => back == body,
        (DecodedBody::Json(back), Some(value)) => same(&back, value),
        _ => false,
    };
    same.then_some(sealed)
}

/// `text`'s lines, and whether it ends with a line break (not counted as
/// an empty last line).
fn split_lines(text: &str) -> (Vec<&str>, bool) {
    match text.strip_suffix('\n') {
        Some(rest) => (rest.split('\n').collect(), true),
        None => (text.split('\n').collect(), false),
    }
}

/// The longest start every line shares, cut back to just after its last
/// `/` or `\` (so a line's name is never split).
fn common_prefix<'a>(lines: &[&'a str]) -> &'a str {
    let Some(first) = lines.first() else {
        return "";
    };
    let mut len = first.len();
    for line in &lines[1..] {
        len = first
            .bytes()
            .zip(line.bytes())
            .take(len)
            .take_while(|(a, b)| a == b)
            .count();
    }
    let shared = &first[..len];
    match shared.rfind(['/', '\\']) {
        Some(at) => &first[..at + 1],
        None => "",
    }
}

fn malformed(line: usize, reason: &'static str) -> TemplateDecodeError {
    TemplateDecodeError::Malformed {
        template: Template::LinePrefix,
        line,
        reason,
    }
}

/// Whether `line` is this template's hint line (without its check).
pub(super) fn is_hint(line: &str) -> bool {
    hint_parts(line).is_some()
}

/// The field (if any) and the prefix a hint line names, each exactly as
/// serde_json writes it.
fn hint_parts(line: &str) -> Option<(Option<String>, String)> {
    let rest = line.strip_prefix(ENCODED_PREFIX)?.strip_suffix(']')?;
    let exact = |literal: &str| -> Option<String> {
        let s: String = serde_json::from_str(literal).ok()?;
        (serde_json::to_string(&s).ok()? == literal).then_some(s)
    };
    if let Some(prefix) = rest.strip_prefix(UNDER) {
        return Some((None, exact(prefix)?));
    }
    let (field, prefix) = rest.split_once(&format!("{AS}{UNDER}"))?;
    Some((Some(exact(field)?), exact(prefix)?))
}

/// Decodes a text made by [`encode`] back into the body. Never panics.
pub fn decode(text: &str) -> Result<DecodedBody, TemplateDecodeError> {
    let first = text.split('\n').next().unwrap_or_default();
    let Some(hint) = check::unchecked_hint(first) else {
        return Err(if is_hint(first) {
            TemplateDecodeError::Check {
                template: Template::LinePrefix,
                error: check::CheckError::Missing,
            }
        } else {
            TemplateDecodeError::NotEncoded
        });
    };
    let (field, prefix) = hint_parts(&hint).ok_or(TemplateDecodeError::NotEncoded)?;
    let opened = check::open(text).map_err(|error| TemplateDecodeError::Check {
        template: Template::LinePrefix,
        error,
    })?;
    let (lines, trailing) = split_lines(opened.body());
    if lines.is_empty() {
        return Err(malformed(2, "no lines"));
    }
    let mut out = String::with_capacity(opened.body().len() + lines.len() * prefix.len());
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&prefix);
        out.push_str(line);
    }
    if trailing {
        out.push('\n');
    }
    Ok(match field {
        None => DecodedBody::Text(out),
        Some(field) => {
            let mut map = Map::new();
            map.insert(field, Value::String(out));
            DecodedBody::Json(Value::Object(map))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::classify;
    use crate::Tokenizer;
    use proptest::prelude::*;
    use serde_json::json;

    fn listing(n: usize) -> String {
        (0..n)
            .map(|i| format!("/home/user/projects/flask-app/src/flaskapp/module_{i:02}.py"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_search_listing_writes_its_directory_once() {
        let text = listing(20);
        let encoded = encode(&text, None).unwrap();
        let (hint, body) = encoded.split_once('\n').unwrap();
        assert!(
            check::strip(hint).unwrap()
                == "> [encoded: lines under \"/home/user/projects/flask-app/src/flaskapp/\"]",
            "{hint}"
        );
        assert!(body.starts_with("module_00.py\nmodule_01.py\n"), "{body}");
        assert_eq!(decode(&encoded), Ok(DecodedBody::Text(text.clone())));
        let (before, after) = (
            Tokenizer::O200k.count(&text),
            Tokenizer::O200k.count(&encoded),
        );
        assert!(after * 2 < before, "{after} of {before}");
    }

    #[test]
    fn server_filesystems_structured_content_names_its_field() {
        let value = json!({ "content": listing(5) + "\n" });
        let body = value.to_string();
        let c = classify(&body);
        assert!(may_apply(&c));
        let encoded = encode(&body, c.json.as_ref()).unwrap();
        assert!(
            encoded.starts_with("> [encoded: \"content\" as lines under \"/home/"),
            "{encoded}"
        );
        assert_eq!(decode(&encoded), Ok(DecodedBody::Json(value)));
    }

    #[test]
    fn declines_what_it_cannot_write_once() {
        assert_eq!(encode("/a/b/c\n/a/b/d", None), None, "too few lines");
        assert_eq!(encode("x/1\nx/2\nx/3", None), None, "prefix too short");
        assert_eq!(
            encode("/home/user/a\n/home/user/b\nother", None),
            None,
            "no shared start"
        );
        // The last line is the prefix itself and no line break follows.
        assert_eq!(
            encode("/home/user/a\n/home/user/b\n/home/user/", None),
            None
        );
        let two = json!({"a": "x\ny", "b": "z"});
        assert!(!may_apply(&classify(&two.to_string())));
    }

    #[test]
    fn altered_texts_fail() {
        let encoded = encode(&listing(4), None).unwrap();
        let cut = &encoded[..encoded.len() - 3];
        assert!(matches!(
            decode(cut),
            Err(TemplateDecodeError::Check { .. })
        ));
        let unchecked = format!("{}\nx", HINT);
        assert!(matches!(
            decode(&unchecked),
            Err(TemplateDecodeError::Check { .. })
        ));
        assert_eq!(decode("plain"), Err(TemplateDecodeError::NotEncoded));
    }

    proptest! {
        #[test]
        fn round_trips_or_declines(
            dir in "(/[a-z]{1,6}){2,4}/",
            names in prop::collection::vec("[a-z/\\\\é]{0,8}", 3..12),
            trailing in any::<bool>(),
        ) {
            let mut text = names.iter().map(|n| format!("{dir}{n}")).collect::<Vec<_>>().join("\n");
            if trailing {
                text.push('\n');
            }
            if let Some(encoded) = encode(&text, None) {
                prop_assert_eq!(decode(&encoded), Ok(DecodedBody::Text(text)));
            }
        }

        #[test]
        fn decode_never_panics(text in "> \\[encoded: lines under \"/[a-z]{0,4}\" #[0-9]{9}\\]\n[a-z\n]{0,30}") {
            let _ = decode(&text);
        }
    }
}
