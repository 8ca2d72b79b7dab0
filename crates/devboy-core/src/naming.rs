//! Tool names as the client sees them.
//!
//! Claude Code calls a proxied tool `mcp__<server>__<tool>`, and the model
//! API refuses names over [`CLIENT_TOOL_NAME_MAX`] characters or outside
//! `[A-Za-z0-9_-]`. devboy is one server wrapping many, so its own tool
//! names are `<prefix>__<tool>`, and the whole
//! `mcp__<server_name>__<prefix>__<tool>` must fit. [`ToolNamer`] does that
//! mapping: sanitize, and when still too long, shorten deterministically so
//! that the same upstream tool always gets the same name across sessions
//! (which keeps permissions and telemetry stable).
//!
//! Invariant: prefixes contain no `__` and do not end in `_` (see
//! [`crate::config::UpstreamConfig::prefix`]), so the first `__` of an
//! exposed name always separates prefix from tool.

/// The longest tool name the client (and the model API behind it) accepts.
pub const CLIENT_TOOL_NAME_MAX: usize = 64;

/// What Claude Code puts before a server's name.
const CLIENT_PREFIX: &str = "mcp__";
/// The separator between server, prefix and tool.
const SEPARATOR: &str = "__";
/// Hex digits of the hash that stands in for the cut part of a long name.
const HASH_HEX_DIGITS: usize = 6;

/// Maps `s` onto `[A-Za-z0-9_-]`: every other character becomes `_`, and
/// runs of `_` collapse to one so that `__` stays a separator. Never empty:
/// an empty input gives `"_"`.
///
/// ```
/// use devboy_core::naming::sanitize_component;
/// assert_eq!(sanitize_component("read file.v2"), "read_file_v2");
/// assert_eq!(sanitize_component("a__b"), "a_b");
/// assert_eq!(sanitize_component("größe"), "gr_e");
/// ```
pub fn sanitize_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// A tool name devboy exposes, and whether it had to be shortened to fit.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExposedName {
    /// The name to list and to accept in `tools/call`.
    pub name: String,
    /// True when the name was cut and given a hash suffix; the proxy should
    /// warn once, naming the original tool.
    pub shortened: bool,
}

/// Names upstream tools for a client that knows devboy as `server_name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolNamer {
    client_server_name: String,
    budget: usize,
}

impl ToolNamer {
    /// A namer for the name the user gave devboy in Claude Code
    /// (`claude mcp add <server_name> …`).
    pub fn new(server_name: &str) -> Self {
        let client_server_name = client_server_name(server_name);
        let overhead = CLIENT_PREFIX.len() + client_server_name.len() + SEPARATOR.len();
        ToolNamer {
            budget: CLIENT_TOOL_NAME_MAX.saturating_sub(overhead),
            client_server_name,
        }
    }

    /// The most characters an exposed name may have.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The full name the client uses for an exposed name:
    /// `mcp__<server_name>__<exposed>`.
    pub fn client_name(&self, exposed: &str) -> String {
        format!(
            "{CLIENT_PREFIX}{}{SEPARATOR}{exposed}",
            self.client_server_name
        )
    }

    /// The name devboy exposes for upstream tool `tool` under `prefix`:
    /// `<prefix>__<tool>`, sanitized, so that the client's full name fits in
    /// [`CLIENT_TOOL_NAME_MAX`].
    ///
    /// When too long, the tool part is cut and `_` plus six hex digits of a
    /// stable hash of the original tool name is appended; the result is the
    /// same on every call, machine and release. If even that cannot fit
    /// (an extremely long prefix or server name), the whole name is cut
    /// the same way. Only a server name of 57 or more characters leaves no
    /// room at all; then the name is the bare hash and does not fit.
    ///
    /// Distinct tools whose names sanitize alike (`a.b`, `a_b`) get the
    /// same name; callers must check for duplicates.
    ///
    /// An empty `prefix` (a server that keeps its names) gives the tool's
    /// own name, sanitized and fitted the same way.
    pub fn expose(&self, prefix: &str, tool: &str) -> ExposedName {
        let (prefix, separator) = if prefix.is_empty() {
            (String::new(), "")
        } else {
            (sanitize_component(prefix), SEPARATOR)
        };
        let tool_part = sanitize_component(tool);
        let full = format!("{prefix}{separator}{tool_part}");
        if full.len() <= self.budget {
            return ExposedName {
                name: full,
                shortened: false,
            };
        }
        let suffix_len = 1 + HASH_HEX_DIGITS;
        let fixed = prefix.len() + separator.len() + suffix_len;
        let name = match self.budget.checked_sub(fixed) {
            Some(room) if room > 0 => {
                let head = cut(&tool_part, room);
                format!("{prefix}{separator}{head}_{}", hash_hex(tool))
            }
            _ => {
                let hash = hash_hex(&format!("{prefix}{separator}{tool}"));
                match self.budget.checked_sub(suffix_len) {
                    Some(room) if room > 0 => format!("{}_{hash}", cut(&full, room)),
                    _ => hash,
                }
            }
        };
        ExposedName {
            name,
            shortened: true,
        }
    }
}

/// How Claude Code writes a server name inside tool names: every character
/// outside `[A-Za-z0-9_-]` becomes `_` once per UTF-16 unit (JavaScript
/// string semantics), so the length we budget for is never too small.
fn client_server_name(server_name: &str) -> String {
    let mut out = String::with_capacity(server_name.len());
    for c in server_name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else {
            out.extend(std::iter::repeat_n('_', c.len_utf16()));
        }
    }
    out
}

/// The first `max` bytes of an ASCII name, without trailing `_` (the hash
/// suffix brings its own, and `__` must not appear inside a part).
fn cut(ascii: &str, max: usize) -> &str {
    let head = ascii.get(..max.min(ascii.len())).unwrap_or(ascii);
    let trimmed = head.trim_end_matches('_');
    if trimmed.is_empty() {
        head
    } else {
        trimmed
    }
}

/// Six hex digits of 64-bit FNV-1a over `s`, folded. Stable by
/// construction, unlike `std`'s randomly seeded hasher.
fn hash_hex(s: &str) -> String {
    let hash = crate::hash::fnv1a64(s.as_bytes());
    let folded = (hash ^ (hash >> 32)) & 0x00ff_ffff;
    format!("{folded:06x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_valid_client_name(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= CLIENT_TOOL_NAME_MAX
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn sanitize_maps_odd_characters() {
        assert_eq!(sanitize_component("read file"), "read_file");
        assert_eq!(sanitize_component("fs.read.v2"), "fs_read_v2");
        assert_eq!(sanitize_component("my-server_1"), "my-server_1");
        assert_eq!(sanitize_component("日本語"), "_");
        assert_eq!(sanitize_component("café🙂ok"), "caf_ok");
        assert_eq!(sanitize_component("a . b"), "a_b");
        assert_eq!(sanitize_component("a____b"), "a_b");
        assert_eq!(sanitize_component("__init__"), "_init_");
        assert_eq!(sanitize_component(""), "_");
        assert_eq!(sanitize_component("Keep-Case"), "Keep-Case");
    }

    #[test]
    fn sanitize_is_idempotent() {
        for s in ["a b", "x__y", "ümlaut", "", "-", "_a_", "a.b.c"] {
            let once = sanitize_component(s);
            assert_eq!(sanitize_component(&once), once, "input {s:?}");
        }
    }

    #[test]
    fn short_names_are_prefix_and_tool() {
        let namer = ToolNamer::new("devboy");
        assert_eq!(namer.budget(), 64 - "mcp__devboy__".len());
        let n = namer.expose("github", "get_file_contents");
        assert_eq!(n.name, "github__get_file_contents");
        assert!(!n.shortened);
        assert_eq!(
            namer.client_name(&n.name),
            "mcp__devboy__github__get_file_contents"
        );
    }

    #[test]
    fn tool_names_are_sanitized() {
        let namer = ToolNamer::new("devboy");
        assert_eq!(namer.expose("fs", "read file.v2").name, "fs__read_file_v2");
        assert_eq!(namer.expose("fs", "a__b").name, "fs__a_b");
    }

    #[test]
    fn an_empty_prefix_keeps_the_tools_own_name() {
        let namer = ToolNamer::new("devboy");
        let n = namer.expose("", "test_simple_text");
        assert_eq!(n.name, "test_simple_text");
        assert!(!n.shortened);
        assert_eq!(namer.expose("", "a.b__c").name, "a_b_c");
        let long = namer.expose("", &"y".repeat(70));
        assert!(long.shortened);
        assert!(long.name.starts_with("yyy"), "{}", long.name);
        assert!(is_valid_client_name(&namer.client_name(&long.name)));
    }

    #[test]
    fn sixty_char_tool_is_shortened_to_fit() {
        let namer = ToolNamer::new("devboy");
        let tool = format!("get_{}", "x".repeat(56));
        assert_eq!(tool.len(), 60);
        let n = namer.expose("github", &tool);
        assert!(n.shortened);
        let client = namer.client_name(&n.name);
        assert_eq!(client.len(), CLIENT_TOOL_NAME_MAX, "{client}");
        assert!(is_valid_client_name(&client), "{client}");
        assert!(n.name.starts_with("github__get_xxx"), "{}", n.name);
        // The tail is `_` and six hex digits.
        let (_, tail) = n.name.rsplit_once('_').unwrap_or_default();
        assert_eq!(tail.len(), 6);
        assert!(tail.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn shortening_is_deterministic() {
        let tool = "a".repeat(80);
        let first = ToolNamer::new("devboy").expose("p", &tool);
        for _ in 0..3 {
            assert_eq!(ToolNamer::new("devboy").expose("p", &tool), first);
        }
        // Pinned: the short name must not change between releases.
        assert_eq!(hash_hex(""), "d0bfc1");
        assert_eq!(hash_hex("a"), "6230c0");
    }

    #[test]
    fn long_names_differing_only_at_the_end_stay_distinct() {
        let namer = ToolNamer::new("devboy");
        let base = "list_repository_collaborators_with_permissions_and_";
        let a = namer.expose("github", &format!("{base}teams_a"));
        let b = namer.expose("github", &format!("{base}teams_b"));
        assert!(a.shortened && b.shortened);
        assert_ne!(a.name, b.name);
        assert_eq!(a.name.len(), b.name.len());
        assert_eq!(namer.client_name(&a.name).len(), CLIENT_TOOL_NAME_MAX);
    }

    #[test]
    fn cut_does_not_leave_a_double_underscore() {
        let namer = ToolNamer::new("devboy");
        // Position the cut right after an underscore.
        let room = namer.budget() - "p__".len() - 7;
        let tool = format!("{}_{}", "a".repeat(room - 1), "b".repeat(30));
        let n = namer.expose("p", &tool);
        assert!(n.shortened);
        assert!(!n.name["p__".len()..].contains("__"), "{}", n.name);
    }

    #[test]
    fn long_server_name_and_prefix_still_fit() {
        let namer = ToolNamer::new(&"s".repeat(40));
        assert_eq!(namer.budget(), 64 - 5 - 40 - 2);
        let n = namer.expose(&"p".repeat(16), "some_tool_name");
        assert!(n.shortened);
        assert!(n.name.len() <= namer.budget(), "{}", n.name);
        assert!(is_valid_client_name(&namer.client_name(&n.name)));
        let again = namer.expose(&"p".repeat(16), "some_tool_name");
        assert_eq!(n, again);
    }

    #[test]
    fn server_name_is_budgeted_as_the_client_writes_it() {
        // Claude Code turns each UTF-16 unit outside the set into `_`.
        let namer = ToolNamer::new("my devboy🙂");
        assert_eq!(namer.client_name("x"), "mcp__my_devboy____x");
        assert_eq!(namer.budget(), 64 - 5 - "my_devboy__".len() - 2);
    }

    #[test]
    fn absurd_server_name_gives_a_nonempty_name() {
        let namer = ToolNamer::new(&"s".repeat(70));
        assert_eq!(namer.budget(), 0);
        let n = namer.expose("p", "t");
        assert!(n.shortened);
        assert_eq!(n.name.len(), 6);
    }
}
