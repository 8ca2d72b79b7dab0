//! The whole pipeline per fresh response (L0 fingerprint and insert, shape
//! classification, every lossless candidate with its verifying decode, the
//! router's choice and the exact counts of the body and the winner) next to
//! one o200k tokenization pass of the same body, which is the practical
//! floor: a proxy that reports token savings must count the body once.
//!
//! Bodies are GitHub-like issue list pages (compact JSON) of about 1, 4, 32
//! and 256 KiB. The figure to read is the ratio
//! `pipeline_fresh / tiktoken_count` at each size (one count by
//! `tiktoken-rs`); the target is ≤ 2. `o200k_count` is devboy's own exact
//! count (`tokens::fast`), which the pipeline uses.
//! A dedup hit (`pipeline_repeat`) costs one count plus a hash.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use devboy_pipeline::result_pipeline::{BodyPolicy, ResultPipeline};
use devboy_pipeline::route::RouteConfig;
use devboy_pipeline::Handoff;
use devboy_pipeline::{
    DedupStageConfig, EndpointKey, IdAllocator, ResultPolicy, SessionTag, Timestamp, Tokenizer,
};
use serde_json::{json, Value};

const SIZES_KIB: [usize; 4] = [1, 4, 32, 256];

fn issue(i: usize) -> Value {
    let repo = "https://api.github.com/repos/octo-org/octo-repo";
    json!({
        "url": format!("{repo}/issues/{i}"),
        "repository_url": repo,
        "labels_url": format!("{repo}/issues/{i}/labels{{/name}}"),
        "comments_url": format!("{repo}/issues/{i}/comments"),
        "html_url": format!("https://github.com/octo-org/octo-repo/issues/{i}"),
        "id": 1_000_000 + i * 7,
        "node_id": format!("MDU6SXNzdWUx{i:06}"),
        "number": i,
        "title": format!("Parser fails on input {i} with nested brackets"),
        "user": {"login": format!("dev{}", i % 5), "id": 100 + i % 5, "type": "User", "site_admin": false},
        "labels": if i.is_multiple_of(3) { json!([{"id": 7, "name": "bug", "color": "d73a4a", "default": true}]) } else { json!([]) },
        "state": if i.is_multiple_of(4) { "closed" } else { "open" },
        "locked": false,
        "assignee": null,
        "comments": i % 9,
        "created_at": format!("2026-0{}-1{}T10:2{}:00Z", 1 + i % 9, i % 10, i % 10),
        "closed_at": null,
        "author_association": "CONTRIBUTOR",
        "body": if i.is_multiple_of(2) { json!("Steps to reproduce:\n1. run the parser\n2. see the error") } else { Value::Null },
    })
}

/// A list page of about `kib` KiB.
fn page(kib: usize) -> String {
    let mut rows = Vec::new();
    while serde_json::to_string(&rows).map_or(0, |s| s.len()) < kib * 1024 {
        rows.push(issue(rows.len()));
    }
    rows.pop();
    if rows.is_empty() {
        rows.push(issue(0));
    }
    Value::Array(rows).to_string()
}

/// JSON-insignificant whitespace unique to `n`: its bits as spaces and tabs.
fn whitespace(n: usize) -> String {
    let bits = usize::BITS - n.leading_zeros();
    (0..=bits)
        .map(|i| if n >> i & 1 == 1 { '\t' } else { ' ' })
        .collect()
}

fn policy() -> BodyPolicy {
    BodyPolicy {
        dedup: Some(ResultPolicy::default()),
        encode: true,
        only: None,
        keep_whole: false,
        client: Default::default(),
    }
}

fn pipeline(c: &mut Criterion) {
    let tok = Tokenizer::O200k;
    // Load the vocabulary outside the measurements.
    tok.count("warm up");
    let mut group = c.benchmark_group("pipeline");
    for kib in SIZES_KIB {
        let body = page(kib);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::new("o200k_count", kib), &body, |b, body| {
            b.iter(|| black_box(tok.count(black_box(body))))
        });
        // The same count by tiktoken-rs itself (fancy-regex split): the
        // floor for a proxy that counts with the standard crate.
        group.bench_with_input(BenchmarkId::new("tiktoken_count", kib), &body, |b, body| {
            b.iter(|| black_box(devboy_pipeline::tokens::tiktoken_o200k(black_box(body))))
        });
        // Fresh every time: a new session per iteration would measure setup,
        // so one session, and the body made unique by trailing whitespace
        // spelling out the iteration (still the same JSON, a new
        // fingerprint). `pipeline_fresh` runs with the
        // default 25,000-token budget (the 256 KiB page is over it and gets
        // elided); `encode_only` with no budget, so every size measures
        // the lossless path alone.
        for (name, budget) in [("pipeline_fresh", 25_000), ("encode_only", usize::MAX)] {
            let route = RouteConfig {
                budget_tokens: budget,
                ..RouteConfig::default()
            };
            let mut session = ResultPipeline::new(
                DedupStageConfig::default(),
                route,
                IdAllocator::new(SessionTag::FIXED),
            );
            let mut n = 0usize;
            group.bench_with_input(BenchmarkId::new(name, kib), &body, |b, body| {
                b.iter(|| {
                    n += 1;
                    let unique = format!("{body}{}", whitespace(n));
                    let out = session.process(
                        EndpointKey::new("gh", "list_issues"),
                        &unique,
                        None,
                        Vec::new(),
                        Timestamp::from_millis(n as u64),
                        &policy(),
                        &Handoff::new(),
                    );
                    debug_assert!(out.text.is_some());
                    black_box(out)
                })
            });
        }
        let mut session = ResultPipeline::new(
            DedupStageConfig::default(),
            RouteConfig::default(),
            IdAllocator::new(SessionTag::FIXED),
        );
        let first = session.process(
            EndpointKey::new("gh", "list_issues"),
            &body,
            None,
            Vec::new(),
            Timestamp::from_millis(0),
            &policy(),
            &Handoff::new(),
        );
        assert!(first.text.is_some(), "the page is re-encoded");
        group.bench_with_input(
            BenchmarkId::new("pipeline_repeat", kib),
            &body,
            |b, body| {
                b.iter(|| {
                    black_box(session.process(
                        EndpointKey::new("gh", "list_issues"),
                        body,
                        None,
                        Vec::new(),
                        Timestamp::from_millis(1),
                        &policy(),
                        &Handoff::new(),
                    ))
                })
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = pipeline
}
criterion_main!(benches);
