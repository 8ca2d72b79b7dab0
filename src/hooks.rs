//! `devboy hook signal` and `devboy hook install`: the Claude Code hooks
//! that tell running devboy processes of a compaction, a /clear, the
//! session's model or a file the client wrote, and their installation into
//! a project's `.claude/settings.json`. What an event means and how the
//! hooks merge into the settings is `devboy_core::hooks`; this module does
//! the reading, writing and signalling.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use devboy_core::hooks::{self, HookAction};
use devboy_mcp::partition;

/// `devboy hook signal`. Never fails: problems go to stderr (which Claude
/// Code does not show for a hook that exits 0) and the exit code stays 0.
pub fn signal() {
    let mut input = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut input) {
        tracing::warn!(%error, "hook signal: cannot read stdin; ignored");
        return;
    }
    let value: serde_json::Value = match serde_json::from_str(&input) {
        Ok(value) => value,
        Err(error) => {
            tracing::debug!(%error, "hook signal: stdin is not JSON; ignored");
            return;
        }
    };
    // What to record in each project's state file.
    enum Record {
        Reset(Option<String>),
        Model(String),
        Writes(Vec<String>),
    }
    let (event, cwd, session_id, record) = match hooks::classify(&value) {
        HookAction::Signal {
            event,
            cwd,
            session_id,
            model,
        } => (event, cwd, session_id, Record::Reset(model)),
        HookAction::Model {
            event,
            model,
            cwd,
            session_id,
        } => (event, cwd, session_id, Record::Model(model)),
        HookAction::Written {
            event,
            paths,
            cwd,
            session_id,
        } => {
            // Relative paths are the session's: absolute from its `cwd`.
            let base = cwd.as_deref().map(PathBuf::from);
            let paths = paths
                .into_iter()
                .map(|path| match &base {
                    Some(base) if !std::path::Path::new(&path).is_absolute() => {
                        base.join(path).display().to_string()
                    }
                    _ => path,
                })
                .collect();
            (event, cwd, session_id, Record::Writes(paths))
        }
        HookAction::Ignore(reason) => {
            tracing::debug!(%reason, "hook signal: nothing to do");
            return;
        }
    };
    // The hook's `cwd` is where Claude Code is now; CLAUDE_PROJECT_DIR is
    // the project root, where it started its MCP servers. They differ when
    // the session changed directory; signal both (an extra signal only
    // costs savings, a missed one would leave dangling references).
    let mut projects: Vec<PathBuf> = Vec::new();
    let candidates = [
        cwd.map(PathBuf::from),
        std::env::var_os("CLAUDE_PROJECT_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from),
    ];
    for dir in candidates.into_iter().flatten() {
        let key = partition::project_key(&dir);
        if !projects.contains(&key) {
            projects.push(key);
        }
    }
    if projects.is_empty() {
        match std::env::current_dir() {
            Ok(dir) => projects.push(partition::project_key(&dir)),
            Err(error) => {
                tracing::warn!(%error, "hook signal: no cwd in the input and no working directory");
                return;
            }
        }
    }
    let runtime_dir = devboy_core::paths::runtime_dir();
    for project in projects {
        let file = devboy_core::paths::partition_file(&runtime_dir, &project);
        let session_id = session_id.as_deref();
        let written = match &record {
            Record::Reset(model) => {
                partition::signal(&file, &project, &event, session_id, model.as_deref())
            }
            Record::Model(model) => {
                partition::record_model(&file, &project, &event, session_id, model)
            }
            Record::Writes(paths) => {
                partition::record_writes(&file, &project, &event, session_id, paths)
            }
        };
        match written {
            Ok(state) => tracing::debug!(
                %event, project = %project.display(), epoch = state.epoch,
                model = state.model.as_deref().unwrap_or("unknown"),
                "hook signal: recorded"
            ),
            Err(error) => tracing::warn!(
                %event, file = %file.display(), %error,
                "hook signal: cannot write the partition file"
            ),
        }
    }
}

/// `devboy hook install`.
pub fn install(project: Option<PathBuf>, settings: Option<PathBuf>) -> anyhow::Result<()> {
    let file = match settings {
        Some(file) => file,
        None => {
            let project = match project {
                Some(dir) => dir,
                None => std::env::current_dir().context("finding the current directory")?,
            };
            project.join(".claude").join("settings.json")
        }
    };
    let exe = std::env::current_exe().context("finding the devboy executable")?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    // `.claude/settings.json` is often shared: write the command as a user
    // types it when `devboy` on PATH is this very program, and the path
    // only when it is not (a build run from its target directory).
    let command = if on_path_as("devboy", &exe) {
        hooks::signal_command("devboy")
    } else {
        let exe = exe
            .to_str()
            .with_context(|| format!("devboy's path {} is not UTF-8", exe.display()))?;
        hooks::signal_command(exe)
    };
    let mut document = read_settings(&file)?;
    let added = hooks::merge_hooks(&mut document, &command)
        .map_err(|e| anyhow::anyhow!("{}: {e}; the file was left unchanged", file.display()))?;
    if added.is_empty() {
        println!("devboy: devboy's hooks are already in {}", file.display());
        return Ok(());
    }
    write_settings(&file, &document)?;
    println!(
        "devboy: added the {} hook{} to {} (command: {command})",
        added.join(" and "),
        if added.len() > 1 { "s" } else { "" },
        file.display()
    );
    Ok(())
}

/// Whether `name`, looked up on PATH as a shell would, is the program at
/// `exe` (already canonical).
fn on_path_as(name: &str, exe: &Path) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .and_then(|found| std::fs::canonicalize(found).ok())
        .is_some_and(|found| found == exe)
}

/// A settings file as JSON; a missing or empty file is `{}`.
fn read_settings(file: &Path) -> anyhow::Result<serde_json::Value> {
    match std::fs::read_to_string(file) {
        Ok(text) if text.trim().is_empty() => Ok(serde_json::json!({})),
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not valid JSON ({e}); the file was left unchanged",
                file.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(serde_json::json!({})),
        Err(e) => Err(e).with_context(|| format!("reading {}", file.display())),
    }
}

/// Replaces `file` whole (temporary file, then rename) with `document`.
fn write_settings(file: &Path, document: &serde_json::Value) -> anyhow::Result<()> {
    // Write through a symlink to its target rather than replacing the link.
    let target = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let mut text = serde_json::to_string_pretty(document)?;
    text.push('\n');
    devboy_sharedfile::replace_shared(&target, text.as_bytes())
        .with_context(|| format!("replacing {}", target.display()))
}
