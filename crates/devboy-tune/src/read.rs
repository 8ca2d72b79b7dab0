//! Reading telemetry files into one [`EventTable`].
//!
//! Each file is read by `devboy_telemetry`'s reader ([`read_events_file`],
//! the one parser of the format) and its records compacted into the table
//! in order. Files are read one after another in file-name order. Events
//! of one devboy process go to its own files
//! (`events-YYYYMMDD-HHMMSS-PID.jsonl`, rotated by size and age), so name
//! order plus line order is each session's recorded order, which the
//! sequence analyses rely on.
//!
//! One thread is enough: a heavy user's year (two million events, 1.2 GB)
//! is read and analysed in a few seconds (`examples/million.rs`).
//!
//! Nothing in a file's content can make the read fail: a line that is not
//! a record of schema version 1 is counted (malformed, unsupported
//! version, other kind) and skipped, and so is a last line a crash cut. A
//! file that cannot be opened is reported and skipped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use devboy_telemetry::{read_events_file, Event};

use crate::event::{
    ExpansionRecord, Record, RetrievalRecord, SessionRecord, SpeculationRecord, Vocabulary,
};

/// What to read.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// A directory of `*.jsonl` files, or one file.
    pub input: PathBuf,
    /// Events before this Unix millisecond are skipped (0: none).
    pub since_ms: u64,
}

/// Counts of what was read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadStats {
    /// Files read.
    pub files: usize,
    /// Files not opened because their last write is before the window.
    pub files_old: usize,
    /// Files that could not be read, with why.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Bytes read.
    pub bytes: u64,
    /// Result events taken.
    pub results: u64,
    /// Session summaries taken.
    pub sessions: u64,
    /// Speculation events taken.
    pub speculation: u64,
    /// `find_files` queries taken.
    pub retrieval: u64,
    /// `devboy_expand` deliveries taken.
    pub expansions: u64,
    /// `devboy_run` scripts taken.
    pub code_runs: u64,
    /// Lines that are not JSON or lack a required field, and last lines
    /// cut by a crash.
    pub malformed: u64,
    /// Lines of a newer schema version.
    pub unsupported: u64,
    /// Lines of a kind the tuner does not use.
    pub other_kinds: u64,
    /// Events before the window.
    pub old: u64,
}

/// Every result event in the window, in recorded order per session, with
/// the session summaries.
#[derive(Clone, Debug, Default)]
pub struct EventTable {
    /// Result events.
    pub records: Vec<Record>,
    /// The names records index into.
    pub vocab: Vocabulary,
    /// Session summaries by session hash.
    pub sessions: HashMap<u64, SessionRecord>,
    /// Speculation events, in recorded order.
    pub speculation: Vec<SpeculationRecord>,
    /// `find_files` queries.
    pub retrieval: Vec<RetrievalRecord>,
    /// `devboy_expand` deliveries, in recorded order: no result, but part
    /// of what the model received.
    pub expansions: Vec<ExpansionRecord>,
    /// `devboy_run` scripts, in recorded order.
    pub code_runs: Vec<devboy_telemetry::CodeRunRecord>,
    /// What was read and skipped.
    pub stats: ReadStats,
}

/// The `*.jsonl` files of `input` (or `input` itself), sorted by name. A
/// directory without any that has an `events/` directory is the telemetry
/// directory given for its events folder, and is read as that.
pub fn event_files(input: &Path) -> std::io::Result<Vec<PathBuf>> {
    if input.is_file() {
        return Ok(vec![input.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(input)? {
        let path = entry?.path();
        if path.is_file() && path.extension().is_some_and(|e| e == "jsonl") {
            files.push(path);
        }
    }
    let events = input.join("events");
    if files.is_empty() && events.is_dir() {
        return event_files(&events);
    }
    files.sort();
    Ok(files)
}

/// Reads every event file of `options.input`. A missing directory is an
/// empty table (no telemetry yet), not an error.
pub fn read_events(options: &ReadOptions) -> std::io::Result<EventTable> {
    let files = match event_files(&options.input) {
        Ok(files) => files,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut table = EventTable::default();
    for file in files {
        let meta = std::fs::metadata(&file);
        // A file last written before the window holds no event inside it.
        let modified_ms = meta
            .as_ref()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64);
        if modified_ms.is_some_and(|m| m < options.since_ms) {
            table.stats.files_old += 1;
            continue;
        }
        let read = match read_events_file(&file) {
            Ok(read) => read,
            Err(e) => {
                table.stats.unreadable.push((file, e.to_string()));
                continue;
            }
        };
        let stats = &mut table.stats;
        stats.files += 1;
        stats.bytes += meta.map_or(0, |m| m.len());
        stats.unsupported += read.newer_version as u64;
        stats.other_kinds += read.other_kind as u64;
        stats.malformed += (read.unparsed - read.newer_version - read.other_kind) as u64
            + u64::from(read.partial_tail);
        table.records.reserve(read.events.len());
        for event in read.events {
            table.take(event, options.since_ms);
        }
    }
    Ok(table)
}

impl EventTable {
    /// Adds one record, unless it is older than `since_ms`.
    fn take(&mut self, event: Event, since_ms: u64) {
        let stats = &mut self.stats;
        if event.ts_ms() < since_ms {
            stats.old += 1;
            return;
        }
        match event {
            Event::Result(r) => {
                stats.results += 1;
                self.records.push(Record::of(&r, &mut self.vocab));
            }
            Event::Session(s) => {
                stats.sessions += 1;
                self.sessions.insert(s.session.0, SessionRecord::of(s));
            }
            Event::Speculation(s) => {
                stats.speculation += 1;
                self.speculation.push(SpeculationRecord::of(&s));
            }
            Event::Retrieval(r) => {
                stats.retrieval += 1;
                self.retrieval.push(RetrievalRecord::of(&r));
            }
            Event::Expansion(x) => {
                stats.expansions += 1;
                self.expansions
                    .push(ExpansionRecord::of(&x, &mut self.vocab));
            }
            Event::CodeRun(c) => {
                stats.code_runs += 1;
                self.code_runs.push(c);
            }
        }
    }

    /// The window start for "the last `days` days" before `now_ms`.
    pub fn since(now_ms: u64, days: u32) -> u64 {
        now_ms.saturating_sub(Duration::from_secs(u64::from(days) * 86_400).as_millis() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(session: &str, tool: &str, ts: u64, shape: &str) -> String {
        format!(
            r#"{{"v":1,"kind":"result","ts_ms":{ts},"session":"{session}","call":"0000000000000001","tool":"{tool}","upstream":"0000000000000002","endpoint_class":"get","response_chars":100,"shape":"{shape}","inner_formats":["{shape}_inner"],"fingerprint":"00000000000000000000000000000001","path_hashes":[],"dedup":"miss","layer":"L3","action":"unchanged","format":null,"template":null,"tokenizer":"o200k_base","tokens_baseline":10,"tokens_final":10,"dedup_saved":0,"encoder_saved":0,"elided":false,"context_partition":0,"is_error":false,"prefetched":null,"prefetch_hit":null}}"#
        )
    }

    #[test]
    fn the_telemetry_directory_is_read_as_its_events_folder() {
        let dir = std::env::temp_dir().join(format!("devboy-tune-events-{}", std::process::id()));
        let events = dir.join("events");
        std::fs::create_dir_all(&events).unwrap();
        std::fs::write(events.join("a.jsonl"), "").unwrap();
        std::fs::write(dir.join("tune-summary.json"), "{}").unwrap();
        let files = event_files(&dir).unwrap();
        assert_eq!(files, vec![events.join("a.jsonl")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reads_files_in_order_and_skips_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let a = [
            result("000000000000000a", "000000000000000b", 1000, "prose"),
            "garbage".to_owned(),
            String::new(),
            "{\"kind\":\"result\"}".to_owned(),
            r#"{"v":7,"kind":"result"}"#.to_owned(),
            r#"{"v":1,"kind":"hello","ts_ms":1,"session":"x"}"#.to_owned(),
            result("000000000000000a", "000000000000000b", 10, "prose"),
        ]
        .join("\n")
            + "\n";
        std::fs::write(dir.path().join("events-1.jsonl"), a).unwrap();
        // Truncated last line, as after kill -9.
        let b = format!(
            "{}\n{}",
            result(
                "000000000000000a",
                "000000000000000c",
                2000,
                "markdown_table"
            ),
            &result("000000000000000a", "000000000000000c", 3000, "x")[..40]
        );
        std::fs::write(dir.path().join("events-2.jsonl"), b).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let table = read_events(&ReadOptions {
            input: dir.path().to_path_buf(),
            since_ms: 100,
        })
        .unwrap();
        let s = &table.stats;
        assert_eq!(s.files, 2);
        assert_eq!(s.results, 2);
        assert_eq!(s.malformed, 3, "{s:?}");
        assert_eq!(s.unsupported, 1);
        assert_eq!(s.other_kinds, 1);
        assert_eq!(s.old, 1);
        assert_eq!(table.records[0].ts_ms, 1000);
        assert_eq!(table.records[1].ts_ms, 2000);
        // Names were remapped into one vocabulary.
        let v = &table.vocab;
        assert_eq!(v.shapes.get(table.records[0].shape), Some("prose"));
        assert_eq!(v.shapes.get(table.records[1].shape), Some("markdown_table"));
        let bit = v.inner.find("markdown_table_inner").unwrap();
        assert_eq!(table.records[1].inner, 1 << bit);
    }

    /// What `devboy_telemetry` writes through its real recorder and sink,
    /// the tuner reads back, every field compared. Both sides' records are
    /// destructured without `..`, so a field added to either does not
    /// compile here until this test says what the tuner makes of it.
    #[test]
    fn what_telemetry_writes_the_tuner_reads_field_by_field() {
        use devboy_telemetry::{
            CallFacts, Event, Hash128, Hash64, JsonlSink, Outcome, ResultEvent, ResultLayer,
            SessionSummary, SinkLimits, Telemetry, TelemetryOptions,
        };

        use crate::event::{ClientKind, DedupOutcome};
        use crate::names::ExposedNames;

        let dir = tempfile::tempdir().unwrap();
        let names_file = dir
            .path()
            .join("config")
            .join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME);

        // The recorder as a `devboy mcp` session runs it, sampling.
        let telemetry = Telemetry::start(TelemetryOptions {
            names_file: Some(names_file.clone()),
            sample_rate: 0.75,
            session_id: Some("contract-session".into()),
            ..TelemetryOptions::new(dir.path().to_path_buf(), "contract_tokenizer")
        });
        assert!(telemetry.is_active());
        telemetry.set_client(Some("claude-code"));
        telemetry.compaction();
        telemetry.compaction();
        telemetry.tools_listed(40, 3900, std::time::Instant::now());
        telemetry.tools_listed(41, 4012, std::time::Instant::now());
        let paths = ["src/lib.rs".to_owned()];
        let mut kept = 0;
        for i in 0..64u64 {
            let outcome = Outcome {
                dedup: [DedupOutcome::Hit, DedupOutcome::Near, DedupOutcome::Off][i as usize % 3],
                layer: ResultLayer::Template,
                action: "encoded",
                shape: Some("markdown_table"),
                inner_formats: vec!["url", "uuid"],
                format: Some("md_tables_csv"),
                template: Some("gh_issues"),
                tokens_baseline: 900 + i,
                tokens_final: 300 + i,
                dedup_saved: -7 - i as i64,
                encoder_saved: 607 + i as i64,
                elided: true,
                context_partition: 5 + i,
                is_error: i % 2 == 1,
            };
            let body = format!("| a | b |\n| {i} | x |");
            let facts = CallFacts {
                tool: "gh__list_issues",
                upstream: "gh",
                body: &body,
                paths: &paths,
            };
            kept += usize::from(telemetry.record(&facts, outcome));
            if kept == 3 {
                break;
            }
        }
        assert_eq!(kept, 3, "sampling at 0.75 kept fewer than 3 of 64");
        let tool_hash = telemetry.hash("gh__list_issues").unwrap();
        assert!(
            telemetry.record_retrieval(devboy_telemetry::RetrievalRecord {
                strategy: "block".into(),
                provider: Some("anthropic".into()),
                calls: 3,
                failed_calls: 1,
                input_tokens: 4000,
                cached_input_tokens: 900,
                output_tokens: 40,
                ..Default::default()
            })
        );
        {
            use devboy_core::speculation::{DeclineReason, PrefetchEnd, SpeculationEvent};
            let e = [
                SpeculationEvent::Dispatched {
                    predicted_tokens: 40,
                },
                SpeculationEvent::Ended {
                    end: PrefetchEnd::TimedOut,
                    predicted_tokens: 40,
                },
                SpeculationEvent::Declined {
                    reason: DeclineReason::HostBusy,
                },
            ];
            for (event, actual) in e.into_iter().zip([0, 55, 0]) {
                let key = devboy_core::call::CallKey::new("gh__list_issues", None);
                assert!(telemetry.record_speculation("gh__list_issues", &key, event, actual));
            }
        }
        assert!(telemetry.record_expansion(
            "gh__list_issues",
            "gh",
            devboy_telemetry::Delivered::AgainElided,
            321
        ));
        telemetry.finish();

        // What a recorder run cannot force (drops, prefetch flags, a
        // client other than the default), written by hand through the
        // same sink and serializer.
        let by_hand = [
            Event::Result(ResultEvent {
                v: devboy_telemetry::SCHEMA_VERSION,
                ts_ms: 1_700_000_123_456,
                session: Hash64(0x1111_0000_0000_0001),
                call: Hash64(0x2222_0000_0000_0002),
                tool: Hash64(0x3333_0000_0000_0003),
                upstream: Hash64(0x4444_0000_0000_0004),
                endpoint_class: devboy_telemetry::EndpointClass::Search,
                response_chars: 4321,
                shape: Some("json_array".into()),
                inner_formats: vec!["base64".into(), "iso_date".into()],
                fingerprint: Hash128(0x5555_0000_0000_0000_0000_0000_0000_0005),
                path_hashes: vec![Hash64(0x66)],
                dedup: DedupOutcome::Near,
                layer: ResultLayer::Encoder,
                action: "near_reference".into(),
                format: Some("csv".into()),
                template: Some("tpl_contract".into()),
                tokenizer: "o200k_base".into(),
                tokens_baseline: 7001,
                tokens_final: 6002,
                dedup_saved: -503,
                encoder_saved: 404,
                elided: true,
                context_partition: 9,
                is_error: true,
                prefetched: Some(true),
                prefetch_hit: Some(false),
                served: Some("joined".into()),
                predicted_tokens: Some(77),
                call_key: Some(Hash64(0x77)),
            }),
            Event::Session(SessionSummary {
                v: devboy_telemetry::SCHEMA_VERSION,
                ts_ms: 1_700_000_200_000,
                session: Hash64(0x1111_0000_0000_0001),
                started_ms: 1_700_000_100_000,
                ended_ms: 1_700_000_199_999,
                events: 11,
                results: 13,
                sample_rate: 0.25,
                dropped: 2,
                tokens_baseline: 8000,
                tokens_final: 5000,
                dedup_saved: 1700,
                encoder_saved: 1300,
                compactions: 4,
                client: ClientKind::ClaudeCode,
                speculation: Some(devboy_telemetry::SpeculationSummary {
                    dispatched: 3,
                    joined: 1,
                    late_invoked: [("host_busy".to_owned(), 2)].into(),
                    ..Default::default()
                }),
                definitions: None,
                expanded: Some(devboy_telemetry::ExpandedSummary {
                    calls: 2,
                    tokens: 90,
                    again_tokens: 50,
                }),
            }),
        ];
        let mut sink = JsonlSink::new(dir.path(), SinkLimits::new(1 << 20, 30));
        for event in &by_hand {
            let mut line = serde_json::to_vec(event).unwrap();
            line.push(b'\n');
            sink.append(&line).unwrap();
        }

        // The writer's own reading of the files is what was written.
        let written: Vec<Event> = devboy_telemetry::events_files(dir.path())
            .unwrap()
            .iter()
            .flat_map(|f| devboy_telemetry::read_events_file(f).unwrap().events)
            .collect();
        let table = read_events(&ReadOptions {
            input: dir.path().to_path_buf(),
            since_ms: 0,
        })
        .unwrap();
        let s = &table.stats;
        assert_eq!(
            (s.malformed, s.unsupported, s.other_kinds, s.old),
            (0, 0, 0, 0),
            "{s:?}"
        );
        let results: Vec<&ResultEvent> = written
            .iter()
            .filter_map(|e| match e {
                Event::Result(r) => Some(r),
                _ => None,
            })
            .collect();
        assert_eq!(results.len(), 4);
        assert_eq!(table.records.len(), results.len());
        for (w, r) in results.iter().zip(&table.records) {
            assert_result_read(w, r, &table.vocab);
        }
        let mut sessions = 0;
        for e in &written {
            if let Event::Session(w) = e {
                sessions += 1;
                assert_session_read(w, &table.sessions[&w.session.0]);
            }
        }
        assert_eq!((sessions, table.sessions.len()), (2, 2));
        // The recorder's session keeps its last tool list, the one written
        // by hand (as before devboy recorded lists) none.
        let mut listed: Vec<_> = table.sessions.values().map(|s| s.definitions).collect();
        listed.sort_by_key(Option::is_some);
        assert_eq!(
            listed,
            [
                None,
                Some(crate::event::DefinitionsSummary {
                    tokens: 4012,
                    tools: 41,
                    lists: 2
                })
            ]
        );
        let written_speculation: Vec<&devboy_telemetry::SpeculationRecord> = written
            .iter()
            .filter_map(|e| match e {
                Event::Speculation(s) => Some(s),
                _ => None,
            })
            .collect();
        assert_eq!(s.speculation, 3);
        assert_eq!(s.retrieval, 1);
        assert_eq!(
            table.retrieval,
            [crate::event::RetrievalRecord {
                configured: true,
                answered: true,
                calls: 3,
                failed_calls: 1,
                input_tokens: 4000,
                cached_input_tokens: 900,
                output_tokens: 40,
            }]
        );
        let written_expansions: Vec<&devboy_telemetry::ExpansionRecord> = written
            .iter()
            .filter_map(|e| match e {
                Event::Expansion(x) => Some(x),
                _ => None,
            })
            .collect();
        assert_eq!((written_expansions.len(), s.expansions), (1, 1));
        for (w, r) in written_expansions.iter().zip(&table.expansions) {
            let devboy_telemetry::ExpansionRecord {
                v,
                ts_ms,
                session,
                tool,
                delivered,
                tokenizer,
                tokens,
                // Servers come from the exposed name's prefix.
                upstream: _,
            } = w;
            let crate::event::ExpansionRecord {
                ts_ms: read_ts_ms,
                session: read_session,
                tool: read_tool,
                delivered: read_delivered,
                tokens: read_tokens,
            } = *r;
            assert_eq!(*v, crate::event::SCHEMA_VERSION);
            assert_eq!((read_ts_ms, read_session), (*ts_ms, session.0));
            assert_eq!((read_tool, read_delivered), (tool.0, *delivered));
            assert_eq!((read_tool, read_tokens), (tool_hash.0, *tokens));
            assert!(table.vocab.tokenizers.find(tokenizer).is_some());
        }
        assert_eq!(table.speculation.len(), written_speculation.len());
        for (w, r) in written_speculation.iter().zip(&table.speculation) {
            assert_speculation_read(w, r);
        }

        // The names map the recorder kept names the tool's hash.
        let names = ExposedNames::load(&names_file);
        assert!(names.note.is_none(), "{:?}", names.note);
        assert_eq!(names.get(tool_hash.0), Some("gh__list_issues"), "{names:?}");
        assert!(results.iter().any(|r| r.tool == tool_hash));
    }

    fn assert_result_read(
        written: &devboy_telemetry::ResultEvent,
        read: &Record,
        vocab: &Vocabulary,
    ) {
        let devboy_telemetry::ResultEvent {
            v,
            ts_ms,
            session,
            tool,
            endpoint_class,
            response_chars,
            shape,
            inner_formats,
            fingerprint,
            dedup,
            format,
            template,
            tokenizer,
            tokens_baseline,
            tokens_final,
            dedup_saved,
            encoder_saved,
            elided,
            context_partition,
            is_error,
            // Not read by the tuner.
            call: _,
            upstream: _,
            path_hashes: _,
            layer: _,
            action: _,
            served,
            predicted_tokens: _,
            call_key: _,
            prefetched: _,
            prefetch_hit: _,
        } = written;
        let Record {
            ts_ms: read_ts_ms,
            fingerprint: read_fingerprint,
            tool: read_tool,
            session: read_session,
            partition,
            response_chars: read_chars,
            tokens_baseline: read_baseline,
            tokens_final: read_final,
            dedup_saved: read_dedup_saved,
            encoder_saved: read_encoder_saved,
            inner,
            shape: read_shape,
            format: read_format,
            template: read_template,
            class,
            dedup: read_dedup,
            flags: _,
        } = *read;
        assert_eq!(*v, crate::event::SCHEMA_VERSION);
        assert_eq!(read_ts_ms, *ts_ms);
        assert_eq!(read_session, session.0);
        assert_eq!(read_tool, tool.0);
        assert_eq!(vocab.classes.get(class), Some(endpoint_class.name()));
        assert_eq!(u64::from(read_chars), *response_chars);
        assert_eq!(vocab.shapes.get(read_shape), shape.as_deref());
        let read_inner: Vec<&str> = (0..32)
            .filter(|bit| inner & (1 << bit) != 0)
            .filter_map(|bit| vocab.inner.get(bit as u8))
            .collect();
        let mut written_inner: Vec<&str> = inner_formats.iter().map(|f| &**f).collect();
        written_inner.sort_unstable();
        let mut read_inner = read_inner;
        read_inner.sort_unstable();
        assert_eq!(read_inner, written_inner);
        assert!(read.has_fingerprint());
        assert_eq!(read_fingerprint, fingerprint.0);
        assert_eq!(read_dedup, *dedup);
        assert_eq!(vocab.formats.get(read_format), format.as_deref());
        assert_eq!(vocab.templates.get(read_template), template.as_deref());
        assert!(vocab.tokenizers.find(tokenizer).is_some(), "{tokenizer}");
        assert_eq!(u64::from(read_baseline), *tokens_baseline);
        assert_eq!(u64::from(read_final), *tokens_final);
        assert_eq!(i64::from(read_dedup_saved), *dedup_saved);
        assert_eq!(i64::from(read_encoder_saved), *encoder_saved);
        assert_eq!((read.elided(), read.is_error()), (*elided, *is_error));
        assert_eq!(u64::from(partition), *context_partition);
        assert_eq!(
            read.served().name(),
            served.as_deref().unwrap_or("upstream")
        );
    }

    fn assert_speculation_read(
        written: &devboy_telemetry::SpeculationRecord,
        read: &crate::event::SpeculationRecord,
    ) {
        let devboy_telemetry::SpeculationRecord {
            v,
            session,
            tool,
            event,
            predicted_tokens,
            reason,
            end,
            actual_tokens,
            // Matched within the session by the recorder; its summary
            // carries the result.
            call_key: _,
            ts_ms: _,
        } = written;
        let crate::event::SpeculationRecord {
            session: read_session,
            tool: read_tool,
            kind,
            reason: read_reason,
            end: read_end,
            predicted_tokens: read_predicted,
            actual_tokens: read_actual,
        } = *read;
        assert_eq!(*v, crate::event::SCHEMA_VERSION);
        assert_eq!((read_session, read_tool), (session.0, tool.0));
        assert_eq!(kind, *event);
        assert_eq!(read_reason.map(|r| r.name()), reason.as_deref());
        assert_eq!(read_end.map(|e| e.name()), end.as_deref());
        assert_eq!(read_predicted, predicted_tokens.unwrap_or(0));
        assert_eq!(read_actual, actual_tokens.unwrap_or(0));
    }

    fn assert_session_read(written: &devboy_telemetry::SessionSummary, read: &SessionRecord) {
        let devboy_telemetry::SessionSummary {
            v,
            results,
            sample_rate,
            dropped,
            compactions,
            client,
            // The key of `EventTable::sessions`, checked by the lookup.
            session: _,
            // Not read by the tuner: it recomputes totals from the events.
            ts_ms: _,
            started_ms: _,
            ended_ms: _,
            events: _,
            tokens_baseline: _,
            dedup_saved: _,
            encoder_saved: _,
            // Read for the definitions line, next to the definitions.
            tokens_final,
            speculation,
            definitions,
            // The tuner sums the expansion events themselves.
            expanded: _,
        } = written;
        let SessionRecord {
            results: read_results,
            sample_rate: read_rate,
            compactions: read_compactions,
            dropped: read_dropped,
            client: read_client,
            speculation: read_speculation,
            tokens_final: read_tokens_final,
            definitions: read_definitions,
        } = read;
        assert_eq!(read_speculation, speculation);
        assert_eq!(read_tokens_final, tokens_final);
        assert_eq!(read_definitions, definitions);
        assert_eq!(*v, crate::event::SCHEMA_VERSION);
        assert_eq!(read_results, results);
        assert_eq!(read_rate, sample_rate);
        assert_eq!(read_dropped, dropped);
        assert_eq!(read_compactions, compactions);
        assert_eq!(read_client, client);
    }

    #[test]
    fn missing_dir_is_empty() {
        let table = read_events(&ReadOptions {
            input: PathBuf::from("/nonexistent/devboy/telemetry"),
            since_ms: 0,
        })
        .unwrap();
        assert!(table.records.is_empty());
    }
}
