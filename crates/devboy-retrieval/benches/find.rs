//! `cargo bench -p devboy-retrieval --bench find [-- ROOT [QUERY]]`: a
//! `find_files` query with no model, warm — the index opened from the
//! cache (every file checked for changes), the tree built, the offline
//! ranking, the answer rendered — on ROOT (default: this workspace), with
//! the time of each step. The target tree has 10,000 files (see
//! docs/measurements.md#find-files for how the figures were made). Prints
//! figures; asserts nothing about time.

use std::time::Instant;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
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
        "TypeError in handle_call when the upstream returns structuredContent; see crates/devboy-mcp/src/call.rs".into()
    });
    let cache = std::env::temp_dir().join(format!("devboy-find-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let started = Instant::now();
    let index = devboy_explore::Index::open(&root, &cache).expect("index");
    println!(
        "root {}: {} source files indexed cold in {:.2} s",
        index.root.display(),
        index.files.len(),
        started.elapsed().as_secs_f64()
    );
    drop(index);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let (mut open, mut prepare, mut total) = (Vec::new(), Vec::new(), Vec::new());
    let mut summary = String::new();
    for _ in 0..5 {
        let started = Instant::now();
        let index = devboy_explore::Index::open(&root, &cache).expect("index");
        let opened = started.elapsed().as_secs_f64();
        let prepared = devboy_retrieval::prepare(&index, &query);
        let ready = started.elapsed().as_secs_f64();
        let found = runtime
            .block_on(devboy_retrieval::find(
                &prepared,
                &query,
                devboy_retrieval::Requested::Auto,
                None,
                &devboy_retrieval::Options::default(),
            ))
            .expect("offline answers");
        let text = devboy_retrieval::render(&query, &found);
        total.push(started.elapsed().as_secs_f64());
        open.push(opened);
        prepare.push(ready - opened);
        summary = format!(
            "{} files in the tree ({} nodes); first answer: {}",
            prepared.tree.files(),
            prepared.tree.len(),
            text.lines().nth(1).unwrap_or("none")
        );
    }
    println!("{summary}");
    // Where the time goes.
    let index = devboy_explore::Index::open(&root, &cache).expect("index");
    let started = Instant::now();
    let tree = devboy_retrieval::Tree::from_paths(&index.text_paths);
    let walked = started.elapsed().as_secs_f64();
    let ranked = devboy_explore::rank_offline(&index, &query, usize::MAX);
    let ranking = started.elapsed().as_secs_f64() - walked;
    println!(
        "  of which: tree {walked:.3} s ({} nodes), offline ranking {ranking:.3} s ({} files scored)",
        tree.len(),
        ranked.len()
    );
    println!(
        "warm query (median of 5): {:.3} s = index open {:.3} s + tree and offline ranking {:.3} s",
        median(total),
        median(open),
        median(prepare)
    );
    let _ = std::fs::remove_dir_all(&cache);
}
