//! The tuning rules: aggregated telemetry in, proposed config changes out,
//! each with the evidence that fired it.
//!
//! The rules are explicit thresholds, not a model, so that every change can
//! be explained in one line; the table below is the whole list. No rule
//! touches an endpoint with fewer than [`MIN_SUPPORT`] results in the
//! window, and no rule touches a key a person set ([`crate::edit`] says
//! how hand edits are told apart). A proposal is only a candidate:
//! [`crate::analyze`] simulates it and keeps the current value wherever it
//! would save less.
//!
//! Support is evidence, not volume: it counts the result events actually
//! observed ([`EndpointStats::observed`]), never the estimated results of
//! sampled sessions ([`EndpointStats::calls`], scaled by `1/sample_rate`;
//! see [`crate::aggregate`]). Ten events of a session sampled at 10% say
//! as little about an endpoint as ten events of any other session, though
//! they stand for about a hundred results. Every other count the rules
//! compare with [`MIN_SUPPORT`] (sequenced results, bodies, re-encoded
//! results, replayed references) is an observed count too.
//!
//! | rule | knob | fires when |
//! |---|---|---|
//! | D1 | `[endpoints.E] dedup = false` | dedup is on (and near-references off) for E, at most [`DEDUP_OFF_MAX_DUP`] of its results were replaced, and its id lines cost more tokens than its references saved |
//! | D2 | `[endpoints.E] dedup = true` | dedup is off for E and at least [`DEDUP_ON_MIN_DUP`] of its results repeat a body already in the context (the fingerprints say so) |
//! | N1 | `[endpoints.E] near_ref = true` | at least [`NEAR_MIN_SHARE`] of E's bodies look like a polled result that changed a little (see [`crate::aggregate::EventFacts::near_candidate`]) |
//! | T1 | `[endpoints.E] template = "md_tables_csv"` or `"fenced_fields"` | E's results are mostly of the shape the template is for, and the router already chose that template for at least [`PIN_MIN_TEMPLATE_SHARE`] of the ones it re-encoded |
//! | C1 | `[dedup] max_entries` | the replay loses at least [`CACHE_MIN_LOST`] of the references an unbounded cache would make to entry evictions |
//! | C2 | `[dedup] ttl_secs` | the same, lost to the TTL, and compactions are being signalled |
//! | S1 | `[dedup] min_body_bytes` | another size threshold gives a higher expected saving on the endpoints that repeat: a body above it pays an id line every time and saves its tokens minus a reference when it repeats |
//! | R7, E1 | `[tools.T] speculate`, `[enrichment] enabled`, `[tools.A] follow_up` | see [`crate::speculation`] |
//! | V1 | `[tools.E] typical_tokens` | E's median `tokens_baseline` (to 2 significant digits) is not set, or differs from the value set by more than [`TYPICAL_TOKENS_TOLERANCE`] |
//!
//! V1 is a **value-model prior**, not a pipeline knob: `typical_tokens`
//! is an input of speculation (`[enrichment]`), and changes no token the
//! pipeline sends. So it is not simulated (there is nothing to estimate)
//! and never blocked by the simulation; [`Proposal::priors`] keeps it
//! apart from the changes that are.
//!
//! There is no rule for a recursion depth (the router has no depth limit),
//! and the cache size comes from replaying the events (C1), not from a
//! percentile of repeat bursts.

use std::fmt;

use devboy_core::pipeline_config::PipelineConfig;

use crate::aggregate::{Analysis, EndpointStats};
use crate::event::{DedupOutcome, Vocabulary};
use crate::names::ExposedNames;
use crate::read::EventTable;
use crate::simulate::{hits, replay, Settings, Simulator};
use crate::table::int;

/// Observed result events (unscaled, see the module docs) an endpoint
/// needs in the window before any rule touches it.
pub const MIN_SUPPORT: u64 = 20;
/// D1: the highest recorded duplicate rate at which dedup is turned off.
pub const DEDUP_OFF_MAX_DUP: f64 = 0.05;
/// D2: the lowest implied duplicate rate at which dedup is turned on.
pub const DEDUP_ON_MIN_DUP: f64 = 0.30;
/// N1: the share of bodies that must look like near-duplicates.
pub const NEAR_MIN_SHARE: f64 = 0.5;
/// T1: the share of results that must have the template's shape.
pub const PIN_MIN_SHAPE_SHARE: f64 = 0.8;
/// T1: the share of re-encoded results the router must already have given
/// the template.
pub const PIN_MIN_TEMPLATE_SHARE: f64 = 0.95;
/// C1/C2: the share of an unbounded cache's references that must be lost
/// before a bound is raised.
pub const CACHE_MIN_LOST: f64 = 0.02;
/// C1: the largest `max_entries` proposed.
pub const MAX_ENTRIES_CAP: usize = 4096;
/// C2: the TTLs proposed, smallest first (seconds). Two hours at most: the
/// TTL guards against compactions devboy does not see.
pub const TTL_STEPS: [u64; 3] = [3600, 5400, 7200];
/// S1: the range `min_body_bytes` is chosen from.
pub const MIN_BODY_RANGE: (usize, usize) = (128, 8192);
/// S1: results needed in fully recorded sessions.
pub const MIN_BODY_SUPPORT: u64 = 200;
/// V1: how far (a share of the value set) the measured median may be
/// from `typical_tokens` before it is rewritten. A prior needs no
/// precision, and rewriting it on every small drift would churn the file.
pub const TYPICAL_TOKENS_TOLERANCE: f64 = 0.25;

/// A rule's identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// Dedup off for an endpoint.
    D1,
    /// Dedup on for an endpoint.
    D2,
    /// Near-references on for an endpoint.
    N1,
    /// Template pin.
    T1,
    /// Cache entries.
    C1,
    /// Cache TTL.
    C2,
    /// Minimum body size.
    S1,
    /// A tool's typical result size (a value-model prior).
    V1,
    /// Speculation off for a tool whose prefetches go unused, or on
    /// where they are used ([`crate::speculation`]).
    R7,
    /// The calls that follow a tool's in the recorded sessions, as
    /// `follow_up` edges (a value-model prior, [`crate::speculation`]).
    E1,
    /// From Claude Code logs: the model to assume, when one dominates.
    P1,
    /// From Claude Code logs: the agent profile, when most long sessions
    /// compact often.
    P2,
    /// From Claude Code logs: a side-effect class a tool's name makes
    /// evident, and the calls that tend to follow a tool's.
    P3,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Which key a change sets.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A key of a top-level table, e.g. `[dedup] max_entries`.
    Global {
        /// The table.
        section: &'static str,
        /// The key.
        key: &'static str,
    },
    /// A key of `[endpoints."NAME"]`.
    Endpoint {
        /// The exposed tool name.
        name: String,
        /// Its hash in telemetry.
        tool: u64,
        /// The key.
        key: &'static str,
    },
    /// A key of `[tools."NAME"]`.
    Tool {
        /// The exposed tool name.
        name: String,
        /// The key.
        key: &'static str,
    },
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Global { section, key } => write!(f, "[{section}] {key}"),
            Target::Endpoint { name, key, .. } => write!(f, "[endpoints.\"{name}\"] {key}"),
            Target::Tool { name, key } => write!(f, "[tools.\"{name}\"] {key}"),
        }
    }
}

/// A config value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setting {
    /// `true` / `false`.
    Bool(bool),
    /// A non-negative integer.
    Int(u64),
    /// A string.
    Str(String),
    /// A `follow_up` list: (exposed tool name, probability in hundredths),
    /// most likely first. Hundredths, because the tuner writes
    /// probabilities to two decimals and a setting must compare exactly.
    FollowUps(Vec<(String, u32)>),
    /// Not set (only ever the value a change replaces).
    Unset,
}

impl Setting {
    /// A `follow_up` list as a setting (probabilities rounded to
    /// hundredths; `args` are not the tuner's and are left out).
    pub fn follow_ups(links: &[devboy_core::value_model::FollowUp]) -> Self {
        Setting::FollowUps(
            links
                .iter()
                .map(|l| (l.tool.clone(), (l.probability * 100.0).round() as u32))
                .collect(),
        )
    }
}

/// Whether speculation may ever prefetch the tool exposed as `exposed`, as
/// far as the config and the name tell: the planner's two checks
/// (devboy-enrichment), its effective class pure or read-only and no name
/// that says it writes. A `follow_up` edge to any other tool could only
/// ever be declined, so the tuner writes none.
pub(crate) fn prefetchable(
    config: &devboy_core::pipeline_config::PipelineConfig,
    exposed: &str,
) -> bool {
    let verb = devboy_core::tool_verb::VerbClass::of_exposed(exposed);
    !verb.says_writes()
        && !devboy_core::call::side_effect(
            config,
            exposed,
            devboy_core::call::ToolClassFacts::by_name(exposed),
        )
        .may_mutate()
}

/// The follow-ups worth writing for a tool called `observed` times (with a
/// next call): of `next` (tool, times it came next), those at least
/// `min_p` likely, most likely first (equal counts by name), at most `max`.
pub(crate) fn likely_follow_ups<'a>(
    next: impl IntoIterator<Item = (&'a str, u64)>,
    observed: u64,
    min_p: f64,
    max: usize,
) -> Vec<(&'a str, u64)> {
    let mut links: Vec<(&str, u64)> = next
        .into_iter()
        .filter(|(_, n)| *n as f64 / observed as f64 >= min_p)
        .collect();
    links.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(y.0)));
    links.truncate(max);
    links
}

/// The change of `tool`'s `follow_up` from what `config` says now to
/// `links` (tool, times it came next) out of `observed`: `(from, to)`.
pub(crate) fn follow_up_settings(
    config: &devboy_core::pipeline_config::PipelineConfig,
    tool: &str,
    links: &[(&str, u64)],
    observed: u64,
) -> (Setting, Setting) {
    let to = Setting::FollowUps(
        links
            .iter()
            .map(|(b, n)| {
                let p = (*n as f64 * 100.0 / observed as f64).round() as u32;
                ((*b).to_owned(), p)
            })
            .collect(),
    );
    let model = config.tool_model(tool);
    let from = if model.follow_up.is_empty() {
        Setting::Unset
    } else {
        Setting::follow_ups(&model.follow_up)
    };
    (from, to)
}

/// A probability in hundredths as written: `0.45`, `1.0`.
pub fn hundredths(p: u32) -> String {
    format!("{:?}", f64::from(p) / 100.0)
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::Bool(b) => write!(f, "{b}"),
            Setting::Int(n) => write!(f, "{n}"),
            Setting::Str(s) => write!(f, "\"{s}\""),
            Setting::Unset => write!(f, "unset"),
            Setting::FollowUps(links) => {
                let items: Vec<String> = links
                    .iter()
                    .map(|(tool, p)| {
                        format!("{{ tool = \"{tool}\", probability = {} }}", hundredths(*p))
                    })
                    .collect();
                write!(f, "[{}]", items.join(", "))
            }
        }
    }
}

/// One proposed change with its evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The rule that proposed it.
    pub rule: Rule,
    /// The key.
    pub target: Target,
    /// The effective value now.
    pub from: Setting,
    /// The proposed value.
    pub to: Setting,
    /// Why, in one line.
    pub reason: String,
}

/// A rule that would have fired on a key a person set.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    /// The rule.
    pub rule: Rule,
    /// The key it wanted.
    pub target: Target,
    /// The value it wanted.
    pub to: Setting,
    /// The hand edit that holds the key, as written.
    pub by: String,
}

/// Everything the rules need.
pub struct RuleInput<'a> {
    /// The events.
    pub table: &'a EventTable,
    /// Their aggregate.
    pub analysis: &'a Analysis,
    /// The endpoints the endpoint rules look at: `analysis.endpoints`, or
    /// those blended with team and provider figures
    /// ([`crate::fingerprint::blend`]).
    pub endpoints: &'a [EndpointStats],
    /// The names `endpoints` index into (the table's, plus those of the
    /// blended rows).
    pub vocab: &'a Vocabulary,
    /// Hash → name.
    pub names: &'a ExposedNames,
    /// The current config.
    pub config: &'a PipelineConfig,
    /// Replays of the current settings, for what-ifs.
    pub simulator: &'a Simulator<'a>,
    /// The hand edit holding a key, if one does.
    pub held_by_hand: &'a dyn Fn(&Target) -> Option<String>,
}

/// What the rules proposed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Proposal {
    /// Changes to the top-level tables.
    pub global: Vec<Change>,
    /// Changes to endpoint tables.
    pub endpoints: Vec<Change>,
    /// Value-model priors (V1, E1): written without simulation, see the
    /// module docs.
    pub priors: Vec<Change>,
    /// Speculation switches (R7): they change no token sent, so they are
    /// not simulated, but are written only when the simulation keeps the
    /// proposal (see [`crate::analyze`]).
    pub speculation: Vec<Change>,
    /// Rules that fired on keys held by hand edits.
    pub held: Vec<Held>,
    /// Rules that looked and decided not to fire, worth telling.
    pub notes: Vec<String>,
}

impl Proposal {
    pub(crate) fn offer(&mut self, input: &RuleInput<'_>, change: Change) {
        if change.from == change.to {
            return;
        }
        if let Some(by) = (input.held_by_hand)(&change.target) {
            self.held.push(Held {
                rule: change.rule,
                target: change.target,
                to: change.to,
                by,
            });
            return;
        }
        match change.target {
            _ if matches!(change.rule, Rule::V1 | Rule::E1) => self.priors.push(change),
            _ if change.rule == Rule::R7 => self.speculation.push(change),
            Target::Global { .. } => self.global.push(change),
            Target::Endpoint { .. } | Target::Tool { .. } => self.endpoints.push(change),
        }
    }
}

/// Runs every rule.
pub fn propose(input: &RuleInput<'_>) -> Proposal {
    let mut proposal = propose_endpoints(input);
    cache_entries(input, &mut proposal);
    cache_ttl(input, &mut proposal);
    min_body(input, &mut proposal);
    crate::speculation::speculation_rule(input, &mut proposal);
    crate::speculation::follow_up_rule(input, &mut proposal);
    proposal
}

/// Runs the per-endpoint rules (D1, D2, N1, T1, V1) only, over
/// `input.endpoints`.
pub fn propose_endpoints(input: &RuleInput<'_>) -> Proposal {
    let mut proposal = Proposal::default();
    for e in input.endpoints {
        let Some(name) = input.names.get(e.tool) else {
            continue;
        };
        if e.observed < MIN_SUPPORT {
            continue;
        }
        endpoint_rules(input, e, name, &mut proposal);
        typical_tokens(input, e, name, &mut proposal);
    }
    proposal
}

fn endpoint_target(name: &str, tool: u64, key: &'static str) -> Target {
    Target::Endpoint {
        name: name.to_owned(),
        tool,
        key,
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn endpoint_rules(input: &RuleInput<'_>, e: &EndpointStats, name: &str, out: &mut Proposal) {
    let now = input.simulator.current().endpoint(e.tool).clone();
    let vocab = input.vocab;
    // D2: dedup is off but the endpoint keeps returning bodies the model holds.
    let dedup_after =
        if !now.dedup && e.sequenced >= MIN_SUPPORT && e.implied_dup_rate() >= DEDUP_ON_MIN_DUP {
            out.offer(
                input,
                Change {
                    rule: Rule::D2,
                    target: endpoint_target(name, e.tool, "dedup"),
                    from: Setting::Bool(false),
                    to: Setting::Bool(true),
                    reason: format!(
                        "{} of {} results repeated a body already in the context (≥ {})",
                        pct(e.implied_dup_rate()),
                        int(e.sequenced as i64),
                        pct(DEDUP_ON_MIN_DUP)
                    ),
                },
            );
            true
        } else {
            now.dedup
        };
    // N1: a polling endpoint whose bodies change in a few fields.
    let near_fires = dedup_after
        && !now.near_ref
        && e.sequenced_bodies >= MIN_SUPPORT
        && e.near_share() >= NEAR_MIN_SHARE;
    if near_fires {
        out.offer(
            input,
            Change {
                rule: Rule::N1,
                target: endpoint_target(name, e.tool, "near_ref"),
                from: Setting::Bool(false),
                to: Setting::Bool(true),
                reason: format!(
                    "{} of {} bodies followed its previous result with another fingerprint at nearly the same size (a polled status); the pipeline still checks each one exactly",
                    pct(e.near_share()),
                    int(e.sequenced_bodies as i64)
                ),
            },
        );
    }
    // D1: dedup costs this endpoint more than it saves.
    let deduped = e.observed - e.dedup[DedupOutcome::Off as usize];
    // Not while near-references are on or being turned on: they need
    // dedup, and events recorded before they were on show no near hits.
    if now.dedup
        && !now.near_ref
        && !near_fires
        && deduped >= MIN_SUPPORT
        && e.dup_rate() <= DEDUP_OFF_MAX_DUP
        && e.id_line_cost > e.reference_saved
    {
        out.offer(
            input,
            Change {
                rule: Rule::D1,
                target: endpoint_target(name, e.tool, "dedup"),
                from: Setting::Bool(true),
                to: Setting::Bool(false),
                reason: format!(
                    "{} of {} results repeated (≤ {}); id lines cost {} tokens, references saved {}",
                    pct(e.dup_rate()),
                    int(e.observed as i64),
                    pct(DEDUP_OFF_MAX_DUP),
                    int(e.id_line_cost),
                    int(e.reference_saved)
                ),
            },
        );
    }
    // T1: pin the template the router already picks.
    if now.template.is_none() {
        if let Some((template, why)) = pin_candidate(e, vocab) {
            out.offer(
                input,
                Change {
                    rule: Rule::T1,
                    target: endpoint_target(name, e.tool, "template"),
                    from: Setting::Str("auto".into()),
                    to: Setting::Str(template.into()),
                    reason: why,
                },
            );
        }
    }
}

/// `n` to two significant digits (1834 → 1800, 96 → 96).
pub fn two_significant(n: u64) -> u64 {
    let mut scale = 1;
    while n / scale >= 100 {
        scale *= 10;
    }
    (n + scale / 2) / scale * scale
}

/// V1: the typical result size, from the median of the recorded baseline.
/// The median, not the mean: one huge result (a whole log) must not make
/// a tool look expensive to prefetch.
fn typical_tokens(input: &RuleInput<'_>, e: &EndpointStats, name: &str, out: &mut Proposal) {
    let measured = two_significant(e.median_tokens);
    let current = input
        .config
        .tool_model(name)
        .typical_tokens
        .map(|t| t as u64);
    let fires = match current {
        None => true,
        Some(c) => (measured as f64 - c as f64).abs() > TYPICAL_TOKENS_TOLERANCE * c as f64,
    };
    if !fires {
        return;
    }
    out.offer(
        input,
        Change {
            rule: Rule::V1,
            target: Target::Tool {
                name: name.to_owned(),
                key: "typical_tokens",
            },
            from: current.map_or(Setting::Unset, Setting::Int),
            to: Setting::Int(measured),
            reason: format!(
                "the median of {} observed results is {} tokens before devboy (counted in {}); a prior for speculation, not simulated",
                int(e.observed as i64),
                int(e.median_tokens as i64),
                input.analysis.tokenizer.as_deref().unwrap_or("o200k_base")
            ),
        },
    );
}

/// The template T1 would pin for `e`, with the reason.
fn pin_candidate(e: &EndpointStats, vocab: &Vocabulary) -> Option<(&'static str, String)> {
    let with_shape: u64 = e.shapes.values().sum();
    if with_shape < MIN_SUPPORT {
        return None;
    }
    let (shape, share) = e.dominant_shape()?;
    let shape = vocab.shapes.get(shape)?;
    let top = e.top_inner(3);
    let top_names: Vec<&str> = top.iter().filter_map(|i| vocab.inner.get(*i)).collect();
    let template = if shape == "markdown_table" {
        "md_tables_csv"
    } else if matches!(shape, "nested_object" | "flat_object" | "array_of_objects")
        && top_names
            .iter()
            .any(|n| matches!(*n, "diff" | "code_fence" | "stack_trace"))
    {
        "fenced_fields"
    } else {
        return None;
    };
    if share < PIN_MIN_SHAPE_SHARE {
        return None;
    }
    let encoded = e.encoded();
    let used = vocab
        .templates
        .find(template)
        .and_then(|i| e.templates.get(&i))
        .copied()
        .unwrap_or(0);
    if encoded < MIN_SUPPORT || (used as f64) < PIN_MIN_TEMPLATE_SHARE * encoded as f64 {
        return None;
    }
    Some((
        template,
        format!(
            "{} of its results are {shape}{}; the router chose {template} for {} of the {} it re-encoded",
            pct(share),
            if template == "fenced_fields" {
                format!(" carrying {}", top_names.join(", "))
            } else {
                String::new()
            },
            int(used as i64),
            int(encoded as i64)
        ),
    ))
}

/// What one cache bound costs (C1, C2): the references today's replay
/// makes, and those a replay without the bound would make.
struct BoundCost {
    now_hits: u64,
    unbounded: u64,
    lost: u64,
}

/// The references the current settings lose to one bound, compared with
/// `unbounded` (the current settings with that bound lifted); `None` when
/// the loss is too small to act on (fewer than [`MIN_SUPPORT`], or under
/// [`CACHE_MIN_LOST`] of the unbounded cache's references).
fn bound_cost(input: &RuleInput<'_>, unbounded: &Settings) -> Option<BoundCost> {
    let now_hits = hits(input.simulator.current_outcomes());
    let unbounded = hits(&replay(input.table, input.analysis, unbounded));
    let lost = unbounded.saturating_sub(now_hits);
    if lost < MIN_SUPPORT || (lost as f64) < CACHE_MIN_LOST * unbounded as f64 {
        return None;
    }
    Some(BoundCost {
        now_hits,
        unbounded,
        lost,
    })
}

/// C1: raise `max_entries` when the replay shows references lost to it.
fn cache_entries(input: &RuleInput<'_>, out: &mut Proposal) {
    let current = input.simulator.current();
    let Some(BoundCost {
        unbounded, lost, ..
    }) = bound_cost(input, &current.with_cache(usize::MAX, current.ttl_ms))
    else {
        return;
    };
    let mut size = current.max_entries.max(1);
    let mut chosen = None;
    while size < MAX_ENTRIES_CAP {
        size = (size * 2).min(MAX_ENTRIES_CAP);
        let h = hits(&replay(
            input.table,
            input.analysis,
            &current.with_cache(size, current.ttl_ms),
        ));
        chosen = Some((size, h));
        if unbounded - h <= unbounded / 100 {
            break;
        }
    }
    let Some((size, h)) = chosen else {
        return;
    };
    out.offer(
        input,
        Change {
            rule: Rule::C1,
            target: Target::Global {
                section: "dedup",
                key: "max_entries",
            },
            from: Setting::Int(current.max_entries as u64),
            to: Setting::Int(size as u64),
            reason: format!(
                "the replay lost {} of {} references to entry evictions; {size} entries keep {}",
                int(lost as i64),
                int(unbounded as i64),
                int(h as i64)
            ),
        },
    );
}

/// C2: raise the TTL when the replay shows references lost to it, but
/// only when compactions are being signalled: the TTL is the only guard
/// against a compaction devboy does not see.
fn cache_ttl(input: &RuleInput<'_>, out: &mut Proposal) {
    let current = input.simulator.current();
    let Some(BoundCost {
        now_hits,
        unbounded,
        lost,
    }) = bound_cost(input, &current.with_cache(current.max_entries, u64::MAX))
    else {
        return;
    };
    let current_secs = current.ttl_ms / 1000;
    if input.analysis.sessions.compactions == 0 {
        out.notes.push(format!(
            "C2: the TTL ({current_secs} s) cost {} references, but no compaction was signalled in the window, so it stays (it is the only guard when compaction hooks are missing: `devboy hook install`)",
            int(lost as i64)
        ));
        return;
    }
    let mut chosen = None;
    for secs in TTL_STEPS.into_iter().filter(|s| *s > current_secs) {
        let h = hits(&replay(
            input.table,
            input.analysis,
            &current.with_cache(current.max_entries, secs * 1000),
        ));
        chosen = Some((secs, h));
        if (h.saturating_sub(now_hits)) as f64 >= 0.9 * lost as f64 {
            break;
        }
    }
    let Some((secs, h)) = chosen else {
        return;
    };
    out.offer(
        input,
        Change {
            rule: Rule::C2,
            target: Target::Global {
                section: "dedup",
                key: "ttl_secs",
            },
            from: Setting::Int(current_secs),
            to: Setting::Int(secs),
            reason: format!(
                "the replay lost {} of {} references to the TTL; {secs} s keeps {}; {} compactions were signalled",
                int(lost as i64),
                int(unbounded as i64),
                int(h as i64),
                int(input.analysis.sessions.compactions as i64)
            ),
        },
    );
}

/// S1: the `min_body_bytes` with the highest expected saving.
///
/// For every threshold T, the value of deduplicating bodies of at least T
/// characters is, over the sequenced results of endpoints that repeat
/// (implied rate above [`DEDUP_OFF_MAX_DUP`]): each implied repeat saves
/// its tokens minus a reference, each other body pays an id line. The
/// values for all T come from one sort by size and a suffix sum. (A fixed
/// size percentile would be blind to whether the small bodies repeat.)
fn min_body(input: &RuleInput<'_>, out: &mut Proposal) {
    let a = input.analysis;
    let records = &input.table.records;
    let id = a.id_tokens;
    let reference = a.ref_tokens;
    // Endpoints that (nearly) never repeat are D1's business: their id
    // lines would otherwise drag the threshold up for everyone.
    let repeating: std::collections::HashSet<u64> = a
        .endpoints
        .iter()
        .filter(|e| e.implied_dup_rate() > DEDUP_OFF_MAX_DUP)
        .map(|e| e.tool)
        .collect();
    let mut by_size: Vec<(u32, f64)> = records
        .iter()
        .zip(&a.facts)
        .filter(|(r, f)| f.sequenced && repeating.contains(&r.tool))
        .map(|(r, f)| {
            let v = if f.implied_repeat {
                f64::from(r.tokens_baseline) - reference
            } else {
                -id
            };
            (r.response_chars, v)
        })
        .collect();
    if (by_size.len() as u64) < MIN_BODY_SUPPORT {
        return;
    }
    by_size.sort_unstable_by_key(|(size, _)| *size);
    let mut suffix = vec![0.0; by_size.len() + 1];
    for i in (0..by_size.len()).rev() {
        suffix[i] = suffix[i + 1] + by_size[i].1;
    }
    let value_at = |t: usize| {
        let i = by_size.partition_point(|(s, _)| (*s as usize) < t);
        suffix[i]
    };
    let current = input.config.dedup.min_body_bytes;
    let current_value = value_at(current);
    let mut best = (current, current_value);
    let mut t = MIN_BODY_RANGE.0;
    while t <= MIN_BODY_RANGE.1 {
        let v = value_at(t);
        if v > best.1 + 0.5 {
            best = (t, v);
        }
        t *= 2;
    }
    if best.0 == current {
        return;
    }
    out.offer(
        input,
        Change {
            rule: Rule::S1,
            target: Target::Global {
                section: "dedup",
                key: "min_body_bytes",
            },
            from: Setting::Int(current as u64),
            to: Setting::Int(best.0 as u64),
            reason: format!(
                "expected net saving of dedup on {} results: {} tokens at {current} bytes, {} at {} (repeats save their tokens minus a {:.0}-token reference; other bodies pay a {:.0}-token id line)",
                int(by_size.len() as i64),
                int(current_value as i64),
                int(best.1 as i64),
                best.0,
                reference,
                id
            ),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{analyze, SequenceParams};
    use crate::edit::ConfigFile;
    use crate::read::{read_events, ReadOptions};
    use crate::synthetic::{EndpointSpec, Workload};

    /// The rules' proposal for `workload` against the config `text`.
    fn proposal(workload: &Workload, text: &str) -> Proposal {
        proposal_with(workload, text, |_| {})
    }

    /// The same, after `change` has edited the table read.
    fn proposal_with(
        workload: &Workload,
        text: &str,
        change: impl Fn(&mut EventTable),
    ) -> Proposal {
        let dir = tempfile::tempdir().unwrap();
        workload.write(&dir.path().join("events")).unwrap();
        let mut table = read_events(&ReadOptions {
            input: dir.path().join("events"),
            since_ms: 0,
        })
        .unwrap();
        change(&mut table);
        let file = ConfigFile::from_text(&dir.path().join("p.toml"), text, true).unwrap();
        let config = file.config().unwrap();
        let names = ExposedNames::from_pairs(
            workload
                .endpoints
                .iter()
                .filter(|e| !e.name.starts_with("unnamed"))
                .map(|e| (e.hash(), e.name.clone())),
        );
        let analysis = analyze(
            &table,
            SequenceParams {
                near_min_body_bytes: config.dedup.near_ref.min_body_bytes,
                ttl_ms: config.dedup.ttl.as_millis() as u64,
            },
        );
        let settings =
            Settings::from_config(&config, &names, analysis.endpoints.iter().map(|e| e.tool));
        let simulator = Simulator::new(&table, &analysis, settings);
        let defaults = PipelineConfig::embedded_default();
        let held = |t: &Target| file.held_by_hand(t, &defaults);
        propose(&RuleInput {
            table: &table,
            analysis: &analysis,
            endpoints: &analysis.endpoints,
            vocab: &table.vocab,
            names: &names,
            config: &config,
            simulator: &simulator,
            held_by_hand: &held,
        })
    }

    fn workload(endpoints: Vec<EndpointSpec>, events: usize) -> Workload {
        Workload {
            endpoints,
            sessions: 1,
            events_per_session: events,
            compactions_per_session: 0,
            interval_ms: 1000,
            start_ms: 1_700_000_000_000,
            malformed_every: 0,
            seed: 7,
        }
    }

    const DEFAULT: &str = "schema_version = 2\n";
    /// Dedup off for fs__read_text_file, set by an earlier tuner run.
    const TUNED_OFF: &str = "schema_version = 2\n[endpoints.fs__read_text_file]\ndedup = false  # tune: D1 2026-01-01: …\n";

    fn rules_for(p: &Proposal, name: &str) -> Vec<(Rule, Setting)> {
        p.endpoints
            .iter()
            .filter(|c| matches!(&c.target, Target::Endpoint { name: n, .. } | Target::Tool { name: n, .. } if n == name))
            .map(|c| (c.rule, c.to.clone()))
            .collect()
    }

    #[test]
    fn d1_turns_dedup_off_for_an_endpoint_that_never_repeats() {
        let p = proposal(
            &workload(vec![EndpointSpec::new("gh__search_code")], 100),
            DEFAULT,
        );
        assert_eq!(
            rules_for(&p, "gh__search_code"),
            vec![(Rule::D1, Setting::Bool(false))]
        );
        let reason = &p.endpoints[0].reason;
        assert!(reason.contains("0.0% of 100 results"), "{reason}");
        // Repeating endpoints keep dedup.
        let repeating = EndpointSpec {
            dup_rate: 0.3,
            ..EndpointSpec::new("gh__search_code")
        };
        let p = proposal(&workload(vec![repeating], 100), DEFAULT);
        assert!(rules_for(&p, "gh__search_code").is_empty(), "{p:?}");
    }

    /// Every session of the table sampled at `rate`.
    fn sampled_at(rate: f64) -> impl Fn(&mut EventTable) {
        move |t| {
            for s in t.sessions.values_mut() {
                s.sample_rate = rate;
            }
        }
    }

    #[test]
    fn minimum_support_counts_observed_events_not_scaled_ones() {
        let search = || workload(vec![EndpointSpec::new("gh__search_code")], 15);
        // 15 events at 10% stand for 150 results, but are 15 events of
        // evidence: below the minimum.
        let p = proposal_with(&search(), DEFAULT, sampled_at(0.1));
        assert!(rules_for(&p, "gh__search_code").is_empty(), "{p:?}");
        // 30 events at 50%: enough, and the reason counts the events.
        let p = proposal_with(
            &workload(vec![EndpointSpec::new("gh__search_code")], 30),
            DEFAULT,
            sampled_at(0.5),
        );
        assert_eq!(
            rules_for(&p, "gh__search_code"),
            vec![(Rule::D1, Setting::Bool(false))]
        );
        let reason = &p.endpoints[0].reason;
        assert!(reason.contains("0.0% of 30 results"), "{reason}");
    }

    #[test]
    fn no_rule_touches_an_endpoint_below_minimum_support() {
        let specs = || {
            vec![
                EndpointSpec::new("gh__search_code"),
                EndpointSpec {
                    dedup_on: false,
                    dup_rate: 0.9,
                    ..EndpointSpec::new("fs__read_text_file")
                },
                EndpointSpec {
                    polling: true,
                    shape: "flat_object",
                    chars: 3000,
                    ..EndpointSpec::new("ci__status")
                },
                EndpointSpec {
                    shape: "markdown_table",
                    template: Some("md_tables_csv"),
                    encoder_ratio: 0.4,
                    ..EndpointSpec::new("gh__list_issues")
                },
            ]
        };
        // About 14 results per endpoint (fewer than 20 each): nothing.
        let p = proposal(&workload(specs(), 4 * 14), TUNED_OFF);
        for e in specs() {
            let calls = p.endpoints.len();
            assert!(
                rules_for(&p, &e.name).is_empty(),
                "{} touched with too little support: {calls} changes {p:?}",
                e.name
            );
        }
        // With enough results every rule fires.
        let p = proposal(&workload(specs(), 4 * 60), TUNED_OFF);
        assert_eq!(
            rules_for(&p, "gh__search_code"),
            vec![(Rule::D1, Setting::Bool(false))]
        );
        assert_eq!(
            rules_for(&p, "fs__read_text_file"),
            vec![(Rule::D2, Setting::Bool(true))]
        );
        assert_eq!(
            rules_for(&p, "ci__status"),
            vec![(Rule::N1, Setting::Bool(true))]
        );
        assert_eq!(
            rules_for(&p, "gh__list_issues"),
            vec![
                (Rule::D1, Setting::Bool(false)),
                (Rule::T1, Setting::Str("md_tables_csv".into()))
            ]
        );
    }

    #[test]
    fn d2_turns_dedup_on_where_fingerprints_repeat() {
        let spec = EndpointSpec {
            dedup_on: false,
            dup_rate: 0.5,
            ..EndpointSpec::new("fs__read_text_file")
        };
        let p = proposal(&workload(vec![spec.clone()], 200), TUNED_OFF);
        assert_eq!(
            rules_for(&p, "fs__read_text_file"),
            vec![(Rule::D2, Setting::Bool(true))]
        );
        // Turned off by hand: it stays off.
        let by_hand = TUNED_OFF.replace("  # tune: D1 2026-01-01: …", "");
        let p = proposal(&workload(vec![spec.clone()], 200), &by_hand);
        assert!(rules_for(&p, "fs__read_text_file").is_empty(), "{p:?}");
        assert_eq!(
            p.held[0].by,
            "[endpoints.\"fs__read_text_file\"] dedup = false"
        );
        // A few repeats are not enough.
        let rare = EndpointSpec {
            dup_rate: 0.1,
            ..spec
        };
        let p = proposal(&workload(vec![rare], 200), TUNED_OFF);
        assert!(rules_for(&p, "fs__read_text_file").is_empty(), "{p:?}");
    }

    #[test]
    fn n1_turns_near_refs_on_for_polling_and_keeps_dedup() {
        let spec = EndpointSpec {
            polling: true,
            shape: "nested_object",
            chars: 2500,
            ..EndpointSpec::new("ci__get_pipeline_status")
        };
        let p = proposal(&workload(vec![spec.clone()], 100), DEFAULT);
        assert_eq!(
            rules_for(&p, "ci__get_pipeline_status"),
            vec![(Rule::N1, Setting::Bool(true))],
            "N1 needs dedup, so D1 must not fire"
        );
        // Once near-references are on, the old records (no near hits yet)
        // do not turn dedup off again.
        let tuned =
            "[endpoints.ci__get_pipeline_status]\nnear_ref = true  # tune: N1 2026-01-01: …\n";
        let p = proposal(&workload(vec![spec.clone()], 100), tuned);
        assert!(rules_for(&p, "ci__get_pipeline_status").is_empty(), "{p:?}");
        // Text bodies are never near candidates.
        let text = EndpointSpec {
            polling: true,
            shape: "prose",
            chars: 2500,
            ..EndpointSpec::new("ci__log")
        };
        let p = proposal(&workload(vec![text], 100), DEFAULT);
        assert_eq!(
            rules_for(&p, "ci__log"),
            vec![(Rule::D1, Setting::Bool(false))]
        );
    }

    #[test]
    fn t1_pins_the_template_of_markdown_table_and_diff_endpoints() {
        let md = EndpointSpec {
            shape: "markdown_table",
            template: Some("md_tables_csv"),
            encoder_ratio: 0.4,
            dup_rate: 0.3,
            ..EndpointSpec::new("gh__list_issues")
        };
        let diff = EndpointSpec {
            shape: "nested_object",
            inner: vec!["url", "diff"],
            template: Some("fenced_fields"),
            encoder_ratio: 0.2,
            dup_rate: 0.3,
            ..EndpointSpec::new("gh__get_diff")
        };
        let plain = EndpointSpec {
            shape: "array_of_objects",
            encoder_ratio: 0.3,
            dup_rate: 0.3,
            ..EndpointSpec::new("gh__list_commits")
        };
        let p = proposal(&workload(vec![md, diff, plain], 300), DEFAULT);
        assert_eq!(
            rules_for(&p, "gh__list_issues"),
            vec![(Rule::T1, Setting::Str("md_tables_csv".into()))]
        );
        assert_eq!(
            rules_for(&p, "gh__get_diff"),
            vec![(Rule::T1, Setting::Str("fenced_fields".into()))]
        );
        assert!(rules_for(&p, "gh__list_commits").is_empty());
        assert!(p.endpoints[0].reason.contains("markdown_table"));
    }

    #[test]
    fn c1_raises_max_entries_when_evictions_cost_references() {
        // 4000 results, 1 s apart (under the TTL), half of them repeating
        // any earlier body: reuse distances far beyond 256 entries.
        let spec = EndpointSpec {
            chars: 2000,
            dup_rate: 0.5,
            ..EndpointSpec::new("fs__read_text_file")
        };
        let mut w = workload(vec![spec], 4000);
        w.interval_ms = 100;
        let p = proposal(&w, DEFAULT);
        let c1: Vec<&Change> = p.global.iter().filter(|c| c.rule == Rule::C1).collect();
        assert_eq!(c1.len(), 1, "{p:?}");
        assert_eq!(c1[0].from, Setting::Int(256));
        let Setting::Int(to) = c1[0].to else {
            panic!("not an int")
        };
        assert!(
            to > 256 && to <= MAX_ENTRIES_CAP as u64 && to.is_power_of_two(),
            "{to}"
        );
    }

    #[test]
    fn c2_raises_the_ttl_only_when_compactions_are_signalled() {
        let spec = EndpointSpec {
            chars: 2000,
            dup_rate: 0.5,
            ..EndpointSpec::new("fs__read_text_file")
        };
        // 30 s apart: 400 results span 3.3 hours; entries fit.
        let mut w = workload(vec![spec], 400);
        w.interval_ms = 30_000;
        let p = proposal(&w, DEFAULT);
        assert!(p.global.iter().all(|c| c.rule != Rule::C2), "{p:?}");
        assert!(p.notes.iter().any(|n| n.starts_with("C2:")), "{p:?}");
        w.compactions_per_session = 1;
        let p = proposal(&w, DEFAULT);
        let c2: Vec<&Change> = p.global.iter().filter(|c| c.rule == Rule::C2).collect();
        assert_eq!(c2.len(), 1, "{p:?}");
        assert!(TTL_STEPS.iter().any(|s| c2[0].to == Setting::Int(*s)));
    }

    #[test]
    fn s1_lowers_min_body_bytes_for_small_bodies_that_repeat() {
        let spec = EndpointSpec {
            shape: "flat_object",
            chars: 400,
            dup_rate: 0.8,
            ..EndpointSpec::new("time__now")
        };
        let p = proposal(&workload(vec![spec], 400), DEFAULT);
        let s1: Vec<&Change> = p.global.iter().filter(|c| c.rule == Rule::S1).collect();
        assert_eq!(s1.len(), 1, "{p:?}");
        assert_eq!(s1[0].to, Setting::Int(128));
        // Too few results: no S1.
        let spec = EndpointSpec {
            shape: "flat_object",
            chars: 400,
            dup_rate: 0.8,
            ..EndpointSpec::new("time__now")
        };
        let p = proposal(&workload(vec![spec], 150), DEFAULT);
        assert!(p.global.iter().all(|c| c.rule != Rule::S1), "{p:?}");
    }

    #[test]
    fn hand_edits_hold_and_unnamed_endpoints_are_not_touched() {
        let text = "schema_version = 2\n[endpoints.\"gh__*\"]\ndedup = true # mine\n";
        let p = proposal(
            &workload(
                vec![
                    EndpointSpec::new("gh__search_code"),
                    EndpointSpec::new("unnamed__search"),
                ],
                200,
            ),
            text,
        );
        assert!(p.endpoints.is_empty(), "{p:?}");
        assert_eq!(p.held.len(), 1, "{p:?}");
        assert_eq!(p.held[0].rule, Rule::D1);
        assert_eq!(p.held[0].by, "[endpoints.\"gh__*\"] dedup = true");
        // A value the tuner set is not a hand edit.
        let tuned = "schema_version = 2\n[endpoints.\"gh__search_code\"]\ndedup = true # tune: D2 2026-01-01: …\n";
        let p = proposal(
            &workload(vec![EndpointSpec::new("gh__search_code")], 200),
            tuned,
        );
        assert_eq!(
            rules_for(&p, "gh__search_code"),
            vec![(Rule::D1, Setting::Bool(false))]
        );
    }

    #[test]
    fn two_significant_digits() {
        assert_eq!(two_significant(0), 0);
        assert_eq!(two_significant(7), 7);
        assert_eq!(two_significant(96), 96);
        assert_eq!(two_significant(998), 1000);
        assert_eq!(two_significant(1834), 1800);
        assert_eq!(two_significant(1850), 1900);
        assert_eq!(two_significant(123_456), 120_000);
    }

    /// The V1 changes of a proposal, as (tool, value).
    fn priors(p: &Proposal) -> Vec<(String, Setting)> {
        p.priors
            .iter()
            .map(|c| match &c.target {
                Target::Tool { name, key } => {
                    assert_eq!(*key, "typical_tokens");
                    assert_eq!(c.rule, Rule::V1);
                    (name.clone(), c.to.clone())
                }
                other => panic!("a prior for {other}"),
            })
            .collect()
    }

    #[test]
    fn v1_sets_typical_tokens_from_the_median_baseline() {
        // 4000 characters ±10%: about 1000 tokens each.
        let p = proposal(
            &workload(vec![EndpointSpec::new("gh__search_code")], 100),
            DEFAULT,
        );
        let v1 = priors(&p);
        assert_eq!(v1.len(), 1, "{p:?}");
        let Setting::Int(n) = v1[0].1 else {
            panic!("{v1:?}")
        };
        assert!((900..=1100).contains(&n) && n == two_significant(n), "{n}");
        assert_eq!(p.priors[0].from, Setting::Unset);
        assert!(
            p.priors[0]
                .reason
                .contains("the median of 100 observed results is "),
            "{p:?}"
        );
        // Priors are not among the changes the simulation judges.
        assert!(p.endpoints.iter().all(|c| c.rule != Rule::V1));

        // Within 25% of the value set: left alone; further off: rewritten,
        // also when the tuner set it.
        let near = format!(
            "schema_version = 3\n[tools.gh__search_code]\ntypical_tokens = {}  # tune: V1 2026-01-01: …\n",
            n * 11 / 10
        );
        let p = proposal(
            &workload(vec![EndpointSpec::new("gh__search_code")], 100),
            &near,
        );
        assert!(p.priors.is_empty(), "{p:?}");
        let far = "schema_version = 3\n[tools.gh__search_code]\ntypical_tokens = 3000  # tune: V1 2026-01-01: …\n";
        let p = proposal(
            &workload(vec![EndpointSpec::new("gh__search_code")], 100),
            far,
        );
        assert_eq!(
            priors(&p),
            vec![("gh__search_code".into(), Setting::Int(n))]
        );
        assert_eq!(p.priors[0].from, Setting::Int(3000));
    }

    #[test]
    fn v1_needs_minimum_support() {
        let p = proposal(
            &workload(vec![EndpointSpec::new("gh__search_code")], 19),
            DEFAULT,
        );
        assert!(p.priors.is_empty(), "{p:?}");
        let p = proposal(
            &workload(vec![EndpointSpec::new("gh__search_code")], 20),
            DEFAULT,
        );
        assert_eq!(priors(&p).len(), 1, "{p:?}");
    }

    #[test]
    fn v1_holds_for_a_typical_tokens_written_by_hand() {
        let hand =
            "schema_version = 3\n[tools.\"gh__*\"]\ntypical_tokens = 3000   # measured by me\n";
        let p = proposal(
            &workload(vec![EndpointSpec::new("gh__search_code")], 100),
            hand,
        );
        assert!(p.priors.is_empty(), "{p:?}");
        assert_eq!(p.held.len(), 1, "{p:?}");
        assert_eq!(p.held[0].rule, Rule::V1);
        assert_eq!(p.held[0].by, "[tools.\"gh__*\"] typical_tokens = 3000");
    }
}
