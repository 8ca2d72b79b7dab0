use std::path::Path;
use std::time::Duration;

use super::*;

fn parse(text: &str) -> Result<PipelineConfig, ConfigError> {
    PipelineConfig::from_str(text, Path::new("/cfg/pipeline_config.toml"))
}

/// What is wrong with `text`: the error of a file that does not load, else
/// its problems, one a line (there must be some).
fn error(text: &str) -> String {
    match parse(text) {
        Err(error) => error.to_string(),
        Ok(config) => {
            assert!(!config.problems.is_empty(), "should have a problem: {text}");
            config.problems.join("\n")
        }
    }
}

#[test]
fn the_embedded_file_is_valid_and_says_the_defaults() {
    let parsed = parse(EMBEDDED_PIPELINE_TOML).expect("embedded file parses");
    let defaults = load::defaults();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(parsed.dedup, defaults.dedup);
    assert_eq!(parsed.encoding, defaults.encoding);
    assert_eq!(parsed.tokenizer, defaults.tokenizer);
    assert_eq!(parsed.telemetry, defaults.telemetry);
    assert_eq!(
        defaults.telemetry,
        TelemetrySettings {
            enabled: true,
            sample_rate: 1.0,
            max_file_bytes: 16 * 1024 * 1024,
            max_age_days: 30
        }
    );
    assert_eq!(parsed.file_version, SCHEMA_VERSION);
    assert!(parsed.endpoints.is_empty() && parsed.tools.is_empty());
    // The profiles, hints and enrichment the file shows are the built-in ones.
    let llms = |c: &PipelineConfig| -> Vec<_> {
        c.profiles
            .llms
            .iter()
            .map(|l| {
                let models: Vec<_> = l.models.iter().map(|(p, _)| p.clone()).collect();
                (l.name.clone(), models, l.tokenizer, l.budget_tokens)
            })
            .collect()
    };
    assert_eq!(llms(&parsed), llms(&defaults));
    assert_eq!(parsed.profiles.agents, defaults.profiles.agents);
    assert_eq!(
        (
            &parsed.profiles.model,
            &parsed.profiles.llm,
            &parsed.profiles.agent
        ),
        (&None, &Selection::Auto, &Selection::Auto)
    );
    assert_eq!(parsed.enrichment, defaults.enrichment);
    for kind in HintKind::ALL {
        let (a, b) = (parsed.hints.rule(kind), defaults.hints.rule(kind));
        assert_eq!(
            (a.enabled, a.max_per_session, a.models.len()),
            (b.enabled, b.max_per_session, b.models.len())
        );
    }
    assert_eq!(
        PipelineConfig::embedded_default().source,
        ConfigSource::Embedded
    );
}

#[test]
fn an_empty_file_is_the_current_version_with_defaults() {
    let parsed = parse("").unwrap();
    assert_eq!(parsed.file_version, SCHEMA_VERSION);
    assert_eq!(parsed.dedup, load::defaults().dedup);
}

#[test]
fn every_knob_is_read() {
    let parsed = parse(
        r#"
schema_version = 2
[dedup]
enabled = false
min_body_bytes = 100
ttl_secs = 60
max_entries = 9
max_context_bytes = 1000
[dedup.near_ref]
enabled = true
max_changes = 3
min_body_bytes = 200
[encoding]
enabled = false
budget_tokens = 5000
[profiles]
tokenizer = "chars:3.5"
client = "content"
[telemetry]
enabled = false
sample_rate = 0.25
max_file_bytes = 4096
max_age_days = 7
"#,
    )
    .unwrap();
    let d = &parsed.dedup;
    assert!(!d.enabled);
    assert_eq!(
        (d.min_body_bytes, d.ttl, d.max_entries, d.max_context_bytes),
        (100, Duration::from_secs(60), 9, 1000)
    );
    assert_eq!(
        d.near_ref,
        NearRefSettings {
            enabled: true,
            max_changes: 3,
            min_body_bytes: 200
        }
    );
    assert_eq!(
        parsed.encoding,
        EncodingSettings {
            enabled: false,
            budget_tokens: 5000,
            deadline: std::time::Duration::from_secs(2),
            inline_chars: super::InlineChars::Auto,
        }
    );
    assert_eq!(parsed.tokenizer, Some(TokenizerChoice::CharsPerToken(3.5)));
    assert_eq!(parsed.client, ClientProfile::Content);
    assert_eq!(
        parsed.telemetry,
        TelemetrySettings {
            enabled: false,
            sample_rate: 0.25,
            max_file_bytes: 4096,
            max_age_days: 7
        }
    );
    assert!(!parsed.client.forwards_structured(Some("claude-code")));
    assert!(ClientProfile::Auto.forwards_structured(Some("claude-code")));
    assert!(!ClientProfile::Auto.forwards_structured(Some("inspector")));
    assert!(ClientProfile::Structured.forwards_structured(None));
}

#[test]
fn unknown_keys_are_named_with_their_path_and_a_suggestion() {
    let e = error("[dedup]\nmin_body_byte = 3\n");
    assert!(
        e.starts_with("/cfg/pipeline_config.toml:2:1: dedup.min_body_byte: unknown key"),
        "{e}"
    );
    assert!(e.contains("did you mean `min_body_bytes`?"), "{e}");

    let e = error("[endpoints.\"fs__*\"]\nnear_reff = true\n");
    assert!(
        e.contains("endpoints.\"fs__*\".near_reff: unknown key"),
        "{e}"
    );

    let e = error("[telemetri]\n");
    assert!(
        e.contains("telemetri: unknown key; expected one of: schema_version"),
        "{e}"
    );
}

#[test]
fn wrong_types_and_values_say_what_was_expected() {
    let e = error("[dedup]\nttl_secs = \"1h\"\n");
    assert!(
        e.contains("dedup.ttl_secs: expected an integer of at least 1, found the string \"1h\""),
        "{e}"
    );
    let e = error("[profiles]\ntokenizer = \"claude\"\n");
    assert!(
        e.contains("profiles.tokenizer: expected \"auto\", \"o200k\", \"cl100k\""),
        "{e}"
    );
    let e = error("[tools.\"gh__*\"]\nside_effect = \"harmless\"\n");
    assert!(
        e.contains("tools.\"gh__*\".side_effect: expected one of \"pure\", \"read_only\""),
        "{e}"
    );
    let e = error("[tools.\"gh__*\"]\ninvalidates = [\"a[\"]\n");
    assert!(
        e.contains("tools.\"gh__*\".invalidates[0]: expected a glob pattern"),
        "{e}"
    );
    let e = error("[encoding]\nbudget_tokens = 10\n");
    assert!(e.contains("expected an integer of at least 100"), "{e}");
}

#[test]
fn a_newer_schema_is_refused_with_advice() {
    let e = error("schema_version = 4\n[dedup]\nfuture_knob = 1\n");
    assert!(
        e.contains("schema_version: expected a schema version this devboy understands (1 to 3), found version 4, written by a newer devboy; upgrade devboy"),
        "{e}"
    );
    let e = error("schema_version = 0\n");
    assert!(e.contains("expected a schema version from 1 to 3"), "{e}");
}

#[test]
fn version_1_is_migrated_with_a_note_per_moved_key() {
    let parsed = parse(
        r#"
schema_version = 1
[dedup]
enabled = true
lru_size = 5
min_body_chars = 300
enabled_per_endpoint = { "ci__status" = false }
[templates]
endpoint_overrides = { "ci__status" = "csv_from_md", "gh__*" = "auto" }
[mckp]
recursion_depth = 3
[telemetry]
enabled = false
sample_rate = 0.5
"#,
    )
    .unwrap();
    assert_eq!(parsed.file_version, 1);
    assert_eq!(parsed.dedup.max_entries, 5);
    assert_eq!(parsed.dedup.min_body_bytes, 300);
    let status = parsed.endpoint("ci__status");
    assert!(!status.dedup);
    assert_eq!(status.template.as_deref(), Some("csv_from_md"));
    assert_eq!(parsed.endpoint("gh__list").template, None, "auto");
    assert_eq!(parsed.endpoints.len(), 2, "one rule per pattern");
    // Version 1's telemetry keys mean the same in version 2.
    assert!(!parsed.telemetry.enabled);
    assert_eq!(parsed.telemetry.sample_rate, 0.5);
    assert_eq!(
        parsed.telemetry.max_file_bytes,
        load::defaults().telemetry.max_file_bytes
    );
    let notes = parsed.warnings.join("\n");
    for key in [
        "dedup.lru_size: schema 1 key, read as dedup.max_entries",
        "dedup.min_body_chars",
        "dedup.enabled_per_endpoint",
        "templates.endpoint_overrides",
        "mckp.recursion_depth: schema 1 key, no longer used",
    ] {
        assert!(notes.contains(key), "missing {key:?} in\n{notes}");
    }
    assert!(!notes.contains("telemetry"), "nothing moved: {notes}");
    let e = error("schema_version = 1\n[telemetry]\nmax_age_days = 3\n");
    assert!(e.contains("telemetry.max_age_days: unknown key"), "{e}");
    // Version-2 sections are not version-1 keys.
    let e = error("schema_version = 1\n[encoding]\nenabled = true\n");
    assert!(e.contains("encoding: unknown key"), "{e}");
}

#[test]
fn endpoint_rules_apply_in_file_order() {
    let parsed = parse(
        r#"
[dedup]
min_body_bytes = 600
[endpoints."ci__*"]
dedup = false
near_ref = true
[endpoints."ci__logs"]
dedup = true
template = "fenced"
"#,
    )
    .unwrap();
    let logs = parsed.endpoint("ci__logs");
    assert_eq!(
        logs,
        EndpointSettings {
            dedup: true,
            min_body_bytes: 600,
            near_ref: true,
            encode: true,
            template: Some("fenced".into())
        }
    );
    let status = parsed.endpoint("ci__status");
    assert!(!status.dedup && status.near_ref);
    let other = parsed.endpoint("fs__read_file");
    assert!(other.dedup && !other.near_ref && other.template.is_none());
    // The same file and name give the same answer: resolution is pure.
    assert_eq!(parsed.endpoint("ci__logs"), logs);
}

#[test]
fn tool_rules_override_annotations_and_list_invalidations() {
    let parsed = parse(
        r#"
[tools."gh__*"]
side_effect = "read_only"
[tools."gh__create_*"]
side_effect = "mutating"
invalidates = ["gh__list_*", "gh__search_issues"]
"#,
    )
    .unwrap();
    assert_eq!(
        parsed.configured_side_effect("gh__list_issues"),
        Some(SideEffectClass::ReadOnly)
    );
    assert_eq!(
        parsed.configured_side_effect("gh__create_issue"),
        Some(SideEffectClass::Mutating)
    );
    assert_eq!(parsed.configured_side_effect("fs__write"), None);
    assert!(parsed.invalidates("gh__create_issue", "gh__list_issues"));
    assert!(parsed.invalidates("gh__create_issue", "gh__search_issues"));
    assert!(!parsed.invalidates("gh__create_issue", "gh__get_issue"));
    assert!(!parsed.invalidates("gh__list_issues", "gh__list_issues"));
    assert!(parsed.has_invalidations("gh__create_pr"));
    assert!(!parsed.has_invalidations("gh__list_issues"));
}

#[test]
fn annotations_map_to_classes() {
    use SideEffectClass::*;
    assert_eq!(
        SideEffectClass::from_annotations(Some(true), None),
        ReadOnly
    );
    assert_eq!(
        SideEffectClass::from_annotations(Some(false), Some(true)),
        Destructive
    );
    assert_eq!(
        SideEffectClass::from_annotations(None, Some(false)),
        Unknown
    );
    assert!(!Pure.may_mutate() && !ReadOnly.may_mutate());
    assert!(Mutating.may_mutate() && Destructive.may_mutate() && Unknown.may_mutate());
}

#[test]
fn loading_a_missing_file_names_it() {
    let e =
        PipelineConfig::load(Path::new("/nonexistent/pipeline_config.toml")).expect_err("missing");
    assert!(
        e.to_string()
            .starts_with("/nonexistent/pipeline_config.toml: cannot read the file"),
        "{e}"
    );
}

#[test]
fn telemetry_values_are_checked_with_their_path() {
    let e = error("[telemetry]\nsample_rate = 1.5\n");
    assert!(
        e.contains("telemetry.sample_rate: expected a number from 0 to 1, found the number 1.5"),
        "{e}"
    );
    let e = error("[telemetry]\nsample_rate = \"all\"\n");
    assert!(
        e.contains("telemetry.sample_rate: expected a number from 0 to 1"),
        "{e}"
    );
    let e = error("[telemetry]\nmax_file_bytes = 10\n");
    assert!(
        e.contains("telemetry.max_file_bytes: expected an integer of at least 1024"),
        "{e}"
    );
    let e = error("[telemetry]\nmax_age_days = 0\n");
    assert!(
        e.contains("telemetry.max_age_days: expected an integer of at least 1"),
        "{e}"
    );
    let e = error("[telemetry]\nenable = true\n");
    assert!(e.contains("telemetry.enable: unknown key"), "{e}");
    assert!(e.contains("did you mean `enabled`?"), "{e}");
    // Whole numbers are rates too.
    assert_eq!(
        parse("[telemetry]\nsample_rate = 0\n")
            .unwrap()
            .telemetry
            .sample_rate,
        0.0
    );
}

#[test]
fn the_environment_can_only_turn_telemetry_off() {
    use std::ffi::OsString;
    let on = load::defaults().telemetry;
    let env =
        |value: &'static str| move |k: &str| (k == TELEMETRY_ENV).then(|| OsString::from(value));
    for off in ["off", "OFF", "0", "false", "no", " off "] {
        assert!(!on.with_env(&env(off)).enabled, "{off:?}");
    }
    for keep in ["on", "1", "", "yes"] {
        assert!(on.with_env(&env(keep)).enabled, "{keep:?}");
    }
    assert!(on.with_env(&|_| None).enabled);
    let disabled = TelemetrySettings {
        enabled: false,
        ..on.clone()
    };
    assert!(!disabled.with_env(&env("on")).enabled, "never turns it on");
    assert_eq!(on.with_env(&env("off")).sample_rate, on.sample_rate);
}

#[test]
fn a_version_2_file_means_what_it_meant_and_names_version_3_keys() {
    let parsed = parse(
        "schema_version = 2\n[profiles]\ntokenizer = \"cl100k\"\n[tools.\"gh__*\"]\nside_effect = \"read_only\"\n",
    )
    .unwrap();
    assert_eq!(parsed.file_version, 2);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(parsed.tokenizer, Some(TokenizerChoice::Cl100k));
    for (text, key) in [
        (
            "schema_version = 2\n[hints.ref]\nenabled = false\n",
            "hints",
        ),
        (
            "schema_version = 2\n[profiles]\nagent = \"auto\"\n",
            "profiles.agent",
        ),
        (
            "schema_version = 2\n[tools.\"gh__*\"]\nvalue_class = \"critical\"\n",
            "tools.\"gh__*\".value_class",
        ),
    ] {
        let e = error(text);
        assert!(
            e.contains(&format!("{key}: expected a key of schema version 2"))
                && e.contains("set `schema_version = 3` to use it"),
            "{e}"
        );
    }
}

fn context(model: Option<&str>, events: u64, compactions: u64) -> SessionContext {
    SessionContext {
        model: model.map(str::to_owned),
        stats: SessionStats {
            events,
            compactions,
        },
    }
}

#[test]
fn the_llm_profile_follows_the_model_and_a_file_profile_wins() {
    let defaults = parse("").unwrap();
    let none = defaults.resolve_session(&context(None, 0, 0));
    assert_eq!(
        (none.llm.as_deref(), none.tokenizer),
        (None, TokenizerChoice::O200k)
    );
    let claude = defaults.resolve_session(&context(Some("claude-sonnet-4-5-20250929"), 0, 0));
    assert_eq!(claude.llm.as_deref(), Some("claude"));
    assert_eq!(claude.tokenizer, TokenizerChoice::O200k);
    let bedrock = defaults.resolve_session(&context(Some("us.anthropic.claude-opus-4-1"), 0, 0));
    assert_eq!(bedrock.llm.as_deref(), Some("claude"));
    let gpt4 = defaults.resolve_session(&context(Some("gpt-4-0613"), 0, 0));
    assert_eq!(
        (gpt4.llm.as_deref(), gpt4.tokenizer),
        (Some("openai_cl100k"), TokenizerChoice::Cl100k)
    );
    let gpt4o = defaults.resolve_session(&context(Some("gpt-4o-mini"), 0, 0));
    assert_eq!(gpt4o.llm.as_deref(), Some("openai_o200k"));

    let file = parse(
        r#"
[profiles]
model = "qwen3-coder:30b"
[profiles.llms.local]
models = ["qwen*"]
tokenizer = "chars:3.5"
budget_tokens = 4000
[profiles.llms.claude]
budget_tokens = 30000
"#,
    )
    .unwrap();
    // The pinned model applies when the client reports none.
    let local = file.resolve_session(&context(None, 0, 0));
    assert_eq!(local.model.as_deref(), Some("qwen3-coder:30b"));
    assert_eq!(local.llm.as_deref(), Some("local"));
    assert_eq!(local.tokenizer, TokenizerChoice::CharsPerToken(3.5));
    assert_eq!(local.budget_tokens, 4000);
    // A reported model wins over the pin; a built-in changed in the file
    // keeps its models; a budget above encoding.budget_tokens is capped.
    let claude = file.resolve_session(&context(Some("claude-haiku-4-5"), 0, 0));
    assert_eq!(claude.llm.as_deref(), Some("claude"));
    assert_eq!(claude.budget_tokens, 25_000);

    // An explicit tokenizer wins over the profile's.
    let pinned = parse("[profiles]\ntokenizer = \"cl100k\"\nllm = \"claude\"\n").unwrap();
    let s = pinned.resolve_session(&context(None, 0, 0));
    assert_eq!(
        (s.llm.as_deref(), s.tokenizer),
        (Some("claude"), TokenizerChoice::Cl100k)
    );
}

#[test]
fn the_agent_profile_follows_the_session_and_endpoints_keep_their_own() {
    let config = parse(
        r#"
[dedup.near_ref]
enabled = false
[profiles.agents.busy]
min_events = 50
min_body_bytes = 128
[endpoints."ci__*"]
near_ref = false
"#,
    )
    .unwrap();
    let fresh = config.resolve_session(&context(None, 0, 0));
    assert_eq!(fresh.agent, None);
    assert_eq!(fresh.ttl, Duration::from_secs(1800));
    assert!(!fresh.near_ref);
    // `marathon` (built in) after two compactions.
    let long = config.resolve_session(&context(None, 10, 2));
    assert_eq!(long.agent.as_deref(), Some("marathon"));
    assert_eq!(long.ttl, Duration::from_secs(7200));
    assert!(config.endpoint_in("gh__get_pipeline", &long).near_ref);
    assert!(
        !config.endpoint_in("ci__status", &long).near_ref,
        "the endpoint's own setting wins"
    );
    // Both apply: the later profile in the file wins.
    let both = config.resolve_session(&context(None, 60, 3));
    assert_eq!(both.agent.as_deref(), Some("busy"));
    assert_eq!(both.min_body_bytes, 128);
    assert_eq!(both.ttl, Duration::from_secs(1800), "busy sets no ttl");
    // Named: applies whatever the statistics.
    let named = parse("[profiles]\nagent = \"marathon\"\n").unwrap();
    assert_eq!(
        named.resolve_session(&context(None, 0, 0)).agent.as_deref(),
        Some("marathon")
    );
    // Resolution is pure.
    let ctx = context(Some("claude-x"), 60, 3);
    assert_eq!(config.resolve_session(&ctx), config.resolve_session(&ctx));

    let e = error("[profiles]\nagent = \"sprint\"\n");
    assert!(
        e.contains("profiles.agent: expected \"auto\" or the name of a [profiles.agents.NAME] table: \"auto\", \"marathon\", found the string \"sprint\""),
        "{e}"
    );
    let e = error("[profiles.agents.x]\nmin_compaction = 1\n");
    assert!(e.contains("did you mean `min_compactions`?"), "{e}");
}

#[test]
fn hint_rules_gate_by_kind_model_and_count() {
    let config = parse(
        r#"
[hints.ref]
max_per_session = 2
[hints.elided]
enabled = false
[hints.encoded]
models = ["claude-*"]
"#,
    )
    .unwrap();
    let rule = |k| config.hints.rule(k);
    assert!(rule(HintKind::Ref).allows(None, 1));
    assert!(!rule(HintKind::Ref).allows(None, 2));
    assert!(!rule(HintKind::Elided).allows(Some("claude-x"), 0));
    assert!(rule(HintKind::NearRef).allows(None, 1_000));
    assert!(rule(HintKind::Encoded).allows(Some("claude-opus-4"), 0));
    assert!(!rule(HintKind::Encoded).allows(Some("gpt-4o"), 0));
    assert!(
        !rule(HintKind::Encoded).allows(None, 0),
        "a model-specific hint needs a known model"
    );
    let e = error("[hints.schema_explainer]\nenabled = true\n");
    assert!(
        e.contains(
            "hints.schema_explainer: unknown key; expected one of: ref, near_ref, elided, encoded"
        ),
        "{e}"
    );
}

#[test]
fn tool_value_models_merge_in_file_order() {
    use crate::value_model::{ArgSource, FollowUp, ValueClass};
    let config = parse(
        r#"
[tools."gh__*"]
value_class = "supporting"
rate_limit_host = "api.github.com"
freshness_secs = 60
invalidates = ["gh__list_*"]
[tools."gh__list_issues"]
value_class = "critical"
typical_tokens = 1800
latency_ms = 350
follow_up = [{ tool = "gh__get_issue", probability = 0.45, args = { number = "/0/number" } }]
fail_fast_after_n = 3
speculate = true
side_effect = "read_only"
[enrichment]
enabled = true
prefetch_timeout_ms = 250
max_parallel = 2
budget_tokens = 4000
min_probability = 0.5
"#,
    )
    .unwrap();
    let m = config.tool_model("gh__list_issues");
    assert_eq!(m.value_class, Some(ValueClass::Critical));
    assert_eq!(m.rate_limit_host.as_deref(), Some("api.github.com"));
    assert_eq!(m.freshness, Some(Duration::from_secs(60)));
    assert_eq!(
        (
            m.typical_tokens,
            m.latency_ms,
            m.fail_fast_after_n,
            m.speculate
        ),
        (Some(1800), Some(350), Some(3), Some(true))
    );
    assert_eq!(
        m.follow_up,
        vec![FollowUp {
            tool: "gh__get_issue".into(),
            probability: 0.45,
            args: vec![("number".into(), ArgSource::Result("/0/number".into()))],
            limit: FollowUp::DEFAULT_LIMIT,
        }]
    );
    assert_eq!(m.invalidates, vec!["gh__list_*".to_owned()]);
    let other = config.tool_model("gh__get_issue");
    assert_eq!(other.value_class, Some(ValueClass::Supporting));
    assert!(other.follow_up.is_empty());
    assert!(config.tool_model("fs__read").is_empty());
    let session = config.resolve_session(&SessionContext::default());
    assert_eq!(
        config.freshness("gh__get_issue", &session),
        Duration::from_secs(60)
    );
    assert_eq!(
        config.freshness("fs__read", &session),
        Duration::from_secs(1800)
    );
    let e = &config.enrichment;
    assert!(e.enabled);
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    assert_eq!(
        (
            e.prefetch_timeout,
            e.max_parallel,
            e.budget_tokens,
            e.min_probability
        ),
        (Duration::from_millis(250), 2, 4000, 0.5)
    );

    for (text, want) in [
        (
            "[tools.a]\nvalue_class = \"vital\"\n",
            "tools.a.value_class: expected one of \"critical\", \"supporting\", \"optional\", \"audit_only\"",
        ),
        (
            "[tools.a]\nfollow_up = [{ tool = \"b\" }]\n",
            "tools.a.follow_up[0]: expected a table with both `tool` and `probability`",
        ),
        (
            "[tools.a]\nfollow_up = [{ tool = \"b\", probability = 1.5 }]\n",
            "tools.a.follow_up[0].probability: expected a number from 0 to 1",
        ),
        (
            "[tools.a]\nfollow_up = [{ tool = \"b\", probability = 0.5, args = { n = \"number\" } }]\n",
            "tools.a.follow_up[0].args.n: expected a JSON pointer into the result",
        ),
        (
            "[tools.\"fs__*\"]\nfollow_up = [{ tool = \"b\", probability = 0.5, args = { path = \"$match:(unclosed\" } }]\n",
            "tools.\"fs__*\".follow_up[0].args.path: expected \"$match:REGEX\" with a valid regex",
        ),
        (
            "[tools.a]\nfollow_up = [{ tool = \"b\", probability = 0.5, args = { r = \"$args\" } }]\n",
            "tools.a.follow_up[0].args.r: expected \"$args/NAME\"",
        ),
        (
            "[tools.a]\nfollow_up = [{ tool = \"b\", probability = 0.5, args = { r = [1] } }]\n",
            "tools.a.follow_up[0].args.r: expected a JSON pointer into the result",
        ),
        (
            "[tools.a]\nfollow_up = [{ tool = \"b\", probability = 0.5, limit = 0 }]\n",
            "tools.a.follow_up[0].limit: expected an integer of at least 1",
        ),
        (
            "[enrichment]\nmode = \"eager\"\n",
            "enrichment.mode: expected one of \"prefetch\", \"inline\"",
        ),
        (
            "[tools.a]\nfollow_up = [{ tool = \"b\", probability = 0.5, chance = 1 }]\n",
            "tools.a.follow_up[0].chance: unknown key",
        ),
    ] {
        let e = error(text);
        assert!(e.contains(want), "{e}\nwanted: {want}");
    }
}

#[test]
fn follow_up_sources_parse_and_print_back_as_written() {
    use super::schema::KeyValue;
    use crate::value_model::ArgSource;
    let config = parse(
        r#"
[tools."git__git_log"]
follow_up = [{ tool = "git__git_show", probability = 0.5, args = { repo_path = "$args/repo_path", revision = "$match:Commit: '?([0-9a-f]{40})" }, limit = 1 }]
[tools."fs__search_files"]
follow_up = [{ tool = "fs__read_text_file", probability = 0.6, args = { path = "$lines", head = 40, raw = true, p = "/items/*/path" } }, { tool = "fs__x", probability = 0.3 }]
"#,
    )
    .unwrap();
    let git = config.tool_model("git__git_log").follow_up;
    assert_eq!(git[0].limit, 1);
    assert_eq!(git[0].args[0].1, ArgSource::Args("/repo_path".into()));
    let ArgSource::Match(re) = &git[0].args[1].1 else {
        panic!("{:?}", git[0].args[1]);
    };
    let sha = "a".repeat(40);
    assert_eq!(
        re.captures(&format!("Commit: '{sha}'"))
            .map(|c| c[1].to_owned()),
        Some(sha)
    );
    let fs = config.tool_model("fs__search_files").follow_up;
    assert_eq!(fs[0].args[0].1, ArgSource::Lines);
    assert_eq!(fs[0].args[1].1, ArgSource::Literal(40.into()));
    assert_eq!(fs[0].args[2].1, ArgSource::Literal(true.into()));
    assert_eq!(fs[1], crate::value_model::FollowUp::new("fs__x", 0.3));
    let shown = |at| {
        config
            .key_value("tools.*.follow_up", at)
            .unwrap()
            .to_string()
    };
    assert_eq!(
        shown(0),
        r#"[{ tool = "git__git_show", probability = 0.5, args = { repo_path = "$args/repo_path", revision = "$match:Commit: '?([0-9a-f]{40})" }, limit = 1 }]"#
    );
    assert_eq!(
        shown(1),
        r#"[{ tool = "fs__read_text_file", probability = 0.6, args = { path = "$lines", head = 40, raw = true, p = "/items/*/path" } }, { tool = "fs__x", probability = 0.3 }]"#
    );
    // What `tune show` prints reads back as the same items.
    let again = parse(&format!(
        "[tools.\"git__git_log\"]\nfollow_up = {}\n",
        shown(0)
    ))
    .unwrap();
    assert_eq!(again.tool_model("git__git_log").follow_up, git);
    assert!(matches!(
        config.key_value("enrichment.mode", 0),
        Some(KeyValue::EnrichmentMode(super::EnrichmentMode::Prefetch))
    ));
}

#[test]
fn rule_matches_name_the_tools_each_glob_table_matches() {
    let config = parse(
        "schema_version = 3\n\
         [endpoints.\"filesystem__read_*\"]\ndedup = true\n\
         [tools.\"fs__write_*\"]\nside_effect = \"mutating\"\n",
    )
    .unwrap();
    let tools = [
        "filesystem__read_text_file",
        "filesystem__read_media_file",
        "filesystem__write_file",
    ];
    let matches = config.rule_matches(&tools);
    assert_eq!(matches.len(), 2);
    assert_eq!(matches[0].table, "endpoints");
    assert_eq!(
        matches[0].matches,
        ["filesystem__read_text_file", "filesystem__read_media_file"]
    );
    assert_eq!(matches[1].pattern, "fs__write_*");
    assert!(
        matches[1].matches.is_empty(),
        "the misspelt prefix matches nothing"
    );
}

/// The described keys found in a parsed file, as (described path, key
/// path in the file).
fn described_keys(
    entries: &[crate::config::tree::Entry],
    spec: &str,
    path: &str,
    out: &mut Vec<(String, String)>,
) {
    for entry in entries {
        let spec_path = if spec.is_empty() {
            entry.key.clone()
        } else {
            format!("{spec}.{}", entry.key)
        };
        let file_path = if path.is_empty() {
            entry.key.clone()
        } else {
            format!("{path}.{}", entry.key)
        };
        let key = schema::lookup(&spec_path)
            .unwrap_or_else(|| panic!("{file_path} is in the file but not described"));
        match key.kind {
            KeyKind::Section => {
                let inner = entry.node.as_table().expect("a table");
                described_keys(inner, &spec_path, &file_path, out);
            }
            KeyKind::Patterns | KeyKind::Names | KeyKind::HintKinds => {
                for named in entry.node.as_table().expect("a table") {
                    let inner = named.node.as_table().expect("a table");
                    let named_path = format!("{file_path}.{}", named.key);
                    described_keys(inner, &format!("{spec_path}.*"), &named_path, out);
                }
            }
            _ => out.push((spec_path, file_path)),
        }
    }
}

use super::schema::{self, KeyKind, KeyValue};

/// A described key's default, read as the loader reads the key.
fn default_of(key: &schema::KeySpec) -> Option<KeyValue> {
    let literal = key.default?;
    load::read_literal(key, literal, Path::new("<test>"), &load::defaults())
        .unwrap_or_else(|e| panic!("{}: default {literal} does not read: {e}", key.path))
}

#[test]
fn the_embedded_file_holds_every_described_default_and_nothing_undescribed() {
    let root = crate::config::tree::parse_toml(EMBEDDED_PIPELINE_TOML)
        .unwrap_or_else(|e| panic!("{}", e.message));
    let mut found = Vec::new();
    described_keys(root.as_table().expect("a table"), "", "", &mut found);
    let parsed = parse(EMBEDDED_PIPELINE_TOML).unwrap();
    let defaults = load::defaults();
    for key in schema::KEYS.iter().filter(|k| !k.kind.is_table()) {
        let Some(default) = default_of(key) else {
            if key.default.is_some() {
                // schema_version: what the file says is the current version.
                assert_eq!(key.kind, KeyKind::Version);
                assert_eq!(key.default, Some("3"));
                assert_eq!(SCHEMA_VERSION, 3);
                assert!(found.iter().any(|(s, _)| s == key.path));
            }
            continue;
        };
        let in_file: Vec<&String> = found
            .iter()
            .filter(|(s, _)| s == key.path)
            .map(|(_, f)| f)
            .collect();
        assert!(
            !in_file.is_empty(),
            "{} (a default) is not in the file",
            key.path
        );
        // Every table the key is in (the hint kinds for `hints.*`).
        let instances = if key.path.starts_with("hints.*") {
            HintKind::ALL.len()
        } else {
            1
        };
        for at in 0..instances {
            let shown = |c: &PipelineConfig| c.key_value(key.path, at).map(|s| s.to_string());
            assert_eq!(
                shown(&parsed),
                Some(default.to_string()),
                "{} in the file",
                key.path
            );
            assert_eq!(
                shown(&defaults),
                Some(default.to_string()),
                "{} built in",
                key.path
            );
        }
    }
}

/// A valid value of `kind` other than `default`.
fn sample(key: &schema::KeySpec) -> String {
    match key.kind {
        KeyKind::Bool if key.default == Some("true") => "false".into(),
        KeyKind::Bool => "true".into(),
        KeyKind::Count { min } => (min + 11).to_string(),
        KeyKind::Days => "9".into(),
        KeyKind::Fraction => "0.35".into(),
        KeyKind::Text => "\"sample\"".into(),
        KeyKind::Globs => "[\"s*\", \"t?\"]".into(),
        KeyKind::Paths => "[\"/srv/shared\"]".into(),
        KeyKind::Tokenizer => "\"cl100k\"".into(),
        KeyKind::Client => "\"content\"".into(),
        KeyKind::InlineChars => "12000".into(),
        KeyKind::Selection if key.name() == "llm" => "\"claude\"".into(),
        KeyKind::Selection => "\"marathon\"".into(),
        KeyKind::SideEffect => "\"mutating\"".into(),
        KeyKind::ValueClass => "\"audit_only\"".into(),
        KeyKind::FollowUps => {
            "[{ tool = \"t\", probability = 0.5, args = { p = \"$lines\" }, limit = 2 }]".into()
        }
        KeyKind::EnrichmentMode => "\"inline\"".into(),
        other => panic!("{}: no sample for {other:?}", key.path),
    }
}

#[test]
fn every_described_key_is_read_into_a_field_and_reported_back() {
    for key in schema::KEYS
        .iter()
        .filter(|k| !k.kind.is_table() && k.kind != KeyKind::Version)
    {
        let literal = sample(key);
        // A new name in each table of named tables.
        let table = key
            .parent()
            .replace("endpoints.*", "endpoints.\"x__*\"")
            .replace("tools.*", "tools.\"x__*\"")
            .replace("llms.*", "llms.local")
            .replace("agents.*", "agents.mine")
            .replace("hints.*", "hints.elided");
        let text = format!("[{table}]\n{} = {literal}\n", key.name());
        let config = parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let at = match key.path.split(".*").next() {
            Some("profiles.llms") => config.profiles.llms.len() - 1,
            Some("profiles.agents") => config.profiles.agents.len() - 1,
            Some("hints") => HintKind::Elided.index(),
            _ => 0,
        };
        let expected = load::read_literal(key, &literal, Path::new("<test>"), &config)
            .unwrap()
            .unwrap()
            .to_string();
        let got = config.key_value(key.path, at).map(|s| s.to_string());
        assert_eq!(got, Some(expected.clone()), "{text}");
        let before = load::defaults()
            .key_value(key.path, at)
            .map(|s| s.to_string());
        assert_ne!(
            before,
            Some(expected),
            "{}: the sample is the default",
            key.path
        );
    }
}

#[test]
fn a_members_file_overrides_only_the_keys_it_sets_of_the_projects() {
    let dir = std::env::temp_dir().join(format!("devboy-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let repo = dir.join("checkout");
    let nested = repo.join("src").join("deep");
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join(PROJECT_DIR_NAME)).unwrap();
    let project = repo.join(PROJECT_DIR_NAME).join(FILE_NAME);
    std::fs::write(
        &project,
        "schema_version = 3\n[dedup]\nttl_secs = 900\nmax_entries = 512\n\n[endpoints.\"gh__*\"]\nnear_ref = true\n\n[endpoints.\"gh__list_issues\"]\ndedup = false\n",
    )
    .unwrap();
    let own = dir.join("own.toml");
    std::fs::write(
        &own,
        "schema_version = 3\n[dedup]\nmax_entries = 1024\n\n[endpoints.\"gh__list_issues\"]\ndedup = true\n",
    )
    .unwrap();
    // Found from anywhere inside the checkout, never above its root.
    assert_eq!(project_file(&nested), Some(project.clone()));
    assert_eq!(project_file(&dir), None);
    let outside = dir.join("elsewhere");
    std::fs::create_dir_all(outside.join(".git")).unwrap();
    assert_eq!(project_file(&outside), None);

    let config = PipelineConfig::layered(Some(&project), Some(&own)).unwrap();
    assert_eq!(config.layers, vec![project.clone(), own.clone()]);
    assert_eq!(config.dedup.ttl, Duration::from_secs(900), "the project's");
    assert_eq!(config.dedup.max_entries, 1024, "the member's");
    let issues = config.endpoint("gh__list_issues");
    assert!(issues.dedup, "the member's rule comes last and wins");
    assert!(issues.near_ref, "the project's other rule still applies");
    assert_eq!(config.key_origins["dedup.ttl_secs"], project);
    assert_eq!(config.key_origins["dedup.max_entries"], own);
    assert_eq!(config.key_origins["endpoints.*.near_ref#0"], project);
    assert_eq!(config.key_origins["endpoints.*.dedup#2"], own);
    assert!(!config.key_origins.contains_key("dedup.min_body_bytes"));
    // Either alone; neither is the embedded default.
    let only = PipelineConfig::layered(Some(&project), None).unwrap();
    assert_eq!(only.dedup.max_entries, 512);
    assert_eq!(only.layers, vec![project.clone()]);
    let none = PipelineConfig::layered(None, None).unwrap();
    assert!(none.layers.is_empty() && none.key_origins.is_empty());
    // The file `tune` first writes is the documented default: its values
    // equal to the built-in defaults do not undo the project's.
    let documented = dir.join("documented.toml");
    std::fs::write(
        &documented,
        EMBEDDED_PIPELINE_TOML.replace("max_entries = 256", "max_entries = 2048"),
    )
    .unwrap();
    let config = PipelineConfig::layered(Some(&project), Some(&documented)).unwrap();
    assert_eq!(config.dedup.ttl, Duration::from_secs(900), "the project's");
    assert_eq!(config.dedup.max_entries, 2048, "the member's own change");
    assert_eq!(config.key_origins["dedup.ttl_secs"], project);
    assert!(config.endpoint("gh__x").near_ref, "the project's rule");
    // A project file's bad key names the file, and the member's file applies.
    std::fs::write(&project, "[dedup]\nttl = 3\n").unwrap();
    let config = PipelineConfig::layered(Some(&project), Some(&own)).unwrap();
    assert!(
        config.problems[0].contains(".devboy"),
        "{:?}",
        config.problems
    );
    assert_eq!(config.dedup.max_entries, 1024, "the member's own");
    // A project file that does not load at all names itself.
    std::fs::write(&project, "[dedup\n").unwrap();
    let err = PipelineConfig::layered(Some(&project), Some(&own)).unwrap_err();
    assert!(err.to_string().contains(".devboy"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inline_chars_follows_the_client_unless_the_file_names_a_number() {
    use super::{InlineChars, CLAUDE_CODE_INLINE_CHARS, CLAUDE_CODE_MAX_TOKENS};
    let config = PipelineConfig::embedded_default();
    assert_eq!(config.encoding.inline_chars, InlineChars::Auto);
    let claude = config.client_bound(Some("claude-code"), None);
    assert_eq!(claude.inline_chars, Some(CLAUDE_CODE_INLINE_CHARS));
    assert_eq!(claude.max_tokens, Some(CLAUDE_CODE_MAX_TOKENS));
    assert_eq!(
        config
            .client_bound(Some("claude-code"), Some(9_000))
            .max_tokens,
        Some(9_000)
    );
    let other = config.client_bound(Some("mcp-inspector"), Some(9_000));
    assert_eq!((other.inline_chars, other.max_tokens), (None, None));
    let set = |text: &str| {
        PipelineConfig::from_str(
            &format!("schema_version = 3\n[encoding]\ninline_chars = {text}\n"),
            Path::new("p.toml"),
        )
    };
    assert_eq!(
        set("30000").unwrap().client_bound(None, None).inline_chars,
        Some(30_000)
    );
    assert_eq!(
        set("\"none\"")
            .unwrap()
            .client_bound(Some("claude-code"), None)
            .inline_chars,
        None
    );
    let wrong = set("12").unwrap();
    assert_eq!(
        wrong.encoding.inline_chars,
        super::InlineChars::Auto,
        "left out"
    );
    let wrong = wrong.problems[0].to_string();
    assert!(
        wrong.contains("inline_chars") && wrong.contains("at least 1000"),
        "{wrong}"
    );
    let env = |v: &'static str| {
        move |k: &str| (k == "MAX_MCP_OUTPUT_TOKENS").then(|| std::ffi::OsString::from(v))
    };
    assert_eq!(
        super::max_output_tokens_with_env(&env("12000")),
        Some(12_000)
    );
    assert_eq!(super::max_output_tokens_with_env(&env("lots")), None);
}

#[test]
fn every_bad_key_is_named_at_once_and_the_good_ones_apply() {
    let config = parse(
        "[dedup]\nmin_body_bytes = \"512\"\nttl = 3\nmax_entries = 99\n\n[encodng]\nenabled = false\n\n[endpoints.\"[x\"]\nencode = false\n\n[endpoints.\"gh__*\"]\nencode = false\ndedupe = true\n\n[tools.\"a__*\"]\nside_effect = \"nope\"\nspeculate = true\n",
    )
    .expect("a file with bad keys still loads");
    assert_eq!(config.dedup.max_entries, 99, "a good key applies");
    assert_eq!(
        config.dedup.min_body_bytes,
        load::defaults().dedup.min_body_bytes,
        "a bad one keeps its default"
    );
    assert!(!config.endpoint("gh__x").encode, "the good rule applies");
    assert_eq!(config.tool_model("a__x").speculate, Some(true));
    assert_eq!(config.tool_model("a__x").side_effect, None);
    let problems = config.problems.join("\n");
    for part in [
        "/cfg/pipeline_config.toml:2:18: dedup.min_body_bytes: expected an integer of at least 1, found the string \"512\"; ignored",
        "/cfg/pipeline_config.toml:3:1: dedup.ttl: unknown key; expected one of: enabled, min_body_bytes, ttl_secs",
        "/cfg/pipeline_config.toml:6:2: encodng: unknown key",
        "did you mean `encoding`?",
        "endpoints.\"[x\": expected a glob pattern",
        "/cfg/pipeline_config.toml:14:1: endpoints.\"gh__*\".dedupe: unknown key",
        "tools.\"a__*\".side_effect: expected one of",
    ] {
        assert!(problems.contains(part), "{part} not in\n{problems}");
    }
    assert_eq!(config.problems.len(), 6, "{problems}");
    assert_eq!(
        config.endpoints.len(),
        1,
        "the rule with a bad glob is left out"
    );
}

#[test]
fn a_version_2_file_names_every_key_of_version_3() {
    let config =
        parse("schema_version = 2\n[hints.ref]\nenabled = true\n[enrichment]\nenabled = true\n")
            .expect("loads");
    let problems = config.problems.join("\n");
    assert!(
        problems.contains("hints") && problems.contains("enrichment"),
        "{problems}"
    );
    assert_eq!(config.problems.len(), 2, "{problems}");
}

#[test]
fn a_serving_devboy_leaves_out_a_layer_it_cannot_read_and_keeps_the_others() {
    let dir = std::env::temp_dir().join(format!("devboy-serving-layers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let project = dir.join("project.toml");
    let own = dir.join("own.toml");
    std::fs::write(&project, "[dedup]\nmax_entries = 77\n").unwrap();
    std::fs::write(&own, "[dedup\nmax_entries = 5\n").unwrap();
    let config = PipelineConfig::layers_or_default(&[project.clone(), own.clone()]);
    assert_eq!(config.dedup.max_entries, 77, "the project's still applies");
    assert_eq!(config.problems.len(), 1, "{:?}", config.problems);
    let problem = &config.problems[0];
    assert!(
        problem.starts_with(&format!("{}:1:", own.display()))
            && problem.contains("invalid TOML")
            && problem.contains("without this file"),
        "{problem}"
    );
    // The other way round, and a version this devboy cannot read.
    std::fs::write(&project, "schema_version = 99\n").unwrap();
    std::fs::write(&own, "[dedup]\nmax_entries = 5\n").unwrap();
    let config = PipelineConfig::layers_or_default(&[project.clone(), own.clone()]);
    assert_eq!(config.dedup.max_entries, 5);
    assert!(
        config.problems[0].contains("upgrade devboy"),
        "{:?}",
        config.problems
    );
    // Nothing readable: the defaults.
    std::fs::write(&own, "= 1\n").unwrap();
    let config = PipelineConfig::layers_or_default(&[project.clone(), own.clone()]);
    assert_eq!(config.dedup, load::defaults().dedup);
    assert_eq!(config.problems.len(), 2);
    // An explicit file that is not there is a command line to refuse.
    let missing = PipelineConfig::resolve_or_default(Some(&dir.join("absent.toml")), None);
    assert!(missing.unwrap_err().to_string().contains("absent.toml"));
    let explicit = PipelineConfig::resolve_or_default(Some(&own), None).unwrap();
    assert_eq!(explicit.problems.len(), 1, "{:?}", explicit.problems);
    let _ = std::fs::remove_dir_all(&dir);
}
