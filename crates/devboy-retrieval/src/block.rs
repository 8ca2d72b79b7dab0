//! Block (stated in `docs/retrieval.md`): the frontier's children are packed
//! into token-bounded blocks, each ranked by its own model call (in
//! parallel); the block-local answers are merged keeping each block's
//! order, ordered across blocks by the path ranker if there is one, and
//! split: files fill the results, directories (up to the beam width) are
//! the next frontier.
//!
//! The cache method: every call's stable part is the instructions, then
//! the cache window (blocks of earlier rounds that held the frontier, the
//! first top-level block pinned, the oldest others dropped past
//! [`Options::cache_window_tokens`]), then the current block, each block a
//! segment of its own; only the query and state change per call. A block
//! that held the frontier joins the window as the very segment it was sent
//! as, so the next round's prefix is, segment for segment, the prefix its
//! call had cached (a provider caches whole content blocks). When the model's provider caches, a
//! round of several blocks sends its first call alone, so the others find
//! the shared prefix already cached.

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt as _};

use crate::llm::{Llm, LlmError, RankAnswer};
use crate::order::{constrained, unique, PathScores};
use crate::prompt::{self, RankPrompt};
use crate::tree::{NodeId, Tree};
use crate::{allowed_ids, split_picks, Cost, Options, Retrieval, Round, Strategy};

/// Earlier blocks kept in the stable prefix.
struct CacheWindow {
    /// (segment text, estimated tokens, pinned)
    segments: Vec<(String, usize, bool)>,
    budget: usize,
}

impl CacheWindow {
    fn add(&mut self, segment: String, tokens: usize, pinned: bool) {
        if self.segments.iter().any(|(s, _, _)| *s == segment) {
            return;
        }
        self.segments.push((segment, tokens, pinned));
        while self.segments.iter().map(|(_, t, _)| t).sum::<usize>() > self.budget {
            // Drop the oldest unpinned segment other than the newest.
            let last = self.segments.len() - 1;
            match self.segments[..last].iter().position(|(_, _, p)| !p) {
                Some(i) => {
                    self.segments.remove(i);
                }
                None => break,
            }
        }
    }

    /// The stable part before a current block: the heading, then each
    /// kept block as a segment of its own — exactly as the call that
    /// ranked it sent it, so that call's cached prefix is this one's.
    fn segments(&self) -> Vec<String> {
        std::iter::once(prompt::TREE_HEADING.to_owned())
            .chain(self.segments.iter().map(|(s, _, _)| s.clone()))
            .collect()
    }
}

/// Runs Block.
pub async fn run(
    tree: &Tree,
    query: &str,
    llm: &dyn Llm,
    scores: Option<&PathScores>,
    options: &Options,
) -> Retrieval {
    let k = options.k.max(1);
    let width = options.beam_width.max(1);
    let pick_limit = width.max(k);
    let mut frontier: Vec<NodeId> = vec![tree.collapse(tree.root())];
    let mut found: Vec<NodeId> = Vec::new();
    let mut cost = Cost::default();
    let mut rounds = Vec::new();
    let mut window = CacheWindow {
        segments: Vec::new(),
        budget: options.cache_window_tokens,
    };
    let mut failure = None;
    let started = std::time::Instant::now();
    for turn in 0..options.max_rounds.max(1) {
        if started.elapsed() > options.deadline {
            failure = Some(LlmError::Deadline(options.deadline));
            break;
        }
        let mut candidates: Vec<NodeId> = Vec::new();
        let sources: &[NodeId] = if turn == 0 { &frontier[..1] } else { &frontier };
        for &u in sources {
            for &c in tree.children(u) {
                if !candidates.contains(&c) {
                    candidates.push(c);
                }
            }
        }
        if candidates.is_empty() {
            break;
        }
        let blocks = prompt::pack(tree, &candidates, options.block_tokens.max(1));
        let limit = if blocks.len() == 1 {
            pick_limit
        } else {
            pick_limit.max(2)
        };
        let top: Vec<String> = found.iter().map(|&i| tree.node(i).path.clone()).collect();
        let exploring: Vec<String> = frontier
            .iter()
            .map(|&i| tree.node(i).path.clone())
            .collect();
        let prefix = window.segments();
        let segments: Vec<String> = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| prompt::block_segment(b, &format!("{}.{}", turn + 1, i + 1)))
            .collect();
        let prompts: Vec<RankPrompt> = blocks
            .iter()
            .zip(&segments)
            .map(|(b, segment)| RankPrompt {
                system: prompt::BLOCK_INSTRUCTIONS.to_owned(),
                cached: [prefix.as_slice(), std::slice::from_ref(segment)].concat(),
                dynamic: prompt::block_message(query, &top, &exploring, b, limit),
            })
            .collect();
        let answers = call_all(llm, &prompts).await;
        if answers.iter().all(Result::is_err) {
            // Every call of the round failed: nothing to go on.
            cost.failed_calls += answers.len() as u32;
            failure = answers.into_iter().find_map(Result::err);
            break;
        }
        let mut groups: Vec<Vec<NodeId>> = Vec::with_capacity(blocks.len());
        for (block, answer) in blocks.iter().zip(&answers) {
            match answer {
                Ok(answer) => {
                    cost.answered(answer);
                    groups.push(allowed_ids(answer, limit, &mut cost.invalid_ids, |raw| {
                        block.resolve(raw)
                    }));
                }
                Err(error) => {
                    tracing::warn!(%error, "a block's model call failed; its candidates are skipped");
                    cost.failed_calls += 1;
                    groups.push(Vec::new());
                }
            }
        }
        let merged = constrained(&unique(groups), scores);
        rounds.push(Round {
            candidates: candidates.len(),
            calls: blocks.len(),
            picked: merged.iter().map(|&i| tree.node(i).path.clone()).collect(),
        });
        frontier = split_picks(tree, &merged, &mut found, k, width);
        if found.len() >= k {
            break;
        }
        // The blocks that held the next frontier join the cache window;
        // the first top-level block stays.
        for (i, (block, segment)) in blocks.iter().zip(segments).enumerate() {
            // A frontier node is one of the block's, or (folded) inside one.
            let holds = block
                .nodes
                .iter()
                .any(|&n| frontier.iter().any(|&f| tree.contains(n, f)));
            let pinned = turn == 0 && i == 0;
            if holds || pinned {
                window.add(segment, block.tokens, pinned);
            }
        }
        // The model's `done` is not used: while the frontier has
        // directories to open (every directory here has children) there
        // is more to see, and with none the walk ends; so the frontier
        // alone decides (docs/retrieval.md, Block, step 7).
        if frontier.is_empty() {
            break;
        }
    }
    Retrieval {
        strategy: Strategy::Block,
        files: found.iter().map(|&i| tree.node(i).path.clone()).collect(),
        cost,
        rounds,
        failure,
    }
}

/// All of a round's calls, at most `llm.max_parallel()` at once, answers
/// in block order; with a caching provider the first goes alone.
async fn call_all(llm: &dyn Llm, prompts: &[RankPrompt]) -> Vec<Result<RankAnswer, LlmError>> {
    let mut answers = Vec::with_capacity(prompts.len());
    let mut rest = prompts;
    if llm.caches() && prompts.len() > 1 {
        answers.push(llm.rank(&prompts[0]).await);
        rest = &prompts[1..];
    }
    // Collected first: a lazy `map` closure in the stream would make the
    // future not `Send` for callers that need it (higher-ranked lifetimes).
    let calls: Vec<BoxFuture<'_, Result<RankAnswer, LlmError>>> =
        rest.iter().map(|p| llm.rank(p)).collect();
    let more: Vec<_> = stream::iter(calls)
        .buffered(llm.max_parallel().max(1))
        .collect()
        .await;
    answers.extend(more);
    answers
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::scripted::{offered, Scripted};

    /// `wide/` holds 60 files; `deep/inner/` the gold file.
    fn tree() -> Tree {
        let mut paths: Vec<String> = (0..60).map(|i| format!("wide/f{i:02}.py")).collect();
        paths.push("deep/inner/gold.py".into());
        paths.push("deep/inner/other.py".into());
        paths.push("deep/side.py".into());
        paths.push("README.md".into());
        Tree::from_paths(&paths)
    }

    /// Picks what is, or holds, one of `gold`, and `extra` in every block.
    fn oracle(gold: &'static [&'static str], extra: &'static str) -> Scripted {
        Scripted::new(true, move |p| {
            let mut ids: Vec<String> = offered(p)
                .into_iter()
                .filter(|(_, path)| {
                    gold.iter()
                        .any(|g| g == path || g.starts_with(&format!("{path}/")))
                })
                .map(|(id, _)| id)
                .collect();
            if !extra.is_empty() {
                ids.push(extra.into());
            }
            Ok((ids, Some(true)))
        })
    }

    fn small_blocks(k: usize) -> Options {
        Options {
            k,
            block_tokens: 200,
            ..Options::default()
        }
    }

    #[tokio::test]
    async fn blocks_are_ranked_apart_and_merged_and_the_window_keeps_the_frontier_block() {
        let tree = tree();
        let llm = oracle(&["deep/inner/gold.py", "wide/f45.py"], "n99");
        let found = run(&tree, "q", &llm, None, &small_blocks(2)).await;
        let mut files = found.files.clone();
        files.sort();
        assert_eq!(files, ["deep/inner/gold.py", "wide/f45.py"]);
        let prompts = llm.prompts();
        // Turn 2 opens `deep` and `wide`: 63 entries in several blocks,
        // each its own call, each allowed only its own aliases.
        let turn2 = found.rounds[1].calls;
        assert!(turn2 >= 3, "{:?}", found.rounds);
        assert_eq!(found.cost.calls as usize, prompts.len());
        // Every answer carried an id of no block: counted, ignored.
        assert_eq!(found.cost.invalid_ids as usize, prompts.len());
        for p in &prompts[1..] {
            // The pick limit is max(beam width 3, k 2).
            assert!(
                p.dynamic.contains("Pick up to 3 candidates"),
                "{}",
                p.dynamic
            );
            assert_eq!(p.system, prompt::BLOCK_INSTRUCTIONS);
            let current = p.cached.last().unwrap();
            assert!(current.starts_with("--- BLOCK "), "{current}");
            assert_eq!(p.cached[0], prompt::TREE_HEADING);
        }
        // The third turn's window holds turn 1's block (pinned) and the
        // turn-2 block that held `deep/inner`.
        let last = prompts.last().unwrap();
        let window = &last.cached[1..last.cached.len() - 1];
        assert!(window[0].starts_with("--- BLOCK 1.1 ---"), "{window:?}");
        // The turn-2 block as the very segment turn 2 sent.
        let turn2: Vec<&String> = prompts
            .iter()
            .filter_map(|p| p.cached.last())
            .filter(|c| c.starts_with("--- BLOCK 2."))
            .collect();
        assert!(
            window[1..]
                .iter()
                .any(|w| turn2.contains(&w) && w.contains("inner\n  type: directory")),
            "{window:?}"
        );
    }

    #[tokio::test]
    async fn the_path_ranker_orders_across_blocks_only() {
        let tree = tree();
        // Each block answers its entries in listing order; two files per block.
        let llm = Scripted::new(false, |p| {
            let o = offered(p);
            Ok((
                o.iter().take(2).map(|(id, _)| id.clone()).collect(),
                Some(true),
            ))
        });
        let wide = tree.find("wide").unwrap();
        // The last block's head scores best.
        let files: HashMap<String, f64> = [("wide/f48.py".to_owned(), 5.0)].into();
        let options = Options {
            k: 4,
            block_tokens: 200,
            ..Options::default()
        };
        // Start below the root: a tree of `wide` alone.
        let only_wide = Tree::from_paths(
            tree.children(wide)
                .iter()
                .map(|&c| tree.node(c).path.clone()),
        );
        let scores_wide = PathScores::new(&only_wide, &files);
        let found = run(&only_wide, "q", &llm, Some(&scores_wide), &options).await;
        // The last block's head goes first; its next (scored 0) waits
        // behind the other groups' heads (ties go to the earlier block),
        // but never ahead of f48.
        let picked = &found.rounds[0].picked;
        assert_eq!(
            picked[..4],
            ["wide/f48.py", "wide/f00.py", "wide/f01.py", "wide/f12.py"],
            "{picked:?}"
        );
        let at = |p: &str| picked.iter().position(|x| x == p).unwrap();
        assert!(at("wide/f48.py") < at("wide/f49.py"));
        assert_eq!(found.files, picked[..4]);
    }

    #[tokio::test]
    async fn one_failed_block_is_skipped_and_all_failed_is_an_error() {
        let tree = tree();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let llm = Scripted::new(false, move |p| {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n == 2 {
                return Err(LlmError::Unavailable("down".into()));
            }
            // `wide` at the top, then the first file of each block.
            let ids = offered(p)
                .into_iter()
                .filter(|(_, path)| path == "wide" || path.starts_with("wide/"))
                .map(|(id, _)| id)
                .take(1)
                .collect();
            Ok((ids, None))
        });
        let found = run(&tree, "q", &llm, None, &small_blocks(3)).await;
        assert_eq!(found.cost.failed_calls, 1);
        assert!(!found.files.is_empty());
        let down = Scripted::new(false, |_| Err(LlmError::Unavailable("down".into())));
        let failed = run(&tree, "q", &down, None, &small_blocks(3)).await;
        assert!(failed.failure.is_some());
        assert_eq!(failed.cost.failed_calls, 1);
    }
}
