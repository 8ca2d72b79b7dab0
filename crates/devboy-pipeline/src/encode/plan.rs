//! Encoding side of a record set: which column is written how.
//!
//! A [`Plan`] looks at the rows of a table (or at one object, a table of one
//! row) and gives every column a [`Role`], in these passes:
//!
//! 1. **Flattening.** A column whose value is a non-empty object in every
//!    row becomes a group of dotted columns (`user.login`), recursively (8
//!    levels at most), as long as every key on the way can be written bare
//!    (no `.`, `,`, `:`, quotes, brackets or braces). Otherwise the object
//!    stays one column of inline JSON.
//! 2. **Aliases.** A column or group whose value equals that of an earlier
//!    one in every row, and is a non-empty object or array, is written once
//!    as `name: {other}` (GitHub repeats the same user as `user`,
//!    `assignee`, `milestone.creator`); an array whose items are such
//!    values as `name: [{user}]`. Candidates are found by the compact JSON
//!    of the first row, then checked against every row.
//! 3. **Constants** (tables of two rows or more). A column with one value in
//!    every row is written once.
//! 4. **Patterns.** A string column that equals one pattern over other
//!    columns in every row is written once as that pattern
//!    (`{url}/comments`); a constant only if the pattern is shorter. The
//!    search is bounded: a column is only tried as a reference if its
//!    first-row text passes a 64-bit byte-pair filter and then occurs, at a
//!    word boundary, in the candidate's first-row value; references are
//!    taken longest first, and the result is checked against every row
//!    and against how the decoder will read the line (names resolve from
//!    the nearest group, so a name that is shadowed there is not used).
//! 5. **Tables.** An array of objects written once (in a one-row table or
//!    object, or as a constant) becomes a nested table block when that is
//!    shorter than its inline JSON. Cells stored per row stay inline JSON.
//!
//! Everything else is stored: written per row (in a table) or as the line's
//! value (in an object). No pass looks at more than the first row to find
//! candidates, so planning is about linear in the rows and, per table,
//! quadratic only in the number of columns through a cheap filter.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::cell::{self, is_bare_segment, LineValue};
use super::pattern::{self, Names, Part};
use super::table;
use super::FastHash;

/// How deep objects are flattened into dotted columns.
const MAX_FLATTEN_DEPTH: usize = 8;
/// The shortest string column worth a pattern.
const MIN_TEMPLATE_VALUE: usize = 4;
/// At most this many references in one pattern.
const MAX_TEMPLATE_REFS: usize = 8;
/// The shortest compact JSON worth an alias.
const MIN_ALIAS_JSON: usize = 8;

/// What the rows are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// The rows of a table: constants are written once.
    Table,
    /// One object.
    Object,
}

/// How one column (or group) is written.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Role {
    /// A flattened object: its children are the columns.
    Group,
    /// Written per row.
    Stored,
    /// Written once: the same value in every row.
    Const,
    /// Written once as `{name}` of an earlier column or group.
    Alias(usize),
    /// An array written once as `[{a},{b}]`: its items are the values of
    /// earlier columns or groups.
    AliasList(Vec<usize>),
    /// Written once as a pattern over other columns.
    Pattern(Vec<Part<usize>>),
    /// Inside an alias: not written at all.
    Hidden,
    /// A nested table block with this many rows.
    Table { rows: usize, block: table::Block },
}

/// One column or group, in pre-order (a group comes before its children).
#[derive(Debug)]
pub(super) struct Node<'v> {
    pub(super) key: &'v str,
    parent: Option<usize>,
    /// One past the last node of this node's subtree.
    end: usize,
    /// Whether the key path can be written bare (dotted).
    pub(super) bare: bool,
    /// The dotted path when bare, else the raw key.
    pub(super) name: String,
    /// The value in each row (`None`: absent).
    pub(super) cells: Vec<Option<&'v Value>>,
    pub(super) role: Role,
}

/// The roles of every column of a record set.
#[derive(Debug)]
pub(super) struct Plan<'v> {
    pub(super) nodes: Vec<Node<'v>>,
    pub(super) rows: usize,
    /// The names patterns may reference: every written bare column and
    /// its groups. The decoder derives the same set from the text.
    pub(super) names: Names,
}

impl<'v> Plan<'v> {
    /// Plans the columns of `rows` (at least one). Arrays of objects
    /// written once may become nested tables, up to `nesting` levels deep.
    pub(super) fn new(rows: &[&'v Map<String, Value>], mode: Mode, nesting: usize) -> Self {
        let mut nodes = Vec::new();
        add_level(&mut nodes, None, rows, 0);
        let mut plan = Self {
            nodes,
            rows: rows.len(),
            names: Names::default(),
        };
        plan.find_aliases();
        plan.names = Names::from_dotted(
            plan.nodes.len(),
            plan.nodes
                .iter()
                .filter(|n| n.bare && !matches!(n.role, Role::Group | Role::Hidden))
                .map(|n| n.name.as_str()),
        );
        for x in 0..plan.nodes.len() {
            let shadowed = match &plan.nodes[x].role {
                Role::Alias(y) => plan.ref_name(x, *y).is_none(),
                Role::AliasList(ys) => ys.iter().any(|&y| plan.ref_name(x, y).is_none()),
                _ => false,
            };
            if shadowed {
                // A target is shadowed on this line: write the value itself
                // (its subtree stays out, so the names hold).
                plan.nodes[x].role = Role::Stored;
            }
        }
        if mode == Mode::Table && plan.rows > 1 {
            plan.find_constants();
        }
        plan.find_patterns();
        if nesting > 0 {
            plan.find_tables(nesting - 1);
        }
        plan
    }

    fn is_ancestor(&self, a: usize, b: usize) -> bool {
        a < b && b < self.nodes[a].end
    }

    fn find_aliases(&mut self) {
        let mut seen: HashMap<String, Vec<usize>, FastHash> = HashMap::default();
        let mut x = 0;
        while x < self.nodes.len() {
            let node = &self.nodes[x];
            let first = match node.cells.first() {
                Some(Some(v)) => *v,
                _ => {
                    x += 1;
                    continue;
                }
            };
            let nonempty = match first {
                Value::Object(m) => !m.is_empty(),
                Value::Array(a) => !a.is_empty(),
                _ => false,
            };
            if !node.bare
                || node.role == Role::Hidden
                || !nonempty
                || node.cells.iter().any(Option::is_none)
            {
                x += 1;
                continue;
            }
            let json = first.to_string();
            if json.len() < MIN_ALIAS_JSON {
                x += 1;
                continue;
            }
            let target = seen.get(&json).and_then(|ys| {
                ys.iter().copied().find(|&y| {
                    !self.is_ancestor(y, x) && self.nodes[y].cells == self.nodes[x].cells
                })
            });
            if target.is_none() {
                if let Some(items) = self.alias_list(x, first, &seen) {
                    self.nodes[x].role = Role::AliasList(items);
                    x = self.nodes[x].end;
                    continue;
                }
            }
            match target {
                Some(y) => {
                    self.nodes[x].role = Role::Alias(y);
                    let end = self.nodes[x].end;
                    for hidden in &mut self.nodes[x + 1..end] {
                        hidden.role = Role::Hidden;
                    }
                    x = end;
                }
                None => {
                    seen.entry(json).or_default().push(x);
                    x += 1;
                }
            }
        }
    }

    /// For an array column `x` (first-row value `first`): earlier columns
    /// whose values are its items, in every row.
    fn alias_list(
        &self,
        x: usize,
        first: &Value,
        seen: &HashMap<String, Vec<usize>, FastHash>,
    ) -> Option<Vec<usize>> {
        let Value::Array(items) = first else {
            return None;
        };
        let mut targets = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ys = seen.get(&item.to_string())?;
            let y = ys.iter().copied().find(|&y| {
                (0..self.rows).all(|r| match (self.cell(x, r), self.cell(y, r)) {
                    (Some(Value::Array(row)), Some(value)) => {
                        row.len() == items.len() && row.get(i) == Some(value)
                    }
                    _ => false,
                })
            })?;
            targets.push(y);
        }
        Some(targets)
    }

    fn find_constants(&mut self) {
        for node in &mut self.nodes {
            if node.role != Role::Stored {
                continue;
            }
            let Some(Some(first)) = node.cells.first() else {
                continue;
            };
            if node
                .cells
                .iter()
                .all(|c| c.is_some_and(|c| crate::exact::same(c, first)))
            {
                node.role = Role::Const;
            }
        }
    }

    /// Candidate pattern references: bare written leaves with a string or
    /// number in the first row, and that value's text.
    fn reference_candidates(&self) -> Vec<Candidate<'v>> {
        let mut out = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            if !node.bare || !matches!(node.role, Role::Stored | Role::Const) {
                continue;
            }
            let text = match node.cells.first() {
                Some(Some(Value::String(s))) => Cow::Borrowed(s.as_str()),
                Some(Some(Value::Number(n))) => Cow::Owned(n.to_string()),
                _ => continue,
            };
            if !text.is_empty() {
                out.push(Candidate {
                    column: i,
                    bigrams: bigrams(&text),
                    text,
                });
            }
        }
        out
    }

    fn find_patterns(&mut self) {
        let candidates = self.reference_candidates();
        // A value shorter than every candidate holds none of them.
        let Some(shortest) = candidates.iter().map(|k| k.text.len()).min() else {
            return;
        };
        for c in 0..self.nodes.len() {
            if !matches!(self.nodes[c].role, Role::Stored | Role::Const) {
                continue;
            }
            let first: &'v Value = match self.nodes[c].cells.first() {
                Some(Some(v)) => v,
                _ => continue,
            };
            let Value::String(first) = first else {
                continue;
            };
            if first.len() < MIN_TEMPLATE_VALUE
                || first.len() < shortest
                || !self.nodes[c]
                    .cells
                    .iter()
                    .all(|v| matches!(v, Some(Value::String(_))))
            {
                continue;
            }
            if let Some(parts) = self.pattern_for(c, first, &candidates) {
                self.nodes[c].role = Role::Pattern(parts);
            }
        }
    }

    /// A pattern for column `c` (first-row value `first`), checked against
    /// every row and against how the decoder will read its text.
    fn pattern_for(
        &self,
        c: usize,
        first: &str,
        candidates: &[Candidate<'_>],
    ) -> Option<Vec<Part<usize>>> {
        let parent = self.nodes[c].parent;
        // A column written once anyway gains only if the pattern is shorter.
        let once = self.rows == 1 || self.nodes[c].role == Role::Const;
        let haystack = bigrams(first);
        let mut usable: Vec<(usize, &str)> = candidates
            .iter()
            .filter(|k| {
                let (d, text) = (k.column, &*k.text);
                d != c
                    && text.len() <= first.len()
                    && k.bigrams & !haystack == 0
                    && occurrences(first, text).next().is_some()
                    && !self.depends_on(d, c)
                    // Written once, a reference must be shorter than its text.
                    && self
                        .ref_name(c, d)
                        .is_some_and(|name| !once || text.len() > name.len() + 2)
            })
            .map(|k| (k.column, &*k.text))
            .collect();
        if usable.is_empty() {
            return None;
        }
        usable.sort_by_key(|&(d, text)| {
            (
                std::cmp::Reverse(text.len()),
                self.nodes[d].parent != parent,
                d,
            )
        });
        let mut parts = build_pattern(first, &usable);
        if !self.pattern_holds(c, &parts) {
            // Keep only references that occur in every row, and retry.
            usable.retain(|&(d, _)| {
                (0..self.rows).all(|r| match (self.cell(c, r), self.cell(d, r)) {
                    (Some(Value::String(s)), Some(Value::String(v))) => s.contains(v.as_str()),
                    (Some(Value::String(s)), Some(Value::Number(n))) => {
                        s.contains(n.to_string().as_str())
                    }
                    _ => false,
                })
            });
            parts = build_pattern(first, &usable);
            if !self.pattern_holds(c, &parts) {
                return None;
            }
        }
        // `[{a},{b}]` would read as a list of values.
        if pattern::is_list(&parts) {
            return None;
        }
        let text = self.pattern_text(c, &parts);
        if once && text.len() >= first.len() {
            return None;
        }
        self.reads_back(c, &text, &parts).then_some(parts)
    }

    fn cell(&self, column: usize, row: usize) -> Option<&'v Value> {
        self.nodes.get(column)?.cells.get(row).copied().flatten()
    }

    /// Whether pattern column `d` reads column `c`, directly or through
    /// other patterns.
    fn depends_on(&self, d: usize, c: usize) -> bool {
        if d == c {
            return true;
        }
        if !matches!(
            self.nodes.get(d).map(|node| &node.role),
            Some(Role::Pattern(_))
        ) {
            return false;
        }
        let mut stack = vec![d];
        let mut visited = HashSet::new();
        while let Some(n) = stack.pop() {
            if n == c {
                return true;
            }
            if !visited.insert(n) {
                continue;
            }
            if let Some(Role::Pattern(parts)) = self.nodes.get(n).map(|node| &node.role) {
                stack.extend(parts.iter().filter_map(|p| match p {
                    Part::Ref(r) => Some(*r),
                    Part::Lit(_) => None,
                }));
            }
        }
        false
    }

    /// Whether `parts` gives column `c`'s value in every row.
    fn pattern_holds(&self, c: usize, parts: &[Part<usize>]) -> bool {
        if !parts.iter().any(|p| matches!(p, Part::Ref(_))) {
            return false;
        }
        (0..self.rows).all(|r| match self.cell(c, r) {
            Some(Value::String(expected)) => self.renders_to(parts, r, expected),
            _ => false,
        })
    }

    fn renders_to(&self, parts: &[Part<usize>], row: usize, expected: &str) -> bool {
        if let [Part::Ref(d)] = parts {
            return matches!(self.cell(*d, row), Some(Value::String(s)) if s == expected);
        }
        let mut rest = expected;
        let mut number = String::new();
        for part in parts {
            let next = match part {
                Part::Lit(lit) => rest.strip_prefix(lit.as_str()),
                Part::Ref(d) => match self.cell(*d, row) {
                    Some(Value::String(s)) => rest.strip_prefix(s.as_str()),
                    Some(Value::Number(n)) => {
                        number.clear();
                        let _ = write!(number, "{n}");
                        rest.strip_prefix(number.as_str())
                    }
                    _ => None,
                },
            };
            match next {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty()
    }

    /// The dotted path of the group holding column `c` (`""` at the top):
    /// the scope its line's references resolve in.
    pub(super) fn parent_name(&self, c: usize) -> &str {
        match self.nodes[c].parent {
            Some(p) if self.nodes[c].bare => &self.nodes[p].name,
            _ => "",
        }
    }

    /// The shortest name by which the line of column `c` references `d`;
    /// `None` if every name of `d` is shadowed there by a nearer column.
    pub(super) fn ref_name(&self, c: usize, d: usize) -> Option<&str> {
        let full = self.nodes[d].name.as_str();
        let parent = self.parent_name(c);
        let starts = full
            .rmatch_indices('.')
            .map(|(dot, _)| dot + 1)
            .chain(std::iter::once(0));
        starts
            .map(|start| &full[start..])
            .find(|suffix| self.names.resolves_to(parent, suffix, full))
    }

    /// Column `c`'s pattern as written on its line.
    pub(super) fn pattern_text(&self, c: usize, parts: &[Part<usize>]) -> String {
        let mut out = String::new();
        pattern::write(&mut out, parts, |&d| {
            self.ref_name(c, d).unwrap_or(&self.nodes[d].name)
        });
        out
    }

    /// Whether the decoder reads `text`, on the line of column `c`, back as
    /// exactly `parts`.
    fn reads_back(&self, c: usize, text: &str, parts: &[Part<usize>]) -> bool {
        let plain = !text.starts_with(['"', cell::TILDE, cell::CARET])
            && !text.starts_with(char::is_whitespace)
            && !text.ends_with(char::is_whitespace)
            && !text.chars().any(char::is_control)
            && cell::classify_line(text) == LineValue::Text(text.to_owned());
        if !plain {
            return false;
        }
        let parent = self.parent_name(c);
        let read = pattern::parse(text, |name| self.names.lookup(parent, name));
        read.len() == parts.len()
            && read.iter().zip(parts).all(|(a, b)| match (a, b) {
                (Part::Lit(x), Part::Lit(y)) => x == y,
                (Part::Ref(name), Part::Ref(d)) => *name == self.nodes[*d].name.as_str(),
                _ => false,
            })
    }

    /// Arrays of objects written once (the value of a one-row table, or a
    /// constant) become nested tables when that is shorter than inline JSON.
    fn find_tables(&mut self, nesting: usize) {
        let once = self.rows == 1;
        for node in &mut self.nodes {
            let written_once = match node.role {
                Role::Stored => once,
                Role::Const => true,
                _ => false,
            };
            if !written_once {
                continue;
            }
            let Some(Some(Value::Array(items))) = node.cells.first() else {
                continue;
            };
            if items.is_empty() || !items.iter().all(Value::is_object) {
                continue;
            }
            let Some(block) = table::block(items, nesting, true) else {
                continue;
            };
            let inline = serde_json::to_string(items).map_or(0, |json| json.len());
            if block.text.len() < inline {
                node.role = Role::Table {
                    rows: items.len(),
                    block,
                };
            }
        }
    }

    /// Whether any column is written as a pattern or an alias.
    pub(super) fn has_references(&self) -> bool {
        self.nodes.iter().any(|n| {
            matches!(
                n.role,
                Role::Pattern(_) | Role::Alias(_) | Role::AliasList(_)
            )
        })
    }
}

/// Adds the columns of one level (the union of the keys of `maps`, in
/// first-seen order), flattening objects into groups.
/// The columns (indices into first-seen order) in an order every map's
/// own key order agrees with, when that is not first-seen order: rows that
/// leave out a key other rows have still decode in their own order
/// (invariant 12). Ties go by first sight. `None` keeps first-seen order:
/// it already agrees, or no order does (two rows disagree), and then the
/// table will not decode back exactly and is not used.
fn merged_order(
    maps: &[&Map<String, Value>],
    index: &HashMap<&str, usize, FastHash>,
    n: usize,
) -> Option<Vec<usize>> {
    let order = key_order(maps, index, n)?;
    let reordered = order.iter().enumerate().any(|(i, &c)| i != c);
    reordered.then_some(order)
}

/// The key order every map agrees with (a topological order of the maps'
/// "comes before" pairs, ties by first sight: `index` numbers the `n` keys
/// in first-seen order), or `None` when two maps disagree.
fn key_order(
    maps: &[&Map<String, Value>],
    index: &HashMap<&str, usize, FastHash>,
    n: usize,
) -> Option<Vec<usize>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut before = vec![0usize; n];
    let mut seen: std::collections::HashSet<(usize, usize), FastHash> = Default::default();
    for map in maps {
        let mut previous: Option<usize> = None;
        for key in map.keys() {
            let &c = index.get(key.as_str())?;
            if let Some(p) = previous {
                if seen.insert((p, c)) {
                    after[p].push(c);
                    before[c] += 1;
                }
            }
            previous = Some(c);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&c| before[c] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(c)) = ready.pop() {
        order.push(c);
        for &next in &after[c] {
            before[next] -= 1;
            if before[next] == 0 {
                ready.push(Reverse(next));
            }
        }
    }
    (order.len() == n).then_some(order)
}

/// Whether one key order agrees with the key order of every map (each
/// map's keys appear in it in the map's own order). Objects whose orders
/// disagree (an events feed's `payload`, shaped by the event's type) stay
/// one column of inline JSON, which keeps each one's order, instead of
/// flattening into columns no order fits.
pub(super) fn orders_agree(maps: &[&Map<String, Value>]) -> bool {
    let Some(first) = maps.first() else {
        return true;
    };
    if maps
        .iter()
        .all(|m| m.len() == first.len() && m.keys().eq(first.keys()))
    {
        return true;
    }
    let mut index: HashMap<&str, usize, FastHash> = HashMap::default();
    for map in maps {
        for key in map.keys() {
            let next = index.len();
            index.entry(key.as_str()).or_insert(next);
        }
    }
    key_order(maps, &index, index.len()).is_some()
}

fn add_level<'v>(
    nodes: &mut Vec<Node<'v>>,
    parent: Option<usize>,
    maps: &[&'v Map<String, Value>],
    depth: usize,
) {
    // The union of the keys in first-seen order, and each key's value in
    // every map, in one pass. Rows usually list their keys in the same
    // order, so the column after the last one found is tried first and the
    // index is only asked when that guess fails.
    let mut keys: Vec<&'v str> = Vec::new();
    let mut columns: Vec<Vec<Option<&'v Value>>> = Vec::new();
    let mut index: HashMap<&'v str, usize, FastHash> = HashMap::default();
    for (r, map) in maps.iter().enumerate() {
        let mut next = 0;
        for (key, value) in map.iter() {
            let key = key.as_str();
            let column = if keys.get(next) == Some(&key) {
                next
            } else if let Some(&column) = index.get(key) {
                column
            } else {
                let column = keys.len();
                if maps.len() > 1 {
                    index.insert(key, column);
                }
                keys.push(key);
                columns.push(vec![None; maps.len()]);
                column
            };
            columns[column][r] = Some(value);
            next = column + 1;
        }
    }
    if let Some(order) = (maps.len() > 1)
        .then(|| merged_order(maps, &index, keys.len()))
        .flatten()
    {
        keys = order.iter().map(|&c| keys[c]).collect();
        let mut taken: Vec<Option<Vec<Option<&'v Value>>>> =
            columns.into_iter().map(Some).collect();
        columns = order.iter().filter_map(|&c| taken[c].take()).collect();
    }
    let (parent_bare, prefix) = match parent {
        Some(p) => (nodes[p].bare, Some(nodes[p].name.clone())),
        None => (true, None),
    };
    for (key, cells) in keys.into_iter().zip(columns) {
        let bare = parent_bare && is_bare_segment(key);
        let name = match (&prefix, bare) {
            (Some(prefix), true) => format!("{prefix}.{key}"),
            _ => key.to_owned(),
        };
        let index = nodes.len();
        let objects: Option<Vec<&'v Map<String, Value>>> = cells
            .iter()
            .map(|c| match c {
                Some(Value::Object(m)) if !m.is_empty() => Some(m),
                _ => None,
            })
            .collect();
        let flatten = match &objects {
            Some(objects) if bare && depth < MAX_FLATTEN_DEPTH => {
                objects.iter().all(|m| m.keys().all(|k| is_bare_segment(k)))
                    && orders_agree(objects)
            }
            _ => false,
        };
        nodes.push(Node {
            key,
            parent,
            end: index + 1,
            bare,
            name,
            cells,
            role: if flatten { Role::Group } else { Role::Stored },
        });
        if flatten {
            if let Some(objects) = objects {
                add_level(nodes, Some(index), &objects, depth + 1);
            }
            nodes[index].end = nodes.len();
        }
    }
}

/// A column a pattern may reference, with its first-row text.
struct Candidate<'v> {
    column: usize,
    text: Cow<'v, str>,
    /// [`bigrams`] of `text`.
    bigrams: u64,
}

/// A 64-bit set of the byte pairs in `s`: if a needle's set is not inside
/// a haystack's, the needle does not occur in it. Checking that first
/// spares building a substring searcher for almost every pair of columns.
fn bigrams(s: &str) -> u64 {
    s.as_bytes().windows(2).fold(0u64, |set, pair| {
        let hash = (u32::from(pair[0]) * 31 + u32::from(pair[1])) % 64;
        set | (1u64 << hash)
    })
}

/// Byte offsets where `needle` occurs in `haystack` at word boundaries: a
/// match that starts (ends) with a letter, digit or `_` may not be preceded
/// (followed) by one, so `1` is not found inside `1347`. Nor inside braces,
/// so the `{/other_user}` of a URL template stays as it reads.
fn occurrences<'a>(haystack: &'a str, needle: &'a str) -> impl Iterator<Item = usize> + 'a {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let starts_word = needle.chars().next().is_some_and(is_word);
    let ends_word = needle.chars().next_back().is_some_and(is_word);
    let hay = haystack.as_bytes();
    let pat = needle.as_bytes();
    // The matches `str::match_indices` gives (left to right, not
    // overlapping), found by hand: no searcher to build per needle. A
    // match of valid UTF-8 in valid UTF-8 starts and ends on `char`
    // boundaries. Braces before a match are counted as the search goes.
    let mut from = 0;
    let mut counted = 0;
    let mut depth: isize = 0;
    std::iter::from_fn(move || {
        let (&first, tail) = pat.split_first()?;
        loop {
            let window = hay.get(from..)?;
            if window.len() < pat.len() {
                return None;
            }
            let last_start = window.len() - pat.len();
            let offset = window[..=last_start].iter().position(|&b| b == first)?;
            let at = from + offset;
            if &hay[at + 1..at + pat.len()] != tail {
                from = at + 1;
                continue;
            }
            from = at + pat.len();
            for &b in &hay[counted..at] {
                match b {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    _ => {}
                }
            }
            counted = at;
            let before = haystack[..at].chars().next_back();
            let after = haystack[at + pat.len()..].chars().next();
            let clash = depth > 0
                || (starts_word && before.is_some_and(is_word))
                || (ends_word && after.is_some_and(is_word));
            if !clash {
                return Some(at);
            }
        }
    })
}

/// Cuts `value` into literal text and references to the candidates, taking
/// candidates in order and every non-overlapping occurrence of each.
fn build_pattern(value: &str, candidates: &[(usize, &str)]) -> Vec<Part<usize>> {
    let mut spans: Vec<(usize, usize, usize)> = Vec::new();
    for &(d, text) in candidates {
        for at in occurrences(value, text) {
            if spans.len() >= MAX_TEMPLATE_REFS {
                break;
            }
            let end = at + text.len();
            if spans.iter().all(|&(s, e, _)| end <= s || at >= e) {
                spans.push((at, end, d));
            }
        }
    }
    spans.sort_unstable();
    let mut parts = Vec::with_capacity(spans.len() * 2 + 1);
    let mut pos = 0;
    for (start, end, d) in spans {
        if start > pos {
            parts.push(Part::Lit(value[pos..start].to_owned()));
        }
        parts.push(Part::Ref(d));
        pos = end;
    }
    if pos < value.len() {
        parts.push(Part::Lit(value[pos..].to_owned()));
    }
    parts
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn objects(v: &Value) -> Vec<&Map<String, Value>> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_object().unwrap())
            .collect()
    }

    fn role<'a>(plan: &'a Plan<'_>, name: &str) -> &'a Role {
        &plan.nodes.iter().find(|n| n.name == name).unwrap().role
    }

    #[test]
    fn bigram_sets_contain_substrings() {
        let hay = bigrams("https://api.github.com/users/octocat");
        for needle in ["octocat", "api.github", "s/o", "https"] {
            assert_eq!(bigrams(needle) & !hay, 0, "{needle}");
        }
        assert_ne!(bigrams("zq") & !hay, 0);
    }

    #[test]
    fn word_boundaries() {
        assert_eq!(occurrences("a/1347/1", "1").collect::<Vec<_>>(), vec![7]);
        assert_eq!(occurrences("octocat_happy", "octocat").count(), 0);
        assert_eq!(
            occurrences("u/octocat/x", "octocat").collect::<Vec<_>>(),
            vec![2]
        );
        assert_eq!(occurrences("/x/", "/").count(), 2);
        assert_eq!(
            occurrences("u/x/following{/x}", "x").collect::<Vec<_>>(),
            vec![2]
        );
    }

    /// The search as first written, with `str::match_indices`.
    fn occurrences_by_match_indices(haystack: &str, needle: &str) -> Vec<usize> {
        let is_word = |c: char| c.is_alphanumeric() || c == '_';
        let starts_word = needle.chars().next().is_some_and(is_word);
        let ends_word = needle.chars().next_back().is_some_and(is_word);
        haystack
            .match_indices(needle)
            .filter_map(|(at, _)| {
                let before = haystack[..at].chars().next_back();
                let after = haystack[at + needle.len()..].chars().next();
                let prefix = &haystack[..at];
                let in_braces = prefix.matches('{').count() > prefix.matches('}').count();
                let clash = in_braces
                    || (starts_word && before.is_some_and(is_word))
                    || (ends_word && after.is_some_and(is_word));
                (!needle.is_empty() && !clash).then_some(at)
            })
            .collect()
    }

    #[test]
    fn occurrences_match_the_reference_search() {
        let alphabet = ['a', '1', '/', '{', '}', '_', 'é', ' '];
        // Every string of up to 5 characters over the alphabet, by number.
        let spell = |mut n: usize| {
            let mut s = String::new();
            while n > 0 {
                s.push(alphabet[(n - 1) % alphabet.len()]);
                n = (n - 1) / alphabet.len();
            }
            s
        };
        let needles: Vec<String> = (0..600).map(spell).collect();
        for h in (0..40_000).step_by(7) {
            let hay = spell(h);
            for needle in &needles {
                assert_eq!(
                    occurrences(&hay, needle).collect::<Vec<_>>(),
                    occurrences_by_match_indices(&hay, needle),
                    "{hay:?} {needle:?}"
                );
            }
        }
    }

    #[test]
    fn flattens_only_objects_in_every_row() {
        let rows = json!([
            {"user": {"login": "a", "id": 1}, "m": {"x": 1}, "d": {"a.b": 1}, "e": {}},
            {"user": {"login": "b", "id": 2}, "m": null, "d": {"a.b": 2}, "e": {}}
        ]);
        let plan = Plan::new(&objects(&rows), Mode::Table, 0);
        let names: Vec<&str> = plan.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["user", "user.login", "user.id", "m", "d", "e"]);
        assert_eq!(role(&plan, "user"), &Role::Group);
        assert_eq!(role(&plan, "m"), &Role::Stored);
        assert_eq!(role(&plan, "e"), &Role::Const);
    }

    #[test]
    fn finds_patterns_constants_and_aliases() {
        let rows = json!([
            {"login": "octocat", "url": "https://api.github.com/users/octocat",
             "followers_url": "https://api.github.com/users/octocat/followers",
             "type": "User", "owner": {"login": "octocat", "id": 1}, "creator": {"login": "octocat", "id": 1}},
            {"login": "hubot", "url": "https://api.github.com/users/hubot",
             "followers_url": "https://api.github.com/users/hubot/followers",
             "type": "User", "owner": {"login": "x", "id": 2}, "creator": {"login": "x", "id": 2}}
        ]);
        let plan = Plan::new(&objects(&rows), Mode::Table, 0);
        assert_eq!(role(&plan, "type"), &Role::Const);
        let Role::Pattern(parts) = role(&plan, "url") else {
            panic!("{:?}", role(&plan, "url"))
        };
        let url = plan.nodes.iter().position(|n| n.name == "url").unwrap();
        assert_eq!(
            plan.pattern_text(url, parts),
            "https://api.github.com/users/{login}"
        );
        let Role::Pattern(parts) = role(&plan, "followers_url") else {
            panic!()
        };
        assert_eq!(plan.pattern_text(url + 1, parts), "{url}/followers");
        assert_eq!(role(&plan, "owner"), &Role::Group);
        let owner = plan.nodes.iter().position(|n| n.name == "owner").unwrap();
        assert_eq!(role(&plan, "creator"), &Role::Alias(owner));
        assert_eq!(role(&plan, "creator.login"), &Role::Hidden);
        assert!(plan.has_references());
    }

    #[test]
    fn pattern_needs_every_row() {
        let rows = json!([
            {"a": "xx", "b": "see xx here"},
            {"a": "yy", "b": "see zz here"}
        ]);
        let plan = Plan::new(&objects(&rows), Mode::Table, 0);
        assert_eq!(role(&plan, "b"), &Role::Stored);
    }

    #[test]
    fn one_row_patterns_must_be_shorter() {
        let rows = json!([{"number": 1347, "id": 1, "url": "https://x/issues/1347"}]);
        let plan = Plan::new(&objects(&rows), Mode::Table, 0);
        assert_eq!(role(&plan, "url"), &Role::Stored);
        let rows = json!([{"url": "https://api.github.com/users/octocat", "f": "https://api.github.com/users/octocat/followers"}]);
        let plan = Plan::new(&objects(&rows), Mode::Table, 0);
        assert!(matches!(role(&plan, "f"), Role::Pattern(_)));
    }
}
