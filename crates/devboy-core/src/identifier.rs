//! The words of an identifier (`getResponseWithInterceptorChain` → get,
//! response, with, interceptor, chain): one splitter, two explicit rules.
//!
//! Both rules split at every character that is not a letter or a digit
//! and where a lower-case letter or a digit is followed by an upper-case
//! letter, and lower-case every word. [`Split::Fine`] also splits after an
//! acronym and between letters and digits; [`Split::CaseChanges`] keeps
//! them together. Each caller's rule is the one its figures were made
//! with: code search ranks by fine words, the tool-name classifier matches
//! whole case-delimited words against its verb lists.

/// Where [`words`] splits, beyond non-alphanumerics and lower-to-upper
/// case changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Nowhere else: `getHTTPStatus_v2` → get, httpstatus, v2.
    CaseChanges,
    /// Also after an acronym and between letters and digits:
    /// `HTTPClient_v2` → http, client, v, 2.
    Fine,
}

/// The lower-cased words of `name` under `split`.
///
/// ```
/// use devboy_core::identifier::{words, Split};
/// assert_eq!(words("readTextFile", Split::CaseChanges), ["read", "text", "file"]);
/// assert_eq!(words("HTTPClient_v2", Split::Fine), ["http", "client", "v", "2"]);
/// ```
pub fn words(name: &str, split: Split) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        // A word in progress means the previous character is in it.
        if let Some(&previous) = chars.get(i.wrapping_sub(1)).filter(|_| !current.is_empty()) {
            let case_change =
                c.is_uppercase() && (previous.is_lowercase() || previous.is_ascii_digit());
            let fine = split == Split::Fine
                && ((c.is_uppercase()
                    && previous.is_uppercase()
                    && chars.get(i + 1).is_some_and(|n| n.is_lowercase()))
                    || c.is_ascii_digit() != previous.is_ascii_digit());
            if case_change || fine {
                out.push(std::mem::take(&mut current));
            }
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fine_words_split_acronyms_and_digits() {
        assert_eq!(
            words("getResponseWithInterceptorChain", Split::Fine),
            ["get", "response", "with", "interceptor", "chain"]
        );
        assert_eq!(
            words("HTTPClient_v2", Split::Fine),
            ["http", "client", "v", "2"]
        );
        assert_eq!(words("RealCall", Split::Fine), ["real", "call"]);
    }

    #[test]
    fn case_change_words_keep_acronyms_and_digits() {
        assert_eq!(
            words("getHTTPStatus_v2", Split::CaseChanges),
            ["get", "httpstatus", "v2"]
        );
        assert_eq!(
            words("v2File-x.y z", Split::CaseChanges),
            ["v2", "file", "x", "y", "z"]
        );
        assert!(words("__", Split::Fine).is_empty());
    }
}
