//! Invariant 12, "exact means byte for byte", as properties over JSON
//! *text* (not values, which have already lost what a text can say):
//! whatever the pipeline shows the model of a body decodes to the body's
//! compact form ([`exact::compact`]) byte for byte, with every number as
//! the server wrote it, keys in their order and a key written twice kept;
//! or the body goes out as it came.
//!
//! The generators write numbers the way servers do and floats do not:
//! past `u64` and `i64`, more digits than an `f64` holds, `-0`, trailing
//! zeros, exponents in every spelling; objects with a key written twice;
//! rows of one table whose keys come in different orders; and white space
//! anywhere between tokens. Each body goes through every encoding the
//! router knows, one at a time (`only`), and through the router's own
//! choice.

use devboy_pipeline::encode;
use devboy_pipeline::result_pipeline::{BodyPolicy, ResultPipeline};
use devboy_pipeline::route::{encoding_names, RouteConfig};
use devboy_pipeline::template::{self, DecodedBody};
use devboy_pipeline::{
    exact, DedupStageConfig, EndpointKey, Handoff, IdAllocator, SessionTag, Timestamp,
};
use proptest::prelude::*;
use serde_json::Value;

/// Numbers as servers write them, most of which no `f64` gives back.
const NUMBERS: &[&str] = &[
    "18446744073709551616",
    "18446744073709551615",
    "-9223372036854775809",
    "-9223372036854775808",
    "123456789012345678901234567890",
    "0.1000000000000000055511151231257827",
    "3.141592653589793238462643383279",
    "-0",
    "-0.0",
    "0",
    "0.0",
    "10.50",
    "1.0",
    "100.000",
    "3e2",
    "3e+2",
    "1E5",
    "2.50e-3",
    "1e-400",
    "1e400",
    "5E+00",
    "0.000001",
    "1796.5",
];

const KEYS: &[&str] = &["id", "n", "name", "url", "ts", "amount"];

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(NUMBERS).prop_map(str::to_owned),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => (any::<u32>(), 0u32..1000).prop_map(|(a, b)| format!("{a}.{b:03}")),
        1 => (1u32..10, -30i32..30, any::<bool>())
            .prop_map(|(m, e, upper)| format!("{m}{}{e}", if upper { "E" } else { "e" })),
    ]
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => number(),
        1 => Just("null".to_owned()),
        1 => Just("true".to_owned()),
        2 => "[a-z ]{0,8}".prop_map(|s| format!("\"{s}\"")),
        1 => Just("\"caf\\u00e9 \\/ x\"".to_owned()),
    ]
}

/// White space a server may put between tokens.
fn gap() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["", "", "", " ", "\n  ", "\t"][..])
}

/// An object's members as text: keys from a small pool (so they collide),
/// sometimes one written twice.
fn object(values: BoxedStrategy<String>) -> impl Strategy<Value = String> {
    (
        prop::collection::vec((prop::sample::select(KEYS), values), 1..5),
        any::<bool>(),
        gap(),
    )
        .prop_map(|(members, twice, gap)| {
            let mut seen = Vec::new();
            let mut parts = Vec::new();
            for (key, value) in &members {
                if seen.contains(key) {
                    continue;
                }
                seen.push(*key);
                parts.push(format!("\"{key}\":{gap}{value}"));
            }
            if twice {
                let (key, value) = &members[0];
                parts.push(format!("\"{key}\":{value}"));
            }
            format!("{{{gap}{}{gap}}}", parts.join(&format!(",{gap}")))
        })
}

/// Rows of one table: the same keys, in one order or shuffled per row.
fn rows() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(KEYS), 2..5),
        prop::collection::vec((prop::collection::vec(scalar(), 5), any::<bool>()), 2..6),
        gap(),
    )
        .prop_map(|(keys, rows, gap)| {
            let mut keys = keys;
            keys.dedup();
            let keys: Vec<&str> = keys
                .iter()
                .enumerate()
                .filter(|(i, k)| !keys[..*i].contains(k))
                .map(|(_, k)| *k)
                .collect();
            let rendered: Vec<String> = rows
                .iter()
                .map(|(values, shuffled)| {
                    let mut order: Vec<usize> = (0..keys.len()).collect();
                    if *shuffled {
                        order.reverse();
                    }
                    let members: Vec<String> = order
                        .iter()
                        .map(|&i| format!("\"{}\":{gap}{}", keys[i], values[i % values.len()]))
                        .collect();
                    format!("{{{}}}", members.join(","))
                })
                .collect();
            format!("[{gap}{}{gap}]", rendered.join(&format!(",{gap}")))
        })
}

fn body() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => rows(),
        1 => object(scalar().boxed()),
        1 => object(rows().boxed()),
        1 => (rows(), gap()).prop_map(|(rows, gap)| format!("{{\"total_count\":{gap}3,\"items\":{gap}{rows}}}")),
    ]
}

/// What decoding `view` gives: the text it stands for.
fn decoded(view: &str) -> Result<String, String> {
    match template::decode(view) {
        Ok(DecodedBody::Text(text)) => return Ok(text),
        Ok(DecodedBody::Json(value)) => return Ok(value.to_string()),
        Err(template::TemplateDecodeError::NotEncoded) => {}
        Err(error) => return Err(error.to_string()),
    }
    encode::decode(view)
        .map(|value| value.to_string())
        .map_err(|e| e.to_string())
}

/// What the model is shown of `body` by a fresh pipeline restricted to
/// `only` (or the router's own choice): `None` when it goes as it came.
fn view(body: &str, only: Option<&str>) -> Option<String> {
    let mut pipeline = ResultPipeline::new(
        DedupStageConfig::default(),
        RouteConfig::default(),
        IdAllocator::new(SessionTag::FIXED),
    );
    let policy = BodyPolicy {
        dedup: None,
        encode: true,
        only: only.map(str::to_owned),
        keep_whole: false,
        client: Default::default(),
    };
    pipeline
        .process(
            EndpointKey::new("api", "get"),
            body,
            None,
            Vec::new(),
            Timestamp::from_millis(0),
            &policy,
            &Handoff::new(),
        )
        .text
}

/// Checks what the model is shown of `body` (see [`view`]): whether it
/// was re-encoded, and if so that it decodes to the compact form.
fn check(body: &str, only: Option<&str>) -> Result<bool, TestCaseError> {
    let Some(view) = view(body, only) else {
        return Ok(false);
    };
    let back = decoded(&view).map_err(|e| TestCaseError::fail(format!("{e}: {view}")))?;
    let compact = exact::compact(body).expect("a JSON body has a compact form");
    prop_assert_eq!(
        &back,
        &compact,
        "{:?} changed the body\nbody: {}\nview: {}",
        only,
        body,
        view
    );
    Ok(true)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn every_view_decodes_to_the_body_byte_for_byte(body in body()) {
        prop_assume!(serde_json::from_str::<Value>(&body).is_ok());
        check(&body, None)?;
        for name in encoding_names() {
            check(&body, Some(name))?;
        }
    }
}

/// The issue's own example: a 64-bit id past `u64` in a table.
#[test]
fn a_table_with_an_id_past_u64_shows_it_as_written() {
    let body = r#"[{"id":18446744073709551616,"n":"a"},{"id":2,"n":"b"},{"id":3,"n":"c"},{"id":4,"n":"d"}]"#;
    let view = view(body, Some("csv")).expect("a table");
    assert!(view.contains("\n18446744073709551616,a\n"), "{view}");
    assert_eq!(decoded(&view).unwrap(), body);
}

/// The generators reach both outcomes, so the property is not vacuous:
/// bodies that are re-encoded, and bodies passed as they came because no
/// value carries them (a key written twice, an `E` exponent).
#[test]
fn the_generators_reach_encodings_and_refusals() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut encoded, mut refused) = (0, 0);
    for _ in 0..300 {
        let body = body().new_tree(&mut runner).unwrap().current();
        let Ok(value) = serde_json::from_str::<Value>(&body) else {
            continue;
        };
        if !exact::carries(&body, &value) {
            refused += 1;
            assert_eq!(check(&body, None).ok(), Some(false), "{body}");
        } else if check(&body, None).unwrap_or(false) {
            encoded += 1;
        }
    }
    assert!(
        encoded >= 30 && refused >= 30,
        "{encoded} encoded, {refused} refused"
    );
}
