//! A planner with fixed edges, for testing and measuring the speculation
//! engine. It is not a real planner: no probabilities, no budget, no value
//! model. It exists so the engine's behaviour can be pinned down without
//! one (the tests and `benches/speculation.rs` share it).

// Each includer uses a part of it.
#![allow(dead_code)]

use std::time::Duration;

use devboy_core::speculation::DeclineReason;
use devboy_mcp::{
    AnsweredCall, Declined, Plan, PlannedPrefetch, PrefetchPlanner, SpeculationSettings,
};
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

/// What an edge derives from an answer: follow-up calls (exposed name,
/// arguments).
pub type Follow =
    Box<dyn Fn(&CallToolResult, Option<&JsonObject>) -> Vec<(String, JsonObject)> + Send + Sync>;

/// Fixed follow-up edges from a tool's answers.
pub struct FixedEdges {
    /// The settings the engine runs with.
    pub settings: SpeculationSettings,
    /// (from exposed name, follow-ups).
    pub edges: Vec<(String, Follow)>,
    /// Tools taken as read-only whatever their annotations (as a
    /// `side_effect` config override would).
    pub read_only: Vec<String>,
    /// `fail_fast_after_n` per exposed name.
    pub fail_fast: Vec<(String, usize)>,
}

impl FixedEdges {
    /// No edges, default settings.
    pub fn new() -> Self {
        Self {
            settings: SpeculationSettings::default(),
            edges: Vec::new(),
            read_only: Vec::new(),
            fail_fast: Vec::new(),
        }
    }

    /// After an answer of `from`, prefetch what `follow` derives from it.
    pub fn edge(mut self, from: &str, follow: Follow) -> Self {
        self.edges.push((from.to_owned(), follow));
        self
    }

    /// `tool` is read-only.
    pub fn read_only(mut self, tool: &str) -> Self {
        self.read_only.push(tool.to_owned());
        self
    }

    /// The embedded pipeline config with the tools taken as read-only
    /// classed so (`[tools."NAME"] side_effect = "read_only"`), for the
    /// session's classes.
    pub fn classes(&self) -> std::sync::Arc<devboy_core::pipeline_config::PipelineConfig> {
        let mut text = String::from("schema_version = 3\n");
        for tool in &self.read_only {
            text.push_str(&format!("[tools.{tool:?}]\nside_effect = \"read_only\"\n"));
        }
        let config = devboy_core::pipeline_config::PipelineConfig::embedded_default()
            .overlaid(&text, std::path::Path::new("test.toml"))
            .expect("the test classes parse");
        std::sync::Arc::new(config)
    }
}

/// A follow-up `to` with `argument` set to each non-blank line of the
/// answer's text (`$lines`): a search's hits become reads.
pub fn each_line(to: &'static str, argument: &'static str) -> Follow {
    Box::new(move |result, _| {
        let text: String = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        text.lines()
            .map(str::trim)
            .filter(|l| l.starts_with('/'))
            .map(|line| {
                let mut arguments = JsonObject::new();
                arguments.insert(argument.to_owned(), Value::String(line.to_owned()));
                (to.to_owned(), arguments)
            })
            .collect()
    })
}

/// The fixed follow-up `to` with `arguments`.
pub fn always(to: &'static str, arguments: Value) -> Follow {
    Box::new(move |_, _| {
        vec![(
            to.to_owned(),
            arguments.as_object().cloned().unwrap_or_default(),
        )]
    })
}

impl PrefetchPlanner for FixedEdges {
    fn plan(&self, answered: &AnsweredCall<'_>) -> Plan {
        let mut plan = Plan::default();
        for (from, follow) in &self.edges {
            if *from != answered.info.exposed {
                continue;
            }
            for (exposed, arguments) in follow(answered.result, answered.info.arguments.as_ref()) {
                if (answered.held)(&exposed, &arguments) {
                    plan.declined.push(Declined {
                        exposed,
                        reason: DeclineReason::AlreadyHeld,
                    });
                    continue;
                }
                plan.chosen.push(PlannedPrefetch {
                    exposed,
                    arguments,
                    probability: 1.0,
                    value: 1.0,
                    predicted_tokens: 100,
                    host: String::new(),
                    freshness: Duration::ZERO,
                });
            }
        }
        plan
    }

    fn settings(&self) -> &SpeculationSettings {
        &self.settings
    }

    fn fail_fast_after(&self, exposed: &str) -> Option<usize> {
        self.fail_fast
            .iter()
            .find(|(name, _)| name == exposed)
            .map(|(_, n)| *n)
    }
}
