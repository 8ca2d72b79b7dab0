//! The repository as a tree of directories and files, the way `find_files`
//! shows it to a model: each node an id, a path and a type.
//!
//! Built from the text files `explore`'s index walked
//! ([`devboy_explore::Index::text_paths`]: `.gitignore`, hidden, vendored
//! and build trees left out), so the two tools agree on what the
//! repository holds and it is walked once. A directory whose only
//! child is a directory is folded into it (`src/main/java/com/example` is
//! one node): a model would only ever pick the one child. Children are
//! listed directories first, then files, each by name.

use std::collections::HashMap;

/// A node's id: its index in the tree; the root is 0.
pub type NodeId = u32;

/// A directory or a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Directory,
    File,
}

impl Kind {
    /// The word the prompts use.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Directory => "directory",
            Kind::File => "file",
        }
    }
}

/// One node.
#[derive(Debug, Clone)]
pub struct Node {
    /// Relative to the root, `/`-separated; empty for the root.
    pub path: String,
    pub kind: Kind,
    pub children: Vec<NodeId>,
}

/// A repository tree. Invariant: node 0 is the root directory; every other
/// node is the child of exactly one directory; no directory but the root
/// has a single child that is a directory.
#[derive(Debug, Clone)]
pub struct Tree {
    nodes: Vec<Node>,
    by_path: HashMap<String, NodeId>,
}

impl Tree {
    /// The tree of these file paths (relative, `/`-separated).
    pub fn from_paths<S: AsRef<str>>(paths: impl IntoIterator<Item = S>) -> Tree {
        // A plain nested map first, then folded and numbered.
        #[derive(Default)]
        struct Dir {
            dirs: std::collections::BTreeMap<String, Dir>,
            files: std::collections::BTreeSet<String>,
        }
        let mut top = Dir::default();
        for path in paths {
            let path = path.as_ref().trim_matches('/');
            if path.is_empty() {
                continue;
            }
            let mut parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
            let Some(file) = parts.pop() else { continue };
            let mut dir = &mut top;
            for part in parts {
                dir = dir.dirs.entry(part.to_owned()).or_default();
            }
            dir.files.insert(file.to_owned());
        }
        let mut tree = Tree {
            nodes: vec![Node {
                path: String::new(),
                kind: Kind::Directory,
                children: Vec::new(),
            }],
            by_path: HashMap::new(),
        };
        fn add(tree: &mut Tree, parent: NodeId, prefix: &str, dir: &Dir) {
            let join = |name: &str| {
                if prefix.is_empty() {
                    name.to_owned()
                } else {
                    format!("{prefix}/{name}")
                }
            };
            for (name, sub) in &dir.dirs {
                // Fold a chain of single-directory directories into one node.
                let mut path = join(name);
                let mut sub = sub;
                while sub.files.is_empty() && sub.dirs.len() == 1 {
                    let Some((only, inner)) = sub.dirs.iter().next() else {
                        break;
                    };
                    path = format!("{path}/{only}");
                    sub = inner;
                }
                let id = tree.push(parent, path.clone(), Kind::Directory);
                add(tree, id, &path, sub);
            }
            for name in &dir.files {
                tree.push(parent, join(name), Kind::File);
            }
        }
        add(&mut tree, 0, "", &top);
        tree
    }

    fn push(&mut self, parent: NodeId, path: String, kind: Kind) -> NodeId {
        let id = self.nodes.len() as NodeId;
        self.by_path.insert(path.clone(), id);
        self.nodes.push(Node {
            path,
            kind,
            children: Vec::new(),
        });
        self.nodes[parent as usize].children.push(id);
        id
    }

    /// The root's id.
    pub fn root(&self) -> NodeId {
        0
    }

    /// A node. Ids come from this tree; an id of another panics.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// A node's children in listing order.
    pub fn children(&self, id: NodeId) -> &[NodeId] {
        &self.node(id).children
    }

    /// Whether a node is a file.
    pub fn is_file(&self, id: NodeId) -> bool {
        self.node(id).kind == Kind::File
    }

    /// The node at `path`, if any.
    pub fn find(&self, path: &str) -> Option<NodeId> {
        if path.is_empty() {
            return Some(0);
        }
        self.by_path.get(path).copied()
    }

    /// Nodes, the root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the tree has no file.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    /// Files in the tree.
    pub fn files(&self) -> usize {
        self.nodes.iter().filter(|n| n.kind == Kind::File).count()
    }

    /// The most levels below the root.
    pub fn max_depth(&self) -> usize {
        fn depth(tree: &Tree, id: NodeId) -> usize {
            tree.children(id)
                .iter()
                .map(|&c| 1 + depth(tree, c))
                .max()
                .unwrap_or(0)
        }
        depth(self, 0)
    }

    /// `id`, or, while it is a directory with one child that is a
    /// directory, that child (only the root can have one).
    pub fn collapse(&self, mut id: NodeId) -> NodeId {
        while let [only] = self.children(id) {
            if self.is_file(*only) {
                break;
            }
            id = *only;
        }
        id
    }

    /// Whether `ancestor` is `id` or contains it.
    pub fn contains(&self, ancestor: NodeId, id: NodeId) -> bool {
        let a = &self.node(ancestor).path;
        let p = &self.node(id).path;
        ancestor == 0 || a == p || (p.starts_with(a.as_str()) && p[a.len()..].starts_with('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(tree: &Tree, ids: &[NodeId]) -> Vec<String> {
        ids.iter().map(|&i| tree.node(i).path.clone()).collect()
    }

    #[test]
    fn single_directory_chains_fold_into_one_node() {
        let tree = Tree::from_paths([
            "README.md",
            "src/main/java/com/example/App.java",
            "src/main/java/com/example/util/Strings.java",
            "src/test/AppTest.java",
        ]);
        assert_eq!(paths(&tree, tree.children(0)), ["src", "README.md"]);
        let src = tree.find("src").expect("src");
        assert_eq!(
            paths(&tree, tree.children(src)),
            ["src/main/java/com/example", "src/test"]
        );
        let example = tree.find("src/main/java/com/example").expect("folded");
        assert_eq!(
            paths(&tree, tree.children(example)),
            [
                "src/main/java/com/example/util",
                "src/main/java/com/example/App.java"
            ]
        );
        assert!(tree.find("src/main").is_none());
        assert_eq!(tree.files(), 4);
        assert_eq!(tree.len(), 9);
        assert_eq!(tree.max_depth(), 4);
        assert!(tree.contains(src, example));
        assert!(!tree.contains(example, src));
    }

    #[test]
    fn a_root_with_one_directory_collapses_to_it() {
        let tree = Tree::from_paths(["pkg/a.py", "pkg/sub/b.py"]);
        let pkg = tree.find("pkg").expect("pkg");
        assert_eq!(tree.collapse(0), pkg);
        assert_eq!(tree.collapse(pkg), pkg);
    }

    #[test]
    fn a_prefix_of_a_name_is_not_containment() {
        let tree = Tree::from_paths(["ab/x.py", "a/y.py", "a/z.py"]);
        let a = tree.find("a").expect("a");
        let x = tree.find("ab/x.py").expect("x");
        assert!(!tree.contains(a, x));
    }
}
