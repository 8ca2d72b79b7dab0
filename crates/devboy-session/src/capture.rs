//! The capture of a session: what `devboy mcp --capture FILE` writes and
//! `devboy replay` reads back to reproduce the session exactly.
//!
//! One JSON object per line ([`CaptureRecord`], tagged by `kind`), in the
//! order the session saw them: a `session` line first (the id tag and
//! whether encoding was on), then `call` (a call about to be forwarded,
//! which may make the session forget), `result` (what the client would
//! have forwarded of a result, with the session clock), `compaction` and
//! `model`. A capture holds tool-result content and call arguments as they
//! were: it is as private as the session itself.

use std::io::Write;
use std::path::Path;

use devboy_core::pipeline_config::SideEffectClass;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::session::{Forwarded, ToolCall};

/// One line of a capture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CaptureRecord {
    /// The first line: how the session names what it shows, and whether
    /// it re-encodes (`devboy mcp --pipeline full`) or only deduplicates.
    Session {
        /// The session's id tag.
        tag: String,
        /// Encoding was on.
        encode: bool,
    },
    /// A call about to be forwarded upstream.
    Call(CapturedCall),
    /// A result the pipeline was given.
    Result {
        /// The call that produced it.
        #[serde(flatten)]
        call: CapturedCall,
        /// The session clock when it arrived, in milliseconds.
        at_ms: u64,
        /// What the client would have forwarded to the model.
        #[serde(flatten)]
        body: CapturedBody,
    },
    /// The model's context was compacted or cleared.
    Compaction,
    /// The model the session runs with became known or changed.
    Model {
        /// Its id, if known.
        model: Option<String>,
    },
}

/// The facts of one call, owned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapturedCall {
    /// The name the agent called.
    pub exposed: String,
    /// The upstream's configured name.
    pub upstream: String,
    /// The tool's name on the upstream.
    pub tool: String,
    /// The call's arguments.
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    /// What the tool's annotations say a call does
    /// ([`SideEffectClass::name`]).
    pub side_effect: String,
}

/// What the client forwards of one result, owned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapturedBody {
    /// One text block.
    Text(String),
    /// A structured value (forwarded as its compact serialization).
    Json(Value),
    /// Several text blocks, in order.
    Blocks(Vec<String>),
}

/// Why a capture could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// A line is not a capture record.
    #[error("line {line}: not a capture record: {source}")]
    Record {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        source: serde_json::Error,
    },
    /// The first record is not a `session` line.
    #[error("a capture starts with a \"session\" line")]
    NoSession,
    /// An unknown side-effect class.
    #[error("line {line}: unknown side_effect `{name}`")]
    SideEffect {
        /// 1-based line number.
        line: usize,
        /// The name found.
        name: String,
    },
}

impl CapturedCall {
    /// The owned copy of `call`'s facts.
    pub fn of(call: &ToolCall<'_>) -> Self {
        Self {
            exposed: call.exposed.to_owned(),
            upstream: call.upstream.to_owned(),
            tool: call.tool.to_owned(),
            arguments: call.arguments.cloned(),
            side_effect: call.side_effect.name().to_owned(),
        }
    }

    /// The call these facts describe (no client name: telemetry is not
    /// replayed).
    pub fn as_call(&self) -> Option<ToolCall<'_>> {
        Some(ToolCall {
            exposed: &self.exposed,
            upstream: &self.upstream,
            tool: &self.tool,
            arguments: self.arguments.as_ref(),
            side_effect: side_effect_named(&self.side_effect)?,
            client: None,
        })
    }
}

impl CapturedBody {
    /// The owned copy of what was forwarded.
    pub fn of(forwarded: &Forwarded<'_>) -> Self {
        match forwarded {
            Forwarded::Single {
                json: Some(value), ..
            } => CapturedBody::Json((*value).clone()),
            Forwarded::Single { text, json: None } => CapturedBody::Text((*text).to_owned()),
            Forwarded::Blocks(blocks) => {
                CapturedBody::Blocks(blocks.iter().map(|b| (*b).to_owned()).collect())
            }
        }
    }
}

fn side_effect_named(name: &str) -> Option<SideEffectClass> {
    [
        SideEffectClass::Pure,
        SideEffectClass::ReadOnly,
        SideEffectClass::Mutating,
        SideEffectClass::Destructive,
        SideEffectClass::Unknown,
    ]
    .into_iter()
    .find(|c| c.name() == name)
}

/// Whether `text` (a `.jsonl` file's) is a capture: its first record is a
/// `session` line.
pub fn is_capture(text: &str) -> bool {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .is_some_and(|v| v["kind"] == "session")
}

/// The records of a capture, checked: a `session` line first, every call
/// with a known side-effect class.
pub fn read(text: &str) -> Result<Vec<CaptureRecord>, CaptureError> {
    let mut records = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: CaptureRecord = serde_json::from_str(line).map_err(|source| {
            CaptureError::Record {
                line: n + 1,
                source,
            }
        })?;
        if records.is_empty() && !matches!(record, CaptureRecord::Session { .. }) {
            return Err(CaptureError::NoSession);
        }
        if let CaptureRecord::Call(call) | CaptureRecord::Result { call, .. } = &record {
            if side_effect_named(&call.side_effect).is_none() {
                return Err(CaptureError::SideEffect {
                    line: n + 1,
                    name: call.side_effect.clone(),
                });
            }
        }
        records.push(record);
    }
    if records.is_empty() {
        return Err(CaptureError::NoSession);
    }
    Ok(records)
}

/// Appends records to a capture file, one line each, written through so a
/// reader sees every record already made. A write that fails stops the
/// capture (logged once); the session goes on.
#[derive(Debug)]
pub struct CaptureWriter {
    file: Option<std::fs::File>,
}

impl CaptureWriter {
    /// A writer to `path`, created or truncated.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            file: Some(std::fs::File::create(path)?),
        })
    }

    /// Writes `record` as one line.
    pub fn write(&mut self, record: &CaptureRecord) {
        let Some(file) = &mut self.file else {
            return;
        };
        let written = serde_json::to_vec(record)
            .map_err(std::io::Error::from)
            .and_then(|mut line| {
                line.push(b'\n');
                file.write_all(&line)
            });
        if let Err(error) = written {
            tracing::warn!(%error, "writing the capture failed; capture stopped");
            self.file = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_read_back_as_written() {
        let args = json!({"path": "/a"});
        let call = ToolCall {
            exposed: "fs__read",
            upstream: "fs",
            tool: "read",
            arguments: args.as_object(),
            side_effect: SideEffectClass::ReadOnly,
            client: Some("claude-code"),
        };
        let value = json!({"b": 1, "a": [1.5, "x"]});
        let blocks = ["one", "two"];
        let records = vec![
            CaptureRecord::Session {
                tag: "tagfix".into(),
                encode: true,
            },
            CaptureRecord::Call(CapturedCall::of(&call)),
            CaptureRecord::Result {
                call: CapturedCall::of(&call),
                at_ms: 12,
                body: CapturedBody::of(&Forwarded::Single {
                    text: &value.to_string(),
                    json: Some(&value),
                }),
            },
            CaptureRecord::Result {
                call: CapturedCall::of(&call),
                at_ms: 13,
                body: CapturedBody::of(&Forwarded::Blocks(&blocks)),
            },
            CaptureRecord::Compaction,
            CaptureRecord::Model {
                model: Some("claude-x".into()),
            },
        ];
        let text: String = records
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        assert!(is_capture(&text));
        assert_eq!(read(&text).unwrap(), records);
        let CaptureRecord::Result { body, .. } = &records[2] else {
            unreachable!()
        };
        // Key order survives, so the forwarded text is the same text.
        let CapturedBody::Json(back) = body else {
            unreachable!()
        };
        assert_eq!(back.to_string(), value.to_string());
        assert!(!is_capture("{\"tool\": \"t\", \"body\": \"x\"}\n"));
        assert!(matches!(
            read("{\"kind\": \"compaction\"}\n"),
            Err(CaptureError::NoSession)
        ));
    }
}
