//! `devboy_find_files`: the files a question or an issue is about, ranked
//! ([`devboy_explore::rank_offline`]: the code graph, the paths, the text;
//! no model). Its result goes through the pipeline like any other.

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, Tool};
use rmcp::ErrorData as McpError;
use serde_json::json;

use super::code::{answer_from_index, failure, query_and_root};
use super::{annotations, definition, BuiltinContext, BuiltinTool};

/// The `devboy_find_files` tool.
pub struct FindFiles;

/// The most files a call may ask for.
const MAX_K: u64 = 100;

impl BuiltinTool for FindFiles {
    fn definition(&self) -> Tool {
        definition(
            "devboy_find_files",
            "Find the files a task or an issue is about, ranked: give it the issue text (stack traces, names and paths in it help). Reads the code graph (symbols and the calls between them), file paths and file text of the project; returns paths, best first. Use it before listing and reading directories to guess.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The task or issue text."},
                    "root": {"type": "string", "description": "The source tree (default: the project devboy runs in)."},
                    "k": {"type": "integer", "minimum": 1, "description": "How many files (default 10)."}
                },
                "required": ["query"]
            }),
        )
        .with_annotations(annotations("devboy find files", true))
    }

    fn call<'a>(
        &'a self,
        context: BuiltinContext<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, McpError>> {
        let (query, root) =
            match query_and_root(&context, "devboy_find_files", "the task or issue text") {
                Ok(call) => call,
                Err(message) => return Box::pin(async move { Ok(failure(message)) }),
            };
        let k = context
            .arguments
            .and_then(|a| a.get("k"))
            .and_then(serde_json::Value::as_u64)
            .map_or(10, |k| k.clamp(1, MAX_K) as usize);
        Box::pin(async move {
            Ok(answer_from_index("devboy_find_files", root, move |index| {
                let found = devboy_explore::rank_offline(index, &query, k);
                devboy_explore::render_found(&query, &found)
            })
            .await)
        })
    }
}
