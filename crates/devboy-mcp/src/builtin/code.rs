//! What the code tools (`devboy_explore`, `devboy_find_files`) share: the
//! call's `query` and source tree (`root`, else the directory devboy runs
//! in, the project in Claude Code), the index opened and used on a
//! blocking thread, and failures as `isError` results naming the tool.

use std::path::PathBuf;

use rmcp::model::{CallToolResult, ContentBlock};

use super::BuiltinContext;

/// An `isError` result.
pub(super) fn failure(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// The call's query and source tree, or what is wrong with them
/// (`query_help` says what the query is).
pub(super) fn query_and_root(
    context: &BuiltinContext<'_>,
    tool: &str,
    query_help: &str,
) -> Result<(String, PathBuf), String> {
    let Some(query) = context
        .str_argument("query")
        .filter(|q| !q.trim().is_empty())
    else {
        return Err(format!("{tool}: `query` is required: {query_help}"));
    };
    let root = match context.str_argument("root") {
        Some(root) => PathBuf::from(root),
        None => std::env::current_dir()
            .map_err(|e| format!("{tool}: no working directory ({e}); give `root`"))?,
    };
    if !root.is_dir() {
        return Err(format!("{tool}: {} is not a directory", root.display()));
    }
    Ok((query.to_owned(), root))
}

/// Opens (or refreshes) the index of `root` and computes `answer` from
/// it, on a blocking thread; a failure is the `isError` result to send.
pub(super) async fn from_index<T: Send + 'static>(
    tool: &'static str,
    root: PathBuf,
    answer: impl FnOnce(&devboy_explore::Index) -> T + Send + 'static,
) -> Result<T, CallToolResult> {
    let answered = tokio::task::spawn_blocking(move || {
        devboy_explore::Index::open(&root, &devboy_explore::cache_dir()).map(|index| answer(&index))
    })
    .await;
    match answered {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(failure(format!("{tool}: {e}"))),
        Err(e) => Err(failure(format!(
            "{tool}: the index could not be built: {e}"
        ))),
    }
}
