//! Whether the files a prefetch read are still what they were when it was
//! sent (invariant 14, "fresh or nothing").
//!
//! Claude Code's own Edit and Write tools, editors, formatters and `git
//! checkout` change files without a call devboy could see. So before a
//! landed prefetch answers the agent, the files its call names are looked
//! at again: the same size, modification time, change time, inode and
//! device as when the prefetch was sent, or the prefetch is dropped and
//! the call goes to the server.
//!
//! Modification times are coarse (a clock tick on Linux, whole seconds on
//! some file systems), so a file written twice within one tick, the second
//! time after the prefetch was sent and to the same size, would look
//! unchanged. Such a file is *racy* (git's word for the same problem in
//! its index): its modification time is so close to the moment the
//! prefetch was sent that a later write could share it. A racy file never
//! counts as fresh. How close is close depends on the file system's
//! resolution, guessed from the time itself: one with a fraction of a
//! second has fine timestamps (100 ms of margin); a whole second, coarse
//! ones (2 s).
//!
//! A path names one file or directory. For a directory that is its own
//! entry (a file added or removed changes it), not what its files hold: a
//! read of a whole tree (a repository's diff) is kept fresh by the writes
//! devboy routes and the `PostToolUse` hook, not by this check.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The margin for file systems with sub-second timestamps.
const FINE_MARGIN: Duration = Duration::from_millis(100);
/// The margin for file systems that keep whole seconds.
const COARSE_MARGIN: Duration = Duration::from_secs(2);

/// What a file looked like.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    changed: (i64, i64),
    #[cfg(unix)]
    inode: (u64, u64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Some(Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            changed: (meta.ctime(), meta.ctime_nsec()),
            #[cfg(unix)]
            inode: (meta.dev(), meta.ino()),
        })
    }

    /// Whether a write after `at` could leave this stamp unchanged.
    fn racy(&self, at: SystemTime) -> bool {
        let Some(modified) = self.modified else {
            return true;
        };
        let fine = modified
            .duration_since(SystemTime::UNIX_EPOCH)
            .is_ok_and(|d| d.subsec_nanos() != 0);
        let margin = if fine { FINE_MARGIN } else { COARSE_MARGIN };
        at.checked_sub(margin).is_none_or(|edge| modified >= edge)
    }
}

/// The files a prefetch's call names, as they were when it was sent.
#[derive(Debug, Clone)]
pub(super) struct Snapshot {
    taken: SystemTime,
    files: Vec<(PathBuf, Option<Stamp>)>,
}

impl Snapshot {
    /// Looks at `paths` (relative ones from `base`, the directory the
    /// server runs in) now. Call it before the prefetch is sent.
    pub(super) fn take(paths: &[String], base: &Path) -> Self {
        let taken = SystemTime::now();
        let files = paths
            .iter()
            .map(|path| {
                let path = base.join(path);
                let stamp = Stamp::of(&path);
                (path, stamp)
            })
            .collect();
        Self { taken, files }
    }

    /// Whether every file is as it was, and none was racy when the
    /// snapshot was taken. A file that did not exist must still not. No
    /// files: fresh (a call that reads no local path).
    pub(super) fn fresh(&self) -> bool {
        self.files.iter().all(|(path, then)| {
            then.as_ref().is_none_or(|stamp| !stamp.racy(self.taken)) && Stamp::of(path) == *then
        })
    }

    /// The files named, resolved as looked at.
    pub(super) fn paths(&self) -> Vec<&Path> {
        self.files.iter().map(|(p, _)| p.as_path()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("devboy-fresh-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A file written `age` ago, as far as its modification time says.
    fn aged(path: &Path, text: &str, age: Duration) {
        std::fs::write(path, text).unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
    }

    #[test]
    fn an_untouched_old_file_is_fresh_and_any_write_is_not() {
        let d = dir("write");
        let file = d.join("a.txt");
        aged(&file, "hello", Duration::from_secs(3600));
        let snapshot = Snapshot::take(&["a.txt".to_owned()], &d);
        assert_eq!(snapshot.paths(), [file.as_path()]);
        assert!(snapshot.fresh());
        // Same size, same content even: written is written.
        std::fs::write(&file, "hello").unwrap();
        assert!(!snapshot.fresh());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn replaced_removed_and_created_files_are_not_fresh() {
        let d = dir("replace");
        let (a, b) = (d.join("a"), d.join("b"));
        aged(&a, "one", Duration::from_secs(3600));
        let snapshot = Snapshot::take(&[a.display().to_string()], Path::new("/"));
        // Renamed over (an editor's save): another inode.
        aged(&b, "two", Duration::from_secs(3600));
        std::fs::rename(&b, &a).unwrap();
        assert!(!snapshot.fresh());

        let snapshot = Snapshot::take(&[a.display().to_string()], Path::new("/"));
        std::fs::remove_file(&a).unwrap();
        assert!(!snapshot.fresh(), "removed");

        let snapshot = Snapshot::take(&[a.display().to_string()], Path::new("/"));
        assert!(snapshot.fresh(), "absent and still absent");
        aged(&a, "three", Duration::from_secs(3600));
        assert!(!snapshot.fresh(), "created");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_written_just_now_is_racy() {
        let d = dir("racy");
        let file = d.join("a");
        std::fs::write(&file, "x").unwrap();
        let snapshot = Snapshot::take(&["a".to_owned()], &d);
        assert!(!snapshot.fresh(), "written within the margin");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_call_without_paths_is_fresh() {
        assert!(Snapshot::take(&[], Path::new("/")).fresh());
    }
}
