//! `devboy tune share`, `tune aggregate`, `tune publish`, and the shared
//! figures `tune analyze` blends.

use std::fmt;
use std::path::PathBuf;
use std::time::Instant;

use devboy_core::config::team::TeamConfig;
use devboy_telemetry::Salt;
/// The telemetry salt's file name in the telemetry directory.
pub use devboy_telemetry::SALT_FILE;
use devboy_tune::fingerprint::{
    self, fingerprints, k_anonymous, Fingerprint, SharedFigures, SharedRow, SharedSource,
    FINGERPRINT_SCHEMA_VERSION, MIN_MEMBERS,
};
use devboy_tune::names::ExposedNames;
use serde_json::json;

use crate::columns;
use crate::error::TeamError;
use crate::store::TeamStore;

/// This member's telemetry, as `tune analyze` reads it.
#[derive(Clone, Debug)]
pub struct Member {
    /// The events directory.
    pub input: PathBuf,
    /// `endpoint-names.json`.
    pub names_file: PathBuf,
    /// The telemetry salt (the member id is derived from it).
    pub salt_file: PathBuf,
    /// The pipeline config (its dedup settings shape the sequence
    /// analysis).
    pub pipeline_config: PathBuf,
    /// The project's committed `.devboy/pipeline_config.toml` it is read
    /// on top of, if any.
    pub project_config: Option<PathBuf>,
    /// Days of events to read.
    pub days: u32,
    /// Now, in Unix milliseconds.
    pub now_ms: u64,
}

/// The member id: a salted hash of a fixed text under this install's
/// telemetry salt. Stable for a user on a machine, meaningless elsewhere,
/// and unlike any hash in the member's own telemetry.
pub fn member_id(salt_file: &std::path::Path) -> Result<String, TeamError> {
    let salt = Salt::load_or_create(salt_file).map_err(|source| TeamError::Io {
        path: salt_file.display().to_string(),
        error: source,
    })?;
    Ok(salt.h(&[b"devboy team member v1"]).to_string())
}

/// This member's rows, all of them (before k-anonymity).
pub fn own_rows(member: &Member) -> Result<Vec<Fingerprint>, TeamError> {
    let file = devboy_tune::edit::ConfigFile::open_over(
        &member.pipeline_config,
        member.project_config.as_deref(),
    )?;
    let config = file.config()?;
    let (table, analysis) =
        devboy_tune::analyze::read_window(&member.input, member.days, member.now_ms, &config)?;
    let names = ExposedNames::load(&member.names_file);
    Ok(fingerprints(&table, &analysis, &names))
}

/// What `tune share` did.
#[derive(Debug)]
pub struct ShareReport {
    /// The member id.
    pub member: String,
    /// The object written.
    pub object: String,
    /// The local copy of what was uploaded.
    pub local_copy: Option<PathBuf>,
    /// Endpoints shared.
    pub shared: Vec<(String, u64, u64)>,
    /// Endpoints withheld (fewer than k sessions).
    pub withheld: usize,
    /// k.
    pub k: u32,
    /// Bytes uploaded.
    pub bytes: usize,
}

impl fmt::Display for ShareReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "shared {} endpoint fingerprints as member {} to {} ({} bytes)",
            self.shared.len(),
            self.member,
            self.object,
            self.bytes
        )?;
        for (endpoint, sessions, calls) in &self.shared {
            writeln!(f, "  {endpoint}: {calls} results in {sessions} sessions")?;
        }
        writeln!(
            f,
            "withheld {} endpoint(s) seen in fewer than {} sessions (k-anonymity)",
            self.withheld, self.k
        )?;
        if let Some(copy) = &self.local_copy {
            writeln!(
                f,
                "a copy of exactly what was uploaded: {} (Parquet; docs/team.md lists its columns)",
                copy.display()
            )?;
        }
        Ok(())
    }
}

/// `tune share`: this member's rows with at least `k` sessions, written
/// to its own object (and to `local_copy`, when given).
pub async fn share(
    store: &TeamStore,
    team: &TeamConfig,
    member: &Member,
    local_copy: Option<PathBuf>,
) -> Result<ShareReport, TeamError> {
    let all = own_rows(member)?;
    if all.is_empty() {
        return Err(TeamError::NothingToShare {
            dir: member.input.display().to_string(),
            days: member.days,
        });
    }
    let id = member_id(&member.salt_file)?;
    let (rows, withheld) = k_anonymous(all, team.k_anonymity);
    let bytes = columns::write(&rows, Some(&id))?;
    let path = store.put_member(&id, bytes.clone()).await?;
    // Only once uploaded: the copy is what the store holds.
    if let Some(copy) = &local_copy {
        if let Some(dir) = copy.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| TeamError::Io {
                path: dir.display().to_string(),
                error: source,
            })?;
        }
        devboy_sharedfile::replace(copy, &bytes).map_err(|source| TeamError::Io {
            path: copy.display().to_string(),
            error: source,
        })?;
    }
    Ok(ShareReport {
        member: id,
        object: store.describe(&path),
        local_copy,
        shared: rows
            .iter()
            .map(|r| (r.endpoint.clone(), r.sessions, r.calls))
            .collect(),
        withheld,
        k: team.k_anonymity,
        bytes: bytes.len(),
    })
}

/// What `tune aggregate` did.
#[derive(Debug, Default)]
pub struct AggregateReport {
    /// The team object written.
    pub object: String,
    /// Members whose rows were merged.
    pub members: usize,
    /// Member objects skipped, with why (one line each).
    pub skipped: Vec<String>,
    /// Rows refused, with why (one line each).
    pub refused: Vec<String>,
    /// Rows read.
    pub rows_in: usize,
    /// Endpoints in the aggregate.
    pub endpoints: usize,
    /// Endpoints dropped (fewer than k sessions or 2 members).
    pub dropped: usize,
    /// The most sessions behind one endpoint.
    pub max_sessions: u64,
    /// Bytes written.
    pub bytes: usize,
    /// Times another aggregator wrote first and the merge was redone.
    pub retries: u32,
    /// Seconds it took.
    pub seconds: f64,
}

impl fmt::Display for AggregateReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "aggregated {} member(s), {} rows: {} endpoints in {} ({} bytes, up to {} sessions an endpoint); {} dropped (fewer than k sessions or {} members); {:.2} s",
            self.members,
            self.rows_in,
            self.endpoints,
            self.object,
            self.bytes,
            self.max_sessions,
            self.dropped,
            MIN_MEMBERS,
            self.seconds
        )?;
        if self.retries > 0 {
            writeln!(
                f,
                "another aggregate was written meanwhile; merged again from the members' objects ({} time(s))",
                self.retries
            )?;
        }
        for s in &self.skipped {
            writeln!(f, "skipped: {s}")?;
        }
        for r in self.refused.iter().take(20) {
            writeln!(f, "refused row: {r}")?;
        }
        if self.refused.len() > 20 {
            writeln!(f, "refused {} more rows", self.refused.len() - 20)?;
        }
        Ok(())
    }
}

/// How many times an aggregate is redone when another aggregator wrote
/// the team object between this one's read and write.
const AGGREGATE_ATTEMPTS: u32 = 4;

/// `tune aggregate`: every member's object, merged into the team object,
/// written whole and only if no other aggregate was written meanwhile
/// (where the store can tell), then the manifest beside it.
///
/// A member object is skipped, with a line saying why, when it is not a
/// fingerprint file (or is of a newer schema), names another member than
/// the folder it is in, or was last seen more than `ttl_days` ago (a
/// member who left the team stops counting). A row no devboy could have
/// written ([`Fingerprint::check`]) is refused, the member's others kept.
pub async fn aggregate(
    store: &TeamStore,
    k: u32,
    ttl_days: u32,
    now_ms: u64,
) -> Result<AggregateReport, TeamError> {
    let started = Instant::now();
    let today = fingerprint::day_of(now_ms);
    let team_path = store.team_path();
    for attempt in 0..AGGREGATE_ATTEMPTS {
        let previous = store.version(&team_path).await?;
        let mut report = AggregateReport {
            object: store.describe(&team_path),
            retries: attempt,
            ..AggregateReport::default()
        };
        let mut merger = fingerprint::Merger::default();
        for (id, path) in store.members().await? {
            let fetched = match store.get(&path).await {
                Ok(Some(f)) => f,
                Ok(None) => continue,
                Err(e) => {
                    report.skipped.push(e.to_string());
                    continue;
                }
            };
            let object = store.describe(&path);
            let file = match columns::read(fetched.bytes) {
                Ok(file) => file,
                Err(e) => {
                    report.skipped.push(format!("{object} (member {id}): {e}"));
                    continue;
                }
            };
            if file.member.as_deref().is_some_and(|m| m != id) {
                report.skipped.push(format!(
                    "{object}: its rows name member {}, not {id} (a copied object)",
                    file.member.as_deref().unwrap_or_default()
                ));
                continue;
            }
            let last = file.rows.iter().map(|r| r.last_day).max();
            if last.is_some_and(|d| today - d > ttl_days as i32) {
                report.skipped.push(format!(
                    "{object} (member {id}): last seen {} days ago, more than ttl_days = {ttl_days}",
                    today - last.unwrap_or(today)
                ));
                continue;
            }
            report.rows_in += file.rows.len();
            let offered = file.rows.len();
            let refused = merger.add_member(file.rows, today);
            if refused.len() < offered {
                report.members += 1;
            }
            for why in refused {
                report.refused.push(format!("member {id}: {why}"));
            }
        }
        let total_endpoints = merger.len();
        let merged = merger.finish(k);
        report.endpoints = merged.len();
        report.dropped = total_endpoints - merged.len();
        report.max_sessions = merged.iter().map(|r| r.sessions).max().unwrap_or(0);
        let bytes = columns::write(&merged, None)?;
        report.bytes = bytes.len();
        if !store.put_if(&team_path, bytes, previous.as_ref()).await? {
            continue;
        }
        let manifest = json!({
            "format": "devboy-team-manifest",
            "schema_version": FINGERPRINT_SCHEMA_VERSION,
            "generated_ms": now_ms,
            "generated": devboy_tune::table::date(now_ms),
            "members": report.members,
            "members_skipped": report.skipped.len(),
            "rows_refused": report.refused.len(),
            "endpoints": report.endpoints,
            "sessions_max": report.max_sessions,
            "k_anonymity": k,
            "min_members": MIN_MEMBERS,
            "ttl_days": ttl_days,
            "devboy_version": fingerprint::DEVBOY_VERSION,
        });
        let mut text = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
        text.push(b'\n');
        store.put(&store.manifest_path(), text.into()).await?;
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    }
    Err(TeamError::Store {
        store: store.describe(&team_path),
        message: format!(
            "another aggregate was written each of {AGGREGATE_ATTEMPTS} times this one tried; run it again"
        ),
    })
}

/// The shared figures `tune analyze` blends: the team's aggregate (when
/// `[team] store` is set) and each provider's document, each row checked
/// ([`Fingerprint::check`]). Whatever cannot be read
/// becomes one line in the returned notes; the tune runs on what there is.
pub async fn shared_figures(
    team: &TeamConfig,
    env: impl IntoIterator<Item = (String, String)>,
    prefix_of: &dyn Fn(&str) -> Option<String>,
    now_ms: u64,
) -> (SharedFigures, Vec<String>) {
    let today = fingerprint::day_of(now_ms);
    let mut set = SharedFigures {
        team_weight: team.weight,
        ttl_days: team.ttl_days,
        ..SharedFigures::default()
    };
    let mut notes = Vec::new();
    let mut refused = 0usize;
    if let Some(url) = &team.store {
        let loaded = async {
            let store = TeamStore::open(url, env)?;
            let path = store.team_path();
            match store.get(&path).await? {
                // No aggregate, or no bucket at all: listing tells which.
                None => Err(match store.objects().await {
                    Err(e) => e,
                    Ok(_) => TeamError::Store {
                        store: store.describe(&path),
                        message: "no team aggregate yet (run `devboy tune aggregate`)".into(),
                    },
                }),
                Some(fetched) => columns::read(fetched.bytes).map_err(|e| TeamError::Store {
                    store: store.describe(&path),
                    message: e.to_string(),
                }),
            }
        }
        .await;
        match loaded {
            Ok(file) => {
                for row in file.rows {
                    if row.check(today).is_ok() {
                        set.team.insert(row.endpoint.clone(), row);
                    } else {
                        refused += 1;
                    }
                }
            }
            Err(e) => notes.push(format!("{e}; tuned on this member's own figures")),
        }
    }
    for provider in &team.providers {
        let Some(prefix) = prefix_of(&provider.server) else {
            notes.push(format!(
                "provider fingerprints {}: no server {:?} in the config; skipped",
                provider.source, provider.server
            ));
            continue;
        };
        match crate::provider::load(provider, &prefix).await {
            Ok(rows) => {
                for row in rows {
                    if row.check(today).is_err() {
                        refused += 1;
                        continue;
                    }
                    set.providers.insert(
                        row.endpoint.clone(),
                        SharedRow {
                            row,
                            source: SharedSource::Provider(provider.source.to_string()),
                            weight: provider.weight,
                        },
                    );
                }
            }
            Err(e) => notes.push(format!("{e}; skipped")),
        }
    }
    if refused > 0 {
        notes.push(format!(
            "{refused} shared row(s) no devboy could have written (rates outside 0–1, counts above their results, future days) were left out"
        ));
    }
    (set, notes)
}

/// `tune publish`: this member's rows of the server exposed under
/// `prefix`, after k-anonymity, as a provider document (JSON text).
pub fn publish(
    member: &Member,
    server: &str,
    prefix: &str,
    k: u32,
) -> Result<(String, usize, usize), TeamError> {
    let (rows, withheld) = k_anonymous(own_rows(member)?, k);
    let document = crate::provider::document(
        &rows,
        server,
        prefix,
        &devboy_tune::table::date(member.now_ms),
    );
    let n = document.endpoints.len();
    let mut text =
        serde_json::to_string_pretty(&document).map_err(|e| TeamError::Encode(e.to_string()))?;
    text.push('\n');
    Ok((text, n, withheld))
}
