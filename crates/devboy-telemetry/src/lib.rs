//! devboy's anonymous telemetry: one record per tool result, one per
//! `devboy_expand` delivery and one per session, appended to JSONL files on the user's machine for
//! `devboy tune analyze` (the schema is docs/telemetry.md).
//!
//! Key design decisions:
//!
//! - **Nothing identifying can be written** (invariant 6 in docs/invariants.md). The record types
//!   ([`ResultEvent`], [`SessionSummary`]) hold counts, flags, fixed
//!   vocabulary words and salted hashes ([`Hash64`], [`Hash128`]) only.
//!   Names, paths and bodies enter through [`CallFacts`] and leave
//!   [`Telemetry::record`] as `h(x)` = SHA-256(salt ‖ x), the salt being 32
//!   random bytes made once per install ([`Salt`]). The hash → name map
//!   that lets the user read their own report lives elsewhere, in the
//!   config directory ([`EndpointNames`]).
//! - **The hot path only hashes.** [`Telemetry::record`] hashes, samples
//!   and queues; serialization and writing happen on one writer thread fed
//!   by a bounded channel, and a full channel drops the event (counted)
//!   rather than wait.
//! - **Crash-safe by construction.** Each record is one `write(2)` of a
//!   whole line to an `O_APPEND` file of this process's own ([`JsonlSink`]):
//!   `kill -9` can lose queued records and cut the last line, never damage
//!   an earlier one ([`read_events_file`] skips a cut last line).
//! - **Telemetry never hurts the proxy, and never stops in silence.** A
//!   session that cannot write (the events folder is a file or read-only)
//!   gets a disabled recorder and one warning saying why, when it starts;
//!   a later write failure logs one warning and turns the sink off; a
//!   damaged salt is replaced, with a warning. No function here returns an
//!   I/O error to the proxy.
//!
//! Architecture invariant: this crate knows nothing of MCP, tokio or the
//! pipeline's types; the proxy translates its results into [`Outcome`]s.
//!
//! Modules:
//! - [`event`]: the records and the endpoint class of a tool name.
//! - [`hash`]: the salt and salted hashes.
//! - [`sink`]: the JSONL files, rotation and expiry.
//! - [`names`]: the local `endpoint-names.json`.
//! - [`recorder`]: [`Telemetry`], sampling and the writer thread.
//! - [`read`]: reading files back.

#![deny(missing_docs)]

pub mod event;
pub mod hash;
pub mod names;
pub mod read;
pub mod recorder;
pub mod sink;

#[cfg(test)]
mod tests;

pub use event::{
    CallsSaved, ClientKind, CodeRunRecord, DedupOutcome, DefinitionsSummary, Delivered,
    EndpointClass, Event, ExpandedSummary, ExpansionRecord, ResultEvent, ResultLayer,
    RetrievalRecord, SessionSummary, SpeculationKind, SpeculationRecord, SpeculationSummary,
    TokenFigures, SCHEMA_VERSION,
};
pub use hash::{Hash128, Hash64, Salt};
pub use names::EndpointNames;
pub use read::{events_files, parse_events, read_events_file, FileEvents, Unread};
pub use recorder::{
    CallFacts, CallOrigin, Outcome, Sampler, Telemetry, TelemetryOptions, SALT_FILE,
};
pub use sink::{JsonlSink, SinkLimits, EVENTS_DIR};
