//! Where the code tools (`devboy_explore`, `devboy_find_files`) may read.
//!
//! An agent's `root` is a path the model wrote, so it is bounded: it must
//! lie, after canonicalizing (`..`, symlinks), inside the directory devboy
//! serves (its working directory, the project in Claude Code), inside a
//! root the client declares (MCP `roots/list`, asked only when the
//! client has the roots capability and the first two did not allow the
//! path), or inside one of `[explore] allowed_roots`. Anything else is
//! refused before any file is read, with a message saying how to allow
//! it. `devboy explore --root` and `devboy find-files` on the command line
//! take any directory: there a person names it.
//!
//! MCP deprecates roots (SEP-2577) and rmcp marks its types so; clients in
//! use still declare them, so this module allows the deprecation, and
//! only this module.
#![allow(deprecated)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::BuiltinContext;

/// How long the client may take to list its roots.
const LIST_ROOTS_TIMEOUT: Duration = Duration::from_secs(5);

/// The directories besides the served one that the code tools may read.
#[derive(Debug, Clone, Default)]
pub(crate) struct AllowedRoots {
    /// `[explore] allowed_roots`, as configured (absolute).
    configured: Vec<PathBuf>,
}

impl AllowedRoots {
    /// The roots `[explore] allowed_roots` names.
    pub(crate) fn new(configured: &[PathBuf]) -> Self {
        Self {
            configured: configured.to_vec(),
        }
    }

    /// The canonical source tree of a call of `tool`: `requested` (relative
    /// to the served directory), else the served directory itself. `Err`
    /// is the message of the `isError` result to answer with (a `root`
    /// that is missing or not a directory is named as such).
    pub(crate) async fn resolve(
        &self,
        context: &BuiltinContext<'_>,
        tool: &str,
        requested: Option<&str>,
    ) -> Result<PathBuf, String> {
        let served = std::env::current_dir()
            .and_then(|dir| dir.canonicalize())
            .map_err(|e| format!("{tool}: no working directory ({e})"))?;
        // A server started in `/` (as some clients start them) serves no
        // project: the whole disk is not a source tree.
        let project = served.parent().is_some().then_some(served.as_path());
        let root = match requested {
            Some(root) => served.join(root),
            None => match project {
                Some(project) => project.to_path_buf(),
                None => {
                    return Err(format!(
                        "{tool}: devboy runs in {} (no project); give `root`, a directory the client declares as a root or one of `[explore] allowed_roots`",
                        served.display()
                    ))
                }
            },
        };
        let canonical =
            devboy_explore::source_root(&root).map_err(|e| format!("{tool}: `root` {e}"))?;
        if project.is_some_and(|p| canonical.starts_with(p)) || inside(&canonical, &self.configured)
        {
            return Ok(canonical);
        }
        let declared = client_roots(context).await;
        if let Ok(roots) = &declared {
            if inside(&canonical, roots) {
                return Ok(canonical);
            }
        }
        Err(self.refusal(tool, &root, &canonical, project, &declared))
    }

    /// Why `root` is refused and how to allow it.
    fn refusal(
        &self,
        tool: &str,
        root: &Path,
        canonical: &Path,
        project: Option<&Path>,
        declared: &Result<Vec<PathBuf>, String>,
    ) -> String {
        let shown = if root == canonical {
            root.display().to_string()
        } else {
            format!("{} ({})", root.display(), canonical.display())
        };
        let project = project.map_or_else(
            || "none (devboy runs in /)".to_owned(),
            |p| p.display().to_string(),
        );
        let client = match declared {
            Ok(roots) if roots.is_empty() => "none".to_owned(),
            Ok(roots) => list(roots),
            Err(why) => why.clone(),
        };
        let configured = if self.configured.is_empty() {
            "none".to_owned()
        } else {
            list(&self.configured)
        };
        format!(
            "{tool}: {shown} is outside the directories devboy may read: the project it serves ({project}), the client's roots ({client}) and `[explore] allowed_roots` ({configured}). To allow it, add it to `allowed_roots` under `[explore]` in pipeline_config.toml (then restart devboy), declare it as a root in the MCP client, or start devboy in a directory that holds it."
        )
    }
}

/// Whether `path` (canonical) lies inside one of `roots`.
fn inside(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| {
        // A root that does not exist allows nothing.
        root.canonicalize().is_ok_and(|root| path.starts_with(root))
    })
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The local directories the client declares as its roots, or why there
/// are none to consult (it has no roots capability, did not answer).
async fn client_roots(context: &BuiltinContext<'_>) -> Result<Vec<PathBuf>, String> {
    let Some(peer) = context.client() else {
        return Err("no client".to_owned());
    };
    let declares = peer
        .peer_info()
        .is_some_and(|info| info.capabilities.roots.is_some());
    if !declares {
        return Err("the client declares none".to_owned());
    }
    // Asked at each call that needs it: roots may change at any time, and
    // most calls never get here.
    let listed = tokio::select! {
        listed = tokio::time::timeout(LIST_ROOTS_TIMEOUT, peer.list_roots()) => listed,
        () = context.ct.cancelled() => return Err("cancelled".to_owned()),
    };
    match listed {
        Ok(Ok(listed)) => Ok(listed
            .roots
            .iter()
            .filter_map(|root| url::Url::parse(&root.uri).ok()?.to_file_path().ok())
            .collect()),
        Ok(Err(e)) => Err(format!("roots/list failed: {e}")),
        Err(_) => Err(format!(
            "roots/list unanswered in {} s",
            LIST_ROOTS_TIMEOUT.as_secs()
        )),
    }
}
