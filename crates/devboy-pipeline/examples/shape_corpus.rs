//! What the shape classifier and the L1 templates make of real GitHub API
//! bodies: shape and inner-format counts over the corpus of
//! `tests/shape_corpus.rs` (run `tests/peers/install.sh` first), and for
//! each template the o200k token totals before and after on the bodies it
//! accepts.
//!
//! ```text
//! cargo run --release -p devboy-pipeline --example shape_corpus [-- FILE…]
//! ```
//!
//! Each extra FILE is one more body, read as it is (JSON or text).

use std::collections::BTreeMap;
use std::process::ExitCode;

use devboy_pipeline::shape::{classify, InnerFormat};
use devboy_pipeline::template::{md_tables, Template};
use devboy_pipeline::Tokenizer;

#[path = "../tests/shape_corpus.rs"]
mod corpus;

/// Token totals of one template over the bodies it accepted.
#[derive(Default)]
struct Totals {
    accepted: usize,
    cheaper: usize,
    before: usize,
    pretty: usize,
    after: usize,
    /// (after − before, source) per body, for the extremes.
    deltas: Vec<(i64, String)>,
}

impl Totals {
    fn add(&mut self, source: &str, before: usize, pretty: usize, after: usize) {
        self.accepted += 1;
        self.cheaper += usize::from(after < before);
        self.before += before;
        self.pretty += pretty;
        self.after += after;
        self.deltas
            .push((after as i64 - before as i64, source.to_string()));
    }

    fn print(&self, name: &str, baseline: &str) {
        let change = if self.before == 0 {
            0.0
        } else {
            100.0 * (self.after as f64 - self.before as f64) / self.before as f64
        };
        println!(
            "{name:<22} accepted {:>4}  cheaper {:>4}  {baseline} {:>8}  pretty {:>8}  encoded {:>8}  ({change:+.1}%)",
            self.accepted, self.cheaper, self.before, self.pretty, self.after
        );
        let mut deltas = self.deltas.clone();
        deltas.sort();
        let best = deltas.iter().take(3);
        let worst = deltas.iter().rev().take(3).filter(|(d, _)| *d > 0);
        for (delta, source) in best.chain(worst) {
            println!("    {delta:>+7}  {source}");
        }
    }
}

fn main() -> ExitCode {
    let corpus = match corpus::load_corpus() {
        Ok(bodies) => bodies,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut extra = Vec::new();
    for path in std::env::args().skip(1) {
        match std::fs::read_to_string(&path) {
            Ok(text) => extra.push(corpus::CorpusBody { source: path, text }),
            Err(e) => {
                eprintln!("{path}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    report(
        "GitHub corpus (octokit fixtures + openapi examples)",
        &corpus,
    );
    if !extra.is_empty() {
        println!();
        report("files given on the command line", &extra);
    }
    ExitCode::SUCCESS
}

fn report(title: &str, bodies: &[corpus::CorpusBody]) {
    let tokens = Tokenizer::O200k;
    let mut shapes = BTreeMap::new();
    let mut inner = BTreeMap::new();
    let mut totals: BTreeMap<&str, Totals> = BTreeMap::new();
    let mut leaf_tables = Totals::default();
    let mut leaves = 0usize;
    for body in bodies {
        let c = classify(&body.text);
        *shapes.entry(c.shape.name()).or_insert(0usize) += 1;
        for f in c.inner.iter() {
            *inner.entry(f.name()).or_insert(0usize) += 1;
        }
        for t in Template::ALL {
            if let Some(encoded) = t.encode(&body.text, c.json.as_ref()) {
                let before = tokens.count(&body.text);
                let pretty = match &c.json {
                    Some(v) => tokens.count(&serde_json::to_string_pretty(v).unwrap_or_default()),
                    None => before,
                };
                totals.entry(t.name()).or_default().add(
                    &body.source,
                    before,
                    pretty,
                    tokens.count(&encoded),
                );
            }
        }
        if let Some(value) = &c.json {
            let mut texts = Vec::new();
            corpus::multiline_leaves(value, &mut texts);
            leaves += texts.len();
            for text in texts {
                if let Some(encoded) = md_tables::encode(&text) {
                    let before = tokens.count(&text);
                    leaf_tables.add(&body.source, before, before, tokens.count(&encoded));
                }
            }
        }
    }
    println!("# {title}: {} bodies; tokenizer {tokens}", bodies.len());
    println!("\nshapes:");
    for (shape, n) in &shapes {
        println!("  {shape:<18} {n:>4}");
    }
    println!("\ninner formats (bodies containing each):");
    for f in InnerFormat::ALL {
        println!(
            "  {:<18} {:>4}",
            f.name(),
            inner.get(f.name()).copied().unwrap_or(0)
        );
    }
    println!(
        "\ntemplates, on the bodies each accepts (given = the body as is: compact JSON for JSON):"
    );
    for t in Template::ALL {
        totals
            .get(t.name())
            .unwrap_or(&Totals::default())
            .print(t.name(), "given");
    }
    println!(
        "\nmd tables in JSON string leaves ({leaves} multi-line leaves; given = the leaf text):"
    );
    leaf_tables.print("md_tables_csv (leaf)", "given");
}
