//! Property tests of the L1 templates.
//!
//! - `md_tables_round_trip`: random Markdown documents (tables at random
//!   places, with random pipes, paddings, alignments, escaped pipes, empty
//!   and unicode cells, code fences and lists around them): whatever the
//!   encoder accepts decodes to the same bytes.
//! - `md_tables_accepts_plain_tables`: documents whose tables all use one
//!   of the three paddings are accepted, every table converted.
//! - `md_tables_passthrough`: text after the hint with no opener line
//!   decodes to itself.
//! - `fenced_fields_round_trip`: random JSON with multi-line strings
//!   (fences inside, with and without trailing newlines, awkward keys):
//!   whatever the encoder accepts decodes to an equal value, keys in the
//!   same order; without floats, every container holding a multi-line
//!   string is accepted.
//! - `decode_never_panics`: arbitrary text, and text built from the
//!   grammars' own pieces, after each hint.

mod damage;

use devboy_pipeline::encode::check::seal;
use devboy_pipeline::shape::classify;
use devboy_pipeline::template::{
    decode, fenced_fields, json_text, md_tables, DecodedBody, Template,
};
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::{Map, Value};

// ---------------------------------------------------------------- Markdown

#[derive(Debug, Clone, Copy)]
enum Padding {
    Spaced,
    Tight,
    Aligned,
    /// Random extra spaces per cell: often not restorable.
    Ragged,
}

#[derive(Debug, Clone)]
struct TableSpec {
    lead: bool,
    trail: bool,
    padding: Padding,
    aligns: Vec<u8>,
    dashes: Vec<usize>,
    spaced_delim: bool,
    rows: Vec<Vec<String>>,
    extra: Vec<usize>,
}

fn cell(safe: bool) -> BoxedStrategy<String> {
    let mut pieces = vec![
        "a", "foo", "42", "x y", "\\|", ",", "\"", "é", "日本", "👋", "*b*", "`c`", "a,b", "Ω",
    ];
    if !safe {
        pieces.extend(["", " ", "-", ":", "```", "\\", "|", "\t", "--", "<br>"]);
    }
    vec(proptest::sample::select(pieces), 0..4)
        .prop_map(|p| p.concat())
        .boxed()
}

fn table(safe: bool) -> impl Strategy<Value = TableSpec> {
    (1usize..5, 0usize..5).prop_flat_map(move |(cols, body)| {
        let paddings = if safe {
            vec![Padding::Spaced, Padding::Tight, Padding::Aligned]
        } else {
            vec![
                Padding::Spaced,
                Padding::Tight,
                Padding::Aligned,
                Padding::Ragged,
            ]
        };
        (
            if safe {
                Just(true).boxed()
            } else {
                any::<bool>().boxed()
            },
            if safe {
                Just(true).boxed()
            } else {
                any::<bool>().boxed()
            },
            proptest::sample::select(paddings),
            vec(0u8..4, cols),
            vec(1usize..6, cols),
            any::<bool>(),
            vec(vec(cell(safe), cols..=cols), body + 1),
            vec(0usize..3, cols * (body + 1)),
        )
            .prop_map(
                |(lead, trail, padding, aligns, dashes, spaced_delim, rows, extra)| TableSpec {
                    lead,
                    trail,
                    padding,
                    aligns,
                    dashes,
                    spaced_delim,
                    rows,
                    extra,
                },
            )
    })
}

fn render_table(t: &TableSpec) -> String {
    let cols = t.aligns.len();
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            t.rows
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
                .max(3)
        })
        .collect();
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        if t.lead {
            s.push('|');
        }
        s.push_str(&cells.join("|"));
        if t.trail {
            s.push('|');
        }
        s
    };
    let side = |c: usize, n: usize| (t.lead || c > 0, t.trail || c + 1 < n);
    let mut lines = Vec::new();
    for (r, row) in t.rows.iter().enumerate() {
        let cells = row
            .iter()
            .enumerate()
            .map(|(c, text)| {
                let (before, after) = side(c, cols);
                let sp = |on: bool| if on { " " } else { "" };
                match t.padding {
                    Padding::Tight => text.clone(),
                    Padding::Spaced => format!("{}{text}{}", sp(before), sp(after)),
                    Padding::Ragged => {
                        let n = t.extra[r * cols + c];
                        format!("{}{text}{}", " ".repeat(n), " ".repeat(2 - n.min(2)))
                    }
                    Padding::Aligned => {
                        let fill = widths[c] - text.chars().count();
                        let (l, rr) = match t.aligns[c] {
                            2 => (fill, 0),
                            3 => (fill / 2, fill - fill / 2),
                            _ => (0, fill),
                        };
                        format!(
                            "{}{}{text}{}{}",
                            sp(before),
                            " ".repeat(l),
                            " ".repeat(rr),
                            sp(after)
                        )
                    }
                }
            })
            .collect();
        lines.push(line(cells));
        if r == 0 {
            let delim = (0..cols)
                .map(|c| {
                    let (before, after) = side(c, cols);
                    let n = match t.padding {
                        Padding::Aligned => widths[c],
                        _ => t.dashes[c],
                    };
                    let (l, r) = match t.aligns[c] {
                        1 => (":", ""),
                        2 => ("", ":"),
                        3 => (":", ":"),
                        _ => ("", ""),
                    };
                    let dashes = "-".repeat(n.saturating_sub(l.len() + r.len()).max(1));
                    let spaced = matches!(t.padding, Padding::Aligned) || t.spaced_delim;
                    let sp = |on: bool| if on && spaced { " " } else { "" };
                    format!("{}{l}{dashes}{r}{}", sp(before), sp(after))
                })
                .collect();
            lines.push(line(delim));
        }
    }
    lines.join("\n")
}

#[derive(Debug, Clone)]
enum Block {
    Paragraph(String),
    Table(TableSpec),
    FencedTable(TableSpec),
    List(Vec<String>),
    Heading(String),
    Quote(TableSpec),
}

fn prose() -> impl Strategy<Value = String> {
    vec(
        proptest::sample::select(vec![
            "word",
            "Ünïcode",
            "a|b",
            "`x`",
            "**bold**",
            "1.",
            "\\",
            "http://x.y",
            "—",
            "```csv",
            "csv",
            "\r",
        ]),
        1..6,
    )
    .prop_map(|w| w.join(" "))
}

fn block(safe: bool) -> BoxedStrategy<Block> {
    let mut choices = vec![
        prose().prop_map(Block::Paragraph).boxed(),
        table(safe).prop_map(Block::Table).boxed(),
        table(safe).prop_map(Block::Table).boxed(),
    ];
    if !safe {
        choices.extend([
            table(safe).prop_map(Block::FencedTable).boxed(),
            vec(prose(), 1..4).prop_map(Block::List).boxed(),
            prose().prop_map(Block::Heading).boxed(),
            table(safe).prop_map(Block::Quote).boxed(),
        ]);
    }
    proptest::strategy::Union::new(choices).boxed()
}

fn render_block(b: &Block) -> String {
    match b {
        Block::Paragraph(p) => p.clone(),
        Block::Table(t) => render_table(t),
        Block::FencedTable(t) => format!("```\n{}\n```", render_table(t)),
        Block::List(items) => items
            .iter()
            .map(|i| format!("- {i}"))
            .collect::<Vec<_>>()
            .join("\n"),
        Block::Heading(h) => format!("## {h}"),
        Block::Quote(t) => render_table(t)
            .lines()
            .map(|l| format!("> {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn document(safe: bool) -> impl Strategy<Value = (String, usize)> {
    (
        vec(block(safe), 0..6),
        vec(
            proptest::sample::select(if safe {
                vec!["\n\n"]
            } else {
                vec!["\n\n", "\n", "\n\n\n", "\r\n\r\n"]
            }),
            6,
        ),
        any::<bool>(),
    )
        .prop_map(|(blocks, seps, final_newline)| {
            let mut doc = String::new();
            for (i, b) in blocks.iter().enumerate() {
                if i > 0 {
                    doc.push_str(seps[i % seps.len()]);
                }
                doc.push_str(&render_block(b));
            }
            if final_newline {
                doc.push('\n');
            }
            let tables = blocks
                .iter()
                .filter(|b| matches!(b, Block::Table(_)))
                .count();
            (doc, tables)
        })
}

fn safe_document() -> impl Strategy<Value = (String, usize)> {
    document(true).prop_filter("no opener-like prose", |(doc, _)| {
        !doc.contains("```csv") && !doc.contains('\r')
    })
}

// -------------------------------------------------------------------- JSON

fn text_leaf() -> impl Strategy<Value = String> {
    vec(
        proptest::sample::select(vec![
            "line",
            "\n",
            "\n",
            "```",
            "`",
            "\"",
            ":",
            ". ",
            "[0]",
            " ",
            "é",
            "true",
            "42",
            "@@ -1 +1 @@",
            "\t",
            "\\",
            "{",
            "}",
            "null",
            "\r\n",
            "a: b",
            "---",
            "\u{2028}",
        ]),
        0..8,
    )
    .prop_map(|p| p.concat())
}

fn key() -> impl Strategy<Value = String> {
    vec(
        proptest::sample::select(vec![
            "a", "id", "patch", ".", "[", "]", ":", "\"", " ", "é", "`", "0", "-", "_", "\n",
        ]),
        0..4,
    )
    .prop_map(|p| p.concat())
}

fn json(floats: bool) -> impl Strategy<Value = Value> {
    let number = if floats {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
        ]
        .boxed()
    } else {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
        ]
        .boxed()
    };
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number,
        text_leaf().prop_map(Value::String),
        text_leaf().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec((key(), inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn has_multiline(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\n'),
        Value::Array(items) => items.iter().any(has_multiline),
        Value::Object(map) => map.values().any(has_multiline),
        _ => false,
    }
}

fn exact_json(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

// ------------------------------------------------------------------ tests

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn md_tables_round_trip((doc, _) in document(false)) {
        if let Some(encoded) = md_tables::encode(&doc) {
            // The hint, then its check.
            prop_assert!(encoded.starts_with(md_tables::HINT.trim_end_matches(']')));
            prop_assert!(Template::MdTables.may_apply(&classify(&doc)));
            prop_assert_eq!(md_tables::decode(&encoded), Ok(doc.clone()));
            prop_assert_eq!(decode(&encoded), Ok(DecodedBody::Text(doc)));
        }
    }

    #[test]
    fn md_tables_accepts_plain_tables((doc, tables) in safe_document()) {
        let encoded = md_tables::encode(&doc);
        if tables == 0 {
            prop_assert_eq!(encoded, None);
        } else {
            let encoded = encoded.expect("plain tables convert");
            let blocks = encoded.lines().filter(|l| l.starts_with("```csv")).count();
            prop_assert_eq!(blocks, tables, "{}", encoded);
            prop_assert_eq!(md_tables::decode(&encoded), Ok(doc));
        }
    }

    #[test]
    fn md_tables_passthrough(text in "[a-z|\\-` \n,\"é]{0,80}") {
        prop_assume!(!text.split('\n').any(|l| l.trim_start_matches('`').starts_with("csv") && l.starts_with("```")));
        let encoded = seal(&format!("{}\n{text}", md_tables::HINT)).unwrap();
        prop_assert_eq!(md_tables::decode(&encoded), Ok(text));
    }

    #[test]
    fn fenced_fields_round_trip(value in json(true)) {
        if let Some(encoded) = fenced_fields::encode(&value) {
            // The hint, then its check.
            prop_assert!(encoded.starts_with(fenced_fields::HINT.trim_end_matches(']')));
            let back = fenced_fields::decode(&encoded);
            prop_assert!(back.is_ok(), "{:?}\n{}", back, encoded);
            let back = back.unwrap_or_default();
            prop_assert_eq!(exact_json(&back), exact_json(&value), "{}", encoded);
            prop_assert_eq!(decode(&encoded), Ok(DecodedBody::Json(value)));
        }
    }

    #[test]
    fn fenced_fields_accepts_every_multiline_container(value in json(false)) {
        let container = matches!(value, Value::Object(_) | Value::Array(_));
        let encoded = fenced_fields::encode(&value);
        prop_assert_eq!(encoded.is_some(), container && has_multiline(&value));
        // Through the classifier, as the router would call it.
        let body = exact_json(&value);
        let c = classify(&body);
        let via = Template::FencedFields.encode(&body, c.json.as_ref());
        prop_assert_eq!(via, encoded);
    }

    #[test]
    fn decode_never_panics(text in any::<String>()) {
        let _ = decode(&text);
        for t in Template::ALL {
            let hinted = format!("{}\n{text}", t.hint());
            let _ = decode(&hinted);
            // Sealed, the text reaches the template's grammar.
            let _ = decode(&seal(&hinted).unwrap());
        }
    }

    #[test]
    fn decode_never_panics_on_grammar_pieces(pieces in vec(proptest::sample::select(vec![
        "```", "````", "csv", " ", "\n", ",", "\"", "|", "---", ":", " tight", " aligned",
        "[0]", "[1]", ".", "a", "é", "`", "{", "}", "\\", "\r", "-:", ":-", "\"\"", "99999999999999999999999",
    ]), 0..40)) {
        let body = pieces.concat();
        for t in Template::ALL {
            let hinted = format!("{}\n{body}", t.hint());
            let _ = decode(&hinted);
            let _ = decode(&seal(&hinted).unwrap());
        }
    }
}

/// `encoded`, damaged every way [`damage::damaged`] knows, decodes (as
/// `devboy decode` does, through [`decode`]) to exactly `original` or
/// fails.
fn check_damage_fails(
    encoded: &str,
    original: &DecodedBody,
    cuts: &[proptest::sample::Index],
    mutations: &[damage::Mutation],
) -> Result<(), TestCaseError> {
    for text in damage::damaged(encoded, cuts, mutations) {
        if let Ok(back) = decode(&text) {
            // Key order counts: compare the JSON text, not the values.
            let same = match (&back, original) {
                (DecodedBody::Json(a), DecodedBody::Json(b)) => exact_json(a) == exact_json(b),
                (a, b) => a == b,
            };
            prop_assert!(
                same,
                "damaged decodes to something else:\n{}\n---\n{}\n→ {:?}",
                encoded,
                text,
                back
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// md tables: encode → cut or mutate → decode gives the original or fails.
    #[test]
    fn damaged_md_tables_decode_to_the_original_or_fail(
        (doc, _) in document(false),
        cuts in damage::cuts(),
        mutations in damage::mutations(),
    ) {
        if let Some(encoded) = md_tables::encode(&doc) {
            check_damage_fails(&encoded, &DecodedBody::Text(doc), &cuts, &mutations)?;
        }
    }

    /// Fenced fields: the same.
    #[test]
    fn damaged_fenced_fields_decode_to_the_original_or_fail(
        value in json(true),
        cuts in damage::cuts(),
        mutations in damage::mutations(),
    ) {
        if let Some(encoded) = fenced_fields::encode(&value) {
            check_damage_fails(&encoded, &DecodedBody::Json(value), &cuts, &mutations)?;
        }
    }

    /// JSON text in a field, with its body in compact JSON, csv, kv or doc:
    /// the same.
    #[test]
    fn damaged_json_text_decodes_to_the_original_or_fail(
        inner in json(false),
        indented in any::<bool>(),
        cuts in damage::cuts(),
        mutations in damage::mutations(),
    ) {
        prop_assume!(matches!(inner, Value::Object(_) | Value::Array(_)));
        let text = if indented {
            serde_json::to_string_pretty(&inner).unwrap_or_default()
        } else {
            exact_json(&inner)
        };
        let body = serde_json::json!({"ok": true, "content": text, "n": 2});
        if let Some(encoded) = json_text::encode(&body) {
            check_damage_fails(&encoded, &DecodedBody::Json(body), &cuts, &mutations)?;
        }
    }
}

#[test]
fn a_realistic_compare_body_round_trips() {
    let body = r#"{"url":"https://api.github.com/repos/o/r/compare/a...b","status":"ahead","ahead_by":1,
      "files":[{"sha":"bbcd538c8e72b8c175046e27cc8f907076331401","filename":"src/lib.rs","status":"modified",
      "additions":2,"deletions":1,"changes":3,"patch":"@@ -1,3 +1,4 @@\n use std::io;\n-fn a() {}\n+fn a() -> io::Result<()> {\n+    Ok(())\n+}\n"},
      {"sha":"6dcb09b5b57875f334f61aebed695e2e4193db5e","filename":"README.md","status":"added","additions":1,"deletions":0,"changes":1,
      "patch":"@@ -0,0 +1 @@\n+# Title"}]}"#;
    let c = classify(body);
    let json = c.json.expect("JSON");
    let encoded = fenced_fields::encode(&json).expect("multi-line patches");
    assert!(encoded.contains("# files[0]\nsha: bbcd538c"));
    assert!(encoded.contains("patch:\n```diff\n@@ -1,3 +1,4 @@\n use std::io;\n"));
    assert!(encoded.contains("+}\n\n```\n# files[1]\nsha: 6dcb09b5"));
    assert_eq!(decode(&encoded), Ok(DecodedBody::Json(json)));
}

/// The generators must reach the encoders: a property that only ever sees
/// declined inputs proves nothing.
#[test]
fn generators_reach_the_encoders() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let (mut with_tables, mut md_accepted, mut json_accepted) = (0, 0, 0);
    for _ in 0..300 {
        let (doc, tables) = document(false)
            .new_tree(&mut runner)
            .map(|t| t.current())
            .unwrap_or_default();
        if tables > 0 {
            with_tables += 1;
            md_accepted += usize::from(md_tables::encode(&doc).is_some());
        }
        let value = json(true)
            .new_tree(&mut runner)
            .map(|t| t.current())
            .unwrap_or_default();
        json_accepted += usize::from(fenced_fields::encode(&value).is_some());
    }
    eprintln!("md: {md_accepted}/{with_tables} docs with tables; json: {json_accepted}/300");
    // The unsafe generator writes many tables GFM does not parse as
    // tables, or that no padding rule restores; about half convert.
    assert!(md_accepted * 3 > with_tables, "{md_accepted}/{with_tables}");
    assert!(json_accepted > 60, "{json_accepted}/300");
}

/// Large bodies encode and decode exactly (how their cost grows is
/// `benches/linear.rs`'s to show).
#[test]
fn big_bodies_round_trip() {
    let mut doc = String::from("| id | title | state |\n|---|---|---|\n");
    for i in 0..40_000 {
        doc.push_str(&format!("| {i} | issue, \"number\" {i} | open |\n"));
    }
    let patch = "@@ -1,3 +1,3 @@\n-old \"line\"\n+new `line`\n".repeat(200);
    let files: Vec<Value> = (0..100)
        .map(|i| serde_json::json!({"filename": format!("f{i}.rs"), "patch": patch}))
        .collect();
    let value = serde_json::json!({"sha": "x", "files": files});

    let encoded = md_tables::encode(&doc).expect("a plain table");
    assert_eq!(md_tables::decode(&encoded).as_deref(), Ok(doc.as_str()));
    let encoded = fenced_fields::encode(&value).expect("patches");
    assert_eq!(decode(&encoded), Ok(DecodedBody::Json(value)));
}
