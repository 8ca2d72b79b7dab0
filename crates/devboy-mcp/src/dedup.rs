//! L0 dedup at the seam: MCP results in, what the model should see out.
//!
//! This adapter decides *what the client forwards to the model* and hands
//! exactly those bytes to the pure [`L0Stage`]:
//!
//! - If the result carries `structuredContent` and the client forwards it
//!   (Claude Code does, DESIGN §3), the model sees that value serialized.
//!   To show an id with it or to replace it, the result is rewritten into a
//!   text block holding that same serialization, and `structuredContent` is
//!   dropped; the session drops the tool's `outputSchema` from the listing in
//!   that case, so the result stays valid under the protocol.
//! - Otherwise, if every content block is text, the model sees the text
//!   blocks; the id goes into one extra text block, and a repeat becomes one
//!   text block holding the reference.
//! - Anything else (images, audio, resources, mixed content) passes
//!   untouched (DESIGN §4.7).
//!
//! Annotations and `_meta` on the result are kept in every case.

use std::sync::Mutex;
use std::time::Instant;

use devboy_pipeline::{
    paths_in_arguments, EndpointKey, L0Config, L0Outcome, L0Stage, SideEffect, Timestamp,
};
use rmcp::model::{CallToolResult, ContentBlock};

use crate::seam::{ProcessError, ResponseProcessor, ToolCallInfo};
use crate::upstream::lock;

/// What the model is shown of one result, as devboy reads it.
enum Forwarded {
    /// The serialized `structuredContent` (the client forwards that).
    Structured(String),
    /// The text blocks, in order (the client forwards the content).
    Text(Vec<String>),
}

/// The session's L0 dedup processor.
pub struct DedupProcessor {
    stage: Mutex<L0Stage>,
    started: Instant,
}

impl DedupProcessor {
    /// A processor with fresh state.
    pub fn new(config: L0Config) -> Self {
        Self {
            stage: Mutex::new(L0Stage::new(config)),
            started: Instant::now(),
        }
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.started.elapsed().as_millis() as u64)
    }
}

fn forwarded(result: &CallToolResult, forwards_structured: bool) -> Option<Forwarded> {
    if forwards_structured {
        if let Some(value) = &result.structured_content {
            return serde_json::to_string(value).ok().map(Forwarded::Structured);
        }
    }
    let mut texts = Vec::with_capacity(result.content.len());
    for block in &result.content {
        texts.push(block.as_text()?.text.clone());
    }
    (!texts.is_empty()).then_some(Forwarded::Text(texts))
}

impl ResponseProcessor for DedupProcessor {
    fn name(&self) -> &'static str {
        "dedup"
    }

    fn rewrites_structured(&self) -> bool {
        true
    }

    fn before_call(&self, call: &ToolCallInfo<'_>) {
        let effect = if call.read_only {
            SideEffect::ReadOnly
        } else {
            SideEffect::MayMutate
        };
        let paths = paths_in_arguments(call.arguments);
        let forgotten = lock(&self.stage).on_call(effect, &paths, &[]);
        if forgotten > 0 {
            tracing::debug!(
                tool = call.exposed,
                forgotten,
                "call may mutate; references forgotten"
            );
        }
    }

    fn process(
        &self,
        call: &ToolCallInfo<'_>,
        result: &CallToolResult,
    ) -> Result<Option<CallToolResult>, ProcessError> {
        let Some(body) = forwarded(result, call.forwards_structured) else {
            return Ok(None);
        };
        // What the fingerprint and `devboy_expand` see: the forwarded text
        // itself, or, for several text blocks, a JSON array of them (so two
        // blocks never match one block that happens to join to the same).
        let bytes = match &body {
            Forwarded::Structured(text) => text.clone(),
            Forwarded::Text(texts) if texts.len() == 1 => texts[0].clone(),
            Forwarded::Text(texts) => serde_json::to_string(texts)?,
        };
        let endpoint = EndpointKey::new(call.upstream, call.tool);
        let paths = paths_in_arguments(call.arguments);
        let outcome = lock(&self.stage).on_result(endpoint, bytes.as_bytes(), paths, self.now());
        let mut out = result.clone();
        match outcome {
            L0Outcome::Unchanged => return Ok(None),
            L0Outcome::Fresh { id_line, .. } => {
                if let Forwarded::Structured(text) = body {
                    out.content = vec![ContentBlock::text(text)];
                    out.structured_content = None;
                }
                out.content.push(ContentBlock::text(id_line));
            }
            L0Outcome::Repeat { hint, .. } => {
                out.content = vec![ContentBlock::text(hint)];
                // A client that does not forward structuredContent keeps it:
                // the tool's outputSchema is still declared to that client.
                if matches!(body, Forwarded::Structured(_)) {
                    out.structured_content = None;
                }
            }
        }
        Ok(Some(out))
    }

    fn advance_partition(&self) -> Option<u64> {
        Some(lock(&self.stage).advance_partition())
    }

    fn report(&self) -> Option<serde_json::Value> {
        let stage = lock(&self.stage);
        let cache = stage.cache().stats();
        let store = stage.store().stats();
        Some(serde_json::json!({
            "references": cache.hits,
            "bytes_referenced": cache.bytes_saved,
            "ids_issued": cache.inserts + cache.refreshes,
            "remembered": stage.cache().len(),
            "forgotten": {
                "capacity": cache.evictions.entries + cache.evictions.bytes,
                "ttl": cache.evictions.ttl,
                "compaction": cache.evictions.partition,
                "mutating_calls": cache.evictions.invalidation,
            },
            "partition": stage.cache().partition(),
            "expand": {"served": store.hits, "expired_or_unknown": store.misses},
        }))
    }

    fn expand(&self, id: &str) -> Option<Result<String, String>> {
        let mut stage = lock(&self.stage);
        Some(match stage.expand(id.trim()) {
            Ok(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
            Err(error) => Err(error.to_string()),
        })
    }
}
