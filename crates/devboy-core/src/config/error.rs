//! [`ConfigError`]: what went wrong in a config file, said for people.

use std::fmt;
use std::path::{Path, PathBuf};

use super::ConfigFormat;

/// A config file that cannot be used.
///
/// Its `Display` names the file (with line and column when the parser knows
/// them), the key path, what was expected and what was found, e.g.
///
/// ```text
/// /home/u/.mcp.json: mcpServers.github.args[2]: expected a string, found the integer 3
/// /home/u/.config/devboy/devboy.toml:7:1: servers.github.comand: unknown key; expected one of: type, command, args, … (did you mean `command`?)
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {kind}", file.display(), Location(*position))]
pub struct ConfigError {
    file: PathBuf,
    position: Option<(usize, usize)>,
    // Boxed: errors travel in every `Result` of the loader; keep them small.
    kind: Box<ConfigErrorKind>,
}

impl ConfigError {
    pub(crate) fn new(
        file: &Path,
        position: Option<(usize, usize)>,
        kind: ConfigErrorKind,
    ) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            position,
            kind: Box::new(kind),
        }
    }

    /// The config file the error is about.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Line and column (1-based) in the file, when known. JSON values carry
    /// no positions after parsing, so only JSON syntax errors have one.
    pub fn position(&self) -> Option<(usize, usize)> {
        self.position
    }

    /// What went wrong.
    pub fn kind(&self) -> &ConfigErrorKind {
        &self.kind
    }
}

struct Location(Option<(usize, usize)>);

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some((line, column)) => write!(f, ":{line}:{column}"),
            None => Ok(()),
        }
    }
}

/// The ways a config file can be wrong. Key paths are rendered like
/// `mcpServers.github.args[2]`, with keys quoted when they are not bare words.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The file could not be read.
    #[error("cannot read the file: {source}")]
    Read {
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file name does not say which format it is in.
    #[error("expected a file ending in .toml (devboy) or .json (Claude Code mcpServers), found {}",
        .extension.as_deref().map_or_else(|| "no extension".to_owned(), |e| format!("extension .{e}")))]
    UnsupportedFormat {
        /// The extension found, if any.
        extension: Option<String>,
    },
    /// The text is not valid TOML or JSON.
    #[error("invalid {format}: {message}")]
    Syntax {
        /// The format the file was read as.
        format: ConfigFormat,
        /// The parser's message.
        message: String,
    },
    /// A value has the wrong type or an unacceptable value.
    #[error("{key}: expected {expected}, found {found}")]
    Invalid {
        /// The key path, e.g. `mcpServers.github.args[2]`.
        key: String,
        /// What is acceptable there.
        expected: String,
        /// What the file has there.
        found: String,
    },
    /// A key devboy does not know (TOML only; JSON unknown keys are warnings).
    #[error("{key}: unknown key; expected one of: {}{}", .expected.join(", "),
        .suggestion.as_deref().map_or_else(String::new, |s| format!(" (did you mean `{s}`?)")))]
    UnknownKey {
        /// The key path of the unknown key.
        key: String,
        /// The keys allowed at that place.
        expected: Vec<String>,
        /// The allowed key closest to the one written, when one is close.
        suggestion: Option<String>,
    },
    /// `${VAR}` names a variable that is not set and has no default.
    #[error(
        "{key}: expected environment variable {variable} to be set, found it unset \
             (set it, or give a default: ${{{variable}:-default}})"
    )]
    UnsetVariable {
        /// The key path of the value that uses the variable.
        key: String,
        /// The variable's name.
        variable: String,
    },
    /// `${NAME…` without the closing `}`: a reference whose brace was
    /// forgotten, refused rather than passed on as literal text.
    #[error("{key}: unterminated {reference} (no closing }}) at character {character}")]
    UnterminatedVariable {
        /// The key path of the value.
        key: String,
        /// The reference up to the end of its name, e.g. `${GITHUB_TOKEN`.
        reference: String,
        /// Where its `$` is in the value: 1-based, counted in characters.
        character: usize,
    },
    /// Two servers resolve to the same tool-name prefix.
    #[error("{key}: expected a prefix no other server uses, found {prefix:?}, which is also the prefix of {other}")]
    DuplicatePrefix {
        /// Where the clashing prefix comes from (a `prefix` key, or the server's key when derived).
        key: String,
        /// The prefix both resolve to.
        prefix: String,
        /// The other server's key path.
        other: String,
    },
}
