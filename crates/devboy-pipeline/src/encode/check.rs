//! The check at the end of every hint line: what makes a cut or altered
//! encoding fail to decode instead of decoding to something else.
//!
//! Every text that opens with a `> [encoded: …]` hint line, whichever
//! encoder or template made it, ends that line with a check before its
//! `]`:
//!
//! ```text
//! > [encoded: csv; shared fields first #482193015]
//! ```
//!
//! `check = " #" 9DIGIT`: the first 64 bits of the SHA-256 of the text
//! *without* the check (hint words and body, every byte), big-endian,
//! modulo 10⁹, zero-padded. [`open`] recomputes it and refuses a text whose
//! check is missing or differs, so a decoder only ever parses text exactly
//! as it was encoded.
//!
//! Why a hash and nothing else: a row count or a length catches a cut, not
//! a changed byte, and every format here has lines that still parse when
//! cut or changed (a CSV cut inside `21.5` reads `21.`). A hash over the
//! whole text catches both; a cut, a flipped, inserted or deleted byte gets
//! past it with probability 10⁻⁹. A length next to it would name a cut as
//! such in the error, at 2–3 more tokens on every encoded result, and
//! decide nothing the hash does not.
//!
//! Why nine decimal digits: o200k splits digits in runs of three, each one
//! token, so the check costs exactly four tokens (` #` and three groups)
//! for 30 bits. Hex would spend a token on almost every character.
//!
//! A hint line without a check is refused, not trusted: nothing encoded is
//! stored anywhere (the model reads an encoding once; `devboy decode` reads
//! one a session just produced), and a cut that removes the check must not
//! turn the text into one that decodes unchecked.

use sha2::{Digest, Sha256};

use super::HINT_PREFIX;

/// What the check adds before the `]` of a hint line: this, then the
/// digits.
const MARK: &str = " #";

/// How many digits a check has.
const DIGITS: usize = 9;

/// Why a text failed its check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// The hint line does not end with a check.
    #[error(
        "the hint line has no check (` #` and {DIGITS} digits before its `]`): \
         the text was cut or edited, or made by an older devboy; encode the original again"
    )]
    Missing,
    /// The text does not hash to the hint's check.
    #[error(
        "checksum mismatch: the hint says #{expected}, the text gives #{found}; \
         it was cut short or changed after it was encoded"
    )]
    Mismatch {
        /// The check in the hint line.
        expected: String,
        /// The check of the text as given.
        found: String,
    },
}

/// A text that passed its check.
#[derive(Debug)]
pub(crate) struct Opened<'a> {
    /// The hint line as the encoder wrote it: without the check and the
    /// line break.
    pub(crate) hint: String,
    /// The checked text (without a line break added after it; see
    /// [`open`]).
    pub(crate) text: &'a str,
    /// Where the body starts in `text`: after the hint line's line break,
    /// or `None` when nothing follows the hint line.
    pub(crate) body_start: Option<usize>,
}

impl<'a> Opened<'a> {
    /// The text after the hint line, `""` when there is none.
    pub(crate) fn body(&self) -> &'a str {
        self.body_start
            .and_then(|start| self.text.get(start..))
            .unwrap_or("")
    }
}

/// The check of `unsealed` (a text without its check), in three pieces so
/// that [`open`] need not rebuild the text.
fn digits(pieces: [&str; 3]) -> String {
    let mut hasher = Sha256::new();
    for piece in pieces {
        hasher.update(piece.as_bytes());
    }
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let n = u64::from_be_bytes(first) % 10u64.pow(DIGITS as u32);
    format!("{n:0width$}", width = DIGITS)
}

/// `text` with its check added: `text` must open with a hint line
/// (`> [encoded: …]`) that has none yet. `None` otherwise.
pub fn seal(text: &str) -> Option<String> {
    let line_end = text.find('\n').unwrap_or(text.len());
    let line = &text[..line_end];
    if !line.starts_with(HINT_PREFIX) || split(line).is_some() {
        return None;
    }
    let before = line.strip_suffix(']')?;
    let check = digits([text, "", ""]);
    let mut out = String::with_capacity(text.len() + MARK.len() + DIGITS);
    out.push_str(before);
    out.push_str(MARK);
    out.push_str(&check);
    out.push_str(&text[before.len()..]);
    Some(out)
}

/// A hint line split around its check: the line up to the check, and the
/// digits. `None` when it does not end with one.
fn split(line: &str) -> Option<(&str, &str)> {
    let inner = line.strip_suffix(']')?;
    let at = inner.len().checked_sub(DIGITS)?;
    let digits = inner.get(at..)?;
    let before = inner.get(..at)?.strip_suffix(MARK)?;
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then_some((before, digits))
}

/// The hint line `line` without its check, or `None` if it has none.
/// Only looks: a decoder must still [`open`] the text.
pub(crate) fn unchecked_hint(line: &str) -> Option<String> {
    split(line).map(|(before, _)| format!("{before}]"))
}

/// `text` (sealed) with its check taken out, unverified: for a text shown
/// inside another whose own check covers it. `None` if it has none.
pub(crate) fn strip(text: &str) -> Option<String> {
    let line_end = text.find('\n').unwrap_or(text.len());
    let (before, _) = split(&text[..line_end])?;
    Some(format!("{before}{}", &text[line_end - 1..]))
}

/// Checks a text that opens with a hint line. One line break after the
/// text is ignored when the text matches without it: `devboy encode` ends
/// its output with one for the terminal, and the original comes back
/// either way.
pub(crate) fn open(text: &str) -> Result<Opened<'_>, CheckError> {
    let line_end = text.find('\n');
    let line = &text[..line_end.unwrap_or(text.len())];
    let (before, expected) = split(line).ok_or(CheckError::Missing)?;
    let opened = |text: &str| {
        let rest = &text[line.len()..];
        let found = digits([before, "]", rest]);
        let body_start = (!rest.is_empty()).then_some(line.len() + 1);
        (found, body_start)
    };
    let (found, body_start) = opened(text);
    if found == expected {
        return Ok(Opened {
            hint: format!("{before}]"),
            text,
            body_start,
        });
    }
    if let Some(trimmed) = text.strip_suffix('\n') {
        let (again, body_start) = opened(trimmed);
        if again == expected {
            return Ok(Opened {
                hint: format!("{before}]"),
                text: trimmed,
                body_start,
            });
        }
    }
    Err(CheckError::Mismatch {
        expected: expected.to_owned(),
        found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_open() {
        let text = "> [encoded: csv; note]\na,b\n1,2";
        let sealed = seal(text).unwrap();
        let (line, body) = sealed.split_once('\n').unwrap();
        assert!(line.starts_with("> [encoded: csv; note #"), "{line}");
        assert_eq!(line.len(), "> [encoded: csv; note]".len() + 2 + DIGITS);
        assert_eq!(body, "a,b\n1,2");
        let opened = open(&sealed).unwrap();
        assert_eq!(opened.hint, "> [encoded: csv; note]");
        assert_eq!(opened.body(), "a,b\n1,2");
        assert_eq!(unchecked_hint(line).as_deref(), Some(opened.hint.as_str()));
        // A line break added after the text is tolerated.
        let plus = format!("{sealed}\n");
        assert_eq!(open(&plus).unwrap().body(), "a,b\n1,2");
        // Only a hint line without a check can be sealed.
        assert_eq!(seal(&sealed), None);
        assert_eq!(seal("a,b"), None);
        assert_eq!(seal("> [encoded: csv"), None);
    }

    #[test]
    fn a_hint_alone_seals() {
        let sealed = seal("> [encoded: kv]").unwrap();
        let opened = open(&sealed).unwrap();
        assert_eq!((opened.body_start, opened.body()), (None, ""));
        let with_break = seal("> [encoded: kv]\n").unwrap();
        assert_eq!(
            open(&with_break).unwrap().body_start,
            Some(with_break.len())
        );
    }

    #[test]
    fn cuts_and_changes_fail() {
        let sealed = seal("> [encoded: csv]\nid,t\n1,21.5\n2,x").unwrap();
        let cut = &sealed[..sealed.len() - 5];
        assert!(matches!(open(cut), Err(CheckError::Mismatch { .. })));
        let changed = sealed.replace("21.5", "21.6");
        let err = open(&changed).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("checksum mismatch: the hint says #"));
        // The hint words are covered too.
        let renamed = sealed.replace("csv", "kv");
        assert!(open(&renamed).is_err());
        assert_eq!(
            open("> [encoded: csv]\na\n1").unwrap_err(),
            CheckError::Missing
        );
        assert_eq!(
            open("> [encoded: csv #12345678]\na").unwrap_err(),
            CheckError::Missing
        );
    }
}
