//! Team and provider fingerprints (docs/team.md): each member's endpoint
//! fingerprints as Parquet in a shared object store, the team's aggregate
//! beside them, and providers' published documents, all read back by
//! `devboy tune analyze` as priors for its rules.
//!
//! Key design decisions:
//!
//! - **The tuner stays offline.** What a fingerprint is, k-anonymity, the
//!   merge and the blend are pure functions in `devboy_tune::fingerprint`;
//!   this crate only moves rows between Parquet, object stores and the
//!   tuner. A store that cannot be reached costs one line in the report,
//!   never the local tune.
//! - **Nothing but fingerprints leaves the machine.** A member's object
//!   holds its rows after k-anonymity and its member id (a salted hash);
//!   the same bytes are kept locally so the member can see exactly what
//!   was shared.
//! - **Whole objects only.** Each member writes only its own object; the
//!   aggregate is one PUT, conditional on the object it replaced where
//!   the store can check (S3, GCS, Azure), so two aggregators never
//!   interleave: the later one merges again.
//! - **Credentials from the provider's environment only** (`AWS_*`,
//!   `GOOGLE_*`, `AZURE_*`), never from a file devboy writes and never in
//!   a message.
//!
//! Modules: [`columns`] (the Parquet format), [`store`] (the bucket),
//! [`provider`] (provider documents), [`commands`] (share, aggregate,
//! publish, priors).

#![deny(missing_docs)]

pub mod columns;
pub mod commands;
pub mod error;
pub mod provider;
pub mod store;

pub use commands::{aggregate, member_id, publish, share, shared_figures, Member};
pub use error::TeamError;
pub use store::TeamStore;

/// Installs rustls' ring provider as the process default (once): reqwest
/// is built without a provider of its own, as in the proxy.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
