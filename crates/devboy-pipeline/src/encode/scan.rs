//! A cursor over encoded text, shared by every decoder.
//!
//! Positions are byte offsets that always sit on a `char` boundary: the
//! cursor only ever moves past whole characters or past ASCII bytes it has
//! just matched, so slicing at `pos` cannot panic.

use super::FormatDecodeError;

/// A position in the text being decoded.
pub(super) struct Scanner<'a> {
    text: &'a str,
    pos: usize,
    /// The name a line value's leading `~` stands for, in braces, when the
    /// hint declares one (`~={url}`).
    tilde: Option<&'a str>,
    /// The text a line value's leading `^` stands for, when the hint
    /// declares one (`^=https://x/y`).
    caret: Option<&'a str>,
}

impl<'a> Scanner<'a> {
    /// A cursor at byte `start` of `text` (a `char` boundary).
    pub(super) fn new(text: &'a str, start: usize) -> Self {
        let pos = if text.is_char_boundary(start) {
            start
        } else {
            text.len()
        };
        Self {
            text,
            pos,
            tilde: None,
            caret: None,
        }
    }

    /// The same cursor, reading a line value's leading `~` as `{name}`
    /// and its leading `^` as `prefix`.
    pub(super) fn with_leads(self, name: Option<&'a str>, prefix: Option<&'a str>) -> Self {
        Self {
            tilde: name,
            caret: prefix,
            ..self
        }
    }

    /// The text a line value's leading `^` stands for, if declared.
    pub(super) fn caret(&self) -> Option<&'a str> {
        self.caret
    }

    /// The name a line value's leading `~` stands for, if declared.
    pub(super) fn tilde(&self) -> Option<&'a str> {
        self.tilde
    }

    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// Moves back to a position obtained from [`Scanner::pos`].
    pub(super) fn reset(&mut self, pos: usize) {
        if self.text.is_char_boundary(pos) {
            self.pos = pos;
        }
    }

    /// The length of the whole text, in bytes.
    pub(super) fn text_len(&self) -> usize {
        self.text.len()
    }

    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    /// Everything after the cursor.
    pub(super) fn rest(&self) -> &'a str {
        self.text.get(self.pos..).unwrap_or("")
    }

    /// The rest of the current line, without its `\n`.
    pub(super) fn line_rest(&self) -> &'a str {
        let rest = self.rest();
        match rest.find('\n') {
            Some(end) => &rest[..end],
            None => rest,
        }
    }

    pub(super) fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// Consumes `prefix` if the text continues with it.
    pub(super) fn eat(&mut self, prefix: &str) -> bool {
        if self.rest().starts_with(prefix) {
            self.pos += prefix.len();
            true
        } else {
            false
        }
    }

    /// Moves forward by `len` bytes of [`Scanner::rest`]; `len` must end on a
    /// `char` boundary of it (callers pass lengths of prefixes they sliced).
    pub(super) fn advance(&mut self, len: usize) {
        let target = self.pos.saturating_add(len).min(self.text.len());
        if self.text.is_char_boundary(target) {
            self.pos = target;
        }
    }

    /// Expects the end of a line: consumes a `\n`, or accepts the end of text.
    pub(super) fn end_line(&mut self) -> Result<(), FormatDecodeError> {
        if self.at_end() || self.eat("\n") {
            Ok(())
        } else {
            Err(self.error("expected the end of the line"))
        }
    }

    /// A syntax error at the cursor, with its 1-based line number.
    pub(super) fn error(&self, message: impl Into<String>) -> FormatDecodeError {
        let before = self.text.get(..self.pos).unwrap_or(self.text);
        FormatDecodeError::Syntax {
            line: before.matches('\n').count() + 1,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_over_lines() {
        let mut sc = Scanner::new("ab\ncd", 0);
        assert_eq!(sc.line_rest(), "ab");
        assert!(sc.eat("ab"));
        sc.end_line().unwrap();
        assert_eq!(sc.peek(), Some('c'));
        let at = sc.pos();
        sc.advance(2);
        assert!(sc.at_end());
        sc.end_line().unwrap();
        sc.reset(at);
        assert_eq!(sc.rest(), "cd");
        match sc.error("x") {
            FormatDecodeError::Syntax { line, .. } => assert_eq!(line, 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn never_lands_inside_a_char() {
        let mut sc = Scanner::new("é", 1);
        assert!(sc.at_end());
        sc.reset(0);
        sc.advance(1);
        assert_eq!(sc.pos(), 0);
    }
}
