//! Reading telemetry files back, as the tuner and the tests do: every
//! complete line is one record; a last line without its newline is what a
//! crash left behind and is skipped, not an error.

use std::io;
use std::path::{Path, PathBuf};

use crate::event::Event;
use crate::sink::{is_events_file, EVENTS_DIR};

/// The records of one events file.
#[derive(Debug, Default)]
pub struct FileEvents {
    /// The records of the complete lines that parsed, in file order.
    pub events: Vec<Event>,
    /// Complete lines that did not parse (written by something else, or a
    /// record of a schema this reader cannot read).
    pub unparsed: usize,
    /// The file ended in a line without a newline (cut by a crash).
    pub partial_tail: bool,
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
        match serde_json::from_slice::<Event>(line) {
            Ok(event) => out.events.push(event),
            Err(_) => out.unparsed += 1,
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
}
