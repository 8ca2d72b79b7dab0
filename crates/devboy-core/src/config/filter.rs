//! [`ToolFilter`]: which of an upstream's tools devboy exposes.

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Allow and deny globs over an upstream's own tool names (before any
/// prefixing or shortening).
///
/// A tool is permitted when it matches an allow glob (or there is no allow
/// list) and matches no deny glob: deny wins. `allow = []` permits nothing.
/// Globs follow [`globset`] syntax: `*`, `?`, `[abc]`, `{a,b}`; matching is
/// case-sensitive, as tool names are.
#[derive(Clone, Debug, Default)]
pub struct ToolFilter {
    allow: Option<Patterns>,
    deny: Patterns,
}

#[derive(Clone, Debug, Default)]
struct Patterns {
    globs: Vec<String>,
    set: GlobSet,
}

impl Patterns {
    fn new(globs: Vec<String>) -> Result<Self, globset::Error> {
        let mut builder = GlobSetBuilder::new();
        for glob in &globs {
            builder.add(Glob::new(glob)?);
        }
        Ok(Patterns {
            set: builder.build()?,
            globs,
        })
    }
}

impl ToolFilter {
    /// A filter that permits every tool.
    pub fn allow_all() -> Self {
        Self::default()
    }

    /// A filter from allow globs (`None`: every tool) and deny globs.
    pub fn new(allow: Option<Vec<String>>, deny: Vec<String>) -> Result<Self, globset::Error> {
        Ok(ToolFilter {
            allow: allow.map(Patterns::new).transpose()?,
            deny: Patterns::new(deny)?,
        })
    }

    /// Whether devboy exposes the upstream tool named `tool`.
    pub fn permits(&self, tool: &str) -> bool {
        let allowed = self.allow.as_ref().is_none_or(|a| a.set.is_match(tool));
        allowed && !self.deny.set.is_match(tool)
    }

    /// The allow globs as written; `None` when every tool is allowed.
    pub fn allow_patterns(&self) -> Option<&[String]> {
        self.allow.as_ref().map(|a| a.globs.as_slice())
    }

    /// The deny globs as written.
    pub fn deny_patterns(&self) -> &[String] {
        &self.deny.globs
    }

    /// Whether this filter permits every tool name.
    pub fn is_allow_all(&self) -> bool {
        self.allow.is_none() && self.deny.globs.is_empty()
    }
}

/// Two filters are equal when their globs are, as written.
impl PartialEq for ToolFilter {
    fn eq(&self, other: &Self) -> bool {
        self.allow_patterns() == other.allow_patterns()
            && self.deny_patterns() == other.deny_patterns()
    }
}

impl Eq for ToolFilter {}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(allow: Option<&[&str]>, deny: &[&str]) -> ToolFilter {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match ToolFilter::new(allow.map(own), own(deny)) {
            Ok(f) => f,
            Err(e) => panic!("bad test globs: {e}"),
        }
    }

    #[test]
    fn default_permits_everything() {
        let f = ToolFilter::allow_all();
        assert!(f.permits("anything"));
        assert!(f.permits(""));
        assert!(f.is_allow_all());
    }

    #[test]
    fn allow_list_restricts() {
        let f = filter(Some(&["get_*", "list_issues"]), &[]);
        assert!(f.permits("get_file_contents"));
        assert!(f.permits("list_issues"));
        assert!(!f.permits("create_issue"));
        assert!(!f.permits("Get_file"), "matching is case-sensitive");
    }

    #[test]
    fn deny_wins_over_allow() {
        let f = filter(Some(&["*_issue*"]), &["delete_*", "*_issue_comment"]);
        assert!(f.permits("create_issue"));
        assert!(!f.permits("delete_issue"));
        assert!(!f.permits("add_issue_comment"));
    }

    #[test]
    fn deny_only_and_alternatives() {
        let f = filter(None, &["{push,merge}_*", "fork?"]);
        assert!(!f.permits("push_files"));
        assert!(!f.permits("merge_pull_request"));
        assert!(!f.permits("fork1"));
        assert!(f.permits("fork_repository"));
        assert!(f.permits("search_code"));
    }

    #[test]
    fn empty_allow_list_permits_nothing() {
        let f = filter(Some(&[]), &[]);
        assert!(!f.permits("read_file"));
        assert!(!f.is_allow_all());
    }

    #[test]
    fn invalid_glob_is_an_error_and_equality_is_by_pattern() {
        assert!(ToolFilter::new(Some(vec!["[unclosed".to_owned()]), vec![]).is_err());
        assert_eq!(filter(Some(&["a*"]), &["b"]), filter(Some(&["a*"]), &["b"]));
        assert_ne!(filter(Some(&["a*"]), &[]), filter(None, &["a*"]));
        assert_eq!(
            filter(Some(&["a*"]), &[]).allow_patterns(),
            Some(&["a*".to_owned()][..])
        );
    }
}
