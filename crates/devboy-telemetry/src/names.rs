//! The local names map, `<config dir>/endpoint-names.json`
//! ([`devboy_core::paths::endpoint_names_file`]): `{hash: name}` for every
//! tool and upstream name this install has hashed, so that
//! `devboy tune show` can show the user their own endpoints by name.
//!
//! It lives in the config directory, **not** under the telemetry directory:
//! telemetry files hold no names, and a user who shares their telemetry
//! directory shares no names with it.
//!
//! Every devboy process of the user (one per Claude Code session) adds to
//! the same file, so a save is a read-merge-write under the file's lock
//! ([`devboy_sharedfile`]), and the file is replaced whole.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use devboy_sharedfile::FileLock;

use crate::hash::Hash64;

/// The names map, as loaded plus what this process added.
#[derive(Debug)]
pub struct EndpointNames {
    path: PathBuf,
    names: BTreeMap<String, String>,
    dirty: bool,
}

impl EndpointNames {
    /// The map at `path` (empty when the file is missing or unreadable; it
    /// is only a cache of names and refills as tools are called).
    pub fn load(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            names: read_map(path),
            dirty: false,
        }
    }

    /// The name behind `hash`, if known.
    pub fn get(&self, hash: Hash64) -> Option<&str> {
        self.names.get(&hash.to_string()).map(String::as_str)
    }

    /// Every `(hash, name)` pair, ordered by hash.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.names.iter().map(|(h, n)| (h.as_str(), n.as_str()))
    }

    /// Records that `hash` stands for `name`; true if that is news.
    pub fn insert(&mut self, hash: Hash64, name: &str) -> bool {
        let key = hash.to_string();
        if self.names.get(&key).map(String::as_str) == Some(name) {
            return false;
        }
        self.names.insert(key, name.to_owned());
        self.dirty = true;
        true
    }

    /// Writes the map if anything was added: under the file's lock, merged
    /// with what is on disk now (other devboy processes add names too) and
    /// replaced whole, so a reader never sees half a file. If the lock
    /// stays busy past [`devboy_sharedfile::LOCK_WAIT`] it writes anyway:
    /// the map is a cache that refills, and telemetry must not stall.
    pub fn save(&mut self) -> io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::sink::create_private_dir(dir)?;
        }
        let lock = FileLock::acquire(&self.path);
        if !lock.is_held() {
            tracing::debug!(lock = %lock.path().display(), "names map lock busy; writing without it");
        }
        let mut merged = read_map(&self.path);
        merged.extend(std::mem::take(&mut self.names));
        self.names = merged;
        let mut text = serde_json::to_vec_pretty(&self.names)?;
        text.push(b'\n');
        devboy_sharedfile::replace(&self.path, &text)?;
        drop(lock);
        self.dirty = false;
        Ok(())
    }
}

fn read_map(path: &Path) -> BTreeMap<String, String> {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_merged_with_the_file_and_written_whole() {
        let dir =
            std::env::temp_dir().join(format!("devboy-telemetry-names-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir
            .join("sub")
            .join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME);
        let mut mine = EndpointNames::load(&path);
        assert!(mine.insert(Hash64(1), "gh__list_issues"));
        assert!(!mine.insert(Hash64(1), "gh__list_issues"));
        // Another process adds a name in between.
        let mut theirs = EndpointNames::load(&path);
        theirs.insert(Hash64(2), "fs__read_file");
        theirs.save().unwrap();
        mine.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let map: BTreeMap<String, String> = serde_json::from_str(&text).unwrap();
        assert_eq!(map.len(), 2, "{text}");
        assert_eq!(map["0000000000000001"], "gh__list_issues");
        assert_eq!(map["0000000000000002"], "fs__read_file");
        let loaded = EndpointNames::load(&path);
        assert_eq!(loaded.get(Hash64(2)), Some("fs__read_file"));
        assert_eq!(loaded.iter().count(), 2);
        // A damaged file is a cache miss, not an error.
        std::fs::write(&path, "{").unwrap();
        let mut fresh = EndpointNames::load(&path);
        assert_eq!(fresh.get(Hash64(1)), None);
        fresh.insert(Hash64(3), "x");
        fresh.save().unwrap();
        assert_eq!(EndpointNames::load(&path).get(Hash64(3)), Some("x"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
