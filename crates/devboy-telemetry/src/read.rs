//! Reading telemetry files back, the one reader of the format (the tuner
//! and the tests both read through it): every complete line is one
//! record; a last line without its newline is what a crash left behind and
//! is skipped, not an error. A line that is not a record this reader knows
//! is counted by why ([`Unread`]) and skipped: files are read whole, never
//! refused.

use std::borrow::Cow;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::event::{Event, SCHEMA_VERSION};
use crate::sink::{is_events_file, EVENTS_DIR};

/// The records of one events file.
#[derive(Debug, Default)]
pub struct FileEvents {
    /// The records of the complete lines that parsed, in file order.
    pub events: Vec<Event>,
    /// Complete lines that did not parse (written by something else, or a
    /// record of a schema this reader cannot read): all of them, whatever
    /// the [`Unread`] reason.
    pub unparsed: usize,
    /// Of [`unparsed`](Self::unparsed): records of a newer schema version.
    pub newer_version: usize,
    /// Of [`unparsed`](Self::unparsed): records of a kind this reader does
    /// not know.
    pub other_kind: usize,
    /// The file ended in a line without a newline (cut by a crash).
    pub partial_tail: bool,
}

/// Why a complete line was not read as an [`Event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unread {
    /// Not JSON, or a known record with a field missing or mistyped.
    Malformed,
    /// A record of a schema version newer than [`SCHEMA_VERSION`].
    NewerVersion,
    /// A `kind` this reader does not know.
    OtherKind,
}

/// Parses one line (without its newline) into a record, or says why not.
pub fn parse_line(line: &[u8]) -> Result<Event, Unread> {
    match parse_record(line) {
        Ok(event) if event.version() > SCHEMA_VERSION => Err(Unread::NewerVersion),
        Ok(event) => Ok(event),
        Err(_) => Err(why_unread(line)),
    }
}

/// The record of a line. The writer puts `kind` first, so a line that
/// starts with it is read straight into its record type; any other line
/// goes through the tagged enum, which buffers the whole line first (about
/// twice the work, for the same result).
fn parse_record(line: &[u8]) -> serde_json::Result<Event> {
    fn kind_first(line: &[u8], kind: &str) -> bool {
        line.strip_prefix(b"{\"kind\":\"")
            .and_then(|rest| rest.strip_prefix(kind.as_bytes()))
            .is_some_and(|rest| rest.starts_with(b"\","))
    }
    if kind_first(line, "result") {
        serde_json::from_slice(line).map(Event::Result)
    } else if kind_first(line, "session") {
        serde_json::from_slice(line).map(Event::Session)
    } else if kind_first(line, "speculation") {
        serde_json::from_slice(line).map(Event::Speculation)
    } else if kind_first(line, "retrieval") {
        serde_json::from_slice(line).map(Event::Retrieval)
    } else if kind_first(line, "expansion") {
        serde_json::from_slice(line).map(Event::Expansion)
    } else {
        serde_json::from_slice(line)
    }
}

/// The reason a line did not parse, from the two fields every record
/// starts with.
fn why_unread(line: &[u8]) -> Unread {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(default)]
        v: Option<u32>,
        #[serde(borrow, default)]
        kind: Option<Cow<'a, str>>,
    }
    let Ok(head) = serde_json::from_slice::<Head<'_>>(line) else {
        return Unread::Malformed;
    };
    if head.v.is_some_and(|v| v > SCHEMA_VERSION) {
        return Unread::NewerVersion;
    }
    match head.kind.as_deref() {
        Some(kind) if !Event::KINDS.contains(&kind) => Unread::OtherKind,
        _ => Unread::Malformed,
    }
}

/// The events files under `<telemetry_dir>/events/`, sorted by name (which
/// starts with the UTC time they were started).
pub fn events_files(telemetry_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let dir = telemetry_dir.join(EVENTS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if is_events_file(&path) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Reads one events file; see [`FileEvents`].
pub fn read_events_file(path: &Path) -> io::Result<FileEvents> {
    let bytes = std::fs::read(path)?;
    Ok(parse_events(&bytes))
}

/// Parses the bytes of an events file; see [`FileEvents`].
pub fn parse_events(bytes: &[u8]) -> FileEvents {
    let mut out = FileEvents::default();
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            out.partial_tail = true;
            break;
        };
        let line = &rest[..end];
        rest = &rest[end + 1..];
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line(line) {
            Ok(event) => out.events.push(event),
            Err(why) => {
                out.unparsed += 1;
                match why {
                    Unread::NewerVersion => out.newer_version += 1,
                    Unread::OtherKind => out.other_kind += 1,
                    Unread::Malformed => {}
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_last_line_is_reported_not_parsed() {
        let line = r#"{"kind":"session","v":1,"ts_ms":1,"session":"0000000000000001","started_ms":0,"ended_ms":1,"events":0,"results":1,"sample_rate":1.0,"tokens_baseline":0,"tokens_final":0,"dedup_saved":0,"encoder_saved":0,"compactions":0,"client":"other"}"#;
        let text = format!("{line}\n\nnot json\n{}", &line[..40]);
        let parsed = parse_events(text.as_bytes());
        assert_eq!(parsed.events.len(), 1);
        assert_eq!(parsed.unparsed, 1);
        assert!(parsed.partial_tail);
        let whole = parse_events(format!("{line}\n").as_bytes());
        assert!(!whole.partial_tail && whole.unparsed == 0 && whole.events.len() == 1);
    }

    #[test]
    fn unread_lines_are_counted_by_why() {
        let line = r#"{"kind":"session","v":1,"ts_ms":1,"session":"0000000000000001","started_ms":0,"ended_ms":1,"events":0,"results":1,"sample_rate":1.0,"tokens_baseline":0,"tokens_final":0,"dedup_saved":0,"encoder_saved":0,"compactions":0,"client":"other"}"#;
        let newer_whole = line.replace("\"v\":1", "\"v\":2");
        for (text, why) in [
            ("garbage", Unread::Malformed),
            (r#"{"kind":"result"}"#, Unread::Malformed),
            (r#"{"v":7,"kind":"result"}"#, Unread::NewerVersion),
            (&*newer_whole, Unread::NewerVersion),
            (r#"{"v":1,"kind":"hello","ts_ms":1}"#, Unread::OtherKind),
        ] {
            assert_eq!(parse_line(text.as_bytes()).err(), Some(why), "{text}");
        }
        assert!(parse_line(line.as_bytes()).is_ok());
        // `Event::KINDS` are the enum's own tags.
        let unknown = serde_json::from_str::<Event>(r#"{"kind":"x"}"#).unwrap_err();
        for kind in Event::KINDS {
            assert!(
                unknown.to_string().contains(&format!("`{kind}`")),
                "{unknown}"
            );
            let bare = format!(r#"{{"v":1,"kind":"{kind}"}}"#);
            // Known, so never "other kind" (a bare retrieval record is
            // even whole: all its fields have defaults).
            assert_ne!(parse_line(bare.as_bytes()).err(), Some(Unread::OtherKind));
        }
        let text = format!("garbage\n{newer_whole}\n{{\"v\":1,\"kind\":\"hello\"}}\n{line}\n");
        let parsed = parse_events(text.as_bytes());
        let counts = (parsed.unparsed, parsed.newer_version, parsed.other_kind);
        assert_eq!((counts, parsed.events.len()), ((3, 1, 1), 1));
    }
}
