//! Arguments of predicted calls, projected from an answered call.
//!
//! Each argument's source gives a list of values; lists are zipped by
//! index and single values repeat, so `{ owner = "$args/owner", number =
//! "/*/number" }` over three issues gives three calls. Where the target
//! declares the argument an array, a list source fills one array instead.

use std::cell::OnceCell;

use devboy_core::value_model::ArgSource;
use serde_json::{Map, Value};

use crate::fit::declared_type;
use crate::plan::Answered;

/// An answered call with its result read as JSON at most once.
pub(crate) struct ParsedAnswer<'a> {
    call: &'a Answered<'a>,
    result: OnceCell<Option<Value>>,
    arguments: OnceCell<Value>,
}

impl<'a> ParsedAnswer<'a> {
    pub(crate) fn new(call: &'a Answered<'a>) -> Self {
        Self {
            call,
            result: OnceCell::new(),
            arguments: OnceCell::new(),
        }
    }

    /// `structuredContent`, else the text parsed as JSON.
    fn result(&self) -> Option<&Value> {
        self.result
            .get_or_init(|| match self.call.structured {
                Some(v) => Some(v.clone()),
                None => serde_json::from_str(self.call.text).ok(),
            })
            .as_ref()
    }

    fn arguments(&self) -> &Value {
        self.arguments
            .get_or_init(|| Value::Object(self.call.arguments.cloned().unwrap_or_default()))
    }

    /// The first `cap` values `source` gives (text sources stop reading
    /// there; a 50-line answer need not be scanned for three paths).
    fn values(&self, source: &ArgSource, cap: usize) -> Vec<Value> {
        let mut out = Vec::new();
        match source {
            ArgSource::Result(p) => {
                if let Some(doc) = self.result() {
                    walk(doc, p, &mut out);
                }
            }
            ArgSource::Args(p) => walk(self.arguments(), p, &mut out),
            ArgSource::Lines => out.extend(
                self.call
                    .text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .take(cap)
                    .map(|l| Value::String(l.to_owned())),
            ),
            ArgSource::Match(re) => out.extend(
                re.captures_iter(self.call.text)
                    .filter_map(|c| {
                        let m = c.get(1).or_else(|| c.get(0))?;
                        Some(Value::String(m.as_str().to_owned()))
                    })
                    .take(cap),
            ),
            ArgSource::Literal(v) => out.push(v.clone()),
        }
        out
    }
}

/// The values at an RFC 6901 pointer whose `*` segments take every
/// element of an array.
fn walk(value: &Value, pointer: &str, out: &mut Vec<Value>) {
    let segments: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    walk_segments(value, &segments, out);
}

fn walk_segments(value: &Value, segments: &[String], out: &mut Vec<Value>) {
    let Some((first, rest)) = segments.split_first() else {
        if !value.is_null() {
            out.push(value.clone());
        }
        return;
    };
    match value {
        Value::Array(items) if first == "*" => {
            for item in items {
                walk_segments(item, rest, out);
            }
        }
        Value::Array(items) => {
            if let Some(item) = first.parse::<usize>().ok().and_then(|i| items.get(i)) {
                walk_segments(item, rest, out);
            }
        }
        Value::Object(map) => {
            if let Some(v) = map.get(first) {
                walk_segments(v, rest, out);
            }
        }
        _ => {}
    }
}

/// The argument sets `args` gives for `answer`, at most `limit`; empty
/// when some argument has no value.
pub(crate) fn project(
    args: &[(String, ArgSource)],
    limit: usize,
    answer: &ParsedAnswer<'_>,
    target_schema: &Map<String, Value>,
) -> Vec<Map<String, Value>> {
    let mut columns: Vec<(&str, Vec<Value>, bool)> = Vec::with_capacity(args.len());
    for (name, source) in args {
        let list = !source.is_single();
        let collect = list && declared_type(target_schema, name) == Some("array");
        let values = answer.values(source, if collect { usize::MAX } else { limit });
        if values.is_empty() {
            return Vec::new();
        }
        if collect {
            columns.push((name, vec![Value::Array(values)], false));
        } else {
            columns.push((name, values, list));
        }
    }
    let rows = columns
        .iter()
        .filter(|c| c.2)
        .map(|c| c.1.len())
        .min()
        .unwrap_or(1)
        .min(limit);
    (0..rows)
        .map(|i| {
            columns
                .iter()
                .map(|(name, values, list)| {
                    let v = if *list { &values[i] } else { &values[0] };
                    ((*name).to_owned(), v.clone())
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn source(s: &str) -> ArgSource {
        ArgSource::parse(s).unwrap()
    }

    #[test]
    fn lists_zip_singles_repeat_and_arrays_collect() {
        let result = json!({"items": [
            {"path": "a.rs", "repo": {"name": "x"}},
            {"path": "b.rs", "repo": {"name": "y"}},
            {"path": "c/d~e.rs"}
        ]});
        let arguments = json!({"owner": "o", "q": "find"});
        let call = Answered {
            exposed: "gh__search_code",
            arguments: arguments.as_object(),
            structured: Some(&result),
            text: "",
        };
        let answer = ParsedAnswer::new(&call);
        let args = vec![
            ("owner".to_owned(), source("$args/owner")),
            ("path".to_owned(), source("/items/*/path")),
            ("repo".to_owned(), source("/items/*/repo/name")),
            ("n".to_owned(), ArgSource::Literal(json!(3))),
        ];
        let rows = project(&args, 5, &answer, &Map::new());
        let want = [
            json!({"owner": "o", "path": "a.rs", "repo": "x", "n": 3}),
            json!({"owner": "o", "path": "b.rs", "repo": "y", "n": 3}),
        ];
        assert_eq!(rows.len(), 2, "zipped to the shorter list: {rows:?}");
        for (row, want) in rows.iter().zip(want) {
            assert_eq!(&Value::Object(row.clone()), &want);
        }
        assert_eq!(project(&args[..2], 1, &answer, &Map::new()).len(), 1);
        let missing = vec![("x".to_owned(), source("/nothing/*"))];
        assert!(project(&missing, 3, &answer, &Map::new()).is_empty());

        let schema = json!({"properties": {"names": {"type": "array"}}});
        let names = vec![("names".to_owned(), source("/items/*/path"))];
        let rows = project(&names, 3, &answer, schema.as_object().unwrap());
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["names"], json!(["a.rs", "b.rs", "c/d~e.rs"]));
    }

    #[test]
    fn text_sources_read_lines_and_matches_and_json_text() {
        let text =
            "/tmp/a.txt\n\n  /tmp/b.txt  \nCommit: 0123456789abcdef0123456789abcdef01234567\n";
        let call = Answered {
            exposed: "t",
            arguments: None,
            structured: None,
            text,
        };
        let answer = ParsedAnswer::new(&call);
        let lines = answer.values(&source("$lines"), 9);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1], json!("/tmp/b.txt"));
        assert_eq!(answer.values(&source("$lines"), 2).len(), 2);
        let sha = answer.values(&source("$match:Commit: '?([0-9a-f]{40})"), 9);
        assert_eq!(sha, vec![json!("0123456789abcdef0123456789abcdef01234567")]);
        let whole = answer.values(&source("$match:/tmp/[a-z]"), 9);
        assert_eq!(whole, vec![json!("/tmp/a"), json!("/tmp/b")]);

        let json_text = r#"[{"number": 7}, {"number": 9}]"#;
        let call = Answered {
            text: json_text,
            ..call
        };
        let answer = ParsedAnswer::new(&call);
        assert_eq!(
            answer.values(&source("/*/number"), 9),
            vec![json!(7), json!(9)]
        );
        let escaped = json!({"a/b": {"c~d": 1}});
        let mut out = Vec::new();
        walk(&escaped, "/a~1b/c~0d", &mut out);
        assert_eq!(out, vec![json!(1)]);
    }
}
