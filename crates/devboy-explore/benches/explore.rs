//! `cargo bench -p devboy-explore --bench explore [-- ROOT [QUERY]]`:
//! cold indexing throughput (source lines parsed per second, every core),
//! peak memory, and warm query latency (index opened from the cache, every
//! file checked for changes, and the question answered), on ROOT (default:
//! this workspace). Prints figures; asserts nothing about time.

use std::time::Instant;

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let root = args
        .first()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    let query = args.get(1).cloned().unwrap_or_else(|| {
        "How does a tool call reach an upstream and come back through the pipeline?".into()
    });
    let cache = std::env::temp_dir().join(format!("devboy-explore-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);

    let started = Instant::now();
    let index = devboy_explore::Index::open(&root, &cache).expect("index");
    let cold = started.elapsed().as_secs_f64();
    let lines = index.stats.parsed_lines;
    let symbols: usize = index.files.iter().map(|f| f.facts.symbols.len()).sum();
    println!(
        "root {}: {} files, {} lines, {} symbols",
        index.root.display(),
        index.files.len(),
        lines,
        symbols
    );
    println!(
        "cold index: {:.2} s, {:.0} lines/s on {} threads",
        cold,
        lines as f64 / cold,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    drop(index);

    let options = devboy_explore::Options::default();
    let mut times = Vec::new();
    let mut chars = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let index = devboy_explore::Index::open(&root, &cache).expect("index");
        let answer = devboy_explore::explore(&index, &query, &options);
        times.push(started.elapsed().as_secs_f64());
        chars = answer.text.len();
    }
    times.sort_by(f64::total_cmp);
    println!(
        "warm query (open + answer), median of 5: {:.0} ms ({} chars)",
        times[2] * 1000.0,
        chars
    );
    if let Some(kib) = peak_rss_kib() {
        println!("peak memory (VmHWM): {:.1} MiB", kib as f64 / 1024.0);
    }
    let _ = std::fs::remove_dir_all(&cache);
}
