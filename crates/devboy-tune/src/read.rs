//! Reading telemetry files into one [`EventTable`].
//!
//! Files are read in parallel (one worker per core, each taking whole
//! files), each into its own partial table, and the partials are joined in
//! file-name order. Events of one devboy process go to its own files
//! (`events-YYYYMMDD-HHMMSS-PID.jsonl`, rotated by size and age), so name
//! order plus line order is each session's recorded order, which the
//! sequence analyses rely on.
//!
//! Nothing in a file's content can make the read fail: a line that is not
//! a result or session of schema version 1 is counted (malformed,
//! unsupported version, other kind) and skipped. A file that cannot be
//! opened is reported and skipped.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use crate::event::{parse_line, Parsed, Record, SessionSummary, Skip, Vocabulary};
use crate::progress::Progress;

/// What to read.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// A directory of `*.jsonl` files, or one file.
    pub input: PathBuf,
    /// Events before this Unix millisecond are skipped (0: none).
    pub since_ms: u64,
    /// Draw a progress bar on stderr for large inputs.
    pub progress: bool,
}

/// Counts of what was read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadStats {
    /// Files read.
    pub files: usize,
    /// Files not opened because their last write is before the window.
    pub files_old: usize,
    /// Files that could not be read, with why.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Bytes read.
    pub bytes: u64,
    /// Non-blank lines.
    pub lines: u64,
    /// Result events taken.
    pub results: u64,
    /// Session summaries taken.
    pub sessions: u64,
    /// Lines that are not JSON or lack a required field.
    pub malformed: u64,
    /// Lines of a newer schema version.
    pub unsupported: u64,
    /// Lines of a kind the tuner does not use.
    pub other_kinds: u64,
    /// Events before the window.
    pub old: u64,
}

impl ReadStats {
    fn absorb(&mut self, other: &ReadStats) {
        self.files += other.files;
        self.files_old += other.files_old;
        self.unreadable.extend(other.unreadable.iter().cloned());
        self.bytes += other.bytes;
        self.lines += other.lines;
        self.results += other.results;
        self.sessions += other.sessions;
        self.malformed += other.malformed;
        self.unsupported += other.unsupported;
        self.other_kinds += other.other_kinds;
        self.old += other.old;
    }
}

/// Every result event in the window, in recorded order per session, with
/// the session summaries.
#[derive(Clone, Debug, Default)]
pub struct EventTable {
    /// Result events.
    pub records: Vec<Record>,
    /// The names records index into.
    pub vocab: Vocabulary,
    /// Session summaries by session hash.
    pub sessions: HashMap<u64, SessionSummary>,
    /// Identifiers that were not 16 hex digits, as written.
    pub odd_ids: Vec<(u64, String)>,
    /// What was read and skipped.
    pub stats: ReadStats,
}

/// The `*.jsonl` files of `input` (or `input` itself), sorted by name. A
/// directory without any that has an `events/` directory is the telemetry
/// directory given for its events folder, and is read as that.
pub fn event_files(input: &Path) -> std::io::Result<Vec<PathBuf>> {
    if input.is_file() {
        return Ok(vec![input.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(input)? {
        let path = entry?.path();
        if path.is_file() && path.extension().is_some_and(|e| e == "jsonl") {
            files.push(path);
        }
    }
    let events = input.join("events");
    if files.is_empty() && events.is_dir() {
        return event_files(&events);
    }
    files.sort();
    Ok(files)
}

/// Reads every event file of `options.input`. A missing directory is an
/// empty table (no telemetry yet), not an error.
pub fn read_events(options: &ReadOptions) -> std::io::Result<EventTable> {
    let files = match event_files(&options.input) {
        Ok(files) => files,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut table = EventTable::default();
    // A file last written before the window holds no event inside it.
    let mut chosen = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for file in files {
        let meta = std::fs::metadata(&file);
        let modified_ms = meta
            .as_ref()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64);
        if modified_ms.is_some_and(|m| m < options.since_ms) {
            table.stats.files_old += 1;
            continue;
        }
        total += meta.map(|m| m.len()).unwrap_or(0);
        chosen.push(file);
    }
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(chosen.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let mut partials: Vec<(usize, Partial)> =
        Progress::run("reading telemetry", total, options.progress, |progress| {
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..workers)
                    .map(|_| {
                        scope.spawn(|| {
                            let mut out = Vec::new();
                            loop {
                                let i = next.fetch_add(1, Ordering::Relaxed);
                                let Some(file) = chosen.get(i) else {
                                    break;
                                };
                                out.push((i, read_file(file, options.since_ms, progress)));
                            }
                            out
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap_or_default())
                    .collect()
            })
        });
    partials.sort_by_key(|(i, _)| *i);
    table
        .records
        .reserve(partials.iter().map(|(_, p)| p.records.len()).sum());
    for (_, partial) in partials {
        table.absorb(partial);
    }
    Ok(table)
}

/// One file's events, with its own name tables.
#[derive(Default)]
struct Partial {
    records: Vec<Record>,
    vocab: Vocabulary,
    sessions: Vec<(u64, SessionSummary)>,
    odd_ids: Vec<(u64, String)>,
    stats: ReadStats,
}

fn read_file(path: &Path, since_ms: u64, progress: &Progress) -> Partial {
    let mut partial = Partial::default();
    if let Err(e) = read_into(path, since_ms, progress, &mut partial) {
        partial
            .stats
            .unreadable
            .push((path.to_path_buf(), e.to_string()));
    } else {
        partial.stats.files = 1;
    }
    partial
}

fn read_into(
    path: &Path,
    since_ms: u64,
    progress: &Progress,
    partial: &mut Partial,
) -> std::io::Result<()> {
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path)?);
    let mut buf = Vec::with_capacity(4096);
    let mut unreported = 0u64;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        partial.stats.bytes += n as u64;
        unreported += n as u64;
        if unreported >= 1 << 20 {
            progress.add(unreported);
            unreported = 0;
        }
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        partial.stats.lines += 1;
        match parse_line(line, since_ms, &mut partial.vocab, &mut partial.odd_ids) {
            Ok(Parsed::Result(record)) => {
                partial.stats.results += 1;
                partial.records.push(record);
            }
            Ok(Parsed::Session(id, summary)) => {
                partial.stats.sessions += 1;
                partial.sessions.push((id, summary));
            }
            Err(Skip::Malformed) => partial.stats.malformed += 1,
            Err(Skip::Unsupported) => partial.stats.unsupported += 1,
            Err(Skip::OtherKind) => partial.stats.other_kinds += 1,
            Err(Skip::Old) => partial.stats.old += 1,
        }
    }
    progress.add(unreported);
    Ok(())
}

impl EventTable {
    /// Appends a partial, mapping its name indexes into this table's.
    fn absorb(&mut self, partial: Partial) {
        let v = &mut self.vocab;
        let shapes = v.shapes.absorb(&partial.vocab.shapes);
        let formats = v.formats.absorb(&partial.vocab.formats);
        let templates = v.templates.absorb(&partial.vocab.templates);
        let classes = v.classes.absorb(&partial.vocab.classes);
        let inner = v.inner.absorb(&partial.vocab.inner);
        v.tokenizers.absorb(&partial.vocab.tokenizers);
        let map = |m: &[u8], i: u8| m.get(usize::from(i)).copied().unwrap_or(i);
        for mut r in partial.records {
            r.shape = map(&shapes, r.shape);
            r.format = map(&formats, r.format);
            r.template = map(&templates, r.template);
            r.class = map(&classes, r.class);
            let mut bits = 0u32;
            let mut old = r.inner;
            while old != 0 {
                let bit = old.trailing_zeros() as usize;
                old &= old - 1;
                if let Some(&to) = inner.get(bit) {
                    if to < 32 {
                        bits |= 1 << to;
                    }
                }
            }
            r.inner = bits;
            self.records.push(r);
        }
        self.sessions.extend(partial.sessions);
        for (k, s) in partial.odd_ids {
            if !self.odd_ids.iter().any(|(o, _)| *o == k) {
                self.odd_ids.push((k, s));
            }
        }
        self.stats.absorb(&partial.stats);
    }

    /// The window start for "the last `days` days" before `now_ms`.
    pub fn since(now_ms: u64, days: u32) -> u64 {
        now_ms.saturating_sub(Duration::from_secs(u64::from(days) * 86_400).as_millis() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(session: &str, tool: &str, ts: u64, shape: &str) -> String {
        format!(
            r#"{{"v":1,"kind":"result","ts_ms":{ts},"session":"{session}","tool":"{tool}","response_chars":100,"shape":"{shape}","inner_formats":["{shape}_inner"],"fingerprint":"01","dedup":"miss","tokens_baseline":10,"tokens_final":10}}"#
        )
    }

    #[test]
    fn the_telemetry_directory_is_read_as_its_events_folder() {
        let dir = std::env::temp_dir().join(format!("devboy-tune-events-{}", std::process::id()));
        let events = dir.join("events");
        std::fs::create_dir_all(&events).unwrap();
        std::fs::write(events.join("a.jsonl"), "").unwrap();
        std::fs::write(dir.join("tune-summary.json"), "{}").unwrap();
        let files = event_files(&dir).unwrap();
        assert_eq!(files, vec![events.join("a.jsonl")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reads_files_in_order_and_skips_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let a = [
            result("000000000000000a", "000000000000000b", 1000, "prose"),
            "garbage".to_owned(),
            String::new(),
            "{\"kind\":\"result\"}".to_owned(),
            r#"{"v":7,"kind":"result"}"#.to_owned(),
            r#"{"v":1,"kind":"hello","ts_ms":1,"session":"x"}"#.to_owned(),
            result("000000000000000a", "000000000000000b", 10, "prose"),
        ]
        .join("\n");
        std::fs::write(dir.path().join("events-1.jsonl"), a).unwrap();
        // Truncated last line, as after kill -9.
        let b = format!(
            "{}\n{}",
            result(
                "000000000000000a",
                "000000000000000c",
                2000,
                "markdown_table"
            ),
            &result("000000000000000a", "000000000000000c", 3000, "x")[..40]
        );
        std::fs::write(dir.path().join("events-2.jsonl"), b).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let table = read_events(&ReadOptions {
            input: dir.path().to_path_buf(),
            since_ms: 100,
            progress: false,
        })
        .unwrap();
        let s = &table.stats;
        assert_eq!(s.files, 2);
        assert_eq!(s.results, 2);
        assert_eq!(s.malformed, 3, "{s:?}");
        assert_eq!(s.unsupported, 1);
        assert_eq!(s.other_kinds, 1);
        assert_eq!(s.old, 1);
        assert_eq!(table.records[0].ts_ms, 1000);
        assert_eq!(table.records[1].ts_ms, 2000);
        // Names were remapped into one vocabulary.
        let v = &table.vocab;
        assert_eq!(v.shapes.get(table.records[0].shape), Some("prose"));
        assert_eq!(v.shapes.get(table.records[1].shape), Some("markdown_table"));
        let bit = v.inner.find("markdown_table_inner").unwrap();
        assert_eq!(table.records[1].inner, 1 << bit);
    }

    #[test]
    fn missing_dir_is_empty() {
        let table = read_events(&ReadOptions {
            input: PathBuf::from("/nonexistent/devboy/telemetry"),
            since_ms: 0,
            progress: false,
        })
        .unwrap();
        assert!(table.records.is_empty());
    }
}
