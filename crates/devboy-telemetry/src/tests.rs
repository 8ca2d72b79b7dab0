//! The recorder end to end on real files: what is written, sampling,
//! the off switch, failures, and a writer killed with SIGKILL.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use devboy_core::pipeline_config::TelemetrySettings;

use crate::*;

const CANARY: &str = "CANARY-7f3a-SECRET";

/// A call of tool `a__b` on upstream `a` with a one-byte body and no paths.
const ONE_CALL: CallFacts<'static> = CallFacts {
    tool: "a__b",
    upstream: "a",
    body: "x",
    paths: &[],
};

fn temp_dir(tag: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("devboy-telemetry-rec-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn options(dir: &Path) -> TelemetryOptions {
    TelemetryOptions {
        session_id: Some("0123456789abcdef0123456789abcdef".into()),
        queue: 8192,
        ..TelemetryOptions::new(dir.to_owned(), "o200k_base")
    }
}

fn all_events(dir: &Path) -> Vec<Event> {
    let mut out = Vec::new();
    for file in events_files(dir).unwrap() {
        let parsed = read_events_file(&file).unwrap();
        assert_eq!(parsed.unparsed, 0, "{}", file.display());
        assert!(!parsed.partial_tail, "{}", file.display());
        out.extend(parsed.events);
    }
    out
}

fn split(events: Vec<Event>) -> (Vec<ResultEvent>, Vec<SessionSummary>) {
    let mut results = Vec::new();
    let mut sessions = Vec::new();
    for event in events {
        match event {
            Event::Result(r) => results.push(r),
            Event::Session(s) => sessions.push(s),
            Event::Speculation(_)
            | Event::Retrieval(_)
            | Event::Expansion(_)
            | Event::CodeRun(_) => {}
        }
    }
    (results, sessions)
}

fn speculation_records(events: &[Event]) -> Vec<SpeculationRecord> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Speculation(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// Every byte of every file under `dir`, as lossy text.
fn everything_under(dir: &Path) -> String {
    let mut out = String::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            out.push_str(&path.display().to_string());
            out.push('\n');
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    out
}

fn outcome(tokens: u64) -> Outcome {
    Outcome {
        dedup: DedupOutcome::Miss,
        layer: ResultLayer::Encoder,
        action: "encoded",
        shape: Some("array_of_objects"),
        inner_formats: vec!["url"],
        format: Some("csv"),
        template: None,
        tokens_baseline: tokens,
        tokens_final: tokens / 2,
        dedup_saved: -3,
        encoder_saved: (tokens / 2) as i64 + 3,
        elided: false,
        context_partition: 0,
        is_error: false,
    }
}

#[test]
fn results_and_the_summary_are_written_without_names_or_content() {
    let dir = temp_dir("basic");
    let names_file = dir
        .join("config")
        .join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME);
    let telemetry_dir = dir.join("telemetry");
    let telemetry = Telemetry::start(TelemetryOptions {
        names_file: Some(names_file.clone()),
        ..options(&telemetry_dir)
    });
    assert!(telemetry.is_active());
    telemetry.set_client(Some("claude-code"));
    let body = format!("[{{\"note\":\"{CANARY}\"}}]");
    let paths = vec![format!("/home/u/{CANARY}/notes.txt")];
    let facts = CallFacts {
        tool: "secretsrv__list_things",
        upstream: "secretsrv",
        body: &body,
        paths: &paths,
    };
    assert!(telemetry.record(&facts, outcome(100)));
    assert!(telemetry.record(&facts, outcome(40)));
    telemetry.compaction();
    let error = CallFacts {
        tool: "secretsrv__fail",
        body: CANARY,
        paths: &[],
        ..facts
    };
    assert!(telemetry.record(&error, Outcome::passed_through(7, 1, true)));
    telemetry.finish();
    assert!(!telemetry.record(&facts, outcome(1)), "finished");

    let (results, sessions) = split(all_events(&telemetry_dir));
    assert_eq!(results.len(), 3);
    assert_eq!(sessions.len(), 1);
    let salt = Salt::load_or_create(&telemetry_dir.join(SALT_FILE)).unwrap();
    let h = |x: &str| salt.h(&[x.as_bytes()]);
    let first = &results[0];
    assert_eq!(first.v, 1);
    assert_eq!(first.tool, h("secretsrv__list_things"));
    assert_eq!(first.upstream, h("secretsrv"));
    assert_eq!(first.session, h("0123456789abcdef0123456789abcdef"));
    assert_eq!(first.call, h("0123456789abcdef0123456789abcdef1"));
    assert_eq!(results[2].call, h("0123456789abcdef0123456789abcdef3"));
    assert_eq!(first.endpoint_class, EndpointClass::List);
    assert_eq!(first.response_chars, body.chars().count() as u64);
    assert_eq!(first.fingerprint, salt.h128(&[body.as_bytes()]));
    assert_eq!(first.fingerprint, results[1].fingerprint, "same body");
    assert_eq!(first.path_hashes, [h(&paths[0])]);
    assert_eq!(first.inner_formats, ["url"]);
    assert_eq!(first.format.as_deref(), Some("csv"));
    assert_eq!(first.tokenizer, "o200k_base");
    assert_eq!((first.prefetched, first.prefetch_hit), (None, None));
    let err = &results[2];
    assert!(err.is_error);
    assert_eq!(
        (err.dedup, err.layer),
        (DedupOutcome::Off, ResultLayer::Passthrough)
    );
    assert_eq!(err.context_partition, 1);
    let s = &sessions[0];
    assert_eq!((s.results, s.events, s.dropped), (3, 3, 0));
    assert_eq!(s.tokens_baseline, 147);
    assert_eq!(s.tokens_final, 50 + 20 + 7);
    assert_eq!(s.dedup_saved, -6);
    assert_eq!(s.encoder_saved, 53 + 23);
    assert_eq!(s.compactions, 1);
    assert_eq!(s.client, ClientKind::ClaudeCode);
    assert_eq!(s.sample_rate, 1.0);
    assert!(s.started_ms <= s.ended_ms);

    let written = everything_under(&telemetry_dir);
    for secret in [CANARY, "secretsrv", "list_things", "notes.txt", "/home/u"] {
        assert!(!written.contains(secret), "{secret} leaked into telemetry");
    }
    let names = EndpointNames::load(&names_file);
    assert_eq!(names.get(first.tool), Some("secretsrv__list_things"));
    assert_eq!(names.get(first.upstream), Some("secretsrv"));
    assert_eq!(names.get(err.tool), Some("secretsrv__fail"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sampling_keeps_exactly_the_calls_below_the_rate() {
    let dir = temp_dir("sample");
    let n = 2000u64;
    let telemetry = Telemetry::start(TelemetryOptions {
        sample_rate: 0.3,
        ..options(&dir)
    });
    let facts = CallFacts {
        tool: "gh__get_issue",
        upstream: "gh",
        body: "{}",
        paths: &[],
    };
    let kept: u64 = (0..n)
        .map(|_| u64::from(telemetry.record(&facts, outcome(10))))
        .sum();
    telemetry.finish();

    let salt = Salt::load_or_create(&dir.join(SALT_FILE)).unwrap();
    let sampler = Sampler::new(0.3);
    let expected: BTreeSet<Hash64> = (1..=n)
        .map(|seq| salt.h(&[format!("0123456789abcdef0123456789abcdef{seq}").as_bytes()]))
        .filter(|call| sampler.keeps(*call))
        .collect();
    let threshold = (0.3 * 2f64.powi(64)) as u64;
    assert!(expected.iter().all(|c| c.0 < threshold));
    let (results, sessions) = split(all_events(&dir));
    let written: BTreeSet<Hash64> = results.iter().map(|r| r.call).collect();
    assert_eq!(written, expected, "exactly the calls below the threshold");
    assert_eq!(kept, expected.len() as u64);
    // Uniform hashes: about 30 % (5 sigma is ±102).
    assert!((500..=700).contains(&kept), "{kept}");
    let s = &sessions[0];
    assert_eq!((s.results, s.events, s.sample_rate), (n, kept, 0.3));
    assert_eq!(s.tokens_baseline, 10 * n, "totals count every result");

    assert!(Sampler::new(1.0).keeps(Hash64(u64::MAX)));
    assert!(!Sampler::new(0.0).keeps(Hash64(0)));
    assert!(Sampler::new(0.5).keeps(Hash64(0x7fff_ffff_ffff_ffff)));
    assert!(!Sampler::new(0.5).keeps(Hash64(0x8000_0000_0000_0000)));
    assert_eq!(Sampler::new(f64::NAN).rate(), 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_zero_rate_still_writes_the_summary() {
    let dir = temp_dir("zero");
    let telemetry = Telemetry::start(TelemetryOptions {
        sample_rate: 0.0,
        ..options(&dir)
    });
    let facts = ONE_CALL;
    for _ in 0..10 {
        assert!(!telemetry.record(&facts, outcome(4)));
    }
    drop(telemetry); // Drop finishes the session too.
    let (results, sessions) = split(all_events(&dir));
    assert!(results.is_empty());
    assert_eq!(sessions.len(), 1);
    assert_eq!((sessions[0].results, sessions[0].events), (10, 0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn off_means_no_files_at_all() {
    let dir = temp_dir("off");
    let settings = TelemetrySettings {
        enabled: false,
        sample_rate: 1.0,
        max_file_bytes: 1 << 20,
        max_age_days: 30,
    };
    assert!(TelemetryOptions::for_session(&settings, "o200k_base").is_none());
    let telemetry = Telemetry::for_session(&settings, "o200k_base");
    assert!(!telemetry.is_active());
    let facts = ONE_CALL;
    assert!(!telemetry.record(&facts, outcome(1)));
    telemetry.finish();
    // A session without results leaves no events file either.
    let idle = Telemetry::start(options(&dir));
    idle.finish();
    assert!(events_files(&dir).unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_summary_keeps_the_last_tool_list_and_counts_the_lists() {
    let dir = temp_dir("lists");
    // Listed twice (the second after a list_changed) around a call: the
    // summary holds the figures of the list served last, though its count
    // came first.
    let telemetry = Telemetry::start(options(&dir));
    let first = Instant::now();
    let second = first + Duration::from_millis(1);
    telemetry.tools_listed(14, 1_050, second);
    telemetry.record(&ONE_CALL, outcome(1));
    telemetry.tools_listed(12, 900, first);
    telemetry.finish();
    let (_, sessions) = split(all_events(&dir));
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        sessions[0].definitions,
        Some(DefinitionsSummary {
            tokens: 1_050,
            tools: 14,
            lists: 2,
        })
    );
    let _ = std::fs::remove_dir_all(&dir);

    // A session that only listed (a health check) sent the model nothing:
    // no summary.
    let dir = temp_dir("only-lists");
    let telemetry = Telemetry::start(options(&dir));
    telemetry.tools_listed(14, 1_050, Instant::now());
    telemetry.finish();
    assert!(split(all_events(&dir)).1.is_empty());
    let _ = std::fs::remove_dir_all(&dir);

    // A session that never listed writes no `definitions`.
    let dir = temp_dir("no-lists");
    let telemetry = Telemetry::start(options(&dir));
    telemetry.record(&ONE_CALL, outcome(1));
    telemetry.finish();
    let (_, sessions) = split(all_events(&dir));
    assert_eq!(sessions[0].definitions, None);
    let text = everything_under(&dir);
    assert!(!text.contains("definitions"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn setup_and_write_failures_turn_telemetry_off_quietly() {
    let dir = temp_dir("fail");
    // The telemetry "directory" is a file: setup fails, nothing panics.
    let file = dir.join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let broken = Telemetry::start(options(&file.join("telemetry")));
    assert!(!broken.is_active());
    let facts = ONE_CALL;
    assert!(!broken.record(&facts, outcome(1)));
    broken.finish();

    // The events directory turns into a file mid-session: the next file
    // cannot be opened, the sink turns itself off, the caller never knows.
    let telemetry_dir = dir.join("t");
    let telemetry = Telemetry::start(TelemetryOptions {
        limits: SinkLimits::new(1, 30), // a new file for every line
        ..options(&telemetry_dir)
    });
    assert!(telemetry.record(&facts, outcome(1)));
    let deadline = Instant::now() + Duration::from_secs(10);
    while events_files(&telemetry_dir).unwrap().is_empty() {
        assert!(Instant::now() < deadline, "first event written");
        std::thread::sleep(Duration::from_millis(5));
    }
    let events = telemetry_dir.join(EVENTS_DIR);
    std::fs::remove_dir_all(&events).unwrap();
    std::fs::write(&events, "").unwrap();
    telemetry.record(&facts, outcome(1));
    while telemetry.is_active() {
        assert!(Instant::now() < deadline, "sink turned off");
        telemetry.record(&facts, outcome(1));
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!telemetry.record(&facts, outcome(1)));
    telemetry.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_queue_drops_and_counts() {
    let dir = temp_dir("drop");
    let telemetry = Telemetry::start(TelemetryOptions {
        queue: 1,
        ..options(&dir)
    });
    let paths: Vec<String> = (0..200).map(|i| format!("/p/{i}")).collect();
    let facts = CallFacts {
        tool: "a__b",
        upstream: "a",
        body: "x",
        paths: &paths,
    };
    let n = 3000;
    let queued = (0..n)
        .filter(|_| telemetry.record(&facts, outcome(1)))
        .count() as u64;
    telemetry.finish();
    let (results, sessions) = split(all_events(&dir));
    let s = &sessions[0];
    assert_eq!(s.results, n);
    assert_eq!(s.events, queued);
    assert_eq!(s.events + s.dropped, n);
    assert_eq!(
        results.len() as u64,
        queued,
        "every queued event is written"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Env var that turns [`crash_child_writer`] into the writer to be killed.
const CRASH_CHILD_ENV: &str = "DEVBOY_TELEMETRY_CRASH_CHILD_DIR";

/// Not a test on its own: run by [`a_kill_9_mid_stream_leaves_whole_lines`]
/// in a child process, where it records large events until killed.
#[test]
fn crash_child_writer() {
    let Some(dir) = std::env::var_os(CRASH_CHILD_ENV) else {
        return;
    };
    let telemetry = Telemetry::start(TelemetryOptions {
        queue: 16,
        ..options(Path::new(&dir))
    });
    // ~100 KB lines, so a kill often lands inside a write.
    let paths: Vec<String> = (0..5000).map(|i| format!("/p/{i}")).collect();
    let facts = CallFacts {
        tool: "a__read",
        upstream: "a",
        body: "x",
        paths: &paths,
    };
    loop {
        telemetry.record(&facts, outcome(1));
    }
}

#[cfg(unix)]
#[test]
fn a_kill_9_mid_stream_leaves_whole_lines() {
    let dir = temp_dir("crash");
    let exe = std::env::current_exe().unwrap();
    for round in 0..3 {
        let round_dir = dir.join(format!("round-{round}"));
        let mut child = std::process::Command::new(&exe)
            .args(["--exact", "tests::crash_child_writer", "--nocapture"])
            .env(CRASH_CHILD_ENV, &round_dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Let it write a few MB, then SIGKILL at a moment of its choosing.
        let deadline = Instant::now() + Duration::from_secs(60);
        let written = |d: &Path| -> u64 {
            events_files(d)
                .unwrap_or_default()
                .iter()
                .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
                .sum()
        };
        while written(&round_dir) < (2 + round) << 20 {
            assert!(Instant::now() < deadline, "the child writes");
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success());
        let files = events_files(&round_dir).unwrap();
        assert!(!files.is_empty());
        for file in files {
            let parsed = read_events_file(&file).unwrap();
            assert_eq!(parsed.unparsed, 0, "every complete line parses");
            assert!(!parsed.events.is_empty());
            for event in &parsed.events {
                let Event::Result(r) = event else {
                    panic!("no summary after a kill")
                };
                assert_eq!(r.path_hashes.len(), 5000);
            }
            // Anything after the last newline is one cut line, and only at
            // the end of the file.
            let bytes = std::fs::read(&file).unwrap();
            let tail = bytes.rsplit(|&b| b == b'\n').next().unwrap();
            assert_eq!(parsed.partial_tail, !tail.is_empty());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn speculation_is_recorded_summarised_and_matched_by_call_key() {
    use devboy_core::call::CallKey;
    use devboy_core::speculation::{DeclineReason, PrefetchEnd, Served, SpeculationEvent};
    use serde_json::json;

    let dir = temp_dir("speculation");
    let telemetry = Telemetry::start(options(&dir));
    let args = |v: serde_json::Value| v.as_object().unwrap().clone();
    // The same arguments in another key order are the same call.
    let tool = "gh__get_issue";
    let key = |v: serde_json::Value| CallKey::new(tool, Some(&args(v)));
    let issue = key(json!({"repo": CANARY, "number": 7}));
    let issue_reordered = key(json!({"number": 7, "repo": CANARY}));
    let comments = key(json!({"repo": CANARY, "number": 8}));
    let facts = CallFacts {
        tool,
        upstream: "gh",
        body: "{}",
        paths: &[],
    };

    // A prefetch of issue 7 lands (900 tokens against 600 predicted: an
    // overrun) and answers the agent's call.
    assert!(telemetry.record_speculation(
        tool,
        &issue,
        SpeculationEvent::Dispatched {
            predicted_tokens: 600
        },
        0
    ));
    telemetry.record_speculation(
        tool,
        &issue,
        SpeculationEvent::Ended {
            end: PrefetchEnd::Used,
            predicted_tokens: 600,
        },
        900,
    );
    let served = CallOrigin {
        key: Some(&issue_reordered),
        served: Served::Prefetch,
    };
    assert!(telemetry.record_call(&facts, &served, outcome(100)));
    // Issue 8 is declined for capacity, then the agent calls it itself.
    telemetry.record_speculation(
        tool,
        &comments,
        SpeculationEvent::Declined {
            reason: DeclineReason::OverBudget,
        },
        0,
    );
    telemetry.record_speculation(
        "gh__create_issue",
        &CallKey::new("gh__create_issue", None),
        SpeculationEvent::Declined {
            reason: DeclineReason::Writes,
        },
        0,
    );
    let own = CallOrigin {
        key: Some(&comments),
        served: Served::Upstream,
    };
    assert!(telemetry.record_call(&facts, &own, outcome(40)));
    // A prefetch that expires unused after landing.
    telemetry.record_speculation(
        tool,
        &key(json!({"number": 9})),
        SpeculationEvent::Dispatched {
            predicted_tokens: 50,
        },
        0,
    );
    telemetry.record_speculation(
        tool,
        &key(json!({"number": 9})),
        SpeculationEvent::Ended {
            end: PrefetchEnd::Expired,
            predicted_tokens: 50,
        },
        40,
    );
    let fail_fast = CallOrigin {
        key: Some(&issue),
        served: Served::FailFast,
    };
    assert!(telemetry.record_call(&facts, &fail_fast, outcome(10)));
    telemetry.finish();

    let events = all_events(&dir);
    let speculation = speculation_records(&events);
    let (results, sessions) = split(events);
    let kinds: Vec<_> = speculation.iter().map(|s| s.event).collect();
    use SpeculationKind::*;
    assert_eq!(
        kinds,
        [Dispatched, Ended, Declined, Declined, Dispatched, Ended]
    );
    assert_eq!(speculation[0].predicted_tokens, Some(600));
    assert_eq!(speculation[1].end.as_deref(), Some("used"));
    assert_eq!(speculation[1].actual_tokens, Some(900));
    assert_eq!(speculation[2].reason.as_deref(), Some("over_budget"));
    assert!(
        speculation[0].call_key.is_none(),
        "only declines carry the key"
    );

    // The decline and the agent's own later call carry the same key; the
    // reordered arguments gave the prefetched call's key.
    assert_eq!(results[1].call_key, speculation[2].call_key);
    assert!(results[1].call_key.is_some());
    assert_ne!(results[0].call_key, results[1].call_key);
    assert_eq!(results[0].served.as_deref(), Some("prefetch"));
    assert_eq!(results[0].predicted_tokens, Some(600));
    assert_eq!(results[1].served, None);
    assert_eq!(results[1].predicted_tokens, None);
    assert_eq!(results[2].served.as_deref(), Some("fail_fast"));

    let summary = sessions[0]
        .speculation
        .clone()
        .expect("speculation summary");
    assert_eq!(summary.dispatched, 2);
    assert_eq!(summary.used, 1);
    assert_eq!(summary.wasted.get("expired"), Some(&1));
    assert_eq!(summary.declined.get("over_budget"), Some(&1));
    assert_eq!(summary.declined.get("writes"), Some(&1));
    assert_eq!(summary.late_invoked.get("over_budget"), Some(&1));
    assert_eq!(summary.late_invoked.len(), 1);
    assert_eq!((summary.predictions, summary.overruns), (2, 1));
    assert_eq!(
        summary.calls_saved,
        CallsSaved {
            prefetch: 1,
            dedup: 0,
            fail_fast: 1
        }
    );
    // outcome(t) sends t/2: 50 + 5 saved on the speculated results.
    assert_eq!(summary.tokens_saved, 55);
    assert_eq!(summary.tokens_wasted, 40);

    // No name, argument or salt of the call key reaches the files.
    let text = everything_under(&dir);
    assert!(!text.contains(CANARY));
    assert!(!text.contains("gh__get_issue\""), "names are hashed");
}

#[test]
fn sessions_without_speculation_write_no_speculation_field() {
    let dir = temp_dir("no-speculation");
    let telemetry = Telemetry::start(options(&dir));
    let facts = CallFacts {
        tool: "fs__read",
        upstream: "fs",
        body: "x",
        paths: &[],
    };
    assert!(telemetry.record(&facts, outcome(10)));
    telemetry.finish();
    let text = everything_under(&dir.join(EVENTS_DIR));
    assert!(!text.contains("\"speculation\""), "{text}");
    assert!(!text.contains("\"served\""), "{text}");
    assert!(!text.contains("call_key"), "{text}");
}

#[test]
fn expansions_are_recorded_unsampled_and_summed_into_the_summary() {
    let dir = temp_dir("expansion");
    // Results sampled out entirely: an expansion is never sampled.
    let telemetry = Telemetry::start(TelemetryOptions {
        sample_rate: 0.0,
        ..options(&dir)
    });
    let facts = CallFacts {
        tool: "secretsrv__read_file",
        upstream: "secretsrv",
        body: CANARY,
        paths: &[],
    };
    assert!(!telemetry.record(&facts, outcome(100)), "sampled out");
    assert!(telemetry.record_expansion("secretsrv__read_file", "secretsrv", Delivered::Again, 40));
    assert!(telemetry.record_expansion(
        "secretsrv__read_file",
        "secretsrv",
        Delivered::AgainElided,
        7
    ));
    assert!(telemetry.record_expansion("secretsrv__read_file", "secretsrv", Delivered::New, 30));
    telemetry.finish();
    assert!(
        !telemetry.record_expansion("a__b", "a", Delivered::New, 1),
        "finished"
    );

    let events = all_events(&dir);
    let expansions: Vec<&ExpansionRecord> = events
        .iter()
        .filter_map(|e| match e {
            Event::Expansion(x) => Some(x),
            _ => None,
        })
        .collect();
    let salt = Salt::load_or_create(&dir.join(SALT_FILE)).unwrap();
    let h = |x: &str| salt.h(&[x.as_bytes()]);
    let what: Vec<_> = expansions
        .iter()
        .map(|x| (x.tool, x.upstream, x.delivered, x.tokens))
        .collect();
    let (tool, upstream) = (h("secretsrv__read_file"), h("secretsrv"));
    assert_eq!(
        what,
        [
            (tool, upstream, Delivered::Again, 40),
            (tool, upstream, Delivered::AgainElided, 7),
            (tool, upstream, Delivered::New, 30),
        ]
    );
    assert!(
        expansions
            .iter()
            .all(|x| x.tokenizer == "o200k_base"
                && x.session == h("0123456789abcdef0123456789abcdef"))
    );
    let (results, sessions) = split(events);
    assert!(results.is_empty());
    let s = &sessions[0];
    // The result's figures (100 → 50, dedup -3, encoder 53) and the
    // expansions': 47 again (40 from dedup, 7 from the encoder), 30 new.
    assert_eq!(s.results, 1);
    assert_eq!(s.tokens_baseline, 100 + 30);
    assert_eq!(s.tokens_final, 50 + 40 + 7 + 30);
    assert_eq!((s.dedup_saved, s.encoder_saved), (-3 - 40, 53 - 7));
    assert_eq!(
        s.tokens_baseline as i64 - s.tokens_final as i64,
        s.dedup_saved + s.encoder_saved
    );
    assert_eq!(
        s.expanded,
        Some(ExpandedSummary {
            calls: 3,
            tokens: 77,
            again_tokens: 47
        })
    );
    assert!(!everything_under(&dir).contains(CANARY));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_session_that_only_expanded_writes_its_summary() {
    let dir = temp_dir("expansion-only");
    let telemetry = Telemetry::start(options(&dir));
    assert!(telemetry.record_expansion("a__b", "a", Delivered::Again, 12));
    telemetry.finish();
    let (_, sessions) = split(all_events(&dir));
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].results, 0);
    assert_eq!(sessions[0].tokens_final, 12);
    assert_eq!(sessions[0].expanded.map(|e| e.calls), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}
