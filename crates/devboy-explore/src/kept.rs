//! A source tree's index and code graph kept in memory between questions.
//!
//! A long-running devboy answers many `find_files` and `explore` calls on
//! the same tree. Each call walks the tree (no file is read) and compares
//! what it finds with the kept index: when nothing changed, the kept index
//! and graph answer at once; when files changed, came or went, only those
//! are parsed ([`Index::refresh`]) and the graph is joined again from the
//! kept facts. The words each file holds are kept with its facts, so the
//! offline ranker reads no file either: only `explore` reads the files it
//! shows.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::graph::Graph;
use crate::index::{source_root, Index, IndexError};

self_cell::self_cell!(
    /// An index and the graph that borrows it.
    struct Joined {
        owner: Index,
        #[covariant]
        dependent: Graph,
    }
);

/// One tree's index and graph.
pub struct Kept {
    joined: Joined,
}

impl Kept {
    /// The graph of `index`, joined now.
    pub fn new(index: Index) -> Kept {
        Kept {
            joined: Joined::new(index, |index| Graph::new(index)),
        }
    }

    pub fn index(&self) -> &Index {
        self.joined.borrow_owner()
    }

    pub fn graph(&self) -> &Graph<'_> {
        self.joined.borrow_dependent()
    }
}

/// The most trees kept at once; the least recently asked about goes first.
const MAX_TREES: usize = 4;

/// Trees kept by this process, most recently asked about last.
static TREES: Mutex<Vec<(PathBuf, Arc<Kept>)>> = Mutex::new(Vec::new());

/// The index and graph of `root`, up to date: kept from the last question
/// about it when no file changed since, refreshed when some did, opened
/// from `cache` (or built) the first time.
pub fn open(root: &Path, cache: &Path) -> Result<Arc<Kept>, IndexError> {
    let canonical = source_root(root)?;
    let kept = {
        let trees = TREES.lock().unwrap_or_else(|e| e.into_inner());
        trees
            .iter()
            .find(|(r, _)| *r == canonical)
            .map(|(_, k)| Arc::clone(k))
    };
    let fresh = match kept {
        Some(kept) => match kept.index().refresh() {
            None => kept,
            Some(index) => {
                let fresh = Arc::new(Kept::new(index));
                // Stored for the next process while this one answers: a
                // failed or unfinished write costs that process a refresh.
                let (saved, cache) = (Arc::clone(&fresh), cache.to_path_buf());
                std::thread::spawn(move || saved.index().save_to(&cache));
                fresh
            }
        },
        None => Arc::new(Kept::new(Index::open(&canonical, cache)?)),
    };
    let mut trees = TREES.lock().unwrap_or_else(|e| e.into_inner());
    trees.retain(|(r, _)| *r != canonical);
    trees.push((canonical, Arc::clone(&fresh)));
    if trees.len() > MAX_TREES {
        trees.remove(0);
    }
    Ok(fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn ranked(kept: &Kept, query: &str) -> Vec<String> {
        crate::find::rank_in(kept.graph(), query, 3)
            .into_iter()
            .map(|f| f.path)
            .collect()
    }

    /// Unchanged, the kept graph answers; a changed file is parsed alone
    /// and the next answer sees what it says now; a file that comes or
    /// goes does too.
    #[test]
    fn answers_from_the_kept_graph_until_a_file_changes() {
        let dir = std::env::temp_dir().join(format!("devboy-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (root, cache) = (dir.join("repo"), dir.join("cache"));
        write(
            &root,
            "pkg/a.py",
            "def load_config(path):\n    return parse(path)\n",
        );
        write(&root, "pkg/b.py", "def parse(path):\n    return {}\n");
        write(&root, "pkg/c.py", "def unrelated():\n    return 1\n");
        let first = open(&root, &cache).unwrap();
        assert_eq!(first.index().stats.parsed, 3);
        let again = open(&root, &cache).unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "nothing changed: the kept graph"
        );

        // The identifier moves from b.py to c.py.
        write(&root, "pkg/b.py", "def parse_text(path):\n    return {}\n");
        write(
            &root,
            "pkg/c.py",
            "def unrelated():\n    return 1\n\nCOLOR_WHEEL_SIZE = 12\n",
        );
        let changed = open(&root, &cache).unwrap();
        assert!(!Arc::ptr_eq(&first, &changed));
        assert_eq!(changed.index().stats.parsed, 2, "only the changed files");
        assert_eq!(
            ranked(&changed, "where is COLOR_WHEEL_SIZE set")[0],
            "pkg/c.py"
        );
        assert_eq!(
            ranked(&first, "where is COLOR_WHEEL_SIZE set").first(),
            None
        );

        // A new file is found; a removed one is gone.
        write(
            &root,
            "pkg/d.py",
            "def render_wheel(size):\n    return COLOR_WHEEL_SIZE\n",
        );
        std::fs::remove_file(root.join("pkg/c.py")).unwrap();
        let moved = open(&root, &cache).unwrap();
        assert_eq!(moved.index().stats.parsed, 1);
        assert_eq!(
            ranked(&moved, "where is COLOR_WHEEL_SIZE set"),
            ["pkg/d.py"]
        );
        assert!(moved.index().files.iter().all(|f| f.path != "pkg/c.py"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
