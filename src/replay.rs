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
//! - a `.jsonl` capture: one `{"tool": NAME, "body": TEXT}` per line;
//! - any other file: its text is one body.
//!
//! JSON bodies are replayed as compact JSON (what an MCP server typically
//! puts in a text block); `tokens_pretty` is reported beside it. Bodies are
//! one second apart on the session clock, in the order found.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use devboy_core::pipeline_config::{PipelineConfig, SessionContext};
use devboy_mcp::dedup::{session_pipeline, tokenizer};
use devboy_pipeline::session::{Action, BodyPolicy};
use devboy_pipeline::{EndpointKey, IdAllocator, ResultPolicy, SessionTag, Timestamp};
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
pub fn replay_cmd(config: &PipelineConfig, paths: &[PathBuf], as_json: bool) -> anyhow::Result<()> {
    let mut files = Vec::new();
    for path in paths {
        collect(path, &mut files)?;
    }
    let mut bodies = Vec::new();
    for file in &files {
        read_bodies(file, &mut bodies)?;
    }
    let report = run(config, files.len(), &bodies);
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
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

fn run(config: &PipelineConfig, files: usize, bodies: &[Body]) -> Value {
    let tok = tokenizer(config.resolve_session(&SessionContext::default()).tokenizer);
    // A fixed tag: the same files give the same report, and it costs what
    // a live session's drawn tag costs.
    let mut pipeline = session_pipeline(config, IdAllocator::new(SessionTag::FIXED));
    let (mut compact, mut pretty) = (0u64, 0u64);
    let mut shapes: BTreeMap<&'static str, Bucket> = BTreeMap::new();
    let mut formats: BTreeMap<&'static str, Bucket> = BTreeMap::new();
    let mut actions: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut decode_failures = Vec::new();
    let mut checked = 0u64;
    for (i, body) in bodies.iter().enumerate() {
        match &body.json {
            Some(value) => {
                compact += tok.count(&value.to_string()) as u64;
                pretty += serde_json::to_string_pretty(value)
                    .map(|p| tok.count(&p) as u64)
                    .unwrap_or_default();
            }
            None => {
                let n = tok.count(&body.text) as u64;
                compact += n;
                pretty += n;
            }
        }
        let settings = config.endpoint(&body.endpoint);
        let policy = BodyPolicy {
            dedup: settings.dedup.then_some(ResultPolicy {
                min_body_bytes: Some(settings.min_body_bytes),
                near: None,
                call: None,
                freshness: None,
            }),
            encode: settings.encode && config.encoding.enabled,
            only: settings.template.clone(),
            keep_whole: false,
        };
        let processed = pipeline.process(
            EndpointKey::new("replay", &body.endpoint),
            &body.text,
            body.json.as_ref(),
            Vec::new(),
            Timestamp::from_millis(i as u64 * 1000),
            &policy,
        );
        *actions.entry(processed.action.name()).or_default() += 1;
        // Every result lands in one row, so the table adds up to the total:
        // a repeat is answered before its shape is looked at.
        let shape = processed.shape.unwrap_or(match processed.action {
            Action::Reference | Action::NearReference => "(repeat)",
            _ => "(not classified)",
        });
        shapes
            .entry(shape)
            .or_default()
            .add(processed.tokens_raw, processed.tokens_final);
        let format = match processed.action {
            Action::Encoded | Action::Elided => processed.format.unwrap_or("original"),
            Action::Reference => "reference",
            Action::NearReference => "near_reference",
            Action::Unchanged | Action::Fresh => "unchanged",
        };
        formats
            .entry(format)
            .or_default()
            .add(processed.tokens_raw, processed.tokens_final);
        // Every encoding must decode back to the body exactly.
        if processed.action == Action::Encoded {
            checked += 1;
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
                decode_failures.push(body.endpoint.clone());
            }
        }
    }
    let totals = pipeline.totals();
    let (dedup, encoder, combined) = totals.split_pct();
    json!({
        "files": files,
        "results": bodies.len(),
        "tokenizer": tok.to_string(),
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
        "decode_checked": checked,
        "decode_failures": decode_failures.len(),
        "decode_failed_endpoints": decode_failures,
        "actions": actions,
        "by_shape": shapes.iter().map(|(k, b)| (k.to_string(), b.json())).collect::<serde_json::Map<_, _>>(),
        "by_format": formats.iter().map(|(k, b)| (k.to_string(), b.json())).collect::<serde_json::Map<_, _>>(),
    })
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
