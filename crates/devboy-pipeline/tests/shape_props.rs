//! Property tests of the shape classifier.
//!
//! - `classify_never_panics`: any text, and text built from the pieces the
//!   detectors look for.
//! - `json_bodies_come_back_parsed`: a JSON body, compact or pretty, is
//!   classified with a JSON shape and handed back as the same value.
//!
//! That large, detector-hostile bodies classify in linear time is shown by
//! `benches/linear.rs` (a figure per byte for each), not by a timed test.

use devboy_pipeline::shape::{classify, classify_json, Shape};
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z0-9 :|@/\\-\n]{0,24}".prop_map(Value::String),
        Just(Value::String(
            "https://x.y/6dcb09b5b57875f334f61aebed695e2e4193db5e".into()
        )),
        Just(Value::String("@@ -1 +1 @@\n-a\n+b".into())),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec(("[a-z]{0,4}", inner), 0..6)
                .prop_map(|f| Value::Object(f.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn classify_never_panics(text in any::<String>()) {
        let c = classify(&text);
        prop_assert!(!c.shape.name().is_empty());
    }

    #[test]
    fn classify_never_panics_on_detector_pieces(pieces in vec(proptest::sample::select(vec![
        "|", "---", ":-:", "\n", "```", "~~~", "@@ -1,2 +3 @@", "diff --git ", "--- ", "http://",
        "https://", "2024-01-02T03:04", " INFO ", "[ERROR]", "    at f (x.js:1:2)", "Traceback (most recent call last):",
        "File \"a\", line 3", "goroutine 1 [", "</p>", "<br>", "{", "[", "\"", "6dcb09b5b57875f334f61aebed695e2e4193db5e",
        "- ", "1. ", "fn x() {", "}", "é", " ", "\t", "#",
    ]), 0..60)) {
        let text = pieces.concat();
        let _ = classify(&text);
        let _ = classify_json(Value::String(text));
    }

    #[test]
    fn json_bodies_come_back_parsed(value in json()) {
        for body in [
            serde_json::to_string(&value).unwrap_or_default(),
            serde_json::to_string_pretty(&value).unwrap_or_default(),
        ] {
            let c = classify(&body);
            prop_assert!(c.shape.is_json() || c.shape == Shape::Empty, "{:?}", c.shape);
            prop_assert_eq!(c.json.as_ref(), Some(&value));
            prop_assert_eq!(classify_json(value.clone()), c);
        }
    }
}
