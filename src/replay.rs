//! `devboy replay PATH…`: recorded responses through the whole pipeline, in
//! one session, with the token accounting a live session would report.
//!
//! What a PATH may hold:
//!
//! - a directory: every file below it, in name order;
//! - a nock recording (`@octokit/fixtures`' `raw-fixture.json`: an array of
//!   `{scope, method, path, response, …}`): each JSON `response`;
//! - an OpenAPI document (`components.examples`, as in `@octokit/openapi`):
//!   each example `value` that is an object or an array;
//! - a `.jsonl` file of bodies: one `{"tool": NAME, "body": TEXT}` per line;
//! - any other file: its text is one body.
//!
//! JSON bodies are replayed as compact JSON (what an MCP server typically
//! puts in a text block); `tokens_pretty` is reported beside it. Bodies are
//! one second apart on the session clock, in the order found, through one
//! [`PipelineSession`] (the one a proxy session runs).
//!
//! A session capture (`devboy mcp --capture FILE`) is replayed on its own
//! and exactly: its report adds `status`, the pipeline part of what
//! `devboy_status` said at the end of the session.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use std::sync::Arc;

use devboy_core::call::{CallRoute, ResolvedCall, SideEffect};
use devboy_core::pipeline_config::{PipelineConfig, SideEffectClass};
use devboy_pipeline::result_pipeline::{Action, Processed, Totals};
use devboy_pipeline::{IdAllocator, SessionTag, Timestamp, Tokenizer};
use devboy_session::capture::{self, CapturedBody};
use devboy_session::{default_tokenizer, Forwarded, PipelineSession};
use serde_json::{json, Value};

/// One recorded body.
struct Body {
    endpoint: String,
    text: String,
    json: Option<Value>,
}

/// Per shape or per format: results and tokens.
#[derive(Default)]
struct Bucket {
    results: u64,
    tokens_raw: u64,
    tokens_final: u64,
}

impl Bucket {
    fn add(&mut self, raw: usize, fin: usize) {
        self.results += 1;
        self.tokens_raw += raw as u64;
        self.tokens_final += fin as u64;
    }

    fn json(&self) -> Value {
        json!({
            "results": self.results,
            "tokens_raw": self.tokens_raw,
            "tokens_final": self.tokens_final,
            "savings_pct": pct(self.tokens_raw as i64 - self.tokens_final as i64, self.tokens_raw),
        })
    }
}

fn pct(saved: i64, of: u64) -> f64 {
    if of == 0 {
        return 0.0;
    }
    (saved as f64 * 1000.0 / of as f64).round() / 10.0
}

/// Runs the replay and prints the report.
pub fn replay_cmd(
    config: &PipelineConfig,
    paths: &[PathBuf],
    as_json: bool,
    deliveries: Option<&Path>,
) -> anyhow::Result<()> {
    let mut files = Vec::new();
    for path in paths {
        collect(path, &mut files)?;
    }
    let mut tally = Tally::new(default_tokenizer(config), deliveries.is_some());
    let report = match captured(&files)? {
        Some((file, text)) => run_capture(config, &file, &text, &mut tally)?,
        None => replay_bodies(config, &files, &mut tally)?,
    };
    if let Some(path) = deliveries {
        let mut out = String::new();
        for line in &tally.deliveries {
            out.push_str(&line.to_string());
            out.push('\n');
        }
        std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))?;
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

/// The one capture among `files`, if there is one (a capture replays on
/// its own: it is a whole session).
fn captured(files: &[PathBuf]) -> anyhow::Result<Option<(PathBuf, String)>> {
    for file in files {
        if file.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("{}: not readable as UTF-8 text", file.display()))?;
            if capture::is_capture(&text) {
                anyhow::ensure!(
                    files.len() == 1,
                    "{} is a session capture: replay it on its own",
                    file.display()
                );
                return Ok(Some((file.clone(), text)));
            }
        }
    }
    Ok(None)
}

fn replay_bodies(
    config: &PipelineConfig,
    files: &[PathBuf],
    tally: &mut Tally,
) -> anyhow::Result<Value> {
    let mut bodies = Vec::new();
    for file in files {
        read_bodies(file, &mut bodies)?;
    }
    Ok(run(config, files.len(), &bodies, tally))
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let meta = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("{}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for entry in entries {
            collect(&entry, out)?;
        }
    } else {
        out.push(path.to_path_buf());
    }
    Ok(())
}

fn read_bodies(file: &Path, out: &mut Vec<Body>) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("{}: not readable as UTF-8 text", file.display()))?;
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let is_jsonl = file.extension().is_some_and(|e| e == "jsonl");
    if is_jsonl {
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let record: Value = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not JSON", file.display(), n + 1))?;
            // A body is the text a tool returned, or that text's JSON
            // written out as JSON (a capture of a structured result).
            let body = match &record["body"] {
                Value::String(text) => text.clone(),
                Value::Null => anyhow::bail!(
                    "{}:{}: expected {{\"tool\": …, \"body\": …}} (the body as a string or as JSON)",
                    file.display(),
                    n + 1
                ),
                json => json.to_string(),
            };
            let tool = record["tool"].as_str().unwrap_or(&stem);
            out.push(body_of(tool, body));
        }
        return Ok(());
    }
    let Ok(value) = serde_json::from_str::<Value>(&text) else {
        out.push(body_of(&stem, text));
        return Ok(());
    };
    if let Some(recordings) = recordings(&value) {
        for recording in recordings {
            let response = &recording["response"];
            if response.is_object() || response.is_array() {
                let endpoint = format!(
                    "{stem}:{} {}",
                    recording["method"].as_str().unwrap_or("GET"),
                    recording["path"].as_str().unwrap_or("")
                );
                out.push(json_body(endpoint, response.clone()));
            }
        }
    } else if let Some(examples) = value
        .pointer("/components/examples")
        .and_then(Value::as_object)
    {
        for (name, example) in examples {
            let v = &example["value"];
            if v.is_object() || v.is_array() {
                out.push(json_body(name.clone(), v.clone()));
            }
        }
    } else {
        out.push(json_body(stem, value));
    }
    Ok(())
}

/// The recordings of a nock recording file.
fn recordings(value: &Value) -> Option<&Vec<Value>> {
    let items = value.as_array()?;
    let all = !items.is_empty()
        && items
            .iter()
            .all(|r| r.get("scope").is_some() && r.get("response").is_some());
    all.then_some(items)
}

fn json_body(endpoint: String, value: Value) -> Body {
    Body {
        endpoint,
        text: value.to_string(),
        json: Some(value),
    }
}

fn body_of(endpoint: &str, text: String) -> Body {
    let json = serde_json::from_str(&text).ok();
    Body {
        endpoint: endpoint.to_owned(),
        text,
        json,
    }
}

/// What a replay adds up, result by result.
struct Tally {
    tokenizer: Tokenizer,
    compact: u64,
    pretty: u64,
    shapes: BTreeMap<&'static str, Bucket>,
    formats: BTreeMap<&'static str, Bucket>,
    actions: BTreeMap<&'static str, u64>,
    decode_failures: Vec<String>,
    checked: u64,
    /// Results no stage applied to (dedup and encoding both off for the
    /// endpoint): counted as sent unchanged.
    untouched: Totals,
    /// Each result as the model was shown it, when asked for.
    keep_deliveries: bool,
    deliveries: Vec<Value>,
}

impl Tally {
    fn new(tokenizer: Tokenizer, keep_deliveries: bool) -> Self {
        Self {
            tokenizer,
            compact: 0,
            pretty: 0,
            shapes: BTreeMap::new(),
            formats: BTreeMap::new(),
            actions: BTreeMap::new(),
            decode_failures: Vec::new(),
            checked: 0,
            untouched: Totals::default(),
            keep_deliveries,
            deliveries: Vec::new(),
        }
    }

    /// Adds one result: `body` as recorded, and what the session made of
    /// it (`None`: it went out as it came).
    fn add(&mut self, body: &Body, processed: Option<Processed>) {
        let tok = self.tokenizer;
        match &body.json {
            Some(value) => {
                self.compact += tok.count(&value.to_string()) as u64;
                self.pretty += serde_json::to_string_pretty(value)
                    .map(|p| tok.count(&p) as u64)
                    .unwrap_or_default();
            }
            None => {
                let n = tok.count(&body.text) as u64;
                self.compact += n;
                self.pretty += n;
            }
        }
        let processed = processed.unwrap_or_else(|| {
            let n = tok.count(&body.text);
            let u = &mut self.untouched;
            u.results += 1;
            u.tokens_raw += n as u64;
            u.tokens_final += n as u64;
            Processed::unchanged(n)
        });
        *self.actions.entry(processed.action.name()).or_default() += 1;
        if self.keep_deliveries {
            let mut line = json!({
                "tool": body.endpoint,
                "action": processed.action.name(),
                "text": processed.text.as_deref().unwrap_or(&body.text),
            });
            // The id goes out as a block of its own after the text.
            if let Some(id_line) = &processed.id_line {
                line["id_line"] = json!(id_line);
            }
            self.deliveries.push(line);
        }
        // Every result lands in one row, so the table adds up to the total:
        // a repeat is answered before its shape is looked at.
        let shape = processed.shape.unwrap_or(match processed.action {
            Action::Reference | Action::NearReference => "(repeat)",
            _ => "(not classified)",
        });
        self.shapes
            .entry(shape)
            .or_default()
            .add(processed.tokens_raw, processed.tokens_final);
        let format = match processed.action {
            Action::Encoded | Action::Elided => processed.format.unwrap_or("original"),
            Action::Reference => "reference",
            Action::NearReference => "near_reference",
            Action::PartReferences => "part_references",
            Action::Unchanged | Action::Fresh | Action::Deadline => "unchanged",
        };
        self.formats
            .entry(format)
            .or_default()
            .add(processed.tokens_raw, processed.tokens_final);
        // Every encoding must decode back to the body exactly.
        if processed.action == Action::Encoded {
            self.checked += 1;
            let text = processed.text.as_deref().unwrap_or_default();
            let ok = match crate::codec::decode_text(text) {
                Ok(decoded) => match &body.json {
                    Some(value) => {
                        serde_json::from_str::<Value>(&decoded).ok().as_ref() == Some(value)
                    }
                    None => decoded == body.text,
                },
                Err(_) => false,
            };
            if !ok {
                self.decode_failures.push(body.endpoint.clone());
            }
        }
    }

    fn report(&mut self, files: usize, results: usize, pipeline: &Totals) -> Value {
        let totals = Totals {
            results: pipeline.results + self.untouched.results,
            tokens_raw: pipeline.tokens_raw + self.untouched.tokens_raw,
            tokens_final: pipeline.tokens_final + self.untouched.tokens_final,
            ..pipeline.clone()
        };
        let (dedup, encoder, combined) = totals.split_pct();
        let (compact, pretty) = (self.compact, self.pretty);
        json!({
            "files": files,
            "results": results,
            "tokenizer": self.tokenizer.to_string(),
            "baseline": "tokens_raw: each body as replayed (compact JSON for JSON bodies)",
            "tokens_raw": totals.tokens_raw,
            "tokens_compact": compact,
            "tokens_pretty": pretty,
            "tokens_final": totals.tokens_final,
            "dedup_savings_pct": dedup,
            "encoder_savings_pct": encoder,
            "combined_savings_pct": combined,
            "vs_compact_pct": pct(compact as i64 - totals.tokens_final as i64, compact),
            "vs_pretty_pct": pct(pretty as i64 - totals.tokens_final as i64, pretty),
            "decode_checked": self.checked,
            "decode_failures": self.decode_failures.len(),
            "decode_failed_endpoints": self.decode_failures,
            "actions": self.actions,
            "by_shape": self.shapes.iter().map(|(k, b)| (k.to_string(), b.json())).collect::<serde_json::Map<_, _>>(),
            "by_format": self.formats.iter().map(|(k, b)| (k.to_string(), b.json())).collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// Recorded bodies, one second apart, through one session with every
/// stage the config allows.
fn run(config: &PipelineConfig, files: usize, bodies: &[Body], tally: &mut Tally) -> Value {
    // A fixed tag: the same files give the same report, and it costs what
    // a live session's drawn tag costs.
    let session = PipelineSession::new(
        Arc::new(config.clone()),
        true,
        IdAllocator::new(SessionTag::FIXED),
    );
    for (i, body) in bodies.iter().enumerate() {
        let call = ResolvedCall::new(
            body.endpoint.as_str(),
            CallRoute::Upstream {
                upstream: "replay".into(),
                tool: body.endpoint.clone(),
            },
            None,
            SideEffect::stated(SideEffectClass::ReadOnly),
        );
        let forwarded = Forwarded::Single {
            text: &body.text,
            json: body.json.as_ref(),
        };
        let at = Timestamp::from_millis(i as u64 * 1000);
        tally.add(
            body,
            session.process(&call, &forwarded, at, &devboy_pipeline::Handoff::new()),
        );
    }
    tally.report(files, bodies.len(), &session.totals())
}

/// A capture of a live session (`devboy mcp --capture`), replayed exactly:
/// the same tag, calls, clock, compactions and model changes. The report
/// adds `status`: what `devboy_status` said of the pipeline at the end.
fn run_capture(
    config: &PipelineConfig,
    file: &Path,
    text: &str,
    tally: &mut Tally,
) -> anyhow::Result<Value> {
    let context = || format!("{}", file.display());
    let records = capture::read(text).with_context(context)?;
    let mut results = 0;
    let session = capture::replay(
        Arc::new(config.clone()),
        &records,
        |call, body, processed| {
            results += 1;
            // Decode-checked and counted as JSON when it is JSON.
            let recorded = match body {
                CapturedBody::Json(value) => json_body(call.exposed.clone(), value.clone()),
                _ => body_of(&call.exposed, body.text()),
            };
            tally.add(&recorded, processed);
        },
    )
    .with_context(context)?;
    let mut report = tally.report(1, results, &session.totals());
    report["status"] = session.report();
    Ok(report)
}

fn print_table(report: &Value) {
    let n = |k: &str| report[k].as_u64().unwrap_or_default();
    let f = |k: &str| report[k].as_f64().unwrap_or_default();
    println!(
        "devboy replay: {} results from {} files, tokens counted in {}",
        n("results"),
        n("files"),
        report["tokenizer"].as_str().unwrap_or_default()
    );
    println!();
    println!("  {:<28} {:>12}", "baseline", "tokens");
    println!("  {:<28} {:>12}", "raw (as replayed)", n("tokens_raw"));
    println!("  {:<28} {:>12}", "json_compact", n("tokens_compact"));
    println!("  {:<28} {:>12}", "json_pretty", n("tokens_pretty"));
    println!(
        "  {:<28} {:>12}",
        "final (what the model sees)",
        n("tokens_final")
    );
    println!();
    println!(
        "  savings vs raw: dedup {:.1}% + encoder {:.1}% = combined {:.1}%",
        f("dedup_savings_pct"),
        f("encoder_savings_pct"),
        f("combined_savings_pct")
    );
    println!(
        "  vs json_compact: {:.1}%   vs json_pretty: {:.1}%",
        f("vs_compact_pct"),
        f("vs_pretty_pct")
    );
    println!(
        "  decode failures: {} of {} encoded results checked",
        n("decode_failures"),
        n("decode_checked")
    );
    if let Some(status) = report["status"].as_object() {
        // A capture: what devboy_status said of the session at its end.
        let s = |k: &str| status.get(k).and_then(Value::as_u64).unwrap_or_default();
        let forgotten = &status["forgotten"];
        let session = &status["session"];
        println!();
        println!("  the session's status at its end (as devboy_status said):");
        println!(
            "  references {}, near references {}, part references {}, encoded {}, elided {}",
            s("references"),
            s("near_references"),
            s("part_references"),
            s("encoded"),
            s("elided")
        );
        println!(
            "  ids issued {}, remembered {}; forgotten: {} by mutating calls, {} by compactions ({} compactions), {} by capacity, {} by ttl",
            s("ids_issued"),
            s("remembered"),
            forgotten["mutating_calls"].as_u64().unwrap_or_default(),
            forgotten["compaction"].as_u64().unwrap_or_default(),
            session["compactions"].as_u64().unwrap_or_default(),
            forgotten["capacity"].as_u64().unwrap_or_default(),
            forgotten["ttl"].as_u64().unwrap_or_default()
        );
    }
    for (title, key) in [("shape", "by_shape"), ("format", "by_format")] {
        println!();
        println!(
            "  {:<22} {:>8} {:>12} {:>12} {:>9}",
            title, "results", "raw", "final", "saved"
        );
        if let Some(map) = report[key].as_object() {
            for (name, b) in map {
                println!(
                    "  {:<22} {:>8} {:>12} {:>12} {:>8.1}%",
                    name,
                    b["results"].as_u64().unwrap_or_default(),
                    b["tokens_raw"].as_u64().unwrap_or_default(),
                    b["tokens_final"].as_u64().unwrap_or_default(),
                    b["savings_pct"].as_f64().unwrap_or_default()
                );
            }
        }
    }
}
