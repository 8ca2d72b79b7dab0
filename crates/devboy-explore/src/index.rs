//! The index of a source tree: every source file's [`FileFacts`], kept on
//! disk under the cache directory and refreshed incrementally.
//!
//! The walk respects `.gitignore` (and `.ignore`), skips hidden entries,
//! vendored and build trees (`node_modules`, `vendor`, `third_party`,
//! `target`, `build`, `dist`, …), minified files, files over
//! [`MAX_FILE_BYTES`] and files that say they are generated. Files are parsed
//! in parallel, one worker per core. A file whose size and modification
//! time are unchanged since the stored index keeps its stored facts; an
//! index of another version, of another root, or that does not parse is
//! rebuilt, never trusted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Instant, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::extract::{extract, FileFacts};
use crate::lang::Lang;

/// The stored index's format; any other is rebuilt. Bump it with every change
/// to what [`extract`] reads, or stale facts are trusted.
const VERSION: u32 = 8;

/// Larger files are not source worth reading (generated tables, bundles).
pub const MAX_FILE_BYTES: u64 = 1_000_000;

/// Directory names never walked into.
const SKIPPED_DIRS: &[&str] = &[
    "node_modules",
    "vendor",
    "third_party",
    "third-party",
    "target",
    "build",
    "dist",
    "out",
    "__pycache__",
    "site-packages",
    "bower_components",
    "generated",
];

/// One indexed file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexedFile {
    /// Relative to the root, `/`-separated.
    pub path: String,
    size: u64,
    mtime_ns: u64,
    /// The file says it is generated: kept (so it is not read again while
    /// unchanged) with no facts.
    pub generated: bool,
    pub facts: FileFacts,
    /// The file's words: its distinct runs of letters, digits, `_` and `-`
    /// [`MIN_WORD`] to [`MAX_WORD`] characters long, sorted, one per line.
    /// The offline ranker looks up the query's identifiers and literals in
    /// them instead of reading the file: an identifier made of those
    /// characters occurs in the text exactly when it occurs in one of its
    /// runs.
    #[serde(default)]
    pub words: String,
}

/// The shortest word kept in [`IndexedFile::words`]: the ranker looks up
/// nothing shorter.
pub const MIN_WORD: usize = 4;
/// The longest: longer runs are data (hashes, base64), not names.
pub const MAX_WORD: usize = 80;

/// Whether `c` belongs to a word of [`IndexedFile::words`].
pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

/// [`IndexedFile::words`] of `text`.
fn words_of(text: &str) -> String {
    let mut seen: Vec<&str> = text
        .split(|c: char| !is_word_char(c))
        .filter(|w| (MIN_WORD..=MAX_WORD).contains(&w.len()))
        .collect();
    seen.sort_unstable();
    seen.dedup();
    seen.join("\n")
}

/// How an index was brought up to date.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BuildStats {
    /// Files indexed.
    pub files: usize,
    /// Of them, parsed now (the rest were unchanged).
    pub parsed: usize,
    /// Files indexed before that are gone.
    pub dropped: usize,
    /// Source lines parsed now.
    pub parsed_lines: u64,
    /// Seconds the walk, the parse and the save took.
    pub seconds: f64,
    /// Whether a stored index was used.
    pub reused: bool,
}

/// The index of one root.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Index {
    version: u32,
    /// The root, canonical.
    pub root: PathBuf,
    pub files: Vec<IndexedFile>,
    /// Every text file the walk saw, source or not (binary files left
    /// out), relative and sorted: the tree `find_files` navigates. Walked
    /// anew with every open, never stored.
    #[serde(skip)]
    pub text_paths: Vec<String>,
    #[serde(skip)]
    pub stats: BuildStats,
}

/// Why an index could not be built.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The root names nothing.
    #[error("{path} does not exist")]
    Missing { path: PathBuf },
    /// The root is a file (or another thing that is not a directory).
    #[error("{path} is not a directory (give the source tree's directory, not a file in it)")]
    NotADirectory { path: PathBuf },
    /// The root could not be read.
    #[error("{path}: {error}")]
    Root {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// The source tree `root` names, canonical (`..` and symlinks resolved),
/// or why it names none: nothing there, or a file rather than a
/// directory (which would index as an empty tree and answer nothing).
pub fn source_root(root: &Path) -> Result<PathBuf, IndexError> {
    let canonical = root.canonicalize().map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => IndexError::Missing {
            path: root.to_path_buf(),
        },
        _ => IndexError::Root {
            path: root.to_path_buf(),
            error,
        },
    })?;
    if !canonical.is_dir() {
        return Err(IndexError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    Ok(canonical)
}

/// Where indexes are kept: devboy's cache directory
/// ([`devboy_core::paths::cache_dir`]); an index per root in `explore/`.
pub fn cache_dir() -> PathBuf {
    devboy_core::paths::cache_dir()
}

/// The file an index of `root` is stored in, under `cache`.
pub fn index_file(cache: &Path, root: &Path) -> PathBuf {
    let hash = devboy_core::hash::fnv1a64(root.to_string_lossy().as_bytes());
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    cache
        .join("explore")
        .join(format!("{name}-{hash:016x}.json"))
}

/// A file found by the walk.
struct Found {
    path: String,
    abs: PathBuf,
    /// `None`: not source of a language the index reads.
    lang: Option<Lang>,
    size: u64,
    mtime_ns: u64,
}

/// Whether a file says it is generated, in its first lines.
fn says_generated(text: &str) -> bool {
    text.lines().take(5).any(|l| {
        l.contains("@generated")
            || l.contains("Code generated")
            || l.contains("DO NOT EDIT")
            || l.contains("auto-generated")
            || l.contains("autogenerated")
    })
}

/// Extensions of files that are not text (a path listing leaves them out).
const BINARY_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "pdf", "zip", "gz", "tgz", "bz2", "xz",
    "7z", "jar", "class", "so", "dylib", "dll", "exe", "o", "a", "pyc", "pyo", "whl", "woff",
    "woff2", "ttf", "otf", "eot", "mp3", "mp4", "wav", "ogg", "mov", "avi", "bin", "dat", "db",
    "sqlite", "npy", "npz", "pkl", "parquet",
];

/// Whether a path names a binary file (by its extension).
fn is_binary(path: &str) -> bool {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    BINARY_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
}

fn walk(root: &Path) -> Vec<Found> {
    let mut out = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .filter_entry(|e| {
            !(e.file_type().is_some_and(|t| t.is_dir())
                && e.file_name()
                    .to_str()
                    .is_some_and(|n| SKIPPED_DIRS.contains(&n)))
        })
        .build();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let abs = entry.path().to_path_buf();
        let Ok(rel) = abs.strip_prefix(root) else {
            continue;
        };
        let path = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let lang = Lang::of_path(&path);
        if path.ends_with(".min.js") || path.ends_with(".d.ts") {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if meta.len() > MAX_FILE_BYTES {
            continue;
        }
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64);
        out.push(Found {
            path,
            abs,
            lang,
            size: meta.len(),
            mtime_ns,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

impl Index {
    /// The index of `root`, brought up to date: the stored one under
    /// `cache` (if any, and sound) with changed files parsed again, saved
    /// back. A cache that cannot be written costs only the next rebuild.
    pub fn open(root: &Path, cache: &Path) -> Result<Index, IndexError> {
        let started = Instant::now();
        let root = source_root(root)?;
        let file = index_file(cache, &root);
        let stored = std::fs::read(&file)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Index>(&bytes).ok())
            .filter(|i| i.version == VERSION && i.root == root);
        let reused = stored.is_some();
        let known = stored.map(|i| i.files).unwrap_or_default();
        let walked = walk(&root);
        let index = Self::update(root, known, reused, walked, started);
        if index.stats.parsed > 0 || !reused || index.stats.dropped > 0 {
            index.save(&file);
        }
        Ok(index)
    }

    /// This index brought up to date with its tree: `None` when no file
    /// changed, came or went since it was built (the tree is walked, no
    /// file read); otherwise the new index, with only the changed files
    /// parsed (not yet saved: see [`Index::save_to`]).
    pub fn refresh(&self) -> Option<Index> {
        let started = Instant::now();
        let walked = walk(&self.root);
        let same_sources = walked
            .iter()
            .filter(|f| f.lang.is_some())
            .map(|f| (f.path.as_str(), f.size, f.mtime_ns, f.lang))
            .eq(self
                .files
                .iter()
                .map(|f| (f.path.as_str(), f.size, f.mtime_ns, Some(f.facts.lang))));
        let same_tree = walked
            .iter()
            .filter(|f| !is_binary(&f.path))
            .map(|f| f.path.as_str())
            .eq(self.text_paths.iter().map(String::as_str));
        if same_sources && same_tree {
            return None;
        }
        Some(Self::update(
            self.root.clone(),
            self.files.clone(),
            true,
            walked,
            started,
        ))
    }

    /// The index of `root` from the files `walked` found: `known` facts
    /// kept where a file's size and modification time are unchanged, the
    /// rest parsed.
    fn update(
        root: PathBuf,
        known: Vec<IndexedFile>,
        reused: bool,
        walked: Vec<Found>,
        started: Instant,
    ) -> Index {
        let mut known: HashMap<String, IndexedFile> =
            known.into_iter().map(|f| (f.path.clone(), f)).collect();
        let text_paths: Vec<String> = walked
            .iter()
            .filter(|f| !is_binary(&f.path))
            .map(|f| f.path.clone())
            .collect();
        let found: Vec<Found> = walked.into_iter().filter(|f| f.lang.is_some()).collect();
        let mut files: Vec<Option<IndexedFile>> = Vec::with_capacity(found.len());
        let mut todo = Vec::new();
        for (i, f) in found.iter().enumerate() {
            match known.remove(&f.path) {
                Some(k)
                    if k.size == f.size
                        && k.mtime_ns == f.mtime_ns
                        && Some(k.facts.lang) == f.lang =>
                {
                    files.push(Some(k));
                }
                _ => {
                    files.push(None);
                    todo.push(i);
                }
            }
        }
        let parsed_lines = parse_all(&found, &todo, &mut files);
        let index = Index {
            version: VERSION,
            root,
            files: files.into_iter().flatten().collect(),
            text_paths,
            stats: BuildStats::default(),
        };
        Index {
            stats: BuildStats {
                files: index.files.len(),
                parsed: todo.len(),
                dropped: known.len(),
                parsed_lines,
                seconds: started.elapsed().as_secs_f64(),
                reused,
            },
            ..index
        }
    }

    /// Stores this index under `cache`, where [`Index::open`] looks.
    pub fn save_to(&self, cache: &Path) {
        self.save(&index_file(cache, &self.root));
    }

    fn save(&self, file: &Path) {
        let Some(dir) = file.parent() else { return };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        // A cache: a failed write costs the next run a rebuild, nothing more.
        if let Ok(bytes) = serde_json::to_vec(self) {
            let _ = devboy_sharedfile::replace(file, &bytes);
        }
    }

    /// The text of an indexed file, read now.
    pub fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(path)).ok()
    }
}

/// Parses the files `todo` names (indexes into `found`) on every core,
/// filling `files`; returns the lines parsed.
fn parse_all(found: &[Found], todo: &[usize], files: &mut [Option<IndexedFile>]) -> u64 {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, IndexedFile)>> = Mutex::new(Vec::with_capacity(todo.len()));
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(todo.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut mine = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&i) = todo.get(n) else { break };
                    let f = &found[i];
                    let Some(lang) = f.lang else { continue };
                    // A file that is not UTF-8 is read as far as it is; one
                    // that cannot be read is kept with no facts, so that it
                    // is not tried again until it changes.
                    let bytes = std::fs::read(&f.abs).unwrap_or_default();
                    let text = String::from_utf8_lossy(&bytes);
                    let generated = says_generated(&text);
                    let words = if generated {
                        String::new()
                    } else {
                        words_of(&text)
                    };
                    let none = || FileFacts {
                        lang,
                        lines: 0,
                        symbols: Vec::new(),
                        calls: Vec::new(),
                        groups: Vec::new(),
                    };
                    let facts = if generated {
                        none()
                    } else {
                        extract(lang, &text).unwrap_or_else(none)
                    };
                    mine.push((
                        i,
                        IndexedFile {
                            path: f.path.clone(),
                            size: f.size,
                            mtime_ns: f.mtime_ns,
                            generated,
                            facts,
                            words,
                        },
                    ));
                }
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(mine);
            });
        }
    });
    let mut lines = 0u64;
    for (i, file) in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        lines += u64::from(file.facts.lines);
        files[i] = Some(file);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dir: &Path) {
        let w = |p: &str, s: &str| {
            let path = dir.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        };
        w("src/a.py", "def a():\n    b()\n");
        w("src/b.py", "def b():\n    pass\n");
        w("node_modules/x/index.js", "function x() {}\n");
        w(
            "gen/g.go",
            "// Code generated by protoc. DO NOT EDIT.\npackage g\nfunc G() {}\n",
        );
        w("ignored/i.py", "def i(): pass\n");
        w(".gitignore", "ignored/\n");
        w("README.md", "# not source\n");
    }

    /// A file or a path that names nothing is no source tree: said so,
    /// naming the path, instead of an empty index that matches nothing.
    #[test]
    fn a_root_that_is_a_file_or_missing_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("devboy-explore-root-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        tree(&dir.join("repo"));
        let cache = dir.join("cache");
        let file = dir.join("repo/src/a.py");
        let refused = Index::open(&file, &cache).map(|_| ()).unwrap_err();
        assert!(
            matches!(refused, IndexError::NotADirectory { .. }),
            "{refused:?}"
        );
        assert_eq!(
            refused.to_string(),
            format!(
                "{} is not a directory (give the source tree's directory, not a file in it)",
                file.display()
            )
        );
        let missing = dir.join("repo/nope");
        let refused = crate::kept::open(&missing, &cache).map(|_| ()).unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!("{} does not exist", missing.display())
        );
        assert_eq!(
            source_root(&dir.join("repo/src/..")).unwrap(),
            dir.join("repo").canonicalize().unwrap()
        );
        assert!(!cache.exists(), "nothing was indexed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn walks_what_matters_and_reuses_what_did_not_change() {
        let dir = std::env::temp_dir().join(format!("devboy-explore-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (root, cache) = (dir.join("repo"), dir.join("cache"));
        tree(&root);
        let index = Index::open(&root, &cache).unwrap();
        let paths: Vec<(&str, bool)> = index
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.generated))
            .collect();
        assert_eq!(
            paths,
            [("gen/g.go", true), ("src/a.py", false), ("src/b.py", false)]
        );
        assert_eq!((index.stats.parsed, index.stats.reused), (3, false));

        // Unchanged: nothing parsed. One file changed: only it.
        let again = Index::open(&root, &cache).unwrap();
        assert_eq!((again.stats.parsed, again.stats.reused), (0, true));
        std::fs::write(
            root.join("src/b.py"),
            "def b():\n    return 1\n\ndef c():\n    pass\n",
        )
        .unwrap();
        let changed = Index::open(&root, &cache).unwrap();
        assert_eq!(changed.stats.parsed, 1);
        assert_eq!(changed.files[2].facts.symbols.len(), 2);

        // A corrupt or old index is rebuilt.
        let file = index_file(&cache, &root.canonicalize().unwrap());
        std::fs::write(&file, b"{\"version\": 1, \"root\": tru").unwrap();
        let rebuilt = Index::open(&root, &cache).unwrap();
        assert_eq!((rebuilt.stats.parsed, rebuilt.stats.reused), (3, false));
        let text = std::fs::read_to_string(&file).unwrap();
        let current = format!("\"version\":{VERSION}");
        assert!(text.contains(&current));
        std::fs::write(&file, text.replacen(&current, "\"version\":0", 1)).unwrap();
        assert!(!Index::open(&root, &cache).unwrap().stats.reused);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
