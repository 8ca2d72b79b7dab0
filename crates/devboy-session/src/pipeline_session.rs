//! [`PipelineSession`]: one session's pipeline, its policy and its
//! bookkeeping; see the crate docs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use devboy_core::call::ResolvedCall;
use devboy_core::config::ConfigSource;
use devboy_core::pipeline_config::{HintKind, PipelineConfig, SessionContext, SessionSettings};
use devboy_pipeline::encode::Format;
use devboy_pipeline::hints;
use devboy_pipeline::result_pipeline::{Action, BodyPolicy, Processed, ResultPipeline, Totals};
use devboy_pipeline::route::{self, ClientLimits, PartRange};
use devboy_pipeline::{
    EndpointKey, Fingerprint, Handoff, IdAllocator, NearPolicy, ReferenceId, ResultPolicy,
    SessionTag, Template, TextDiffPolicy, Timestamp, Tokenizer,
};
use devboy_telemetry::{CallFacts, DedupOutcome, Delivered, Outcome, ResultLayer, Telemetry};

use crate::events::{origin, SessionEvents};
use crate::expansion::{ExpandedTotals, IssuedIds};
use serde_json::{Map, Value};

use crate::capture::{CaptureRecord, CaptureWriter, CapturedBody, CapturedCall};
use crate::{session_pipeline, tokenizer};

/// What the client forwards to the model of one result.
#[derive(Debug, Clone, Copy)]
pub enum Forwarded<'a> {
    /// One text: a text block, or a structured value serialized (then
    /// `json` is the value; it spares the pipeline a parse).
    Single {
        /// The text the model would see.
        text: &'a str,
        /// Its parsed JSON, when the caller has it.
        json: Option<&'a Value>,
    },
    /// Several text blocks, in order. They are deduplicated as one JSON
    /// array of the blocks (so they never match one block that happens to
    /// join to the same) and never re-encoded: they are not one document.
    Blocks(&'a [&'a str]),
}

/// One session's pipeline under the config's policy; see the crate docs.
/// Safe to share between the calls of a session.
pub struct PipelineSession {
    /// The pipeline config, replaced when its file changes while devboy
    /// runs ([`set_config`](Self::set_config)).
    config: std::sync::RwLock<Arc<PipelineConfig>>,
    encode: bool,
    /// The token cap Claude Code was started with, when it set one
    /// (`MAX_MCP_OUTPUT_TOKENS`, inherited by devboy).
    max_output_tokens: Option<usize>,
    state: Mutex<State>,
    events: SessionEvents,
}

struct State {
    pipeline: ResultPipeline,
    /// The exposed name of every endpoint with a remembered body, for
    /// `invalidates` globs (which match exposed names).
    exposed: HashMap<EndpointKey, Arc<str>>,
    /// What the session is (model, statistics) and what that resolves to.
    context: SessionContext,
    session: Arc<SessionSettings>,
    /// Hints of each kind (in [`HintKind::ALL`] order) sent so far.
    hints_sent: [u64; 4],
    capture: Option<CaptureWriter>,
    /// What each id printed stood for, to count what expanding it delivers.
    issued: IssuedIds,
    /// What `devboy_expand` delivered so far.
    expanded: ExpandedTotals,
}

/// The session's state even if a panic poisoned its lock: every update
/// leaves it consistent, and the seam fails open around a panic.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
                warm_up(tokenizer);
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

    /// Counts the hints a processed result carries (its id line is not
    /// one the hint policy governs).
    fn count_hints(&mut self, processed: &Processed) {
        for emitted in processed.hints.iter() {
            let kind = match emitted {
                hints::HintKind::Id => continue,
                hints::HintKind::Reference => HintKind::Ref,
                hints::HintKind::NearReference => HintKind::NearRef,
                hints::HintKind::Elided => HintKind::Elided,
                hints::HintKind::Encoded => HintKind::Encoded,
            };
            self.hints_sent[kind.index()] += 1;
        }
    }

    fn capture(&mut self, record: impl FnOnce() -> CaptureRecord) {
        if let Some(capture) = &mut self.capture {
            capture.write(&record());
        }
    }
}

/// The built-in that expands ids, whose name an expansion of an id the
/// session cannot place is recorded under.
const EXPAND_TOOL: &str = "devboy_expand";

/// How many budgets' worth of a body's tokens are counted exactly.
const COUNTED_BUDGETS: usize = 2;

/// Loads `tokenizer`'s vocabulary off the result path.
fn warm_up(tokenizer: Tokenizer) {
    let _ = std::thread::Builder::new()
        .name("devboy-vocabulary".into())
        .spawn(move || tokenizer.warm_up());
}

impl PipelineSession {
    /// A session with fresh state following `config`, naming what it shows
    /// with `ids`; `encode` turns re-encoding and elision on
    /// (`encoding.enabled` in the config can still turn them off).
    pub fn new(config: Arc<PipelineConfig>, encode: bool, ids: IdAllocator) -> Self {
        let pipeline = session_pipeline(&config, ids);
        warm_up(pipeline.tokenizer());
        let context = SessionContext::default();
        let session = Arc::new(config.resolve_session(&context));
        Self {
            encode: encode && config.encoding.enabled,
            max_output_tokens: None,
            config: std::sync::RwLock::new(config),
            state: Mutex::new(State {
                pipeline,
                exposed: HashMap::new(),
                context,
                session,
                hints_sent: [0; 4],
                capture: None,
                issued: IssuedIds::default(),
                expanded: ExpandedTotals::default(),
            }),
            events: SessionEvents::default(),
        }
    }

    /// This session's results for Claude Code bounded by `tokens` (the
    /// `MAX_MCP_OUTPUT_TOKENS` it was started with) instead of its default
    /// cap.
    pub fn with_max_output_tokens(mut self, tokens: Option<usize>) -> Self {
        self.max_output_tokens = tokens;
        self
    }

    /// What the client of `call` shows the model of one result at most.
    fn client_limits(&self, config: &PipelineConfig, client: Option<&str>) -> ClientLimits {
        let bound = config.client_bound(client, self.max_output_tokens);
        ClientLimits {
            inline_chars: bound.inline_chars,
            max_tokens: bound.max_tokens,
        }
    }

    /// This session recording to `telemetry` (off by default).
    pub fn with_telemetry(mut self, telemetry: Telemetry) -> Self {
        self.events = SessionEvents::new(telemetry);
        self
    }

    /// This session writing everything `devboy replay` needs to reproduce
    /// it to `capture`, starting with its `session` line.
    pub fn with_capture(self, mut capture: CaptureWriter) -> Self {
        {
            let mut state = lock(&self.state);
            capture.write(&CaptureRecord::Session {
                tag: state.pipeline.stage_ref().tag().to_string(),
                encode: self.encode,
            });
            state.capture = Some(capture);
        }
        self
    }

    /// The pipeline config the session follows now.
    pub fn config(&self) -> Arc<PipelineConfig> {
        self.config
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Follows `config` from the next result on: its endpoint rules,
    /// dedup and hint settings, the session settings it resolves (model
    /// profile, tokenizer, budget, ttl). What the session already showed
    /// and its ids stay; the cache's sizes stay those it started with.
    pub fn set_config(&self, config: Arc<PipelineConfig>) {
        *self
            .config
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = config.clone();
        lock(&self.state).refresh(&config);
    }

    /// Whether results are re-encoded (not only deduplicated).
    pub fn encodes(&self) -> bool {
        self.encode
    }

    /// The session's settings now.
    pub fn session(&self) -> Arc<SessionSettings> {
        lock(&self.state).session.clone()
    }

    /// The tokenizer the session counts in now.
    pub fn tokenizer(&self) -> Tokenizer {
        lock(&self.state).pipeline.tokenizer()
    }

    /// The tag of the ids the session issues.
    pub fn tag(&self) -> SessionTag {
        lock(&self.state).pipeline.stage_ref().tag()
    }

    /// The session's totals so far: its results, and what `devboy_expand`
    /// delivered counted in ([`record_expansion`](Self::record_expansion)).
    pub fn totals(&self) -> Totals {
        let state = lock(&self.state);
        state.expanded.onto(state.pipeline.totals())
    }

    /// A call is about to be answered: the capture notes it (a replay
    /// forgets for it where the live session did).
    pub fn record_call(&self, call: &ResolvedCall) {
        lock(&self.state).capture(|| CaptureRecord::Call(CapturedCall::of(call)));
    }

    /// A call is about to be answered: if it may change things, the
    /// session forgets what it changes (its paths, and what the config's
    /// `invalidates` names).
    pub fn forget_for(&self, call: &ResolvedCall) {
        if !call.side_effect.may_mutate() {
            return;
        }
        let config = self.config();
        let configured = config.has_invalidations(&call.exposed);
        let mut state = lock(&self.state);
        let State {
            pipeline, exposed, ..
        } = &mut *state;
        let forgotten = pipeline.stage().forget_changed(&call.paths, |key| {
            configured
                && exposed
                    .get(key)
                    .is_some_and(|name| config.invalidates(&call.exposed, name))
        });
        if forgotten > 0 {
            tracing::debug!(
                tool = call.exposed,
                forgotten,
                "call may mutate; references forgotten"
            );
        }
    }

    /// Files were written without a call through devboy (Claude Code's
    /// own tools): forgets every result read from `paths`, and with
    /// `missed` (files nobody knows were written too) every result read
    /// from any path.
    pub fn forget_written(&self, paths: &[String], missed: bool) {
        let mut state = lock(&self.state);
        let forgotten = state.pipeline.stage().forget_changed(paths, |_| missed);
        if forgotten > 0 {
            tracing::debug!(
                forgotten,
                "files written outside devboy; references forgotten"
            );
        }
    }

    /// Runs one result, as the client would forward it, through the
    /// pipeline at `at` on the session clock. `None`: neither dedup nor
    /// encoding applies to this tool (nothing was counted or recorded).
    ///
    /// `handoff` carries the caller's deadline (see [`Handoff`]): a result
    /// the caller gave up on is passed as it came, remembered as nothing,
    /// and counted as `deadline`.
    pub fn process(
        &self,
        call: &ResolvedCall,
        forwarded: &Forwarded<'_>,
        at: Timestamp,
        handoff: &Handoff,
    ) -> Option<Processed> {
        // What the fingerprint and `devboy_expand` see: the forwarded text
        // itself, or, for several blocks, a JSON array of them.
        let (text, json, single) = match forwarded {
            Forwarded::Single { text, json } => (std::borrow::Cow::Borrowed(*text), *json, true),
            Forwarded::Blocks(blocks) => (serde_json::to_string(blocks).ok()?.into(), None, false),
        };
        let call_fingerprint = Some(Fingerprint::of(call.key.as_bytes()));
        let endpoint = EndpointKey::new(call.upstream(), call.tool());
        let paths = call.paths.clone();
        // Counted before the lock: the longest step of a big body, and a
        // body the caller gave up on meanwhile is passed without the lock
        // being held for it any longer than to count it.
        let (tokenizer, budget) = {
            let state = lock(&self.state);
            (state.pipeline.tokenizer(), state.pipeline.budget_tokens())
        };
        // Exact well past the bound; a body many times over it is only
        // counted that far (its savings then count no more than that).
        let tokens_raw = tokenizer.count_up_to(&text, budget.saturating_mul(COUNTED_BUDGETS));
        let (processed, dedup_on, partition) = {
            let mut state = lock(&self.state);
            let policy = self.policy(&state, call, single, call_fingerprint)?;
            state.capture(|| CaptureRecord::Result {
                call: CapturedCall::of(call),
                at_ms: at.as_millis(),
                body: CapturedBody::of(forwarded),
            });
            if !state.exposed.contains_key(&endpoint) {
                state
                    .exposed
                    .insert(endpoint.clone(), call.exposed.as_str().into());
            }
            let mut processed = if state.pipeline.tokenizer() == tokenizer {
                state.pipeline.process_counted(
                    endpoint.clone(),
                    &text,
                    json,
                    paths,
                    at,
                    &policy,
                    handoff,
                    tokens_raw,
                )
            } else {
                // The model (and with it the tokenizer) changed meanwhile.
                state
                    .pipeline
                    .process(endpoint.clone(), &text, json, paths, at, &policy, handoff)
            };
            if processed.action != Action::Deadline && !handoff.hand_over() {
                processed = state.pipeline.retract(&text, &processed);
            }
            let State {
                pipeline, issued, ..
            } = &mut *state;
            issued.note(&processed, &endpoint, pipeline.stage_ref().store());
            state.count_hints(&processed);
            state.context.stats.events += 1;
            state.refresh(&self.config());
            let partition = state.pipeline.stage_ref().cache().partition();
            (processed, policy.dedup.is_some(), partition)
        };
        let telemetry = self.events.telemetry();
        if telemetry.is_active() {
            telemetry.set_client(call.client.as_deref());
            let facts = CallFacts {
                tool: &call.exposed,
                upstream: call.upstream(),
                body: &text,
                paths: &call.paths,
            };
            telemetry.record_call(
                &facts,
                &origin(call),
                outcome(&processed, dedup_on, partition),
            );
        }
        Some(processed)
    }

    /// Where the session's events go, and what they are counted in now:
    /// the tokenizer and the context partition.
    pub fn events(&self) -> (&SessionEvents, Tokenizer, u64) {
        let state = lock(&self.state);
        (
            &self.events,
            state.pipeline.tokenizer(),
            state.pipeline.stage_ref().cache().partition(),
        )
    }

    /// What may be done to this call's result now, or `None` if nothing.
    fn policy(
        &self,
        state: &State,
        call: &ResolvedCall,
        single: bool,
        call_fingerprint: Option<Fingerprint>,
    ) -> Option<BodyPolicy> {
        let session = &state.session;
        let config = self.config();
        let settings = config.endpoint_in(&call.exposed, session);
        // A hint kind the policy does not allow here means its content goes
        // out in full instead.
        let model = session.model.as_deref();
        let allows = |kind: HintKind| {
            config
                .hints
                .rule(kind)
                .allows(model, state.hints_sent[kind.index()])
        };
        let dedup = settings.dedup && allows(HintKind::Ref);
        let encode = self.encode && settings.encode;
        if !dedup && !encode {
            return None;
        }
        let near = &config.dedup.near_ref;
        let near_on = settings.near_ref && allows(HintKind::NearRef);
        Some(BodyPolicy {
            dedup: dedup.then(|| ResultPolicy {
                min_body_bytes: Some(settings.min_body_bytes),
                near: near_on.then_some(NearPolicy {
                    max_changes: near.max_changes,
                    min_body_bytes: near.min_body_bytes,
                }),
                call: call_fingerprint,
                freshness: Some(config.freshness(&call.exposed, session)),
                parts: true,
                ids_by_saving: settings.min_body_bytes == config.dedup.min_body_bytes,
                // Filled in by the pipeline, which counts the body.
                body_tokens: None,
                // A built-in's answer, like a write's result, answers this
                // one call: its repeat rate has no prior.
                mutating: call.is_builtin() || call.side_effect.changes_something(),
                text_diff: (config.dedup.text_diff.enabled && allows(HintKind::NearRef)).then_some(
                    TextDiffPolicy {
                        max_share: config.dedup.text_diff.max_share,
                    },
                ),
            }),
            encode: encode && single,
            // Without `encoded` hints only compact JSON (which needs none)
            // may stand in for the body.
            only: if allows(HintKind::Encoded) {
                settings.template.clone()
            } else {
                Some(Format::JsonCompact.name().to_owned())
            },
            keep_whole: !allows(HintKind::Elided),
            client: self.client_limits(&config, call.client.as_deref()),
        })
    }

    /// The model the session runs with became known (Claude Code's
    /// `SessionStart` hook reports it): the llm profile, tokenizer and
    /// budget follow it from the next result on.
    pub fn set_model(&self, model: Option<String>) {
        let mut state = lock(&self.state);
        if state.context.model != model {
            state.capture(|| CaptureRecord::Model {
                model: model.clone(),
            });
            state.context.model = model;
            state.refresh(&self.config());
        }
    }

    /// The model's context was compacted or cleared: nothing shown before
    /// may be referenced. Returns the new partition.
    pub fn compaction(&self) -> u64 {
        self.events.compaction();
        let mut state = lock(&self.state);
        state.capture(|| CaptureRecord::Compaction);
        let partition = state.pipeline.stage().advance_partition();
        state.context.stats.compactions += 1;
        state.refresh(&self.config());
        partition
    }

    /// The session is over: writes the telemetry summary.
    pub fn end(&self) {
        self.events.end();
    }

    /// What `devboy_expand` shows of the result `id` stood for, or why not
    /// (for people), for a client named `client`: all of it or the units
    /// `range` names, within the bound a delivery has (what does not fit
    /// ends in the hint that gives the rest, so a big result is paged
    /// through).
    ///
    /// Not `raw`: in the cheapest lossless form (a file's text fenced and
    /// unescaped rather than the server's JSON string), so that what the
    /// model copies from it is what it copies from any other read. `raw`,
    /// or with encoding off: as the server wrote it.
    pub fn expand(
        &self,
        id: &str,
        range: Option<&PartRange>,
        raw: bool,
        client: Option<&str>,
    ) -> Result<String, String> {
        let id = id.trim();
        let (text, route, ref_id) = {
            let mut state = lock(&self.state);
            let text = match state.pipeline.stage().expand(id) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(error) => return Err(error.to_string()),
            };
            (
                text,
                state.pipeline.route_config().clone(),
                id.parse::<ReferenceId>(),
            )
        };
        let ref_id = ref_id.map_err(|_| format!("`{id}` is not a devboy id"))?;
        let route = route.for_client(self.client_limits(&self.config(), client));
        route::expand(&text, range, raw || !self.encode, &route, ref_id)
    }

    /// `devboy_expand` delivered `text` for the id `id`, asked for whole
    /// or (`ranged`) for the lines or items a hint named: counts what the
    /// model received (see the `expansion` module: delivered again, a cost
    /// taken from the saving that stood in for it; parts of an elided
    /// result it was never shown, new). Call it once per delivery, with
    /// the text that went out.
    pub fn record_expansion(&self, id: &str, ranged: bool, text: &str) {
        let tokenizer = self.tokenizer();
        let tokens = tokenizer.count(text) as u64;
        let (delivered, exposed, upstream) = {
            let mut state = lock(&self.state);
            state.capture(|| CaptureRecord::Expansion {
                id: id.to_owned(),
                ranged,
                text: text.to_owned(),
            });
            let issued = id
                .trim()
                .parse::<ReferenceId>()
                .ok()
                .and_then(|id| state.issued.get(id).cloned());
            let (delivered, exposed, upstream) = match issued {
                Some(issued) => (
                    issued.delivered(ranged),
                    state.exposed.get(&issued.endpoint).cloned(),
                    issued.endpoint.upstream().to_owned(),
                ),
                // Only an id the model was never shown (of a result that
                // went out without it): counted as a repeat, the reading
                // that claims nothing, under devboy's own tool.
                None => (Delivered::Again, None, devboy_core::SERVER_NAME.to_owned()),
            };
            state.expanded.add(delivered, tokens);
            (delivered, exposed, upstream)
        };
        let telemetry = self.events.telemetry();
        if telemetry.is_active() {
            let tool = exposed.as_deref().unwrap_or(EXPAND_TOOL);
            telemetry.record_expansion(tool, &upstream, delivered, tokens);
        }
    }

    /// What the session has done so far, as `devboy_status` shows it.
    pub fn report(&self) -> Value {
        let state = lock(&self.state);
        // What the model received: the results, and what devboy_expand
        // delivered of them again or for the first time.
        let totals = &state.expanded.onto(state.pipeline.totals());
        let expanded = state.expanded.summary;
        let stage = state.pipeline.stage_ref();
        let cache = stage.cache().stats();
        let store = stage.store().stats();
        let (dedup_pct, encoder_pct, combined_pct) = totals.split_pct();
        let config = self.config();
        serde_json::json!({
            "config": match (&config.source, config.layers.as_slice()) {
                (ConfigSource::File(_), [project, own]) => format!(
                    "{} on top of the project's {}",
                    own.display(),
                    project.display()
                ),
                (ConfigSource::File(path), _) => path.display().to_string(),
                (ConfigSource::Embedded, _) => "embedded default".to_owned(),
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
                .map(|k| (k.name().to_owned(), serde_json::json!(state.hints_sent[k.index()])))
                .collect::<Map<_, _>>(),
            "baseline": "what the client would have forwarded",
            "tokens_raw": totals.tokens_raw,
            "tokens_final": totals.tokens_final,
            "expanded": {
                "calls": expanded.calls,
                "tokens": expanded.tokens,
                "again_tokens": expanded.again_tokens,
                "new_tokens": expanded.new_tokens(),
            },
            "dedup_savings_pct": dedup_pct,
            "encoder_savings_pct": encoder_pct,
            "combined_savings_pct": combined_pct,
            "references": totals.references,
            "near_references": totals.near_references,
            "part_references": totals.part_references,
            "encoded": totals.encoded,
            "elided": totals.elided,
            "passthrough": {"deadline": totals.deadline},
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
        })
    }
}

/// A result's telemetry outcome from what the pipeline did with it.
fn outcome(processed: &Processed, dedup_on: bool, partition: u64) -> Outcome {
    let template = processed
        .format
        .filter(|f| Template::ALL.iter().any(|t| t.name() == *f));
    let (dedup, layer) = match processed.action {
        Action::Reference => (DedupOutcome::Hit, ResultLayer::Dedup),
        Action::NearReference | Action::PartReferences => (DedupOutcome::Near, ResultLayer::Dedup),
        Action::Encoded | Action::Elided if template.is_some() => {
            (DedupOutcome::Miss, ResultLayer::Template)
        }
        Action::Encoded | Action::Elided => (DedupOutcome::Miss, ResultLayer::Encoder),
        Action::Unchanged | Action::Fresh | Action::Deadline => {
            (DedupOutcome::Miss, ResultLayer::Passthrough)
        }
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
