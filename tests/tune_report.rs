//! `devboy tune report` on real telemetry: two real `devboy mcp` sessions
//! over the real filesystem and memory servers write their events, the
//! report (text, JSON, HTML) is checked against sums computed here from
//! the events files themselves, and the HTML page is rendered by a real
//! headless chromium, its screenshot decoded by chromium's own image
//! decoder and checked for the charts' bars. `tune analyze` run on the
//! same telemetry sums the same figures per tool.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{peer_toml, Devboy, TempDir};
use devboy_testkit::peers;
use devboy_tune::synthetic::{EndpointSpec, Workload};
use devboy_tune::table::int;
use serde_json::{json, Value};

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");

/// The fill of a bar that saved tokens, as red, green, blue.
fn bar_rgb() -> [u8; 3] {
    let hex = devboy_tune::savings::html::SAVED_FILL.trim_start_matches('#');
    let channel = |i: usize| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("#rrggbb");
    [channel(0), channel(1), channel(2)]
}

/// `devboy ARGS…` with this config and telemetry directory.
fn devboy(config: &Path, telemetry: &Path, args: &[&str]) -> Output {
    let out = Command::new(DEVBOY)
        .args(args)
        .env("DEVBOY_CONFIG_DIR", config)
        .env("DEVBOY_TELEMETRY_DIR", telemetry)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("DEVBOY_TELEMETRY")
        .output()
        .expect("run devboy");
    assert!(
        out.status.success(),
        "devboy {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `devboy tune report --format json --html PAGE`: the JSON report (the
/// page is left at `page`).
fn json_report_with_page(config: &Path, telemetry: &Path, page: &Path) -> Value {
    let out = devboy(
        config,
        telemetry,
        &[
            "tune",
            "report",
            "--format",
            "json",
            "--html",
            page.to_str().unwrap(),
        ],
    );
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

/// One real session: devboy over server-filesystem (rooted at `root`)
/// and server-memory, listed once, `calls` made, then closed; waits for
/// its summary (`sessions_before + 1` in all).
async fn session(
    telemetry: &Path,
    config_dir: &Path,
    root: &Path,
    memory: &Path,
    calls: &[(&str, Value)],
    sessions_before: usize,
) {
    let config = format!(
        "{}{}",
        peer_toml("fs", &peers::server_filesystem(root)),
        peer_toml("mem", &peers::server_memory(memory))
    );
    let devboy = Devboy::start_with_env(
        &config,
        None,
        &[
            ("DEVBOY_TELEMETRY_DIR", telemetry.as_os_str()),
            // One names map for both sessions, as for a user.
            ("DEVBOY_CONFIG_DIR", config_dir.as_os_str()),
        ],
    )
    .await;
    let names = devboy.tool_names().await;
    for (tool, args) in calls {
        assert!(names.iter().any(|n| n == tool), "{tool} not in {names:?}");
        let result = devboy.call(tool, args.clone()).await;
        assert_ne!(result.is_error, Some(true), "{tool}: {result:?}");
    }
    let Devboy { client, .. } = devboy;
    let _ = client.cancel().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let summaries = common::events(telemetry)
            .iter()
            .filter(|e| e["kind"] == "session")
            .count();
        if summaries > sessions_before {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no session summary within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sums of the figures of a group of result events.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Sums {
    calls: i64,
    baseline: i64,
    fin: i64,
    dedup: i64,
    encoder: i64,
}

impl Sums {
    fn add(&mut self, e: &Value) {
        let n = |k: &str| e[k].as_i64().unwrap_or_else(|| panic!("{k} in {e}"));
        self.calls += 1;
        self.baseline += n("tokens_baseline");
        self.fin += n("tokens_final");
        self.dedup += n("dedup_saved");
        self.encoder += n("encoder_saved");
    }

    /// Checks a row of the JSON report.
    fn check(&self, row: &Value, what: &str) {
        let got = Sums {
            calls: row["calls"].as_i64().unwrap(),
            baseline: row["tokens_baseline"].as_i64().unwrap(),
            fin: row["tokens_final"].as_i64().unwrap(),
            dedup: row["dedup_saved"].as_i64().unwrap(),
            encoder: row["encoder_saved"].as_i64().unwrap(),
        };
        assert_eq!(&got, self, "{what}: {row}");
        assert_eq!(
            row["tokens_saved"].as_i64(),
            Some(self.baseline - self.fin),
            "{what}"
        );
    }

    /// The figure cells of a text row: calls, baseline, received, saved,
    /// saved %, dedup, encoder (numbers as the tables print them).
    fn cells(&self) -> Vec<String> {
        let saved = self.baseline - self.fin;
        vec![
            int(self.calls),
            int(self.baseline),
            int(self.fin),
            int(saved),
            format!("{:.1}", saved as f64 * 100.0 / self.baseline as f64),
            int(self.dedup),
            int(self.encoder),
        ]
    }
}

fn utc_date(ts_ms: i64) -> String {
    let (y, m, d) = devboy_core::date::civil_from_days(ts_ms.div_euclid(86_400_000));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The dates (`YYYY-MM-DD`, UTC) from the day of `first_ms` to the day of
/// `last_ms`, both included.
fn dates_between(first_ms: i64, last_ms: i64) -> Vec<String> {
    const DAY: i64 = 86_400_000;
    (first_ms.div_euclid(DAY)..=last_ms.div_euclid(DAY))
        .map(|d| utc_date(d * DAY))
        .collect()
}

/// The report's days (JSON) are every date from the first day with
/// results (that of `first_ms`) to the window's last day; days with
/// results have the figures of `expected`, the others zero.
fn check_days(report: &Value, expected: &BTreeMap<String, Sums>, first_ms: i64) {
    let rows = report["days"].as_array().expect("days");
    let dates: Vec<&str> = rows.iter().map(|d| d["date"].as_str().unwrap()).collect();
    let until_ms = report["window"]["until_ms"].as_i64().unwrap();
    assert_eq!(
        dates,
        dates_between(first_ms, until_ms),
        "days without gaps"
    );
    for row in rows {
        let date = row["date"].as_str().unwrap();
        expected
            .get(date)
            .copied()
            .unwrap_or_default()
            .check(row, &format!("day {date}"));
    }
}

/// `devboy tune analyze` on the same telemetry: the per-endpoint figures
/// it leaves for `tune show` (the machine-readable output it has) are the
/// report's per-tool figures, and they add up to the report's total.
fn assert_analyze_agrees(config: &Path, telemetry: &Path, work: &Path, report: &Value) {
    let output = work.join("analyze-pipeline_config.toml");
    devboy(
        config,
        telemetry,
        &["tune", "analyze", "--output", output.to_str().unwrap()],
    );
    let summary: Value = serde_json::from_slice(
        &std::fs::read(telemetry.join(devboy_tune::show::SUMMARY_FILE))
            .expect("tune analyze leaves its summary"),
    )
    .unwrap();
    let endpoints = summary["endpoints"].as_array().unwrap();
    let tools = report["tools"].as_array().unwrap();
    assert_eq!(endpoints.len(), tools.len(), "{summary}");
    let figures = ["calls", "tokens_baseline", "dedup_saved", "encoder_saved"];
    let mut sums = [0i64; 4];
    for e in endpoints {
        let tool = tools
            .iter()
            .find(|t| t["id"] == e["tool"])
            .unwrap_or_else(|| panic!("{} in the report", e["tool"]));
        for (i, key) in figures.iter().enumerate() {
            assert_eq!(e[key], tool[key], "{key} of {}", tool["tool"]);
            sums[i] += e[key].as_i64().unwrap();
        }
    }
    for (i, key) in figures.iter().enumerate() {
        assert_eq!(Some(sums[i]), report["total"][key].as_i64(), "total {key}");
    }
}

/// The rows of the text table titled `title`: from its header to its
/// totals row, each split on runs of two or more spaces.
fn text_rows(text: &str, title: &str) -> Vec<Vec<String>> {
    let start = text
        .find(&format!("\n{title}"))
        .unwrap_or_else(|| panic!("no {title:?} in {text}"));
    text[start..]
        .lines()
        // The blank line, the title, the header.
        .skip(3)
        .filter(|l| !l.starts_with("---"))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect::<Vec<String>>()
        })
        .scan(false, |ended, row| {
            // Up to and with the totals row.
            let take = !*ended;
            *ended |= row.first().is_some_and(|c| c == "total");
            take.then_some(row)
        })
        .collect()
}

/// A bar of a chart, read back from the page's SVG.
#[derive(Debug)]
struct SvgBar {
    label: String,
    value: i64,
    height: f64,
}

/// The bars of the `<svg id="ID">` in `html`.
fn svg_bars(html: &str, id: &str) -> Vec<SvgBar> {
    let start = html
        .find(&format!("<svg id=\"{id}\""))
        .unwrap_or_else(|| panic!("no chart {id}"));
    let svg = &html[start..start + html[start..].find("</svg>").unwrap()];
    svg.split("<rect class=\"bar\"")
        .skip(1)
        .map(|rest| {
            let tag = &rest[..rest.find('>').unwrap()];
            let attr = |name: &str| {
                let key = format!(" {name}=\"");
                let from = tag.find(&key).unwrap_or_else(|| panic!("{name} in {tag}")) + key.len();
                tag[from..from + tag[from..].find('"').unwrap()].to_owned()
            };
            SvgBar {
                label: attr("data-label"),
                value: attr("data-value").parse().unwrap(),
                height: attr("height").parse().unwrap(),
            }
        })
        .collect()
}

/// Bars as tall as their values, on one scale.
fn assert_heights_proportional(bars: &[SvgBar]) {
    let Some(top) = bars.iter().max_by_key(|b| b.value.abs()) else {
        return;
    };
    assert!(top.value != 0 && top.height > 0.0, "{bars:?}");
    let per_token = top.height / top.value.unsigned_abs() as f64;
    for b in bars {
        assert!(
            (b.height - b.value.unsigned_abs() as f64 * per_token).abs() < 0.05,
            "bar {} ({} tokens) is {} high, expected {}: {bars:?}",
            b.label,
            b.value,
            b.height,
            b.value.unsigned_abs() as f64 * per_token
        );
    }
}

/// The installed chromium; the test fails without it (tests/peers/install.sh
/// installs it).
fn chromium() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("chromium"))
        .find(|p| p.is_file())
        .expect("chromium not installed: run tests/peers/install.sh")
}

/// Runs headless chromium in `dir`, each run with a fresh profile there
/// (nothing of the user's, nothing left from an earlier run).
fn chromium_headless(dir: &Path, args: &[&OsStr]) -> Output {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mut profile = std::ffi::OsString::from("--user-data-dir=");
    profile.push(dir.join(format!(
        "chromium-profile-{}",
        RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )));
    let out = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .arg(profile)
        .args(args)
        // Its profile and crash reports stay in the test's directory.
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join("xdg-config"))
        .env("XDG_CACHE_HOME", dir.join("xdg-cache"))
        .current_dir(dir)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// What chromium decodes of a PNG: its size, its distinct colours and
/// how many pixels have the bars' fill.
fn decode_in_chromium(dir: &Path, png: &Path) -> Value {
    let page = dir.join("decode.html");
    std::fs::write(
        &page,
        format!(
            r#"<!DOCTYPE html><html><body><script>
const img = new Image();
img.onload = () => {{
  const c = document.createElement('canvas');
  c.width = img.width; c.height = img.height;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, img.width, img.height).data;
  const colors = new Set(); let bar = 0;
  for (let i = 0; i < d.length; i += 4) {{
    colors.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    if (Math.abs(d[i] - {}) <= 6 && Math.abs(d[i + 1] - {}) <= 6 && Math.abs(d[i + 2] - {}) <= 6) bar++;
  }}
  const out = document.createElement('pre');
  out.id = 'decoded';
  out.textContent = JSON.stringify({{width: img.width, height: img.height, colors: colors.size, bar}});
  document.body.appendChild(out);
}};
img.onerror = () => {{ document.body.insertAdjacentHTML('beforeend', '<pre id="decoded">{{"error": "not a PNG"}}</pre>'); }};
img.src = {};
</script></body></html>"#,
            bar_rgb()[0],
            bar_rgb()[1],
            bar_rgb()[2],
            json!(png.file_name().unwrap().to_str().unwrap())
        ),
    )
    .unwrap();
    let mut url = std::ffi::OsString::from("file://");
    url.push(&page);
    let out = chromium_headless(
        dir,
        &[
            OsStr::new("--allow-file-access-from-files"),
            OsStr::new("--dump-dom"),
            &url,
        ],
    );
    let dom = stdout(&out);
    // The last: the script's own text, earlier in the dump, holds the
    // error element's markup too.
    let start = dom
        .rfind("<pre id=\"decoded\">")
        .unwrap_or_else(|| panic!("chromium did not decode the screenshot: {dom}"))
        + "<pre id=\"decoded\">".len();
    let text = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Renders `page` in headless chromium at 1200×900 and checks the
/// screenshot: a PNG of that size, not blank, with the bars drawn.
fn assert_renders_with_bars(dir: &Path, page: &Path) {
    let shot = dir.join("screenshot.png");
    let _ = std::fs::remove_file(&shot);
    let mut screenshot = std::ffi::OsString::from("--screenshot=");
    screenshot.push(&shot);
    let mut url = std::ffi::OsString::from("file://");
    url.push(page);
    chromium_headless(
        dir,
        &[
            &screenshot,
            OsStr::new("--window-size=1200,900"),
            OsStr::new("--hide-scrollbars"),
            &url,
        ],
    );
    let bytes = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    let decoded = decode_in_chromium(dir, &shot);
    assert_eq!(
        (&decoded["width"], &decoded["height"]),
        (&json!(1200), &json!(900)),
        "{decoded}"
    );
    // A blank page is one colour; text and charts give many.
    assert!(decoded["colors"].as_u64().unwrap() > 20, "{decoded}");
    // Bars: at least a few thousand pixels of their fill.
    assert!(decoded["bar"].as_u64().unwrap() > 2_000, "{decoded}");
}

#[tokio::test(flavor = "multi_thread")]
async fn report_on_real_sessions_adds_up_and_renders_in_chromium() {
    let work = TempDir::new("tune-report");
    let telemetry = work.path().join("telemetry");
    let config_dir = work.path().join("config");
    let root = work.path().join("project");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    let notes = root.join("notes.md");
    std::fs::write(
        &notes,
        "| id | title | state |\n|---|---|---|\n".to_owned()
            + &(0..120)
                .map(|i| format!("| {i} | issue number {i} about the parser | open |\n"))
                .collect::<String>(),
    )
    .unwrap();
    for i in 0..30 {
        std::fs::write(root.join("src").join(format!("m{i}.rs")), "fn f() {}\n").unwrap();
    }
    let memory = work.path().join("memory.jsonl");
    let read = json!({"path": notes.to_str().unwrap()});
    let list = json!({"path": root.join("src").to_str().unwrap()});
    let entities = json!({"entities": (0..12).map(|i| json!({
        "name": format!("module_{i}"), "entityType": "module",
        "observations": [format!("module {i} parses the input"), "owned by the parser team"],
    })).collect::<Vec<_>>()});

    session(
        &telemetry,
        &config_dir,
        &root,
        &memory,
        &[
            ("fs__read_text_file", read.clone()),
            ("fs__read_text_file", read.clone()),
            ("fs__list_directory", list.clone()),
            ("fs__list_directory", list.clone()),
            ("mem__create_entities", entities),
            ("mem__read_graph", json!({})),
            ("mem__read_graph", json!({})),
        ],
        0,
    )
    .await;
    session(
        &telemetry,
        &config_dir,
        &root,
        &memory,
        &[
            ("fs__read_text_file", read.clone()),
            ("fs__read_text_file", read),
            ("mem__read_graph", json!({})),
        ],
        1,
    )
    .await;

    // The figures, summed here from the events files.
    let all = common::events(&telemetry);
    let names: BTreeMap<String, String> = serde_json::from_slice(
        &std::fs::read(config_dir.join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME)).unwrap(),
    )
    .unwrap();
    let mut total = Sums::default();
    let mut days: BTreeMap<String, Sums> = BTreeMap::new();
    let mut sessions: BTreeMap<String, Sums> = BTreeMap::new();
    let mut servers: BTreeMap<String, Sums> = BTreeMap::new();
    let mut tools: BTreeMap<String, Sums> = BTreeMap::new();
    for e in all.iter().filter(|e| e["kind"] == "result") {
        let tool = &names[e["tool"].as_str().unwrap()];
        total.add(e);
        days.entry(utc_date(e["ts_ms"].as_i64().unwrap()))
            .or_default()
            .add(e);
        sessions
            .entry(e["session"].as_str().unwrap().to_owned())
            .or_default()
            .add(e);
        servers
            .entry(tool.split("__").next().unwrap().to_owned())
            .or_default()
            .add(e);
        tools.entry(tool.clone()).or_default().add(e);
    }
    assert_eq!(total.calls, 10, "one event per call: {all:#?}");
    assert_eq!(sessions.len(), 2);
    assert_eq!(servers.len(), 2);
    assert!(total.dedup > 0, "the repeats were references: {total:?}");
    assert!(total.baseline > total.fin, "{total:?}");
    let summaries: BTreeMap<String, &Value> = all
        .iter()
        .filter(|e| e["kind"] == "session")
        .map(|e| (e["session"].as_str().unwrap().to_owned(), e))
        .collect();

    // JSON.
    let report: Value = serde_json::from_str(&stdout(&devboy(
        &config_dir,
        &telemetry,
        &["tune", "report", "--format", "json"],
    )))
    .expect("one JSON object");
    assert_eq!(report["version"], 2);
    assert_eq!(report["estimated"], false);
    assert_eq!(report["tokenizers"], json!(["o200k_base"]));
    assert_eq!(report["read"]["results"], 10);
    assert_eq!(report["read"]["sessions"], 2);
    assert_eq!(report["read"]["malformed"], 0);
    total.check(&report["total"], "total");
    let rows = |key: &str, name: &str| -> BTreeMap<String, Value> {
        report[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r[name].as_str().unwrap().to_owned(), r.clone()))
            .collect()
    };
    let first_ms = all
        .iter()
        .filter(|e| e["kind"] == "result")
        .map(|e| e["ts_ms"].as_i64().unwrap())
        .min()
        .unwrap();
    check_days(&report, &days, first_ms);
    for (key, name, expected) in [
        ("sessions", "session", &sessions),
        ("servers", "server", &servers),
        ("tools", "tool", &tools),
    ] {
        let got = rows(key, name);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "{key}"
        );
        for (k, sums) in expected {
            sums.check(&got[k], &format!("{key} {k}"));
        }
    }
    for (id, row) in rows("sessions", "session") {
        let summary = summaries[&id];
        assert_eq!(row["client"], summary["client"]);
        assert_eq!(
            row["definitions"], summary["definitions"],
            "definitions as the summary recorded them"
        );
        assert!(row["definitions"]["tokens"].as_u64().unwrap() > 0);
        for (figure, field) in [
            ("tokens_baseline", "tokens_baseline"),
            ("tokens_final", "tokens_final"),
            ("dedup_saved", "dedup_saved"),
            ("encoder_saved", "encoder_saved"),
        ] {
            assert_eq!(row[figure], summary[field], "{id} {figure}");
        }
    }
    for (name, row) in rows("tools", "tool") {
        assert_eq!(row["server"], name.split("__").next().unwrap());
    }

    // Text: each table's rows and its totals row.
    let text = stdout(&devboy(&config_dir, &telemetry, &["tune", "report"]));
    // The day table has every day from the first with results to today
    // (one, unless the sessions ran over midnight), days without at zero.
    let day_dates: Vec<String> = report["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["date"].as_str().unwrap().to_owned())
        .collect();
    for (title, expected, lead, rows) in [
        ("Savings per day (UTC)", &days, 1, day_dates.len()),
        ("Savings per server", &servers, 1, servers.len()),
        ("Savings per tool", &tools, 1, tools.len()),
        ("Savings per session", &sessions, 3, sessions.len()),
    ] {
        let table = text_rows(&text, title);
        assert_eq!(table.len(), rows + 1, "{title}:\n{text}");
        for (key, sums) in expected {
            let row = table
                .iter()
                .find(|r| &r[0] == key)
                .unwrap_or_else(|| panic!("{key} in {title}:\n{text}"));
            assert_eq!(
                row[lead..lead + 7],
                sums.cells()[..],
                "{title} {key}:\n{text}"
            );
        }
        let last = table.last().unwrap();
        assert_eq!(last[0], "total");
        assert_eq!(last[1..8], total.cells()[..], "{title} total:\n{text}");
    }

    // A damaged line is skipped and counted; the figures hold.
    let file = std::fs::read_dir(telemetry.join("events"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .max()
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(b"{\"v\":1,\"kind\":\"result\",\"ts_ms\":\n");
    std::fs::write(&file, bytes).unwrap();
    let damaged = stdout(&devboy(&config_dir, &telemetry, &["tune", "report"]));
    assert!(damaged.contains("skipped: 1 damaged line\n"), "{damaged}");
    let json_damaged: Value = serde_json::from_str(&stdout(&devboy(
        &config_dir,
        &telemetry,
        &["tune", "report", "--format", "json"],
    )))
    .unwrap();
    assert_eq!(json_damaged["read"]["malformed"], 1);
    total.check(&json_damaged["total"], "total with a damaged line");

    // HTML: self-contained, one bar per server at the right height, and
    // rendered by chromium.
    let page = work.path().join("savings.html");
    devboy(
        &config_dir,
        &telemetry,
        &["tune", "report", "--html", page.to_str().unwrap()],
    );
    let html = std::fs::read_to_string(&page).unwrap();
    for outside in ["<script", " src=", " href=", "url(", "@import", "<link"] {
        assert!(!html.contains(outside), "{outside} in the page");
    }
    let bars = svg_bars(&html, "chart-servers");
    let got: BTreeMap<&str, i64> = bars.iter().map(|b| (b.label.as_str(), b.value)).collect();
    let want: BTreeMap<&str, i64> = servers
        .iter()
        .map(|(k, s)| (k.as_str(), s.baseline - s.fin))
        .collect();
    assert_eq!(got, want);
    assert_heights_proportional(&bars);
    let day_bars = svg_bars(&html, "chart-days");
    assert_eq!(
        day_bars.iter().map(|b| &b.label).collect::<Vec<_>>(),
        day_dates.iter().collect::<Vec<_>>()
    );
    for bar in &day_bars {
        let s = days.get(&bar.label).copied().unwrap_or_default();
        assert_eq!(bar.value, s.baseline - s.fin);
    }
    assert_heights_proportional(&day_bars);
    for tool in tools.keys() {
        assert!(
            html.contains(&format!("<td>{tool}</td>")),
            "{tool} in a table"
        );
    }
    assert_renders_with_bars(work.path(), &page);

    assert_analyze_agrees(&config_dir, &telemetry, work.path(), &report);
}

/// A week of telemetry over several days, with a tool name that is
/// markup: one bar per day, as tall as its saving, and every name escaped.
#[test]
fn the_page_charts_each_day_and_escapes_names() {
    let work = TempDir::new("tune-report-days");
    let telemetry = work.path().join("telemetry");
    let config_dir = work.path().join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    let now = devboy_tune::now_ms();
    let spec = EndpointSpec::new;
    let workload = Workload {
        endpoints: vec![
            EndpointSpec {
                shape: "markdown_table",
                chars: 8000,
                dup_rate: 0.3,
                template: Some("md_tables_csv"),
                encoder_ratio: 0.45,
                weight: 3,
                ..spec("gh__list_issues")
            },
            EndpointSpec {
                chars: 3000,
                encoder_ratio: 0.2,
                weight: 2,
                ..spec("<img src=x onerror=alert(1)>__tool")
            },
        ],
        sessions: 5,
        events_per_session: 120,
        compactions_per_session: 0,
        // One after another over four days and a bit.
        interval_ms: 10 * 60 * 1000,
        start_ms: now - 5 * 86_400_000,
        malformed_every: 0,
        seed: 7,
    };
    workload.write(&telemetry.join("events")).unwrap();
    let names: serde_json::Map<String, Value> = workload
        .endpoints
        .iter()
        .map(|e| (e.hash(), json!(e.name)))
        .collect();
    std::fs::write(
        config_dir.join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME),
        Value::Object(names).to_string(),
    )
    .unwrap();

    let page = work.path().join("week.html");
    let report = json_report_with_page(&config_dir, &telemetry, &page);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<img"), "names are escaped");
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    let days = report["days"].as_array().unwrap();
    assert!(days.len() >= 3, "several days: {days:?}");
    let bars = svg_bars(&html, "chart-days");
    assert_eq!(bars.len(), days.len());
    for (bar, day) in bars.iter().zip(days) {
        assert_eq!(bar.label, day["date"].as_str().unwrap());
        assert_eq!(bar.value, day["tokens_saved"].as_i64().unwrap());
    }
    let values: Vec<i64> = bars.iter().map(|b| b.value).collect();
    assert!(
        values.iter().any(|v| *v != values[0]),
        "days differ: {values:?}"
    );
    assert_heights_proportional(&bars);
    let server_bars = svg_bars(&html, "chart-servers");
    assert_eq!(server_bars.len(), 2);
    assert!(server_bars
        .iter()
        .any(|b| b.label == "&lt;img src=x onerror=alert(1)&gt;"));
    assert_renders_with_bars(work.path(), &page);
    assert_analyze_agrees(&config_dir, &telemetry, work.path(), &report);
}

/// Two sessions with results every other day over twelve days, and two
/// sessions without a result event in the window: every day from the
/// first result to today is a row and a bar (zero when empty), every
/// session a row (the rows adding up to the total), and one line says
/// which sessions had no result.
#[test]
fn empty_days_and_sessions_without_results_are_shown() {
    const DAY: u64 = 86_400_000;
    let work = TempDir::new("tune-report-gaps");
    let telemetry = work.path().join("telemetry");
    let events_dir = telemetry.join("events");
    let config_dir = work.path().join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    let now = devboy_tune::now_ms();
    let workload = Workload {
        endpoints: vec![EndpointSpec {
            shape: "markdown_table",
            chars: 6000,
            encoder_ratio: 0.4,
            ..EndpointSpec::new("gh__list_issues")
        }],
        sessions: 2,
        events_per_session: 3,
        compactions_per_session: 0,
        // Results on days -12, -10, …, -2: a day without between each.
        interval_ms: 2 * DAY,
        start_ms: now - 12 * DAY,
        malformed_every: 0,
        seed: 3,
    };
    workload.write(&events_dir).unwrap();
    std::fs::write(
        config_dir.join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME),
        workload.names_json(),
    )
    .unwrap();
    // Two summaries without result events: a session whose four results
    // were all sampled out (rate 0.1), and one that speculated without a
    // tool result; both were served a tool list.
    let summary = |session: &str, results: u64, rate: f64| {
        format!(
            r#"{{"kind":"session","v":1,"ts_ms":{ts},"session":"{session}","started_ms":{start},"ended_ms":{ts},"events":0,"results":{results},"sample_rate":{rate},"tokens_baseline":0,"tokens_final":0,"dedup_saved":0,"encoder_saved":0,"compactions":0,"client":"claude-code","definitions":{{"tokens":5321,"tools":17,"lists":1}}}}"#,
            ts = now - DAY,
            start = now - DAY - 60_000,
        )
    };
    std::fs::write(
        events_dir.join("events-99999999-000099.jsonl"),
        format!(
            "{}\n{}\n",
            summary("b000000000000001", 4, 0.1),
            summary("b000000000000002", 0, 1.0)
        ),
    )
    .unwrap();

    let page = work.path().join("gaps.html");
    let report = json_report_with_page(&config_dir, &telemetry, &page);

    // Days: from the first result (12 days ago) to today, 13 rows, the
    // days without results at zero.
    let days = report["days"].as_array().unwrap();
    let dates: Vec<&str> = days.iter().map(|d| d["date"].as_str().unwrap()).collect();
    let until_ms = report["window"]["until_ms"].as_i64().unwrap();
    assert_eq!(dates, dates_between((now - 12 * DAY) as i64, until_ms));
    let with_results = days.iter().filter(|d| d["calls"] != 0).count();
    assert_eq!(with_results, 6, "{days:?}");
    for d in days.iter().filter(|d| d["calls"] == 0) {
        assert_eq!(d["tokens_saved"], 0, "{d}");
        assert_eq!(d["saved_pct"], Value::Null, "{d}");
    }
    let bars = svg_bars(&std::fs::read_to_string(&page).unwrap(), "chart-days");
    assert_eq!(
        bars.iter().map(|b| b.label.as_str()).collect::<Vec<_>>(),
        dates
    );
    for (bar, day) in bars.iter().zip(days) {
        assert_eq!(bar.value, day["tokens_saved"].as_i64().unwrap());
    }
    assert_heights_proportional(&bars);

    // Sessions: the two with results, then the two without, at zero.
    let sessions = report["sessions"].as_array().unwrap();
    let ids: Vec<&str> = sessions
        .iter()
        .map(|s| s["session"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "a000000000000000",
            "a000000000000001",
            "b000000000000001",
            "b000000000000002"
        ]
    );
    for s in &sessions[2..] {
        assert_eq!((&s["calls"], &s["first_ms"]), (&json!(0), &Value::Null));
        assert_eq!(s["definitions"]["tokens"], 5321);
    }
    for key in ["calls", "tokens_baseline", "tokens_final", "dedup_saved"] {
        let sum: i64 = sessions.iter().map(|s| s[key].as_i64().unwrap()).sum();
        assert_eq!(Some(sum), report["total"][key].as_i64(), "{key}");
    }
    assert_eq!(report["estimated"], false, "no event was scaled up");

    // Text: the same rows, and the line on the sessions without results.
    let text = stdout(&devboy(&config_dir, &telemetry, &["tune", "report"]));
    let day_rows = text_rows(&text, "Savings per day (UTC)");
    assert_eq!(day_rows.len(), dates.len() + 1, "{text}");
    let empty = day_rows.iter().find(|r| r[1] == "0").expect("a zero day");
    assert_eq!(empty[1..], ["0", "0", "0", "0", "-", "0", "0"], "{text}");
    let session_rows = text_rows(&text, "Savings per session");
    assert_eq!(session_rows.len(), 4 + 1, "{text}");
    let sampled_out = session_rows
        .iter()
        .find(|r| r[0] == "b000000000000001")
        .unwrap();
    assert_eq!(
        sampled_out[1..],
        [
            "claude-code",
            "-",
            "0",
            "0",
            "0",
            "0",
            "-",
            "0",
            "0",
            "5,321",
            "17"
        ],
        "{text}"
    );
    assert!(
        text.contains("\n2 of 4 sessions have no result event in the window (shown with 0 calls): 1 had no tool result; 1 had results, none recorded in the window (sampled out, dropped, or before the window)\n"),
        "{text}"
    );
    assert_analyze_agrees(&config_dir, &telemetry, work.path(), &report);
}

#[test]
fn no_telemetry_is_a_clear_message_not_an_error() {
    let work = TempDir::new("tune-report-empty");
    let out = devboy(
        &work.path().join("config"),
        &work.path().join("telemetry"),
        &["tune", "report"],
    );
    let text = stdout(&out);
    assert!(text.contains("nothing to report yet"), "{text}");
    let json: Value = serde_json::from_str(&stdout(&devboy(
        &work.path().join("config"),
        &work.path().join("telemetry"),
        &["tune", "report", "--format", "json"],
    )))
    .unwrap();
    assert_eq!(json["total"]["calls"], 0);
    assert_eq!(json["days"], json!([]));
    assert_eq!(json["sessions"], json!([]));
}

/// Writes one result event per `(tool, ts_ms, baseline, final)` to a
/// file under `telemetry/events`, and the tools' names where the report
/// reads them.
fn write_results(telemetry: &Path, config_dir: &Path, results: &[(&str, i64, i64, i64)]) {
    let hash = |tool: &str| format!("{:016x}", devboy_core::hash::fnv1a64(tool.as_bytes()));
    let lines: String = results
        .iter()
        .enumerate()
        .map(|(i, (tool, ts, baseline, fin))| {
            format!(
                r#"{{"kind":"result","v":1,"ts_ms":{ts},"session":"c000000000000000","call":"{i:016x}","tool":"{tool}","upstream":"0000000000000000","endpoint_class":"get","response_chars":{chars},"shape":"array_of_objects","inner_formats":[],"fingerprint":"{i:032x}","path_hashes":[],"dedup":"miss","layer":"L2","action":"x","format":null,"template":null,"tokenizer":"o200k_base","tokens_baseline":{baseline},"tokens_final":{fin},"dedup_saved":0,"encoder_saved":{saved},"elided":false,"context_partition":0,"is_error":false,"prefetched":null,"prefetch_hit":null}}"#,
                tool = hash(tool),
                chars = baseline * 4,
                saved = baseline - fin,
            ) + "\n"
        })
        .collect();
    let events = telemetry.join("events");
    std::fs::create_dir_all(&events).unwrap();
    std::fs::write(events.join("events-00000001-000000.jsonl"), lines).unwrap();
    let names: serde_json::Map<String, Value> = results
        .iter()
        .map(|(tool, ..)| (hash(tool), json!(tool)))
        .collect();
    std::fs::write(
        config_dir.join(devboy_core::paths::ENDPOINT_NAMES_FILE_NAME),
        Value::Object(names).to_string(),
    )
    .unwrap();
}

/// Where chromium lays out each chart of `page` (at 1200×900): per chart
/// its size, and each text's and legend entry's box in the chart's own
/// pixels, with its class and text. The page is copied with a script
/// that measures (its own Content-Security-Policy forbids scripts).
fn chart_layout(dir: &Path, page: &Path) -> Vec<Value> {
    let html = std::fs::read_to_string(page).unwrap();
    let csp_start = html
        .find("<meta http-equiv=\"Content-Security-Policy\"")
        .unwrap();
    let csp_end = csp_start + html[csp_start..].find('>').unwrap() + 1;
    let probe = format!(
        "{}{}",
        &html[..csp_start],
        html[csp_end..].replace(
            "</body>",
            r#"<script>
const charts = [...document.querySelectorAll('svg.chart')].map(svg => {
  const box = svg.getBoundingClientRect();
  // The chart's own pixels start inside its border.
  const frame = {left: box.left + svg.clientLeft, top: box.top + svg.clientTop,
    width: svg.clientWidth, height: svg.clientHeight};
  const items = [...svg.querySelectorAll('text, g.legend')].map(el => {
    const r = el.getBoundingClientRect();
    return {tag: el.tagName, class: el.getAttribute('class') || (el.parentNode.getAttribute('class') || ''),
      text: el.textContent, left: r.left - frame.left, right: r.right - frame.left,
      top: r.top - frame.top, bottom: r.bottom - frame.top};
  });
  return {id: svg.id, width: frame.width, height: frame.height, items};
});
const out = document.createElement('pre');
out.id = 'layout';
out.textContent = JSON.stringify(charts);
document.body.appendChild(out);
</script></body>"#
        )
    );
    let probe_page = dir.join("layout.html");
    std::fs::write(&probe_page, probe).unwrap();
    let mut url = std::ffi::OsString::from("file://");
    url.push(&probe_page);
    let out = chromium_headless(
        dir,
        &[
            OsStr::new("--window-size=1200,900"),
            OsStr::new("--dump-dom"),
            &url,
        ],
    );
    let dom = stdout(&out);
    let start = dom
        .rfind("<pre id=\"layout\">")
        .unwrap_or_else(|| panic!("chromium did not lay the page out: {dom}"))
        + "<pre id=\"layout\">".len();
    let text = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    // --dump-dom gives the text escaped as HTML.
    let text = text
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str::<Vec<Value>>(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The chart `id` of a layout.
fn chart<'a>(layout: &'a [Value], id: &str) -> &'a Value {
    layout
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {layout:?}"))
}

/// Every text and legend entry of `chart` inside it, and the legend's
/// entries clear of each other and of every other text.
fn assert_nothing_outside(chart: &Value) {
    let (w, h) = (
        chart["width"].as_f64().unwrap(),
        chart["height"].as_f64().unwrap(),
    );
    let items = chart["items"].as_array().unwrap();
    let f = |item: &Value, k: &str| item[k].as_f64().unwrap();
    for item in items {
        assert!(
            f(item, "left") >= -0.5
                && f(item, "right") <= w + 0.5
                && f(item, "top") >= -0.5
                && f(item, "bottom") <= h + 0.5,
            "{} runs outside the {w}×{h} chart {}: {item}",
            item["text"],
            chart["id"]
        );
    }
    let overlap = |a: &Value, b: &Value| {
        f(a, "left") < f(b, "right")
            && f(b, "left") < f(a, "right")
            && f(a, "top") < f(b, "bottom")
            && f(b, "top") < f(a, "bottom")
    };
    let legend: Vec<&Value> = items.iter().filter(|i| i["tag"] == "g").collect();
    for entry in &legend {
        for other in items
            .iter()
            .filter(|i| i["tag"] == "text" && i["class"] != "legend")
        {
            assert!(!overlap(entry, other), "{entry} overlaps {other}");
        }
    }
    for (i, a) in legend.iter().enumerate() {
        for b in &legend[i + 1..] {
            assert!(!overlap(a, b), "{a} overlaps {b}");
        }
    }
}

/// The y-axis labels of `chart`, bottom up: the texts left of the plot
/// (which starts 90 px in) but for the axis title.
fn tick_labels(chart: &Value) -> Vec<String> {
    let mut ticks: Vec<(f64, String)> = chart["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["tag"] == "text" && i["class"] != "axis-title")
        .filter(|i| i["right"].as_f64().unwrap() <= 90.0)
        .map(|i| {
            (
                -i["top"].as_f64().unwrap(),
                i["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
    ticks.into_iter().map(|(_, t)| t).collect()
}

/// A server that cost 8 tokens next to one that saved 12,000, and a day
/// with only that cost: laid out by chromium, the legend (with "cost more
/// than saved") stays inside each 960-px chart, and the y axis reaches
/// below zero only as far as the data: ticks 0 to 15.0k where the cost
/// sits next to savings, −8 to 0 where it is alone; never −5.0k.
#[test]
fn a_small_cost_next_to_large_savings_fits_the_chart_and_its_axis() {
    const DAY: i64 = 86_400_000;
    let work = TempDir::new("tune-report-axis");
    let telemetry = work.path().join("telemetry");
    let config_dir = work.path().join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    let now = devboy_tune::now_ms() as i64;
    write_results(
        &telemetry,
        &config_dir,
        &[
            ("mem__read_graph", now - 2 * DAY, 20, 28),
            ("gh__list_issues", now - DAY, 20_000, 8_000),
        ],
    );
    let page = work.path().join("axis.html");
    let report = json_report_with_page(&config_dir, &telemetry, &page);
    let saved: Vec<i64> = report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tokens_saved"].as_i64().unwrap())
        .collect();
    assert_eq!(
        saved
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        [-8, 12_000].into()
    );
    let layout = chart_layout(work.path(), &page);
    for id in ["chart-days", "chart-servers"] {
        let chart = chart(&layout, id);
        assert_eq!(chart["width"], 960.0, "{chart}");
        assert_nothing_outside(chart);
        let legend: Vec<&str> = chart["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["tag"] == "g")
            .map(|i| i["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            legend,
            ["tokens saved (baseline − received)", "cost more than saved"],
            "{id}"
        );
    }
    assert_eq!(
        tick_labels(chart(&layout, "chart-servers")),
        ["0", "5.0k", "10.0k", "15.0k"]
    );
    assert_heights_proportional(&svg_bars(
        &std::fs::read_to_string(&page).unwrap(),
        "chart-servers",
    ));

    // The cost alone.
    let alone = work.path().join("alone");
    let (telemetry, config_dir) = (alone.join("telemetry"), alone.join("config"));
    std::fs::create_dir_all(&config_dir).unwrap();
    write_results(
        &telemetry,
        &config_dir,
        &[("mem__read_graph", now - DAY, 20, 28)],
    );
    let page = alone.join("alone.html");
    json_report_with_page(&config_dir, &telemetry, &page);
    let layout = chart_layout(&alone, &page);
    for id in ["chart-days", "chart-servers"] {
        let chart = chart(&layout, id);
        assert_nothing_outside(chart);
        assert_eq!(tick_labels(chart), ["-8", "-6", "-4", "-2", "0"], "{id}");
    }
}
