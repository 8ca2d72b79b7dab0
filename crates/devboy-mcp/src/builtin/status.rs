//! `devboy_status`: each upstream's state, tool count, calls served and
//! last error; the session's counters, pipeline, context partition and
//! what speculation did.

use std::sync::atomic::Ordering;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};

use super::{annotations, definition, BuiltinContext, BuiltinTool};
use crate::seam::Delivery;
use crate::stack::Figures;
use crate::sync::lock;
use crate::upstream::Phase;

/// How long status waits for the pipeline's figures.
const REPORT_WAIT: std::time::Duration = std::time::Duration::from_millis(300);

/// The `devboy_status` tool.
pub(super) struct Status;

impl BuiltinTool for Status {
    fn definition(&self) -> Tool {
        definition(
            "devboy_status",
            "devboy proxy status: each upstream MCP server's state, tool count, calls, errors and last error.",
            json!({"type": "object", "properties": {}}),
        )
        .with_annotations(annotations("Proxy status", true))
    }

    /// Clients parse the report as JSON, and no two are alike (uptime,
    /// counters): nothing to dedup or re-encode.
    fn delivery(&self) -> Delivery {
        Delivery::Volatile
    }

    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        Box::pin(async move {
            // The pipeline's figures wait for the result it is working on;
            // status never waits long for them.
            let session = context.figures().clone();
            let figures = tokio::task::spawn_blocking(move || session.pipeline_report());
            let savings = match tokio::time::timeout(REPORT_WAIT, figures).await {
                Ok(Ok(report)) => report,
                _ => Some(json!({"busy": "a result is being processed; ask again"})),
            };
            // Counting the definitions may first load the tokenizer's
            // vocabulary: never on this path; counted in the background for
            // the next status when not known yet.
            let catalog = context.proxy().catalog();
            let definitions = catalog.listing_tokens_if_counted();
            if definitions.is_none() {
                tokio::task::spawn_blocking(move || catalog.listing_tokens());
            }
            let text = report(context.proxy(), context.figures(), savings, definitions);
            Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
        })
    }
}

/// A compact JSON report: each upstream's state, tool count, counters and
/// last error, and this session's counters and context partition.
fn report(
    proxy: &crate::proxy::Proxy,
    session: &Figures,
    pipeline_report: Option<Value>,
    definitions: Option<usize>,
) -> String {
    let session_rules: Vec<Value> = session
        .rules()
        .matches()
        .into_iter()
        .map(|rule| json!({"table": rule.table, "pattern": rule.pattern, "matches": rule.matches}))
        .collect();
    let upstreams = upstreams_report(proxy);
    json!({
        "devboy": env!("CARGO_PKG_VERSION"),
        "uptime_s": proxy.uptime().as_secs(),
        "session": session.figures_with(pipeline_report),
        "upstreams": upstreams,
        // What in the config files is wrong and left out, a problem a line.
        "config_problem": proxy.config_problem(),
        // What listing every tool costs on every model request (o200k).
        "definition_tokens": definitions,
        "pipeline_rules": session_rules,
    })
    .to_string()
}

/// Each upstream's state, tool count, counters and last error (what
/// `devboy_status`, `devboy_servers` and `devboy status` show).
pub(crate) fn upstreams_report(proxy: &crate::proxy::Proxy) -> Vec<Value> {
    let catalog = proxy.catalog();
    proxy
        .upstreams()
        .iter()
        .filter(|upstream| !upstream.is_retired())
        .map(|upstream| {
            let config = upstream.config();
            let stats = &upstream.stats;
            let phase = upstream.phase();
            let mut entry = json!({
                "name": config.name,
                "prefix": config.prefix,
                "state": upstream.state_label(),
                "tools": catalog.tools_of(&config.name),
                // `cached`: listed from the last run's listing, the server
                // not up yet in this one.
                "listing": upstream.listing_source().label(),
                "calls": stats.calls.load(Ordering::Relaxed),
                "errors": stats.errors.load(Ordering::Relaxed),
                "timeouts": stats.timeouts.load(Ordering::Relaxed),
                "attempts": stats.attempts.load(Ordering::Relaxed),
                "restarts": stats.restarts.load(Ordering::Relaxed),
                "last_error": *lock(&stats.last_error),
            });
            if let Some(noise) = upstream.stdout_noise() {
                entry["stdout_not_json"] = json!(noise);
            }
            if let Some(down) = upstream.down_for() {
                entry["down_for_s"] = json!(down.as_secs());
            }
            if let Phase::Failed { retry_in, .. } = phase {
                // No retry means the config (or what the server is) cannot
                // work: fixing it needs a restart of devboy.
                entry["retry_in_ms"] = json!(retry_in.map(|d| d.as_millis() as u64));
                entry["retrying"] = json!(retry_in.is_some());
                // What the server said before it failed, for the person fixing it.
                entry["stderr_tail"] = json!(upstream.stderr_tail());
            }
            if let Some(pid) = upstream.pid() {
                entry["pid"] = json!(pid);
            }
            entry
        })
        .collect()
}
