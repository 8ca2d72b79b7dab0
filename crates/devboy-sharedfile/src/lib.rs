//! Small files that several devboy processes rewrite at once: the
//! context-partition state files (every proxy and hook of a project) and
//! the endpoint names map (every session of a user).
//!
//! A read-modify-write of such a file is two steps, and each is here once:
//!
//! - [`FileLock`] serialises the writers. It is a lock file beside the
//!   shared one, created with `create_new` (`O_EXCL`) and removed when
//!   dropped; std only and valid on any file system. A lock must never
//!   hang devboy, so waiting is bounded ([`LOCK_WAIT`]) and a lock file
//!   older than [`STALE_LOCK`] is taken to belong to a writer that died
//!   and is taken over. When the wait runs out the caller gets a lock that
//!   is not held and decides; writing anyway risks one lost update, which
//!   both of today's files tolerate, where hanging would not be.
//! - [`replace`] writes the new contents to a temporary file beside the
//!   target, syncs it and renames it over the target, so a reader (who
//!   takes no lock) sees the old file or the new one, never half of one.
//!   It is devboy's one atomic file write: every file devboy rewrites
//!   whole (config, caches, summaries) goes through it.
//!
//! Why not `flock`: `File::lock` is newer than the workspace's minimum
//! Rust, and a lock file needs no extra crate. The price is the stale-lock
//! rule: a writer that holds the lock longer than [`STALE_LOCK`] can lose
//! it. The lock is held for one read and one small write, milliseconds.

#![deny(missing_docs)]

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long [`FileLock::acquire`] waits for another writer.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);
/// A lock file older than this belongs to a writer that died.
pub const STALE_LOCK: Duration = Duration::from_secs(10);
/// Pause between attempts while another writer holds the lock.
const RETRY: Duration = Duration::from_millis(2);

/// The lock of one shared file, released when dropped.
#[derive(Debug)]
#[must_use = "the lock is released as soon as it is dropped"]
pub struct FileLock {
    path: PathBuf,
    held: bool,
}

impl FileLock {
    /// Takes the lock of `file`, waiting at most [`LOCK_WAIT`] and taking
    /// over a lock older than [`STALE_LOCK`]. Never fails: see
    /// [`is_held`](Self::is_held).
    pub fn acquire(file: &Path) -> Self {
        Self::acquire_within(file, LOCK_WAIT, STALE_LOCK)
    }

    /// [`acquire`](Self::acquire) with other limits.
    pub fn acquire_within(file: &Path, wait: Duration, stale: Duration) -> Self {
        let path = lock_path(file);
        let deadline = Instant::now() + wait;
        loop {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut lock) => {
                    // The holder's pid, for a person wondering who has it.
                    let _ = writeln!(lock, "{}", std::process::id());
                    return Self { path, held: true };
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if is_stale(&path, stale) {
                        // Check and removal are back to back: two waiters
                        // both taking over would have to interleave there.
                        let _ = fs::remove_file(&path);
                        continue;
                    }
                }
                // No directory, no permission: waiting will not help.
                Err(_) => return Self { path, held: false },
            }
            if Instant::now() >= deadline {
                return Self { path, held: false };
            }
            std::thread::sleep(RETRY);
        }
    }

    /// Whether this process holds the lock. False when the wait ran out or
    /// the lock file could not be created.
    pub fn is_held(&self) -> bool {
        self.held
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        if self.held {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The lock file of `file`: the same name with the extension `lock`.
pub fn lock_path(file: &Path) -> PathBuf {
    file.with_extension("lock")
}

fn is_stale(lock: &Path, stale: Duration) -> bool {
    fs::metadata(lock)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > stale)
}

/// Replaces `file` with `contents` whole: a temporary file beside it,
/// synced, then renamed over it, and the directory synced so that the
/// rename survives a crash (on Unix; best effort). A new file is readable
/// by the owner only (devboy's own state: the salt, partitions, kept
/// listings); a replaced one keeps its permissions. Files people share
/// go through [`replace_shared`]. The temporary
/// file is removed if anything fails.
pub fn replace(file: &Path, contents: &[u8]) -> io::Result<()> {
    replace_with(file, contents, Some(0o600))
}

/// [`replace`] for a file people share and read (a project's
/// `.mcp.json`, `.claude/settings.json`, `pipeline_config.toml`): a new
/// file gets the mode any program's new file gets (the umask decides,
/// 0644 usually); a replaced one keeps its permissions.
pub fn replace_shared(file: &Path, contents: &[u8]) -> io::Result<()> {
    replace_with(file, contents, None)
}

fn replace_with(file: &Path, contents: &[u8], new_mode: Option<u32>) -> io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut name = file
        .file_name()
        .map(OsString::from)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    // Unique per process and per call: threads of one process may write.
    name.push(format!(
        ".{}-{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = file.with_file_name(name);
    let written = (|| {
        let mut out = new_file(&temp, new_mode)?;
        if let Ok(meta) = fs::metadata(file) {
            out.set_permissions(meta.permissions())?;
        }
        out.write_all(contents)?;
        out.sync_all()?;
        fs::rename(&temp, file)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written?;
    sync_parent(file);
    Ok(())
}

/// Syncs the directory holding `file`, so that a rename in it is durable.
/// Best effort: the new contents are already in place for every reader.
fn sync_parent(file: &Path) {
    #[cfg(unix)]
    if let Some(dir) = file.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(dir) = File::open(dir) {
            let _ = dir.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = file;
}

fn new_file(path: &Path, mode: Option<u32>) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if let Some(mode) = mode {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn temp_dir(tag: &str) -> PathBuf {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "devboy-sharedfile-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names_in(dir: &Path) -> Vec<OsString> {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_held_lock_excludes_others_for_a_bounded_wait() {
        let dir = temp_dir("exclude");
        let file = dir.join("state.json");
        let first = FileLock::acquire(&file);
        assert!(first.is_held());
        assert_eq!(first.path(), dir.join("state.lock"));
        let started = Instant::now();
        let second = FileLock::acquire_within(&file, Duration::from_millis(100), STALE_LOCK);
        assert!(!second.is_held(), "the lock is taken");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < LOCK_WAIT, "the wait is bounded: {waited:?}");
        drop(second);
        assert!(first.path().exists(), "an unheld lock removes nothing");
        drop(first);
        assert!(names_in(&dir).is_empty(), "released on drop");
        assert!(FileLock::acquire(&file).is_held());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_stale_lock_is_taken_over_at_once() {
        let dir = temp_dir("stale");
        let file = dir.join("state.json");
        let old = File::create(lock_path(&file)).unwrap();
        old.set_modified(SystemTime::now() - 2 * STALE_LOCK)
            .unwrap();
        drop(old);
        let started = Instant::now();
        let lock = FileLock::acquire(&file);
        assert!(lock.is_held());
        assert!(started.elapsed() < LOCK_WAIT / 2, "{:?}", started.elapsed());
        drop(lock);
        assert!(names_in(&dir).is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_gives_an_unheld_lock_without_waiting() {
        let dir = temp_dir("missing");
        let started = Instant::now();
        let lock = FileLock::acquire(&dir.join("absent").join("state.json"));
        assert!(!lock.is_held());
        assert!(started.elapsed() < LOCK_WAIT / 2);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn replace_writes_whole_and_leaves_nothing_else() {
        let dir = temp_dir("replace");
        let file = dir.join("names.json");
        replace(&file, b"{\"a\": 1}\n").unwrap();
        replace(&file, b"{}\n").unwrap();
        assert_eq!(fs::read(&file).unwrap(), b"{}\n");
        assert_eq!(names_in(&dir), [OsString::from("names.json")]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // A replaced file keeps the permissions it had.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
            replace(&file, b"[]\n").unwrap();
            let mode = fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o644);
            assert_eq!(fs::read(&file).unwrap(), b"[]\n");
        }
        // A shared file is created as any new file is (the umask decides;
        // never owner-only under the usual 022), and kept as it was.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let shared = dir.join("settings.json");
            replace_shared(&shared, b"{}\n").unwrap();
            let made = fs::metadata(&shared).unwrap().permissions().mode() & 0o777;
            let probe = dir.join("probe");
            fs::write(&probe, b"").unwrap();
            let default = fs::metadata(&probe).unwrap().permissions().mode() & 0o777;
            fs::remove_file(&probe).unwrap();
            assert_eq!(made, default, "a new shared file has the default mode");
            fs::set_permissions(&shared, fs::Permissions::from_mode(0o640)).unwrap();
            replace_shared(&shared, b"[]\n").unwrap();
            assert_eq!(
                fs::metadata(&shared).unwrap().permissions().mode() & 0o777,
                0o640
            );
            fs::remove_file(&shared).unwrap();
        }
        // A failed write leaves no temporary file behind.
        assert!(replace(&dir.join("absent").join("x.json"), b"x").is_err());
        assert_eq!(names_in(&dir), [OsString::from("names.json")]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn locked_read_modify_write_loses_no_update() {
        let dir = temp_dir("counter");
        let file = dir.join("count");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let file = file.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        let lock = FileLock::acquire(&file);
                        assert!(lock.is_held());
                        let n: u64 = fs::read_to_string(&file)
                            .ok()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(0);
                        replace(&file, (n + 1).to_string().as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(fs::read_to_string(&file).unwrap(), "200");
        fs::remove_dir_all(&dir).unwrap();
    }
}
