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
enum Forwarded<'a> {
    /// The serialized `structuredContent` (the client forwards that).
    Structured(String),
    /// The text blocks, in order (the client forwards the content).
    Text(Vec<&'a str>),
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

fn forwarded(result: &CallToolResult, forwards_structured: bool) -> Option<Forwarded<'_>> {
    if forwards_structured {
        if let Some(value) = &result.structured_content {
            return serde_json::to_string(value).ok().map(Forwarded::Structured);
        }
    }
    let mut texts = Vec::with_capacity(result.content.len());
    for block in &result.content {
        texts.push(block.as_text()?.text.as_str());
    }
    (!texts.is_empty()).then_some(Forwarded::Text(texts))
}

/// `result` with its content replaced by `content`: the result's own
/// fields (`isError`, `_meta`, the result type) are kept, and so is
/// `structuredContent` unless `drop_structured`.
fn with_content(
    result: &CallToolResult,
    content: Vec<ContentBlock>,
    drop_structured: bool,
) -> CallToolResult {
    let mut out = CallToolResult::success(content);
    out.result_type = result.result_type.clone();
    out.is_error = result.is_error;
    out.meta = result.meta.clone();
    if !drop_structured {
        out.structured_content = result.structured_content.clone();
    }
    out
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
        let bytes: std::borrow::Cow<'_, str> = match &body {
            Forwarded::Structured(text) => text.as_str().into(),
            Forwarded::Text(texts) if texts.len() == 1 => texts[0].into(),
            Forwarded::Text(texts) => serde_json::to_string(texts)?.into(),
        };
        let endpoint = EndpointKey::new(call.upstream, call.tool);
        let paths = paths_in_arguments(call.arguments);
        let outcome = lock(&self.stage).on_result(endpoint, bytes.as_bytes(), paths, self.now());
        let structured = matches!(body, Forwarded::Structured(_));
        let out = match outcome {
            L0Outcome::Unchanged => return Ok(None),
            L0Outcome::Fresh { id_line, .. } => {
                let mut content = match body {
                    // Exactly the text the client would have shown.
                    Forwarded::Structured(text) => vec![ContentBlock::text(text)],
                    Forwarded::Text(_) => result.content.clone(),
                };
                content.push(ContentBlock::text(id_line));
                with_content(result, content, structured)
            }
            // A client that does not forward structuredContent keeps it: the
            // tool's outputSchema is still declared to that client.
            L0Outcome::Repeat { hint, .. } => {
                with_content(result, vec![ContentBlock::text(hint)], structured)
            }
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{JsonObject, MetaObject as Meta};
    use serde_json::json;

    fn call(arguments: Option<&JsonObject>, forwards_structured: bool) -> ToolCallInfo<'_> {
        ToolCallInfo {
            upstream: "fs",
            tool: "read",
            exposed: "fs__read",
            arguments,
            read_only: true,
            forwards_structured,
        }
    }

    fn texts(result: &CallToolResult) -> Vec<String> {
        result
            .content
            .iter()
            .map(|c| c.as_text().map(|t| t.text.clone()).unwrap_or_default())
            .collect()
    }

    fn big() -> String {
        "0123456789".repeat(100)
    }

    #[test]
    fn structured_results_are_shown_as_the_client_would_show_them() {
        let processor = DedupProcessor::new(L0Config::default());
        let value = json!({"content": big()});
        let mut result = CallToolResult::success(vec![ContentBlock::text("other text")]);
        result.structured_content = Some(value.clone());
        let mut meta = Meta::new();
        meta.0.insert("anthropic/k".into(), json!(1));
        result.meta = Some(meta.clone());

        let fresh = processor
            .process(&call(None, true), &result)
            .unwrap()
            .unwrap();
        assert_eq!(fresh.structured_content, None);
        assert_eq!(texts(&fresh), [value.to_string(), "> [id: r1]".into()]);
        assert_eq!(fresh.meta, Some(meta.clone()));

        let repeat = processor
            .process(&call(None, true), &result)
            .unwrap()
            .unwrap();
        assert_eq!(texts(&repeat), ["> [ref: r1, unchanged; devboy_expand r1]"]);
        assert_eq!(repeat.structured_content, None);
        assert_eq!(repeat.meta, Some(meta));
        assert_eq!(processor.expand("r1"), Some(Ok(value.to_string())));
    }

    #[test]
    fn text_clients_keep_structured_content() {
        let processor = DedupProcessor::new(L0Config::default());
        let mut result = CallToolResult::success(vec![ContentBlock::text(big())]);
        result.structured_content = Some(json!({"n": 1}));
        let fresh = processor
            .process(&call(None, false), &result)
            .unwrap()
            .unwrap();
        assert_eq!(texts(&fresh), [big(), "> [id: r1]".into()]);
        assert_eq!(fresh.structured_content, Some(json!({"n": 1})));
        let repeat = processor
            .process(&call(None, false), &result)
            .unwrap()
            .unwrap();
        assert_eq!(repeat.content.len(), 1);
        assert_eq!(repeat.structured_content, Some(json!({"n": 1})));
    }

    #[test]
    fn images_and_mixed_content_pass_untouched() {
        let processor = DedupProcessor::new(L0Config::default());
        let result = CallToolResult::success(vec![
            ContentBlock::text(big()),
            ContentBlock::image("aGVsbG8=", "image/png"),
        ]);
        for _ in 0..2 {
            assert_eq!(
                processor.process(&call(None, false), &result).unwrap(),
                None
            );
        }
    }

    #[test]
    fn several_text_blocks_never_match_one_joined_block() {
        let processor = DedupProcessor::new(L0Config::default());
        let half = "a".repeat(600);
        let two =
            CallToolResult::success(vec![ContentBlock::text(&half), ContentBlock::text(&half)]);
        let one = CallToolResult::success(vec![ContentBlock::text(format!("{half}\n{half}"))]);
        processor.process(&call(None, false), &two).unwrap();
        let other = processor
            .process(&call(None, false), &one)
            .unwrap()
            .unwrap();
        assert_eq!(other.content.len(), 2, "fresh, not a reference: {other:?}");
    }

    #[test]
    fn a_mutating_call_on_the_path_forgets_it() {
        let processor = DedupProcessor::new(L0Config::default());
        let args = json!({"path": "/p/a.txt"});
        let args = args.as_object();
        let result = CallToolResult::success(vec![ContentBlock::text(big())]);
        processor.process(&call(args, false), &result).unwrap();
        let mut write = call(args, false);
        write.read_only = false;
        processor.before_call(&write);
        let again = processor
            .process(&call(args, false), &result)
            .unwrap()
            .unwrap();
        assert_eq!(texts(&again).last().map(String::as_str), Some("> [id: r2]"));
    }
}
