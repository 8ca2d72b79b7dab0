//! `devboy tune …`: the reports go to stdout.

use std::path::{Path, PathBuf};

use anyhow::Context;
use devboy_core::config::team::TeamConfig;
use devboy_core::config::ProxyConfig;

use crate::cli::{ExploreFormat, TuneCommand};

/// The process environment, for the store's options (credentials stay in
/// it; nothing here writes or prints them).
fn env_vars() -> Vec<(String, String)> {
    std::env::vars().collect()
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The proxy config a tune command reads [team] from.
fn proxy_config(config: Option<&Path>) -> anyhow::Result<ProxyConfig> {
    Ok(ProxyConfig::resolve(config)?)
}

/// [team] for a command that cannot run without a store.
fn team_with_store(config: &ProxyConfig) -> anyhow::Result<(TeamConfig, String)> {
    if let Some(problem) = &config.team_problem {
        anyhow::bail!("{problem}");
    }
    let store = config.team.store.clone().with_context(|| {
        format!(
            "no [team] store in {}; set `store = \"s3://bucket/prefix\"` (or gs://, az://, file://) under [team] (docs/team.md)",
            describe_source(config)
        )
    })?;
    Ok((config.team.clone(), store))
}

fn describe_source(config: &ProxyConfig) -> String {
    match &config.source {
        devboy_core::config::ConfigSource::File(path) => path.display().to_string(),
        devboy_core::config::ConfigSource::Embedded => format!(
            "the embedded default config (no {} found)",
            devboy_core::paths::default_config_file().display()
        ),
    }
}

fn member(input_dir: Option<PathBuf>, days: u32) -> devboy_team::Member {
    let telemetry = devboy_core::paths::telemetry_dir();
    devboy_team::Member {
        input: input_dir.unwrap_or_else(|| telemetry.join("events")),
        names_file: devboy_core::paths::endpoint_names_file(),
        salt_file: telemetry.join(devboy_team::commands::SALT_FILE),
        pipeline_config: devboy_core::pipeline_config::default_file(),
        project_config: project_config(),
        days,
        now_ms: devboy_tune::now_ms(),
    }
}

/// The local copy of what `share` uploaded.
fn local_copy() -> PathBuf {
    devboy_core::paths::telemetry_dir().join("endpoints.parquet")
}

/// The project's committed `.devboy/pipeline_config.toml`, found from the
/// current directory.
fn project_config() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    devboy_core::pipeline_config::project_file(&cwd)
}

/// The prefix of the server named `name`: from `config`, else from the
/// project's own server lists in the current directory (`devboy
/// init --project` moves them to `devboy.mcp.json`; Claude Code keeps
/// them in `.mcp.json`).
fn prefix_of(config: &ProxyConfig, name: &str) -> Option<String> {
    let find = |c: &ProxyConfig| {
        c.upstreams
            .iter()
            .find(|u| u.name == name)
            .map(|u| u.prefix.clone())
    };
    find(config).or_else(|| {
        ["devboy.mcp.json", ".mcp.json"]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.is_file())
            .filter_map(|p| ProxyConfig::load(&p).ok())
            .find_map(|c| find(&c))
    })
}

/// `devboy tune report`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// How many days back to read.
    #[arg(long, default_value_t = 30, value_name = "N")]
    days: u32,
    /// The events directory. Default: <telemetry dir>/events.
    #[arg(long, value_name = "DIR")]
    input_dir: Option<PathBuf>,
    /// `json` prints one JSON object (keys in docs/telemetry.md) instead
    /// of the tables.
    #[arg(long, value_enum, default_value_t = ExploreFormat::Text)]
    format: ExploreFormat,
    /// Also write the report as one self-contained HTML page with charts
    /// (tokens saved per day and per server) to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// `devboy tune report`.
fn report(args: ReportArgs) -> anyhow::Result<()> {
    let telemetry = devboy_core::paths::telemetry_dir();
    let options = devboy_tune::savings::SavingsOptions {
        input: args.input_dir.unwrap_or_else(|| telemetry.join("events")),
        names_file: devboy_core::paths::endpoint_names_file(),
        days: args.days,
        now_ms: devboy_tune::now_ms(),
    };
    let report = devboy_tune::savings::run(&options)?;
    if let Some(path) = &args.html {
        std::fs::write(path, devboy_tune::savings::html::page(&report))
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("devboy: wrote {}", path.display());
    }
    let text = match args.format {
        ExploreFormat::Json => format!("{:#}\n", report.to_json()),
        ExploreFormat::Text => report.to_string(),
    };
    // A report is often piped into `head` or `less`: a reader that stops
    // early is not an error.
    match std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written.context("cannot write the report to stdout"),
    }
}

pub fn tune(command: TuneCommand) -> anyhow::Result<()> {
    let telemetry = devboy_core::paths::telemetry_dir();
    let default_output = devboy_core::pipeline_config::default_file;
    match command {
        TuneCommand::Analyze {
            days,
            input_dir,
            output,
            dry_run,
            config,
        } => {
            let mut notes = Vec::new();
            // The default devboy.toml only adds [team]: one that does not
            // load costs the team's figures, never the local tune.
            let proxy = match (proxy_config(config.as_deref()), &config) {
                (Ok(proxy), _) => proxy,
                (Err(e), Some(_)) => return Err(e),
                (Err(e), None) => {
                    notes.push(format!("{e:#}; tuned without [team]"));
                    ProxyConfig::embedded_default()
                }
            };
            if let Some(problem) = &proxy.team_problem {
                notes.push(format!("{problem}; tuned on this member's own figures"));
            }
            let team = &proxy.team;
            let priors = if team.is_set() {
                let (priors, mut loaded) = runtime()?.block_on(devboy_team::shared_figures(
                    team,
                    env_vars(),
                    &|name| prefix_of(&proxy, name),
                    devboy_tune::now_ms(),
                ));
                notes.append(&mut loaded);
                priors
            } else {
                Default::default()
            };
            let options = devboy_tune::AnalyzeOptions {
                input: input_dir
                    .clone()
                    .unwrap_or_else(|| telemetry.join("events")),
                days,
                output: output.unwrap_or_else(default_output),
                names_file: devboy_core::paths::endpoint_names_file(),
                summary_file: Some(telemetry.join(devboy_tune::show::SUMMARY_FILE)),
                dry_run,
                now_ms: devboy_tune::now_ms(),
                shared: priors,
                project_config: project_config(),
            };
            let mut report = devboy_tune::analyze::run(&options)?;
            if team.share && !dry_run {
                if let Some(url) = &team.store {
                    let shared = devboy_team::TeamStore::open(url, env_vars()).and_then(|store| {
                        let member = devboy_team::Member {
                            pipeline_config: options.output.clone(),
                            ..member(input_dir, days)
                        };
                        runtime()
                            .map_err(|e| devboy_team::TeamError::Config(e.to_string()))?
                            .block_on(devboy_team::share(
                                &store,
                                team,
                                &member,
                                Some(local_copy()),
                            ))
                    });
                    match shared {
                        Ok(r) => notes.push(format!(
                            "[team] share = true: shared {} endpoint fingerprints to {} (withheld {} under k = {})",
                            r.shared.len(),
                            r.object,
                            r.withheld,
                            r.k
                        )),
                        Err(e) => notes.push(format!("[team] share = true, but not shared: {e}")),
                    }
                }
            }
            report.notes.extend(notes);
            print!("{report}");
        }
        TuneCommand::Share {
            days,
            input_dir,
            config,
        } => {
            let proxy = proxy_config(config.as_deref())?;
            let (team, url) = team_with_store(&proxy)?;
            let store = devboy_team::TeamStore::open(&url, env_vars())?;
            let report = runtime()?.block_on(devboy_team::share(
                &store,
                &team,
                &member(input_dir, days),
                Some(local_copy()),
            ))?;
            print!("{report}");
        }
        TuneCommand::Aggregate {
            config,
            store,
            k_anonymity,
            ttl_days,
        } => {
            let (url, k, ttl) = match store {
                Some(url) => (
                    url,
                    k_anonymity.unwrap_or(devboy_core::config::team::DEFAULT_K_ANONYMITY),
                    ttl_days.unwrap_or(devboy_core::config::team::DEFAULT_TEAM_TTL_DAYS),
                ),
                None => {
                    let proxy = proxy_config(config.as_deref())?;
                    let (team, url) = team_with_store(&proxy)?;
                    (
                        url,
                        k_anonymity.unwrap_or(team.k_anonymity),
                        ttl_days.unwrap_or(team.ttl_days),
                    )
                }
            };
            anyhow::ensure!(
                k >= devboy_core::config::team::MIN_K_ANONYMITY,
                "--k-anonymity must be at least {}",
                devboy_core::config::team::MIN_K_ANONYMITY
            );
            let store = devboy_team::TeamStore::open(&url, env_vars())?;
            let report = runtime()?.block_on(devboy_team::aggregate(
                &store,
                k,
                ttl,
                devboy_tune::now_ms(),
            ))?;
            print!("{report}");
        }
        TuneCommand::Publish {
            server,
            output,
            days,
            input_dir,
            config,
        } => {
            let proxy = proxy_config(config.as_deref())?;
            // k-anonymity comes from [team]: a section that does not load
            // must not quietly publish under the default.
            if let Some(problem) = &proxy.team_problem {
                anyhow::bail!("{problem}");
            }
            let prefix = prefix_of(&proxy, &server).with_context(|| {
                let names: Vec<&str> = proxy.upstreams.iter().map(|u| u.name.as_str()).collect();
                format!(
                    "no server {server:?} in {} (servers: {})",
                    describe_source(&proxy),
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                )
            })?;
            let (text, n, withheld) = devboy_team::publish(
                &member(input_dir, days),
                &server,
                &prefix,
                proxy.team.k_anonymity,
            )?;
            if output.as_os_str() == "-" {
                print!("{text}");
            } else {
                devboy_sharedfile::replace_shared(&output, text.as_bytes())
                    .with_context(|| format!("cannot write {}", output.display()))?;
            }
            eprintln!(
                "devboy: {n} endpoint fingerprints of {server} published{}; {withheld} withheld (fewer than {} sessions)",
                if output.as_os_str() == "-" {
                    String::new()
                } else {
                    format!(" to {}", output.display())
                },
                proxy.team.k_anonymity
            );
        }
        TuneCommand::Report(args) => report(args)?,
        TuneCommand::Show { config } => {
            let options = devboy_tune::ShowOptions {
                config,
                names_file: devboy_core::paths::endpoint_names_file(),
                summary_file: telemetry.join(devboy_tune::show::SUMMARY_FILE),
            };
            print!("{}", devboy_tune::show::show(&options)?);
        }
        TuneCommand::FromClaudeLogs {
            input_dir,
            project,
            dry_run,
            tools,
            server,
            output,
        } => {
            let input = match input_dir {
                Some(dir) => dir,
                None => std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join(".claude").join("projects"))
                    .context("HOME is not set; give --input-dir")?,
            };
            let options = devboy_tune::ClaudeLogOptions {
                input,
                project,
                server,
                tools,
                dry_run,
                output: output.unwrap_or_else(default_output),
                now_ms: devboy_tune::now_ms(),
                project_config: project_config(),
            };
            print!("{}", devboy_tune::claude_logs::run(&options)?);
        }
    }
    Ok(())
}
