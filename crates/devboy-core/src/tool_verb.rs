//! What a tool's name says it does: the verb class of a tool name.
//!
//! One word list serves both readers of names, so they cannot disagree:
//! telemetry records the class of every result's tool (`endpoint_class`),
//! and `devboy tune from-claude-logs` proposes a tool's `side_effect` from
//! it ([`VerbClass::side_effect`]) when the server's annotations say
//! nothing.

use serde::{Deserialize, Serialize};

use crate::identifier::{words, Split};
use crate::pipeline_config::SideEffectClass;

/// A coarse verb class of a tool, from its name alone. Telemetry writes it
/// as the result's `endpoint_class`, in snake case (`get`, `other`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerbClass {
    /// Reads one thing's content (`read_file`, `cat`).
    Read,
    /// Lists things (`list_issues`, `ls`).
    List,
    /// Searches (`search_code`, `grep`, `find`).
    Search,
    /// Gets one thing's record or status (`get_issue`, `git_status`).
    Get,
    /// Writes content (`write_file`, `edit`, `download`).
    Write,
    /// Creates a thing (`create_issue`, `add_label`).
    Create,
    /// Changes a thing, reversibly (`update_issue`, `move_file`,
    /// `close_issue`).
    Update,
    /// Deletes a thing (`delete_branch`, `remove`, `truncate`).
    Delete,
    /// Runs something (`run_tests`, `exec`).
    Run,
    /// None of the above.
    #[serde(other)]
    Other,
}

/// Words that mark each class; the first word of a tool's name that is in
/// some list decides.
const CLASS_WORDS: &[(VerbClass, &[&str])] = &[
    (VerbClass::Read, &["read", "cat", "view", "head", "tail"]),
    (
        VerbClass::List,
        &["list", "ls", "enumerate", "browse", "tree", "log"],
    ),
    (
        VerbClass::Search,
        &["search", "find", "grep", "query", "lookup", "match"],
    ),
    (
        VerbClass::Get,
        &[
            "get", "fetch", "show", "describe", "status", "info", "inspect", "retrieve", "diff",
            "count", "check",
        ],
    ),
    (
        VerbClass::Write,
        &[
            "write", "save", "put", "set", "edit", "upload", "append", "store", "download",
        ],
    ),
    (
        VerbClass::Create,
        &[
            "create", "add", "new", "insert", "make", "post", "fork", "commit", "push", "mkdir",
        ],
    ),
    (
        VerbClass::Update,
        &[
            "update", "modify", "change", "rename", "move", "patch", "merge", "replace", "reset",
            "close", "apply",
        ],
    ),
    (
        VerbClass::Delete,
        &[
            "delete", "remove", "rm", "drop", "destroy", "clear", "purge", "truncate",
        ],
    ),
    (
        VerbClass::Run,
        &[
            "run", "exec", "execute", "invoke", "call", "start", "trigger", "build", "deploy",
            "test", "eval",
        ],
    ),
];

impl VerbClass {
    /// The class of the tool exposed as `name` (`<prefix>__<tool>`): the
    /// class of its tool part ([`of_tool`](Self::of_tool)).
    pub fn of_exposed(name: &str) -> Self {
        let tool = name.rsplit("__").next().unwrap_or(name);
        Self::of_tool(tool).0
    }

    /// The name written to telemetry files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::List => "list",
            Self::Search => "search",
            Self::Get => "get",
            Self::Write => "write",
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Run => "run",
            Self::Other => "other",
        }
    }

    /// The class of a tool named `tool` (without the exposed name's
    /// `<prefix>__`), and the word that decided it: the name is split into
    /// words at `_`, `-`, `.`, `/`, spaces and lower-to-upper case changes,
    /// and the first word found in a class's list decides (`list_issues`
    /// → list, `git_status` → get, `readTextFile` → read). Pure: the same
    /// name, the same class.
    pub fn of_tool(tool: &str) -> (Self, Option<String>) {
        for word in words(tool, Split::CaseChanges) {
            if let Some((class, _)) = CLASS_WORDS
                .iter()
                .find(|(_, list)| list.contains(&word.as_str()))
            {
                return (*class, Some(word));
            }
        }
        (Self::Other, None)
    }

    /// Whether the verb says the tool writes (writes, creates, updates,
    /// deletes): such a tool is never prefetched, whatever the config
    /// says of it.
    pub fn says_writes(self) -> bool {
        matches!(
            self,
            Self::Write | Self::Create | Self::Update | Self::Delete
        )
    }

    /// The side-effect class the verb makes evident: reading, listing,
    /// searching and getting are read-only, deleting is destructive, the
    /// other changes are mutating; a run (or no known verb) may do
    /// anything, so says nothing.
    pub fn side_effect(self) -> Option<SideEffectClass> {
        match self {
            Self::Read | Self::List | Self::Search | Self::Get => Some(SideEffectClass::ReadOnly),
            Self::Write | Self::Create | Self::Update => Some(SideEffectClass::Mutating),
            Self::Delete => Some(SideEffectClass::Destructive),
            Self::Run | Self::Other => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_known_word_decides_the_class_and_the_side_effect() {
        use SideEffectClass::*;
        use VerbClass::*;
        for (tool, class, effect) in [
            ("read_text_file", VerbClass::Read, Some(ReadOnly)),
            ("readTextFile", VerbClass::Read, Some(ReadOnly)),
            ("directory_tree", List, Some(ReadOnly)),
            ("git_status", Get, Some(ReadOnly)),
            ("fetch", Get, Some(ReadOnly)),
            ("edit_file", Write, Some(Mutating)),
            ("download_file", Write, Some(Mutating)),
            ("create_issue", Create, Some(Mutating)),
            ("git_push", Create, Some(Mutating)),
            ("close_issue", Update, Some(Mutating)),
            ("apply_patch", Update, Some(Mutating)),
            ("delete-branch", Delete, Some(Destructive)),
            ("truncate_table", Delete, Some(Destructive)),
            ("run-tests", Run, None),
            ("readme_lint", Other, None),
            ("", Other, None),
        ] {
            assert_eq!(VerbClass::of_tool(tool).0, class, "{tool}");
            assert_eq!(class.side_effect(), effect, "{tool}");
        }
        assert_eq!(
            VerbClass::of_tool("git_status").1.as_deref(),
            Some("status")
        );
        assert_eq!(
            words("getHTTPStatus_v2", Split::CaseChanges),
            ["get", "httpstatus", "v2"]
        );
    }
}
