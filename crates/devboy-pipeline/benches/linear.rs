//! Bounded work per result (invariant 13): the cost per byte of counting a
//! body and of the whole pipeline on it, for bodies that used to differ by
//! orders of magnitude.
//!
//! Inputs of 1 MiB: one character repeated (`y`, `=`, a space: a single
//! o200k piece each, which a quadratic merge took minutes over), base64
//! of random bytes, this repository's own Rust source, and random
//! lower-case letters (one piece with no repeats: the slowest case for
//! the chunked merge), and the shapes the classifier and the templates
//! once scanned quadratically (Markdown table rows, runs of backticks and
//! brackets, escaped pipes, a long JSON string, diff hunks, a big issue
//! table). For each it prints nanoseconds per byte of one
//! o200k count and of one fresh pass through `ResultPipeline` (dedup,
//! classification, every candidate encoding, the router, the counts),
//! and each figure's ratio to Rust source's, the typical body. What to
//! read: every figure is a constant per byte (no input is superlinear),
//! and the costliest input's ratio. Base64 costs more per byte than
//! source because it has about three times the tokens per byte; random
//! letters form one 1 MiB piece merged in 4 KB chunks.
//!
//! `cargo bench -p devboy-pipeline --bench linear [-- ROUNDS]` (default 5;
//! the best round of each is printed, the machine being noisy).

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use devboy_pipeline::result_pipeline::{BodyPolicy, ResultPipeline};
use devboy_pipeline::route::RouteConfig;
use devboy_pipeline::{
    DedupStageConfig, EndpointKey, Handoff, IdAllocator, ResultPolicy, SessionTag, Timestamp,
    Tokenizer,
};

const SIZE: usize = 1 << 20;

/// A deterministic stream of bytes (xorshift), so runs compare.
fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    bytes
        .chunks(3)
        .flat_map(|c| {
            let n = (u32::from(c[0]) << 16)
                | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                | u32::from(*c.get(2).unwrap_or(&0));
            (0..4).map(move |i| ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char)
        })
        .collect()
}

/// This repository's Rust sources, concatenated to `SIZE` bytes.
fn source() -> String {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files: Vec<_> = std::fs::read_dir(&crates)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|krate| {
            std::fs::read_dir(krate.path().join("src"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    let mut text = String::new();
    for file in files.iter().cycle().take(10_000) {
        if text.len() >= SIZE {
            break;
        }
        text.push_str(&std::fs::read_to_string(file).unwrap_or_default());
    }
    let mut cut = SIZE.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text
}

fn inputs() -> Vec<(&'static str, String)> {
    let noise = noise(SIZE);
    vec![
        ("one character (y)", "y".repeat(SIZE)),
        ("one character (=)", "=".repeat(SIZE)),
        ("one character (space)", " ".repeat(SIZE)),
        ("base64", base64(&noise[..SIZE / 4 * 3])),
        ("rust source", source()),
        (
            "random lower case",
            noise.iter().map(|b| (b'a' + b % 26) as char).collect(),
        ),
        // Shapes the classifier and the templates once scanned
        // quadratically: a table of empty-looking rows, runs of fence and
        // bracket characters, escaped pipes, a long JSON string, diffs.
        ("markdown table rows", fill("| a | b |\n|---|---|\n")),
        ("backticks", "`".repeat(SIZE)),
        ("open brackets", "[".repeat(SIZE)),
        ("escaped pipes", fill("a\\|")),
        (
            "one long JSON string",
            format!("{{\"a\":\"{}\"}}", "x".repeat(SIZE)),
        ),
        (
            "JSON array of hunks",
            format!("[{}0]", "\"@@ -1 +1 @@\\n\",".repeat(SIZE / 16)),
        ),
        ("diff hunks", fill("@@ -1 +1 @@\n")),
        ("an issue table", issue_table()),
    ]
}

/// `unit` repeated to about [`SIZE`] bytes.
fn fill(unit: &str) -> String {
    unit.repeat(SIZE / unit.len())
}

/// A Markdown table of issues, about [`SIZE`] bytes.
fn issue_table() -> String {
    let mut doc = String::from("| id | title | state |\n|---|---|---|\n");
    let mut i = 0;
    while doc.len() < SIZE {
        doc.push_str(&format!("| {i} | issue, \"number\" {i} | open |\n"));
        i += 1;
    }
    doc
}

/// The best of `rounds` timings of `f`.
fn best(rounds: usize, mut f: impl FnMut()) -> Duration {
    (0..rounds)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let rounds = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(5)
        .max(1);
    let tokenizer = Tokenizer::O200k;
    tokenizer.warm_up();
    let policy = BodyPolicy {
        dedup: Some(ResultPolicy::default()),
        encode: true,
        only: None,
        keep_whole: false,
        client: Default::default(),
    };
    let mut rows = Vec::new();
    for (name, body) in inputs() {
        let count = best(rounds, || {
            black_box(tokenizer.count(black_box(&body)));
        });
        let mut n = 0u64;
        let pipeline = best(rounds, || {
            // A fresh session each round: every pass is a first sight.
            let mut session = ResultPipeline::new(
                DedupStageConfig::default(),
                RouteConfig::default(),
                IdAllocator::new(SessionTag::FIXED),
            );
            n += 1;
            black_box(session.process(
                EndpointKey::new("fs", "read_text_file"),
                &body,
                None,
                Vec::new(),
                Timestamp::from_millis(n),
                &policy,
                &Handoff::new(),
            ));
        });
        let per_byte = |d: Duration| d.as_nanos() as f64 / body.len() as f64;
        rows.push((name, per_byte(count), per_byte(pipeline)));
    }
    // Source code is the typical body; the rest is judged against it.
    let typical = rows
        .iter()
        .find(|r| r.0 == "rust source")
        .map_or((1.0, 1.0), |r| (r.1, r.2));
    println!("1 MiB bodies, best of {rounds} rounds; ns per byte (× Rust source's)");
    println!(
        "{:<24} {:>18} {:>18}",
        "input", "o200k count", "whole pipeline"
    );
    for (name, count, pipeline) in &rows {
        println!(
            "{name:<24} {:>10.2} ({:>4.1}×) {:>10.2} ({:>4.1}×)",
            count,
            count / typical.0,
            pipeline,
            pipeline / typical.1
        );
    }
    let worst = |pick: fn(&(&str, f64, f64)) -> f64, of: f64| {
        rows.iter().map(pick).fold(0.0, f64::max) / of
    };
    println!(
        "the costliest input per byte: count {:.1}×, pipeline {:.1}× Rust source's",
        worst(|r| r.1, typical.0),
        worst(|r| r.2, typical.1)
    );
}
