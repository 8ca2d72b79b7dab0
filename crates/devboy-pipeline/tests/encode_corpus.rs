//! Every encoder over real GitHub API bodies: each JSON response body
//! recorded in `@octokit/fixtures` (`scenarios/**/raw-fixture.json`) and
//! each response example in `@octokit/openapi`'s `api.github.com.json`
//! (`components.examples.*.value`). Zero round-trip failures allowed, and
//! the token targets on list pages are pinned.
//!
//! The bodies are committed (`testdata/github-corpus.jsonl`, read by
//! `corpus/github.rs`): the test needs no npm peers.
//!
//! `examples/encode_corpus.rs` includes this file for its loader and prints
//! the token figures.

use serde_json::Value;

/// One response body of the corpus.
pub struct Body {
    /// Where it comes from: a fixture file and index, or an example name.
    pub source: String,
    pub value: Value,
}

/// What a body is, for reporting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A non-empty array of objects, or an object whose only non-scalar
    /// member is one such array (a search result page).
    ListPage,
    /// Any other object.
    Object,
    /// Everything else (arrays of scalars, empty arrays, strings).
    Other,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::ListPage, Kind::Object, Kind::Other];

    pub fn of(value: &Value) -> Kind {
        let is_rows = |v: &Value| matches!(v, Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object));
        match value {
            v if is_rows(v) => Kind::ListPage,
            Value::Object(map) => {
                let rows = map.values().filter(|v| is_rows(v)).count();
                let scalars = map
                    .values()
                    .filter(|v| !matches!(v, Value::Array(_) | Value::Object(_)))
                    .count();
                if rows == 1 && rows + scalars == map.len() {
                    Kind::ListPage
                } else {
                    Kind::Object
                }
            }
            _ => Kind::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::ListPage => "list page",
            Kind::Object => "object",
            Kind::Other => "other",
        }
    }
}

#[path = "corpus/github.rs"]
mod github;

/// Loads the corpus: fixture bodies first (sorted by path), then the
/// OpenAPI examples (in file order).
pub fn load() -> Result<Vec<Body>, String> {
    let mut bodies = Vec::new();
    for recorded in github::read()? {
        let source = if recorded.kind == "fixture" {
            if !matches!(recorded.value, Value::Object(_) | Value::Array(_)) {
                continue;
            }
            let scenario = std::path::Path::new(&recorded.name)
                .parent()
                .and_then(std::path::Path::file_name)
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            format!("fixture {scenario}#{}", recorded.index)
        } else {
            format!("example {}", recorded.name)
        };
        bodies.push(Body {
            source,
            value: recorded.value,
        });
    }
    Ok(bodies)
}

// The tests use full paths, so the loader above can be included by the
// example and the bench without unused imports.

#[test]
fn corpus_is_large_enough() {
    let bodies = load().unwrap_or_else(|e| panic!("{e}"));
    let fixtures = bodies
        .iter()
        .filter(|b| b.source.starts_with("fixture"))
        .count();
    assert!(fixtures >= 100, "{fixtures} fixture bodies");
    assert!(
        bodies.len() - fixtures >= 500,
        "{} examples",
        bodies.len() - fixtures
    );
}

#[test]
fn every_candidate_round_trips() {
    let bodies = load().unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    let mut structured = 0;
    for body in &bodies {
        for candidate in devboy_pipeline::encode::candidates(&body.value) {
            if candidate.format() != devboy_pipeline::encode::Format::JsonCompact {
                structured += 1;
            }
            match devboy_pipeline::encode::decode(candidate.text()) {
                Ok(back) if back == body.value => {}
                _ => failures.push(format!("{} as {}", body.source, candidate.format())),
            }
        }
    }
    assert!(failures.is_empty(), "round-trip failures: {failures:#?}");
    // Nearly every body is an object or an array of objects.
    assert!(
        structured * 10 >= bodies.len() * 9,
        "{structured} of {}",
        bodies.len()
    );
}

/// Verbatim text (invariant 9): what the model may copy back is never
/// shown with CSV's doubled `""`, and a string with line breaks (code, a
/// diff, a file) is shown raw or as a JSON string literal. (A one-line
/// string may be written as a pattern, `{x}` standing for another field:
/// the hint says so.)
#[cfg(test)]
fn shows_verbatim(text: &str, s: &str) -> bool {
    text.contains(s) || text.contains(&serde_json::to_string(s).unwrap())
}

#[cfg(test)]
fn strings_with<'a>(value: &'a Value, chars: &[char], out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) if s.contains(chars) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings_with(v, chars, out)),
        Value::Object(map) => map.values().for_each(|v| strings_with(v, chars, out)),
        _ => {}
    }
}

#[test]
fn every_candidate_shows_strings_verbatim() {
    let bodies = load().unwrap_or_else(|e| panic!("{e}"));
    let (mut quoted, mut multi_line) = (0, 0);
    let mut failures = Vec::new();
    for body in &bodies {
        let mut with_quotes = Vec::new();
        strings_with(&body.value, &['"'], &mut with_quotes);
        let mut with_lines = Vec::new();
        strings_with(&body.value, &['\n'], &mut with_lines);
        for candidate in devboy_pipeline::encode::candidates(&body.value) {
            let text = candidate.text();
            for s in &with_quotes {
                quoted += 1;
                if text.contains(&format!("\"{}\"", s.replace('"', "\"\""))) {
                    failures.push(format!(
                        "{} as {}: doubled quotes",
                        body.source,
                        candidate.format()
                    ));
                }
            }
            for s in &with_lines {
                multi_line += 1;
                if !shows_verbatim(text, s) {
                    failures.push(format!(
                        "{} as {}: not verbatim",
                        body.source,
                        candidate.format()
                    ));
                }
            }
        }
    }
    assert!(
        quoted >= 20 && multi_line >= 20,
        "{quoted} quoted, {multi_line} multi-line strings"
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// devboy's own o200k count (`tokens::fast`) is tiktoken-rs's on every
/// real body and every encoding of it.
#[test]
fn the_o200k_count_is_tiktokens_on_the_corpus() {
    let bodies = load().unwrap_or_else(|e| panic!("{e}"));
    let tok = devboy_pipeline::Tokenizer::O200k;
    let mut texts = 0;
    for body in &bodies {
        let pretty = serde_json::to_string_pretty(&body.value).unwrap();
        let candidates = devboy_pipeline::encode::candidates(&body.value);
        for text in std::iter::once(pretty.as_str()).chain(candidates.iter().map(|c| c.text())) {
            assert_eq!(
                tok.count(text),
                devboy_pipeline::tokens::tiktoken_o200k(text),
                "{}",
                body.source
            );
            texts += 1;
        }
    }
    assert!(texts > bodies.len() * 2, "{texts} texts");
}

/// The targets of the issue, over all list pages together.
#[test]
fn list_pages_meet_the_token_targets() {
    let bodies = load().unwrap_or_else(|e| panic!("{e}"));
    let tok = devboy_pipeline::Tokenizer::O200k;
    let (mut pretty, mut compact, mut best) = (0, 0, 0);
    for body in bodies
        .iter()
        .filter(|b| Kind::of(&b.value) == Kind::ListPage)
    {
        let c = tok.count(&body.value.to_string());
        let b = tok.count(devboy_pipeline::encode::encode_best(&body.value, tok).text());
        assert!(b <= c, "{}: best {b} > compact {c}", body.source);
        pretty += tok.count(&serde_json::to_string_pretty(&body.value).unwrap_or_default());
        compact += c;
        best += b;
    }
    let vs_compact = 1.0 - best as f64 / compact as f64;
    let vs_pretty = 1.0 - best as f64 / pretty as f64;
    assert!(
        vs_compact >= 0.30,
        "{:.1}% fewer than compact",
        vs_compact * 100.0
    );
    assert!(
        vs_pretty >= 0.45,
        "{:.1}% fewer than pretty",
        vs_pretty * 100.0
    );
}
