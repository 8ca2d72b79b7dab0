//! The command line: every subcommand, its arguments and their help.
//! Arguments that several subcommands take with the same meaning and help
//! are one flattened struct each.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use devboy_core::pipeline_config::PipelineConfig;

use crate::find::FindStrategy;
use crate::serve;

#[derive(Parser)]
#[command(
    name = "devboy",
    version,
    about = "MCP middleware that makes every tool result cost the model fewer tokens"
)]
pub struct Cli {
    /// Log level for stderr and the log file (RUST_LOG, when set, wins).
    /// `warn` by default: Claude Code files every stderr line of a server
    /// as an error, so only what needs a person's attention is written.
    #[arg(long, global = true, default_value = "warn", value_name = "LEVEL")]
    pub log_level: String,
    /// Also append logs to this file.
    #[arg(long, global = true, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve MCP on stdio, proxying the configured upstream servers.
    Mcp(serve::McpArgs),
    /// Run one code-mode script, speaking devboy's worker protocol on
    /// stdin/stdout (devboy starts it; docs in devboy-code's worker.rs).
    #[command(hide = true)]
    CodeWorker,
    /// Serve MCP over Streamable HTTP (--http ADDR) to several clients at
    /// once, each with its own session over one set of upstreams; a bearer
    /// token is required unless ADDR is loopback.
    Serve(serve::ServeArgs),
    /// Restart, enable, disable or list the servers of a running devboy
    /// (through its control socket, with this user's permissions only).
    Ctl(crate::ctl::CtlArgs),
    /// Every running devboy of this user: what it serves, its servers'
    /// states, its sessions' calls and savings.
    Status(crate::ctl::StatusArgs),
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
    /// Log in to an HTTP server that needs OAuth: open its authorization
    /// page (with $BROWSER when set, else the system's opener; the URL is
    /// printed too), wait for the redirect on a loopback port, and keep the
    /// tokens for that server in a file only you can read. A running devboy
    /// connects to the server within a second, without a restart.
    Login {
        /// The server's key in the config (or its prefix).
        name: String,
        /// devboy.toml or a .mcp.json (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Forget the tokens `devboy login` kept for a server.
    Logout {
        /// The server's key in the config (or its prefix).
        name: String,
        /// devboy.toml or a .mcp.json (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
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
        #[command(flatten)]
        pipeline_config: PipelineConfigFile,
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
        #[command(flatten)]
        tree: SourceTree,
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
        #[command(flatten)]
        tree: SourceTree,
        /// The most characters the answer may take, heading and flow lines
        /// included (default: the pipeline config's `explore.budget_chars`,
        /// 16000).
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
        /// What to replay: directories, nock recordings, OpenAPI
        /// documents, `.jsonl` bodies, a session capture (on its own), or
        /// any file as one body.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// `json` prints one JSON object instead of the table.
        #[arg(long, value_enum, default_value_t = ReplayFormat::Table)]
        format: ReplayFormat,
        #[command(flatten)]
        pipeline_config: PipelineConfigFile,
        /// Also write every result as the model was shown it, one JSON
        /// line each (`{"tool", "action", "text"}`, and `"id_line"`, the
        /// block after the text, when it has an id), to FILE: to see what
        /// a change to the pipeline changes, result by result.
        #[arg(long, value_name = "FILE")]
        deliveries: Option<PathBuf>,
    },
    /// Claude Code hooks that tell running devboy processes the model's
    /// context was compacted or cleared, the session's model, and the
    /// files Claude Code's own tools wrote.
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
pub enum TuneCommand {
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
        /// devboy.toml, for its [team] section: the team's fingerprints
        /// and providers' are blended with this member's own before the
        /// rules run, and with `share = true` this member's are shared
        /// after (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Share this member's endpoint fingerprints with the team: the last N
    /// days of telemetry as one Parquet object in the [team] store, only
    /// endpoints seen in at least k sessions, no content, paths,
    /// arguments or session ids (docs/team.md lists every column). A copy
    /// of what was uploaded is kept in the telemetry directory.
    Share {
        /// How many days back to read.
        #[arg(long, default_value_t = 30, value_name = "N")]
        days: u32,
        /// The events directory. Default: <telemetry dir>/events.
        #[arg(long, value_name = "DIR")]
        input_dir: Option<PathBuf>,
        /// devboy.toml with the [team] section (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Merge every member's fingerprints in the team store into the team's
    /// (weighted by sessions; endpoints with fewer than k sessions or 2
    /// members dropped) and write them whole, with a manifest. Stateless:
    /// anyone on the team, or a scheduled job beside the bucket, can run it.
    Aggregate {
        /// devboy.toml with the [team] section (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The store, instead of [team] store (s3://, gs://, az://, file://).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
        /// Sessions an endpoint needs overall, instead of [team]
        /// k_anonymity (with --store and no devboy.toml: 5).
        #[arg(long, value_name = "K")]
        k_anonymity: Option<u32>,
        /// Member objects last seen longer ago are left out, instead of
        /// [team] ttl_days (with --store and no devboy.toml: 14).
        #[arg(long, value_name = "DAYS")]
        ttl_days: Option<u32>,
    },
    /// Write a provider fingerprint document (docs/team.md) of one
    /// server's tools from this member's telemetry, for that server's
    /// operator to serve (e.g. at /mcp/fingerprints/v1).
    Publish {
        /// The server (its key in the config) whose tools to publish.
        #[arg(long, value_name = "NAME")]
        server: String,
        /// Where to write the document (`-` for stdout).
        #[arg(long, short, value_name = "FILE", default_value = "-")]
        output: PathBuf,
        /// How many days back to read.
        #[arg(long, default_value_t = 30, value_name = "N")]
        days: u32,
        /// The events directory. Default: <telemetry dir>/events.
        #[arg(long, value_name = "DIR")]
        input_dir: Option<PathBuf>,
        /// devboy.toml or a .mcp.json (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Savings over time: per day, session, server and tool, the tokens the
    /// model would have received, those it received, and the dedup/encoder
    /// split; as tables, JSON, or a self-contained HTML page with charts.
    Report(crate::tune::ReportArgs),
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
pub enum ReplayFormat {
    Table,
    Json,
}

#[derive(Subcommand)]
pub enum HookCommand {
    /// Run by Claude Code's PreCompact, SessionStart and PostToolUse hooks:
    /// reads the hook's JSON on stdin and tells the devboy processes serving
    /// that project of a compaction or /clear, the session's model, or a
    /// file Claude Code's Edit/Write/MultiEdit/NotebookEdit wrote. Prints
    /// nothing on stdout and always exits 0 (a hook must never get in
    /// Claude Code's way).
    Signal,
    /// Adds the hooks to a project's .claude/settings.json (created if
    /// missing; existing keys and hooks are kept; running it again adds
    /// nothing). The hook runs `devboy hook signal` when the `devboy` on
    /// PATH is this executable, else this executable by absolute path.
    Install {
        /// The project directory. Default: the current directory.
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// The settings file to edit. Default: <project>/.claude/settings.json.
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum EvalCommand {
    /// Gold-file recall and answer size of `explore`. DATASET: JSON lines
    /// `{instance_id, repo, base_commit, problem_statement, gold_files}`;
    /// each row's tree is exported at `base_commit` from the git repository
    /// at `REPOS/<owner>+<name>` (bare or not, or its `repo/` subfolder).
    Explore {
        #[command(flatten)]
        dataset: EvalDataset,
        /// The size each answer aims for, in characters.
        #[arg(long, value_name = "N", default_value_t = 16_000)]
        budget_chars: usize,
        #[command(flatten)]
        format: EvalFormat,
    },
    /// Ranking quality of `find-files` (recall@gold, exact@gold, recall@5,
    /// recall@10, MRR, nDCG@10), same dataset and repository layout as
    /// `eval explore`.
    FindFiles {
        #[command(flatten)]
        dataset: EvalDataset,
        /// Files a model returns per query (the offline ranker ranks at
        /// least 10, for recall@10).
        #[arg(long, value_name = "N", default_value_t = 10)]
        k: usize,
        /// As for `find-files`.
        #[arg(long, value_enum, default_value_t = FindStrategy::Auto)]
        strategy: FindStrategy,
        #[command(flatten)]
        format: EvalFormat,
        /// The config with `[retrieval.llm]` (default as for `devboy mcp`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Model-visible tokens of multi-step read tasks three ways (every
    /// result to the model, devboy per result, one `devboy_run` script),
    /// and whether code mode's answers are the same. The servers come from
    /// CONFIG: one with `read_text_file` allowed the repository, one with
    /// `git_log`, one with `read_graph` (its graph is seeded).
    CodeMode {
        /// The devboy.toml naming the file system, git and memory servers.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// The repository the tasks read (devboy's own checkout).
        #[arg(long, value_name = "DIR", default_value = ".")]
        repo: PathBuf,
        /// Which tasks: the tuning set, the validation set, or both.
        #[arg(long, value_enum, default_value_t = crate::eval_code::TaskSet::All)]
        set: crate::eval_code::TaskSet,
        #[command(flatten)]
        format: EvalFormat,
    },
}

/// How `devboy explore` prints its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExploreFormat {
    Text,
    Json,
}

// Arguments that several subcommands take with the same meaning and help.

/// `--root`: the source tree a code command reads.
#[derive(Debug, clap::Args)]
pub struct SourceTree {
    /// The source tree (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub root: PathBuf,
}

/// `--pipeline-config`, found as `devboy mcp` finds it when not given.
#[derive(Debug, clap::Args)]
pub struct PipelineConfigFile {
    /// The pipeline config (default as for `devboy mcp`).
    #[arg(long, value_name = "FILE")]
    pub pipeline_config: Option<PathBuf>,
}

impl PipelineConfigFile {
    /// The effective pipeline config.
    pub fn resolve(&self) -> anyhow::Result<PipelineConfig> {
        let config = PipelineConfig::resolve(self.pipeline_config.as_deref())?;
        // As for `devboy mcp`: a key left out is said, and stops nothing.
        for problem in &config.problems {
            tracing::warn!("{problem}");
        }
        Ok(config)
    }
}

/// An evaluation's dataset and where its repositories are.
#[derive(Debug, clap::Args)]
pub struct EvalDataset {
    /// One or more datasets, each reported as a split named by its file
    /// (say a tuning set and a validation set, measured in one run).
    #[arg(required = true, value_name = "DATASET")]
    pub datasets: Vec<PathBuf>,
    /// Where the repositories are.
    #[arg(long, value_name = "DIR")]
    pub repos: PathBuf,
}

/// How an evaluation prints its results.
#[derive(Debug, clap::Args)]
pub struct EvalFormat {
    /// `json` prints one JSON object (with every instance) instead of the table.
    #[arg(long, value_enum, default_value_t = ExploreFormat::Text)]
    pub format: ExploreFormat,
}

impl EvalFormat {
    /// Whether to print one JSON object.
    pub fn json(&self) -> bool {
        self.format == ExploreFormat::Json
    }
}
