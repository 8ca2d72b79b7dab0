//! Patterns: one line that stands for a column's value in every row.
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
//! Meaning, per row: a pattern that is exactly one reference (`{user}`) is
//! that column's (or group's) value, of any type. A pattern that is
//! references between `[`, `,` and `]` and nothing else (`[{user}]`,
//! `[{a},{b}]`) is the array of those values. Otherwise it is a string:
//! the literal text with each reference replaced by the referenced value,
//! which must be a string (inserted as is) or a number (its JSON text).

use std::collections::HashSet;

use super::FastHash;

/// The names patterns may reference in one scope.
#[derive(Clone, Debug, Default)]
pub(super) struct Names {
    set: HashSet<String, FastHash>,
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
    #[cfg(test)]
    pub(super) fn from_paths<'a, S: AsRef<str> + 'a>(
        paths: impl IntoIterator<Item = &'a [S]>,
    ) -> Self {
        let mut set = HashSet::default();
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

    /// A scope from dotted column names (each segment non-empty, without
    /// `.`): each name and the names of its groups, as
    /// `Names::from_paths` of the split names; `capacity` is a guess at
    /// how many.
    pub(super) fn from_dotted<'a>(
        capacity: usize,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let mut set: HashSet<String, FastHash> =
            HashSet::with_capacity_and_hasher(capacity, FastHash::default());
        for name in names {
            let prefixes = name.match_indices('.').map(|(dot, _)| &name[..dot]);
            for prefix in prefixes.chain(std::iter::once(name)) {
                if !set.contains(prefix) {
                    set.insert(prefix.to_owned());
                }
            }
        }
        Self { set }
    }

    /// The full name `name` stands for in the line of a key whose parent
    /// path is `parent` (`""` at the top).
    #[cfg(test)]
    pub(super) fn resolve(&self, parent: &str, name: &str) -> Option<String> {
        self.lookup(parent, name).map(str::to_owned)
    }

    /// `Names::resolve` without allocating the answer: the stored full
    /// name. Tries the same scopes in the same order as `scoped`.
    pub(super) fn lookup(&self, parent: &str, name: &str) -> Option<&str> {
        if self.set.is_empty() {
            return None;
        }
        find_scoped(parent, name, |full| self.set.get(full).map(String::as_str))
    }

    /// Whether `name`, in the line of a key under `parent`, resolves to
    /// exactly `full`.
    pub(super) fn resolves_to(&self, parent: &str, name: &str, full: &str) -> bool {
        self.lookup(parent, name) == Some(full)
    }

    /// True if `text`, in the line of a key under `parent`, reads as a
    /// pattern that references at least one name.
    pub(super) fn has_ref(&self, parent: &str, text: &str) -> bool {
        !self.set.is_empty()
            && text.contains('{')
            && parse(text, |name| self.lookup(parent, name))
                .iter()
                .any(|p| matches!(p, Part::Ref(_)))
    }
}

/// The full names `name` may stand for under `parent`, innermost first
/// (what [`find_scoped`] tries):
/// `a.b` + `x` gives `a.b.x`, `a.x`, `x`.
#[cfg(test)]
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

/// The first of the full names of `scoped` for which `get` answers, in
/// the same order, built in one reused buffer.
pub(super) fn find_scoped<T>(
    parent: &str,
    name: &str,
    get: impl Fn(&str) -> Option<T>,
) -> Option<T> {
    if parent.is_empty() {
        return get(name);
    }
    let mut buf = String::with_capacity(parent.len() + 1 + name.len());
    let mut current = parent;
    loop {
        if current.is_empty() {
            return get(name);
        }
        buf.clear();
        buf.push_str(current);
        buf.push('.');
        buf.push_str(name);
        if let Some(found) = get(&buf) {
            return Some(found);
        }
        current = current.rfind('.').map_or("", |dot| &current[..dot]);
    }
}

/// A piece of a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Part<R> {
    /// Literal text.
    Lit(String),
    /// A reference to a column or group.
    Ref(R),
}

/// Splits pattern text into literal text and references, a reference
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

/// Writes pattern text: literal text as is, references as `{name}`.
pub(super) fn write<R, S: AsRef<str>>(
    out: &mut String,
    parts: &[Part<R>],
    name_of: impl Fn(&R) -> S,
) {
    for part in parts {
        match part {
            Part::Lit(s) => out.push_str(s),
            Part::Ref(r) => {
                out.push('{');
                out.push_str(name_of(r).as_ref());
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
        let tried = std::cell::RefCell::new(Vec::new());
        let none = find_scoped("a.b", "x", |full| {
            tried.borrow_mut().push(full.to_owned());
            None::<()>
        });
        assert_eq!(none, None);
        assert_eq!(tried.into_inner(), all);
        assert_eq!(find_scoped("", "x", |full| Some(full.len())), Some(1));
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
