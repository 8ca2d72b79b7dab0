//! How a path written by a mutating call covers the paths a remembered body
//! was read from.
//!
//! Paths are `/`-separated text; the caller makes them comparable first
//! (absolute, resolved against the upstream's roots). Here we only remove
//! spellings that name the same place without a file system: repeated
//! slashes, `.` components and trailing slashes. `..` is kept as written,
//! since resolving it needs the file system (symlinks).

use std::borrow::Cow;

/// The one spelling of `path` this module compares: no empty or `.`
/// components, no trailing slash; `/` for the root, the empty string for
/// "the current directory" (`""`, `.`, `./`).
pub(crate) fn normalize(path: &str) -> Cow<'_, str> {
    if is_normal(path) {
        return Cow::Borrowed(path);
    }
    let absolute = path.starts_with('/');
    let mut out = String::with_capacity(path.len());
    if absolute {
        out.push('/');
    }
    for component in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if !out.is_empty() && !out.ends_with('/') {
            out.push('/');
        }
        out.push_str(component);
    }
    Cow::Owned(out)
}

fn is_normal(path: &str) -> bool {
    if path == "/" || path.is_empty() {
        return true;
    }
    let body = path.strip_prefix('/').unwrap_or(path);
    !body.is_empty() && body.split('/').all(|c| !c.is_empty() && c != ".")
}

/// Whether a write to `scope` can have changed what was read from `path`
/// (both normalised): the same path, or a path under it. The current
/// directory (empty) covers everything, since where it points is unknown
/// here and forgetting too much is the safe error.
pub(crate) fn covers(scope: &str, path: &str) -> bool {
    if scope.is_empty() || scope == path {
        return true;
    }
    if scope == "/" {
        return path.starts_with('/');
    }
    path.len() > scope.len() && path.starts_with(scope) && path.as_bytes()[scope.len()] == b'/'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_spellings_of_one_place() {
        for (input, want) in [
            ("/a/b", "/a/b"),
            ("/a/b/", "/a/b"),
            ("/a//b///", "/a/b"),
            ("/a/./b/.", "/a/b"),
            ("//", "/"),
            ("/", "/"),
            ("/./", "/"),
            ("a/b/", "a/b"),
            ("./a", "a"),
            ("", ""),
            (".", ""),
            ("./", ""),
            ("/a/../b", "/a/../b"),
            ("/.hidden/x", "/.hidden/x"),
        ] {
            assert_eq!(normalize(input), want, "{input:?}");
        }
        assert!(matches!(normalize("/a/b"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_directory_covers_what_is_under_it_only() {
        assert!(covers("/a/b", "/a/b"));
        assert!(covers("/a/b", "/a/b/c.txt"));
        assert!(covers("/a/b", "/a/b/c/d"));
        assert!(!covers("/a/b", "/a/bc"));
        assert!(!covers("/a/b", "/a"));
        assert!(!covers("/a/b/c.txt", "/a/b"));
        assert!(covers("/", "/x"));
        assert!(!covers("/", "x"));
        assert!(covers("", "/x"));
        assert!(covers("a", "a/b"));
        assert!(!covers("a", "/a/b"));
    }

    /// Covering by components, written without the string tricks above.
    fn covers_by_components(scope: &str, path: &str) -> bool {
        fn parts(p: &str) -> (bool, Vec<&str>) {
            let kept = p.split('/').filter(|c| !c.is_empty() && *c != ".");
            (p.starts_with('/'), kept.collect())
        }
        let ((scope_abs, scope_parts), (path_abs, path_parts)) = (parts(scope), parts(path));
        (!scope_abs && scope_parts.is_empty())
            || (scope_abs == path_abs && path_parts.starts_with(&scope_parts))
    }

    proptest::proptest! {
        #[test]
        fn normalize_is_idempotent_and_covering_matches_components(
            scope in "[ab./]{0,8}",
            path in "[ab./]{0,8}",
        ) {
            let (s, p) = (normalize(&scope), normalize(&path));
            proptest::prop_assert_eq!(normalize(&s), s.clone());
            proptest::prop_assert!(!s.ends_with('/') || s == "/");
            proptest::prop_assert_eq!(covers(&s, &p), covers_by_components(&scope, &path));
        }
    }
}
