//! `find_files`' LLM-guided retrieval: a model navigates the repository
//! tree, directory by directory, to the files a query is about. Both
//! retrievers are stated step by step in `docs/retrieval.md`.
//!
//! - [`tree::Tree`]: the repository as directories and files, single-child
//!   directory chains folded, walked as `explore` walks it.
//! - [`beam`]: Beam, for small trees — each turn shows the model the
//!   children of the current beams in one list.
//! - [`block`]: Block, for large trees — each turn packs the frontier's
//!   children into token-bounded blocks, ranked in parallel, each with the
//!   stable part of its prompt (instructions, the blocks seen so far)
//!   cacheable by the provider.
//! - [`order::PathScores`]: the path ranker that orders results across
//!   blocks without changing any block's own order — here devboy's
//!   offline ranker (code graph, BM25 over paths, identifiers in text),
//!   with a directory scored by its best file.
//! - [`find`]: the whole tool — the offline ranking (the answer with no
//!   model, the path ranker with one), the model's retriever, the
//!   fallback when the model fails, and the text the agent reads.
//! - [`llm`]: the models (Anthropic Messages, OpenAI-compatible chat
//!   completions; MCP sampling is adapted in `devboy-mcp`).
//!
//! The key design decision is that a model never sees more than ids, paths
//! and types, and can only pick what it was shown: ids outside a call's
//! allowed list are dropped and counted, never guessed at. What a query
//! cost (calls, input tokens, cached input tokens, output tokens) comes
//! back with its result as data.

pub mod beam;
pub mod block;
pub mod find;
pub mod llm;
pub mod order;
pub mod prompt;
pub mod tree;

use serde::Serialize;

pub use find::{find, prepare, prepare_in, render, FindError, FindResult, Prepared, Requested};
pub use llm::{HttpLlm, Llm, LlmError, RankAnswer, Usage};
pub use order::PathScores;
pub use prompt::RankPrompt;
pub use tree::{Kind, NodeId, Tree};

/// Trees of at most this many nodes are navigated with Beam under `auto`.
pub const BEAM_MAX_NODES: usize = 50;

/// Which retriever navigates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    Beam,
    Block,
}

impl Strategy {
    /// Beam for a tree of at most [`BEAM_MAX_NODES`] nodes, Block above.
    pub fn auto(tree: &Tree) -> Strategy {
        if tree.len() <= BEAM_MAX_NODES {
            Strategy::Beam
        } else {
            Strategy::Block
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Beam => "beam",
            Strategy::Block => "block",
        }
    }
}

/// How a retrieval runs.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Files returned (the final result limit).
    pub k: usize,
    /// Directories explored further each turn.
    pub beam_width: usize,
    /// Block: the most estimated tokens in one block.
    pub block_tokens: usize,
    /// Block: the most estimated tokens of earlier blocks kept in the
    /// cacheable prefix (the cache window).
    pub cache_window_tokens: usize,
    /// Block: the most rounds.
    pub max_rounds: usize,
    /// No round starts after this much time (the rounds already made
    /// count; the query then falls back).
    pub deadline: std::time::Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            k: 10,
            beam_width: 3,
            block_tokens: 4_000,
            cache_window_tokens: 12_000,
            max_rounds: 12,
            deadline: std::time::Duration::from_secs(120),
        }
    }
}

/// What a retrieval cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Cost {
    /// Model calls answered.
    pub calls: u32,
    /// Calls that failed after their retries.
    pub failed_calls: u32,
    /// Attempts beyond the first, over all calls.
    pub retries: u32,
    /// Ids the model returned that were not among the call's candidates
    /// (ignored).
    pub invalid_ids: u32,
    #[serde(flatten)]
    pub usage: Usage,
    /// The first call's usage (the share of cached input after it is what
    /// a cache saves).
    #[serde(skip)]
    pub first: Option<Usage>,
}

impl Cost {
    fn answered(&mut self, answer: &RankAnswer) {
        self.calls += 1;
        self.retries += answer.retries;
        self.usage.add(answer.usage);
        self.first.get_or_insert(answer.usage);
    }

    /// Of the input tokens of every call after the first, the share read
    /// from the provider's cache (`None` with one call or none).
    pub fn cached_share_after_first(&self) -> Option<f64> {
        let first = self.first?;
        let input = self.usage.input_tokens - first.input_tokens;
        (input > 0).then(|| {
            (self.usage.cached_input_tokens - first.cached_input_tokens) as f64 / input as f64
        })
    }
}

/// One turn, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    /// Candidates shown.
    pub candidates: usize,
    /// Calls made (blocks; 1 for Beam).
    pub calls: usize,
    /// What the model picked, merged, as paths.
    pub picked: Vec<String>,
}

/// A retrieval's result.
#[derive(Debug, Serialize)]
pub struct Retrieval {
    pub strategy: Strategy,
    /// The files found, best first, at most `k`.
    pub files: Vec<String>,
    /// What the calls made cost, failed ones included.
    pub cost: Cost,
    pub rounds: Vec<Round>,
    /// Why it stopped before its end: a call that failed (Beam), every
    /// call of a round failed (Block), or the deadline.
    #[serde(skip)]
    pub failure: Option<LlmError>,
}

/// Runs `strategy` over `tree` for `query`.
pub async fn retrieve(
    tree: &Tree,
    query: &str,
    llm: &dyn Llm,
    scores: Option<&PathScores>,
    strategy: Strategy,
    options: &Options,
) -> Retrieval {
    match strategy {
        Strategy::Beam => beam::run(tree, query, llm, options).await,
        Strategy::Block => block::run(tree, query, llm, scores, options).await,
    }
}

/// One turn's picks split as both retrievers split them: files join
/// `found` (in order, each once, up to `k`); directories, folded and cut
/// to `width`, are returned as the next beams / frontier.
fn split_picks(
    tree: &Tree,
    picked: &[NodeId],
    found: &mut Vec<NodeId>,
    k: usize,
    width: usize,
) -> Vec<NodeId> {
    for &f in picked.iter().filter(|&&i| tree.is_file(i)) {
        if found.len() < k && !found.contains(&f) {
            found.push(f);
        }
    }
    picked
        .iter()
        .copied()
        .filter(|&i| !tree.is_file(i))
        .take(width)
        .map(|i| tree.collapse(i))
        .collect()
}

/// The ids of `answer` that name one of `allowed` (through `resolve`),
/// in order, each once, at most `limit`; the rest are counted in
/// `invalid`.
fn allowed_ids(
    answer: &RankAnswer,
    limit: usize,
    invalid: &mut u32,
    resolve: impl Fn(&str) -> Option<NodeId>,
) -> Vec<NodeId> {
    let mut out: Vec<NodeId> = Vec::new();
    for raw in &answer.ranked_ids {
        match resolve(raw) {
            Some(id) if !out.contains(&id) => out.push(id),
            Some(_) => {}
            None => *invalid += 1,
        }
    }
    out.truncate(limit);
    out
}

#[cfg(test)]
pub(crate) mod scripted {
    //! An in-process model for the retrievers' unit tests: answers each
    //! prompt with a function of it, and keeps every prompt.

    use std::sync::Mutex;

    use futures::future::BoxFuture;

    use crate::llm::{Llm, LlmError, RankAnswer, Usage};
    use crate::prompt::RankPrompt;

    type Answer =
        dyn Fn(&RankPrompt) -> Result<(Vec<String>, Option<bool>), LlmError> + Send + Sync;

    pub(crate) struct Scripted {
        answer: Box<Answer>,
        pub(crate) prompts: Mutex<Vec<RankPrompt>>,
        caches: bool,
    }

    impl Scripted {
        pub(crate) fn new(
            caches: bool,
            answer: impl Fn(&RankPrompt) -> Result<(Vec<String>, Option<bool>), LlmError>
                + Send
                + Sync
                + 'static,
        ) -> Self {
            Scripted {
                answer: Box::new(answer),
                prompts: Mutex::new(Vec::new()),
                caches,
            }
        }

        pub(crate) fn prompts(&self) -> Vec<RankPrompt> {
            self.prompts.lock().unwrap().clone()
        }
    }

    impl Llm for Scripted {
        fn rank<'a>(
            &'a self,
            prompt: &'a RankPrompt,
        ) -> BoxFuture<'a, Result<RankAnswer, LlmError>> {
            self.prompts.lock().unwrap().push(prompt.clone());
            let answer = (self.answer)(prompt);
            Box::pin(async move {
                let (ranked_ids, done) = answer?;
                Ok(RankAnswer {
                    ranked_ids,
                    done,
                    usage: Usage {
                        input_tokens: 100,
                        ..Usage::default()
                    },
                    retries: 0,
                })
            })
        }

        fn caches(&self) -> bool {
            self.caches
        }

        fn max_parallel(&self) -> usize {
            2
        }

        fn describe(&self) -> String {
            "scripted".into()
        }
    }

    /// The `- id:` entries of a prompt's current candidates, as (id, path).
    pub(crate) fn offered(prompt: &RankPrompt) -> Vec<(String, String)> {
        let text = prompt.user_text();
        let text = match text.rfind("--- BLOCK ") {
            Some(at) => text[at..].to_owned(),
            None => text,
        };
        let prefix = text
            .lines()
            .find_map(|l| l.strip_prefix("Path prefix: "))
            .unwrap_or("")
            .to_owned();
        let lines: Vec<&str> = text.lines().collect();
        lines
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let id = l.strip_prefix("- id: ")?;
                let path = lines.get(i + 1)?.trim().strip_prefix("path: ")?;
                Some((id.to_owned(), format!("{prefix}{path}")))
            })
            .collect()
    }
}
