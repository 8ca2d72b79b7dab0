//! One session's whole pipeline over forwarded bodies: dedup, then the
//! router over templates and encoder formats, with honest accounting.
//!
//! [`ResultPipeline`] is what the proxy and `devboy replay` both drive, so
//! the figures replay reports are the ones a live session would produce.
//! For each body (the exact text the client would forward to the model):
//!
//! 1. **dedup** ([`DedupStage`]): a repeat of a body the model still holds becomes
//!    a reference; a polled near-duplicate becomes its changes; a fresh body
//!    large enough gets an id.
//! 2. **template / encoder** ([`route`]): a fresh or unreferenced body is re-encoded in
//!    its cheapest lossless form if that costs fewer tokens, and elided to
//!    the budget if it is too large, recoverably. A body that goes out
//!    elided is withdrawn from the dedup cache, since the model did not
//!    receive it in full.
//!
//! **Accounting** (invariant 8 in docs/invariants.md) is in tokens of the configured tokenizer,
//! against the body the client would have forwarded (`tokens_raw`). A
//! result's saving is attributed to dedup when the dedup stage replaced it (minus, for
//! fresh bodies, the id line dedup adds), and to the encoder when the router
//! did. `combined = dedup + encoder`, so the split always adds up.

use serde_json::Value;

use crate::dedup_stage::{DedupDecision, DedupStage, DedupStageConfig, ResultPolicy};
use crate::handoff::Handoff;
use crate::hints::{HintKind, HintSet};
use crate::ids::{EndpointKey, IdAllocator, ReferenceId};
use crate::route::{route, ClientLimits, RouteConfig};
use crate::shape::{classify, classify_json};
use crate::time::Timestamp;
use crate::tokens::Tokenizer;

/// What may be done to one body (the endpoint's settings).
#[derive(Debug, Clone, Default)]
pub struct BodyPolicy {
    /// Dedup, if enabled for the endpoint.
    pub dedup: Option<ResultPolicy>,
    /// Re-encode and elide (templates and encoder formats).
    pub encode: bool,
    /// Restrict the encoding to one format or template (see
    /// [`crate::route::encoding_names`]).
    pub only: Option<String>,
    /// Never elide, whatever the budget (elision hints are not allowed):
    /// a result over the budget goes out whole.
    pub keep_whole: bool,
    /// What the client shows of one result at most.
    pub client: ClientLimits,
}

/// What the dedup stage and the router did with a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Sent as it was.
    Unchanged,
    /// Sent as it was, with an id line.
    Fresh,
    /// Replaced by a reference to an earlier delivery.
    Reference,
    /// Replaced by the changes since an earlier delivery.
    NearReference,
    /// Re-encoded losslessly (with an id line when fresh).
    Encoded,
    /// Re-encoded or not, with parts elided to fit the budget.
    Elided,
    /// Texts the model holds replaced by references, the rest kept (and
    /// re-encoded when that is cheaper).
    PartReferences,
    /// Sent as it was because the pipeline ran past its deadline (the
    /// waiter gave up on it; see [`Handoff`]).
    Deadline,
}

impl Action {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Action::Unchanged => "unchanged",
            Action::Fresh => "fresh",
            Action::Reference => "reference",
            Action::NearReference => "near_reference",
            Action::Encoded => "encoded",
            Action::Elided => "elided",
            Action::PartReferences => "part_references",
            Action::Deadline => "deadline",
        }
    }
}

/// The pipeline's answer for one body.
#[derive(Debug, Clone, PartialEq)]
pub struct Processed {
    /// What happened.
    pub action: Action,
    /// The text to send instead of the body, or `None` to send the body.
    pub text: Option<String>,
    /// A line to send after the body or `text` (`> [id: kafrum3]`).
    pub id_line: Option<String>,
    /// The id the whole body can be expanded from, if any.
    pub id: Option<ReferenceId>,
    /// The body's shape ([`crate::shape::Shape::name`]), when it was
    /// classified (fresh bodies with encoding on).
    pub shape: Option<&'static str>,
    /// The inner formats found in its string leaves or text
    /// ([`crate::shape::InnerFormat::name`]), when it was classified.
    pub inner_formats: Vec<&'static str>,
    /// The encoding used, when re-encoded.
    pub format: Option<&'static str>,
    /// The hint lines `text` and `id_line` carry.
    pub hints: HintSet,
    /// Tokens of the body as the client would have forwarded it.
    pub tokens_raw: usize,
    /// Tokens of what is sent (text or body, plus the id line).
    pub tokens_final: usize,
    /// Tokens saved by dedup (negative: the id line's cost on a fresh body).
    pub dedup_saved: i64,
    /// Tokens saved by the router.
    pub encoder_saved: i64,
}

impl Processed {
    /// A body of `tokens` tokens that goes out as it came.
    pub fn unchanged(tokens: usize) -> Self {
        Self {
            action: Action::Unchanged,
            text: None,
            id_line: None,
            id: None,
            shape: None,
            inner_formats: Vec::new(),
            format: None,
            hints: HintSet::EMPTY,
            tokens_raw: tokens,
            tokens_final: tokens,
            dedup_saved: 0,
            encoder_saved: 0,
        }
    }
}

/// Running totals of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Bodies processed.
    pub results: u64,
    /// Sum of [`Processed::tokens_raw`].
    pub tokens_raw: u64,
    /// Sum of [`Processed::tokens_final`].
    pub tokens_final: u64,
    /// Sum of [`Processed::dedup_saved`].
    pub dedup_saved: i64,
    /// Sum of [`Processed::encoder_saved`].
    pub encoder_saved: i64,
    /// Results answered with a reference.
    pub references: u64,
    /// Results answered with changes.
    pub near_references: u64,
    /// Results with parts replaced by references.
    pub part_references: u64,
    /// Results re-encoded.
    pub encoded: u64,
    /// Results with parts elided.
    pub elided: u64,
    /// Results sent as they came because the pipeline ran past its
    /// deadline.
    pub deadline: u64,
}

impl Totals {
    /// A percentage of the raw tokens, one decimal.
    pub fn pct(&self, saved: i64) -> f64 {
        if self.tokens_raw == 0 {
            return 0.0;
        }
        (saved as f64 * 1000.0 / self.tokens_raw as f64).round() / 10.0
    }

    /// `(dedup %, encoder %, combined %)` of the raw tokens.
    pub fn split_pct(&self) -> (f64, f64, f64) {
        (
            self.pct(self.dedup_saved),
            self.pct(self.encoder_saved),
            self.pct(self.dedup_saved + self.encoder_saved),
        )
    }
}

/// One session's pipeline state; see the module docs.
#[derive(Debug)]
pub struct ResultPipeline {
    stage: DedupStage,
    route: RouteConfig,
    totals: Totals,
}

impl ResultPipeline {
    /// A pipeline with empty state, naming what it shows with `ids` (one
    /// allocator per process and session: its tag keeps the ids apart from
    /// every other session's).
    pub fn new(dedup: DedupStageConfig, route: RouteConfig, ids: IdAllocator) -> Self {
        Self {
            stage: DedupStage::new(dedup, ids),
            route,
            totals: Totals::default(),
        }
    }

    /// The dedup stage (calls, compaction, expansion, stats).
    pub fn stage(&mut self) -> &mut DedupStage {
        &mut self.stage
    }

    /// The dedup stage, read-only.
    pub fn stage_ref(&self) -> &DedupStage {
        &self.stage
    }

    /// The tokenizer costs are counted in.
    pub fn tokenizer(&self) -> Tokenizer {
        self.route.tokenizer
    }

    /// The token budget of one result.
    pub fn budget_tokens(&self) -> usize {
        self.route.budget_tokens
    }

    /// Counts later results in `tokenizer` and elides them to
    /// `budget_tokens` (the session's model became known, say). Totals so
    /// far keep the counts they were made with.
    pub fn configure(&mut self, tokenizer: Tokenizer, budget_tokens: usize) {
        self.route.tokenizer = tokenizer;
        self.route.budget_tokens = budget_tokens;
    }

    /// How the router is set up (tokenizer, budget).
    pub fn route_config(&self) -> &RouteConfig {
        &self.route
    }

    /// The totals so far.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// Decides what the model sees for `body` (with its parsed JSON when
    /// the caller has it, e.g. a `structuredContent` value).
    ///
    /// Between its stages it looks at `handoff`: once the waiter has given
    /// up, it stops, takes back what it recorded, and answers
    /// [`Action::Deadline`] (the body goes out as it came). The caller
    /// settles the race at the very end with [`Handoff::hand_over`] and,
    /// when that fails, [`retract`](Self::retract)s the answer.
    #[allow(clippy::too_many_arguments)]
    pub fn process(
        &mut self,
        endpoint: EndpointKey,
        body: &str,
        json: Option<&Value>,
        paths: Vec<String>,
        now: Timestamp,
        policy: &BodyPolicy,
        handoff: &Handoff,
    ) -> Processed {
        let tokens_raw = self.route.tokenizer.count(body);
        self.process_counted(
            endpoint, body, json, paths, now, policy, handoff, tokens_raw,
        )
    }

    /// [`process`](Self::process) for a body whose tokens the caller
    /// counted already, with [`tokenizer`](Self::tokenizer) (outside
    /// whatever lock guards this pipeline: counting is the longest step).
    /// `tokens_raw` may be [`Tokenizer::count_up_to`] the bound: exact up
    /// to it, and past it only known to be past it.
    #[allow(clippy::too_many_arguments)]
    pub fn process_counted(
        &mut self,
        endpoint: EndpointKey,
        body: &str,
        json: Option<&Value>,
        paths: Vec<String>,
        now: Timestamp,
        policy: &BodyPolicy,
        handoff: &Handoff,
        tokens_raw: usize,
    ) -> Processed {
        let tokenizer = self.route.tokenizer;
        let reads_file = !paths.is_empty();
        // What the client would have shown of the body: savings are
        // counted against that, never against what it would have cut.
        let shown = policy.client.shown_tokens(tokenizer, body, tokens_raw);
        let mut out = Processed::unchanged(shown);
        if handoff.given_up() {
            out.action = Action::Deadline;
            return self.finish(out);
        }
        let mut fresh = None;
        // A body with parts the model holds replaced by references: what
        // the encoder works on from here.
        let mut rewritten: Option<String> = None;
        if let Some(dedup) = &policy.dedup {
            let dedup = &ResultPolicy {
                body_tokens: dedup.ids_by_saving.then_some(shown),
                ..dedup.clone()
            };
            match self
                .stage
                .on_result(endpoint, body.as_bytes(), paths, now, dedup)
            {
                DedupDecision::Repeat { id, hint } => {
                    out.hints = out.hints.with(HintKind::Reference);
                    self.replaced(&mut out, Action::Reference, Some(id), hint);
                    return self.finish(out);
                }
                DedupDecision::NearRepeat { id, text, .. } => {
                    out.hints = out.hints.with(HintKind::NearReference);
                    self.replaced(&mut out, Action::NearReference, Some(id), text);
                    return self.finish(out);
                }
                DedupDecision::Parts {
                    id, body: parts, ..
                } => {
                    let line = crate::hints::whole(id);
                    let tokens = tokenizer.count(&parts) + tokenizer.count(&line);
                    if self.bound(policy, reads_file).fits(tokens, &parts) {
                        out.action = Action::PartReferences;
                        out.id = Some(id);
                        out.tokens_final = tokens;
                        out.dedup_saved = shown as i64 - tokens as i64;
                        out.id_line = Some(line);
                        out.hints = out.hints.with(HintKind::Reference);
                        out.text = Some(parts.clone());
                        rewritten = Some(parts);
                    } else {
                        // Even with its held parts referenced it is over
                        // the bound: the whole goes out like a fresh body,
                        // under the id that stores it (elided below).
                        let id_line = crate::hints::id_line(id);
                        let cost = tokenizer.count(&id_line);
                        out.action = Action::Fresh;
                        out.id = Some(id);
                        out.tokens_final += cost;
                        out.dedup_saved -= cost as i64;
                        out.id_line = Some(id_line);
                        out.hints = out.hints.with(HintKind::Id);
                        fresh = Some(id);
                    }
                }
                DedupDecision::Fresh { id, id_line } => {
                    let cost = tokenizer.count(&id_line) as i64;
                    out.action = Action::Fresh;
                    out.id = Some(id);
                    out.tokens_final += cost as usize;
                    out.dedup_saved -= cost;
                    out.id_line = Some(id_line);
                    out.hints = out.hints.with(HintKind::Id);
                    fresh = Some(id);
                }
                DedupDecision::Unchanged => {}
            }
        }
        if handoff.given_up() {
            return self.abandoned(body, out);
        }
        if policy.encode {
            let tokens_in = rewritten
                .as_deref()
                .map_or(tokens_raw, |b| tokenizer.count(b));
            let shown_in = if rewritten.is_some() {
                tokens_in
            } else {
                shown
            };
            let json = if rewritten.is_some() { None } else { json };
            let body: &str = rewritten.as_deref().unwrap_or(body);
            let classified = match json {
                Some(value) => classify_json(value.clone()),
                None => classify(body),
            };
            out.shape = Some(classified.shape.name());
            out.inner_formats = classified.inner.iter().map(|f| f.name()).collect();
            if handoff.given_up() {
                return self.abandoned(body, out);
            }
            let mut config = RouteConfig {
                only: policy.only.clone(),
                ..self.bound(policy, reads_file)
            };
            // A body with parts referenced fits already; its hint names
            // the whole, so nothing else may be elided from it.
            if policy.keep_whole || rewritten.is_some() {
                config.budget_tokens = usize::MAX;
                config.inline_chars = None;
            }
            // The id line goes out beside the text, within the same bound.
            if let Some(line) = &out.id_line {
                config = config.less(tokenizer.count(line), line);
            }
            let over = !config.fits(tokens_in, body);
            let recover = match fresh {
                Some(id) => Some(id),
                None if over => self.stage.store_only(body.as_bytes()),
                None => None,
            };
            if let Some(routed) = route(body, &classified, tokens_in, &config, recover) {
                if routed.has_encoded_header() {
                    out.hints = out.hints.with(HintKind::Encoded);
                }
                out.action = if rewritten.is_some() {
                    Action::PartReferences
                } else if routed.elided > 0 {
                    if fresh.is_some() {
                        self.stage.withdraw(body.as_bytes());
                    }
                    // The hint names the id; no id line needed.
                    if let Some(line) = out.id_line.take() {
                        let cost = tokenizer.count(&line) as i64;
                        out.tokens_final -= cost as usize;
                        out.dedup_saved += cost;
                    }
                    out.hints = out.hints.without(HintKind::Id).with(HintKind::Elided);
                    out.id = recover;
                    Action::Elided
                } else {
                    Action::Encoded
                };
                out.format = Some(routed.format);
                out.encoder_saved = shown_in as i64 - routed.tokens as i64;
                out.tokens_final = out.tokens_final - shown_in + routed.tokens;
                out.text = Some(routed.text);
            }
        }
        self.finish(out)
    }

    /// The bound of one result under `policy`: the session's budget, the
    /// client's limits, whether the call read files.
    fn bound(&self, policy: &BodyPolicy, reads_file: bool) -> RouteConfig {
        RouteConfig {
            reads_file,
            ..self.route.for_client(policy.client)
        }
    }

    fn replaced(&self, out: &mut Processed, action: Action, id: Option<ReferenceId>, text: String) {
        let tokens = self.route.tokenizer.count(&text);
        out.action = action;
        out.id = id;
        out.tokens_final = tokens;
        out.dedup_saved = out.tokens_raw as i64 - tokens as i64;
        out.text = Some(text);
    }

    fn finish(&mut self, out: Processed) -> Processed {
        self.tally(&out, 1);
        out
    }

    /// Adds (`sign` 1) or takes back (-1) one result in the totals.
    fn tally(&mut self, out: &Processed, sign: i64) {
        let t = &mut self.totals;
        let add = |total: &mut u64, n: u64| {
            *total = if sign > 0 {
                total.saturating_add(n)
            } else {
                total.saturating_sub(n)
            }
        };
        add(&mut t.results, 1);
        add(&mut t.tokens_raw, out.tokens_raw as u64);
        add(&mut t.tokens_final, out.tokens_final as u64);
        t.dedup_saved += sign * out.dedup_saved;
        t.encoder_saved += sign * out.encoder_saved;
        match out.action {
            Action::Reference => add(&mut t.references, 1),
            Action::NearReference => add(&mut t.near_references, 1),
            Action::Encoded => add(&mut t.encoded, 1),
            Action::Elided => add(&mut t.elided, 1),
            Action::PartReferences => add(&mut t.part_references, 1),
            Action::Deadline => add(&mut t.deadline, 1),
            Action::Unchanged | Action::Fresh => {}
        }
    }

    /// The waiter gave up on `body` while it was processed: nothing of
    /// `out` reached the model, so no later result may refer to it.
    fn abandoned(&mut self, body: &str, out: Processed) -> Processed {
        self.forget_delivery(body, &out);
        let mut passed = Processed::unchanged(out.tokens_raw);
        passed.action = Action::Deadline;
        passed.shape = out.shape;
        passed.inner_formats = out.inner_formats;
        self.finish(passed)
    }

    /// Takes back `out`, the answer for `body` that [`process`](Self::process)
    /// returned but the waiter gave up on (its [`Handoff::hand_over`]
    /// failed): the body went out as it came. Returns what stands in for
    /// it ([`Action::Deadline`]), already counted.
    pub fn retract(&mut self, body: &str, out: &Processed) -> Processed {
        self.tally(out, -1);
        self.abandoned(body, out.clone())
    }

    /// `body` was recorded as delivered (with an id, or with parts
    /// referenced) but the model was never shown that: forget it.
    fn forget_delivery(&mut self, body: &str, out: &Processed) {
        let recorded = matches!(
            out.action,
            Action::Fresh | Action::Encoded | Action::PartReferences | Action::NearReference
        );
        if recorded && out.id.is_some() {
            self.stage.withdraw(body.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pipeline(budget: usize) -> ResultPipeline {
        ResultPipeline::new(
            DedupStageConfig::default(),
            RouteConfig {
                budget_tokens: budget,
                ..RouteConfig::default()
            },
            IdAllocator::new(crate::ids::SessionTag::FIXED),
        )
    }

    fn all() -> BodyPolicy {
        BodyPolicy {
            dedup: Some(ResultPolicy::default()),
            encode: true,
            only: None,
            keep_whole: false,
            client: Default::default(),
        }
    }

    fn labels(n: usize) -> String {
        let rows: Vec<Value> = (0..n)
            .map(|i| json!({"id": i, "name": format!("label-{i}"), "color": format!("{:06x}", (i * 2_654_435_761) % 0xFF_FFFF), "default": false, "description": format!("Issues about area {} and {} of the parser", i * 37 % 101, i * 91 % 103)}))
            .collect();
        serde_json::to_string_pretty(&rows).unwrap()
    }

    fn t(ms: u64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    /// `body` from endpoint `ep` at `ms`, everything allowed, waited for.
    fn send(p: &mut ResultPipeline, ep: &EndpointKey, body: &str, ms: u64) -> Processed {
        p.process(
            ep.clone(),
            body,
            None,
            vec![],
            t(ms),
            &all(),
            &Handoff::new(),
        )
    }

    /// A waiter that gave up before the pipeline ran: the body goes out
    /// as it came, nothing is recorded, and it counts as `deadline`.
    #[test]
    fn a_result_given_up_on_is_passed_and_not_remembered() {
        let mut p = pipeline(25_000);
        let body = labels(20);
        let ep = EndpointKey::new("gh", "labels");
        let gone = Handoff::new();
        assert!(gone.give_up());
        let out = p.process(ep.clone(), &body, None, vec![], t(0), &all(), &gone);
        assert_eq!(out.action, Action::Deadline);
        assert_eq!((out.text.as_deref(), out.id_line.as_deref()), (None, None));
        assert_eq!(out.tokens_final, out.tokens_raw);
        // The model holds the body in full now, but under no id: the next
        // copy is fresh, never a reference to an id it was not shown.
        let next = send(&mut p, &ep, &body, 1);
        assert_eq!(next.action, Action::Encoded);
        assert!(next.id_line.is_some());
        assert_eq!((p.totals().results, p.totals().deadline), (2, 1));
    }

    /// The race lost at the end: the pipeline's answer is retracted, the
    /// id it gave is never referenced, and the totals count a deadline.
    #[test]
    fn a_retracted_answer_is_forgotten_and_counted_once() {
        let mut p = pipeline(25_000);
        let body = labels(20);
        let ep = EndpointKey::new("gh", "labels");
        let out = send(&mut p, &ep, &body, 0);
        assert_eq!(out.action, Action::Encoded);
        let before = p.totals().clone();
        let passed = p.retract(&body, &out);
        assert_eq!(passed.action, Action::Deadline);
        let after = p.totals().clone();
        assert_eq!((after.results, after.encoded, after.deadline), (1, 0, 1));
        assert_eq!(after.tokens_raw, before.tokens_raw);
        assert_eq!(after.tokens_final, after.tokens_raw);
        assert_eq!((after.dedup_saved, after.encoder_saved), (0, 0));
        let next = send(&mut p, &ep, &body, 1);
        assert_ne!(next.action, Action::Reference, "{next:?}");
    }

    #[test]
    fn fresh_bodies_are_encoded_with_an_id_and_repeats_referenced() {
        let mut p = pipeline(25_000);
        let body = labels(20);
        let ep = EndpointKey::new("gh", "labels");
        let first = send(&mut p, &ep, &body, 0);
        assert_eq!(first.action, Action::Encoded);
        assert_eq!(first.id_line.as_deref(), Some("> [id: tagfix1]"));
        let text = first.text.clone().unwrap();
        assert_eq!(
            crate::encode::decode(&text).unwrap(),
            serde_json::from_str::<Value>(&body).unwrap()
        );
        assert!(first.encoder_saved > 0 && first.dedup_saved < 0);
        assert_eq!(
            first.tokens_final as i64,
            first.tokens_raw as i64 - first.encoder_saved - first.dedup_saved
        );

        let second = send(&mut p, &ep, &body, 1);
        assert_eq!(second.action, Action::Reference);
        assert_eq!(
            second.text.as_deref(),
            Some("> [ref: tagfix1, unchanged; devboy_expand tagfix1]")
        );
        // Expansion gives the original body, not the encoding.
        assert_eq!(p.stage().expand("tagfix1").as_deref(), Ok(body.as_bytes()));

        let totals = p.totals().clone();
        assert_eq!(
            (totals.results, totals.references, totals.encoded),
            (2, 1, 1)
        );
        let (dedup, encoder, combined) = totals.split_pct();
        assert!(dedup > 0.0 && encoder > 0.0);
        assert!((combined - dedup - encoder).abs() < 0.11);
    }

    #[test]
    fn an_elided_body_is_never_referenced_later() {
        let mut p = pipeline(600);
        let body = labels(200);
        let ep = EndpointKey::new("gh", "labels");
        let first = send(&mut p, &ep, &body, 0);
        assert_eq!(first.action, Action::Elided);
        assert!(first.tokens_final <= 600);
        assert_eq!(first.id_line, None, "the elision hint names the id");
        let id = first.id.unwrap();
        let hint = first.text.as_deref().unwrap().lines().last().unwrap();
        assert!(
            hint.starts_with("> [elided items ")
                && hint.contains(&format!("; devboy_expand {id} items=")),
            "{hint}"
        );
        let again = send(&mut p, &ep, &body, 1);
        assert_eq!(again.action, Action::Elided, "not a reference: {again:?}");
        assert_eq!(
            p.stage().expand(&id.to_string()).as_deref(),
            Ok(body.as_bytes())
        );
    }

    #[test]
    fn over_budget_without_dedup_still_elides_recoverably() {
        let mut p = pipeline(600);
        let body = labels(200);
        let policy = BodyPolicy {
            dedup: None,
            ..all()
        };
        let out = p.process(
            EndpointKey::new("gh", "labels"),
            &body,
            None,
            vec![],
            t(0),
            &policy,
            &Handoff::new(),
        );
        assert_eq!(out.action, Action::Elided);
        let id = out.id.unwrap();
        assert_eq!(
            p.stage().expand(&id.to_string()).as_deref(),
            Ok(body.as_bytes())
        );
    }

    #[test]
    fn nothing_to_gain_leaves_the_body() {
        let mut p = pipeline(25_000);
        let out = p.process(
            EndpointKey::new("fs", "read"),
            "short text",
            None,
            vec![],
            t(0),
            &all(),
            &Handoff::new(),
        );
        assert_eq!(out.action, Action::Unchanged);
        assert_eq!(out.text, None);
        assert_eq!(out.tokens_final, out.tokens_raw);
    }

    /// The hints a result reports are exactly the hint lines it carries.
    #[test]
    fn reported_hints_are_the_hint_lines_sent() {
        use crate::hints::kind_of;
        let mut p = pipeline(600);
        let ep = |n: &str| EndpointKey::new("gh", n);
        let markdown = format!(
            "# Report\n\n| a | b |\n|---|---|\n{}",
            (0..30)
                .map(|i| format!("| row {i} | value {i} |\n"))
                .collect::<String>()
        );
        let bodies = [
            (ep("labels"), labels(20)),
            (ep("labels"), labels(20)),
            (ep("big"), labels(200)),
            (ep("one"), labels(1).replace(['\n', ' '], "")),
            (ep("doc"), markdown),
            (ep("text"), "plain words ".repeat(100)),
        ];
        let mut seen = HintSet::EMPTY;
        for (at, (endpoint, body)) in bodies.into_iter().enumerate() {
            let out = p.process(
                endpoint,
                &body,
                None,
                vec![],
                t(at as u64),
                &all(),
                &Handoff::new(),
            );
            let lines = out
                .text
                .iter()
                .chain(out.id_line.iter())
                .flat_map(|t| t.lines())
                .filter_map(kind_of);
            let found = lines.fold(HintSet::EMPTY, HintSet::with);
            assert_eq!(out.hints, found, "{out:?}");
            seen = HintKind::ALL
                .into_iter()
                .filter(|k| out.hints.contains(*k))
                .fold(seen, HintSet::with);
        }
        for kind in [
            HintKind::Id,
            HintKind::Reference,
            HintKind::Elided,
            HintKind::Encoded,
        ] {
            assert!(seen.contains(kind), "{kind:?} never sent");
        }
    }
}
