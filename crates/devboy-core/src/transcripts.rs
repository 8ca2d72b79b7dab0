//! Where Claude Code keeps its session transcripts: one `*.jsonl` file per
//! session under `~/.claude/projects/<mangled project path>/`, sometimes a
//! level deeper (subagents). The tuner reads them (`tune
//! from-claude-logs`) and the end-to-end tests check them; both collect
//! them here.

use std::path::{Path, PathBuf};

/// The `*.jsonl` files under `dir`, at any depth, sorted. A directory that
/// cannot be read adds nothing: a missing projects folder is no logs.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                collect(&path, out);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    collect(dir, &mut out);
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_files_at_any_depth_sorted() {
        let dir = std::env::temp_dir().join(format!("devboy-transcripts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("p").join("sub")).unwrap();
        for name in ["p/b.jsonl", "p/a.jsonl", "p/sub/c.jsonl", "p/notes.txt"] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        let found = files_under(&dir);
        let expected: Vec<PathBuf> = ["p/a.jsonl", "p/b.jsonl", "p/sub/c.jsonl"]
            .iter()
            .map(|n| dir.join(n))
            .collect();
        assert_eq!(found, expected);
        assert!(files_under(&dir.join("absent")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
