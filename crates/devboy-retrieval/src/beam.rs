//! Beam (the seed's Algorithm 1): level by level, the children of every
//! current beam form one candidate list for one model call; the files it
//! picks join the results, the directories it picks (up to the beam
//! width) are the next beams.

use crate::llm::{Llm, LlmError};
use crate::prompt;
use crate::tree::{NodeId, Tree};
use crate::{allowed_ids, Cost, Options, Retrieval, Round, Strategy};

/// Runs Beam.
pub async fn run(
    tree: &Tree,
    query: &str,
    llm: &dyn Llm,
    options: &Options,
) -> Result<Retrieval, LlmError> {
    let k = options.k.max(1);
    let width = options.beam_width.max(1);
    let pick_limit = width.max(k);
    let mut beams: Vec<NodeId> = vec![tree.collapse(tree.root())];
    let mut found: Vec<NodeId> = Vec::new();
    let mut cost = Cost::default();
    let mut rounds = Vec::new();
    for _ in 0..=tree.max_depth() {
        let mut candidates: Vec<NodeId> = Vec::new();
        for &beam in &beams {
            let children = tree.children(beam);
            let shown: &[NodeId] = if children.is_empty() {
                std::slice::from_ref(&beam)
            } else {
                children
            };
            for &c in shown {
                if !candidates.contains(&c) {
                    candidates.push(c);
                }
            }
        }
        if candidates.is_empty() {
            break;
        }
        let call = prompt::beam(tree, query, &candidates, &found, pick_limit);
        let answer = llm.rank(&call).await?;
        cost.answered(&answer);
        let picked = allowed_ids(&answer, pick_limit, &mut cost.invalid_ids, |raw| {
            raw.trim()
                .parse::<NodeId>()
                .ok()
                .filter(|id| candidates.contains(id))
        });
        let files: Vec<NodeId> = picked
            .iter()
            .copied()
            .filter(|&i| tree.is_file(i))
            .collect();
        // `done` with only directories picked means keep going.
        let done = answer.done.unwrap_or(false) && !files.is_empty();
        rounds.push(Round {
            candidates: candidates.len(),
            calls: 1,
            picked: picked.iter().map(|&i| tree.node(i).path.clone()).collect(),
        });
        for f in files {
            if !found.contains(&f) && found.len() < k {
                found.push(f);
            }
        }
        if found.len() >= k {
            break;
        }
        beams = picked
            .iter()
            .copied()
            .filter(|&i| !tree.is_file(i))
            .map(|i| tree.collapse(i))
            .take(width)
            .collect();
        if done || beams.is_empty() {
            break;
        }
    }
    Ok(Retrieval {
        strategy: Strategy::Beam,
        files: found.iter().map(|&i| tree.node(i).path.clone()).collect(),
        cost,
        rounds,
    })
}
