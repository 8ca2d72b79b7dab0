//! The prefetch store: what speculation holds, as a plain struct.
//!
//! Each prefetch is an entry keyed by its call's [`CallKey`]: first in
//! flight (a [`Flight`] the agent's call can join), then landed (the
//! result, until its freshness runs out). Exactly one party reports how an
//! entry ended: whoever removes it from the store (a hit, an invalidation,
//! eviction, expiry, the session's end), or the prefetch's own landing
//! when it fails or when a joined call is waiting for it. Every change
//! happens through a `&mut` method, so the engine's one lock around the
//! store is what orders them; each returns the [`Report`]s to make once
//! that lock is released.
//!
//! It knows nothing of upstreams, tasks or clocks: the engine hands it
//! the prefetch (anything [`Held`]), the time, and how a call ended, and
//! the store's own tests drive it without a server.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use devboy_core::call::{CallKey, ResolvedCall};
use devboy_core::speculation::{DeclineReason, PrefetchEnd, SpeculationEvent};
use rmcp::model::CallToolResult;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::SpeculationSettings;

/// What the store needs to know of a prefetch.
pub(super) trait Held: Send + Sync + 'static {
    /// The call it makes, resolved as the agent's own call of it would be.
    fn call(&self) -> &ResolvedCall;
    /// The key its `per_host` cap counts under.
    fn host(&self) -> &str;
    /// How long its result may answer once landed.
    fn freshness(&self) -> Duration;
    /// What the planner expected its result to cost.
    fn predicted_tokens(&self) -> usize;
    /// Its upstream reconnected since it was sent (its result belongs to
    /// a connection that is gone).
    fn restarted(&self) -> bool;
    /// The files its call names are as they were when it was sent
    /// (invariant 14).
    fn fresh(&self) -> bool;
    /// Those files, resolved as they were looked at.
    fn files(&self) -> Vec<String>;
}

/// Who will report how a flight ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Fate {
    /// It is in the store: its landing stores it or reports its failure.
    Stored = 0,
    /// An agent's call took it from the store and waits: its landing
    /// reports.
    Joined = 1,
    /// Someone removed it and reported; its result is discarded.
    Ended = 2,
}

/// A prefetch in flight.
pub(super) struct Flight {
    /// Cancels its call upstream.
    pub cancel: CancellationToken,
    /// `None` while in flight; then the result, or how it ended without.
    pub outcome: watch::Sender<Option<Result<Arc<CallToolResult>, PrefetchEnd>>>,
    fate: AtomicU8,
}

impl Flight {
    /// A flight cancelled by `cancel`, in the store.
    pub(super) fn new(cancel: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            cancel,
            outcome: watch::Sender::new(None),
            fate: AtomicU8::new(Fate::Stored as u8),
        })
    }

    /// Who reports how it ends.
    pub(super) fn fate(&self) -> Fate {
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

struct Entry<P> {
    /// Dispatch order: the oldest goes first when the store is full.
    id: u64,
    prefetch: Arc<P>,
    slot: Slot,
}

/// A report to make once the store's lock is released.
pub(super) struct Report<P> {
    /// The prefetch it is about.
    pub prefetch: Arc<P>,
    /// What happened.
    pub event: SpeculationEvent,
    /// Its result, when it ended after landing.
    pub result: Option<Arc<CallToolResult>>,
}

impl<P: Held> Report<P> {
    fn ended(prefetch: &Arc<P>, end: PrefetchEnd, result: Option<Arc<CallToolResult>>) -> Self {
        Self {
            prefetch: prefetch.clone(),
            event: SpeculationEvent::Ended {
                end,
                predicted_tokens: prefetch.predicted_tokens(),
            },
            result,
        }
    }
}

/// What an agent's call found in the store.
pub(super) enum Found<P> {
    /// Nothing for this call.
    Nothing,
    /// A landed result, taken out; `end` says whether it may answer
    /// ([`PrefetchEnd::Used`]) or was stale or from a dead connection.
    Landed {
        result: Arc<CallToolResult>,
        end: PrefetchEnd,
    },
    /// A prefetch in flight, now joined: its landing reports, and the
    /// call waits on the flight.
    InFlight {
        flight: Arc<Flight>,
        prefetch: Arc<P>,
    },
}

/// A landed prefetch taken out of the store, with its result.
pub(super) type Taken<P> = (Arc<P>, Arc<CallToolResult>);

/// How a prefetch's call came back.
#[derive(Debug)]
pub(super) enum Landing {
    /// The upstream's successful result.
    Result(CallToolResult),
    /// Cancelled (by the session's end, or by its timeout).
    Cancelled { timed_out: bool },
    /// The upstream's connection was lost on the way.
    ConnectionLost,
    /// Anything else: an error result, a protocol error, a timeout.
    Failed { timed_out: bool },
}

/// The prefetches of one session; see the module docs.
pub(super) struct PrefetchStore<P> {
    entries: HashMap<CallKey, Entry<P>>,
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

impl<P> Default for PrefetchStore<P> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            next_id: 0,
            bytes: 0,
            in_flight: 0,
            in_flight_on: HashMap::new(),
            empties: HashMap::new(),
            closed: false,
        }
    }
}

impl<P: Held> PrefetchStore<P> {
    /// Whether it holds, or has in flight, the call `key`.
    pub(super) fn holds(&self, key: &CallKey) -> bool {
        self.entries.contains_key(key)
    }

    /// Prefetches in flight.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Prefetches in flight on `host`.
    pub(super) fn in_flight_on(&self, host: &str) -> usize {
        self.in_flight_on.get(host).copied().unwrap_or(0)
    }

    /// Entries held (in flight and landed), and the bytes of the landed.
    pub(super) fn held(&self) -> (usize, usize) {
        (self.entries.len(), self.bytes)
    }

    /// Whether the session ended.
    pub(super) fn is_closed(&self) -> bool {
        self.closed
    }

    /// Adds `prefetch`, in flight as `flight`, unless a cap says no
    /// (`Ok(None)` once the session has ended: nothing is sent then).
    /// Makes room by evicting the oldest landed results.
    pub(super) fn insert(
        &mut self,
        prefetch: Arc<P>,
        flight: Arc<Flight>,
        settings: &SpeculationSettings,
    ) -> Result<Option<Vec<Report<P>>>, DeclineReason> {
        if self.closed {
            return Ok(None);
        }
        let key = prefetch.call().key.clone();
        if self.entries.contains_key(&key) {
            return Err(DeclineReason::AlreadyHeld);
        }
        if self.in_flight >= settings.max_parallel {
            return Err(DeclineReason::OverParallel);
        }
        let host = prefetch.host().to_owned();
        if self.in_flight_on(&host) >= settings.per_host {
            return Err(DeclineReason::HostBusy);
        }
        self.in_flight += 1;
        *self.in_flight_on.entry(host).or_default() += 1;
        let id = self.next_id;
        self.next_id += 1;
        self.entries.insert(
            key,
            Entry {
                id,
                prefetch,
                slot: Slot::InFlight(flight),
            },
        );
        let mut reports = Vec::new();
        self.make_room(settings, &mut reports);
        Ok(Some(reports))
    }

    /// The agent calls `key` at `now`: a landed result is taken out (and
    /// reported), a flight is joined; expired results are swept first.
    pub(super) fn find(&mut self, key: &CallKey, now: Instant) -> (Found<P>, Vec<Report<P>>) {
        let mut reports = Vec::new();
        self.sweep_expired(now, &mut reports);
        // A used entry leaves the store: the next identical call is the
        // dedup cache's job.
        let found = match self.entries.remove(key) {
            None => Found::Nothing,
            Some(Entry {
                prefetch,
                slot: Slot::Landed { result, bytes, .. },
                ..
            }) => {
                self.bytes -= bytes;
                let end = if prefetch.restarted() {
                    PrefetchEnd::UpstreamRestarted
                } else if !prefetch.fresh() {
                    PrefetchEnd::Stale
                } else {
                    PrefetchEnd::Used
                };
                reports.push(Report::ended(&prefetch, end, Some(result.clone())));
                Found::Landed { result, end }
            }
            Some(Entry {
                prefetch,
                slot: Slot::InFlight(flight),
                ..
            }) => {
                flight.set_fate(Fate::Joined);
                Found::InFlight { flight, prefetch }
            }
        };
        (found, reports)
    }

    /// The agent cancelled the call that joined `flight`: the prefetch is
    /// cancelled upstream too and ends as [`PrefetchEnd::Cancelled`],
    /// unless it has landed already (its landing reported it).
    pub(super) fn abandon(&mut self, flight: &Flight, prefetch: &Arc<P>) -> Option<Report<P>> {
        if flight.fate() != Fate::Joined {
            return None;
        }
        flight.set_fate(Fate::Ended);
        flight.cancel.cancel();
        Some(Report::ended(prefetch, PrefetchEnd::Cancelled, None))
    }

    /// `prefetch`'s call came back as `landing` at `now`: it is stored,
    /// handed to the call that joined it, or dropped. Returns the reports
    /// and what the joined call (if any) is to be told.
    pub(super) fn land(
        &mut self,
        prefetch: &Arc<P>,
        flight: &Flight,
        landing: Landing,
        settings: &SpeculationSettings,
        now: Instant,
    ) -> (Vec<Report<P>>, Result<Arc<CallToolResult>, PrefetchEnd>) {
        let key = &prefetch.call().key;
        let mut reports = Vec::new();
        self.finish_flight(prefetch.host());
        let result = match landing {
            Landing::Result(result) if !prefetch.restarted() => Ok(Arc::new(result)),
            Landing::Result(_) => Err(PrefetchEnd::UpstreamRestarted),
            Landing::Cancelled { .. } if self.closed => Err(PrefetchEnd::SessionEnded),
            Landing::ConnectionLost => Err(PrefetchEnd::UpstreamRestarted),
            Landing::Cancelled { timed_out: true } | Landing::Failed { timed_out: true } => {
                Err(PrefetchEnd::TimedOut)
            }
            Landing::Cancelled { .. } | Landing::Failed { .. } => Err(PrefetchEnd::Failed),
        };
        // A joined call is answered now: only while its files are as they
        // were when it was sent.
        let result = match result {
            Ok(_) if flight.fate() == Fate::Joined && !prefetch.fresh() => Err(PrefetchEnd::Stale),
            other => other,
        };
        match (flight.fate(), result.clone()) {
            (Fate::Ended, _) => {}
            (Fate::Joined, Ok(result)) => {
                reports.push(Report::ended(prefetch, PrefetchEnd::Joined, Some(result)));
            }
            (Fate::Joined, Err(end)) => reports.push(Report::ended(prefetch, end, None)),
            (Fate::Stored, Ok(result)) => {
                let bytes = serde_json::to_vec(&*result).map_or(0, |b| b.len());
                if let Some(entry) = self.entries.get_mut(key) {
                    entry.slot = Slot::Landed {
                        result,
                        bytes,
                        deadline: now + prefetch.freshness(),
                    };
                    self.bytes += bytes;
                    self.make_room(settings, &mut reports);
                }
            }
            (Fate::Stored, Err(end)) => {
                self.entries.remove(key);
                reports.push(Report::ended(prefetch, end, None));
            }
        }
        flight.set_fate(Fate::Ended);
        (reports, result)
    }

    /// Forgets what `call` may change: when its class may mutate, every
    /// entry read from a path it names (or below it) and every entry of a
    /// tool `invalidates(caller, exposed)` names, by the rule the dedup
    /// cache forgets by; fail-fast counts by the same rule.
    pub(super) fn forget_for(
        &mut self,
        call: &ResolvedCall,
        invalidates: impl Fn(&str, &str) -> bool,
    ) -> Vec<Report<P>> {
        let mut reports = Vec::new();
        if !call.side_effect.may_mutate() {
            return reports;
        }
        let changed = |exposed: &str, paths: &[String]| {
            paths.iter().any(|read| {
                call.paths
                    .iter()
                    .any(|w| devboy_pipeline::write_covers(w, read))
            }) || invalidates(&call.exposed, exposed)
        };
        self.empties
            .retain(|key, (_, paths)| !changed(key.exposed(), paths));
        self.remove_where(PrefetchEnd::Invalidated, &mut reports, |entry| {
            let read = entry.prefetch.call();
            changed(&read.exposed, &read.paths)
        });
        reports
    }

    /// Files were written outside devboy (`written`, absolute; `missed`:
    /// and files nobody knows): forgets every prefetch that read one of
    /// them (or, `missed`, any local file), and fail-fast counts by the
    /// same rule.
    pub(super) fn forget_written(&mut self, written: &[String], missed: bool) -> Vec<Report<P>> {
        let changed = |read: &[String]| {
            (missed && !read.is_empty())
                || read.iter().any(|read| {
                    written
                        .iter()
                        .any(|w| devboy_pipeline::write_covers(w, read))
                })
        };
        self.empties.retain(|_, (_, paths)| !changed(paths));
        let mut reports = Vec::new();
        self.remove_where(PrefetchEnd::Invalidated, &mut reports, |entry| {
            changed(&entry.prefetch.files())
        });
        reports
    }

    /// The agent got an answer to `call`: an empty one counts towards
    /// fail-fast, anything else starts its count over.
    pub(super) fn note_answer(&mut self, call: &ResolvedCall, empty: bool) {
        if empty {
            self.empties
                .entry(call.key.clone())
                .or_insert_with(|| (0, call.paths.clone()))
                .0 += 1;
        } else {
            self.empties.remove(&call.key);
        }
    }

    /// Identical empty answers to `key` in this context.
    pub(super) fn empties(&self, key: &CallKey) -> usize {
        self.empties.get(key).map_or(0, |(n, _)| *n)
    }

    /// The context was compacted: fail-fast counts start over.
    pub(super) fn advance_partition(&mut self) {
        self.empties.clear();
    }

    /// The flights of `keys` still in the air.
    pub(super) fn flights(&self, keys: &[CallKey]) -> Vec<Arc<Flight>> {
        keys.iter()
            .filter_map(|key| match &self.entries.get(key)?.slot {
                Slot::InFlight(flight) => Some(flight.clone()),
                Slot::Landed { .. } => None,
            })
            .collect()
    }

    /// Takes out, in `keys`' order, the landed, fresh results of `keys`
    /// whose estimated tokens fit `budget_tokens` together; each ends as
    /// [`PrefetchEnd::Inlined`].
    pub(super) fn take_inline(
        &mut self,
        keys: &[CallKey],
        budget_tokens: usize,
    ) -> (Vec<Taken<P>>, Vec<Report<P>>) {
        let mut taken = Vec::new();
        let mut reports = Vec::new();
        let mut spent = 0usize;
        for key in keys {
            let Some(Entry {
                prefetch,
                slot: Slot::Landed { result, bytes, .. },
                ..
            }) = self.entries.get(key)
            else {
                continue;
            };
            if prefetch.restarted() || !prefetch.fresh() {
                continue;
            }
            let tokens = devboy_core::tokens::estimate(*bytes);
            if spent + tokens > budget_tokens {
                continue;
            }
            spent += tokens;
            let (prefetch, result, bytes) = (prefetch.clone(), result.clone(), *bytes);
            self.entries.remove(key);
            self.bytes -= bytes;
            reports.push(Report::ended(
                &prefetch,
                PrefetchEnd::Inlined,
                Some(result.clone()),
            ));
            taken.push((prefetch, result));
        }
        (taken, reports)
    }

    /// The session ended: nothing new is stored, and everything held ends
    /// as [`PrefetchEnd::SessionEnded`] (flights cancelled).
    pub(super) fn close(&mut self) -> Vec<Report<P>> {
        self.closed = true;
        let mut reports = Vec::new();
        self.remove_where(PrefetchEnd::SessionEnded, &mut reports, |_| true);
        reports
    }

    /// Removes the landed results whose freshness ran out by `now`.
    pub(super) fn sweep(&mut self, now: Instant) -> Vec<Report<P>> {
        let mut reports = Vec::new();
        self.sweep_expired(now, &mut reports);
        reports
    }

    /// Removes `key`, reporting `end` (in flight: cancelled, its result
    /// discarded when it lands).
    fn remove(&mut self, key: &CallKey, end: PrefetchEnd, reports: &mut Vec<Report<P>>) {
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
        reports: &mut Vec<Report<P>>,
        doomed: impl Fn(&Entry<P>) -> bool,
    ) {
        let mut keys: Vec<(u64, CallKey)> = self
            .entries
            .iter()
            .filter(|(_, e)| doomed(e))
            .map(|(k, e)| (e.id, k.clone()))
            .collect();
        // In dispatch order, so reports come out the same every time.
        keys.sort();
        for (_, key) in keys {
            self.remove(&key, end, reports);
        }
    }

    fn sweep_expired(&mut self, now: Instant, reports: &mut Vec<Report<P>>) {
        self.remove_where(
            PrefetchEnd::Expired,
            reports,
            |e| matches!(e.slot, Slot::Landed { deadline, .. } if deadline <= now),
        );
    }

    /// Evicts the oldest landed results until entries and bytes fit.
    fn make_room(&mut self, settings: &SpeculationSettings, reports: &mut Vec<Report<P>>) {
        while self.entries.len() > settings.max_entries || self.bytes > settings.max_bytes {
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

#[cfg(test)]
mod tests {
    use super::*;
    use devboy_core::call::{CallRoute, SideEffect};
    use devboy_core::pipeline_config::SideEffectClass;
    use rmcp::model::ContentBlock;
    use serde_json::json;
    use std::sync::atomic::AtomicBool;

    /// A prefetch whose connection and files the test controls.
    struct Fake {
        call: ResolvedCall,
        restarted: AtomicBool,
        stale: AtomicBool,
        freshness: Duration,
    }

    impl Held for Fake {
        fn call(&self) -> &ResolvedCall {
            &self.call
        }
        fn host(&self) -> &str {
            "fs"
        }
        fn freshness(&self) -> Duration {
            self.freshness
        }
        fn predicted_tokens(&self) -> usize {
            10
        }
        fn restarted(&self) -> bool {
            self.restarted.load(Ordering::SeqCst)
        }
        fn fresh(&self) -> bool {
            !self.stale.load(Ordering::SeqCst)
        }
        fn files(&self) -> Vec<String> {
            self.call.paths.clone()
        }
    }

    fn read(path: &str) -> Arc<Fake> {
        Arc::new(Fake {
            call: resolved("fs__read_text_file", path, SideEffectClass::ReadOnly),
            restarted: AtomicBool::new(false),
            stale: AtomicBool::new(false),
            freshness: Duration::from_secs(60),
        })
    }

    fn resolved(exposed: &str, path: &str, class: SideEffectClass) -> ResolvedCall {
        ResolvedCall::new(
            exposed,
            CallRoute::Upstream {
                upstream: "fs".into(),
                tool: exposed.trim_start_matches("fs__").into(),
            },
            json!({ "path": path }).as_object().cloned(),
            SideEffect::stated(class),
        )
    }

    fn body(text: &str) -> Landing {
        Landing::Result(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    fn settings() -> SpeculationSettings {
        SpeculationSettings {
            max_parallel: 2,
            per_host: 2,
            max_entries: 2,
            ..SpeculationSettings::default()
        }
    }

    /// Each report's end, in order.
    fn ends(reports: &[Report<Fake>]) -> Vec<PrefetchEnd> {
        reports
            .iter()
            .filter_map(|r| match r.event {
                SpeculationEvent::Ended { end, .. } => Some(end),
                _ => None,
            })
            .collect()
    }

    fn sent(store: &mut PrefetchStore<Fake>, prefetch: &Arc<Fake>) -> Arc<Flight> {
        let flight = Flight::new(CancellationToken::new());
        let inserted = store.insert(prefetch.clone(), flight.clone(), &settings());
        assert!(matches!(inserted, Ok(Some(ref r)) if r.is_empty()));
        flight
    }

    #[test]
    fn a_landed_prefetch_answers_once_and_leaves() {
        let mut store = PrefetchStore::default();
        let a = read("/p/a.rs");
        let flight = sent(&mut store, &a);
        assert_eq!((store.in_flight(), store.in_flight_on("fs")), (1, 1));
        let now = Instant::now();
        let (reports, told) = store.land(&a, &flight, body("A"), &settings(), now);
        assert!(reports.is_empty() && told.is_ok());
        assert_eq!((store.in_flight(), store.held().0), (0, 1));
        let (found, reports) = store.find(&a.call.key, now);
        assert!(matches!(
            found,
            Found::Landed {
                end: PrefetchEnd::Used,
                ..
            }
        ));
        assert_eq!(ends(&reports), [PrefetchEnd::Used]);
        assert!(matches!(store.find(&a.call.key, now).0, Found::Nothing));
        assert_eq!(store.held(), (0, 0));
    }

    #[test]
    fn a_call_joins_a_flight_and_the_landing_reports_it() {
        let mut store = PrefetchStore::default();
        let a = read("/p/a.rs");
        let flight = sent(&mut store, &a);
        let now = Instant::now();
        let (found, reports) = store.find(&a.call.key, now);
        assert!(reports.is_empty());
        assert!(matches!(found, Found::InFlight { .. }));
        assert_eq!(flight.fate(), Fate::Joined);
        let (reports, told) = store.land(&a, &flight, body("A"), &settings(), now);
        assert_eq!(ends(&reports), [PrefetchEnd::Joined]);
        assert!(told.is_ok());
        assert_eq!(store.held(), (0, 0), "a joined result is not stored");
        // A joined call whose files changed meanwhile is not answered.
        let b = read("/p/b.rs");
        let flight = sent(&mut store, &b);
        store.find(&b.call.key, now);
        b.stale.store(true, Ordering::SeqCst);
        let (reports, told) = store.land(&b, &flight, body("B"), &settings(), now);
        assert_eq!(ends(&reports), [PrefetchEnd::Stale]);
        assert_eq!(told.err(), Some(PrefetchEnd::Stale));
    }

    #[test]
    fn a_cancelled_join_cancels_the_flight_unless_it_landed() {
        let mut store = PrefetchStore::default();
        let a = read("/p/a.rs");
        let flight = sent(&mut store, &a);
        let Found::InFlight { flight: joined, .. } = store.find(&a.call.key, Instant::now()).0
        else {
            panic!("not joined")
        };
        let report = store.abandon(&joined, &a).expect("reported");
        assert_eq!(ends(&[report]), [PrefetchEnd::Cancelled]);
        assert!(flight.cancel.is_cancelled());
        // Its landing then reports nothing more.
        let (reports, _) = store.land(&a, &flight, body("A"), &settings(), Instant::now());
        assert!(reports.is_empty());
        assert!(store.abandon(&joined, &a).is_none());
    }

    #[test]
    fn landed_results_expire_and_the_oldest_make_room() {
        let mut store = PrefetchStore::default();
        let now = Instant::now();
        let short = Arc::new(Fake {
            freshness: Duration::from_millis(10),
            ..Arc::into_inner(read("/p/short.rs")).unwrap()
        });
        let flight = sent(&mut store, &short);
        assert!(store
            .land(&short, &flight, body("S"), &settings(), now)
            .1
            .is_ok());
        let reports = store.sweep(now + Duration::from_millis(10));
        assert_eq!(ends(&reports), [PrefetchEnd::Expired]);
        // Two entries at most: a third evicts the oldest landed one.
        let (a, b, c) = (read("/p/a.rs"), read("/p/b.rs"), read("/p/c.rs"));
        for p in [&a, &b] {
            let flight = sent(&mut store, p);
            assert!(store
                .land(p, &flight, body("x"), &settings(), now)
                .1
                .is_ok());
        }
        let flight = Flight::new(CancellationToken::new());
        let reports = store
            .insert(c.clone(), flight, &settings())
            .unwrap()
            .unwrap();
        assert_eq!(ends(&reports), [PrefetchEnd::Evicted]);
        assert!(!store.holds(&a.call.key) && store.holds(&b.call.key));
    }

    #[test]
    fn caps_and_the_session_end_decline_or_drop() {
        let mut store = PrefetchStore::default();
        let (a, b, c) = (read("/p/a.rs"), read("/p/b.rs"), read("/p/c.rs"));
        let _flying = [sent(&mut store, &a), sent(&mut store, &b)];
        let again = store.insert(
            a.clone(),
            Flight::new(CancellationToken::new()),
            &settings(),
        );
        assert_eq!(again.err(), Some(DeclineReason::AlreadyHeld));
        let more = store.insert(
            c.clone(),
            Flight::new(CancellationToken::new()),
            &settings(),
        );
        assert_eq!(more.err(), Some(DeclineReason::OverParallel));
        let reports = store.close();
        assert_eq!(ends(&reports), [PrefetchEnd::SessionEnded; 2]);
        let after = store.insert(c, Flight::new(CancellationToken::new()), &settings());
        assert!(matches!(after, Ok(None)));
    }

    #[test]
    fn a_write_forgets_what_it_may_change_and_a_read_forgets_nothing() {
        let mut store = PrefetchStore::default();
        let now = Instant::now();
        let (a, b) = (read("/p/src/a.rs"), read("/p/b.rs"));
        for p in [&a, &b] {
            let flight = sent(&mut store, p);
            assert!(store
                .land(p, &flight, body("x"), &settings(), now)
                .1
                .is_ok());
        }
        let looked = resolved("fs__read_text_file", "/p/src", SideEffectClass::ReadOnly);
        assert!(store.forget_for(&looked, |_, _| false).is_empty());
        let wrote = resolved("fs__write_file", "/p/src", SideEffectClass::Unknown);
        let reports = store.forget_for(&wrote, |_, _| false);
        assert_eq!(ends(&reports), [PrefetchEnd::Invalidated]);
        assert!(!store.holds(&a.call.key) && store.holds(&b.call.key));
        // The config's `invalidates` list reaches any tool it names.
        let other = resolved("gh__create_issue", "", SideEffectClass::Mutating);
        let reports = store.forget_for(&other, |caller, exposed| {
            caller == "gh__create_issue" && exposed == "fs__read_text_file"
        });
        assert_eq!(ends(&reports), [PrefetchEnd::Invalidated]);
        // Files written outside devboy, by name or unknown.
        let c = read("/p/c.rs");
        let flight = sent(&mut store, &c);
        assert!(store
            .land(&c, &flight, body("x"), &settings(), now)
            .1
            .is_ok());
        assert!(store
            .forget_written(&["/p/other.rs".into()], false)
            .is_empty());
        assert_eq!(
            ends(&store.forget_written(&[], true)),
            [PrefetchEnd::Invalidated]
        );
    }

    #[test]
    fn stale_files_and_a_new_connection_never_answer() {
        let mut store = PrefetchStore::default();
        let now = Instant::now();
        let (a, b) = (read("/p/a.rs"), read("/p/b.rs"));
        for p in [&a, &b] {
            let flight = sent(&mut store, p);
            assert!(store
                .land(p, &flight, body("x"), &settings(), now)
                .1
                .is_ok());
        }
        a.stale.store(true, Ordering::SeqCst);
        let (found, reports) = store.find(&a.call.key, now);
        assert!(matches!(
            found,
            Found::Landed {
                end: PrefetchEnd::Stale,
                ..
            }
        ));
        assert_eq!(ends(&reports), [PrefetchEnd::Stale]);
        b.restarted.store(true, Ordering::SeqCst);
        assert!(matches!(
            store.find(&b.call.key, now).0,
            Found::Landed {
                end: PrefetchEnd::UpstreamRestarted,
                ..
            }
        ));
        // A result that comes back on a dead connection is not stored.
        let c = read("/p/c.rs");
        let flight = sent(&mut store, &c);
        c.restarted.store(true, Ordering::SeqCst);
        let (reports, _) = store.land(&c, &flight, body("x"), &settings(), now);
        assert_eq!(ends(&reports), [PrefetchEnd::UpstreamRestarted]);
    }

    #[test]
    fn empty_answers_count_until_something_changes() {
        let mut store: PrefetchStore<Fake> = PrefetchStore::default();
        let search = resolved("fs__search_files", "/p/src", SideEffectClass::ReadOnly);
        store.note_answer(&search, true);
        store.note_answer(&search, true);
        assert_eq!(store.empties(&search.key), 2);
        store.note_answer(&search, false);
        assert_eq!(store.empties(&search.key), 0);
        store.note_answer(&search, true);
        let beside = resolved("fs__write_file", "/p/other.rs", SideEffectClass::Mutating);
        store.forget_for(&beside, |_, _| false);
        assert_eq!(store.empties(&search.key), 1, "a write elsewhere");
        let wrote = resolved("fs__move_file", "/p/src", SideEffectClass::Mutating);
        store.forget_for(&wrote, |_, _| false);
        assert_eq!(store.empties(&search.key), 0, "a write to what it searched");
        store.note_answer(&search, true);
        store.advance_partition();
        assert_eq!(store.empties(&search.key), 0, "a compaction");
    }

    #[test]
    fn inlining_takes_what_fits_in_order() {
        let mut store = PrefetchStore::default();
        let now = Instant::now();
        let (a, b) = (read("/p/a.rs"), read("/p/b.rs"));
        for (p, text) in [(&a, "a".repeat(400)), (&b, "b".repeat(400))] {
            let flight = sent(&mut store, p);
            assert!(store
                .land(p, &flight, body(&text), &settings(), now)
                .1
                .is_ok());
        }
        let keys = [a.call.key.clone(), b.call.key.clone()];
        let (taken, reports) = store.take_inline(&keys, 150);
        assert_eq!(taken.len(), 1, "one fits the budget");
        assert_eq!(ends(&reports), [PrefetchEnd::Inlined]);
        assert!(
            store.holds(&b.call.key),
            "the rest stay for the agent's call"
        );
    }
}
