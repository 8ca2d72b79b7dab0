//! The L2 router: what one fresh result should look like to the model.
//!
//! Given the body the client would forward, [`route`] picks, among the
//! lossless encodings that apply (the JSON encoders of [`crate::encode`] and
//! the L1 templates of [`crate::template`]), the one that costs the fewest
//! tokens, and uses it only if it costs strictly fewer than the body itself.
//! If even that is over the [bound](RouteConfig) — the token budget, and the
//! characters the client shows inline — it elides parts, each recoverable
//! with `devboy_expand`.
//!
//! # What is kept of a result over the bound
//!
//! The body is read as *units* ([`View`]): the lines of a text, or of the
//! one long string a JSON object carries (a file read's `content`); else
//! the elements of its main array (a top-level array, or the largest array
//! field of a wrapping object, whose other fields are always kept); else
//! the fields of a top-level object. What is kept is **contiguous**, so no
//! hole is ever left in code a model may edit from:
//!
//! - a file (the call named paths), a list of records (a git log) and the
//!   items of an array keep their **head**, the longest prefix that fits;
//! - any other text (a log, a command's output) keeps its head and its
//!   **tail**, a third of the room going to the tail, and the cut moves to
//!   a blank line when one is near, so a record is not split;
//! - the fields of an object are weighed as a knapsack (below), since a
//!   field is named, not numbered.
//!
//! Each elided range is one hint line naming the exact call that gives it
//! back (`> [elided lines 812-3094 of 3094; devboy_expand kafrum4
//! lines=812-3094]`): lines numbered from 1, items by their index. The
//! kept part is shown in *its own* cheapest lossless form, chosen on that
//! part, so the cheapest encoding is never lost to elision, and the work is
//! bounded by what is kept, not by the size of the body: a body many times
//! the bound skips ranking whole-body encodings altogether.
//!
//! # The fields knapsack
//!
//! Field *i* may be written in any of the formats that apply (cost `c_ij`
//! tokens, value `v_i`) or elided (cost 0, value 0), within the budget: a
//! multiple-choice knapsack (MCKP). Every lossless format carries the same
//! information, so within each class the cheapest format dominates, and the
//! MCKP reduces to a 0/1 knapsack, solved with Dantzig's greedy: fields by
//! falling value density `v_i / c_i` while they fit. The greedy value is at
//! least the LP-relaxation optimum minus the value of the first field that
//! did not fit, so **it is within `max v_i` of the optimum**; values fall
//! with position (`v_i = 1 / (i + 1)`), so `max v_i = 1`.
//!
//! # Counting costs
//!
//! Token counts come from the target tokenizer ([`Tokenizer`]); a full
//! count is the expensive part of the pipeline. Candidates are ranked, and
//! units priced, with a fast estimate ([`estimate_tokens`]) that imitates
//! how BPE tokenizers split text (word runs, digit groups, punctuation
//! runs); only what may be sent is counted exactly. An elided text is
//! counted once per attempt, and the estimate is rescaled by what each
//! count found, so a few attempts reach the bound from below.

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
    /// The most characters a result may show, counted as the client counts
    /// them (UTF-16 code units of every text block): past it a client
    /// stops showing the result inline (Claude Code writes it to a file and
    /// shows a preview). `None`: the token budget alone bounds a result.
    pub inline_chars: Option<usize>,
    /// The call read files (its arguments name paths): a text over the
    /// bound keeps its head only, as a reader of a file expects.
    pub reads_file: bool,
    /// Restricts the encodings to one (a [`Format`] or [`Template`] name),
    /// or `None` for the router's choice.
    pub only: Option<String>,
}

impl Default for RouteConfig {
    fn default() -> Self {
        Self {
            tokenizer: Tokenizer::default(),
            budget_tokens: 25_000,
            inline_chars: None,
            reads_file: false,
            only: None,
        }
    }
}

impl RouteConfig {
    /// Whether a text of `tokens` tokens and `text`'s characters is within
    /// the bound.
    pub fn fits(&self, tokens: usize, text: &str) -> bool {
        tokens <= self.budget_tokens && self.inline_chars.is_none_or(|c| client_chars(text) <= c)
    }

    /// This bound for a client that shows at most `limits` of one result:
    /// the lower of the budget and its token cap, and its inline
    /// characters.
    pub fn for_client(&self, limits: ClientLimits) -> Self {
        Self {
            budget_tokens: limits
                .max_tokens
                .map_or(self.budget_tokens, |max| max.min(self.budget_tokens)),
            inline_chars: limits.inline_chars,
            ..self.clone()
        }
    }

    /// This bound less what `text` (a line sent beside the result, such as
    /// its id line) takes of it.
    pub fn less(&self, tokens: usize, text: &str) -> Self {
        Self {
            budget_tokens: self.budget_tokens.saturating_sub(tokens),
            inline_chars: self
                .inline_chars
                .map(|c| c.saturating_sub(client_chars(text) + 1)),
            ..self.clone()
        }
    }

    /// About how many bytes fit the bound: the inline characters, else four
    /// bytes a token.
    fn room_bytes(&self) -> usize {
        let by_tokens = self.budget_tokens.saturating_mul(4);
        self.inline_chars.map_or(by_tokens, |c| c.min(by_tokens))
    }
}

/// What a client shows the model of one result at most: past its inline
/// characters it shows something else (Claude Code: a file's path and a
/// preview), past its token cap it cuts the result. Known per client
/// (`profiles.client`); unknown limits are `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientLimits {
    /// The most characters (UTF-16 code units) shown inline.
    pub inline_chars: Option<usize>,
    /// The most tokens passed to the model.
    pub max_tokens: Option<usize>,
}

impl ClientLimits {
    /// The tokens the client would have shown of `body` (`tokens` of it,
    /// as counted): all of it within the limits, else what its limits let
    /// through, the first `inline_chars` characters and at most
    /// `max_tokens`. The baseline savings are counted against: a cut the
    /// client would have made anyway saves nothing.
    pub fn shown_tokens(&self, tokenizer: Tokenizer, body: &str, tokens: usize) -> usize {
        let tokens = self.max_tokens.map_or(tokens, |max| tokens.min(max));
        match self.inline_chars {
            Some(limit) if client_chars(body) > limit => {
                tokens.min(tokenizer.count(chars_prefix(body, limit)))
            }
            _ => tokens,
        }
    }
}

/// The longest start of `text` of at most `limit` characters as
/// [`client_chars`] counts them.
fn chars_prefix(text: &str, limit: usize) -> &str {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        used += c.len_utf16();
        if used > limit {
            return &text[..at];
        }
    }
    text
}

/// Characters of `text` as a client written in JavaScript counts them
/// (`String.length`: UTF-16 code units).
pub fn client_chars(text: &str) -> usize {
    if text.is_ascii() {
        return text.len();
    }
    text.chars().map(char::len_utf16).sum()
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

/// A body over the bound by more than this factor (in bytes) cannot be
/// brought within it by any encoding: its whole is not re-encoded at all.
const HOPELESS_FACTOR: usize = 8;

/// Past this size a body that cannot be elided is not re-encoded whole
/// either: it goes out as it came (and devboy-mcp cuts it to what one
/// message may carry).
const MAX_WHOLE_BYTES: usize = 4 << 20;

/// The names [`RouteConfig::only`] accepts.
pub fn encoding_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Format::ALL.iter().map(|f| f.name()).collect();
    names.extend(Template::ALL.iter().map(|t| t.name()));
    names
}

/// The cheapest lossless rendering of `body` if it costs fewer than
/// `baseline` tokens (the body's own count), elided to the bound when
/// needed and `recover` names where the whole body can be expanded from.
/// `None` keeps the body as it is.
///
/// Over the bound without a `recover` id (or when nothing can be elided),
/// the cheapest encoding still goes out when it is cheaper than the body.
pub fn route(
    body: &str,
    classified: &Classified,
    baseline: usize,
    config: &RouteConfig,
    recover: Option<ReferenceId>,
) -> Option<Routed> {
    let body_fits = config.fits(baseline, body);
    let hopeless = !body_fits && body.len() / HOPELESS_FACTOR > config.room_bytes();
    let cheaper = if hopeless {
        None
    } else {
        cheapest(body, classified, baseline, config).filter(|b| b.tokens < baseline)
    };
    if let Some(best) = &cheaper {
        if config.fits(best.tokens, &best.text) {
            return cheaper;
        }
    }
    if body_fits {
        return None;
    }
    let view = View::of(body, classified);
    let elided = recover
        .zip(view)
        .and_then(|(id, view)| elide_view(&view, config, id, Window::All, false));
    match (elided, cheaper) {
        (Some(elided), _) => Some(elided),
        (None, Some(cheaper)) => Some(cheaper),
        // Nothing could be elided: the cheapest whole, while encoding the
        // whole is work of a bounded size.
        (None, None) if hopeless && body.len() <= MAX_WHOLE_BYTES => {
            cheapest(body, classified, baseline, config).filter(|b| b.tokens < baseline)
        }
        (None, None) => None,
    }
}

/// The cheapest candidate encoding of `body` by exact count: the cheapest
/// by the estimate, and, when that is no cheaper than `baseline`, the
/// runner-up too (the estimate misranks some, e.g. a file's JSON text as
/// one escaped string against the same file fenced; a second count is
/// paid only where the first would have saved nothing).
fn cheapest(
    body: &str,
    classified: &Classified,
    baseline: usize,
    config: &RouteConfig,
) -> Option<Routed> {
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
    best
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
        // Objects that repeat, defined once: declines at once when none do.
        if allowed(Format::Refs.name()) && !formats.is_empty() {
            if let Some(encoded) = encode::encode(json, Format::Refs) {
                candidates.push((encoded.into_text(), Format::Refs.name()));
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

/// A body read as units, the parts elision keeps or leaves out; see the
/// module docs. The same body always gives the same view, which is what
/// lets `devboy_expand ID lines=A-B` name the units a hint named.
pub(crate) enum View<'a> {
    /// Lines of a text.
    Lines(Vec<&'a str>),
    /// Lines of the long string under `key` of the object `root`.
    StringLines {
        root: &'a serde_json::Map<String, Value>,
        key: &'a str,
        lines: Vec<&'a str>,
    },
    /// Elements of an array; `key` is the array's field in a wrapping
    /// object, if any.
    Array {
        root: &'a Value,
        key: Option<&'a str>,
        items: &'a [Value],
    },
    /// Fields of an object, in order.
    Fields(Vec<(&'a String, &'a Value)>),
}

impl<'a> View<'a> {
    /// The view of `body`, or `None` for a scalar.
    pub(crate) fn of(body: &'a str, classified: &'a Classified) -> Option<Self> {
        match &classified.json {
            None => Some(View::Lines(body.split_inclusive('\n').collect())),
            Some(root @ Value::Array(items)) => Some(View::Array {
                root,
                key: None,
                items,
            }),
            Some(root @ Value::Object(map)) => {
                let long = map
                    .iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k, s)))
                    .max_by_key(|(_, s)| s.len());
                if let Some((key, text)) = long {
                    if text.len() * 2 >= body.len() && text.contains('\n') {
                        return Some(View::StringLines {
                            root: map,
                            key,
                            lines: text.split_inclusive('\n').collect(),
                        });
                    }
                }
                let largest = map
                    .iter()
                    .filter_map(|(k, v)| v.as_array().map(|a| (k, a)))
                    .max_by_key(|(_, a)| a.len());
                Some(match largest {
                    Some((key, items)) if items.len() > 1 => View::Array {
                        root,
                        key: Some(key.as_str()),
                        items,
                    },
                    _ => View::Fields(map.iter().collect()),
                })
            }
            Some(_) => None,
        }
    }

    fn len(&self) -> usize {
        match self {
            View::Lines(lines) | View::StringLines { lines, .. } => lines.len(),
            View::Array { items, .. } => items.len(),
            View::Fields(fields) => fields.len(),
        }
    }

    /// What the units are called in hints and in `devboy_expand`'s
    /// arguments.
    pub(crate) fn noun(&self) -> &'static str {
        match self {
            View::Lines(_) | View::StringLines { .. } => "lines",
            View::Array { .. } => "items",
            View::Fields(_) => "fields",
        }
    }

    /// The number a hint gives unit `i`: lines from 1, items by index.
    fn number(&self, i: usize) -> usize {
        match self {
            View::Lines(_) | View::StringLines { .. } => i + 1,
            _ => i,
        }
    }

    /// The unit index a hint's number `n` names (the inverse of
    /// [`number`](Self::number)), or `None` for a line 0.
    fn index(&self, n: usize) -> Option<usize> {
        match self {
            View::Lines(_) | View::StringLines { .. } => n.checked_sub(1),
            _ => Some(n),
        }
    }

    fn is_lines(&self) -> bool {
        matches!(self, View::Lines(_) | View::StringLines { .. })
    }

    /// Whether unit `i` is a blank line (a place a cut may move to).
    fn is_blank(&self, i: usize) -> bool {
        match self {
            View::Lines(lines) | View::StringLines { lines, .. } => lines[i].trim().is_empty(),
            _ => false,
        }
    }

    /// Whether the lines read as `Key: value` records: a list.
    fn is_records(&self) -> bool {
        match self {
            View::Lines(lines) | View::StringLines { lines, .. } => {
                let start: String = lines.iter().take(60).copied().collect();
                crate::template::records::looks_like_records(&start)
            }
            _ => false,
        }
    }

    /// Estimated tokens and the characters of unit `i` as written in the
    /// body.
    fn cost(&self, i: usize) -> (f64, f64) {
        let (tokens, chars) = match self {
            View::Lines(lines) | View::StringLines { lines, .. } => {
                (estimate_tokens(lines[i]), client_chars(lines[i]))
            }
            View::Array { items, .. } => {
                let text = items[i].to_string();
                (estimate_tokens(&text), client_chars(&text))
            }
            View::Fields(fields) => {
                let (k, v) = fields[i];
                let text = v.to_string();
                (
                    estimate_tokens(k) + estimate_tokens(&text),
                    k.len() + client_chars(&text) + 4,
                )
            }
        };
        (tokens.max(1) as f64, chars.max(1) as f64)
    }

    /// The body with only the units in `keep` (sorted indices), as text
    /// and, for JSON, its value.
    fn rebuild(&self, keep: &[usize]) -> (String, Option<Value>) {
        match self {
            View::Lines(lines) => (keep.iter().map(|&i| lines[i]).collect(), None),
            View::StringLines { root, key, lines } => {
                let text: String = keep.iter().map(|&i| lines[i]).collect();
                let mut map = (*root).clone();
                map.insert((*key).to_owned(), Value::String(text));
                json_part(Value::Object(map))
            }
            View::Array { root, key, items } => {
                let kept: Vec<Value> = keep.iter().map(|&i| items[i].clone()).collect();
                match (key, root) {
                    (Some(key), Value::Object(map)) => {
                        let mut map = map.clone();
                        map.insert((*key).to_owned(), Value::Array(kept));
                        json_part(Value::Object(map))
                    }
                    _ => json_part(Value::Array(kept)),
                }
            }
            View::Fields(fields) => json_part(Value::Object(
                keep.iter()
                    .map(|&i| (fields[i].0.clone(), fields[i].1.clone()))
                    .collect(),
            )),
        }
    }

    /// How elided fields are named in their hint.
    fn field_names(&self, elided: &[usize]) -> String {
        let View::Fields(fields) = self else {
            return String::new();
        };
        let names: Vec<&str> = elided.iter().map(|&i| fields[i].0.as_str()).collect();
        let mut text = names.iter().take(5).copied().collect::<Vec<_>>().join(", ");
        if names.len() > 5 {
            text.push_str(", …");
        }
        text
    }
}

fn json_part(value: Value) -> (String, Option<Value>) {
    (value.to_string(), Some(value))
}

/// Which units may be shown: all (a delivery), or the range a
/// `devboy_expand` call asked for (unit indices, `end` exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Window {
    All,
    Range { start: usize, end: usize },
}

/// What is kept: contiguous ranges of unit indices (`tail` after a gap),
/// or for fields any set.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kept {
    Head(std::ops::Range<usize>),
    HeadTail(std::ops::Range<usize>, std::ops::Range<usize>),
    Fields(Vec<usize>),
}

/// Tokens and characters kept back for hint lines and the headers and
/// fences of the kept parts.
const HINT_TOKENS: usize = 48;
const HINT_CHARS: usize = 200;

/// At most this many texts are rendered and counted for one elision.
const ATTEMPTS: usize = 6;

/// The units of `view` in `window` that fit the bound, rendered in their
/// cheapest lossless form (`raw`: as the body writes them), each elided
/// range a hint naming `id`; see the module docs. `None` when not even
/// one unit fits.
pub(crate) fn elide_view(
    view: &View<'_>,
    config: &RouteConfig,
    id: ReferenceId,
    window: Window,
    raw: bool,
) -> Option<Routed> {
    let n = view.len();
    let (lo, hi) = match window {
        Window::All => (0, n),
        Window::Range { start, end } => (start.min(n), end.min(n)),
    };
    if lo >= hi {
        return None;
    }
    let head_only =
        window != Window::All || !view.is_lines() || config.reads_file || view.is_records();
    let fields = matches!(view, View::Fields(_));
    let gaps = if head_only { 1 } else { 2 };
    let room_tokens = config.budget_tokens.saturating_sub(HINT_TOKENS * gaps) as f64;
    let room_chars = config.inline_chars.map_or(f64::INFINITY, |c| {
        c.saturating_sub(HINT_CHARS * gaps) as f64
    });
    let mut costs: Vec<Option<(f64, f64)>> = vec![None; n];
    let mut cost = |i: usize| *costs[i].get_or_insert_with(|| view.cost(i));
    // Estimates scaled by what the counts found: the kept part's encoding
    // and the parts always kept are in the factors.
    let (mut scale_tokens, mut scale_chars) = (1.0f64, 1.0f64);
    let mut best: Option<(usize, Routed)> = None;
    let mut tried: Vec<Kept> = Vec::new();
    for _ in 0..ATTEMPTS {
        let room = (room_tokens / scale_tokens, room_chars / scale_chars);
        let kept = if fields {
            Kept::Fields(knapsack(lo..hi, room, &mut cost))
        } else if head_only {
            Kept::Head(lo..lo + prefix(view, lo..hi, room, &mut cost))
        } else {
            head_and_tail(view, lo..hi, room, &mut cost)
        };
        let kept = if tried.contains(&kept) {
            // The same choice again: take a tenth less than the last.
            match shrunk(&kept) {
                Some(smaller) if !tried.contains(&smaller) => smaller,
                _ => break,
            }
        } else {
            kept
        };
        let units = kept_units(&kept);
        if units.is_empty() {
            break;
        }
        tried.push(kept.clone());
        let (predicted_tokens, predicted_chars) = units
            .iter()
            .map(|&i| cost(i))
            .fold((0.0, 0.0), |(t, c), (ut, uc)| (t + ut, c + uc));
        let routed = render_kept(view, &kept, (lo, hi), config, id, raw);
        let chars = client_chars(&routed.text);
        let fits =
            routed.tokens <= config.budget_tokens && config.inline_chars.is_none_or(|c| chars <= c);
        scale_tokens = (routed.tokens as f64 / predicted_tokens).max(0.05);
        scale_chars = (chars as f64 / predicted_chars).max(0.05);
        if fits {
            let whole = routed.elided == 0;
            let used = (routed.tokens as f64 / config.budget_tokens as f64)
                .max(config.inline_chars.map_or(0.0, |c| chars as f64 / c as f64));
            if best.as_ref().is_none_or(|(count, _)| units.len() > *count) {
                best = Some((units.len(), routed));
            }
            if whole || used >= 0.9 {
                break;
            }
        }
    }
    best.map(|(_, routed)| routed)
}

/// The most units from the start of `range` whose costs fit `room`, the cut
/// moved back to just after a blank line when one is among the last tenth.
fn prefix(
    view: &View<'_>,
    range: std::ops::Range<usize>,
    room: (f64, f64),
    cost: &mut impl FnMut(usize) -> (f64, f64),
) -> usize {
    let (mut tokens, mut chars) = (0.0, 0.0);
    let mut count = 0;
    for i in range.clone() {
        let (t, c) = cost(i);
        if tokens + t > room.0 || chars + c > room.1 {
            break;
        }
        tokens += t;
        chars += c;
        count += 1;
    }
    if count < range.len() {
        count = snap_back(view, range.start, count);
    }
    count
}

/// `count` units from `start`, ending after the last blank line within
/// the last tenth (at most 30 lines) when there is one.
fn snap_back(view: &View<'_>, start: usize, count: usize) -> usize {
    let reach = (count / 10).min(30);
    (count - reach..count)
        .rev()
        .find(|&k| k > 0 && view.is_blank(start + k - 1))
        .unwrap_or(count)
}

/// A head and a tail of `range` within `room`: the tail takes up to a
/// third, starting after a blank line near its start when there is one,
/// and the head the rest.
fn head_and_tail(
    view: &View<'_>,
    range: std::ops::Range<usize>,
    room: (f64, f64),
    cost: &mut impl FnMut(usize) -> (f64, f64),
) -> Kept {
    let (mut tokens, mut chars) = (0.0, 0.0);
    let mut tail_start = range.end;
    for i in range.clone().rev() {
        let (t, c) = cost(i);
        if tokens + t > room.0 / 3.0 || chars + c > room.1 / 3.0 {
            break;
        }
        tokens += t;
        chars += c;
        tail_start = i;
    }
    // Start the tail after a blank line among its first tenth.
    let reach = ((range.end - tail_start) / 10).min(30);
    if let Some(blank) = (tail_start..tail_start + reach).find(|&i| view.is_blank(i)) {
        for i in tail_start..=blank {
            let (t, c) = cost(i);
            tokens -= t;
            chars -= c;
        }
        tail_start = blank + 1;
    }
    let head = prefix(
        view,
        range.start..tail_start,
        (room.0 - tokens, room.1 - chars),
        cost,
    );
    let head_end = range.start + head;
    if head_end >= tail_start {
        return Kept::Head(range);
    }
    if tail_start >= range.end {
        return Kept::Head(range.start..head_end);
    }
    Kept::HeadTail(range.start..head_end, tail_start..range.end)
}

/// Dantzig's greedy over the fields in `range` (module docs), by falling
/// value density, `v_i = 1 / (i + 1)`; the kept indices sorted.
fn knapsack(
    range: std::ops::Range<usize>,
    room: (f64, f64),
    cost: &mut impl FnMut(usize) -> (f64, f64),
) -> Vec<usize> {
    let costs: Vec<(usize, f64, f64)> = range
        .map(|i| {
            let (t, c) = cost(i);
            (i, t, c)
        })
        .collect();
    let density = |&(i, t, _): &(usize, f64, f64)| 1.0 / ((i + 1) as f64 * t);
    let mut order = costs.clone();
    order.sort_by(|a, b| density(b).total_cmp(&density(a)));
    let (mut tokens, mut chars) = (0.0, 0.0);
    let mut keep: Vec<usize> = Vec::new();
    for (i, t, c) in order {
        if tokens + t <= room.0 && chars + c <= room.1 {
            tokens += t;
            chars += c;
            keep.push(i);
        }
    }
    keep.sort_unstable();
    keep
}

/// `kept` with about a tenth fewer units (at least one), or `None` when
/// nothing smaller keeps a unit.
fn shrunk(kept: &Kept) -> Option<Kept> {
    let less = |r: &std::ops::Range<usize>| {
        let cut = (r.len() / 10).max(1);
        r.start..r.end.saturating_sub(cut).max(r.start)
    };
    let smaller = match kept {
        Kept::Head(head) => Kept::Head(less(head)),
        Kept::HeadTail(head, tail) => {
            let cut = (tail.len() / 10).max(1);
            Kept::HeadTail(less(head), (tail.start + cut).min(tail.end)..tail.end)
        }
        Kept::Fields(keep) => Kept::Fields(keep[..keep.len().saturating_sub(1)].to_vec()),
    };
    (!kept_units(&smaller).is_empty()).then_some(smaller)
}

fn kept_units(kept: &Kept) -> Vec<usize> {
    match kept {
        Kept::Head(head) => head.clone().collect(),
        Kept::HeadTail(head, tail) => head.clone().chain(tail.clone()).collect(),
        Kept::Fields(keep) => keep.clone(),
    }
}

/// The text of `kept` of `view` (units `window` asked for), each part in
/// its cheapest form, with the hints of what is left out.
fn render_kept(
    view: &View<'_>,
    kept: &Kept,
    window: (usize, usize),
    config: &RouteConfig,
    id: ReferenceId,
    raw: bool,
) -> Routed {
    let n = view.len();
    let range_hint = |start: usize, end: usize| {
        hints::elided_range(view.noun(), view.number(start), view.number(end - 1), n, id)
    };
    let (text, format, elided) = match kept {
        Kept::Head(head) => {
            let (part, format) = render_part(view, &head.clone().collect::<Vec<_>>(), config, raw);
            if head.end < window.1 {
                let hint = range_hint(head.end, window.1);
                (joined(&part, &hint), format, window.1 - head.end)
            } else {
                (part, format, 0)
            }
        }
        Kept::HeadTail(head, tail) => {
            let (first, format) = render_part(view, &head.clone().collect::<Vec<_>>(), config, raw);
            let (last, _) = render_part(view, &tail.clone().collect::<Vec<_>>(), config, raw);
            let hint = range_hint(head.end, tail.start);
            let text = format!("{}\n{last}", joined(&first, &hint));
            (text, format, tail.start - head.end)
        }
        Kept::Fields(keep) => {
            let (part, format) = render_part(view, keep, config, raw);
            let elided: Vec<usize> = (0..n).filter(|i| keep.binary_search(i).is_err()).collect();
            if elided.is_empty() {
                (part, format, 0)
            } else {
                let hint =
                    hints::elided(elided.len(), n, view.noun(), &view.field_names(&elided), id);
                (joined(&part, &hint), format, elided.len())
            }
        }
    };
    Routed {
        tokens: config.tokenizer.count(&text),
        text,
        format,
        elided,
    }
}

/// `text`, then `line` on a line of its own.
fn joined(text: &str, line: &str) -> String {
    if text.is_empty() || text.ends_with('\n') {
        format!("{text}{line}")
    } else {
        format!("{text}\n{line}")
    }
}

/// The units `keep` of `view` as a body of their own, in its cheapest
/// lossless form (the form the body writes them in unless an encoding
/// counts fewer tokens), or as written with `raw`.
fn render_part(
    view: &View<'_>,
    keep: &[usize],
    config: &RouteConfig,
    raw: bool,
) -> (String, &'static str) {
    let (text, json) = view.rebuild(keep);
    if raw {
        return (text, ORIGINAL);
    }
    let classified = match json {
        Some(value) => crate::shape::classify_json(value),
        None => crate::shape::classify(&text),
    };
    let baseline = config.tokenizer.count(&text);
    match cheapest(&text, &classified, baseline, config) {
        Some(best) if best.tokens < baseline => (best.text, best.format),
        _ => (text, ORIGINAL),
    }
}

/// A range of units `devboy_expand` is asked for, as its hint numbers
/// them: `lines=812-3094` (from 1), `items=40-79` (indices); the end may
/// be left open (`lines=812-`) or the range one number (`lines=812`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartRange {
    /// `lines` or `items`.
    pub noun: &'static str,
    /// The first number asked for.
    pub first: usize,
    /// The last number asked for (`None`: to the end).
    pub last: Option<usize>,
}

impl PartRange {
    /// Reads `spec` (`812-3094`, `812-`, `812`) as a range of `noun`; the
    /// error says what was wrong, for people.
    pub fn parse(noun: &'static str, spec: &str) -> Result<Self, String> {
        let number = |s: &str| {
            s.trim().parse::<usize>().map_err(|_| {
                format!("`{noun}` is `{spec}`: give a number or a range, e.g. {noun}=40-80")
            })
        };
        let (first, last) = match spec.split_once('-') {
            Some((first, "")) => (number(first)?, None),
            Some((first, last)) => (number(first)?, Some(number(last)?)),
            None => {
                let n = number(spec)?;
                (n, Some(n))
            }
        };
        if last.is_some_and(|last| last < first) {
            return Err(format!(
                "`{noun}` is `{spec}`: the range ends before it starts"
            ));
        }
        Ok(Self { noun, first, last })
    }
}

/// What `devboy_expand` shows of `body`, the whole result behind `id`:
/// all of it, or the units `range` names, in the cheapest lossless form
/// (`raw`: as the server wrote them), within `config`'s bound. What does
/// not fit ends in a hint naming the call that gives the rest, so a big
/// result is paged through. `Err` says why a range does not apply.
pub fn expand(
    body: &str,
    range: Option<&PartRange>,
    raw: bool,
    config: &RouteConfig,
    id: ReferenceId,
) -> Result<String, String> {
    let classified = crate::shape::classify(body);
    // What does not fit is paged through: the head, then the call for the
    // rest, whatever the result was.
    let config = &RouteConfig {
        reads_file: true,
        ..config.clone()
    };
    let Some(range) = range else {
        let tokens = config.tokenizer.count(body);
        if raw {
            if config.fits(tokens, body) {
                return Ok(body.to_owned());
            }
            let view = View::of(body, &classified);
            return Ok(view
                .and_then(|v| elide_view(&v, config, id, Window::All, true))
                .map_or_else(|| body.to_owned(), |r| r.text));
        }
        return Ok(route(body, &classified, tokens, config, Some(id))
            .map_or_else(|| body.to_owned(), |r| r.text));
    };
    let view = View::of(body, &classified)
        .filter(|v| !matches!(v, View::Fields(_)))
        .ok_or_else(|| {
            format!(
                "`{id}` is not numbered in lines or items: call devboy_expand {id} without a range"
            )
        })?;
    if view.noun() != range.noun {
        return Err(format!(
            "`{id}` is numbered in {}: ask for {}=…",
            view.noun(),
            view.noun()
        ));
    }
    let n = view.len();
    let start = view
        .index(range.first)
        .ok_or_else(|| format!("lines are numbered from 1; `{id}` has lines 1-{n}"))?;
    if start >= n {
        let (first, last) = (view.number(0), view.number(n.saturating_sub(1)));
        return Err(format!(
            "`{id}` has {} {first}-{last}; {} is past its end",
            view.noun(),
            range.first
        ));
    }
    let end = range
        .last
        .and_then(|last| view.index(last))
        .map_or(n, |last| (last + 1).min(n));
    elide_view(&view, config, id, Window::Range { start, end }, raw)
        .map(|r| r.text)
        .ok_or_else(|| {
            format!(
                "{} {} of `{id}` does not fit in one result on its own",
                view.noun(),
                range.first
            )
        })
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
        // Without an id to recover from, nothing is elided, and the
        // cheapest encoding still goes out.
        let plain = route(&body, &classify(&body), baseline, &config, None).expect("cheaper");
        assert_eq!(plain.elided, 0);
        assert!(plain.tokens < baseline);
        let routed = route(&body, &classify(&body), baseline, &config, Some(id)).expect("elided");
        assert!(routed.tokens <= 2_000, "{}", routed.tokens);
        assert!(routed.elided > 0);
        let (kept, hint) = routed.text.rsplit_once('\n').unwrap();
        let first = 200 - routed.elided;
        assert_eq!(
            hint,
            format!("> [elided items {first}-199 of 200; devboy_expand tagfix7 items={first}-199]")
        );
        // What is kept is the head of the list, exactly, in order.
        let kept = encode::decode(kept).unwrap();
        assert_eq!(
            kept.as_array().unwrap()[..],
            value.as_array().unwrap()[..first]
        );
        // The kept part is in its cheapest form: a table, not JSON.
        assert_ne!(routed.format, "original");
        assert!(
            routed.tokens > 1_500,
            "most of the budget is used: {}",
            routed.tokens
        );
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
        assert!(hint.starts_with("> [elided items "), "{hint}");
        let kept = encode::decode(kept).unwrap();
        assert_eq!(kept["total_count"], 200);
        assert_eq!(kept["incomplete_results"], false);
    }

    /// A log: numbered lines of one text, nothing a template shortens.
    fn log(lines: usize) -> String {
        (1..=lines)
            .map(|i| {
                format!(
                    "{i:05} worker {} handled job {} in {} ms\n",
                    i % 7,
                    i * 31 % 977,
                    i * 13 % 501
                )
            })
            .collect()
    }

    #[test]
    fn long_text_keeps_its_head_and_tail_and_one_range_between() {
        let body = log(3000);
        let config = RouteConfig {
            budget_tokens: 1_000,
            ..RouteConfig::default()
        };
        let baseline = config.tokenizer.count(&body);
        let id: ReferenceId = "tagfix1".parse().unwrap();
        let routed = route(&body, &classify(&body), baseline, &config, Some(id)).expect("elided");
        assert_eq!(routed.format, "original");
        assert!(routed.tokens <= 1_000);
        let lines: Vec<&str> = routed.text.lines().collect();
        let hints: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].starts_with("> ["))
            .collect();
        assert_eq!(hints.len(), 1, "one gap: {}", routed.text);
        let gap = lines[hints[0]];
        let (head, tail) = (&lines[..hints[0]], &lines[hints[0] + 1..]);
        let all: Vec<&str> = body.lines().collect();
        assert_eq!(head, &all[..head.len()], "the head, contiguous");
        assert_eq!(tail, &all[all.len() - tail.len()..], "the tail, contiguous");
        assert!(
            tail.len() * 4 >= head.len(),
            "the tail has a share: {} {}",
            head.len(),
            tail.len()
        );
        let (first, last) = (head.len() + 1, all.len() - tail.len());
        assert_eq!(
            gap,
            format!(
                "> [elided lines {first}-{last} of 3000; devboy_expand tagfix1 lines={first}-{last}]"
            )
        );
        assert_eq!(routed.elided, last - first + 1);
    }

    #[test]
    fn a_file_keeps_its_head_with_no_holes_and_every_range_expands_exactly() {
        // A file read as server-filesystem returns it, lines of very
        // different lengths (which a knapsack would have skipped).
        let file: String = (1..=3000)
            .map(|i| {
                if i % 97 == 0 {
                    format!("    let long_{i} = \"{}\";\n", "x".repeat(400))
                } else {
                    format!("    call_{i}(a, b);\n")
                }
            })
            .collect();
        let body = json!({ "content": file }).to_string();
        let config = RouteConfig {
            budget_tokens: 25_000,
            inline_chars: Some(20_000),
            reads_file: true,
            ..RouteConfig::default()
        };
        let baseline = config.tokenizer.count(&body);
        let id: ReferenceId = "tagfix3".parse().unwrap();
        let routed = route(&body, &classify(&body), baseline, &config, Some(id)).expect("elided");
        assert!(
            client_chars(&routed.text) <= 20_000,
            "{}",
            routed.text.len()
        );
        assert_eq!(
            routed.format,
            Template::FencedFields.name(),
            "shown raw, fenced"
        );
        let (shown, hint) = routed.text.trim_end().rsplit_once('\n').unwrap();
        let all: Vec<&str> = file.split_inclusive('\n').collect();
        let kept = all.len() - routed.elided;
        assert_eq!(
            hint,
            format!(
                "> [elided lines {}-3000 of 3000; devboy_expand tagfix3 lines={}-3000]",
                kept + 1,
                kept + 1
            )
        );
        let head: String = all[..kept].concat();
        assert!(shown.contains(&head), "the head, whole and raw");
        assert!(kept * 3 > 1000, "most of the room is used: {kept} lines");
        // Paging through the rest with the hints' own calls gives back
        // every line once, in order.
        let mut pages = head;
        let mut from = kept + 1;
        for _ in 0..20 {
            let range = PartRange::parse("lines", &format!("{from}-3000")).unwrap();
            let page = expand(&body, Some(&range), true, &config, id).unwrap();
            assert!(client_chars(&page) <= 20_000);
            // Raw, a page is the server's JSON of those lines.
            let (json, hint) = match page.rsplit_once("\n> [elided lines ") {
                Some((json, hint)) => (json, Some(hint)),
                None => (page.as_str(), None),
            };
            let part: Value = serde_json::from_str(json).unwrap();
            pages.push_str(part["content"].as_str().unwrap());
            match hint {
                Some(hint) => from = hint.split(['-', ' ']).next().unwrap().parse().unwrap(),
                None => break,
            }
        }
        assert_eq!(pages.len(), file.len(), "every line once");
        assert!(pages == file, "in order");
    }

    #[test]
    fn a_body_far_over_the_bound_is_cut_without_encoding_its_whole() {
        let body = log(200_000);
        let config = RouteConfig {
            inline_chars: Some(50_000),
            ..RouteConfig::default()
        };
        let routed = route(
            &body,
            &classify(&body),
            25_001,
            &config,
            Some("tagfix4".parse().unwrap()),
        )
        .expect("elided");
        let chars = client_chars(&routed.text);
        assert!(chars <= 50_000 && chars > 40_000, "{chars}");
        assert!(routed.text.starts_with("00001 worker"));
        assert!(
            routed.text.ends_with(body.lines().last().unwrap())
                || routed.text.ends_with(&body[body.len() - 60..]),
            "{}",
            &routed.text[routed.text.len() - 200..]
        );
    }

    #[test]
    fn expand_names_what_does_not_apply() {
        let body = log(10);
        let id: ReferenceId = "tagfix5".parse().unwrap();
        let config = RouteConfig::default();
        let items = PartRange::parse("items", "1-2").unwrap();
        assert_eq!(
            expand(&body, Some(&items), false, &config, id),
            Err("`tagfix5` is numbered in lines: ask for lines=…".into())
        );
        let past = PartRange::parse("lines", "11-").unwrap();
        assert!(expand(&body, Some(&past), false, &config, id)
            .unwrap_err()
            .contains("past its end"));
        let two = PartRange::parse("lines", "2-3").unwrap();
        let all: Vec<&str> = body.split_inclusive('\n').collect();
        assert_eq!(
            expand(&body, Some(&two), true, &config, id),
            Ok(all[1..3].concat())
        );
        assert_eq!(expand(&body, None, true, &config, id), Ok(body.clone()));
        assert!(PartRange::parse("lines", "9-3").is_err());
        assert!(PartRange::parse("lines", "abc")
            .unwrap_err()
            .contains("lines=40-80"));
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
