//! One object as `key: value` lines (`kv`), with arrays of objects as
//! nested table blocks (`doc`).
//!
//! ```text
//! body    = line *( LF line )
//! line    = entry
//!         | path ":" LF 1*( " " entry LF ) ; a section: its lines' keys
//!                                          ; go under `path`
//! entry   = key ": " value                 ; a value or a pattern
//!         | key ":" value                  ; a value starting with a digit
//!         | key "[" N "]:" LF block(N)     ; an array of N objects
//! ```
//!
//! A section line (`owner:`, nothing after the colon) stands for the
//! shared start of the keys of the indented lines under it: ` login: a`
//! there is `owner.login: a`. Keys stay the full paths they stand for, so
//! patterns resolve as in dotted lines.
//!
//! Keys are dotted paths into nested objects (`user.login: octocat`) or
//! quoted literal keys; values follow [`super::cell`] in the line slot; a
//! value that names another key in braces is a
//! [pattern](super::pattern) over this object's keys (`{url}/comments`,
//! or `{user}` for a value equal to the object at `user`). `block(N)` is a
//! [table block](super::table) of exactly N rows, whose templates reference
//! its own columns.

use serde_json::{Map, Value};

use super::plan::{Mode, Plan, Role};
use super::records::RecordShape;
use super::scan::Scanner;
use super::table;
use super::FormatDecodeError;

/// Encodes a non-empty object; nested tables only if `tables`.
/// The result's `declared` is about nested tables only: an object's own
/// lines need no explaining.
pub(super) fn encode(object: &Map<String, Value>, tables: bool) -> Option<table::Block> {
    if object.is_empty() {
        return None;
    }
    let nesting = if tables { table::MAX_NESTING } else { 0 };
    let plan = Plan::new(&[object], Mode::Object, nesting);
    let mut text = String::new();
    let mut out = table::Block {
        text: String::new(),
        declared: false,
        references: plan.has_references(),
        tables: false,
        lists: false,
        placed: false,
    };
    let written: Vec<usize> = (0..plan.nodes.len())
        .filter(|&c| !matches!(plan.nodes[c].role, Role::Group | Role::Hidden))
        .collect();
    table::write_entries(&mut text, &plan, &written, &mut out);
    text.pop();
    out.text = text;
    Some(out)
}

/// Reads `key: value` lines and nested tables to the end of the text.
pub(super) fn parse(sc: &mut Scanner<'_>) -> Result<Value, FormatDecodeError> {
    let mut entries = Vec::new();
    let mut section = None;
    while !sc.at_end() {
        match table::parse_entry(sc, table::MAX_NESTING, &mut section)? {
            Some(entry) => entries.push(entry),
            None => return Err(sc.error("expected `key: value` or `key[N]:`")),
        }
    }
    if entries.is_empty() {
        return Err(sc.error("no `key: value` lines"));
    }
    let shape = RecordShape::new(entries, Vec::new(), &[])?;
    Ok(Value::Object(shape.row(Vec::new())?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn round_trip(value: &Value, tables: bool) -> String {
        let body = encode(value.as_object().unwrap(), tables).unwrap();
        let back = parse(&mut Scanner::new(&body.text, 0)).unwrap();
        assert_eq!(&back, value, "{}", body.text);
        body.text
    }

    #[test]
    fn flat_and_nested_objects() {
        let value = json!({"name": "x", "n": 1, "empty": "", "none": null, "user": {"login": "a", "site_admin": false}, "e": {}});
        assert_eq!(
            round_trip(&value, false),
            "name: x\nn:1\nempty: \"\"\nnone: null\nuser.login: a\nuser.site_admin: false\ne: {}"
        );
    }

    #[test]
    fn templates_and_aliases_within_the_object() {
        let user = json!({"login": "octocat", "url": "https://api.github.com/users/octocat",
                          "repos_url": "https://api.github.com/users/octocat/repos"});
        let value = json!({"user": user, "assignee": user, "body": "{user.login} is literal"});
        assert_eq!(
            round_trip(&value, false),
            "user:\n login: octocat\n url: https://api.github.com/users/octocat\n\
             \x20repos_url: {url}/repos\nassignee: {user}\nbody: \"{user.login} is literal\""
        );
    }

    #[test]
    fn arrays_of_objects_become_tables() {
        let value = json!({"total_count": 2, "incomplete_results": false,
            "items": [{"id": 1, "title": "a"}, {"id": 2, "title": "b"}], "after": "x"});
        assert_eq!(
            round_trip(&value, true),
            "total_count:2\nincomplete_results: false\nitems[2]:\nid,title\n1,a\n2,b\nafter: x"
        );
        assert!(round_trip(&value, false).contains("items: [{"));
    }

    /// Three or more lines of one group go under a section line; a
    /// section of a two-segment group pays from two lines.
    #[test]
    fn sections_group_lines() {
        let value = json!({
            "id": 1,
            "owner": {"login": "a", "id": 2, "type": "User", "site_admin": false,
                      "plan": {"name": "pro", "space": 9, "seats": 1}},
            "name": "r",
            "few": {"a": 1, "b": 2},
        });
        assert_eq!(
            round_trip(&value, false),
            "id:1\nowner:\n login: a\n id:2\n type: User\n site_admin: false\n\
             owner.plan:\n name: pro\n space:9\n seats:1\nname: r\n\
             few.a:1\nfew.b:2"
        );
        // A section may open again, after other lines.
        let text = "a:\n x:1\n y:2\nb:3\na:\n z:4";
        let back = parse(&mut Scanner::new(text, 0)).unwrap();
        assert_eq!(back.to_string(), r#"{"a":{"x":1,"y":2,"z":4},"b":3}"#);
    }

    #[test]
    fn malformed_bodies_are_errors() {
        for bad in [
            "",
            "a",
            "a:x",
            "a:-1",
            "a: ",
            "a[0]:\nx\n1",
            "a[2]:\nx\n1",
            "a[x]:",
            "a: {b}\nb: {a}",
            " a: 1",
            "a:\nb: 1",
            "a:",
            "a:\n \"q\": 1",
        ] {
            assert!(parse(&mut Scanner::new(bad, 0)).is_err(), "{bad:?}");
        }
    }
}
