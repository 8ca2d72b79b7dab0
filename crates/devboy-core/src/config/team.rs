//! `[team]` in `devboy.toml`: where a team's endpoint fingerprints are
//! shared, how they are blended into a member's own, and the providers
//! whose published fingerprints count as priors (docs/team.md).
//!
//! Only the tuner reads it (`devboy tune share | aggregate | analyze |
//! publish`); the proxy never touches the network for it. A problem in the
//! section is a warning for the proxy (the servers start) and an error,
//! naming the file and key, for the tune commands that need it.

use std::path::PathBuf;

/// Default share of the team's figures in a blend.
pub const DEFAULT_TEAM_WEIGHT: f64 = 0.7;
/// Default age (days since an endpoint was last seen by the team) after
/// which a team row is demoted to a provider's rank.
pub const DEFAULT_TEAM_TTL_DAYS: u32 = 14;
/// Default sessions an endpoint needs before it leaves a machine.
pub const DEFAULT_K_ANONYMITY: u32 = 5;
/// The least `k_anonymity` a config may set: one session would identify
/// what one person did.
pub const MIN_K_ANONYMITY: u32 = 2;
/// The most a provider's figures may weigh in a blend: local telemetry is
/// always the majority.
pub const MAX_PROVIDER_WEIGHT: f64 = 0.4;

/// `[team]`.
#[derive(Clone, Debug, PartialEq)]
pub struct TeamConfig {
    /// The object store the team shares (`s3://bucket/prefix`,
    /// `gs://…`, `az://container/prefix`, `file:///path`); `None`: no team.
    pub store: Option<String>,
    /// Whether `tune analyze` also shares this member's fingerprints.
    pub share: bool,
    /// The team's share of a blended figure, 0–1.
    pub weight: f64,
    /// Days after which a team row is demoted.
    pub ttl_days: u32,
    /// Sessions an endpoint needs before it is shared or kept in the
    /// team's aggregate.
    pub k_anonymity: u32,
    /// Published provider fingerprints (`[[team.providers]]`).
    pub providers: Vec<ProviderConfig>,
    /// Where the section was read from (for messages).
    pub origin: Option<PathBuf>,
}

impl Default for TeamConfig {
    fn default() -> Self {
        Self {
            store: None,
            share: false,
            weight: DEFAULT_TEAM_WEIGHT,
            ttl_days: DEFAULT_TEAM_TTL_DAYS,
            k_anonymity: DEFAULT_K_ANONYMITY,
            providers: Vec::new(),
            origin: None,
        }
    }
}

impl TeamConfig {
    /// Whether there is anything to blend or share.
    pub fn is_set(&self) -> bool {
        self.store.is_some() || !self.providers.is_empty()
    }
}

/// One `[[team.providers]]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderConfig {
    /// Where the document is: an `https://` (or `http://`) URL, or a path
    /// (relative to the config file's directory).
    pub source: ProviderSource,
    /// The upstream (its key under `[servers]`) whose tools the document
    /// describes: its `endpoint_class`es are that server's tool names.
    pub server: String,
    /// The provider's share of a blended figure, at most
    /// [`MAX_PROVIDER_WEIGHT`].
    pub weight: f64,
}

/// Where a provider document is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderSource {
    /// Fetched over HTTP(S).
    Url(String),
    /// A file.
    File(PathBuf),
}

impl std::fmt::Display for ProviderSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // A query may carry a token: never printed.
            ProviderSource::Url(u) => match u.split_once('?') {
                Some((base, _)) => write!(f, "{base}?…"),
                None => f.write_str(u),
            },
            ProviderSource::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The store URL schemes devboy speaks.
pub const STORE_SCHEMES: &[&str] = &["s3", "gs", "az", "file"];
