//! Team fingerprints end to end (docs/team.md): members' real devboy
//! sessions over real MCP servers, `devboy tune share` to a real
//! S3-compatible server (moto) or Azure emulator (Azurite) or a shared
//! folder, `devboy tune aggregate`, and a newcomer's `devboy tune analyze`
//! tuned by the team; what each failure looks like; and that nothing a
//! member's tools saw reaches the store.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{peer_toml, Devboy, TempDir};
use devboy_team::columns;
use devboy_testkit::peers;
use devboy_testkit::stores::{AzuriteServer, S3Server};
use devboy_tune::fingerprint::Fingerprint;
use devboy_tune::synthetic::{EndpointSpec, Workload};
use serde_json::json;

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");
const CANARY: &str = "CANARY-team-9d41";

/// One member: a config directory (devboy.toml, pipeline_config.toml,
/// endpoint-names.json) and a telemetry directory (events, the salt).
struct Member {
    root: TempDir,
}

impl Member {
    fn new(tag: &str) -> Self {
        let root = TempDir::new(tag);
        std::fs::create_dir_all(root.path().join("config")).unwrap();
        Self { root }
    }

    fn config(&self) -> PathBuf {
        self.root.path().join("config")
    }

    fn telemetry(&self) -> PathBuf {
        self.root.path().join("telemetry")
    }

    fn write(&self, file: &str, text: &str) {
        std::fs::write(self.config().join(file), text).unwrap();
    }

    /// `devboy ARGS…` as this member, with `env` (a store's credentials).
    fn devboy(&self, args: &[&str], env: &[(String, String)]) -> Output {
        Command::new(DEVBOY)
            .args(args)
            .env("DEVBOY_CONFIG_DIR", self.config())
            .env("DEVBOY_TELEMETRY_DIR", self.telemetry())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("DEVBOY_TELEMETRY")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
    }

    /// Generated telemetry (the tuner's workload generator) instead of
    /// real sessions, for the tests about stores rather than sessions.
    fn generated(&self, workload: &Workload) {
        workload.write(&self.telemetry().join("events")).unwrap();
        self.write("endpoint-names.json", &workload.names_json());
    }
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "devboy failed: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failed(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure\n--- stdout ---\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn team_toml(store: &str, extra: &str) -> String {
    format!("[team]\nstore = \"{store}\"\n{extra}")
}

/// The pipeline config the members run with: reads not deduplicated (a
/// value the tuner set earlier, so it may change it).
const MEMBER_PIPELINE: &str = "schema_version = 3\n\n[endpoints.\"fs__read_text_file\"]\ndedup = false  # tune: D1 2026-11-01: few repeats then\n";

/// Counts the session summaries in `telemetry`.
fn summaries(telemetry: &Path) -> usize {
    let Ok(dir) = std::fs::read_dir(telemetry.join("events")) else {
        return 0;
    };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .map(|text| text.matches("\"kind\":\"session\"").count())
        .sum()
}

/// One real session of `member`: devboy over the filesystem server (and
/// the memory server), the calls `calls` makes, then the session ends and
/// its summary is written.
async fn session(member: &Member, work: &Path, memory: Option<&[(&str, serde_json::Value)]>) {
    let mut config = peer_toml("fs", &peers::server_filesystem(work));
    let memory_file = member.root.path().join("memory.jsonl");
    if memory.is_some() {
        config.push_str(&peer_toml("mem", &peers::server_memory(&memory_file)));
    }
    let before = summaries(&member.telemetry());
    let devboy = Devboy::start_full(
        &config,
        "devboy.toml",
        &[],
        None,
        &[
            ("DEVBOY_CONFIG_DIR", member.config().as_os_str()),
            ("DEVBOY_TELEMETRY_DIR", member.telemetry().as_os_str()),
        ],
    )
    .await;
    let root = work.display().to_string();
    let a = work
        .join(format!("{CANARY}-notes.md"))
        .display()
        .to_string();
    let b = work.join("src").join("lib.rs").display().to_string();
    devboy
        .call("fs__list_directory", json!({"path": root}))
        .await;
    for path in [&a, &b, &a, &a, &b] {
        let r = devboy
            .call("fs__read_text_file", json!({"path": path}))
            .await;
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    devboy
        .call("fs__list_directory", json!({"path": root}))
        .await;
    for (tool, args) in memory.unwrap_or(&[]) {
        devboy.call(tool, args.clone()).await;
    }
    let Devboy { client, dir, .. } = devboy;
    let _ = client.cancel().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while summaries(&member.telemetry()) <= before {
        assert!(
            std::time::Instant::now() < deadline,
            "no session summary within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(dir);
}

/// A project whose file names and contents carry the canary.
fn project(root: &Path) {
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join(format!("{CANARY}-notes.md")),
        format!(
            "# {CANARY}\n\n{}",
            "Quarterly numbers, not for sharing.\n".repeat(60)
        ),
    )
    .unwrap();
    std::fs::write(
        root.join("src").join("lib.rs"),
        format!(
            "// {CANARY}\n{}",
            "pub fn secret() -> u32 { 42 }\n".repeat(80)
        ),
    )
    .unwrap();
}

async fn store_objects(url: &str, env: &[(String, String)]) -> Vec<(String, Vec<u8>)> {
    let store = devboy_team::TeamStore::open(url, env.to_vec()).unwrap();
    let mut out = Vec::new();
    for path in store.objects().await.unwrap() {
        let bytes = store.get(&path).await.unwrap().unwrap().bytes;
        out.push((path.to_string(), bytes.to_vec()));
    }
    out
}

async fn team_rows(url: &str, env: &[(String, String)]) -> Vec<Fingerprint> {
    let store = devboy_team::TeamStore::open(url, env.to_vec()).unwrap();
    let fetched = store
        .get(&store.team_path())
        .await
        .unwrap()
        .expect("a team object");
    columns::read(fetched.bytes).unwrap().rows
}

/// Six members work for real (five sessions each over the filesystem
/// server; member 0 also calls the memory server, one tool in all five
/// sessions and another in only two), share to S3, one aggregates, and a
/// newcomer with one short session is tuned by the team.
#[tokio::test(flavor = "multi_thread")]
async fn six_members_share_to_s3_and_the_team_tunes_a_newcomer() {
    let s3 = S3Server::start();
    s3.create_bucket("devboy-team");
    let url = "s3://devboy-team/acme/backend";
    let env = s3.env();
    // Every path a tool is given carries the canary.
    let work = TempDir::new(&format!("team-work-{CANARY}"));
    project(work.path());
    let members: Vec<Member> = (0..6).map(|i| Member::new(&format!("member{i}"))).collect();
    for m in &members {
        m.write("pipeline_config.toml", MEMBER_PIPELINE);
        m.write("devboy.toml", &team_toml(url, ""));
    }
    let graph = [("mem__read_graph", json!({}))];
    let search = [
        ("mem__read_graph", json!({})),
        ("mem__search_nodes", json!({"query": CANARY})),
    ];
    let (graph, search) = (&graph, &search);
    let runs = members.iter().enumerate().map(|(i, m)| {
        let work = work.path().to_owned();
        async move {
            for s in 0..5 {
                let memory: Option<&[(&str, serde_json::Value)]> = match (i, s) {
                    (0, 0 | 1) => Some(search),
                    (0, _) => Some(graph),
                    _ => None,
                };
                session(m, &work, memory).await;
            }
        }
    });
    futures::future::join_all(runs).await;

    // Each member shares; only endpoints of ≥ 5 sessions leave.
    for m in &members {
        let out = ok(&m.devboy(&["tune", "share"], &env));
        assert!(out.contains("shared "), "{out}");
        assert!(out.contains("fs__read_text_file"), "{out}");
    }
    let first = ok(&members[0].devboy(&["tune", "share"], &env));
    assert!(first.contains("mem__read_graph"), "{first}");
    assert!(!first.contains("mem__search_nodes"), "withheld: {first}");
    assert!(first.contains("withheld 1 endpoint"), "{first}");
    let copy = members[0].telemetry().join("endpoints.parquet");
    let mine = columns::read(std::fs::read(&copy).unwrap().into()).unwrap();
    assert_eq!(mine.rows.len(), 3, "{:?}", mine.rows);
    assert!(mine.member.as_deref().is_some_and(|m| m.len() == 16));

    let out = ok(&members[3].devboy(&["tune", "aggregate"], &env));
    assert!(out.contains("aggregated 6 member(s)"), "{out}");
    let team = team_rows(url, &env).await;
    let names: Vec<&str> = team.iter().map(|r| r.endpoint.as_str()).collect();
    assert_eq!(
        names.len(),
        2,
        "one member's endpoint is its own: {names:?}"
    );
    let reads = team
        .iter()
        .find(|r| r.endpoint == "fs__read_text_file")
        .unwrap();
    assert_eq!((reads.members, reads.sessions, reads.calls), (6, 30, 150));
    assert!(reads.implied_dup_rate > 0.5, "{reads:?}");
    assert_eq!(reads.deduped, 0, "dedup was off for reads");

    // Nothing a tool saw, no path, no argument reached the store.
    let objects = store_objects(url, &env).await;
    assert_eq!(objects.len(), 8, "6 members, the team, the manifest");
    for (name, bytes) in &objects {
        assert!(
            !bytes.windows(CANARY.len()).any(|w| w == CANARY.as_bytes()),
            "{name} holds the canary"
        );
        assert!(!name.contains(CANARY));
    }
    assert!(objects
        .iter()
        .any(|(n, _)| n.ends_with("team/manifest.json")));

    // A newcomer: one short session, too few results for any rule alone.
    let newcomer = Member::new("newcomer");
    newcomer.write("pipeline_config.toml", MEMBER_PIPELINE);
    newcomer.write("devboy.toml", &team_toml(url, ""));
    session(&newcomer, work.path(), None).await;
    let report = ok(&newcomer.devboy(&["tune", "analyze"], &env));
    assert!(report.contains("decided by team data"), "{report}");
    assert!(report.contains("blended with team"), "{report}");
    let tuned = std::fs::read_to_string(newcomer.config().join("pipeline_config.toml")).unwrap();
    let config =
        devboy_core::pipeline_config::PipelineConfig::from_str(&tuned, Path::new("p")).unwrap();
    assert!(config.endpoint("fs__read_text_file").dedup, "{tuned}");
}

/// A week of one member's work, generated: issue lists that repeat
/// (recorded with dedup off), code search that never does.
fn week(seed: u64) -> Workload {
    let now = devboy_tune::now_ms();
    Workload {
        endpoints: vec![
            EndpointSpec {
                shape: "markdown_table",
                inner: vec!["url"],
                chars: 8000,
                dup_rate: 0.7,
                dedup_on: false,
                weight: 2,
                ..EndpointSpec::new("gh__list_issues")
            },
            EndpointSpec {
                chars: 3000,
                weight: 1,
                ..EndpointSpec::new("gh__search_code")
            },
        ],
        sessions: 6,
        events_per_session: 40,
        compactions_per_session: 0,
        interval_ms: 2000,
        start_ms: now - 2 * 86_400_000,
        malformed_every: 0,
        seed,
    }
}

const ISSUES_OFF: &str = "schema_version = 3\n\n[endpoints.\"gh__list_issues\"]\ndedup = false  # tune: D1 2026-11-01: few repeats then\n";

/// A newcomer with a handful of calls of its own.
fn newcomer(store: &str, extra: &str) -> Member {
    let m = Member::new("newcomer");
    m.generated(&Workload {
        sessions: 1,
        events_per_session: 6,
        ..week(99)
    });
    m.write("pipeline_config.toml", ISSUES_OFF);
    m.write("devboy.toml", &team_toml(store, extra));
    m
}

/// The same team through Azure (Azurite) and a shared folder: two
/// members share, one aggregates, a newcomer is tuned by the team.
#[test]
fn azure_and_a_shared_folder_hold_a_team_too() {
    let azurite = AzuriteServer::start();
    azurite.create_container("fingerprints");
    let folder = TempDir::new("team-folder");
    let stores = [
        ("az://fingerprints/acme".to_owned(), azurite.env()),
        (
            format!("file://{}/acme", folder.path().display()),
            Vec::new(),
        ),
    ];
    for (url, env) in &stores {
        let members: Vec<Member> = (0..2).map(|i| Member::new(&format!("m{i}"))).collect();
        for (i, m) in members.iter().enumerate() {
            m.generated(&week(i as u64 + 1));
            m.write("devboy.toml", &team_toml(url, ""));
            let out = ok(&m.devboy(&["tune", "share"], env));
            assert!(out.contains("shared 2 endpoint"), "{url}: {out}");
        }
        let out = ok(&members[1].devboy(&["tune", "aggregate"], env));
        assert!(out.contains("aggregated 2 member(s)"), "{url}: {out}");
        let n = newcomer(url, "share = true\n");
        let report = ok(&n.devboy(&["tune", "analyze"], env));
        assert!(report.contains("decided by team data"), "{url}: {report}");
        // One session: nothing of this member's reaches k = 5 sessions.
        assert!(
            report.contains("[team] share = true: shared 0 endpoint fingerprints")
                && report.contains("withheld 2 under k = 5"),
            "{url}: {report}"
        );
        assert!(
            report.contains("gh__list_issues: 70% team"),
            "{url}: {report}"
        );
        let tuned = std::fs::read_to_string(n.config().join("pipeline_config.toml")).unwrap();
        assert!(tuned.contains("dedup = true"), "{url}: {tuned}\n{report}");
    }
}

/// Ten members share at once while aggregates run: every command
/// succeeds, and the last aggregate holds all ten.
#[tokio::test(flavor = "multi_thread")]
async fn ten_members_share_while_aggregates_run() {
    let s3 = S3Server::start();
    s3.create_bucket("busy");
    let url = "s3://busy/team";
    let env = s3.env();
    let members: Vec<Member> = (0..10).map(|i| Member::new(&format!("busy{i}"))).collect();
    for (i, m) in members.iter().enumerate() {
        m.generated(&week(100 + i as u64));
        m.write("devboy.toml", &team_toml(url, ""));
    }
    std::thread::scope(|scope| {
        let shares: Vec<_> = members
            .iter()
            .map(|m| scope.spawn(|| m.devboy(&["tune", "share"], &env)))
            .collect();
        let aggregates: Vec<_> = (0..3)
            .map(|_| scope.spawn(|| members[0].devboy(&["tune", "aggregate"], &env)))
            .collect();
        for h in shares.into_iter().chain(aggregates) {
            ok(&h.join().unwrap());
        }
    });
    let out = ok(&members[0].devboy(&["tune", "aggregate"], &env));
    assert!(out.contains("aggregated 10 member(s)"), "{out}");
    let team = team_rows(url, &env).await;
    assert!(
        team.iter().all(|r| r.members == 10 && r.sessions == 60),
        "{team:?}"
    );
}

/// A provider's document, written by `tune publish` from one member's
/// telemetry, tunes a newcomer at most 40%, and never where the newcomer
/// has enough results of its own.
#[test]
fn a_providers_fingerprints_are_a_prior_of_at_most_forty_percent() {
    let operator = Member::new("operator");
    operator.generated(&week(7));
    operator.write("devboy.toml", "[servers.gh]\ncommand = \"true\"\n");
    let doc_dir = TempDir::new("provider-doc");
    let doc = doc_dir.path().join("fingerprints.json");
    let out = operator.devboy(
        &[
            "tune",
            "publish",
            "--server",
            "gh",
            "--output",
            doc.to_str().unwrap(),
        ],
        &[],
    );
    ok(&out);
    let text = std::fs::read_to_string(&doc).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["format"], "devboy-fingerprints");
    let classes: Vec<&str> = value["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["endpoint_class"].as_str().unwrap())
        .collect();
    assert_eq!(classes, ["list_issues", "search_code"], "{text}");

    let n = Member::new("newcomer");
    n.generated(&Workload {
        sessions: 1,
        events_per_session: 6,
        ..week(99)
    });
    n.write("pipeline_config.toml", ISSUES_OFF);
    n.write(
        "devboy.toml",
        &format!(
            "[servers.gh]\ncommand = \"true\"\n\n[[team.providers]]\npath = \"{}\"\nserver = \"gh\"\n",
            doc.display()
        ),
    );
    let report = ok(&n.devboy(&["tune", "analyze"], &[]));
    assert!(report.contains("decided by provider data"), "{report}");
    assert!(report.contains("40% provider"), "capped: {report}");
}

/// Every failure is one line naming the store and the problem; `tune
/// analyze` still tunes locally; a damaged or newer member object is
/// skipped by the aggregate, the others merged.
#[tokio::test(flavor = "multi_thread")]
async fn failures_name_the_store_and_lose_nothing_local() {
    let s3 = S3Server::start();
    s3.create_bucket("real");
    let env = s3.env();
    let m = Member::new("failing");
    m.generated(&week(5));

    // A bucket that does not exist.
    m.write("devboy.toml", &team_toml("s3://no-such-bucket/x", ""));
    let err = failed(&m.devboy(&["tune", "share"], &env));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("s3://no-such-bucket/x"), "{err}");
    assert!(err.contains("does not exist"), "{err}");

    // Nothing listening.
    let dead: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| match k.as_str() {
            "AWS_ENDPOINT_URL" => (k.clone(), "http://127.0.0.1:9".to_owned()),
            _ => (k.clone(), v.clone()),
        })
        .collect();
    m.write("devboy.toml", &team_toml("s3://real/x", ""));
    let err = failed(&m.devboy(&["tune", "share"], &dead));
    assert!(
        err.contains("s3://real/x") && err.contains("cannot reach"),
        "{err}"
    );
    // analyze still tunes on the member's own figures, and says why.
    let report = ok(&m.devboy(&["tune", "analyze"], &dead));
    assert!(
        report.contains("tuned on this member's own figures"),
        "{report}"
    );
    assert!(report.contains("cannot reach"), "{report}");
    assert!(m.config().join("pipeline_config.toml").exists() || report.contains("no rule fired"));

    // Credentials the server refuses.
    let strict = S3Server::start_refusing_credentials();
    let err = failed(&m.devboy(&["tune", "share"], &strict.env()));
    assert!(err.contains("access denied"), "{err}");
    assert!(!err.contains("testing"), "no secret in messages: {err}");

    // A damaged member object and a newer one are skipped; the good one
    // is merged.
    let url = "s3://real/skips";
    m.write("devboy.toml", &team_toml(url, ""));
    ok(&m.devboy(&["tune", "share"], &env));
    let other = Member::new("other");
    other.generated(&week(6));
    other.write("devboy.toml", &team_toml(url, ""));
    ok(&other.devboy(&["tune", "share"], &env));
    let store = devboy_team::TeamStore::open(url, env.clone()).unwrap();
    store
        .put(
            &store.member_path("00000000deadbeef"),
            b"not parquet".to_vec().into(),
        )
        .await
        .unwrap();
    let rows = columns::read(
        std::fs::read(other.telemetry().join("endpoints.parquet"))
            .unwrap()
            .into(),
    )
    .unwrap()
    .rows;
    store
        .put(
            &store.member_path("00000000000000f2"),
            columns::write_as(&rows, Some("00000000000000f2"), 2).unwrap(),
        )
        .await
        .unwrap();
    let out = ok(&m.devboy(&["tune", "aggregate"], &env));
    assert!(out.contains("aggregated 2 member(s)"), "{out}");
    assert!(
        out.contains("00000000deadbeef") && out.contains("damaged"),
        "{out}"
    );
    assert!(
        out.contains("00000000000000f2") && out.contains("newer"),
        "{out}"
    );

    // A [team] section that does not parse: share names the file and key.
    m.write("devboy.toml", "[team]\nstore = \"ftp://x\"\n");
    let err = failed(&m.devboy(&["tune", "share"], &env));
    assert!(
        err.contains("devboy.toml") && err.contains("team.store"),
        "{err}"
    );
}

/// A project's committed `.devboy/pipeline_config.toml` applies to every
/// member's session, in a checkout of any name; a member's own file
/// overrides only the keys it sets; `tune show` says which values came
/// from the project; `tune analyze` writes only the member's own keys.
#[tokio::test(flavor = "multi_thread")]
async fn a_committed_project_config_applies_and_a_members_file_overrides_only_its_keys() {
    let checkout = TempDir::new("wt-7f2");
    let root = checkout.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join(".devboy")).unwrap();
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    std::fs::write(
        root.join(".devboy/pipeline_config.toml"),
        "schema_version = 3\n[dedup]\nttl_secs = 900\nmax_entries = 512\n\n[endpoints.\"srv__echo\"]\ndedup = false  # tune: D1 2026-11-20: few repeats\n\n[endpoints.\"gh__list_issues\"]\ndedup = false  # the team decided this by hand\n",
    )
    .unwrap();
    let member = Member::new("layered");
    member.write(
        "pipeline_config.toml",
        "schema_version = 3\n[dedup]\nmax_entries = 1024\n",
    );
    let config = member.root.path().join("devboy.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.srv]\ncommand = {}\n",
            common::toml_str(&common::test_server_bin().display().to_string())
        ),
    )
    .unwrap();
    let config_dir = member.config();
    let mut client = common::RawClient::start_command_in(
        &["mcp", "--config", config.to_str().unwrap()],
        &[("DEVBOY_CONFIG_DIR", config_dir.to_str().unwrap())],
        Some(&root.join("src/deep")),
    )
    .await;
    let text = "the same words again and again ".repeat(40);
    let first = client
        .call_tool(1, "srv__echo", json!({"text": text}))
        .await;
    let second = client
        .call_tool(2, "srv__echo", json!({"text": text}))
        .await;
    let body = |v: &serde_json::Value| {
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert!(body(&first).contains("again and again"), "{first}");
    assert!(
        !body(&second).starts_with("> [ref:"),
        "the project turned dedup off for srv__echo: {second}"
    );
    client.stop().await;

    let show = |m: &Member| {
        let out = Command::new(DEVBOY)
            .args(["tune", "show"])
            .current_dir(root.join("src/deep"))
            .env("DEVBOY_CONFIG_DIR", m.config())
            .env("DEVBOY_TELEMETRY_DIR", m.telemetry())
            .output()
            .unwrap();
        ok(&out)
    };
    let shown = show(&member);
    assert!(shown.contains("on top of the project's"), "{shown}");
    let line = |key: &str| {
        shown
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        line("ttl_secs").contains("900") && line("ttl_secs").contains("(project)"),
        "{shown}"
    );
    assert!(
        line("max_entries").contains("1024") && !line("max_entries").contains("(project)"),
        "{shown}"
    );
    assert!(shown.contains("dedup = false (project)"), "{shown}");

    // A member without a file of its own: `tune analyze` writes only what
    // it decides, and the project's keys keep applying.
    let fresh = Member::new("fresh");
    fresh.generated(&week(3));
    let out = Command::new(DEVBOY)
        .args(["tune", "analyze"])
        .current_dir(root)
        .env("DEVBOY_CONFIG_DIR", fresh.config())
        .env("DEVBOY_TELEMETRY_DIR", fresh.telemetry())
        .output()
        .unwrap();
    let report = ok(&out);
    let own = std::fs::read_to_string(fresh.config().join("pipeline_config.toml")).unwrap();
    assert!(
        !own.contains("ttl_secs"),
        "no default copied over the project's: {own}\n{report}"
    );
    assert!(own.contains("# tune:"), "{own}\n{report}");
    // The team's hand-set value holds against the member's tuner.
    assert!(
        report.contains("held by hand edits") && report.contains(".devboy/pipeline_config.toml)"),
        "{report}"
    );
    assert!(!own.contains("gh__list_issues\"]\ndedup"), "{own}");
    // Without a file of its own, `tune show` names the project's.
    let bare = Member::new("bare");
    let shown = show(&bare);
    assert!(
        shown.contains("this member has no pipeline_config.toml"),
        "{shown}"
    );
    assert!(shown.contains("900 (project)"), "{shown}");
    let effective = devboy_core::pipeline_config::PipelineConfig::layered(
        Some(&root.join(".devboy/pipeline_config.toml")),
        Some(&fresh.config().join("pipeline_config.toml")),
    )
    .unwrap();
    assert_eq!(effective.dedup.ttl, Duration::from_secs(900));
}

/// A team row last seen longer ago than `ttl_days` is demoted: at most
/// 40%, and not used for a tool this member has enough results of.
#[test]
fn stale_team_rows_are_demoted() {
    let folder = TempDir::new("team-stale");
    let url = format!("file://{}/acme", folder.path().display());
    let old = devboy_tune::now_ms() - 25 * 86_400_000;
    for i in 0..2 {
        let m = Member::new(&format!("old{i}"));
        m.generated(&Workload {
            start_ms: old,
            ..week(40 + i)
        });
        m.write("devboy.toml", &team_toml(&url, ""));
        ok(&m.devboy(&["tune", "share"], &[]));
    }
    // Aggregated when these members were still active (a member TTL
    // longer than their age); nobody aggregated since.
    ok(&Member::new("agg").devboy(
        &["tune", "aggregate", "--store", &url, "--ttl-days", "60"],
        &[],
    ));
    let n = newcomer(&url, "");
    let report = ok(&n.devboy(&["tune", "analyze", "--dry-run"], &[]));
    assert!(
        report.contains("gh__list_issues: 40% team (stale)"),
        "{report}"
    );
    assert!(
        report.contains("decided by team data older than the TTL"),
        "{report}"
    );
    // A member with enough results of its own does not take them at all.
    let busy = Member::new("busy");
    busy.generated(&week(77));
    busy.write("pipeline_config.toml", ISSUES_OFF);
    busy.write("devboy.toml", &team_toml(&url, ""));
    let report = ok(&busy.devboy(&["tune", "analyze", "--dry-run"], &[]));
    assert!(!report.contains("blended with team"), "{report}");
}

/// A provider document served over HTTP is fetched and blended; a server
/// that answers 404 is one note, and the tune runs.
#[test]
fn a_provider_url_is_fetched_and_a_failing_one_is_a_note() {
    let operator = Member::new("op-http");
    operator.generated(&week(8));
    operator.write("devboy.toml", "[servers.gh]\ncommand = \"true\"\n");
    let doc = ok(&operator.devboy(&["tune", "publish", "--server", "gh"], &[]));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = std::thread::spawn(move || {
        use std::io::{Read, Write};
        for (i, stream) in listener.incoming().take(2).enumerate() {
            let mut stream = stream.unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let reply = if i == 0 {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{doc}",
                    doc.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    .to_owned()
            };
            stream.write_all(reply.as_bytes()).unwrap();
        }
    });
    let n = Member::new("newcomer-http");
    n.generated(&Workload {
        sessions: 1,
        events_per_session: 6,
        ..week(98)
    });
    n.write("pipeline_config.toml", ISSUES_OFF);
    n.write(
        "devboy.toml",
        &format!(
            "[servers.gh]\ncommand = \"true\"\n\n[[team.providers]]\nurl = \"http://127.0.0.1:{port}/mcp/fingerprints/v1\"\nserver = \"gh\"\n"
        ),
    );
    let report = ok(&n.devboy(&["tune", "analyze", "--dry-run"], &[]));
    assert!(report.contains("decided by provider data"), "{report}");
    let report = ok(&n.devboy(&["tune", "analyze", "--dry-run"], &[]));
    assert!(
        report.contains(&format!(
            "provider fingerprints http://127.0.0.1:{port}/mcp/fingerprints/v1: HTTP 404"
        )),
        "{report}"
    );
    assert!(!report.contains("blended with"), "{report}");
    served.join().unwrap();
}

/// Nothing local is lost when a share fails; a missing shared folder is an
/// error, not a new local folder; a member object copied under another id
/// and one of a member gone longer than the TTL are skipped; a
/// conditional write loses to a newer object.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_share_loses_nothing_and_copies_and_leavers_do_not_count() {
    let s3 = S3Server::start();
    s3.create_bucket("guard");
    let env = s3.env();
    let url = "s3://guard/team";
    let m = Member::new("guard");
    m.generated(&week(21));
    m.write("pipeline_config.toml", ISSUES_OFF);
    m.write("devboy.toml", &team_toml(url, ""));
    ok(&m.devboy(&["tune", "share"], &env));
    let copy = m.telemetry().join("endpoints.parquet");
    let before = (
        std::fs::read(&copy).unwrap(),
        std::fs::read(m.config().join("pipeline_config.toml")).unwrap(),
    );
    m.write("devboy.toml", &team_toml("s3://no-such-bucket/x", ""));
    failed(&m.devboy(&["tune", "share"], &env));
    let after = (
        std::fs::read(&copy).unwrap(),
        std::fs::read(m.config().join("pipeline_config.toml")).unwrap(),
    );
    assert!(
        before == after,
        "the local copy and config are as they were"
    );

    // A shared folder whose mount is missing.
    let err = failed(&m.devboy(
        &[
            "tune",
            "aggregate",
            "--store",
            "file:///nonexistent-mount-7f/devboy",
        ],
        &[],
    ));
    assert!(
        err.contains("does not exist (is the share mounted?)"),
        "{err}"
    );
    assert!(!Path::new("/nonexistent-mount-7f").exists());

    // The same object under a second id does not make a second member;
    // a member last seen long ago no longer counts.
    let store = devboy_team::TeamStore::open(url, env.clone()).unwrap();
    let mine = store.members().await.unwrap();
    assert_eq!(mine.len(), 1);
    let bytes = store.get(&mine[0].1).await.unwrap().unwrap().bytes;
    store
        .put(&store.member_path("00000000c0ffee00"), bytes)
        .await
        .unwrap();
    let gone = Member::new("gone");
    gone.generated(&Workload {
        start_ms: devboy_tune::now_ms() - 40 * 86_400_000,
        ..week(22)
    });
    gone.write("devboy.toml", &team_toml(url, ""));
    ok(&gone.devboy(&["tune", "share", "--days", "60"], &env));
    let out = ok(&m.devboy(&["tune", "aggregate", "--store", url], &env));
    assert!(out.contains("aggregated 1 member(s)"), "{out}");
    assert!(out.contains("a copied object"), "{out}");
    assert!(out.contains("more than ttl_days = 14"), "{out}");
    assert!(
        team_rows(url, &env).await.is_empty(),
        "one member is no team"
    );

    // The team object is written only over the version it was read at.
    let team = store.team_path();
    let seen = store.version(&team).await.unwrap().expect("written");
    assert!(store
        .put_if(&team, b"a".to_vec().into(), Some(&seen))
        .await
        .unwrap());
    assert!(
        !store
            .put_if(&team, b"b".to_vec().into(), Some(&seen))
            .await
            .unwrap(),
        "a stale version loses"
    );
    assert!(
        !store
            .put_if(&team, b"c".to_vec().into(), None)
            .await
            .unwrap(),
        "creating over an existing object loses"
    );
}
