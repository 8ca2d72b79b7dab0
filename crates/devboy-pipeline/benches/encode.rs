//! The encoders on the proxy's hot path, at body sizes from 1 to 256 KiB
//! of compact JSON, built from recorded list pages of `@octokit/fixtures`
//! (run `tests/peers/install.sh` first): issues (`paginate-issues`, about
//! 2.6 KB a row, so from 4 KiB up) and labels (`labels`, about 270 bytes a
//! row), rows repeated with fresh ids and numbers until the body is large
//! enough.
//!
//! - `candidates`: every applicable encoder, each checking its own output
//!   by decoding it.
//! - `encode_best`: the same plus one o200k count per candidate and the
//!   choice, what the router pays per body.
//! - `o200k_count_compact`: one o200k count of the body's compact JSON, the
//!   floor any token-aware choice pays.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use devboy_pipeline::encode::{candidates, encode_best};
use devboy_pipeline::Tokenizer;
use serde_json::Value;

#[path = "../tests/encode_corpus.rs"]
#[allow(dead_code)]
mod corpus;

const SIZES_KIB: [usize; 4] = [1, 4, 32, 256];

/// The rows of the recorded list pages of one fixture scenario.
fn scenario_rows(bodies: &[corpus::Body], scenario: &str) -> Vec<Value> {
    bodies
        .iter()
        .filter(|b| b.source.starts_with(&format!("fixture {scenario}#")))
        .filter_map(|b| match &b.value {
            Value::Array(rows) if rows.iter().all(Value::is_object) => Some(rows.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// An array of `rows` whose compact JSON is about `len` bytes (at least
/// one row).
fn body(rows: &[Value], len: usize) -> Value {
    let mut out = Vec::new();
    let mut size = 2;
    for (i, row) in rows.iter().cycle().enumerate() {
        let mut row = row.clone();
        let round = (i / rows.len()) as u64;
        if let Some(Value::Number(id)) = row.get("id") {
            let id = id.as_u64().unwrap_or(0) + round * 1_000_000;
            row["id"] = id.into();
        }
        if let Some(Value::Number(n)) = row.get("number") {
            let n = n.as_u64().unwrap_or(0) + round * 100;
            row["number"] = n.into();
        }
        let row_len = row.to_string().len() + 1;
        if !out.is_empty() && size + row_len > len {
            break;
        }
        size += row_len;
        out.push(row);
    }
    Value::Array(out)
}

fn encode(c: &mut Criterion) {
    let bodies = corpus::load().unwrap_or_else(|e| panic!("{e}"));
    let tok = Tokenizer::O200k;
    // Load the vocabulary outside the measurements.
    let _ = tok.count("warm up");
    let mut group = c.benchmark_group("encode");
    for (kind, scenario, sizes) in [
        ("labels", "labels", &SIZES_KIB[..]),
        ("issues", "paginate-issues", &SIZES_KIB[1..]),
    ] {
        let rows = scenario_rows(&bodies, scenario);
        assert!(!rows.is_empty(), "no {scenario} rows in the corpus");
        for &kib in sizes {
            let value = body(&rows, kib * 1024);
            let compact = value.to_string();
            let id = |name: &str| BenchmarkId::new(name, format!("{kind}/{kib}KiB"));
            group.throughput(Throughput::Bytes(compact.len() as u64));
            group.bench_with_input(id("candidates"), &value, |b, v| {
                b.iter(|| black_box(candidates(black_box(v))))
            });
            group.bench_with_input(id("encode_best"), &value, |b, v| {
                b.iter(|| black_box(encode_best(black_box(v), tok)))
            });
            group.bench_with_input(id("o200k_count_compact"), &compact, |b, text| {
                b.iter(|| black_box(tok.count(black_box(text))))
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = encode
}
criterion_main!(benches);
