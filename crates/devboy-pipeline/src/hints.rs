//! Every hint line the model may see, written and read in one place.
//!
//! A hint is one line that starts `> [` and tells the model what it is
//! looking at:
//!
//! | kind            | line                                                        |
//! |-----------------|-------------------------------------------------------------|
//! | id              | `> [id: kafrum3]`                                           |
//! | reference       | `> [ref: kafrum3, unchanged; devboy_expand kafrum3]`        |
//! | near reference  | `> [near-ref: kafrum3, changed below; devboy_expand kafrum4]` |
//! | elided          | `> [elided 3 of 40 fields (a, b, c); all: devboy_expand kafrum3]` |
//! | elided range    | `> [elided lines 812-3094 of 3094; devboy_expand kafrum3 lines=812-3094]` |
//! | encoded         | `> [encoded: csv; shared fields first #123456789]`          |
//!
//! An encoded header ends with the [check](crate::encode::check) of the
//! whole text (` #` and nine digits) before its `]`. What the pipeline
//! emitted for a result is reported as data ([`HintSet`] on
//! [`Processed`](crate::result_pipeline::Processed)), never read back from the text.

use std::fmt::Display;

/// The start of every encoded header (an L1 template's or an L2 format's).
pub const ENCODED_PREFIX: &str = "> [encoded: ";

/// One kind of hint line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HintKind {
    /// The id line after a fresh body.
    Id,
    /// A repeat replaced by a reference.
    Reference,
    /// A near repeat replaced by its changes.
    NearReference,
    /// Parts of a body left out to fit the budget.
    Elided,
    /// The header of a re-encoded body.
    Encoded,
}

impl HintKind {
    /// Every kind.
    pub const ALL: [HintKind; 5] = [
        HintKind::Id,
        HintKind::Reference,
        HintKind::NearReference,
        HintKind::Elided,
        HintKind::Encoded,
    ];

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// The kinds of hint one result carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HintSet(u8);

impl HintSet {
    /// No hints.
    pub const EMPTY: HintSet = HintSet(0);

    /// This set with `kind` in it.
    pub fn with(self, kind: HintKind) -> Self {
        HintSet(self.0 | kind.bit())
    }

    /// This set without `kind`.
    pub fn without(self, kind: HintKind) -> Self {
        HintSet(self.0 & !kind.bit())
    }

    /// Whether `kind` is in the set.
    pub fn contains(self, kind: HintKind) -> bool {
        self.0 & kind.bit() != 0
    }

    /// The kinds in the set, in [`HintKind::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = HintKind> {
        HintKind::ALL.into_iter().filter(move |k| self.contains(*k))
    }
}

/// The line appended to a fresh body.
pub fn id_line(id: impl Display) -> String {
    format!("> [id: {id}]")
}

/// The id an [`id_line`] names.
pub fn parse_id_line(line: &str) -> Option<&str> {
    line.strip_prefix("> [id: ")?.strip_suffix(']')
}

/// The line that stands in for a repeated body.
pub fn reference(id: impl Display) -> String {
    format!("> [ref: {id}, unchanged; devboy_expand {id}]")
}

/// The id a [`reference`] names.
pub fn parse_reference(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("> [ref: ")?;
    let (id, rest) = rest.split_once(", unchanged; devboy_expand ")?;
    (rest.strip_suffix(']')? == id).then_some(id)
}

/// The line that starts a near-duplicate: the earlier delivery the change
/// lines below it apply to, and the id of the whole new body (19 o200k
/// tokens, pinned in `tokens.rs`).
pub fn near_reference(base: impl Display, id: impl Display) -> String {
    format!("> [near-ref: {base}, changed below; devboy_expand {id}]")
}

/// `(base, id)` of a [`near_reference`] line.
pub fn parse_near_reference(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("> [near-ref: ")?;
    let (base, rest) = rest.split_once(", changed below; devboy_expand ")?;
    Some((base, rest.strip_suffix(']')?))
}

/// The line after a result whose parts are references: the id of the
/// whole result as the tool returned it.
pub fn whole(id: impl Display) -> String {
    format!("> [whole result: devboy_expand {id}]")
}

/// The line after an elided body: how many of how many units (`noun`)
/// are left out, which (`which`), and the id of the whole.
pub fn elided(count: usize, of: usize, noun: &str, which: &str, id: impl Display) -> String {
    format!("> [elided {count} of {of} {noun} ({which}); all: devboy_expand {id}]")
}

/// The line standing for one contiguous range of lines (1-based) or
/// items (0-based indices) left out, `first..=last` of `of`, and the call
/// that gives exactly that range back:
/// `> [elided lines 812-3094 of 3094; devboy_expand kafrum4 lines=812-3094]`.
pub fn elided_range(noun: &str, first: usize, last: usize, of: usize, id: impl Display) -> String {
    let range = if first == last {
        first.to_string()
    } else {
        format!("{first}-{last}")
    };
    format!("> [elided {noun} {range} of {of}; devboy_expand {id} {noun}={range}]")
}

/// The id an [`elided`] or [`elided_range`] line names.
pub fn parse_elided(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("> [elided ")?.strip_suffix(']')?;
    if let Some((_, id)) = rest.rsplit_once("; all: devboy_expand ") {
        return Some(id);
    }
    let (_, call) = rest.rsplit_once("; devboy_expand ")?;
    let (id, range) = call.split_once(' ')?;
    let (noun, _) = range.split_once('=')?;
    matches!(noun, "lines" | "items").then_some(id)
}

/// An encoded header without its check: `> [encoded: {description}]`.
pub fn encoded_header(description: &str) -> String {
    format!("{ENCODED_PREFIX}{description}]")
}

/// Whether `line` is an encoded header (with or without its check).
pub fn is_encoded_header(line: &str) -> bool {
    line.starts_with(ENCODED_PREFIX) && line.ends_with(']')
}

/// The kind of hint `line` is, if it is one.
pub fn kind_of(line: &str) -> Option<HintKind> {
    if parse_id_line(line).is_some() {
        Some(HintKind::Id)
    } else if parse_reference(line).is_some() {
        Some(HintKind::Reference)
    } else if parse_near_reference(line).is_some() {
        Some(HintKind::NearReference)
    } else if parse_elided(line).is_some() {
        Some(HintKind::Elided)
    } else if is_encoded_header(line) {
        Some(HintKind::Encoded)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_parses_back_to_what_it_was_made_from() {
        assert_eq!(parse_id_line(&id_line("kafrum3")), Some("kafrum3"));
        assert_eq!(parse_reference(&reference("kafrum3")), Some("kafrum3"));
        assert_eq!(
            parse_near_reference(&near_reference("kafrum3", "kafrum4")),
            Some(("kafrum3", "kafrum4"))
        );
        let line = elided(3, 40, "items", "31-40", "kafrum3");
        assert_eq!(
            line,
            "> [elided 3 of 40 items (31-40); all: devboy_expand kafrum3]"
        );
        assert_eq!(parse_elided(&line), Some("kafrum3"));
        let line = elided_range("lines", 812, 3094, 3094, "kafrum4");
        assert_eq!(
            line,
            "> [elided lines 812-3094 of 3094; devboy_expand kafrum4 lines=812-3094]"
        );
        assert_eq!(parse_elided(&line), Some("kafrum4"));
        let line = elided_range("items", 7, 7, 8, "kafrum5");
        assert_eq!(
            line,
            "> [elided items 7 of 8; devboy_expand kafrum5 items=7]"
        );
        assert_eq!(parse_elided(&line), Some("kafrum5"));
        assert!(is_encoded_header(&encoded_header("csv")));
        assert!(is_encoded_header("> [encoded: csv #123456789]"));
        for (line, kind) in [
            (id_line("a1"), HintKind::Id),
            (reference("a1"), HintKind::Reference),
            (near_reference("a1", "a2"), HintKind::NearReference),
            (elided(1, 2, "lines", "2", "a1"), HintKind::Elided),
            (encoded_header("kv"), HintKind::Encoded),
        ] {
            assert_eq!(kind_of(&line), Some(kind), "{line}");
        }
        assert_eq!(kind_of("> [ref: a1, unchanged; devboy_expand a2]"), None);
        assert_eq!(kind_of("[id: a1]"), None);
    }

    #[test]
    fn a_set_holds_what_was_put_in() {
        let set = HintSet::EMPTY
            .with(HintKind::Id)
            .with(HintKind::Encoded)
            .without(HintKind::Id);
        assert_eq!(set.iter().collect::<Vec<_>>(), [HintKind::Encoded]);
        assert!(!set.contains(HintKind::Elided));
    }
}
