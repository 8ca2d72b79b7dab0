//! The offline tuner of devboy: it reads what devboy recorded (telemetry
//! events) or what Claude Code recorded (session logs), proposes changes to
//! `pipeline_config.toml` by explicit rules, checks them by simulation, and
//! writes them without disturbing what a person wrote.
//!
//! Key design decisions:
//!
//! - **One compact table, many passes.** Events are read once into
//!   72-byte [`event::Record`]s in recorded order ([`read`]); aggregation,
//!   the sequence analysis, the rules and every simulation are passes over
//!   that table. Two million events read and analysed in a few seconds.
//! - **One reader of the format.** Files are read by `devboy_telemetry`'s
//!   own reader, into the writer's own record types, and compacted; a test
//!   writes through its recorder and reads every field back. A bad line is
//!   counted and skipped, never an error.
//! - **Rules, then a simulation that can say no.** [`rules`] are
//!   thresholds with minimum support, each change carrying its evidence;
//!   [`simulate`] replays the dedup cache over each recorded session under
//!   the current and proposed settings and estimates tokens from the
//!   recorded figures; [`analyze`] keeps a change only when the estimate
//!   does not fall. The simulation's limits are documented where it lives.
//!   Value-model priors (`[tools.*] typical_tokens`, `follow_up`) change
//!   no token the pipeline sends, so they are written without it.
//! - **Sampled sessions are scaled, never replayed.** Their events weigh
//!   `1/sample_rate` in the volume figures (calls, tokens, savings: marked
//!   as estimates in the report), count once as evidence (minimum
//!   support), and are left out of the sequence analysis and the cache
//!   replay, whose gaps they would falsify ([`aggregate`], [`simulate`]).
//! - **The config has two authors.** [`edit`] edits the file in place with
//!   `toml_edit` and marks each value the tuner sets with `# tune:`;
//!   unmarked values are a person's and hold.
//! - **Real config semantics.** Effective settings always come from
//!   `devboy_core`'s own resolution ([`devboy_core::pipeline_config`]) of
//!   the text that would be written, never from a re-implementation.
//!
//! The tuner knows nothing of MCP, tokio or the pipeline's internals; it
//! reads files and writes one.
//!
//! - [`aggregate`]: the per-endpoint and per-session figures of an event
//!   table, and its sequence facts.
//! - [`analyze`]: `devboy tune analyze`.
//! - [`definitions`]: the tool definitions per session, next to the
//!   results.
//! - [`fingerprint`]: endpoint fingerprints, shared with a team and
//!   blended back ([`fingerprint::blend`]).
//! - [`show`]: `devboy tune show`.
//! - [`speculation`]: what speculation did, and its rules (R7, E1).
//! - [`claude_logs`]: `devboy tune from-claude-logs`.
//! - `synthetic` (with the `synthetic` feature, and in unit tests):
//!   generated telemetry for benchmarks and tests.

#![deny(missing_docs)]

pub mod aggregate;
pub mod analyze;
mod analyze_report;
pub mod claude_logs;
pub mod definitions;
pub mod edit;
pub mod error;
pub mod event;
pub mod fingerprint;
pub mod names;
pub mod read;
pub mod retrieval;
pub mod rules;
pub mod savings;
pub mod show;
pub mod simulate;
pub mod speculation;
#[cfg(any(test, feature = "synthetic"))]
pub mod synthetic;
pub mod table;

pub use analyze::{AnalyzeOptions, AnalyzeReport};
pub use claude_logs::{ClaudeLogOptions, ClaudeLogReport};
pub use error::TuneError;
pub use show::ShowOptions;

/// Now, in Unix milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
