//! Templates: one line that stands for a column's value in every row.
//!
//! Grammar (unquoted line text): literal text with references `{name}`,
//! where `name` names a column of the same table (or a key of the same
//! object), or a group of them (`user` for the columns `user.*`). Names
//! resolve like nested scopes: in the line of key `a.b.c`, `{x}` is the
//! column `a.b.x` if there is one, else `a.x`, else `x`; so
//! `owner.followers_url: {url}/followers` reads `owner.url`. Reading left
//! to right, a `{` starts a reference only if the text up to the next `}`
//! resolves that way; any other `{` is a literal character, so GitHub's own
//! URL templates (`…/labels{/name}`) need no escaping.
//!
//! Meaning, per row: a template that is exactly one reference (`{user}`) is
//! that column's (or group's) value, of any type. A template that is
//! references between `[`, `,` and `]` and nothing else (`[{user}]`,
//! `[{a},{b}]`) is the array of those values. Otherwise it is a string:
//! the literal text with each reference replaced by the referenced value,
//! which must be a string (inserted as is) or a number (its JSON text).

use std::collections::HashSet;

/// The names templates may reference in one scope.
#[derive(Clone, Debug, Default)]
pub(super) struct Names {
    set: HashSet<String>,
}

impl Names {
    /// A scope holding exactly these names.
    #[cfg(test)]
    pub(super) fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            set: names.into_iter().map(str::to_owned).collect(),
        }
    }

    /// A scope from column paths: each path's dotted name and the names of
    /// its groups (every proper prefix).
    pub(super) fn from_paths<'a, S: AsRef<str> + 'a>(
        paths: impl IntoIterator<Item = &'a [S]>,
    ) -> Self {
        let mut set = HashSet::new();
        for path in paths {
            let mut name = String::new();
            for (i, segment) in path.iter().enumerate() {
                if i > 0 {
                    name.push('.');
                }
                name.push_str(segment.as_ref());
                set.insert(name.clone());
            }
        }
        Self { set }
    }

    #[cfg(test)]
    pub(super) fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }

    /// The full name `name` stands for in the line of a key whose parent
    /// path is `parent` (`""` at the top).
    pub(super) fn resolve(&self, parent: &str, name: &str) -> Option<String> {
        scoped(parent, name).find(|full| self.set.contains(full))
    }

    /// True if `text`, in the line of a key under `parent`, reads as a
    /// template that references at least one name.
    pub(super) fn has_ref(&self, parent: &str, text: &str) -> bool {
        !self.set.is_empty()
            && parse(text, |name| self.resolve(parent, name))
                .iter()
                .any(|p| matches!(p, Part::Ref(_)))
    }
}

/// The full names `name` may stand for under `parent`, innermost first:
/// `a.b` + `x` gives `a.b.x`, `a.x`, `x`.
pub(super) fn scoped<'a>(parent: &'a str, name: &'a str) -> impl Iterator<Item = String> + 'a {
    let mut scope = Some(parent);
    std::iter::from_fn(move || {
        let current = scope?;
        if current.is_empty() {
            scope = None;
            return Some(name.to_owned());
        }
        scope = Some(current.rfind('.').map_or("", |dot| &current[..dot]));
        Some(format!("{current}.{name}"))
    })
}

/// A piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Part<R> {
    /// Literal text.
    Lit(String),
    /// A reference to a column or group.
    Ref(R),
}

/// Splits template text into literal text and references, a reference
/// being any `{name}` for which `resolve` answers; adjacent literal text is
/// merged.
pub(super) fn parse<R>(text: &str, resolve: impl Fn(&str) -> Option<R>) -> Vec<Part<R>> {
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        lit.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let name = after
            .find('}')
            .map(|close| &after[..close])
            .filter(|name| !name.contains('{'));
        match name.and_then(|name| Some((name, resolve(name)?))) {
            Some((name, target)) => {
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(Part::Ref(target));
                rest = &after[name.len() + 1..];
            }
            _ => {
                lit.push('{');
                rest = after;
            }
        }
    }
    lit.push_str(rest);
    if !lit.is_empty() {
        parts.push(Part::Lit(lit));
    }
    parts
}

/// Whether `parts` is a list of references: `[`, `{a}`, `,`, `{b}`, `]`.
pub(super) fn is_list<R>(parts: &[Part<R>]) -> bool {
    let [Part::Lit(open), middle @ .., Part::Lit(close)] = parts else {
        return false;
    };
    open == "[" && close == "]" && middle.len() % 2 == 1 && {
        middle.iter().enumerate().all(|(i, part)| match part {
            Part::Ref(_) => i % 2 == 0,
            Part::Lit(sep) => i % 2 == 1 && sep == ",",
        })
    }
}

/// Writes template text: literal text as is, references as `{name}`.
pub(super) fn write<R>(out: &mut String, parts: &[Part<R>], name_of: impl Fn(&R) -> String) {
    for part in parts {
        match part {
            Part::Lit(s) => out.push_str(s),
            Part::Ref(r) => {
                out.push('{');
                out.push_str(&name_of(r));
                out.push('}');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Part<String> {
        Part::Lit(s.into())
    }
    fn r(s: &str) -> Part<String> {
        Part::Ref(s.into())
    }

    #[test]
    fn references_only_known_names() {
        let names = Names::from_paths([&["url"][..], &["user", "login"][..]]);
        assert!(names.contains("user"));
        assert!(names.contains("user.login"));
        assert!(!names.contains("login"));
        let top = |n: &str| names.resolve("", n);
        assert_eq!(
            parse("{url}/labels{/name}", top),
            vec![r("url"), lit("/labels{/name}")]
        );
        assert_eq!(
            parse("x{{user.login}}{user", top),
            vec![lit("x{"), r("user.login"), lit("}{user")]
        );
        assert_eq!(parse("{user}", top), vec![r("user")]);
        assert_eq!(parse("", top), Vec::<Part<String>>::new());
        assert!(names.has_ref("", "a{url}"));
        assert!(!names.has_ref("", "a{nope}"));
        assert!(!names.has_ref("", "a{login}"));
        assert!(names.has_ref("user", "a{login}"));
        assert!(!Names::default().has_ref("", "{url}"));
    }

    #[test]
    fn names_resolve_innermost_first() {
        let names = Names::from_paths([&["url"][..], &["owner", "url"][..], &["a", "b", "c"][..]]);
        assert_eq!(names.resolve("owner", "url").as_deref(), Some("owner.url"));
        assert_eq!(names.resolve("", "url").as_deref(), Some("url"));
        assert_eq!(names.resolve("a.b", "url").as_deref(), Some("url"));
        assert_eq!(names.resolve("a.b.c", "c").as_deref(), Some("a.b.c"));
        assert_eq!(names.resolve("a", "b.c").as_deref(), Some("a.b.c"));
        assert_eq!(names.resolve("owner", "login"), None);
        let all: Vec<String> = scoped("a.b", "x").collect();
        assert_eq!(all, ["a.b.x", "a.x", "x"]);
    }

    #[test]
    fn lists_of_references() {
        let names = Names::from_names(["a", "b"]);
        let read = |t: &str| parse(t, |n| names.resolve("", n));
        assert!(is_list(&read("[{a}]")));
        assert!(is_list(&read("[{a},{b}]")));
        assert!(!is_list(&read("[{a},]")));
        assert!(!is_list(&read("[{a}{b}]")));
        assert!(!is_list(&read("[{a}, {b}]")));
        assert!(!is_list(&read("[]")));
        assert!(!is_list(&read("{a}")));
    }

    #[test]
    fn writes_what_it_parses() {
        let names = Names::from_names(["a", "b"]);
        let parts = vec![lit("https://x/"), r("a"), lit("/"), r("b"), lit("{/c}")];
        let mut out = String::new();
        write(&mut out, &parts, |n| n.clone());
        assert_eq!(out, "https://x/{a}/{b}{/c}");
        assert_eq!(parse(&out, |n| names.resolve("", n)), parts);
    }
}
