//! The pure, synchronous response pipeline of devboy: what one forwarded
//! tool result becomes before the model sees it. Three layers, in order
//! ([`result_pipeline::ResultPipeline`] chains them):
//!
//! 1. **dedup** ([`dedup_stage`]): a body the model already holds becomes a
//!    reference to the visible id it was shown with; fingerprints, the
//!    cache that remembers what the model received, and the store that
//!    gives back the exact bytes behind any id;
//! 2. **template** ([`template`]): whole-body text re-encodings (Markdown
//!    tables, multi-line fields, JSON held as text);
//! 3. **encoder** ([`encode`], routed by [`route`]): JSON in its cheapest
//!    lossless format, and elision to the token budget, recoverably;
//!
//! and what none of them improves passes through as it came. Every hint
//! line the model may see is written and read in [`hints`].
//!
//! **Architecture invariant: this crate does no I/O.** It knows nothing of
//! MCP, JSON-RPC, tokio, files or the wall clock. Callers hand it bytes, ids,
//! paths and the current time, and get back decisions. That keeps every rule
//! testable alone, deterministic under property tests, and benchmarkable
//! without a process around it. The proxy (`devboy-mcp`) owns one
//! [`DedupCache`], one [`ExpandStore`] and one [`IdAllocator`] per session,
//! and brings the randomness a session's [`SessionTag`] is drawn from.
//!
//! Key design decisions:
//!
//! - **The dedup cache remembers, it does not store.** [`DedupCache`] keeps
//!   only a [`Fingerprint`], a [`Delivered`] record and a length per body.
//!   The bytes live in [`ExpandStore`]. The two answer different questions
//!   with different lifetimes: "is this body still in the model's context,
//!   so a reference to it resolves?" ends with compaction, a mutating call or
//!   a TTL; "what exact bytes did `kafrum12` stand for?" holds for the whole
//!   session. So the cache's byte bound approximates what a context can hold,
//!   and the store's byte bound is a memory budget.
//! - **A reference is only as good as the model's context** (invariant 3 in docs/invariants.md).
//!   A lookup returns an entry only if it was delivered in the current
//!   context partition ([`DedupCache::advance_partition`] on compaction or
//!   reset), less than a TTL ago *counted from delivery* (a later hit does
//!   not move the body in the context), and not invalidated since by a write
//!   to one of its paths or by its endpoint. Every other rule (LRU by entries
//!   and by bytes, minimum size) can only make the cache forget, which costs
//!   savings and never correctness.
//! - **Time is a parameter.** Every call that depends on age takes a
//!   [`Timestamp`] (milliseconds on the caller's monotonic session clock),
//!   so tests and `devboy replay` run recorded sessions deterministically.
//! - **Ids are resolvable by text** (invariant 2) **and mean one thing
//!   forever** (invariant 10; docs/invariants.md). A [`ReferenceId`] prints as `kafrum12`, a
//!   [`SessionTag`] drawn once per process and a sequence number: short,
//!   printed with the fresh result, found by plain text match later.
//!   [`IdAllocator`] hands them out in order and never reuses one, and the
//!   tag tells an id of an earlier devboy process (the model's context
//!   outlives a restart) from this one's, so a stale id can only ever be
//!   "expired" or "from an earlier session", never point at other bytes.
//! - **A fingerprint is the first 128 bits of SHA-256.** Collision odds at
//!   the cache's size are below 2⁻¹⁰⁰, and 16 bytes keep the key cheap to
//!   hash and to print as a short prefix.
//!
//! One result's way through dedup, by hand:
//!
//! ```
//! use devboy_pipeline::*;
//!
//! let mut cache = DedupCache::new(DedupConfig::default());
//! let mut store = ExpandStore::new(ExpandConfig::default());
//! let mut ids = IdAllocator::new(SessionTag::FIXED); // live: a drawn tag
//! let endpoint = EndpointKey::new("fs", "read_text_file");
//! let body = "fn main() {}\n".repeat(100);
//!
//! // First read: a miss, so the body goes out in full, shown with a fresh id.
//! let now = Timestamp::from_millis(0);
//! let fp = Fingerprint::of(body.as_bytes());
//! assert!(cache.lookup(fp, now).is_none());
//! let id = ids.next(); // printed with the result: `tagfix1`
//! let _ = store.insert(id, body.clone());
//! let delivered = Delivered::new(id, endpoint, ["/repo/src/main.rs"]);
//! let _ = cache.record_delivered(fp, delivered, body.len(), now);
//!
//! // Second read, same bytes: the model can be sent `> [ref: tagfix1, …]`.
//! let later = Timestamp::from_millis(5_000);
//! let hit = cache.lookup(Fingerprint::of(body.as_bytes()), later).map(|d| d.id);
//! assert_eq!(hit.map(|id| id.to_string()).as_deref(), Some("tagfix1"));
//!
//! // A write to the file: the next read goes out in full again.
//! cache.invalidate_path("/repo/src/");
//! assert!(cache.lookup(fp, later).is_none());
//!
//! // `devboy_expand tagfix1` still returns the exact bytes.
//! assert_eq!(store.expand(id, &ids), Expansion::Bytes(body.as_bytes().into()));
//! ```
//!
//! Modules:
//! - [`fingerprint`]: [`Fingerprint`], the identity of a forwarded body.
//! - [`ids`]: [`ReferenceId`], [`SessionTag`], [`IdAllocator`], [`EndpointKey`].
//! - [`time`]: [`Timestamp`], the caller's session clock.
//! - [`dedup`]: [`DedupCache`] and its rules.
//! - [`expand`]: [`ExpandStore`], the bytes behind every id.
//! - [`dedup_stage`]: [`DedupStage`], one session's dedup decisions.
//! - [`hints`]: every hint line's text and its parser.
//! - [`near`]: exact deltas for near-duplicate JSON bodies.
//! - [`tokens`]: [`Tokenizer`], the token counts every cost is measured in.
//! - [`shape`]: what a body is (its [`Shape`] and inner formats).
//! - [`template`] and [`encode`]: the lossless re-encodings; [`route`]
//!   picks the cheapest and elides.
//! - [`result_pipeline`]: [`result_pipeline::ResultPipeline`], the layers chained, with
//!   the accounting.

#![deny(missing_docs)]

pub mod dedup;
pub mod dedup_stage;
pub mod encode;
pub mod exact;
pub mod expand;
pub mod fingerprint;
pub mod handoff;
pub mod hints;
pub mod ids;
pub mod near;
pub mod parts;
mod paths;
pub mod result_pipeline;
pub mod route;
pub mod shape;
pub mod template;
pub mod textdiff;
pub mod time;
pub mod tokens;

pub use dedup::{
    DedupCache, DedupConfig, DedupStats, Delivered, Evictions, RecordOutcome, SkipReason,
};
pub use dedup_stage::{
    write_covers, DedupDecision, DedupStage, DedupStageConfig, ExpandError, NearPolicy,
    ResultPolicy, TextDiffPolicy,
};
pub use expand::{ExpandConfig, ExpandStats, ExpandStore, Expansion, StoreOutcome};
pub use fingerprint::Fingerprint;
pub use handoff::Handoff;
pub use ids::{
    EndpointKey, IdAllocator, InvalidSessionTag, ParseReferenceIdError, ReferenceId, SessionTag,
};
pub use shape::{classify, Classified, InnerFormat, InnerFormats, Shape};
pub use template::{DecodedBody, Template};
pub use time::Timestamp;
pub use tokens::{definition_json, Tokenizer};
