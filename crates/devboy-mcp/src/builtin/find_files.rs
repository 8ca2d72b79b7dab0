//! `devboy_find_files`: the files a question or an issue is about, ranked
//! ([`devboy_explore::rank_offline`]: the code graph, the paths, the text;
//! no model). Its result goes through the pipeline like any other.

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::ErrorData as McpError;
use serde_json::json;

use super::{annotations, definition, BuiltinContext, BuiltinTool};

/// The `devboy_find_files` tool.
pub struct FindFiles;

/// The most files a call may ask for.
const MAX_K: u64 = 100;

fn failure(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

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
        let query = context.str_argument("query").map(str::to_owned);
        let root = context.str_argument("root").map(std::path::PathBuf::from);
        let k = context
            .arguments
            .and_then(|a| a.get("k"))
            .and_then(serde_json::Value::as_u64)
            .map_or(10, |k| k.clamp(1, MAX_K) as usize);
        Box::pin(async move {
            let Some(query) = query.filter(|q| !q.trim().is_empty()) else {
                return Ok(failure(
                    "devboy_find_files: `query` is required: the task or issue text".into(),
                ));
            };
            let root = match root {
                Some(root) => root,
                None => match std::env::current_dir() {
                    Ok(dir) => dir,
                    Err(e) => {
                        return Ok(failure(format!(
                            "devboy_find_files: no working directory ({e}); give `root`"
                        )))
                    }
                },
            };
            if !root.is_dir() {
                return Ok(failure(format!(
                    "devboy_find_files: {} is not a directory",
                    root.display()
                )));
            }
            let found = tokio::task::spawn_blocking(move || {
                devboy_explore::Index::open(&root, &devboy_explore::cache_dir()).map(|index| {
                    let found = devboy_explore::rank_offline(&index, &query, k);
                    devboy_explore::render_found(&query, &found)
                })
            })
            .await;
            Ok(match found {
                Ok(Ok(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
                Ok(Err(e)) => failure(format!("devboy_find_files: {e}")),
                Err(e) => failure(format!(
                    "devboy_find_files: the index could not be built: {e}"
                )),
            })
        })
    }
}
