//! devboy's code graph and `explore`: "how does X work", answered from the
//! source and sized to the answer.
//!
//! [`index::Index`] walks a tree (`.gitignore` respected, vendored and
//! generated files skipped) and keeps what [`extract`] reads from each
//! file's tree-sitter syntax tree on disk, refreshed incrementally.
//! [`graph::Graph`] joins it: calls resolved to definitions, supertypes
//! to their implementers. [`answer::explore`] picks the entry symbols of a
//! question, the call paths between them (the spine), and renders the
//! relevant files to a character budget: on-spine files in full,
//! interchangeable implementations of a many-implementer supertype as
//! skeletons.

pub mod answer;
pub mod extract;
pub mod find;
pub mod graph;
pub mod index;
pub mod kept;
pub mod lang;
pub mod project;

pub use answer::{explore, explore_in, Answer, Options, Render};
pub use find::{rank_in, rank_offline, Found};
pub use index::{cache_dir, source_root, Index, IndexError};
pub use kept::Kept;

/// What the crate's tests share.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::PathBuf;

    use crate::index::Index;

    /// A tree of `files` (path, text) in a fresh temporary folder named
    /// after `name`, indexed; the folder, to remove.
    pub fn indexed(name: &str, files: &[(&str, &str)]) -> (Index, PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("devboy-explore-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let path = dir.join("repo").join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let index = Index::open(&dir.join("repo"), &dir.join("cache")).unwrap();
        (index, dir)
    }
}
