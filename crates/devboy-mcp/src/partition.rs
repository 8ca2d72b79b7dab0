//! Context partitions: knowing when the model's context was compacted or
//! cleared, so that nothing devboy sends later refers to a result the model
//! no longer has (invariant 3 in docs/invariants.md).
//!
//! A session's `context_partition` is a counter that starts at 0 and goes
//! up by one whenever the context is known to have been replaced. Two
//! things advance it:
//!
//! - the `devboy_compact` built-in tool ([`PartitionWatcher::advance`]);
//! - the Claude Code hooks (`PreCompact`, `SessionStart` with source
//!   `compact` or `clear`), which run `devboy hook signal` in a separate
//!   process. That command bumps the `epoch` in a small state file keyed by
//!   the project directory ([`signal`]); every devboy serving that project
//!   (Claude Code starts MCP servers in the project directory) polls the
//!   file and advances its partition when the epoch changes.
//!
//! The file is `<runtime dir>/partitions/<hash of the canonical project
//! dir>.json` ([`devboy_core::paths::partition_file`]). Writers serialise
//! their read-modify-write with [`devboy_sharedfile::FileLock`] and replace
//! the file whole ([`devboy_sharedfile::replace`]), so a reader sees the
//! old or the new state, never half of one. A hook must never hang, so a
//! writer that cannot get the lock within
//! [`LOCK_WAIT`](devboy_sharedfile::LOCK_WAIT) writes anyway.
//! Watchers treat any *change* of the epoch as a signal (not only growth),
//! so even a lost update or a reset file advances the partition: advancing
//! too often only costs savings, advancing too rarely would break the
//! invariant. The epoch found at startup is the baseline, so compactions
//! from before this process do not count.
//!
//! The same file carries the model id the last `SessionStart` hook of the
//! project reported ([`record_model`]); a watcher takes it at startup (the
//! hook and the MCP server start at about the same time) and on every
//! change, for the session's llm profile. Recording a model leaves the
//! epoch as it is.
//!
//! And it carries the files Claude Code's own tools wrote last
//! ([`record_writes`], from `PostToolUse`), numbered: a watcher queues
//! those numbered past the last it saw, and the session forgets what it
//! holds about them (delivered results, prefetched ones) before its next
//! call ([`PartitionWatcher::take_written`]). Only the last
//! [`WRITES_KEPT`] are kept; a watcher that fell further behind forgets
//! everything it holds of any path, as if all had been written.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use devboy_sharedfile::FileLock;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// How often a watcher reads the state file.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// The contents of a partition state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// Bumped by every signal.
    pub epoch: u64,
    /// The last signal, e.g. `PreCompact:auto` or `SessionStart:clear`.
    pub event: String,
    /// The Claude Code session that sent it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The canonical project directory the file belongs to.
    pub project: String,
    /// The model id the last `SessionStart` hook reported, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// When it was written, in milliseconds since the Unix epoch.
    pub updated_at_ms: u64,
    /// The files Claude Code's tools wrote last, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub written: Vec<WrittenFile>,
}

/// One file a `PostToolUse` hook reported written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenFile {
    /// Its number: one more than the file's previous write's.
    pub n: u64,
    /// The path, absolute.
    pub path: String,
}

/// How many written files a state file remembers.
pub const WRITES_KEPT: usize = 256;

/// The canonical form of a project directory, the key of its state file.
/// Falls back to the path as given when it cannot be canonicalised (it no
/// longer exists, say), so that both sides still agree when they can.
pub fn project_key(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// The state file of the project at `dir` under `runtime_dir`.
pub fn state_file(runtime_dir: &Path, dir: &Path) -> PathBuf {
    devboy_core::paths::partition_file(runtime_dir, &project_key(dir))
}

/// Reads a state file: `Ok(None)` when there is none.
pub fn read_state(file: &Path) -> std::io::Result<Option<PartitionState>> {
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Records one context reset for the project at `dir` (already canonical,
/// see [`project_key`]) in `file`: bumps the epoch and returns the new
/// state; `model`, when given, replaces the recorded model. Safe against
/// concurrent writers (see the module docs).
pub fn signal(
    file: &Path,
    dir: &Path,
    event: &str,
    session_id: Option<&str>,
    model: Option<&str>,
) -> std::io::Result<PartitionState> {
    update(file, dir, event, session_id, model, true)
}

/// Records that Claude Code's tools wrote `paths` (absolute) in the
/// project at `dir`, leaving the epoch as it is.
pub fn record_writes(
    file: &Path,
    dir: &Path,
    event: &str,
    session_id: Option<&str>,
    paths: &[String],
) -> std::io::Result<PartitionState> {
    locked_update(file, |previous| {
        let mut state = next_state(previous, dir, event, session_id, None, false);
        let last = state.written.last().map_or(0, |w| w.n);
        state
            .written
            .extend((last + 1..).zip(paths).map(|(n, path)| WrittenFile {
                n,
                path: path.clone(),
            }));
        let excess = state.written.len().saturating_sub(WRITES_KEPT);
        state.written.drain(..excess);
        state
    })
}

/// Records the model a session of the project at `dir` started with,
/// leaving the epoch as it is.
pub fn record_model(
    file: &Path,
    dir: &Path,
    event: &str,
    session_id: Option<&str>,
    model: &str,
) -> std::io::Result<PartitionState> {
    update(file, dir, event, session_id, Some(model), false)
}

fn update(
    file: &Path,
    dir: &Path,
    event: &str,
    session_id: Option<&str>,
    model: Option<&str>,
    bump: bool,
) -> std::io::Result<PartitionState> {
    locked_update(file, |previous| {
        next_state(previous, dir, event, session_id, model, bump)
    })
}

/// The state after one hook's record: the epoch bumped when `bump`, the
/// model replaced when given, the written files kept.
fn next_state(
    previous: Option<PartitionState>,
    dir: &Path,
    event: &str,
    session_id: Option<&str>,
    model: Option<&str>,
    bump: bool,
) -> PartitionState {
    let epoch = previous.as_ref().map_or(0, |s| s.epoch);
    let (old_model, written) = match previous {
        Some(s) => (s.model, s.written),
        None => (None, Vec::new()),
    };
    PartitionState {
        epoch: if bump { epoch.wrapping_add(1) } else { epoch },
        event: event.to_owned(),
        session_id: session_id.map(str::to_owned),
        project: dir.display().to_string(),
        model: model.map(str::to_owned).or(old_model),
        updated_at_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        written,
    }
}

/// Reads, changes and replaces the state file under its lock (see the
/// module docs).
fn locked_update(
    file: &Path,
    change: impl FnOnce(Option<PartitionState>) -> PartitionState,
) -> std::io::Result<PartitionState> {
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let lock = FileLock::acquire(file);
    if !lock.is_held() {
        tracing::warn!(lock = %lock.path().display(), "partition lock busy; writing without it");
    }
    // An unreadable or corrupt file restarts the count: watchers react to
    // any change of the epoch, so this still signals.
    let state = change(read_state(file).ok().flatten());
    let bytes = serde_json::to_vec(&state).map_err(std::io::Error::other)?;
    devboy_sharedfile::replace(file, &bytes).map(|()| state)
}

/// One session's context partition, advanced by `devboy_compact` and, when
/// started with a state file, by the compaction hooks.
///
/// Cheap to clone; the polling task stops when the last clone is dropped.
#[derive(Clone)]
pub struct PartitionWatcher {
    inner: Arc<Inner>,
}

struct Inner {
    partition: watch::Sender<u64>,
    /// The model the state file names.
    model: watch::Sender<Option<String>>,
    file: Option<PathBuf>,
    /// Signals seen in the state file.
    signals: AtomicU64,
    /// Files reported written and not yet taken.
    written: Mutex<Written>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

/// Files Claude Code's tools wrote since they were last taken.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Written {
    /// The files, absolute.
    pub paths: Vec<String>,
    /// More were written than the state file kept: any file may have been.
    pub missed: bool,
}

impl Written {
    /// Nothing was written.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty() && !self.missed
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().ok().and_then(|mut t| t.take()) {
            task.abort();
        }
    }
}

impl PartitionWatcher {
    /// A partition advanced only by [`advance`](Self::advance).
    pub fn manual() -> Self {
        Self::with_file(None)
    }

    fn with_file(file: Option<PathBuf>) -> Self {
        Self {
            inner: Arc::new(Inner {
                partition: watch::Sender::new(0),
                model: watch::Sender::new(None),
                file,
                signals: AtomicU64::new(0),
                written: Mutex::new(Written::default()),
                task: Mutex::new(None),
            }),
        }
    }

    /// Watches `file` every `poll`, taking its current epoch as the
    /// baseline. Must be called inside a tokio runtime.
    pub fn watch_file(file: PathBuf, poll: Duration) -> Self {
        let start = read_state(&file).unwrap_or(None);
        let mut last = start.as_ref().map(|s| s.epoch);
        // Writes from before this process are not news.
        let mut last_write = start
            .as_ref()
            .and_then(|s| s.written.last())
            .map_or(0, |w| w.n);
        let watcher = Self::with_file(Some(file.clone()));
        watcher
            .inner
            .model
            .send_replace(start.and_then(|s| s.model));
        let weak = Arc::downgrade(&watcher.inner);
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(poll).await;
                let Some(inner) = weak.upgrade() else { return };
                match read_state(&file) {
                    Ok(state) => {
                        let epoch = state.as_ref().map(|s| s.epoch);
                        // A file that appears at epoch 0 only records a
                        // model: no signal was ever written to it.
                        let created_for_model = last.is_none() && epoch == Some(0);
                        if epoch != last {
                            if epoch.is_some() && !created_for_model {
                                inner.signals.fetch_add(1, Ordering::Relaxed);
                                let now = advance(&inner.partition);
                                tracing::info!(file = %file.display(), partition = now,
                                    "context reset signalled; partition advanced");
                            }
                            last = epoch;
                        }
                        if let Some(state) = &state {
                            let news: Vec<&WrittenFile> =
                                state.written.iter().filter(|w| w.n > last_write).collect();
                            if let Some(newest) = news.last() {
                                let mut written = crate::sync::lock(&inner.written);
                                // The file keeps the last WRITES_KEPT; a gap
                                // before the oldest means some were lost.
                                written.missed |= news[0].n > last_write + 1;
                                written.paths.extend(news.iter().map(|w| w.path.clone()));
                                last_write = newest.n;
                            } else if state.written.last().is_some_and(|w| w.n < last_write) {
                                // The file was reset: start over from it.
                                last_write = state.written.last().map_or(0, |w| w.n);
                            }
                        }
                        if let Some(model) = state.and_then(|s| s.model) {
                            inner.model.send_if_modified(|m| {
                                let changed = m.as_deref() != Some(model.as_str());
                                if changed {
                                    *m = Some(model);
                                }
                                changed
                            });
                        }
                    }
                    Err(error) => {
                        tracing::debug!(file = %file.display(), %error, "partition file unreadable")
                    }
                }
            }
        });
        if let Ok(mut slot) = watcher.inner.task.lock() {
            *slot = Some(task.abort_handle());
        }
        watcher
    }

    /// Watches the state file of the project at `dir` under `runtime_dir`,
    /// polling every [`POLL_INTERVAL`]. Must be called inside a tokio runtime.
    pub fn for_project(runtime_dir: &Path, dir: &Path) -> Self {
        Self::watch_file(state_file(runtime_dir, dir), POLL_INTERVAL)
    }

    /// The current partition.
    pub fn current(&self) -> u64 {
        *self.inner.partition.borrow()
    }

    /// Follows the partition (for the dedup stage).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.partition.subscribe()
    }

    /// Starts a new partition (the context was replaced); returns it.
    pub fn advance(&self) -> u64 {
        advance(&self.inner.partition)
    }

    /// The model id the project's last `SessionStart` hook reported, if
    /// any.
    pub fn model(&self) -> Option<String> {
        self.inner.model.borrow().clone()
    }

    /// The state file watched, if any.
    pub fn file(&self) -> Option<&Path> {
        self.inner.file.as_deref()
    }

    /// How many hook signals arrived through the state file.
    pub fn signals(&self) -> u64 {
        self.inner.signals.load(Ordering::Relaxed)
    }

    /// The files reported written since the last call (and forgets them).
    pub fn take_written(&self) -> Written {
        std::mem::take(&mut *crate::sync::lock(&self.inner.written))
    }
}

fn advance(partition: &watch::Sender<u64>) -> u64 {
    let mut now = 0;
    partition.send_modify(|p| {
        *p += 1;
        now = *p;
    });
    now
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "devboy-partition-{tag}-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn signal_bumps_the_epoch_and_replaces_the_file_whole() {
        let rt = temp_dir("bump");
        let project = project_key(&rt);
        let file = state_file(&rt, &rt);
        assert_eq!(read_state(&file).unwrap(), None);
        let first = signal(&file, &project, "PreCompact:auto", Some("s1"), None).unwrap();
        assert_eq!(first.epoch, 1);
        let second = signal(&file, &project, "SessionStart:clear", None, None).unwrap();
        assert_eq!(second.epoch, 2);
        let stored = read_state(&file).unwrap().unwrap();
        assert_eq!(stored, second);
        assert_eq!(stored.project, project.display().to_string());
        // No temporary or lock files are left behind.
        let names: Vec<_> = std::fs::read_dir(file.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&rt).unwrap();
    }

    #[test]
    fn concurrent_signals_all_count() {
        let rt = temp_dir("concurrent");
        let file = state_file(&rt, &rt);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let file = file.clone();
                let rt = rt.clone();
                std::thread::spawn(move || {
                    for _ in 0..10 {
                        signal(&file, &rt, "PreCompact:auto", None, None).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(read_state(&file).unwrap().unwrap().epoch, 80);
        std::fs::remove_dir_all(&rt).unwrap();
    }

    #[test]
    fn corrupt_file_and_stale_lock_do_not_block_a_signal() {
        use devboy_sharedfile::{LOCK_WAIT, STALE_LOCK};

        let rt = temp_dir("corrupt");
        let file = state_file(&rt, &rt);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, b"{not json").unwrap();
        assert!(read_state(&file).is_err());
        let lock = file.with_extension("lock");
        let old = std::fs::File::create(&lock).unwrap();
        old.set_modified(SystemTime::now() - 2 * STALE_LOCK)
            .unwrap();
        drop(old);
        let started = std::time::Instant::now();
        let state = signal(&file, &rt, "PreCompact:manual", None, None).unwrap();
        assert_eq!(state.epoch, 1);
        assert!(started.elapsed() < LOCK_WAIT, "a stale lock is taken over");
        assert!(!lock.exists());
        std::fs::remove_dir_all(&rt).unwrap();
    }

    #[tokio::test]
    async fn watcher_starts_at_the_baseline_and_follows_changes() {
        let rt = temp_dir("watch");
        let file = state_file(&rt, &rt);
        // A compaction from before this process does not count.
        signal(&file, &rt, "PreCompact:auto", None, None).unwrap();
        let watcher = PartitionWatcher::watch_file(file.clone(), Duration::from_millis(10));
        let mut updates = watcher.subscribe();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(watcher.current(), 0);
        signal(&file, &rt, "SessionStart:compact", None, None).unwrap();
        tokio::time::timeout(Duration::from_secs(5), updates.changed())
            .await
            .expect("advanced within 5 s")
            .unwrap();
        assert_eq!(*updates.borrow_and_update(), 1);
        assert_eq!(watcher.signals(), 1);
        assert_eq!(watcher.advance(), 2);
        assert_eq!(watcher.current(), 2);
        assert_eq!(watcher.file(), Some(file.as_path()));
        std::fs::remove_dir_all(&rt).unwrap();
    }

    #[tokio::test]
    async fn the_model_is_read_at_start_and_followed_without_advancing() {
        let rt = temp_dir("model");
        let file = state_file(&rt, &rt);
        record_model(&file, &rt, "SessionStart:startup", None, "claude-a").unwrap();
        let watcher = PartitionWatcher::watch_file(file.clone(), Duration::from_millis(10));
        assert_eq!(watcher.model().as_deref(), Some("claude-a"));
        let state = record_model(&file, &rt, "SessionStart:resume", None, "claude-b").unwrap();
        assert_eq!(state.epoch, 0, "a model alone is no context reset");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while watcher.model().as_deref() != Some("claude-b") {
            assert!(
                std::time::Instant::now() < deadline,
                "model followed within 5 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // A signal without a model keeps the recorded one.
        let state = signal(&file, &rt, "PreCompact:auto", None, None).unwrap();
        assert_eq!((state.epoch, state.model.as_deref()), (1, Some("claude-b")));
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(watcher.current(), 1);
        assert_eq!(watcher.model().as_deref(), Some("claude-b"));
        std::fs::remove_dir_all(&rt).unwrap();
    }

    #[tokio::test]
    async fn written_files_are_queued_once_and_a_gap_says_some_were_missed() {
        let rt = temp_dir("written");
        let file = state_file(&rt, &rt);
        // Written before this process: not news.
        record_writes(&file, &rt, "PostToolUse:Edit", None, &["/old".into()]).unwrap();
        let watcher = PartitionWatcher::watch_file(file.clone(), Duration::from_millis(10));
        let state = record_writes(
            &file,
            &rt,
            "PostToolUse:Write",
            None,
            &["/p/a.rs".into(), "/p/b.rs".into()],
        )
        .unwrap();
        assert_eq!(state.epoch, 0, "a write is no context reset");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut taken = Written::default();
        while taken.paths.len() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "writes seen within 5 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
            let more = watcher.take_written();
            taken.paths.extend(more.paths);
            taken.missed |= more.missed;
        }
        assert_eq!(
            taken,
            Written {
                paths: vec!["/p/a.rs".into(), "/p/b.rs".into()],
                missed: false
            }
        );
        assert!(watcher.take_written().is_empty());
        // A compaction keeps the written files; more writes than the file
        // keeps, between two polls, say that some were missed.
        signal(&file, &rt, "PreCompact:auto", None, None).unwrap();
        let many: Vec<String> = (0..WRITES_KEPT + 5).map(|i| format!("/p/{i}")).collect();
        let state = record_writes(&file, &rt, "PostToolUse:Write", None, &many).unwrap();
        assert_eq!(state.written.len(), WRITES_KEPT);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let more = watcher.take_written();
            if !more.is_empty() {
                assert!(more.missed, "a gap before the oldest kept write");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "writes seen within 5 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        std::fs::remove_dir_all(&rt).unwrap();
    }

    #[test]
    fn manual_partition_advances_only_when_told() {
        let watcher = PartitionWatcher::manual();
        assert_eq!(watcher.current(), 0);
        assert_eq!(watcher.advance(), 1);
        assert_eq!(watcher.clone().advance(), 2);
        assert_eq!(watcher.file(), None);
    }
}
