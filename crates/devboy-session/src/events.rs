//! [`SessionEvents`]: what a session records besides the results the
//! pipeline processed — error results, speculation, `find_files` queries,
//! the tool lists it served, its end — whatever pipeline runs, passthrough
//! included.

use devboy_core::call::ResolvedCall;
use devboy_core::speculation::SpeculationEvent;
use devboy_pipeline::Tokenizer;
use devboy_telemetry::{CallFacts, CallOrigin, Outcome, RetrievalRecord, Telemetry};

use crate::Forwarded;

/// One session's telemetry of events (off by default).
#[derive(Debug)]
pub struct SessionEvents {
    telemetry: Telemetry,
}

impl Default for SessionEvents {
    fn default() -> Self {
        Self::new(Telemetry::disabled())
    }
}

impl SessionEvents {
    /// Events recorded to `telemetry`.
    pub fn new(telemetry: Telemetry) -> Self {
        Self { telemetry }
    }

    /// The recorder, for what the pipeline records itself (its results).
    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    /// The agent made `call` (its client's name goes with the session).
    pub fn call(&self, call: &ResolvedCall) {
        self.telemetry.set_client(call.client.as_deref());
    }

    /// Speculation did something about `call` (see [`SpeculationEvent`]);
    /// `result` is what the client would forward of the prefetch's result
    /// when one ended after landing, counted with `tokenizer`. The result
    /// itself goes nowhere.
    pub fn speculation(
        &self,
        call: &ResolvedCall,
        event: SpeculationEvent,
        result: Option<&Forwarded<'_>>,
        tokenizer: Tokenizer,
    ) {
        if !self.telemetry.is_active() {
            return;
        }
        let actual = match result {
            None => 0,
            Some(Forwarded::Single { text, .. }) => tokenizer.count(text) as u64,
            Some(Forwarded::Blocks(blocks)) => {
                blocks.iter().map(|b| tokenizer.count(b) as u64).sum()
            }
        };
        self.telemetry
            .record_speculation(&call.exposed, &call.key, event, actual);
    }

    /// An error result, which passes untouched: `body` is what the client
    /// forwards of it, counted with `tokenizer`, in context `partition`.
    pub fn error(&self, call: &ResolvedCall, body: &str, tokenizer: Tokenizer, partition: u64) {
        if !self.telemetry.is_active() {
            return;
        }
        self.telemetry.set_client(call.client.as_deref());
        let facts = CallFacts {
            tool: &call.exposed,
            upstream: call.upstream(),
            body,
            paths: &call.paths,
        };
        self.telemetry.record_call(
            &facts,
            &origin(call),
            Outcome::passed_through(tokenizer.count(body) as u64, partition, true),
        );
    }

    /// One `find_files` query.
    pub fn retrieval(&self, record: RetrievalRecord) {
        self.telemetry.record_retrieval(record);
    }

    /// One `devboy_run` script.
    pub fn code_run(&self, record: devboy_telemetry::CodeRunRecord) {
        self.telemetry.record_code_run(record);
    }

    /// The agent was served, at `served`, a list of `tools` tools whose
    /// definitions cost `tokens` on every model request (counts only: no
    /// name).
    pub fn tools_listed(&self, tools: u64, tokens: u64, served: std::time::Instant) {
        self.telemetry.tools_listed(tools, tokens, served);
    }

    /// The model's context was compacted or cleared.
    pub fn compaction(&self) {
        self.telemetry.compaction();
    }

    /// The session is over: writes the telemetry summary.
    pub fn end(&self) {
        self.telemetry.finish();
    }
}

/// Where a call came from, for telemetry.
pub(crate) fn origin(call: &ResolvedCall) -> CallOrigin<'_> {
    CallOrigin {
        key: Some(&call.key),
        served: call.served,
    }
}
