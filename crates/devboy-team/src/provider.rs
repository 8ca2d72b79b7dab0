//! Provider fingerprints: a JSON document an MCP server's operator
//! publishes (`GET /mcp/fingerprints/v1`, docs/team.md), read from a URL or
//! a file, and written by `devboy tune publish`. The schema is in
//! docs/team.md.

use std::time::Duration;

use devboy_core::config::team::{ProviderConfig, ProviderSource};
use devboy_tune::fingerprint::{Fingerprint, FINGERPRINT_SCHEMA_VERSION};
use serde::{Deserialize, Serialize};

use crate::error::TeamError;

/// The `format` of a provider document.
pub const PROVIDER_FORMAT: &str = "devboy-fingerprints";
/// The largest document read (a server with thousands of tools fits).
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// A provider's document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProviderDocument {
    /// Always [`PROVIDER_FORMAT`].
    pub format: String,
    /// The fingerprint schema version.
    pub schema_version: u32,
    /// The server the tools belong to (informational).
    #[serde(default)]
    pub server: String,
    /// When it was generated (`YYYY-MM-DD`).
    #[serde(default)]
    pub generated: String,
    /// One row per tool; `endpoint_class` is the tool's own name.
    pub endpoints: Vec<Fingerprint>,
}

/// Reads `provider`'s document and names its rows as devboy exposes that
/// server's tools: `<prefix>__<endpoint_class>`.
pub async fn load(provider: &ProviderConfig, prefix: &str) -> Result<Vec<Fingerprint>, TeamError> {
    let name = provider.source.to_string();
    let fail = |message: String| TeamError::Provider {
        source_name: name.clone(),
        message,
    };
    let bytes = match &provider.source {
        ProviderSource::File(path) => std::fs::read(path).map_err(|e| fail(e.to_string()))?,
        ProviderSource::Url(url) => fetch(url).await.map_err(fail)?,
    };
    let document: ProviderDocument = serde_json::from_slice(&bytes)
        .map_err(|e| fail(format!("not a fingerprint document ({e})")))?;
    if document.format != PROVIDER_FORMAT {
        return Err(fail(format!(
            "format is {:?}, expected {PROVIDER_FORMAT:?}",
            document.format
        )));
    }
    if document.schema_version > FINGERPRINT_SCHEMA_VERSION {
        return Err(fail(format!(
            "schema version {} is newer than this devboy reads ({FINGERPRINT_SCHEMA_VERSION}); skipped",
            document.schema_version
        )));
    }
    Ok(document
        .endpoints
        .into_iter()
        .filter(|r| r.calls > 0 && !r.endpoint.is_empty())
        .map(|r| Fingerprint {
            endpoint: format!("{prefix}__{}", r.endpoint),
            members: r.members.max(1),
            ..r
        })
        .collect())
}

async fn fetch(url: &str) -> Result<Vec<u8>, String> {
    crate::install_crypto();
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(20))
        .build()
        .map_err(|e| e.to_string())?;
    let mut response = client
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| crate::store::short(&e))?;
    if !response.status().is_success() {
        return Err(format!("HTTP {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| crate::store::short(&e))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("larger than {} MiB", MAX_DOCUMENT_BYTES >> 20));
        }
    }
    Ok(body)
}

/// The document `devboy tune publish` writes: `rows` of the server whose
/// tools carry `prefix`, with the prefix taken off.
pub fn document(
    rows: &[Fingerprint],
    server: &str,
    prefix: &str,
    generated: &str,
) -> ProviderDocument {
    let strip = format!("{prefix}__");
    ProviderDocument {
        format: PROVIDER_FORMAT.to_owned(),
        schema_version: FINGERPRINT_SCHEMA_VERSION,
        server: server.to_owned(),
        generated: generated.to_owned(),
        endpoints: rows
            .iter()
            .filter_map(|r| {
                r.endpoint.strip_prefix(&strip).map(|tool| Fingerprint {
                    endpoint: tool.to_owned(),
                    ..r.clone()
                })
            })
            .collect(),
    }
}
