//! Token figures of every encoding candidate on the JSON files given, one
//! line per file and a total, counted with o200k_base; every candidate is
//! decoded again here and compared with the file's compact form byte for
//! byte.
//!
//! ```text
//! cargo run --release -p devboy-pipeline --example mixed_pages -- FILE… [--show NAME]
//! ```
//!
//! Used for the mixed list pages of issue 39 (`scripts/mixed-pages/`):
//! `--show NAME` prints the texts of the candidates of the files whose
//! path contains NAME.

use std::collections::BTreeMap;

use devboy_pipeline::encode::{candidates, decode};
use devboy_pipeline::Tokenizer;
use serde_json::Value;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let show = args.iter().position(|a| a == "--show").map(|i| {
        args.remove(i);
        args.remove(i)
    });
    let tok = Tokenizer::O200k;
    let mut totals: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = 0;
    println!(
        "{:<40} {:>9} {:>9} {:>9} {:>9}  best",
        "file", "compact", "no refs", "refs", "best"
    );
    for path in &args {
        let text = std::fs::read_to_string(path).expect("a readable file");
        let value: Value = serde_json::from_str(&text).expect("JSON");
        let compact = serde_json::to_string(&value).expect("serializable");
        let mut by_format: BTreeMap<&str, usize> = BTreeMap::new();
        for candidate in candidates(&value) {
            let back = decode(candidate.text())
                .ok()
                .and_then(|v| serde_json::to_string(&v).ok());
            if back.as_deref() != Some(compact.as_str()) {
                failures += 1;
                eprintln!("{path}: {} does not decode to the page", candidate.format());
            }
            by_format.insert(candidate.format().name(), tok.count(candidate.text()));
            if show.as_deref().is_some_and(|s| path.contains(s)) {
                println!(
                    "--- {} ({} tokens)\n{}",
                    candidate.format(),
                    tok.count(candidate.text()),
                    candidate.text()
                );
            }
        }
        let c = by_format["json_compact"];
        let no_refs = by_format
            .iter()
            .filter(|(f, _)| **f != "refs")
            .map(|(_, &n)| n)
            .min()
            .unwrap_or(c);
        let refs = by_format.get("refs").copied();
        let (best_name, best) = by_format
            .iter()
            .min_by_key(|(_, &n)| n)
            .map(|(f, &n)| (*f, n))
            .unwrap();
        let name = path
            .rsplit('/')
            .take(2)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("/");
        println!(
            "{name:<40} {c:>9} {no_refs:>9} {:>9} {best:>9}  {best_name}",
            refs.map_or("-".to_owned(), |r| r.to_string())
        );
        *totals.entry("compact".into()).or_default() += c;
        *totals.entry("no refs".into()).or_default() += no_refs;
        *totals.entry("best".into()).or_default() += best;
    }
    let c = totals.get("compact").copied().unwrap_or(0).max(1) as f64;
    println!(
        "total: compact {}  without refs {} ({:.3}x)  best {} ({:.3}x)  decode failures {failures}",
        c,
        totals["no refs"],
        totals["no refs"] as f64 / c,
        totals["best"],
        totals["best"] as f64 / c
    );
}
