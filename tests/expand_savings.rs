//! Savings counted honestly when the model expands what devboy left out,
//! through the real binary and the real server-filesystem: a re-read
//! becomes a reference and the model (this test's client) expands its id;
//! a big file is elided and the model expands it whole, then the lines its
//! hint names. `devboy_status` moves by exactly the tokens each expansion
//! delivered (a repeat of what the model was shown taken from the saving,
//! parts it was never shown added to the baseline too), and `devboy tune
//! report --format json` over the session's telemetry gives the same
//! figures. A session killed with SIGKILL, which writes no summary, is
//! reported from its result and expansion events.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{peer_toml, text_of, Devboy, RawClient, TempDir};
use devboy_pipeline::{hints, Tokenizer};
use devboy_testkit::peers;
use serde_json::{json, Value};

/// A small budget, so that a 3,000-line file is elided.
const PIPELINE: &str = "schema_version = 3\n[encoding]\nbudget_tokens = 450\n";

/// A file of `lines` numbered lines.
fn file_text(lines: usize) -> String {
    (1..=lines)
        .map(|i| format!("line {i}: fn step_{i}(input: &str) -> usize {{ input.len() }}\n"))
        .collect()
}

/// The tokens of `text` as the session counts them (its model is not
/// known, so o200k, which status names).
fn tokens(text: &str) -> i64 {
    Tokenizer::O200k.count(text) as i64
}

/// Polls the events until `done` holds of them (15 s at most).
async fn wait_for_events(telemetry: &Path, what: &str, done: impl Fn(&[Value]) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !done(&common::events(telemetry)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} within 15 s: {:#?}",
            common::events(telemetry)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// `n(event, key)` for every event, summed.
fn sum(events: &[&Value], key: &str) -> i64 {
    events
        .iter()
        .map(|e| e[key].as_i64().unwrap_or_else(|| panic!("{key} in {e}")))
        .sum()
}

/// `devboy tune report --format json` over `telemetry`, names from
/// `config_dir`.
fn report(telemetry: &Path, config_dir: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_devboy"))
        .args(["tune", "report", "--format", "json"])
        .env("DEVBOY_TELEMETRY_DIR", telemetry)
        .env("DEVBOY_CONFIG_DIR", config_dir)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("DEVBOY_TELEMETRY")
        .output()
        .expect("run devboy tune report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the report is JSON")
}

/// The pipeline's figures in a `devboy_status`.
struct Figures {
    raw: i64,
    fin: i64,
    savings: Value,
}

impl Figures {
    fn of(status: &Value) -> Self {
        let savings = status["session"]["savings"].clone();
        assert_eq!(savings["tokenizer"], "o200k_base", "{savings:#}");
        Self {
            raw: savings["tokens_raw"].as_i64().unwrap(),
            fin: savings["tokens_final"].as_i64().unwrap(),
            savings,
        }
    }

    fn pct(&self, key: &str) -> f64 {
        self.savings[key].as_f64().unwrap()
    }

    /// The combined saving as status rounds it.
    fn combined(&self) -> f64 {
        ((self.raw - self.fin) as f64 * 1000.0 / self.raw as f64).round() / 10.0
    }
}

/// The `lines=` range an elision hint names: `812-3094`.
fn hinted_range(hint: &str) -> String {
    let (_, range) = hint
        .rsplit_once(" lines=")
        .unwrap_or_else(|| panic!("no lines= in {hint}"));
    range.trim_end_matches(']').to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn expanded_tokens_are_taken_from_the_savings_live_and_in_the_report() {
    let work = TempDir::new("expand-savings");
    let root = work.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    // Within the budget (and big enough for an id); far over it.
    std::fs::write(root.join("small.rs"), file_text(15)).unwrap();
    std::fs::write(root.join("big.rs"), file_text(3000)).unwrap();
    let root = root.canonicalize().unwrap();
    let telemetry = work.path().join("telemetry");
    let runtime = work.path().join("run");
    let devboy = Devboy::start_with_env(
        &peer_toml("fs", &peers::server_filesystem(&root)),
        Some(PIPELINE),
        &[
            ("DEVBOY_TELEMETRY", "on".as_ref()),
            ("DEVBOY_TELEMETRY_DIR", telemetry.as_os_str()),
            ("DEVBOY_RUNTIME_DIR", runtime.as_os_str()),
        ],
    )
    .await;
    let read = |name: &str| json!({"path": root.join(name).display().to_string()});

    // A re-read is a reference; the model expands its id.
    let first = devboy.call("fs__read_text_file", read("small.rs")).await;
    assert!(
        text_of(&first).contains("> [id: "),
        "a fresh read with its id: {first:?}"
    );
    let again = devboy.call("fs__read_text_file", read("small.rs")).await;
    let reference = text_of(&again);
    let id = hints::parse_reference(&reference)
        .unwrap_or_else(|| panic!("a reference: {reference}"))
        .to_owned();
    let before = Figures::of(&devboy.status().await);
    let expanded = devboy.call("devboy_expand", json!({"id": id})).await;
    assert_ne!(expanded.is_error, Some(true), "{expanded:?}");
    let repeat = tokens(&text_of(&expanded));
    assert!(repeat > 100, "the file again: {repeat} tokens");
    let after = Figures::of(&devboy.status().await);
    assert_eq!(after.raw, before.raw, "nothing new for the model");
    assert_eq!(after.fin, before.fin + repeat, "what it received again");
    assert_eq!(after.combined(), after.pct("combined_savings_pct"));
    assert!(after.pct("combined_savings_pct") < before.pct("combined_savings_pct"));
    assert!(after.pct("dedup_savings_pct") < before.pct("dedup_savings_pct"));
    assert_eq!(
        after.pct("encoder_savings_pct"),
        before.pct("encoder_savings_pct")
    );
    assert_eq!(
        after.savings["expanded"],
        json!({"calls": 1, "tokens": repeat, "again_tokens": repeat, "new_tokens": 0})
    );

    // A big file is elided: expanded whole it shows its head again (a
    // cost); the lines its hint names are new.
    let big = text_of(&devboy.call("fs__read_text_file", read("big.rs")).await);
    let hint = big
        .lines()
        .find(|l| l.starts_with("> [elided lines "))
        .unwrap_or_else(|| panic!("an elided file: {}", &big[big.len() - 300..]))
        .to_owned();
    let big_id = hints::parse_elided(&hint).unwrap().to_owned();
    let range = hinted_range(&hint);
    let elided = Figures::of(&devboy.status().await);
    let whole = devboy.call("devboy_expand", json!({"id": big_id})).await;
    assert_ne!(whole.is_error, Some(true), "{whole:?}");
    let head = tokens(&text_of(&whole));
    let whole_figures = Figures::of(&devboy.status().await);
    assert_eq!(whole_figures.raw, elided.raw);
    assert_eq!(whole_figures.fin, elided.fin + head);
    assert!(whole_figures.pct("encoder_savings_pct") < elided.pct("encoder_savings_pct"));
    assert_eq!(
        whole_figures.pct("dedup_savings_pct"),
        elided.pct("dedup_savings_pct")
    );
    let part = devboy
        .call("devboy_expand", json!({"id": big_id, "lines": range}))
        .await;
    assert_ne!(part.is_error, Some(true), "{part:?}");
    let unseen = tokens(&text_of(&part));
    assert!(unseen > 0);
    let end = Figures::of(&devboy.status().await);
    assert_eq!(end.raw, whole_figures.raw + unseen, "new: in the baseline");
    assert_eq!(end.fin, whole_figures.fin + unseen, "and received");
    assert_eq!(end.raw - end.fin, whole_figures.raw - whole_figures.fin);
    assert_eq!(
        end.savings["expanded"],
        json!({
            "calls": 3,
            "tokens": repeat + head + unseen,
            "again_tokens": repeat + head,
            "new_tokens": unseen,
        })
    );

    // `devboy status`, over the control socket, shows the same figures.
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_devboy"))
            .args(args)
            .env("DEVBOY_RUNTIME_DIR", &runtime)
            .output()
            .expect("run devboy status");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let listed: Value = serde_json::from_str(&cli(&["status", "--format", "json"])).unwrap();
    let savings = &listed["processes"][0]["sessions"][0]["savings"];
    assert_eq!(savings["tokens_final"], end.fin, "{listed}");
    assert_eq!(savings["expanded"], end.savings["expanded"], "{listed}");
    let text = cli(&["status"]);
    assert!(
        text.contains(&format!(
            "{} tokens as sent, {} to the model ({:.1}% saved;",
            end.raw,
            end.fin,
            (end.raw - end.fin) as f64 * 100.0 / end.raw as f64
        )) && text.contains(&format!(
            "devboy_expand delivered {} of those in 3 calls, {} of them again",
            repeat + head + unseen,
            repeat + head
        )),
        "{text}"
    );

    // The session ends cleanly: its summary and events say the same.
    let Devboy { client, dir, .. } = devboy;
    let _ = client.cancel().await;
    wait_for_events(&telemetry, "session summary", |e| {
        !kind(e, "session").is_empty()
    })
    .await;
    let all = common::events(&telemetry);
    let results = kind(&all, "result");
    let expansions = kind(&all, "expansion");
    let delivered: Vec<(&Value, i64)> = expansions
        .iter()
        .map(|x| (&x["delivered"], x["tokens"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        delivered,
        [
            (&json!("again"), repeat),
            (&json!("again_elided"), head),
            (&json!("new"), unseen),
        ]
    );
    assert!(expansions.iter().all(|x| x["tool"] == results[0]["tool"]));
    let summary = kind(&all, "session")[0];
    assert_eq!(summary["tokens_final"], end.fin, "{summary}");
    assert_eq!(summary["tokens_baseline"], end.raw, "{summary}");
    assert_eq!(summary["expanded"]["tokens"], repeat + head + unseen);

    // The report: the results' saving less exactly what was delivered again.
    let results_saved = sum(&results, "tokens_baseline") - sum(&results, "tokens_final");
    let r = report(&telemetry, dir.path());
    let total = &r["total"];
    assert_eq!(total["calls"], results.len(), "{total}");
    assert_eq!(total["tokens_baseline"], end.raw, "{total}");
    assert_eq!(total["tokens_final"], end.fin, "{total}");
    assert_eq!(
        total["tokens_saved"],
        results_saved - repeat - head,
        "{total}"
    );
    assert_eq!(
        total["dedup_saved"],
        sum(&results, "dedup_saved") - repeat,
        "{total}"
    );
    assert_eq!(
        total["encoder_saved"],
        sum(&results, "encoder_saved") - head,
        "{total}"
    );
    assert_eq!(
        total["expanded"],
        json!({"calls": 3, "tokens": repeat + head + unseen, "again_tokens": repeat + head})
    );
    let tools = r["tools"].as_array().unwrap();
    assert_eq!(
        tools.len(),
        1,
        "expansions count under the tool they expand: {tools:?}"
    );
    assert_eq!(tools[0]["tool"], "fs__read_text_file");
    assert_eq!(tools[0]["tokens_saved"], total["tokens_saved"]);
    assert_eq!(r["read"]["expansions"], 3);
}

/// A session killed with SIGKILL writes no summary: the report counts it
/// from the events it wrote, the expansion's cost included.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_session_is_counted_from_its_events() {
    let work = TempDir::new("expand-killed");
    let root = work.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("small.rs"), file_text(40)).unwrap();
    let root = root.canonicalize().unwrap();
    let config = work.path().join("devboy.toml");
    std::fs::write(&config, peer_toml("fs", &peers::server_filesystem(&root))).unwrap();
    let telemetry = work.path().join("telemetry");
    let config_dir = work.path().join("config");
    let (config_arg, telemetry_arg, config_dir_arg) = (
        config.display().to_string(),
        telemetry.display().to_string(),
        config_dir.display().to_string(),
    );
    let mut client = RawClient::start_command(
        &["mcp", "--config", &config_arg, "--list-grace-ms", "30000"],
        &[
            ("DEVBOY_TELEMETRY", "on"),
            ("DEVBOY_TELEMETRY_DIR", &telemetry_arg),
            ("DEVBOY_CONFIG_DIR", &config_dir_arg),
        ],
    )
    .await;
    let path = root.join("small.rs").display().to_string();
    let text = |response: Value| {
        response["result"]["content"]
            .as_array()
            .unwrap_or_else(|| panic!("a result: {response}"))
            .iter()
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    for id in [1, 2] {
        let read = client
            .call_tool(id, "fs__read_text_file", json!({"path": path}))
            .await;
        assert_eq!(read["result"]["isError"], Value::Null, "{read}");
        if id == 2 {
            let reference = text(read);
            let ref_id = hints::parse_reference(&reference)
                .unwrap_or_else(|| panic!("a reference: {reference}"))
                .to_owned();
            let expanded = client
                .call_tool(3, "devboy_expand", json!({"id": ref_id}))
                .await;
            let expanded = text(expanded);
            assert!(expanded.contains("line 40:"), "{expanded}");
        }
    }
    // Written by then (the writer thread may lag the answer), and then
    // the process is killed.
    wait_for_events(&telemetry, "expansion event", |e| {
        kind(e, "result").len() == 2 && kind(e, "expansion").len() == 1
    })
    .await;
    let status = client.kill_with("KILL").await;
    assert!(!status.success());
    let all = common::events(&telemetry);
    assert!(kind(&all, "session").is_empty(), "killed: no summary");
    let results = kind(&all, "result");
    let expanded = kind(&all, "expansion")[0]["tokens"].as_i64().unwrap();

    let r = report(&telemetry, &config_dir);
    let sessions = r["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let session = &sessions[0];
    assert_eq!(session["client"], Value::Null, "no summary: {session}");
    assert_eq!(session["calls"], 2);
    assert_eq!(
        session["tokens_final"],
        sum(&results, "tokens_final") + expanded,
        "{session}"
    );
    assert_eq!(
        session["tokens_saved"],
        sum(&results, "tokens_baseline") - sum(&results, "tokens_final") - expanded,
        "{session}"
    );
    assert_eq!(
        session["dedup_saved"],
        sum(&results, "dedup_saved") - expanded
    );
    assert_eq!(r["total"]["tokens_final"], session["tokens_final"]);
}
