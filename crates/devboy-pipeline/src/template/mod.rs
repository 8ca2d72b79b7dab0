//! L1 templates: whole-body text re-encodings, each an exact round trip.
//!
//! A template rewrites a body into a form that costs the model fewer tokens
//! and reads naturally, and that [`decode`] turns back into the original:
//! byte for byte for text, as an equal [`Value`] (same keys in the same
//! order) for JSON. Five exist:
//!
//! - [`md_tables`]: every top-level Markdown (GFM) table of a document
//!   becomes a fenced CSV block; all other text stays as it was.
//! - [`fenced_fields`]: a JSON object or array whose string leaves hold
//!   multi-line text (diffs, code, stack traces, long Markdown) becomes
//!   `path: value` lines, with each multi-line string in a fenced block as
//!   raw text, so its `\n` and `\"` escapes no longer cost tokens.
//! - [`json_text`]: a JSON object with a string field that holds a JSON
//!   document as serialized text (`{"content": "[\n  {…"}`, exactly as
//!   serde_json or `JSON.stringify` write it, indented or compact) has that
//!   field parsed, and the object shown in its cheapest lossless encoding
//!   under a line naming the field and the layout of its text.
//! - [`line_prefix`]: lines that all start with the same directory (a
//!   search's paths, a listing) have that start written once, in the hint.
//! - [`records`]: repeated blocks of `Key: value` lines (a git log) become
//!   one CSV table with the keys, and any value all blocks share, once.
//!
//! Every encoded text opens with a one-line hint, `> [encoded: …]`, that
//! tells the model what it is reading and tells [`decode`] which template
//! to invert ([`Template::hint`]); like every hint line it ends with a
//! [check](crate::encode::check) over the whole text (`… #482193015]`), so
//! a cut or altered text fails to decode. The grammar of each template is stated
//! in its module docs; it is the decoder's specification.
//!
//! **Invariant 1 of docs/invariants.md:** an encoder returns `Some` only after it has
//! decoded its own output and found the original. Any input it cannot
//! reproduce exactly it declines with `None`. Encoders never panic, and
//! [`decode`] never panics on any text.
//!
//! Whether a template is *worth* applying is the router's question: these
//! encoders do not count tokens, and an encoding may cost more than the
//! original (a small table pays for its hint line and fence).

use std::fmt;

use serde_json::Value;

use crate::encode::check::{self, CheckError};
use crate::shape::{Classified, Shape};

mod csv;
pub mod fenced_fields;
pub mod json_text;
pub mod line_prefix;
pub mod md_tables;
pub mod records;

/// One of the L1 templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Template {
    /// Markdown tables as fenced CSV, surrounding text kept: [`md_tables`].
    MdTables,
    /// JSON as `path: value` lines with multi-line strings fenced:
    /// [`fenced_fields`].
    FencedFields,
    /// A JSON document held as text in an object's string field, shown
    /// parsed: [`json_text`].
    JsonText,
    /// Lines sharing a directory prefix, the prefix written once:
    /// [`line_prefix`].
    LinePrefix,
    /// Repeated `Key: value` blocks as one table: [`records`].
    Records,
}

impl Template {
    /// Every template.
    pub const ALL: [Template; 5] = [
        Template::MdTables,
        Template::FencedFields,
        Template::JsonText,
        Template::LinePrefix,
        Template::Records,
    ];

    /// A short, stable name for telemetry and configuration.
    pub fn name(self) -> &'static str {
        match self {
            Self::MdTables => "md_tables_csv",
            Self::FencedFields => "fenced_fields",
            Self::JsonText => "json_text",
            Self::LinePrefix => "line_prefix",
            Self::Records => "records_csv",
        }
    }

    /// The first line of every text this template encodes, without its
    /// [check](crate::encode::check) and line break. It is how [`decode`]
    /// recognizes the template. For
    /// [`Template::JsonText`], whose hint names the field and the layout,
    /// the one for an indented field called `content` (the commonest).
    pub fn hint(self) -> &'static str {
        match self {
            Self::MdTables => md_tables::HINT,
            Self::FencedFields => fenced_fields::HINT,
            Self::JsonText => json_text::HINT,
            Self::LinePrefix => line_prefix::HINT,
            Self::Records => records::HINT,
        }
    }

    /// The template whose hint is exactly `line`.
    pub fn from_hint(line: &str) -> Option<Template> {
        if json_text::is_hint(line) {
            return Some(Template::JsonText);
        }
        if line_prefix::is_hint(line) {
            return Some(Template::LinePrefix);
        }
        Self::ALL.into_iter().find(|t| t.hint() == line)
    }

    /// A cheap pre-check on a classified body: `false` means
    /// [`Template::encode`] would certainly decline it.
    pub fn may_apply(self, classified: &Classified) -> bool {
        match self {
            Self::MdTables => classified.shape == Shape::MarkdownTable,
            Self::FencedFields => {
                matches!(classified.json, Some(Value::Object(_) | Value::Array(_)))
            }
            Self::JsonText => json_text::may_apply(classified),
            Self::LinePrefix => line_prefix::may_apply(classified),
            Self::Records => records::may_apply(classified),
        }
    }

    /// Encodes a body: its text, and its parsed JSON when it is JSON (see
    /// [`Classified::json`]). `None` when the template declines.
    pub fn encode(self, body: &str, json: Option<&Value>) -> Option<String> {
        match self {
            Self::MdTables => md_tables::encode(body),
            Self::FencedFields => json.and_then(fenced_fields::encode),
            Self::JsonText => json.and_then(json_text::encode),
            Self::LinePrefix => line_prefix::encode(body, json),
            Self::Records => json.is_none().then(|| records::encode(body)).flatten(),
        }
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`decode`] gives back: the original text, or the original JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodedBody {
    /// A text body, byte for byte.
    Text(String),
    /// A JSON body, as a value equal to the original (keys in order).
    Json(Value),
}

/// Why [`decode`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateDecodeError {
    /// The first line is not the hint of any template: the text was not
    /// encoded by one, and another decoder may apply.
    #[error("no L1 template hint on the first line")]
    NotEncoded,
    /// The text carries a template's hint but fails its check: it was cut
    /// or altered after it was encoded, or has no check.
    #[error("{template}: {error}")]
    Check {
        /// The template whose hint the text carries.
        template: Template,
        /// What the check found.
        error: CheckError,
    },
    /// The text carries a template's hint but breaks its grammar.
    #[error("{template}: line {line}: {reason}")]
    Malformed {
        /// The template whose hint the text carries.
        template: Template,
        /// The 1-based line of the encoded text where decoding failed.
        line: usize,
        /// What was wrong there.
        reason: &'static str,
    },
}

/// Decodes a text encoded by any template, recognized by its hint line.
///
/// ```
/// use devboy_pipeline::template::{decode, md_tables, DecodedBody, TemplateDecodeError};
///
/// let doc = "Issues:\n\n| # | title |\n|---|---|\n| 1 | a, b |\n";
/// let encoded = md_tables::encode(doc).expect("a plain table");
/// assert_eq!(encoded, "> [encoded: md tables as csv #880237068]\nIssues:\n\n```csv\n#,title\n1,\"a, b\"\n```\n");
/// assert_eq!(decode(&encoded), Ok(DecodedBody::Text(doc.to_string())));
/// assert_eq!(decode("plain text"), Err(TemplateDecodeError::NotEncoded));
/// // Cut short, it no longer decodes.
/// assert!(matches!(decode(&encoded[..encoded.len() - 5]), Err(TemplateDecodeError::Check { .. })));
/// ```
pub fn decode(text: &str) -> Result<DecodedBody, TemplateDecodeError> {
    match hinted(text) {
        Some(Template::MdTables) => md_tables::decode(text).map(DecodedBody::Text),
        Some(Template::FencedFields) => fenced_fields::decode(text).map(DecodedBody::Json),
        Some(Template::JsonText) => json_text::decode(text).map(DecodedBody::Json),
        Some(Template::LinePrefix) => line_prefix::decode(text),
        Some(Template::Records) => records::decode(text).map(DecodedBody::Text),
        None => Err(TemplateDecodeError::NotEncoded),
    }
}

/// The template whose hint opens `text`, judged by its words alone (the
/// caller still checks the text), or `None`.
fn hinted(text: &str) -> Option<Template> {
    let first = text.split('\n').next().unwrap_or_default();
    match check::unchecked_hint(first) {
        Some(hint) => Template::from_hint(&hint),
        // A template's hint without a check: its decoder refuses it.
        None => Template::from_hint(first),
    }
}

/// The body of a text that opens with `template`'s hint line and passes
/// its check: the text after the hint line, `""` when there is none.
fn checked_body(text: &str, template: Template) -> Result<&str, TemplateDecodeError> {
    if hinted(text) != Some(template) {
        return Err(TemplateDecodeError::NotEncoded);
    }
    let opened =
        check::open(text).map_err(|error| TemplateDecodeError::Check { template, error })?;
    Ok(opened.body())
}

/// A backtick fence that no line of `content` can close: three backticks,
/// or one more than the longest run of backticks anywhere in `content`.
fn fence_for(content: &str) -> String {
    let mut longest = 0usize;
    let mut run = 0usize;
    for b in content.bytes() {
        if b == b'`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat(longest.saturating_add(1).max(3))
}

/// The number of backticks a line opens with.
fn leading_backticks(line: &str) -> usize {
    line.bytes().take_while(|b| *b == b'`').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_distinct_and_round_trip() {
        for t in Template::ALL {
            assert_eq!(Template::from_hint(t.hint()), Some(t));
            assert!(t.hint().starts_with("> [encoded: ") && t.hint().ends_with(']'));
        }
        assert_ne!(Template::MdTables.hint(), Template::FencedFields.hint());
        assert_eq!(Template::MdTables.name(), "md_tables_csv");
        assert_eq!(Template::FencedFields.to_string(), "fenced_fields");
    }

    /// The design goal: a hint costs about 15 o200k tokens or fewer. Its
    /// check adds 4 (pinned in `encode`).
    #[test]
    fn hints_are_cheap() {
        for t in Template::ALL {
            let cost = crate::Tokenizer::O200k.count(t.hint());
            eprintln!("{t}: {cost} tokens");
            assert!(cost <= 15, "{t}: {cost} tokens");
        }
    }

    #[test]
    fn fences_outgrow_their_content() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ``` b"), "````");
        assert_eq!(fence_for("``````"), "```````");
        assert_eq!(fence_for("` `` `"), "```");
    }

    #[test]
    fn decode_needs_an_exact_hint_line() {
        assert_eq!(decode(""), Err(TemplateDecodeError::NotEncoded));
        assert_eq!(
            decode("> [encoded: other]\nx"),
            Err(TemplateDecodeError::NotEncoded)
        );
        assert_eq!(
            decode(" > [encoded: md tables as csv]\nx"),
            Err(TemplateDecodeError::NotEncoded)
        );
        let text = format!("{}\nplain", md_tables::HINT);
        assert_eq!(
            decode(&check::seal(&text).unwrap()),
            Ok(DecodedBody::Text("plain".into()))
        );
        // A template's hint without a check is refused, not passed on.
        for t in Template::ALL {
            let text = format!("{}\nplain", t.hint());
            assert_eq!(
                decode(&text),
                Err(TemplateDecodeError::Check {
                    template: t,
                    error: CheckError::Missing
                })
            );
        }
    }

    #[test]
    fn dispatch_by_classification() {
        let c = crate::shape::classify(r#"{"patch":"@@ -1 +1 @@\n-a\n+b"}"#);
        assert!(Template::FencedFields.may_apply(&c));
        assert!(!Template::MdTables.may_apply(&c));
        let encoded = Template::FencedFields
            .encode("", c.json.as_ref())
            .expect("a multi-line leaf");
        assert_eq!(decode(&encoded), Ok(DecodedBody::Json(c.json.unwrap())));
    }
}
