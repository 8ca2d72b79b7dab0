//! What one session did, as `devboy_status` and `devboy status` show it,
//! read from the parts of its stack; and the pipeline config's glob tables
//! checked against the tools served.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use devboy_core::pipeline_config::{PipelineConfig, RuleMatches};

use super::layers::Outside;
use crate::lazy::LazyListing;
use crate::partition::PartitionWatcher;
use crate::processor::PipelineProcessor;
use crate::proxy::Proxy;
use crate::seam::Seam;
use crate::speculation::SpeculationEngine;

/// One session's figures.
pub struct Figures {
    /// Tool calls the agent made (built-in and proxied).
    calls: AtomicU64,
    seam: Seam,
    outside: Arc<Outside>,
    pipeline: Option<Arc<PipelineProcessor>>,
    speculation: Option<Arc<SpeculationEngine>>,
    lazy: Arc<LazyListing>,
    rules: Rules,
}

impl Figures {
    pub(crate) fn new(
        seam: Seam,
        outside: Arc<Outside>,
        pipeline: Option<Arc<PipelineProcessor>>,
        speculation: Option<Arc<SpeculationEngine>>,
        lazy: Arc<LazyListing>,
        rules: Rules,
    ) -> Self {
        Self {
            calls: AtomicU64::new(0),
            seam,
            outside,
            pipeline,
            speculation,
            lazy,
            rules,
        }
    }

    /// Counts one call of the agent's.
    pub fn count_call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Calls the agent made.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The session's context partition.
    pub fn partition(&self) -> &PartitionWatcher {
        self.outside.partition()
    }

    /// The session's seam: its transform, its events, its counts.
    pub fn seam(&self) -> &Seam {
        &self.seam
    }

    /// The session's speculation engine, if it speculates.
    pub fn speculation(&self) -> Option<&Arc<SpeculationEngine>> {
        self.speculation.as_ref()
    }

    /// The session's pipeline, when one runs.
    pub fn pipeline(&self) -> Option<&Arc<PipelineProcessor>> {
        self.pipeline.as_ref()
    }

    /// The pipeline config's glob tables, checked against the catalog.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The pipeline's own report, once it has heard of every compaction
    /// and the model (may wait for a result being processed).
    pub fn pipeline_report(&self) -> Option<serde_json::Value> {
        self.outside.catch_up();
        self.pipeline.as_ref().map(|p| p.report())
    }

    /// [`figures_with`](Self::figures_with) the pipeline's report.
    pub fn figures(&self) -> serde_json::Value {
        self.figures_with(self.pipeline_report())
    }

    /// What this session did: calls, `savings` (the pipeline's figures,
    /// given), the seam's counts, the context partition, speculation and
    /// the lazy listing.
    pub fn figures_with(&self, savings: Option<serde_json::Value>) -> serde_json::Value {
        let seam = self.seam.stats();
        let partition = self.partition();
        serde_json::json!({
            "calls": self.calls(),
            "pipeline": self.seam.name(),
            "savings": savings,
            "processed": seam.processed.load(Ordering::Relaxed),
            "replaced": seam.replaced.load(Ordering::Relaxed),
            "pipeline_failures": seam.failures.load(Ordering::Relaxed),
            "passed_at_deadline": seam.deadline.load(Ordering::Relaxed),
            "context_partition": partition.current(),
            "compaction_signals": partition.signals(),
            "partition_file": partition.file().map(|f| f.display().to_string()),
            "speculation": self.speculation.as_ref().map_or_else(
                || serde_json::json!({"enabled": false}),
                |engine| engine.report_json()
            ),
            // `[tools] lazy`: listed only the tools it found or used.
            "lazy_tools": self.lazy.is_active(),
            "tools_found": self.lazy.revealed(),
        })
    }
}

/// The pipeline config's `[endpoints."GLOB"]` and `[tools."GLOB"]` tables,
/// checked against the tools served: status shows what each matches, and
/// one that matches nothing once every upstream has started is warned
/// about (once).
pub struct Rules {
    config: Option<Arc<PipelineConfig>>,
    proxy: Arc<Proxy>,
    /// The tables already warned about.
    warned: Mutex<HashSet<String>>,
}

impl Rules {
    pub(crate) fn new(config: Option<Arc<PipelineConfig>>, proxy: Arc<Proxy>) -> Self {
        Self {
            config,
            proxy,
            warned: Mutex::default(),
        }
    }

    /// What each table matches among the tools served now (empty without
    /// a pipeline config).
    pub fn matches(&self) -> Vec<RuleMatches> {
        let Some(rules) = &self.config else {
            return Vec::new();
        };
        let catalog = self.proxy.catalog();
        let names: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_ref()).collect();
        rules.rule_matches(&names)
    }

    /// Warns about each table that matches no tool, once every upstream
    /// has started (or failed) and only once per table.
    pub(crate) fn warn_unmatched(&self) {
        if self.config.is_none() || !self.proxy.all_started() {
            return;
        }
        let mut warned = crate::sync::lock(&self.warned);
        for rule in self.matches() {
            if rule.matches.is_empty() && warned.insert(format!("{}.{}", rule.table, rule.pattern))
            {
                tracing::warn!(
                    "pipeline_config.toml: [{}.\"{}\"] matches no tool devboy serves; tool names are <prefix>__<tool>, see devboy_status",
                    rule.table,
                    rule.pattern
                );
            }
        }
    }
}
