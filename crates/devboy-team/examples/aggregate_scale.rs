//! The aggregate at scale: generated member files (M members × E
//! endpoints, Parquet) in a `file://` store and, with `--s3`, in a local
//! S3-compatible server (moto, from the test peers), then `aggregate`
//! timed at a quarter, half and all of the members, with the peak memory
//! of each aggregate and the objects' sizes. Prints figures; asserts
//! nothing.
//!
//! ```sh
//! cargo run --release -p devboy-team --example aggregate_scale -- [--members 1000] [--endpoints 2000] [--s3]
//! ```

use std::time::Instant;

use devboy_team::{columns, TeamStore};
use devboy_tune::fingerprint::{Fingerprint, DEVBOY_VERSION};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() % 10_000) as f64 / 10_000.0
    }
}

const SHAPES: [&str; 4] = [
    "array_of_objects",
    "markdown_table",
    "nested_object",
    "prose",
];
const INNER: [&str; 5] = ["url", "diff", "hash", "log_line", "code_fence"];

fn member_rows(member: usize, endpoints: usize) -> Vec<Fingerprint> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (member as u64 + 1));
    (0..endpoints)
        .map(|e| {
            let sessions = 5 + rng.next() % 40;
            let calls = sessions * (1 + rng.next() % 30);
            let sequenced = calls - calls / 10;
            Fingerprint {
                endpoint: format!("srv{}__tool_{e:05}", e % 20),
                members: 1,
                sessions,
                calls,
                errors: calls / 50,
                deduped: calls,
                dup_rate: rng.unit() * 0.5,
                sequenced,
                implied_dup_rate: rng.unit() * 0.6,
                sequenced_bodies: sequenced / 2,
                near_share: rng.unit() * 0.2,
                id_line_tokens: 7.0,
                reference_saved_tokens: rng.unit() * 300.0,
                chars_mean: 500.0 + rng.unit() * 8000.0,
                tokens_p50: 100 + rng.next() % 2000,
                tokens_p90: 2000 + rng.next() % 6000,
                shaped: calls,
                shape_dominant: Some(SHAPES[e % SHAPES.len()].to_owned()),
                shape_share: 0.6 + rng.unit() * 0.4,
                inner_formats_top3: (0..(e % 4))
                    .map(|i| INNER[(e + i) % INNER.len()].to_owned())
                    .collect(),
                encoded: calls / 2,
                template_top: (e % 3 == 0).then(|| "md_tables_csv".to_owned()),
                template_share: rng.unit(),
                baseline_tokens: 900.0,
                dedup_saved_tokens: rng.unit() * 100.0,
                encoder_saved_tokens: rng.unit() * 200.0,
                first_day: 20_400,
                last_day: 20_418,
                devboy_version: DEVBOY_VERSION.to_owned(),
                tokenizer: "o200k_base".to_owned(),
            }
        })
        .collect()
}

/// The process's peak resident memory (VmHWM), in MiB.
fn peak_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Resets the peak (Linux: `5` to clear_refs), so each aggregate's peak is
/// its own.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

async fn run(label: &str, url: &str, env: Vec<(String, String)>, members: usize, endpoints: usize) {
    let store = TeamStore::open(url, env).expect("store");
    let started = Instant::now();
    let mut member_bytes = 0usize;
    let mut written = 0usize;
    let steps = [members / 4, members / 2, members];
    println!("{label}: {url}");
    println!(
        "{:>8} {:>10} {:>12} {:>12} {:>14} {:>12} {:>12}",
        "members", "rows", "aggregate s", "µs per row", "peak MiB", "team KiB", "member KiB"
    );
    for &upto in &steps {
        while written < upto {
            let id = format!("{:016x}", 0xabc0_0000_u64 + written as u64);
            let bytes = columns::write(&member_rows(written, endpoints), Some(&id)).expect("write");
            member_bytes += bytes.len();
            store.put_member(&id, bytes).await.expect("put");
            written += 1;
        }
        reset_peak();
        let t = Instant::now();
        let report = devboy_team::aggregate(&store, 5, 14, 1_764_200_000_000)
            .await
            .expect("aggregate");
        let seconds = t.elapsed().as_secs_f64();
        let rows = upto * endpoints;
        assert_eq!(report.members, upto);
        println!(
            "{:>8} {:>10} {:>12.2} {:>12.2} {:>14.1} {:>12.1} {:>12.1}",
            upto,
            rows,
            seconds,
            seconds * 1e6 / rows as f64,
            peak_mib(),
            report.bytes as f64 / 1024.0,
            member_bytes as f64 / written as f64 / 1024.0
        );
    }
    println!(
        "(generating and uploading {written} member objects took {:.1} s)\n",
        started.elapsed().as_secs_f64()
    );
}

fn main() {
    let members = arg("--members", 1000);
    let endpoints = arg("--endpoints", 2000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!("aggregate of {members} members × {endpoints} endpoints (k = 5)\n");
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("file://{}/team", dir.path().display());
    runtime.block_on(run("file store", &url, Vec::new(), members, endpoints));
    if std::env::args().any(|a| a == "--s3") {
        let s3 = devboy_testkit::stores::S3Server::start();
        s3.create_bucket("scale");
        runtime.block_on(run(
            "S3 (moto)",
            "s3://scale/team",
            s3.env(),
            members,
            endpoints,
        ));
    }
}
