//! `find_files` as a whole: the offline ranking (always computed: it is
//! the answer with no model and the path ranker with one), then, when a
//! model is configured, Beam or Block over the tree; and the text the
//! agent reads.
//!
//! Fail open: a model that fails, or picks no file, leaves the offline
//! ranking as the answer, with the reason in it.

use std::collections::HashMap;

use devboy_explore::Index;
use serde::Serialize;

use crate::llm::Llm;
use crate::order::PathScores;
use crate::tree::Tree;
use crate::{retrieve, Cost, Options, Round, Strategy};

/// What the caller asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// The model's retriever for the tree's size if a model is configured,
    /// else offline.
    Auto,
    /// The offline ranker, whatever is configured.
    Offline,
    Beam,
    Block,
}

/// Why `find_files` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    #[error("--strategy {0} navigates the tree with a model, and none was given")]
    NoModel(&'static str),
}

/// What `find_files` needs from disk: read on a blocking thread.
pub struct Prepared {
    pub tree: Tree,
    /// Every file the offline ranker scored, best first.
    pub offline: Vec<devboy_explore::Found>,
    pub scores: PathScores,
}

/// Reads the tree of `index`'s root and ranks its files offline.
pub fn prepare(index: &Index, query: &str) -> Prepared {
    prepare_in(&devboy_explore::graph::Graph::new(index), query)
}

/// [`prepare`] with a graph already joined (a kept one).
pub fn prepare_in(graph: &devboy_explore::graph::Graph<'_>, query: &str) -> Prepared {
    let tree = Tree::from_paths(&graph.index.text_paths);
    let offline = devboy_explore::rank_in(graph, query, usize::MAX);
    let by_path: HashMap<String, f64> = offline.iter().map(|f| (f.path.clone(), f.score)).collect();
    let scores = PathScores::new(&tree, &by_path);
    Prepared {
        tree,
        offline,
        scores,
    }
}

/// A `find_files` answer.
#[derive(Debug, Clone, Serialize)]
pub struct FindResult {
    /// `offline`, `beam` or `block`.
    pub strategy: &'static str,
    /// `provider/model`, when a model navigated.
    pub model: Option<String>,
    /// Best first.
    pub files: Vec<String>,
    /// What the model calls cost (zero offline).
    pub llm: Cost,
    /// Of the input tokens after the first call, the share read from the
    /// provider's cache.
    pub cached_share_after_first: Option<f64>,
    pub rounds: Vec<Round>,
    /// Why a configured model did not give the answer.
    pub fallback: Option<String>,
    /// Nodes of the tree navigated.
    pub tree_nodes: usize,
}

/// Answers `query` with at most `options.k` files.
pub async fn find(
    prepared: &Prepared,
    query: &str,
    requested: Requested,
    llm: Option<&dyn Llm>,
    options: &Options,
) -> Result<FindResult, FindError> {
    let offline = |fallback: Option<String>, llm_cost: Cost| FindResult {
        strategy: "offline",
        model: None,
        files: prepared
            .offline
            .iter()
            .take(options.k)
            .map(|f| f.path.clone())
            .collect(),
        llm: llm_cost,
        cached_share_after_first: None,
        rounds: Vec::new(),
        fallback,
        tree_nodes: prepared.tree.len(),
    };
    let (strategy, llm) = match (requested, llm) {
        (Requested::Offline, _) | (Requested::Auto, None) => {
            return Ok(offline(None, Cost::default()))
        }
        (Requested::Beam, None) => return Err(FindError::NoModel("beam")),
        (Requested::Block, None) => return Err(FindError::NoModel("block")),
        (Requested::Beam, Some(llm)) => (Strategy::Beam, llm),
        (Requested::Block, Some(llm)) => (Strategy::Block, llm),
        (Requested::Auto, Some(llm)) => (Strategy::auto(&prepared.tree), llm),
    };
    let found = retrieve(
        &prepared.tree,
        query,
        llm,
        Some(&prepared.scores),
        strategy,
        options,
    )
    .await;
    let why = match (&found.failure, found.files.is_empty()) {
        (Some(error), _) => {
            tracing::warn!(%error, "find_files: the model failed; ranking offline");
            Some(format!("{} failed: {error}", llm.describe()))
        }
        (None, true) => Some(format!("{} picked no file", llm.describe())),
        (None, false) => None,
    };
    if let Some(why) = why {
        // The calls made still cost what they cost.
        return Ok(offline(Some(why), found.cost));
    }
    Ok(FindResult {
        strategy: found.strategy.name(),
        model: Some(llm.describe()),
        files: found.files,
        cached_share_after_first: found.cost.cached_share_after_first(),
        llm: found.cost,
        rounds: found.rounds,
        fallback: None,
        tree_nodes: prepared.tree.len(),
    })
}

/// What the agent reads.
pub fn render(query: &str, result: &FindResult) -> String {
    let first = query.trim().lines().next().unwrap_or_default();
    let how = match (&result.model, &result.fallback) {
        (Some(model), _) => {
            let u = &result.llm.usage;
            format!(
                "{} over {} nodes with {model}: {} calls, {} input tokens ({} cached), {} output",
                result.strategy,
                result.tree_nodes,
                result.llm.calls,
                u.input_tokens,
                u.cached_input_tokens,
                u.output_tokens
            )
        }
        (None, Some(why)) => format!("offline ranker; {why}"),
        (None, None) => "offline ranker: code graph, paths, text; no model".to_owned(),
    };
    let mut text = format!("# find_files: {first} ({how})\n");
    if result.files.is_empty() {
        text.push_str("No source file matches the question's words.\n");
    }
    for (i, path) in result.files.iter().enumerate() {
        text.push_str(&format!("{}. {path}\n", i + 1));
    }
    text
}
