//! What the code tools (`devboy_explore`, `devboy_find_files`) share: the
//! call's `query` and source tree (`root`, else the directory devboy runs
//! in, the project in Claude Code; bounded as [`AllowedRoots`] says), the
//! index opened and used on a blocking thread, and failures as `isError`
//! results naming the tool.

use std::path::PathBuf;

use rmcp::model::{CallToolResult, ContentBlock};

use super::roots::AllowedRoots;
use super::BuiltinContext;

/// An `isError` result.
pub(super) fn failure(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// The call's query, or what is wrong with it (`query_help` says what
/// the query is). The call path has checked that it is given, as a
/// string; a blank one asks nothing either.
fn query(context: &BuiltinContext<'_>, tool: &str, query_help: &str) -> Result<String, String> {
    context
        .str_argument("query")
        .filter(|q| !q.trim().is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("{tool}: `query` is blank; it takes {query_help}"))
}

/// The call's query and its source tree (`root`, bounded by `roots`),
/// or the `isError` result to answer with.
pub(super) async fn query_and_root(
    context: &BuiltinContext<'_>,
    roots: &AllowedRoots,
    tool: &str,
    query_help: &str,
) -> Result<(String, PathBuf), CallToolResult> {
    let query = query(context, tool, query_help).map_err(failure)?;
    let root = roots
        .resolve(context, tool, context.str_argument("root"))
        .await
        .map_err(failure)?;
    Ok((query, root))
}

/// Brings the kept index and graph of `root` up to date (see
/// [`devboy_explore::kept`]) and computes `answer` from them, on a
/// blocking thread; a failure is the `isError` result to send.
pub(super) async fn from_index<T: Send + 'static>(
    tool: &'static str,
    root: PathBuf,
    answer: impl FnOnce(&devboy_explore::Kept) -> T + Send + 'static,
) -> Result<T, CallToolResult> {
    let answered = tokio::task::spawn_blocking(move || {
        devboy_explore::kept::open(&root, &devboy_explore::cache_dir()).map(|kept| answer(&kept))
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
