//! `devboy encode`, `devboy decode` and `devboy replay` as a user runs them,
//! on real GitHub API data (`@octokit/fixtures`, installed by
//! tests/peers/install.sh).

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::devboy_bin;
use serde_json::Value;

fn octokit() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/node_modules/@octokit");
    assert!(
        dir.join("fixtures/package.json").is_file(),
        "@octokit/fixtures is missing: run tests/peers/install.sh"
    );
    dir
}

fn raw_fixtures() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let scenarios = octokit().join("fixtures/scenarios/api.github.com");
    for entry in std::fs::read_dir(scenarios).unwrap() {
        let file = entry.unwrap().path().join("raw-fixture.json");
        if file.is_file() {
            files.push(file);
        }
    }
    files.sort();
    files
}

/// Runs devboy with `args`, `stdin` on its standard input, to the end.
fn run_output(args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new(devboy_bin())
        .args(args)
        .env("DEVBOY_CONFIG_DIR", "/nonexistent/devboy-test-config")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run devboy");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Runs devboy with `args`, `stdin` on its standard input; (stdout, stderr).
fn run(args: &[&str], stdin: &str) -> (String, String) {
    let out = run_output(args, stdin);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "devboy {args:?} failed: {stderr}");
    (stdout, stderr)
}

/// Runs devboy with `args` and `stdin` expecting it to fail; its stderr.
fn run_failing(args: &[&str], stdin: &str) -> String {
    let out = run_output(args, stdin);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "devboy {args:?} succeeded on a damaged body; stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.stdout.is_empty(), "nothing on stdout when it fails");
    stderr
}

/// The first list page in the paginate-issues scenario, pretty-printed as a
/// server would often send it.
fn issues_page() -> Value {
    let file = octokit().join("fixtures/scenarios/api.github.com/paginate-issues/raw-fixture.json");
    let recordings: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    recordings
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["response"])
        .find(|r| r.as_array().is_some_and(|a| a.len() > 1))
        .cloned()
        .expect("a list page")
}

#[test]
fn encode_then_decode_gives_back_a_real_list_page() {
    let page = issues_page();
    let pretty = serde_json::to_string_pretty(&page).unwrap();
    let (encoded, summary) = run(&["encode"], &pretty);
    assert!(encoded.starts_with("> [encoded: "), "{encoded:.200}");
    assert!(
        encoded.len() * 2 < pretty.len(),
        "{} vs {}",
        encoded.len(),
        pretty.len()
    );
    assert!(summary.contains("array_of_objects as csv"), "{summary}");
    assert!(summary.contains("o200k_base tokens"), "{summary}");
    let (decoded, _) = run(&["decode"], &encoded);
    assert_eq!(serde_json::from_str::<Value>(&decoded).unwrap(), page);
}

/// The issue's example: an encoding cut short, at a row or inside a
/// number (`21.5` → `21.`), used to decode to fewer rows or another value
/// with exit code 0. It must fail, say why, and print nothing.
#[test]
fn decode_refuses_a_cut_or_changed_encoding() {
    let rows: Value = serde_json::from_str(
        r#"[{"city":"Oslo","temp":21.5,"note":"dry"},{"city":"Bergen","temp":18.25,"note":"wet"},{"city":"Tromsø","temp":9.0,"note":"cold"}]"#,
    )
    .unwrap();
    let (encoded, _) = run(&["encode"], &rows.to_string());
    assert!(encoded.starts_with("> [encoded: csv"), "{encoded}");
    let (decoded, _) = run(&["decode"], &encoded);
    assert_eq!(serde_json::from_str::<Value>(&decoded).unwrap(), rows);
    let text = encoded.trim_end_matches('\n');
    let last_row = &text[..text.rfind('\n').unwrap() + 1];
    let in_number = &text[..text.find("21.5").unwrap() + 3];
    let changed = encoded.replace("18.25", "18.26");
    for damaged in [last_row, in_number, changed.as_str()] {
        let stderr = run_failing(&["decode"], damaged);
        assert!(
            stderr.contains("cannot decode: checksum mismatch: the hint says #"),
            "{stderr}"
        );
    }
    // A real GitHub list page, cut after its second-to-last row.
    let (encoded, _) = run(&["encode"], &issues_page().to_string());
    let text = encoded.trim_end_matches('\n');
    let stderr = run_failing(&["decode"], &text[..text.rfind('\n').unwrap()]);
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
}

#[test]
fn encode_leaves_what_it_cannot_shorten() {
    let text = "Just a sentence of prose.\n";
    let (out, summary) = run(&["encode"], text);
    assert_eq!(out, text);
    assert!(summary.contains("unchanged"), "{summary}");
}

/// `devboy decode` refused what `devboy encode` left
/// unchanged, so `encode | decode` was not the identity. Text without an
/// encoding hint comes back as it went in (exit 0); a hinted text that
/// fails its check still fails (exit 1).
#[test]
fn decode_gives_back_what_encode_left_unchanged() {
    for body in [
        "Just a sentence of prose.\n",
        "# Notes\n\n- no table here\n- and no JSON\n",
        "{\"a\":1}",
        "",
    ] {
        let (encoded, _) = run(&["encode"], body);
        let (decoded, _) = run(&["decode"], &encoded);
        assert_eq!(decoded, encoded, "decode of an unhinted text");
        if encoded == body {
            assert_eq!(decoded, body, "encode | decode is the identity");
        }
    }
    // With a hint, the check still holds.
    let rows = r#"[{"city":"Oslo","temp":21.5},{"city":"Bergen","temp":18.25},{"city":"Molde","temp":9.5}]"#;
    let (encoded, _) = run(&["encode"], rows);
    assert!(encoded.starts_with("> [encoded: "), "{encoded}");
    let out = run_output(&["decode"], &encoded.replace("18.25", "18.26"));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("checksum mismatch"));
}

#[test]
fn replay_reports_the_octokit_fixtures_in_json() {
    let files = raw_fixtures();
    assert!(files.len() >= 20, "{files:?}");
    let mut args = vec!["replay".to_owned(), "--format".into(), "json".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, _) = run(&args, "");
    let report: Value = serde_json::from_str(&out).expect("one JSON object");
    for key in [
        "files",
        "tokenizer",
        "tokens_raw",
        "tokens_compact",
        "tokens_pretty",
        "tokens_final",
        "dedup_savings_pct",
        "encoder_savings_pct",
        "combined_savings_pct",
        "decode_failures",
        "by_shape",
        "by_format",
    ] {
        assert!(report.get(key).is_some(), "no {key} in {report}");
    }
    assert_eq!(report["files"], files.len());
    assert_eq!(report["tokenizer"], "o200k_base");
    assert_eq!(report["decode_failures"], 0, "{report}");
    assert!(report["decode_checked"].as_u64().unwrap() > 50, "{report}");
    // The split adds up, and the figures are what the tokens say.
    let f = |k: &str| report[k].as_f64().unwrap();
    assert!(
        (f("dedup_savings_pct") + f("encoder_savings_pct") - f("combined_savings_pct")).abs() < 0.2
    );
    let (raw, fin) = (f("tokens_raw"), f("tokens_final"));
    assert!((100.0 * (raw - fin) / raw - f("combined_savings_pct")).abs() < 0.2);
    // Real GitHub list pages: at least 30% fewer tokens than compact JSON
    // and 45% fewer than pretty JSON (the encoder's targets).
    let lists = &report["by_shape"]["array_of_objects"];
    let saved = lists["savings_pct"].as_f64().unwrap();
    assert!(saved >= 30.0, "list pages vs compact: {saved}% in {report}");
    assert!(f("tokens_final") < 0.55 * f("tokens_pretty"), "{report}");
}

#[test]
fn replay_prints_a_table_by_default() {
    let files = raw_fixtures();
    let (out, _) = run(&["replay", files[0].to_str().unwrap()], "");
    assert!(out.contains("tokens counted in o200k_base"), "{out}");
    assert!(out.contains("savings vs raw: dedup"), "{out}");
    assert!(out.contains("decode failures: 0"), "{out}");
}

#[test]
fn replay_reads_jsonl_bodies_given_as_json_and_its_tables_add_up() {
    let dir = std::env::temp_dir().join(format!("devboy-replay-jsonl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let capture = dir.join("capture.jsonl");
    let rows: Vec<Value> = (0..20)
        .map(|i| serde_json::json!({"id": i, "name": format!("item {i}"), "open": i % 2 == 0}))
        .collect();
    let lines = [
        serde_json::json!({"tool": "list", "body": rows}),
        serde_json::json!({"tool": "list", "body": rows}),
        serde_json::json!({"tool": "get", "body": {"id": 1, "title": "an object body"}}),
        serde_json::json!({"tool": "text", "body": "plain text body"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&capture, text).unwrap();
    let (out, _) = run(
        &["replay", "--format", "json", capture.to_str().unwrap()],
        "",
    );
    let report: Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(report["results"], 4, "{report}");
    for table in ["by_shape", "by_format"] {
        let sum: u64 = report[table]
            .as_object()
            .unwrap()
            .values()
            .map(|b| b["results"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, 4, "{table} adds up to the results: {report}");
    }
    let (table, _) = run(&["replay", capture.to_str().unwrap()], "");
    let widths: Vec<usize> = table
        .lines()
        .filter(|l| {
            [
                "raw (as replayed)",
                "json_compact",
                "json_pretty",
                "final (",
            ]
            .iter()
            .any(|k| l.trim_start().starts_with(k))
        })
        .map(|l| l.trim_end().chars().count())
        .collect();
    assert_eq!(widths.len(), 4, "{table}");
    assert!(widths.iter().all(|w| *w == widths[0]), "aligned:\n{table}");
    let _ = std::fs::remove_dir_all(&dir);
}
