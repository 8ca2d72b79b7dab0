//! The one check of a built-in's arguments, against the input schema its
//! definition declares, before the tool sees them: a value of the wrong
//! type or out of range, an argument the tool does not take, a required one
//! left out. What is wrong comes back as one line naming the argument, what
//! was given and what it takes, which the model reads and corrects.
//!
//! The check reads the subset of JSON Schema the built-ins use: `type`
//! (one or a list), `enum`, `minimum`, `maximum`, `required`,
//! `properties` and `additionalProperties`. Two rules of devboy's own,
//! since its schemas are written short (every token of a definition is
//! paid on every request):
//! - a schema that lists `properties` and says nothing of
//!   `additionalProperties` takes only those (a name the tool would
//!   ignore is a mistake to hear of); one that lists none takes anything;
//! - a `null` value is an argument not given (models write `null` for an
//!   optional argument they leave unset).

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::Value;

/// The `isError` result a call of the tool `definition` describes gets
/// when its `arguments` do not fit the tool's input schema: one line,
/// the tool's name first.
pub(crate) fn refusal(definition: &Tool, arguments: Option<&JsonObject>) -> Option<CallToolResult> {
    let wrong = check(&definition.input_schema, arguments).err()?;
    Some(CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {wrong}",
        definition.name
    ))]))
}

/// What is wrong with a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ArgumentError {
    /// A required argument not given (or given as `null`).
    #[error("`{name}` is missing; it takes {takes}")]
    Missing { name: String, takes: String },
    /// An argument whose value the schema does not allow.
    #[error("`{name}` is {given}; it takes {takes}")]
    Invalid {
        name: String,
        given: String,
        takes: String,
    },
    /// An argument the schema does not list.
    #[error("unknown argument `{name}`; {allowed}")]
    Unknown { name: String, allowed: String },
}

/// Checks `arguments` against `schema` (an object schema), reporting the
/// first problem: an unknown or invalid argument in the order given, then
/// a missing one in the order `required` lists them.
fn check(schema: &JsonObject, arguments: Option<&JsonObject>) -> Result<(), ArgumentError> {
    let empty = JsonObject::new();
    let listed = schema.get("properties").and_then(Value::as_object);
    let properties = listed.unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let given = arguments.unwrap_or(&empty);
    for (name, value) in given {
        if value.is_null() {
            continue;
        }
        let property = match properties.get(name) {
            Some(property) => property,
            None => match schema.get("additionalProperties") {
                Some(Value::Bool(true)) => continue,
                Some(extra @ Value::Object(_)) => extra,
                None if listed.is_none() => continue,
                _ => {
                    return Err(ArgumentError::Unknown {
                        name: name.clone(),
                        allowed: allowed(properties, &required),
                    })
                }
            },
        };
        if !fits(property, value) {
            return Err(ArgumentError::Invalid {
                name: name.clone(),
                given: shown(value, property),
                takes: takes(property),
            });
        }
    }
    for name in required {
        if given.get(name).is_none_or(Value::is_null) {
            return Err(ArgumentError::Missing {
                name: name.to_owned(),
                takes: properties
                    .get(name)
                    .map_or_else(|| "a value".to_owned(), takes),
            });
        }
    }
    Ok(())
}

/// Whether `value` fits the property schema `property`.
fn fits(property: &Value, value: &Value) -> bool {
    if let Some(allowed) = property.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            return false;
        }
    }
    if !of_allowed_type(property, value) {
        return false;
    }
    if let Some(n) = value.as_f64() {
        let below = bound(property, "minimum").is_some_and(|min| n < min);
        let above = bound(property, "maximum").is_some_and(|max| n > max);
        if below || above {
            return false;
        }
    }
    true
}

/// Whether `value` is of a type `property` allows (any, when it names none).
fn of_allowed_type(property: &Value, value: &Value) -> bool {
    let allowed = types(property);
    allowed.is_empty() || allowed.iter().any(|t| is_of_type(value, t))
}

/// The types `property` allows (`type` as one name or a list); none when
/// it does not say.
fn types(property: &Value) -> Vec<&str> {
    match property.get("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn is_of_type(value: &Value, type_name: &str) -> bool {
    match type_name {
        "string" => value.is_string(),
        // An integer is a number written without a fraction or exponent:
        // the tools read it as one (`5.0` they would not).
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => false,
    }
}

fn bound(property: &Value, keyword: &str) -> Option<f64> {
    property.get(keyword).and_then(Value::as_f64)
}

/// What `property` takes, in words: "an integer from 1 to 100: How many
/// files (default 10)".
fn takes(property: &Value) -> String {
    let mut words = match property.get("enum").and_then(Value::as_array) {
        Some(allowed) => format!(
            "one of {}",
            allowed
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => {
            let kinds: Vec<&str> = types(property).into_iter().map(article_and_name).collect();
            if kinds.is_empty() {
                "any value".to_owned()
            } else {
                kinds.join(" or ")
            }
        }
    };
    match (property.get("minimum"), property.get("maximum")) {
        (Some(min), Some(max)) => words.push_str(&format!(" from {min} to {max}")),
        (Some(min), None) => words.push_str(&format!(" of at least {min}")),
        (None, Some(max)) => words.push_str(&format!(" of at most {max}")),
        (None, None) => {}
    }
    if let Some(description) = property.get("description").and_then(Value::as_str) {
        words.push_str(": ");
        words.push_str(description);
    }
    words
}

fn article_and_name(type_name: &str) -> &str {
    match type_name {
        "string" => "a string",
        "integer" => "an integer",
        "number" => "a number",
        "boolean" => "true or false",
        "object" => "an object",
        "array" => "an array",
        "null" => "null",
        other => other,
    }
}

/// The most characters of a given value the message repeats.
const SHOWN_CHARS: usize = 60;

/// `value` as the message shows it: its JSON (cut when long), and its
/// kind when that is what the schema does not allow (`"abc" (a string)`).
fn shown(value: &Value, property: &Value) -> String {
    let json = value.to_string();
    let json = match json.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &json[..cut]),
        None => json,
    };
    if of_allowed_type(property, value) {
        json
    } else {
        format!("{json} ({})", kind(value))
    }
}

/// The JSON kind of `value`, in words.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number with a fraction",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The arguments a tool takes, for an unknown name: the required ones
/// first, as `required` lists them, then the others by name.
fn allowed(properties: &JsonObject, required: &[&str]) -> String {
    if properties.is_empty() {
        return "it takes no arguments".to_owned();
    }
    let mut optional: Vec<&str> = properties
        .keys()
        .map(String::as_str)
        .filter(|name| !required.contains(name))
        .collect();
    optional.sort_unstable();
    let names: Vec<String> = required
        .iter()
        .filter(|name| properties.contains_key(**name))
        .map(|name| format!("`{name}` (required)"))
        .chain(optional.iter().map(|name| format!("`{name}`")))
        .collect();
    format!("it takes {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object: {value}"),
        }
    }

    /// A schema like `devboy_find_files`'s.
    fn schema() -> JsonObject {
        object(json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The task"},
                "root": {"type": "string"},
                "k": {"type": "integer", "minimum": 1, "maximum": 100, "description": "How many files"},
                "mode": {"enum": ["list", "restart"]},
                "raw": {"type": "boolean"},
                "ratio": {"type": ["number", "string"], "minimum": 0.5}
            },
            "required": ["query"]
        }))
    }

    fn checked(arguments: Value) -> Result<(), String> {
        check(&schema(), Some(&object(arguments))).map_err(|e| e.to_string())
    }

    #[test]
    fn arguments_that_fit_pass() {
        assert_eq!(checked(json!({"query": "q"})), Ok(()));
        assert_eq!(
            checked(
                json!({"query": "q", "root": "src", "k": 100, "mode": "list", "raw": false, "ratio": 0.5})
            ),
            Ok(())
        );
        assert_eq!(
            checked(json!({"query": "q", "k": 1, "ratio": "half"})),
            Ok(())
        );
    }

    #[test]
    fn a_wrong_type_names_the_argument_the_value_and_what_it_takes() {
        assert_eq!(
            checked(json!({"query": "q", "k": "abc"})),
            Err(
                "`k` is \"abc\" (a string); it takes an integer from 1 to 100: How many files"
                    .into()
            )
        );
        assert_eq!(
            checked(json!({"query": "q", "k": 5.5})),
            Err("`k` is 5.5 (a number with a fraction); it takes an integer from 1 to 100: How many files".into())
        );
        assert_eq!(
            checked(json!({"query": "q", "raw": "true"})),
            Err("`raw` is \"true\" (a string); it takes true or false".into())
        );
        assert_eq!(
            checked(json!({"query": 7})),
            Err("`query` is 7 (an integer); it takes a string: The task".into())
        );
        assert_eq!(
            checked(json!({"query": "q", "ratio": [1]})),
            Err("`ratio` is [1] (an array); it takes a number or a string of at least 0.5".into())
        );
    }

    #[test]
    fn a_number_out_of_range_is_refused_at_either_bound() {
        for k in [0, 101, -3] {
            assert_eq!(
                checked(json!({"query": "q", "k": k})),
                Err(format!(
                    "`k` is {k}; it takes an integer from 1 to 100: How many files"
                ))
            );
        }
        assert_eq!(
            checked(json!({"query": "q", "ratio": 0.25})),
            Err("`ratio` is 0.25; it takes a number or a string of at least 0.5".into())
        );
    }

    #[test]
    fn a_value_outside_the_enum_lists_the_allowed_ones() {
        assert_eq!(
            checked(json!({"query": "q", "mode": "stop"})),
            Err("`mode` is \"stop\"; it takes one of \"list\", \"restart\"".into())
        );
    }

    #[test]
    fn an_unknown_argument_lists_the_ones_the_tool_takes() {
        assert_eq!(
            checked(json!({"query": "q", "limit": 3})),
            Err("unknown argument `limit`; it takes `query` (required), `k`, `mode`, `ratio`, `raw`, `root`".into())
        );

        let none = object(json!({"type": "object", "properties": {}}));
        assert_eq!(
            check(&none, Some(&object(json!({"verbose": true})))).map_err(|e| e.to_string()),
            Err("unknown argument `verbose`; it takes no arguments".into())
        );
    }

    #[test]
    fn additional_properties_when_the_schema_allows_them() {
        let open =
            object(json!({"type": "object", "properties": {}, "additionalProperties": true}));
        assert_eq!(check(&open, Some(&object(json!({"anything": 1})))), Ok(()));
        let unlisted = object(json!({"type": "object"}));
        assert_eq!(
            check(&unlisted, Some(&object(json!({"anything": 1})))),
            Ok(())
        );
        let closed = object(json!({"type": "object", "additionalProperties": false}));
        assert_eq!(
            check(&closed, Some(&object(json!({"a": 1})))).map_err(|e| e.to_string()),
            Err("unknown argument `a`; it takes no arguments".into())
        );
        let typed = object(json!({"type": "object", "additionalProperties": {"type": "string"}}));
        assert_eq!(check(&typed, Some(&object(json!({"a": "b"})))), Ok(()));
        assert_eq!(
            check(&typed, Some(&object(json!({"a": 1})))).map_err(|e| e.to_string()),
            Err("`a` is 1 (an integer); it takes a string".into())
        );
    }

    #[test]
    fn a_missing_required_argument_says_what_it_takes() {
        let expected = Err("`query` is missing; it takes a string: The task".to_owned());
        assert_eq!(checked(json!({"k": 3})), expected);
        assert_eq!(checked(json!({"query": null})), expected);
        assert_eq!(check(&schema(), None).map_err(|e| e.to_string()), expected);
    }

    #[test]
    fn null_is_an_optional_argument_not_given() {
        assert_eq!(
            checked(json!({"query": "q", "root": null, "k": null})),
            Ok(())
        );
    }

    #[test]
    fn a_long_value_is_cut_in_the_message() {
        let long = "x".repeat(500);
        let message = checked(json!({"query": "q", "k": long})).unwrap_err();
        let shown = format!("\"{}… (a string)", "x".repeat(SHOWN_CHARS - 1));
        assert!(
            message.starts_with(&format!("`k` is {shown}; it takes")),
            "{message}"
        );
    }
}
