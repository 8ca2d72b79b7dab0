//! Constrained path order: one list from Block's block-local groups, in
//! which each group keeps the model's order and only the order across
//! groups follows a path ranker.

use std::collections::HashMap;

use crate::tree::{NodeId, Tree};

/// A score for every node: a file's from the ranker (0 when it has none),
/// a directory's the best of the files inside it.
#[derive(Debug, Clone)]
pub struct PathScores {
    scores: Vec<f64>,
}

impl PathScores {
    /// Scores from `files` (path → score; paths not in the tree ignored).
    pub fn new(tree: &Tree, files: &HashMap<String, f64>) -> PathScores {
        let mut scores = vec![0.0; tree.len()];
        fn fill(tree: &Tree, id: NodeId, files: &HashMap<String, f64>, out: &mut [f64]) -> f64 {
            let node = tree.node(id);
            let score = if tree.is_file(id) {
                files.get(&node.path).copied().unwrap_or(0.0)
            } else {
                node.children
                    .iter()
                    .map(|&c| fill(tree, c, files, out))
                    .fold(0.0, f64::max)
            };
            out[id as usize] = score;
            score
        }
        fill(tree, tree.root(), files, &mut scores);
        PathScores { scores }
    }

    /// A node's score.
    pub fn score(&self, id: NodeId) -> f64 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }
}

/// `groups` with every id kept only where it first appears (block order,
/// then each block's order).
pub fn unique(groups: Vec<Vec<NodeId>>) -> Vec<Vec<NodeId>> {
    let mut seen = std::collections::HashSet::new();
    groups
        .into_iter()
        .map(|g| g.into_iter().filter(|id| seen.insert(*id)).collect())
        .collect()
}

/// Merges `groups` into one list: at each step the best-scored head of a
/// group is taken (ties go to the earlier group), so the relative order
/// inside every group is kept. An id already taken is skipped.
pub fn constrained(groups: &[Vec<NodeId>], scores: Option<&PathScores>) -> Vec<NodeId> {
    let mut heads = vec![0usize; groups.len()];
    let mut out: Vec<NodeId> = Vec::new();
    loop {
        let mut best: Option<(usize, f64)> = None;
        for (g, group) in groups.iter().enumerate() {
            while heads[g] < group.len() && out.contains(&group[heads[g]]) {
                heads[g] += 1;
            }
            let Some(&head) = group.get(heads[g]) else {
                continue;
            };
            let score = scores.map_or(0.0, |s| s.score(head));
            if best.is_none_or(|(_, b)| score > b) {
                best = Some((g, score));
            }
            if scores.is_none() {
                break;
            }
        }
        let Some((g, _)) = best else { break };
        out.push(groups[g][heads[g]]);
        heads[g] += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_better_head_goes_first_and_directories_score_their_best_file() {
        let tree = Tree::from_paths(["a/x.py", "a/y.py", "b/z.py", "c.py"]);
        let id = |p: &str| tree.find(p).expect(p);
        let files: HashMap<String, f64> =
            [("b/z.py".to_owned(), 3.0), ("a/y.py".to_owned(), 1.0)].into();
        let scores = PathScores::new(&tree, &files);
        assert_eq!(scores.score(id("a")), 1.0);
        assert_eq!(scores.score(id("b")), 3.0);
        let groups = vec![vec![id("c.py"), id("a")], vec![id("b")]];
        assert_eq!(
            constrained(&groups, Some(&scores)),
            [id("b"), id("c.py"), id("a")]
        );
        // Without a ranker: block order.
        assert_eq!(constrained(&groups, None), [id("c.py"), id("a"), id("b")]);
    }

    proptest! {
        #[test]
        fn every_group_keeps_its_order(
            groups in proptest::collection::vec(proptest::collection::vec(0u32..40, 0..8), 0..6),
            scores in proptest::collection::vec(0.0f64..10.0, 40),
        ) {
            let paths: Vec<String> = (0..40).map(|i| format!("f{i:02}.py")).collect();
            let tree = Tree::from_paths(&paths);
            // Node ids 1..=40 are the files.
            let groups: Vec<Vec<NodeId>> = groups.into_iter().map(|g| g.into_iter().map(|i| i + 1).collect()).collect();
            let groups = unique(groups);
            let files: HashMap<String, f64> = paths.iter().cloned().zip(scores).collect();
            let s = PathScores::new(&tree, &files);
            let merged = constrained(&groups, Some(&s));
            let all: Vec<NodeId> = groups.iter().flatten().copied().collect();
            prop_assert_eq!(merged.len(), all.len());
            for g in &groups {
                let positions: Vec<usize> = g.iter().map(|x| merged.iter().position(|m| m == x).unwrap()).collect();
                prop_assert!(positions.windows(2).all(|w| w[0] < w[1]), "{:?} in {:?}", g, merged);
            }
        }
    }
}
