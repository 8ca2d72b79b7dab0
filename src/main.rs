//! The `devboy` command: MCP middleware that makes tool results cost the
//! model fewer tokens. This binary is the only place that knows about the
//! command line, logging setup and process exit codes.

mod codec;
mod eval;
mod find;
mod replay;
mod setup;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use devboy_core::config::{ConfigSource, ProxyConfig};
use devboy_core::hooks::{self, HookAction};
use devboy_core::pipeline_config::PipelineConfig;
use devboy_mcp::partition;
use find::FindStrategy;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

#[derive(Parser)]
#[command(
    name = "devboy",
    version,
    about = "MCP middleware that makes every tool result cost the model fewer tokens"
)]
struct Cli {
    /// Log level for stderr and the log file (RUST_LOG, when set, wins).
    /// `warn` by default: Claude Code files every stderr line of a server
    /// as an error, so only what needs a person's attention is written.
    #[arg(long, global = true, default_value = "warn", value_name = "LEVEL")]
    log_level: String,
    /// Also append logs to this file.
    #[arg(long, global = true, value_name = "FILE")]
    log_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP on stdio, proxying the configured upstream servers.
    Mcp {
        /// devboy.toml or a Claude Code .mcp.json. Default: devboy.toml in the
        /// config directory if it exists, else the embedded default (built-in
        /// tools only).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// How long the first tools/list may wait for upstreams still
        /// starting (from devboy's start); later ones are announced with
        /// list_changed. Claude Code gives tools/list 5 s in all.
        #[arg(long, default_value_t = devboy_mcp::DEFAULT_LIST_GRACE_MS, value_name = "MS")]
        list_grace_ms: u64,
        /// What happens to tool results: `full` answers a repeat the model
        /// already holds with a reference to it and re-encodes structured
        /// results losslessly when that costs fewer tokens; `dedup` only
        /// does the first; `passthrough` changes nothing.
        #[arg(long, value_enum, default_value_t = PipelineArg::Full)]
        pipeline: PipelineArg,
        /// The pipeline's knobs. Default: pipeline_config.toml in the config
        /// directory if it exists, else the embedded default.
        #[arg(long, value_name = "FILE")]
        pipeline_config: Option<PathBuf>,
        /// Write the session to FILE (JSONL, created or truncated) so that
        /// `devboy replay FILE` reproduces it exactly. The file holds
        /// tool-result content and call arguments as they were. Off by
        /// default.
        #[arg(long, value_name = "FILE")]
        capture: Option<PathBuf>,
    },
    /// Write a starting config. Without --project: devboy.toml in the
    /// config directory (~/.config/devboy/), importing the servers of
    /// --from or of Claude Desktop's config when there is one; then
    /// `claude mcp add devboy -s user -- devboy mcp`. With --project: the
    /// project's .mcp.json servers move to devboy.mcp.json and .mcp.json
    /// starts devboy on it (relative paths, safe to commit). Either way each
    /// server is then started once, so that its tool list is kept and
    /// Claude Code's first session lists every tool at once.
    Init {
        /// Set up this project directory instead (default: the current one).
        #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = ".")]
        project: Option<PathBuf>,
        /// A .mcp.json or claude_desktop_config.json whose servers to import.
        #[arg(long, value_name = "FILE", conflicts_with = "project")]
        from: Option<PathBuf>,
        /// Replace an existing devboy.toml (kept as devboy.toml.bak).
        #[arg(long, conflicts_with = "project")]
        force: bool,
    },
    /// Check the setup without an MCP client: start every configured
    /// upstream and report its state, tool count and errors (keeping its
    /// tool list for `devboy mcp`'s first tools/list); find devboy's
    /// registrations in Claude Code and start each as Claude Code would,
    /// timing initialize and tools/list. Exits 1 when something is wrong.
    Doctor {
        /// devboy.toml or a .mcp.json (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// How long to wait for upstreams to start.
        #[arg(long, default_value_t = 30_000, value_name = "MS")]
        wait_ms: u64,
    },
    /// Print what the model would see of the body on stdin: its cheapest
    /// lossless encoding, or the body unchanged when nothing is cheaper.
    /// A one-line summary goes to stderr.
    Encode {
        /// Apply this exposed tool's settings from the pipeline config
        /// (`encode`, `template`), e.g. `gh__list_issues`.
        #[arg(long, value_name = "NAME")]
        tool: Option<String>,
        /// The pipeline config (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        pipeline_config: Option<PathBuf>,
    },
    /// Turn an encoded body on stdin back into the original (JSON as
    /// compact JSON, Markdown and text byte for byte).
    Decode,
    /// The files a question or an issue is about, ranked. With a model
    /// configured (`[retrieval.llm]`), it navigates the tree (Beam on
    /// small trees, Block on large ones); with none, the offline ranker:
    /// the code graph (symbols, call paths, mentioned paths), BM25 over
    /// paths, and the query's identifiers in file text.
    FindFiles {
        /// The question or issue text.
        query: String,
        /// The source tree (default: the current directory).
        #[arg(long, value_name = "DIR", default_value = ".")]
        root: PathBuf,
        /// How many files.
        #[arg(long, value_name = "N", default_value_t = 10)]
        k: usize,
        /// `auto`: the configured model (Beam up to 50 nodes, Block
        /// above), else offline; `beam` and `block` need a model.
        #[arg(long, value_enum, default_value_t = FindStrategy::Auto)]
        strategy: FindStrategy,
        /// `text` (what the model sees) or `json`.
        #[arg(long, value_enum, default_value_t = ExploreFormat::Text)]
        format: ExploreFormat,
        /// devboy.toml or a .mcp.json with `[retrieval.llm]` (default as for
        /// `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Evaluate a built-in tool over a SWE-bench-style dataset.
    Eval {
        #[command(subcommand)]
        what: EvalCommand,
    },
    /// Answer "how does X work" from the source: the files that matter,
    /// sized to a character budget. The index is kept under the cache
    /// directory and refreshed incrementally.
    Explore {
        /// The question, or the names of the symbols it is about.
        query: String,
        /// The source tree (default: the current directory).
        #[arg(long, value_name = "DIR", default_value = ".")]
        root: PathBuf,
        /// The size to aim for, in characters (a target, not a ceiling;
        /// default: the pipeline config's `explore.budget_chars`, 16000).
        #[arg(long, value_name = "N")]
        budget_chars: Option<usize>,
        /// The pipeline config whose `[explore]` applies (default as for
        /// `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        pipeline_config: Option<PathBuf>,
        /// `text` (what the model sees) or `json` (it and what it is made of).
        #[arg(long, value_enum, default_value_t = ExploreFormat::Text)]
        format: ExploreFormat,
    },
    /// Run recorded responses through the whole pipeline in one session and
    /// report tokens: raw, json_compact, json_pretty, final; the dedup /
    /// encoder / combined split; decode failures. PATHs: directories, nock
    /// recordings (raw-fixture.json), OpenAPI documents (their examples),
    /// .jsonl bodies ({"tool", "body"} per line), or any file as one body.
    /// A session capture (`devboy mcp --capture`) is replayed on its own,
    /// exactly, and its report adds the session's status figures.
    Replay {
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// `json` prints one JSON object instead of the table.
        #[arg(long, value_enum, default_value_t = ReplayFormat::Table)]
        format: ReplayFormat,
        /// The pipeline config (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        pipeline_config: Option<PathBuf>,
        /// Also write every result as the model was shown it, one JSON
        /// line each (`{"tool", "action", "text"}`), to FILE: to see what
        /// a change to the pipeline changes, result by result.
        #[arg(long, value_name = "FILE")]
        deliveries: Option<PathBuf>,
    },
    /// Claude Code hooks that tell running devboy processes the model's
    /// context was compacted or cleared.
    Hook {
        #[command(subcommand)]
        command: HookCommand,
    },
    /// The offline tuner: telemetry and Claude Code session logs in,
    /// pipeline_config.toml out.
    Tune {
        #[command(subcommand)]
        command: TuneCommand,
    },
}

#[derive(Subcommand)]
enum TuneCommand {
    /// Turn the last N days of telemetry into pipeline_config.toml: a
    /// per-endpoint table, the changes the rules propose with their reasons,
    /// each simulated on the same events, and the file updated with those
    /// that do not save less.
    ///
    /// Rules (no endpoint is touched with fewer than 20 results; keys a
    /// person wrote are never changed): D1 dedup off for an endpoint whose
    /// results repeat ≤ 5% and whose id lines cost more than its references
    /// saved; D2 dedup on where ≥ 30% repeat a body already in the context;
    /// N1 near-references on where ≥ 50% of bodies look like a polled
    /// status that changed a little; T1 pin the template the router already
    /// chooses for ≥ 95% of a Markdown-table (or diff-carrying JSON)
    /// endpoint; C1/C2 raise dedup.max_entries / dedup.ttl_secs when the
    /// cache replay loses ≥ 2% of references to them (the TTL only when
    /// compactions are signalled); S1 move dedup.min_body_bytes to the size
    /// with the highest expected saving.
    ///
    /// Simulation: each recorded session is replayed through a model of the
    /// dedup cache under the current and the proposed settings, and the
    /// recorded token figures are adjusted only where the two replays
    /// differ and the record agrees with the current one. Its limits:
    /// telemetry has no arguments or contents, so near-duplicates are a
    /// size pattern (an upper bound), a pin's effect on bodies encoded
    /// otherwise is a loss of their whole saving (a lower bound),
    /// invalidations by mutating calls are not recorded, sizes are in
    /// characters, and sampled sessions keep their recorded figures.
    Analyze {
        /// How many days back to read.
        #[arg(long, default_value_t = 30, value_name = "N")]
        days: u32,
        /// The events directory. Default: <telemetry dir>/events.
        #[arg(long, value_name = "DIR")]
        input_dir: Option<PathBuf>,
        /// The pipeline config to update. Default: pipeline_config.toml in
        /// the config directory (created from the documented default).
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Print the report and the keys that would change; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the effective pipeline config, its source and schema version,
    /// and the settings each endpoint seen by the last analysis gets.
    Show {
        /// The pipeline config (default as for `devboy mcp`).
        #[arg(long = "pipeline-config", alias = "config", value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Read Claude Code's session logs (models, tool uses, sessions,
    /// compactions) and propose [profiles] model and agent pins and, with
    /// --tools, [tools."NAME"] side effects evident from tool names (a
    /// heuristic) and follow-ups. Hand-written entries are never overwritten.
    FromClaudeLogs {
        /// Default: ~/.claude/projects.
        #[arg(long, value_name = "DIR")]
        input_dir: Option<PathBuf>,
        /// Only this project: its path, or part of its directory name under
        /// the input directory.
        #[arg(long, value_name = "P")]
        project: Option<String>,
        /// Print, write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Propose [tools."NAME"] side_effect entries for devboy's tools.
        #[arg(long)]
        tools: bool,
        /// The name devboy is registered under in Claude Code.
        #[arg(long, default_value = "devboy", value_name = "NAME")]
        server: String,
        /// The pipeline config to update (default as for `tune analyze`).
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum ReplayFormat {
    Table,
    Json,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PipelineArg {
    Full,
    Dedup,
    Passthrough,
}

#[derive(Subcommand)]
enum HookCommand {
    /// Run by Claude Code's PreCompact, SessionStart and PostToolUse hooks:
    /// reads the hook's JSON on stdin and tells the devboy processes serving
    /// that project of a compaction or /clear, the session's model, or a
    /// file Claude Code's Edit/Write/MultiEdit/NotebookEdit wrote. Prints
    /// nothing on stdout and always exits 0 (a hook must never get in
    /// Claude Code's way).
    Signal,
    /// Adds the hooks to a project's .claude/settings.json (created if
    /// missing; existing keys and hooks are kept; running it again adds
    /// nothing). The hook runs this devboy executable by absolute path.
    Install {
        /// The project directory. Default: the current directory.
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// The settings file to edit. Default: <project>/.claude/settings.json.
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // doctor (and init, which starts the servers it wrote) reports every
    // problem on stdout itself; its warnings on stderr would say each one
    // twice.
    let level = match (&cli.command, cli.log_level.as_str()) {
        (Command::Doctor { .. } | Command::Init { .. }, "warn") => "error",
        (_, level) => level,
    };
    if let Err(error) = init_logging(level, cli.log_file.as_deref()) {
        eprintln!("devboy: {error:#}");
        return ExitCode::from(2);
    }
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("devboy: {error:#}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, clap::Subcommand)]
enum EvalCommand {
    /// Gold-file recall and answer size of `explore`. DATASET: JSON lines
    /// `{instance_id, repo, base_commit, problem_statement, gold_files}`;
    /// each row's tree is exported at `base_commit` from the git repository
    /// at `REPOS/<owner>+<name>` (bare or not, or its `repo/` subfolder).
    Explore {
        dataset: PathBuf,
        /// Where the repositories are.
        #[arg(long, value_name = "DIR")]
        repos: PathBuf,
        /// The size each answer aims for, in characters.
        #[arg(long, value_name = "N", default_value_t = 16_000)]
        budget_chars: usize,
        /// `json` prints one JSON object (with every instance) instead of the table.
        #[arg(long, value_enum, default_value_t = ExploreFormat::Text)]
        format: ExploreFormat,
    },
    /// Ranking quality of `find-files` (recall@gold, exact@gold, recall@5,
    /// recall@10, MRR, nDCG@10), same dataset and repository layout as
    /// `eval explore`.
    FindFiles {
        dataset: PathBuf,
        /// Where the repositories are.
        #[arg(long, value_name = "DIR")]
        repos: PathBuf,
        /// Files a model returns per query (the offline ranker ranks at
        /// least 10, for recall@10).
        #[arg(long, value_name = "N", default_value_t = 10)]
        k: usize,
        /// As for `find-files`.
        #[arg(long, value_enum, default_value_t = FindStrategy::Auto)]
        strategy: FindStrategy,
        /// `json` prints one JSON object (with every instance) instead of the table.
        #[arg(long, value_enum, default_value_t = ExploreFormat::Text)]
        format: ExploreFormat,
        /// The config with `[retrieval.llm]` (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

/// How `devboy explore` prints its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExploreFormat {
    Text,
    Json,
}

fn explore_cmd(
    query: &str,
    root: &std::path::Path,
    options: &devboy_explore::Options,
    format: ExploreFormat,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    let index = devboy_explore::Index::open(root, &devboy_explore::cache_dir())?;
    let answer = devboy_explore::explore(&index, query, options);
    let mut out = std::io::stdout().lock();
    match format {
        ExploreFormat::Text => out.write_all(answer.text.as_bytes())?,
        ExploreFormat::Json => {
            serde_json::to_writer(&mut out, &answer)?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Mcp {
            config,
            list_grace_ms,
            pipeline,
            pipeline_config,
            capture,
        } => {
            if capture.is_some() && pipeline == PipelineArg::Passthrough {
                anyhow::bail!(
                    "--capture records the pipeline's session; --pipeline passthrough has none"
                );
            }
            let mut config = ProxyConfig::resolve(config.as_deref())?;
            if let Some(parent) = std::env::var_os(devboy_mcp::NESTED_ENV) {
                // Started as an upstream of another devboy (its config lists
                // devboy itself). Starting this config's upstreams could
                // start devboy again, without end; the parent marks this
                // server failed when it sees devboy answer.
                tracing::warn!(
                    parent = %parent.to_string_lossy(),
                    "started as an upstream of another devboy; serving built-in tools only (devboy does not proxy itself)"
                );
                config.upstreams.clear();
            }
            match &config.source {
                ConfigSource::File(path) => {
                    tracing::info!(config = %path.display(), upstreams = config.upstreams.len(), "config loaded")
                }
                ConfigSource::Embedded => {
                    tracing::info!("no config file; serving built-in tools only")
                }
            }
            for warning in &config.warnings {
                tracing::warn!("{warning}");
            }
            let options = devboy_mcp::ProxyOptions {
                list_grace: Duration::from_millis(list_grace_ms),
                listing_cache: Some(devboy_core::paths::listing_cache_dir()),
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            let pipeline_config = PipelineConfig::resolve(pipeline_config.as_deref())?;
            if let ConfigSource::File(path) = &pipeline_config.source {
                tracing::info!(pipeline_config = %path.display(), schema = pipeline_config.file_version, "pipeline config loaded");
            }
            for warning in &pipeline_config.warnings {
                tracing::warn!("{warning}");
            }
            let pipeline_config = Arc::new(pipeline_config);
            let pipeline = match pipeline {
                PipelineArg::Passthrough => devboy_mcp::Pipeline::Passthrough,
                PipelineArg::Full | PipelineArg::Dedup => devboy_mcp::Pipeline::Configured {
                    config: pipeline_config.clone(),
                    encode: pipeline == PipelineArg::Full,
                    capture,
                },
            };
            runtime.block_on(devboy_mcp::serve_stdio(
                &config,
                options,
                pipeline,
                pipeline_config,
            ))?;
            // Upstream children are already stopped; do not wait for stray tasks.
            runtime.shutdown_timeout(Duration::from_millis(200));
            Ok(())
        }
        Command::Encode {
            tool,
            pipeline_config,
        } => {
            let config = PipelineConfig::resolve(pipeline_config.as_deref())?;
            codec::encode_cmd(&config, tool.as_deref())
        }
        Command::Decode => codec::decode_cmd(),
        Command::Eval {
            what:
                EvalCommand::Explore {
                    dataset,
                    repos,
                    budget_chars,
                    format,
                },
        } => eval::eval_explore(
            &dataset,
            &repos,
            budget_chars,
            format == ExploreFormat::Json,
        ),
        Command::Eval {
            what:
                EvalCommand::FindFiles {
                    dataset,
                    repos,
                    k,
                    strategy,
                    format,
                    config,
                },
        } => eval::eval_find_files(
            &dataset,
            &repos,
            k,
            strategy,
            format == ExploreFormat::Json,
            config.as_deref(),
        ),
        Command::FindFiles {
            query,
            root,
            k,
            strategy,
            format,
            config,
        } => find::find_files_cmd(
            &query,
            &root,
            &devboy_retrieval::Options {
                k: k.max(1),
                ..Default::default()
            },
            strategy,
            format == ExploreFormat::Json,
            config.as_deref(),
        ),
        Command::Explore {
            query,
            root,
            budget_chars,
            pipeline_config,
            format,
        } => {
            let config = PipelineConfig::resolve(pipeline_config.as_deref())?;
            let mut options = devboy_explore::Options::default();
            options.adaptive &= config.explore.adaptive;
            options.budget_chars = budget_chars.unwrap_or(config.explore.budget_chars);
            explore_cmd(&query, &root, &options, format)
        }
        Command::Init {
            project: Some(dir), ..
        } => setup::init_project(&dir),
        Command::Init {
            project: None,
            from,
            force,
        } => setup::init_user(from.as_deref(), force),
        Command::Doctor { config, wait_ms } => {
            setup::doctor(config.as_deref(), Duration::from_millis(wait_ms))
        }
        Command::Replay {
            paths,
            format,
            pipeline_config,
            deliveries,
        } => {
            let config = PipelineConfig::resolve(pipeline_config.as_deref())?;
            replay::replay_cmd(
                &config,
                &paths,
                format == ReplayFormat::Json,
                deliveries.as_deref(),
            )
        }
        Command::Hook {
            command: HookCommand::Signal,
        } => {
            hook_signal();
            Ok(())
        }
        Command::Hook {
            command: HookCommand::Install { project, settings },
        } => hook_install(project, settings),
        Command::Tune { command } => tune(command),
    }
}

/// `devboy tune …`: the reports go to stdout.
fn tune(command: TuneCommand) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    let telemetry = devboy_core::paths::telemetry_dir();
    let default_output = devboy_core::pipeline_config::default_file;
    match command {
        TuneCommand::Analyze {
            days,
            input_dir,
            output,
            dry_run,
        } => {
            let options = devboy_tune::AnalyzeOptions {
                input: input_dir.unwrap_or_else(|| telemetry.join("events")),
                days,
                output: output.unwrap_or_else(default_output),
                names_file: devboy_core::paths::endpoint_names_file(),
                summary_file: Some(telemetry.join(devboy_tune::show::SUMMARY_FILE)),
                dry_run,
                progress: std::io::stderr().is_terminal(),
                now_ms: devboy_tune::now_ms(),
            };
            print!("{}", devboy_tune::analyze::run(&options)?);
        }
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
            };
            print!("{}", devboy_tune::claude_logs::run(&options)?);
        }
    }
    Ok(())
}

/// `devboy hook signal`. Never fails: problems go to stderr (which Claude
/// Code does not show for a hook that exits 0) and the exit code stays 0.
fn hook_signal() {
    let mut input = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut input) {
        tracing::warn!(%error, "hook signal: cannot read stdin; ignored");
        return;
    }
    let value: serde_json::Value = match serde_json::from_str(&input) {
        Ok(value) => value,
        Err(error) => {
            tracing::warn!(%error, "hook signal: stdin is not JSON; ignored");
            return;
        }
    };
    // What to record in each project's state file.
    enum Record {
        Reset(Option<String>),
        Model(String),
        Writes(Vec<String>),
    }
    let (event, cwd, session_id, record) = match hooks::classify(&value) {
        HookAction::Signal {
            event,
            cwd,
            session_id,
            model,
        } => (event, cwd, session_id, Record::Reset(model)),
        HookAction::Model {
            event,
            model,
            cwd,
            session_id,
        } => (event, cwd, session_id, Record::Model(model)),
        HookAction::Written {
            event,
            paths,
            cwd,
            session_id,
        } => {
            // Relative paths are the session's: absolute from its `cwd`.
            let base = cwd.as_deref().map(PathBuf::from);
            let paths = paths
                .into_iter()
                .map(|path| match &base {
                    Some(base) if !std::path::Path::new(&path).is_absolute() => {
                        base.join(path).display().to_string()
                    }
                    _ => path,
                })
                .collect();
            (event, cwd, session_id, Record::Writes(paths))
        }
        HookAction::Ignore(reason) => {
            tracing::debug!(%reason, "hook signal: nothing to do");
            return;
        }
    };
    // The hook's `cwd` is where Claude Code is now; CLAUDE_PROJECT_DIR is
    // the project root, where it started its MCP servers. They differ when
    // the session changed directory; signal both (an extra signal only
    // costs savings, a missed one would leave dangling references).
    let mut projects: Vec<PathBuf> = Vec::new();
    let candidates = [
        cwd.map(PathBuf::from),
        std::env::var_os("CLAUDE_PROJECT_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from),
    ];
    for dir in candidates.into_iter().flatten() {
        let key = partition::project_key(&dir);
        if !projects.contains(&key) {
            projects.push(key);
        }
    }
    if projects.is_empty() {
        match std::env::current_dir() {
            Ok(dir) => projects.push(partition::project_key(&dir)),
            Err(error) => {
                tracing::warn!(%error, "hook signal: no cwd in the input and no working directory");
                return;
            }
        }
    }
    let runtime_dir = devboy_core::paths::runtime_dir();
    for project in projects {
        let file = devboy_core::paths::partition_file(&runtime_dir, &project);
        let session_id = session_id.as_deref();
        let written = match &record {
            Record::Reset(model) => {
                partition::signal(&file, &project, &event, session_id, model.as_deref())
            }
            Record::Model(model) => {
                partition::record_model(&file, &project, &event, session_id, model)
            }
            Record::Writes(paths) => {
                partition::record_writes(&file, &project, &event, session_id, paths)
            }
        };
        match written {
            Ok(state) => tracing::debug!(
                %event, project = %project.display(), epoch = state.epoch,
                model = state.model.as_deref().unwrap_or("unknown"),
                "hook signal: recorded"
            ),
            Err(error) => tracing::warn!(
                %event, file = %file.display(), %error,
                "hook signal: cannot write the partition file"
            ),
        }
    }
}

/// `devboy hook install`.
fn hook_install(project: Option<PathBuf>, settings: Option<PathBuf>) -> anyhow::Result<()> {
    let file = match settings {
        Some(file) => file,
        None => {
            let project = match project {
                Some(dir) => dir,
                None => std::env::current_dir().context("finding the current directory")?,
            };
            project.join(".claude").join("settings.json")
        }
    };
    let exe = std::env::current_exe().context("finding the devboy executable")?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    // `.claude/settings.json` is often shared: write the command as a user
    // types it when `devboy` on PATH is this very program, and the path
    // only when it is not (a build run from its target directory).
    let command = if on_path_as("devboy", &exe) {
        hooks::signal_command("devboy")
    } else {
        let exe = exe
            .to_str()
            .with_context(|| format!("devboy's path {} is not UTF-8", exe.display()))?;
        hooks::signal_command(exe)
    };
    let mut document = read_settings(&file)?;
    let added = hooks::merge_hooks(&mut document, &command)
        .map_err(|e| anyhow::anyhow!("{}: {e}; the file was left unchanged", file.display()))?;
    if added.is_empty() {
        println!("devboy: devboy's hooks are already in {}", file.display());
        return Ok(());
    }
    write_settings(&file, &document)?;
    println!(
        "devboy: added the {} hook{} to {} (command: {command})",
        added.join(" and "),
        if added.len() > 1 { "s" } else { "" },
        file.display()
    );
    Ok(())
}

/// Whether `name`, looked up on PATH as a shell would, is the program at
/// `exe` (already canonical).
fn on_path_as(name: &str, exe: &Path) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .and_then(|found| std::fs::canonicalize(found).ok())
        .is_some_and(|found| found == exe)
}

/// A settings file as JSON; a missing or empty file is `{}`.
fn read_settings(file: &Path) -> anyhow::Result<serde_json::Value> {
    match std::fs::read_to_string(file) {
        Ok(text) if text.trim().is_empty() => Ok(serde_json::json!({})),
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not valid JSON ({e}); the file was left unchanged",
                file.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(serde_json::json!({})),
        Err(e) => Err(e).with_context(|| format!("reading {}", file.display())),
    }
}

/// Replaces `file` whole (temporary file, then rename) with `document`.
fn write_settings(file: &Path, document: &serde_json::Value) -> anyhow::Result<()> {
    // Write through a symlink to its target rather than replacing the link.
    let target = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let mut text = serde_json::to_string_pretty(document)?;
    text.push('\n');
    let temp = target.with_extension(format!("json.devboy-{}.tmp", std::process::id()));
    std::fs::write(&temp, text).with_context(|| format!("writing {}", temp.display()))?;
    std::fs::rename(&temp, &target).with_context(|| {
        let _ = std::fs::remove_file(&temp);
        format!("replacing {}", target.display())
    })
}

fn init_logging(level: &str, file: Option<&std::path::Path>) -> anyhow::Result<()> {
    let filter = || -> anyhow::Result<EnvFilter> {
        match std::env::var("RUST_LOG") {
            Ok(spec) if !spec.is_empty() => EnvFilter::try_new(&spec)
                .with_context(|| format!("RUST_LOG={spec:?} is not a valid filter")),
            _ => {
                let filter = EnvFilter::try_new(level).with_context(|| {
                    format!("--log-level {level:?}: expected error, warn, info, debug or trace")
                })?;
                // rmcp warns about every error response it sends, and devboy
                // answers an unknown tool or an upstream's own error that
                // way: the caller is told, stderr need not repeat it.
                // Its transport worker logs an error per failed connection
                // attempt, which devboy reports itself, once (upstream.rs).
                let mut filter = filter;
                for directive in ["rmcp::service=error", "rmcp::transport::worker=off"] {
                    filter = filter.add_directive(
                        directive
                            .parse()
                            .context("the built-in rmcp log directives")?,
                    );
                }
                Ok(filter)
            }
        }
    };
    let stderr = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(filter()?);
    let file_layer = match file {
        Some(path) => {
            let handle = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening log file {}", path.display()))?;
            Some(
                fmt::layer()
                    .with_writer(std::sync::Mutex::new(handle))
                    .with_ansi(false)
                    .with_filter(filter()?),
            )
        }
        None => None,
    };
    tracing_subscriber::registry()
        .with(stderr)
        .with(file_layer)
        .init();
    Ok(())
}
