//! One tool's value model with every layer merged: shipped defaults, the
//! server's annotations, then `[tools."GLOB"]`.

use std::collections::HashMap;
use std::time::Duration;

use devboy_core::call::{SideEffect, ToolClassFacts};
use devboy_core::pipeline_config::{PipelineConfig, SideEffectClass};
use devboy_core::tool_verb::VerbClass;
use devboy_core::value_model::{ArgSource, FollowUp, ValueClass};
use serde_json::{Map, Value};

use crate::facts::ToolFacts;
use crate::fit;
use crate::shipped::{ShippedServer, SERVERS};

/// A tool as the planner sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedTool {
    /// The exposed name.
    pub exposed: String,
    /// The effective side-effect class ([`devboy_core::call::side_effect`]:
    /// the config, else the annotations, else the shipped class, else the
    /// name's verb).
    pub side_effect: SideEffect,
    /// The class devboy ships for it, when its server is well known.
    pub shipped: Option<SideEffectClass>,
    /// Whether its name or annotations say it writes; such a tool is never
    /// speculated, whatever the config says.
    pub writes: bool,
    /// `speculate` from the config, if set.
    pub speculate: Option<bool>,
    /// Whether it reaches a remote service (an HTTP upstream,
    /// `openWorldHint: true`, or a `rate_limit_host`).
    pub remote: bool,
    /// How long a prefetched result may answer: `freshness_secs`, else
    /// `enrichment.ttl_secs`.
    pub freshness: Duration,
    /// What its result is worth (`supporting` when nothing says).
    pub value_class: ValueClass,
    /// A typical result's cost in tokens, if known.
    pub typical_tokens: Option<usize>,
    /// `fail_fast_after_n`, if set.
    pub fail_fast_after_n: Option<usize>,
    /// The key prefetches to it are counted under for `per_host`: its
    /// `rate_limit_host`, else its upstream.
    pub host: String,
    /// Calls that often follow it, targets by exposed name.
    pub edges: Vec<Edge>,
    /// Its input schema.
    pub input_schema: Map<String, Value>,
}

/// A follow-up edge, resolved to exposed names.
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    /// The exposed name of the tool called next.
    pub target: String,
    /// How likely that call is.
    pub probability: f64,
    /// Where its arguments come from.
    pub args: Vec<(String, ArgSource)>,
    /// At most this many calls from one answer.
    pub limit: usize,
}

/// The side-effect class annotations imply: `pure` when read-only and
/// idempotent, else [`SideEffectClass::from_annotations`].
fn annotated_class(facts: &ToolFacts) -> SideEffectClass {
    let a = facts.annotations;
    match SideEffectClass::from_annotations(a.read_only, a.destructive) {
        SideEffectClass::ReadOnly if a.idempotent == Some(true) => SideEffectClass::Pure,
        class => class,
    }
}

fn name_says_writes(tool: &str) -> bool {
    VerbClass::of_tool(tool).0.says_writes()
}

/// The classes devboy ships for one upstream's tools, when the tools it
/// exposes (`names`, upstream names) show it to be a well-known server:
/// for each name, its shipped class (`None`: unknown server, or a tool the
/// server's entry does not know). The same recognition the planner makes.
pub fn shipped_classes(names: &[&str]) -> Vec<Option<SideEffectClass>> {
    let server = SERVERS
        .iter()
        .find(|s| s.signature.iter().all(|sig| names.contains(sig)));
    names
        .iter()
        .map(|name| server.and_then(|s| s.tools.iter().find(|t| t.0 == *name).map(|t| t.1)))
        .collect()
}

/// The well-known servers among the catalog: upstream → its entry.
fn recognised(tools: &[ToolFacts]) -> HashMap<&str, &'static ShippedServer> {
    let mut by_upstream: HashMap<&str, Vec<&str>> = HashMap::new();
    for t in tools {
        by_upstream
            .entry(t.upstream.as_str())
            .or_default()
            .push(t.tool.as_str());
    }
    by_upstream
        .into_iter()
        .filter_map(|(upstream, names)| {
            SERVERS
                .iter()
                .find(|s| s.signature.iter().all(|sig| names.contains(sig)))
                .map(|s| (upstream, s))
        })
        .collect()
}

/// Every tool of the catalog, merged.
pub(crate) fn resolve_all(
    tools: Vec<ToolFacts>,
    config: &PipelineConfig,
) -> HashMap<String, ResolvedTool> {
    let servers = recognised(&tools);
    let exposed_of = |upstream: &str, tool: &str| {
        tools
            .iter()
            .find(|t| t.upstream == upstream && t.tool == tool)
    };
    let shipped: Vec<(Option<&'static ShippedServer>, Vec<Edge>)> = tools
        .iter()
        .map(|facts| {
            let server = servers.get(facts.upstream.as_str()).copied();
            let edges = server
                .map(|s| shipped_edges(s, facts, &exposed_of))
                .unwrap_or_default();
            (server, edges)
        })
        .collect();
    tools
        .into_iter()
        .zip(shipped)
        .map(|(facts, (server, edges))| {
            let resolved = resolve(facts, server, edges, config);
            (resolved.exposed.clone(), resolved)
        })
        .collect()
}

/// The shipped edges from `facts`' tool whose targets its upstream offers
/// and whose argument names fit the target's schema.
fn shipped_edges<'t>(
    server: &ShippedServer,
    facts: &ToolFacts,
    exposed_of: &dyn Fn(&str, &str) -> Option<&'t ToolFacts>,
) -> Vec<Edge> {
    server
        .edges
        .iter()
        .filter(|e| e.from == facts.tool)
        .filter_map(|e| {
            let target = exposed_of(&facts.upstream, e.to)?;
            let names: Vec<&str> = e.args.iter().map(|(n, _)| *n).collect();
            if !fit::names_fit(&names, &target.input_schema) {
                return None;
            }
            let args = e
                .args
                .iter()
                .map(|(n, s)| Some(((*n).to_owned(), ArgSource::parse(s).ok()?)))
                .collect::<Option<Vec<_>>>()?;
            Some(Edge {
                target: target.exposed.clone(),
                probability: e.probability,
                args,
                limit: e.limit,
            })
        })
        .collect()
}

fn resolve(
    facts: ToolFacts,
    server: Option<&ShippedServer>,
    shipped: Vec<Edge>,
    config: &PipelineConfig,
) -> ResolvedTool {
    let model = config.tool_model(&facts.exposed);
    let known = server.and_then(|s| s.tools.iter().find(|t| t.0 == facts.tool));
    let side_effect = devboy_core::call::side_effect(
        config,
        &facts.exposed,
        ToolClassFacts {
            annotated: annotated_class(&facts),
            shipped: known.map(|t| t.1),
            name: &facts.tool,
        },
    );
    let shipped_class = known.map(|t| t.1);
    let writes = facts.annotations.say_writes() || name_says_writes(&facts.tool);
    let remote = facts.remote_upstream
        || facts.annotations.open_world == Some(true)
        || model.rate_limit_host.is_some();
    ResolvedTool {
        exposed: facts.exposed,
        side_effect,
        shipped: shipped_class,
        writes,
        speculate: model.speculate,
        remote,
        freshness: model.freshness.unwrap_or(config.enrichment.ttl),
        value_class: model
            .value_class
            .or(known.map(|t| t.2))
            .unwrap_or(ValueClass::Supporting),
        typical_tokens: model.typical_tokens,
        fail_fast_after_n: model.fail_fast_after_n,
        host: model.rate_limit_host.clone().unwrap_or(facts.upstream),
        edges: merge_edges(shipped, &model.follow_up),
        input_schema: facts.input_schema,
    }
}

/// The config's edges over the shipped ones: an item with arguments
/// replaces the shipped edges to its tool; an item without keeps their
/// projections and sets their probability (what the tuner writes); an
/// item without arguments and without a shipped edge plans nothing.
fn merge_edges(shipped: Vec<Edge>, configured: &[FollowUp]) -> Vec<Edge> {
    let mut out: Vec<Edge> = shipped
        .into_iter()
        .filter(|e| {
            !configured
                .iter()
                .any(|f| f.tool == e.target && !f.args.is_empty())
        })
        .collect();
    for f in configured {
        if f.args.is_empty() {
            for e in out.iter_mut().filter(|e| e.target == f.tool) {
                e.probability = f.probability;
            }
        } else {
            out.push(Edge {
                target: f.tool.clone(),
                probability: f.probability,
                args: f.args.clone(),
                limit: f.limit.max(1),
            });
        }
    }
    out
}
