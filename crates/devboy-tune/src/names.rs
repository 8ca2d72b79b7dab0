//! Endpoint hashes back to exposed tool names, on the user's own machine.
//!
//! Telemetry holds `h(exposed name)` only (invariant 6 in docs/invariants.md). `devboy mcp`
//! keeps `<config dir>/endpoint-names.json` (`{"<hash>": "<name>"}`,
//! [`devboy_core::paths::endpoint_names_file`]) beside the config, outside
//! the telemetry directory; the tuner reads it to write config keys people
//! can read, and never writes a hash as a key.

use std::collections::HashMap;
use std::path::Path;

use crate::event::id64;

/// Hash → exposed tool name, as read from the names map for reports and
/// config keys (the map's writer is `devboy_telemetry::EndpointNames`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExposedNames {
    names: HashMap<u64, String>,
    /// Where they were read from, and what went wrong if the file was
    /// there but unusable.
    pub note: Option<String>,
}

impl ExposedNames {
    /// Reads `path`. A missing file gives no names; an unreadable or
    /// invalid one gives no names and a note (the tuner still runs, it
    /// just cannot write endpoint keys).
    pub fn load(path: &Path) -> Self {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Self {
                    note: Some(format!(
                        "{} does not exist yet (devboy mcp writes it)",
                        path.display()
                    )),
                    ..Self::default()
                }
            }
            Err(e) => {
                return Self {
                    note: Some(format!("cannot read {}: {e}", path.display())),
                    ..Self::default()
                }
            }
        };
        match serde_json::from_str::<HashMap<String, String>>(&text) {
            Ok(map) => Self::from_pairs(map),
            Err(e) => Self {
                note: Some(format!(
                    "{}: expected {{\"<hash>\": \"<name>\"}} ({e})",
                    path.display()
                )),
                ..Self::default()
            },
        }
    }

    /// From `(hash text, name)` pairs.
    pub fn from_pairs<K: AsRef<str>>(pairs: impl IntoIterator<Item = (K, String)>) -> Self {
        let names = pairs
            .into_iter()
            .map(|(k, v)| (id64(&k.as_ref().to_ascii_lowercase()), v))
            .collect();
        Self { names, note: None }
    }

    /// The exposed name of `tool`.
    pub fn get(&self, tool: u64) -> Option<&str> {
        self.names.get(&tool).map(String::as_str)
    }

    /// Adds a name for an endpoint that has no hash here (a team or
    /// provider row, [`crate::fingerprint::foreign_id`]).
    pub fn insert(&mut self, tool: u64, name: &str) {
        self.names.insert(tool, name.to_owned());
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_maps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME);
        std::fs::write(&path, r#"{"00000000000000AB": "gh__list_issues"}"#).unwrap();
        let names = ExposedNames::load(&path);
        assert_eq!(names.get(0xab), Some("gh__list_issues"));
        assert!(names.note.is_none());
        std::fs::write(&path, "[1]").unwrap();
        let bad = ExposedNames::load(&path);
        assert!(bad.is_empty());
        assert!(bad.note.unwrap().contains("expected"));
        let missing = ExposedNames::load(&dir.path().join("nope.json"));
        assert!(missing.is_empty() && missing.note.is_some());
    }
}
