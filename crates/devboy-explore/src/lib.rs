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
pub mod lang;
pub mod project;

pub use answer::{explore, Answer, Options, Render};
pub use find::{rank_offline, Found};
pub use index::{cache_dir, Index};
