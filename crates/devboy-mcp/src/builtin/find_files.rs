//! `devboy_find_files`: the files a task or an issue is about, ranked.
//! With a model configured (`[retrieval.llm]`: Anthropic, an
//! OpenAI-compatible server, or the client's own model through MCP
//! sampling) it navigates the project's tree, Beam or Block
//! ([`devboy_retrieval`]); with none, or when the model fails, the offline
//! ranker answers (the code graph, the paths, the text). Its result goes
//! through the pipeline like any other; what the model calls cost goes to
//! telemetry as counts.

use std::sync::Arc;
use std::time::Instant;

use devboy_core::config::{LlmConfig, LlmProvider};
use devboy_retrieval::{HttpLlm, Llm, Requested};
use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::ErrorData as McpError;
use serde_json::json;

use super::code::{failure, from_index, query_and_root};
use super::roots::AllowedRoots;
use super::sampling::SamplingLlm;
use super::{annotations, definition, BuiltinContext, BuiltinTool};

/// The `devboy_find_files` tool.
pub(super) struct FindFiles {
    llm: Option<LlmConfig>,
    /// The HTTP model, made once (its client, its key), or why it cannot
    /// be; `None` for MCP sampling or no model.
    http: Option<Result<Arc<HttpLlm>, String>>,
    roots: AllowedRoots,
}

impl FindFiles {
    /// The tool, navigating with `llm` when there is one, reading where
    /// `roots` allows.
    pub(crate) fn new(llm: Option<LlmConfig>, roots: AllowedRoots) -> Self {
        let http = llm
            .as_ref()
            .filter(|config| config.provider != LlmProvider::Sampling)
            .map(|config| HttpLlm::from_env(config).map(Arc::new));
        Self { llm, http, roots }
    }
}

/// The most files a call may ask for.
const MAX_K: u64 = 100;

impl FindFiles {
    /// The model this call navigates with, or why there is none.
    fn model(&self, context: &BuiltinContext<'_>) -> (Option<Arc<dyn Llm>>, Option<String>) {
        let Some(config) = &self.llm else {
            return (None, None);
        };
        match config.provider {
            LlmProvider::Sampling => {
                let Some(peer) = context.client() else {
                    return (None, Some("no client to sample from".into()));
                };
                let offers = peer
                    .peer_info()
                    .is_some_and(|info| info.capabilities.sampling.is_some());
                if !offers {
                    return (
                        None,
                        Some("[retrieval.llm] is mcp-sampling, and this client does not offer sampling".into()),
                    );
                }
                (Some(Arc::new(SamplingLlm::new(peer.clone(), config))), None)
            }
            _ => match &self.http {
                Some(Ok(llm)) => (Some(llm.clone()), None),
                Some(Err(why)) => (None, Some(why.clone())),
                None => (None, None),
            },
        }
    }
}

impl BuiltinTool for FindFiles {
    fn definition(&self) -> Tool {
        definition(
            "devboy_find_files",
            "The project's files a task or issue is about, best first, from its text (stack traces, names and paths help). Use it before listing directories to guess.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The task or issue text"},
                    "root": {"type": "string", "description": "Source tree (default: project)"},
                    "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "description": "How many files (default 10)"}
                },
                "required": ["query"]
            }),
        )
        .with_annotations(annotations("Find the relevant files", true))
    }

    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        // Within the schema's bounds: the call path checked it.
        let k = context
            .arguments
            .and_then(|a| a.get("k"))
            .and_then(serde_json::Value::as_u64)
            .map_or(10, |k| k as usize);
        let (llm, unusable) = self.model(&context);
        Box::pin(async move {
            let (query, root) = match query_and_root(
                &context,
                &self.roots,
                "devboy_find_files",
                "the task or issue text",
            )
            .await
            {
                Ok(call) => call,
                Err(failed) => return Ok(failed),
            };
            let started = Instant::now();
            let prepared_query = query.clone();
            let prepared = match from_index(
                "devboy_find_files",
                root,
                move |kept: &devboy_explore::Kept| {
                    devboy_retrieval::prepare_in(kept.graph(), &prepared_query)
                },
            )
            .await
            {
                Ok(prepared) => prepared,
                Err(failed) => return Ok(failed),
            };
            let options = devboy_retrieval::Options {
                k,
                ..Default::default()
            };
            let finding = devboy_retrieval::find(
                &prepared,
                &query,
                Requested::Auto,
                llm.as_deref(),
                &options,
            );
            // The agent's cancellation stops the model's calls too.
            let found = tokio::select! {
                found = finding => found,
                () = context.ct.cancelled() => {
                    return Ok(failure("devboy_find_files: cancelled".to_owned()));
                }
            };
            let mut found = match found {
                Ok(found) => found,
                Err(e) => return Ok(failure(format!("devboy_find_files: {e}"))),
            };
            if found.fallback.is_none() {
                found.fallback = unusable;
            }
            let provider = self.llm.as_ref().map(|l| l.provider);
            context.record(crate::seam::SessionEvent::Retrieval(retrieval_record(
                &found,
                provider,
                started.elapsed(),
            )));
            Ok(CallToolResult::success(vec![ContentBlock::text(
                devboy_retrieval::render(&query, &found),
            )]))
        })
    }
}

/// A `find_files` answer as telemetry records it: how it was answered and
/// what it cost, as counts; `provider` is the configured model's API.
fn retrieval_record(
    found: &devboy_retrieval::FindResult,
    provider: Option<devboy_core::config::LlmProvider>,
    took: std::time::Duration,
) -> devboy_telemetry::RetrievalRecord {
    let provider = provider.map(|p| std::borrow::Cow::Borrowed(p.name()));
    let cost = &found.llm;
    devboy_telemetry::RetrievalRecord {
        strategy: std::borrow::Cow::Borrowed(found.strategy),
        fell_back: provider.is_some() && found.model.is_none(),
        provider,
        files: found.files.len() as u32,
        tree_nodes: found.tree_nodes as u64,
        calls: cost.calls,
        failed_calls: cost.failed_calls,
        retries: cost.retries,
        invalid_ids: cost.invalid_ids,
        input_tokens: cost.usage.input_tokens,
        cached_input_tokens: cost.usage.cached_input_tokens,
        cache_write_tokens: cost.usage.cache_write_tokens,
        output_tokens: cost.usage.output_tokens,
        ms: took.as_millis() as u64,
        ..Default::default()
    }
}
