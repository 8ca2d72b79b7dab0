//! What `api()` gives a code-mode script: the functions it may call, as
//! compact TypeScript-style signatures made from each tool's input schema
//! (and output schema, where the server declares one), each with the first
//! sentence of its description.
//!
//! ```text
//! fs.read_text_file(a: {path: string, head?: number}): {content: string}  // Read a file as text.
//! ```
//!
//! A schema's types become TypeScript's (`integer` is `number`, `enum` a
//! union of its values, `anyOf`/`oneOf` a union, an object its
//! properties, `?` when not required); what does not fit in a few levels
//! is `object` or `any`. Only shapes: defaults, patterns and bounds are
//! left to the tool's own answer when a call is wrong.

use rmcp::model::Tool;
use serde_json::{Map, Value};

/// Levels of nested objects written out; deeper ones are `object`.
const MAX_DEPTH: usize = 3;
/// Properties of one object written out; the rest are `…`.
const MAX_PROPERTIES: usize = 12;
/// Characters of a description kept.
const MAX_DESCRIPTION: usize = 120;

/// The signatures of `tools` (exposed names) a script may call
/// (`callable`), those whose name contains `filter` when given, one line
/// each, under a line saying how to call them.
pub(super) fn signatures(
    tools: &[Tool],
    filter: Option<&str>,
    callable: impl Fn(&str) -> bool,
) -> String {
    let filter = filter.map(str::to_lowercase);
    let lines: Vec<(bool, String)> = tools
        .iter()
        .filter(|t| callable(&t.name))
        .filter(|t| {
            filter
                .as_deref()
                .is_none_or(|f| t.name.to_lowercase().contains(f))
        })
        .map(|t| (split(&t.name).0.is_empty(), signature(t)))
        .collect();
    let unprefixed = lines.iter().any(|(bare, _)| *bare);
    let lines: Vec<String> = lines.into_iter().map(|(_, line)| line).collect();
    let mut out = format!(
        "// {} functions; call as `await tools.<server>.<tool>(a)`{}\n",
        lines.len(),
        if unprefixed {
            " (`tools.<tool>(a)` where no server is shown)"
        } else {
            ""
        }
    );
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// One tool's line.
fn signature(tool: &Tool) -> String {
    let (server, name) = split(&tool.name);
    let input = Value::Object(Map::clone(&tool.input_schema));
    let args = if has_properties(&input) {
        format!("a: {}", ts_type(&input, 0))
    } else {
        String::new()
    };
    let output = tool
        .output_schema
        .as_ref()
        .map(|schema| format!(": {}", ts_type(&Value::Object(Map::clone(schema)), 0)))
        .unwrap_or_default();
    let call = match (server.is_empty(), is_identifier(name)) {
        // `tools.<tool>(a)` calls a tool listed under its own name.
        (true, true) => name.to_owned(),
        (true, false) => format!("[{name:?}]"),
        (false, true) => format!("{server}.{name}"),
        (false, false) => format!("{server}[{name:?}]"),
    };
    let server_access = if server.is_empty() || is_identifier(server) {
        call
    } else {
        format!("[{server:?}]{}", &call[server.len()..])
    };
    let description = tool
        .description
        .as_deref()
        .map(first_sentence)
        .filter(|d| !d.is_empty())
        .map(|d| format!("  // {d}"))
        .unwrap_or_default();
    format!("{server_access}({args}){output}{description}")
}

/// `prefix__tool` as (`prefix`, `tool`); a built-in `devboy_x` as
/// (`devboy`, `x`); the tool of a server that keeps its names as (``,
/// `tool`).
fn split(exposed: &str) -> (&str, &str) {
    if let Some(split) = exposed.split_once("__") {
        return split;
    }
    match exposed.strip_prefix("devboy_") {
        Some(builtin) => ("devboy", builtin),
        None => ("", exposed),
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn has_properties(schema: &Value) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty())
}

/// The first sentence of `text`, on one line, at most
/// [`MAX_DESCRIPTION`] characters.
fn first_sentence(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    // A sentence ends at ". " before a capital ("e.g. a" goes on).
    let end = line
        .match_indices(". ")
        .find(|(at, _)| {
            line[at + 2..]
                .chars()
                .next()
                .is_some_and(|c| c.is_uppercase() || c == '`')
        })
        .map_or(line.len(), |(at, _)| at + 1);
    let sentence = &line[..end];
    if sentence.chars().count() <= MAX_DESCRIPTION {
        return sentence.to_owned();
    }
    let cut: String = sentence.chars().take(MAX_DESCRIPTION - 1).collect();
    format!("{}…", cut.trim_end())
}

/// A JSON Schema as a TypeScript type, `depth` objects in.
fn ts_type(schema: &Value, depth: usize) -> String {
    let Some(schema) = schema.as_object() else {
        return "any".into();
    };
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return union(values.iter().map(|v| v.to_string()));
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return union(options.iter().map(|o| ts_type(o, depth)));
        }
    }
    match schema.get("type") {
        Some(Value::String(kind)) => of_kind(kind, schema, depth),
        Some(Value::Array(kinds)) => union(
            kinds
                .iter()
                .filter_map(Value::as_str)
                .map(|k| of_kind(k, schema, depth)),
        ),
        _ if schema.contains_key("properties") => of_kind("object", schema, depth),
        _ => "any".into(),
    }
}

fn union(parts: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for part in parts {
        if !seen.contains(&part) {
            seen.push(part);
        }
    }
    match seen.len() {
        0 => "any".into(),
        _ => seen.join(" | "),
    }
}

fn of_kind(kind: &str, schema: &Map<String, Value>, depth: usize) -> String {
    match kind {
        "string" => "string".into(),
        "number" | "integer" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => {
            let item = schema
                .get("items")
                .map_or_else(|| "any".to_owned(), |i| ts_type(i, depth));
            if item.contains(' ') {
                format!("({item})[]")
            } else {
                format!("{item}[]")
            }
        }
        "object" => object(schema, depth),
        _ => "any".into(),
    }
}

fn object(schema: &Map<String, Value>, depth: usize) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "object".into();
    };
    if properties.is_empty() {
        return "object".into();
    }
    if depth >= MAX_DEPTH {
        return "object".into();
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Required properties first when not all fit, so none is cut.
    let mut ordered: Vec<(&String, &Value)> = properties.iter().collect();
    if ordered.len() > MAX_PROPERTIES {
        ordered.sort_by_key(|(name, _)| !required.contains(&name.as_str()));
    }
    let mut fields: Vec<String> = ordered
        .into_iter()
        .take(MAX_PROPERTIES)
        .map(|(name, property)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let key = if is_identifier(name) {
                name.clone()
            } else {
                format!("{name:?}")
            };
            format!("{key}{optional}: {}", ts_type(property, depth + 1))
        })
        .collect();
    if properties.len() > MAX_PROPERTIES {
        fields.push("…".into());
    }
    format!("{{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(name: &str, description: &str, input: Value, output: Option<Value>) -> Tool {
        let Value::Object(input) = input else {
            unreachable!()
        };
        let mut tool = Tool::new(name.to_owned(), description.to_owned(), Arc::new(input));
        tool.output_schema = output.and_then(|o| match o {
            Value::Object(map) => Some(Arc::new(map)),
            _ => None,
        });
        tool
    }

    #[test]
    fn a_schema_becomes_one_line_of_typescript() {
        let read = tool(
            "fs__read_text_file",
            "Read the complete contents of a file as text. Handles encodings.\nMore.",
            json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "head": {"type": "integer", "description": "first N lines"},
                "mode": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": ["string", "null"]}},
                "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}, "required": ["deep"]}
            }, "required": ["path"]}),
            Some(
                json!({"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}),
            ),
        );
        let odd = tool("my-srv__get-thing", "", json!({"type": "object"}), None);
        let builtin = tool(
            "devboy_find_files",
            "Rank files.",
            json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
            None,
        );
        let text = signatures(&[read, odd, builtin], None, |_| true);
        assert_eq!(
            text,
            "// 3 functions; call as `await tools.<server>.<tool>(a)`\n\
             fs.read_text_file(a: {path: string, head?: number, mode?: \"a\" | \"b\", tags?: (string | null)[], opts?: {deep: boolean}}): {content: string}  // Read the complete contents of a file as text.\n\
             [\"my-srv\"][\"get-thing\"]()\n\
             devboy.find_files(a: {query: string})  // Rank files.\n"
        );
    }

    #[test]
    fn only_callable_tools_matching_the_filter_are_listed() {
        let a = tool("git__log", "Log.", json!({"type": "object"}), None);
        let b = tool("git__commit", "Commit.", json!({"type": "object"}), None);
        let c = tool("fs__read", "Read.", json!({"type": "object"}), None);
        let text = signatures(&[a, b, c], Some("GIT"), |name| name != "git__commit");
        assert_eq!(
            text,
            "// 1 functions; call as `await tools.<server>.<tool>(a)`\ngit.log()  // Log.\n"
        );
    }

    #[test]
    fn a_tool_under_its_own_name_is_called_on_tools() {
        let own = tool("test_simple_text", "Text.", json!({"type": "object"}), None);
        let odd = tool("get-thing", "", json!({"type": "object"}), None);
        let prefixed = tool("git__log", "Log.", json!({"type": "object"}), None);
        let text = signatures(&[own, odd, prefixed], None, |_| true);
        assert_eq!(
            text,
            "// 3 functions; call as `await tools.<server>.<tool>(a)` (`tools.<tool>(a)` where no server is shown)\n\
             test_simple_text()  // Text.\n\
             [\"get-thing\"]()\n\
             git.log()  // Log.\n"
        );
    }

    #[test]
    fn deep_and_wide_schemas_are_cut() {
        let deep = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {
            "b": {"type": "object", "properties": {"c": {"type": "object", "properties": {"d": {"type": "string"}}}}}}}}});
        assert_eq!(ts_type(&deep, 0), "{a?: {b?: {c?: object}}}");
        let wide: Map<String, Value> = (0..20)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let text = ts_type(&json!({"type": "object", "properties": wide}), 0);
        assert!(text.ends_with("p11?: string, …}"), "{text}");
        let needed = ts_type(
            &json!({"type": "object", "properties": wide, "required": ["p19"]}),
            0,
        );
        assert!(needed.starts_with("{p19: string, p0?: string"), "{needed}");
        let long = "word ".repeat(60);
        assert_eq!(first_sentence(&long).chars().count(), MAX_DESCRIPTION);
    }
}
