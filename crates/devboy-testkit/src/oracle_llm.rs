//! A scripted ranking model on loopback that answers `find_files`' rank
//! calls like an oracle: it reads the candidates out of the prompt as a
//! model would (Beam's list, or the current block of Block, `Path prefix`
//! included) and picks those that are, or contain, a gold file.
//!
//! It speaks both wire formats devboy's adapters do — the Anthropic
//! Messages API (`POST /v1/messages`, a forced `rank` tool call) and
//! OpenAI chat completions (`POST …/chat/completions`) — and reports
//! token usage as a provider would (bytes / 4). For the Messages API it
//! keeps a prompt cache as Anthropic describes it: a request's prefix up
//! to each `cache_control` breakpoint is cached when the answer is sent
//! (never while it is still being computed, so concurrent requests miss),
//! a later request whose prefix matches content block for content block
//! (the same texts, split the same way) reads it, and a prefix below
//! [`OracleOptions::min_cache_tokens`] is never cached.
//!
//! Faults for the retry path: the first requests can be answered with
//! given HTTP statuses, and every answer can carry ids that were never
//! offered.

use std::collections::HashSet;
use std::hash::{Hash as _, Hasher as _};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};

use crate::http::{HttpRequest, HttpResponse, LoopbackServer};

/// How the oracle behaves.
#[derive(Debug, Clone)]
pub struct OracleOptions {
    /// The files it steers to.
    pub gold: Vec<String>,
    /// Other gold files for queries equal to a key, else containing one
    /// (first match wins): one oracle for a whole dataset.
    pub gold_by_query: Vec<(String, Vec<String>)>,
    /// Statuses for the first requests, in order (e.g. `[429, 529]`).
    pub fail_first: Vec<u16>,
    /// Time taken per answer.
    pub latency: Duration,
    /// The shortest prefix (in tokens) the cache keeps.
    pub min_cache_tokens: u64,
    /// Ids added to every answer that no call offered.
    pub extra_ids: Vec<String>,
}

impl Default for OracleOptions {
    fn default() -> Self {
        OracleOptions {
            gold: Vec::new(),
            gold_by_query: Vec::new(),
            fail_first: Vec::new(),
            latency: Duration::from_millis(20),
            min_cache_tokens: 1024,
            extra_ids: Vec::new(),
        }
    }
}

/// One request the oracle answered.
#[derive(Debug, Clone)]
pub struct OracleCall {
    /// `anthropic` or `openai`.
    pub api: &'static str,
    /// The request body.
    pub body: Value,
    /// The HTTP status it got.
    pub status: u16,
    /// The ids it returned (empty for a failure).
    pub ranked_ids: Vec<String>,
    /// Input tokens in all, and of them read from the cache.
    pub input_tokens: u64,
    /// Of them, read from the cache.
    pub cached_tokens: u64,
}

struct State {
    options: OracleOptions,
    calls: Vec<OracleCall>,
    cache: HashSet<u64>,
    requests: usize,
}

/// The running oracle; stops when dropped.
pub struct OracleLlm {
    server: LoopbackServer,
    state: Arc<Mutex<State>>,
}

impl OracleLlm {
    /// Starts an oracle.
    pub fn start(options: OracleOptions) -> anyhow::Result<Self> {
        let state = Arc::new(Mutex::new(State {
            options,
            calls: Vec::new(),
            cache: HashSet::new(),
            requests: 0,
        }));
        let handler_state = Arc::clone(&state);
        let server = LoopbackServer::start(
            "oracle-llm",
            Arc::new(move |request: HttpRequest| {
                let state = Arc::clone(&handler_state);
                Box::pin(async move { answer(request, state).await })
            }),
        )?;
        Ok(OracleLlm { server, state })
    }

    /// `http://127.0.0.1:PORT` (Anthropic `base_url`; OpenAI-compatible
    /// clients add `/v1`).
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    /// Steers to other gold files from now on.
    pub fn set_gold(&self, gold: Vec<String>) {
        self.lock().options.gold = gold;
    }

    /// Every request so far.
    pub fn calls(&self) -> Vec<OracleCall> {
        self.lock().calls.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn tokens(bytes: usize) -> u64 {
    bytes.div_ceil(4) as u64
}

/// The texts of a Messages request in prompt order, each with whether a
/// cache breakpoint follows it.
fn anthropic_texts(body: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut blocks = |value: &Value| match value {
        Value::String(s) => out.push((s.clone(), false)),
        Value::Array(items) => {
            for b in items {
                out.push((
                    b["text"].as_str().unwrap_or_default().to_owned(),
                    b.get("cache_control").is_some(),
                ));
            }
        }
        _ => {}
    };
    blocks(&body["system"]);
    for m in body["messages"].as_array().into_iter().flatten() {
        blocks(&m["content"]);
    }
    out
}

/// One candidate read off a prompt: the id to answer with and its path.
struct Candidate {
    id: String,
    path: String,
    file: bool,
}

/// Entries `- id: X / path: P / type: T` in `text`, paths under `prefix`.
fn entries(text: &str, prefix: &str) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(id) = line.strip_prefix("- id: ") else {
            continue;
        };
        let path = lines
            .next()
            .and_then(|l| l.trim().strip_prefix("path: "))
            .unwrap_or_default();
        let kind = lines
            .next()
            .and_then(|l| l.trim().strip_prefix("type: "))
            .unwrap_or_default();
        out.push(Candidate {
            id: id.trim().to_owned(),
            path: format!("{prefix}{path}"),
            file: kind == "file",
        });
    }
    out
}

/// The candidates a rank prompt offers: Beam's list, or Block's current
/// block (the last block before the dynamic message).
fn candidates(text: &str) -> Vec<Candidate> {
    if let Some(query_at) = text.rfind("\nQuery: ").or_else(|| text.find("Query: ")) {
        if text.contains("Selectable ids in the CURRENT BLOCK") {
            let blocks = &text[..query_at];
            let current = blocks.rfind("--- BLOCK ").map_or(blocks, |i| &blocks[i..]);
            let prefix = current
                .lines()
                .find_map(|l| l.strip_prefix("Path prefix: "))
                .unwrap_or_default();
            return entries(current, prefix);
        }
    }
    let list = text
        .split_once("Current candidates")
        .map_or("", |(_, rest)| rest);
    let list = list.split_once("RULES:").map_or(list, |(l, _)| l);
    entries(list, "")
}

/// The oracle's pick: gold files first, then directories holding the most
/// gold files.
fn pick(candidates: &[Candidate], gold: &[String]) -> (Vec<String>, bool) {
    let inside = |dir: &str| {
        gold.iter()
            .filter(|g| g.starts_with(dir) && g[dir.len()..].starts_with('/'))
            .count()
    };
    let mut files: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.file && gold.contains(&c.path))
        .collect();
    files.dedup_by(|a, b| a.id == b.id);
    let mut dirs: Vec<(&Candidate, usize)> = candidates
        .iter()
        .filter(|c| !c.file)
        .map(|c| (c, inside(&c.path)))
        .filter(|(_, n)| *n > 0)
        .collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.1));
    let done = dirs.is_empty() && !files.is_empty();
    let ids = files
        .into_iter()
        .map(|c| c.id.clone())
        .chain(dirs.into_iter().map(|(c, _)| c.id.clone()))
        .collect();
    (ids, done)
}

async fn answer(request: HttpRequest, state: Arc<Mutex<State>>) -> HttpResponse {
    let path = request.target.split('?').next().unwrap_or("").to_owned();
    let api = if path.ends_with("/v1/messages") {
        "anthropic"
    } else if path.ends_with("/chat/completions") {
        "openai"
    } else {
        return HttpResponse::error(404, "not_found_error", &format!("no route {path}"));
    };
    let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
        return HttpResponse::error(400, "invalid_request_error", "body is not JSON");
    };
    let (failure, options) = {
        let mut s = lock(&state);
        let failure = s.options.fail_first.get(s.requests).copied();
        s.requests += 1;
        (failure, s.options.clone())
    };
    if let Some(status) = failure {
        lock(&state).calls.push(OracleCall {
            api,
            body,
            status,
            ranked_ids: Vec::new(),
            input_tokens: 0,
            cached_tokens: 0,
        });
        return HttpResponse::error(status, "overloaded_error", "scripted failure");
    }
    let texts: Vec<(String, bool)> = match api {
        "anthropic" => anthropic_texts(&body),
        _ => body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| (m["content"].as_str().unwrap_or_default().to_owned(), false))
            .collect(),
    };
    let user: String = texts
        .iter()
        .skip_while(|(t, _)| !t.contains("- id: ") && !t.contains("Query: "))
        .map(|(t, _)| t.as_str())
        .collect();
    let offered = candidates(&user);
    let query = user
        .split_once("Query: ")
        .map_or("", |(_, rest)| rest.lines().next().unwrap_or(""));
    let by_query = &options.gold_by_query;
    let gold = by_query
        .iter()
        .find(|(key, _)| query.trim() == key.trim())
        .or_else(|| {
            by_query
                .iter()
                .find(|(key, _)| query.contains(key.as_str()))
        })
        .map_or(&options.gold, |(_, gold)| gold);
    let (mut ids, done) = pick(&offered, gold);
    ids.extend(options.extra_ids.iter().cloned());
    // The cache: prefixes up to each breakpoint.
    let total: usize = texts.iter().map(|(t, _)| t.len()).sum();
    // One running hash over the model and the blocks so far (each block
    // whole: `str`'s hash ends it): each breakpoint's prefix is its value
    // there.
    let mut prefix = std::collections::hash_map::DefaultHasher::new();
    body["model"].as_str().unwrap_or("").hash(&mut prefix);
    let mut bytes = 0;
    let mut breakpoints: Vec<(u64, u64)> = Vec::new();
    for (text, marked) in &texts {
        text.hash(&mut prefix);
        bytes += text.len();
        if *marked && tokens(bytes) >= options.min_cache_tokens {
            breakpoints.push((prefix.finish(), tokens(bytes)));
        }
    }
    let (read, write) = {
        let s = lock(&state);
        let read = breakpoints
            .iter()
            .filter(|(h, _)| s.cache.contains(h))
            .map(|(_, t)| *t)
            .max()
            .unwrap_or(0);
        let last = breakpoints.last().map_or(0, |(_, t)| *t);
        (read, last.saturating_sub(read))
    };
    tokio::time::sleep(options.latency).await;
    let input = tokens(total);
    let output = tokens(json!(ids).to_string().len() + 40);
    {
        let mut s = lock(&state);
        for (h, _) in &breakpoints {
            s.cache.insert(*h);
        }
        s.calls.push(OracleCall {
            api,
            body: body.clone(),
            status: 200,
            ranked_ids: ids.clone(),
            input_tokens: input,
            cached_tokens: read,
        });
    }
    let input_json = json!({"ranked_ids": ids, "done": done});
    let response = match api {
        "anthropic" => json!({
            "id": "msg_oracle",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "tool_use", "id": "toolu_oracle", "name": "rank", "input": input_json}],
            "stop_reason": "tool_use",
            "usage": {
                "input_tokens": input - read - write,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": write,
                "output_tokens": output,
            }
        }),
        _ => json!({
            "id": "chatcmpl-oracle",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [{"id": "call_oracle", "type": "function", "function": {
                    "name": "rank", "arguments": input_json.to_string()
                }}]
            }}],
            "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}
        }),
    };
    HttpResponse::json(200, &response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_block_is_read_with_its_path_prefix() {
        let text = "=== REPOSITORY DIRECTORY TREE ===\n--- BLOCK 1.1 ---\n- id: n1\n  path: pkg\n  type: directory\n--- BLOCK 2.1 ---\nPath prefix: pkg/\n- id: n1\n  path: a.py\n  type: file\n- id: n2\n  path: sub\n  type: directory\nQuery: q\nSelectable ids in the CURRENT BLOCK:\n- n1\n";
        let c = candidates(text);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].path, "pkg/a.py");
        let (ids, done) = pick(&c, &["pkg/sub/b.py".into(), "pkg/a.py".into()]);
        assert_eq!(ids, ["n1", "n2"]);
        assert!(!done);
    }
}
