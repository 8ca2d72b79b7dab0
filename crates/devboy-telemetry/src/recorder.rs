//! [`Telemetry`]: one session's recorder. The proxy calls
//! [`Telemetry::record`] once per tool result, [`Telemetry::tools_listed`]
//! once per tool list it serves, and [`Telemetry::finish`] when the
//! session ends; everything slow happens on a writer thread.
//!
//! On the caller's thread `record` only hashes (the names from a cache,
//! the call, the paths and the body), decides sampling, adds to the
//! session's totals and hands a ready [`ResultEvent`] to a bounded channel
//! with `try_send`. Serialization and the file write happen on the writer
//! thread, so a slow disk never slows a tool call: when the channel is
//! full, the event is dropped and counted (`dropped` in the summary).
//!
//! **Failure is silent to the proxy.** If the directory or the salt
//! cannot be set up, the recorder starts disabled; if a write fails (disk
//! full, directory removed), the writer logs one warning and stops
//! writing, and `record` stops doing work. Nothing here returns an error
//! to the caller or panics on I/O.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use devboy_core::call::CallKey;
use devboy_core::pipeline_config::TelemetrySettings;
use devboy_core::speculation::{Served, SpeculationEvent};

use crate::event::{
    ClientKind, CodeRunRecord, DedupOutcome, DefinitionsSummary, Delivered, EndpointClass, Event,
    ExpandedSummary, ExpansionRecord, ResultEvent, ResultLayer, RetrievalRecord, SessionSummary,
    SpeculationKind, SpeculationRecord, SpeculationSummary, TokenFigures, SCHEMA_VERSION,
};
use crate::hash::{hex, random_bytes, Hash64, Salt};
use crate::names::EndpointNames;
use crate::sink::{create_private_dir, unix_ms, JsonlSink, SinkLimits};

/// The salt's file name inside the telemetry directory.
pub const SALT_FILE: &str = "salt";

/// How many events may wait for the writer before new ones are dropped.
pub const DEFAULT_QUEUE: usize = 1024;

/// How long [`Telemetry::finish`] waits for the writer to drain.
const FINISH_WAIT: Duration = Duration::from_secs(2);

/// Where and how a [`Telemetry`] writes.
#[derive(Clone, Debug)]
pub struct TelemetryOptions {
    /// The telemetry directory (`salt`, `events/`).
    pub dir: PathBuf,
    /// The names map to keep up to date, if any.
    pub names_file: Option<PathBuf>,
    /// The fraction of result events kept.
    pub sample_rate: f64,
    /// Rotation and deletion.
    pub limits: SinkLimits,
    /// The tokenizer the token counts are in (`o200k_base`, …).
    pub tokenizer: String,
    /// The session id to hash; random (128 bits) when `None`.
    pub session_id: Option<String>,
    /// Channel capacity, see [`DEFAULT_QUEUE`].
    pub queue: usize,
}

impl TelemetryOptions {
    /// Options writing to `dir` with every other setting at its default.
    pub fn new(dir: PathBuf, tokenizer: &str) -> Self {
        Self {
            dir,
            names_file: None,
            sample_rate: 1.0,
            limits: SinkLimits::new(16 << 20, 30),
            tokenizer: tokenizer.to_owned(),
            session_id: None,
            queue: DEFAULT_QUEUE,
        }
    }

    /// The options a `devboy mcp` session runs with: `settings` from the
    /// pipeline config, `DEVBOY_TELEMETRY=off` honoured, the telemetry
    /// directory from [`devboy_core::paths::telemetry_dir`] and the names
    /// map in [`devboy_core::paths::config_dir`]. `None` when telemetry is
    /// off.
    pub fn for_session(settings: &TelemetrySettings, tokenizer: &str) -> Option<Self> {
        let settings = settings.with_env(&|name| std::env::var_os(name));
        if !settings.enabled {
            return None;
        }
        Some(Self {
            names_file: Some(devboy_core::paths::endpoint_names_file()),
            sample_rate: settings.sample_rate,
            limits: SinkLimits::new(settings.max_file_bytes, settings.max_age_days),
            ..Self::new(devboy_core::paths::telemetry_dir(), tokenizer)
        })
    }
}

/// Which result events are kept: those whose call hash, read as a number,
/// is below `rate × 2⁶⁴`. Deterministic (the same call hash is always kept
/// or always not) and uniform, since the hashes are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampler {
    rate: f64,
}

impl Sampler {
    /// A sampler keeping about `rate` of the events (clamped to 0..=1).
    pub fn new(rate: f64) -> Self {
        let rate = if rate.is_nan() {
            0.0
        } else {
            rate.clamp(0.0, 1.0)
        };
        Self { rate }
    }

    /// The rate applied.
    pub fn rate(self) -> f64 {
        self.rate
    }

    /// Whether the event of call `call` is kept.
    pub fn keeps(self, call: Hash64) -> bool {
        if self.rate >= 1.0 {
            return true;
        }
        // 2^64 × rate, exact in f64 for the rates people write; the cast
        // saturates.
        let threshold = (self.rate * 18_446_744_073_709_551_616.0) as u64;
        call.0 < threshold
    }
}

/// The identifying facts of one result; only their salted hashes (and the
/// body's length) leave [`Telemetry::record`].
#[derive(Clone, Copy, Debug)]
pub struct CallFacts<'a> {
    /// The exposed tool name (`<prefix>__<tool>`).
    pub tool: &'a str,
    /// The upstream's name.
    pub upstream: &'a str,
    /// What the client would have forwarded to the model.
    pub body: &'a str,
    /// The path arguments of the call.
    pub paths: &'a [String],
}

/// Where a result's call came from, for speculation's figures: its
/// arguments (hashed into the call key, never written) and what served it.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallOrigin<'a> {
    /// The call's identity, if known.
    pub key: Option<&'a CallKey>,
    /// What answered the agent's call.
    pub served: Served,
}

/// What the pipeline did with a result: no names, no content.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// What L0 did.
    pub dedup: DedupOutcome,
    /// The terminal layer.
    pub layer: ResultLayer,
    /// The pipeline's action name.
    pub action: &'static str,
    /// The body's shape, if classified.
    pub shape: Option<&'static str>,
    /// Inner formats found.
    pub inner_formats: Vec<&'static str>,
    /// The encoder or template used.
    pub format: Option<&'static str>,
    /// The L1 template used.
    pub template: Option<&'static str>,
    /// Tokens the client would have forwarded.
    pub tokens_baseline: u64,
    /// Tokens sent.
    pub tokens_final: u64,
    /// Tokens saved by L0.
    pub dedup_saved: i64,
    /// Tokens saved by L1/L2.
    pub encoder_saved: i64,
    /// Parts were elided.
    pub elided: bool,
    /// The session's context partition.
    pub context_partition: u64,
    /// The result was an error.
    pub is_error: bool,
}

impl Outcome {
    /// A result passed through untouched (`tokens` both ways).
    pub fn passed_through(tokens: u64, context_partition: u64, is_error: bool) -> Self {
        Self {
            dedup: DedupOutcome::Off,
            layer: ResultLayer::Passthrough,
            action: "unchanged",
            shape: None,
            inner_formats: Vec::new(),
            format: None,
            template: None,
            tokens_baseline: tokens,
            tokens_final: tokens,
            dedup_saved: 0,
            encoder_saved: 0,
            elided: false,
            context_partition,
            is_error,
        }
    }
}

/// One session's telemetry; see the module docs. A disabled recorder
/// ([`Telemetry::disabled`]) does nothing at all.
#[derive(Debug)]
pub struct Telemetry {
    active: Option<Active>,
}

#[derive(Debug)]
struct Active {
    salt: Salt,
    session_id: String,
    session: Hash64,
    started_ms: u64,
    tokenizer: String,
    sampler: Sampler,
    seq: AtomicU64,
    totals: Totals,
    names: Mutex<HashMap<Box<str>, Hash64>>,
    client: OnceLock<ClientKind>,
    tx: SyncSender<Message>,
    failed: Arc<AtomicBool>,
    finished: AtomicBool,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The session's own salt for call keys: random, never written, so a
    /// key matches only within its session.
    key_salt: Salt,
    speculation: Mutex<SpeculationState>,
    /// The tool lists served so far.
    definitions: Mutex<Definitions>,
}

/// The tool lists served so far (`lists` 0: none), and when the one the
/// summary holds was served.
#[derive(Debug, Default)]
struct Definitions {
    summary: DefinitionsSummary,
    served: Option<Instant>,
}

/// How many call keys the session remembers of each kind; past it the
/// oldest knowledge is dropped (a late invocation then goes uncounted).
const MAX_PENDING_KEYS: usize = 4096;

/// Speculation's running summary and what matches later events to earlier
/// ones: declines awaiting the agent's own call, prefetches awaiting it.
#[derive(Debug, Default)]
struct SpeculationState {
    summary: SpeculationSummary,
    declined: HashMap<Hash64, &'static str>,
    dispatched: HashMap<Hash64, u64>,
}

impl SpeculationState {
    /// Notes the agent's call with `key` served by `served`; returns the
    /// predicted tokens when a prefetch served it.
    fn on_result(&mut self, key: Option<Hash64>, served: Served, saved: i64) -> Option<u64> {
        let key = key?;
        if !served.agent_called() {
            // An inlined follow-up: counted when its prefetch ended.
            return None;
        }
        if let Some(reason) = self.declined.remove(&key) {
            *self
                .summary
                .late_invoked
                .entry(reason.to_owned())
                .or_default() += 1;
        }
        let s = &mut self.summary;
        match served {
            Served::Upstream | Served::Inline => return None,
            Served::Prefetch => s.calls_saved.prefetch += 1,
            Served::Joined => s.calls_saved.dedup += 1,
            Served::FailFast => s.calls_saved.fail_fast += 1,
        }
        s.tokens_saved += saved;
        if served.from_prefetch() {
            self.dispatched.remove(&key)
        } else {
            None
        }
    }

    fn on_event(&mut self, key: Option<Hash64>, event: SpeculationEvent, actual: u64) {
        let s = &mut self.summary;
        match event {
            SpeculationEvent::Dispatched { predicted_tokens } => {
                s.dispatched += 1;
                if let Some(key) = key {
                    bounded_insert(&mut self.dispatched, key, predicted_tokens as u64);
                }
            }
            SpeculationEvent::Declined { reason } => {
                *s.declined.entry(reason.name().to_owned()).or_default() += 1;
                if let Some(key) = key {
                    bounded_insert(&mut self.declined, key, reason.name());
                }
            }
            SpeculationEvent::Ended {
                end,
                predicted_tokens,
            } => {
                match end {
                    devboy_core::speculation::PrefetchEnd::Used => s.used += 1,
                    devboy_core::speculation::PrefetchEnd::Joined => s.joined += 1,
                    devboy_core::speculation::PrefetchEnd::Inlined => s.inlined += 1,
                    other => {
                        *s.wasted.entry(other.name().to_owned()).or_default() += 1;
                        s.tokens_wasted += actual;
                        // No call of the agent's will be served by it.
                        if let Some(key) = key {
                            self.dispatched.remove(&key);
                        }
                    }
                }
                if actual > 0 && predicted_tokens > 0 {
                    s.predictions += 1;
                    if SpeculationSummary::overran(predicted_tokens as u64, actual) {
                        s.overruns += 1;
                    }
                }
            }
        }
    }
}

fn bounded_insert<V>(map: &mut HashMap<Hash64, V>, key: Hash64, value: V) {
    if map.len() >= MAX_PENDING_KEYS {
        map.clear();
    }
    map.insert(key, value);
}

#[derive(Debug, Default)]
struct Totals {
    results: AtomicU64,
    events: AtomicU64,
    dropped: AtomicU64,
    tokens_baseline: AtomicU64,
    tokens_final: AtomicU64,
    dedup_saved: AtomicI64,
    encoder_saved: AtomicI64,
    compactions: AtomicU64,
    expansions: AtomicU64,
    expanded_tokens: AtomicU64,
    expanded_again_tokens: AtomicU64,
}

impl Totals {
    /// Adds one result's or expansion's token figures.
    fn add(&self, figures: TokenFigures) {
        self.tokens_baseline
            .fetch_add(figures.tokens_baseline, Ordering::Relaxed);
        self.tokens_final
            .fetch_add(figures.tokens_final, Ordering::Relaxed);
        self.dedup_saved
            .fetch_add(figures.dedup_saved, Ordering::Relaxed);
        self.encoder_saved
            .fetch_add(figures.encoder_saved, Ordering::Relaxed);
    }
}

#[derive(Debug)]
enum Message {
    Event(Box<Event>),
    Name(Hash64, Box<str>),
    Finish(mpsc::Sender<()>),
}

impl Telemetry {
    /// A recorder that records nothing.
    pub fn disabled() -> Self {
        Self { active: None }
    }

    /// Starts recording: creates the directory (mode 0700) and the salt if
    /// needed, checks that events can be written, and starts the writer
    /// thread, which first deletes expired files. On any failure logs one
    /// warning saying why and returns a disabled recorder: telemetry that
    /// cannot write says so when the session starts, not at its first
    /// event (which may never come).
    pub fn start(options: TelemetryOptions) -> Self {
        match Active::start(options.clone()) {
            Ok(active) => Self {
                active: Some(active),
            },
            Err(error) => {
                tracing::warn!(dir = %options.dir.display(), "telemetry is off for this session: {error}");
                Self::disabled()
            }
        }
    }

    /// [`start`](Self::start) with the options of
    /// [`TelemetryOptions::for_session`], or disabled when telemetry is off.
    pub fn for_session(settings: &TelemetrySettings, tokenizer: &str) -> Self {
        match TelemetryOptions::for_session(settings, tokenizer) {
            Some(options) => Self::start(options),
            None => Self::disabled(),
        }
    }

    /// Whether events are still being written.
    pub fn is_active(&self) -> bool {
        self.active.as_ref().is_some_and(Active::live)
    }

    /// `h(session id)`, the `session` field of every record.
    pub fn session(&self) -> Option<Hash64> {
        self.active.as_ref().map(|a| a.session)
    }

    /// The salted hash `h(x)` of this install, for callers that must match
    /// names against hashes (tests, `tune show`).
    pub fn hash(&self, x: &str) -> Option<Hash64> {
        self.active.as_ref().map(|a| a.salt.h(&[x.as_bytes()]))
    }

    /// Notes the client's name (from `initialize`); the first one counts.
    pub fn set_client(&self, name: Option<&str>) {
        if let Some(active) = &self.active {
            active.client.get_or_init(|| ClientKind::of(name));
        }
    }

    /// Counts one compaction (context partition advanced).
    pub fn compaction(&self) {
        if let Some(active) = &self.active {
            active.totals.compactions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Notes one tool list served to the agent at `served`: `tools`
    /// definitions costing `tokens` on every model request (counted by the
    /// caller with `devboy_pipeline::Tokenizer::count_definition`, in the
    /// session's tokenizer). The summary keeps the list served last (by
    /// `served`, whatever order the counts arrive in) and the number of
    /// lists. A session that only listed tools (a client's health check,
    /// `claude mcp list`) writes no summary: it sent the model nothing.
    pub fn tools_listed(&self, tools: u64, tokens: u64, served: Instant) {
        if let Some(active) = &self.active {
            let mut d = active.definitions.lock().unwrap_or_else(|e| e.into_inner());
            d.summary.lists += 1;
            if d.served.is_none_or(|last| served >= last) {
                d.served = Some(served);
                d.summary.tokens = tokens;
                d.summary.tools = tools;
            }
        }
    }

    /// Records one result. Returns whether its event was kept by sampling
    /// and queued for writing.
    pub fn record(&self, facts: &CallFacts<'_>, outcome: Outcome) -> bool {
        self.record_call(facts, &CallOrigin::default(), outcome)
    }

    /// [`record`](Self::record) with where the call came from: its event
    /// then carries the call key (when `origin` has the arguments) and,
    /// when speculation served it, `served` and the predicted tokens.
    pub fn record_call(
        &self,
        facts: &CallFacts<'_>,
        origin: &CallOrigin<'_>,
        outcome: Outcome,
    ) -> bool {
        match &self.active {
            Some(active) if active.live() => active.record(facts, origin, outcome),
            _ => false,
        }
    }

    /// Records one speculation event about the call `key` of `tool` (a
    /// declined candidate's key is written, to match the agent's later
    /// call). `actual_tokens` is the landed result's size for
    /// [`SpeculationEvent::Ended`] (0 if it never landed). Never sampled.
    /// Returns whether the event was queued.
    pub fn record_speculation(
        &self,
        tool: &str,
        key: &CallKey,
        event: SpeculationEvent,
        actual_tokens: u64,
    ) -> bool {
        match &self.active {
            Some(active) if active.live() => {
                active.record_speculation(tool, key, event, actual_tokens)
            }
            _ => false,
        }
    }

    /// Records one `find_files` query; `record`'s `v`, `ts_ms` and
    /// `session` are filled here. Never sampled. Returns whether it was
    /// queued.
    pub fn record_retrieval(&self, record: RetrievalRecord) -> bool {
        self.queue_stamped(|v, ts_ms, session| {
            Event::Retrieval(RetrievalRecord {
                v,
                ts_ms,
                session,
                ..record
            })
        })
    }

    /// Records one `devboy_run` script; `record`'s `v`, `ts_ms` and
    /// `session` are filled here. Never sampled. Returns whether it was
    /// queued.
    pub fn record_code_run(&self, record: CodeRunRecord) -> bool {
        self.queue_stamped(|v, ts_ms, session| {
            Event::CodeRun(CodeRunRecord {
                v,
                ts_ms,
                session,
                ..record
            })
        })
    }

    /// Queues the event `make` builds from the schema version, the time
    /// now and the session's hash, when telemetry is live; whether it was
    /// queued.
    fn queue_stamped(&self, make: impl FnOnce(u32, u64, Hash64) -> Event) -> bool {
        match &self.active {
            Some(active) if active.live() => {
                let event = make(SCHEMA_VERSION, unix_ms(SystemTime::now()), active.session);
                active.tx.try_send(Message::Event(Box::new(event))).is_ok()
            }
            _ => false,
        }
    }

    /// Records one `devboy_expand` delivery of `tokens` tokens, `delivered`
    /// of a result of `tool` (the exposed name of the tool whose result the
    /// id stood for) on `upstream`. Never sampled; its figures
    /// ([`Delivered::figures`]) go into the session's totals. Returns
    /// whether its event was queued.
    pub fn record_expansion(
        &self,
        tool: &str,
        upstream: &str,
        delivered: Delivered,
        tokens: u64,
    ) -> bool {
        match &self.active {
            Some(active) if active.live() => {
                active.record_expansion(tool, upstream, delivered, tokens)
            }
            _ => false,
        }
    }

    /// Ends the session: queues its summary (when it had any result, any
    /// expansion or any speculation) and
    /// waits up to two seconds for the writer to write everything queued.
    /// Later calls, and later [`record`](Self::record)s, do nothing.
    pub fn finish(&self) {
        if let Some(active) = &self.active {
            active.finish();
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Active {
    fn start(options: TelemetryOptions) -> std::io::Result<Self> {
        let dir = options.dir.display();
        if options.dir.exists() && !options.dir.is_dir() {
            return Err(std::io::Error::other(format!("{dir} is not a directory")));
        }
        create_private_dir(&options.dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot create {dir}: {e}")))?;
        let salt_file = options.dir.join(SALT_FILE);
        let salt = Salt::load_or_create(&salt_file).map_err(|e| {
            std::io::Error::new(e.kind(), format!("the salt {}: {e}", salt_file.display()))
        })?;
        let sink = JsonlSink::new(&options.dir, options.limits);
        sink.check_writable()?;
        let session_id = match options.session_id {
            Some(id) => id,
            None => hex(&random_bytes::<16>()?),
        };
        let session = salt.h(&[session_id.as_bytes()]);
        let (tx, rx) = mpsc::sync_channel(options.queue.max(1));
        let failed = Arc::new(AtomicBool::new(false));
        let names = options.names_file.as_deref().map(EndpointNames::load);
        let writer = {
            let failed = failed.clone();
            std::thread::Builder::new()
                .name("devboy-telemetry".into())
                .spawn(move || write_loop(rx, sink, names, &failed))?
        };
        Ok(Self {
            salt,
            session_id,
            session,
            started_ms: unix_ms(SystemTime::now()),
            tokenizer: options.tokenizer,
            sampler: Sampler::new(options.sample_rate),
            seq: AtomicU64::new(0),
            totals: Totals::default(),
            names: Mutex::new(HashMap::new()),
            client: OnceLock::new(),
            tx,
            failed,
            finished: AtomicBool::new(false),
            writer: Mutex::new(Some(writer)),
            key_salt: Salt::random()?,
            speculation: Mutex::new(SpeculationState::default()),
            definitions: Mutex::default(),
        })
    }

    fn call_key(&self, key: &CallKey) -> Hash64 {
        self.key_salt.h(&[key.as_bytes()])
    }

    fn speculation(&self) -> std::sync::MutexGuard<'_, SpeculationState> {
        self.speculation.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record_speculation(
        &self,
        tool: &str,
        call: &CallKey,
        event: SpeculationEvent,
        actual_tokens: u64,
    ) -> bool {
        let declined = matches!(event, SpeculationEvent::Declined { .. });
        // Every event is matched by key in the session; only declines
        // carry theirs (to match the agent's later call in the tuner).
        let key = self.call_key(call);
        self.speculation().on_event(Some(key), event, actual_tokens);
        let (kind, predicted, reason, end, actual) = match event {
            SpeculationEvent::Dispatched { predicted_tokens } => (
                SpeculationKind::Dispatched,
                Some(predicted_tokens as u64),
                None,
                None,
                None,
            ),
            SpeculationEvent::Declined { reason } => (
                SpeculationKind::Declined,
                None,
                Some(reason.name()),
                None,
                None,
            ),
            SpeculationEvent::Ended {
                end,
                predicted_tokens,
            } => (
                SpeculationKind::Ended,
                Some(predicted_tokens as u64),
                None,
                Some(end.name()),
                Some(actual_tokens),
            ),
        };
        let record = SpeculationRecord {
            v: SCHEMA_VERSION,
            ts_ms: unix_ms(SystemTime::now()),
            session: self.session,
            tool: self.name_hash(tool),
            event: kind,
            predicted_tokens: predicted,
            reason: reason.map(Into::into),
            end: end.map(Into::into),
            actual_tokens: actual,
            call_key: declined.then_some(key),
        };
        self.tx
            .try_send(Message::Event(Box::new(Event::Speculation(record))))
            .is_ok()
    }

    fn record_expansion(
        &self,
        tool: &str,
        upstream: &str,
        delivered: Delivered,
        tokens: u64,
    ) -> bool {
        let t = &self.totals;
        t.add(delivered.figures(tokens));
        t.expansions.fetch_add(1, Ordering::Relaxed);
        t.expanded_tokens.fetch_add(tokens, Ordering::Relaxed);
        if delivered != Delivered::New {
            t.expanded_again_tokens.fetch_add(tokens, Ordering::Relaxed);
        }
        let record = ExpansionRecord {
            v: SCHEMA_VERSION,
            ts_ms: unix_ms(SystemTime::now()),
            session: self.session,
            tool: self.name_hash(tool),
            upstream: self.name_hash(upstream),
            delivered,
            tokenizer: self.tokenizer.clone().into(),
            tokens,
        };
        self.tx
            .try_send(Message::Event(Box::new(Event::Expansion(record))))
            .is_ok()
    }

    fn live(&self) -> bool {
        !self.failed.load(Ordering::Relaxed) && !self.finished.load(Ordering::Relaxed)
    }

    /// `h(name)`, from the cache; a name seen for the first time is also
    /// sent to the names map.
    fn name_hash(&self, name: &str) -> Hash64 {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(hash) = names.get(name) {
            return *hash;
        }
        let hash = self.salt.h(&[name.as_bytes()]);
        // Cached only once the map heard of it, so a full queue retries.
        if self.tx.try_send(Message::Name(hash, name.into())).is_ok() {
            names.insert(name.into(), hash);
        }
        hash
    }

    fn record(&self, facts: &CallFacts<'_>, origin: &CallOrigin<'_>, outcome: Outcome) -> bool {
        let key = origin.key.map(|key| self.call_key(key));
        let predicted = self.speculation().on_result(
            key,
            origin.served,
            outcome.tokens_baseline as i64 - outcome.tokens_final as i64,
        );
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let t = &self.totals;
        t.results.fetch_add(1, Ordering::Relaxed);
        t.add(TokenFigures {
            tokens_baseline: outcome.tokens_baseline,
            tokens_final: outcome.tokens_final,
            dedup_saved: outcome.dedup_saved,
            encoder_saved: outcome.encoder_saved,
        });
        let tool = self.name_hash(facts.tool);
        let upstream = self.name_hash(facts.upstream);
        let call = self.call_hash(seq);
        if !self.sampler.keeps(call) {
            return false;
        }
        let event = ResultEvent {
            v: SCHEMA_VERSION,
            ts_ms: unix_ms(SystemTime::now()),
            session: self.session,
            call,
            tool,
            upstream,
            endpoint_class: EndpointClass::of_exposed(facts.tool),
            response_chars: facts.body.chars().count() as u64,
            shape: outcome.shape.map(Into::into),
            inner_formats: outcome.inner_formats.into_iter().map(Into::into).collect(),
            fingerprint: self.salt.h128(&[facts.body.as_bytes()]),
            path_hashes: facts
                .paths
                .iter()
                .map(|p| self.salt.h(&[p.as_bytes()]))
                .collect(),
            dedup: outcome.dedup,
            layer: outcome.layer,
            action: outcome.action.into(),
            format: outcome.format.map(Into::into),
            template: outcome.template.map(Into::into),
            tokenizer: self.tokenizer.clone().into(),
            tokens_baseline: outcome.tokens_baseline,
            tokens_final: outcome.tokens_final,
            dedup_saved: outcome.dedup_saved,
            encoder_saved: outcome.encoder_saved,
            elided: outcome.elided,
            context_partition: outcome.context_partition,
            is_error: outcome.is_error,
            prefetched: None,
            prefetch_hit: None,
            served: (origin.served != Served::Upstream).then(|| origin.served.name().into()),
            predicted_tokens: predicted,
            call_key: key,
        };
        match self
            .tx
            .try_send(Message::Event(Box::new(Event::Result(event))))
        {
            Ok(()) => {
                t.events.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(TrySendError::Full(_)) => {
                t.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }

    /// `h(session id ‖ seq)`, the seq in decimal after the id's fixed-width
    /// hex (so no two pairs concatenate alike).
    fn call_hash(&self, seq: u64) -> Hash64 {
        self.salt
            .h(&[self.session_id.as_bytes(), seq.to_string().as_bytes()])
    }

    fn finish(&self) {
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        let t = &self.totals;
        let results = t.results.load(Ordering::SeqCst);
        let deadline = Instant::now() + FINISH_WAIT;
        let speculation = std::mem::take(&mut self.speculation().summary);
        let speculated = !speculation.is_empty();
        let definitions = self
            .definitions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .summary;
        let listed = definitions.lists > 0;
        let expanded = ExpandedSummary {
            calls: t.expansions.load(Ordering::SeqCst),
            tokens: t.expanded_tokens.load(Ordering::SeqCst),
            again_tokens: t.expanded_again_tokens.load(Ordering::SeqCst),
        };
        if (results > 0 || speculated || expanded.calls > 0) && !self.failed.load(Ordering::SeqCst)
        {
            let now = unix_ms(SystemTime::now());
            let summary = SessionSummary {
                v: SCHEMA_VERSION,
                ts_ms: now,
                session: self.session,
                started_ms: self.started_ms,
                ended_ms: now,
                events: t.events.load(Ordering::SeqCst),
                results,
                sample_rate: self.sampler.rate(),
                dropped: t.dropped.load(Ordering::SeqCst),
                tokens_baseline: t.tokens_baseline.load(Ordering::SeqCst),
                tokens_final: t.tokens_final.load(Ordering::SeqCst),
                dedup_saved: t.dedup_saved.load(Ordering::SeqCst),
                encoder_saved: t.encoder_saved.load(Ordering::SeqCst),
                compactions: t.compactions.load(Ordering::SeqCst),
                client: self.client.get().copied().unwrap_or(ClientKind::Other),
                speculation: speculated.then_some(speculation),
                definitions: listed.then_some(definitions),
                expanded: (expanded.calls > 0).then_some(expanded),
            };
            let message = Message::Event(Box::new(Event::Session(summary)));
            self.send_until(message, deadline);
        }
        let (ack, done) = mpsc::channel();
        let finished = self.send_until(Message::Finish(ack), deadline)
            && done
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .is_ok();
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        match (finished, writer) {
            (true, Some(writer)) => {
                let _ = writer.join();
            }
            (false, _) => {
                tracing::warn!(
                    "telemetry writer did not finish in time; its last events may be lost"
                )
            }
            (true, None) => {}
        }
    }

    /// Sends `message`, waiting for room until `deadline`.
    fn send_until(&self, mut message: Message, deadline: Instant) -> bool {
        loop {
            match self.tx.try_send(message) {
                Ok(()) => return true,
                Err(TrySendError::Disconnected(_)) => return false,
                Err(TrySendError::Full(back)) => {
                    if Instant::now() >= deadline {
                        return false;
                    }
                    message = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
}

/// The writer thread: deletes expired files, then writes every event it is
/// sent as one line, and saves the names map after each burst.
fn write_loop(
    rx: Receiver<Message>,
    mut sink: JsonlSink,
    mut names: Option<EndpointNames>,
    failed: &AtomicBool,
) {
    match sink.delete_expired(SystemTime::now()) {
        Ok(deleted) if !deleted.is_empty() => {
            tracing::debug!(files = deleted.len(), "deleted expired telemetry files")
        }
        Ok(_) => {}
        Err(error) => tracing::debug!(%error, "could not delete expired telemetry files"),
    }
    let mut line = Vec::with_capacity(4096);
    let mut names_failed = false;
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        let mut finish = None;
        while let Some(message) = next.take() {
            match message {
                Message::Event(event) => {
                    if !failed.load(Ordering::Relaxed) {
                        if let Err(error) = write_line(&mut sink, &mut line, &event) {
                            tracing::warn!(dir = %sink.events_dir().display(), "telemetry is off for the rest of this session: writing an event failed: {error}");
                            failed.store(true, Ordering::SeqCst);
                        }
                    }
                }
                Message::Name(hash, name) => {
                    if let Some(names) = &mut names {
                        names.insert(hash, &name);
                    }
                }
                Message::Finish(ack) => finish = Some(ack),
            }
            if finish.is_none() {
                next = rx.try_recv().ok();
            }
        }
        if let (Some(map), false) = (&mut names, names_failed) {
            if let Err(error) = map.save() {
                tracing::warn!(%error, "cannot write the endpoint names map; names are not recorded");
                names_failed = true;
            }
        }
        if let Some(ack) = finish {
            let _ = ack.send(());
            return;
        }
    }
}

fn write_line(sink: &mut JsonlSink, line: &mut Vec<u8>, event: &Event) -> std::io::Result<()> {
    line.clear();
    serde_json::to_writer(&mut *line, event)?;
    line.push(b'\n');
    sink.append(line)
}
