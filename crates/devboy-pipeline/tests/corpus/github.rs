//! The GitHub corpus, as committed in `testdata/github-corpus.jsonl`:
//! every `response` of `@octokit/fixtures`' recordings
//! (`scenarios/**/raw-fixture.json`, in path order) and the `value` of
//! every example under `components.examples` of `@octokit/openapi`'s
//! `api.github.com.json` (in file order), one JSON line each. Reading it
//! needs no npm peers; `examples/github_corpus.rs` writes it again from
//! them (see `testdata/README.md`).

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One recorded body.
pub struct Recorded {
    /// `fixture` or `example`.
    pub kind: String,
    /// The fixture file (relative to `scenarios/`) or the example's name.
    pub name: String,
    /// The recording's index in its fixture file (0 for an example).
    pub index: usize,
    /// The body.
    pub value: Value,
}

/// Where the committed corpus is.
pub fn corpus_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/github-corpus.jsonl")
}

/// Every body of the committed corpus, in order.
pub fn read() -> Result<Vec<Recorded>, String> {
    let file = corpus_file();
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut record: Value = serde_json::from_str(line)
            .map_err(|e| format!("{} line {}: {e}", file.display(), n + 1))?;
        let field = |record: &Value, key: &str| record.get(key).cloned();
        let (Some(Value::String(kind)), Some(Value::String(name))) =
            (field(&record, "kind"), field(&record, "name"))
        else {
            return Err(format!(
                "{} line {}: no kind or name",
                file.display(),
                n + 1
            ));
        };
        let index = record.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        let value = record
            .get_mut("value")
            .map(Value::take)
            .ok_or_else(|| format!("{} line {}: no value", file.display(), n + 1))?;
        out.push(Recorded {
            kind,
            name,
            index,
            value,
        });
    }
    Ok(out)
}
