//! Decoding side of a record set: the columns a table (or a `key: value`
//! object) declared, and how each row's object is rebuilt from them.
//!
//! A column's value in a row comes from one of three sources: the row's own
//! cell, a value written once for every row, or a pattern over other
//! columns of the same row. Patterns are evaluated in dependency order
//! (computed once per table, not per row); a cycle is an error. Each row's
//! object is then assembled by inserting every present value at its key's
//! path, creating the nested objects of dotted keys on the way.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::map::Entry;
use serde_json::{Map, Value};

use super::cell::{Key, LineValue};
use super::pattern::{self, Part};
use super::{FastHash, FormatDecodeError};

/// What a pattern reference points at.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// One column.
    Leaf(usize),
    /// A group: the object made of every column under a dotted prefix.
    Group(usize),
}

/// Where a column's value comes from.
#[derive(Debug)]
enum Source {
    /// The row's cell with this index.
    Stored(usize),
    /// The same value in every row.
    Value(Value),
    /// A pattern over the row's other columns.
    Pattern(Vec<Part<Target>>),
}

/// Where a header puts columns: its items in order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Place {
    /// The next stored column.
    Stored,
    /// The next this many declared columns.
    Declared(usize),
}

/// The columns of one record set, ready to rebuild rows.
#[derive(Debug)]
pub(super) struct RecordShape {
    keys: Vec<Key>,
    sources: Vec<Source>,
    /// For each group, its member columns and the length of the group's
    /// path (the member's key below the group starts there).
    groups: Vec<Vec<(usize, usize)>>,
    /// Pattern columns in evaluation order.
    order: Vec<usize>,
    stored: usize,
}

fn invalid(message: impl Into<String>) -> FormatDecodeError {
    FormatDecodeError::Invalid(message.into())
}

impl RecordShape {
    /// Columns declared once for every row (`lines`, in order) and columns
    /// stored per row (`stored`, in cell order), in a row's key order as
    /// `places` (the header's items) interleave them: with no
    /// [`Place::Declared`], every declared column first; declared columns
    /// left over, after the last item.
    pub(super) fn new(
        lines: Vec<(Key, LineValue)>,
        stored: Vec<Key>,
        places: &[Place],
    ) -> Result<Self, FormatDecodeError> {
        let mut keys = Vec::with_capacity(lines.len() + stored.len());
        let mut raw = Vec::with_capacity(lines.len() + stored.len());
        let stored_count = stored.len();
        let mut lines = lines.into_iter();
        let mut stored = stored.into_iter();
        let declare = |lines: &mut std::vec::IntoIter<(Key, LineValue)>,
                       keys: &mut Vec<Key>,
                       raw: &mut Vec<Option<LineValue>>,
                       n: usize| {
            for _ in 0..n {
                let (key, value) = lines
                    .next()
                    .ok_or_else(|| invalid("a header places more columns than are declared"))?;
                keys.push(key);
                raw.push(Some(value));
            }
            Ok::<(), FormatDecodeError>(())
        };
        if !places.iter().any(|p| matches!(p, Place::Declared(_))) {
            let all = lines.len();
            declare(&mut lines, &mut keys, &mut raw, all)?;
        }
        for place in places {
            match place {
                Place::Declared(n) => declare(&mut lines, &mut keys, &mut raw, *n)?,
                Place::Stored => {
                    if let Some(key) = stored.next() {
                        keys.push(key);
                        raw.push(None);
                    }
                }
            }
        }
        // Stored columns past the places given (callers without a header
        // pass none), then declared ones left over.
        for key in stored {
            keys.push(key);
            raw.push(None);
        }
        let left = lines.len();
        declare(&mut lines, &mut keys, &mut raw, left)?;

        // The reference scope: every bare column name and group prefix.
        let mut index: HashMap<String, Target, FastHash> = HashMap::default();
        let mut groups: Vec<Vec<(usize, usize)>> = Vec::new();
        for (column, key) in keys.iter().enumerate() {
            let Key::Path(segments) = key else { continue };
            let mut name = String::new();
            for (depth, segment) in segments.iter().enumerate() {
                if depth > 0 {
                    name.push('.');
                }
                name.push_str(segment);
                if depth + 1 == segments.len() {
                    index.insert(name.clone(), Target::Leaf(column));
                } else {
                    match index.get(&name) {
                        Some(Target::Group(g)) => groups[*g].push((column, depth + 1)),
                        Some(Target::Leaf(_)) => {}
                        None => {
                            index.insert(name.clone(), Target::Group(groups.len()));
                            groups.push(vec![(column, depth + 1)]);
                        }
                    }
                }
            }
        }
        let mut sources = Vec::with_capacity(keys.len());
        let mut next_cell = 0;
        for (key, value) in keys.iter().zip(raw) {
            sources.push(match value {
                None => {
                    next_cell += 1;
                    Source::Stored(next_cell - 1)
                }
                Some(LineValue::Value(v)) => Source::Value(v),
                Some(LineValue::Text(text)) => {
                    let parent = match key {
                        Key::Path(segments) => segments
                            .get(..segments.len().saturating_sub(1))
                            .unwrap_or(&[])
                            .join("."),
                        Key::Literal(_) => String::new(),
                    };
                    let parts = pattern::parse(&text, |name| {
                        pattern::find_scoped(&parent, name, |full| index.get(full).copied())
                    });
                    if parts.iter().any(|p| matches!(p, Part::Ref(_))) {
                        Source::Pattern(parts)
                    } else {
                        Source::Value(Value::String(text))
                    }
                }
            });
        }

        let mut shape = Self {
            keys,
            sources,
            groups,
            order: Vec::new(),
            stored: stored_count,
        };
        shape.order = shape.evaluation_order()?;
        Ok(shape)
    }

    /// Pattern columns ordered so each comes after the patterns it reads
    /// (Kahn's algorithm).
    fn evaluation_order(&self) -> Result<Vec<usize>, FormatDecodeError> {
        let is_pattern = |c: usize| matches!(self.sources.get(c), Some(Source::Pattern(_)));
        let mut pending = vec![0usize; self.sources.len()];
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); self.sources.len()];
        let mut patterns = 0;
        for (column, source) in self.sources.iter().enumerate() {
            let Source::Pattern(parts) = source else {
                continue;
            };
            patterns += 1;
            for part in parts {
                let mut depend = |on: usize| {
                    if is_pattern(on) {
                        pending[column] += 1;
                        dependents[on].push(column);
                    }
                };
                match part {
                    Part::Ref(Target::Leaf(on)) => depend(*on),
                    Part::Ref(Target::Group(g)) => {
                        for &(on, _) in &self.groups[*g] {
                            depend(on);
                        }
                    }
                    Part::Lit(_) => {}
                }
            }
        }
        let mut ready: Vec<usize> = (0..self.sources.len())
            .filter(|&c| is_pattern(c) && pending[c] == 0)
            .rev()
            .collect();
        let mut order = Vec::with_capacity(patterns);
        while let Some(column) = ready.pop() {
            order.push(column);
            for &next in &dependents[column] {
                pending[next] -= 1;
                if pending[next] == 0 {
                    ready.push(next);
                }
            }
        }
        if order.len() == patterns {
            Ok(order)
        } else {
            Err(invalid("patterns reference each other in a cycle"))
        }
    }

    /// How many cells each row stores.
    pub(super) fn stored_count(&self) -> usize {
        self.stored
    }

    /// Rebuilds one row's object from its cells (`None`: absent).
    pub(super) fn row(
        &self,
        mut cells: Vec<Option<Value>>,
    ) -> Result<Map<String, Value>, FormatDecodeError> {
        if cells.len() != self.stored {
            return Err(invalid("row has the wrong number of cells"));
        }
        let mut values: Vec<Option<Value>> = self
            .sources
            .iter()
            .map(|source| match source {
                Source::Stored(i) => cells.get_mut(*i).and_then(Option::take),
                Source::Value(v) => Some(v.clone()),
                Source::Pattern(_) => None,
            })
            .collect();
        for &column in &self.order {
            let Some(Source::Pattern(parts)) = self.sources.get(column) else {
                continue;
            };
            let value = self.evaluate(parts, &values)?;
            values[column] = Some(value);
        }
        let mut object = Map::with_capacity(self.keys.len());
        for (key, value) in self.keys.iter().zip(values) {
            if let Some(value) = value {
                insert(&mut object, key, value)?;
            }
        }
        Ok(object)
    }

    fn evaluate(
        &self,
        parts: &[Part<Target>],
        values: &[Option<Value>],
    ) -> Result<Value, FormatDecodeError> {
        if let [Part::Ref(target)] = parts {
            return self.target_value(*target, values);
        }
        if pattern::is_list(parts) {
            let mut items = Vec::with_capacity(parts.len() / 2);
            for part in parts {
                if let Part::Ref(target) = part {
                    items.push(self.target_value(*target, values)?);
                }
            }
            return Ok(Value::Array(items));
        }
        let mut out = String::new();
        for part in parts {
            match part {
                Part::Lit(s) => out.push_str(s),
                Part::Ref(Target::Leaf(c)) => match values.get(*c) {
                    Some(Some(Value::String(s))) => out.push_str(s),
                    Some(Some(Value::Number(n))) => {
                        let _ = write!(out, "{n}");
                    }
                    _ => {
                        return Err(invalid(
                            "a pattern inserts a value that is not a string or number",
                        ))
                    }
                },
                Part::Ref(Target::Group(_)) => {
                    return Err(invalid("a pattern inserts a group into text"));
                }
            }
        }
        Ok(Value::String(out))
    }

    fn target_value(
        &self,
        target: Target,
        values: &[Option<Value>],
    ) -> Result<Value, FormatDecodeError> {
        match target {
            Target::Leaf(c) => values
                .get(c)
                .cloned()
                .flatten()
                .ok_or_else(|| invalid("a pattern references an absent value")),
            Target::Group(g) => {
                let mut object = Map::new();
                for &(column, depth) in self.groups.get(g).map_or(&[][..], Vec::as_slice) {
                    let (Some(Some(value)), Some(Key::Path(segments))) =
                        (values.get(column), self.keys.get(column))
                    else {
                        continue;
                    };
                    insert_path(
                        &mut object,
                        segments.get(depth..).unwrap_or(&[]),
                        value.clone(),
                    )?;
                }
                if object.is_empty() {
                    Err(invalid("a pattern references an absent group"))
                } else {
                    Ok(Value::Object(object))
                }
            }
        }
    }
}

/// Inserts `value` at `key` (a path creates nested objects).
pub(super) fn insert(
    object: &mut Map<String, Value>,
    key: &Key,
    value: Value,
) -> Result<(), FormatDecodeError> {
    match key {
        Key::Literal(k) => match object.entry(k.clone()) {
            Entry::Vacant(slot) => {
                slot.insert(value);
                Ok(())
            }
            Entry::Occupied(_) => Err(invalid(format!("duplicate key {k:?}"))),
        },
        Key::Path(segments) => insert_path(object, segments, value),
    }
}

fn insert_path(
    object: &mut Map<String, Value>,
    path: &[String],
    value: Value,
) -> Result<(), FormatDecodeError> {
    let Some((last, parents)) = path.split_last() else {
        return Err(invalid("empty key"));
    };
    let mut current = object;
    for segment in parents {
        // The columns of a group are usually adjacent: the group is then
        // the last entry, found without hashing its key.
        let group_is_last = current
            .iter()
            .next_back()
            .is_some_and(|(k, _)| k == segment);
        let entry = if group_is_last {
            match current.iter_mut().next_back() {
                Some((_, value)) => value,
                None => return Err(invalid("empty key")),
            }
        } else {
            current
                .entry(segment.clone())
                .or_insert_with(|| Value::Object(Map::new()))
        };
        current = match entry {
            Value::Object(inner) => inner,
            _ => return Err(invalid(format!("{segment:?} is both a value and a group"))),
        };
    }
    match current.entry(last.clone()) {
        Entry::Vacant(slot) => {
            slot.insert(value);
            Ok(())
        }
        Entry::Occupied(_) => Err(invalid(format!("duplicate key {last:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(s: &str) -> Key {
        Key::Path(s.split('.').map(str::to_owned).collect())
    }

    #[test]
    fn rebuilds_rows_with_patterns_and_groups() {
        let shape = RecordShape::new(
            vec![
                (
                    path("user.url"),
                    LineValue::Text("https://x/{user.login}".into()),
                ),
                (
                    path("followers"),
                    LineValue::Text("{user.url}/followers".into()),
                ),
                (path("owner"), LineValue::Text("{user}".into())),
                (
                    path("owners"),
                    LineValue::Text("[{user},{user.login}]".into()),
                ),
                (path("kind"), LineValue::Value(json!("User"))),
            ],
            vec![path("user.login"), path("id")],
            &[],
        )
        .unwrap();
        let row = shape
            .row(vec![Some(json!("octocat")), Some(json!(7))])
            .unwrap();
        assert_eq!(
            Value::Object(row),
            json!({
                "user": {"url": "https://x/octocat", "login": "octocat"},
                "followers": "https://x/octocat/followers",
                "owner": {"url": "https://x/octocat", "login": "octocat"},
                "owners": [{"url": "https://x/octocat", "login": "octocat"}, "octocat"],
                "kind": "User",
                "id": 7
            })
        );
    }

    #[test]
    fn rejects_cycles_and_bad_references() {
        let cycle = RecordShape::new(
            vec![
                (path("a"), LineValue::Text("{b}x".into())),
                (path("b"), LineValue::Text("{a}y".into())),
            ],
            vec![path("c")],
            &[],
        );
        assert!(cycle.is_err());
        let shape = RecordShape::new(
            vec![(path("a"), LineValue::Text("x{b}".into()))],
            vec![path("b")],
            &[],
        )
        .unwrap();
        assert!(shape.row(vec![None]).is_err());
        assert!(shape.row(vec![Some(json!(true))]).is_err());
        assert!(shape.row(vec![]).is_err());
        let dup = RecordShape::new(
            vec![(path("a"), LineValue::Value(json!(1)))],
            vec![path("a")],
            &[],
        )
        .unwrap();
        assert!(dup.row(vec![Some(json!(2))]).is_err());
    }
}
