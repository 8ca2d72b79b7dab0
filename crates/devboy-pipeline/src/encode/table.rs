//! Table blocks: an array of objects as declarations that hold for every
//! row, a CSV header, and one CSV row per object.
//!
//! ```text
//! block  = *declaration
//!          item *( "," item ) [ "[]" ] LF ; the columns stored per row
//! item   = name                          ; a column stored per row
//!        | "*" [ N ]                     ; the place of the next N
//!                                        ; declared columns (N ≥ 2)
//!          row *( LF row )               ; one per object, in order
//!        | 1*declaration                 ; nested only: no stored column,
//!          ""                            ; an empty header line ends it
//! declaration
//!        = key ": " value LF             ; a constant, pattern or alias
//!        | key "[" N "]:" LF block(N) LF ; an array of N objects, as a table
//! row    = cell *( "," cell )            ; exactly one cell per name, but
//!                                        ; a list column holds the rest
//! ```
//!
//! `key`/`name` and `value`/`cell` follow [`super::cell`]; a line value that
//! names a column in braces is a [pattern](super::pattern). A line is a
//! declaration exactly when it begins with a key followed by `": "` or
//! `"["`; the first line that does not is the header (names never contain
//! `:` or `[` unquoted). A nested `block(N)` ends after its N-th row, so
//! declarations may follow it. Declared columns hold in every row; an empty
//! cell means the key is absent from that row.
//!
//! **Key order.** A decoded row lists its keys in the order the rows had
//! them (invariant 12): the declarations in the order they are written,
//! stored columns in header order, and the two interleaved as the `*N`
//! items of the header place the declarations. A header with no `*` puts
//! every declaration first; declarations a header's `*`s leave over come
//! after its last column. The encoder writes `*`s only when the rows put
//! a stored key before a declared one, and none after the last stored
//! column. Rows whose keys come in different orders cannot share one
//! header: their table decodes to another order, fails the check, and is
//! not used.
//!
//! **List column.** A header whose last name is followed by `[]`
//! (`name,observations[]`) stores that column, an array in every row, as
//! the rest of the row: each item one more cell (`a.py,300 lines,uses os`
//! is `{"name": "a.py", "observations": ["300 lines", "uses os"]}`). No
//! cell of it is empty; a row that ends before it (no `,` after the last
//! other cell) has the empty array. The encoder writes a list column when
//! the last stored column holds an array in every row, and never so that
//! a row would be an empty line.
//!
//! A nested block (`key[N]:`) whose rows are all alike, and so have nothing
//! to store, ends with an empty line where its header would be: its N rows
//! are N copies of what the declarations say. The outermost block of a
//! `csv` text always has a header, since its row count is not written.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::cell::{self, parse_cell, parse_key, parse_line_value, Key, LineValue, Slot};
use super::plan::{Mode, Node, Plan, Role};
use super::records::{Place, RecordShape};
use super::scan::Scanner;
use super::FormatDecodeError;

/// How deep tables may nest in one another (the encoder's limit, and the
/// decoder's, which keeps its recursion bounded on any input).
pub(super) const MAX_NESTING: usize = 6;

/// An encoded table block, and what its hint must explain.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Block {
    pub(super) text: String,
    /// Some column is declared once above a header.
    pub(super) declared: bool,
    /// Some declaration is a pattern or an alias.
    pub(super) references: bool,
    /// Some declaration is a nested table.
    pub(super) tables: bool,
    /// Some table has a list column (`name[]`, the rest of each row).
    pub(super) lists: bool,
    /// Some header places declared columns among stored ones (`*N`).
    pub(super) placed: bool,
}

/// Encodes `items` (all objects, at least one, at least one key overall) as
/// a table block, with tables nested up to `nesting` levels; `nested` if
/// the row count is written before it (so it may end without a header).
/// `None` if it cannot.
pub(super) fn block(items: &[Value], nesting: usize, nested: bool) -> Option<Block> {
    let rows: Vec<&Map<String, Value>> =
        items.iter().map(Value::as_object).collect::<Option<_>>()?;
    // Rows whose key orders no one header order fits cannot be a table
    // that reads back exactly (an issue timeline's kinds of row); the
    // caller writes them some other way.
    if rows.is_empty() || !super::plan::orders_agree(&rows) {
        return None;
    }
    let mut plan = Plan::new(&rows, Mode::Table, nesting);
    if plan.nodes.is_empty() {
        return None;
    }
    if !nested && !plan.nodes.iter().any(|n| n.role == Role::Stored) {
        // Everything is written once: keep one column per row so rows exist.
        let first = plan
            .nodes
            .iter()
            .position(|n| matches!(n.role, Role::Const | Role::Table { .. }))?;
        plan.nodes[first].role = Role::Stored;
    }

    let mut text = String::new();
    let mut out = Block {
        text: String::new(),
        declared: false,
        references: plan.has_references(),
        tables: false,
        lists: false,
        placed: false,
    };
    let declared: Vec<usize> = (0..plan.nodes.len())
        .filter(|&c| {
            matches!(
                plan.nodes[c].role,
                Role::Const
                    | Role::Alias(_)
                    | Role::AliasList(_)
                    | Role::Pattern(_)
                    | Role::Table { .. }
            )
        })
        .collect();
    out.declared = !declared.is_empty();
    write_entries(&mut text, &plan, &declared, &mut out);
    let stored: Vec<&Node<'_>> = plan
        .nodes
        .iter()
        .filter(|n| n.role == Role::Stored)
        .collect();
    let list = list_column(&stored, plan.rows);
    out.lists |= list;
    let header = header_items(&plan);
    out.placed |= header
        .iter()
        .any(|item| matches!(item, HeaderItem::Declared(_)));
    let mut stored_names = stored.iter();
    for (i, item) in header.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        match item {
            HeaderItem::Declared(1) => text.push('*'),
            HeaderItem::Declared(n) => {
                let _ = write!(text, "*{n}");
            }
            HeaderItem::Stored => {
                if let Some(node) = stored_names.next() {
                    write_key(&mut text, node);
                }
            }
        }
    }
    if list {
        text.push_str("[]");
    }
    // With nothing stored, the empty header line alone ends the block.
    for row in (0..plan.rows).filter(|_| !stored.is_empty()) {
        text.push('\n');
        for (i, node) in stored.iter().enumerate() {
            let value = node.cells.get(row).copied().flatten();
            if list && i + 1 == stored.len() {
                let items = value
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice);
                for (j, item) in items.iter().enumerate() {
                    if i > 0 || j > 0 {
                        text.push(',');
                    }
                    cell::write_value(&mut text, item, Slot::Cell);
                }
                continue;
            }
            if i > 0 {
                text.push(',');
            }
            if let Some(value) = value {
                cell::write_value(&mut text, value, Slot::Cell);
            }
        }
    }
    out.text = text;
    Some(out)
}

/// One item of a header line.
#[derive(Clone, Copy, Debug, PartialEq)]
enum HeaderItem {
    /// The next stored column's name.
    Stored,
    /// The place of the next this many declared columns.
    Declared(usize),
}

/// The header's items: the stored columns, with the places of the
/// declared ones among them when the rows' key order needs them (see the
/// module docs, "Key order").
fn header_items(plan: &Plan<'_>) -> Vec<HeaderItem> {
    let mut items: Vec<HeaderItem> = Vec::new();
    for node in &plan.nodes {
        let item = match node.role {
            Role::Group | Role::Hidden => continue,
            Role::Stored => HeaderItem::Stored,
            _ => HeaderItem::Declared(1),
        };
        match (items.last_mut(), item) {
            (Some(HeaderItem::Declared(n)), HeaderItem::Declared(_)) => *n += 1,
            _ => items.push(item),
        }
    }
    // With no `*`, every declaration goes first; with some, those left
    // over go last. So a lone leading run, or a trailing run after others,
    // need not be written.
    let runs = items
        .iter()
        .filter(|item| matches!(item, HeaderItem::Declared(_)))
        .count();
    if runs == 1 && matches!(items.first(), Some(HeaderItem::Declared(_))) {
        items.remove(0);
    } else if runs > 1 && matches!(items.last(), Some(HeaderItem::Declared(_))) {
        items.pop();
    }
    items
}

/// Whether the last of the `stored` columns is written as a list column:
/// it holds an array in every one of the `rows`, and no row would be an
/// empty line (its other cells all absent and its array empty).
fn list_column(stored: &[&Node<'_>], rows: usize) -> bool {
    let Some((last, others)) = stored.split_last() else {
        return false;
    };
    (0..rows).all(|row| {
        let Some(Some(Value::Array(items))) = last.cells.get(row) else {
            return false;
        };
        !items.is_empty()
            || others
                .iter()
                .any(|n| matches!(n.cells.get(row), Some(Some(_))))
    })
}

/// Writes the line of column `c` written once, `key: value` or
/// `key[N]:` and its block (without a final line end), and notes in `flags`
/// what a nested block needs explained. The key is written without its
/// first `skip` bytes (the section's name and its `.`).
fn write_entry(text: &mut String, plan: &Plan<'_>, c: usize, flags: &mut Block, skip: usize) {
    let node = &plan.nodes[c];
    match node.name.get(skip..).filter(|_| node.bare && skip > 0) {
        Some(rest) => text.push_str(rest),
        None => write_key(text, node),
    }
    if let Role::Table { rows, block } = &node.role {
        flags.tables = true;
        flags.declared |= block.declared;
        flags.references |= block.references;
        flags.lists |= block.lists;
        flags.placed |= block.placed;
        let _ = write!(text, "[{rows}]:\n{}", block.text);
    } else {
        text.push(':');
        let at = text.len();
        write_declaration(text, plan, c);
        // o200k splits a space from the digits after it, so a value that
        // starts with a digit follows the colon directly (one token less).
        if !text[at..].starts_with(|c: char| c.is_ascii_digit()) {
            text.insert(at, ' ');
        }
    }
}

/// Writes the lines of the columns `columns` (each written once, in
/// order), each line followed by `\n`. A run of lines whose keys share
/// a group goes under a section line, `group:`, each line indented by one
/// space and keyed by the rest of its path, where that saves more key
/// text than the section line costs (see [`section_pays`]).
pub(super) fn write_entries(
    text: &mut String,
    plan: &Plan<'_>,
    columns: &[usize],
    flags: &mut Block,
) {
    let group = |c: usize| match plan.nodes[c].role {
        Role::Table { .. } => None,
        _ if plan.nodes[c].bare => Some(plan.parent_name(c)).filter(|p| !p.is_empty()),
        _ => None,
    };
    let mut i = 0;
    while i < columns.len() {
        let section = group(columns[i]);
        let run = columns[i..]
            .iter()
            .take_while(|&&c| section.is_some() && group(c) == section)
            .count()
            .max(1);
        match section.filter(|name| section_pays(name, run)) {
            Some(name) => {
                text.push_str(name);
                text.push_str(":\n");
                for &c in &columns[i..i + run] {
                    text.push(' ');
                    write_entry(text, plan, c, flags, name.len() + 1);
                    text.push('\n');
                }
            }
            None => {
                for &c in &columns[i..i + run] {
                    write_entry(text, plan, c, flags, 0);
                    text.push('\n');
                }
            }
        }
        i += run;
    }
}

/// Whether a section line for group `name` pays for `lines` lines under
/// it: each line drops the group's segments (about a token each) and
/// gains nothing (o200k reads ` key` as it reads `key`), and the section
/// line costs its segments and the colon with its line end (`:\n` is
/// one token).
fn section_pays(name: &str, lines: usize) -> bool {
    let segments = name.split('.').count();
    lines * segments > segments + 1
}

/// Writes a column's key: its dotted name when bare, else quoted.
pub(super) fn write_key(out: &mut String, node: &Node<'_>) {
    if node.bare {
        out.push_str(&node.name);
    } else {
        cell::write_quoted(out, node.key);
    }
}

/// Writes the value side of the line of column `c`: its first-row value,
/// an alias or a pattern.
pub(super) fn write_declaration(out: &mut String, plan: &Plan<'_>, c: usize) {
    let node = &plan.nodes[c];
    match &node.role {
        Role::Alias(target) => {
            out.push('{');
            out.push_str(
                plan.ref_name(c, *target)
                    .unwrap_or(&plan.nodes[*target].name),
            );
            out.push('}');
        }
        Role::AliasList(targets) => {
            out.push('[');
            for (i, target) in targets.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('{');
                out.push_str(
                    plan.ref_name(c, *target)
                        .unwrap_or(&plan.nodes[*target].name),
                );
                out.push('}');
            }
            out.push(']');
        }
        Role::Pattern(parts) => out.push_str(&plan.pattern_text(c, parts)),
        _ => {
            if let Some(Some(value)) = node.cells.first() {
                let slot = Slot::Line(&plan.names, plan.parent_name(c));
                cell::write_value(out, value, slot);
            }
        }
    }
}

/// How many rows a block has.
#[derive(Clone, Copy, Debug)]
pub(super) enum Rows {
    /// Rows run to the end of the text.
    ToEnd,
    /// Exactly this many rows.
    Exactly(usize),
}

/// Reads one declaration or `key: value` line (with a nested block if it
/// is `key[N]:`), or returns `None` with the cursor unmoved if the line is
/// not one. `nesting` is how many more levels of tables may nest.
///
/// `section` is the open section of the caller's block: a line `a.b:`
/// (nothing after the colon) opens it, and the line after it must be
/// indented; an indented line (one space) is keyed under it; any other
/// line closes it.
pub(super) fn parse_entry(
    sc: &mut Scanner<'_>,
    nesting: usize,
    section: &mut Option<Vec<String>>,
) -> Result<Option<(Key, LineValue)>, FormatDecodeError> {
    let start = sc.pos();
    let indented = sc.eat(" ");
    if indented && section.is_none() {
        return Err(sc.error("an indented line outside a section"));
    }
    if !indented {
        *section = None;
    }
    let Ok(key) = parse_key(sc) else {
        sc.reset(start);
        return Ok(None);
    };
    let key = match (key, indented) {
        (Key::Path(segments), false)
            if sc.rest().starts_with(':') && {
                let after = &sc.rest()[1..];
                after.is_empty() || after.starts_with('\n')
            } =>
        {
            sc.advance(1);
            sc.end_line()?;
            if !sc.rest().starts_with(' ') {
                return Err(sc.error("expected an indented line under the section"));
            }
            *section = Some(segments);
            return parse_entry(sc, nesting, section);
        }
        (Key::Path(segments), true) => {
            let mut path = section.clone().unwrap_or_default();
            path.extend(segments);
            Key::Path(path)
        }
        (Key::Literal(_), true) => return Err(sc.error("a quoted key in a section")),
        (key, false) => key,
    };
    let digit_next = |sc: &Scanner<'_>| {
        sc.rest()
            .strip_prefix(':')
            .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
    };
    if sc.eat(": ") || (digit_next(sc) && sc.eat(":")) {
        let value = parse_line_value(sc)?;
        sc.end_line()?;
        return Ok(Some((key, value)));
    }
    if sc.rest().starts_with("[]") || !sc.eat("[") {
        // `name[]` is a header's list column, not a declaration.
        sc.reset(start);
        return Ok(None);
    }
    let digits = sc.rest().bytes().take_while(u8::is_ascii_digit).count();
    let rows: usize = sc
        .rest()
        .get(..digits)
        .and_then(|d| d.parse().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| sc.error("expected a row count in `key[N]:`"))?;
    sc.advance(digits);
    if !sc.eat("]:") {
        return Err(sc.error("expected `]:`"));
    }
    sc.end_line()?;
    let Some(inner) = nesting.checked_sub(1) else {
        return Err(sc.error("tables nested too deep"));
    };
    let items = parse_block(sc, Rows::Exactly(rows), inner)?;
    Ok(Some((key, LineValue::Value(Value::Array(items)))))
}

/// Reads a table block at the cursor; `nesting` is how many more levels of
/// tables may nest inside it.
pub(super) fn parse_block(
    sc: &mut Scanner<'_>,
    rows: Rows,
    nesting: usize,
) -> Result<Vec<Value>, FormatDecodeError> {
    let mut lines = Vec::new();
    let mut section = None;
    while let Some(entry) = parse_entry(sc, nesting, &mut section)? {
        lines.push(entry);
    }
    let mut names: Vec<Key> = Vec::new();
    let mut places: Vec<Place> = Vec::new();
    let mut list = false;
    if matches!(sc.peek(), None | Some('\n')) {
        if lines.is_empty() || matches!(rows, Rows::ToEnd) {
            return Err(sc.error("expected a header"));
        }
    } else {
        loop {
            if sc.eat("*") {
                let digits = sc.rest().bytes().take_while(u8::is_ascii_digit).count();
                let n = match digits {
                    0 => 1,
                    _ => sc
                        .rest()
                        .get(..digits)
                        .and_then(|d| d.parse::<usize>().ok())
                        .filter(|&n| n >= 2)
                        .ok_or_else(|| sc.error("expected `*` or `*N` with N ≥ 2"))?,
                };
                sc.advance(digits);
                places.push(Place::Declared(n));
                if !sc.eat(",") {
                    break;
                }
                continue;
            }
            names.push(parse_key(sc)?);
            places.push(Place::Stored);
            if sc.eat("[]") {
                list = true;
                break;
            }
            if !sc.eat(",") {
                break;
            }
        }
    }
    sc.end_line()?;
    let shape = RecordShape::new(lines, names, &places)?;
    let mut out = Vec::new();
    if shape.stored_count() == 0 {
        // Rows all alike; as with stored rows, at most one per byte of text.
        let n = match rows {
            Rows::Exactly(n) if n <= sc.text_len() => n,
            _ => return Err(sc.error("too many rows for a table without a header")),
        };
        let row = Value::Object(shape.row(Vec::new())?);
        out.resize(n, row);
        return Ok(out);
    }
    loop {
        match rows {
            Rows::ToEnd if sc.at_end() => break,
            Rows::Exactly(n) if out.len() == n => break,
            Rows::Exactly(n) if sc.at_end() => {
                return Err(sc.error(format!("expected {n} rows, found {}", out.len())));
            }
            _ => {}
        }
        let mut cells = Vec::with_capacity(shape.stored_count());
        for i in 0..shape.stored_count() {
            if list && i + 1 == shape.stored_count() {
                cells.push(Some(parse_list(sc, i == 0)?));
                break;
            }
            if i > 0 && !sc.eat(",") {
                return Err(sc.error("row has too few cells"));
            }
            cells.push(parse_cell(sc)?);
        }
        sc.end_line()?;
        out.push(Value::Object(shape.row(cells)?));
    }
    if out.is_empty() {
        return Err(sc.error("table without rows"));
    }
    Ok(out)
}

/// Reads the rest of a row as a list column's items; `first` when it is
/// the row's only column (its first item has no `,` before it).
fn parse_list(sc: &mut Scanner<'_>, first: bool) -> Result<Value, FormatDecodeError> {
    let mut items = Vec::new();
    if first || sc.eat(",") {
        loop {
            let item = parse_cell(sc)?.ok_or_else(|| sc.error("an empty item in a list column"))?;
            items.push(item);
            if !sc.eat(",") {
                break;
            }
        }
    }
    Ok(Value::Array(items))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn round_trip(items: &Value) -> String {
        let block = block(items.as_array().unwrap(), MAX_NESTING, false).unwrap();
        let mut sc = Scanner::new(&block.text, 0);
        let back = parse_block(&mut sc, Rows::ToEnd, MAX_NESTING).unwrap();
        assert_eq!(&Value::Array(back), items, "{}", block.text);
        block.text
    }

    #[test]
    fn typed_cells_and_absent_keys() {
        let items = json!([
            {"a": 1, "b": "x", "c": null},
            {"a": "1", "c": ""},
            {"a": true, "b": "two, three", "c": {"n": [1, 2]}}
        ]);
        assert_eq!(
            round_trip(&items),
            "a,b,c\n1,x,null\n\"1\",,\"\"\ntrue,\"two, three\",{\"n\":[1,2]}"
        );
        // A row with its keys in another order fits no header: no table
        // (`Value`'s equality would not have seen the difference).
        let disagree = json!([{"a": 1, "b": "x"}, {"b": "y", "a": 2}]);
        assert_eq!(
            block(disagree.as_array().unwrap(), MAX_NESTING, false),
            None
        );
    }

    #[test]
    fn constants_patterns_and_groups() {
        let items = json!([
            {"id": 1, "name": "bug", "url": "https://x/labels/bug", "default": false, "user": {"login": "a"}},
            {"id": 2, "name": "docs", "url": "https://x/labels/docs", "default": false, "user": {"login": "b"}}
        ]);
        assert_eq!(
            round_trip(&items),
            "url: https://x/labels/{name}\ndefault: false\nid,name,*2,user.login\n1,bug,a\n2,docs,b"
        );
    }

    #[test]
    fn identical_rows_keep_a_column() {
        let items = json!([{"a": 1, "b": 2}, {"a": 1, "b": 2}]);
        assert_eq!(round_trip(&items), "b:2\na,*\n1\n1");
    }

    #[test]
    fn weird_keys_are_quoted() {
        let items = json!([{"": 1, "a.b": 2, "c:d": 3, "x y": 4, "q\"": 5}]);
        assert_eq!(
            round_trip(&items),
            "\"\",\"a.b\",\"c:d\",x y,\"q\\\"\"\n1,2,3,4,5"
        );
    }

    #[test]
    fn an_array_column_last_is_the_rest_of_the_row() {
        let items = json!([
            {"name": "a.py", "observations": ["300 lines", "defines A, B", "uses os"]},
            {"name": "b.py", "observations": []},
            {"name": "c.py", "observations": [1, "1", null, "", {"k": [2]}, [3]]},
            {"observations": ["only"]}
        ]);
        assert_eq!(
            round_trip(&items),
            "name,observations[]\na.py,300 lines,\"defines A, B\",uses os\nb.py\n\
             c.py,1,\"1\",null,\"\",{\"k\":[2]},[3]\n,only"
        );
        // The only stored column.
        let items = json!([{"tags": ["x", "y"]}, {"tags": ["z"]}]);
        assert_eq!(round_trip(&items), "tags[]\nx,y\nz");
    }

    #[test]
    fn no_list_column_where_a_row_would_be_empty() {
        // The only column, an empty array: a plain cell instead.
        let items = json!([{"tags": ["x"]}, {"tags": []}]);
        assert_eq!(round_trip(&items), "tags\n[\"x\"]\n[]");
        // A row without the key: no list column.
        let items = json!([{"a": 1, "tags": ["x"]}, {"a": 2}]);
        assert_eq!(round_trip(&items), "a,tags\n1,[\"x\"]\n2,");
        // An absent cell before an empty array.
        let items = json!([{"a": 1, "tags": ["x"]}, {"tags": []}]);
        assert_eq!(round_trip(&items), "a,tags\n1,[\"x\"]\n,[]");
    }

    #[test]
    fn list_columns_that_break_the_grammar_are_errors() {
        for bad in ["a[],b\n1,2", "a,b[]\n1,x,,y", "a,b[]\n1,", "b[]\n"] {
            let mut sc = Scanner::new(bad, 0);
            assert!(
                parse_block(&mut sc, Rows::ToEnd, MAX_NESTING).is_err(),
                "{bad:?}"
            );
        }
        // A nested block with a list column, and declarations after it.
        let mut sc = Scanner::new("t[2]:\nk,v[]\n1,a,b\n2\nz: 3", 0);
        let (_, value) = parse_entry(&mut sc, MAX_NESTING, &mut None)
            .unwrap()
            .unwrap();
        assert!(
            matches!(value, LineValue::Value(v) if v == json!([{"k": 1, "v": ["a", "b"]}, {"k": 2, "v": []}]))
        );
        assert_eq!(sc.rest(), "z: 3");
    }

    #[test]
    fn exact_row_count() {
        let mut sc = Scanner::new("a\n1\n2\nrest", 0);
        let rows = parse_block(&mut sc, Rows::Exactly(2), MAX_NESTING).unwrap();
        assert_eq!(rows, vec![json!({"a": 1}), json!({"a": 2})]);
        assert_eq!(sc.rest(), "rest");
        let mut sc = Scanner::new("a\n1", 0);
        assert!(parse_block(&mut sc, Rows::Exactly(2), MAX_NESTING).is_err());
        let mut sc = Scanner::new("a,b\n1", 0);
        assert!(parse_block(&mut sc, Rows::ToEnd, MAX_NESTING).is_err());
        let mut sc = Scanner::new("a\n1,2", 0);
        assert!(parse_block(&mut sc, Rows::ToEnd, MAX_NESTING).is_err());
    }
}
