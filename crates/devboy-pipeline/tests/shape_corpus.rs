//! The shape classifier and the L1 templates against real GitHub API
//! bodies: every recorded response in `@octokit/fixtures` (the `response`
//! of each `raw-fixture.json` recording) and the `value` of every example
//! under `components.examples` in `@octokit/openapi`'s
//! `api.github.com.json`. Each body is classified (no panic, JSON handed
//! back), and every template that accepts it must round-trip it exactly.
//! Multi-line string leaves (issue bodies, rendered Markdown) also go
//! through the Markdown-table template as documents of their own.
//!
//! The bodies are committed (`testdata/github-corpus.jsonl`, read by
//! `corpus/github.rs`): the tests need no npm peers. The loader is shared with
//! `examples/shape_corpus.rs`, which prints the figures.

use serde_json::Value;

/// One body of the corpus.
pub struct CorpusBody {
    /// Where it came from: a fixture file and index, or an example name.
    pub source: String,
    /// The body as a tool would return it: the text itself for text
    /// responses, compact JSON otherwise.
    pub text: String,
}

#[path = "corpus/github.rs"]
mod github;

fn body_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Loads every body of the corpus, or says what is missing.
pub fn load_corpus() -> Result<Vec<CorpusBody>, String> {
    Ok(github::read()?
        .into_iter()
        .map(|recorded| CorpusBody {
            source: if recorded.kind == "fixture" {
                format!("fixtures/{}#{}", recorded.name, recorded.index)
            } else {
                format!("openapi/{}", recorded.name)
            },
            text: body_text(&recorded.value),
        })
        .collect())
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
