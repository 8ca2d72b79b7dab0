//! The planner devboy runs: `devboy-enrichment`'s pure [`Planner`] behind
//! [`PrefetchPlanner`], rebuilt whenever the catalog changes, with the
//! little state planning needs between calls (recent argument words, the
//! running sizes of each tool's results).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use devboy_core::config::UpstreamTransport;
use devboy_core::pipeline_config::{EnrichmentMode, PipelineConfig};
use devboy_enrichment::{Annotations, Answered, PlanContext, Planner, ToolFacts};
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

use super::{AnsweredCall, Plan, PrefetchPlanner, SpeculationMode, SpeculationSettings};
use crate::catalog::{Catalog, ToolRoute};
use crate::proxy::Proxy;
use crate::upstream::lock;

/// How many recent argument words may boost a candidate.
const RECENT_WORDS: usize = 32;
/// How many result sizes per tool the running median is taken over.
const SIZES_KEPT: usize = 15;

/// `pipeline_config.toml`'s value models and `[enrichment]` settings at
/// work on the tools the proxy serves.
pub struct ConfiguredPlanner {
    config: Arc<PipelineConfig>,
    proxy: Arc<Proxy>,
    settings: SpeculationSettings,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The planner for the catalog it was built from.
    built: Option<(Arc<Catalog>, Arc<Planner>)>,
    /// Words of the arguments of the last calls, newest last.
    words: VecDeque<String>,
    /// The last results' estimated tokens, per exposed name.
    sizes: HashMap<String, VecDeque<usize>>,
}

impl ConfiguredPlanner {
    /// The planner for `proxy`'s tools under `config`.
    pub fn new(config: Arc<PipelineConfig>, proxy: Arc<Proxy>) -> Self {
        let e = &config.enrichment;
        let settings = SpeculationSettings {
            enabled: e.enabled,
            mode: match e.mode {
                EnrichmentMode::Prefetch => SpeculationMode::Prefetch,
                EnrichmentMode::Inline => SpeculationMode::Inline,
            },
            prefetch_timeout: e.prefetch_timeout,
            max_parallel: e.max_parallel,
            per_host: e.per_host,
            ttl: e.ttl,
            budget_tokens: e.budget_tokens,
            ..SpeculationSettings::default()
        };
        Self {
            config,
            proxy,
            settings,
            state: Mutex::default(),
        }
    }

    /// The planner for `catalog`, built once per catalog snapshot.
    fn planner_for(&self, catalog: &Arc<Catalog>) -> Arc<Planner> {
        if let Some((seen, planner)) = &lock(&self.state).built {
            if Arc::ptr_eq(seen, catalog) {
                return planner.clone();
            }
        }
        let planner = Arc::new(Planner::new(self.facts(catalog), &self.config));
        lock(&self.state).built = Some((catalog.clone(), planner.clone()));
        planner
    }

    /// What the catalog says of each upstream tool.
    fn facts(&self, catalog: &Catalog) -> Vec<ToolFacts> {
        let upstreams = self.proxy.upstreams();
        catalog
            .tools
            .iter()
            .filter_map(|tool| {
                let Some(ToolRoute::Upstream {
                    upstream,
                    tool: original,
                    ..
                }) = catalog.tool_route(&tool.name)
                else {
                    return None;
                };
                let config = upstreams
                    .iter()
                    .find(|u| !u.is_retired() && u.config().name == *upstream)?
                    .config();
                let a = tool.annotations.as_ref();
                Some(ToolFacts {
                    exposed: tool.name.to_string(),
                    upstream: config.name.clone(),
                    tool: original.clone(),
                    annotations: Annotations {
                        read_only: a.and_then(|a| a.read_only_hint),
                        destructive: a.and_then(|a| a.destructive_hint),
                        idempotent: a.and_then(|a| a.idempotent_hint),
                        open_world: a.and_then(|a| a.open_world_hint),
                    },
                    input_schema: (*tool.input_schema).clone(),
                    remote_upstream: !matches!(config.transport, UpstreamTransport::Stdio { .. }),
                })
            })
            .collect()
    }

    /// Remembers the words of `arguments` and the size of `result`.
    fn learn(&self, exposed: &str, arguments: Option<&JsonObject>, tokens: usize) {
        let mut state = lock(&self.state);
        let sizes = state.sizes.entry(exposed.to_owned()).or_default();
        if sizes.len() == SIZES_KEPT {
            sizes.pop_front();
        }
        sizes.push_back(tokens);
        for value in arguments.into_iter().flat_map(|a| a.values()) {
            if let Value::String(text) = value {
                for word in words(text) {
                    if state.words.len() == RECENT_WORDS {
                        state.words.pop_front();
                    }
                    state.words.push_back(word);
                }
            }
        }
    }

    fn median_tokens(&self, exposed: &str) -> Option<usize> {
        let state = lock(&self.state);
        let mut sizes: Vec<usize> = state.sizes.get(exposed)?.iter().copied().collect();
        sizes.sort_unstable();
        sizes.get(sizes.len() / 2).copied()
    }
}

/// The words of an argument worth matching: runs of letters and digits of
/// three or more, lowercased (path parts, identifiers, search terms).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
}

/// The text blocks of a result, joined as the planner reads them.
fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A result's cost estimated without a tokenizer (about four bytes a
/// token for English and code): a prior for the planner, not a figure
/// anyone reports.
fn estimated_tokens(text: &str, structured: Option<&Value>) -> usize {
    let bytes = match structured {
        Some(value) => serde_json::to_string(value).map_or(text.len(), |s| s.len()),
        None => text.len(),
    };
    devboy_core::tokens::estimate(bytes)
}

impl PrefetchPlanner for ConfiguredPlanner {
    fn plan(&self, answered: &AnsweredCall<'_>) -> Plan {
        let catalog = self.proxy.catalog();
        let planner = self.planner_for(&catalog);
        let info = answered.info;
        let text = text_of(answered.result);
        let structured = answered.result.structured_content.as_ref();
        self.learn(
            &info.exposed,
            info.arguments.as_ref(),
            estimated_tokens(&text, structured),
        );
        let recent: Vec<String> = lock(&self.state).words.iter().cloned().collect();
        let median = |exposed: &str| self.median_tokens(exposed);
        let context = PlanContext {
            held: answered.held,
            median_tokens: &median,
            recent_words: &recent,
            in_flight: answered.in_flight,
            in_flight_on: answered.in_flight_on,
        };
        planner.plan(
            &Answered {
                exposed: &info.exposed,
                arguments: info.arguments.as_ref(),
                structured,
                text: &text,
            },
            &context,
        )
    }

    fn settings(&self) -> &SpeculationSettings {
        &self.settings
    }

    fn fail_fast_after(&self, exposed: &str) -> Option<usize> {
        self.config.tool_model(exposed).fail_fast_after_n
    }

    fn invalidates(&self, caller: &str, exposed: &str) -> bool {
        self.config.invalidates(caller, exposed)
    }
}
