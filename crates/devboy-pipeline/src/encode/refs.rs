//! Objects that repeat anywhere in a value, defined once and referenced
//! (`refs`).
//!
//! A list page of mixed rows (a GitHub events feed, an issue timeline)
//! fits no single table: the column whose shape follows the row's kind
//! (`payload`) is carried per row as JSON, and most of its tokens are the
//! same user, repository and pull request objects written out again and
//! again, at any depth. `refs` takes every object that occurs twice or more
//! (and is long enough to pay for its reference), defines it once, and
//! writes `&N` wherever it occurred: a bare cell, or the string `"&N"`
//! inside a cell's JSON. The definitions of one shape (the same keys in the
//! same order) form one table, so the table machinery (constants, URL
//! patterns, nested tables) applies to them; a shape with one object is a
//! `&N:` section of its own.
//!
//! ```text
//! > [encoded: refs; &N=object N; k[N]: N rows; … #…]
//! &0[2]:                        ; objects 0 and 1, a table
//! &,login,id,…                  ; `&`: the object's number
//! 0,octocat,1,…
//! 1,hubot,2,…
//! &2:                           ; object 2, alone of its shape
//!  sha: 6dcb09b
//!  author: &0
//! =[30]:                        ; the value itself: an array …
//! id,type,actor,payload,…
//! 1,PushEvent,&0,{"head":"&2"}
//! ```
//!
//! The body is a `doc` text of one object: the keys `&N` hold the
//! definitions, the key `=` the value when it is an array; when it is an
//! object, its own keys follow the definitions. The encoder declines a
//! value that holds a string of the form `&N` itself, an object key `=` or
//! `&N` at the top, or a field `&` in an object it defines: each would read
//! back as something else.
//!
//! Reading back, every string `&N` anywhere is object N (a definition may
//! reference others, never in a cycle); what the references expand to is
//! bounded, so a small text cannot stand for an enormous value.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};

use super::{FastHash, FormatDecodeError};

/// The hint note that says what a reference is.
pub(super) const NOTE: &str = "; &N=object N";

/// The key of the value itself when it is an array.
const MAIN: &str = "=";

/// The column of a definition table that holds each object's number.
const NUMBER: &str = "&";

/// The shortest object (compact JSON, in bytes) worth a reference: `&12`
/// and its definition's number cost about 3 tokens, so a shorter object
/// saves nothing when written twice.
const MIN_BYTES: usize = 24;

/// How many values the decoded tree may hold per byte of text, and at
/// least: a text whose references would expand past this is refused.
const EXPANSION_PER_BYTE: usize = 64;
const EXPANSION_FLOOR: usize = 1 << 16;

/// The number `text` references, if it is of the form `&N` (`N` without
/// leading zeros).
fn reference(text: &str) -> Option<usize> {
    let digits = text.strip_prefix('&')?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && digits.len() <= 9;
    canonical.then(|| digits.parse().ok()).flatten()
}

/// Whether `text` would read back as a reference, or as anything other
/// than itself in a place where references are read.
fn looks_like_reference(text: &str) -> bool {
    text.starts_with('&') && text[1..].bytes().all(|b| b.is_ascii_digit()) && text.len() > 1
}

/// Appends `text` to a signature as its length and itself, which no
/// other text reads as.
fn push_text(sig: &mut String, text: &str) {
    sig.push_str(&text.len().to_string());
    sig.push('"');
    sig.push_str(text);
}

/// One distinct container (object or array) of the value.
struct Distinct {
    /// Times it occurs in the value.
    count: u32,
    /// Bytes of its compact JSON, about (keys and strings unescaped).
    bytes: usize,
    /// Whether it is an object.
    object: bool,
}

/// What the first walk learns: the distinct containers, and each
/// container occurrence (in pre-order) as the distinct one it is and the
/// number of containers in its subtree, itself included.
struct Census {
    distinct: Vec<Distinct>,
    ids: HashMap<String, u32, FastHash>,
    order: Vec<(u32, u32)>,
    /// A string in the value reads as a reference: nothing can be factored.
    clash: bool,
}

impl Census {
    fn of(value: &Value) -> Self {
        let mut census = Census {
            distinct: Vec::new(),
            ids: HashMap::default(),
            order: Vec::new(),
            clash: false,
        };
        census.walk(value);
        census
    }

    /// The signature of a scalar as a child of a container, and its bytes.
    fn scalar(&mut self, value: &Value, sig: &mut String) -> usize {
        match value {
            Value::String(s) => {
                if looks_like_reference(s) {
                    self.clash = true;
                }
                push_text(sig, s);
                s.len() + 2
            }
            other => {
                let text = other.to_string();
                sig.push_str(&text);
                text.len()
            }
        }
    }

    /// Walks `value`; returns its bytes and, for a container, its id.
    fn walk(&mut self, value: &Value) -> (usize, Option<u32>) {
        let (object, children): (bool, Vec<(Option<&String>, &Value)>) = match value {
            Value::Object(map) => (true, map.iter().map(|(k, v)| (Some(k), v)).collect()),
            Value::Array(items) => (false, items.iter().map(|v| (None, v)).collect()),
            _ => return (self.scalar(value, &mut String::new()), None),
        };
        let at = self.order.len();
        self.order.push((0, 0));
        let mut sig = String::from(if object { "{" } else { "[" });
        let mut bytes = 2 + children.len().saturating_sub(1);
        for (key, child) in children {
            if let Some(key) = key {
                push_text(&mut sig, key);
                sig.push(':');
                bytes += key.len() + 3;
            }
            match child {
                Value::Object(_) | Value::Array(_) => {
                    let (child_bytes, id) = self.walk(child);
                    bytes += child_bytes;
                    sig.push('#');
                    sig.push_str(&id.unwrap_or(0).to_string());
                }
                scalar => bytes += self.scalar(scalar, &mut sig),
            }
            sig.push(',');
        }
        let next = self.distinct.len() as u32;
        let id = *self.ids.entry(sig).or_insert(next);
        if id == next {
            self.distinct.push(Distinct {
                count: 0,
                bytes,
                object,
            });
        }
        self.distinct[id as usize].count += 1;
        let span = (self.order.len() - at) as u32;
        self.order[at] = (id, span);
        (bytes, Some(id))
    }

    /// Whether the distinct container `id` may be defined at all.
    fn candidate(&self, id: u32) -> bool {
        let d = &self.distinct[id as usize];
        d.object && d.count >= 2 && d.bytes >= MIN_BYTES
    }
}

/// Where an occurrence sits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The value itself.
    Root,
    /// A row of the value's table: an element of the value, or of an array
    /// directly under it. Rows stay rows.
    Row,
    /// A field of the value when it is an object (the elements of an
    /// array there are rows).
    Field,
    /// A field of a row, through objects only: a column of the table,
    /// named by its path (see [`Paths`]).
    Column(u32),
    /// Anywhere else: inside an array below a row, or below a field.
    Inner,
}

/// What is done with the objects of one column.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Each object is referenced if it repeats (the column then mixes
    /// references and objects).
    Normal,
    /// Every object is referenced, repeated or not: most repeat, and a
    /// column of references only stays one short cell per row.
    Force,
    /// None is: few repeat, and a column of objects only flattens into
    /// columns of their fields.
    Exclude,
}

/// The columns' paths, interned: `(parent path, key)` to a number.
#[derive(Default)]
struct Paths {
    ids: HashMap<(u32, String), u32, FastHash>,
    top: Vec<bool>,
}

impl Paths {
    const TOP: u32 = u32::MAX;

    fn id(&mut self, parent: u32, key: &str) -> u32 {
        let next = self.ids.len() as u32;
        let id = *self.ids.entry((parent, key.to_owned())).or_insert(next);
        if id == next {
            self.top.push(parent == Self::TOP);
        }
        id
    }

    /// Whether column `id` is a field of the row itself.
    fn top(&self, id: u32) -> bool {
        self.top[id as usize]
    }
}

/// The walks after the census: counting references, then rewriting.
struct Factor<'c> {
    census: &'c Census,
    /// The next occurrence in `census.order`.
    at: usize,
    paths: Paths,
    /// Each column's policy (absent: normal).
    policy: HashMap<u32, Policy, FastHash>,
    /// References each distinct candidate gets once the objects it is part
    /// of are defined (the first occurrence of a candidate is walked into,
    /// later ones are not).
    refs: Vec<u32>,
    /// Objects in a forced column: defined even when they occur once.
    forced: Vec<bool>,
    seen: Vec<bool>,
    /// Candidates in the order they are first met.
    first: Vec<u32>,
    /// Each non-empty object met in a column, as (column, distinct).
    in_columns: Vec<(u32, u32)>,
}

impl<'c> Factor<'c> {
    fn new(census: &'c Census) -> Self {
        let n = census.distinct.len();
        Factor {
            census,
            at: 0,
            paths: Paths::default(),
            policy: HashMap::default(),
            refs: vec![0; n],
            forced: vec![false; n],
            seen: vec![false; n],
            first: Vec::new(),
            in_columns: Vec::new(),
        }
    }

    /// Ready for another walk, keeping the paths and policies.
    fn restart(&mut self) {
        self.at = 0;
        self.refs.iter_mut().for_each(|r| *r = 0);
        self.forced.iter_mut().for_each(|f| *f = false);
        self.seen.iter_mut().for_each(|s| *s = false);
        self.first.clear();
        self.in_columns.clear();
    }

    /// The place of a child of a container at `place` (under `key` if an
    /// object).
    fn child(&mut self, place: Place, key: Option<&str>) -> Place {
        match (place, key) {
            (Place::Root, None) | (Place::Field, None) => Place::Row,
            (Place::Root, Some(_)) => Place::Field,
            (Place::Row, Some(key)) => Place::Column(self.paths.id(Paths::TOP, key)),
            (Place::Column(p), Some(key)) => Place::Column(self.paths.id(p, key)),
            _ => Place::Inner,
        }
    }

    /// Whether an object at `place` may be written as a reference, and
    /// whether it must be.
    fn referable(&self, place: Place) -> (bool, bool) {
        match place {
            Place::Root | Place::Row => (false, false),
            Place::Column(p) => match self.policy.get(&p) {
                Some(Policy::Exclude) => (false, false),
                Some(Policy::Force) => (true, true),
                _ => (true, false),
            },
            Place::Field | Place::Inner => (true, false),
        }
    }

    fn count(&mut self, value: &Value, place: Place) {
        if !matches!(value, Value::Object(_) | Value::Array(_)) {
            return;
        }
        let (id, span) = self.census.order[self.at];
        if let (Value::Object(map), Place::Column(p)) = (value, place) {
            if !map.is_empty() {
                self.in_columns.push((p, id));
            }
        }
        let (may, must) = self.referable(place);
        let must = must && value.as_object().is_some_and(|m| !m.is_empty());
        if may && (must || self.census.candidate(id)) {
            self.refs[id as usize] += 1;
            self.forced[id as usize] |= must;
            if self.seen[id as usize] {
                self.at += span as usize;
                return;
            }
            self.seen[id as usize] = true;
            self.first.push(id);
        }
        self.at += 1;
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let place = self.child(place, Some(key));
                    self.count(child, place);
                }
            }
            Value::Array(items) => {
                let place = self.child(place, None);
                for child in items {
                    self.count(child, place);
                }
            }
            _ => {}
        }
    }

    /// `value` with every defined object replaced by its reference; each
    /// definition is written into `defs` (by number) the first time.
    fn rewrite(
        &mut self,
        value: &Value,
        place: Place,
        numbers: &[Option<usize>],
        defs: &mut [Option<Value>],
    ) -> Value {
        if !matches!(value, Value::Object(_) | Value::Array(_)) {
            return value.clone();
        }
        let (id, span) = self.census.order[self.at];
        let defined = self
            .referable(place)
            .0
            .then(|| numbers[id as usize])
            .flatten();
        if let Some(n) = defined {
            if defs[n].is_some() {
                self.at += span as usize;
                return Value::String(format!("&{n}"));
            }
        }
        self.at += 1;
        let copy = match value {
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (key, child) in map {
                    let place = self.child(place, Some(key));
                    out.insert(key.clone(), self.rewrite(child, place, numbers, defs));
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                let place = self.child(place, None);
                Value::Array(
                    items
                        .iter()
                        .map(|v| self.rewrite(v, place, numbers, defs))
                        .collect(),
                )
            }
            _ => unreachable!("scalars returned above"),
        };
        match defined {
            Some(n) => {
                defs[n] = Some(copy);
                Value::String(format!("&{n}"))
            }
            None => copy,
        }
    }

    /// Each column's policy from the last walk: where at least half the
    /// objects would be references, all are; where fewer, none is.
    /// Whether any column's policy is not normal (the walk must be redone).
    fn decide(&mut self) -> bool {
        let mut tally: HashMap<u32, (usize, usize), FastHash> = HashMap::default();
        for &(p, id) in &self.in_columns {
            let t = tally.entry(p).or_default();
            t.0 += 1;
            if self.refs[id as usize] >= 2 {
                t.1 += 1;
            }
        }
        for (p, (objects, referenced)) in tally {
            let policy = if referenced == 0 || referenced == objects {
                Policy::Normal
            } else if referenced * 2 >= objects {
                Policy::Force
            } else if self.paths.top(p) {
                Policy::Exclude
            } else {
                // Deeper, the column is flattened only if the one above
                // is, which a column of JSON (an events feed's `payload`)
                // is not: there, leaving objects out would only lose
                // references.
                Policy::Normal
            };
            self.policy.insert(p, policy);
        }
        self.policy.values().any(|&p| p != Policy::Normal)
    }

    /// The distinct objects the last walk defines, in the order first met.
    fn chosen(&self) -> Vec<u32> {
        self.first
            .iter()
            .copied()
            .filter(|&id| self.refs[id as usize] >= 2 || self.forced[id as usize])
            .collect()
    }
}

/// `value` as the object a `refs` text is the `doc` encoding of, or
/// `None` when no object repeats (or the value cannot be factored, see the
/// module docs).
pub(super) fn factor(value: &Value) -> Option<Map<String, Value>> {
    match value {
        Value::Array(items) if !items.is_empty() => {}
        Value::Object(map) if !map.is_empty() => {}
        _ => return None,
    }
    let census = Census::of(value);
    let repeats = (0..census.distinct.len() as u32).any(|id| census.candidate(id));
    if census.clash || !repeats {
        return None;
    }
    let mut factor = Factor::new(&census);
    factor.count(value, Place::Root);
    if factor.decide() {
        factor.restart();
        factor.count(value, Place::Root);
    }
    let chosen = factor.chosen();
    if chosen.is_empty() {
        return None;
    }
    // Numbers by shape: the objects of one key sequence are numbered
    // together (one table), shapes in the order first met.
    let mut numbers: Vec<Option<usize>> = vec![None; census.distinct.len()];
    let keys = keys_of(value, &census, &chosen);
    let mut shapes: Vec<(&str, Vec<u32>)> = Vec::new();
    for &id in &chosen {
        let shape = keys[&id].as_str();
        match shapes.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, ids)) => ids.push(id),
            None => shapes.push((shape, vec![id])),
        }
    }
    let mut next = 0;
    for (_, ids) in &shapes {
        for &id in ids {
            numbers[id as usize] = Some(next);
            next += 1;
        }
    }
    let mut defs: Vec<Option<Value>> = vec![None; next];
    factor.at = 0;
    let main = factor.rewrite(value, Place::Root, &numbers, &mut defs);
    let mut out = Map::new();
    let mut n = 0;
    for (_, ids) in &shapes {
        let first = n;
        let mut rows = Vec::with_capacity(ids.len());
        for _ in ids {
            let Some(Value::Object(def)) = defs[n].take() else {
                return None;
            };
            rows.push(def);
            n += 1;
        }
        if rows.len() == 1 {
            out.insert(format!("&{first}"), Value::Object(rows.remove(0)));
            continue;
        }
        let mut table = Vec::with_capacity(rows.len());
        for (i, row) in rows.into_iter().enumerate() {
            if row.contains_key(NUMBER) {
                return None;
            }
            let mut numbered = Map::with_capacity(row.len() + 1);
            numbered.insert(NUMBER.to_owned(), Value::Number(Number::from(first + i)));
            numbered.extend(row);
            table.push(Value::Object(numbered));
        }
        out.insert(format!("&{first}"), Value::Array(table));
    }
    match main {
        Value::Object(map) => {
            for (k, v) in map {
                if k == MAIN || reference(&k).is_some() || out.contains_key(&k) {
                    return None;
                }
                out.insert(k, v);
            }
        }
        other => {
            out.insert(MAIN.to_owned(), other);
        }
    }
    Some(out)
}

/// The key sequence (joined) of each chosen distinct object, from its
/// first occurrence.
fn keys_of(value: &Value, census: &Census, chosen: &[u32]) -> HashMap<u32, String> {
    let mut wanted: HashMap<u32, String> = chosen.iter().map(|&id| (id, String::new())).collect();
    let mut left = wanted.len();
    let mut at = 0;
    fn walk(
        value: &Value,
        census: &Census,
        at: &mut usize,
        wanted: &mut HashMap<u32, String>,
        left: &mut usize,
    ) {
        if *left == 0 {
            return;
        }
        let children: Vec<&Value> = match value {
            Value::Object(map) => {
                let (id, _) = census.order[*at];
                if let Some(keys) = wanted.get_mut(&id) {
                    if keys.is_empty() {
                        for k in map.keys() {
                            keys.push_str(k);
                            keys.push('\0');
                        }
                        keys.push('\u{1}');
                        *left -= 1;
                    }
                }
                map.values().collect()
            }
            Value::Array(items) => items.iter().collect(),
            _ => return,
        };
        *at += 1;
        for child in children {
            walk(child, census, at, wanted, left);
        }
    }
    walk(value, census, &mut at, &mut wanted, &mut left);
    wanted
}

/// The value a decoded `refs` body (`doc` of definitions and the value)
/// stands for, its references expanded; `budget` bounds the values
/// references may add.
pub(super) fn resolve(body: Value, text_len: usize) -> Result<Value, FormatDecodeError> {
    let invalid = |message: String| FormatDecodeError::Invalid(message);
    let Value::Object(entries) = body else {
        return Err(invalid("a refs body is an object".into()));
    };
    let mut defs: HashMap<usize, Value> = HashMap::new();
    let mut main = Map::new();
    for (key, value) in entries {
        let Some(first) = reference(&key) else {
            main.insert(key, value);
            continue;
        };
        match value {
            Value::Object(def) => {
                if defs.insert(first, Value::Object(def)).is_some() {
                    return Err(invalid(format!("object &{first} is defined twice")));
                }
            }
            Value::Array(rows) => {
                for (i, row) in rows.into_iter().enumerate() {
                    let Value::Object(mut row) = row else {
                        return Err(invalid(format!(
                            "`&{first}` holds a row that is not an object"
                        )));
                    };
                    let n = first + i;
                    let number = row.shift_remove(NUMBER);
                    if number.as_ref().and_then(Value::as_u64) != Some(n as u64) {
                        return Err(invalid(format!(
                            "row {i} of `&{first}` must be object {n} (its `&` column)"
                        )));
                    }
                    if defs.insert(n, Value::Object(row)).is_some() {
                        return Err(invalid(format!("object &{n} is defined twice")));
                    }
                }
            }
            _ => {
                return Err(invalid(format!(
                    "`&{first}` must hold an object or a table"
                )))
            }
        }
    }
    let main = if main.len() == 1 && main.contains_key(MAIN) {
        main.shift_remove(MAIN).unwrap_or(Value::Null)
    } else if main.is_empty() {
        return Err(invalid(
            "a refs body holds no value besides its objects".into(),
        ));
    } else {
        Value::Object(main)
    };
    let mut expander = Expander {
        defs,
        done: HashMap::new(),
        open: Vec::new(),
        budget: text_len
            .saturating_mul(EXPANSION_PER_BYTE)
            .max(EXPANSION_FLOOR),
    };
    expander.expand(main)
}

/// Expands references, each definition once (then copied), refusing a
/// cycle and more values than the budget.
struct Expander {
    defs: HashMap<usize, Value>,
    done: HashMap<usize, (Value, usize)>,
    open: Vec<usize>,
    budget: usize,
}

impl Expander {
    fn spend(&mut self, nodes: usize) -> Result<(), FormatDecodeError> {
        self.budget = self.budget.checked_sub(nodes).ok_or_else(|| {
            FormatDecodeError::Invalid("the references expand to too large a value".into())
        })?;
        Ok(())
    }

    /// `value` expanded, and the number of values in it.
    fn expand_counted(&mut self, value: Value) -> Result<(Value, usize), FormatDecodeError> {
        match value {
            Value::String(s) => match reference(&s) {
                Some(n) => {
                    let (def, nodes) = self.definition(n)?;
                    self.spend(nodes)?;
                    Ok((def, nodes))
                }
                None if looks_like_reference(&s) => Err(FormatDecodeError::Invalid(format!(
                    "`{s}` is not a reference"
                ))),
                None => Ok((Value::String(s), 1)),
            },
            Value::Array(items) => {
                let mut nodes = 1;
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    let (v, n) = self.expand_counted(item)?;
                    nodes += n;
                    out.push(v);
                }
                Ok((Value::Array(out), nodes))
            }
            Value::Object(map) => {
                let mut nodes = 1;
                let mut out = Map::with_capacity(map.len());
                for (k, v) in map {
                    let (v, n) = self.expand_counted(v)?;
                    nodes += n;
                    out.insert(k, v);
                }
                Ok((Value::Object(out), nodes))
            }
            scalar => Ok((scalar, 1)),
        }
    }

    fn expand(&mut self, value: Value) -> Result<Value, FormatDecodeError> {
        Ok(self.expand_counted(value)?.0)
    }

    /// Object `n`, expanded (once), and its number of values.
    fn definition(&mut self, n: usize) -> Result<(Value, usize), FormatDecodeError> {
        if let Some((value, nodes)) = self.done.get(&n) {
            return Ok((value.clone(), *nodes));
        }
        if self.open.contains(&n) {
            return Err(FormatDecodeError::Invalid(format!(
                "object &{n} references itself"
            )));
        }
        let Some(def) = self.defs.remove(&n) else {
            return Err(FormatDecodeError::Invalid(format!(
                "`&{n}` references an object that is not defined"
            )));
        };
        self.open.push(n);
        let expanded = self.expand_counted(def)?;
        self.open.pop();
        self.done.insert(n, expanded.clone());
        Ok(expanded)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{check, decode, encode, Format};
    use super::*;

    fn user(login: &str, id: u64) -> Value {
        let url = format!("https://api.github.com/users/{login}");
        json!({"login": login, "id": id, "url": url, "repos_url": format!("{url}/repos"), "type": "User"})
    }

    /// Two kinds of event: the same actor, repository and pull request
    /// recur, at the rows' top level and deep inside a payload whose shape
    /// follows the kind.
    fn feed() -> Value {
        let octocat = user("octocat", 1);
        let hubot = user("hubot", 2);
        let repo = json!({"id": 9, "name": "o/r", "url": "https://api.github.com/repos/o/r"});
        let pull = json!({"number": 5, "title": "Fix it", "user": hubot.clone(), "head": {"repo": repo.clone(), "ref": "fix"}});
        json!([
            {"id": "3", "type": "PushEvent", "actor": octocat.clone(), "repo": repo.clone(),
             "payload": {"ref": "refs/heads/main", "size": 1, "pusher": octocat.clone()}},
            {"id": "2", "type": "PullRequestEvent", "actor": hubot.clone(), "repo": repo.clone(),
             "payload": {"action": "opened", "number": 5, "pull_request": pull.clone()}},
            {"id": "1", "type": "PullRequestReviewEvent", "actor": octocat.clone(), "repo": repo.clone(),
             "payload": {"action": "created", "review": {"user": octocat}, "pull_request": pull}},
        ])
    }

    fn shown(value: &Value) -> String {
        let encoded = encode(value, Format::Refs).expect("a refs encoding");
        check::strip(encoded.text()).expect("a check")
    }

    #[test]
    fn repeated_objects_are_defined_once_at_any_depth() {
        let feed = feed();
        let encoded = encode(&feed, Format::Refs).expect("a refs encoding");
        assert_eq!(
            decode(encoded.text()).unwrap().to_string(),
            feed.to_string()
        );
        // The payloads' key orders agree here, so they flatten into
        // columns; `&3.head` is a section of object 3.
        assert_eq!(
            shown(&feed),
            "> [encoded: refs; &N=object N; k[N]: N rows; shared fields first; {x}=field x; *N=N shared; ^=https://api.github.com]\n\
             &0[2]:\n\
             url: ^/users/{login}\n\
             repos_url: {url}/repos\n\
             type: User\n\
             &,login,id,*3\n\
             0,octocat,1\n\
             1,hubot,2\n\
             &2:\n id:9\n name: o/r\n url: ^/repos/o/r\n\
             &3:\n number:5\n title: Fix it\n user: &1\n\
             &3.head:\n repo: &2\n ref: fix\n\
             =[3]:\n\
             repo: &2\n\
             id,type,actor,*,payload.ref,payload.size,payload.pusher,payload.action,payload.number,payload.review,payload.pull_request\n\
             \"3\",PushEvent,&0,refs/heads/main,1,&0,,,,\n\
             \"2\",PullRequestEvent,&1,,,,opened,5,,&3\n\
             \"1\",PullRequestReviewEvent,&0,,,,created,,{\"user\":\"&0\"},&3"
        );
        // A payload whose keys come in another order stays JSON per row.
        let mut mixed = feed.clone();
        mixed[0]["payload"] =
            json!({"size": 1, "pusher": mixed[0]["actor"].clone(), "ref": "refs/heads/main"});
        mixed[1]["payload"] = json!({"number": 5, "pull_request": mixed[1]["payload"]["pull_request"].clone(), "action": "opened"});
        let text = shown(&mixed);
        assert!(text.contains("\nid,type,actor,*,payload\n"), "{text}");
        assert!(
            text.contains(",{\"size\":1,\"pusher\":\"&0\",\"ref\":\"refs/heads/main\"}\n"),
            "{text}"
        );
        let encoded = encode(&mixed, Format::Refs).unwrap();
        assert_eq!(
            decode(encoded.text()).unwrap().to_string(),
            mixed.to_string()
        );
    }

    #[test]
    fn an_object_page_keeps_its_keys_after_the_definitions() {
        let u = user("octocat", 1);
        let page = json!({"total_count": 2, "items": [{"n": 1, "user": u.clone()}, {"n": 2, "user": u.clone()}], "owner": u});
        let text = shown(&page);
        assert!(text.contains("\n&0:\n login: octocat\n"), "{text}");
        assert!(text.contains("\ntotal_count:2\n"), "{text}");
        let encoded = encode(&page, Format::Refs).unwrap();
        assert_eq!(
            decode(encoded.text()).unwrap().to_string(),
            page.to_string()
        );
    }

    /// Rows whose key orders no header fits (an issue timeline) are one
    /// JSON line, still with their repeated objects referenced.
    #[test]
    fn rows_in_conflicting_key_orders_still_factor() {
        let u = user("octocat", 1);
        let page: Value = serde_json::from_str(&format!(
            r#"[{{"id":1,"event":"labeled","actor":{u}}},{{"event":"commented","id":2,"user":{u}}},{{"id":3,"event":"closed","actor":{u}}}]"#
        ))
        .unwrap();
        let encoded = encode(&page, Format::Refs).expect("a refs encoding");
        assert_eq!(
            decode(encoded.text()).unwrap().to_string(),
            page.to_string()
        );
        assert!(
            encoded.text().contains("\"actor\":\"&0\""),
            "{}",
            encoded.text()
        );
    }

    #[test]
    fn what_cannot_be_factored_is_declined() {
        let u = user("octocat", 1);
        // Nothing repeats, or only objects too short to pay.
        assert_eq!(factor(&json!([{"a": 1}, {"a": 2}])), None);
        assert_eq!(factor(&json!([{"u": {"a": 1}}, {"u": {"a": 1}}])), None);
        assert_eq!(factor(&json!([])), None);
        assert_eq!(factor(&json!("&0")), None);
        // A string that would read as a reference.
        for clash in ["&0", "&12", "&01"] {
            let page = json!([{"u": u.clone(), "s": clash}, {"u": u.clone(), "s": "x"}]);
            assert_eq!(factor(&page), None, "{clash}");
        }
        let fine = json!([{"u": u.clone(), "s": "&x"}, {"u": u.clone(), "s": "& 1"}]);
        assert!(factor(&fine).is_some());
        // Keys that would read as the value or as a definition.
        for key in ["=", "&0"] {
            let page = json!({key: 1, "a": u.clone(), "b": u.clone()});
            assert_eq!(factor(&page), None, "{key}");
        }
        let numbered = json!([{"u": {"&": 1, "login": "octocat", "id": 1}}, {"u": {"&": 1, "login": "octocat", "id": 1}},
                              {"v": {"&": 2, "login": "hubot", "id": 22}}, {"v": {"&": 2, "login": "hubot", "id": 22}}]);
        assert_eq!(factor(&numbered), None);
    }

    fn decode_sealed(text: &str) -> Result<Value, FormatDecodeError> {
        decode(&check::seal(text).expect("a hint line"))
    }

    #[test]
    fn references_that_do_not_resolve_are_errors() {
        let hint = "> [encoded: refs; &N=object N]\n";
        let ok = decode_sealed(&format!("{hint}&0:\n a:1\n b:2\n=: [\"&0\",\"&0\"]")).unwrap();
        assert_eq!(ok, json!([{"a": 1, "b": 2}, {"a": 1, "b": 2}]));
        for (body, says) in [
            ("=: [\"&1\"]", "not defined"),
            ("&0:\n a: &0\n=: [\"&0\"]", "references itself"),
            ("&0:\n a: &1\n&1:\n b: &0\n=: [\"&0\"]", "references itself"),
            ("&0[2]:\n&,a\n0,1\n2,1\n=: [\"&0\"]", "must be object 1"),
            (
                "&0[1]:\n&,a\n0,1\n&0:\n a:2\n=: [\"&0\"]",
                "both a value and a group",
            ),
            ("&0: 1\n=: [\"&0\"]", "must hold an object"),
            ("&0:\n a:1\n=: [\"&00\"]", "not a reference"),
            ("&0:\n a:1", "no value besides"),
        ] {
            let error = decode_sealed(&format!("{hint}{body}"))
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{body}: {error}");
        }
    }

    /// Each object twice the one before: 40 lines would stand for 2^40
    /// values. The expansion is bounded by the text's length.
    #[test]
    fn a_small_text_cannot_expand_to_a_huge_value() {
        let mut body = String::from("> [encoded: refs; &N=object N]\n&0:\n a:1\n");
        for n in 1..40 {
            body.push_str(&format!("&{n}:\n a: &{}\n b: &{}\n", n - 1, n - 1));
        }
        body.push_str("=: [\"&39\"]");
        let error = decode_sealed(&body).unwrap_err().to_string();
        assert!(error.contains("too large"), "{error}");
    }
}
