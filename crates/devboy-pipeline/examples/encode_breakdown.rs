//! Where the tokens of encoded results go, by kind of text, over what
//! `devboy replay --deliveries FILE` wrote (one result per line, as the
//! model was shown it), counted with o200k_base.
//!
//! ```text
//! devboy replay --deliveries /tmp/d.jsonl PATH…
//! cargo run --release -p devboy-pipeline --example encode_breakdown -- /tmp/d.jsonl
//! ```
//!
//! Each line of a result is cut into pieces (a hint's words and its
//! check, a key and its value, a header, each cell of a row) and each
//! piece is counted alone, so the parts add up to about, not exactly, the
//! total (o200k merges little across these cuts). Values are sorted by
//! what they look like: patterns, URLs, timestamps, numbers, literals,
//! quoted and bare strings. Tables (`csv`, and `doc` blocks) and object
//! lines (`kv`) are kept apart. The cuts are by line shape, so this is a
//! measuring aid, not a parser: a row that reads like `key: value` is
//! counted as a line.

use std::collections::BTreeMap;

use devboy_pipeline::Tokenizer;
use serde_json::Value;

/// What a value's text looks like.
fn value_kind(v: &str) -> &'static str {
    let v = v.trim();
    if v.is_empty() {
        "absent (empty cell)"
    } else if v.starts_with('~') {
        "pattern/alias"
    } else if v.starts_with('^') {
        "shared start `^`"
    } else if v.contains('{') && v.contains('}') && !v.starts_with(['{', '"', '['])
        || v.starts_with('{') && !v.starts_with("{\"") && v != "{}"
    {
        "pattern/alias"
    } else if v == "null" {
        "null"
    } else if v == "true" || v == "false" {
        "bool"
    } else if v == "\"\"" {
        "empty string"
    } else if v.starts_with('"') {
        "quoted string"
    } else if v.starts_with('{') || v.starts_with('[') {
        "inline JSON"
    } else if v.starts_with("http://") || v.starts_with("https://") {
        "URL"
    } else if v.len() >= 19 && v.as_bytes()[4] == b'-' && v.as_bytes()[10] == b'T' {
        "timestamp"
    } else if v.parse::<f64>().is_ok() {
        "number"
    } else {
        "bare string"
    }
}

/// The cells of a row: split at commas outside JSON strings and brackets.
fn cells(row: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut depth, mut quoted, mut escaped) = (0, 0i32, false, false);
    for (i, c) in row.char_indices() {
        if quoted {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth <= 0 => {
                out.push(&row[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&row[start..]);
    out
}

/// An entry line's key and its value as written after the colon (with
/// its space, if any), if the line is `key: value` (or `key:1`, a value
/// starting with a digit).
fn entry(line: &str) -> Option<(&str, &str)> {
    let at = line.find(':')?;
    let key = &line[..at];
    let value = &line[at + 1..];
    let valid = value.starts_with(' ') || value.starts_with(|c: char| c.is_ascii_digit());
    (valid && (!key.is_empty() && !key.contains(',') || key.starts_with('"')))
        .then_some((key, value))
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: encode_breakdown DELIVERIES.jsonl");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1);
    });
    let tok = Tokenizer::O200k;
    let mut parts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut add = |what: String, n: usize| {
        let e = parts.entry(what).or_default();
        e.0 += n;
        e.1 += 1;
    };
    let mut total = 0;
    for line in text.lines() {
        let Ok(d) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let body = d["text"].as_str().unwrap_or_default();
        total += tok.count(body);
        if let Some(id) = d["id_line"].as_str() {
            total += tok.count(id);
            add("id line".into(), tok.count(id));
        }
        if !body.starts_with("> [encoded: ") {
            let kind = if body.starts_with("> [") {
                "reference hint"
            } else {
                "JSON (not encoded)"
            };
            add(kind.into(), tok.count(body));
            continue;
        }
        let mut lines = body.split('\n');
        let hint = lines.next().unwrap_or_default();
        let words = hint.rfind(" #").map_or(hint, |at| &hint[..at]);
        add("hint words".into(), tok.count(&format!("{words}]\n")));
        add(
            "hint check".into(),
            tok.count(&format!("{hint}\n")) - tok.count(&format!("{words}]\n")),
        );
        // Inside a table once a header has been seen, until the next entry.
        let mut in_table = body.starts_with("> [encoded: csv");
        let mut header_seen = false;
        for l in lines {
            if let Some((key, value)) = entry(l) {
                let ctx = if in_table && !header_seen {
                    "table decl"
                } else {
                    header_seen = false;
                    in_table = false;
                    "object"
                };
                let last = key.rsplit('.').next().unwrap_or(key);
                let key_tokens = tok.count(&format!("\n{key}:")) - 1;
                let last_tokens = tok.count(&format!("\n{last}:")) - 1;
                add(format!("{ctx} key (last segment)"), last_tokens);
                if key_tokens > last_tokens {
                    add(
                        format!("{ctx} key (dotted prefix)"),
                        key_tokens - last_tokens,
                    );
                }
                add(
                    format!("{ctx} value: {}", value_kind(value)),
                    tok.count(value),
                );
                continue;
            }
            if l.ends_with(':') && !l.contains(' ') && !l.ends_with("]:") {
                add("section line".into(), tok.count(&format!("\n{l}")) - 1);
                continue;
            }
            if l.ends_with("]:") && !l.contains(' ') {
                add(
                    "table start `k[N]:`".into(),
                    tok.count(&format!("\n{l}")) - 1,
                );
                in_table = true;
                header_seen = false;
                continue;
            }
            if in_table && !header_seen {
                header_seen = true;
                add("table header".into(), tok.count(&format!("\n{l}")) - 1);
                continue;
            }
            if in_table {
                add("table row line end".into(), 1);
                let cs = cells(l);
                for (i, c) in cs.iter().enumerate() {
                    let sep = if i + 1 < cs.len() { "," } else { "" };
                    add(
                        format!("table cell: {}", value_kind(c)),
                        tok.count(&format!("{c}{sep}")),
                    );
                }
                continue;
            }
            add("other line".into(), tok.count(&format!("\n{l}")) - 1);
        }
    }
    let sum: usize = parts.values().map(|p| p.0).sum();
    let mut rows: Vec<_> = parts.into_iter().collect();
    rows.sort_by_key(|(_, (n, _))| std::cmp::Reverse(*n));
    println!(
        "{:<40} {:>8} {:>7} {:>7}",
        "part", "tokens", "share", "pieces"
    );
    for (what, (n, count)) in rows {
        println!(
            "{what:<40} {n:>8} {:>6.1}% {count:>7}",
            100.0 * n as f64 / sum as f64
        );
    }
    println!("{:<40} {sum:>8} (counted whole: {total})", "sum of parts");
}
