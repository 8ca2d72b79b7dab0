//! The models that rank: one trait, [`Llm`], and its HTTP adapters — the
//! Anthropic Messages API and any OpenAI-compatible chat-completions
//! endpoint (OpenAI, llama.cpp, Ollama, vLLM). MCP sampling is an adapter
//! too, but it lives with the MCP session (`devboy-mcp`), which holds the
//! client connection.
//!
//! Every call forces one `rank` tool call. The stable segments of a
//! [`RankPrompt`] go as content blocks of their own, marked for
//! Anthropic's prompt cache (`cache_control` after the system text, after
//! the next-to-last segment and after the last); OpenAI-compatible servers cache prefixes by themselves,
//! so they get the same text as one message. A call answered 429 or 5xx,
//! or whose connection failed, is tried again after an exponential backoff
//! (or the server's `retry-after`), up to the configured retries; one not
//! answered in time is not.

use std::time::Duration;

use devboy_core::config::{LlmConfig, LlmProvider};
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{json, Value};

use crate::prompt::{rank_schema, RankPrompt, RANK_DESCRIPTION, RANK_TOOL};

/// What one call cost, in the provider's own token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// All input tokens, cached or not.
    pub input_tokens: u64,
    /// Of them, read from the provider's cache.
    pub cached_input_tokens: u64,
    /// Of them, written to the cache (Anthropic bills these higher).
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    /// Adds another call's usage.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// A model's answer to one ranking call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankAnswer {
    /// The ids it returned, best first, as it wrote them.
    pub ranked_ids: Vec<String>,
    /// Its `done`, if it said.
    pub done: Option<bool>,
    pub usage: Usage,
    /// Attempts beyond the first.
    pub retries: u32,
}

/// Why a ranking call failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("the API key variable {0} is not set")]
    NoKey(String),
    #[error("{url} answered {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: {message}")]
    Transport { url: String, message: String },
    #[error("the model's answer has no usable rank call: {0}")]
    BadAnswer(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("the query ran past its deadline of {} s", .0.as_secs())]
    Deadline(Duration),
}

/// A model that ranks candidates.
pub trait Llm: Send + Sync {
    /// One ranking call.
    fn rank<'a>(&'a self, prompt: &'a RankPrompt) -> BoxFuture<'a, Result<RankAnswer, LlmError>>;

    /// Whether the stable segments are cached by the provider (then Block
    /// sends its first call of a round alone, so the others find the cache
    /// warm).
    fn caches(&self) -> bool {
        false
    }

    /// Most calls at once.
    fn max_parallel(&self) -> usize {
        1
    }

    /// `provider/model`, for reports.
    fn describe(&self) -> String;
}

/// How failed calls are retried.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub max_retries: u32,
    /// The first wait; each next one doubles, up to [`Retry::MAX_WAIT`].
    pub base: Duration,
}

impl Retry {
    /// The longest wait between two attempts.
    pub const MAX_WAIT: Duration = Duration::from_secs(30);

    fn wait(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        retry_after
            .unwrap_or_else(|| self.base.saturating_mul(1 << attempt.min(16)))
            .min(Self::MAX_WAIT)
    }
}

/// An HTTP model: where, how to authenticate, and which wire format.
pub struct HttpLlm {
    provider: LlmProvider,
    model: String,
    url: String,
    key: Option<String>,
    timeout: Duration,
    max_parallel: usize,
    cache: bool,
    pub retry: Retry,
    client: reqwest::Client,
}

/// The Anthropic API's public address.
pub const ANTHROPIC_URL: &str = "https://api.anthropic.com";
/// OpenAI's.
pub const OPENAI_URL: &str = "https://api.openai.com/v1";

impl HttpLlm {
    /// The adapter a config asks for, its key read from this process's
    /// environment, or why it cannot be used, as `find_files` says it.
    pub fn from_env(config: &LlmConfig) -> Result<HttpLlm, String> {
        Self::from_config(config, &|var| std::env::var(var).ok())
            .map_err(|error| format!("[retrieval.llm]: {error}"))
    }

    /// The adapter a config asks for; `env` reads the key's variable.
    /// MCP sampling is not an HTTP model (see the module doc).
    pub fn from_config(
        config: &LlmConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HttpLlm, LlmError> {
        let key = match config.api_key_env.as_deref().filter(|v| !v.is_empty()) {
            Some(var) => Some(
                env(var)
                    .filter(|k| !k.trim().is_empty())
                    .ok_or_else(|| LlmError::NoKey(var.to_owned()))?,
            ),
            None => None,
        };
        let base = |default: &str| {
            config
                .base_url
                .as_deref()
                .unwrap_or(default)
                .trim_end_matches('/')
                .to_owned()
        };
        let url = match config.provider {
            LlmProvider::Anthropic => {
                let base = base(ANTHROPIC_URL);
                if base.ends_with("/v1") {
                    format!("{base}/messages")
                } else {
                    format!("{base}/v1/messages")
                }
            }
            LlmProvider::OpenAi => format!("{}/chat/completions", base(OPENAI_URL)),
            LlmProvider::Sampling => {
                return Err(LlmError::Unavailable(
                    "mcp-sampling is the MCP client's model; only devboy_find_files can use it"
                        .into(),
                ))
            }
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| LlmError::Transport {
                url: url.clone(),
                message: e.to_string(),
            })?;
        Ok(HttpLlm {
            provider: config.provider,
            model: config.model.clone(),
            url,
            key,
            timeout: config.timeout,
            max_parallel: config.max_parallel.max(1),
            cache: config.cache,
            retry: Retry {
                max_retries: config.max_retries,
                base: Duration::from_millis(500),
            },
            client,
        })
    }

    /// The endpoint as errors show it: no query string (a key may be in
    /// one).
    fn shown_url(&self) -> String {
        self.url
            .split(['?', '#'])
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    fn body(&self, prompt: &RankPrompt) -> Value {
        match self.provider {
            LlmProvider::Anthropic => {
                let mark = |mut block: Value| {
                    if self.cache {
                        block["cache_control"] = json!({"type": "ephemeral"});
                    }
                    block
                };
                // Breakpoints (at most four a request): after the system
                // text, after the stable part before the last segment (the
                // prefix a round's calls share), after the last segment.
                let n = prompt.cached.len();
                let mut content: Vec<Value> = prompt
                    .cached
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let block = json!({"type": "text", "text": s});
                        if i + 2 >= n {
                            mark(block)
                        } else {
                            block
                        }
                    })
                    .collect();
                content.push(json!({"type": "text", "text": prompt.dynamic}));
                let mut body = json!({
                    "model": self.model,
                    "max_tokens": 1024,
                    "messages": [{"role": "user", "content": content}],
                    "tools": [{
                        "name": RANK_TOOL,
                        "description": RANK_DESCRIPTION,
                        "input_schema": rank_schema(),
                    }],
                    "tool_choice": {"type": "tool", "name": RANK_TOOL},
                });
                if !prompt.system.is_empty() {
                    body["system"] = json!([mark(json!({"type": "text", "text": prompt.system}))]);
                }
                body
            }
            _ => {
                let mut messages = Vec::new();
                if !prompt.system.is_empty() {
                    messages.push(json!({"role": "system", "content": prompt.system}));
                }
                messages.push(json!({"role": "user", "content": prompt.user_text()}));
                json!({
                    "model": self.model,
                    "messages": messages,
                    "tools": [{"type": "function", "function": {
                        "name": RANK_TOOL,
                        "description": RANK_DESCRIPTION,
                        "parameters": rank_schema(),
                    }}],
                    // With one tool, "required" forces it, and more
                    // OpenAI-compatible servers (llama.cpp, vLLM) take it
                    // than a named choice.
                    "tool_choice": "required",
                })
            }
        }
    }

    async fn post(&self, body: &Value) -> Result<(Value, u32), LlmError> {
        let mut attempt = 0;
        loop {
            let mut request = self
                .client
                .post(&self.url)
                .timeout(self.timeout)
                .header("content-type", "application/json")
                .body(body.to_string());
            match (&self.key, self.provider) {
                (Some(key), LlmProvider::Anthropic) => request = request.header("x-api-key", key),
                (Some(key), _) => request = request.bearer_auth(key),
                (None, _) => {}
            }
            if self.provider == LlmProvider::Anthropic {
                request = request.header("anthropic-version", "2023-06-01");
            }
            let (error, retry_after) = match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let retry_after = response
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .and_then(|s| Duration::try_from_secs_f64(s).ok());
                    let text = response.text().await.unwrap_or_default();
                    if (200..300).contains(&status) {
                        return serde_json::from_str(&text)
                            .map(|v| (v, attempt))
                            .map_err(|e| LlmError::BadAnswer(format!("not JSON ({e})")));
                    }
                    let error = LlmError::Status {
                        url: self.shown_url(),
                        status,
                        // One line: it ends up in the answer's first line.
                        body: text
                            .chars()
                            .take(300)
                            .map(|c| if c.is_control() { ' ' } else { c })
                            .collect(),
                    };
                    if status != 429 && status < 500 {
                        return Err(error);
                    }
                    (error, retry_after)
                }
                // A call that timed out is not sent again: a model that
                // slow would only make the agent wait longer for the
                // offline answer.
                Err(e) if e.is_timeout() => {
                    return Err(LlmError::Transport {
                        url: self.shown_url(),
                        message: format!("no answer in {} ms", self.timeout.as_millis()),
                    })
                }
                Err(e) => (
                    LlmError::Transport {
                        url: self.shown_url(),
                        message: e.without_url().to_string(),
                    },
                    None,
                ),
            };
            if attempt >= self.retry.max_retries {
                return Err(error);
            }
            tracing::debug!(%error, attempt, "model call failed; retrying");
            tokio::time::sleep(self.retry.wait(attempt, retry_after)).await;
            attempt += 1;
        }
    }
}

/// The `rank` call's input from a JSON value or a JSON text.
fn rank_input(input: &Value) -> Result<(Vec<String>, Option<bool>), LlmError> {
    let input = match input {
        Value::String(text) => serde_json::from_str(text)
            .map_err(|e| LlmError::BadAnswer(format!("rank arguments are not JSON ({e})")))?,
        other => other.clone(),
    };
    let ids = input
        .get("ranked_ids")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::BadAnswer("rank has no ranked_ids array".into()))?
        .iter()
        .filter_map(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .collect();
    Ok((ids, input.get("done").and_then(Value::as_bool)))
}

/// The `rank` arguments written as a JSON object in a text (a model with
/// no tool calling, MCP sampling).
pub fn rank_from_text(text: &str) -> Result<(Vec<String>, Option<bool>), LlmError> {
    let json = text
        .find('{')
        .and_then(|start| {
            let end = text.rfind('}').filter(|&end| end > start)?;
            Some(&text[start..=end])
        })
        .ok_or_else(|| LlmError::BadAnswer("no rank call and no JSON object".into()))?;
    rank_input(&Value::String(json.to_owned()))
}

/// What a model with no tool calling is told to write instead.
pub const RANK_AS_TEXT: &str = "\nAnswer with only the rank call's arguments as one JSON object: {\"ranked_ids\": [\"<id>\", ...], \"done\": true|false}\n";

fn count(value: &Value, path: &[&str]) -> u64 {
    let mut v = value;
    for p in path {
        v = &v[*p];
    }
    v.as_u64().unwrap_or(0)
}

/// Reads an Anthropic Messages response.
fn anthropic_answer(response: &Value) -> Result<RankAnswer, LlmError> {
    let call = response["content"]
        .as_array()
        .and_then(|blocks| {
            blocks
                .iter()
                .find(|b| b["type"] == "tool_use" && b["name"] == RANK_TOOL)
        })
        .ok_or_else(|| LlmError::BadAnswer("no rank tool_use block".into()))?;
    let (ranked_ids, done) = rank_input(&call["input"])?;
    let usage = &response["usage"];
    let (plain, read, write) = (
        count(usage, &["input_tokens"]),
        count(usage, &["cache_read_input_tokens"]),
        count(usage, &["cache_creation_input_tokens"]),
    );
    Ok(RankAnswer {
        ranked_ids,
        done,
        usage: Usage {
            input_tokens: plain + read + write,
            cached_input_tokens: read,
            cache_write_tokens: write,
            output_tokens: count(usage, &["output_tokens"]),
        },
        retries: 0,
    })
}

/// Reads a chat-completions response: the `rank` tool call, or (servers
/// without tool calling) a JSON object in the message text.
fn openai_answer(response: &Value) -> Result<RankAnswer, LlmError> {
    let message = &response["choices"][0]["message"];
    let from_call = message["tool_calls"].as_array().and_then(|calls| {
        calls
            .iter()
            .find(|c| c["function"]["name"] == RANK_TOOL)
            .map(|c| rank_input(&c["function"]["arguments"]))
    });
    let (ranked_ids, done) = match from_call {
        Some(parsed) => parsed?,
        None => rank_from_text(message["content"].as_str().unwrap_or_default())?,
    };
    let usage = &response["usage"];
    Ok(RankAnswer {
        ranked_ids,
        done,
        usage: Usage {
            input_tokens: count(usage, &["prompt_tokens"]),
            cached_input_tokens: count(usage, &["prompt_tokens_details", "cached_tokens"]),
            cache_write_tokens: 0,
            output_tokens: count(usage, &["completion_tokens"]),
        },
        retries: 0,
    })
}

impl Llm for HttpLlm {
    fn rank<'a>(&'a self, prompt: &'a RankPrompt) -> BoxFuture<'a, Result<RankAnswer, LlmError>> {
        Box::pin(async move {
            let (response, retries) = self.post(&self.body(prompt)).await?;
            let mut answer = match self.provider {
                LlmProvider::Anthropic => anthropic_answer(&response),
                _ => openai_answer(&response),
            }?;
            answer.retries = retries;
            Ok(answer)
        })
    }

    fn caches(&self) -> bool {
        self.cache && self.provider == LlmProvider::Anthropic
    }

    fn max_parallel(&self) -> usize {
        self.max_parallel
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.provider.name(), self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_from_both_wire_formats() {
        let a = anthropic_answer(&json!({
            "content": [{"type": "text", "text": "x"}, {"type": "tool_use", "name": "rank", "input": {"ranked_ids": ["n2", "n1"], "done": true}}],
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 0, "output_tokens": 7}
        }))
        .expect("anthropic");
        assert_eq!(a.ranked_ids, ["n2", "n1"]);
        assert_eq!(a.done, Some(true));
        assert_eq!(a.usage.input_tokens, 910);
        assert_eq!(a.usage.cached_input_tokens, 900);
        let o = openai_answer(&json!({
            "choices": [{"message": {"tool_calls": [{"function": {"name": "rank", "arguments": "{\"ranked_ids\":[\"3\",4]}"}}]}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 32}}
        }))
        .expect("openai");
        assert_eq!(o.ranked_ids, ["3", "4"]);
        assert_eq!(o.done, None);
        assert_eq!(o.usage.cached_input_tokens, 32);
        let text = openai_answer(&json!({
            "choices": [{"message": {"content": "Here: {\"ranked_ids\": [\"n1\"], \"done\": false}"}}]
        }))
        .expect("json in text");
        assert_eq!(text.ranked_ids, ["n1"]);
        assert!(openai_answer(&json!({"choices": [{"message": {"content": "no"}}]})).is_err());
        // A truncated answer whose last `}` comes before its first `{`.
        assert!(rank_from_text("ok } then {\"ranked_ids\": [\"n1\"").is_err());
        assert!(rank_from_text("}{").is_err());
    }

    #[test]
    fn a_missing_key_is_named() {
        let config = LlmConfig {
            provider: LlmProvider::Anthropic,
            model: "m".into(),
            base_url: None,
            api_key_env: Some("DEVBOY_TEST_NO_SUCH_KEY".into()),
            timeout: Duration::from_secs(1),
            max_parallel: 2,
            max_retries: 0,
            cache: true,
        };
        let error = HttpLlm::from_config(&config, &|_| None)
            .err()
            .expect("no key")
            .to_string();
        assert!(error.contains("DEVBOY_TEST_NO_SUCH_KEY"), "{error}");
    }

    #[test]
    fn backoff_doubles_and_respects_retry_after_within_the_cap() {
        let retry = Retry {
            max_retries: 5,
            base: Duration::from_millis(100),
        };
        assert_eq!(retry.wait(0, None), Duration::from_millis(100));
        assert_eq!(retry.wait(3, None), Duration::from_millis(800));
        assert_eq!(
            retry.wait(0, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            retry.wait(0, Some(Duration::from_secs(600))),
            Retry::MAX_WAIT
        );
    }
}
