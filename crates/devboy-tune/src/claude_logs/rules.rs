//! The rules that turn what the logs hold into config edits: P1 (the
//! model), P2 (the agent profile), P3 (tools' side effects and
//! follow-ups); see the parent module.

use devboy_core::pipeline_config::{PipelineConfig, Selection, SessionContext, SideEffectClass};
use devboy_core::tool_verb::VerbClass;

use super::LogStats;
use crate::edit::ConfigFile;
use crate::error::TuneError;
use crate::rules::{
    follow_up_settings, likely_follow_ups, prefetchable, Change, Rule, Setting, Target,
};

/// P1: the share of messages one model must answer to be pinned.
pub const DOMINANT_SHARE: f64 = 0.8;
/// P2: a session with at least this many tool uses is a long one.
pub const LONG_SESSION_TOOL_USES: u64 = 20;
/// P2: long sessions needed before the agent profile is pinned.
pub const MIN_LONG_SESSIONS: usize = 3;
/// P3: observations of a tool (it followed by any tool use) needed before
/// its follow-ups are written; the same minimum support as telemetry rules.
pub const MIN_FOLLOW_SUPPORT: u64 = crate::rules::MIN_SUPPORT;
/// P3: at most this many follow-ups per tool.
pub const MAX_FOLLOW_UPS: usize = 3;
/// The agent profile P2 pins.
pub const MARATHON: &str = "marathon";

/// The side-effect class a tool's name makes evident (P3's heuristic),
/// with the verb that says so ([`VerbClass`], the word list telemetry's
/// `endpoint_class` also comes from).
pub fn side_effect_from_name(tool: &str) -> Option<(SideEffectClass, String)> {
    let (class, word) = VerbClass::of_tool(tool);
    Some((class.side_effect()?, word?))
}

/// P1: pin the dominant model; say what it resolves to.
pub(super) fn model_rule(
    stats: &LogStats,
    file: &ConfigFile,
    config: &PipelineConfig,
    date: &str,
    proposed: &mut Vec<Change>,
    notes: &mut Vec<String>,
) -> Result<(), TuneError> {
    let messages: u64 = stats.models.values().sum();
    // The most messages; of equal counts, the first name (a stable choice).
    let Some((model, n)) = stats
        .models
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
    else {
        return Ok(());
    };
    let share = *n as f64 / messages as f64;
    let current = config.profiles.model.clone();
    let pinned = || match &current {
        Some(m) => format!("stays {m:?}"),
        None => "stays unset".to_owned(),
    };
    if share < DOMINANT_SHARE {
        notes.push(format!(
            "P1: no model answers {:.0}% of messages (the most, {model}, answers {:.0}%); [profiles] model {}",
            DOMINANT_SHARE * 100.0,
            share * 100.0,
            pinned()
        ));
    } else if current.as_deref() == Some(model.as_str()) {
        notes.push(format!(
            "P1: {model} answers {:.0}% of messages and is already [profiles] model; {}",
            share * 100.0,
            resolution(config, None)
        ));
    } else {
        let change = Change {
            rule: Rule::P1,
            target: Target::Global {
                section: "profiles",
                key: "model",
            },
            from: current.map_or(Setting::Unset, Setting::Str),
            to: Setting::Str(model.clone()),
            reason: String::new(),
        };
        // What the pin means, by devboy's own resolution of the text that
        // would be written; a file the pin cannot go into (version 1, left
        // unchanged below) is resolved with the model as if reported.
        let mut trial = file.clone();
        trial.apply(&change, date);
        let meaning = match trial.config() {
            Ok(pinned) => resolution(&pinned, None),
            Err(_) => resolution(config, Some(model)),
        };
        proposed.push(Change {
            reason: format!(
                "{model} answers {:.0}% of {messages} messages; with the pin, {meaning}",
                share * 100.0
            ),
            ..change
        });
    }
    notes.push(
        "P1: [profiles] client needs no pin: \"auto\" recognises Claude Code by name and acts on the structuredContent it forwards".into(),
    );
    Ok(())
}

/// What a session whose client reports `reported` (usually none) resolves
/// to under `config`, in words.
fn resolution(config: &PipelineConfig, reported: Option<&str>) -> String {
    let s = config.resolve_session(&SessionContext {
        model: reported.map(str::to_owned),
        ..SessionContext::default()
    });
    let llm = match (&s.llm, &config.profiles.llm) {
        (Some(l), Selection::Named(_)) => format!("llm profile `{l}` (named in [profiles] llm)"),
        (Some(l), Selection::Auto) => format!("llm profile `{l}`"),
        (None, _) => "no llm profile (none of [profiles.llms.*] matches it)".to_owned(),
    };
    let tokenizer = match (config.tokenizer, &s.llm) {
        (Some(_), _) => " (set in [profiles] tokenizer)",
        (None, Some(_)) => " (the profile's)",
        (None, None) => " (the default)",
    };
    format!(
        "a session whose client reports {} runs as {} with {llm}, tokenizer {}{tokenizer}",
        reported.map_or("no model".to_owned(), |m| format!("model {m}")),
        s.model.as_deref().unwrap_or("an unknown model"),
        s.tokenizer.name()
    )
}

/// P2: pin the `marathon` agent profile when most long sessions compact
/// as often as it asks.
pub(super) fn agent_rule(
    stats: &LogStats,
    config: &PipelineConfig,
    proposed: &mut Vec<Change>,
    notes: &mut Vec<String>,
) {
    let Some(marathon) = config.profiles.agents.iter().find(|a| a.name == MARATHON) else {
        return;
    };
    let Some(need) = marathon.min_compactions.filter(|n| *n > 0) else {
        notes.push(format!(
            "P2: [profiles.agents.{MARATHON}] sets no min_compactions, so there is no compaction count to compare sessions with; [profiles] agent left as it is"
        ));
        return;
    };
    let long: Vec<u64> = stats
        .per_session
        .values()
        .filter(|(uses, _)| *uses >= LONG_SESSION_TOOL_USES)
        .map(|(_, c)| *c)
        .collect();
    if long.len() < MIN_LONG_SESSIONS {
        if stats.sessions > 0 {
            notes.push(format!(
                "P2: sessions with ≥ {LONG_SESSION_TOOL_USES} tool uses: {} ({MIN_LONG_SESSIONS} needed to judge); [profiles] agent left as it is",
                long.len()
            ));
        }
        return;
    }
    let marathons = long.iter().filter(|c| **c >= need).count();
    let evidence = format!(
        "{marathons} of {} sessions with ≥ {LONG_SESSION_TOOL_USES} tool uses compacted ≥ {need} times (`{MARATHON}`'s min_compactions)",
        long.len()
    );
    if marathons * 2 < long.len() {
        notes.push(format!(
            "P2: {evidence}, fewer than half: [profiles] agent stays {:?}; `{MARATHON}` still applies to a session from its compaction {need} on when agent is \"auto\"",
            config.profiles.agent.name()
        ));
        return;
    }
    if config.profiles.agent == Selection::Named(MARATHON.into()) {
        notes.push(format!(
            "P2: {evidence}; [profiles] agent is already \"{MARATHON}\""
        ));
        return;
    }
    proposed.push(Change {
        rule: Rule::P2,
        target: Target::Global {
            section: "profiles",
            key: "agent",
        },
        from: Setting::Str(config.profiles.agent.name().to_owned()),
        to: Setting::Str(MARATHON.into()),
        reason: format!(
            "{evidence}: at least half, so sessions get the profile from their start rather than after compaction {need}"
        ),
    });
}

/// P3: side effects evident from the names of devboy's tools.
pub(super) fn side_effect_rule(
    stats: &LogStats,
    config: &PipelineConfig,
    prefix: &str,
    proposed: &mut Vec<Change>,
    unclassified: &mut Vec<String>,
) {
    for name in stats.tool_uses.keys() {
        let Some(exposed) = exposed_name(name, prefix) else {
            continue;
        };
        let tool = exposed.rsplit_once("__").map_or(exposed, |(_, t)| t);
        match side_effect_from_name(tool) {
            Some((class, verb)) => {
                let current = config
                    .configured_side_effect(exposed)
                    .unwrap_or(SideEffectClass::Unknown);
                if current == class {
                    continue;
                }
                proposed.push(Change {
                    rule: Rule::P3,
                    target: Target::Tool {
                        name: exposed.to_owned(),
                        key: "side_effect",
                    },
                    from: Setting::Str(current.name().into()),
                    to: Setting::Str(class.name().into()),
                    reason: format!(
                        "used {} times; the name's verb is `{verb}` (a heuristic on the name)",
                        stats.tool_uses[name],
                    ),
                });
            }
            None => unclassified.push(exposed.to_owned()),
        }
    }
}

/// The exposed name of a tool of devboy's server (`mcp__<server>__` +
/// `<prefix>__<tool>`); `None` for other servers' tools and for devboy's
/// built-in tools (no `__` in the exposed name).
fn exposed_name<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    name.strip_prefix(prefix).filter(|e| e.contains("__"))
}

/// P3: the calls that follow each of devboy's tools.
pub(super) fn follow_up_rule(
    stats: &LogStats,
    config: &PipelineConfig,
    prefix: &str,
    proposed: &mut Vec<Change>,
    notes: &mut Vec<String>,
) {
    let min_p = config.enrichment.min_probability;
    let mut thin = Vec::new();
    for (a_full, next) in &stats.next_tool {
        let Some(a) = exposed_name(a_full, prefix) else {
            continue;
        };
        let observed: u64 = next.values().sum();
        if observed < MIN_FOLLOW_SUPPORT {
            thin.push(format!("{a} ({observed})"));
            continue;
        }
        let candidates: Vec<(&str, u64)> = next
            .iter()
            .filter_map(|(b, n)| Some((exposed_name(b, prefix)?, *n)))
            .filter(|(b, _)| *b != a)
            .collect();
        let (may, may_not): (Vec<_>, Vec<_>) = candidates
            .into_iter()
            .partition(|(b, _)| prefetchable(config, b));
        let links = likely_follow_ups(may, observed, min_p, MAX_FOLLOW_UPS);
        // Frequent enough, but an edge to them would only ever be declined.
        let left_out: Vec<&str> = likely_follow_ups(may_not, observed, min_p, usize::MAX)
            .into_iter()
            .map(|(b, _)| b)
            .collect();
        let left_out = if left_out.is_empty() {
            String::new()
        } else {
            format!(
                "; left out, since speculation never prefetches them (not pure or read-only): {}",
                left_out.join(", ")
            )
        };
        if links.is_empty() {
            notes.push(format!(
                "P3: after {a} ({observed} observations) no other devboy tool that may be prefetched follows at least {min_p} of the time; no follow_up{left_out}"
            ));
            continue;
        }
        let (from, to) = follow_up_settings(config, a, &links, observed);
        if from == to {
            continue;
        }
        let counts: Vec<String> = links.iter().map(|(b, n)| format!("{b} {n}")).collect();
        proposed.push(Change {
            rule: Rule::P3,
            target: Target::Tool {
                name: a.to_owned(),
                key: "follow_up",
            },
            from,
            to,
            reason: format!(
                "of {observed} tool uses right after it in the same session: {}{left_out}",
                counts.join(", "),
            ),
        });
    }
    if !thin.is_empty() {
        notes.push(format!(
            "P3: too few calls after {} (fewer than {MIN_FOLLOW_SUPPORT} observations each) to write a follow_up",
            thin.join(", ")
        ));
    }
}
