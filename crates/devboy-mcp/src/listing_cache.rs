//! Each upstream's last listing, kept on disk, so that the first
//! `tools/list` of a later devboy answers with every server's tools at
//! once instead of waiting for the servers to start.
//!
//! Why it exists: in print mode (`claude -p`, the Agent SDK, CI) Claude
//! Code runs only the tools of its first `tools/list`; a tool announced
//! later with `list_changed` is offered but answers "No such tool
//! available" (docs/invariants.md, "Late tools"). A server slower than the
//! list grace would lose its tools for the whole session. With the last
//! listing at hand, devboy lists them at once; a call to one waits for its
//! server's first start like any call does, and the live listing, when it
//! differs, replaces the cached one (announced with `list_changed`) and is
//! written back.
//!
//! A listing is keyed by what the entry starts: for stdio the command,
//! arguments, environment and working directory, for HTTP the URL and
//! headers (see [`entry_key`]). A changed entry therefore finds no file and
//! never reuses an old list. The server's name, prefix, timeouts and
//! allow/deny globs do not change what it lists: the globs apply when the
//! catalog is built, to a cached listing as to a live one. The key is a
//! SHA-256 hash, because the environment and headers may hold secrets; the
//! file holds only the listing.
//!
//! A file that cannot be read or parsed is ignored with one warning (the
//! live listing replaces it); nothing here is ever fatal.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use devboy_core::config::{UpstreamConfig, UpstreamTransport};
use sha2::{Digest, Sha256};

use crate::catalog::UpstreamCatalog;
use crate::sync::lock;

/// The file layout's version; a file of another version is not used.
const FORMAT: u32 = 1;

/// Longest part of a server's name kept in its file's name.
const NAME_MAX: usize = 40;

/// Why a listing file was not used or not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListingError {
    /// Reading or writing the file failed.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// The file is not a listing devboy wrote.
    #[error("{path}: not a listing devboy can read ({error})")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        error: serde_json::Error,
    },
}

/// What a listing file holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    format: u32,
    /// The whole [`entry_key`], checked on load (the file name holds only
    /// part of it).
    key: String,
    /// The server's name when written, for a person reading the file.
    server: String,
    listing: UpstreamCatalog,
}

/// The listing file of one configured upstream.
#[derive(Debug)]
pub struct ListingFile {
    path: PathBuf,
    key: String,
    server: String,
    /// The bytes the file is known to hold (read or written by this
    /// process): an unchanged listing is not written again.
    on_disk: Mutex<Option<Vec<u8>>>,
    /// A failed write is warned about once per process.
    warned: AtomicBool,
}

impl ListingFile {
    /// The file of `config`'s listing under `dir`:
    /// `<dir>/<name>-<16 hex digits of the key>.json`. `None` for an entry
    /// that can never list (an unsupported or invalid transport).
    pub fn for_upstream(dir: &Path, config: &UpstreamConfig) -> Option<Self> {
        let key = entry_key(&config.transport)?;
        let name: String = config
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(NAME_MAX)
            .collect();
        Some(Self {
            path: dir.join(format!("{name}-{}.json", &key[..16])),
            key,
            server: config.name.clone(),
            on_disk: Mutex::new(None),
            warned: AtomicBool::new(false),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The listing kept for this entry, if there is a usable one. A file
    /// that cannot be read or parsed is warned about (once: each upstream
    /// loads once) and ignored.
    pub fn load(&self) -> Option<UpstreamCatalog> {
        match self.read() {
            Ok(listing) => listing,
            Err(error) => {
                tracing::warn!(upstream = %self.server, %error, "ignoring the cached tool list; the server's live list replaces it");
                None
            }
        }
    }

    fn read(&self) -> Result<Option<UpstreamCatalog>, ListingError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(ListingError::Io {
                    path: self.path.clone(),
                    error,
                })
            }
        };
        let stored: Stored =
            serde_json::from_slice(&bytes).map_err(|error| ListingError::Corrupt {
                path: self.path.clone(),
                error,
            })?;
        if stored.format != FORMAT || stored.key != self.key {
            // Another devboy version's layout, or another entry whose key
            // shares the file name's digits: not ours to use, not an error.
            tracing::debug!(file = %self.path.display(), "cached listing of another format or entry; not used");
            return Ok(None);
        }
        *lock(&self.on_disk) = Some(bytes);
        Ok(Some(stored.listing))
    }

    /// Writes `listing` as this entry's, unless the file already holds it.
    /// Atomic (a reader sees the old file or the new one, whichever devboy
    /// process wrote last); runs on the blocking pool. A failure is
    /// warned about once and otherwise ignored.
    pub async fn store(&self, listing: &UpstreamCatalog) {
        let stored = Stored {
            format: FORMAT,
            key: self.key.clone(),
            server: self.server.clone(),
            listing: listing.clone(),
        };
        let bytes = match serde_json::to_vec(&stored) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::debug!(upstream = %self.server, %error, "listing not serializable; not cached");
                return;
            }
        };
        if lock(&self.on_disk).as_deref() == Some(bytes.as_slice()) {
            return;
        }
        let path = self.path.clone();
        let written = {
            let bytes = bytes.clone();
            tokio::task::spawn_blocking(move || write_listing(&path, &bytes)).await
        };
        match written {
            Ok(Ok(())) => *lock(&self.on_disk) = Some(bytes),
            Ok(Err(error)) => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(upstream = %self.server, %error, "cannot keep the tool list for the next start");
                }
            }
            Err(_) => {
                tracing::debug!(upstream = %self.server, "writing the tool list was cancelled")
            }
        }
    }
}

fn write_listing(path: &Path, bytes: &[u8]) -> Result<(), ListingError> {
    let io = |error| ListingError::Io {
        path: path.to_path_buf(),
        error,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    devboy_sharedfile::replace(path, bytes).map_err(io)
}

/// What identifies an entry's listing, as 64 hex digits: the SHA-256 of
/// everything that decides which server runs and how (the transport with
/// every field, `${VAR}`s expanded). `None` for a transport that cannot
/// run. A stdio entry without a working directory inherits devboy's, which
/// is not part of the key: `devboy doctor` run anywhere fills the cache a
/// session in any project uses, and the live listing corrects the rare
/// server whose tools depend on where it runs.
pub(crate) fn entry_key(transport: &UpstreamTransport) -> Option<String> {
    let identity = match transport {
        UpstreamTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => serde_json::json!({
            "stdio": {"command": command, "args": args, "env": env,
                      "cwd": cwd.as_ref().map(|c| c.to_string_lossy())},
        }),
        UpstreamTransport::Http { url, headers } => serde_json::json!({
            "http": {"url": url, "headers": headers},
        }),
        UpstreamTransport::Unsupported { .. } | UpstreamTransport::Invalid { .. } => return None,
    };
    let digest = Sha256::new()
        .chain_update(format!("devboy listing {FORMAT}\n"))
        .chain_update(identity.to_string())
        .finalize();
    Some(digest.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    use devboy_core::config::ToolFilter;
    use rmcp::model::{Tool, ToolAnnotations};

    fn stdio(command: &str, args: &[&str], env: &[(&str, &str)]) -> UpstreamTransport {
        UpstreamTransport::Stdio {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            cwd: None,
        }
    }

    fn entry(name: &str, transport: UpstreamTransport) -> UpstreamConfig {
        UpstreamConfig {
            name: name.to_owned(),
            prefix: name.to_owned(),
            transport,
            timeout: Duration::from_secs(60),
            startup_timeout: Duration::from_secs(30),
            tools: ToolFilter::default(),
            enabled: true,
            always_load: false,
            oauth: Default::default(),
            sampling: false,
        }
    }

    fn temp_dir(tag: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("devboy-listing-{tag}-"))
            .tempdir()
            .unwrap()
    }

    /// A tool with what a real server's carries: a schema, an output
    /// schema, annotations and `_meta`.
    fn listing() -> UpstreamCatalog {
        let schema = serde_json::json!({"type": "object", "properties": {
            "path": {"type": "string"}, "n": {"type": "number", "default": 1.5e300}}});
        let mut tool = Tool::new(
            "read",
            "Reads a file.",
            std::sync::Arc::new(schema.as_object().unwrap().clone()),
        );
        tool.output_schema = tool.input_schema.clone().into();
        let mut annotations = ToolAnnotations::default();
        annotations.read_only_hint = Some(true);
        tool.annotations = Some(annotations);
        tool.meta = serde_json::from_value(serde_json::json!({"anthropic/x": [1, "y"]})).unwrap();
        UpstreamCatalog {
            tools: vec![tool],
            ..Default::default()
        }
    }

    #[test]
    fn every_field_of_the_transport_is_part_of_the_key() {
        let base = entry_key(&stdio("srv", &["a"], &[("K", "1")])).unwrap();
        assert_eq!(base.len(), 64);
        assert_eq!(
            entry_key(&stdio("srv", &["a"], &[("K", "1")])).as_deref(),
            Some(base.as_str())
        );
        for changed in [
            stdio("srv2", &["a"], &[("K", "1")]),
            stdio("srv", &["b"], &[("K", "1")]),
            stdio("srv", &["a", "b"], &[("K", "1")]),
            stdio("srv", &["a"], &[("K", "2")]),
            stdio("srv", &["a"], &[("K", "1"), ("L", "1")]),
            stdio("srv", &["a"], &[]),
        ] {
            assert_ne!(entry_key(&changed).unwrap(), base, "{changed:?}");
        }
        let mut with_cwd = stdio("srv", &["a"], &[("K", "1")]);
        if let UpstreamTransport::Stdio { cwd, .. } = &mut with_cwd {
            *cwd = Some(PathBuf::from("/p"));
        }
        assert_ne!(entry_key(&with_cwd).unwrap(), base);
        let http = |url: &str, auth: &str| UpstreamTransport::Http {
            url: url.to_owned(),
            headers: BTreeMap::from([("Authorization".to_owned(), auth.to_owned())]),
        };
        let remote = entry_key(&http("https://a/mcp", "x")).unwrap();
        assert_ne!(entry_key(&http("https://b/mcp", "x")).unwrap(), remote);
        assert_ne!(entry_key(&http("https://a/mcp", "y")).unwrap(), remote);
        assert_eq!(
            entry_key(&UpstreamTransport::Invalid {
                error: "unset".into()
            }),
            None
        );
    }

    #[test]
    fn name_prefix_and_filters_do_not_change_the_file_but_the_entry_does() {
        let dir = temp_dir("names");
        let one = entry("git", stdio("git-mcp", &[], &[]));
        let mut renamed = one.clone();
        renamed.prefix = "g".into();
        renamed.timeout = Duration::from_secs(1);
        let file = ListingFile::for_upstream(dir.path(), &one).unwrap();
        assert_eq!(
            file.path(),
            ListingFile::for_upstream(dir.path(), &renamed)
                .unwrap()
                .path()
        );
        let name = file.path().file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("git-") && name.ends_with(".json"),
            "{name}"
        );
        let other = entry("git", stdio("git-mcp", &["--repository", "."], &[]));
        assert_ne!(
            file.path(),
            ListingFile::for_upstream(dir.path(), &other)
                .unwrap()
                .path()
        );
        let odd = entry("a/b c", stdio("x", &[], &[]));
        let odd = ListingFile::for_upstream(dir.path(), &odd).unwrap();
        assert_eq!(odd.path().parent(), Some(dir.path()));
    }

    #[tokio::test]
    async fn a_stored_listing_loads_equal_and_is_not_rewritten() {
        let dir = temp_dir("roundtrip");
        let config = entry("fs", stdio("fs-mcp", &["/"], &[("TOKEN", "secret-7")]));
        let cache = dir.path().join("listings");
        let file = ListingFile::for_upstream(&cache, &config).unwrap();
        assert!(file.load().is_none(), "nothing kept yet");
        let listing = listing();
        file.store(&listing).await;
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert!(!text.contains("secret-7"), "the file holds no secrets");
        // A later process: equal tools, so no list_changed for a server
        // whose live listing is what was kept.
        let again = ListingFile::for_upstream(&cache, &config).unwrap();
        let loaded = again.load().unwrap();
        assert_eq!(loaded.tools, listing.tools);
        // Unchanged: not written again (a write renames a new file over
        // the old one, which would change the inode).
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            let inode = || std::fs::metadata(file.path()).unwrap().ino();
            let before = inode();
            again.store(&loaded).await;
            assert_eq!(inode(), before);
        }
        // Changed: written.
        again.store(&UpstreamCatalog::default()).await;
        let emptied = ListingFile::for_upstream(&cache, &config).unwrap();
        assert!(emptied.load().unwrap().tools.is_empty());
    }

    #[tokio::test]
    async fn a_broken_or_foreign_file_is_not_used() {
        let dir = temp_dir("broken");
        let config = entry("m", stdio("m", &[], &[]));
        let file = ListingFile::for_upstream(dir.path(), &config).unwrap();
        for junk in [&b"{\"format\": 1, \"key\""[..], b"\xff\xfe", b"[]"] {
            std::fs::write(file.path(), junk).unwrap();
            assert!(file.read().is_err(), "{junk:?}");
            assert!(file.load().is_none());
        }
        // Another entry's listing under this name (or another format).
        let other =
            ListingFile::for_upstream(dir.path(), &entry("m", stdio("n", &[], &[]))).unwrap();
        other.store(&listing()).await;
        std::fs::copy(other.path(), file.path()).unwrap();
        assert!(matches!(file.read(), Ok(None)));
        // The live listing replaces a broken file.
        std::fs::write(file.path(), b"garbage").unwrap();
        file.store(&listing()).await;
        assert_eq!(file.load().unwrap().tools, listing().tools);
    }

    #[tokio::test]
    async fn an_unwritable_directory_is_not_fatal() {
        let dir = temp_dir("unwritable");
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, b"").unwrap();
        let config = entry("x", stdio("x", &[], &[]));
        let file = ListingFile::for_upstream(&blocker.join("listings"), &config).unwrap();
        file.store(&listing()).await;
        file.store(&listing()).await;
        assert!(file.load().is_none());
    }
}
