//! `find_files`' model through MCP sampling: the connected client's own
//! model answers the rank calls (`sampling/createMessage`), for clients
//! that offer it (Claude Code does not).
//!
//! The newest MCP revision deprecates sampling (SEP-2577) and rmcp marks
//! its types so; clients in use still offer it, so this module allows the
//! deprecation, and only this module.
#![allow(deprecated)]

use std::time::Duration;

use devboy_core::config::LlmConfig;
use devboy_retrieval::llm::{rank_from_text, RANK_AS_TEXT};
use devboy_retrieval::{Llm, LlmError, RankAnswer, RankPrompt, Usage};
use futures::future::BoxFuture;
use rmcp::model::{CreateMessageRequestParams, ModelHint, ModelPreferences, SamplingMessage};
use rmcp::service::{Peer, RoleServer};

/// The connected client's model, through `sampling/createMessage`. The
/// client reports no token counts, so they are estimated
/// ([`devboy_core::tokens::estimate`]).
pub(super) struct SamplingLlm {
    peer: Peer<RoleServer>,
    model: String,
    timeout: Duration,
    max_parallel: usize,
}

impl Llm for SamplingLlm {
    fn rank<'a>(&'a self, prompt: &'a RankPrompt) -> BoxFuture<'a, Result<RankAnswer, LlmError>> {
        Box::pin(async move {
            let text = format!("{}{RANK_AS_TEXT}", prompt.user_text());
            let mut params = CreateMessageRequestParams::new(
                vec![SamplingMessage::user_text(text.clone())],
                1024,
            );
            if !prompt.system.is_empty() {
                params = params.with_system_prompt(prompt.system.clone());
            }
            if !self.model.is_empty() {
                params = params.with_model_preferences(
                    ModelPreferences::new()
                        .with_hints(vec![ModelHint::new(self.model.clone())])
                        .with_cost_priority(1.0)
                        .with_speed_priority(1.0),
                );
            }
            let sent = self.peer.create_message(params);
            let result = tokio::time::timeout(self.timeout, sent)
                .await
                .map_err(|_| {
                    LlmError::Unavailable(format!(
                        "the client's model did not answer in {} ms",
                        self.timeout.as_millis()
                    ))
                })?
                .map_err(|e| LlmError::Unavailable(format!("sampling failed: {e}")))?;
            let answer: String = result
                .message
                .content
                .into_vec()
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect();
            let (ranked_ids, done) = rank_from_text(&answer)?;
            let input = devboy_core::tokens::estimate(prompt.system.len() + text.len()) as u64;
            Ok(RankAnswer {
                ranked_ids,
                done,
                usage: Usage {
                    input_tokens: input,
                    output_tokens: devboy_core::tokens::estimate(answer.len()) as u64,
                    ..Usage::default()
                },
                retries: 0,
            })
        })
    }

    fn max_parallel(&self) -> usize {
        self.max_parallel
    }

    fn describe(&self) -> String {
        if self.model.is_empty() {
            "mcp-sampling".to_owned()
        } else {
            format!("mcp-sampling/{}", self.model)
        }
    }
}

impl SamplingLlm {
    /// The client behind `peer`, as `config` asks (its `model` is a hint).
    pub(super) fn new(peer: Peer<RoleServer>, config: &LlmConfig) -> Self {
        Self {
            peer,
            model: config.model.clone(),
            timeout: config.timeout,
            max_parallel: config.max_parallel,
        }
    }
}
