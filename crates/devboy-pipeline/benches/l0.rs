//! The L0 dedup path (fingerprint + lookup + insert) next to raw SHA-256 of
//! the same bytes, as throughput, at body sizes from 1 to 256 KiB.
//!
//! - `sha256_raw`: SHA-256 of the body, the floor.
//! - `l0_miss_insert`: a fresh body every iteration (a counter is stamped
//!   into its first bytes): fingerprint, lookup (miss), record the delivery.
//!   Once the cache is full every insert also evicts, so this is the
//!   steady-state worst case.
//! - `l0_hit`: the same body every iteration: fingerprint, lookup (hit).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use devboy_pipeline::{
    DedupCache, DedupConfig, Delivered, EndpointKey, Fingerprint, IdAllocator, SessionTag,
    Timestamp,
};
use sha2::{Digest, Sha256};

const SIZES_KIB: [usize; 4] = [1, 4, 32, 256];

fn body(len: usize) -> Vec<u8> {
    // JSON-ish text; the content does not matter to SHA-256's speed.
    let line = br#"{"name":"src/lib.rs","type":"file","size":12345,"sha":"0123abcd"},"#;
    line.iter().copied().cycle().take(len).collect()
}

fn l0(c: &mut Criterion) {
    let endpoint = EndpointKey::new("fs", "read_text_file");
    let now = Timestamp::from_millis(1);
    let mut group = c.benchmark_group("l0");
    for kib in SIZES_KIB {
        let len = kib * 1024;
        group.throughput(Throughput::Bytes(len as u64));

        let fixed = body(len);
        group.bench_with_input(BenchmarkId::new("sha256_raw", kib), &fixed, |b, body| {
            b.iter(|| black_box(Sha256::digest(black_box(body.as_slice()))))
        });

        let mut fresh = body(len);
        let mut cache = DedupCache::new(DedupConfig::default());
        let mut ids = IdAllocator::new(SessionTag::FIXED);
        let mut counter = 0u64;
        group.bench_function(BenchmarkId::new("l0_miss_insert", kib), |b| {
            b.iter(|| {
                counter += 1;
                fresh[..8].copy_from_slice(&counter.to_le_bytes());
                let fp = Fingerprint::of(black_box(&fresh));
                if cache.lookup(fp, now).is_none() {
                    let delivered =
                        Delivered::new(ids.next(), endpoint.clone(), ["/repo/src/lib.rs"]);
                    black_box(cache.record_delivered(fp, delivered, fresh.len(), now));
                }
            })
        });

        let mut cache = DedupCache::new(DedupConfig::default());
        let delivered = Delivered::new(ids.next(), endpoint.clone(), ["/repo/src/lib.rs"]);
        let _ = cache.record_delivered(Fingerprint::of(&fixed), delivered, len, now);
        group.bench_with_input(BenchmarkId::new("l0_hit", kib), &fixed, |b, body| {
            b.iter(|| {
                let fp = Fingerprint::of(black_box(body.as_slice()));
                black_box(cache.lookup(fp, now).is_some())
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = l0
}
criterion_main!(benches);
