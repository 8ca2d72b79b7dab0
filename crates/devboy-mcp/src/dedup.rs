//! The pipeline at the seam: MCP results in, what the model should see out.
//!
//! This adapter decides *what the client forwards to the model* and hands
//! exactly that text to the pure [`SessionPipeline`] (L0 dedup, then the
//! L1/L2 router when encoding is on):
//!
//! - If the result carries `structuredContent` and the client forwards it
//!   (Claude Code does, DESIGN §3), the model sees that value serialized.
//!   To show an id with it, re-encode it or replace it, the result is
//!   rewritten into text blocks and `structuredContent` is dropped; the
//!   session drops the tool's `outputSchema` from the listing in that case,
//!   so the result stays valid under the protocol.
//! - Otherwise, if every content block is text, the model sees the text
//!   blocks. One block may be re-encoded; with several, only dedup applies.
//!   The id goes into one extra text block, and a repeat becomes one text
//!   block holding the reference.
//! - Anything else (images, audio, resources, mixed content) passes
//!   untouched (DESIGN §4.7).
//!
//! Annotations and `_meta` on the result are kept in every case.
//!
//! What applies to which tool comes from `pipeline_config.toml`
//! ([`PipelineConfig`]): per-endpoint dedup, minimum size, near-duplicate
//! hints, encoding and template, and per-tool side-effect classes and
//! `invalidates` lists, matched on the exposed tool name.
//!
//! Every result the pipeline decides on, and every error result, leaves
//! one telemetry event ([`Telemetry`], docs/telemetry.md), recorded after
//! the pipeline's lock is released; the session summary is written by
//! [`ResponseProcessor::end_session`]. Results the pipeline never sees
//! (images, resources, mixed content, endpoints with dedup and encoding
//! both off) leave none.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use devboy_core::config::ConfigSource;
use devboy_core::pipeline_config::{
    HintKind, PipelineConfig, SessionContext, SessionSettings, TokenizerChoice,
};
use devboy_pipeline::route::RouteConfig;
use devboy_pipeline::session::{Action, BodyPolicy, Processed, SessionPipeline, Totals};
use devboy_pipeline::{
    paths_in_arguments, DedupConfig, EndpointKey, ExpandConfig, Fingerprint, IdAllocator, L0Config,
    NearPolicy, ResultPolicy, SideEffect, Template, Timestamp, Tokenizer,
};
use devboy_telemetry::{CallFacts, DedupOutcome, Layer, Outcome, Telemetry};
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

/// The session's pipeline processor: L0 dedup, and re-encoding when
/// encoding is on.
pub struct DedupProcessor {
    config: Arc<PipelineConfig>,
    encode: bool,
    state: Mutex<State>,
    started: Instant,
    telemetry: Telemetry,
}

struct State {
    pipeline: SessionPipeline,
    /// The exposed name of every endpoint with a remembered body, for
    /// `invalidates` globs (which match exposed names).
    exposed: HashMap<EndpointKey, Arc<str>>,
    /// What the session is (model, statistics) and what that resolves to.
    context: SessionContext,
    session: Arc<SessionSettings>,
    /// Hints of each kind (in [`HintKind::ALL`] order) sent so far.
    hints_sent: [u64; 4],
}

impl State {
    /// Re-resolves the session's settings after its context changed, and
    /// applies what changed to the pipeline.
    fn refresh(&mut self, config: &PipelineConfig) {
        let next = config.resolve_session(&self.context);
        if next == *self.session {
            return;
        }
        let tokenizer = tokenizer(next.tokenizer);
        if tokenizer != self.pipeline.tokenizer()
            || next.budget_tokens != self.pipeline.budget_tokens()
        {
            if tokenizer != self.pipeline.tokenizer() {
                let _ = std::thread::Builder::new()
                    .name("devboy-vocabulary".into())
                    .spawn(move || tokenizer.warm_up());
            }
            self.pipeline.configure(tokenizer, next.budget_tokens);
        }
        if next.ttl != self.session.ttl {
            self.pipeline.stage().set_ttl(next.ttl);
        }
        if next.llm != self.session.llm
            || next.agent != self.session.agent
            || next.model != self.session.model
        {
            tracing::info!(
                model = next.model.as_deref().unwrap_or("unknown"),
                llm = next.llm.as_deref().unwrap_or("none"),
                agent = next.agent.as_deref().unwrap_or("none"),
                tokenizer = %tokenizer,
                "session profile"
            );
        }
        self.session = Arc::new(next);
    }

    fn hints_sent(&self, kind: HintKind) -> u64 {
        self.hints_sent[kind.index()]
    }

    /// Counts the hints a processed result carries.
    fn count_hints(&mut self, processed: &Processed) {
        let mut count = |kind: HintKind| {
            self.hints_sent[kind.index()] += 1;
        };
        match processed.action {
            Action::Reference => count(HintKind::Ref),
            Action::NearReference => count(HintKind::NearRef),
            Action::Elided => count(HintKind::Elided),
            _ => {}
        }
        let encoded = processed
            .text
            .as_deref()
            .is_some_and(|t| t.starts_with("> [encoded:") || t.contains("\n> [encoded:"));
        if encoded && matches!(processed.action, Action::Encoded | Action::Elided) {
            count(HintKind::Encoded);
        }
    }
}

/// A fresh [`SessionPipeline`] with the config's dedup bounds, tokenizer
/// and budget, naming what it shows with `ids`: what a proxy session and
/// `devboy replay` both run.
pub fn session_pipeline(config: &PipelineConfig, ids: IdAllocator) -> SessionPipeline {
    let d = &config.dedup;
    let l0 = L0Config {
        dedup: DedupConfig {
            max_entries: d.max_entries,
            max_bytes: d.max_context_bytes,
            min_body_bytes: d.min_body_bytes,
            ttl: d.ttl,
        },
        expand: ExpandConfig::default(),
    };
    let session = config.resolve_session(&SessionContext::default());
    let route = RouteConfig {
        tokenizer: tokenizer(session.tokenizer),
        budget_tokens: session.budget_tokens,
        only: None,
    };
    SessionPipeline::new(l0, route, ids)
}

/// This process's ids: tagged from fresh randomness, so that no other
/// devboy process (the one before a restart, in particular) prints the
/// same ids. Without the OS's randomness, the process id and the time
/// stand in, which still differ between a process and its restart.
pub fn process_ids() -> IdAllocator {
    let seed = getrandom::u64().unwrap_or_else(|error| {
        tracing::warn!(%error, "no OS randomness; the id tag comes from the process id and time");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default();
        nanos ^ u64::from(std::process::id()).rotate_left(32)
    });
    IdAllocator::seeded(seed)
}

/// The pipeline's tokenizer for the configured choice.
pub fn tokenizer(choice: TokenizerChoice) -> Tokenizer {
    match choice {
        TokenizerChoice::O200k => Tokenizer::O200k,
        TokenizerChoice::Cl100k => Tokenizer::Cl100k,
        TokenizerChoice::CharsPerToken(r) => Tokenizer::CharsPerToken(r),
    }
}

impl DedupProcessor {
    /// A processor with fresh state, following `config`; `encode` turns the
    /// L1/L2 router on (`encoding.enabled` in the config can still turn it
    /// off). Its ids carry a tag drawn for this process ([`process_ids`]).
    pub fn new(config: Arc<PipelineConfig>, encode: bool) -> Self {
        Self::with_ids(config, encode, process_ids())
    }

    /// [`new`](Self::new), naming results with `ids` (a fixed tag in tests).
    pub fn with_ids(config: Arc<PipelineConfig>, encode: bool, ids: IdAllocator) -> Self {
        let pipeline = session_pipeline(&config, ids);
        // Load the vocabulary now, off the first result's path.
        let tokenizer = pipeline.tokenizer();
        let _ = std::thread::Builder::new()
            .name("devboy-vocabulary".into())
            .spawn(move || tokenizer.warm_up());
        let context = SessionContext::default();
        let session = Arc::new(config.resolve_session(&context));
        Self {
            encode: encode && config.encoding.enabled,
            config,
            state: Mutex::new(State {
                pipeline,
                exposed: HashMap::new(),
                context,
                session,
                hints_sent: [0; 4],
            }),
            started: Instant::now(),
            telemetry: Telemetry::disabled(),
        }
    }

    /// This processor recording to `telemetry` (off by default).
    pub fn with_telemetry(mut self, telemetry: Telemetry) -> Self {
        self.telemetry = telemetry;
        self
    }

    /// The model the session runs with became known (Claude Code's
    /// `SessionStart` hook reports it): the llm profile, tokenizer and
    /// budget follow it from the next result on.
    pub fn set_model(&self, model: Option<String>) {
        let mut state = lock(&self.state);
        if state.context.model != model {
            state.context.model = model;
            state.refresh(&self.config);
        }
    }

    /// The session's settings now.
    pub fn session(&self) -> Arc<SessionSettings> {
        lock(&self.state).session.clone()
    }

    /// The tokenizer this processor counts in.
    pub fn tokenizer(&self) -> Tokenizer {
        lock(&self.state).pipeline.tokenizer()
    }

    /// The pipeline's totals so far.
    pub fn totals(&self) -> Totals {
        lock(&self.state).pipeline.totals().clone()
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.started.elapsed().as_millis() as u64)
    }
}

/// A result's telemetry outcome from what the pipeline did with it.
fn outcome(processed: &Processed, dedup_on: bool, partition: u64) -> Outcome {
    let template = processed
        .format
        .filter(|f| Template::ALL.iter().any(|t| t.name() == *f));
    let (dedup, layer) = match processed.action {
        Action::Reference => (DedupOutcome::Hit, Layer::Dedup),
        Action::NearReference => (DedupOutcome::Near, Layer::Dedup),
        Action::Encoded | Action::Elided if template.is_some() => {
            (DedupOutcome::Miss, Layer::Template)
        }
        Action::Encoded | Action::Elided => (DedupOutcome::Miss, Layer::Encoder),
        Action::Unchanged | Action::Fresh => (DedupOutcome::Miss, Layer::Passthrough),
    };
    Outcome {
        dedup: if dedup_on { dedup } else { DedupOutcome::Off },
        layer,
        action: processed.action.name(),
        shape: processed.shape,
        inner_formats: processed.inner_formats.clone(),
        format: processed.format,
        template,
        tokens_baseline: processed.tokens_raw as u64,
        tokens_final: processed.tokens_final as u64,
        dedup_saved: processed.dedup_saved,
        encoder_saved: processed.encoder_saved,
        elided: processed.action == Action::Elided,
        context_partition: partition,
        is_error: false,
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
        if self.encode {
            "full"
        } else {
            "dedup"
        }
    }

    fn rewrites_structured(&self) -> bool {
        true
    }

    fn before_call(&self, call: &ToolCallInfo<'_>) {
        let class = self.config.side_effect(call.exposed, call.side_effect);
        let effect = if class.may_mutate() {
            SideEffect::MayMutate
        } else {
            SideEffect::ReadOnly
        };
        let paths = paths_in_arguments(call.arguments);
        let configured = self.config.has_invalidations(call.exposed);
        let mut state = lock(&self.state);
        let State {
            pipeline, exposed, ..
        } = &mut *state;
        let forgotten = pipeline.stage().on_call(effect, &paths, |key| {
            configured
                && exposed
                    .get(key)
                    .is_some_and(|name| self.config.invalidates(call.exposed, name))
        });
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
        let (session, hints_sent) = {
            let state = lock(&self.state);
            (state.session.clone(), state.hints_sent)
        };
        let settings = self.config.endpoint_in(call.exposed, &session);
        // A hint kind the policy does not allow here means its content goes
        // out in full instead.
        let model = session.model.as_deref();
        let allows = |kind: HintKind| {
            self.config
                .hints
                .rule(kind)
                .allows(model, hints_sent[kind.index()])
        };
        let dedup = settings.dedup && allows(HintKind::Ref);
        let encode = self.encode && settings.encode;
        if !dedup && !encode {
            return Ok(None);
        }
        let Some(body) = forwarded(result, call.forwards_structured) else {
            return Ok(None);
        };
        // What the fingerprint and `devboy_expand` see: the forwarded text
        // itself, or, for several text blocks, a JSON array of them (so two
        // blocks never match one block that happens to join to the same).
        let (bytes, json, single): (std::borrow::Cow<'_, str>, _, _) = match &body {
            Forwarded::Structured(text) => (
                text.as_str().into(),
                result.structured_content.as_ref(),
                true,
            ),
            Forwarded::Text(texts) if texts.len() == 1 => (texts[0].into(), None, true),
            Forwarded::Text(texts) => (serde_json::to_string(texts)?.into(), None, false),
        };
        let near = &self.config.dedup.near_ref;
        let near_on = settings.near_ref && allows(HintKind::NearRef);
        let policy = BodyPolicy {
            dedup: dedup.then(|| ResultPolicy {
                min_body_bytes: Some(settings.min_body_bytes),
                near: near_on.then_some(NearPolicy {
                    max_changes: near.max_changes,
                    min_body_bytes: near.min_body_bytes,
                }),
                call: serde_json::to_vec(&call.arguments)
                    .ok()
                    .map(|args| Fingerprint::of(&args)),
                freshness: Some(self.config.freshness(call.exposed, &session)),
            }),
            // Several text blocks are not one document to re-encode.
            encode: encode && single,
            // Without `encoded` hints only compact JSON (which needs none)
            // may stand in for the body.
            only: if allows(HintKind::Encoded) {
                settings.template.clone()
            } else {
                Some(
                    devboy_pipeline::encode::Format::JsonCompact
                        .name()
                        .to_owned(),
                )
            },
            keep_whole: !allows(HintKind::Elided),
        };
        let endpoint = EndpointKey::new(call.upstream, call.tool);
        let paths = paths_in_arguments(call.arguments);
        // Kept for telemetry only when it will be recorded.
        let telemetry_paths = if self.telemetry.is_active() {
            paths.clone()
        } else {
            Vec::new()
        };
        let dedup_on = policy.dedup.is_some();
        let (processed, partition) = {
            let mut state = lock(&self.state);
            if !state.exposed.contains_key(&endpoint) {
                state.exposed.insert(endpoint.clone(), call.exposed.into());
            }
            let now = self.now();
            let processed = state
                .pipeline
                .process(endpoint, &bytes, json, paths, now, &policy);
            state.count_hints(&processed);
            state.context.stats.events += 1;
            state.refresh(&self.config);
            (processed, state.pipeline.stage_ref().cache().partition())
        };
        if self.telemetry.is_active() {
            self.telemetry.set_client(call.client);
            let facts = CallFacts {
                tool: call.exposed,
                upstream: call.upstream,
                body: &bytes,
                paths: &telemetry_paths,
            };
            self.telemetry
                .record(&facts, outcome(&processed, dedup_on, partition));
        }
        let structured = matches!(body, Forwarded::Structured(_));
        let mut content = match (processed.text, body) {
            (Some(text), _) => vec![ContentBlock::text(text)],
            (None, _) if processed.id_line.is_none() => return Ok(None),
            // Exactly the text the client would have shown.
            (None, Forwarded::Structured(text)) => vec![ContentBlock::text(text)],
            (None, Forwarded::Text(_)) => result.content.clone(),
        };
        content.extend(processed.id_line.map(ContentBlock::text));
        // A client that does not forward structuredContent keeps it: the
        // tool's outputSchema is still declared to that client.
        Ok(Some(with_content(result, content, structured)))
    }

    fn set_model(&self, model: Option<String>) {
        DedupProcessor::set_model(self, model);
    }

    fn advance_partition(&self) -> Option<u64> {
        self.telemetry.compaction();
        let mut state = lock(&self.state);
        let partition = state.pipeline.stage().advance_partition();
        state.context.stats.compactions += 1;
        state.refresh(&self.config);
        Some(partition)
    }

    fn on_error_result(&self, call: &ToolCallInfo<'_>, result: &CallToolResult) {
        if !self.telemetry.is_active() {
            return;
        }
        self.telemetry.set_client(call.client);
        let body = match forwarded(result, call.forwards_structured) {
            Some(Forwarded::Structured(text)) => text,
            Some(Forwarded::Text(texts)) => texts.join("\n"),
            None => String::new(),
        };
        let tokens = self.tokenizer().count(&body) as u64;
        let partition = lock(&self.state).pipeline.stage_ref().cache().partition();
        let paths = paths_in_arguments(call.arguments);
        let facts = CallFacts {
            tool: call.exposed,
            upstream: call.upstream,
            body: &body,
            paths: &paths,
        };
        self.telemetry
            .record(&facts, Outcome::passed_through(tokens, partition, true));
    }

    fn end_session(&self) {
        self.telemetry.finish();
    }

    fn report(&self) -> Option<serde_json::Value> {
        let state = lock(&self.state);
        let totals = state.pipeline.totals();
        let stage = state.pipeline.stage_ref();
        let cache = stage.cache().stats();
        let store = stage.store().stats();
        let (dedup_pct, encoder_pct, combined_pct) = totals.split_pct();
        Some(serde_json::json!({
            "config": match &self.config.source {
                ConfigSource::File(path) => path.display().to_string(),
                ConfigSource::Embedded => "embedded default".to_owned(),
            },
            "tokenizer": state.pipeline.tokenizer().to_string(),
            "session": {
                "model": state.session.model,
                "llm_profile": state.session.llm,
                "agent_profile": state.session.agent,
                "budget_tokens": state.session.budget_tokens,
                "ttl_secs": state.session.ttl.as_secs(),
                "results": state.context.stats.events,
                "compactions": state.context.stats.compactions,
            },
            "hints_sent": HintKind::ALL
                .iter()
                .map(|k| (k.name().to_owned(), serde_json::json!(state.hints_sent(*k))))
                .collect::<serde_json::Map<_, _>>(),
            "baseline": "what the client would have forwarded",
            "tokens_raw": totals.tokens_raw,
            "tokens_final": totals.tokens_final,
            "dedup_savings_pct": dedup_pct,
            "encoder_savings_pct": encoder_pct,
            "combined_savings_pct": combined_pct,
            "references": totals.references,
            "near_references": totals.near_references,
            "encoded": totals.encoded,
            "elided": totals.elided,
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
        let mut state = lock(&self.state);
        Some(match state.pipeline.stage().expand(id.trim()) {
            Ok(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
            Err(error) => Err(error.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devboy_core::pipeline_config::SideEffectClass;
    use rmcp::model::{JsonObject, MetaObject as Meta};
    use serde_json::json;
    use std::path::Path;

    fn fixed_ids() -> IdAllocator {
        IdAllocator::new(devboy_pipeline::SessionTag::FIXED)
    }

    fn processor() -> DedupProcessor {
        DedupProcessor::with_ids(
            Arc::new(PipelineConfig::embedded_default()),
            true,
            fixed_ids(),
        )
    }

    fn configured(toml: &str) -> DedupProcessor {
        let config = PipelineConfig::from_str(toml, Path::new("test.toml")).unwrap();
        DedupProcessor::with_ids(Arc::new(config), true, fixed_ids())
    }

    fn named<'a>(exposed: &'a str, arguments: Option<&'a JsonObject>) -> ToolCallInfo<'a> {
        ToolCallInfo {
            exposed,
            ..call(arguments, false)
        }
    }

    fn call(arguments: Option<&JsonObject>, forwards_structured: bool) -> ToolCallInfo<'_> {
        ToolCallInfo {
            upstream: "fs",
            tool: "read",
            exposed: "fs__read",
            arguments,
            side_effect: SideEffectClass::ReadOnly,
            forwards_structured,
            client: None,
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
        let processor = processor();
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
        assert_eq!(texts(&fresh), [value.to_string(), "> [id: tagfix1]".into()]);
        assert_eq!(fresh.meta, Some(meta.clone()));

        let repeat = processor
            .process(&call(None, true), &result)
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&repeat),
            ["> [ref: tagfix1, unchanged; devboy_expand tagfix1]"]
        );
        assert_eq!(repeat.structured_content, None);
        assert_eq!(repeat.meta, Some(meta));
        assert_eq!(processor.expand("tagfix1"), Some(Ok(value.to_string())));
    }

    /// A restart: the model still holds the first process's id, and the
    /// second process has numbered other content the same.
    #[test]
    fn an_id_of_an_earlier_process_is_stale_not_other_content() {
        let config = Arc::new(PipelineConfig::embedded_default());
        let earlier = DedupProcessor::with_ids(config.clone(), true, process_ids());
        let later = DedupProcessor::with_ids(config, true, process_ids());
        let shown = |processor: &DedupProcessor, text: String| {
            let result = CallToolResult::success(vec![ContentBlock::text(text)]);
            let out = processor
                .process(&call(None, false), &result)
                .unwrap()
                .unwrap();
            let line = texts(&out).pop().unwrap_or_default();
            line.strip_prefix("> [id: ")
                .and_then(|l| l.strip_suffix(']'))
                .unwrap_or_else(|| panic!("no id line: {line}"))
                .to_owned()
        };
        let old = shown(&earlier, big());
        let new = shown(&later, "9876543210".repeat(100));
        assert_ne!(old, new, "two processes never print the same id");
        assert_eq!(
            later.expand(&old),
            Some(Err(format!(
                "`{old}` is from an earlier devboy session; call the tool again"
            )))
        );
        assert_eq!(later.expand(&new), Some(Ok("9876543210".repeat(100))));
        assert_eq!(earlier.expand(&old), Some(Ok(big())));
    }

    #[test]
    fn text_clients_keep_structured_content() {
        let processor = processor();
        let mut result = CallToolResult::success(vec![ContentBlock::text(big())]);
        result.structured_content = Some(json!({"n": 1}));
        let fresh = processor
            .process(&call(None, false), &result)
            .unwrap()
            .unwrap();
        assert_eq!(texts(&fresh), [big(), "> [id: tagfix1]".into()]);
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
        let processor = processor();
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
        let processor = processor();
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
        let processor = processor();
        let args = json!({"path": "/p/a.txt"});
        let args = args.as_object();
        let result = CallToolResult::success(vec![ContentBlock::text(big())]);
        processor.process(&call(args, false), &result).unwrap();
        let mut write = call(args, false);
        write.side_effect = SideEffectClass::Unknown;
        processor.before_call(&write);
        let again = processor
            .process(&call(args, false), &result)
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&again).last().map(String::as_str),
            Some("> [id: tagfix2]")
        );
    }

    fn labels(n: usize) -> CallToolResult {
        let rows: Vec<serde_json::Value> = (0..n)
            .map(|i| json!({"id": i, "name": format!("label-{i}"), "color": format!("{:06x}", i * 7919), "default": false}))
            .collect();
        let text = serde_json::to_string_pretty(&rows).unwrap();
        CallToolResult::success(vec![ContentBlock::text(text)])
    }

    #[test]
    fn the_hint_policy_sends_content_in_full_where_a_hint_is_not_allowed() {
        // One reference per session; no elision; no encodings that need a
        // hint line.
        let processor = configured(
            "[hints.ref]\nmax_per_session = 1\n[hints.elided]\nenabled = false\n[hints.encoded]\nenabled = false\n[encoding]\nbudget_tokens = 200\n",
        );
        let result = CallToolResult::success(vec![ContentBlock::text(big())]);
        processor.process(&call(None, false), &result).unwrap();
        let first = processor
            .process(&call(None, false), &result)
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&first),
            ["> [ref: tagfix1, unchanged; devboy_expand tagfix1]"]
        );
        // The limit is reached: the repeat goes out as it came, no id line.
        assert_eq!(
            processor.process(&call(None, false), &result).unwrap(),
            None
        );

        let list = labels(40);
        let out = processor
            .process(&named("gh__labels", None), &list)
            .unwrap()
            .unwrap();
        let text = texts(&out).concat();
        assert!(
            !text.contains("> [elided") && !text.contains("> [encoded"),
            "{text}"
        );
        // Compact JSON needs no hint; it is the same value, whole.
        let original: serde_json::Value =
            serde_json::from_str(list.content[0].as_text().unwrap().text.as_str()).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            original
        );
        let report = processor.report().unwrap();
        assert_eq!(report["hints_sent"]["ref"], 1);
        assert_eq!(report["hints_sent"]["elided"], 0);

        // The same list with the default policy is encoded and elided.
        let default = configured("[encoding]\nbudget_tokens = 200\n");
        let out = default
            .process(&named("gh__labels", None), &list)
            .unwrap()
            .unwrap();
        let text = texts(&out).concat();
        assert!(
            text.contains("> [elided") && text.contains("> [encoded"),
            "{text}"
        );
    }

    #[test]
    fn hints_for_some_models_only_wait_for_the_model() {
        let processor = configured("[hints.ref]\nmodels = [\"claude-*\"]\n");
        let result = CallToolResult::success(vec![ContentBlock::text(big())]);
        // Model unknown: no ids, no references.
        for _ in 0..2 {
            assert_eq!(
                processor.process(&call(None, false), &result).unwrap(),
                None
            );
        }
        processor.set_model(Some("claude-sonnet-4-5".into()));
        processor.process(&call(None, false), &result).unwrap();
        let repeat = processor
            .process(&call(None, false), &result)
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&repeat),
            ["> [ref: tagfix1, unchanged; devboy_expand tagfix1]"]
        );
    }

    #[test]
    fn the_model_picks_the_tokenizer_and_compactions_the_agent_profile() {
        let processor = processor();
        assert_eq!(processor.tokenizer(), Tokenizer::O200k);
        processor.set_model(Some("gpt-4-0613".into()));
        assert_eq!(processor.tokenizer(), Tokenizer::Cl100k);
        assert_eq!(processor.session().llm.as_deref(), Some("openai_cl100k"));
        assert_eq!(processor.session().agent, None);
        processor.advance_partition();
        processor.advance_partition();
        let session = processor.session();
        assert_eq!(session.agent.as_deref(), Some("marathon"));
        assert_eq!(session.ttl, std::time::Duration::from_secs(7200));
        let report = processor.report().unwrap();
        assert_eq!(report["session"]["agent_profile"], "marathon");
        assert_eq!(report["session"]["compactions"], 2);
        assert_eq!(report["tokenizer"], Tokenizer::Cl100k.to_string());
    }

    #[test]
    fn a_tool_freshness_shortens_its_references() {
        let processor = configured("[tools.\"fs__*\"]\nfreshness_secs = 1\n");
        // Loaded before the clock matters: on a busy machine the first
        // count's vocabulary load can take longer than the freshness.
        processor.tokenizer().warm_up();
        let result = CallToolResult::success(vec![ContentBlock::text(big())]);
        processor.process(&call(None, false), &result).unwrap();
        let soon = processor
            .process(&call(None, false), &result)
            .unwrap()
            .unwrap();
        assert_eq!(texts(&soon).len(), 1, "a reference within the second");
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let later = processor
            .process(&call(None, false), &result)
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&later).last().map(String::as_str),
            Some("> [id: tagfix2]")
        );
    }

    #[test]
    fn endpoint_rules_turn_dedup_off_and_lower_the_minimum() {
        let processor = configured(
            "[endpoints.\"fs__*\"]\ndedup = false\n[endpoints.\"mem__*\"]\nmin_body_bytes = 8\n",
        );
        let result = CallToolResult::success(vec![ContentBlock::text(big())]);
        for _ in 0..2 {
            assert_eq!(
                processor
                    .process(&named("fs__read", None), &result)
                    .unwrap(),
                None
            );
        }
        let small = CallToolResult::success(vec![ContentBlock::text("0123456789")]);
        let fresh = processor
            .process(&named("mem__read", None), &small)
            .unwrap()
            .unwrap();
        assert_eq!(texts(&fresh), ["0123456789", "> [id: tagfix1]"]);
    }

    #[test]
    fn tool_rules_override_annotations_and_invalidate_endpoints() {
        let processor = configured(
            "[tools.\"gh__list_*\"]\nside_effect = \"read_only\"\n\
             [tools.\"gh__create_issue\"]\nside_effect = \"mutating\"\ninvalidates = [\"gh__list_*\"]\n",
        );
        let result = CallToolResult::success(vec![ContentBlock::text(big())]);
        let list = || ToolCallInfo {
            side_effect: SideEffectClass::Unknown,
            ..named("gh__list_issues", None)
        };
        processor.process(&list(), &result).unwrap();
        // Configured read-only: calling it again forgets nothing.
        processor.before_call(&list());
        let repeat = processor.process(&list(), &result).unwrap().unwrap();
        assert_eq!(
            texts(&repeat),
            ["> [ref: tagfix1, unchanged; devboy_expand tagfix1]"]
        );
        // Annotated read-only, configured mutating, with an invalidates list.
        let create = ToolCallInfo {
            side_effect: SideEffectClass::ReadOnly,
            ..named("gh__create_issue", None)
        };
        processor.before_call(&create);
        let full = processor.process(&list(), &result).unwrap().unwrap();
        assert_eq!(
            texts(&full).last().map(String::as_str),
            Some("> [id: tagfix2]")
        );
    }

    #[test]
    fn every_decision_and_every_error_leaves_one_telemetry_event() {
        use devboy_telemetry::{Event, TelemetryOptions};
        let dir = std::env::temp_dir().join(format!("devboy-mcp-telemetry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = Arc::new(PipelineConfig::embedded_default());
        let telemetry = Telemetry::start(TelemetryOptions::new(dir.clone(), "o200k_base"));
        let processor =
            DedupProcessor::with_ids(config, true, fixed_ids()).with_telemetry(telemetry);
        let args = json!({"path": "/p/CANARY-7f3a-SECRET.txt"});
        let read = ToolCallInfo {
            client: Some("claude-code"),
            ..call(args.as_object(), false)
        };
        let text = CallToolResult::success(vec![ContentBlock::text(big())]);
        processor.process(&read, &text).unwrap();
        processor.process(&read, &text).unwrap();
        let rows: Vec<_> = (0..30)
            .map(|i| json!({"id": i, "name": format!("item-{i}"), "done": i % 2 == 0}))
            .collect();
        let table = CallToolResult::structured(json!(rows));
        processor
            .process(&named("gh__list_items", None), &table)
            .unwrap();
        processor.advance_partition();
        let error = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        processor.on_error_result(&read, &error);
        processor.end_session();

        let mut events = Vec::new();
        for file in devboy_telemetry::events_files(&dir).unwrap() {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(
                !text.contains("CANARY") && !text.contains("fs__read"),
                "{text}"
            );
            events.extend(text.lines().map(|l| Event::parse_line(l).unwrap()));
        }
        let results: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::Result(r) => Some(r),
                Event::Session(_) => None,
            })
            .collect();
        let summary = events
            .iter()
            .find_map(|e| match e {
                Event::Session(s) => Some(s),
                Event::Result(_) => None,
            })
            .expect("a summary");
        let what: Vec<_> = results
            .iter()
            .map(|r| (r.dedup, r.layer, r.action.as_ref(), r.is_error))
            .collect();
        assert_eq!(
            what,
            [
                (DedupOutcome::Miss, Layer::Passthrough, "fresh", false),
                (DedupOutcome::Hit, Layer::Dedup, "reference", false),
                (DedupOutcome::Miss, Layer::Encoder, "encoded", false),
                (DedupOutcome::Off, Layer::Passthrough, "unchanged", true),
            ]
        );
        assert_eq!(results[0].path_hashes.len(), 1);
        assert_eq!(results[0].response_chars, 1000);
        assert_eq!(results[2].shape.as_deref(), Some("array_of_objects"));
        assert!(results[2].format.is_some() && results[2].template.is_none());
        assert!(results[2].encoder_saved > 0);
        assert_eq!(results[3].context_partition, 1);
        assert_eq!(results[3].tokens_baseline, results[3].tokens_final);
        assert!(results[3].tokens_baseline > 0);
        let totals = processor.totals();
        assert_eq!(summary.results, 4);
        assert_eq!(
            summary.tokens_baseline,
            totals.tokens_raw + results[3].tokens_baseline,
            "the pipeline's totals plus the error"
        );
        assert_eq!(summary.dedup_saved, totals.dedup_saved);
        assert_eq!(summary.encoder_saved, totals.encoder_saved);
        assert_eq!(summary.compactions, 1);
        assert_eq!(summary.client, devboy_telemetry::ClientKind::ClaudeCode);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn polling_endpoints_get_near_references_when_enabled() {
        let processor = configured("[endpoints.\"ci__status\"]\nnear_ref = true\n");
        let body = |state: &str| {
            let jobs: Vec<_> = (0..60).map(|i| json!({"id": i, "state": "done"})).collect();
            json!({"state": state, "jobs": jobs})
        };
        let args = json!({"pipeline": 7});
        let status = named("ci__status", args.as_object());
        let first = CallToolResult::structured(body("running"));
        let second = CallToolResult::structured(body("success"));
        let fresh = processor
            .process(
                &ToolCallInfo {
                    forwards_structured: true,
                    ..status
                },
                &first,
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&fresh).last().map(String::as_str),
            Some("> [id: tagfix1]")
        );
        let near = processor
            .process(
                &ToolCallInfo {
                    forwards_structured: true,
                    ..status
                },
                &second,
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&near),
            ["> [near-ref: tagfix1, changed below; devboy_expand tagfix2]\n/state: \"success\""]
        );
        assert_eq!(near.structured_content, None);
        assert_eq!(
            processor.expand("tagfix2"),
            Some(Ok(body("success").to_string()))
        );
        assert_eq!(processor.report().unwrap()["near_references"], 1);
    }
}
