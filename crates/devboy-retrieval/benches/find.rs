//! `cargo bench -p devboy-retrieval --bench find [-- ROOT [QUERY]]`: a
//! `find_files` query with no model on ROOT (default: this workspace),
//! with the time of each step:
//!
//! - **cold**: the index built from nothing (every file parsed), its time
//!   and the process's peak memory;
//! - **kept** (what a running devboy does): the tree walked and checked
//!   against the kept index and graph, the offline ranking, the answer
//!   rendered; then the same after one file changed;
//! - **from the disk cache** (what a new `devboy find-files` process
//!   does): the stored index read and checked, the graph joined, the rest.
//!
//! The target tree has 10,000 files (see
//! docs/measurements.md#find-files for how the figures were made). Prints
//! figures; asserts nothing about time.

use std::time::Instant;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// A line of `/proc/self/status` (`VmHWM`, `VmRSS`) in MiB, where there is one.
fn memory(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or_else(|| "?".into(), |kib| format!("{:.0} MiB", kib / 1024.0))
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
        "TypeError in handle_call when the upstream returns structuredContent; see crates/devboy-mcp/src/stack/mod.rs".into()
    });
    let cache = std::env::temp_dir().join(format!("devboy-find-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let started = Instant::now();
    let index = devboy_explore::Index::open(&root, &cache).expect("index");
    println!(
        "root {}: {} source files indexed cold in {:.2} s ({} lines); peak memory {}",
        index.root.display(),
        index.files.len(),
        started.elapsed().as_secs_f64(),
        index.stats.parsed_lines,
        memory("VmHWM:"),
    );
    let stored = devboy_explore::index::index_file(&cache, &index.root);
    println!(
        "  stored index {:.1} MiB",
        std::fs::metadata(&stored).map_or(0.0, |m| m.len() as f64 / 1048576.0)
    );
    drop(index);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let answer = |prepared: &devboy_retrieval::Prepared| {
        let found = runtime
            .block_on(devboy_retrieval::find(
                prepared,
                &query,
                devboy_retrieval::Requested::Auto,
                None,
                &devboy_retrieval::Options::default(),
            ))
            .expect("offline answers");
        devboy_retrieval::render(&query, &found)
    };

    // A running devboy: the kept index and graph.
    let started = Instant::now();
    let kept = devboy_explore::kept::open(&root, &cache).expect("kept");
    println!(
        "kept: first open (stored index read, graph joined) {:.2} s; memory now {}",
        started.elapsed().as_secs_f64(),
        memory("VmRSS:")
    );
    drop(kept);
    let (mut check, mut total) = (Vec::new(), Vec::new());
    let mut first = String::new();
    for _ in 0..5 {
        let started = Instant::now();
        let kept = devboy_explore::kept::open(&root, &cache).expect("kept");
        check.push(started.elapsed().as_secs_f64());
        let text = answer(&devboy_retrieval::prepare_in(kept.graph(), &query));
        total.push(started.elapsed().as_secs_f64());
        first = text.lines().nth(1).unwrap_or("none").to_owned();
    }
    println!(
        "kept: warm query (median of 5) {:.3} s = tree walked and checked {:.3} s + ranking and answer {:.3} s; first answer: {first}",
        median(total.clone()),
        median(check.clone()),
        median(total) - median(check),
    );
    // One file changed: parsed again, the graph joined again.
    let kept = devboy_explore::kept::open(&root, &cache).expect("kept");
    let changed = kept
        .index()
        .files
        .iter()
        .find(|f| !f.generated && f.facts.lines > 50)
        .map(|f| kept.index().root.join(&f.path));
    drop(kept);
    if let Some(path) = changed {
        let text = std::fs::read_to_string(&path).expect("a file to change");
        std::fs::write(&path, format!("{text}\n")).expect("the file changed");
        let started = Instant::now();
        let kept = devboy_explore::kept::open(&root, &cache).expect("kept");
        let refreshed = started.elapsed().as_secs_f64();
        let _ = answer(&devboy_retrieval::prepare_in(kept.graph(), &query));
        println!(
            "kept: one file changed: {:.3} s = refreshed ({} parsed) {refreshed:.3} s + ranking and answer {:.3} s",
            started.elapsed().as_secs_f64(),
            kept.index().stats.parsed,
            started.elapsed().as_secs_f64() - refreshed,
        );
        std::fs::write(&path, text).expect("the file restored");
    }

    // A new process: the index read from the disk cache.
    let (mut open, mut total) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let started = Instant::now();
        let index = devboy_explore::Index::open(&root, &cache).expect("index");
        open.push(started.elapsed().as_secs_f64());
        let _ = answer(&devboy_retrieval::prepare(&index, &query));
        total.push(started.elapsed().as_secs_f64());
    }
    println!(
        "new process: warm query (median of 5) {:.3} s = stored index read and checked {:.3} s + graph, ranking and answer {:.3} s",
        median(total.clone()),
        median(open.clone()),
        median(total) - median(open),
    );
    println!("peak memory {}", memory("VmHWM:"));
    let _ = std::fs::remove_dir_all(&cache);
}
