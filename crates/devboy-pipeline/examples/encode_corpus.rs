//! Token figures of the encoders over the real GitHub corpus (see
//! `tests/encode_corpus.rs` for what it holds), counted with o200k_base.
//!
//! ```text
//! cargo run --release -p devboy-pipeline --example encode_corpus [-- --verbose [--all] | --show TEXT]
//! ```
//!
//! Prints, per body kind, the token totals of pretty JSON, compact JSON and
//! `encode_best`, the savings, how often each format won, and round-trip
//! failures (every candidate is decoded again here, independently of the
//! encoders' own check). `--verbose` adds one line per list page (pretty,
//! compact and best tokens, saving, format, source), `--all` one per body;
//! `--show TEXT` prints every candidate of every body whose source contains
//! TEXT, the best first.

#[path = "../tests/encode_corpus.rs"]
mod corpus;

use std::collections::BTreeMap;
use std::time::Instant;

use corpus::Kind;
use devboy_pipeline::encode::{candidates, decode, Format};
use devboy_pipeline::Tokenizer;

#[derive(Default)]
struct Totals {
    bodies: usize,
    pretty: usize,
    compact: usize,
    best: usize,
    wins: BTreeMap<&'static str, usize>,
    failures: usize,
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * (1.0 - part as f64 / whole as f64)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let verbose = args.iter().any(|a| a == "--verbose");
    let show = args
        .iter()
        .position(|a| a == "--show")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let bodies = match corpus::load() {
        Ok(bodies) => bodies,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let tok = Tokenizer::O200k;
    let mut totals: BTreeMap<&'static str, Totals> = BTreeMap::new();
    let mut encode_time = std::time::Duration::ZERO;
    for body in &bodies {
        let kind = Kind::of(&body.value);
        let started = Instant::now();
        let all = candidates(&body.value);
        encode_time += started.elapsed();
        let pretty = tok.count(&serde_json::to_string_pretty(&body.value).unwrap_or_default());
        let compact = tok.count(&body.value.to_string());
        let mut best: Option<(usize, Format, &str)> = None;
        let mut failures = 0;
        for candidate in &all {
            if decode(candidate.text()).ok().as_ref() != Some(&body.value) {
                failures += 1;
                eprintln!(
                    "round-trip failure: {} as {}",
                    body.source,
                    candidate.format()
                );
                continue;
            }
            let cost = tok.count(candidate.text());
            if best.is_none_or(|(least, _, _)| cost < least) {
                best = Some((cost, candidate.format(), candidate.text()));
            }
        }
        let (best_cost, format, text) = best.unwrap_or((compact, Format::JsonCompact, ""));
        let t = totals.entry(kind.name()).or_default();
        t.bodies += 1;
        t.pretty += pretty;
        t.compact += compact;
        t.best += best_cost;
        *t.wins.entry(format.name()).or_default() += 1;
        t.failures += failures;
        if verbose && (kind == Kind::ListPage || args.iter().any(|a| a == "--all")) {
            println!(
                "{:>6} {:>6} {:>6} {:>6.1}% {:<12} {}",
                pretty,
                compact,
                best_cost,
                percent(best_cost, compact),
                format.name(),
                body.source
            );
        }
        if show.as_deref().is_some_and(|s| body.source.contains(s)) {
            println!(
                "=== {} ({compact} → {best_cost} tokens)\n{text}\n",
                body.source
            );
            for candidate in all.iter().filter(|c| c.format() != format) {
                let cost = tok.count(candidate.text());
                println!(
                    "--- also {} ({cost} tokens)\n{}\n",
                    candidate.format(),
                    candidate.text()
                );
            }
        }
    }

    println!(
        "tokenizer: {tok}; {} bodies; candidates() took {encode_time:?} in all",
        bodies.len()
    );
    println!(
        "{:<10} {:>6} {:>9} {:>9} {:>9} {:>10} {:>9}  {:<40} failures",
        "kind", "bodies", "pretty", "compact", "best", "vs compact", "vs pretty", "wins"
    );
    let mut all = Totals::default();
    for kind in Kind::ALL {
        let Some(t) = totals.get(kind.name()) else {
            continue;
        };
        print_row(kind.name(), t);
        all.bodies += t.bodies;
        all.pretty += t.pretty;
        all.compact += t.compact;
        all.best += t.best;
        all.failures += t.failures;
        for (format, n) in &t.wins {
            *all.wins.entry(format).or_default() += n;
        }
    }
    print_row("all", &all);
}

fn print_row(name: &str, t: &Totals) {
    let wins: Vec<String> = t.wins.iter().map(|(f, n)| format!("{f} {n}")).collect();
    println!(
        "{:<10} {:>6} {:>9} {:>9} {:>9} {:>9.1}% {:>8.1}%  {:<40} {}",
        name,
        t.bodies,
        t.pretty,
        t.compact,
        t.best,
        percent(t.best, t.compact),
        percent(t.best, t.pretty),
        wins.join(", "),
        t.failures
    );
}
