//! The shape classifier and the L1 templates against real GitHub API
//! bodies: every recorded response in `@octokit/fixtures` (the `response`
//! of each `raw-fixture.json` recording) and the `value` of every example
//! under `components.examples` in `@octokit/openapi`'s
//! `api.github.com.json`. Each body is classified (no panic, JSON handed
//! back), and every template that accepts it must round-trip it exactly.
//! Multi-line string leaves (issue bodies, rendered Markdown) also go
//! through the Markdown-table template as documents of their own.
//!
//! The data comes from `tests/peers/install.sh`; without it these tests
//! fail and say so. The loader is shared with
//! `examples/shape_corpus.rs`, which prints the figures.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One body of the corpus.
pub struct CorpusBody {
    /// Where it came from: a fixture file and index, or an example name.
    pub source: String,
    /// The body as a tool would return it: the text itself for text
    /// responses, compact JSON otherwise.
    pub text: String,
}

fn octokit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/node_modules/@octokit")
}

const MISSING: &str = "the GitHub corpus is missing: run tests/peers/install.sh \
                       (it installs @octokit/fixtures and @octokit/openapi under tests/peers/node_modules)";

fn raw_fixtures(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            raw_fixtures(&path, found)?;
        } else if path.file_name().is_some_and(|n| n == "raw-fixture.json") {
            found.push(path);
        }
    }
    Ok(())
}

fn body_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Loads every body of the corpus, or says what is missing.
pub fn load_corpus() -> Result<Vec<CorpusBody>, String> {
    let root = octokit_dir();
    let scenarios = root.join("fixtures/scenarios");
    let openapi = root.join("openapi/generated/api.github.com.json");
    if !scenarios.is_dir() || !openapi.is_file() {
        return Err(format!("{MISSING} (looked in {})", root.display()));
    }
    let mut bodies = Vec::new();
    let mut files = Vec::new();
    raw_fixtures(&scenarios, &mut files)?;
    files.sort();
    for file in &files {
        let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let recordings: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let name = file.strip_prefix(&scenarios).unwrap_or(file).display();
        for (i, recording) in recordings.as_array().into_iter().flatten().enumerate() {
            if let Some(response) = recording.get("response") {
                bodies.push(CorpusBody {
                    source: format!("fixtures/{name}#{i}"),
                    text: body_text(response),
                });
            }
        }
    }
    let text = fs::read_to_string(&openapi).map_err(|e| format!("{}: {e}", openapi.display()))?;
    let spec: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", openapi.display()))?;
    let examples = spec
        .pointer("/components/examples")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{}: no components.examples", openapi.display()))?;
    for (name, example) in examples {
        if let Some(value) = example.get("value") {
            bodies.push(CorpusBody {
                source: format!("openapi/{name}"),
                text: body_text(value),
            });
        }
    }
    Ok(bodies)
}

/// Every string leaf of `value` that spans lines.
pub fn multiline_leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) if s.contains('\n') => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| multiline_leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| multiline_leaves(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use devboy_pipeline::shape::classify;
    use devboy_pipeline::template::{decode, md_tables, DecodedBody, Template};

    use super::*;

    fn corpus() -> Vec<CorpusBody> {
        load_corpus().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn every_body_is_classified() {
        let bodies = corpus();
        assert!(bodies.len() >= 600, "only {} bodies", bodies.len());
        let mut shapes = BTreeMap::new();
        for body in &bodies {
            let c = classify(&body.text);
            let is_json = serde_json::from_str::<Value>(&body.text).is_ok();
            assert_eq!(c.json.is_some(), is_json, "{}", body.source);
            *shapes.entry(c.shape.name()).or_insert(0usize) += 1;
        }
        // The GitHub API is mostly records and nested objects.
        for shape in ["array_of_objects", "nested_object", "flat_object", "empty"] {
            assert!(
                shapes.get(shape).copied().unwrap_or(0) > 0,
                "{shape}: {shapes:?}"
            );
        }
    }

    #[test]
    fn every_accepted_body_round_trips() {
        let mut accepted = BTreeMap::new();
        for body in corpus() {
            let c = classify(&body.text);
            for t in Template::ALL {
                let Some(encoded) = t.encode(&body.text, c.json.as_ref()) else {
                    continue;
                };
                assert!(t.may_apply(&c), "{t} accepted what may_apply rejects");
                *accepted.entry(t.name()).or_insert(0usize) += 1;
                let expected = match &c.json {
                    Some(v) if t != Template::MdTables => DecodedBody::Json(v.clone()),
                    _ => DecodedBody::Text(body.text.clone()),
                };
                assert_eq!(decode(&encoded), Ok(expected), "{t} on {}", body.source);
                if let (Ok(DecodedBody::Json(back)), Some(v)) = (decode(&encoded), &c.json) {
                    assert_eq!(
                        back.to_string(),
                        v.to_string(),
                        "key order: {}",
                        body.source
                    );
                }
            }
        }
        // Bodies with multi-line strings exist in the corpus (commits with
        // messages, rendered Markdown, file contents).
        assert!(
            accepted.get("fenced_fields").copied().unwrap_or(0) >= 5,
            "{accepted:?}"
        );
    }

    #[test]
    fn multiline_leaves_round_trip_as_documents() {
        for body in corpus() {
            let Ok(value) = serde_json::from_str::<Value>(&body.text) else {
                continue;
            };
            let mut leaves = Vec::new();
            multiline_leaves(&value, &mut leaves);
            for leaf in leaves {
                let _ = classify(&leaf);
                if let Some(encoded) = md_tables::encode(&leaf) {
                    assert_eq!(md_tables::decode(&encoded).as_deref(), Ok(leaf.as_str()));
                }
            }
        }
    }
}
