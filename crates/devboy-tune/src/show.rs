//! `devboy tune show`: the pipeline config devboy would run with, readable,
//! and what it means for the endpoints telemetry has seen.
//!
//! The config is resolved exactly as `devboy mcp` resolves it
//! ([`PipelineConfig::resolve`]). Endpoints are listed from the summary the
//! last `tune analyze` left in the telemetry directory (hashes and figures
//! only), named through `endpoint-names.json`, each with its effective
//! settings ([`PipelineConfig::endpoint`]) and value model
//! ([`PipelineConfig::tool_model`]), so a person can check what a glob
//! they wrote actually applies to.
//!
//! The version 3 sections are shown with what they mean: the profile
//! selections with the session they resolve to when the client reports
//! no model ([`PipelineConfig::resolve_session`], the same function
//! `devboy mcp` calls), the llm and agent profiles, the hint policy, and
//! `[enrichment]`, read-only speculation.
//!
//! Sections and keys come in the order of the file's description
//! ([`schema::KEYS`]), each value as the config holds it
//! ([`PipelineConfig::setting`]), so a new key shows without a change here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use devboy_core::config::ConfigSource;
use devboy_core::pipeline_config::schema::{self, KeyKind, KeySpec};
use devboy_core::pipeline_config::{
    AgentProfile, HintKind, PipelineConfig, Selection, SessionContext, SessionSettings,
    TelemetrySettings, SCHEMA_VERSION, TELEMETRY_ENV,
};

use crate::edit::ConfigFile;
use crate::error::TuneError;
use crate::names::ExposedNames;
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
    let source = match (&config.source, config.layers.as_slice()) {
        (ConfigSource::File(_), [project, own]) => format!(
            "{} on top of the project's {} (values marked (project) come from it; where both set a key, this member's file wins)",
            own.display(),
            project.display()
        ),
        (ConfigSource::File(path), [only])
            if path.ends_with(
                std::path::Path::new(devboy_core::pipeline_config::PROJECT_DIR_NAME)
                    .join(devboy_core::pipeline_config::FILE_NAME),
            ) =>
        {
            format!(
                "the project's {} (this member has no pipeline_config.toml of its own; values marked (project) come from it)",
                only.display()
            )
        }
        (ConfigSource::File(path), _) => path.display().to_string(),
        (ConfigSource::Embedded, _) => {
            "the embedded default (no pipeline_config.toml in the config directory)".into()
        }
    };
    let _ = writeln!(out, "pipeline config: {source}");
    let _ = writeln!(
        out,
        "schema version: {}{}",
        config.file_version,
        match config.file_version {
            1 => format!(" (migrated in memory to {SCHEMA_VERSION}; the file is unchanged)"),
            v if v < SCHEMA_VERSION => format!(
                " (read as it is: version {v} is a subset of {SCHEMA_VERSION}; keys new in {SCHEMA_VERSION} need `schema_version = {SCHEMA_VERSION}`)"
            ),
            _ => String::new(),
        }
    );
    // The project's committed file, when it is one of the config's.
    let project = std::env::current_dir()
        .ok()
        .and_then(|cwd| devboy_core::pipeline_config::project_file(&cwd))
        .filter(|p| config.layers.contains(p));
    let mark = |target: &Target, origin: &str| -> String {
        let from_project = project
            .as_ref()
            .is_some_and(|p| config.key_origins.get(origin) == Some(p));
        if from_project {
            " (project)".to_owned()
        } else if file.as_ref().is_some_and(|f| f.is_tuned(target)) {
            " (tune)".to_owned()
        } else {
            String::new()
        }
    };
    // The sections in the order of the description; each key as the
    // config holds it, marked when the tuner wrote it.
    let mut first = true;
    for section in schema::children("") {
        match section.kind {
            KeyKind::Section => {
                print_section(&mut out, &config, section, first, &mark);
                first = false;
            }
            KeyKind::HintKinds => hints(&mut out, &config),
            _ => {}
        }
    }

    let _ = writeln!(
        out,
        "\n[endpoints] rules, in file order (every match applies; later ones win):"
    );
    if config.endpoints.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for (i, rule) in config.endpoints.iter().enumerate() {
        let keys = rule_keys(
            &config,
            "endpoints.*",
            i,
            |key| Target::Endpoint {
                name: rule.pattern.clone(),
                tool: 0,
                key,
            },
            &mark,
        );
        let _ = writeln!(out, "  \"{}\": {}", rule.pattern, keys.join(", "));
    }
    let _ = writeln!(out, "\n[tools] rules, in file order:");
    if config.tools.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for (i, rule) in config.tools.iter().enumerate() {
        let keys = rule_keys(
            &config,
            "tools.*",
            i,
            |key| Target::Tool {
                name: rule.pattern.clone(),
                key,
            },
            &mark,
        );
        let _ = writeln!(out, "  \"{}\": {}", rule.pattern, keys.join(", "));
    }

    let names = ExposedNames::load(&options.names_file);
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
                ("side effect", Align::Left),
                ("typical tok", Align::Right),
                ("follow-ups", Align::Left),
            ]);
            let mut unnamed = 0;
            for e in &endpoints {
                let hash = crate::event::id64(&e.tool);
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
                // The value model as merged from every matching [tools] rule.
                let m = config.tool_model(name);
                t.row(vec![
                    name.to_owned(),
                    int(e.calls as i64),
                    pct(e.dup_rate * 100.0),
                    on(s.dedup),
                    s.min_body_bytes.to_string(),
                    on(s.near_ref),
                    on(s.encode),
                    s.template.unwrap_or_else(|| "auto".into()),
                    m.side_effect
                        .map_or("(annotations)".to_owned(), |c| c.name().to_owned()),
                    m.typical_tokens.map_or("-".to_owned(), |n| int(n as i64)),
                    if m.follow_up.is_empty() {
                        "-".to_owned()
                    } else {
                        m.follow_up
                            .iter()
                            .map(|f| format!("{} {:.2}", f.tool, f.probability))
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
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
        // Written, but the analysis had no events to summarize.
        Some((generated, _)) => {
            let _ = writeln!(
                out,
                "\nthe last `devboy tune analyze` ({}) found no tool results in the telemetry; endpoints show here once devboy has served some",
                crate::table::date(generated)
            );
        }
        None => {
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
    let _ = writeln!(
        out,
        "\n(tune) marks a value `devboy tune` set{}.",
        if project.is_some() {
            " in this member's file; (project) a value the project's committed file sets (whoever set it)"
        } else {
            ""
        }
    );
    Ok(out)
}

/// One `[section]` of the description with its values, its subsections
/// after it, and what `[profiles]` resolves to.
fn print_section(
    out: &mut String,
    config: &PipelineConfig,
    section: &KeySpec,
    first: bool,
    mark: &dyn Fn(&Target, &str) -> String,
) {
    let note = match section.path {
        "enrichment" => " (speculation: calling likely next read-only tools ahead of the agent)",
        _ => "",
    };
    let _ = writeln!(
        out,
        "{}[{}]{note}",
        if first { "\n" } else { "" },
        section.path
    );
    for key in schema::children(section.path) {
        if key.kind.is_table() {
            continue;
        }
        let value = config
            .key_value(key.path, 0)
            .map_or("(unset)".to_owned(), |v| v.to_string());
        let target = Target::Global {
            section: key.parent(),
            key: key.name(),
        };
        let _ = writeln!(
            out,
            "  {:<17} = {value}{}{}",
            key.name(),
            mark(&target, key.path),
            if key.path == "telemetry.enabled" {
                telemetry_env_note(&config.telemetry)
            } else {
                String::new()
            }
        );
    }
    for sub in schema::children(section.path).filter(|k| k.kind == KeyKind::Section) {
        print_section(out, config, sub, false, mark);
    }
    if section.path == "profiles" {
        profile_details(out, config);
    }
}

/// What `DEVBOY_TELEMETRY` in the environment does to `enabled = true`.
fn telemetry_env_note(t: &TelemetrySettings) -> String {
    let effective = t.with_env(&|k| std::env::var_os(k));
    if t.enabled && !effective.enabled {
        format!(" (but {}=off in the environment: off)", TELEMETRY_ENV)
    } else {
        String::new()
    }
}

/// `key = value` for every key a `[endpoints.*]` or `[tools.*]` rule
/// sets, in the description's order.
fn rule_keys(
    config: &PipelineConfig,
    table: &str,
    at: usize,
    target: impl Fn(&'static str) -> Target,
    mark: &dyn Fn(&Target, &str) -> String,
) -> Vec<String> {
    schema::children(table)
        .filter_map(|key| {
            let value = config.key_value(key.path, at)?;
            let origin = devboy_core::pipeline_config::origin_key(key.path, at);
            let mark = mark(&target(key.name()), &origin);
            Some(format!("{} = {value}{mark}", key.name()))
        })
        .collect()
}

/// What the profile selections resolve to, and the llm and agent
/// profiles.
fn profile_details(out: &mut String, config: &PipelineConfig) {
    let p = &config.profiles;
    // What the selections mean, by devboy's own resolution.
    let fresh = config.resolve_session(&SessionContext::default());
    let _ = writeln!(
        out,
        "  a session whose client reports no model: {}",
        session_text(config, &fresh)
    );
    if p.model.is_none() {
        let _ = writeln!(
            out,
            "    (a client that reports its model, like Claude Code with `devboy hook install`, gets the llm profile matching it)"
        );
    }
    if let Selection::Auto = p.agent {
        let conditional: Vec<String> = p
            .agents
            .iter()
            .filter(|a| a.min_events.is_some() || a.min_compactions.is_some())
            .map(|a| format!("`{}` {}", a.name, agent_condition(a)))
            .collect();
        if !conditional.is_empty() {
            let _ = writeln!(
                out,
                "    as it goes on (agent = auto): {}",
                conditional.join("; ")
            );
        }
    }
    let _ = writeln!(
        out,
        "[profiles.llms] (auto picks the last whose models match the model id):"
    );
    let mut t = TextTable::new(&[
        ("name", Align::Left),
        ("models", Align::Left),
        ("tokenizer", Align::Left),
        ("budget_tokens", Align::Right),
    ]);
    for l in &p.llms {
        let models: Vec<&str> = l.models.iter().map(|(m, _)| m.as_str()).collect();
        t.row(vec![
            l.name.clone(),
            models.join(", "),
            l.tokenizer.map_or("(default)".to_owned(), |t| t.name()),
            l.budget_tokens.map_or("-".to_owned(), |b| b.to_string()),
        ]);
    }
    out.push_str(&indent(&t.render()));
    let _ = writeln!(
        out,
        "[profiles.agents] (their keys override [dedup] for endpoints without their own):"
    );
    let mut t = TextTable::new(&[
        ("name", Align::Left),
        ("applies", Align::Left),
        ("ttl_secs", Align::Right),
        ("min_body_bytes", Align::Right),
        ("near_ref", Align::Left),
    ]);
    for a in &p.agents {
        let applies = if p.agent == Selection::Named(a.name.clone()) {
            "always: named in [profiles] agent".to_owned()
        } else {
            agent_condition(a)
        };
        t.row(vec![
            a.name.clone(),
            applies,
            a.ttl.map_or("-".to_owned(), |d| d.as_secs().to_string()),
            a.min_body_bytes.map_or("-".to_owned(), |b| b.to_string()),
            a.near_ref.map_or("-".to_owned(), on),
        ]);
    }
    out.push_str(&indent(&t.render()));
}

/// The hint policy, a kind a line.
fn hints(out: &mut String, config: &PipelineConfig) {
    let _ = writeln!(
        out,
        "[hints] (a kind that may not be used sends the content in full):"
    );
    for kind in HintKind::ALL {
        let r = config.hints.rule(kind);
        let models: Vec<&str> = r.models.iter().map(|(m, _)| m.as_str()).collect();
        let _ = writeln!(
            out,
            "  {:<17} = {}{}{}",
            kind.name(),
            if r.enabled { "on" } else { "off" },
            r.max_per_session
                .map(|m| format!(", at most {m} per session"))
                .unwrap_or_default(),
            if models.is_empty() {
                String::new()
            } else {
                format!(", only for models {}", models.join(", "))
            }
        );
    }
}

/// One resolved session in words: model, profiles, and what they set.
fn session_text(config: &PipelineConfig, s: &SessionSettings) -> String {
    let model = match (&s.model, &config.profiles.model) {
        (Some(m), Some(_)) => format!("model {m} (pinned in [profiles] model)"),
        (Some(m), None) => format!("model {m}"),
        (None, _) => "model unknown".to_owned(),
    };
    let llm = match &s.llm {
        Some(l) => format!("llm profile `{l}`"),
        None => "no llm profile".to_owned(),
    };
    let agent = match &s.agent {
        Some(a) => format!("agent profile `{a}` from the start"),
        None => "no agent profile at the start".to_owned(),
    };
    format!(
        "{model}, {llm}, tokenizer {}, budget_tokens {}; {agent} (ttl_secs {}, min_body_bytes {}, near_ref {})",
        s.tokenizer.name(),
        s.budget_tokens,
        s.ttl.as_secs(),
        s.min_body_bytes,
        on(s.near_ref)
    )
}

/// When `auto` picks an agent profile.
fn agent_condition(a: &AgentProfile) -> String {
    let mut parts = Vec::new();
    if let Some(n) = a.min_compactions {
        parts.push(format!("{n} compactions"));
    }
    if let Some(n) = a.min_events {
        parts.push(format!("{n} results"));
    }
    if parts.is_empty() {
        "only when named in [profiles] agent".to_owned()
    } else {
        format!("from {}", parts.join(" and "))
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

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"schema_version = 3

[profiles]
model = "claude-x-1"  # tune: P1 2026-01-01: …
agent = "marathon"

[profiles.llms.local]
models = ["qwen*"]
tokenizer = "chars:3.5"
budget_tokens = 4000

[hints.elided]
enabled = false

[hints.ref]
max_per_session = 50
models = ["claude-*"]

[tools."gh__*"]
side_effect = "read_only"
value_class = "critical"
latency_ms = 400

[tools."gh__list_issues"]
typical_tokens = 1800  # tune: V1 2026-01-01: …
follow_up = [{ tool = "gh__get_issue", probability = 0.45, args = { number = "/0/number" } }]
"#;

    fn render(text: &str, summary: Option<&str>) -> String {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("p.toml");
        std::fs::write(&config, text).unwrap();
        let names_file = dir.path().join("names.json");
        let summary_file = dir.path().join("summary.json");
        if let Some(s) = summary {
            std::fs::write(&summary_file, s).unwrap();
            std::fs::write(&names_file, r#"{"00000000000000ab": "gh__list_issues"}"#).unwrap();
        }
        show(&ShowOptions {
            config: Some(config),
            names_file,
            summary_file,
        })
        .unwrap()
    }

    #[test]
    fn shows_the_version_3_sections_and_what_they_resolve_to() {
        let out = render(FILE, None);
        for needle in [
            "  model             = \"claude-x-1\" (tune)\n",
            "  llm               = auto\n",
            "  agent             = marathon\n",
            "  a session whose client reports no model: model claude-x-1 (pinned in [profiles] model), llm profile `claude`, tokenizer o200k, budget_tokens 25000; agent profile `marathon` from the start (ttl_secs 7200, min_body_bytes 512, near_ref on)\n",
            "always: named in [profiles] agent",
            "local ",
            "chars:3.5",
            "4000",
            "  ref               = on, at most 50 per session, only for models claude-*\n",
            "  elided            = off\n",
            "[enrichment] (speculation: calling likely next read-only tools",
            "  min_probability   = 0.3\n",
            "  \"gh__*\": side_effect = read_only, value_class = critical, latency_ms = 400\n",
            "  \"gh__list_issues\": typical_tokens = 1800 (tune), follow_up = [{ tool = \"gh__get_issue\", probability = 0.45, args = { number = \"/0/number\" } }]\n",
        ] {
            assert!(out.contains(needle), "{needle:?} not in:\n{out}");
        }
        // The llm profiles table lists the built-ins with their globs.
        let claude = out
            .lines()
            .find(|l| l.trim_start().starts_with("claude "))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(
            claude.contains("*claude*") && claude.contains("o200k"),
            "{claude}"
        );
    }

    #[test]
    fn without_a_pin_the_session_has_no_model_and_auto_agents_say_when() {
        let out = render("schema_version = 3\n", None);
        assert!(
            out.contains("a session whose client reports no model: model unknown, no llm profile, tokenizer o200k, budget_tokens 25000; no agent profile at the start (ttl_secs 1800, min_body_bytes 512, near_ref off)"),
            "{out}"
        );
        assert!(
            out.contains("as it goes on (agent = auto): `marathon` from 2 compactions"),
            "{out}"
        );
        assert!(out.contains("  model             = (unset)\n"), "{out}");
        // A version 2 file is read as it is.
        let out = render("schema_version = 2\n", None);
        assert!(
            out.contains("schema version: 2 (read as it is: version 2 is a subset of 3;"),
            "{out}"
        );
    }

    #[test]
    fn an_empty_summary_is_not_called_missing() {
        let out = render(
            FILE,
            Some(r#"{"generated_ms": 1700000000000, "endpoints": []}"#),
        );
        assert!(out.contains("found no tool results"), "{out}");
        assert!(!out.contains("no endpoint summary"), "{out}");
    }

    #[test]
    fn endpoints_of_the_summary_show_their_value_model() {
        let summary = r#"{"generated_ms": 1700000000000, "endpoints": [{"tool": "00000000000000ab", "calls": 40, "dup_rate": 0.25}]}"#;
        let out = render(FILE, Some(summary));
        let row = out
            .lines()
            .find(|l| l.trim_start().starts_with("gh__list_issues "))
            .unwrap_or_else(|| panic!("{out}"));
        for cell in ["read_only", "1,800", "gh__get_issue 0.45"] {
            assert!(row.contains(cell), "{cell} not in {row}");
        }
        assert!(
            out.contains("typical tok") && out.contains("follow-ups"),
            "{out}"
        );
    }
}
