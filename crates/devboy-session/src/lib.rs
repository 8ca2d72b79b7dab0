//! One devboy session's pipeline, built from the pipeline config.
//!
//! [`PipelineSession`] is what a proxy session and `devboy replay` both run:
//! from a [`PipelineConfig`] and what is known of the session (the model,
//! results and compactions so far) it builds the pure
//! [`ResultPipeline`], its tokenizer and each endpoint's [`BodyPolicy`]
//! (dedup, near references, freshness, encoding, the hint policy), and runs
//! one result at a time through it given the facts of the call
//! ([`ResolvedCall`](devboy_core::call::ResolvedCall), decided once where
//! the call was routed) and what the client forwards ([`Forwarded`]).
//!
//! It also owns what happens around a result: forgetting before a call that
//! may change things, the model becoming known, compactions, counting the
//! hints sent, counting what `devboy_expand` delivers of what the session
//! left out (a repeat of what the model was shown is a cost, parts it was
//! never shown are new; see `expansion.rs`), telemetry, the status report,
//! and the capture
//! ([`capture`]) that `devboy replay` reads to reproduce the session.
//!
//! **Architecture invariant:** this crate knows nothing of MCP, rmcp or
//! tokio. The proxy's processor is a thin adapter that decides what the
//! client forwards and rebuilds the protocol result from a [`Processed`].
//! The session clock is a fact passed in, so a replay is exact.
//!
//! [`BodyPolicy`]: devboy_pipeline::result_pipeline::BodyPolicy
//! [`Processed`]: devboy_pipeline::result_pipeline::Processed

#![deny(missing_docs)]

pub mod capture;
mod events;
mod expansion;
mod pipeline_session;

use devboy_core::pipeline_config::{PipelineConfig, SessionContext, TokenizerChoice};
use devboy_pipeline::result_pipeline::ResultPipeline;
use devboy_pipeline::route::RouteConfig;
use devboy_pipeline::{DedupConfig, DedupStageConfig, ExpandConfig, IdAllocator, Tokenizer};

pub use events::SessionEvents;
pub use pipeline_session::{Forwarded, PipelineSession};

/// A fresh [`ResultPipeline`] with the config's dedup bounds, tokenizer
/// and budget (for a session whose model is not known yet), naming what it
/// shows with `ids`.
pub fn session_pipeline(config: &PipelineConfig, ids: IdAllocator) -> ResultPipeline {
    let d = &config.dedup;
    let dedup = DedupStageConfig {
        dedup: DedupConfig {
            max_entries: d.max_entries,
            max_bytes: d.max_context_bytes,
            min_body_bytes: d.min_body_bytes,
            ttl: d.ttl,
        },
        expand: ExpandConfig::default(),
    };
    let route = RouteConfig {
        tokenizer: default_tokenizer(config),
        budget_tokens: config
            .resolve_session(&SessionContext::default())
            .budget_tokens,
        only: None,
        ..RouteConfig::default()
    };
    ResultPipeline::new(dedup, route, ids)
}

/// The pipeline's tokenizer for the configured choice.
pub fn tokenizer(choice: TokenizerChoice) -> Tokenizer {
    match choice {
        TokenizerChoice::O200k => Tokenizer::O200k,
        TokenizerChoice::Cl100k => Tokenizer::Cl100k,
        TokenizerChoice::CharsPerToken(r) => Tokenizer::CharsPerToken(r),
    }
}

/// The tokenizer of a session whose model is not known (what the offline
/// commands count in).
pub fn default_tokenizer(config: &PipelineConfig) -> Tokenizer {
    tokenizer(config.resolve_session(&SessionContext::default()).tokenizer)
}

/// This process's ids: tagged from fresh randomness, so that no other
/// devboy process (the one before a restart, in particular) prints the
/// same ids. Without the OS's randomness, the process id and the time
/// stand in, which still differ between a process and its restart.
pub fn process_ids() -> IdAllocator {
    let seed = getrandom::u64().unwrap_or_else(|error| {
        tracing::warn!(%error, "no OS randomness; the id tag comes from the process id and time");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default();
        nanos ^ u64::from(std::process::id()).rotate_left(32)
    });
    IdAllocator::seeded(seed)
}
