//! The answer store: a layer of the call path that may answer a call
//! before it reaches the upstream.
//!
//! A store holds results obtained ahead of time (a prefetch), keyed by the
//! exposed tool name and the arguments, and decides itself how long one
//! stays fresh. An answer it gives goes through the response seam exactly
//! like the upstream's result would have. Every call is shown to the store
//! first ([`AnswerStore::on_call`]), after the processor has forgotten what
//! the call may change, so a call that may mutate can make the store drop
//! what it held. The session's default store, [`NoAnswers`], holds nothing.

use rmcp::model::CallToolResult;

use crate::seam::ToolCallInfo;

/// Results that may stand in for an upstream's answer.
pub trait AnswerStore: Send + Sync + 'static {
    /// Sees every call to an upstream tool before any layer answers it:
    /// the place to drop entries the call may make stale.
    fn on_call(&self, _call: &ToolCallInfo<'_>) {}

    /// A fresh answer to `call`, or `None` to let the upstream answer.
    fn answer(&self, call: &ToolCallInfo<'_>) -> Option<CallToolResult>;
}

/// The store that never answers: every call goes to the upstream.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoAnswers;

impl AnswerStore for NoAnswers {
    fn answer(&self, _call: &ToolCallInfo<'_>) -> Option<CallToolResult> {
        None
    }
}
