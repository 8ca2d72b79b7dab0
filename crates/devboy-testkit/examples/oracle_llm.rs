//! `cargo run -p devboy-testkit --example oracle_llm -- DATASET.jsonl`:
//! serves the oracle ranking model on loopback for a SWE-bench-style
//! dataset (each row's `gold_files`, found by the first line of its
//! `problem_statement`), so `devboy eval find-files --strategy beam|block
//! --config FILE` can be measured on real repositories. Prints the
//! `[retrieval.llm]` section to use, then serves until stdin closes.

use std::io::BufRead as _;

use devboy_testkit::{OracleLlm, OracleOptions};

fn main() -> anyhow::Result<()> {
    let dataset = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: oracle_llm DATASET.jsonl"))?;
    let mut gold_by_query = Vec::new();
    for line in std::fs::read_to_string(&dataset)?.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let row: serde_json::Value = serde_json::from_str(line)?;
        let key = row["problem_statement"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        let gold = row["gold_files"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(str::to_owned))
            .collect();
        if !key.is_empty() {
            gold_by_query.push((key, gold));
        }
    }
    let oracle = OracleLlm::start(OracleOptions {
        gold_by_query,
        latency: std::time::Duration::from_millis(5),
        ..OracleOptions::default()
    })?;
    println!(
        "[retrieval.llm]\nprovider = \"anthropic\"\nmodel = \"oracle\"\nbase_url = \"{}\"\napi_key_env = \"ORACLE_KEY\"",
        oracle.base_url()
    );
    for _ in std::io::stdin().lock().lines() {}
    let calls = oracle.calls();
    let cached: u64 = calls.iter().map(|c| c.cached_tokens).sum();
    let input: u64 = calls.iter().map(|c| c.input_tokens).sum();
    eprintln!(
        "oracle: {} calls, {input} input tokens, {cached} read from the cache",
        calls.len()
    );
    Ok(())
}
