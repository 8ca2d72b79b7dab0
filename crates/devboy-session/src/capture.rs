//! The capture of a session: what `devboy mcp --capture FILE` writes and
//! `devboy replay` reads back to reproduce the session exactly.
//!
//! One JSON object per line ([`CaptureRecord`], tagged by `kind`), in the
//! order the session saw them: a `session` line first (the id tag and
//! whether encoding was on), then `call` (a call about to be forwarded,
//! which may make the session forget), `result` (what the client would
//! have forwarded of a result, with the session clock), `compaction`,
//! `model` and `expansion` (what `devboy_expand` delivered). A capture holds tool-result content and call arguments as they
//! were: it is as private as the session itself.

use std::io::Write;
use std::path::Path;

use std::sync::Arc;

use devboy_core::call::{CallRoute, ResolvedCall, ToolClassFacts};
use devboy_core::pipeline_config::{PipelineConfig, SideEffectClass};
use devboy_pipeline::result_pipeline::Processed;
use devboy_pipeline::InvalidSessionTag;
use devboy_pipeline::{IdAllocator, SessionTag, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::pipeline_session::{Forwarded, PipelineSession};

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
    /// `devboy_expand` delivered `text` for `id`.
    Expansion {
        /// The id as the model gave it.
        id: String,
        /// It asked for the lines or items a hint named, not the whole.
        #[serde(default)]
        ranged: bool,
        /// What it was sent.
        text: String,
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
    /// The call's effective side-effect class ([`SideEffectClass::name`];
    /// captures written before it was resolved in one place hold what the
    /// annotations said, which the replay resolves again).
    pub side_effect: String,
    /// A built-in tool answered ([`ResolvedCall::is_builtin`]); absent in
    /// captures from before it was recorded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub builtin: bool,
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
    /// What a capture keeps of `call`.
    pub fn of(call: &ResolvedCall) -> Self {
        Self {
            exposed: call.exposed.clone(),
            upstream: call.upstream().to_owned(),
            tool: call.tool().to_owned(),
            arguments: call.arguments.clone(),
            side_effect: call.side_effect.class.name().to_owned(),
            builtin: call.is_builtin(),
        }
    }

    /// The call these facts describe, its class resolved under `config`
    /// as the live session resolved it (no client name: telemetry is not
    /// replayed).
    pub fn as_call(&self, config: &PipelineConfig) -> Option<ResolvedCall> {
        let recorded = SideEffectClass::named(&self.side_effect)?;
        let side_effect = devboy_core::call::side_effect(
            config,
            &self.exposed,
            ToolClassFacts {
                annotated: recorded,
                shipped: None,
                name: &self.tool,
            },
        );
        let route = if self.builtin {
            CallRoute::Builtin
        } else {
            CallRoute::Upstream {
                upstream: self.upstream.clone(),
                tool: self.tool.clone(),
            }
        };
        Some(ResolvedCall::new(
            self.exposed.clone(),
            route,
            self.arguments.clone(),
            side_effect,
        ))
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

impl CapturedBody {
    /// The text the model would have been shown: the text block, the value
    /// serialized, or the blocks as one JSON array (what dedup sees).
    pub fn text(&self) -> String {
        match self {
            CapturedBody::Text(text) => text.clone(),
            CapturedBody::Json(value) => value.to_string(),
            CapturedBody::Blocks(blocks) => Value::from(blocks.clone()).to_string(),
        }
    }
}

/// Replays `records` (a capture, as [`read`] returns it) through a fresh
/// session following `config`, exactly as the live session ran: calling
/// `each` with every result and what the session made of it (`None`:
/// nothing applied). Returns the session, for its totals and report.
pub fn replay(
    config: Arc<PipelineConfig>,
    records: &[CaptureRecord],
    mut each: impl FnMut(&CapturedCall, &CapturedBody, Option<Processed>),
) -> Result<PipelineSession, ReplayError> {
    let Some(CaptureRecord::Session { tag, encode }) = records.first() else {
        return Err(ReplayError::Capture(CaptureError::NoSession));
    };
    let tag = SessionTag::new(tag)?;
    let session = PipelineSession::new(config.clone(), *encode, IdAllocator::new(tag));
    for record in &records[1..] {
        match record {
            CaptureRecord::Session { .. } => return Err(ReplayError::SecondSession),
            CaptureRecord::Call(call) => {
                if let Some(facts) = call.as_call(&config) {
                    session.forget_for(&facts);
                }
            }
            CaptureRecord::Result { call, at_ms, body } => {
                let Some(facts) = call.as_call(&config) else {
                    continue;
                };
                let text = body.text();
                let blocks: Vec<&str> = match body {
                    CapturedBody::Blocks(blocks) => blocks.iter().map(String::as_str).collect(),
                    _ => Vec::new(),
                };
                let forwarded = match body {
                    CapturedBody::Text(_) => Forwarded::Single {
                        text: &text,
                        json: None,
                    },
                    CapturedBody::Json(value) => Forwarded::Single {
                        text: &text,
                        json: Some(value),
                    },
                    CapturedBody::Blocks(_) => Forwarded::Blocks(&blocks),
                };
                let processed = session.process(
                    &facts,
                    &forwarded,
                    Timestamp::from_millis(*at_ms),
                    &devboy_pipeline::Handoff::new(),
                );
                each(call, body, processed);
            }
            CaptureRecord::Compaction => {
                session.compaction();
            }
            CaptureRecord::Model { model } => session.set_model(model.clone()),
            CaptureRecord::Expansion { id, ranged, text } => {
                // The lookup, as the live session made it: the store's
                // counters and its recency are the live store's.
                let _ = session.expand(id, None, true, None);
                session.record_expansion(id, *ranged, text);
            }
        }
    }
    Ok(session)
}

/// Why a capture could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// It is not a well-formed capture.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// The session line names no valid tag.
    #[error(transparent)]
    Tag(#[from] InvalidSessionTag),
    /// A second `session` line: two sessions in one file.
    #[error("a second \"session\" line: a capture holds one session")]
    SecondSession,
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
        let record: CaptureRecord =
            serde_json::from_str(line).map_err(|source| CaptureError::Record {
                line: n + 1,
                source,
            })?;
        if records.is_empty() && !matches!(record, CaptureRecord::Session { .. }) {
            return Err(CaptureError::NoSession);
        }
        if let CaptureRecord::Call(call) | CaptureRecord::Result { call, .. } = &record {
            if SideEffectClass::named(&call.side_effect).is_none() {
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
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        // It holds the session's results and arguments: the owner's only.
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        Ok(Self {
            file: Some(options.open(path)?),
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
    use devboy_core::call::SideEffect;
    use serde_json::json;

    fn fs_call(exposed: &str, class: SideEffectClass, args: &Value) -> ResolvedCall {
        ResolvedCall::new(
            exposed,
            CallRoute::Upstream {
                upstream: "fs".into(),
                tool: exposed.into(),
            },
            args.as_object().cloned(),
            SideEffect::stated(class),
        )
    }

    #[test]
    fn records_read_back_as_written() {
        let args = json!({"path": "/a"});
        let call = ResolvedCall::new(
            "fs__read",
            CallRoute::Upstream {
                upstream: "fs".into(),
                tool: "read".into(),
            },
            args.as_object().cloned(),
            SideEffect::stated(SideEffectClass::ReadOnly),
        )
        .shown_to(false, Some("claude-code".into()));
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
            CaptureRecord::Expansion {
                id: "tagfix1".into(),
                ranged: true,
                text: "lines 40-80".into(),
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

    /// The same as the integration test through the binary, with what the
    /// test server cannot send: several text blocks, a call that forgets
    /// by path, a model change; and an id expanded.
    #[test]
    fn a_session_replayed_from_its_capture_ends_in_the_same_state() {
        let dir = std::env::temp_dir().join(format!("devboy-capture-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("session.jsonl");
        let config = Arc::new(PipelineConfig::embedded_default());
        let live = PipelineSession::new(config.clone(), true, crate::process_ids())
            .with_capture(CaptureWriter::create(&path).unwrap());
        let read_args = json!({"path": "/p/a.txt"});
        let read = fs_call("fs__read", SideEffectClass::ReadOnly, &read_args);
        let write = fs_call("fs__write", SideEffectClass::Unknown, &read_args);
        let big = "0123456789".repeat(100);
        let blocks = [big.as_str(), "and more"];
        let rows: Vec<Value> = (0..60)
            .map(|i| json!({"id": i, "name": format!("n{i}"), "done": i % 3 == 0}))
            .collect();
        let rows = Value::from(rows);
        let rows_text = rows.to_string();
        let list = Forwarded::Single {
            text: &rows_text,
            json: Some(&rows),
        };
        let text = Forwarded::Single {
            text: &big,
            json: None,
        };
        let mut at = 0;
        let mut step = |forwarded: &Forwarded<'_>, call: &ResolvedCall| {
            at += 700;
            live.record_call(call);
            live.forget_for(call);
            live.process(
                call,
                forwarded,
                Timestamp::from_millis(at),
                &devboy_pipeline::Handoff::new(),
            )
        };
        step(&text, &read);
        step(&text, &read);
        step(&Forwarded::Blocks(&blocks), &read);
        step(&Forwarded::Blocks(&blocks), &read);
        step(&list, &read);
        step(&list, &read);
        step(
            &Forwarded::Single {
                text: "ok",
                json: None,
            },
            &write,
        );
        step(&text, &read);
        let first = format!("{}1", live.tag());
        let expanded = live.expand(&first, None, false, None).unwrap();
        live.record_expansion(&first, false, &expanded);
        live.compaction();
        live.set_model(Some("gpt-4-0613".into()));
        step(&list, &read);
        let report = live.report();
        assert_eq!(report["references"], 3, "{report:#}");
        assert_eq!(report["session"]["compactions"], 1, "{report:#}");
        assert_eq!(report["expanded"]["calls"], 1, "{report:#}");

        let records = read_records(&path);
        let mut shown = 0;
        let again = replay(config, &records, |_, _, processed| {
            shown += usize::from(processed.is_some());
        })
        .unwrap();
        assert_eq!(shown, 9);
        assert_eq!(again.report(), report);
        assert_eq!(again.tag(), live.tag());
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn read_records(path: &Path) -> Vec<CaptureRecord> {
        read(&std::fs::read_to_string(path).unwrap()).unwrap()
    }
}
