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
//!   `pipeline_config.toml`. They are merged once per catalog by
//!   [`Planner::new`] into a [`ResolvedTool`] per exposed name, so
//!   planning a call is a lookup and a projection.
//! - **Never speculate with side effects.** A candidate must be `pure` or
//!   `read_only` after the merge, and no config can make a tool whose
//!   name or annotations say it writes eligible.
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
pub use model::{Edge, ResolvedTool};
pub use plan::{Answered, Declined, Plan, PlanContext, Planner, Prefetch};

use devboy_core::speculation::canonical_object;
use serde_json::{Map, Value};

/// The canonical key of a call: the exposed name and the arguments as
/// JSON with object keys sorted at every depth (absent arguments are an
/// empty object), so two calls that mean the same have one key whatever
/// order their arguments were written in.
pub fn call_key(exposed: &str, arguments: Option<&Map<String, Value>>) -> String {
    format!("{exposed} {}", canonical_arguments(arguments))
}

/// A call's arguments as JSON with object keys sorted at every depth;
/// absent arguments are `{}`.
pub fn canonical_arguments(arguments: Option<&Map<String, Value>>) -> String {
    arguments.map_or_else(|| "{}".to_owned(), canonical_object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn call_keys_ignore_key_order_at_every_depth() {
        let a = json!({"b": 1, "a": {"y": [1, {"q": 1, "p": 2}], "x": "s"}});
        let b = json!({"a": {"x": "s", "y": [1, {"p": 2, "q": 1}]}, "b": 1});
        let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
        assert_eq!(call_key("t", Some(a)), call_key("t", Some(b)));
        assert_eq!(
            call_key("t", Some(a)),
            r#"t {"a":{"x":"s","y":[1,{"p":2,"q":1}]},"b":1}"#
        );
        assert_ne!(call_key("t", Some(a)), call_key("u", Some(a)));
        assert_eq!(call_key("t", None), call_key("t", Some(&Map::new())));
        let arrays = json!({"a": [2, 1]});
        let swapped = json!({"a": [1, 2]});
        assert_ne!(
            call_key("t", arrays.as_object()),
            call_key("t", swapped.as_object()),
            "array order is meaning"
        );
    }
}
