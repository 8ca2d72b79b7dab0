//! Beam (stated in `docs/retrieval.md`): level by level, the children of every
//! current beam form one candidate list for one model call; the files it
//! picks join the results, the directories it picks (up to the beam
//! width) are the next beams.

use crate::llm::{Llm, LlmError};
use crate::prompt;
use crate::tree::{NodeId, Tree};
use crate::{allowed_ids, split_picks, Cost, Options, Retrieval, Round, Strategy};

/// Runs Beam.
pub async fn run(tree: &Tree, query: &str, llm: &dyn Llm, options: &Options) -> Retrieval {
    let k = options.k.max(1);
    let width = options.beam_width.max(1);
    let pick_limit = width.max(k);
    let mut beams: Vec<NodeId> = vec![tree.collapse(tree.root())];
    let mut found: Vec<NodeId> = Vec::new();
    let mut cost = Cost::default();
    let mut rounds = Vec::new();
    let mut failure = None;
    let started = std::time::Instant::now();
    for _ in 0..=tree.max_depth() {
        if started.elapsed() > options.deadline {
            failure = Some(LlmError::Deadline(options.deadline));
            break;
        }
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
        let answer = match llm.rank(&call).await {
            Ok(answer) => answer,
            Err(error) => {
                cost.failed_calls += 1;
                failure = Some(error);
                break;
            }
        };
        cost.answered(&answer);
        let picked = allowed_ids(&answer, pick_limit, &mut cost.invalid_ids, |raw| {
            raw.trim()
                .parse::<NodeId>()
                .ok()
                .filter(|id| candidates.contains(id))
        });
        // `done` with only directories picked means keep going.
        let done = answer.done.unwrap_or(false) && picked.iter().any(|&i| tree.is_file(i));
        rounds.push(Round {
            candidates: candidates.len(),
            calls: 1,
            picked: picked.iter().map(|&i| tree.node(i).path.clone()).collect(),
        });
        beams = split_picks(tree, &picked, &mut found, k, width);
        if found.len() >= k || done || beams.is_empty() {
            break;
        }
    }
    Retrieval {
        strategy: Strategy::Beam,
        files: found.iter().map(|&i| tree.node(i).path.clone()).collect(),
        cost,
        rounds,
        failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted::{offered, Scripted};

    fn tree() -> Tree {
        Tree::from_paths([
            "a/x.py", "a/y.py", "b/z.py", "c/w.py", "d/v.py", "e/u.py", "top.py",
        ])
    }

    /// Picks every offered directory, and the files named in `files`.
    fn picker(files: &'static [&'static str], done: bool) -> Scripted {
        Scripted::new(false, move |p| {
            let o = offered(p);
            let mut ids: Vec<String> = o
                .iter()
                .filter(|(_, path)| files.contains(&path.as_str()))
                .map(|(id, _)| id.clone())
                .collect();
            ids.extend(
                o.iter()
                    .filter(|(_, path)| !path.ends_with(".py"))
                    .map(|(id, _)| id.clone()),
            );
            Ok((ids, Some(done)))
        })
    }

    #[tokio::test]
    async fn done_with_only_directories_goes_on_and_the_beam_is_cut_to_its_width() {
        let tree = tree();
        let llm = picker(&["c/w.py"], true);
        let options = Options {
            k: 5,
            beam_width: 2,
            ..Options::default()
        };
        let found = run(&tree, "q", &llm, &options).await;
        let prompts = llm.prompts();
        // Turn 1 said done with directories only: a second turn, showing
        // the children of the first two directories (width 2) only.
        assert_eq!(prompts.len(), 2);
        let second: Vec<String> = offered(&prompts[1]).into_iter().map(|(_, p)| p).collect();
        assert_eq!(second, ["a/x.py", "a/y.py", "b/z.py"]);
        assert!(found.files.is_empty(), "{:?}", found.files);
        assert!(prompts[0].dynamic.contains("pick up to 5"));
    }

    #[tokio::test]
    async fn a_file_with_done_stops_and_foreign_ids_are_counted() {
        let tree = tree();
        let llm = Scripted::new(false, |p| {
            let o = offered(p);
            let mut ids: Vec<String> = o
                .iter()
                .filter(|(_, path)| path == "a" || path == "a/y.py")
                .map(|(id, _)| id.clone())
                .collect();
            ids.push("999".into());
            ids.push("n1".into());
            Ok((ids, Some(true)))
        });
        let found = run(&tree, "q", &llm, &Options::default()).await;
        assert_eq!(found.files, ["a/y.py"]);
        assert_eq!(found.cost.calls, 2);
        assert_eq!(found.cost.invalid_ids, 4);
    }
}
