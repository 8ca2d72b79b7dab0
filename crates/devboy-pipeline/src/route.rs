//! The L2 router: what one fresh result should look like to the model.
//!
//! Given the body the client would forward, [`route`] picks, among the
//! lossless encodings that apply (the JSON encoders of [`crate::encode`] and
//! the L1 templates of [`crate::template`]), the one that costs the fewest
//! tokens, and uses it only if it costs strictly fewer than the body itself.
//! If even that is over the token budget, it elides the least valuable
//! parts, each recoverable with `devboy_expand`.
//!
//! # The optimisation problem and the algorithm
//!
//! The body is split into *units*: the elements of its main array (a
//! top-level array, or the largest array field of a wrapping object, whose
//! other fields are always kept), else the fields of a top-level object,
//! else the lines of a text. Unit *i* may be written in any of the formats
//! that apply (cost `c_ij` tokens, value `v_i`) or elided (cost 0, value 0),
//! and the total cost must stay within the budget: a multiple-choice
//! knapsack (MCKP). Every lossless format carries the same information, so
//! `v_ij = v_i` for every format *j*, and within each class the cheapest
//! format dominates all others. Each class therefore reduces to two
//! options, "keep in the cheapest format" or "elide", and the MCKP to a 0/1
//! knapsack, which the router solves with Dantzig's greedy: take units by
//! falling value density `v_i / c_i` while they fit, skipping any that do
//! not. The greedy value is at least the LP-relaxation optimum minus the
//! value of the first unit that did not fit, so **it is within `max v_i` of
//! the optimum**. Values fall with position (`v_i = 1 / (i + 1)`: lists are
//! ordered by relevance or recency, and the head of a text is what a reader
//! sees first), so `max v_i = 1` and, for units of similar cost, the
//! greedy keeps a prefix. With no budget pressure every unit fits and the
//! answer is simply the cheapest lossless format of the whole body.
//!
//! One format is used for the whole body (the cheapest for the whole): a
//! table is cheapest when its rows share one header, so choosing per row
//! would only lose the sharing.
//!
//! # Counting costs
//!
//! Token counts come from the target tokenizer ([`Tokenizer`]) but a full
//! count is the expensive part of the pipeline, so it is done at most twice
//! per result: once for the body (the caller's baseline) and once for the
//! chosen encoding. Candidates are ranked, and units priced, with a fast
//! estimate ([`estimate_tokens`]) that imitates how BPE tokenizers split
//! text (word runs, digit groups, punctuation runs); unit costs are scaled
//! so that they add up to the exact count of the whole, so every piece is
//! counted once and no candidate is tokenized twice.

use serde_json::Value;

use crate::encode::{self, Format};
use crate::hints;
use crate::ids::ReferenceId;
use crate::shape::Classified;
use crate::template::Template;
use crate::tokens::Tokenizer;

/// How the router may treat one result.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteConfig {
    /// What costs are counted in.
    pub tokenizer: Tokenizer,
    /// The most tokens a result may cost before parts are elided.
    pub budget_tokens: usize,
    /// Restricts the encodings to one (a [`Format`] or [`Template`] name),
    /// or `None` for the router's choice.
    pub only: Option<String>,
}

impl Default for RouteConfig {
    fn default() -> Self {
        Self {
            tokenizer: Tokenizer::default(),
            budget_tokens: 25_000,
            only: None,
        }
    }
}

/// What the model should be sent instead of the body.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    /// The text to send.
    pub text: String,
    /// The encoding used: a [`Format`] or [`Template`] name, or `original`
    /// when the body is sent as it was, only shortened.
    pub format: &'static str,
    /// Exact tokens of `text`.
    pub tokens: usize,
    /// How many units were elided (0: the text carries everything).
    pub elided: usize,
}

impl Routed {
    /// Whether the text opens with an encoded header (every format and
    /// template but compact JSON, which reads as itself, and the original).
    pub fn has_encoded_header(&self) -> bool {
        self.format != Format::JsonCompact.name() && self.format != ORIGINAL
    }
}

/// The format name of a body sent as it was, only shortened.
const ORIGINAL: &str = "original";

/// The names [`RouteConfig::only`] accepts.
pub fn encoding_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Format::ALL.iter().map(|f| f.name()).collect();
    names.extend(Template::ALL.iter().map(|t| t.name()));
    names
}

/// The cheapest lossless rendering of `body` if it costs fewer than
/// `baseline` tokens (the body's own count), elided to the budget when
/// needed and `recover` names where the whole body can be expanded from.
/// `None` keeps the body as it is.
pub fn route(
    body: &str,
    classified: &Classified,
    baseline: usize,
    config: &RouteConfig,
    recover: Option<ReferenceId>,
) -> Option<Routed> {
    // The cheapest by the estimate, counted exactly; when that is no
    // cheaper than the body, the runner-up too: the estimate misranks
    // some (a file's JSON text as one escaped string against the same
    // file fenced), and a second count is paid only where the first
    // would have saved nothing.
    let mut ranked = ranked_candidates(body, classified, config).into_iter();
    let exact = |(text, format): (String, &'static str)| Routed {
        tokens: config.tokenizer.count(&text),
        text,
        format,
        elided: 0,
    };
    let mut best = ranked.next().map(exact);
    if best.as_ref().is_some_and(|b| b.tokens >= baseline) {
        if let Some(next) = ranked.next().map(exact) {
            if best.as_ref().is_some_and(|b| next.tokens < b.tokens) {
                best = Some(next);
            }
        }
    }
    let (fits, cheaper) = match &best {
        Some(b) => (b.tokens <= config.budget_tokens, b.tokens < baseline),
        None => (false, false),
    };
    if (cheaper && fits) || baseline <= config.budget_tokens {
        return best.filter(|b| b.tokens < baseline);
    }
    // Over budget either way: elide, recoverably, or leave it be.
    let id = recover?;
    let (format, whole_tokens) = match &best {
        Some(b) if cheaper => (b.format, b.tokens),
        _ => (ORIGINAL, baseline),
    };
    elide(body, classified, format, whole_tokens, config, id)
}

/// `body` in its cheapest lossless form with no budget (what a fresh
/// delivery of it shows when it fits), or `None` when nothing is cheaper
/// than the body itself.
pub fn whole(body: &str, config: &RouteConfig) -> Option<String> {
    let config = RouteConfig {
        budget_tokens: usize::MAX,
        only: None,
        ..config.clone()
    };
    let baseline = config.tokenizer.count(body);
    route(body, &crate::shape::classify(body), baseline, &config, None).map(|r| r.text)
}

/// Every candidate with its name, the lowest estimated cost first.
fn ranked_candidates(
    body: &str,
    classified: &Classified,
    config: &RouteConfig,
) -> Vec<(String, &'static str)> {
    let allowed = |name: &str| config.only.as_deref().is_none_or(|only| only == name);
    let mut candidates: Vec<(String, &'static str)> = Vec::new();
    if let Some(json) = &classified.json {
        // Compact JSON is exact by construction (serde_json with
        // float_roundtrip), and is only a candidate when the body is not
        // already compact.
        if allowed(Format::JsonCompact.name()) {
            if let Ok(compact) = serde_json::to_string(json) {
                if compact != body {
                    candidates.push((compact, Format::JsonCompact.name()));
                }
            }
        }
        // The structured formats that can apply to this value; each one
        // verifies itself by decoding.
        let formats: &[Format] = match json {
            Value::Array(_) => &[Format::Csv],
            Value::Object(_) => &[Format::Document, Format::Kv],
            _ => &[],
        };
        for &format in formats {
            if allowed(format.name()) {
                if let Some(encoded) = encode::encode(json, format) {
                    candidates.push((encoded.into_text(), format.name()));
                    // A document is a key:value text with tables; when it
                    // applies, plain key:value lines cannot be cheaper.
                    if format == Format::Document {
                        break;
                    }
                }
            }
        }
    }
    // Fenced fields only pay when strings with line breaks (which JSON text
    // escapes as `\n`) are a good part of the body: each fence and path
    // line costs tokens, and only the escapes inside those strings are
    // saved.
    let multiline = match &classified.json {
        None => true,
        Some(json) => body.contains("\\n") && multiline_bytes(json) * 5 >= body.len(),
    };
    for template in Template::ALL {
        let worth = template != Template::FencedFields || multiline;
        if worth && allowed(template.name()) && template.may_apply(classified) {
            if let Some(text) = template.encode(body, classified.json.as_ref()) {
                candidates.push((text, template.name()));
            }
        }
    }
    let mut ranked: Vec<(usize, (String, &'static str))> = candidates
        .into_iter()
        .map(|c| (estimate_tokens(&c.0), c))
        .collect();
    // Stable: among equal estimates, the first found (formats before
    // templates) stays first, as before.
    ranked.sort_by_key(|(estimate, _)| *estimate);
    ranked.into_iter().map(|(_, c)| c).collect()
}

/// Bytes of the strings in `value` that contain a line break.
fn multiline_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) if s.contains('\n') => s.len(),
        Value::Array(items) => items.iter().map(multiline_bytes).sum(),
        Value::Object(map) => map.values().map(multiline_bytes).sum(),
        _ => 0,
    }
}

/// The units of a body and how to put a subset of them back together.
enum Units<'a> {
    /// Elements of an array; `path` is the key of the array inside a
    /// wrapping object, if any.
    Array {
        root: &'a Value,
        key: Option<&'a str>,
        items: &'a [Value],
    },
    /// Fields of an object.
    Fields(&'a serde_json::Map<String, Value>),
    /// Lines of a text.
    Lines(Vec<&'a str>),
}

impl<'a> Units<'a> {
    fn of(body: &'a str, classified: &'a Classified) -> Self {
        match &classified.json {
            Some(root @ Value::Array(items)) => Units::Array {
                root,
                key: None,
                items,
            },
            Some(root @ Value::Object(map)) => {
                let largest = map
                    .iter()
                    .filter_map(|(k, v)| v.as_array().map(|a| (k, a)))
                    .max_by_key(|(_, a)| a.len());
                match largest {
                    Some((key, items)) if items.len() > 1 => Units::Array {
                        root,
                        key: Some(key.as_str()),
                        items,
                    },
                    _ => Units::Fields(map),
                }
            }
            _ => Units::Lines(body.split_inclusive('\n').collect()),
        }
    }

    fn noun(&self) -> &'static str {
        match self {
            Units::Array { .. } => "items",
            Units::Fields(_) => "fields",
            Units::Lines(_) => "lines",
        }
    }

    /// Estimated cost of each unit.
    fn costs(&self) -> Vec<usize> {
        match self {
            Units::Array { items, .. } => items
                .iter()
                .map(|v| estimate_tokens(&v.to_string()))
                .collect(),
            Units::Fields(map) => map
                .iter()
                .map(|(k, v)| estimate_tokens(k) + estimate_tokens(&v.to_string()))
                .collect(),
            Units::Lines(lines) => lines.iter().map(|l| estimate_tokens(l)).collect(),
        }
    }

    /// The body with only the units in `keep` (sorted indices).
    fn rebuild(&self, keep: &[usize]) -> Rebuilt {
        match self {
            Units::Array { root, key, items } => {
                let kept: Vec<Value> = keep.iter().map(|&i| items[i].clone()).collect();
                match (key, root) {
                    (Some(key), Value::Object(map)) => {
                        let mut map = map.clone();
                        map.insert((*key).to_owned(), Value::Array(kept));
                        Rebuilt::Json(Value::Object(map))
                    }
                    _ => Rebuilt::Json(Value::Array(kept)),
                }
            }
            Units::Fields(map) => Rebuilt::Json(Value::Object(
                map.iter()
                    .enumerate()
                    .filter(|(i, _)| keep.binary_search(i).is_ok())
                    .map(|(_, (k, v))| (k.clone(), v.clone()))
                    .collect(),
            )),
            Units::Lines(lines) => Rebuilt::Text(keep.iter().map(|&i| lines[i]).collect()),
        }
    }

    /// How the elided units are named in the hint.
    fn describe(&self, elided: &[usize]) -> String {
        match self {
            Units::Fields(map) => {
                let names: Vec<&str> = map
                    .keys()
                    .enumerate()
                    .filter(|(i, _)| elided.binary_search(i).is_ok())
                    .map(|(_, k)| k.as_str())
                    .collect();
                let mut text = names.iter().take(5).copied().collect::<Vec<_>>().join(", ");
                if names.len() > 5 {
                    text.push_str(", …");
                }
                text
            }
            Units::Array { key, .. } => {
                let ranges = ranges(elided);
                match key {
                    Some(key) => format!("{key} {ranges}"),
                    None => ranges,
                }
            }
            Units::Lines(_) => {
                let one_based: Vec<usize> = elided.iter().map(|i| i + 1).collect();
                ranges(&one_based)
            }
        }
    }
}

enum Rebuilt {
    Json(Value),
    Text(String),
}

/// The body with its least valuable units elided so that the rest fits the
/// budget, in `format` (a format or template name, or `original`), plus a
/// hint naming what was elided and the id that holds everything.
fn elide(
    body: &str,
    classified: &Classified,
    format: &'static str,
    whole_tokens: usize,
    config: &RouteConfig,
    id: ReferenceId,
) -> Option<Routed> {
    let units = Units::of(body, classified);
    let estimates = units.costs();
    let n = estimates.len();
    if n < 2 {
        return None;
    }
    // Scale the estimates so that they add up to the exact cost of the
    // whole in the chosen format: each unit is estimated once, the whole
    // counted once.
    let estimated_total: usize = estimates.iter().sum::<usize>().max(1);
    let scale = whole_tokens as f64 / estimated_total as f64;
    let costs: Vec<f64> = estimates
        .iter()
        .map(|&c| (c.max(1) as f64) * scale)
        .collect();
    // Room for the hint and the parts always kept.
    const HINT_ALLOWANCE: usize = 64;
    let mut room = config.budget_tokens.saturating_sub(HINT_ALLOWANCE) as f64;
    let fixed = (whole_tokens as f64 - costs.iter().sum::<f64>()).max(0.0);
    room -= fixed;
    // Dantzig's greedy by value density; v_i = 1 / (i + 1).
    let mut order: Vec<usize> = (0..n).collect();
    let density = |i: usize| 1.0 / ((i + 1) as f64 * costs[i]);
    order.sort_by(|&a, &b| density(b).total_cmp(&density(a)));
    let mut keep: Vec<usize> = Vec::new();
    let mut used = 0.0;
    for i in order {
        if used + costs[i] <= room {
            used += costs[i];
            keep.push(i);
        }
    }
    keep.sort_unstable();
    // The estimate may be off: drop the least dense kept unit until the
    // exact count fits, a few times at most.
    for _ in 0..6 {
        if keep.is_empty() {
            return None;
        }
        let elided: Vec<usize> = (0..n).filter(|i| keep.binary_search(i).is_err()).collect();
        let text = render(&units.rebuild(&keep), format)?;
        let hint = hints::elided(elided.len(), n, units.noun(), &units.describe(&elided), id);
        let text = if text.ends_with('\n') {
            format!("{text}{hint}")
        } else {
            format!("{text}\n{hint}")
        };
        let tokens = config.tokenizer.count(&text);
        if tokens <= config.budget_tokens {
            return Some(Routed {
                text,
                format,
                tokens,
                elided: elided.len(),
            });
        }
        // Drop the kept unit with the lowest density (the last by value).
        let worst = keep
            .iter()
            .enumerate()
            .min_by(|(_, &a), (_, &b)| density(a).total_cmp(&density(b)))
            .map(|(at, _)| at)?;
        keep.remove(worst);
    }
    None
}

/// A rebuilt body in `format`.
fn render(rebuilt: &Rebuilt, format: &str) -> Option<String> {
    match rebuilt {
        Rebuilt::Text(text) => {
            // Lines of a text: its template if one was chosen, else as is.
            match Template::ALL.into_iter().find(|t| t.name() == format) {
                Some(template) => template.encode(text, None).or_else(|| Some(text.clone())),
                None => Some(text.clone()),
            }
        }
        Rebuilt::Json(value) => {
            if let Some(f) = Format::ALL.into_iter().find(|f| f.name() == format) {
                return encode::encode(value, f).map(|e| e.into_text());
            }
            if let Some(t) = Template::ALL.into_iter().find(|t| t.name() == format) {
                return t.encode(&value.to_string(), Some(value));
            }
            // `original`: compact JSON carries it.
            serde_json::to_string(value).ok()
        }
    }
}

/// `0-3, 7, 9-12` for sorted indices.
fn ranges(sorted: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    // Long lists of ranges cost more than they tell.
    if out.len() > 6 {
        let rest = out.len() - 5;
        out.truncate(5);
        out.push(format!("+{rest} more ranges"));
    }
    out.join(", ")
}

/// A fast estimate of the tokens `text` costs a BPE tokenizer such as
/// o200k: about one token per word (plus one per ten further letters), per
/// group of three digits, per run of two punctuation characters, and per
/// line break or run of spaces that does not lead into a word. Used only to
/// rank candidates and price units; every count that is reported is exact.
pub fn estimate_tokens(text: &str) -> usize {
    #[derive(PartialEq, Clone, Copy)]
    enum Run {
        None,
        Letters,
        Digits,
        Punct,
        Space,
    }
    let mut tokens = 0usize;
    let mut run = Run::None;
    let mut len = 0usize;
    let flush = |run: Run, len: usize, tokens: &mut usize| {
        *tokens += match run {
            Run::None => 0,
            Run::Letters => 1 + len / 10,
            Run::Digits => len.div_ceil(3),
            Run::Punct => len.div_ceil(3),
            Run::Space => 1,
        };
    };
    for c in text.chars() {
        let class = if c.is_alphabetic() || c == '_' {
            Run::Letters
        } else if c.is_ascii_digit() {
            Run::Digits
        } else if c == ' ' || c == '\t' {
            Run::Space
        } else if c == '\n' || c == '\r' {
            // A line break is a token of its own.
            flush(run, len, &mut tokens);
            run = Run::None;
            len = 0;
            tokens += 1;
            continue;
        } else {
            Run::Punct
        };
        if class == run {
            len += 1;
            continue;
        }
        // One space leads into the word after it.
        if run == Run::Space && len == 1 && class == Run::Letters {
            run = class;
            len = 1;
            continue;
        }
        flush(run, len, &mut tokens);
        run = class;
        len = 1;
    }
    flush(run, len, &mut tokens);
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::classify;
    use serde_json::json;

    fn issues(n: usize) -> Value {
        Value::Array(
            (0..n)
                .map(|i| {
                    json!({
                        "id": 1000 + i,
                        "number": i,
                        "title": format!("Issue number {i} about the parser"),
                        "state": "open",
                        "url": format!("https://api.github.com/repos/o/r/issues/{i}"),
                        "comments_url": format!("https://api.github.com/repos/o/r/issues/{i}/comments"),
                        "user": {"login": "octocat", "id": 1, "site_admin": false},
                        "labels": [],
                        "body": noise(i)
                    })
                })
                .collect(),
        )
    }

    /// A sentence and a hash that differ per row, as real bodies do, so
    /// that no encoder can fold the rows away.
    fn noise(i: usize) -> String {
        let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut hex = String::new();
        for _ in 0..5 {
            x ^= x >> 29;
            x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            hex.push_str(&format!("{:08x}", x as u32));
        }
        let words = [
            "parser", "stack", "overflow", "token", "nested", "bracket", "crash", "input",
        ];
        format!(
            "The {} fails on {} {} input; see commit {hex}.",
            words[i % 8],
            words[(i / 8) % 8],
            words[(i * 7) % 8]
        )
    }

    fn pretty(v: &Value) -> String {
        serde_json::to_string_pretty(v).unwrap()
    }

    /// A JSON file read as a server-filesystem result: one string of
    /// hand-spaced JSON. The estimate ranks its `key: value` line (the
    /// escaped string) first; counted, the runner-up, the file fenced,
    /// is cheaper, and wins.
    #[test]
    fn when_the_estimate_misranks_the_runner_up_is_counted_too() {
        let rows: String = (0..60)
            .map(|i| format!("    {{\"sku\": \"SKU-{i:03}\", \"price\": {i}.50, \"qty\": {i}}},\n"))
            .collect();
        let file = format!("{{\n  \"orders\": [\n{rows}  ]\n}}\n");
        let body = serde_json::to_string(&json!({ "content": file })).unwrap();
        let config = RouteConfig::default();
        let baseline = config.tokenizer.count(&body);
        let routed = route(&body, &classify(&body), baseline, &config, None).expect("cheaper");
        assert_eq!(routed.format, Template::FencedFields.name());
        assert!(routed.text.contains(&file), "{}", routed.text);
    }

    #[test]
    fn the_cheapest_lossless_encoding_wins_and_decodes_back() {
        let value = issues(30);
        let body = pretty(&value);
        let config = RouteConfig::default();
        let baseline = config.tokenizer.count(&body);
        let routed = route(&body, &classify(&body), baseline, &config, None).expect("cheaper");
        assert!(
            routed.tokens < baseline / 2,
            "{} vs {baseline}",
            routed.tokens
        );
        assert_eq!(routed.elided, 0);
        assert_ne!(
            routed.format, "json_compact",
            "a table beats compact JSON here"
        );
        assert_eq!(encode::decode(&routed.text).unwrap(), value);
    }

    #[test]
    fn nothing_cheaper_means_the_body_stays() {
        let config = RouteConfig::default();
        let body = "plain prose that no encoder can shorten.";
        let baseline = config.tokenizer.count(body);
        assert_eq!(route(body, &classify(body), baseline, &config, None), None);
        // Compact JSON is already what compact JSON would be.
        let body = r#"{"a":1}"#;
        assert_eq!(route(body, &classify(body), 5, &config, None), None);
    }

    #[test]
    fn over_budget_the_tail_is_elided_recoverably() {
        let value = issues(200);
        let body = value.to_string();
        let config = RouteConfig {
            budget_tokens: 2_000,
            ..RouteConfig::default()
        };
        let baseline = config.tokenizer.count(&body);
        let id: ReferenceId = "tagfix7".parse().unwrap();
        // Without an id to recover from, nothing is elided.
        let plain = route(&body, &classify(&body), baseline, &config, None);
        assert!(plain.as_ref().is_none_or(|r| r.elided == 0));
        let routed = route(&body, &classify(&body), baseline, &config, Some(id)).expect("elided");
        assert!(routed.tokens <= 2_000, "{}", routed.tokens);
        assert!(routed.elided > 0);
        let (kept, hint) = routed.text.rsplit_once('\n').unwrap();
        assert!(
            hint.starts_with(&format!("> [elided {} of 200 items (", routed.elided))
                && hint.ends_with("; all: devboy_expand tagfix7]"),
            "{hint}"
        );
        // What is kept are rows of the list, exactly, in order, the first
        // among them (the most valuable); the hint's ranges name the rest.
        let kept = encode::decode(kept).unwrap();
        let kept = kept.as_array().unwrap();
        let all = value.as_array().unwrap();
        assert_eq!(kept.len(), 200 - routed.elided);
        assert_eq!(kept[0], all[0]);
        let mut at = 0;
        for row in kept {
            at += all[at..]
                .iter()
                .position(|r| r == row)
                .expect("a row of the original, in order");
            at += 1;
        }
        assert!(hint.contains("-199)"), "the tail is elided: {hint}");
    }

    #[test]
    fn a_wrapper_keeps_its_fields_and_elides_rows_of_its_array() {
        let value = json!({"total_count": 200, "incomplete_results": false, "items": issues(200)});
        let body = value.to_string();
        let config = RouteConfig {
            budget_tokens: 1_500,
            ..RouteConfig::default()
        };
        let baseline = config.tokenizer.count(&body);
        let routed = route(
            &body,
            &classify(&body),
            baseline,
            &config,
            Some("tagfix2".parse().unwrap()),
        )
        .expect("elided");
        assert!(routed.tokens <= 1_500);
        let (kept, hint) = routed.text.rsplit_once('\n').unwrap();
        assert!(hint.contains("items ("), "{hint}");
        let kept = encode::decode(kept).unwrap();
        assert_eq!(kept["total_count"], 200);
        assert_eq!(kept["incomplete_results"], false);
    }

    #[test]
    fn long_text_keeps_its_head() {
        let body: String = (0..3000)
            .map(|i| format!("line {i} of a long log\n"))
            .collect();
        let config = RouteConfig {
            budget_tokens: 1_000,
            ..RouteConfig::default()
        };
        let baseline = config.tokenizer.count(&body);
        let routed = route(
            &body,
            &classify(&body),
            baseline,
            &config,
            Some("tagfix1".parse().unwrap()),
        )
        .expect("elided");
        assert_eq!(routed.format, "original");
        assert!(routed.text.starts_with("line 0 of a long log\nline 1 of"));
        assert!(routed.tokens <= 1_000);
        assert!(routed.text.contains("lines ("), "{}", routed.text);
    }

    #[test]
    fn only_restricts_the_choice() {
        let value = issues(10);
        let body = pretty(&value);
        let config = RouteConfig {
            only: Some("json_compact".into()),
            ..RouteConfig::default()
        };
        let baseline = config.tokenizer.count(&body);
        let routed = route(&body, &classify(&body), baseline, &config, None).unwrap();
        assert_eq!(routed.format, "json_compact");
        assert_eq!(routed.text, value.to_string());
    }

    #[test]
    fn ranges_are_compact() {
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2, 5, 7-8");
        assert_eq!(ranges(&[]), "");
        assert_eq!(
            ranges(&[0, 2, 4, 6, 8, 10, 12, 14]),
            "0, 2, 4, 6, 8, +3 more ranges"
        );
    }

    #[test]
    fn the_estimate_tracks_o200k_within_a_factor() {
        let samples = [
            pretty(&issues(5)),
            issues(5).to_string(),
            "The quick brown fox jumps over the lazy dog.\n".repeat(20),
            "fn main() {\n    println!(\"hello\");\n}\n".repeat(10),
        ];
        for text in samples {
            let exact = Tokenizer::O200k.count(&text) as f64;
            let estimate = estimate_tokens(&text) as f64;
            let ratio = estimate / exact;
            assert!((0.7..1.5).contains(&ratio), "{ratio} for {text:.60}");
        }
    }
}
