//! The answer store: a layer of the call path that may answer a call
//! before it reaches the upstream.
//!
//! A store holds results obtained ahead of time (a prefetch), keyed by the
//! exposed tool name and the arguments, and decides itself how long one
//! stays fresh. Answering is asynchronous: the agent's call may join a
//! prefetch still in flight and wait for it. An answer it gives goes
//! through the response seam exactly like the upstream's result would
//! have, marked with where it came from ([`Served`]). A store that holds
//! results should also be a [`Memory`] of the session (the speculation
//! engine is; another store is given to `SessionBuilder::memory`): every
//! call is shown to each memory first (the pipeline's, then the engine's,
//! then the others), so a call that may mutate can make the store drop
//! what it held. The session's default store,
//! [`NoAnswers`], holds nothing.

use devboy_core::speculation::Served;
use futures::future::BoxFuture;
use rmcp::model::CallToolResult;
use tokio_util::sync::CancellationToken;

use devboy_core::call::ResolvedCall;

/// A result the store gave for a call, and where it came from.
#[derive(Debug, Clone)]
pub struct StoredAnswer {
    /// The result, as the upstream sent it.
    pub result: CallToolResult,
    /// How it was obtained (never [`Served::Upstream`]).
    pub served: Served,
}

/// What holds results that calls and the world outside may make stale:
/// the pipeline's memory (dedup, ids) and the prefetch store. The call
/// stack tells every memory the same things, in one loop each.
pub trait Memory: Send + Sync + 'static {
    /// For logs: what fails when forgetting panics.
    fn name(&self) -> &'static str;

    /// A call to an upstream tool is about to be answered: forget what it
    /// may change (by its class and paths).
    fn forget_call(&self, call: &ResolvedCall);

    /// Claude Code's own tools wrote `paths` (`missed`: some writes were
    /// not heard of, so forget every path).
    fn forget_written(&self, _paths: &[String], _missed: bool) {}

    /// The context was compacted: what the model was shown is gone.
    fn advance_partition(&self) {}
}

/// Results that may stand in for an upstream's answer.
pub trait AnswerStore: Send + Sync + 'static {
    /// A fresh answer to `call`, or `None` to let the upstream answer.
    /// Waiting (for a prefetch in flight) ends when `cancel` fires.
    fn answer<'a>(
        &'a self,
        call: &'a ResolvedCall,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<StoredAnswer>>;
}

/// The store that never answers: every call goes to the upstream.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoAnswers;

impl AnswerStore for NoAnswers {
    fn answer<'a>(
        &'a self,
        _call: &'a ResolvedCall,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<StoredAnswer>> {
        Box::pin(async { None })
    }
}
