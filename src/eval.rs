//! `devboy eval explore`: how much of what an issue needs `explore` puts in
//! front of the model, and at what cost, over a SWE-bench-style dataset.
//!
//! Each row of DATASET (JSON lines) is `{instance_id, repo, base_commit,
//! problem_statement, gold_files}`. The tree at `base_commit` is exported
//! from the git repository at `REPOS/<owner>+<name>` (bare or not, or its
//! `repo/` subfolder) into a temporary directory and indexed cold; explore
//! answers the problem statement; the gold files present in the answer (in
//! full, as an excerpt or as a skeleton) give its recall. The report gives
//! per repository and overall: instances, mean gold-file recall, mean o200k
//! tokens and characters of the answer, mean seconds (index and answer).
//!
//! Several datasets can be measured in one run, each a split named by its
//! file (a tuning set and a validation set never tuned on, so both figures
//! come from the same binary and the same command); each split is
//! reported on its own, and the JSON report also holds all rows together.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};

use crate::find::{FindStrategy, Model};
use serde::{Deserialize, Serialize};

/// One row of the dataset.
#[derive(Debug, Deserialize)]
pub struct Row {
    pub instance_id: String,
    pub repo: String,
    pub base_commit: String,
    pub problem_statement: String,
    pub gold_files: Vec<String>,
}

/// What one instance gave.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub instance_id: String,
    pub repo: String,
    pub recall: f64,
    pub tokens: usize,
    pub chars: usize,
    pub seconds: f64,
    pub files: usize,
    pub found: Vec<String>,
    pub missed: Vec<String>,
}

/// Figures over a set of instances.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub instances: usize,
    pub gold_file_recall: f64,
    pub avg_tokens: f64,
    pub avg_chars: f64,
    pub avg_seconds: f64,
}

fn summarize(outcomes: &[&Outcome]) -> Summary {
    let n = outcomes.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Outcome) -> f64| outcomes.iter().map(|o| f(o)).sum::<f64>() / n;
    Summary {
        instances: outcomes.len(),
        gold_file_recall: mean(&|o| o.recall),
        avg_tokens: mean(&|o| o.tokens as f64),
        avg_chars: mean(&|o| o.chars as f64),
        avg_seconds: mean(&|o| o.seconds),
    }
}

/// Reads the dataset; a bad line is an error naming the file and line.
pub fn read_dataset(path: &Path) -> anyhow::Result<Vec<Row>> {
    let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    let mut rows = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("{}: line {}", path.display(), n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let row: Row = serde_json::from_str(&line)
            .with_context(|| format!("{}: line {}", path.display(), n + 1))?;
        rows.push(row);
    }
    Ok(rows)
}

/// The git repository of `repo` (`owner/name`) under `repos`.
fn repository(repos: &Path, repo: &str) -> anyhow::Result<PathBuf> {
    let dir = repos.join(repo.replace('/', "+"));
    for candidate in [dir.join("repo"), dir.clone()] {
        if candidate.is_dir() {
            return Ok(candidate);
        }
    }
    bail!("{}: no git repository for {repo}", dir.display())
}

/// Exports the tree of `commit` in `repo` into `into`.
fn export(repo: &Path, commit: &str, into: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(into)?;
    let mut archive = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["archive", "--format=tar", commit])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("git archive")?;
    let stdout = archive.stdout.take().context("git archive's output")?;
    let untar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(into)
        .stdin(stdout)
        .stderr(Stdio::piped())
        .output()
        .context("tar")?;
    let archived = archive.wait_with_output()?;
    if !archived.status.success() {
        bail!(
            "git archive {commit} in {}: {}",
            repo.display(),
            String::from_utf8_lossy(&archived.stderr).trim()
        );
    }
    if !untar.status.success() {
        bail!("tar: {}", String::from_utf8_lossy(&untar.stderr).trim());
    }
    Ok(())
}

/// An instance's outcome, grouped by its repository.
trait OfRepo {
    fn repo(&self) -> &str;
}

impl OfRepo for Outcome {
    fn repo(&self) -> &str {
        &self.repo
    }
}

impl OfRepo for FindOutcome {
    fn repo(&self) -> &str {
        &self.repo
    }
}

/// One dataset of an evaluation: its rows and the name it is reported by.
pub struct Split {
    pub name: String,
    pub rows: Vec<Row>,
}

/// Reads every dataset; each is named by its file's stem (numbered when
/// two files share one).
pub fn read_splits(paths: &[PathBuf]) -> anyhow::Result<Vec<Split>> {
    let mut splits: Vec<Split> = Vec::with_capacity(paths.len());
    for path in paths {
        let rows = read_dataset(path)?;
        if rows.is_empty() {
            bail!("{}: no rows", path.display());
        }
        let stem = path.file_stem().map_or_else(
            || "dataset".to_owned(),
            |s| s.to_string_lossy().into_owned(),
        );
        let mut name = stem.clone();
        let mut n = 1;
        while splits.iter().any(|s| s.name == name) {
            n += 1;
            name = format!("{stem}-{n}");
        }
        splits.push(Split { name, rows });
    }
    Ok(splits)
}

/// What a run gave: each outcome with the index of its split, and the
/// rows that failed per split.
struct Run<T> {
    outcomes: Vec<(usize, T)>,
    failures: Vec<usize>,
}

/// Runs `answer` on every row of every split: the row's tree exported at
/// its base commit into a scratch directory and indexed cold (`answer`
/// gets the row, the index and when indexing started), with a progress
/// line per instance (in place on a terminal). A row that fails is named
/// and skipped.
fn run_splits<T>(
    splits: &[Split],
    repos: &Path,
    answer: impl Fn(&Row, &devboy_explore::Index, Instant) -> anyhow::Result<T>,
    progress: impl Fn(&T) -> String,
) -> anyhow::Result<Run<T>> {
    let scratch = std::env::temp_dir().join(format!("devboy-eval-{}", std::process::id()));
    let tty = std::io::stderr().is_terminal();
    let total: usize = splits.iter().map(|s| s.rows.len()).sum();
    let several = splits.len() > 1;
    let mut run = Run {
        outcomes: Vec::with_capacity(total),
        failures: vec![0; splits.len()],
    };
    let mut n = 0;
    for (index, split) in splits.iter().enumerate() {
        for row in &split.rows {
            n += 1;
            let label = if several {
                format!("[{n}/{total}] {}:", split.name)
            } else {
                format!("[{n}/{total}]")
            };
            let one = || -> anyhow::Result<T> {
                let repo = repository(repos, &row.repo)?;
                let tree = scratch.join(&row.instance_id);
                let cache = scratch.join("cache");
                let _ = std::fs::remove_dir_all(&tree);
                export(&repo, &row.base_commit, &tree)?;
                let started = Instant::now();
                let index = devboy_explore::Index::open(&tree, &cache)?;
                let outcome = answer(row, &index, started)?;
                let _ = std::fs::remove_dir_all(&tree);
                let _ = std::fs::remove_dir_all(&cache);
                Ok(outcome)
            };
            match one() {
                Ok(outcome) => {
                    let line = format!("{label} {}", progress(&outcome));
                    if tty {
                        eprint!("\r\x1b[2K{line}");
                    } else {
                        eprintln!("{line}");
                    }
                    run.outcomes.push((index, outcome));
                }
                Err(e) => {
                    run.failures[index] += 1;
                    if tty {
                        eprintln!();
                    }
                    eprintln!("{label} {}: {e:#}", row.instance_id);
                }
            }
        }
    }
    if tty {
        eprintln!();
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if run.outcomes.is_empty() {
        bail!("every instance failed");
    }
    Ok(run)
}

/// `summarize` over each repository's outcomes (by name) and over all.
fn per_repo<T: OfRepo, S>(
    outcomes: &[&T],
    summarize: impl Fn(&[&T]) -> S,
) -> (Vec<(String, S)>, S) {
    let mut names: Vec<&str> = outcomes.iter().map(|o| o.repo()).collect();
    names.sort_unstable();
    names.dedup();
    let repos = names
        .iter()
        .map(|r| {
            let of: Vec<&T> = outcomes
                .iter()
                .copied()
                .filter(|o| o.repo() == *r)
                .collect();
            (r.to_string(), summarize(&of))
        })
        .collect();
    (repos, summarize(outcomes))
}

/// One split's figures: per repository and overall.
struct SplitReport<'a, T, S> {
    name: &'a str,
    outcomes: Vec<&'a T>,
    repos: Vec<(String, S)>,
    overall: S,
    failures: usize,
}

impl<T: OfRepo> Run<T> {
    /// Each split's figures, in the order given.
    fn reports<'a, S>(
        &'a self,
        splits: &'a [Split],
        summarize: impl Fn(&[&T]) -> S + Copy,
    ) -> Vec<SplitReport<'a, T, S>> {
        splits
            .iter()
            .enumerate()
            .map(|(index, split)| {
                let outcomes: Vec<&T> = self
                    .outcomes
                    .iter()
                    .filter(|(i, _)| *i == index)
                    .map(|(_, o)| o)
                    .collect();
                let (repos, overall) = per_repo(&outcomes, summarize);
                SplitReport {
                    name: &split.name,
                    outcomes,
                    repos,
                    overall,
                    failures: self.failures[index],
                }
            })
            .collect()
    }
}

/// A split's table: the header, a line per repository, the overall line.
fn table<T, S>(
    out: &mut impl Write,
    report: &SplitReport<'_, T, S>,
    header: &str,
    line: impl Fn(&str, &S) -> String,
) -> std::io::Result<()> {
    writeln!(out, "{header}")?;
    for (repo, s) in &report.repos {
        writeln!(out, "{}", line(repo, s))?;
    }
    writeln!(out, "{}", line("overall", &report.overall))
}

/// With several splits, their overall lines together.
fn side_by_side<T, S>(
    out: &mut impl Write,
    reports: &[SplitReport<'_, T, S>],
    header: &str,
    line: impl Fn(&str, &S) -> String,
) -> std::io::Result<()> {
    if reports.len() < 2 {
        return Ok(());
    }
    writeln!(out, "side by side:")?;
    writeln!(out, "{}", header.replacen("repo", "split", 1))?;
    for report in reports {
        writeln!(out, "{}", line(report.name, &report.overall))?;
    }
    Ok(())
}

fn repos_json<S: Serialize>(repos: &[(String, S)]) -> anyhow::Result<serde_json::Value> {
    Ok(repos
        .iter()
        .map(|(r, s)| Ok((r.clone(), serde_json::to_value(s)?)))
        .collect::<Result<serde_json::Map<_, _>, serde_json::Error>>()?
        .into())
}

/// The JSON report: `fields`; `overall`, `repos` and `failures` over all
/// rows; `splits` (each split's `overall`, `repos` and `failures`); every
/// instance, with its `split`.
fn write_json<T: Serialize + OfRepo, S: Serialize>(
    mut fields: serde_json::Map<String, serde_json::Value>,
    run: &Run<T>,
    splits: &[Split],
    reports: &[SplitReport<'_, T, S>],
    summarize: impl Fn(&[&T]) -> S,
) -> anyhow::Result<()> {
    let all: Vec<&T> = run.outcomes.iter().map(|(_, o)| o).collect();
    let (repos, overall) = per_repo(&all, summarize);
    fields.insert("overall".into(), serde_json::to_value(&overall)?);
    fields.insert("repos".into(), repos_json(&repos)?);
    fields.insert("failures".into(), run.failures.iter().sum::<usize>().into());
    let mut by_split = serde_json::Map::new();
    for report in reports {
        by_split.insert(
            report.name.to_owned(),
            serde_json::json!({
                "overall": serde_json::to_value(&report.overall)?,
                "repos": repos_json(&report.repos)?,
                "failures": report.failures,
            }),
        );
    }
    fields.insert("splits".into(), by_split.into());
    let mut instances = Vec::with_capacity(run.outcomes.len());
    for (index, outcome) in &run.outcomes {
        let mut value = serde_json::to_value(outcome)?;
        if let Some(object) = value.as_object_mut() {
            object.insert("split".into(), splits[*index].name.clone().into());
        }
        instances.push(value);
    }
    fields.insert("instances".into(), instances.into());
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &fields)?;
    writeln!(out)?;
    Ok(())
}

/// `devboy eval explore`.
pub fn eval_explore(
    datasets: &[PathBuf],
    repos: &Path,
    budget_chars: usize,
    json: bool,
) -> anyhow::Result<()> {
    let splits = read_splits(datasets)?;
    let options = devboy_explore::Options {
        budget_chars,
        adaptive: devboy_core::pipeline_config::ExploreSettings::adaptive_allowed_by_env(),
    };
    let tokenizer = devboy_pipeline::Tokenizer::O200k;
    let run = run_splits(
        &splits,
        repos,
        |row, index, started| {
            let answer = devboy_explore::explore(index, &row.problem_statement, &options);
            let seconds = started.elapsed().as_secs_f64();
            let shown: Vec<&str> = answer.files.iter().map(|f| f.path.as_str()).collect();
            let (found, missed): (Vec<String>, Vec<String>) = row
                .gold_files
                .iter()
                .cloned()
                .partition(|g| shown.contains(&g.as_str()));
            Ok(Outcome {
                instance_id: row.instance_id.clone(),
                repo: row.repo.clone(),
                recall: found.len() as f64 / row.gold_files.len().max(1) as f64,
                tokens: tokenizer.count(&answer.text),
                chars: answer.text.len(),
                seconds,
                files: answer.files.len(),
                found,
                missed,
            })
        },
        |o| {
            format!(
                "{} recall {:.2} · {} tokens · {:.1} s",
                o.instance_id, o.recall, o.tokens, o.seconds
            )
        },
    )?;
    let reports = run.reports(&splits, summarize);
    if json {
        return write_json(serde_json::Map::new(), &run, &splits, &reports, summarize);
    }
    let mut out = std::io::stdout().lock();
    let header = format!(
        "{:<24} {:>9} {:>8} {:>10} {:>10} {:>8}",
        "repo", "instances", "recall", "avg tokens", "avg chars", "avg s"
    );
    let line = |name: &str, s: &Summary| {
        format!(
            "{:<24} {:>9} {:>8.3} {:>10.0} {:>10.0} {:>8.2}",
            name, s.instances, s.gold_file_recall, s.avg_tokens, s.avg_chars, s.avg_seconds
        )
    };
    for report in &reports {
        writeln!(
            out,
            "devboy eval explore, {}: {} instances ({} failed), budget {budget_chars} chars, tokens in o200k",
            report.name,
            report.outcomes.len(),
            report.failures
        )?;
        writeln!(out)?;
        table(&mut out, report, &header, line)?;
        writeln!(out)?;
    }
    side_by_side(&mut out, &reports, &header, line)?;
    Ok(())
}

/// What `find_files` gave for one instance.
#[derive(Debug, Serialize)]
pub struct FindOutcome {
    pub instance_id: String,
    pub repo: String,
    pub recall_at_gold: f64,
    pub exact_at_gold: f64,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    pub mrr: f64,
    pub ndcg_at_10: f64,
    pub files: usize,
    pub seconds: f64,
    /// `offline`, `beam` or `block`: what answered.
    pub strategy: &'static str,
    /// Why a configured model did not answer.
    pub fallback: Option<String>,
    pub llm_calls: u32,
    pub llm_input_tokens: u64,
    pub llm_cached_input_tokens: u64,
    pub llm_output_tokens: u64,
    pub invalid_ids: u32,
    pub ranked: Vec<String>,
}

/// Figures over a set of `find_files` instances.
#[derive(Debug, Serialize)]
pub struct FindSummary {
    pub instances: usize,
    pub recall_at_gold: f64,
    pub exact_at_gold: f64,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    pub mrr: f64,
    pub ndcg_at_10: f64,
    pub avg_files: f64,
    pub avg_seconds: f64,
    /// Per query.
    pub llm_calls: f64,
    /// Per query.
    pub llm_input_tokens: f64,
    /// Per query.
    pub llm_cached_input_tokens: f64,
    /// Per query.
    pub llm_output_tokens: f64,
    /// Queries a configured model did not answer (ranked offline).
    pub fallbacks: usize,
}

/// The ranking metrics of `ranked` against `gold`.
pub fn find_metrics(ranked: &[String], gold: &[String]) -> [f64; 6] {
    let g = gold.len().max(1) as f64;
    let hits_in = |n: usize| ranked.iter().take(n).filter(|p| gold.contains(p)).count() as f64;
    let at_gold = hits_in(gold.len());
    let first = ranked.iter().position(|p| gold.contains(p));
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .filter(|(_, p)| gold.contains(p))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let idcg: f64 = (0..gold.len().min(10))
        .map(|i| 1.0 / ((i + 2) as f64).log2())
        .sum();
    [
        at_gold / g,
        if at_gold as usize == gold.len() {
            1.0
        } else {
            0.0
        },
        hits_in(5) / g,
        hits_in(10) / g,
        first.map_or(0.0, |r| 1.0 / (r + 1) as f64),
        if idcg > 0.0 { dcg / idcg } else { 0.0 },
    ]
}

fn find_summary(outcomes: &[&FindOutcome]) -> FindSummary {
    let n = outcomes.len().max(1) as f64;
    let mean = |f: &dyn Fn(&FindOutcome) -> f64| outcomes.iter().map(|o| f(o)).sum::<f64>() / n;
    FindSummary {
        instances: outcomes.len(),
        recall_at_gold: mean(&|o| o.recall_at_gold),
        exact_at_gold: mean(&|o| o.exact_at_gold),
        recall_at_5: mean(&|o| o.recall_at_5),
        recall_at_10: mean(&|o| o.recall_at_10),
        mrr: mean(&|o| o.mrr),
        ndcg_at_10: mean(&|o| o.ndcg_at_10),
        avg_files: mean(&|o| o.files as f64),
        avg_seconds: mean(&|o| o.seconds),
        llm_calls: mean(&|o| f64::from(o.llm_calls)),
        llm_input_tokens: mean(&|o| o.llm_input_tokens as f64),
        llm_cached_input_tokens: mean(&|o| o.llm_cached_input_tokens as f64),
        llm_output_tokens: mean(&|o| o.llm_output_tokens as f64),
        fallbacks: outcomes.iter().filter(|o| o.fallback.is_some()).count(),
    }
}

/// `devboy eval find-files`: each instance answered as `devboy
/// find-files --strategy STRATEGY` would, with the model of `config`.
pub fn eval_find_files(
    datasets: &[PathBuf],
    repos: &Path,
    k: usize,
    strategy: FindStrategy,
    json: bool,
    config: Option<&Path>,
) -> anyhow::Result<()> {
    let splits = read_splits(datasets)?;
    let model = Model::for_strategy(strategy, config)?;
    let runtime = crate::find::runtime()?;
    // A model returns k files; the offline ranker ranks at least 10
    // (recall@10 needs them).
    let options = devboy_retrieval::Options {
        k: if model.llm().is_some() {
            k.max(1)
        } else {
            k.max(10)
        },
        ..Default::default()
    };
    let run = run_splits(
        &splits,
        repos,
        |row, index, started| {
            let prepared = devboy_retrieval::prepare(index, &row.problem_statement);
            let found = runtime.block_on(devboy_retrieval::find(
                &prepared,
                &row.problem_statement,
                strategy.requested(),
                model.llm(),
                &options,
            ));
            let seconds = started.elapsed().as_secs_f64();
            let found = found?;
            let ranked = found.files;
            let [recall_at_gold, exact_at_gold, recall_at_5, recall_at_10, mrr, ndcg_at_10] =
                find_metrics(&ranked, &row.gold_files);
            let usage = found.llm.usage;
            Ok(FindOutcome {
                instance_id: row.instance_id.clone(),
                repo: row.repo.clone(),
                recall_at_gold,
                exact_at_gold,
                recall_at_5,
                recall_at_10,
                mrr,
                ndcg_at_10,
                files: ranked.len().min(k),
                seconds,
                strategy: found.strategy,
                fallback: found.fallback,
                llm_calls: found.llm.calls,
                llm_input_tokens: usage.input_tokens,
                llm_cached_input_tokens: usage.cached_input_tokens,
                llm_output_tokens: usage.output_tokens,
                invalid_ids: found.llm.invalid_ids,
                ranked,
            })
        },
        |o| {
            format!(
                "{} recall@gold {:.2} · recall@10 {:.2} · {} · {:.1} s",
                o.instance_id, o.recall_at_gold, o.recall_at_10, o.strategy, o.seconds
            )
        },
    )?;
    let reports = run.reports(&splits, find_summary);
    let strategy_name = format!("{strategy:?}").to_lowercase();
    if json {
        let mut fields = serde_json::Map::new();
        fields.insert("strategy".into(), strategy_name.into());
        fields.insert("model".into(), model.llm().map(|l| l.describe()).into());
        fields.insert("k".into(), k.into());
        return write_json(fields, &run, &splits, &reports, find_summary);
    }
    let mut out = std::io::stdout().lock();
    let header = format!(
        "{:<24} {:>5} {:>9} {:>8} {:>8} {:>9} {:>6} {:>8} {:>6} {:>9} {:>9} {:>7}",
        "repo",
        "n",
        "recall@g",
        "exact@g",
        "recall@5",
        "recall@10",
        "mrr",
        "ndcg@10",
        "calls",
        "in tok",
        "cached",
        "out tok"
    );
    let line = |name: &str, s: &FindSummary| {
        format!(
            "{:<24} {:>5} {:>9.3} {:>8.3} {:>8.3} {:>9.3} {:>6.3} {:>8.3} {:>6.1} {:>9.0} {:>9.0} {:>7.0}",
            name,
            s.instances,
            s.recall_at_gold,
            s.exact_at_gold,
            s.recall_at_5,
            s.recall_at_10,
            s.mrr,
            s.ndcg_at_10,
            s.llm_calls,
            s.llm_input_tokens,
            s.llm_cached_input_tokens,
            s.llm_output_tokens
        )
    };
    let model_name = model
        .llm()
        .map_or_else(|| "none".to_owned(), |l| l.describe());
    for report in &reports {
        writeln!(
            out,
            "devboy eval find-files, {}: {} instances ({} failed), strategy {strategy_name}, model {model_name}, k {k}",
            report.name,
            report.outcomes.len(),
            report.failures,
        )?;
        writeln!(out)?;
        table(&mut out, report, &header, line)?;
        if report.overall.fallbacks > 0 {
            writeln!(
                out,
                "{} queries ranked offline because the model failed or picked no file",
                report.overall.fallbacks
            )?;
        }
        writeln!(out)?;
    }
    side_by_side(&mut out, &reports, &header, line)?;
    Ok(())
}
