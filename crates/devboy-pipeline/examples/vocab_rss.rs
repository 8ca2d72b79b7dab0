//! The o200k counter's cost: the resident set before and after its first
//! count (VmRSS of this process, Linux), and, for the files given, the
//! time to count them with it and with `tiktoken-rs` itself (five rounds;
//! the best of each):
//!
//! ```text
//! cargo run --release -p devboy-pipeline --example vocab_rss -- [FILE…]
//! ```

use std::time::{Duration, Instant};

use devboy_pipeline::Tokenizer;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn best_of(rounds: usize, mut run: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut tokens = 0;
    for _ in 0..rounds {
        let start = Instant::now();
        tokens = run();
        best = best.min(start.elapsed());
    }
    (best, tokens)
}

fn main() {
    let texts: Vec<String> = std::env::args()
        .skip(1)
        .map(|p| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}")))
        .collect();
    let before = rss_kib();
    let tokens = Tokenizer::O200k.count("warm up the vocabulary");
    let after = rss_kib();
    println!(
        "o200k counter: VmRSS {before} KiB before, {after} KiB after its first count (+{} KiB); {tokens} tokens",
        after.saturating_sub(before)
    );
    if texts.is_empty() {
        return;
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    let (ours, n) = best_of(5, || texts.iter().map(|t| Tokenizer::O200k.count(t)).sum());
    let (theirs, m) = best_of(5, || {
        texts
            .iter()
            .map(|t| devboy_pipeline::tokens::tiktoken_o200k(t))
            .sum()
    });
    println!(
        "{} files, {bytes} bytes: devboy {ours:?} ({n} tokens), tiktoken-rs {theirs:?} ({m} tokens), {:.2}x",
        texts.len(),
        theirs.as_secs_f64() / ours.as_secs_f64()
    );
}
