//! The team's bucket, through the `object_store` crate: S3 (and
//! S3-compatible servers), Google Cloud Storage, Azure Blob Storage, or a
//! shared file system.
//!
//! Layout under the URL's prefix:
//!
//! ```text
//! PREFIX/members/<member>/endpoints.parquet   one per member, written by it
//! PREFIX/team/team_endpoints.parquet          the aggregate, written whole
//! PREFIX/team/manifest.json                   what the aggregate was made of
//! ```
//!
//! Credentials come only from the provider's standard environment
//! (`AWS_*`, `GOOGLE_*`, `AZURE_*`), handed to the builder as options and
//! never written or logged; the URL is the only thing messages name.
//! Requests time out (5 s to connect, 30 s per request) and are retried
//! at most twice within 15 s, so an unreachable store costs seconds, not
//! the crate's default minutes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as StorePath;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    RetryConfig, UpdateVersion,
};

use crate::error::TeamError;

/// A member's object, under the prefix.
pub const MEMBER_OBJECT: &str = "endpoints.parquet";
/// The aggregate's object, under `team/`.
pub const TEAM_OBJECT: &str = "team_endpoints.parquet";
/// The aggregate's manifest, under `team/`.
pub const MANIFEST_OBJECT: &str = "manifest.json";

/// The environment variables a store may take options from: the
/// providers' own prefixes.
const ENV_PREFIXES: &[&str] = &["AWS_", "GOOGLE_", "AZURE_"];

/// An object read, with the version a conditional write can name.
#[derive(Debug)]
pub struct Fetched {
    /// The bytes.
    pub bytes: Bytes,
    /// Its version (e-tag), when the store gives one.
    pub version: UpdateVersion,
}

/// The team's store.
#[derive(Clone, Debug)]
pub struct TeamStore {
    url: String,
    inner: Arc<dyn ObjectStore>,
    prefix: StorePath,
}

impl TeamStore {
    /// Opens `url` (`s3://bucket/prefix`, `gs://…`, `az://container/prefix`,
    /// `file:///path`) with options from `env` (the process environment in
    /// devboy; tests hand theirs in). Nothing is contacted yet.
    pub fn open(
        url: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, TeamError> {
        crate::install_crypto();
        let store_error = |message: String| TeamError::Store {
            store: url.to_owned(),
            message,
        };
        let parsed = url::Url::parse(url).map_err(|e| store_error(format!("not a URL ({e})")))?;
        let options: Vec<(String, String)> = env
            .into_iter()
            .filter(|(k, _)| ENV_PREFIXES.iter().any(|p| k.starts_with(p)))
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        let client = ClientOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(30));
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: 2,
            retry_timeout: Duration::from_secs(15),
        };
        let bucket_prefix = || parsed.path().trim_matches('/').to_owned();
        // The three cloud builders share their setup: client options,
        // retries, the URL, then each option their config keys parse.
        macro_rules! cloud {
            ($builder:ty) => {{
                let mut b = <$builder>::new()
                    .with_client_options(client)
                    .with_retry(retry)
                    .with_url(url);
                for (k, v) in &options {
                    if let Ok(key) = k.parse() {
                        b = b.with_config(key, v);
                    }
                }
                let store = b.build().map_err(|e| store_error(short(&e)))?;
                (Arc::new(store) as Arc<dyn ObjectStore>, bucket_prefix())
            }};
        }
        let (inner, prefix): (Arc<dyn ObjectStore>, String) = match parsed.scheme() {
            "s3" => cloud!(object_store::aws::AmazonS3Builder),
            "gs" => cloud!(object_store::gcp::GoogleCloudStorageBuilder),
            "az" => cloud!(object_store::azure::MicrosoftAzureBuilder),
            "file" => {
                let root = parsed
                    .to_file_path()
                    .map_err(|()| store_error("not an absolute file path".into()))?;
                // The folder the store lives in must be there (an
                // unmounted share must not become a local folder); the
                // store's own folder is made in it, like a bucket prefix.
                if !root.is_dir() {
                    match root.parent() {
                        Some(parent) if parent.is_dir() => std::fs::create_dir(&root)
                            .or_else(|e| match e.kind() {
                                std::io::ErrorKind::AlreadyExists => Ok(()),
                                _ => Err(e),
                            })
                            .map_err(|e| {
                                store_error(format!("cannot create {} ({e})", root.display()))
                            })?,
                        _ => {
                            return Err(store_error(format!(
                                "the folder {} does not exist (is the share mounted?)",
                                root.parent().unwrap_or(&root).display()
                            )))
                        }
                    }
                }
                let store = object_store::local::LocalFileSystem::new_with_prefix(&root)
                    .map_err(|e| store_error(short(&e)))?;
                (Arc::new(store), String::new())
            }
            other => {
                return Err(store_error(format!(
                    "unsupported scheme {other}:// (s3, gs, az or file)"
                )))
            }
        };
        let prefix =
            StorePath::parse(&prefix).map_err(|e| store_error(format!("bad prefix ({e})")))?;
        Ok(Self {
            url: url.to_owned(),
            inner,
            prefix,
        })
    }

    /// The URL, as configured (it holds no credentials: those come from
    /// the environment).
    pub fn url(&self) -> &str {
        &self.url
    }

    fn at(&self, parts: &[&str]) -> StorePath {
        parts
            .iter()
            .fold(self.prefix.clone(), |p, part| p.clone().join(*part))
    }

    /// Where `member`'s object lives.
    pub fn member_path(&self, member: &str) -> StorePath {
        self.at(&["members", member, MEMBER_OBJECT])
    }

    /// Where the aggregate lives.
    pub fn team_path(&self) -> StorePath {
        self.at(&["team", TEAM_OBJECT])
    }

    /// Where the aggregate's manifest lives.
    pub fn manifest_path(&self) -> StorePath {
        self.at(&["team", MANIFEST_OBJECT])
    }

    /// The URL of `path`, for messages.
    pub fn describe(&self, path: &StorePath) -> String {
        let base = self.url.trim_end_matches('/');
        let relative = path
            .as_ref()
            .strip_prefix(self.prefix.as_ref())
            .unwrap_or(path.as_ref())
            .trim_start_matches('/');
        format!("{base}/{relative}")
    }

    fn error(&self, path: &StorePath, e: &object_store::Error) -> TeamError {
        TeamError::Store {
            store: self.describe(path),
            message: classify(e),
        }
    }

    /// Writes `member`'s object whole (replacing its previous one).
    pub async fn put_member(&self, member: &str, bytes: Bytes) -> Result<StorePath, TeamError> {
        let path = self.member_path(member);
        self.inner
            .put(&path, PutPayload::from_bytes(bytes))
            .await
            .map_err(|e| self.error(&path, &e))?;
        Ok(path)
    }

    /// Every member object: (member id, path), sorted by member.
    pub async fn members(&self) -> Result<Vec<(String, StorePath)>, TeamError> {
        let dir = self.at(&["members"]);
        let listed: Vec<_> = self
            .inner
            .list(Some(&dir))
            .try_collect()
            .await
            .map_err(|e| self.error(&dir, &e))?;
        let mut members: Vec<(String, StorePath)> = listed
            .into_iter()
            .filter_map(|meta| {
                let parts: Vec<_> = meta.location.parts().collect();
                let n = parts.len();
                (n >= 2 && parts[n - 1].as_ref() == MEMBER_OBJECT)
                    .then(|| (parts[n - 2].as_ref().to_owned(), meta.location.clone()))
            })
            .collect();
        members.sort();
        Ok(members)
    }

    /// The version of `path` a conditional write can name; `None` when
    /// there is no such object. Needs no read access to its bytes.
    pub async fn version(&self, path: &StorePath) -> Result<Option<UpdateVersion>, TeamError> {
        match self.inner.head(path).await {
            Ok(meta) => Ok(Some(UpdateVersion {
                e_tag: meta.e_tag,
                version: meta.version,
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error(path, &e)),
        }
    }

    /// Every object under the prefix, sorted.
    pub async fn objects(&self) -> Result<Vec<StorePath>, TeamError> {
        let mut all: Vec<StorePath> = self
            .inner
            .list(Some(&self.prefix))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await
            .map_err(|e| self.error(&self.prefix, &e))?;
        all.sort();
        Ok(all)
    }

    /// Reads `path`; `None` when there is no such object.
    pub async fn get(&self, path: &StorePath) -> Result<Option<Fetched>, TeamError> {
        match self.inner.get(path).await {
            Ok(result) => {
                let version = UpdateVersion {
                    e_tag: result.meta.e_tag.clone(),
                    version: result.meta.version.clone(),
                };
                let bytes = result.bytes().await.map_err(|e| self.error(path, &e))?;
                Ok(Some(Fetched { bytes, version }))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error(path, &e)),
        }
    }

    /// Writes `bytes` to `path` whole, only if the object is still as it
    /// was read (`expected`, or absent for `None`), where the store can
    /// check that; returns false when another writer came first. A store
    /// that cannot check (a file system with no compare-and-swap) takes a
    /// plain whole-object write.
    pub async fn put_if(
        &self,
        path: &StorePath,
        bytes: Bytes,
        expected: Option<&UpdateVersion>,
    ) -> Result<bool, TeamError> {
        let mode = match expected {
            Some(v) => PutMode::Update(v.clone()),
            None => PutMode::Create,
        };
        let payload = PutPayload::from_bytes(bytes.clone());
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match self.inner.put_opts(path, payload, options).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::Precondition { .. })
            | Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(object_store::Error::NotImplemented { .. }) => {
                self.inner
                    .put(path, PutPayload::from_bytes(bytes))
                    .await
                    .map_err(|e| self.error(path, &e))?;
                Ok(true)
            }
            Err(e) => Err(self.error(path, &e)),
        }
    }

    /// Writes `bytes` to `path` whole.
    pub async fn put(&self, path: &StorePath, bytes: Bytes) -> Result<(), TeamError> {
        self.inner
            .put(path, PutPayload::from_bytes(bytes))
            .await
            .map(|_| ())
            .map_err(|e| self.error(path, &e))
    }
}

/// What went wrong, in words a user can act on, then the store's own
/// words (without the response body).
pub fn classify(e: &object_store::Error) -> String {
    let text = short(e);
    let detail = text
        .split(" - Server returned")
        .next()
        .unwrap_or(&text)
        .trim()
        .to_owned();
    let status = text
        .split("non-2xx status code: ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .map(|code| format!(" (HTTP {})", code.trim()))
        .unwrap_or_default();
    let missing = ["NoSuchBucket", "ContainerNotFound", "bucket does not exist"]
        .iter()
        .any(|w| text.contains(w));
    let unreachable = [
        "error sending request",
        "Connection refused",
        "connection refused",
        "dns error",
        "timed out",
        "tcp connect",
    ]
    .iter()
    .any(|w| text.contains(w));
    let no_credentials = text.contains("169.254.169.254") || text.contains("metadata.google");
    let plain_http = text.contains("URL scheme is not allowed");
    match e {
        _ if missing => format!("the bucket or container does not exist{status}"),
        _ if no_credentials => "no credentials: set them in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, GOOGLE_SERVICE_ACCOUNT, or AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY; docs/team.md)".to_owned(),
        _ if plain_http => "the endpoint is plain http://: set AWS_ALLOW_HTTP=true (or AZURE_ALLOW_HTTP=true) to allow it".to_owned(),
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => format!(
            "access denied{status}: check the credentials in the environment (AWS_*, GOOGLE_*, AZURE_*)"
        ),
        object_store::Error::NotFound { .. } => {
            format!("not found{status}: does the bucket or container exist?")
        }
        _ if unreachable => format!("cannot reach the store ({detail})"),
        _ => format!("{detail}{status}"),
    }
}

/// An object_store error in one line, its source chain joined, without
/// the request details that can run to pages.
pub fn short(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    let line = text.replace('\n', " ");
    if line.chars().count() > 400 {
        let cut: String = line.chars().take(400).collect();
        format!("{cut}…")
    } else {
        line
    }
}
