//! Planning one answered call: candidates from the answered tool's edges,
//! the filters that keep speculation read-only and cheap, the score, and
//! the choice.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use devboy_core::pipeline_config::{EnrichmentSettings, PipelineConfig};
use devboy_core::speculation::DeclineReason;
use devboy_core::value_model::ValueClass;
use serde_json::{Map, Value};

use crate::choose::{best_subset, Item};
use crate::facts::ToolFacts;
use crate::fit;
use crate::model::{resolve_all, Edge, ResolvedTool};
use crate::projection::{project, ParsedAnswer};
use devboy_core::call::CallKey;

/// The predicted cost of a result nothing says anything about: about a
/// screenful of text.
pub const DEFAULT_PREDICTED_TOKENS: usize = 1000;

/// The most an intent match multiplies a candidate's value by.
pub const MAX_INTENT_BOOST: f64 = 1.5;

/// Plans prefetches for one catalog snapshot and config; cheap to
/// rebuild when either changes.
#[derive(Clone, Debug)]
pub struct Planner {
    tools: HashMap<String, ResolvedTool>,
    settings: EnrichmentSettings,
}

/// The call just answered.
#[derive(Clone, Copy, Debug)]
pub struct Answered<'a> {
    /// Its exposed name.
    pub exposed: &'a str,
    /// Its arguments.
    pub arguments: Option<&'a Map<String, Value>>,
    /// Its `structuredContent`, if any.
    pub structured: Option<&'a Value>,
    /// Its text content blocks, joined with newlines (what `$lines` and
    /// `$match` read, and what is parsed as JSON when there is no
    /// `structuredContent`).
    pub text: &'a str,
}

/// What the session holds and is doing, as the planner needs to know it.
pub struct PlanContext<'a> {
    /// Whether a call (exposed name, arguments) was answered in this
    /// context, is stored, or is in flight.
    pub held: &'a dyn Fn(&str, &Map<String, Value>) -> bool,
    /// The median tokens of a tool's results so far, if known.
    pub median_tokens: &'a dyn Fn(&str) -> Option<usize>,
    /// Words of the agent's recent arguments, lower case.
    pub recent_words: &'a [String],
    /// Prefetches in flight now.
    pub in_flight: usize,
    /// Prefetches in flight now on a host key.
    pub in_flight_on: &'a dyn Fn(&str) -> usize,
}

/// What to prefetch after one answered call, and what not and why.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The calls to make, most valuable per token first.
    pub chosen: Vec<Prefetch>,
    /// The candidates left out.
    pub declined: Vec<Declined>,
}

/// A call to make ahead of the agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Prefetch {
    /// The exposed name of the tool.
    pub exposed: String,
    /// Its arguments, fitted to its input schema.
    pub arguments: Map<String, Value>,
    /// How likely the agent is to make this call.
    pub probability: f64,
    /// What it is worth (class weight × probability × intent boost).
    pub value: f64,
    /// Its predicted cost in tokens.
    pub predicted_tokens: usize,
    /// The key it counts under for `per_host`.
    pub host: String,
    /// How long its result may answer the agent's call.
    pub freshness: Duration,
}

/// A candidate left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declined {
    /// The exposed name of the tool.
    pub exposed: String,
    /// Why.
    pub reason: DeclineReason,
}

/// What a result of a class is worth, relative to a critical one.
fn class_weight(class: ValueClass) -> f64 {
    match class {
        ValueClass::Critical => 1.0,
        ValueClass::Supporting => 0.6,
        ValueClass::Optional => 0.3,
        ValueClass::AuditOnly => 0.0,
    }
}

impl Planner {
    /// The planner for a catalog and config: every tool's model merged.
    pub fn new(tools: Vec<ToolFacts>, config: &PipelineConfig) -> Planner {
        Planner {
            tools: resolve_all(tools, config),
            settings: config.enrichment.clone(),
        }
    }

    /// The merged model of the tool exposed as `exposed`.
    pub fn tool(&self, exposed: &str) -> Option<&ResolvedTool> {
        self.tools.get(exposed)
    }

    /// Whether an answer of `exposed` can lead to any prefetch at all (it
    /// has edges and speculation is on): when not, [`plan`](Self::plan)
    /// returns an empty plan without reading the answer, and a caller need
    /// not put the answer's text together for it.
    pub fn plans_after(&self, exposed: &str) -> bool {
        self.settings.enabled
            && self
                .tools
                .get(exposed)
                .is_some_and(|tool| !tool.edges.is_empty())
    }

    /// What to prefetch after `answered`.
    pub fn plan(&self, answered: &Answered<'_>, ctx: &PlanContext<'_>) -> Plan {
        let mut plan = Plan::default();
        let Some(source) = self.tools.get(answered.exposed) else {
            return plan;
        };
        if !self.plans_after(answered.exposed) {
            return plan;
        }
        let answer = ParsedAnswer::new(answered);
        let own_key = CallKey::new(answered.exposed, answered.arguments);
        let mut seen = HashSet::new();
        let mut candidates = Vec::new();
        let mut unprojected = Vec::new();
        for edge in &source.edges {
            let target = match self.eligible(edge) {
                Ok(target) => target,
                Err(reason) => {
                    plan.decline(&edge.target, reason);
                    continue;
                }
            };
            let sets = project(&edge.args, edge.limit, &answer, &target.input_schema);
            let fitted: Vec<_> = sets
                .into_iter()
                .filter_map(|args| fit::fit(args, &target.input_schema))
                .collect();
            if fitted.is_empty() {
                unprojected.push(edge.target.as_str());
            }
            for arguments in fitted {
                let key = CallKey::new(&target.exposed, Some(&arguments));
                if !seen.insert(key.clone()) {
                    continue;
                }
                if key == own_key {
                    plan.decline(&target.exposed, DeclineReason::SelfLoop);
                } else if (ctx.held)(&target.exposed, &arguments) {
                    plan.decline(&target.exposed, DeclineReason::AlreadyHeld);
                } else {
                    candidates.push(self.candidate(target, edge, arguments, ctx));
                }
            }
        }
        // Of several edges to one tool (versions of a server's shape),
        // one that projects is enough.
        for target in unprojected {
            let projected = seen.iter().any(|k: &CallKey| k.exposed() == target);
            if !projected {
                plan.decline(target, DeclineReason::NoArguments);
            }
        }
        self.choose(candidates, ctx, &mut plan);
        plan
    }

    /// The target of `edge` if it may be called ahead of the agent at
    /// all, else why not.
    fn eligible(&self, edge: &Edge) -> Result<&ResolvedTool, DeclineReason> {
        let target = self
            .tools
            .get(&edge.target)
            .ok_or(DeclineReason::UnknownTool)?;
        if target.speculate == Some(false) {
            return Err(DeclineReason::SpeculateOff);
        }
        if target.writes {
            return Err(DeclineReason::Writes);
        }
        if !target.side_effect.may_prefetch() {
            return Err(DeclineReason::NotReadOnly);
        }
        if target.remote && !self.settings.remote && target.speculate != Some(true) {
            return Err(DeclineReason::Remote);
        }
        if edge.probability < self.settings.min_probability {
            return Err(DeclineReason::LowProbability);
        }
        Ok(target)
    }

    fn candidate(
        &self,
        target: &ResolvedTool,
        edge: &Edge,
        arguments: Map<String, Value>,
        ctx: &PlanContext<'_>,
    ) -> Prefetch {
        let predicted_tokens = target
            .typical_tokens
            .or_else(|| (ctx.median_tokens)(&target.exposed))
            .unwrap_or(DEFAULT_PREDICTED_TOKENS);
        let value = class_weight(target.value_class)
            * edge.probability
            * intent_boost(&arguments, ctx.recent_words);
        Prefetch {
            exposed: target.exposed.clone(),
            arguments,
            probability: edge.probability,
            value,
            predicted_tokens,
            host: target.host.clone(),
            freshness: target.freshness,
        }
    }

    /// Keeps the free slots per host (densest first), then the most
    /// valuable set within the budget and the free slots overall.
    fn choose(&self, mut candidates: Vec<Prefetch>, ctx: &PlanContext<'_>, plan: &mut Plan) {
        candidates.sort_by(|a, b| density(b).total_cmp(&density(a)));
        let mut per_host: HashMap<String, usize> = HashMap::new();
        let mut kept = Vec::with_capacity(candidates.len());
        for c in candidates {
            let free = *per_host.entry(c.host.clone()).or_insert_with(|| {
                self.settings
                    .per_host
                    .saturating_sub((ctx.in_flight_on)(&c.host))
            });
            if free == 0 {
                plan.decline(&c.exposed, DeclineReason::HostBusy);
            } else {
                per_host.insert(c.host.clone(), free - 1);
                kept.push(c);
            }
        }
        let slots = self.settings.max_parallel.saturating_sub(ctx.in_flight);
        let items: Vec<Item> = kept
            .iter()
            .map(|c| Item {
                value: c.value,
                cost: c.predicted_tokens,
            })
            .collect();
        let mut chosen = best_subset(&items, self.settings.budget_tokens, slots);
        chosen.sort_unstable();
        let full = chosen.len() >= slots;
        for (i, c) in kept.into_iter().enumerate() {
            if chosen.binary_search(&i).is_ok() {
                plan.chosen.push(c);
            } else if full {
                plan.decline(&c.exposed, DeclineReason::OverParallel);
            } else {
                // Also a zero-value (audit_only) candidate: never worth
                // its tokens.
                plan.decline(&c.exposed, DeclineReason::OverBudget);
            }
        }
    }
}

impl Plan {
    fn decline(&mut self, exposed: &str, reason: DeclineReason) {
        self.declined.push(Declined {
            exposed: exposed.to_owned(),
            reason,
        });
    }
}

fn density(p: &Prefetch) -> f64 {
    p.value / p.predicted_tokens.max(1) as f64
}

/// 1 + a quarter for each of up to two recent words found in the
/// candidate's string arguments: a call about what the agent was just
/// asking about is likelier to be wanted.
fn intent_boost(arguments: &Map<String, Value>, recent_words: &[String]) -> f64 {
    if recent_words.is_empty() {
        return 1.0;
    }
    let text: String = arguments
        .values()
        .filter_map(Value::as_str)
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ");
    let hits = recent_words
        .iter()
        .filter(|w| w.len() >= 3 && text.contains(w.as_str()))
        .take(2)
        .count();
    (1.0 + 0.25 * hits as f64).min(MAX_INTENT_BOOST)
}
