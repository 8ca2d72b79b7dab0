//! The pipeline at the seam: MCP results in, what the model should see out.
//!
//! [`PipelineProcessor`] adapts a [`PipelineSession`] (devboy-session,
//! which holds every policy) to the protocol. It decides *what the client
//! forwards to the model* (by the one rule in `view.rs`) and hands exactly
//! that to the session:
//!
//! - If the result carries `structuredContent` and the client forwards it
//!   (Claude Code does), the model sees that value serialized. To show an
//!   id with it, re-encode it or replace it, the result is rewritten into
//!   text blocks and `structuredContent` is dropped; the session drops the
//!   tool's `outputSchema` from the listing in that case, so the result
//!   stays valid under the protocol.
//! - Otherwise, if every content block is text, the model sees the text
//!   blocks. One block may be re-encoded; with several, only dedup applies.
//!   The id goes into one extra text block, and a repeat becomes one text
//!   block holding the reference.
//! - Anything else (images, audio, resources, mixed content) passes
//!   untouched.
//!
//! Annotations and `_meta` on the result are kept in every case.

use std::sync::Arc;
use std::time::Instant;

use devboy_core::pipeline_config::{PipelineConfig, SessionSettings};
use devboy_pipeline::result_pipeline::Totals;
use devboy_pipeline::route::PartRange;
use devboy_pipeline::{IdAllocator, Timestamp, Tokenizer};
use devboy_session::capture::CaptureWriter;
use devboy_session::{process_ids, PipelineSession, SessionEvents};
use devboy_telemetry::Telemetry;
use rmcp::model::{CallToolResult, ContentBlock};

use devboy_core::call::ResolvedCall;

use crate::seam::{EventSink, Handoff, ProcessError, SessionEvent, Transform};
use crate::view::{shown, Shown};

/// The session's pipeline processor: dedup, and re-encoding when encoding
/// is on, as the pipeline config says.
pub struct PipelineProcessor {
    session: PipelineSession,
    started: Instant,
}

impl PipelineProcessor {
    /// A processor with fresh state, following `config`; `encode` turns
    /// re-encoding and elision on (`encoding.enabled` in the config can
    /// still turn them off). Its ids carry a tag drawn for this process
    /// ([`process_ids`]).
    pub fn new(config: Arc<PipelineConfig>, encode: bool) -> Self {
        // Claude Code's token cap, which the servers it starts inherit.
        let max_output_tokens =
            devboy_core::pipeline_config::max_output_tokens_with_env(&|k| std::env::var_os(k));
        let processor = Self::with_ids(config, encode, process_ids());
        Self {
            session: processor.session.with_max_output_tokens(max_output_tokens),
            ..processor
        }
    }

    /// The processor of one agent session: [`new`](Self::new), writing the
    /// session to `capture` when given (for `devboy replay`; a capture
    /// that cannot be written is said on stderr and left out), recording
    /// telemetry as `config`'s `[telemetry]` says.
    pub fn for_session(
        config: Arc<PipelineConfig>,
        encode: bool,
        capture: Option<&std::path::Path>,
    ) -> Self {
        let mut processor = Self::new(config.clone(), encode);
        if let Some(path) = capture {
            match CaptureWriter::create(path) {
                Ok(writer) => processor = processor.with_capture(writer),
                Err(error) => {
                    tracing::error!(file = %path.display(), %error, "cannot write the capture; serving without it")
                }
            }
        }
        let tokenizer = processor.tokenizer().to_string();
        let telemetry = Telemetry::for_session(&config.telemetry, &tokenizer);
        processor.with_telemetry(telemetry)
    }

    /// [`new`](Self::new), naming results with `ids` (a fixed tag in tests).
    pub fn with_ids(config: Arc<PipelineConfig>, encode: bool, ids: IdAllocator) -> Self {
        Self {
            session: PipelineSession::new(config, encode, ids),
            started: Instant::now(),
        }
    }

    /// This processor recording to `telemetry` (off by default).
    pub fn with_telemetry(self, telemetry: Telemetry) -> Self {
        Self {
            session: self.session.with_telemetry(telemetry),
            ..self
        }
    }

    /// This processor writing a capture of the session `devboy replay`
    /// reproduces it from.
    pub fn with_capture(self, capture: CaptureWriter) -> Self {
        Self {
            session: self.session.with_capture(capture),
            ..self
        }
    }

    /// The model the session runs with became known.
    pub fn set_model(&self, model: Option<String>) {
        self.session.set_model(model);
    }

    /// The session's settings now.
    pub fn session(&self) -> Arc<SessionSettings> {
        self.session.session()
    }

    /// The tokenizer this processor counts in.
    pub fn tokenizer(&self) -> Tokenizer {
        self.session.tokenizer()
    }

    /// The pipeline's totals so far.
    pub fn totals(&self) -> Totals {
        self.session.totals()
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.started.elapsed().as_millis() as u64)
    }
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

/// What the pipeline keeps of a session, asked for by the call path and
/// the built-ins: it forgets, expands, reports and follows the session.
impl PipelineProcessor {
    /// A call is about to be answered: forgets what it may change.
    pub fn forget_for(&self, call: &ResolvedCall) {
        self.session.forget_for(call);
    }

    /// Claude Code's own tools wrote `paths` (absolute; `missed`: and
    /// files nobody knows) without a call through devboy: forgets what was
    /// read from them, as before a call that writes them.
    pub fn forget_written(&self, paths: &[String], missed: bool) {
        self.session.forget_written(paths, missed);
    }

    /// The model's context was compacted or cleared. Returns the new
    /// partition.
    pub fn advance_partition(&self) -> u64 {
        self.session.compaction()
    }

    /// What the pipeline has done this session, for `devboy_status`.
    pub fn report(&self) -> serde_json::Value {
        self.session.report()
    }

    /// Follows `config` from the next result on (the file changed while
    /// devboy runs).
    pub fn set_config(&self, config: Arc<PipelineConfig>) {
        self.session.set_config(config);
    }

    /// The result an id this session emitted stood for (all of it, or the
    /// lines or items `range` names), in the form a full delivery of it is
    /// shown (a file's text fenced, unescaped), or with `raw` as the server
    /// wrote it, within what a client named `client` shows of one result;
    /// `Err` with a message for people.
    pub fn expand(
        &self,
        id: &str,
        range: Option<&PartRange>,
        raw: bool,
        client: Option<&str>,
    ) -> Result<String, String> {
        self.session.expand(id, range, raw, client)
    }

    /// `devboy_expand` sent `text` for `id` (`ranged`: the lines or items a
    /// hint named): counted as what the model received, once per delivery.
    pub fn record_expansion(&self, id: &str, ranged: bool, text: &str) {
        self.session.record_expansion(id, ranged, text);
    }
}

impl crate::answers::Memory for PipelineProcessor {
    fn name(&self) -> &'static str {
        "forgetting"
    }

    fn forget_call(&self, call: &ResolvedCall) {
        self.forget_for(call);
    }

    fn forget_written(&self, paths: &[String], missed: bool) {
        PipelineProcessor::forget_written(self, paths, missed);
    }

    fn advance_partition(&self) {
        PipelineProcessor::advance_partition(self);
    }
}

impl Transform for PipelineProcessor {
    fn name(&self) -> &'static str {
        if self.session.encodes() {
            "full"
        } else {
            "dedup"
        }
    }

    fn ready(&self) {
        self.session.tokenizer().warm_up();
    }

    fn process(
        &self,
        call: &ResolvedCall,
        result: &CallToolResult,
        handoff: &Handoff,
    ) -> Result<Option<CallToolResult>, ProcessError> {
        let Some(body) = shown(result, call.forwards_structured) else {
            return Ok(None);
        };
        let Some(processed) = self
            .session
            .process(call, &body.forwarded(), self.now(), handoff)
        else {
            return Ok(None);
        };
        let structured = matches!(body, Shown::Structured(..));
        let mut content = match (processed.text, body) {
            (Some(text), _) => vec![ContentBlock::text(text)],
            (None, _) if processed.id_line.is_none() => return Ok(None),
            // Exactly the text the client would have shown.
            (None, Shown::Structured(text, _)) => vec![ContentBlock::text(text)],
            (None, Shown::Text(_)) => result.content.clone(),
        };
        content.extend(processed.id_line.map(ContentBlock::text));
        // A client that does not forward structuredContent keeps it: the
        // tool's outputSchema is still declared to that client.
        Ok(Some(with_content(result, content, structured)))
    }
}

impl EventSink for PipelineProcessor {
    fn record(&self, event: SessionEvent<'_>) {
        match event {
            // The capture notes the call (a replay forgets where it did).
            SessionEvent::Call(call) => self.session.record_call(call),
            SessionEvent::Ended => self.session.end(),
            event => {
                let (events, tokenizer, partition) = self.session.events();
                record_to(events, tokenizer, partition, event);
            }
        }
    }
}

/// Records `event` to `events`, what it shows counted with `tokenizer`, in
/// context `partition`: what every pipeline mode records alike.
fn record_to(
    events: &SessionEvents,
    tokenizer: Tokenizer,
    partition: u64,
    event: SessionEvent<'_>,
) {
    match event {
        SessionEvent::Call(call) => events.call(call),
        SessionEvent::ErrorResult(call, result) => {
            events.error(call, &error_body(call, result), tokenizer, partition);
        }
        SessionEvent::Speculation {
            call,
            event,
            result,
        } => {
            let body = result.and_then(|r| shown(r, call.forwards_structured));
            let forwarded = body.as_ref().map(Shown::forwarded);
            events.speculation(call, event, forwarded.as_ref(), tokenizer);
        }
        SessionEvent::Retrieval(record) => events.retrieval(record),
        SessionEvent::CodeRun(record) => events.code_run(record),
        SessionEvent::ToolsListed { tools, served } => {
            // Counting is the work; none when nothing records it.
            if events.telemetry().is_active() {
                let tokens = crate::definitions::definition_tokens(tools, tokenizer);
                events.tools_listed(tools.len() as u64, tokens, served);
            }
        }
        SessionEvent::Ended => events.end(),
    }
}

/// What the client forwards of an error result, as one text.
fn error_body(call: &ResolvedCall, result: &CallToolResult) -> String {
    match shown(result, call.forwards_structured) {
        Some(Shown::Structured(text, _)) => text,
        Some(Shown::Text(texts)) => texts.join("\n"),
        None => String::new(),
    }
}

/// The events of a session whose results pass as they came
/// (`--pipeline passthrough`): recorded as a configured session records
/// them, counted with the config's tokenizer, in context partition 0.
pub struct PassthroughEvents {
    events: SessionEvents,
    tokenizer: Tokenizer,
}

impl PassthroughEvents {
    /// The events of one passthrough session: recorded to telemetry as
    /// `config`'s `[telemetry]` says, counted with its tokenizer.
    pub fn for_session(config: &PipelineConfig) -> Self {
        let tokenizer = devboy_session::default_tokenizer(config);
        let telemetry = Telemetry::for_session(&config.telemetry, &tokenizer.to_string());
        Self::new(telemetry, tokenizer)
    }

    /// Events recorded to `telemetry`, results counted with `tokenizer`.
    pub fn new(telemetry: Telemetry, tokenizer: Tokenizer) -> Self {
        Self {
            events: SessionEvents::new(telemetry),
            tokenizer,
        }
    }
}

impl EventSink for PassthroughEvents {
    fn record(&self, event: SessionEvent<'_>) {
        record_to(&self.events, self.tokenizer, 0, event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devboy_core::call::{CallRoute, SideEffect, ToolClassFacts};
    use devboy_core::pipeline_config::SideEffectClass;
    use devboy_core::speculation::SpeculationEvent;
    use devboy_telemetry::{DedupOutcome, ResultLayer};
    use rmcp::model::{JsonObject, MetaObject as Meta};
    use serde_json::json;
    use std::path::Path;

    fn fixed_ids() -> IdAllocator {
        IdAllocator::new(devboy_pipeline::SessionTag::FIXED)
    }

    fn processor() -> PipelineProcessor {
        PipelineProcessor::with_ids(
            Arc::new(PipelineConfig::embedded_default()),
            true,
            fixed_ids(),
        )
    }

    fn configured(toml: &str) -> PipelineProcessor {
        let config = PipelineConfig::from_str(toml, Path::new("test.toml")).unwrap();
        PipelineProcessor::with_ids(Arc::new(config), true, fixed_ids())
    }

    /// A call of tool `read` of upstream `fs`, exposed as `exposed`.
    fn resolved(exposed: &str, arguments: Option<&JsonObject>, class: SideEffect) -> ResolvedCall {
        ResolvedCall::new(
            exposed,
            CallRoute::Upstream {
                upstream: "fs".into(),
                tool: "read".into(),
            },
            arguments.cloned(),
            class,
        )
    }

    fn named(exposed: &str, arguments: Option<&JsonObject>) -> ResolvedCall {
        resolved(
            exposed,
            arguments,
            SideEffect::stated(SideEffectClass::ReadOnly),
        )
    }

    fn call(arguments: Option<&JsonObject>, forwards_structured: bool) -> ResolvedCall {
        named("fs__read", arguments).shown_to(forwards_structured, None)
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
            .process(&call(None, true), &result, &Handoff::new())
            .unwrap()
            .unwrap();
        assert_eq!(fresh.structured_content, None);
        assert_eq!(texts(&fresh), [value.to_string(), "> [id: tagfix1]".into()]);
        assert_eq!(fresh.meta, Some(meta.clone()));

        let repeat = processor
            .process(&call(None, true), &result, &Handoff::new())
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&repeat),
            ["> [ref: tagfix1, unchanged; devboy_expand tagfix1]"]
        );
        assert_eq!(repeat.structured_content, None);
        assert_eq!(repeat.meta, Some(meta));
        assert_eq!(
            processor.expand("tagfix1", None, true, None),
            Ok(value.to_string())
        );
    }

    /// A restart: the model still holds the first process's id, and the
    /// second process has numbered other content the same.
    #[test]
    fn an_id_of_an_earlier_process_is_stale_not_other_content() {
        let config = Arc::new(PipelineConfig::embedded_default());
        let earlier = PipelineProcessor::with_ids(config.clone(), true, process_ids());
        let later = PipelineProcessor::with_ids(config, true, process_ids());
        let shown = |processor: &PipelineProcessor, text: String| {
            let result = CallToolResult::success(vec![ContentBlock::text(text)]);
            let out = processor
                .process(&call(None, false), &result, &Handoff::new())
                .unwrap()
                .unwrap();
            let line = texts(&out).pop().unwrap_or_default();
            devboy_pipeline::hints::parse_id_line(&line)
                .unwrap_or_else(|| panic!("no id line: {line}"))
                .to_owned()
        };
        let old = shown(&earlier, big());
        let new = shown(&later, "9876543210".repeat(100));
        assert_ne!(old, new, "two processes never print the same id");
        assert_eq!(
            later.expand(&old, None, true, None),
            Err(format!(
                "`{old}` was not issued by this devboy session (an earlier session's, or mistyped); call the tool again"
            ))
        );
        assert_eq!(
            later.expand(&new, None, true, None),
            Ok("9876543210".repeat(100))
        );
        assert_eq!(earlier.expand(&old, None, true, None), Ok(big()));
    }

    #[test]
    fn text_clients_keep_structured_content() {
        let processor = processor();
        let mut result = CallToolResult::success(vec![ContentBlock::text(big())]);
        result.structured_content = Some(json!({"n": 1}));
        let fresh = processor
            .process(&call(None, false), &result, &Handoff::new())
            .unwrap()
            .unwrap();
        assert_eq!(texts(&fresh), [big(), "> [id: tagfix1]".into()]);
        assert_eq!(fresh.structured_content, Some(json!({"n": 1})));
        let repeat = processor
            .process(&call(None, false), &result, &Handoff::new())
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
                processor
                    .process(&call(None, false), &result, &Handoff::new())
                    .unwrap(),
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
        processor
            .process(&call(None, false), &two, &Handoff::new())
            .unwrap();
        let other = processor
            .process(&call(None, false), &one, &Handoff::new())
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
        processor
            .process(&call(args, false), &result, &Handoff::new())
            .unwrap();
        let mut write = call(args, false);
        write.side_effect = SideEffect::UNKNOWN;
        processor.forget_for(&write);
        let again = processor
            .process(&call(args, false), &result, &Handoff::new())
            .unwrap()
            .unwrap();
        // Forgotten as delivered; but the same text again is exactly the
        // version the model holds (a failed or no-op write): a reference.
        assert_eq!(
            texts(&again).last().map(String::as_str),
            Some("> [ref: tagfix1, unchanged; devboy_expand tagfix1]")
        );
        let changed = CallToolResult::success(vec![ContentBlock::text(big().replace('7', "8"))]);
        processor.forget_for(&write);
        let after = processor
            .process(&call(args, false), &changed, &Handoff::new())
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&after).last().map(String::as_str),
            Some("> [id: tagfix2]"),
            "a changed text after the write: in full"
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
        processor
            .process(&call(None, false), &result, &Handoff::new())
            .unwrap();
        let first = processor
            .process(&call(None, false), &result, &Handoff::new())
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&first),
            ["> [ref: tagfix1, unchanged; devboy_expand tagfix1]"]
        );
        // The limit is reached: the repeat goes out as it came, no id line.
        assert_eq!(
            processor
                .process(&call(None, false), &result, &Handoff::new())
                .unwrap(),
            None
        );

        let list = labels(40);
        let out = processor
            .process(&named("gh__labels", None), &list, &Handoff::new())
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
        let report = processor.report();
        assert_eq!(report["hints_sent"]["ref"], 1);
        assert_eq!(report["hints_sent"]["elided"], 0);

        // The same list with the default policy is encoded and elided.
        let default = configured("[encoding]\nbudget_tokens = 200\n");
        let out = default
            .process(&named("gh__labels", None), &list, &Handoff::new())
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
                processor
                    .process(&call(None, false), &result, &Handoff::new())
                    .unwrap(),
                None
            );
        }
        processor.set_model(Some("claude-sonnet-4-5".into()));
        processor
            .process(&call(None, false), &result, &Handoff::new())
            .unwrap();
        let repeat = processor
            .process(&call(None, false), &result, &Handoff::new())
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
        let report = processor.report();
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
        processor
            .process(&call(None, false), &result, &Handoff::new())
            .unwrap();
        let soon = processor
            .process(&call(None, false), &result, &Handoff::new())
            .unwrap()
            .unwrap();
        assert_eq!(texts(&soon).len(), 1, "a reference within the second");
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let later = processor
            .process(&call(None, false), &result, &Handoff::new())
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
                    .process(&named("fs__read", None), &result, &Handoff::new())
                    .unwrap(),
                None
            );
        }
        let small = CallToolResult::success(vec![ContentBlock::text("0123456789")]);
        let fresh = processor
            .process(&named("mem__read", None), &small, &Handoff::new())
            .unwrap()
            .unwrap();
        assert_eq!(texts(&fresh), ["0123456789", "> [id: tagfix1]"]);
    }

    #[test]
    fn tool_rules_override_annotations_and_invalidate_endpoints() {
        let rules = "[tools.\"gh__list_*\"]\nside_effect = \"read_only\"\n\
             [tools.\"gh__create_issue\"]\nside_effect = \"mutating\"\ninvalidates = [\"gh__list_*\"]\n";
        let processor = configured(rules);
        let config = PipelineConfig::from_str(rules, Path::new("test.toml")).unwrap();
        // As the call path resolves them: the config over the annotations.
        let class = |exposed: &str, annotated| {
            devboy_core::call::side_effect(
                &config,
                exposed,
                ToolClassFacts {
                    annotated,
                    shipped: None,
                    name: "frob",
                },
            )
        };
        let result = CallToolResult::success(vec![ContentBlock::text(big())]);
        let list = || {
            resolved(
                "gh__list_issues",
                None,
                class("gh__list_issues", SideEffectClass::Unknown),
            )
        };
        processor
            .process(&list(), &result, &Handoff::new())
            .unwrap();
        // Configured read-only: calling it again forgets nothing.
        processor.forget_for(&list());
        let repeat = processor
            .process(&list(), &result, &Handoff::new())
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&repeat),
            ["> [ref: tagfix1, unchanged; devboy_expand tagfix1]"]
        );
        // Annotated read-only, configured mutating, with an invalidates list.
        let create = resolved(
            "gh__create_issue",
            None,
            class("gh__create_issue", SideEffectClass::ReadOnly),
        );
        let forgotten = |p: &PipelineProcessor| p.report()["forgotten"]["mutating_calls"].clone();
        assert_eq!(forgotten(&processor), json!(0));
        processor.forget_for(&create);
        assert_eq!(forgotten(&processor), json!(1), "the list is forgotten");
        // The same list again is still exactly what the model holds.
        let again = processor
            .process(&list(), &result, &Handoff::new())
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&again),
            ["> [ref: tagfix1, unchanged; devboy_expand tagfix1]"]
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
            PipelineProcessor::with_ids(config, true, fixed_ids()).with_telemetry(telemetry);
        let args = json!({"path": "/p/CANARY-7f3a-SECRET.txt"});
        let read = call(args.as_object(), false).shown_to(false, Some("claude-code".into()));
        let text = CallToolResult::success(vec![ContentBlock::text(big())]);
        processor.process(&read, &text, &Handoff::new()).unwrap();
        processor.process(&read, &text, &Handoff::new()).unwrap();
        let rows: Vec<_> = (0..30)
            .map(|i| json!({"id": i, "name": format!("item-{i}"), "done": i % 2 == 0}))
            .collect();
        let table = CallToolResult::structured(json!(rows));
        processor
            .process(&named("gh__list_items", None), &table, &Handoff::new())
            .unwrap();
        processor.advance_partition();
        let error = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        processor.record(SessionEvent::ErrorResult(&read, &error));
        processor.record(SessionEvent::Ended);

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
                _ => None,
            })
            .collect();
        let summary = events
            .iter()
            .find_map(|e| match e {
                Event::Session(s) => Some(s),
                _ => None,
            })
            .expect("a summary");
        let what: Vec<_> = results
            .iter()
            .map(|r| (r.dedup, r.layer, r.action.as_ref(), r.is_error))
            .collect();
        assert_eq!(
            what,
            [
                (DedupOutcome::Miss, ResultLayer::Passthrough, "fresh", false),
                (DedupOutcome::Hit, ResultLayer::Dedup, "reference", false),
                (DedupOutcome::Miss, ResultLayer::Encoder, "encoded", false),
                (
                    DedupOutcome::Off,
                    ResultLayer::Passthrough,
                    "unchanged",
                    true
                ),
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

    /// devboy_expand's delivery of a referenced id: one expansion event
    /// under the tool whose result it was, counted in the summary and in
    /// the processor's totals alike.
    #[test]
    fn an_expansion_is_recorded_under_the_tool_whose_result_it_was() {
        use devboy_telemetry::{Delivered, Event, Salt, TelemetryOptions};
        let dir = std::env::temp_dir().join(format!("devboy-mcp-expansion-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let telemetry = Telemetry::start(TelemetryOptions::new(dir.clone(), "o200k_base"));
        let processor = processor().with_telemetry(telemetry);
        let text = CallToolResult::success(vec![ContentBlock::text(big())]);
        processor
            .process(&call(None, false), &text, &Handoff::new())
            .unwrap();
        let repeat = processor
            .process(&call(None, false), &text, &Handoff::new())
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&repeat),
            ["> [ref: tagfix1, unchanged; devboy_expand tagfix1]"]
        );
        let before = processor.totals();
        let expanded = processor.expand("tagfix1", None, false, None).unwrap();
        processor.record_expansion("tagfix1", false, &expanded);
        let tokens = processor.tokenizer().count(&expanded) as u64;
        let after = processor.totals();
        assert_eq!(after.tokens_final, before.tokens_final + tokens);
        assert_eq!(after.dedup_saved, before.dedup_saved - tokens as i64);
        assert_eq!(after.tokens_raw, before.tokens_raw);
        assert_eq!(processor.report()["expanded"]["again_tokens"], tokens);
        processor.record(SessionEvent::Ended);

        let mut events = Vec::new();
        for file in devboy_telemetry::events_files(&dir).unwrap() {
            let text = std::fs::read_to_string(&file).unwrap();
            events.extend(text.lines().map(|l| Event::parse_line(l).unwrap()));
        }
        let salt = Salt::load_or_create(&dir.join(devboy_telemetry::SALT_FILE)).unwrap();
        let expansions: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::Expansion(x) => Some((x.tool, x.upstream, x.delivered, x.tokens)),
                _ => None,
            })
            .collect();
        assert_eq!(
            expansions,
            [(
                salt.h(&[b"fs__read"]),
                salt.h(&[b"fs"]),
                Delivered::Again,
                tokens
            )]
        );
        let summary = events
            .iter()
            .find_map(|e| match e {
                Event::Session(s) => Some(s.clone()),
                _ => None,
            })
            .expect("a summary");
        assert_eq!(summary.results, 2);
        assert_eq!(summary.tokens_final, after.tokens_final);
        assert_eq!(summary.dedup_saved, after.dedup_saved);
        assert_eq!(
            summary.expanded.map(|e| (e.calls, e.tokens)),
            Some((1, tokens))
        );
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
                &status.clone().shown_to(true, None),
                &first,
                &Handoff::new(),
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&fresh).last().map(String::as_str),
            Some("> [id: tagfix1]")
        );
        let near = processor
            .process(
                &status.clone().shown_to(true, None),
                &second,
                &Handoff::new(),
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            texts(&near),
            ["> [near-ref: tagfix1, changed below; devboy_expand tagfix2]\n/state: \"success\""]
        );
        assert_eq!(near.structured_content, None);
        assert_eq!(
            processor.expand("tagfix2", None, true, None),
            Ok(body("success").to_string())
        );
        assert_eq!(processor.report()["near_references"], 1);
    }

    #[test]
    fn speculation_events_reach_telemetry_with_the_landed_size() {
        use devboy_core::speculation::{DeclineReason, PrefetchEnd, Served};
        use devboy_telemetry::{Event, SpeculationKind, TelemetryOptions};
        let dir =
            std::env::temp_dir().join(format!("devboy-mcp-speculation-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let telemetry = Telemetry::start(TelemetryOptions::new(dir.clone(), "o200k_base"));
        let processor = processor().with_telemetry(telemetry);
        let args = json!({"path": "/p/a.txt"});
        let prefetch = call(args.as_object(), false);
        let landed = CallToolResult::success(vec![ContentBlock::text(big())]);
        processor.record(SessionEvent::Speculation {
            call: &prefetch,
            event: SpeculationEvent::Dispatched {
                predicted_tokens: 100,
            },
            result: None,
        });
        processor.record(SessionEvent::Speculation {
            call: &prefetch,
            event: SpeculationEvent::Ended {
                end: PrefetchEnd::Used,
                predicted_tokens: 100,
            },
            result: Some(&landed),
        });
        let own = prefetch.clone().served(Served::Prefetch);
        processor.process(&own, &landed, &Handoff::new()).unwrap();
        processor.record(SessionEvent::Speculation {
            call: &named("fs__write", None),
            event: SpeculationEvent::Declined {
                reason: DeclineReason::Writes,
            },
            result: None,
        });
        processor.record(SessionEvent::Ended);
        let mut events = Vec::new();
        for file in devboy_telemetry::events_files(&dir).unwrap() {
            let text = std::fs::read_to_string(&file).unwrap();
            events.extend(text.lines().map(|l| Event::parse_line(l).unwrap()));
        }
        let speculation: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::Speculation(s) => Some(s),
                _ => None,
            })
            .collect();
        let kinds: Vec<_> = speculation.iter().map(|s| s.event).collect();
        assert_eq!(
            kinds,
            [
                SpeculationKind::Dispatched,
                SpeculationKind::Ended,
                SpeculationKind::Declined
            ]
        );
        // The landed body counted in the session's tokenizer.
        let expected = processor.tokenizer().count(&big()) as u64;
        assert!(expected > 0);
        assert_eq!(speculation[1].actual_tokens, Some(expected));
        let result = events
            .iter()
            .find_map(|e| match e {
                Event::Result(r) => Some(r),
                _ => None,
            })
            .unwrap();
        assert_eq!(result.served.as_deref(), Some("prefetch"));
        assert_eq!(result.predicted_tokens, Some(100));
        let summary = events
            .iter()
            .find_map(|e| match e {
                Event::Session(s) => s.speculation.clone(),
                _ => None,
            })
            .unwrap();
        assert_eq!((summary.dispatched, summary.used), (1, 1));
        assert_eq!(summary.calls_saved.prefetch, 1);
        assert_eq!(summary.declined.get("writes"), Some(&1));
        assert_eq!((summary.predictions, summary.overruns), (1, 1));
    }
}
