//! The JSONL sink: append-only files under `<telemetry dir>/events/`,
//! rotated by size and age, old ones deleted.
//!
//! **Crash safety.** Each record goes to the file as one `write(2)` of the
//! whole line, `"{json}\n"`, on a file opened with `O_APPEND`. Nothing is
//! buffered in the process: once `append` returns, the line is in the
//! kernel's page cache and survives the process being killed. A `kill -9`
//! can therefore only lose records not yet handed to the sink and, if it
//! lands during a write, cut that one line short; earlier lines are never
//! touched again. Every process writes its own files (the name carries the
//! pid), so a cut line is always the last line of its file, and readers
//! skip it. The sink does not `fsync` per line: that would cost a disk
//! round trip per tool result to protect against power loss, which
//! telemetry can afford to lose.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The subdirectory of the telemetry directory that holds events files.
pub const EVENTS_DIR: &str = "events";

/// A file is rotated when it was started this long ago.
pub const ROTATE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// When files are rotated and deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SinkLimits {
    /// A file is rotated before a line would take it past this size (a
    /// single larger line gets a file of its own).
    pub max_file_bytes: u64,
    /// Files last written longer ago than this are deleted by
    /// [`JsonlSink::delete_expired`].
    pub max_age: Duration,
}

impl SinkLimits {
    /// Limits from the config's units.
    pub fn new(max_file_bytes: u64, max_age_days: u32) -> Self {
        Self {
            max_file_bytes,
            max_age: Duration::from_secs(u64::from(max_age_days) * 24 * 60 * 60),
        }
    }
}

/// Appends lines to the current events file; see the module docs.
#[derive(Debug)]
pub struct JsonlSink {
    dir: PathBuf,
    limits: SinkLimits,
    current: Option<OpenFile>,
}

#[derive(Debug)]
struct OpenFile {
    file: File,
    path: PathBuf,
    bytes: u64,
    started: SystemTime,
}

impl JsonlSink {
    /// A sink writing under `<telemetry_dir>/events/`. Does no I/O: the
    /// directory and the first file are created by the first append.
    pub fn new(telemetry_dir: &Path, limits: SinkLimits) -> Self {
        Self {
            dir: telemetry_dir.join(EVENTS_DIR),
            limits,
            current: None,
        }
    }

    /// Checks now that lines can be written: the events directory is
    /// created if missing and a file can be made in it. The error says why
    /// not in words (the directory is a file, cannot be written).
    pub fn check_writable(&self) -> io::Result<()> {
        let dir = self.dir.display();
        if self.dir.exists() && !self.dir.is_dir() {
            return Err(io::Error::other(format!("{dir} is not a directory")));
        }
        create_private_dir(&self.dir)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot create {dir}: {e}")))?;
        // A probe file, since permissions alone do not say (a read-only
        // file system, an ACL, root): removed at once.
        let probe = self.dir.join(format!(".probe-{}", std::process::id()));
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&probe)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot write in {dir}: {e}")))?;
        let _ = std::fs::remove_file(&probe);
        Ok(())
    }

    /// The directory the files go to.
    pub fn events_dir(&self) -> &Path {
        &self.dir
    }

    /// The file the next line goes to, if one is open.
    pub fn current_file(&self) -> Option<&Path> {
        self.current.as_ref().map(|c| c.path.as_path())
    }

    /// Appends one line (which must end with its only `\n`) now.
    pub fn append(&mut self, line: &[u8]) -> io::Result<()> {
        self.append_at(line, SystemTime::now())
    }

    /// Appends one line as if the time were `now` (rotation by age and the
    /// new file's name use it).
    pub fn append_at(&mut self, line: &[u8], now: SystemTime) -> io::Result<()> {
        debug_assert!(line.last() == Some(&b'\n'), "a line ends with a newline");
        let len = line.len() as u64;
        let rotate = self.current.as_ref().is_some_and(|c| {
            let full = c.bytes > 0 && c.bytes + len > self.limits.max_file_bytes;
            let old = now
                .duration_since(c.started)
                .is_ok_and(|age| age >= ROTATE_AFTER);
            full || old
        });
        if rotate {
            self.current = None;
        }
        let current = match &mut self.current {
            Some(current) => current,
            None => self.current.insert(self.open_new(now)?),
        };
        // One write of the whole line (write_all only loops on a short
        // write, which on a regular file means the disk is failing).
        current.file.write_all(line)?;
        current.bytes += len;
        Ok(())
    }

    fn open_new(&self, now: SystemTime) -> io::Result<OpenFile> {
        create_private_dir(&self.dir)?;
        let stem = format!("events-{}-{}", utc_stamp(now), std::process::id());
        for n in 1u32.. {
            let name = if n == 1 {
                format!("{stem}.jsonl")
            } else {
                format!("{stem}-{n}.jsonl")
            };
            let path = self.dir.join(name);
            let mut options = OpenOptions::new();
            options.append(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            match options.open(&path) {
                Ok(file) => {
                    return Ok(OpenFile {
                        file,
                        path,
                        bytes: 0,
                        started: now,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 10_000 => continue,
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns")
    }

    /// Deletes the events files last modified more than `max_age` before
    /// `now` (never the one being written). Returns what was deleted.
    pub fn delete_expired(&self, now: SystemTime) -> io::Result<Vec<PathBuf>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut deleted = Vec::new();
        for entry in entries {
            let entry = entry?;
            let path = entry.path();
            if !is_events_file(&path) || Some(path.as_path()) == self.current_file() {
                continue;
            }
            let modified = entry.metadata()?.modified()?;
            let expired = now
                .duration_since(modified)
                .is_ok_and(|age| age > self.limits.max_age);
            if expired {
                std::fs::remove_file(&path)?;
                deleted.push(path);
            }
        }
        deleted.sort();
        Ok(deleted)
    }
}

/// Whether `path` is named like an events file (`events-*.jsonl`).
pub fn is_events_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("events-") && n.ends_with(".jsonl"))
}

/// Creates `dir` and its missing parents, readable only by the owner.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Unix milliseconds of `time` (0 before the epoch).
pub fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `YYYYMMDD-HHMMSS` in UTC.
fn utc_stamp(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d) = devboy_core::date::civil_from_days((secs / 86_400) as i64);
    let rest = secs % 86_400;
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "devboy-telemetry-sink-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut out: Vec<_> = std::fs::read_dir(dir)
            .map(|r| r.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        out.sort();
        out
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn utc_stamps_name_the_day_and_second() {
        assert_eq!(utc_stamp(at(0)), "19700101-000000");
        // 2024-02-29T23:59:59Z, a leap day.
        assert_eq!(utc_stamp(at(1_709_251_199)), "20240229-235959");
        assert_eq!(utc_stamp(at(1_709_251_200)), "20240301-000000");
    }

    #[test]
    fn files_rotate_by_size_and_a_line_is_never_split() {
        let dir = temp_dir("size");
        let mut sink = JsonlSink::new(&dir, SinkLimits::new(100, 30));
        let line = format!("{}\n", "x".repeat(39)); // 40 bytes
        for _ in 0..5 {
            sink.append_at(line.as_bytes(), at(1_000)).unwrap();
        }
        let big = format!("{}\n", "y".repeat(299));
        sink.append_at(big.as_bytes(), at(1_000)).unwrap();
        sink.append_at(line.as_bytes(), at(1_000)).unwrap();
        let written = files(&sink.dir);
        let sizes: Vec<u64> = written
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .collect();
        // 2 + 2 + 1 small lines, then the big line alone, then one more.
        assert_eq!(sizes.len(), 5, "{written:?}");
        let mut sorted = sizes.clone();
        sorted.sort();
        assert_eq!(sorted, [40, 40, 80, 80, 300]);
        let stem = format!("events-19700101-001640-{}", std::process::id());
        assert!(
            written[0]
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with(&stem),
            "{written:?}"
        );
        for path in &written {
            let text = std::fs::read_to_string(path).unwrap();
            assert!(text
                .lines()
                .all(|l| l == line.trim_end() || l == big.trim_end()));
            assert!(text.ends_with('\n'));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&written[0]).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let mode = std::fs::metadata(&sink.dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_started_a_day_ago_is_rotated() {
        let dir = temp_dir("age");
        let mut sink = JsonlSink::new(&dir, SinkLimits::new(1 << 20, 30));
        let start = 1_700_000_000;
        sink.append_at(b"1\n", at(start)).unwrap();
        let first = sink.current_file().unwrap().to_owned();
        sink.append_at(b"2\n", at(start + 86_399)).unwrap();
        assert_eq!(sink.current_file(), Some(first.as_path()));
        sink.append_at(b"3\n", at(start + 86_400)).unwrap();
        assert_ne!(sink.current_file(), Some(first.as_path()));
        assert_eq!(std::fs::read_to_string(&first).unwrap(), "1\n2\n");
        assert_eq!(
            std::fs::read_to_string(sink.current_file().unwrap()).unwrap(),
            "3\n"
        );
        // A clock that goes back does not rotate.
        sink.append_at(b"4\n", at(start)).unwrap();
        assert_eq!(files(&sink.dir).len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn files_older_than_max_age_are_deleted_and_nothing_else() {
        let dir = temp_dir("expire");
        let events = dir.join(EVENTS_DIR);
        std::fs::create_dir_all(&events).unwrap();
        let now = SystemTime::now();
        let day = Duration::from_secs(86_400);
        let make = |name: &str, age_days: u32| {
            let path = events.join(name);
            let file = File::create(&path).unwrap();
            file.set_modified(now - day * age_days).unwrap();
            path
        };
        let old = make("events-20000101-000000-1.jsonl", 31);
        let older = make("events-20000101-000000-2-2.jsonl", 400);
        let recent = make("events-20000101-000000-3.jsonl", 29);
        let not_ours = make("notes.txt", 400);
        let sink = JsonlSink::new(&dir, SinkLimits::new(1 << 20, 30));
        let deleted = sink.delete_expired(now).unwrap();
        assert_eq!(deleted, {
            let mut v = vec![old.clone(), older.clone()];
            v.sort();
            v
        });
        assert!(!old.exists() && !older.exists());
        assert!(recent.exists() && not_ours.exists());
        // Missing directory: nothing to do.
        let empty = JsonlSink::new(&dir.join("none"), SinkLimits::new(1 << 20, 30));
        assert_eq!(empty.delete_expired(now).unwrap(), Vec::<PathBuf>::new());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn an_unwritable_directory_is_an_error_not_a_panic() {
        let mut sink = JsonlSink::new(Path::new("/proc/devboy-no-such"), SinkLimits::new(1024, 1));
        assert!(sink.append(b"x\n").is_err());
    }
}
