//! `endpoint-names.json` keeps every name when several devboy processes
//! save it at once (users run several Claude Code sessions side by side).
//!
//! Real processes, not threads: this test binary runs itself again as the
//! writers (`writer_process`, which does nothing unless `WRITER_ENV` is
//! set), so each writer has its own pid, file handles and timing, as
//! separate devboy processes do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use devboy_telemetry::{EndpointNames, Hash64};

/// Set in a writer: `<names file>|<writer index>|<start at, unix ms>`.
const WRITER_ENV: &str = "DEVBOY_TEST_NAMES_WRITER";
const WRITERS: u64 = 8;
const NAMES_PER_WRITER: u64 = 6;
const ROUNDS: usize = 10;

fn name_of(writer: u64, i: u64) -> (Hash64, String) {
    (Hash64(writer << 32 | i), format!("w{writer}__tool_{i}"))
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One writer: like the telemetry writer thread, it keeps one map for its
/// life and saves after every new name.
#[test]
fn writer_process() {
    let Ok(spec) = std::env::var(WRITER_ENV) else {
        return;
    };
    let mut parts = spec.split('|');
    let path = PathBuf::from(parts.next().unwrap());
    let writer: u64 = parts.next().unwrap().parse().unwrap();
    let start_at: u64 = parts.next().unwrap().parse().unwrap();
    // Start together, so that the saves overlap.
    while unix_ms() < start_at {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut names = EndpointNames::load(&path);
    for i in 0..NAMES_PER_WRITER {
        let (hash, name) = name_of(writer, i);
        names.insert(hash, &name);
        names.save().unwrap();
    }
}

fn spawn_writer(path: &Path, writer: u64, start_at: u64) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["writer_process", "--exact", "--test-threads=1", "--quiet"])
        .env(
            WRITER_ENV,
            format!("{}|{writer}|{start_at}", path.display()),
        )
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn concurrent_processes_lose_no_names() {
    if std::env::var_os(WRITER_ENV).is_some() {
        return;
    }
    let base = std::env::temp_dir().join(format!(
        "devboy-concurrent-names-{}-{}",
        std::process::id(),
        unix_ms()
    ));
    let mut lossy_rounds = Vec::new();
    for round in 0..ROUNDS {
        let path = base
            .join(format!("round-{round}"))
            .join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME);
        // Enough head start for every writer to be up and waiting.
        let start_at = unix_ms() + 300;
        let children: Vec<Child> = (0..WRITERS)
            .map(|w| spawn_writer(&path, w, start_at))
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success(), "a writer failed");
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let map: BTreeMap<String, String> = serde_json::from_str(&text).unwrap();
        let missing: Vec<String> = (0..WRITERS)
            .flat_map(|w| (0..NAMES_PER_WRITER).map(move |i| name_of(w, i)))
            .filter(|(hash, name)| map.get(&hash.to_string()) != Some(name))
            .map(|(_, name)| name)
            .collect();
        if !missing.is_empty() {
            lossy_rounds.push(format!("round {round}: lost {missing:?}"));
        }
        // Nothing but the map is left behind: no temporary or lock files.
        let dir = path.parent().unwrap();
        let left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
    let _ = std::fs::remove_dir_all(&base);
    assert!(
        lossy_rounds.is_empty(),
        "{} of {ROUNDS} rounds of {WRITERS} concurrent writers lost names:\n{}",
        lossy_rounds.len(),
        lossy_rounds.join("\n")
    );
}
