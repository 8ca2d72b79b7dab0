use super::*;
use crate::aggregate::{analyze, SequenceParams};
use crate::read::{read_events, ReadOptions};
use crate::synthetic::{EndpointSpec, Workload};

const DAY: u64 = 86_400_000;

fn member_rows(workload: &Workload) -> Vec<Fingerprint> {
    let dir = tempfile::tempdir().unwrap();
    workload.write(&dir.path().join("events")).unwrap();
    let names = ExposedNames::from_pairs(
        workload
            .endpoints
            .iter()
            .map(|e| (e.hash(), e.name.clone())),
    );
    let table = read_events(&ReadOptions {
        input: dir.path().join("events"),
        since_ms: 0,
    })
    .unwrap();
    let analysis = analyze(
        &table,
        SequenceParams {
            near_min_body_bytes: 256,
            ttl_ms: 1_800_000,
        },
    );
    fingerprints(&table, &analysis, &names)
}

fn workload(sessions: usize, events: usize, seed: u64) -> Workload {
    let mut w = Workload::typical(sessions, events, 1_780_000_000_000);
    w.seed = seed;
    w
}

#[test]
fn a_members_rows_carry_its_figures_and_nothing_else() {
    let rows = member_rows(&workload(6, 200, 7));
    assert_eq!(rows.len(), 6, "{rows:#?}");
    let issues = rows
        .iter()
        .find(|r| r.endpoint == "gh__list_issues")
        .unwrap();
    assert_eq!(issues.sessions, 6);
    assert_eq!(issues.members, 1);
    assert_eq!(issues.shape_dominant.as_deref(), Some("markdown_table"));
    assert!(issues.shape_share > 0.99, "{issues:?}");
    assert_eq!(issues.inner_formats_top3, vec!["url".to_owned()]);
    assert_eq!(issues.template_top.as_deref(), Some("md_tables_csv"));
    // The workload repeats 30% of issue lists within a partition.
    assert!(
        (0.15..0.45).contains(&issues.implied_dup_rate),
        "{}",
        issues.implied_dup_rate
    );
    assert!(issues.tokens_p50 > 0 && issues.tokens_p90 >= issues.tokens_p50);
    assert!(issues.first_day <= issues.last_day);
    assert_eq!(issues.devboy_version, DEVBOY_VERSION);
    let total: u64 = rows.iter().map(|r| r.calls).sum();
    assert_eq!(total, 6 * 200);
    // Most calls first.
    assert!(rows.windows(2).all(|w| w[0].calls >= w[1].calls));
}

#[test]
fn k_anonymity_withholds_endpoints_of_few_sessions() {
    let rows = member_rows(&workload(4, 100, 3));
    let (kept, withheld) = k_anonymous(rows.clone(), 5);
    assert!(kept.is_empty());
    assert_eq!(withheld, rows.len());
    let (kept, withheld) = k_anonymous(rows.clone(), 4);
    assert_eq!((kept.len(), withheld), (rows.len(), 0));
}

fn row(endpoint: &str, sessions: u64, calls: u64, dup: f64) -> Fingerprint {
    Fingerprint {
        endpoint: endpoint.to_owned(),
        members: 1,
        sessions,
        calls,
        errors: 0,
        deduped: calls,
        dup_rate: dup,
        sequenced: calls,
        implied_dup_rate: dup,
        sequenced_bodies: calls,
        near_share: 0.0,
        id_line_tokens: 7.0,
        reference_saved_tokens: 100.0 * dup,
        chars_mean: 4000.0,
        tokens_p50: 1000,
        tokens_p90: 2000,
        shaped: calls,
        shape_dominant: Some("array_of_objects".into()),
        shape_share: 1.0,
        inner_formats_top3: vec!["url".into()],
        encoded: 0,
        template_top: None,
        template_share: 0.0,
        baseline_tokens: 1000.0,
        dedup_saved_tokens: 0.0,
        encoder_saved_tokens: 0.0,
        first_day: 20_000,
        last_day: 20_010,
        devboy_version: DEVBOY_VERSION.into(),
        tokenizer: "o200k_base".into(),
    }
}

#[test]
fn the_team_row_weighs_members_by_sessions_and_drops_the_few() {
    let a = row("gh__list_issues", 30, 300, 0.5);
    let b = Fingerprint {
        first_day: 19_990,
        last_day: 20_020,
        shape_dominant: Some("markdown_table".into()),
        shape_share: 0.9,
        ..row("gh__list_issues", 10, 900, 0.1)
    };
    let alone = row("private__tool", 50, 500, 0.9);
    let few = row("gh__rare", 2, 10, 0.0);
    let few2 = row("gh__rare", 2, 10, 0.0);
    let today = 20_030;
    let merged = merge(
        [
            vec![a.clone(), alone.clone(), few.clone()],
            vec![b.clone(), few2.clone()],
        ],
        5,
        today,
    );
    assert_eq!(merged.len(), 1, "{merged:#?}");
    let m = &merged[0];
    assert_eq!((m.members, m.sessions, m.calls), (2, 40, 1200));
    // Weighted by sessions (30 : 10), not by calls.
    assert!((m.dup_rate - 0.4).abs() < 1e-9, "{}", m.dup_rate);
    assert_eq!((m.first_day, m.last_day), (19_990, 20_020));
    // array_of_objects: 30 × 1.0 against markdown_table: 10 × 0.9.
    assert_eq!(m.shape_dominant.as_deref(), Some("array_of_objects"));
    assert!((m.shape_share - 0.75).abs() < 1e-9, "{}", m.shape_share);
    assert_eq!(m.tokens_p50, 1000);
}

#[test]
fn a_blend_is_seventy_thirty_and_a_prior_alone_stands_alone() {
    let own = row("gh__list_issues", 3, 30, 0.0);
    let team = row("gh__list_issues", 200, 4000, 0.6);
    let prior = SharedRow {
        row: team.clone(),
        source: SharedSource::Team,
        weight: 0.7,
    };
    let b = blend(Some(&own), &prior);
    assert!((b.implied_dup_rate - 0.42).abs() < 1e-9);
    // The team's row may hold this member's own: not counted twice.
    assert_eq!((b.calls, b.sessions), (4000, 200));
    // A provider's never does: added.
    let provided = blend(
        Some(&own),
        &SharedRow {
            source: SharedSource::Provider("p".into()),
            weight: 0.4,
            ..prior.clone()
        },
    );
    assert_eq!((provided.calls, provided.sessions), (4030, 203));
    assert!((provided.implied_dup_rate - 0.24).abs() < 1e-9);
    let alone = blend(None, &prior);
    assert_eq!(alone.implied_dup_rate, 0.6);
    assert_eq!(alone.calls, 4000);
}

#[test]
fn stale_team_rows_and_providers_never_outvote_a_member_with_its_own_evidence() {
    let team_row = row("gh__list_issues", 200, 4000, 0.6);
    let mut set = SharedFigures {
        team: [(team_row.endpoint.clone(), team_row.clone())].into(),
        providers: Default::default(),
        team_weight: 0.7,
        ttl_days: 14,
    };
    // Fresh: the team's weight, whatever the member has.
    let fresh = set.shared_for("gh__list_issues", 500, 20, 20_015).unwrap();
    assert_eq!(
        (fresh.source.clone(), fresh.weight),
        (SharedSource::Team, 0.7)
    );
    // Stale (last seen 20 days ago): demoted, and gone when the member has
    // enough results of its own.
    let stale = set.shared_for("gh__list_issues", 5, 20, 20_030).unwrap();
    assert_eq!(stale.source, SharedSource::StaleTeam);
    assert_eq!(stale.weight, MAX_SHARED_WEIGHT);
    assert!(set.shared_for("gh__list_issues", 20, 20, 20_030).is_none());
    // A provider: capped at 40%, only under the member's minimum support.
    set.team.clear();
    set.providers.insert(
        "gh__search_code".into(),
        SharedRow {
            row: row("gh__search_code", 1000, 10_000, 0.0),
            source: SharedSource::Provider("https://p".into()),
            weight: 0.9,
        },
    );
    let p = set.shared_for("gh__search_code", 3, 20, 20_015).unwrap();
    assert_eq!(p.weight, MAX_SHARED_WEIGHT);
    assert!(set.shared_for("gh__search_code", 25, 20, 20_015).is_none());
    assert!(set.shared_for("gh__other", 0, 20, 20_015).is_none());
}

#[test]
fn a_row_read_back_as_stats_gives_the_rules_the_same_figures() {
    let rows = member_rows(&workload(3, 300, 5));
    for r in &rows {
        let mut vocab = Vocabulary::default();
        let stats = r.to_stats(42, &mut vocab);
        let again = Fingerprint::of_stats(
            &stats,
            &r.endpoint,
            &vocab,
            r.sessions,
            r.tokens_p90,
            (r.first_day, r.last_day),
            &r.tokenizer,
        );
        let close = |x: f64, y: f64, n: u64| (x - y).abs() <= 1.0 / n.max(1) as f64 + 1e-9;
        assert_eq!(again.calls, r.calls, "{}", r.endpoint);
        assert_eq!(again.deduped, r.deduped, "{}", r.endpoint);
        assert!(close(again.dup_rate, r.dup_rate, r.calls), "{}", r.endpoint);
        assert!(close(
            again.implied_dup_rate,
            r.implied_dup_rate,
            r.sequenced
        ));
        assert!(close(again.near_share, r.near_share, r.sequenced_bodies));
        assert_eq!(again.shape_dominant, r.shape_dominant, "{}", r.endpoint);
        assert!(close(again.shape_share, r.shape_share, r.shaped));
        assert_eq!(again.inner_formats_top3, r.inner_formats_top3);
        assert_eq!(again.template_top, r.template_top, "{}", r.endpoint);
        assert_eq!(again.tokens_p50, r.tokens_p50);
        assert!((again.id_line_tokens - r.id_line_tokens).abs() < 1.0);
    }
}

#[test]
fn a_rarely_called_endpoint_is_tuned_by_the_team_and_the_report_says_so() {
    let now = crate::now_ms();
    let dir = tempfile::tempdir().unwrap();
    // This member called the issue list 12 times: too few for any rule.
    let mine = Workload {
        endpoints: vec![EndpointSpec {
            dup_rate: 0.6,
            dedup_on: false,
            ..EndpointSpec::new("gh__list_issues")
        }],
        sessions: 2,
        events_per_session: 6,
        compactions_per_session: 0,
        interval_ms: 1000,
        start_ms: now - DAY,
        malformed_every: 0,
        seed: 9,
    };
    mine.write(&dir.path().join("events")).unwrap();
    std::fs::write(dir.path().join("names.json"), mine.names_json()).unwrap();
    let config = "schema_version = 3\n\n[endpoints.\"gh__list_issues\"]\ndedup = false  # tune: D1 2026-11-01: earlier\n\n[endpoints.\"gh__get_issue\"]\ndedup = false  # tune: D1 2026-11-01: earlier\n";
    std::fs::write(dir.path().join("pipeline_config.toml"), config).unwrap();
    let today = day_of(now);
    let team_row = |name: &str| Fingerprint {
        deduped: 0,
        dup_rate: 0.0,
        last_day: today - 1,
        ..row(name, 120, 2400, 0.55)
    };
    let priors = SharedFigures {
        team: ["gh__list_issues", "gh__get_issue"]
            .into_iter()
            .map(|n| (n.to_owned(), team_row(n)))
            .collect(),
        providers: Default::default(),
        team_weight: 0.7,
        ttl_days: 14,
    };
    let options = crate::AnalyzeOptions {
        input: dir.path().join("events"),
        days: 30,
        output: dir.path().join("pipeline_config.toml"),
        names_file: dir.path().join("names.json"),
        summary_file: None,
        dry_run: false,
        now_ms: now,
        shared: priors,
        project_config: None,
    };
    let report = crate::analyze::run(&options).unwrap();
    let text = std::fs::read_to_string(&options.output).unwrap();
    let config =
        devboy_core::pipeline_config::PipelineConfig::from_str(&text, &options.output).unwrap();
    // Both turned back on: the one called 12 times here, and the one never
    // called here at all.
    assert!(config.endpoint("gh__list_issues").dedup, "{text}");
    assert!(config.endpoint("gh__get_issue").dedup, "{text}");
    assert_eq!(report.blended.len(), 2, "{:?}", report.blended);
    // D2 on both, and V1 (the typical size) on both.
    let decided: Vec<String> = report
        .decided_by_shared
        .iter()
        .map(|t| t.to_string())
        .collect();
    for expected in [
        "[endpoints.\"gh__list_issues\"] dedup",
        "[endpoints.\"gh__get_issue\"] dedup",
        "[tools.\"gh__list_issues\"] typical_tokens",
        "[tools.\"gh__get_issue\"] typical_tokens",
    ] {
        assert!(decided.iter().any(|d| d == expected), "{decided:?}");
    }
    let printed = report.to_string();
    assert!(printed.contains("decided by team data"), "{printed}");
    // Without the team, nothing changes.
    let alone = crate::analyze::run(&crate::AnalyzeOptions {
        shared: SharedFigures::default(),
        dry_run: true,
        ..options.clone()
    })
    .unwrap();
    assert!(alone.blended.is_empty() && alone.decided_by_shared.is_empty());
    assert!(alone.snippet.is_empty(), "{alone}");
}

#[test]
fn rows_no_devboy_could_write_are_refused_and_one_member_counts_once() {
    let today = 20_030;
    let good = row("gh__list_issues", 10, 100, 0.2);
    assert_eq!(good.check(today), Ok(()));
    let bad = [
        Fingerprint {
            dup_rate: f64::NAN,
            ..good.clone()
        },
        Fingerprint {
            implied_dup_rate: 1.5,
            ..good.clone()
        },
        Fingerprint {
            sessions: u64::MAX,
            ..good.clone()
        },
        Fingerprint {
            errors: 101,
            ..good.clone()
        },
        Fingerprint {
            sessions: 0,
            ..good.clone()
        },
        Fingerprint {
            chars_mean: f64::INFINITY,
            ..good.clone()
        },
        Fingerprint {
            last_day: today + 30,
            ..good.clone()
        },
        Fingerprint {
            tokens_p50: 5000,
            ..good.clone()
        },
        Fingerprint {
            endpoint: String::new(),
            ..good.clone()
        },
    ];
    for b in &bad {
        assert!(b.check(today).is_err(), "{b:?}");
    }
    // One member's file claiming many members, listing an endpoint twice,
    // or carrying a poisoned row changes nothing but its own one row.
    let mut merger = Merger::default();
    let refused = merger.add_member(
        vec![
            Fingerprint {
                members: 50,
                ..good.clone()
            },
            good.clone(),
            Fingerprint {
                endpoint: "x__y".into(),
                dup_rate: f64::NAN,
                ..good.clone()
            },
        ],
        today,
    );
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(merger.finish(2).is_empty(), "one member is not a team");
    let mut merger = Merger::default();
    merger.add_member(vec![good.clone()], today);
    merger.add_member(
        vec![Fingerprint {
            sessions: u64::MAX,
            ..good.clone()
        }],
        today,
    );
    assert!(merger.finish(2).is_empty(), "the poisoned row was refused");
}

#[test]
fn a_member_with_enough_results_of_its_own_can_refuse_what_the_team_decided() {
    let now = crate::now_ms();
    let dir = tempfile::tempdir().unwrap();
    // 60 results of an endpoint that never repeats here, dedup off.
    let mine = Workload {
        endpoints: vec![EndpointSpec {
            dup_rate: 0.0,
            dedup_on: false,
            chars: 3000,
            ..EndpointSpec::new("gh__list_issues")
        }],
        sessions: 2,
        events_per_session: 30,
        compactions_per_session: 0,
        interval_ms: 1000,
        start_ms: now - DAY,
        malformed_every: 0,
        seed: 4,
    };
    mine.write(&dir.path().join("events")).unwrap();
    std::fs::write(dir.path().join("names.json"), mine.names_json()).unwrap();
    std::fs::write(
        dir.path().join("pipeline_config.toml"),
        "schema_version = 3\n\n[endpoints.\"gh__list_issues\"]\ndedup = false  # tune: D1 2026-11-01: earlier\n",
    )
    .unwrap();
    // The team's results repeat a lot.
    let team_row = Fingerprint {
        deduped: 0,
        dup_rate: 0.0,
        last_day: day_of(now) - 1,
        ..row("gh__list_issues", 200, 4000, 0.6)
    };
    let options = crate::AnalyzeOptions {
        input: dir.path().join("events"),
        days: 30,
        output: dir.path().join("pipeline_config.toml"),
        names_file: dir.path().join("names.json"),
        summary_file: None,
        dry_run: true,
        now_ms: now,
        shared: SharedFigures {
            team: [(team_row.endpoint.clone(), team_row)].into(),
            providers: Default::default(),
            team_weight: 0.7,
            ttl_days: 14,
        },
        project_config: None,
    };
    let report = crate::analyze::run(&options).unwrap();
    let d2 = report
        .decisions
        .iter()
        .find(|d| d.change.rule == crate::rules::Rule::D2)
        .unwrap_or_else(|| panic!("the team's figures propose D2: {report}"));
    assert!(d2.judged, "60 results of its own are enough to judge by");
    assert!(!d2.kept, "dedup on would only cost id lines here: {report}");
    assert!(report.decided_by_shared.contains(&d2.change.target));
}
