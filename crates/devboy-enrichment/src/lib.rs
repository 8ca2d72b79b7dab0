//! Tool value models at work: after a tool answers, which read-only calls
//! the agent is likely to make next, with which arguments, and which of
//! them are worth making ahead of it.
//!
//! The crate is pure planning. It does no I/O and knows nothing of MCP
//! transports, tokio or clocks: the caller hands it the catalog
//! ([`ToolFacts`]), the config, the answered call ([`Answered`]) and what
//! the session already holds ([`PlanContext`]), and gets back a [`Plan`]:
//! the calls to make and, for every candidate left out, why
//! ([`DeclineReason`](devboy_core::speculation::DeclineReason)).
//!
//! Key design decisions:
//!
//! - **Three layers of knowledge, weakest first.** Edges and side-effect
//!   classes devboy ships for well-known servers ([`shipped`]), then the
//!   server's own MCP annotations, then `[tools."GLOB"]` in
//!   `pipeline_config.toml` (the class by the one rule every layer uses,
//!   [`devboy_core::call::side_effect`]). They are merged once per catalog
//!   by [`Planner::new`] into a [`ResolvedTool`] per exposed name, so
//!   planning a call is a lookup and a projection.
//! - **Never speculate with side effects.** A candidate must be `pure` or
//!   `read_only` by a rule stronger than its name's verb
//!   ([`SideEffect::may_prefetch`](devboy_core::call::SideEffect::may_prefetch)),
//!   and no config can make a tool whose name or annotations say it
//!   writes eligible.
//! - **Arguments come from the answer.** An edge's arguments are
//!   projections of the answered call's result or arguments
//!   ([`ArgSource`](devboy_core::value_model::ArgSource)); a projection
//!   that yields nothing, or arguments the target's input schema would
//!   refuse, plans no call.
//! - **Exact choice on small instances.** The candidates that pass are a
//!   knapsack with a count limit (value against predicted tokens, within
//!   `budget_tokens` and the free prefetch slots). Plain greedy by value
//!   density has no constant bound once the count limit binds, and the
//!   instances are tiny, so the choice is an exact branch and bound.

#![deny(missing_docs)]

mod choose;
mod facts;
mod fit;
mod model;
mod plan;
mod projection;
mod shipped;

pub use facts::{Annotations, ToolFacts};
pub use model::{shipped_classes, Edge, ResolvedTool};
pub use plan::{Answered, Declined, Plan, PlanContext, Planner, Prefetch};
