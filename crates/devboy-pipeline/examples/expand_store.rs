//! What the expand store keeps of real results: the bytes as they came,
//! the bytes kept (compressed where that pays), and what storing and
//! expanding cost, over the files given.
//!
//! ```sh
//! cargo run --release -p devboy-pipeline --example expand_store -- FILE...
//! ```

use std::time::Instant;

use devboy_pipeline::{ExpandConfig, ExpandStore, IdAllocator};

fn main() {
    let files: Vec<Vec<u8>> = std::env::args()
        .skip(1)
        .filter_map(|path| std::fs::read(&path).ok())
        .filter(|bytes| !bytes.is_empty())
        .collect();
    if files.is_empty() {
        eprintln!("usage: expand_store FILE...");
        std::process::exit(2);
    }
    let mut ids = IdAllocator::new(devboy_pipeline::SessionTag::FIXED);
    let mut store = ExpandStore::new(ExpandConfig {
        max_bytes: usize::MAX,
    });
    let started = Instant::now();
    let issued: Vec<_> = files
        .iter()
        .map(|bytes| {
            let id = ids.next();
            let _ = store.insert(id, bytes.clone());
            id
        })
        .collect();
    let stored = started.elapsed();
    let started = Instant::now();
    let mut same = 0;
    for (id, bytes) in issued.iter().zip(&files) {
        same += usize::from(store.get(*id).as_deref() == Some(&bytes[..]));
    }
    let expanded = started.elapsed();
    let stats = store.stats();
    let came = stats.stored_bytes as f64;
    println!(
        "{} results, {:.1} MiB as they came, {:.1} MiB kept ({:.2}x smaller), {} of them compressed",
        files.len(),
        came / 1048576.0,
        stats.kept_bytes as f64 / 1048576.0,
        came / stats.kept_bytes as f64,
        stats.packed
    );
    println!(
        "store {:.0} MB/s, expand {:.0} MB/s; {same} of {} given back exactly",
        came / 1e6 / stored.as_secs_f64(),
        came / 1e6 / expanded.as_secs_f64(),
        files.len()
    );
}
