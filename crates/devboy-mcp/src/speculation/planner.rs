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
                // Only the last RECENT_WORDS words of an argument can stay:
                // a long one (a file's content, an echoed text) is read from
                // its end and no further.
                let mut last: Vec<String> = last_words(text, RECENT_WORDS).collect();
                last.reverse();
                for word in last {
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

/// The last `n` words of `text` worth matching, last first: runs of
/// letters and digits of three or more, lowercased (path parts,
/// identifiers, search terms).
fn last_words(text: &str, n: usize) -> impl Iterator<Item = String> + '_ {
    text.rsplit(|c: char| !c.is_alphanumeric())
        .filter(|w| is_word(w))
        .take(n)
        .map(str::to_lowercase)
}

/// Three letters or digits or more.
fn is_word(w: &str) -> bool {
    w.chars().nth(2).is_some()
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
fn estimated_tokens(result: &CallToolResult, structured: Option<&Value>) -> usize {
    // The length of the text blocks joined by newlines, as `text_of`
    // would make them, without making them.
    let texts: Vec<usize> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len()))
        .collect();
    let text = texts.iter().sum::<usize>() + texts.len().saturating_sub(1);
    let bytes = match structured {
        Some(value) => json_len(value).unwrap_or(text),
        None => text,
    };
    devboy_core::tokens::estimate(bytes)
}

/// How long `value` is as compact JSON, counted as it is written.
fn json_len(value: &Value) -> Option<usize> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).ok()?;
    Some(count.0)
}

impl PrefetchPlanner for ConfiguredPlanner {
    fn plan(&self, answered: &AnsweredCall<'_>) -> Plan {
        let catalog = self.proxy.catalog();
        let planner = self.planner_for(&catalog);
        let info = answered.info;
        let structured = answered.result.structured_content.as_ref();
        self.learn(
            &info.exposed,
            info.arguments.as_ref(),
            estimated_tokens(answered.result, structured),
        );
        // Most tools lead nowhere: their answers are not put together.
        if !planner.plans_after(&info.exposed) {
            return Plan::default();
        }
        let text = text_of(answered.result);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every word of `text` in order, as a forward reading finds them.
    fn all_words(text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .map(str::to_lowercase)
            .collect()
    }

    #[test]
    fn the_last_words_are_those_a_whole_reading_keeps() {
        let long: String = (0..500).map(|i| format!("Word{i} ab, ")).collect();
        for text in [
            "src/Main.rs and docs/README.md",
            "ab cd ÉTÉ été 123 xy",
            "",
            "--- ... ",
            long.as_str(),
        ] {
            let all = all_words(text);
            for n in [0, 1, 3, RECENT_WORDS] {
                let mut last: Vec<String> = last_words(text, n).collect();
                last.reverse();
                assert_eq!(last, all[all.len().saturating_sub(n)..], "{text:?}, {n}");
            }
        }
    }

    #[test]
    fn a_result_is_estimated_without_being_put_together() {
        let result = CallToolResult::success(vec![
            rmcp::model::ContentBlock::text("a".repeat(4000)),
            rmcp::model::ContentBlock::text("b".repeat(3999)),
        ]);
        let joined = text_of(&result);
        assert_eq!(
            estimated_tokens(&result, None),
            devboy_core::tokens::estimate(joined.len())
        );
        let structured = serde_json::json!({"items": [1, 2, "three"], "é": "ü"});
        assert_eq!(
            estimated_tokens(&result, Some(&structured)),
            devboy_core::tokens::estimate(serde_json::to_string(&structured).unwrap().len())
        );
    }
}
