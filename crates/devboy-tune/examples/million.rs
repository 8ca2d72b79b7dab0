//! Times `devboy tune analyze` on a million generated events.
//!
//! ```text
//! cargo run --release -p devboy-tune --features synthetic --example million [EVENTS] [--keep DIR]
//! ```
//!
//! Writes EVENTS (default 1,000,000) synthetic result events of a typical
//! workload ([`Workload::typical`]) into a temporary directory, one file per
//! session (200 sessions), then runs the whole analysis (read, aggregate,
//! rules, simulations) as a dry run and prints the report and the timings.
//! With `--keep DIR` the events go to `DIR/telemetry/events` and the names
//! to `DIR/config/endpoint-names.json` and stay there, for timing the
//! binary: `DEVBOY_CONFIG_DIR=DIR/config DEVBOY_TELEMETRY_DIR=DIR/telemetry
//! devboy tune analyze --dry-run`.

use std::time::Instant;

use devboy_tune::synthetic::Workload;
use devboy_tune::{analyze, now_ms, AnalyzeOptions};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let events: usize = args
        .iter()
        .find_map(|a| a.replace('_', "").parse().ok())
        .unwrap_or(1_000_000);
    let keep = args
        .iter()
        .position(|a| a == "--keep")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let sessions = 200.min(events.max(1));
    let temp = tempfile::tempdir().expect("temporary directory");
    let root = keep.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let events_dir = root.join("telemetry").join("events");
    let config_dir = root.join("config");
    std::fs::create_dir_all(&config_dir).expect("config dir");
    let now = now_ms();
    let workload = Workload::typical(sessions, events / sessions, now - 20 * 86_400_000);
    let t = Instant::now();
    let written = workload.write(&events_dir).expect("write events");
    let generated = t.elapsed();
    let names = config_dir.join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME);
    std::fs::write(&names, workload.names_json()).expect("write names");
    let bytes: u64 = std::fs::read_dir(&events_dir)
        .expect("events dir")
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let options = AnalyzeOptions {
        input: events_dir,
        days: 30,
        output: config_dir.join("pipeline_config.toml"),
        names_file: names,
        summary_file: None,
        dry_run: true,
        now_ms: now,
        shared: Default::default(),
        project_config: None,
    };
    let t = Instant::now();
    let report = analyze::run(&options).expect("analyze");
    let analyzed = t.elapsed();
    println!("{report}");
    println!(
        "generated {written} events ({:.1} MB in {sessions} files) in {:.2} s",
        bytes as f64 / 1e6,
        generated.as_secs_f64()
    );
    println!(
        "tune analyze (read, aggregate, rules, simulations): {:.2} s for {written} events ({:.0} events/s)",
        analyzed.as_secs_f64(),
        written as f64 / analyzed.as_secs_f64()
    );
}
