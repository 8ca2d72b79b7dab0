//! Near-duplicate deltas: a JSON body that differs from an earlier one only
//! in a few scalar fields, said as those fields.
//!
//! Polling tools (a CI status, a job list, a health check) answer the same
//! call with the same large body in which a handful of fields moved. Dedup
//! cannot reference such a body, since it is not byte-identical; sending it
//! in full repeats everything that did not change. [`scalar_changes`] finds
//! the changed fields when the *structure* is identical (same keys in the
//! same order, same array lengths) and only scalar leaves differ, and
//! [`render_changes`] writes them one per line as an RFC 6901 JSON pointer
//! and the new value in compact JSON:
//!
//! ```text
//! /status: "success"
//! /jobs/1/duration: 42
//! ```
//!
//! The delta is exact: [`apply_changes`] turns the earlier body and the
//! delta back into the new body, and the stage proves that before it uses
//! one. What a pointer names is unambiguous for the model too: `~1` stands
//! for `/` and `~0` for `~` inside a key, as RFC 6901 says.

use serde_json::Value;

/// One changed scalar: where, and its new value.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// RFC 6901 pointer into the body.
    pub pointer: String,
    /// The new value (a scalar: null, bool, number or string).
    pub value: Value,
}

/// The scalar leaves where `new` differs from `old`, in document order,
/// when the two have the same structure and at most `max` leaves differ;
/// `None` otherwise (a key added, removed or reordered, an array of a
/// different length, an object or array replaced by a scalar or the other
/// way round, or too many changes). Identical values give `Some([])`.
pub fn scalar_changes(old: &Value, new: &Value, max: usize) -> Option<Vec<Change>> {
    let mut changes = Vec::new();
    let mut pointer = String::new();
    walk(old, new, &mut pointer, &mut changes, max)?;
    Some(changes)
}

fn walk(
    old: &Value,
    new: &Value,
    pointer: &mut String,
    changes: &mut Vec<Change>,
    max: usize,
) -> Option<()> {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            if a.len() != b.len() {
                return None;
            }
            for ((ka, va), (kb, vb)) in a.iter().zip(b) {
                if ka != kb {
                    return None;
                }
                let len = pointer.len();
                pointer.push('/');
                push_escaped(pointer, ka);
                walk(va, vb, pointer, changes, max)?;
                pointer.truncate(len);
            }
            Some(())
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return None;
            }
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                walk(va, vb, pointer, changes, max)?;
                pointer.truncate(len);
            }
            Some(())
        }
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => None,
        (a, b) if a == b => Some(()),
        (_, b) => {
            if changes.len() == max {
                return None;
            }
            changes.push(Change {
                pointer: pointer.clone(),
                value: b.clone(),
            });
            Some(())
        }
    }
}

fn push_escaped(pointer: &mut String, key: &str) {
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// The changes as text: one `pointer: value` line each, the value in
/// compact JSON, lines joined by `\n`.
pub fn render_changes(changes: &[Change]) -> String {
    let mut out = String::new();
    for (i, change) in changes.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&change.pointer);
        out.push_str(": ");
        // Scalars always serialize.
        out.push_str(&serde_json::to_string(&change.value).unwrap_or_default());
    }
    out
}

/// Why a delta could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// A line is not `pointer: json`.
    #[error("line {0} is not `/pointer: value`")]
    Malformed(usize),
    /// A pointer names nothing in the base body.
    #[error("line {0}: the pointer names no field of the earlier body")]
    Missing(usize),
}

/// `base` with every line of `delta` (as [`render_changes`] writes it)
/// applied. The inverse of [`scalar_changes`] + [`render_changes`].
pub fn apply_changes(base: &Value, delta: &str) -> Result<Value, ApplyError> {
    let mut out = base.clone();
    for (i, line) in delta.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
        let n = i + 1;
        // The pointer may itself contain ": " (inside a key), so try each
        // split point until the rest parses as JSON and the pointer exists.
        let mut applied = false;
        for (at, _) in line.match_indices(": ") {
            let (pointer, value) = (&line[..at], &line[at + 2..]);
            let Ok(value) = serde_json::from_str::<Value>(value) else {
                continue;
            };
            if let Some(slot) = out.pointer_mut(pointer) {
                *slot = value;
                applied = true;
                break;
            }
        }
        if !applied {
            return Err(if line.starts_with('/') && line.contains(": ") {
                ApplyError::Missing(n)
            } else {
                ApplyError::Malformed(n)
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn finds_scalar_changes_in_document_order() {
        let old = json!({"status": "running", "jobs": [{"id": 1, "s": "ok"}, {"id": 2, "s": "running", "t": null}], "n": 1});
        let new = json!({"status": "success", "jobs": [{"id": 1, "s": "ok"}, {"id": 2, "s": "ok", "t": 4.5}], "n": 1});
        let changes = scalar_changes(&old, &new, 8).unwrap();
        assert_eq!(
            render_changes(&changes),
            "/status: \"success\"\n/jobs/1/s: \"ok\"\n/jobs/1/t: 4.5"
        );
        assert_eq!(apply_changes(&old, &render_changes(&changes)).unwrap(), new);
    }

    #[test]
    fn declines_structural_changes_and_too_many_changes() {
        let old = json!({"a": 1, "b": [1, 2]});
        assert!(scalar_changes(&old, &json!({"a": 1, "b": [1, 2, 3]}), 8).is_none());
        assert!(scalar_changes(&old, &json!({"b": [1, 2], "a": 1}), 8).is_none());
        assert!(scalar_changes(&old, &json!({"a": 1, "c": [1, 2]}), 8).is_none());
        assert!(scalar_changes(&old, &json!({"a": {"x": 1}, "b": [1, 2]}), 8).is_none());
        assert!(scalar_changes(&old, &json!({"a": 2, "b": [3, 4]}), 2).is_none());
        assert_eq!(
            scalar_changes(&old, &json!({"a": 2, "b": [3, 4]}), 3).map(|c| c.len()),
            Some(3)
        );
        assert_eq!(scalar_changes(&old, &old, 0), Some(vec![]));
    }

    #[test]
    fn pointers_escape_slashes_tildes_and_survive_colons() {
        let old = json!({"a/b": {"~c": 1, "d: e": "x"}});
        let new = json!({"a/b": {"~c": 2, "d: e": "y: z"}});
        let delta = render_changes(&scalar_changes(&old, &new, 8).unwrap());
        assert_eq!(delta, "/a~1b/~0c: 2\n/a~1b/d: e: \"y: z\"");
        assert_eq!(apply_changes(&old, &delta).unwrap(), new);
    }

    #[test]
    fn bad_deltas_are_errors() {
        let base = json!({"a": 1});
        assert_eq!(
            apply_changes(&base, "nonsense"),
            Err(ApplyError::Malformed(1))
        );
        assert_eq!(apply_changes(&base, "/b: 1"), Err(ApplyError::Missing(1)));
    }

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            "[a-z/~: \"\\\\]{0,6}".prop_map(Value::String),
        ]
    }

    fn tree() -> impl Strategy<Value = Value> {
        scalar().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-z/~: ]{0,4}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// `v` with some scalar leaves replaced (structure kept).
    fn mutate(v: &Value, seeds: &mut impl Iterator<Item = Value>) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), mutate(x, seeds)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|x| mutate(x, seeds)).collect()),
            other => match seeds.next() {
                Some(Value::Null) | None => other.clone(),
                Some(new) => new,
            },
        }
    }

    proptest! {
        #[test]
        fn delta_round_trips(old in tree(), seeds in prop::collection::vec(scalar(), 0..30)) {
            let new = mutate(&old, &mut seeds.into_iter());
            let changes = scalar_changes(&old, &new, usize::MAX).expect("same structure");
            let delta = render_changes(&changes);
            prop_assert_eq!(apply_changes(&old, &delta).unwrap(), new);
        }

        #[test]
        fn apply_never_panics(base in tree(), delta in "[/a-z0-9~: \"\\n{}]{0,40}") {
            let _ = apply_changes(&base, &delta);
        }
    }
}
