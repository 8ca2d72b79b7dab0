//! Property tests of the encoders: every candidate decodes back to exactly
//! its input, and the decoder never panics, whatever the text.
//!
//! The generators aim at the places a text format can lose information:
//! keys with dots, commas, colons, quotes, braces, brackets, spaces and
//! non-ASCII letters, empty keys; strings that look like numbers, `null`,
//! booleans, JSON or templates, with line breaks and control characters;
//! `""` next to `null` next to an absent key; floats with exponents and
//! `-0.0`; the extremes of `u64` and `i64`; nested objects and arrays; and
//! rows built so that constants, templates, aliases and nested tables
//! actually occur.

mod damage;

use devboy_pipeline::encode::{candidates, check, decode, encode_best, Format};
use devboy_pipeline::{exact, Tokenizer};
use proptest::prelude::*;
use serde_json::{json, Map, Number, Value};

const KEYS: &[&str] = &[
    "id", "url", "login", "name", "user", "a.b", "a", "b", "", "a,b", "x: y", "\"q\"", "{url}",
    "[0]", " sp", "sp ", "null", "1", "ü", "名前", "+1", ">x", "a b", "html_url", "items", "~",
    "9",
];

const STRINGS: &[&str] = &[
    "",
    "null",
    "NULL",
    "true",
    "False",
    "1",
    "-0",
    "1e5",
    "1.0",
    "007",
    "inf",
    "NaN",
    "0x1F",
    "{\"a\":1}",
    "[1,2]",
    "[",
    "{",
    "}",
    "{url}",
    "{url}/x",
    "[{user}]",
    "a,b",
    "say \"hi\"",
    "\"",
    "\"\"",
    "line\nbreak",
    "crlf\r\n",
    "\r",
    "tab\there",
    " lead",
    "trail ",
    "\u{0}",
    "\u{85}next",
    "ü",
    "名前",
    "https://api.github.com/users/octocat",
    "octocat",
    "> quoted",
    "k: v",
    "a.b",
    "x,",
    ",",
    "#",
    "-",
    "-x",
    "2011-04-22T13:33:48Z",
    "~",
    "~/x",
    "~url",
    "~{url}/x",
    "{url}~",
    "9lives",
    "&1",
    "&x",
    "&01",
    "1:2",
    "^",
    "^/x",
    "https://api.github.com/repos/octokit/rest.js/a",
    "https://api.github.com/repos/octokit/rest.js/b/c",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => "[a-z.,:{}\\[\\]\" >]{0,5}",
        1 => "\\PC{0,4}",
    ]
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(-0.0),
        Just(0.0),
        Just(1e300),
        Just(-2.5e-300),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        Just(1.0),
        Just(0.1),
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(-1i64), Just(0)].prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        float().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(STRINGS).prop_map(|s| Value::String(s.to_owned())),
        "\\PC{0,12}".prop_map(Value::String),
        "[ -~\n\r\t]{0,12}".prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..5)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// Rows over a shared key set, so columns line up, with keys randomly left
/// out, and values drawn from a small pool, so constants and equal columns
/// are common.
fn rows() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(key(), 1..6),
        prop::collection::vec(value(), 1..5),
        1usize..5,
    )
        .prop_flat_map(|(keys, pool, n)| {
            let row = prop::collection::vec(
                (any::<bool>(), prop::sample::select(pool.clone())),
                keys.len(),
            )
            .prop_map(move |cells| {
                let mut map = Map::new();
                for (k, (present, v)) in keys.iter().zip(cells) {
                    if present || k.is_empty() {
                        map.insert(k.clone(), v);
                    }
                }
                Value::Object(map)
            });
            prop::collection::vec(row, n)
        })
        .prop_map(Value::Array)
}

/// GitHub-like rows: URLs derived from other fields, a nested user that
/// is sometimes repeated, labels as arrays of objects.
fn github_rows() -> impl Strategy<Value = Value> {
    let row = (
        "[a-z]{1,6}",
        0u64..2000,
        any::<bool>(),
        prop::sample::select(STRINGS),
        prop::collection::vec("[a-z ]{1,5}", 0..3),
        any::<bool>(),
    )
        .prop_map(|(login, number, same, text, labels, dotted)| {
            let url = format!("https://api.github.com/users/{login}");
            let user = json!({
                "login": login,
                "id": number,
                "url": url,
                "followers_url": format!("{url}/followers"),
                "gists_url": format!("{url}/gists{{/gist_id}}"),
                "type": "User",
            });
            let labels: Vec<Value> = labels
                .iter()
                .map(|name| json!({"name": name, "url": format!("https://x/labels/{name}"), "default": false}))
                .collect();
            let mut row = json!({
                "number": number,
                "url": format!("https://api.github.com/repos/o/r/issues/{number}"),
                "comments_url": format!("https://api.github.com/repos/o/r/issues/{number}/comments"),
                "title": text,
                "user": user,
                "assignee": if same { user.clone() } else { Value::Null },
                "assignees": if same { json!([user]) } else { json!([]) },
                "labels": labels,
                "state": "open",
            });
            if dotted {
                row["a.b"] = json!("{url}");
            }
            row
        });
    prop::collection::vec(row, 1..5).prop_map(Value::Array)
}

/// Mixed list pages, as an events feed or an issue timeline: rows of
/// several kinds whose payload is shaped by the kind, the same actors and
/// repositories on many rows and again inside payloads, and (with
/// `shuffled`) each row's keys in an order of its own.
fn mixed_pages() -> impl Strategy<Value = Value> {
    let row = (
        0usize..4,
        0usize..3,
        0usize..3,
        any::<u64>(),
        prop::sample::select(STRINGS),
        0u64..100,
    );
    (prop::collection::vec(row, 1..10), any::<bool>()).prop_map(|(rows, shuffled)| {
        let user = |i: usize| {
            let login = ["octocat", "hubot", "名前"][i];
            let url = format!("https://api.github.com/users/{login}");
            json!({"login": login, "id": i, "url": url, "repos_url": format!("{url}/repos"), "site_admin": false})
        };
        let repo = |i: usize| {
            json!({"id": 100 + i, "name": format!("o/r{i}"), "url": format!("https://api.github.com/repos/o/r{i}")})
        };
        let rows = rows
            .into_iter()
            .map(|(kind, actor, at, seed, text, n)| {
                let payload = match kind {
                    0 => json!({"ref": "refs/heads/main", "size": n, "commits": [{"sha": text, "author": user(actor)}]}),
                    1 => json!({"action": "opened", "issue": {"number": n, "title": text, "user": user((actor + 1) % 3)}}),
                    2 => json!({"comment": {"body": text, "user": user(actor)}, "issue": {"number": n, "user": user(actor)}, "action": "created"}),
                    _ => json!({"forkee": repo((at + 1) % 3)}),
                };
                let mut fields = vec![
                    ("id", json!(seed.to_string())),
                    ("type", json!(["PushEvent", "IssuesEvent", "IssueCommentEvent", "ForkEvent"][kind])),
                    ("actor", user(actor)),
                    ("repo", repo(at)),
                    ("payload", payload),
                    ("public", json!(true)),
                ];
                if kind == 3 {
                    fields.remove(5);
                }
                if shuffled {
                    // A row's own order, from its seed.
                    let mut state = seed | 1;
                    for i in (1..fields.len()).rev() {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        fields.swap(i, (state % (i as u64 + 1)) as usize);
                    }
                }
                Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            })
            .collect();
        Value::Array(rows)
    })
}

fn check_round_trips(value: &Value) -> Result<(), TestCaseError> {
    let all = candidates(value);
    // json_compact is there unless serde_json itself cannot read its own
    // output back (some floats, without its `float_roundtrip` feature).
    let json_reads_back = serde_json::from_str::<Value>(&value.to_string())
        .ok()
        .as_ref()
        == Some(value);
    prop_assert_eq!(
        all.iter().any(|c| c.format() == Format::JsonCompact),
        json_reads_back
    );
    for candidate in &all {
        let back = decode(candidate.text());
        // Byte for byte: key order and number text too (invariant 12).
        prop_assert!(
            back.as_ref().is_ok_and(|back| exact::same(back, value)),
            "{} did not round-trip:\n{}\n{:?}",
            candidate.format(),
            candidate.text(),
            back
        );
    }
    // With no candidate, encode_best falls back to unchecked compact JSON.
    if !all.is_empty() {
        let best = encode_best(value, Tokenizer::CharsPerToken(4.0));
        let back = decode(best.text()).ok();
        prop_assert!(back.is_some_and(|back| exact::same(&back, value)));
    }
    Ok(())
}

/// Every encoding of `value` with a hint (compact JSON has none: it is the
/// value as JSON, with nothing to check it against), damaged every way
/// [`damage::damaged`] knows, decodes to exactly `value` or fails.
fn check_damage_fails(
    value: &Value,
    cuts: &[prop::sample::Index],
    mutations: &[damage::Mutation],
) -> Result<(), TestCaseError> {
    for candidate in candidates(value) {
        if candidate.format() == Format::JsonCompact {
            continue;
        }
        for text in damage::damaged(candidate.text(), cuts, mutations) {
            if let Ok(back) = decode(&text) {
                prop_assert_eq!(
                    &back,
                    value,
                    "{} damaged decodes to something else:\n{}\n---\n{}",
                    candidate.format(),
                    candidate.text(),
                    text
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// encode → cut or mutate → decode: the original or an error, for
    /// csv, kv and doc alike.
    #[test]
    fn damaged_encodings_decode_to_the_original_or_fail(
        v in prop_oneof![
            value(),
            rows(),
            github_rows(),
            rows().prop_map(|v| json!({"total_count": 2, "items": v, "incomplete_results": false})),
            mixed_pages(),
        ],
        cuts in damage::cuts(),
        mutations in damage::mutations(),
    ) {
        check_damage_fails(&v, &cuts, &mutations)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_value_round_trips(v in value()) {
        check_round_trips(&v)?;
    }

    #[test]
    fn tables_round_trip(v in rows()) {
        check_round_trips(&v)?;
    }

    #[test]
    fn objects_wrapping_tables_round_trip(v in rows(), total in any::<u32>(), k in key()) {
        let doc = json!({"total_count": total, k: v.clone(), "incomplete_results": false});
        check_round_trips(&doc)?;
        check_round_trips(&json!({"items": v}))?;
    }

    #[test]
    fn github_like_lists_round_trip(v in github_rows()) {
        check_round_trips(&v)?;
        let formats: Vec<Format> = candidates(&v).iter().map(|c| c.format()).collect();
        prop_assert!(formats.contains(&Format::Csv), "no csv for {v}");
        check_round_trips(&json!({"total_count": 1, "items": v}))?;
        let first = v.as_array().and_then(|rows| rows.first()).cloned().unwrap_or(Value::Null);
        check_round_trips(&first)?;
    }

    /// Rows of several kinds, in any key order: every candidate is exact,
    /// and the repeated objects are referenced (`refs`), not left as JSON.
    #[test]
    fn mixed_pages_round_trip_and_are_factored(v in mixed_pages()) {
        check_round_trips(&v)?;
        let rows = v.as_array().map_or(0, Vec::len);
        let clash = v.to_string().contains("\"&");
        if rows >= 3 && !clash {
            let formats: Vec<Format> = candidates(&v).iter().map(|c| c.format()).collect();
            prop_assert!(formats.contains(&Format::Refs), "no refs for {}", v);
        }
        check_round_trips(&json!({"total_count": rows, "items": v}))?;
    }

    #[test]
    fn decode_never_panics_on_any_text(text in "\\PC{0,64}") {
        let _ = decode(&text);
    }

    #[test]
    fn decode_never_panics_on_hinted_text(
        word in prop::sample::select(&["csv", "kv", "doc", "refs", "xml"][..]),
        body in "[a-z{}\\[\\]\",.: \n\\\\0-9&=]{0,80}",
    ) {
        for text in [format!("> [encoded: {word}]\n{body}"), format!("> [encoded: {word}; note]\n{body}")] {
            let _ = decode(&text);
            // Sealed, the text reaches the grammar.
            let _ = decode(&check::seal(&text).unwrap());
        }
    }

    /// Damaged encodings (a byte range cut out, text spliced in) decode to
    /// something or fail; they never panic.
    #[test]
    fn decode_never_panics_on_damaged_encodings(
        v in github_rows(),
        cut in any::<prop::sample::Index>(),
        len in 0usize..8,
        insert in "[a-z{}\\[\\]\",.: \n0-9]{0,4}",
    ) {
        for candidate in candidates(&v) {
            let text = candidate.text();
            let mut at = cut.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let mut end = (at + len).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let damaged = format!("{}{insert}{}", &text[..at], &text[end..]);
            let _ = decode(&damaged);
        }
    }
}
