//! The tuner's errors. Nothing in telemetry or log content produces one
//! (bad lines are counted and skipped); these are about files the user
//! named or the tuner must write.

use std::path::{Path, PathBuf};

use devboy_core::config::ConfigError;

/// Why a tuner command could not finish.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// Reading or writing a file failed. (The error is part of the
    /// message, not a source, so a chain of causes prints it once.)
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// A pipeline config does not load (the message names file and key).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A pipeline config loads but cannot be edited as TOML.
    #[error("{}: {message}", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// What the TOML editor said.
        message: String,
    },
    /// The command cannot do what was asked, and says why.
    #[error("{0}")]
    Refused(String),
}

impl TuneError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        TuneError::Io {
            path: path.to_path_buf(),
            error: source,
        }
    }
}
