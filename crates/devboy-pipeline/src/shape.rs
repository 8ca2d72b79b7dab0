//! The shape of a tool-result body, and the formats hidden inside it.
//!
//! Every later decision (which L1 template applies, which L2 formats are
//! eligible, what telemetry records) starts from two facts about a body:
//! its [`Shape`] (an array of records? a flat object? a Markdown table?) and
//! the [`InnerFormats`] its text carries (URLs, log lines, hashes, diffs, …).
//! [`classify`] finds both with one JSON parse and, for text, one Markdown
//! parse, and hands the parsed [`Value`] back so no caller parses twice.
//!
//! # Shapes
//!
//! A body that parses as JSON (surrounding whitespace allowed) gets a JSON
//! shape; anything else gets a text shape. The rules, in order:
//!
//! | shape | JSON rule |
//! |---|---|
//! | `empty` | `{}` or `[]` |
//! | `array_of_objects` | a non-empty array whose elements are all objects |
//! | `array_of_scalars` | a non-empty array whose elements are all scalars (string, number, bool, null) |
//! | `mixed_array` | any other array (arrays of arrays, objects mixed with scalars) |
//! | `flat_object` | a non-empty object whose values are all scalars |
//! | `nested_object` | any other object; [`Shape::NestedObject::wraps`] names the one member holding a non-empty array of objects, when exactly one does (`{"total_count": 2, "items": [{…}, {…}]}` wraps `items`) |
//! | `json_scalar` | a string, number, bool or null at the top |
//!
//! | shape | text rule |
//! |---|---|
//! | `empty` | nothing but whitespace |
//! | `markdown_table` | a GFM table anywhere in the document (so the Markdown-table template is tried on every text it could convert) |
//! | `code_or_diff` | a unified diff: the first non-blank line starts with `diff --git `, `--- `, `Index: ` or a hunk header `@@ -a,b +c,d @@`, and some line is a hunk header |
//! | `code_or_diff` | fenced or indented code blocks cover at least half of the bytes of the top-level blocks, or at least half of the non-blank lines (and at least two) look like code (see [`looks_like_code`]) |
//! | `markdown_list` | top-level lists cover at least half of the bytes of the top-level blocks |
//! | `prose` | anything else |
//!
//! # Inner formats
//!
//! For JSON, every string leaf is scanned; for text, the body itself. Each
//! scan reads at most [`LEAF_SCAN_CAP`] bytes of a leaf ([`TEXT_SCAN_CAP`]
//! of a text body), so the whole classification is linear in the body size
//! however the text is laid out. The detectors are listed on
//! [`InnerFormat`]. They are cheap, line-local tests meant for routing and
//! telemetry, not validators: a false positive costs a template attempt
//! that declines, never correctness.

use std::fmt;

use pulldown_cmark::{Event, Options, Parser, Tag};
use serde_json::Value;

/// How many bytes of one JSON string leaf the inner-format scan reads.
pub const LEAF_SCAN_CAP: usize = 4 * 1024;

/// How many bytes of a text body the inner-format scan reads.
pub const TEXT_SCAN_CAP: usize = 64 * 1024;

/// The overall layout of a body. See the [module docs](self) for the
/// exact rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A JSON array of objects: records, the natural input of a table.
    ArrayOfObjects,
    /// A JSON object whose values are all scalars.
    FlatObject,
    /// A JSON object with at least one object or array value.
    NestedObject {
        /// The key of the only member that holds a non-empty array of
        /// objects, if exactly one member does: the object "wraps" that
        /// array (search results, paginated lists).
        wraps: Option<String>,
    },
    /// A JSON array of strings, numbers, bools and nulls.
    ArrayOfScalars,
    /// Any other non-empty JSON array.
    MixedArray,
    /// A bare JSON string, number, bool or null.
    JsonScalar,
    /// Text containing at least one GFM (pipe) table.
    MarkdownTable,
    /// Text made mostly of Markdown list items.
    MarkdownList,
    /// Source code, a unified diff, or text made mostly of code blocks.
    CodeOrDiff,
    /// Any other text.
    Prose,
    /// Whitespace only, `{}` or `[]`.
    Empty,
}

impl Shape {
    /// A short, stable name for telemetry and reports (`array_of_objects`,
    /// `nested_object`, …). [`Shape::NestedObject`] names its kind only, not
    /// the wrapped key, which may be content.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ArrayOfObjects => "array_of_objects",
            Self::FlatObject => "flat_object",
            Self::NestedObject { .. } => "nested_object",
            Self::ArrayOfScalars => "array_of_scalars",
            Self::MixedArray => "mixed_array",
            Self::JsonScalar => "json_scalar",
            Self::MarkdownTable => "markdown_table",
            Self::MarkdownList => "markdown_list",
            Self::CodeOrDiff => "code_or_diff",
            Self::Prose => "prose",
            Self::Empty => "empty",
        }
    }

    /// Whether this is one of the JSON shapes (the body parsed as JSON).
    /// [`Shape::Empty`] counts as neither; check [`Classified::json`].
    pub fn is_json(&self) -> bool {
        matches!(
            self,
            Self::ArrayOfObjects
                | Self::FlatObject
                | Self::NestedObject { .. }
                | Self::ArrayOfScalars
                | Self::MixedArray
                | Self::JsonScalar
        )
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A format found inside a body's text: in a JSON string leaf, or in a text
/// body. Each detector looks at single lines (or, for [`InnerFormat::Url`],
/// [`InnerFormat::Hash`], [`InnerFormat::Html`] and [`InnerFormat::Json`],
/// the scanned text as a whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InnerFormat {
    /// `http://` or `https://` followed by a non-space character.
    Url,
    /// A line that opens (after an optional `[`) with an ISO date and time
    /// (`2024-05-01T12:00` or `2024-05-01 12:00`), or a clock time
    /// (`12:00:01`), followed by a space and more text; or a line that opens
    /// (after an optional `[`) with an upper-case level (`TRACE`, `DEBUG`,
    /// `INFO`, `WARN`, `WARNING`, `ERROR`, `FATAL`, `CRITICAL`) followed by
    /// `]`, `:` or a space. A bare timestamp string is not a log line.
    LogLine,
    /// A whole word of exactly 40 or 64 hex digits with at least one letter
    /// and one digit: a SHA-1 (git object id) or SHA-256.
    Hash,
    /// A unified diff hunk header line `@@ -a[,b] +c[,d] @@`, or a line
    /// starting with `diff --git `.
    Diff,
    /// A GFM delimiter row (only `|`, `:`, `-`, spaces and tabs, with at
    /// least one `|` and one `-`) right after a line containing `|`.
    MarkdownTable,
    /// `Traceback (most recent call last):`, `panicked at `,
    /// `stack backtrace:`, a Python frame line `File "…", line N`, a Go
    /// `goroutine N [` header, or two indented frame lines starting with
    /// `at ` (JavaScript, Java, C#).
    StackTrace,
    /// A Markdown code fence: a line opening, after at most three spaces,
    /// with ```` ``` ```` or `~~~`.
    CodeFence,
    /// JSON inside a string: the trimmed leaf starts with `{` or `[` and
    /// parses as JSON (for leaves longer than [`LEAF_SCAN_CAP`], the scanned
    /// prefix is valid JSON cut short). Not reported for text bodies.
    Json,
    /// HTML: a closing tag `</name>` or a `<br>`/`<br/>` line break.
    Html,
}

impl InnerFormat {
    /// Every inner format, in bit order.
    pub const ALL: [InnerFormat; 9] = [
        Self::Url,
        Self::LogLine,
        Self::Hash,
        Self::Diff,
        Self::MarkdownTable,
        Self::StackTrace,
        Self::CodeFence,
        Self::Json,
        Self::Html,
    ];

    /// A short, stable name for telemetry (`url`, `log_line`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::Url => "url",
            Self::LogLine => "log_line",
            Self::Hash => "hash",
            Self::Diff => "diff",
            Self::MarkdownTable => "markdown_table",
            Self::StackTrace => "stack_trace",
            Self::CodeFence => "code_fence",
            Self::Json => "json",
            Self::Html => "html",
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

impl fmt::Display for InnerFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`InnerFormat`]s, as a bitset.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct InnerFormats(u16);

impl InnerFormats {
    /// The empty set.
    pub const EMPTY: InnerFormats = InnerFormats(0);

    /// Whether `format` is in the set.
    pub fn contains(self, format: InnerFormat) -> bool {
        self.0 & format.bit() != 0
    }

    /// Adds `format` to the set.
    pub fn insert(&mut self, format: InnerFormat) {
        self.0 |= format.bit();
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// How many formats the set holds.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The formats in the set, in [`InnerFormat::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = InnerFormat> {
        InnerFormat::ALL
            .into_iter()
            .filter(move |f| self.contains(*f))
    }

    /// The union of two sets.
    pub fn union(self, other: InnerFormats) -> InnerFormats {
        InnerFormats(self.0 | other.0)
    }

    /// Whether every format is in the set, so scanning more leaves can add
    /// nothing.
    fn is_full(self) -> bool {
        self.len() == InnerFormat::ALL.len()
    }
}

impl FromIterator<InnerFormat> for InnerFormats {
    fn from_iter<I: IntoIterator<Item = InnerFormat>>(iter: I) -> Self {
        let mut set = InnerFormats::EMPTY;
        for f in iter {
            set.insert(f);
        }
        set
    }
}

impl fmt::Debug for InnerFormats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(InnerFormat::name))
            .finish()
    }
}

/// What [`classify`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    /// The body's layout.
    pub shape: Shape,
    /// The formats found in its string leaves (JSON) or its text.
    pub inner: InnerFormats,
    /// The parsed body, when it is JSON that a value carries exactly
    /// ([`crate::exact::carries`]), so callers need not parse again. A JSON
    /// body with a key written twice has its JSON shape and no value.
    pub json: Option<Value>,
}

/// Classifies a tool-result body: parses it once as JSON (falling back to
/// text) and reports its [`Shape`], its [`InnerFormats`] and the parsed
/// value. Never panics; linear in the size of `body`.
///
/// ```
/// use devboy_pipeline::shape::{classify, InnerFormat, Shape};
///
/// let c = classify(r#"{"total_count":1,"items":[{"sha":"6dcb09b5b57875f334f61aebed695e2e4193db5e"}]}"#);
/// assert_eq!(c.shape, Shape::NestedObject { wraps: Some("items".into()) });
/// assert!(c.inner.contains(InnerFormat::Hash));
/// assert!(c.json.is_some());
///
/// let c = classify("| a | b |\n|---|---|\n| 1 | 2 |\n");
/// assert_eq!(c.shape.name(), "markdown_table");
/// ```
pub fn classify(body: &str) -> Classified {
    if body.trim().is_empty() {
        let mut inner = InnerFormats::EMPTY;
        scan_text(body, &mut inner);
        return Classified {
            shape: Shape::Empty,
            inner,
            json: None,
        };
    }
    if could_be_json(body) {
        if let Ok(value) = serde_json::from_str::<Value>(body) {
            if crate::exact::carries(body, &value) {
                return classify_json(value);
            }
            // A key written twice or an exponent written `E`: no value
            // carries this body, so nothing may re-encode it as JSON
            // (invariant 12). It keeps its shape, and stays text.
            return Classified {
                json: None,
                ..classify_json(value)
            };
        }
    }
    let mut inner = InnerFormats::EMPTY;
    scan_text(cap(body, TEXT_SCAN_CAP), &mut inner);
    inner = InnerFormats(inner.0 & !InnerFormat::Json.bit());
    Classified {
        shape: text_shape(body),
        inner,
        json: None,
    }
}

/// Classifies an already parsed JSON body (for example a result's
/// `structuredContent`). The same rules as [`classify`].
pub fn classify_json(value: Value) -> Classified {
    let shape = json_shape(&value);
    let inner = json_inner(&value);
    Classified {
        shape,
        inner,
        json: Some(value),
    }
}

/// Whether the first non-whitespace byte could start a JSON value, so that
/// prose never pays for a failed parse beyond its first byte.
fn could_be_json(body: &str) -> bool {
    matches!(
        body.trim_start().as_bytes().first(),
        Some(b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n')
    )
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

fn is_array_of_objects(v: &Value) -> bool {
    matches!(v, Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object))
}

fn json_shape(value: &Value) -> Shape {
    match value {
        Value::Array(items) if items.is_empty() => Shape::Empty,
        Value::Array(items) if items.iter().all(Value::is_object) => Shape::ArrayOfObjects,
        Value::Array(items) if items.iter().all(is_scalar) => Shape::ArrayOfScalars,
        Value::Array(_) => Shape::MixedArray,
        Value::Object(map) if map.is_empty() => Shape::Empty,
        Value::Object(map) if map.values().all(is_scalar) => Shape::FlatObject,
        Value::Object(map) => {
            let mut wrapped = map.iter().filter(|(_, v)| is_array_of_objects(v));
            let wraps = match (wrapped.next(), wrapped.next()) {
                (Some((key, _)), None) => Some(key.clone()),
                _ => None,
            };
            Shape::NestedObject { wraps }
        }
        _ => Shape::JsonScalar,
    }
}

/// Scans every string leaf (not keys) with an explicit stack: no recursion
/// however deep the value.
fn json_inner(value: &Value) -> InnerFormats {
    let mut found = InnerFormats::EMPTY;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if !found.is_full() => scan_leaf(s, &mut found),
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    found
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char
/// boundary.
fn cap(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn scan_leaf(leaf: &str, found: &mut InnerFormats) {
    let scanned = cap(leaf, LEAF_SCAN_CAP);
    scan_text(scanned, found);
    if !found.contains(InnerFormat::Json) && json_in_string(leaf, scanned) {
        found.insert(InnerFormat::Json);
    }
}

fn json_in_string(leaf: &str, scanned: &str) -> bool {
    let trimmed = scanned.trim_start();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return false;
    }
    match serde_json::from_str::<Value>(scanned) {
        Ok(_) => true,
        // A long leaf cut by the cap: valid so far is good enough.
        Err(e) => e.is_eof() && scanned.len() < leaf.len(),
    }
}

/// Runs every text detector over `text` (already capped by the caller).
fn scan_text(text: &str, found: &mut InnerFormats) {
    if !found.contains(InnerFormat::Url) && has_url(text) {
        found.insert(InnerFormat::Url);
    }
    if !found.contains(InnerFormat::Hash) && has_hash(text) {
        found.insert(InnerFormat::Hash);
    }
    if !found.contains(InnerFormat::Html) && has_html(text) {
        found.insert(InnerFormat::Html);
    }
    let mut previous_has_pipe = false;
    let mut at_frames = 0usize;
    for line in text.split('\n') {
        if !found.contains(InnerFormat::LogLine) && is_log_line(line) {
            found.insert(InnerFormat::LogLine);
        }
        if !found.contains(InnerFormat::Diff)
            && (is_hunk_header(line) || line.starts_with("diff --git "))
        {
            found.insert(InnerFormat::Diff);
        }
        if !found.contains(InnerFormat::MarkdownTable)
            && previous_has_pipe
            && is_delimiter_row(line)
        {
            found.insert(InnerFormat::MarkdownTable);
        }
        previous_has_pipe = line.contains('|');
        if !found.contains(InnerFormat::StackTrace) {
            if is_frame_line(line) {
                at_frames += 1;
            }
            if at_frames >= 2 || is_trace_marker(line) {
                found.insert(InnerFormat::StackTrace);
            }
        }
        if !found.contains(InnerFormat::CodeFence) && is_fence_line(line) {
            found.insert(InnerFormat::CodeFence);
        }
    }
}

fn has_url(text: &str) -> bool {
    ["https://", "http://"].iter().any(|scheme| {
        text.match_indices(scheme).any(|(at, m)| {
            text[at + m.len()..]
                .chars()
                .next()
                .is_some_and(|c| !c.is_whitespace())
        })
    })
}

fn has_hash(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_hexdigit() {
            i += 1;
            continue;
        }
        let start = i;
        let (mut letter, mut digit) = (false, false);
        while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
            letter |= bytes[i].is_ascii_alphabetic();
            digit |= bytes[i].is_ascii_digit();
            i += 1;
        }
        let word_before = start > 0 && is_word_byte(bytes[start - 1]);
        let word_after = i < bytes.len() && is_word_byte(bytes[i]);
        if matches!(i - start, 40 | 64) && letter && digit && !word_before && !word_after {
            return true;
        }
        // Skip the rest of a word that merely contains hex digits.
        while i < bytes.len() && is_word_byte(bytes[i]) {
            i += 1;
        }
    }
    false
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn has_html(text: &str) -> bool {
    if text.contains("<br>") || text.contains("<br/>") || text.contains("<br />") {
        return true;
    }
    text.match_indices("</").any(|(at, _)| {
        let rest = &text.as_bytes()[at + 2..];
        let name = rest
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        name > 0
            && rest.first().is_some_and(u8::is_ascii_alphabetic)
            && rest.get(name) == Some(&b'>')
    })
}

fn digits(bytes: &[u8], at: usize, n: usize) -> bool {
    bytes.len() >= at + n && bytes[at..at + n].iter().all(u8::is_ascii_digit)
}

/// `HH:MM` at `at`.
fn clock(bytes: &[u8], at: usize) -> bool {
    digits(bytes, at, 2) && bytes.get(at + 2) == Some(&b':') && digits(bytes, at + 3, 2)
}

fn is_log_line(line: &str) -> bool {
    let body = line.strip_prefix('[').unwrap_or(line);
    let b = body.as_bytes();
    // ISO date and time, or a clock time, then a space and more text.
    let stamp_len = if digits(b, 0, 4)
        && b.get(4) == Some(&b'-')
        && digits(b, 5, 2)
        && b.get(7) == Some(&b'-')
        && digits(b, 8, 2)
        && matches!(b.get(10), Some(b'T' | b' '))
        && clock(b, 11)
    {
        Some(16)
    } else if clock(b, 0) && b.get(5) == Some(&b':') && digits(b, 6, 2) {
        Some(8)
    } else {
        None
    };
    if let Some(len) = stamp_len {
        let rest = &body[len..];
        return match rest.find(' ') {
            Some(space) => !rest[space..].trim().is_empty(),
            None => false,
        };
    }
    const LEVELS: [&str; 8] = [
        "TRACE", "DEBUG", "INFO", "WARNING", "WARN", "ERROR", "FATAL", "CRITICAL",
    ];
    LEVELS.iter().any(|level| {
        body.strip_prefix(level)
            .is_some_and(|rest| matches!(rest.as_bytes().first(), Some(b']' | b':' | b' ')))
    })
}

/// `@@ -a[,b] +c[,d] @@` at the start of `line`.
pub(crate) fn is_hunk_header(line: &str) -> bool {
    fn range(s: &str) -> Option<&str> {
        let n = s.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let s = &s[n..];
        match s.strip_prefix(',') {
            Some(rest) => {
                let m = rest.bytes().take_while(u8::is_ascii_digit).count();
                (m > 0).then(|| &rest[m..])
            }
            None => Some(s),
        }
    }
    let Some(rest) = line.strip_prefix("@@ -") else {
        return false;
    };
    let Some(rest) = range(rest).and_then(|r| r.strip_prefix(" +")) else {
        return false;
    };
    range(rest).is_some_and(|r| r.starts_with(" @@"))
}

fn is_delimiter_row(line: &str) -> bool {
    let t = line.trim();
    t.contains('|')
        && t.contains('-')
        && t.bytes()
            .all(|b| matches!(b, b'|' | b':' | b'-' | b' ' | b'\t'))
}

fn is_frame_line(line: &str) -> bool {
    let indented = line.starts_with(' ') || line.starts_with('\t');
    let t = line.trim_start();
    indented
        && t.starts_with("at ")
        && t.len() > 3
        && (t.contains('(') || t.contains(".java:") || t.contains(".js:"))
}

fn is_trace_marker(line: &str) -> bool {
    let t = line.trim_start();
    line.contains("Traceback (most recent call last):")
        || line.contains("panicked at ")
        || t.starts_with("stack backtrace:")
        || (t.starts_with("File \"") && t.contains("\", line "))
        || (t.starts_with("goroutine ")
            && t["goroutine ".len()..].starts_with(|c: char| c.is_ascii_digit())
            && t.contains(" ["))
}

fn is_fence_line(line: &str) -> bool {
    let indent = line.bytes().take_while(|b| *b == b' ').count();
    indent <= 3 && (line[indent..].starts_with("```") || line[indent..].starts_with("~~~"))
}

/// Whether a line looks like source code: after trimming it ends with `;`,
/// `{` or `}`, starts with `}`, or starts with one of a few keywords and
/// comment markers common to C-family, Rust, Python, Go and JavaScript
/// (`fn `, `def `, `import `, `#include`, `//`, …).
pub fn looks_like_code(line: &str) -> bool {
    const STARTS: [&str; 24] = [
        "fn ",
        "pub ",
        "use ",
        "let ",
        "const ",
        "def ",
        "class ",
        "import ",
        "from ",
        "return",
        "if (",
        "for (",
        "while (",
        "#include",
        "function ",
        "var ",
        "package ",
        "func ",
        "//",
        "/*",
        "#!",
        "impl ",
        "struct ",
        "async ",
    ];
    let t = line.trim();
    t.ends_with(';')
        || t.ends_with('{')
        || t.ends_with('}')
        || t.starts_with('}')
        || STARTS.iter().any(|s| t.starts_with(s))
}

fn is_unified_diff(text: &str) -> bool {
    let Some(first) = text.lines().find(|l| !l.trim().is_empty()) else {
        return false;
    };
    let opens = first.starts_with("diff --git ")
        || first.starts_with("--- ")
        || first.starts_with("Index: ")
        || is_hunk_header(first);
    opens && text.lines().any(is_hunk_header)
}

/// The text rules of the module docs, over one Markdown parse.
fn text_shape(text: &str) -> Shape {
    let mut depth = 0usize;
    let (mut blocks, mut code, mut lists) = (0usize, 0usize, 0usize);
    for (event, range) in Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if matches!(tag, Tag::Table(_)) {
                    return Shape::MarkdownTable;
                }
                if depth == 0 {
                    let len = range.len();
                    blocks += len;
                    match tag {
                        Tag::CodeBlock(_) => code += len,
                        Tag::List(_) => lists += len,
                        _ => {}
                    }
                }
                depth += 1;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            // Rules and lone HTML are leaf blocks with no Start/End pair.
            Event::Rule | Event::Html(_) if depth == 0 => blocks += range.len(),
            _ => {}
        }
    }
    if is_unified_diff(text) || (blocks > 0 && code * 2 >= blocks) {
        return Shape::CodeOrDiff;
    }
    let (mut lines, mut code_lines) = (0usize, 0usize);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        lines += 1;
        if looks_like_code(line) {
            code_lines += 1;
        }
    }
    if code_lines >= 2 && code_lines * 2 >= lines {
        return Shape::CodeOrDiff;
    }
    if blocks > 0 && lists * 2 >= blocks {
        return Shape::MarkdownList;
    }
    Shape::Prose
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(body: &str) -> Shape {
        classify(body).shape
    }

    fn inner(body: &str) -> Vec<&'static str> {
        classify(body).inner.iter().map(InnerFormat::name).collect()
    }

    #[test]
    fn json_shapes() {
        assert_eq!(shape(r#"[{"a":1},{"b":2}]"#), Shape::ArrayOfObjects);
        assert_eq!(shape(r#"{"a":1,"b":"x","c":null}"#), Shape::FlatObject);
        assert_eq!(shape(r#"[1,"a",null,true]"#), Shape::ArrayOfScalars);
        assert_eq!(shape(r#"[1,{"a":1}]"#), Shape::MixedArray);
        assert_eq!(shape(r#"[[1],[2]]"#), Shape::MixedArray);
        assert_eq!(shape("42"), Shape::JsonScalar);
        assert_eq!(shape(" \"text\" "), Shape::JsonScalar);
        assert_eq!(shape("null"), Shape::JsonScalar);
        assert_eq!(shape("{}"), Shape::Empty);
        assert_eq!(shape(" [] \n"), Shape::Empty);
        assert_eq!(shape(""), Shape::Empty);
        assert_eq!(shape(" \n\t"), Shape::Empty);
    }

    #[test]
    fn nested_object_names_the_wrapped_array() {
        let wraps = |body: &str| match shape(body) {
            Shape::NestedObject { wraps } => wraps,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            wraps(r#"{"total_count":2,"items":[{"a":1},{"a":2}]}"#).as_deref(),
            Some("items")
        );
        // Two arrays of objects: no single wrapped key.
        assert_eq!(wraps(r#"{"a":[{"x":1}],"b":[{"y":2}]}"#), None);
        // An empty array or an array of scalars wraps nothing.
        assert_eq!(wraps(r#"{"a":[],"b":{"c":1}}"#), None);
        assert_eq!(wraps(r#"{"a":[1,2]}"#), None);
        // Other nested members do not prevent wrapping.
        assert_eq!(
            wraps(r#"{"meta":{"page":1},"data":[{"id":1}]}"#).as_deref(),
            Some("data")
        );
    }

    #[test]
    fn json_value_is_handed_back() {
        let c = classify(r#" {"a": [1, 2]} "#);
        assert_eq!(c.json, Some(serde_json::json!({"a": [1, 2]})));
        assert!(classify("plain text").json.is_none());
        // Almost JSON is text.
        let c = classify(r#"{"a": 1"#);
        assert!(c.json.is_none());
        assert_eq!(c.shape, Shape::Prose);
    }

    #[test]
    fn text_shapes() {
        assert_eq!(shape("Hello there.\n\nSecond paragraph."), Shape::Prose);
        assert_eq!(
            shape("intro\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nafter"),
            Shape::MarkdownTable
        );
        assert_eq!(shape("- one\n- two\n- three\n"), Shape::MarkdownList);
        assert_eq!(shape("1. one\n2. two\n"), Shape::MarkdownList);
        assert_eq!(
            shape("Title\n\n```rust\nfn main() {\n    let x = 1;\n}\n```\n"),
            Shape::CodeOrDiff
        );
        assert_eq!(
            shape("use std::io;\n\nfn main() {\n    println!(\"hi\");\n}\n"),
            Shape::CodeOrDiff
        );
        assert_eq!(
            shape("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n"),
            Shape::CodeOrDiff
        );
        assert_eq!(shape("@@ -1 +1 @@\n-a\n+b"), Shape::CodeOrDiff);
        // A table inside a code fence is code, not a table.
        assert_eq!(shape("```\n| a |\n|---|\n| 1 |\n```\n"), Shape::CodeOrDiff);
    }

    #[test]
    fn names_are_stable() {
        let all = [
            (Shape::ArrayOfObjects, "array_of_objects"),
            (Shape::FlatObject, "flat_object"),
            (Shape::NestedObject { wraps: None }, "nested_object"),
            (
                Shape::NestedObject {
                    wraps: Some("items".into()),
                },
                "nested_object",
            ),
            (Shape::ArrayOfScalars, "array_of_scalars"),
            (Shape::MixedArray, "mixed_array"),
            (Shape::JsonScalar, "json_scalar"),
            (Shape::MarkdownTable, "markdown_table"),
            (Shape::MarkdownList, "markdown_list"),
            (Shape::CodeOrDiff, "code_or_diff"),
            (Shape::Prose, "prose"),
            (Shape::Empty, "empty"),
        ];
        for (shape, name) in all {
            assert_eq!(shape.name(), name);
            assert_eq!(shape.to_string(), name);
        }
        let names: Vec<_> = InnerFormat::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "url",
                "log_line",
                "hash",
                "diff",
                "markdown_table",
                "stack_trace",
                "code_fence",
                "json",
                "html"
            ]
        );
    }

    #[test]
    fn inner_formats_in_json_leaves() {
        let body = serde_json::json!({
            "url": "https://api.github.com/repos/o/r",
            "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
            "patch": "@@ -1,3 +1,4 @@\n a\n+b\n",
            "log": "2024-05-01T12:00:01Z INFO started\n",
            "nested": {"body": "| a | b |\n| --- | --- |\n| 1 | 2 |"},
            "trace": "Error: x\n    at f (a.js:1:2)\n    at g (b.js:3:4)",
            "doc": "text\n```rust\nfn x() {}\n```",
            "payload": "{\"a\": [1, 2]}",
            "html": "<p>hi</p>",
        })
        .to_string();
        assert_eq!(
            inner(&body),
            [
                "url",
                "log_line",
                "hash",
                "diff",
                "markdown_table",
                "stack_trace",
                "code_fence",
                "json",
                "html"
            ]
        );
    }

    #[test]
    fn detectors_avoid_obvious_false_positives() {
        // A bare timestamp, a 7-digit short sha, a 40-digit decimal number,
        // a 41-hex word, an `at` in prose, a bracketed title.
        let body = serde_json::json!({
            "created_at": "2011-01-26T19:01:12Z",
            "short": "6dcb09b",
            "n": "1234567890123456789012345678901234567890",
            "long": "6dcb09b5b57875f334f61aebed695e2e4193db5ef",
            "prose": "We met at noon.\n  at least once (maybe)",
            "title": "[WIP] fix {things}",
            "url_less": "see https:// nothing",
        })
        .to_string();
        assert_eq!(inner(&body), Vec::<&str>::new());
    }

    #[test]
    fn hash_detector_wants_a_whole_word() {
        let sha1 = "6dcb09b5b57875f334f61aebed695e2e4193db5e";
        let sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        assert!(has_hash(sha1));
        assert!(has_hash(sha256));
        assert!(has_hash(&format!("commit {sha1}.")));
        assert!(has_hash(&format!("sha256:{sha256}")));
        assert!(!has_hash(&format!("x{sha1}")));
        assert!(!has_hash(&format!("{sha1}_")));
    }

    #[test]
    fn log_lines() {
        assert!(is_log_line("2024-05-01T12:00:01Z INFO started"));
        assert!(is_log_line("[2024-05-01 12:00:01] worker up"));
        assert!(is_log_line("12:00:01 GET /index 200"));
        assert!(is_log_line("ERROR: disk full"));
        assert!(is_log_line("[WARN] slow"));
        assert!(!is_log_line("2024-05-01T12:00:01Z"));
        assert!(!is_log_line("2024-05-01"));
        assert!(!is_log_line("INFORMATION"));
        assert!(!is_log_line("Errors happen"));
    }

    #[test]
    fn hunk_headers() {
        assert!(is_hunk_header("@@ -1,3 +1,4 @@"));
        assert!(is_hunk_header("@@ -1 +1 @@ fn main"));
        assert!(is_hunk_header("@@ -132,7 +132,7 @@ module Test"));
        assert!(!is_hunk_header("@@ -1,3 +1, @@"));
        assert!(!is_hunk_header("@@ -a +1 @@"));
        assert!(!is_hunk_header("@@ -1 +1"));
    }

    #[test]
    fn text_inner_formats_skip_json() {
        let got = inner("Visit https://example.com\n\n```\ncode\n```\n[1, 2]\n");
        assert_eq!(got, ["url", "code_fence"]);
    }

    #[test]
    fn scanning_is_capped_per_leaf() {
        // A URL beyond the first 4 KiB of a leaf is not looked for.
        let leaf = format!("{}https://example.com", "x ".repeat(LEAF_SCAN_CAP));
        let body = serde_json::json!({ "a": leaf }).to_string();
        assert!(!classify(&body).inner.contains(InnerFormat::Url));
        // A long JSON-in-string leaf cut by the cap still counts.
        let long = serde_json::to_string(&vec![1u32; LEAF_SCAN_CAP]).unwrap_or_default();
        let body = serde_json::json!({ "a": long }).to_string();
        assert!(classify(&body).inner.contains(InnerFormat::Json));
    }

    #[test]
    fn cap_respects_char_boundaries() {
        let s = "ééé"; // 6 bytes
        assert_eq!(cap(s, 3), "é");
        assert_eq!(cap(s, 4), "éé");
        assert_eq!(cap(s, 10), s);
    }

    #[test]
    fn inner_formats_set_ops() {
        let mut set = InnerFormats::EMPTY;
        assert!(set.is_empty());
        set.insert(InnerFormat::Diff);
        set.insert(InnerFormat::Url);
        set.insert(InnerFormat::Diff);
        assert_eq!(set.len(), 2);
        assert_eq!(format!("{set:?}"), r#"{"url", "diff"}"#);
        let other: InnerFormats = [InnerFormat::Hash].into_iter().collect();
        assert_eq!(set.union(other).len(), 3);
    }

    #[test]
    fn deep_json_does_not_overflow() {
        // serde_json's own depth limit (128) turns deeper bodies into text.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let c = classify(&deep);
        assert!(c.json.is_none());
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(classify(&ok).shape, Shape::MixedArray);
    }
}
