//! Read-only speculation: after an upstream answers, a planner picks the
//! follow-up calls worth firing before the agent asks, and the
//! [`SpeculationEngine`] fires them and answers the agent's matching call
//! from what came back.
//!
//! The planner is pure and lives behind [`PrefetchPlanner`]; this module
//! owns everything with side effects on the wire: dispatching through the
//! upstream's own `call_tool`, the caps on work in flight, the store of
//! landed results, forgetting them when a call may have changed what they
//! read, cancelling everything when the session ends.
//!
//! Architecture invariant: a prefetched result never passes through the
//! response pipeline until the agent's own call is answered with it, and
//! then it goes through the seam whole, as a fresh result. A prefetch that
//! fails, times out or is rate-limited is dropped and never reaches the
//! agent: the agent's call then goes upstream as if nothing had happened.

mod engine;
mod fresh;
mod planner;
mod store;

use std::time::Duration;

use rmcp::model::{CallToolResult, JsonObject};

use crate::catalog::Catalog;
use devboy_core::call::ResolvedCall;

pub use devboy_core::call::CallKey;
pub use devboy_enrichment::{Declined, Plan, Prefetch as PlannedPrefetch};
pub use engine::{InlinedResult, SpeculationEngine, SpeculationStats};
pub use planner::ConfiguredPlanner;

/// Whether prefetched results wait in the store or ride along with the
/// answer that triggered them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpeculationMode {
    /// Fire in the background; the agent's matching call is answered
    /// from the store.
    #[default]
    Prefetch,
    /// Wait up to the prefetch timeout and append the follow-ups that
    /// landed and fit the budget to the answer that planned them.
    Inline,
}

impl SpeculationMode {
    /// The name used in the config and in status.
    pub fn name(self) -> &'static str {
        match self {
            Self::Prefetch => "prefetch",
            Self::Inline => "inline",
        }
    }
}

/// What the engine needs to know of the speculation config.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeculationSettings {
    /// Prefetch at all (fail-fast works either way).
    pub enabled: bool,
    /// Where prefetched results go.
    pub mode: SpeculationMode,
    /// How long a prefetch may run before it is cancelled and dropped.
    pub prefetch_timeout: Duration,
    /// Prefetches in flight per session.
    pub max_parallel: usize,
    /// Prefetches in flight per host key (an upstream, or a rate-limit
    /// host).
    pub per_host: usize,
    /// How long a landed prefetch may answer when the planner gives no
    /// freshness of its own.
    pub ttl: Duration,
    /// Landed results the store holds at most.
    pub max_entries: usize,
    /// Bytes of landed results (serialized) the store holds at most.
    pub max_bytes: usize,
    /// Tokens (estimated at 4 bytes each) the results inlined into one
    /// answer may cost together.
    pub budget_tokens: usize,
}

impl Default for SpeculationSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            mode: SpeculationMode::Prefetch,
            prefetch_timeout: Duration::from_millis(2000),
            max_parallel: 3,
            per_host: 2,
            ttl: Duration::from_secs(60),
            max_entries: 64,
            max_bytes: 8 * 1024 * 1024,
            budget_tokens: 8000,
        }
    }
}

/// An upstream call that was just answered, as the planner sees it.
pub struct AnsweredCall<'a> {
    /// The call.
    pub info: &'a ResolvedCall,
    /// Its result as the upstream sent it (before the pipeline).
    pub result: &'a CallToolResult,
    /// What devboy serves now.
    pub catalog: &'a Catalog,
    /// Whether the store holds, or has in flight, the call of an exposed
    /// name with these arguments.
    pub held: &'a dyn Fn(&str, &JsonObject) -> bool,
    /// Prefetches in flight in this session.
    pub in_flight: usize,
    /// Prefetches in flight on a host key.
    pub in_flight_on: &'a dyn Fn(&str) -> usize,
}

/// Decides what to prefetch. Pure: it sees facts and returns a plan; the
/// engine does the rest, and enforces invariant limits itself (read-only
/// class, caps) whatever a plan says.
pub trait PrefetchPlanner: Send + Sync + 'static {
    /// After `answered` (an upstream tool's successful result): what to
    /// prefetch and what was declined.
    fn plan(&self, answered: &AnsweredCall<'_>) -> Plan;

    /// The settings the engine runs with.
    fn settings(&self) -> &SpeculationSettings;

    /// After how many identical empty answers in one context a call of
    /// `exposed` is answered with a hint instead (`fail_fast_after_n`);
    /// `None`: never.
    fn fail_fast_after(&self, _exposed: &str) -> Option<usize> {
        None
    }

    /// Whether a call to `caller` forgets results of `exposed` (the
    /// config's `invalidates` lists).
    fn invalidates(&self, _caller: &str, _exposed: &str) -> bool {
        false
    }
}
