//! What devboy knows about well-known servers without being told: the
//! side-effect and value classes of their read tools (for servers that
//! send no annotations) and the edges of their usual sessions.
//!
//! A server is recognised by its signature, tools that must all be on one
//! upstream under these names; its entries then apply to that upstream's
//! tools only. An edge is kept only when its arguments fit the target's
//! input schema, so a server version that renamed an argument loses the
//! edge instead of getting calls it refuses (where versions differ, both
//! spellings are listed and the schema picks).

use devboy_core::pipeline_config::SideEffectClass;
use devboy_core::value_model::ValueClass;

/// One well-known server.
pub(crate) struct ShippedServer {
    /// The tools that identify it, all on one upstream.
    pub signature: &'static [&'static str],
    /// Its read tools: side-effect and value class.
    pub tools: &'static [(&'static str, SideEffectClass, ValueClass)],
    /// The calls that usually follow its calls.
    pub edges: &'static [ShippedEdge],
}

/// A follow-up edge between two tools of one server, by upstream names.
pub(crate) struct ShippedEdge {
    /// The answered tool.
    pub from: &'static str,
    /// The tool called next.
    pub to: &'static str,
    /// How likely the call is.
    pub probability: f64,
    /// Argument name → source, in the file's syntax.
    pub args: &'static [(&'static str, &'static str)],
    /// At most this many calls.
    pub limit: usize,
}

const RO: SideEffectClass = SideEffectClass::ReadOnly;
const CRITICAL: ValueClass = ValueClass::Critical;
const SUPPORTING: ValueClass = ValueClass::Supporting;
const OPTIONAL: ValueClass = ValueClass::Optional;

/// The servers devboy knows.
pub(crate) const SERVERS: &[ShippedServer] = &[
    // @modelcontextprotocol/server-filesystem.
    ShippedServer {
        signature: &["read_text_file", "search_files", "list_allowed_directories"],
        tools: &[
            ("read_text_file", RO, CRITICAL),
            ("read_file", RO, CRITICAL),
            ("read_multiple_files", RO, CRITICAL),
            ("search_files", RO, CRITICAL),
            ("list_directory", RO, SUPPORTING),
            ("list_directory_with_sizes", RO, SUPPORTING),
            ("directory_tree", RO, SUPPORTING),
            ("get_file_info", RO, OPTIONAL),
            ("list_allowed_directories", RO, OPTIONAL),
        ],
        edges: &[
            // A search is nearly always followed by reading the first hits.
            // The answer is one absolute path per line, or "No matches
            // found": only lines that look like paths are taken (a hit
            // that is a directory fails to read; the failed prefetch is
            // dropped). list_directory and directory_tree answer with
            // names relative to the listed directory, which no projection
            // can join into a path, so they have no edge.
            ShippedEdge {
                from: "search_files",
                to: "read_text_file",
                probability: 0.5,
                args: &[(
                    "path",
                    r"$match:(?m)^((?:/|[A-Za-z]:[\\/])[^\r\n]*[^\s])\s*$",
                )],
                limit: 3,
            },
        ],
    },
    // mcp-server-git (PyPI).
    ShippedServer {
        signature: &["git_status", "git_log", "git_show"],
        tools: &[
            ("git_status", RO, CRITICAL),
            ("git_diff_unstaged", RO, CRITICAL),
            ("git_diff_staged", RO, CRITICAL),
            ("git_diff", RO, CRITICAL),
            ("git_log", RO, SUPPORTING),
            ("git_show", RO, CRITICAL),
            ("git_branch", RO, OPTIONAL),
        ],
        edges: &[
            // The log prints `Commit: <sha>` per commit, newest first; the
            // newest is the one usually shown next.
            ShippedEdge {
                from: "git_log",
                to: "git_show",
                probability: 0.4,
                args: &[
                    ("repo_path", "$args/repo_path"),
                    ("revision", "$match:Commit: '?([0-9a-f]{40})"),
                ],
                limit: 1,
            },
            // Status, then what changed.
            ShippedEdge {
                from: "git_status",
                to: "git_diff_unstaged",
                probability: 0.5,
                args: &[("repo_path", "$args/repo_path")],
                limit: 1,
            },
        ],
    },
    // @modelcontextprotocol/server-memory.
    ShippedServer {
        signature: &["search_nodes", "open_nodes", "read_graph"],
        tools: &[
            ("search_nodes", RO, CRITICAL),
            ("open_nodes", RO, CRITICAL),
            ("read_graph", RO, SUPPORTING),
        ],
        edges: &[
            // Found entities are opened by name (`names` is an array, so
            // the found names go in one call).
            ShippedEdge {
                from: "search_nodes",
                to: "open_nodes",
                probability: 0.35,
                args: &[("names", "/entities/*/name")],
                limit: 1,
            },
        ],
    },
    // GitHub's MCP server (github/github-mcp-server; the older npm
    // @modelcontextprotocol/server-github has the same tool names). Lists
    // answer with the REST array of issues or pull requests, or an object
    // holding it under `issues`; the number argument is `issue_number`,
    // and `pull_number` or `pullNumber` by version.
    ShippedServer {
        signature: &["list_issues", "get_file_contents"],
        tools: &[
            ("list_issues", RO, SUPPORTING),
            ("get_issue", RO, CRITICAL),
            ("list_pull_requests", RO, SUPPORTING),
            ("get_pull_request", RO, CRITICAL),
            ("get_pull_request_files", RO, SUPPORTING),
            ("search_code", RO, SUPPORTING),
            ("get_file_contents", RO, CRITICAL),
        ],
        edges: &[
            ShippedEdge {
                from: "list_issues",
                to: "get_issue",
                probability: 0.45,
                args: &[
                    ("owner", "$args/owner"),
                    ("repo", "$args/repo"),
                    ("issue_number", "/*/number"),
                ],
                limit: 2,
            },
            ShippedEdge {
                from: "list_issues",
                to: "get_issue",
                probability: 0.45,
                args: &[
                    ("owner", "$args/owner"),
                    ("repo", "$args/repo"),
                    ("issue_number", "/issues/*/number"),
                ],
                limit: 2,
            },
            ShippedEdge {
                from: "list_pull_requests",
                to: "get_pull_request",
                probability: 0.45,
                args: &[
                    ("owner", "$args/owner"),
                    ("repo", "$args/repo"),
                    ("pull_number", "/*/number"),
                ],
                limit: 2,
            },
            ShippedEdge {
                from: "list_pull_requests",
                to: "get_pull_request",
                probability: 0.45,
                args: &[
                    ("owner", "$args/owner"),
                    ("repo", "$args/repo"),
                    ("pullNumber", "/*/number"),
                ],
                limit: 2,
            },
            // A pull request under review: its changed files come next.
            ShippedEdge {
                from: "list_pull_requests",
                to: "get_pull_request_files",
                probability: 0.3,
                args: &[
                    ("owner", "$args/owner"),
                    ("repo", "$args/repo"),
                    ("pull_number", "/*/number"),
                ],
                limit: 1,
            },
            ShippedEdge {
                from: "list_pull_requests",
                to: "get_pull_request_files",
                probability: 0.3,
                args: &[
                    ("owner", "$args/owner"),
                    ("repo", "$args/repo"),
                    ("pullNumber", "/*/number"),
                ],
                limit: 1,
            },
            // Code search hits name their repository; the file is read next.
            ShippedEdge {
                from: "search_code",
                to: "get_file_contents",
                probability: 0.4,
                args: &[
                    ("owner", "/items/*/repository/owner/login"),
                    ("repo", "/items/*/repository/name"),
                    ("path", "/items/*/path"),
                ],
                limit: 2,
            },
        ],
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use devboy_core::value_model::ArgSource;

    #[test]
    fn every_shipped_source_parses_and_every_edge_joins_tools_of_its_server() {
        for server in SERVERS {
            let names: Vec<&str> = server.tools.iter().map(|t| t.0).collect();
            for s in server.signature {
                assert!(names.contains(s), "{s} is in the signature but not listed");
            }
            for edge in server.edges {
                assert!(names.contains(&edge.from) && names.contains(&edge.to));
                assert!(edge.limit >= 1 && (0.0..=1.0).contains(&edge.probability));
                for (arg, source) in edge.args {
                    assert!(ArgSource::parse(source).is_ok(), "{arg} = {source}");
                }
            }
        }
    }
}
