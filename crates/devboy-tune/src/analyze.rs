//! `devboy tune analyze`: telemetry in, a report and (unless a dry run) an
//! updated `pipeline_config.toml` out.
//!
//! The steps: read the events of the window ([`crate::read`]); aggregate
//! them ([`crate::aggregate`]); run the rules against the current file
//! ([`crate::rules`]); simulate ([`crate::simulate`]) and keep only what
//! does not save less; write the survivors into the file
//! ([`crate::edit`]); print the report.
//!
//! Keeping what does not save less happens in three passes, so that one
//! bad change cannot ride along with good ones:
//!
//! 1. each top-level change alone against the current config: kept when
//!    it saves more;
//! 2. the endpoint changes together on top of the kept top-level ones,
//!    judged per endpoint: an endpoint's dedup and near-reference changes
//!    are kept when its estimate rises, a template pin when it does not
//!    fall (a pin is for stable output and a cheaper router, not tokens);
//! 3. everything kept, against the current config: when the total would
//!    fall (the changes interact through the shared cache), nothing is
//!    changed and the old config stays.
//!
//! Value-model priors (V1, `[tools.E] typical_tokens`) go around the
//! three passes: they change no token the pipeline sends, so the
//! simulation has nothing to say about them, and they are written (and
//! reported) on their own, whatever it decides about the rest.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use devboy_core::pipeline_config::PipelineConfig;
use serde_json::json;

use crate::aggregate::EndpointStats;
use crate::aggregate::{analyze, Analysis, SequenceParams};
use crate::edit::ConfigFile;
use crate::error::TuneError;
use crate::event::{id_text, Vocabulary};
use crate::fingerprint::{blend, day_of, fingerprints, foreign_id, SharedFigures, SharedSource};
use crate::names::ExposedNames;
use crate::read::{read_events, EventTable, ReadOptions, ReadStats};
use crate::rules::{propose, Change, Held, Rule, RuleInput, Target};
use crate::simulate::{Estimate, Settings, Simulation, Simulator};

/// What `devboy tune analyze` was asked to do.
#[derive(Clone, Debug)]
pub struct AnalyzeOptions {
    /// The events directory (or one file).
    pub input: PathBuf,
    /// The window, in days before `now_ms`.
    pub days: u32,
    /// The config file to read and update.
    pub output: PathBuf,
    /// `endpoint-names.json`.
    pub names_file: PathBuf,
    /// Where to leave the per-endpoint summary that `tune show` reads
    /// (hashes only, no names), unless a dry run.
    pub summary_file: Option<PathBuf>,
    /// Print, write nothing.
    pub dry_run: bool,
    /// Now, in Unix milliseconds.
    pub now_ms: u64,
    /// Team and provider fingerprints to blend with this member's own
    /// before the endpoint rules run (empty: none).
    pub shared: SharedFigures,
    /// The project's committed `.devboy/pipeline_config.toml`, which
    /// `output` is read on top of, if there is one.
    pub project_config: Option<PathBuf>,
}

/// The verdict on one proposed change.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The change.
    pub change: Change,
    /// Tokens saved on the scope judged (the endpoint, or all events for
    /// a top-level change) before and after it, estimated.
    pub before: i64,
    /// See `before`.
    pub after: i64,
    /// The scope's baseline tokens.
    pub baseline: u64,
    /// Whether it is kept.
    pub kept: bool,
    /// Whether the simulation judged it: false for a change team or
    /// provider figures decided for an endpoint with too few results of
    /// this member's own to simulate (kept whatever the estimate says).
    pub judged: bool,
}

/// Everything `tune analyze` found and did; [`std::fmt::Display`] is the
/// report.
#[derive(Debug)]
pub struct AnalyzeReport {
    /// The options it ran with.
    pub options: AnalyzeOptions,
    /// What was read.
    pub read: ReadStats,
    /// The aggregate.
    pub analysis: Analysis,
    /// The names the records index into.
    pub vocab: Vocabulary,
    /// Hash → name.
    pub names: ExposedNames,
    /// The verdicts, top-level changes first.
    pub decisions: Vec<Decision>,
    /// Value-model priors written without simulation (V1, E1).
    pub priors: Vec<Change>,
    /// Speculation switches (R7), written when the simulation kept the
    /// proposal.
    pub speculation: Vec<Change>,
    /// What speculation did in the window, when it did anything.
    pub enrichment: Option<crate::speculation::SpeculationFigures>,
    /// What `find_files` did in the window, when it was called.
    pub find_files: Option<crate::retrieval::RetrievalFigures>,
    /// The tool definitions per session next to the results, when the
    /// window has session summaries.
    pub definitions: Option<crate::definitions::DefinitionFigures>,
    /// Rules held off by hand edits.
    pub held: Vec<Held>,
    /// Endpoints whose figures were blended with team or provider data.
    pub blended: Vec<Blended>,
    /// Changes the member's own figures alone would not have made: decided
    /// by team or provider data.
    pub decided_by_shared: Vec<Target>,
    /// Other things worth telling.
    pub notes: Vec<String>,
    /// The whole kept proposal against the current config.
    pub total: Option<Estimate>,
    /// The whole proposal would have saved less: nothing was changed.
    pub kept_old_config: bool,
    /// The file written, if any.
    pub written: Option<PathBuf>,
    /// The keys that were (or, on a dry run, would be) written, as TOML.
    pub snippet: String,
    /// How well the cache replay of the current settings reproduces the
    /// record: (agreeing events, replayed events).
    pub reproduced: (u64, u64),
    /// What the cache replay and the simulation left out (sampled sessions,
    /// or with dropped events): (sessions, events). Their events keep
    /// their recorded figures.
    pub excluded: (u64, u64),
    /// How long it took.
    pub elapsed: Duration,
}

/// One endpoint whose figures were blended.
#[derive(Clone, Debug, PartialEq)]
pub struct Blended {
    /// Its exposed name.
    pub endpoint: String,
    /// Where the prior came from.
    pub source: SharedSource,
    /// The prior's share of the blend (1 when the member has no results
    /// of its own).
    pub weight: f64,
    /// The member's own results.
    pub own_calls: u64,
    /// The shared row's results.
    pub shared_calls: u64,
    /// The shared row's sessions.
    pub shared_sessions: u64,
    /// The shared row's members.
    pub shared_members: u32,
}

/// The endpoints the rules look at with the priors blended in: the local
/// aggregate of each endpoint without a prior, the blend of each with one,
/// and the priors' endpoints this member has not called (under
/// [`foreign_id`]s, named in `names`).
fn blend_endpoints(
    priors: &SharedFigures,
    table: &EventTable,
    analysis: &Analysis,
    names: &mut ExposedNames,
    vocab: &mut Vocabulary,
    now_ms: u64,
    notes: &mut Vec<String>,
) -> (Vec<EndpointStats>, Vec<Blended>) {
    let today = day_of(now_ms);
    let own: std::collections::HashMap<String, crate::fingerprint::Fingerprint> =
        fingerprints(table, analysis, names)
            .into_iter()
            .map(|f| (f.endpoint.clone(), f))
            .collect();
    let mut endpoints = Vec::with_capacity(analysis.endpoints.len());
    let mut blended = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // Token figures in another tokenizer do not compare with this
    // member's: such rows are left out.
    let tokenizer = analysis.tokenizer.as_deref();
    let mut other_tokenizer = 0usize;
    let mut add = |name: &str,
                   tool: u64,
                   own_row: Option<&crate::fingerprint::Fingerprint>,
                   endpoints: &mut Vec<EndpointStats>,
                   vocab: &mut Vocabulary|
     -> bool {
        let own_calls = own_row.map_or(0, |r| r.calls);
        let Some(prior) = priors.shared_for(name, own_calls, crate::rules::MIN_SUPPORT, today)
        else {
            return false;
        };
        if tokenizer.is_some_and(|t| !prior.row.tokenizer.is_empty() && prior.row.tokenizer != t) {
            other_tokenizer += 1;
            return false;
        }
        let row = blend(own_row, &prior);
        endpoints.push(row.to_stats(tool, vocab));
        blended.push(Blended {
            endpoint: name.to_owned(),
            source: prior.source.clone(),
            weight: if own_row.is_some() { prior.weight } else { 1.0 },
            own_calls,
            shared_calls: prior.row.calls,
            shared_sessions: prior.row.sessions,
            shared_members: prior.row.members,
        });
        true
    };
    for e in &analysis.endpoints {
        let Some(name) = names.get(e.tool).map(str::to_owned) else {
            endpoints.push(e.clone());
            continue;
        };
        seen.insert(name.clone());
        if !add(&name, e.tool, own.get(&name), &mut endpoints, vocab) {
            endpoints.push(e.clone());
        }
    }
    let mut foreign: Vec<&String> = priors
        .team
        .keys()
        .chain(priors.providers.keys())
        .filter(|n| !seen.contains(*n))
        .collect();
    foreign.sort();
    foreign.dedup();
    for name in foreign {
        let tool = foreign_id(name);
        if add(name, tool, None, &mut endpoints, vocab) {
            names.insert(tool, name);
        }
    }
    if other_tokenizer > 0 {
        notes.push(format!(
            "{other_tokenizer} shared row(s) counted in another tokenizer than this member's {} were left out",
            tokenizer.unwrap_or("o200k_base")
        ));
    }
    (endpoints, blended)
}

/// The events of the last `days` before `now_ms` under `input`, and
/// their aggregate under `config`'s dedup settings (the sequence analysis
/// reads them): what `tune analyze` and `tune share` start from.
pub fn read_window(
    input: &Path,
    days: u32,
    now_ms: u64,
    config: &PipelineConfig,
) -> Result<(EventTable, Analysis), TuneError> {
    let table = read_events(&ReadOptions {
        input: input.to_path_buf(),
        since_ms: EventTable::since(now_ms, days),
    })
    .map_err(|e| TuneError::io(input, e))?;
    let analysis = analyze(
        &table,
        SequenceParams {
            near_min_body_bytes: config.dedup.near_ref.min_body_bytes,
            ttl_ms: config.dedup.ttl.as_millis() as u64,
        },
    );
    Ok((table, analysis))
}

/// Runs `tune analyze`.
pub fn run(options: &AnalyzeOptions) -> Result<AnalyzeReport, TuneError> {
    let started = Instant::now();
    let file = ConfigFile::open_over(&options.output, options.project_config.as_deref())?;
    let config = file.config()?;
    let defaults = PipelineConfig::embedded_default();
    let mut names = ExposedNames::load(&options.names_file);
    let (table, analysis) = read_window(&options.input, options.days, options.now_ms, &config)?;
    let mut vocab = table.vocab.clone();
    let mut blend_notes = Vec::new();
    let (endpoints, blended) = if options.shared.is_empty() {
        (analysis.endpoints.clone(), Vec::new())
    } else {
        blend_endpoints(
            &options.shared,
            &table,
            &analysis,
            &mut names,
            &mut vocab,
            options.now_ms,
            &mut blend_notes,
        )
    };
    let tools: Vec<u64> = endpoints.iter().map(|e| e.tool).collect();
    let current = Settings::from_config(&config, &names, tools.iter().copied());
    let simulator = Simulator::new(&table, &analysis, current);
    let reproduced = simulator.reproduced();
    let excluded = simulator.excluded();
    let held_by_hand = |t: &Target| file.held_by_hand(t, &defaults);
    let input = RuleInput {
        table: &table,
        analysis: &analysis,
        endpoints: &endpoints,
        vocab: &vocab,
        names: &names,
        config: &config,
        simulator: &simulator,
        held_by_hand: &held_by_hand,
    };
    let mut proposal = propose(&input);
    // What the member's own figures alone would have changed: the rest
    // was decided by the priors.
    let decided_by_shared: Vec<Target> = if blended.is_empty() {
        Vec::new()
    } else {
        let own = crate::rules::propose_endpoints(&RuleInput {
            endpoints: &analysis.endpoints,
            vocab: &table.vocab,
            ..input
        });
        let own: Vec<(&Target, &crate::rules::Setting)> = own
            .endpoints
            .iter()
            .chain(&own.priors)
            .map(|c| (&c.target, &c.to))
            .collect();
        proposal
            .endpoints
            .iter()
            .chain(&proposal.priors)
            .filter(|c| !own.contains(&(&c.target, &c.to)))
            .map(|c| c.target.clone())
            .collect()
    };
    let date = crate::table::date(options.now_ms);
    let mut notes = std::mem::take(&mut proposal.notes);
    notes.append(&mut blend_notes);

    // Changes the file cannot take (an endpoint table written inline).
    let applicable = |c: &Change| file.clone().apply(c, &date);
    for list in [
        &mut proposal.global,
        &mut proposal.endpoints,
        &mut proposal.priors,
        &mut proposal.speculation,
    ] {
        list.retain(|c| {
            let ok = applicable(c);
            if !ok {
                notes.push(format!(
                    "{}: not changed, its table is written inline ({{ … }}) and cannot carry the tuner's mark",
                    c.target
                ));
            }
            ok
        });
    }

    let settings_of = |changes: &[&Change]| -> Result<(ConfigFile, Settings), TuneError> {
        let mut f = file.clone();
        for c in changes {
            f.apply(c, &date);
        }
        let cfg = f.config()?;
        let s = Settings::from_config(&cfg, &names, tools.iter().copied());
        Ok((f, s))
    };

    // Pass 1: each top-level change alone.
    let mut decisions = Vec::new();
    let mut kept: Vec<&Change> = Vec::new();
    for c in &proposal.global {
        let (_, s) = settings_of(&[c])?;
        let sim = simulator.run(&s);
        let ok = sim.total.gain() > 0;
        decisions.push(Decision {
            change: c.clone(),
            before: sim.total.old_saved,
            after: sim.total.new_saved,
            baseline: sim.total.baseline,
            kept: ok,
            judged: true,
        });
        if ok {
            kept.push(c);
        }
    }

    // Pass 2: endpoint changes on top, judged per endpoint; pins apart.
    // Changes the priors decided for an endpoint with too few results of
    // its own to simulate are not judged (here or in pass 3).
    let mut unjudged: Vec<&Change> = Vec::new();
    if !proposal.endpoints.is_empty() {
        let (_, base) = settings_of(&kept)?;
        let base_sim = simulator.run(&base);
        let without_pins: Vec<&Change> = kept
            .iter()
            .copied()
            .chain(proposal.endpoints.iter().filter(|c| c.rule != Rule::T1))
            .collect();
        let all: Vec<&Change> = kept
            .iter()
            .copied()
            .chain(proposal.endpoints.iter())
            .collect();
        let sim_dedup = simulator.run(&settings_of(&without_pins)?.1);
        let sim_all = simulator.run(&settings_of(&all)?.1);
        let mut endpoint_kept = Vec::new();
        for c in &proposal.endpoints {
            let Target::Endpoint { tool, .. } = c.target else {
                continue;
            };
            let get = |s: &Simulation| s.endpoints.get(&tool).copied().unwrap_or_default();
            // A change the priors decided is judged by the member's own
            // events only as far as they go: kept unless they show a loss
            // (an endpoint never called here has nothing to show).
            let by_priors = decided_by_shared.contains(&c.target);
            let own = analysis.endpoint(tool).map_or(0, |e| e.observed);
            let (before, after, ok) = if by_priors && own < crate::rules::MIN_SUPPORT {
                // Too few results of its own to judge the priors by.
                let (b, a) = (get(&base_sim), get(&sim_dedup));
                unjudged.push(c);
                (b.new_saved, a.new_saved, true)
            } else if c.rule == Rule::T1 || by_priors {
                let (b, a) = if c.rule == Rule::T1 {
                    (get(&sim_dedup), get(&sim_all))
                } else {
                    (get(&base_sim), get(&sim_dedup))
                };
                (b.new_saved, a.new_saved, a.new_saved >= b.new_saved)
            } else {
                let (b, a) = (get(&base_sim), get(&sim_dedup));
                (b.new_saved, a.new_saved, a.new_saved > b.new_saved)
            };
            let judged = !unjudged.contains(&c);
            decisions.push(Decision {
                change: c.clone(),
                before,
                after,
                baseline: get(&base_sim).baseline,
                kept: ok,
                judged,
            });
            if ok && judged {
                endpoint_kept.push(c);
            }
        }
        kept.extend(endpoint_kept);
    }

    // Pass 3: all kept changes together.
    let (_, final_settings) = settings_of(&kept)?;
    let total = simulator.run(&final_settings).total;
    let kept_old_config = !kept.is_empty() && total.gain() < 0;
    if kept_old_config {
        for d in &mut decisions {
            d.kept = !d.judged;
        }
        kept.clear();
    }
    let total = if unjudged.is_empty() {
        total
    } else {
        kept.extend(unjudged.iter().copied());
        simulator.run(&settings_of(&kept)?.1).total
    };
    let (final_file, _) = settings_of(&kept)?;
    // R7 rides on the simulation's verdict: when the whole proposal would
    // save less, nothing the tuner proposes this run is switched.
    let speculation = guarded_switches(
        kept_old_config,
        std::mem::take(&mut proposal.speculation),
        &mut notes,
    );
    // The priors, on top of whatever was kept (or of the file as it is).
    let priors = std::mem::take(&mut proposal.priors);
    let mut final_file = if kept.is_empty() {
        file.clone()
    } else {
        final_file
    };
    for c in speculation.iter().chain(&priors) {
        final_file.apply(c, &date);
    }
    let all: Vec<&Change> = kept
        .iter()
        .copied()
        .chain(&speculation)
        .chain(&priors)
        .collect();
    let snippet = snippet(&all, &date);

    let mut written = None;
    if !all.is_empty() {
        if file.schema_version() < 2 {
            if !options.dry_run {
                notes.push(format!(
                    "{} is written in schema version {}; the tuner edits version 2 and 3 files only, so it was left unchanged (rewrite it in version 3, or use --output)",
                    options.output.display(),
                    file.schema_version()
                ));
            }
        } else {
            if final_file.bumped() {
                notes.push(crate::edit::bump_note(&options.output, options.dry_run));
            }
            if !options.dry_run {
                final_file.write()?;
                written = Some(options.output.clone());
            }
        }
    }
    if let (Some(path), false) = (&options.summary_file, options.dry_run) {
        if let Err(e) = write_summary(path, &analysis, &table, options) {
            notes.push(format!("the summary for `tune show` was not written: {e}"));
        }
    }
    Ok(AnalyzeReport {
        options: options.clone(),
        read: table.stats.clone(),
        vocab: table.vocab.clone(),
        analysis,
        names,
        decisions,
        priors,
        speculation,
        enrichment: Some(crate::speculation::SpeculationFigures::of(&table)).filter(|f| f.any()),
        find_files: crate::retrieval::RetrievalFigures::of(&table),
        definitions: crate::definitions::DefinitionFigures::of(&table),
        held: proposal.held,
        blended,
        decided_by_shared,
        notes,
        total: (!kept.is_empty()).then_some(total),
        kept_old_config,
        written,
        snippet,
        reproduced,
        excluded,
        elapsed: started.elapsed(),
    })
}

/// The speculation switches (R7) to write: none when the simulation kept
/// the old config (said in a note), all of them otherwise.
fn guarded_switches(
    kept_old_config: bool,
    switches: Vec<Change>,
    notes: &mut Vec<String>,
) -> Vec<Change> {
    if !kept_old_config {
        return switches;
    }
    if !switches.is_empty() {
        notes.push(format!(
            "R7: {} speculation switch(es) not written: the simulation kept the old config",
            switches.len()
        ));
    }
    Vec::new()
}

/// The kept changes as the TOML lines they become.
pub(crate) fn snippet(changes: &[&Change], date: &str) -> String {
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for c in changes {
        let (header, key) = match &c.target {
            Target::Global { section, key } => (format!("[{section}]"), *key),
            Target::Endpoint { name, key, .. } => (format!("[endpoints.\"{name}\"]"), *key),
            Target::Tool { name, key } => (format!("[tools.\"{name}\"]"), *key),
        };
        let line = format!(
            "{key} = {}  {} {} {date}: {}",
            c.to,
            crate::edit::MARK,
            c.rule,
            c.reason
        );
        match sections.iter_mut().find(|(h, _)| *h == header) {
            Some((_, lines)) => lines.push(line),
            None => sections.push((header, vec![line])),
        }
    }
    sections
        .into_iter()
        .map(|(h, lines)| format!("{h}\n{}\n", lines.join("\n")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The summary `tune show` reads: per endpoint hash, the figures of the
/// last analysis. It holds no names, like the rest of the telemetry
/// directory.
fn write_summary(
    path: &Path,
    analysis: &Analysis,
    table: &EventTable,
    options: &AnalyzeOptions,
) -> std::io::Result<()> {
    let endpoints: Vec<serde_json::Value> = analysis
        .endpoints
        .iter()
        .map(|e| {
            json!({
                "tool": id_text(e.tool),
                "calls": e.calls,
                "observed": e.observed,
                "scaled": e.scaled,
                "dup_rate": e.dup_rate(),
                "implied_dup_rate": e.implied_dup_rate(),
                "avg_chars": e.avg_chars(),
                "shape": e.dominant_shape().and_then(|(s, _)| table.vocab.shapes.get(s)),
                "tokens_baseline": e.tokens_baseline,
                "dedup_saved": e.dedup_saved,
                "encoder_saved": e.encoder_saved,
            })
        })
        .collect();
    let value = json!({
        "v": 1,
        "generated_ms": options.now_ms,
        "days": options.days,
        "events": table.records.len(),
        "endpoints": endpoints,
    });
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    devboy_sharedfile::replace(
        path,
        (serde_json::to_string_pretty(&value)? + "\n").as_bytes(),
    )
}

/// The endpoints of the analysis that have no name, with their calls.
pub fn unnamed(report: &AnalyzeReport) -> Vec<(String, u64)> {
    report
        .analysis
        .endpoints
        .iter()
        .filter(|e| report.names.get(e.tool).is_none())
        .map(|e| (id_text(e.tool), e.calls))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{EndpointSpec, Workload};

    struct Setup {
        dir: tempfile::TempDir,
        options: AnalyzeOptions,
    }

    fn setup(endpoints: Vec<EndpointSpec>, events: usize, config: Option<&str>) -> Setup {
        // Real time: the reader skips files last written before the window.
        let now = crate::now_ms();
        let dir = tempfile::tempdir().unwrap();
        let workload = Workload {
            endpoints,
            sessions: 2,
            events_per_session: events / 2,
            compactions_per_session: 0,
            interval_ms: 1000,
            start_ms: now - 5 * 86_400_000,
            malformed_every: 0,
            seed: 11,
        };
        workload.write(&dir.path().join("events")).unwrap();
        std::fs::write(dir.path().join("names.json"), workload.names_json()).unwrap();
        let output = dir.path().join("pipeline_config.toml");
        if let Some(text) = config {
            std::fs::write(&output, text).unwrap();
        }
        let options = AnalyzeOptions {
            input: dir.path().join("events"),
            days: 30,
            output,
            names_file: dir.path().join("names.json"),
            summary_file: Some(dir.path().join("telemetry").join("tune-summary.json")),
            dry_run: false,
            now_ms: now,
            shared: Default::default(),
            project_config: None,
        };
        Setup { dir, options }
    }

    const HAND: &str = r#"# tuned by hand and by devboy
schema_version = 2

[dedup]
ttl_secs = 900   # short on purpose

[endpoints."gh__list_issues"]
encode = true    # mine

[tools."fs__write_*"]
side_effect = "mutating"
"#;

    fn search() -> EndpointSpec {
        EndpointSpec::new("gh__search_code")
    }

    fn issues() -> EndpointSpec {
        EndpointSpec {
            shape: "markdown_table",
            template: Some("md_tables_csv"),
            encoder_ratio: 0.4,
            dup_rate: 0.3,
            ..EndpointSpec::new("gh__list_issues")
        }
    }

    /// Expansions are part of what the model received, never results: the
    /// same telemetry with a costly expansion added proposes the same
    /// changes, observes the same calls, and shows the cost in the sums.
    #[test]
    fn expansions_move_the_savings_and_nothing_the_rules_read() {
        let s = setup(vec![search(), issues()], 400, None);
        let dry = AnalyzeOptions {
            dry_run: true,
            ..s.options.clone()
        };
        let before = run(&dry).unwrap();
        let line = format!(
            r#"{{"kind":"expansion","v":1,"ts_ms":{},"session":"00000000000000ee","tool":"{}","upstream":"0000000000000001","delivered":"again","tokenizer":"o200k_base","tokens":4321}}"#,
            dry.now_ms - 86_400_000,
            search().hash()
        );
        std::fs::write(
            dry.input.join("events-zz-expansions.jsonl"),
            format!("{line}\n"),
        )
        .unwrap();
        let after = run(&dry).unwrap();
        assert_eq!(after.read.expansions, 1);
        assert_eq!(
            format!("{:?}", after.decisions),
            format!("{:?}", before.decisions)
        );
        let tool = devboy_core::hash::fnv1a64(b"gh__search_code");
        let (old, new) = (
            before.analysis.endpoint(tool).unwrap(),
            after.analysis.endpoint(tool).unwrap(),
        );
        assert_eq!((new.calls, new.observed), (old.calls, old.observed));
        assert_eq!(new.dedup_saved, old.dedup_saved - 4321);
        assert_eq!(new.tokens_final, old.tokens_final + 4321);
        assert_eq!(after.analysis.sessions, before.analysis.sessions);
        let rendered = after.to_string();
        assert!(
            rendered.contains("# expanded: devboy_expand delivered 4,321 tokens in 1 call,"),
            "{rendered}"
        );
        assert!(!before.to_string().contains("# expanded"));
    }

    #[test]
    fn writes_kept_changes_and_preserves_hand_edits_across_runs() {
        let s = setup(vec![search(), issues()], 400, Some(HAND));
        let report = run(&s.options).unwrap();
        assert_eq!(report.written.as_deref(), Some(s.options.output.as_path()));
        let text = std::fs::read_to_string(&s.options.output).unwrap();
        for line in HAND.lines().filter(|l| !l.starts_with("schema_version")) {
            assert!(text.contains(line), "lost {line:?}:\n{text}");
        }
        // V1 wrote typical_tokens, a version 3 key: the file says 3 now.
        assert!(
            text.contains("\nschema_version = 3  # tune: was 2;"),
            "{text}"
        );
        assert!(text.contains("typical_tokens = "), "{text}");
        assert!(text.contains("dedup = false  # tune: D1"), "{text}");
        assert!(
            text.contains("template = \"md_tables_csv\"  # tune: T1"),
            "{text}"
        );
        let rendered = report.to_string();
        assert!(
            rendered.contains("kept    [endpoints.\"gh__search_code\"] dedup: true -> false  (D1)"),
            "{rendered}"
        );
        assert!(rendered.contains("wrote "), "{rendered}");
        // The table names endpoints and totals them, against a named baseline.
        assert!(rendered.contains("gh__list_issues") && rendered.contains("total"));
        assert!(rendered.contains("baseline `raw`") && rendered.contains("o200k_base"));

        assert!(
            rendered.contains("value-model priors (inputs of speculation; they change no token sent, so they are not simulated):"),
            "{rendered}"
        );
        assert!(
            rendered.contains("schema_version 2 -> 3, because a key written is new in version 3"),
            "{rendered}"
        );
        // A second run finds nothing more to do and leaves the file alone.
        let again = run(&s.options).unwrap();
        assert!(again.decisions.is_empty(), "{:?}", again.decisions);
        assert!(again.priors.is_empty(), "{:?}", again.priors);
        assert_eq!(again.written, None);
        assert_eq!(std::fs::read_to_string(&s.options.output).unwrap(), text);
        // The summary for `tune show` holds hashes, not names.
        let summary = std::fs::read_to_string(s.options.summary_file.as_ref().unwrap()).unwrap();
        assert!(summary.contains(&search().hash()) && !summary.contains("gh__search_code"));
        drop(s.dir);
    }

    #[test]
    fn speculation_switches_follow_the_simulation_verdict() {
        let switch = Change {
            rule: Rule::R7,
            target: Target::Tool {
                name: "fs__read".into(),
                key: "speculate",
            },
            from: crate::rules::Setting::Unset,
            to: crate::rules::Setting::Bool(false),
            reason: "r".into(),
        };
        let mut notes = Vec::new();
        let kept = guarded_switches(false, vec![switch.clone()], &mut notes);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0], switch);
        assert!(notes.is_empty());
        assert!(guarded_switches(true, vec![switch], &mut notes).is_empty());
        assert_eq!(
            notes,
            ["R7: 1 speculation switch(es) not written: the simulation kept the old config"]
        );
    }

    #[test]
    fn a_dry_run_writes_nothing() {
        let mut s = setup(vec![search()], 200, None);
        s.options.dry_run = true;
        let report = run(&s.options).unwrap();
        assert!(!s.options.output.exists());
        assert!(!s.options.summary_file.as_ref().unwrap().exists());
        let text = report.to_string();
        assert!(text.contains("dry run: nothing written"), "{text}");
        // The generated summaries are written as before devboy recorded
        // tool lists: the report says so, it prints no 0.
        assert!(
            text.contains("\n# tool definitions: not recorded by any of the 2 sessions (their telemetry predates it); tool results sent to the model: "),
            "{text}"
        );
        assert!(
            text.contains("[endpoints.\"gh__search_code\"]\n  dedup = false  # tune: D1"),
            "{text}"
        );
    }

    #[test]
    fn the_old_config_stays_when_the_proposal_would_save_less() {
        // 98% of the issue tables went through md_tables_csv, 2% through
        // another encoder: T1 fires (≥ 95%), and the simulation finds that
        // pinning would lose those 2%'s savings.
        let other = EndpointSpec {
            template: Some("csv"),
            weight: 1,
            ..issues()
        };
        let main = EndpointSpec {
            weight: 49,
            ..issues()
        };
        let s = setup(vec![main, other], 2000, Some(HAND));
        let report = run(&s.options).unwrap();
        let t1: Vec<&Decision> = report
            .decisions
            .iter()
            .filter(|d| d.change.rule == Rule::T1)
            .collect();
        assert_eq!(t1.len(), 1, "{report}");
        assert!(!t1[0].kept, "{report}");
        assert!(t1[0].after < t1[0].before);
        // Whatever else was kept, the pin is not in the file.
        let text = std::fs::read_to_string(&s.options.output).unwrap();
        assert!(!text.contains("template ="), "{text}");
        for line in HAND.lines().filter(|l| !l.starts_with("schema_version")) {
            assert!(text.contains(line), "lost {line:?}:\n{text}");
        }
        let text = report.to_string();
        assert!(
            text.contains("dropped [endpoints.\"gh__list_issues\"] template"),
            "{text}"
        );
        assert!(
            text.contains("saves less, the current value stays"),
            "{text}"
        );
    }

    #[test]
    fn endpoints_without_a_name_are_reported_not_tuned() {
        let s = setup(vec![search()], 200, None);
        std::fs::write(&s.options.names_file, "{}").unwrap();
        let report = run(&s.options).unwrap();
        assert!(report.decisions.is_empty());
        let text = report.to_string();
        assert!(text.contains("endpoints without a name"), "{text}");
        assert!(text.contains(&search().hash()), "{text}");
    }

    /// Rewrites the session summaries of `dir`: the first gets sample
    /// rate 0.5, the second disappears (a killed session).
    fn sample_first_and_kill_second(dir: &Path) {
        let mut seen = 0;
        for file in crate::read::event_files(dir).unwrap() {
            let text = std::fs::read_to_string(&file).unwrap();
            let mut out = String::new();
            for line in text.lines() {
                if line.contains(r#""kind":"session""#) {
                    seen += 1;
                    if seen == 1 {
                        let line = line.replace(r#""sample_rate":1.0"#, r#""sample_rate":0.5"#);
                        assert!(line.contains(r#""sample_rate":0.5"#));
                        out.push_str(&line);
                        out.push('\n');
                    }
                    continue;
                }
                out.push_str(line);
                out.push('\n');
            }
            std::fs::write(&file, out).unwrap();
        }
        assert_eq!(seen, 2);
    }

    #[test]
    fn the_report_marks_scaled_figures_and_says_what_was_sampled() {
        let mut s = setup(vec![search(), issues()], 400, Some(HAND));
        s.options.dry_run = true;
        sample_first_and_kill_second(&s.options.input);
        let report = run(&s.options).unwrap();
        let a = &report.analysis;
        assert_eq!(a.total.observed, 400);
        assert_eq!(a.total.calls, 600, "200 events at 0.5 and 200 at 1");
        assert_eq!(report.excluded, (1, 200));
        assert_eq!(report.reproduced.1, 200, "only the unsampled session");
        let text = report.to_string();
        for needle in [
            "sampled sessions: 1 at rate 0.5; their events are weighted by 1/rate",
            "minimum support counts observed events, unscaled",
            "sessions without a summary (still running or killed): 1;",
            "sessions sampled or with dropped events, left out of the cache replay and simulation: 1 (200 events);",
            "~: a scaled estimate",
            "~600",
        ] {
            assert!(text.contains(needle), "{needle:?} not in:\n{text}");
        }

        // Unsampled, nothing is marked.
        let s = setup(vec![search(), issues()], 400, Some(HAND));
        let mut options = s.options.clone();
        options.dry_run = true;
        let text = run(&options).unwrap().to_string();
        assert!(
            !text.contains('~') && !text.contains("sampled sessions:"),
            "{text}"
        );
        assert!(!text.contains("left out of the cache replay"), "{text}");
    }

    #[test]
    fn no_events_means_nothing_to_tune() {
        let s = setup(vec![search()], 0, None);
        let mut options = s.options.clone();
        options.input = s.dir.path().join("nothing-here");
        let report = run(&options).unwrap();
        let text = report.to_string();
        assert!(text.contains("nothing to tune"), "{text}");
        assert!(!options.output.exists());
    }
}
