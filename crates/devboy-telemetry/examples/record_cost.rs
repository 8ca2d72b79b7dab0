//! What one `Telemetry::record` costs the calling thread (the hot path),
//! and what the writer thread sustains. Run with
//! `cargo run --release -p devboy-telemetry --example record_cost`.

use std::time::Instant;

use devboy_telemetry::{
    CallFacts, DedupOutcome, Outcome, ResultLayer, Telemetry, TelemetryOptions,
};

fn outcome() -> Outcome {
    Outcome {
        dedup: DedupOutcome::Miss,
        layer: ResultLayer::Encoder,
        action: "encoded",
        shape: Some("array_of_objects"),
        inner_formats: vec!["url", "hash"],
        format: Some("csv"),
        template: None,
        tokens_baseline: 1200,
        tokens_final: 700,
        dedup_saved: -4,
        encoder_saved: 504,
        elided: false,
        context_partition: 0,
        is_error: false,
    }
}

fn main() {
    let dir = std::env::temp_dir().join(format!("devboy-record-cost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let paths = vec!["/home/u/project/src/main.rs".to_owned()];
    for (label, body_bytes) in [
        ("1 KiB body", 1024),
        ("16 KiB body", 16 * 1024),
        ("256 KiB body", 256 * 1024),
    ] {
        let body = "{\"id\":1,\"name\":\"item\"},".repeat(body_bytes / 24);
        let facts = CallFacts {
            tool: "gh__list_issues",
            upstream: "gh",
            body: &body,
            paths: &paths,
        };
        for (mode, rate) in [("kept", 1.0), ("sampled out", 0.0)] {
            let telemetry = Telemetry::start(TelemetryOptions {
                queue: 1 << 16,
                sample_rate: rate,
                ..TelemetryOptions::new(dir.join(format!("{body_bytes}-{rate}")), "o200k_base")
            });
            let n = 20_000;
            let start = Instant::now();
            for _ in 0..n {
                telemetry.record(&facts, outcome());
            }
            let hot = start.elapsed();
            telemetry.finish();
            let total = start.elapsed();
            println!(
                "{label:>13}, {mode:<11}: record {:>7.2} µs/event on the caller; {:>7.2} µs/event until written ({n} events)",
                hot.as_secs_f64() * 1e6 / n as f64,
                total.as_secs_f64() * 1e6 / n as f64,
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
