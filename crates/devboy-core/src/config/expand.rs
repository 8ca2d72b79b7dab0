//! `${VAR}` and `${VAR:-default}` expansion, as Claude Code does it in
//! `.mcp.json`.
//!
//! Rules: `${NAME}` takes the variable's value; `${NAME:-default}` takes
//! the default when the variable is unset or empty (the shell's meaning of
//! `:-`). `$$` and a `$` not followed by a well-formed `${NAME…}` stay as
//! written, so shell snippets such as `echo $$` or `$HOME` pass through
//! untouched. The default is literal text up to the first `}`; it is not
//! expanded again.
//!
//! One malformed shape is refused rather than kept: `${` followed by the
//! start of a variable name with no `}` anywhere after it. That is a
//! reference whose brace was forgotten (`Bearer ${GITHUB_TOKEN`), and
//! passing it through would send the literal text as a credential.

/// Why a string could not be expanded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ExpandError {
    /// `${NAME}` names an unset variable and gives no default.
    Unset(String),
    /// `${NAME…` is never closed.
    Unterminated {
        /// The reference as written up to the end of the name, e.g.
        /// `${GITHUB_TOKEN`.
        reference: String,
        /// Where its `$` is: 1-based, in characters.
        character: usize,
    },
}

/// Expands every `${…}` in `text` using `env`.
pub(crate) fn expand(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(reference) = unterminated(after) {
            let at = text.len() - rest.len() + dollar;
            return Err(ExpandError::Unterminated {
                reference: format!("${reference}"),
                character: text[..at].chars().count() + 1,
            });
        }
        if let Some(tail) = after.strip_prefix('$') {
            out.push_str("$$");
            rest = tail;
            continue;
        }
        match parse_reference(after) {
            Some((reference, consumed)) => {
                out.push_str(&reference.resolve(env)?);
                rest = &after[consumed..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether `text` contains anything [`expand`] would replace.
pub(crate) fn has_reference(text: &str) -> bool {
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        let after = &rest[dollar + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            rest = tail;
            continue;
        }
        if parse_reference(after).is_some() {
            return true;
        }
        rest = after;
    }
    false
}

struct Reference<'a> {
    name: &'a str,
    default: Option<&'a str>,
}

impl Reference<'_> {
    fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
        match (env(self.name), self.default) {
            (Some(value), Some(default)) if value.is_empty() => Ok(default.to_owned()),
            (Some(value), _) => Ok(value),
            (None, Some(default)) => Ok(default.to_owned()),
            (None, None) => Err(ExpandError::Unset(self.name.to_owned())),
        }
    }
}

/// `{NAME…` with no `}` after it, at the start of `s` (the text after a
/// `$`): returns `{NAME`, the part to show in the message.
fn unterminated(s: &str) -> Option<&str> {
    let body = s.strip_prefix('{')?;
    let starts_name = body
        .chars()
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic());
    if !starts_name || body.contains('}') {
        return None;
    }
    let name_len = body
        .find(|c: char| c != '_' && !c.is_ascii_alphanumeric())
        .unwrap_or(body.len());
    Some(&s[..1 + name_len])
}

/// Parses `{NAME}` or `{NAME:-default}` at the start of `s` (the text after
/// a `$`); returns the reference and the bytes it spans.
fn parse_reference(s: &str) -> Option<(Reference<'_>, usize)> {
    let body = s.strip_prefix('{')?;
    let close = body.find('}')?;
    let inner = &body[..close];
    let (name, default) = match inner.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (inner, None),
    };
    is_variable_name(name).then_some((Reference { name, default }, close + 2))
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".to_owned()),
            "EMPTY" => Some(String::new()),
            "HOME" => Some("/home/u".to_owned()),
            _ => None,
        }
    }

    fn ok(text: &str) -> String {
        match expand(text, &env) {
            Ok(s) => s,
            Err(e) => panic!("unexpected {e:?} in {text}"),
        }
    }

    #[test]
    fn expands_set_variables() {
        assert_eq!(ok("Bearer ${TOKEN}"), "Bearer s3cret");
        assert_eq!(ok("${HOME}/x:${TOKEN}"), "/home/u/x:s3cret");
    }

    #[test]
    fn defaults_apply_when_unset_or_empty() {
        assert_eq!(ok("${MISSING:-fallback}"), "fallback");
        assert_eq!(ok("${EMPTY:-fallback}"), "fallback");
        assert_eq!(ok("${TOKEN:-fallback}"), "s3cret");
        assert_eq!(ok("${MISSING:-}"), "");
        assert_eq!(ok("${MISSING:-http://h:1/p}"), "http://h:1/p");
    }

    #[test]
    fn set_but_empty_without_default_is_empty() {
        assert_eq!(ok("a${EMPTY}b"), "ab");
    }

    #[test]
    fn unset_without_default_names_the_variable() {
        assert_eq!(
            expand("x ${NOPE} ${TOKEN}", &env),
            Err(ExpandError::Unset("NOPE".to_owned()))
        );
    }

    #[test]
    fn unterminated_reference_is_refused_with_its_position() {
        let unterminated = |reference: &str, character| {
            Err(ExpandError::Unterminated {
                reference: reference.to_owned(),
                character,
            })
        };
        assert_eq!(
            expand("Bearer ${GITHUB_TOKEN", &env),
            unterminated("${GITHUB_TOKEN", 8)
        );
        assert_eq!(expand("${unclosed", &env), unterminated("${unclosed", 1));
        assert_eq!(
            expand("${X:-fallback", &env),
            unterminated("${X", 1),
            "a default does not close it"
        );
        // Characters, not bytes; and an earlier complete reference is fine.
        assert_eq!(expand("ü${TOKEN} ${_A b", &env), unterminated("${_A", 11));
        // A `}` anywhere after it counts as closing: `${B ${A}` is not a
        // reference (a space in the name) and stays as written, as before.
        assert_eq!(ok("${B ${TOKEN}"), "${B s3cret");
    }

    #[test]
    fn dollars_that_are_not_references_stay_literal() {
        assert_eq!(ok("echo $$"), "echo $$");
        assert_eq!(ok("$$${TOKEN}"), "$$s3cret");
        assert_eq!(ok("cost: 5$"), "cost: 5$");
        assert_eq!(ok("$HOME"), "$HOME");
        assert_eq!(ok("${"), "${");
        assert_eq!(ok("${ not a name"), "${ not a name");
        assert_eq!(ok("${1abc"), "${1abc");
        assert_eq!(ok("${}"), "${}");
        assert_eq!(ok("`${a.b}`"), "`${a.b}`");
        assert_eq!(ok("ünï${TOKEN}cødé"), "ünïs3cretcødé");
    }

    #[test]
    fn has_reference_matches_expand() {
        assert!(has_reference("a ${X} b"));
        assert!(has_reference("${X:-d}"));
        assert!(!has_reference("$$ $HOME ${a.b} ${"));
    }
}
