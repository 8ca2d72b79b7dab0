//! `devboy_explore`: "how does X work", answered from the source of the
//! project devboy runs in (or `root`), sized to the answer
//! ([`devboy_explore::explore`]). Its result goes through the pipeline like
//! any other.

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::ErrorData as McpError;
use serde_json::json;

use super::code::{from_index, query_and_root};
use super::roots::AllowedRoots;
use super::{annotations, definition, BuiltinContext, BuiltinTool};

/// The `devboy_explore` tool, with the pipeline config's `[explore]`
/// settings.
pub(super) struct Explore {
    adaptive: bool,
    budget_chars: usize,
    roots: AllowedRoots,
}

impl Explore {
    pub(super) fn new(settings: &devboy_core::pipeline_config::ExploreSettings) -> Self {
        Explore {
            adaptive: settings.adaptive,
            budget_chars: settings.budget_chars,
            roots: AllowedRoots::new(&settings.allowed_roots),
        }
    }
}

/// The smallest budget an agent may ask for: room for a heading and a
/// file's excerpt.
const MIN_BUDGET: u64 = 1_000;
/// The largest budget an agent may ask for.
const MAX_BUDGET: u64 = 200_000;

impl BuiltinTool for Explore {
    fn definition(&self) -> Tool {
        definition(
            "devboy_explore",
            "Answers how code works with the source that matters: the call path between the symbols named, in full; alternative implementations as signatures. Cheaper than searching and reading files.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The question, or symbol names"},
                    "root": {"type": "string", "description": "Source tree (default: project)"},
                    "budget_chars": {"type": "integer", "minimum": MIN_BUDGET, "maximum": MAX_BUDGET, "description": "Answer size (default 16000)"}
                },
                "required": ["query"]
            }),
        )
        .with_annotations(annotations("Explore how code works", true))
    }

    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        let options = devboy_explore::Options {
            // The environment's escape hatch wins over the config.
            adaptive: self.adaptive
                && devboy_core::pipeline_config::ExploreSettings::adaptive_allowed_by_env(),
            // Within the schema's bounds: the call path checked it.
            budget_chars: context
                .arguments
                .and_then(|a| a.get("budget_chars"))
                .and_then(serde_json::Value::as_u64)
                .map_or(self.budget_chars, |budget| budget as usize),
        };
        Box::pin(async move {
            let (query, root) = match query_and_root(
                &context,
                &self.roots,
                "devboy_explore",
                "the question, or the names of the symbols it is about",
            )
            .await
            {
                Ok(call) => call,
                Err(failed) => return Ok(failed),
            };
            let answered = from_index("devboy_explore", root, move |kept| {
                devboy_explore::explore_in(kept.graph(), &query, &options).text
            })
            .await;
            Ok(answered.map_or_else(
                |failed| failed,
                |text| CallToolResult::success(vec![ContentBlock::text(text)]),
            ))
        })
    }
}
