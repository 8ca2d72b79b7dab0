//! The engine: dispatches the planner's prefetches through the upstreams,
//! keeps what lands in the [`PrefetchStore`], and answers the agent's
//! matching call from it. The store decides what is held and how each
//! prefetch ended; the engine runs the calls, waits for them, and reports.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use devboy_core::call::{CallKey, CallRoute, ResolvedCall, SideEffect};
use devboy_core::speculation::{DeclineReason, PrefetchEnd, Served, SpeculationEvent};
use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, RequestMetaObject};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::store::{Fate, Flight, Found, Held, Landing, PrefetchStore, Report};
use super::{AnsweredCall, PlannedPrefetch, PrefetchPlanner, SpeculationSettings};
use crate::answers::{AnswerStore, StoredAnswer};
use crate::catalog::ToolRoute;
use crate::proxy::Proxy;
use crate::resolve::Resolver;
use crate::seam::{fail_open, Seam, SessionEvent};
use crate::upstream::{lock, CallFailure, Upstream};

/// What speculation did this session, for `devboy_status`.
#[derive(Debug, Default)]
pub struct SpeculationStats {
    /// Prefetches sent.
    pub dispatched: AtomicU64,
    /// Prefetches ended, by [`PrefetchEnd::ALL`] order.
    pub ended: [AtomicU64; PrefetchEnd::ALL.len()],
    /// Follow-ups declined, by [`DeclineReason::ALL`] order.
    pub declined: [AtomicU64; DeclineReason::ALL.len()],
    /// Calls answered with the fail-fast hint.
    pub fail_fast: AtomicU64,
}

impl SpeculationStats {
    fn count_end(&self, end: PrefetchEnd) {
        if let Some(i) = PrefetchEnd::ALL.iter().position(|e| *e == end) {
            self.ended[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn count_decline(&self, reason: DeclineReason) {
        if let Some(i) = DeclineReason::ALL.iter().position(|r| *r == reason) {
            self.declined[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many prefetches ended as `end`.
    pub fn ended(&self, end: PrefetchEnd) -> u64 {
        PrefetchEnd::ALL
            .iter()
            .position(|e| *e == end)
            .map_or(0, |i| self.ended[i].load(Ordering::Relaxed))
    }

    /// How many follow-ups were declined for `reason`.
    pub fn declined(&self, reason: DeclineReason) -> u64 {
        DeclineReason::ALL
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.declined[i].load(Ordering::Relaxed))
    }
}

/// A prefetched result taken for inlining, with the call it answers.
#[derive(Debug, Clone)]
pub struct InlinedResult {
    /// The call, resolved as the agent's own call of it would be.
    pub call: Arc<ResolvedCall>,
    /// The result, as the upstream sent it.
    pub result: CallToolResult,
}

/// One prefetch: the call and what the planner said of it.
struct Prefetch {
    upstream: Arc<Upstream>,
    /// The call, resolved as the agent's own call of it would be (its
    /// paths: a write to one of them forgets it).
    call: Arc<ResolvedCall>,
    /// Those paths' files as they were when it was sent: it answers only
    /// while they still are (invariant 14).
    files: super::fresh::Snapshot,
    predicted_tokens: usize,
    host: String,
    freshness: Duration,
    /// The upstream's connection it was sent on.
    generation: u64,
}

impl Held for Prefetch {
    fn call(&self) -> &ResolvedCall {
        &self.call
    }

    fn host(&self) -> &str {
        &self.host
    }

    fn freshness(&self) -> Duration {
        self.freshness
    }

    fn predicted_tokens(&self) -> usize {
        self.predicted_tokens
    }

    fn restarted(&self) -> bool {
        self.upstream.generation() != self.generation
    }

    fn fresh(&self) -> bool {
        self.files.fresh()
    }

    fn files(&self) -> Vec<String> {
        self.files
            .paths()
            .into_iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect()
    }
}

/// The speculation engine of one session: the prefetch store and its
/// dispatcher. It is the session's [`AnswerStore`].
pub struct SpeculationEngine {
    planner: Arc<dyn PrefetchPlanner>,
    proxy: Arc<Proxy>,
    /// Where its events go.
    seam: Seam,
    /// Decides the facts of the calls it makes.
    resolver: Resolver,
    store: Mutex<PrefetchStore<Prefetch>>,
    tasks: TaskTracker,
    /// Parent of every prefetch's cancellation.
    stop: CancellationToken,
    stats: SpeculationStats,
}

impl SpeculationEngine {
    /// An engine dispatching to `proxy`'s upstreams as `planner` says,
    /// resolving its calls with `resolver` and reporting to `seam`'s
    /// events.
    pub fn new(
        planner: Arc<dyn PrefetchPlanner>,
        proxy: Arc<Proxy>,
        seam: Seam,
        resolver: Resolver,
    ) -> Arc<Self> {
        Arc::new(Self {
            planner,
            proxy,
            seam,
            resolver,
            store: Mutex::default(),
            tasks: TaskTracker::new(),
            stop: CancellationToken::new(),
            stats: SpeculationStats::default(),
        })
    }

    /// What the engine did so far.
    pub fn stats(&self) -> &SpeculationStats {
        &self.stats
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &SpeculationSettings {
        self.planner.settings()
    }

    /// Prefetches in flight now.
    pub fn in_flight(&self) -> usize {
        lock(&self.store).in_flight()
    }

    /// Entries the store holds now (in flight and landed), and the bytes
    /// of the landed ones.
    pub fn held(&self) -> (usize, usize) {
        lock(&self.store).held()
    }

    /// The context was compacted: fail-fast counts start over.
    pub fn advance_partition(&self) {
        lock(&self.store).advance_partition();
    }

    /// Forgets what `call` may change (see [`PrefetchStore::forget_for`]):
    /// the prefetch store forgets by the rule the dedup cache does.
    pub fn forget_for(&self, call: &ResolvedCall) {
        let reports = lock(&self.store).forget_for(call, |caller, exposed| {
            self.planner.invalidates(caller, exposed)
        });
        self.emit(reports);
    }

    /// Claude Code's own tools wrote `written` (absolute paths), or, when
    /// `missed`, files nobody knows: forgets every prefetch that read one
    /// of them (or, `missed`, any local file), as a write routed through
    /// devboy would; fail-fast counts by the same rule.
    pub fn forget_written(&self, written: &[String], missed: bool) {
        let reports = lock(&self.store).forget_written(written, missed);
        self.emit(reports);
    }

    /// The answer to `call` the engine has: the fail-fast hint, a landed
    /// prefetch, or a prefetch in flight it waits for (until `cancel`).
    pub async fn answer_call(
        &self,
        call: &ResolvedCall,
        cancel: &CancellationToken,
    ) -> Option<StoredAnswer> {
        let key = &call.key;
        let (found, reports) = {
            let mut store = lock(&self.store);
            let fail_after = self.planner.fail_fast_after(&call.exposed);
            let empties = store.empties(key);
            if let Some(n) = fail_after.filter(|n| *n > 0 && empties >= *n) {
                let reports = store.sweep(Instant::now());
                drop(store);
                self.emit(reports);
                self.stats.fail_fast.fetch_add(1, Ordering::Relaxed);
                return Some(StoredAnswer {
                    result: fail_fast_hint(n),
                    served: Served::FailFast,
                });
            }
            store.find(key, Instant::now())
        };
        self.emit(reports);
        let (flight, prefetch) = match found {
            Found::Nothing => return None,
            Found::Landed { result, end } => {
                return (end == PrefetchEnd::Used).then(|| StoredAnswer {
                    result: Arc::unwrap_or_clone(result),
                    served: Served::Prefetch,
                });
            }
            Found::InFlight { flight, prefetch } => (flight, prefetch),
        };
        let mut outcome = flight.outcome.subscribe();
        let landed = tokio::select! {
            waited = outcome.wait_for(Option::is_some) => waited.ok().and_then(|o| o.clone()),
            _ = cancel.cancelled() => {
                let report = lock(&self.store).abandon(&flight, &prefetch);
                self.emit(report.into_iter().collect());
                return None;
            }
        };
        match landed? {
            Ok(result) => Some(StoredAnswer {
                result: Arc::unwrap_or_clone(result),
                served: Served::Joined,
            }),
            Err(PrefetchEnd::UpstreamRestarted) => {
                // The agent's own call would meet the same dying connection:
                // it goes upstream once the upstream is back.
                wait_for_restart(&prefetch, cancel).await;
                None
            }
            Err(_) => None,
        }
    }

    /// After the agent got `result` for `call`: counts an empty answer
    /// for fail-fast, and, for an upstream's successful result, plans and
    /// fires the follow-ups. Returns the keys of the prefetches it sent,
    /// best first (what [`take_inline`](Self::take_inline) waits for).
    pub fn after_answer(
        self: &Arc<Self>,
        call: &ResolvedCall,
        result: &CallToolResult,
    ) -> Vec<CallKey> {
        if result.is_error == Some(true) || matches!(call.served, Served::FailFast | Served::Inline)
        {
            return Vec::new();
        }
        let key = call.key.clone();
        lock(&self.store).note_answer(call, is_empty(result));
        if call.served != Served::Upstream || !self.planner.settings().enabled {
            return Vec::new();
        }
        let in_flight = {
            let mut store = lock(&self.store);
            if store.is_closed() {
                return Vec::new();
            }
            let reports = store.sweep(Instant::now());
            let in_flight = store.in_flight();
            drop(store);
            self.emit(reports);
            in_flight
        };
        let catalog = self.proxy.catalog();
        // The planner runs without the store's lock held: each question
        // takes it briefly.
        let is_held = |exposed: &str, arguments: &JsonObject| {
            lock(&self.store).holds(&CallKey::new(exposed, Some(arguments)))
        };
        let on = |host: &str| lock(&self.store).in_flight_on(host);
        let answered = AnsweredCall {
            info: call,
            result,
            catalog: &catalog,
            held: &is_held,
            in_flight,
            in_flight_on: &on,
        };
        let Some(plan) = fail_open("the prefetch planner", &call.exposed, || {
            self.planner.plan(&answered)
        }) else {
            return Vec::new();
        };
        for declined in plan.declined {
            self.decline(&declined.exposed, declined.reason);
        }
        let mut sent = Vec::with_capacity(plan.chosen.len());
        for planned in plan.chosen {
            match self.dispatch(&key, planned.clone()) {
                Ok(Some(key)) => sent.push(key),
                Ok(None) => {}
                Err(reason) => self.decline(&planned.exposed, reason),
            }
        }
        sent
    }

    /// Inline mode: waits until the prefetches of `keys` have landed (at
    /// most the prefetch timeout, or until `cancel`), then takes from the
    /// store, best first, the landed results that fit the inline budget
    /// together. Each taken one ends as [`PrefetchEnd::Inlined`]; the rest
    /// stay in the store for the agent's own call, as in prefetch mode.
    pub async fn take_inline(
        &self,
        keys: &[CallKey],
        cancel: &CancellationToken,
    ) -> Vec<InlinedResult> {
        let settings = self.planner.settings();
        let flights = lock(&self.store).flights(keys);
        let landed = futures::future::join_all(flights.iter().map(|flight| async move {
            let mut outcome = flight.outcome.subscribe();
            let _ = outcome.wait_for(Option::is_some).await;
        }));
        tokio::select! {
            _ = tokio::time::timeout(settings.prefetch_timeout, landed) => {}
            _ = cancel.cancelled() => {}
        }
        let (taken, reports) = lock(&self.store).take_inline(keys, settings.budget_tokens);
        self.emit(reports);
        taken
            .into_iter()
            .map(|(prefetch, result)| InlinedResult {
                call: prefetch.call.clone(),
                result: Arc::unwrap_or_clone(result),
            })
            .collect()
    }

    /// Sends one planned prefetch, unless the engine's own limits say no.
    fn dispatch(
        self: &Arc<Self>,
        answered: &CallKey,
        planned: PlannedPrefetch,
    ) -> Result<Option<CallKey>, DeclineReason> {
        let settings = self.planner.settings();
        let catalog = self.proxy.catalog();
        let Some(route) = catalog.tool_route(&planned.exposed).cloned() else {
            return Err(DeclineReason::UnknownTool);
        };
        let ToolRoute::Upstream { upstream, .. } = &route else {
            return Err(DeclineReason::UnknownTool);
        };
        let Some(upstream) = self.proxy.upstream(upstream) else {
            return Err(DeclineReason::UnknownTool);
        };
        let call = self
            .resolver
            .resolve(&planned.exposed, Some(planned.arguments), &route);
        // Never speculate with side effects, whatever the plan says.
        if !call.side_effect.may_prefetch() {
            return Err(DeclineReason::NotReadOnly);
        }
        let key = call.key.clone();
        if key == *answered {
            return Err(DeclineReason::SelfLoop);
        }
        let host = if planned.host.is_empty() {
            upstream.config().name.clone()
        } else {
            planned.host.clone()
        };
        let freshness = if planned.freshness.is_zero() {
            settings.ttl
        } else {
            planned.freshness
        };
        // Before it is sent: a write after this moment must show.
        let base = match &upstream.config().transport {
            devboy_core::config::UpstreamTransport::Stdio { cwd: Some(cwd), .. } => cwd.clone(),
            _ => std::env::current_dir().unwrap_or_default(),
        };
        let prefetch = Arc::new(Prefetch {
            files: super::fresh::Snapshot::take(&call.paths, &base),
            generation: upstream.generation(),
            upstream,
            call: Arc::new(call),
            predicted_tokens: planned.predicted_tokens,
            host: host.clone(),
            freshness,
        });
        let flight = Flight::new(self.stop.child_token());
        let reports = {
            let mut store = lock(&self.store);
            match store.insert(prefetch.clone(), flight.clone(), settings)? {
                Some(reports) => reports,
                None => return Ok(None),
            }
        };
        self.stats.dispatched.fetch_add(1, Ordering::Relaxed);
        self.report(
            &prefetch,
            SpeculationEvent::Dispatched {
                predicted_tokens: prefetch.predicted_tokens,
            },
            None,
        );
        self.emit(reports);
        let engine = self.clone();
        let timeout = settings.prefetch_timeout;
        self.tasks.spawn(async move {
            let (outcome, timed_out) = run(&prefetch, &flight, timeout).await;
            engine.land(prefetch, flight, outcome, timed_out);
        });
        Ok(Some(key))
    }

    /// A prefetch's call came back: the store keeps it, hands it to the
    /// call that joined it, or drops it.
    fn land(
        &self,
        prefetch: Arc<Prefetch>,
        flight: Arc<Flight>,
        outcome: Result<CallToolResult, CallFailure>,
        timed_out: bool,
    ) {
        let landing = match outcome {
            Ok(result) if result.is_error != Some(true) => Landing::Result(result),
            Err(CallFailure::Cancelled) => Landing::Cancelled { timed_out },
            Err(CallFailure::ConnectionLost { .. }) => Landing::ConnectionLost,
            _ => Landing::Failed { timed_out },
        };
        let (reports, delivered) = lock(&self.store).land(
            &prefetch,
            &flight,
            landing,
            self.planner.settings(),
            Instant::now(),
        );
        // Reported before the joined call wakes: its end is told first.
        self.emit(reports);
        flight.outcome.send_replace(Some(delivered));
    }

    /// Ends speculation for the session: nothing new is sent, everything
    /// in flight is cancelled (upstreams hear `notifications/cancelled`)
    /// and awaited, and what was still held is reported as ended.
    pub async fn end_session(&self) {
        let reports = lock(&self.store).close();
        self.emit(reports);
        self.stop.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }

    fn decline(&self, exposed: &str, reason: DeclineReason) {
        self.stats.count_decline(reason);
        let catalog = self.proxy.catalog();
        let call = catalog
            .tool_route(exposed)
            .map(|route| self.resolver.resolve(exposed, None, route))
            .unwrap_or_else(|| {
                ResolvedCall::new(
                    exposed,
                    CallRoute::Upstream {
                        upstream: String::new(),
                        tool: exposed.to_owned(),
                    },
                    None,
                    SideEffect::UNKNOWN,
                )
            });
        self.tell(&call, SpeculationEvent::Declined { reason }, None);
    }

    fn emit(&self, reports: Vec<Report<Prefetch>>) {
        for report in reports {
            self.report(&report.prefetch, report.event, report.result.as_deref());
        }
    }

    fn report(
        &self,
        prefetch: &Prefetch,
        event: SpeculationEvent,
        result: Option<&CallToolResult>,
    ) {
        if let SpeculationEvent::Ended { end, .. } = event {
            self.stats.count_end(end);
        }
        self.tell(&prefetch.call, event, result);
    }

    /// Tells the session's events, failing open like the seam.
    fn tell(&self, call: &ResolvedCall, event: SpeculationEvent, result: Option<&CallToolResult>) {
        self.seam.record(SessionEvent::Speculation {
            call,
            event,
            result,
        });
    }

    /// The `speculation` object of `devboy_status`.
    pub fn report_json(&self) -> Value {
        let settings = self.planner.settings();
        let stats = &self.stats;
        let hits = stats.ended(PrefetchEnd::Used) + stats.ended(PrefetchEnd::Joined);
        let wasted: serde_json::Map<String, Value> = PrefetchEnd::ALL
            .iter()
            .filter(|e| !e.is_delivered())
            .map(|e| (e.name().to_owned(), json!(stats.ended(*e))))
            .collect();
        let declined: serde_json::Map<String, Value> = DeclineReason::ALL
            .iter()
            .filter(|r| stats.declined(**r) > 0)
            .map(|r| (r.name().to_owned(), json!(stats.declined(*r))))
            .collect();
        let (held, bytes) = self.held();
        json!({
            "enabled": settings.enabled,
            "mode": settings.mode.name(),
            "dispatched": stats.dispatched.load(Ordering::Relaxed),
            "hits": hits,
            "used": stats.ended(PrefetchEnd::Used),
            "joined": stats.ended(PrefetchEnd::Joined),
            "inlined": stats.ended(PrefetchEnd::Inlined),
            "wasted": wasted,
            "in_flight": self.in_flight(),
            "held": held,
            "held_bytes": bytes,
            "declined": declined,
            "fail_fast": stats.fail_fast.load(Ordering::Relaxed),
        })
    }
}

/// Runs a prefetch's call: no `_meta`, no progress, its own cancellation,
/// cancelled at `timeout` unless an agent's call has joined it (the
/// upstream's own timeout then applies, as to the agent's call). Returns
/// the outcome and whether the timeout cancelled it.
async fn run(
    prefetch: &Prefetch,
    flight: &Flight,
    timeout: Duration,
) -> (Result<CallToolResult, CallFailure>, bool) {
    let call = prefetch.upstream.call_tool(
        prefetch.call.tool(),
        prefetch.call.arguments.clone(),
        RequestMetaObject::default(),
        None,
        None,
        flight.cancel.clone(),
    );
    tokio::pin!(call);
    tokio::select! {
        outcome = &mut call => return (outcome, false),
        _ = tokio::time::sleep(timeout) => {}
    }
    if flight.fate() == Fate::Joined {
        return (call.await, false);
    }
    flight.cancel.cancel();
    (call.await, true)
}

/// Waits until `prefetch`'s upstream has connected again (a new
/// generation), at most its call timeout or until `cancel`.
async fn wait_for_restart(prefetch: &Prefetch, cancel: &CancellationToken) {
    let upstream = &prefetch.upstream;
    let deadline = tokio::time::Instant::now() + upstream.config().timeout;
    let mut phase = upstream.watch_phase();
    while upstream.generation() == prefetch.generation {
        tokio::select! {
            changed = tokio::time::timeout_at(deadline, phase.changed()) => {
                if !matches!(changed, Ok(Ok(()))) {
                    return;
                }
            }
            _ = cancel.cancelled() => return,
        }
    }
}

/// Whether a result says nothing: no content, or only blank text, `[]`,
/// `{}` or `null`, and no structured content beyond those.
fn is_empty(result: &CallToolResult) -> bool {
    fn blank(text: &str) -> bool {
        matches!(text.trim(), "" | "[]" | "{}" | "null")
    }
    let structured_blank = match &result.structured_content {
        None | Some(Value::Null) => true,
        Some(Value::Array(items)) => items.is_empty(),
        Some(Value::Object(map)) => map.is_empty(),
        Some(_) => false,
    };
    structured_blank
        && result
            .content
            .iter()
            .all(|block| block.as_text().is_some_and(|t| blank(&t.text)))
}

/// The one-line answer that stands in for a call that keeps coming back
/// empty.
fn fail_fast_hint(n: usize) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(format!(
        "> [fail-fast: the last {n} identical calls came back empty; change the arguments]"
    ))])
}

impl crate::answers::Memory for SpeculationEngine {
    fn name(&self) -> &'static str {
        "the answer store forgetting"
    }

    fn forget_call(&self, call: &ResolvedCall) {
        self.forget_for(call);
    }

    fn forget_written(&self, paths: &[String], missed: bool) {
        SpeculationEngine::forget_written(self, paths, missed);
    }

    fn advance_partition(&self) {
        SpeculationEngine::advance_partition(self);
    }
}

impl AnswerStore for SpeculationEngine {
    fn answer<'a>(
        &'a self,
        call: &'a ResolvedCall,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<StoredAnswer>> {
        Box::pin(self.answer_call(call, cancel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_answers_are_blank_text_or_nothing() {
        let text = |t: &str| CallToolResult::success(vec![ContentBlock::text(t)]);
        assert!(is_empty(&CallToolResult::success(vec![])));
        for blank in ["", "  \n", "[]", "{}", " null "] {
            assert!(is_empty(&text(blank)), "{blank:?} is empty");
        }
        for full in ["0", "[1]", "no matches", "\"\""] {
            assert!(!is_empty(&text(full)), "{full:?} is not empty");
        }
        let structured = CallToolResult::structured(json!({"items": []}));
        assert!(!is_empty(&structured));
    }
}
