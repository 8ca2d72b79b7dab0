//! Verbatim text (invariant 9 in docs/invariants.md): a string the model
//! may copy back — a file's contents, code, a diff — reaches it raw or as
//! a JSON string literal, never in an escape it does not know (CSV's
//! doubled `""`). The model copies `oldText` for an edit out of what it
//! was shown; any other escape makes that edit miss.
//!
//! Checked on what the router picks for real source files as
//! `server-filesystem` returns them (`{"content": FILE}`, many with
//! ```` ``` ```` fences in their doc comments); `encode_corpus.rs` checks
//! the strings of the GitHub corpus in every candidate encoding.

use std::path::{Path, PathBuf};

use devboy_pipeline::route::{route, RouteConfig};
use devboy_pipeline::shape::classify;
use devboy_pipeline::template::{self, DecodedBody};
use devboy_pipeline::Tokenizer;
use serde_json::{json, Value};

/// Whether `text` shows `s` raw or as a JSON string literal.
fn shows_verbatim(text: &str, s: &str) -> bool {
    text.contains(s) || text.contains(&serde_json::to_string(s).unwrap())
}

/// The body `text` stands for.
fn decoded(text: &str) -> Value {
    match template::decode(text) {
        Ok(DecodedBody::Json(value)) => value,
        Ok(DecodedBody::Text(text)) => serde_json::from_str(&text).unwrap(),
        Err(template::TemplateDecodeError::NotEncoded) => {
            devboy_pipeline::encode::decode(text).unwrap()
        }
        Err(e) => panic!("cannot decode: {e}\n{text}"),
    }
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "rs" || e == "md" || e == "py")
        {
            out.push(path);
        }
    }
}

#[test]
fn source_files_read_through_server_filesystem_show_up_raw_or_json_escaped() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["crates", "docs", "src", "tests/python"] {
        source_files(&root.join(dir), &mut files);
    }
    assert!(files.len() >= 100, "{} files", files.len());
    let config = RouteConfig {
        tokenizer: Tokenizer::O200k,
        budget_tokens: usize::MAX,
        only: None,
        ..RouteConfig::default()
    };
    let (mut fenced, mut encoded) = (0, 0);
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        if !text.contains('"') || !text.contains('\n') {
            continue;
        }
        fenced += usize::from(text.contains("```"));
        let body = json!({ "content": text }).to_string();
        let classified = classify(&body);
        let baseline = Tokenizer::O200k.count(&body);
        let Some(routed) = route(&body, &classified, baseline, &config, None) else {
            continue;
        };
        encoded += 1;
        assert_eq!(
            decoded(&routed.text),
            json!({ "content": text }),
            "{}",
            file.display()
        );
        if !shows_verbatim(&routed.text, &text) {
            failures.push(format!("{} as {}", file.display(), routed.format));
        }
    }
    assert!(fenced >= 10, "{fenced} files with fences");
    assert!(encoded >= 100, "{encoded} files encoded");
    assert!(failures.is_empty(), "not verbatim: {failures:#?}");
}
