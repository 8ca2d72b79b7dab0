//! The engine: dispatches the planner's prefetches, keeps what lands, and
//! answers the agent's matching call from it.
//!
//! Each prefetch is an entry keyed by its [`CallKey`]: first in flight (a
//! [`Flight`] the agent's call can join), then landed (the result, until
//! its freshness runs out). Exactly one party reports how an entry ended:
//! whoever removes it from the store (a hit, an invalidation, eviction,
//! expiry, the session's end), or the prefetch's own task when it fails
//! or when a joined call is waiting for it. Fates change only under the
//! store's lock, so the two never race.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use devboy_core::call::{CallKey, CallRoute, ResolvedCall, SideEffect};
use devboy_core::speculation::{DeclineReason, PrefetchEnd, Served, SpeculationEvent};
use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, RequestMetaObject};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{AnsweredCall, PlannedPrefetch, PrefetchPlanner, SpeculationSettings};
use crate::answers::{AnswerStore, StoredAnswer};
use crate::catalog::ToolRoute;
use crate::proxy::Proxy;
use crate::resolve::Resolver;
use crate::seam::{Seam, SessionEvent};
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

/// Who will report how a flight ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Fate {
    /// It is in the store: its task lands it or reports its failure.
    Stored = 0,
    /// An agent's call took it from the store and waits: its task reports.
    Joined = 1,
    /// Someone removed it and reported; its result is discarded.
    Ended = 2,
}

/// A prefetch in flight.
struct Flight {
    cancel: CancellationToken,
    /// `None` while in flight; then the result, or how it ended without.
    outcome: watch::Sender<Option<Result<Arc<CallToolResult>, PrefetchEnd>>>,
    fate: AtomicU8,
}

impl Flight {
    fn fate(&self) -> Fate {
        match self.fate.load(Ordering::SeqCst) {
            0 => Fate::Stored,
            1 => Fate::Joined,
            _ => Fate::Ended,
        }
    }

    fn set_fate(&self, fate: Fate) {
        self.fate.store(fate as u8, Ordering::SeqCst);
    }
}

enum Slot {
    InFlight(Arc<Flight>),
    Landed {
        result: Arc<CallToolResult>,
        bytes: usize,
        deadline: Instant,
    },
}

struct Entry {
    /// Dispatch order: the oldest goes first when the store is full.
    id: u64,
    prefetch: Arc<Prefetch>,
    slot: Slot,
}

/// A report to make once the store's lock is released.
struct Report {
    prefetch: Arc<Prefetch>,
    event: SpeculationEvent,
    result: Option<Arc<CallToolResult>>,
}

impl Report {
    fn ended(
        prefetch: &Arc<Prefetch>,
        end: PrefetchEnd,
        result: Option<Arc<CallToolResult>>,
    ) -> Self {
        Self {
            prefetch: prefetch.clone(),
            event: SpeculationEvent::Ended {
                end,
                predicted_tokens: prefetch.predicted_tokens,
            },
            result,
        }
    }
}

#[derive(Default)]
struct Store {
    entries: HashMap<CallKey, Entry>,
    next_id: u64,
    /// Bytes of landed results.
    bytes: usize,
    in_flight: usize,
    in_flight_on: HashMap<String, usize>,
    /// Identical empty answers per call in this context, and the paths
    /// the call names.
    empties: HashMap<CallKey, (usize, Vec<String>)>,
    closed: bool,
}

impl Store {
    /// Removes `key`, reporting `end` (in flight: cancelled, its result
    /// discarded when it lands).
    fn remove(&mut self, key: &CallKey, end: PrefetchEnd, reports: &mut Vec<Report>) {
        let Some(entry) = self.entries.remove(key) else {
            return;
        };
        match entry.slot {
            Slot::InFlight(flight) => {
                flight.set_fate(Fate::Ended);
                flight.cancel.cancel();
                reports.push(Report::ended(&entry.prefetch, end, None));
            }
            Slot::Landed { result, bytes, .. } => {
                self.bytes -= bytes;
                reports.push(Report::ended(&entry.prefetch, end, Some(result)));
            }
        }
    }

    fn remove_where(
        &mut self,
        end: PrefetchEnd,
        reports: &mut Vec<Report>,
        doomed: impl Fn(&Entry) -> bool,
    ) {
        let keys: Vec<CallKey> = self
            .entries
            .iter()
            .filter(|(_, e)| doomed(e))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.remove(&key, end, reports);
        }
    }

    fn sweep_expired(&mut self, now: Instant, reports: &mut Vec<Report>) {
        self.remove_where(
            PrefetchEnd::Expired,
            reports,
            |e| matches!(e.slot, Slot::Landed { deadline, .. } if deadline <= now),
        );
    }

    /// Evicts the oldest landed results until `entries` (counting one
    /// about to be added when `adding`) and bytes fit.
    fn make_room(&mut self, max_entries: usize, max_bytes: usize, reports: &mut Vec<Report>) {
        while self.entries.len() > max_entries || self.bytes > max_bytes {
            let oldest = self
                .entries
                .iter()
                .filter(|(_, e)| matches!(e.slot, Slot::Landed { .. }))
                .min_by_key(|(_, e)| e.id)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(key) => self.remove(&key, PrefetchEnd::Evicted, reports),
                None => break,
            }
        }
    }

    fn finish_flight(&mut self, host: &str) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(n) = self.in_flight_on.get_mut(host) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.in_flight_on.remove(host);
            }
        }
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
    resolver: Arc<Resolver>,
    store: Mutex<Store>,
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
        resolver: Arc<Resolver>,
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
        lock(&self.store).in_flight
    }

    /// Entries the store holds now (in flight and landed), and the bytes
    /// of the landed ones.
    pub fn held(&self) -> (usize, usize) {
        let store = lock(&self.store);
        (store.entries.len(), store.bytes)
    }

    /// The context was compacted: fail-fast counts start over.
    pub fn advance_partition(&self) {
        lock(&self.store).empties.clear();
    }

    /// Forgets what `call` may change: when its effective class may
    /// mutate, every entry read from a path its arguments name (or below
    /// it) and every entry of a tool its `invalidates` list names, exactly
    /// as the dedup cache forgets; fail-fast counts by the same rule.
    pub fn forget_for(&self, call: &ResolvedCall) {
        if !call.side_effect.may_mutate() {
            return;
        }
        let written = &call.paths;
        let mut reports = Vec::new();
        {
            let mut store = lock(&self.store);
            let changed = |exposed: &str, paths: &[String]| {
                paths.iter().any(|read| {
                    written
                        .iter()
                        .any(|w| devboy_pipeline::write_covers(w, read))
                }) || self.planner.invalidates(&call.exposed, exposed)
            };
            store
                .empties
                .retain(|key, (_, paths)| !changed(key.exposed(), paths));
            store.remove_where(PrefetchEnd::Invalidated, &mut reports, |entry| {
                changed(&entry.prefetch.call.exposed, &entry.prefetch.call.paths)
            });
        }
        self.emit(reports);
    }

    /// Claude Code's own tools wrote `written` (absolute paths), or, when
    /// `missed`, files nobody knows: forgets every prefetch that read one
    /// of them (or, `missed`, any local file), as a write routed through
    /// devboy would; fail-fast counts by the same rule.
    pub fn forget_written(&self, written: &[String], missed: bool) {
        let mut reports = Vec::new();
        {
            let mut store = lock(&self.store);
            // Whether reads of `read` may have changed (prefetches by the
            // paths they resolved, fail-fast counts by the paths named).
            let changed = |read: Vec<std::borrow::Cow<'_, str>>| {
                (missed && !read.is_empty())
                    || read.iter().any(|read| {
                        written
                            .iter()
                            .any(|w| devboy_pipeline::write_covers(w, read))
                    })
            };
            store.empties.retain(|_, (_, paths)| {
                !changed(paths.iter().map(|p| p.as_str().into()).collect())
            });
            store.remove_where(PrefetchEnd::Invalidated, &mut reports, |entry| {
                changed(
                    entry
                        .prefetch
                        .files
                        .paths()
                        .into_iter()
                        .map(|p| p.to_string_lossy())
                        .collect(),
                )
            });
        }
        self.emit(reports);
    }

    /// The answer to `call` the engine has: the fail-fast hint, a landed
    /// prefetch, or a prefetch in flight it waits for (until `cancel`).
    pub async fn answer_call(
        &self,
        call: &ResolvedCall,
        cancel: &CancellationToken,
    ) -> Option<StoredAnswer> {
        let key = call.key.clone();
        let mut reports = Vec::new();
        let flight = {
            let mut store = lock(&self.store);
            store.sweep_expired(Instant::now(), &mut reports);
            let fail_after = self.planner.fail_fast_after(&call.exposed);
            let empties = store.empties.get(&key).map_or(0, |(n, _)| *n);
            if let Some(n) = fail_after.filter(|n| *n > 0 && empties >= *n) {
                drop(store);
                self.emit(reports);
                self.stats.fail_fast.fetch_add(1, Ordering::Relaxed);
                return Some(StoredAnswer {
                    result: fail_fast_hint(n),
                    served: Served::FailFast,
                });
            }
            // A used entry leaves the store: the next identical call is the
            // dedup cache's job.
            let entry = store.entries.remove(&key);
            match entry {
                None => None,
                Some(Entry {
                    prefetch,
                    slot: Slot::Landed { result, bytes, .. },
                    ..
                }) => {
                    store.bytes -= bytes;
                    drop(store);
                    let end = if prefetch.upstream.generation() != prefetch.generation {
                        PrefetchEnd::UpstreamRestarted
                    } else if !prefetch.files.fresh() {
                        PrefetchEnd::Stale
                    } else {
                        PrefetchEnd::Used
                    };
                    reports.push(Report::ended(&prefetch, end, Some(result.clone())));
                    self.emit(reports);
                    return (end == PrefetchEnd::Used).then(|| StoredAnswer {
                        result: Arc::unwrap_or_clone(result),
                        served: Served::Prefetch,
                    });
                }
                Some(Entry {
                    prefetch,
                    slot: Slot::InFlight(flight),
                    ..
                }) => {
                    flight.set_fate(Fate::Joined);
                    Some((flight, prefetch))
                }
            }
        };
        self.emit(reports);
        let (flight, prefetch) = flight?;
        let mut outcome = flight.outcome.subscribe();
        let landed = tokio::select! {
            waited = outcome.wait_for(Option::is_some) => waited.ok().and_then(|o| o.clone()),
            _ = cancel.cancelled() => {
                self.abandon(&flight, &prefetch);
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

    /// The agent cancelled the call that joined `flight`: the prefetch is
    /// cancelled upstream too (as the agent's own call would have been)
    /// and ends as [`PrefetchEnd::Cancelled`], unless it has landed
    /// already (then its task reported it).
    fn abandon(&self, flight: &Flight, prefetch: &Arc<Prefetch>) {
        let report = {
            let _store = lock(&self.store);
            if flight.fate() != Fate::Joined {
                return;
            }
            flight.set_fate(Fate::Ended);
            flight.cancel.cancel();
            Report::ended(prefetch, PrefetchEnd::Cancelled, None)
        };
        self.emit(vec![report]);
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
        {
            let mut store = lock(&self.store);
            if is_empty(result) {
                store
                    .empties
                    .entry(key.clone())
                    .or_insert_with(|| (0, call.paths.clone()))
                    .0 += 1;
            } else {
                store.empties.remove(&key);
            }
        }
        if call.served != Served::Upstream || !self.planner.settings().enabled {
            return Vec::new();
        }
        let in_flight = {
            let mut store = lock(&self.store);
            if store.closed {
                return Vec::new();
            }
            let mut reports = Vec::new();
            store.sweep_expired(Instant::now(), &mut reports);
            let in_flight = store.in_flight;
            drop(store);
            self.emit(reports);
            in_flight
        };
        let catalog = self.proxy.catalog();
        // The planner runs without the store's lock held: each question
        // takes it briefly.
        let is_held = |exposed: &str, arguments: &JsonObject| {
            lock(&self.store)
                .entries
                .contains_key(&CallKey::new(exposed, Some(arguments)))
        };
        let on = |host: &str| {
            lock(&self.store)
                .in_flight_on
                .get(host)
                .copied()
                .unwrap_or(0)
        };
        let answered = AnsweredCall {
            info: call,
            result,
            catalog: &catalog,
            held: &is_held,
            in_flight,
            in_flight_on: &on,
        };
        let planned = catch_unwind(AssertUnwindSafe(|| self.planner.plan(&answered)));
        let Ok(plan) = planned else {
            tracing::error!(
                tool = %call.exposed,
                "the prefetch planner panicked; nothing prefetched"
            );
            return Vec::new();
        };
        for (exposed, reason) in plan.declined {
            self.decline(&exposed, reason);
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
        let flights: Vec<Arc<Flight>> = {
            let store = lock(&self.store);
            keys.iter()
                .filter_map(|key| match &store.entries.get(key)?.slot {
                    Slot::InFlight(flight) => Some(flight.clone()),
                    Slot::Landed { .. } => None,
                })
                .collect()
        };
        let landed = futures::future::join_all(flights.iter().map(|flight| async move {
            let mut outcome = flight.outcome.subscribe();
            let _ = outcome.wait_for(Option::is_some).await;
        }));
        tokio::select! {
            _ = tokio::time::timeout(settings.prefetch_timeout, landed) => {}
            _ = cancel.cancelled() => {}
        }
        let mut taken = Vec::new();
        let mut reports = Vec::new();
        {
            let mut store = lock(&self.store);
            let mut spent = 0usize;
            for key in keys {
                let Some(Entry {
                    prefetch,
                    slot: Slot::Landed { result, bytes, .. },
                    ..
                }) = store.entries.get(key)
                else {
                    continue;
                };
                if prefetch.upstream.generation() != prefetch.generation || !prefetch.files.fresh()
                {
                    continue;
                }
                let tokens = bytes.div_ceil(4);
                if spent + tokens > settings.budget_tokens {
                    continue;
                }
                spent += tokens;
                let (prefetch, result) = (prefetch.clone(), result.clone());
                let bytes = *bytes;
                store.entries.remove(key);
                store.bytes -= bytes;
                reports.push(Report::ended(
                    &prefetch,
                    PrefetchEnd::Inlined,
                    Some(result.clone()),
                ));
                taken.push(InlinedResult {
                    call: prefetch.call.clone(),
                    result: Arc::unwrap_or_clone(result),
                });
            }
        }
        self.emit(reports);
        taken
    }

    /// Sends one planned prefetch, unless the engine's own limits say no.
    fn dispatch(
        self: &Arc<Self>,
        answered: &CallKey,
        planned: PlannedPrefetch,
    ) -> Result<Option<CallKey>, DeclineReason> {
        let settings = self.planner.settings();
        let catalog = self.proxy.catalog();
        let Some(route @ ToolRoute::Upstream { upstream, .. }) =
            catalog.tool_route(&planned.exposed).cloned()
        else {
            return Err(DeclineReason::UnknownTool);
        };
        let Some(upstream) = self.proxy.upstreams().get(upstream).cloned() else {
            return Err(DeclineReason::UnknownTool);
        };
        let Some(call) = self.resolver.resolve(
            &self.proxy,
            &planned.exposed,
            Some(planned.arguments),
            &route,
        ) else {
            return Err(DeclineReason::UnknownTool);
        };
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
        let flight = Arc::new(Flight {
            cancel: self.stop.child_token(),
            outcome: watch::Sender::new(None),
            fate: AtomicU8::new(Fate::Stored as u8),
        });
        let mut reports = Vec::new();
        {
            let mut store = lock(&self.store);
            if store.closed {
                return Ok(None);
            }
            if store.entries.contains_key(&key) {
                return Err(DeclineReason::AlreadyHeld);
            }
            if store.in_flight >= settings.max_parallel {
                return Err(DeclineReason::OverParallel);
            }
            if store.in_flight_on.get(&host).copied().unwrap_or(0) >= settings.per_host {
                return Err(DeclineReason::HostBusy);
            }
            store.in_flight += 1;
            *store.in_flight_on.entry(host).or_default() += 1;
            let id = store.next_id;
            store.next_id += 1;
            store.entries.insert(
                key.clone(),
                Entry {
                    id,
                    prefetch: prefetch.clone(),
                    slot: Slot::InFlight(flight.clone()),
                },
            );
            store.make_room(settings.max_entries, settings.max_bytes, &mut reports);
        }
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
        let sent = key.clone();
        self.tasks.spawn(async move {
            let (outcome, timed_out) = run(&prefetch, &flight, timeout).await;
            engine.land(key, prefetch, flight, outcome, timed_out);
        });
        Ok(Some(sent))
    }

    /// A prefetch's call came back: store it, hand it to the call that
    /// joined it, or drop it.
    fn land(
        &self,
        key: CallKey,
        prefetch: Arc<Prefetch>,
        flight: Arc<Flight>,
        outcome: Result<CallToolResult, CallFailure>,
        timed_out: bool,
    ) {
        let settings = self.planner.settings();
        let mut reports = Vec::new();
        let mut store = lock(&self.store);
        store.finish_flight(&prefetch.host);
        let result = match outcome {
            Ok(result) if result.is_error != Some(true) => {
                if prefetch.upstream.generation() == prefetch.generation {
                    Ok(Arc::new(result))
                } else {
                    Err(PrefetchEnd::UpstreamRestarted)
                }
            }
            Err(CallFailure::Cancelled) if store.closed => Err(PrefetchEnd::SessionEnded),
            Err(CallFailure::ConnectionLost { .. }) => Err(PrefetchEnd::UpstreamRestarted),
            _ if timed_out => Err(PrefetchEnd::TimedOut),
            _ => Err(PrefetchEnd::Failed),
        };
        // A joined call is answered now: only while its files are as they
        // were when it was sent.
        let result = match result {
            Ok(_) if flight.fate() == Fate::Joined && !prefetch.files.fresh() => {
                Err(PrefetchEnd::Stale)
            }
            other => other,
        };
        let delivered = result.clone();
        match (flight.fate(), result) {
            (Fate::Ended, _) => {}
            (Fate::Joined, Ok(result)) => {
                reports.push(Report::ended(&prefetch, PrefetchEnd::Joined, Some(result)));
            }
            (Fate::Joined, Err(end)) => reports.push(Report::ended(&prefetch, end, None)),
            (Fate::Stored, Ok(result)) => {
                let bytes = serde_json::to_vec(&*result).map_or(0, |b| b.len());
                if let Some(entry) = store.entries.get_mut(&key) {
                    entry.slot = Slot::Landed {
                        result,
                        bytes,
                        deadline: Instant::now() + prefetch.freshness,
                    };
                    store.bytes += bytes;
                    store.make_room(settings.max_entries, settings.max_bytes, &mut reports);
                }
            }
            (Fate::Stored, Err(end)) => {
                store.entries.remove(&key);
                reports.push(Report::ended(&prefetch, end, None));
            }
        }
        flight.set_fate(Fate::Ended);
        drop(store);
        // Reported before the joined call wakes: its end is told first.
        self.emit(reports);
        flight.outcome.send_replace(Some(delivered));
    }

    /// Ends speculation for the session: nothing new is sent, everything
    /// in flight is cancelled (upstreams hear `notifications/cancelled`)
    /// and awaited, and what was still held is reported as ended.
    pub async fn end_session(&self) {
        let mut reports = Vec::new();
        {
            let mut store = lock(&self.store);
            store.closed = true;
            store.remove_where(PrefetchEnd::SessionEnded, &mut reports, |_| true);
        }
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
            .and_then(|route| self.resolver.resolve(&self.proxy, exposed, None, route))
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

    fn emit(&self, reports: Vec<Report>) {
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

impl AnswerStore for SpeculationEngine {
    fn on_call(&self, call: &ResolvedCall) {
        self.forget_for(call);
    }

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
