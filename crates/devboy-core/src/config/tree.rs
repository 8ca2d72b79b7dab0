//! A format-neutral, order-preserving document tree.
//!
//! Both config formats are parsed into [`Node`]s first and validated second,
//! so that one validator produces the same key paths and messages for TOML
//! and JSON. The stock `toml::Table` and `serde_json::Map` sort their keys
//! (without a crate-wide `preserve_order` feature that would change key order
//! for every crate in the workspace), while upstreams must keep file order;
//! hence this small tree of our own.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::keypath::KeyPath;

/// A line and column in the source text, both 1-based; the column counts
/// characters, not bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pos {
    pub(crate) line: usize,
    pub(crate) column: usize,
}

/// One value of the document, with where it starts when the parser knows.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) value: Value,
    pub(crate) pos: Option<Pos>,
}

/// One key of a table, with where the key itself is written.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) key_pos: Option<Pos>,
    pub(crate) node: Node,
}

/// The value kinds of JSON and TOML together.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Integer(i128),
    Float(f64),
    String(String),
    Datetime(String),
    Array(Vec<Node>),
    /// Entries in document order; keys are unique.
    Table(Vec<Entry>),
}

impl Node {
    fn bare(value: Value) -> Self {
        Node { value, pos: None }
    }

    /// The entries when this is a table.
    pub(crate) fn as_table(&self) -> Option<&[Entry]> {
        match &self.value {
            Value::Table(entries) => Some(entries),
            _ => None,
        }
    }
}

/// What a value is, for "found …" in messages: the kind and, for scalars,
/// the value itself (cut short). `table` is how the format calls a table
/// ("a table", "an object").
pub(crate) fn describe(value: &Value, table: &str) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Integer(i) => format!("the integer {i}"),
        Value::Float(f) => format!("the number {f:?}"),
        Value::String(s) if s.is_empty() => "an empty string".to_owned(),
        Value::String(s) => format!("the string {}", quote_short(s)),
        Value::Datetime(d) => format!("the datetime {d}"),
        Value::Array(_) => "an array".to_owned(),
        Value::Table(_) => table.to_owned(),
    }
}

/// `"text"` with JSON-style escapes, cut to a readable length.
pub(crate) fn quote_short(s: &str) -> String {
    const MAX_CHARS: usize = 40;
    let mut cut: String = s.chars().take(MAX_CHARS).collect();
    if cut.len() < s.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

// ---------------------------------------------------------------- JSON

/// A key written more than once in one JSON object. JSON.parse (and so
/// Claude Code) keeps the last value, in the place of the first; so does
/// [`parse_json`], and this records it so the loader can say so.
#[derive(Clone, Debug)]
pub(crate) struct DuplicateKey {
    pub(crate) path: KeyPath,
    /// Where the key was written before (the value now dropped).
    pub(crate) earlier: Option<Pos>,
    /// Where it is written again (the value kept, unless repeated again).
    pub(crate) later: Option<Pos>,
}

impl fmt::Display for DuplicateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.earlier, self.later) {
            (Some(earlier), Some(later)) => write!(
                f,
                "{}: defined twice, at {earlier} and at {later}; the one at {later} is used \
                 (as Claude Code does) and the one at {earlier} is ignored",
                self.path
            ),
            _ => write!(
                f,
                "{}: defined twice; the last one is used (as Claude Code does) \
                 and the earlier one is ignored",
                self.path
            ),
        }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// What every level of one JSON parse shares: the text, to turn borrowed
/// keys back into positions, and the duplicates found so far.
struct JsonContext<'t> {
    text: &'t str,
    lines: LineIndex<'t>,
    duplicates: RefCell<Vec<DuplicateKey>>,
}

impl JsonContext<'_> {
    /// The position of the quote opening `key`, when `key` is a slice of
    /// the text. serde_json lends keys without escapes straight from the
    /// input, so their address says where they are; an escaped key is a
    /// copy and has no position.
    fn key_pos(&self, key: &str) -> Option<Pos> {
        let offset = (key.as_ptr() as usize).checked_sub(self.text.as_ptr() as usize)?;
        (offset >= 1 && offset + key.len() <= self.text.len()).then(|| self.lines.pos(offset - 1))
    }
}

/// Deserializes one value at `path`.
struct NodeSeed<'c, 't> {
    cx: &'c JsonContext<'t>,
    path: KeyPath,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_, '_> {
    type Value = Node;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Deserializes an object key with its position, when it has one.
struct KeySeed<'c, 't>(&'c JsonContext<'t>);

impl<'de> DeserializeSeed<'de> for KeySeed<'_, '_> {
    type Value = (String, Option<Pos>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, '_> {
    type Value = (String, Option<Pos>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok((v.to_owned(), self.0.key_pos(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok((v.to_owned(), None))
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_, '_> {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::bare(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::bare(Value::Null))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::bare(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::bare(Value::Integer(v.into())))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::bare(Value::Integer(v.into())))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::bare(Value::Float(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::bare(Value::String(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::bare(Value::String(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        loop {
            let seed = NodeSeed {
                cx: self.cx,
                path: self.path.index(items.len()),
            };
            match seq.next_element_seed(seed)? {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Node::bare(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries: Vec<Entry> = Vec::new();
        while let Some((key, key_pos)) = map.next_key_seed(KeySeed(self.cx))? {
            if entries.is_empty() && key == NUMBER_TOKEN {
                // serde_json keeps a number's text (the workspace enables
                // `arbitrary_precision`) and hands a float, or an integer
                // past 64 bits, to a visitor as this one-entry map.
                let text: String = map.next_value()?;
                return Ok(Node::bare(number(&text)));
            }
            let path = self.path.key(&key);
            let node = map.next_value_seed(NodeSeed {
                cx: self.cx,
                path: path.clone(),
            })?;
            // JSON.parse keeps the last value of a repeated key, in the
            // place of the first; so does Claude Code, and so do we.
            match entries.iter_mut().find(|e| e.key == key) {
                Some(existing) => {
                    self.cx.duplicates.borrow_mut().push(DuplicateKey {
                        path,
                        earlier: existing.key_pos,
                        later: key_pos,
                    });
                    existing.key_pos = key_pos;
                    existing.node = node;
                }
                None => entries.push(Entry { key, key_pos, node }),
            }
        }
        Ok(Node::bare(Value::Table(entries)))
    }
}

/// The key under which serde_json's `arbitrary_precision` hands a number
/// to `visit_map` (its text is the value).
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// A JSON number's text as the config's value: an integer when it is one
/// (of any size the config's integers take), else a float.
fn number(text: &str) -> Value {
    match text.parse::<i64>() {
        Ok(i) => Value::Integer(i.into()),
        Err(_) => text
            .parse::<f64>()
            .map_or_else(|_| Value::String(text.to_owned()), Value::Float),
    }
}

/// A JSON syntax error: where and what.
pub(crate) struct SyntaxError {
    pub(crate) pos: Option<Pos>,
    pub(crate) message: String,
}

impl SyntaxError {
    /// The config error this is in the file `origin`, written in `format`.
    pub(crate) fn in_file(
        self,
        origin: &std::path::Path,
        format: super::ConfigFormat,
    ) -> super::ConfigError {
        super::ConfigError::new(
            origin,
            self.pos.map(|p| (p.line, p.column)),
            super::ConfigErrorKind::Syntax {
                format,
                message: self.message,
            },
        )
    }
}

/// Parses JSON text into a tree, with the keys written more than once in
/// the order they were found (each kept last, see [`DuplicateKey`]).
pub(crate) fn parse_json(text: &str) -> Result<(Node, Vec<DuplicateKey>), SyntaxError> {
    let cx = JsonContext {
        text,
        lines: LineIndex::new(text),
        duplicates: RefCell::new(Vec::new()),
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let seed = NodeSeed {
        cx: &cx,
        path: KeyPath::default(),
    };
    let parsed = seed
        .deserialize(&mut deserializer)
        .and_then(|node| deserializer.end().map(|()| node));
    match parsed {
        Ok(node) => Ok((node, cx.duplicates.into_inner())),
        Err(e) => {
            let full = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
            let pos = (e.line() > 0).then_some(Pos {
                line: e.line(),
                column: e.column(),
            });
            Err(SyntaxError { pos, message })
        }
    }
}

// ---------------------------------------------------------------- TOML

/// Byte offsets of line starts, to turn spans into line and column.
struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    fn pos(&self, offset: usize) -> Pos {
        let line_idx = match self.starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        let start = self.starts.get(line_idx).copied().unwrap_or(0);
        let column = self
            .text
            .get(start..offset)
            .map_or(offset.saturating_sub(start), |s| s.chars().count())
            + 1;
        Pos {
            line: line_idx + 1,
            column,
        }
    }
}

/// Parses TOML text into a tree with positions.
pub(crate) fn parse_toml(text: &str) -> Result<Node, SyntaxError> {
    let lines = LineIndex::new(text);
    match DeTable::parse(text) {
        Ok(root) => {
            let span = root.span();
            let table = root.into_inner();
            Ok(Node {
                value: toml_table(table, &lines),
                pos: Some(lines.pos(span.start)),
            })
        }
        Err(e) => Err(SyntaxError {
            pos: e.span().map(|s| lines.pos(s.start)),
            message: e.message().trim_end().to_owned(),
        }),
    }
}

fn toml_table(table: DeTable<'_>, lines: &LineIndex<'_>) -> Value {
    let mut entries: Vec<(usize, Entry)> = table
        .into_iter()
        .map(|(key, value)| {
            let key_start = key.span().start;
            let entry = Entry {
                key: key.into_inner().into_owned(),
                key_pos: Some(lines.pos(key_start)),
                node: toml_node(value, lines),
            };
            (key_start, entry)
        })
        .collect();
    // The parser's map is sorted by key; spans give back the file order.
    entries.sort_by_key(|(start, _)| *start);
    Value::Table(entries.into_iter().map(|(_, e)| e).collect())
}

fn toml_node(value: Spanned<DeValue<'_>>, lines: &LineIndex<'_>) -> Node {
    let pos = Some(lines.pos(value.span().start));
    let value = match value.into_inner() {
        DeValue::String(s) => Value::String(s.into_owned()),
        DeValue::Integer(i) => match i128::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => Value::Integer(n),
            // Out of i128 range cannot be a valid setting anyway; keep the text.
            Err(_) => Value::String(i.to_string()),
        },
        DeValue::Float(f) => Value::Float(f.as_str().parse().unwrap_or(f64::NAN)),
        DeValue::Boolean(b) => Value::Bool(b),
        DeValue::Datetime(d) => Value::Datetime(d.to_string()),
        DeValue::Array(items) => {
            Value::Array(items.into_iter().map(|v| toml_node(v, lines)).collect())
        }
        DeValue::Table(t) => toml_table(t, lines),
    };
    Node { value, pos }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(node: &Node) -> Vec<&str> {
        node.as_table()
            .map(|t| t.iter().map(|e| e.key.as_str()).collect())
            .unwrap_or_default()
    }

    fn json(text: &str) -> (Node, Vec<DuplicateKey>) {
        parse_json(text).unwrap_or_else(|e| panic!("{}", e.message))
    }

    #[test]
    fn json_keeps_file_order_and_last_duplicate() {
        let (node, duplicates) = json(r#"{"zeta": 1, "alpha": 2, "mid": 3, "zeta": 4}"#);
        assert_eq!(keys(&node), ["zeta", "alpha", "mid"]);
        let zeta = &node.as_table().unwrap_or_default()[0];
        assert!(matches!(zeta.node.value, Value::Integer(4)));
        assert_eq!(
            zeta.key_pos,
            Some(Pos {
                line: 1,
                column: 35
            })
        );
        assert_eq!(duplicates.len(), 1);
    }

    #[test]
    fn json_duplicates_are_recorded_at_every_level_with_both_places() {
        let text = "{\"s\": {\"a\": {\"x\": 1, \"x\": 2}},\n \"l\": [{\"k\": 1,\n  \"k\": 2}],\n \"s\": {}}";
        let (node, duplicates) = json(text);
        let found: Vec<String> = duplicates.iter().map(ToString::to_string).collect();
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(
            found[0].starts_with("s.a.x: defined twice, at 1:14 and at 1:22;"),
            "{}",
            found[0]
        );
        assert!(
            found[1].starts_with("l[0].k: defined twice, at 2:9 and at 3:3;"),
            "{}",
            found[1]
        );
        assert!(
            found[2].starts_with("s: defined twice, at 1:2 and at 4:2; the one at 4:2 is used"),
            "{}",
            found[2]
        );
        // The later `s` (an empty object) replaced the first, in its place.
        assert_eq!(keys(&node), ["s", "l"]);
        let s = &node.as_table().unwrap_or_default()[0].node;
        assert!(keys(s).is_empty());
        // A key with an escape has no position, but is still reported.
        let (_, escaped) = json(r#"{"a": 1, "\u0061": 2}"#);
        assert_eq!(escaped.len(), 1);
        assert!(escaped[0]
            .to_string()
            .starts_with("a: defined twice; the last one is used"));
    }

    #[test]
    fn json_trailing_text_is_a_syntax_error() {
        assert!(parse_json("{} x").is_err());
    }

    #[test]
    fn toml_keeps_file_order_and_positions() {
        let text = "[servers.zeta]\ncommand = \"z\"\n\n[servers.alpha]\ncommand = \"a\"\n";
        let node = parse_toml(text).unwrap_or_else(|e| panic!("{}", e.message));
        let servers = &node.as_table().unwrap_or_default()[0].node;
        assert_eq!(keys(servers), ["zeta", "alpha"]);
        let alpha = &servers.as_table().unwrap_or_default()[1];
        let command = &alpha.node.as_table().unwrap_or_default()[0];
        assert_eq!(command.key_pos, Some(Pos { line: 5, column: 1 }));
        assert_eq!(
            command.node.pos,
            Some(Pos {
                line: 5,
                column: 11
            })
        );
    }

    #[test]
    fn toml_syntax_error_has_position() {
        let err = match parse_toml("a = 1\nb = \"unterminated\n") {
            Ok(_) => panic!("parsed invalid TOML"),
            Err(e) => e,
        };
        assert_eq!(err.pos.map(|p| p.line), Some(2));
        assert!(!err.message.is_empty());
    }

    #[test]
    fn json_syntax_error_has_position_without_duplicate_suffix() {
        let err = match parse_json("{\n  \"a\": [1, 2,,]\n}") {
            Ok(_) => panic!("parsed invalid JSON"),
            Err(e) => e,
        };
        assert_eq!(err.pos.map(|p| p.line), Some(2));
        assert!(!err.message.contains("at line"), "{}", err.message);
    }

    #[test]
    fn describe_names_kind_and_value() {
        assert_eq!(describe(&Value::Integer(3), "an object"), "the integer 3");
        assert_eq!(describe(&Value::Table(vec![]), "an object"), "an object");
        assert_eq!(
            describe(&Value::String("x".repeat(50)), "a table"),
            format!("the string \"{}…\"", "x".repeat(40))
        );
    }
}
