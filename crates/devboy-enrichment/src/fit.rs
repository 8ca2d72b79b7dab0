//! Whether arguments would be accepted by a tool's input schema, as far
//! as the planner can tell without a validator: every `required` property
//! present, no name the schema does not list (when it lists properties),
//! and each value of the JSON type its property declares. Values are
//! coerced first where the meaning is plain (`"42"` for an integer,
//! `42` for a string).

use serde_json::{Map, Value};

fn properties(schema: &Map<String, Value>) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

fn required(schema: &Map<String, Value>) -> impl Iterator<Item = &str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// Whether arguments with these names could fit: required ones present,
/// none unknown.
pub(crate) fn names_fit(names: &[&str], schema: &Map<String, Value>) -> bool {
    let known = properties(schema).is_none_or(|p| names.iter().all(|n| p.contains_key(*n)));
    known && required(schema).all(|r| names.contains(&r))
}

/// The JSON type a property declares (`"string"`, `"array"`, …), if one.
pub(crate) fn declared_type<'s>(schema: &'s Map<String, Value>, name: &str) -> Option<&'s str> {
    properties(schema)?.get(name)?.get("type")?.as_str()
}

/// `value` as the type `name` declares, if it can be read as it.
fn coerce(value: Value, ty: Option<&str>) -> Option<Value> {
    Some(match (ty, value) {
        (None, v) => v,
        (Some("string"), Value::String(s)) => Value::String(s),
        (Some("string"), Value::Number(n)) => Value::String(n.to_string()),
        (Some("integer"), Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n),
        (Some("integer"), Value::String(s)) => Value::from(s.trim().parse::<i64>().ok()?),
        (Some("number"), Value::Number(n)) => Value::Number(n),
        (Some("number"), Value::String(s)) => {
            Value::Number(serde_json::Number::from_f64(s.trim().parse().ok()?)?)
        }
        (Some("boolean"), Value::Bool(b)) => Value::Bool(b),
        (Some("array"), Value::Array(a)) => Value::Array(a),
        (Some("object"), Value::Object(o)) => Value::Object(o),
        (Some("string" | "integer" | "number" | "boolean" | "array" | "object"), _) => return None,
        (Some(_), v) => v,
    })
}

/// The arguments as the schema wants them, or `None` when it would refuse
/// them.
pub(crate) fn fit(
    args: Map<String, Value>,
    schema: &Map<String, Value>,
) -> Option<Map<String, Value>> {
    let names: Vec<&str> = args.keys().map(String::as_str).collect();
    if !names_fit(&names, schema) {
        return None;
    }
    let mut out = Map::with_capacity(args.len());
    for (name, value) in args {
        let ty = declared_type(schema, &name);
        let value = coerce(value, ty)?;
        out.insert(name, value);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Map<String, Value> {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "head": {"type": "number"},
                "n": {"type": "integer"},
                "names": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["path"]
        })
        .as_object()
        .unwrap()
        .clone()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn required_unknown_and_types_decide() {
        let s = schema();
        assert_eq!(
            fit(args(json!({"path": "/a", "n": "7"})), &s),
            Some(args(json!({"path": "/a", "n": 7})))
        );
        assert_eq!(fit(args(json!({"n": 1})), &s), None, "path is required");
        assert_eq!(
            fit(args(json!({"path": "/a", "x": 1})), &s),
            None,
            "x unknown"
        );
        assert_eq!(fit(args(json!({"path": "/a", "n": "seven"})), &s), None);
        assert_eq!(fit(args(json!({"path": ["/a"]})), &s), None);
        assert_eq!(
            fit(args(json!({"path": 12})), &s),
            Some(args(json!({"path": "12"})))
        );
        assert!(names_fit(&["path", "names"], &s));
        assert!(!names_fit(&["names"], &s));
        let open = args(json!({"type": "object"}));
        assert!(fit(args(json!({"anything": 1})), &open).is_some());
    }
}
