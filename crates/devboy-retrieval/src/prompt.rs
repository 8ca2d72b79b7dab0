//! What the model reads: the Beam and Block prompts, rendered from the
//! tree, and the `rank` tool it answers with (`docs/retrieval.md` says
//! what each part is for).
//!
//! Beam sends one message per turn. Block splits a prompt in two: a stable
//! part (the instructions, then the tree blocks seen so far, the current
//! block last) that a provider may cache, and a short dynamic message (the
//! query, the state, the ids the model may pick). Every block names its
//! candidates by local aliases `n1`, `n2`, …; a block whose entries share a
//! directory shows it once as `Path prefix:` and the paths below it
//! relative to it.

use serde_json::{json, Value};

use crate::tree::{NodeId, Tree};

/// The tool every ranking call must answer with.
pub const RANK_TOOL: &str = "rank";
/// Its description.
pub const RANK_DESCRIPTION: &str = "Rank candidate node ids for the query";

/// The `rank` tool's input schema.
pub fn rank_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "ranked_ids": {"type": "array", "items": {"type": "string"}},
            "done": {"type": "boolean"}
        },
        "required": ["ranked_ids"]
    })
}

/// A prompt for one ranking call. The adapters send `system`, then the
/// `cached` segments (stable text, each a content block of its own where
/// the API has blocks, so a provider can cache the prefix up to it), then
/// `dynamic`; an adapter without blocks sends them as one text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankPrompt {
    pub system: String,
    pub cached: Vec<String>,
    pub dynamic: String,
}

impl RankPrompt {
    /// Everything after the system text, as one message.
    pub fn user_text(&self) -> String {
        let mut text = String::new();
        for segment in &self.cached {
            text.push_str(segment);
        }
        text.push_str(&self.dynamic);
        text
    }
}

fn entry(text: &mut String, id: &str, path: &str, kind: &str) {
    text.push_str("- id: ");
    text.push_str(id);
    text.push_str("\n  path: ");
    text.push_str(path);
    text.push_str("\n  type: ");
    text.push_str(kind);
    text.push('\n');
}

/// Beam's prompt: candidates by their node ids, previous top
/// candidates by id.
pub fn beam(
    tree: &Tree,
    query: &str,
    candidates: &[NodeId],
    top: &[NodeId],
    pick_limit: usize,
) -> RankPrompt {
    let mut text = String::from(
        "You are navigating a source code repository to find files relevant to this query:\n",
    );
    text.push_str("Query: ");
    text.push_str(query.trim());
    text.push_str("\nAlready top candidates:\n");
    if top.is_empty() {
        text.push_str("- (none yet)\n");
    }
    for id in top {
        text.push_str(&format!("- {id}\n"));
    }
    text.push_str(&format!(
        "Current candidates (pick up to {pick_limit}, most relevant first):\n"
    ));
    for &id in candidates {
        let node = tree.node(id);
        entry(&mut text, &id.to_string(), &node.path, node.kind.word());
    }
    text.push_str(
        "RULES:\n\
         - Select directories to explore deeper, or files if they match the query\n\
         - set done=true ONLY when you've found specific source files that answer the query\n\
         - set done=false if you returned directories that need further exploration\n\
         Return ONE tool call \"rank\" with:\n\
         - ranked_ids: list of candidate ids in best-to-worst order\n\
         - done: true or false\n",
    );
    RankPrompt {
        system: String::new(),
        cached: Vec::new(),
        dynamic: text,
    }
}

/// Block's stable instructions (the static cache segment).
pub const BLOCK_INSTRUCTIONS: &str = "You are navigating a source code repository's directory tree to find files relevant to a query.\n\
The tree is shown in blocks. Each entry in a block has:\n\
- id: a node identifier, local to its block\n\
- path: relative file/directory path (relative to the block's Path prefix, if it has one)\n\
- type: file or directory\n\
RULES:\n\
- Select directories to drill deeper into, or files if they directly match the query\n\
- set done=false if returned directories need further exploration\n\
- Select ONLY ids from the allowed list provided below\n\
Return ONE tool call \"rank\" with:\n\
- ranked_ids: list of candidate ids in best-to-worst order\n\
- done: true ONLY when the returned ids are specific source files\n";

/// The heading before the first block.
pub const TREE_HEADING: &str = "=== REPOSITORY DIRECTORY TREE ===\n";

/// One block as rendered: its text and which node each alias names
/// (`n1` is `nodes[0]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub text: String,
    pub nodes: Vec<NodeId>,
    /// Estimated tokens of `text`.
    pub tokens: usize,
}

impl Block {
    /// The node an alias of this block names.
    pub fn resolve(&self, alias: &str) -> Option<NodeId> {
        let n: usize = alias.trim().strip_prefix('n')?.parse().ok()?;
        self.nodes.get(n.checked_sub(1)?).copied()
    }
}

/// A rough token count for packing: the cheap estimate for text made of
/// paths ([`devboy_core::tokens::estimate_paths`]).
pub fn estimate_tokens(text: &str) -> usize {
    devboy_core::tokens::estimate_paths(text.len())
}

/// The directory every one of `paths` is inside, with its trailing `/`
/// (empty if none).
fn shared_prefix(paths: &[&str]) -> String {
    let Some(first) = paths.first() else {
        return String::new();
    };
    let mut prefix: &str = first.rsplit_once('/').map_or("", |(d, _)| d);
    let inside = |p: &str, dir: &str| p.starts_with(dir) && p[dir.len()..].starts_with('/');
    for p in &paths[1..] {
        while !prefix.is_empty() && !inside(p, prefix) {
            prefix = prefix.rsplit_once('/').map_or("", |(d, _)| d);
        }
    }
    if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    }
}

/// Renders `nodes` as one block, with a `Path prefix:` line when it makes
/// the block shorter.
pub fn block(tree: &Tree, nodes: &[NodeId]) -> Block {
    let paths: Vec<&str> = nodes.iter().map(|&i| tree.node(i).path.as_str()).collect();
    let prefix = shared_prefix(&paths);
    let render = |prefix: &str| {
        let mut text = String::new();
        if !prefix.is_empty() {
            text.push_str("Path prefix: ");
            text.push_str(prefix);
            text.push('\n');
        }
        for (i, &id) in nodes.iter().enumerate() {
            let node = tree.node(id);
            entry(
                &mut text,
                &format!("n{}", i + 1),
                &node.path[prefix.len()..],
                node.kind.word(),
            );
        }
        text
    };
    let plain = render("");
    let text = if prefix.is_empty() {
        plain
    } else {
        let short = render(&prefix);
        if short.len() < plain.len() {
            short
        } else {
            plain
        }
    };
    Block {
        tokens: estimate_tokens(&text),
        text,
        nodes: nodes.to_vec(),
    }
}

/// Packs candidates, in order, into blocks of at most `budget` estimated
/// tokens each (a single entry larger than that gets a block of its own).
pub fn pack(tree: &Tree, candidates: &[NodeId], budget: usize) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Vec<NodeId> = Vec::new();
    let mut tokens = 0;
    for &id in candidates {
        // An entry costs its id, path and type lines.
        let cost = estimate_tokens(&tree.node(id).path) + 12;
        if !current.is_empty() && tokens + cost > budget {
            blocks.push(block(tree, &current));
            current.clear();
            tokens = 0;
        }
        current.push(id);
        tokens += cost;
    }
    if !current.is_empty() {
        blocks.push(block(tree, &current));
    }
    blocks
}

/// A block as one segment of the stable part: its heading and entries.
pub fn block_segment(block: &Block, heading: &str) -> String {
    format!("--- BLOCK {heading} ---\n{}", block.text)
}

/// Block's dynamic message for the current block.
pub fn block_message(
    query: &str,
    top: &[String],
    exploring: &[String],
    current: &Block,
    pick_limit: usize,
) -> String {
    let mut text = format!("Query: {}\nTop candidates so far:\n", query.trim());
    if top.is_empty() {
        text.push_str("- (none yet)\n");
    }
    for path in top {
        text.push_str(&format!("- {path}\n"));
    }
    text.push_str("Current exploration path:\n");
    for path in exploring {
        text.push_str(&format!("- {}\n", if path.is_empty() { "." } else { path }));
    }
    text.push_str(
        "The LAST BLOCK above is the CURRENT BLOCK.\n\
         IDs in each block are local to that block.\n\
         Return only ids from the CURRENT BLOCK.\n\
         Selectable ids in the CURRENT BLOCK:\n",
    );
    for i in 1..=current.nodes.len() {
        text.push_str(&format!("- n{i}\n"));
    }
    text.push_str(&format!(
        "Pick up to {pick_limit} candidates most relevant to the query, best first.\n"
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_directory_is_written_once_as_the_path_prefix() {
        let tree = Tree::from_paths([
            "sympy/core/basic.py",
            "sympy/core/expr.py",
            "sympy/core/numbers.py",
            "sympy/sets/sets.py",
        ]);
        let core = tree.find("sympy/core").expect("core");
        let b = block(&tree, tree.children(core));
        assert!(
            b.text.starts_with(
                "Path prefix: sympy/core/\n- id: n1\n  path: basic.py\n  type: file\n"
            ),
            "{}",
            b.text
        );
        assert_eq!(b.resolve("n2"), tree.find("sympy/core/expr.py"));
        assert_eq!(b.resolve("n4"), None);
        assert_eq!(b.resolve("n0"), None);
        assert_eq!(b.resolve("12"), None);
        // No shared directory: no prefix line.
        let top = block(&tree, tree.children(0));
        assert!(!top.text.contains("Path prefix"), "{}", top.text);
    }

    #[test]
    fn packing_keeps_order_and_bounds_each_block() {
        let paths: Vec<String> = (0..200).map(|i| format!("pkg/module_{i:03}.py")).collect();
        let tree = Tree::from_paths(&paths);
        let pkg = tree.find("pkg").expect("pkg");
        let blocks = pack(&tree, tree.children(pkg), 400);
        assert!(blocks.len() > 3, "{}", blocks.len());
        let flat: Vec<NodeId> = blocks.iter().flat_map(|b| b.nodes.clone()).collect();
        assert_eq!(flat, tree.children(pkg));
        for b in &blocks {
            assert!(b.tokens <= 400, "{} tokens", b.tokens);
        }
    }

    #[test]
    fn the_beam_prompt_lists_candidates_by_node_id() {
        let tree = Tree::from_paths(["a/x.py", "b.py"]);
        let p = beam(&tree, "fix x", tree.children(0), &[], 3);
        assert!(p.dynamic.contains("Query: fix x\n"));
        assert!(
            p.dynamic
                .contains("- id: 1\n  path: a\n  type: directory\n"),
            "{}",
            p.dynamic
        );
        assert!(p.dynamic.contains("pick up to 3"));
    }
}
