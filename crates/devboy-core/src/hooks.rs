//! The Claude Code hooks that tell devboy the model's context was compacted
//! or cleared, and which files Claude Code's own tools wrote: what their
//! input means, and how they are merged into a `.claude/settings.json`.
//! Pure functions on JSON values; the file and process I/O live in the
//! `devboy hook …` commands.
//!
//! Claude Code (2.1.x) runs a hook command with one JSON object on stdin.
//! Every event carries `session_id`, `transcript_path`, `cwd` and
//! `hook_event_name`; `PreCompact` adds `trigger` (`manual` | `auto`) and
//! `custom_instructions`; `SessionStart` adds `source` (`startup` |
//! `resume` | `clear` | `compact` | `fork`) and `model` (the model id the
//! session runs with). A matcher selects on `trigger` for `PreCompact` and
//! on `source` for `SessionStart`. For both events the command's stdout
//! goes into the model's context or the compaction instructions, so the
//! hook command prints nothing there.
//!
//! `SessionStart` on `startup` and `resume` replaces no context; devboy
//! hears it only to learn the model (its llm profile: tokenizer, budget).
//!
//! `PostToolUse` adds `tool_name`, `tool_input` and `tool_response`; its
//! matcher selects on the tool name. Claude Code's Edit, Write, MultiEdit
//! and NotebookEdit write files without any MCP call devboy could see
//! (their input names the file as `file_path`, or `notebook_path`): the
//! hook is how a running devboy learns that what it holds about that file
//! (a prefetched read, a delivered one) may be stale.

use serde_json::{json, Map, Value};

/// The `SessionStart` matcher devboy installs: the sources that start a
/// new context, and the ones that start a session (for the model id). The
/// command checks `source` again anyway.
pub const SESSION_START_MATCHER: &str = "startup|resume|compact|clear";

/// The matcher installed by devboy before it read the model: widened in
/// place when found.
const OLD_SESSION_START_MATCHER: &str = "compact|clear";

/// The `PostToolUse` matcher devboy installs: Claude Code's tools that
/// write files.
pub const POST_TOOL_USE_MATCHER: &str = "Edit|Write|MultiEdit|NotebookEdit";

/// What a hook input asks devboy to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAction {
    /// The context was (or is about to be) replaced: advance the partition
    /// of the project at `cwd`.
    Signal {
        /// A short label such as `PreCompact:auto` or `SessionStart:clear`.
        event: String,
        /// The hook's `cwd`: the project directory, not yet canonical.
        cwd: Option<String>,
        /// The Claude Code session, for the record only.
        session_id: Option<String>,
        /// The model id, when the input names one.
        model: Option<String>,
    },
    /// A session started with this model: record it for the project at
    /// `cwd`, without advancing anything.
    Model {
        /// A short label such as `SessionStart:startup`.
        event: String,
        /// The model id.
        model: String,
        /// The hook's `cwd`.
        cwd: Option<String>,
        /// The Claude Code session, for the record only.
        session_id: Option<String>,
    },
    /// Claude Code's own tool wrote these files (as the input names them:
    /// absolute, or relative to `cwd`).
    Written {
        /// A short label such as `PostToolUse:Edit`.
        event: String,
        /// The files.
        paths: Vec<String>,
        /// The hook's `cwd`.
        cwd: Option<String>,
        /// The Claude Code session, for the record only.
        session_id: Option<String>,
    },
    /// Nothing to do, and why (for the debug log).
    Ignore(String),
}

/// Classifies one hook input: `PreCompact`, and `SessionStart` with source
/// `compact` or `clear`, signal; `SessionStart` with another source and a
/// model records the model; everything else is ignored.
pub fn classify(input: &Value) -> HookAction {
    let field = |name: &str| input.get(name).and_then(Value::as_str);
    let model = field("model").filter(|m| !m.is_empty()).map(str::to_owned);
    let label = |detail: &str| format!("{}:{detail}", field("hook_event_name").unwrap_or_default());
    let signal = |detail: &str| HookAction::Signal {
        event: label(detail),
        cwd: field("cwd").map(str::to_owned),
        session_id: field("session_id").map(str::to_owned),
        model: model.clone(),
    };
    match field("hook_event_name") {
        Some("PreCompact") => signal(field("trigger").unwrap_or("unknown")),
        Some("SessionStart") => match (field("source"), model.clone()) {
            (Some(source @ ("compact" | "clear")), _) => signal(source),
            (source, Some(model)) => HookAction::Model {
                event: label(source.unwrap_or("startup")),
                model,
                cwd: field("cwd").map(str::to_owned),
                session_id: field("session_id").map(str::to_owned),
            },
            (other, None) => HookAction::Ignore(format!(
                "SessionStart with source {} and no model",
                other.unwrap_or("(none)")
            )),
        },
        Some("PostToolUse") => {
            let tool = field("tool_name").unwrap_or_default();
            if !POST_TOOL_USE_MATCHER.split('|').any(|t| t == tool) {
                return HookAction::Ignore(format!("PostToolUse of {tool}"));
            }
            let paths: Vec<String> = ["file_path", "notebook_path"]
                .iter()
                .filter_map(|key| input.pointer(&format!("/tool_input/{key}")))
                .filter_map(Value::as_str)
                .filter(|path| !path.is_empty())
                .map(str::to_owned)
                .collect();
            if paths.is_empty() {
                return HookAction::Ignore(format!("PostToolUse of {tool} names no file"));
            }
            HookAction::Written {
                event: label(tool),
                paths,
                cwd: field("cwd").map(str::to_owned),
                session_id: field("session_id").map(str::to_owned),
            }
        }
        Some(other) => HookAction::Ignore(format!("event {other}")),
        None => HookAction::Ignore("no hook_event_name".to_owned()),
    }
}

/// Why a settings document could not take the hooks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}`: expected {expected}")]
pub struct MergeError {
    /// The JSON path of the offending value, e.g. `hooks.PreCompact`.
    pub key: String,
    /// What devboy expected there.
    pub expected: &'static str,
}

/// Shell-quotes `path` for a hook `command` (Claude Code runs it through a
/// shell): left alone when it holds only safe characters, else in single
/// quotes.
pub fn shell_quote(path: &str) -> String {
    let safe = !path.is_empty()
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:=@%".contains(&b));
    if safe {
        path.to_owned()
    } else {
        format!("'{}'", path.replace('\'', r"'\''"))
    }
}

/// The hook command line for the devboy executable at `exe`.
pub fn signal_command(exe: &str) -> String {
    format!("{} hook signal", shell_quote(exe))
}

/// Merges the `PreCompact`, `SessionStart` ([`SESSION_START_MATCHER`]) and
/// `PostToolUse` ([`POST_TOOL_USE_MATCHER`]) hook entries running
/// `command` into `settings` (a whole `settings.json`),
/// keeping every other key and hook. An event that already has a hook
/// with exactly this command is left alone, so merging twice adds nothing.
/// Returns the events that were added.
pub fn merge_hooks(settings: &mut Value, command: &str) -> Result<Vec<&'static str>, MergeError> {
    let root = settings.as_object_mut().ok_or(MergeError {
        key: "(top level)".to_owned(),
        expected: "a JSON object",
    })?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or(MergeError {
            key: "hooks".to_owned(),
            expected: "an object of event name to matcher groups",
        })?;
    let mut added = Vec::new();
    for (event, matcher) in [
        ("PreCompact", None),
        ("SessionStart", Some(SESSION_START_MATCHER)),
        ("PostToolUse", Some(POST_TOOL_USE_MATCHER)),
    ] {
        let groups = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or(MergeError {
                key: format!("hooks.{event}"),
                expected: "an array of matcher groups",
            })?;
        let present = groups.iter_mut().find(|group| {
            group
                .get("hooks")
                .and_then(Value::as_array)
                .is_some_and(|list| {
                    list.iter().any(|hook| {
                        hook.get("type").and_then(Value::as_str) == Some("command")
                            && hook.get("command").and_then(Value::as_str) == Some(command)
                    })
                })
        });
        if let Some(group) = present {
            // Installed by an older devboy: widen its matcher in place.
            if event == "SessionStart"
                && group.get("matcher").and_then(Value::as_str) == Some(OLD_SESSION_START_MATCHER)
            {
                group["matcher"] = json!(matcher);
                added.push(event);
            }
            continue;
        }
        let mut group = json!({"hooks": [{"type": "command", "command": command}]});
        if let Some(matcher) = matcher {
            group["matcher"] = json!(matcher);
        }
        groups.push(group);
        added.push(event);
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_events_that_replace_the_context() {
        let pre = json!({"session_id": "s", "transcript_path": "/t.jsonl", "cwd": "/p",
            "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": null});
        assert_eq!(
            classify(&pre),
            HookAction::Signal {
                event: "PreCompact:auto".into(),
                cwd: Some("/p".into()),
                session_id: Some("s".into()),
                model: None,
            }
        );
        for source in ["compact", "clear"] {
            let start = json!({"session_id": "s", "cwd": "/p",
                "hook_event_name": "SessionStart", "source": source});
            assert!(
                matches!(classify(&start), HookAction::Signal { event, .. } if event == format!("SessionStart:{source}"))
            );
        }
        for source in ["startup", "resume", "fork"] {
            let start = json!({"cwd": "/p", "hook_event_name": "SessionStart", "source": source});
            assert!(matches!(classify(&start), HookAction::Ignore(_)));
            let with_model = json!({"cwd": "/p", "hook_event_name": "SessionStart",
                "source": source, "model": "claude-sonnet-4-5"});
            assert_eq!(
                classify(&with_model),
                HookAction::Model {
                    event: format!("SessionStart:{source}"),
                    model: "claude-sonnet-4-5".into(),
                    cwd: Some("/p".into()),
                    session_id: None
                }
            );
        }
        let compact = json!({"cwd": "/p", "hook_event_name": "SessionStart",
            "source": "compact", "model": "claude-opus-4"});
        assert!(matches!(classify(&compact),
            HookAction::Signal { model: Some(m), .. } if m == "claude-opus-4"));
        assert!(matches!(
            classify(&json!({"hook_event_name": "Stop"})),
            HookAction::Ignore(_)
        ));
        let edit = json!({"session_id": "s", "cwd": "/p", "hook_event_name": "PostToolUse",
            "tool_name": "Edit", "tool_input": {"file_path": "/p/src/a.rs", "old_string": "x"},
            "tool_response": {}});
        assert_eq!(
            classify(&edit),
            HookAction::Written {
                event: "PostToolUse:Edit".into(),
                paths: vec!["/p/src/a.rs".into()],
                cwd: Some("/p".into()),
                session_id: Some("s".into()),
            }
        );
        let notebook = json!({"hook_event_name": "PostToolUse", "tool_name": "NotebookEdit",
            "tool_input": {"notebook_path": "n.ipynb"}});
        assert!(matches!(classify(&notebook),
            HookAction::Written { paths, .. } if paths == ["n.ipynb"]));
        let read = json!({"hook_event_name": "PostToolUse", "tool_name": "Read",
            "tool_input": {"file_path": "/p/a"}});
        assert!(matches!(classify(&read), HookAction::Ignore(_)));
        assert!(matches!(classify(&json!([1, 2])), HookAction::Ignore(_)));
    }

    #[test]
    fn merge_into_empty_settings() {
        let mut settings = json!({});
        let added = merge_hooks(&mut settings, "/bin/devboy hook signal").unwrap();
        assert_eq!(added, ["PreCompact", "SessionStart", "PostToolUse"]);
        assert_eq!(
            settings,
            json!({"hooks": {
                "PreCompact": [{"hooks": [{"type": "command", "command": "/bin/devboy hook signal"}]}],
                "SessionStart": [{"matcher": "startup|resume|compact|clear",
                    "hooks": [{"type": "command", "command": "/bin/devboy hook signal"}]}],
                "PostToolUse": [{"matcher": "Edit|Write|MultiEdit|NotebookEdit",
                    "hooks": [{"type": "command", "command": "/bin/devboy hook signal"}]}],
            }})
        );
    }

    #[test]
    fn an_older_install_gets_its_matcher_widened() {
        let command = "/bin/devboy hook signal";
        let mut settings = json!({"hooks": {
            "PreCompact": [{"hooks": [{"type": "command", "command": command}]}],
            "SessionStart": [{"matcher": "compact|clear",
                "hooks": [{"type": "command", "command": command}]}],
        }});
        assert_eq!(
            merge_hooks(&mut settings, command).unwrap(),
            ["SessionStart", "PostToolUse"]
        );
        assert_eq!(
            settings["hooks"]["SessionStart"],
            json!([{"matcher": SESSION_START_MATCHER,
                "hooks": [{"type": "command", "command": command}]}])
        );
        assert!(merge_hooks(&mut settings, command).unwrap().is_empty());
    }

    #[test]
    fn merge_keeps_existing_content_and_is_idempotent() {
        let original = json!({
            "permissions": {"allow": ["Bash(ls:*)"]},
            "env": {"A": "1"},
            "hooks": {
                "PreCompact": [{"matcher": "manual", "hooks": [{"type": "command", "command": "echo mine"}]}],
                "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "fmt"}]}],
            }
        });
        let mut settings = original.clone();
        let added = merge_hooks(&mut settings, "devboy hook signal").unwrap();
        assert_eq!(added, ["PreCompact", "SessionStart", "PostToolUse"]);
        assert_eq!(settings["permissions"], original["permissions"]);
        assert_eq!(settings["env"], original["env"]);
        let post = settings["hooks"]["PostToolUse"].as_array().unwrap();
        assert_eq!(
            post.len(),
            2,
            "the user's own hook stays, devboy's is added"
        );
        assert_eq!(post[0], original["hooks"]["PostToolUse"][0]);
        let pre = settings["hooks"]["PreCompact"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0], original["hooks"]["PreCompact"][0]);
        let once = settings.clone();
        assert!(merge_hooks(&mut settings, "devboy hook signal")
            .unwrap()
            .is_empty());
        assert_eq!(settings, once);
    }

    #[test]
    fn merge_rejects_wrong_shapes() {
        let error = merge_hooks(&mut json!([]), "x").unwrap_err();
        assert_eq!(error.key, "(top level)");
        let error = merge_hooks(&mut json!({"hooks": []}), "x").unwrap_err();
        assert_eq!(error.key, "hooks");
        let error = merge_hooks(&mut json!({"hooks": {"SessionStart": {}}}), "x").unwrap_err();
        assert_eq!(error.key, "hooks.SessionStart");
        assert!(error.to_string().contains("expected an array"), "{error}");
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/usr/bin/devboy"), "/usr/bin/devboy");
        assert_eq!(shell_quote("/a b/devboy"), "'/a b/devboy'");
        assert_eq!(shell_quote("/it's/devboy"), r"'/it'\''s/devboy'");
        assert_eq!(signal_command("/x/devboy"), "/x/devboy hook signal");
    }
}
