//! What can go wrong with a team's fingerprints, each in one line that
//! names the store (or file) and the problem.

/// An error of the team commands.
#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    /// `[team]` in devboy.toml is missing or wrong.
    #[error("{0}")]
    Config(String),
    /// The store (or one object in it) could not be reached or used.
    #[error("team store {store}: {message}")]
    Store {
        /// The store's URL, or the object's.
        store: String,
        /// What went wrong.
        message: String,
    },
    /// A fingerprint file could not be written.
    #[error("cannot encode fingerprints: {0}")]
    Encode(String),
    /// A fingerprint file is not one.
    #[error("damaged fingerprint file: {0}")]
    Damaged(String),
    /// A fingerprint file of a newer schema than this devboy reads.
    #[error("fingerprint schema version {0} is newer than this devboy reads (version {v}); update devboy", v = devboy_tune::fingerprint::FINGERPRINT_SCHEMA_VERSION)]
    NewerSchema(u32),
    /// A provider document could not be read.
    #[error("provider fingerprints {source_name}: {message}")]
    Provider {
        /// Its URL or path.
        source_name: String,
        /// What went wrong.
        message: String,
    },
    /// The member's own telemetry could not be read.
    #[error(transparent)]
    Tune(#[from] devboy_tune::TuneError),
    /// A local file. (Its error is part of the message, not a source, so
    /// a chain of causes does not print it twice.)
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        error: std::io::Error,
    },
    /// Nothing to share: no telemetry in the window.
    #[error("no result events in the last {days} days under {dir}: nothing to share (devboy writes them while `devboy mcp` serves, unless telemetry is off)")]
    NothingToShare {
        /// The events directory.
        dir: String,
        /// The window.
        days: u32,
    },
}
