//! `devboy tune show`: the pipeline config devboy would run with, readable,
//! and what it means for the endpoints telemetry has seen.
//!
//! The config is resolved exactly as `devboy mcp` resolves it
//! ([`PipelineConfig::resolve`]). Endpoints are listed from the summary the
//! last `tune analyze` left in the telemetry directory (hashes and figures
//! only), named through `endpoint-names.json`, each with its effective
//! settings ([`PipelineConfig::endpoint`]), so a person can check what a
//! glob they wrote actually applies to.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use devboy_core::config::ConfigSource;
use devboy_core::pipeline_config::{ClientProfile, PipelineConfig, SCHEMA_VERSION, TELEMETRY_ENV};

use crate::edit::ConfigFile;
use crate::error::TuneError;
use crate::names::EndpointNames;
use crate::rules::Target;
use crate::table::{int, pct, Align, TextTable};

/// The summary's file name in the telemetry directory.
pub const SUMMARY_FILE: &str = "tune-summary.json";

/// What `tune show` reads.
#[derive(Clone, Debug)]
pub struct ShowOptions {
    /// An explicit config file; else the default resolution.
    pub config: Option<PathBuf>,
    /// `endpoint-names.json`.
    pub names_file: PathBuf,
    /// The summary `tune analyze` leaves.
    pub summary_file: PathBuf,
}

/// One endpoint of the summary.
struct SummaryEndpoint {
    tool: String,
    calls: u64,
    dup_rate: f64,
}

/// Renders `tune show`.
pub fn show(options: &ShowOptions) -> Result<String, TuneError> {
    let config = PipelineConfig::resolve(options.config.as_deref())?;
    let file = match &config.source {
        ConfigSource::File(path) => ConfigFile::open(path).ok(),
        ConfigSource::Embedded => None,
    };
    let mut out = String::new();
    let source = match &config.source {
        ConfigSource::File(path) => path.display().to_string(),
        ConfigSource::Embedded => {
            "the embedded default (no pipeline_config.toml in the config directory)".into()
        }
    };
    let _ = writeln!(out, "pipeline config: {source}");
    let _ = writeln!(
        out,
        "schema version: {}{}",
        config.file_version,
        if config.file_version < SCHEMA_VERSION {
            format!(" (migrated in memory to {SCHEMA_VERSION}; the file is unchanged)")
        } else {
            String::new()
        }
    );
    let d = &config.dedup;
    let tuned = |section: &'static str, key: &'static str| {
        let t = Target::Global { section, key };
        if file.as_ref().is_some_and(|f| f.is_tuned(&t)) {
            " (tune)"
        } else {
            ""
        }
    };
    let _ = writeln!(out, "\n[dedup]");
    let _ = writeln!(out, "  enabled           = {}", d.enabled);
    let _ = writeln!(
        out,
        "  min_body_bytes    = {}{}",
        d.min_body_bytes,
        tuned("dedup", "min_body_bytes")
    );
    let _ = writeln!(
        out,
        "  ttl_secs          = {}{}",
        d.ttl.as_secs(),
        tuned("dedup", "ttl_secs")
    );
    let _ = writeln!(
        out,
        "  max_entries       = {}{}",
        d.max_entries,
        tuned("dedup", "max_entries")
    );
    let _ = writeln!(out, "  max_context_bytes = {}", d.max_context_bytes);
    let _ = writeln!(out, "[dedup.near_ref]");
    let _ = writeln!(out, "  enabled           = {}", d.near_ref.enabled);
    let _ = writeln!(out, "  max_changes       = {}", d.near_ref.max_changes);
    let _ = writeln!(out, "  min_body_bytes    = {}", d.near_ref.min_body_bytes);
    let _ = writeln!(out, "[encoding]");
    let _ = writeln!(out, "  enabled           = {}", config.encoding.enabled);
    let _ = writeln!(
        out,
        "  budget_tokens     = {}",
        config.encoding.budget_tokens
    );
    let _ = writeln!(out, "[profiles]");
    let _ = writeln!(out, "  tokenizer         = {}", config.tokenizer.name());
    let _ = writeln!(out, "  client            = {}", client_name(config.client));
    let t = &config.telemetry;
    let effective = t.with_env(&|k| std::env::var_os(k));
    let _ = writeln!(out, "[telemetry]");
    let _ = writeln!(
        out,
        "  enabled           = {}{}",
        t.enabled,
        if t.enabled && !effective.enabled {
            format!(" (but {}=off in the environment: off)", TELEMETRY_ENV)
        } else {
            String::new()
        }
    );
    let _ = writeln!(out, "  sample_rate       = {}", t.sample_rate);
    let _ = writeln!(out, "  max_file_bytes    = {}", t.max_file_bytes);
    let _ = writeln!(out, "  max_age_days      = {}", t.max_age_days);

    let _ = writeln!(
        out,
        "\n[endpoints] rules, in file order (every match applies; later ones win):"
    );
    if config.endpoints.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for rule in &config.endpoints {
        let mut keys = Vec::new();
        let mut push = |key: &'static str, v: Option<String>| {
            if let Some(v) = v {
                let t = Target::Endpoint {
                    name: rule.pattern.clone(),
                    tool: 0,
                    key,
                };
                let mark = if file.as_ref().is_some_and(|f| f.is_tuned(&t)) {
                    " (tune)"
                } else {
                    ""
                };
                keys.push(format!("{key} = {v}{mark}"));
            }
        };
        push("dedup", rule.dedup.map(|v| v.to_string()));
        push("min_body_bytes", rule.min_body_bytes.map(|v| v.to_string()));
        push("near_ref", rule.near_ref.map(|v| v.to_string()));
        push("encode", rule.encode.map(|v| v.to_string()));
        push(
            "template",
            rule.template.as_ref().map(|v| format!("\"{v}\"")),
        );
        let _ = writeln!(out, "  \"{}\": {}", rule.pattern, keys.join(", "));
    }
    let _ = writeln!(out, "\n[tools] rules, in file order:");
    if config.tools.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for rule in &config.tools {
        let mut keys = Vec::new();
        if let Some(s) = rule.side_effect {
            keys.push(format!("side_effect = {}", s.name()));
        }
        if !rule.invalidates.is_empty() {
            let list: Vec<&str> = rule.invalidates.iter().map(|(p, _)| p.as_str()).collect();
            keys.push(format!("invalidates = [{}]", list.join(", ")));
        }
        let _ = writeln!(out, "  \"{}\": {}", rule.pattern, keys.join(", "));
    }

    let names = EndpointNames::load(&options.names_file);
    match read_summary(&options.summary_file) {
        Some((generated, endpoints)) if !endpoints.is_empty() => {
            let _ = writeln!(
                out,
                "\nendpoints seen by the last `devboy tune analyze` ({}), with their effective settings:",
                crate::table::date(generated)
            );
            let mut t = TextTable::new(&[
                ("endpoint", Align::Left),
                ("calls", Align::Right),
                ("dup %", Align::Right),
                ("dedup", Align::Left),
                ("min body", Align::Right),
                ("near_ref", Align::Left),
                ("encode", Align::Left),
                ("template", Align::Left),
            ]);
            let mut unnamed = 0;
            for e in &endpoints {
                let mut odd = Vec::new();
                let hash = crate::event::id64(&e.tool, &mut odd);
                let Some(name) = names.get(hash) else {
                    unnamed += 1;
                    t.row(vec![
                        format!("({})", e.tool),
                        int(e.calls as i64),
                        pct(e.dup_rate * 100.0),
                        "(no name: settings depend on it)".into(),
                    ]);
                    continue;
                };
                let s = config.endpoint(name);
                t.row(vec![
                    name.to_owned(),
                    int(e.calls as i64),
                    pct(e.dup_rate * 100.0),
                    on(s.dedup),
                    s.min_body_bytes.to_string(),
                    on(s.near_ref),
                    on(s.encode),
                    s.template.unwrap_or_else(|| "auto".into()),
                ]);
            }
            out.push_str(&indent(&t.render()));
            if unnamed > 0 {
                let _ = writeln!(
                    out,
                    "  {unnamed} endpoints have no name in {}",
                    options.names_file.display()
                );
            }
        }
        _ => {
            let _ = writeln!(
                out,
                "\nno endpoint summary at {} yet (`devboy tune analyze` leaves one)",
                options.summary_file.display()
            );
        }
    }
    if !config.warnings.is_empty() {
        let _ = writeln!(out, "\nwarnings:");
        for w in &config.warnings {
            let _ = writeln!(out, "  {w}");
        }
    }
    let _ = writeln!(out, "\n(tune) marks a value `devboy tune` set.");
    Ok(out)
}

fn client_name(c: ClientProfile) -> &'static str {
    match c {
        ClientProfile::Auto => "auto",
        ClientProfile::Structured => "structured",
        ClientProfile::Content => "content",
    }
}

fn on(b: bool) -> String {
    if b { "on" } else { "off" }.into()
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}

/// The summary's generation time and endpoints; `None` when missing or
/// unreadable (show then says so).
fn read_summary(path: &Path) -> Option<(u64, Vec<SummaryEndpoint>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let generated = value.get("generated_ms")?.as_u64()?;
    let endpoints = value
        .get("endpoints")?
        .as_array()?
        .iter()
        .filter_map(|e| {
            Some(SummaryEndpoint {
                tool: e.get("tool")?.as_str()?.to_owned(),
                calls: e.get("calls")?.as_u64()?,
                dup_rate: e.get("dup_rate").and_then(|v| v.as_f64()).unwrap_or(0.0),
            })
        })
        .collect();
    Some((generated, endpoints))
}
