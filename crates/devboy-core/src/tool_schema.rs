//! Tool input schemas in fewer tokens, accepting exactly the same
//! arguments: the model reads every tool's definition on every request,
//! and servers' schemas carry keys that change nothing a validator
//! decides.
//!
//! [`compact`] rewrites a schema by rules that keep its meaning under
//! JSON Schema 2020-12 (the dialect MCP tool schemas default to) and under
//! the draft the schema declares:
//!
//! - `$schema` at the root is dropped when the schema uses nothing whose
//!   meaning differs between the declared draft and 2020-12 (array
//!   `items`, `additionalItems`, `dependencies`, `$ref` beside other
//!   keywords, `$recursiveRef`, draft-04 boolean `exclusiveMinimum`/
//!   `exclusiveMaximum`, `id`, and `format`, which draft-07 validators
//!   assert and 2020-12 ones only annotate).
//! - A `title` that only repeats its property's name (or, at the root,
//!   the tool's name), compared ignoring case, `_`, `-` and spaces, is
//!   dropped: titles are annotations.
//! - `required: []` is dropped; so are `additionalProperties: true` and
//!   `properties: {}` when no `unevaluatedProperties` or
//!   `unevaluatedItems` appears anywhere (those read the annotations the
//!   others leave).
//! - `type` beside an `enum` or `const` whose every value has that type is
//!   dropped.
//! - `anyOf` whose branches each hold only a `type` becomes one `type`
//!   list (Pydantic's `Optional[str]` → `"type": ["string", "null"]`).
//!
//! Descriptions, defaults, examples and every value inside `enum`,
//! `const`, `default` and `examples` are left byte for byte: they are
//! the author's words to the model. Equivalence is checked per tool by a
//! JSON Schema validator over generated arguments (tests/tool_schemas.rs).

use serde_json::{Map, Value};

/// Keywords whose value is one subschema.
const ONE: &[&str] = &[
    "additionalProperties",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
];
/// Keywords whose value is a list of subschemas.
const LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value maps names to subschemas.
const MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// The smallest form of a tool's input schema this module knows that
/// accepts exactly the same arguments. `tool` is the tool's own name (a
/// root title repeating it is dropped).
pub fn compact(schema: &Map<String, Value>, tool: &str) -> Map<String, Value> {
    let whole = Value::Object(schema.clone());
    let annotations_read = mentions_any(&whole, &["unevaluatedProperties", "unevaluatedItems"]);
    let mut out = schema.clone();
    if out.contains_key("$schema") && !dialect_sensitive(&whole) {
        out.remove("$schema");
    }
    if out
        .get("title")
        .and_then(Value::as_str)
        .is_some_and(|t| same_name(t, tool))
    {
        out.remove("title");
    }
    node(&mut out, annotations_read);
    out
}

/// Rewrites one schema object in place, and every subschema in it.
fn node(schema: &mut Map<String, Value>, annotations_read: bool) {
    for key in ONE {
        if let Some(Value::Object(sub)) = schema.get_mut(*key) {
            node(sub, annotations_read);
        }
    }
    for key in LIST {
        if let Some(Value::Array(items)) = schema.get_mut(*key) {
            for item in items.iter_mut() {
                if let Value::Object(sub) = item {
                    node(sub, annotations_read);
                }
            }
        }
    }
    for key in MAP {
        if let Some(Value::Object(entries)) = schema.get_mut(*key) {
            for (name, item) in entries.iter_mut() {
                if let Value::Object(sub) = item {
                    if *key == "properties"
                        && sub
                            .get("title")
                            .and_then(Value::as_str)
                            .is_some_and(|t| same_name(t, name))
                    {
                        sub.remove("title");
                    }
                    node(sub, annotations_read);
                }
            }
        }
    }
    if schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        schema.remove("required");
    }
    if !annotations_read {
        if schema.get("additionalProperties") == Some(&Value::Bool(true)) {
            schema.remove("additionalProperties");
        }
        if schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
            // The root keeps its (empty) `properties`: MCP clients expect
            // an object schema to have them.
            && schema.get("type") != Some(&Value::String("object".into()))
        {
            schema.remove("properties");
        }
    }
    type_implied_by_values(schema);
    any_of_types(schema);
}

/// Drops `type` when `enum`/`const` already allow only values of it.
fn type_implied_by_values(schema: &mut Map<String, Value>) {
    let Some(Value::String(ty)) = schema.get("type") else {
        return;
    };
    let values: Vec<&Value> = match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(e)), _) if !e.is_empty() => e.iter().collect(),
        (None, Some(c)) => vec![c],
        _ => return,
    };
    if values.iter().all(|v| has_type(v, ty)) {
        schema.remove("type");
    }
}

/// `anyOf: [{"type": A}, {"type": B}]` → `"type": [A, B]` when nothing
/// else (no `type` of its own) constrains the schema's type.
fn any_of_types(schema: &mut Map<String, Value>) {
    if schema.contains_key("type") {
        return;
    }
    let Some(Value::Array(branches)) = schema.get("anyOf") else {
        return;
    };
    let mut types: Vec<Value> = Vec::new();
    for b in branches {
        let Some(b) = b.as_object() else { return };
        match (b.len(), b.get("type")) {
            (1, Some(Value::String(t))) => {
                let t = Value::String(t.clone());
                if !types.contains(&t) {
                    types.push(t);
                }
            }
            _ => return,
        }
    }
    if types.is_empty() {
        return;
    }
    schema.remove("anyOf");
    let ty = if types.len() == 1 {
        types.remove(0)
    } else {
        Value::Array(types)
    };
    schema.insert("type".into(), ty);
}

/// Whether `value` is of JSON Schema type `ty`.
fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|f| f.fract() == 0.0) && value.is_number(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

/// Two names alike when lowercased with `_`, `-` and spaces removed.
fn same_name(title: &str, name: &str) -> bool {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, '_' | '-' | ' '))
            .flat_map(char::to_lowercase)
            .collect()
    };
    !name.is_empty() && norm(title) == norm(name)
}

/// Whether any object in `value` has one of `keys`.
fn mentions_any(value: &Value, keys: &[&str]) -> bool {
    match value {
        Value::Object(m) => {
            keys.iter().any(|k| m.contains_key(*k)) || m.values().any(|v| mentions_any(v, keys))
        }
        Value::Array(a) => a.iter().any(|v| mentions_any(v, keys)),
        _ => false,
    }
}

/// Whether the schema uses a construct whose meaning depends on the
/// draft (so its `$schema` must stay).
fn dialect_sensitive(value: &Value) -> bool {
    match value {
        Value::Object(m) => {
            let array_items = matches!(m.get("items"), Some(Value::Array(_)));
            let keyword = [
                "additionalItems",
                "dependencies",
                "$recursiveRef",
                "$recursiveAnchor",
                "id",
                "format",
            ]
            .iter()
            .any(|k| {
                m.get(*k)
                    .is_some_and(|v| !v.is_object() || !matches!(*k, "id" | "format"))
            });
            let ref_with_siblings = m.contains_key("$ref")
                && m.keys().any(|k| {
                    !matches!(
                        k.as_str(),
                        "$ref" | "description" | "title" | "$comment" | "default" | "examples"
                    )
                });
            let boolean_exclusive = ["exclusiveMinimum", "exclusiveMaximum"]
                .iter()
                .any(|k| m.get(*k).is_some_and(Value::is_boolean));
            array_items
                || keyword
                || ref_with_siblings
                || boolean_exclusive
                || m.values().any(dialect_sensitive)
        }
        Value::Array(a) => a.iter().any(dialect_sensitive),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(v: Value, tool: &str) -> Value {
        Value::Object(compact(v.as_object().unwrap(), tool))
    }

    #[test]
    fn pydantic_style_schemas_lose_only_what_repeats() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "GitLogArgs",
            "type": "object",
            "properties": {
                "repo_path": {"title": "Repo Path", "type": "string", "description": "Path"},
                "max_count": {"title": "Max Count", "type": "integer", "default": 10},
                "mode": {"title": "Mode of work", "type": "string", "enum": ["a", "b"]},
                "since": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Since"}
            },
            "required": ["repo_path"],
            "additionalProperties": true
        });
        let out = c(schema, "git_log_args");
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "repo_path": {"type": "string", "description": "Path"},
                    "max_count": {"type": "integer", "default": 10},
                    "mode": {"title": "Mode of work", "enum": ["a", "b"]},
                    "since": {"default": null, "type": ["string", "null"]}
                },
                "required": ["repo_path"]
            })
        );
    }

    #[test]
    fn what_changes_meaning_stays() {
        // Tuple items: $schema stays (draft-07 and 2020-12 read it apart).
        let tuple = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"p": {"type": "array", "items": [{"type": "string"}]}}});
        assert!(c(tuple, "t").get("$schema").is_some());
        // unevaluatedProperties reads additionalProperties' annotations.
        let uneval = json!({"type": "object", "additionalProperties": true,
            "allOf": [{"properties": {}}], "unevaluatedProperties": false});
        assert!(c(uneval, "t").get("additionalProperties").is_some());
        // An enum with a value of another type keeps its `type`.
        let mixed =
            json!({"type": "object", "properties": {"x": {"type": "string", "enum": ["a", 1]}}});
        assert_eq!(c(mixed, "t")["properties"]["x"]["type"], "string");
        // Values are data: a title inside a default is not a schema's.
        let data = json!({"type": "object", "properties": {"x": {"type": "object", "default": {"title": "x", "required": []}}}});
        assert_eq!(c(data.clone(), "t"), data);
    }
}
