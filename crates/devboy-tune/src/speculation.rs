//! What speculation did in the recorded sessions, and the rules it feeds:
//! R7 (turn speculation off for a tool whose prefetches go unused, or on
//! where they are used) and E1 (the tools that follow a tool in the
//! user's own sessions, as `follow_up` edges).
//!
//! | rule | knob | fires when |
//! |---|---|---|
//! | R7 | `[tools.T] speculate = false` | at least [`R7_MIN_PREFETCHES`] prefetches of T ended and fewer than [`R7_MIN_HIT_RATE`] of them answered the agent |
//! | R7 | `[enrichment] enabled = true` | no tool is turned off, and at least [`R7_ENABLE_HIT_RATE`] of at least [`R7_MIN_PREFETCHES`] prefetches answered the agent |
//! | E1 | `[tools.A] follow_up` | A was followed by another call at least [`E1_MIN_SUPPORT`] times in fully recorded sessions, B followed it at least `enrichment.min_probability` of those times, and B may be prefetched at all (pure or read-only, no name that says it writes: [`crate::rules::prefetchable`]) |
//!
//! Both change no token the pipeline sends, so the simulation has nothing
//! to estimate: E1 edges are value-model priors, written like V1; R7 is
//! written only when the simulation's guard over the whole proposal passes
//! (see [`crate::analyze`]).

use std::collections::{BTreeMap, HashMap};

use devboy_core::speculation::{DeclineReason, PrefetchEnd};

use crate::event::{SessionRecord, SpeculationKind, SpeculationSummary};
use crate::read::EventTable;
use crate::rules::{
    follow_up_settings, likely_follow_ups, prefetchable, Change, Proposal, Rule, RuleInput,
    Setting, Target,
};
use crate::table::int;

/// R7: ended prefetches a tool (or the corpus) needs before R7 judges it.
pub const R7_MIN_PREFETCHES: u64 = 10;
/// R7: below this hit rate a tool's speculation is turned off.
pub const R7_MIN_HIT_RATE: f64 = 0.5;
/// R7: at or above this corpus-wide hit rate speculation is turned on.
pub const R7_ENABLE_HIT_RATE: f64 = 0.6;
/// E1: calls of A followed by another call needed before its edges are
/// written: the minimum support of every rule.
pub const E1_MIN_SUPPORT: u64 = crate::rules::MIN_SUPPORT;
/// E1: at most this many follow-ups per tool.
pub const E1_MAX_FOLLOW_UPS: usize = 3;

/// Ended prefetches of one tool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prefetches {
    /// Prefetches that ended, however.
    pub ended: u64,
    /// Of those, the ones that answered the agent (used or joined).
    pub hits: u64,
}

impl Prefetches {
    /// Hits over ended, when any ended.
    pub fn hit_rate(&self) -> Option<f64> {
        (self.ended > 0).then(|| self.hits as f64 / self.ended as f64)
    }
}

/// Speculation over the window: per tool from the speculation events
/// (never sampled), and the sessions' own summaries summed (which match
/// declines with later calls, see `docs/telemetry.md`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpeculationFigures {
    /// Ended prefetches by tool hash.
    pub tools: BTreeMap<u64, Prefetches>,
    /// All tools together.
    pub total: Prefetches,
    /// Prefetches dispatched (events).
    pub dispatched: u64,
    /// Declines by reason (events).
    pub declined: BTreeMap<&'static str, u64>,
    /// The summaries of the sessions that speculated, summed.
    pub summary: SpeculationSummary,
    /// Sessions whose summary reports speculation.
    pub sessions: u64,
}

impl SpeculationFigures {
    /// The figures of `table`.
    pub fn of(table: &EventTable) -> Self {
        let mut f = Self::default();
        for e in &table.speculation {
            match e.kind {
                SpeculationKind::Dispatched => f.dispatched += 1,
                SpeculationKind::Declined => {
                    let reason = e.reason.map_or("other", DeclineReason::name);
                    *f.declined.entry(reason).or_default() += 1;
                }
                // An inlined prefetch was shown without being asked for:
                // it says nothing of whether the agent would have called.
                SpeculationKind::Ended if e.end == Some(PrefetchEnd::Inlined) => {}
                SpeculationKind::Ended => {
                    let hit = e.end.is_some_and(|end| end.is_hit());
                    for p in [f.tools.entry(e.tool).or_default(), &mut f.total] {
                        p.ended += 1;
                        p.hits += u64::from(hit);
                    }
                }
            }
        }
        for s in table.sessions.values() {
            if let Some(summary) = &s.speculation {
                f.sessions += 1;
                add(&mut f.summary, summary);
            }
        }
        f
    }

    /// Whether any speculation happened in the window.
    pub fn any(&self) -> bool {
        self.dispatched > 0
            || !self.declined.is_empty()
            || self.total.ended > 0
            || self.sessions > 0
    }

    /// Of the declines for capacity (budget, parallelism, a busy host),
    /// the share the agent then called itself: recall the limits cost.
    /// `(late, declined)`.
    pub fn recall_lost(&self) -> (u64, u64) {
        let capacity = |m: &BTreeMap<String, u64>| -> u64 {
            m.iter()
                .filter(|(r, _)| {
                    DeclineReason::from_name(r).is_some_and(DeclineReason::is_capacity)
                })
                .map(|(_, n)| n)
                .sum()
        };
        (
            capacity(&self.summary.late_invoked),
            capacity(&self.summary.declined),
        )
    }

    /// The report's `# enrichment:` line.
    pub fn line(&self) -> String {
        let share = |n: u64, d: u64| {
            if d == 0 {
                "-".to_owned()
            } else {
                format!("{:.0}%", n as f64 * 100.0 / d as f64)
            }
        };
        let s = &self.summary;
        let (late, capacity) = self.recall_lost();
        let declined: Vec<String> = self
            .declined
            .iter()
            .map(|(r, n)| format!("{r} {}", int(*n as i64)))
            .collect();
        let c = s.calls_saved;
        format!(
            "# enrichment: prefetch hit rate {} ({} of {} ended); decline recall loss {} ({} of {} capacity declines later called); cost overrun rate {} ({} of {} predictions); calls saved: prefetch {}, dedup {}, fail_fast {}; tokens saved {}; dispatched {}, declined {}{}",
            share(self.total.hits, self.total.ended),
            int(self.total.hits as i64),
            int(self.total.ended as i64),
            share(late, capacity),
            int(late as i64),
            int(capacity as i64),
            share(s.overruns, s.predictions),
            int(s.overruns as i64),
            int(s.predictions as i64),
            int(c.prefetch as i64),
            int(c.dedup as i64),
            int(c.fail_fast as i64),
            int(s.tokens_saved),
            int(self.dispatched as i64),
            int(self.declined.values().sum::<u64>() as i64),
            if declined.is_empty() {
                String::new()
            } else {
                format!(" ({})", declined.join(", "))
            }
        ) + &if s.inlined > 0 {
            format!("; inlined {}", int(s.inlined as i64))
        } else {
            String::new()
        }
    }
}

fn add(to: &mut SpeculationSummary, s: &SpeculationSummary) {
    to.dispatched += s.dispatched;
    to.used += s.used;
    to.joined += s.joined;
    to.inlined += s.inlined;
    for (into, from) in [
        (&mut to.wasted, &s.wasted),
        (&mut to.declined, &s.declined),
        (&mut to.late_invoked, &s.late_invoked),
    ] {
        for (k, n) in from {
            *into.entry(k.clone()).or_default() += n;
        }
    }
    to.predictions += s.predictions;
    to.overruns += s.overruns;
    to.calls_saved.prefetch += s.calls_saved.prefetch;
    to.calls_saved.dedup += s.calls_saved.dedup;
    to.calls_saved.fail_fast += s.calls_saved.fail_fast;
    to.tokens_saved += s.tokens_saved;
    to.tokens_wasted += s.tokens_wasted;
}

/// R7: per-tool `speculate = false`, or `[enrichment] enabled = true`.
pub(crate) fn speculation_rule(input: &RuleInput<'_>, out: &mut Proposal) {
    let figures = SpeculationFigures::of(input.table);
    let pct = |r: f64| format!("{:.0}%", r * 100.0);
    let mut disabled = 0;
    for (tool, p) in &figures.tools {
        let Some(name) = input.names.get(*tool) else {
            continue;
        };
        let Some(rate) = p.hit_rate() else { continue };
        if p.ended < R7_MIN_PREFETCHES || rate >= R7_MIN_HIT_RATE {
            continue;
        }
        disabled += 1;
        let current = input.config.tool_model(name).speculate;
        out.offer(
            input,
            Change {
                rule: Rule::R7,
                target: Target::Tool {
                    name: name.to_owned(),
                    key: "speculate",
                },
                from: current.map_or(Setting::Unset, Setting::Bool),
                to: Setting::Bool(false),
                reason: format!(
                    "{} of {} prefetches answered the agent ({}, below {})",
                    int(p.hits as i64),
                    int(p.ended as i64),
                    pct(rate),
                    pct(R7_MIN_HIT_RATE)
                ),
            },
        );
    }
    let Some(rate) = figures.total.hit_rate() else {
        return;
    };
    if disabled == 0 && figures.total.ended >= R7_MIN_PREFETCHES && rate >= R7_ENABLE_HIT_RATE {
        out.offer(
            input,
            Change {
                rule: Rule::R7,
                target: Target::Global {
                    section: "enrichment",
                    key: "enabled",
                },
                from: Setting::Bool(input.config.enrichment.enabled),
                to: Setting::Bool(true),
                reason: format!(
                    "{} of {} prefetches answered the agent ({}, at least {})",
                    int(figures.total.hits as i64),
                    int(figures.total.ended as i64),
                    pct(rate),
                    pct(R7_ENABLE_HIT_RATE)
                ),
            },
        );
    }
}

/// Consecutive calls per session: for each tool hash, how often each tool
/// came right after it, and how often anything did. Only sessions whose
/// every result was recorded (not sampled, nothing dropped) count: a
/// missing event would invent an edge.
pub fn call_edges(table: &EventTable) -> HashMap<u64, (u64, HashMap<u64, u64>)> {
    let complete = |id: u64| table.sessions.get(&id).is_none_or(SessionRecord::complete);
    let mut last: HashMap<u64, u64> = HashMap::new();
    let mut edges: HashMap<u64, (u64, HashMap<u64, u64>)> = HashMap::new();
    for r in &table.records {
        // An inlined follow-up is devboy's doing, not a call of the agent's.
        if !complete(r.session) || !r.served().agent_called() {
            continue;
        }
        if let Some(a) = last.insert(r.session, r.tool) {
            let (n, next) = edges.entry(a).or_default();
            *n += 1;
            *next.entry(r.tool).or_default() += 1;
        }
    }
    edges
}

/// E1: `follow_up` edges mined from the order of the agent's calls.
pub(crate) fn follow_up_rule(input: &RuleInput<'_>, out: &mut Proposal) {
    let min_p = input.config.enrichment.min_probability;
    let mut edges: Vec<_> = call_edges(input.table).into_iter().collect();
    edges.sort_by_key(|(a, _)| *a);
    for (a, (observed, next)) in edges {
        let Some(a_name) = input.names.get(a) else {
            continue;
        };
        if observed < E1_MIN_SUPPORT {
            continue;
        }
        let links = likely_follow_ups(
            next.iter()
                .filter(|(b, _)| **b != a)
                .filter_map(|(b, n)| Some((input.names.get(*b)?, *n)))
                .filter(|(b, _)| prefetchable(input.config, b)),
            observed,
            min_p,
            E1_MAX_FOLLOW_UPS,
        );
        if links.is_empty() {
            continue;
        }
        let (from, to) = follow_up_settings(input.config, a_name, &links, observed);
        let counts: Vec<String> = links.iter().map(|(b, n)| format!("{b} {n}")).collect();
        out.offer(
            input,
            Change {
                rule: Rule::E1,
                target: Target::Tool {
                    name: a_name.to_owned(),
                    key: "follow_up",
                },
                from,
                to,
                reason: format!(
                    "of {} calls right after it in fully recorded sessions: {}; a prior for speculation, not simulated",
                    int(observed as i64),
                    counts.join(", ")
                ),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use devboy_core::call::CallKey;
    use devboy_core::speculation::{DeclineReason, PrefetchEnd, Served, SpeculationEvent};
    use devboy_telemetry::{CallFacts, CallOrigin, Outcome, Telemetry, TelemetryOptions};
    use serde_json::{json, Map, Value};

    use crate::analyze::{run, AnalyzeOptions};

    /// One session written by the real recorder into `dir`, the names map
    /// kept in `names`.
    fn session(dir: &Path, names: &Path, id: &str, body: impl FnOnce(&Telemetry)) {
        let telemetry = Telemetry::start(TelemetryOptions {
            names_file: Some(names.to_owned()),
            session_id: Some(id.into()),
            ..TelemetryOptions::new(dir.to_owned(), "o200k_base")
        });
        assert!(telemetry.is_active());
        body(&telemetry);
        telemetry.finish();
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// The agent's own call of `tool`.
    fn call(t: &Telemetry, tool: &str, arguments: &Map<String, Value>, served: Served) {
        let facts = CallFacts {
            tool,
            upstream: "gh",
            body: "a body",
            paths: &[],
        };
        let key = CallKey::new(tool, Some(arguments));
        let origin = CallOrigin {
            key: Some(&key),
            served,
        };
        t.record_call(&facts, &origin, Outcome::passed_through(100, 0, false));
    }

    fn prefetch(t: &Telemetry, tool: &str, arguments: &Map<String, Value>, end: PrefetchEnd) {
        let predicted_tokens = 100;
        let key = CallKey::new(tool, Some(arguments));
        t.record_speculation(
            tool,
            &key,
            SpeculationEvent::Dispatched { predicted_tokens },
            0,
        );
        t.record_speculation(
            tool,
            &key,
            SpeculationEvent::Ended {
                end,
                predicted_tokens,
            },
            // Every fourth lands at 150 tokens: an overrun.
            150,
        );
    }

    const CONFIG: &str = r#"schema_version = 3

[tools."gh__get_issue"]
follow_up = [{ tool = "gh__search", probability = 0.9 }]   # mine
"#;

    fn options(dir: &Path, config: &str) -> AnalyzeOptions {
        let output = dir.join("pipeline_config.toml");
        std::fs::write(&output, config).unwrap();
        AnalyzeOptions {
            input: dir.join("telemetry"),
            days: 30,
            output,
            names_file: dir.join("names.json"),
            summary_file: None,
            dry_run: false,
            now_ms: crate::now_ms(),
            shared: Default::default(),
            project_config: None,
        }
    }

    /// Twenty-four rounds of: the agent lists issues (a call a capacity
    /// decline turned down just before), gets one from a prefetch, and a
    /// prefetch of `fs__read` goes unused three times in four.
    fn record(dir: &Path) {
        let names = dir.join("names.json");
        session(&dir.join("telemetry"), &names, "session-one", |t| {
            for i in 0..24 {
                let page = args(json!({"page": i, "state": "open"}));
                let issue = args(json!({"number": i}));
                let file = args(json!({"path": format!("f{i}")}));
                if i > 0 {
                    // Arguments in another order: the same call.
                    t.record_speculation(
                        "gh__list_issues",
                        &CallKey::new(
                            "gh__list_issues",
                            Some(&args(json!({"state": "open", "page": i}))),
                        ),
                        SpeculationEvent::Declined {
                            reason: DeclineReason::OverParallel,
                        },
                        0,
                    );
                }
                call(t, "gh__list_issues", &page, Served::Upstream);
                prefetch(t, "gh__get_issue", &issue, PrefetchEnd::Used);
                call(t, "gh__get_issue", &issue, Served::Prefetch);
                let end = if i % 4 == 0 {
                    PrefetchEnd::Used
                } else {
                    PrefetchEnd::Expired
                };
                prefetch(t, "fs__read", &file, end);
                if end == PrefetchEnd::Used {
                    call(t, "fs__read", &file, Served::Prefetch);
                }
            }
        });
    }

    #[test]
    fn r7_turns_off_unused_speculation_and_e1_writes_the_users_edges() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path());
        let options = options(dir.path(), CONFIG);
        let report = run(&options).unwrap();
        let text = std::fs::read_to_string(&options.output).unwrap();
        let rendered = report.to_string();

        // R7: fs__read answered 6 of 24; gh__get_issue 24 of 24 is left
        // alone, and with a tool turned off speculation is not switched on.
        assert!(
            text.contains("[tools.\"fs__read\"]\nspeculate = false  # tune: R7"),
            "{text}"
        );
        assert!(!text.contains("enabled"), "{text}");
        assert_eq!(report.speculation.len(), 1, "{rendered}");

        // E1: list_issues → get_issue 24 of 24; get_issue → list_issues 17
        // of 23 (→ fs__read 6 of 23 is below min_probability 0.3), but
        // get_issue's follow_up was written by hand and holds.
        assert!(
            text.contains(
                "follow_up = [{ tool = \"gh__get_issue\", probability = 1.0 }]  # tune: E1"
            ),
            "{text}"
        );
        assert!(
            text.contains("follow_up = [{ tool = \"gh__search\", probability = 0.9 }]   # mine"),
            "{text}"
        );
        assert!(
            rendered.contains("E1 would set [tools.\"gh__get_issue\"] follow_up = [{ tool = \"gh__list_issues\", probability = 0.74 }]"),
            "{rendered}"
        );
        // fs__read → list_issues 6 of 6: too little support for an edge.
        assert!(!text.contains("[tools.\"fs__read\"]\nfollow_up"), "{text}");

        // The report's line: 30 of 48 prefetches hit; 23 capacity
        // declines, each followed by the agent's own call; every landed
        // result was 150 tokens against 100 predicted.
        let line = rendered
            .lines()
            .find(|l| l.starts_with("# enrichment:"))
            .unwrap_or_else(|| panic!("{rendered}"));
        assert_eq!(
            line,
            "# enrichment: prefetch hit rate 62% (30 of 48 ended); decline recall loss 100% (23 of 23 capacity declines later called); cost overrun rate 100% (48 of 48 predictions); calls saved: prefetch 30, dedup 0, fail_fast 0; tokens saved 0; dispatched 48, declined 23 (over_parallel 23)"
        );
    }

    /// E1 wrote `follow_up` edges to
    /// `filesystem__edit_file` (a write) from 8 calls. Edges go only to
    /// tools speculation may prefetch, and only past the rules' minimum
    /// support.
    #[test]
    fn e1_writes_edges_only_to_read_only_tools_past_the_minimum_support() {
        let dir = tempfile::tempdir().unwrap();
        let names = dir.path().join("names.json");
        let fs = |t: &Telemetry, tool: &str, i: usize| {
            call(
                t,
                tool,
                &args(json!({"path": format!("f{i}")})),
                Served::Upstream,
            );
        };
        session(&dir.path().join("telemetry"), &names, "session-five", |t| {
            // Each read followed by an edit, 24 times.
            for i in 0..24 {
                fs(t, "filesystem__read_text_file", i);
                fs(t, "filesystem__edit_file", i);
            }
            // A search followed by a read: 8 times, under the support.
            for i in 0..8 {
                fs(t, "filesystem__search_files", i);
                fs(t, "filesystem__read_text_file", i);
            }
            // A listing followed by a read: 20 times, enough.
            for i in 0..20 {
                fs(t, "filesystem__list_directory", i);
                fs(t, "filesystem__read_text_file", i);
            }
        });
        // A write configured as read-only still says so by its name.
        let config = "schema_version = 3
\n[tools.\"filesystem__edit_*\"]\nside_effect = \"read_only\"\n";
        let options = options(dir.path(), config);
        run(&options).unwrap();
        let text = std::fs::read_to_string(&options.output).unwrap();
        assert!(!text.contains("tool = \"filesystem__edit_file\""), "{text}");
        assert!(
            !text.contains("[tools.\"filesystem__search_files\"]"),
            "{text}"
        );
        let listing = text
            .split("[tools.\"filesystem__list_directory\"]")
            .nth(1)
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            listing.contains("follow_up = [{ tool = \"filesystem__read_text_file\", probability = 1.0 }]  # tune: E1"),
            "{text}"
        );
    }

    #[test]
    fn r7_switches_speculation_on_when_prefetches_are_used() {
        let dir = tempfile::tempdir().unwrap();
        let names = dir.path().join("names.json");
        session(&dir.path().join("telemetry"), &names, "session-two", |t| {
            for i in 0..10 {
                let issue = args(json!({"number": i}));
                prefetch(t, "gh__get_issue", &issue, PrefetchEnd::Joined);
                call(t, "gh__get_issue", &issue, Served::Joined);
            }
        });
        // Turned off by an earlier run (marked), so the tuner may turn it on.
        let config = "schema_version = 3\n\n[enrichment]\nenabled = false  # tune: R7 2026-01-01: was unused\n";
        let options = options(dir.path(), config);
        let report = run(&options).unwrap();
        let text = std::fs::read_to_string(&options.output).unwrap();
        assert!(text.contains("enabled = true  # tune: R7"), "{text}");
        let rendered = report.to_string();
        assert!(
            rendered.contains("calls saved: prefetch 0, dedup 10, fail_fast 0"),
            "{rendered}"
        );

        // Written by hand, it holds.
        let hand = "schema_version = 3\n\n[enrichment]\nenabled = false\n";
        let options = super::tests::options(dir.path(), hand);
        let report = run(&options).unwrap();
        assert_eq!(std::fs::read_to_string(&options.output).unwrap(), hand);
        assert!(report.to_string().contains("R7 would set [enrichment] enabled = true, but `[enrichment] enabled = false` was written by hand"), "{report}");
    }

    #[test]
    fn without_speculation_the_report_has_no_enrichment_line() {
        let dir = tempfile::tempdir().unwrap();
        let names = dir.path().join("names.json");
        session(
            &dir.path().join("telemetry"),
            &names,
            "session-three",
            |t| {
                for i in 0..6 {
                    call(
                        t,
                        "gh__list_issues",
                        &args(json!({"page": i})),
                        Served::Upstream,
                    );
                }
            },
        );
        let options = AnalyzeOptions {
            dry_run: true,
            ..options(dir.path(), "schema_version = 3\n")
        };
        let report = run(&options).unwrap();
        assert!(report.enrichment.is_none());
        assert!(!report.to_string().contains("# enrichment:"));
    }

    /// Inline mode: twelve searches, each with two reads appended that the
    /// agent then never asks for. Inlined prefetches say nothing of the
    /// hit rate (R7 stays quiet), and the appended reads are not calls of
    /// the agent's, so they mine no edge (E1 stays quiet).
    #[test]
    fn inlined_prefetches_are_neither_misses_nor_the_agents_calls() {
        let dir = tempfile::tempdir().unwrap();
        let names = dir.path().join("names.json");
        session(&dir.path().join("telemetry"), &names, "session-four", |t| {
            for i in 0..12 {
                call(t, "fs__search", &args(json!({"q": i})), Served::Upstream);
                for j in 0..2 {
                    let file = args(json!({"path": format!("f{i}-{j}")}));
                    prefetch(t, "fs__read", &file, PrefetchEnd::Inlined);
                    call(t, "fs__read", &file, Served::Inline);
                }
            }
        });
        let options = options(dir.path(), "schema_version = 3\n");
        let report = run(&options).unwrap();
        let text = std::fs::read_to_string(&options.output).unwrap();
        let rendered = report.to_string();
        assert!(!text.contains("speculate"), "{text}");
        assert!(!text.contains("follow_up"), "{text}");
        let line = rendered
            .lines()
            .find(|l| l.starts_with("# enrichment:"))
            .unwrap_or_else(|| panic!("{rendered}"));
        assert!(
            line.starts_with("# enrichment: prefetch hit rate - (0 of 0 ended)"),
            "{line}"
        );
        assert!(line.ends_with("; inlined 24"), "{line}");
    }
}
