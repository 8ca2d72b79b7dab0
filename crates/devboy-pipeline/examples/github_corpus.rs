//! Writes `testdata/github-corpus.jsonl` from the npm peers
//! (`tests/peers/install.sh` installs `@octokit/fixtures` and
//! `@octokit/openapi`): every recorded `response` of the fixtures'
//! `scenarios/**/raw-fixture.json`, in path order, then the `value` of
//! every `components.examples` entry of `api.github.com.json`, in file
//! order. The tests read that file, so they need no peers.
//!
//! ```text
//! cargo run -p devboy-pipeline --example github_corpus
//! ```

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

fn raw_fixtures(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            raw_fixtures(&path, out)?;
        } else if path.file_name().is_some_and(|n| n == "raw-fixture.json") {
            out.push(path);
        }
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = fs::read_to_string(path)
        .map_err(|e| format!("{}: {e} (run tests/peers/install.sh)", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn run() -> Result<(), String> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let modules = crate_dir.join("../../tests/peers/node_modules/@octokit");
    let scenarios = modules.join("fixtures/scenarios");
    let mut files = Vec::new();
    raw_fixtures(&scenarios, &mut files)?;
    files.sort();
    let mut out = String::new();
    for file in &files {
        let Value::Array(recordings) = read_json(file)? else {
            return Err(format!("{}: not an array of recordings", file.display()));
        };
        let name = file
            .strip_prefix(&scenarios)
            .unwrap_or(file)
            .display()
            .to_string();
        for (index, recording) in recordings.into_iter().enumerate() {
            if let Some(value) = recording.get("response") {
                let line = json!({"kind": "fixture", "name": name, "index": index, "value": value});
                let _ = writeln!(out, "{line}");
            }
        }
    }
    let api = read_json(&modules.join("openapi/generated/api.github.com.json"))?;
    let Some(Value::Object(examples)) = api.pointer("/components/examples") else {
        return Err("api.github.com.json has no components.examples".into());
    };
    for (name, example) in examples {
        if let Some(value) = example.get("value") {
            let line = json!({"kind": "example", "name": name, "index": 0, "value": value});
            let _ = writeln!(out, "{line}");
        }
    }
    let target = crate_dir.join("testdata/github-corpus.jsonl");
    fs::write(&target, out).map_err(|e| format!("{}: {e}", target.display()))?;
    eprintln!("wrote {}", target.display());
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
