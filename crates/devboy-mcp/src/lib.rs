//! The devboy MCP proxy: one MCP server to the agent, one MCP client per
//! upstream server, and the seam where the response pipeline plugs in.
//!
//! Key design decision: **the agent side never waits for upstreams.**
//! `initialize` is answered from devboy's own capabilities; upstreams start
//! concurrently under their own supervisors (`upstream`), and what they
//! offer is published as an immutable [`Catalog`] snapshot that
//! requests read and that changes announce with `list_changed`. A broken or
//! slow upstream therefore only ever affects its own tools.
//!
//! Only this crate knows about rmcp and tokio; the response pipeline sees a
//! result through [`Transform`] and must not panic its way into the
//! protocol (the seam fails open); every call's facts are decided once, in
//! `resolve`, into a [`devboy_core::call::ResolvedCall`] each layer reads.

#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod answers;
pub mod builtin;
mod catalog;
mod child;
mod client_stdio;
pub mod control;
mod definitions;
pub mod doctor;
mod frame;
pub mod http;
mod lazy;
mod listing_cache;
pub mod oauth;
pub mod partition;
mod processor;
mod proxy;
mod relay;
pub mod reload;
mod resolve;
pub mod seam;
mod serve;
mod session;
pub mod speculation;
mod stack;
mod sync;
mod tap;
mod tool_search;
mod upstream;
mod view;
mod wire;

pub use answers::{AnswerStore, Memory, NoAnswers, StoredAnswer};
pub use builtin::{BuiltinContext, BuiltinRegistry, BuiltinTool};
pub use catalog::{BuiltinListing, Catalog, ToolRoute, UpstreamCatalog};
pub use definitions::definition_tokens;
pub use partition::PartitionWatcher;
pub use processor::{PassthroughEvents, PipelineProcessor};
pub use proxy::{ConfigKind, Proxy, ProxyOptions, Reloaded, DEFAULT_LIST_GRACE_MS};
pub use resolve::Resolver;
pub use seam::{EventSink, Passthrough, Seam, SessionEvent, Transform};
pub use serve::{install_tls_provider, serve_stdio, Pipeline, ServeError, Serving, ENDING};
pub use session::{Session, SessionBuilder};
pub use speculation::{
    AnsweredCall, Declined, Plan, PlannedPrefetch, PrefetchPlanner, SpeculationEngine,
    SpeculationSettings,
};
pub use stack::{CallStack, Figures, PendingCall, Rules, StackParts};
pub use tool_search::ToolIndex;
pub use upstream::{
    CallFailure, Control, ListingSource, Phase, ProgressTarget, Upstream, UpstreamStats,
    NESTED_ENV, SERVER_INFO_NAME,
};
