//! The `devboy` command: MCP middleware that makes tool results cost the
//! model fewer tokens. This binary is the only place that knows about the
//! command line, logging setup and process exit codes.

mod cli;
mod codec;
mod ctl;
mod eval;
mod eval_code;
mod explore;
mod find;
mod hooks;
mod logging;
mod login;
mod replay;
mod serve;
mod setup;
mod tune;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use cli::{Cli, Command, EvalCommand, ExploreFormat, HookCommand, ReplayFormat};
use devboy_core::pipeline_config::PipelineConfig;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // doctor (and init, which starts the servers it wrote) reports every
    // problem on stdout itself; its warnings on stderr would say each one
    // twice.
    let level = match (&cli.command, cli.log_level.as_str()) {
        (Command::Doctor { .. } | Command::Init { .. }, "warn") => "error",
        (_, level) => level,
    };
    if let Err(error) = logging::init(level, cli.log_file.as_deref()) {
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

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Mcp(args) => serve::mcp(args),
        Command::CodeWorker => Ok(devboy_code::worker::serve(
            std::io::BufReader::new(std::io::stdin()),
            std::io::stdout(),
        )?),
        Command::Serve(args) => serve::serve(args),
        Command::Ctl(args) => ctl::ctl(args),
        Command::Status(args) => ctl::status(args),
        Command::Encode {
            tool,
            pipeline_config,
        } => codec::encode_cmd(&pipeline_config.resolve()?, tool.as_deref()),
        Command::Decode => codec::decode_cmd(),
        Command::Eval {
            what:
                EvalCommand::Explore {
                    dataset,
                    budget_chars,
                    format,
                },
        } => eval::eval_explore(
            &dataset.datasets,
            &dataset.repos,
            budget_chars,
            format.json(),
        ),
        Command::Eval {
            what:
                EvalCommand::CodeMode {
                    config,
                    repo,
                    set,
                    format,
                },
        } => eval_code::eval_code_mode(&config, &repo, set, format.json()),
        Command::Eval {
            what:
                EvalCommand::FindFiles {
                    dataset,
                    k,
                    strategy,
                    format,
                    config,
                },
        } => eval::eval_find_files(
            &dataset.datasets,
            &dataset.repos,
            k,
            strategy,
            format.json(),
            config.as_deref(),
        ),
        Command::FindFiles {
            query,
            tree,
            k,
            strategy,
            format,
            config,
        } => find::find_files_cmd(
            &query,
            &tree.root,
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
            tree,
            budget_chars,
            pipeline_config,
            format,
        } => {
            let config = PipelineConfig::resolve(pipeline_config.as_deref())?;
            explore::explore_cmd(
                &query,
                &tree.root,
                &explore::options(&config.explore, budget_chars),
                format == ExploreFormat::Json,
            )
        }
        Command::Init {
            project: Some(dir), ..
        } => setup::init_project(&dir),
        Command::Init {
            project: None,
            from,
            force,
        } => setup::init_user(from.as_deref(), force),
        Command::Login { name, config } => login::login(&name, config.as_deref()),
        Command::Logout { name, config } => login::logout(&name, config.as_deref()),
        Command::Doctor { config, wait_ms } => {
            setup::doctor(config.as_deref(), Duration::from_millis(wait_ms))
        }
        Command::Replay {
            paths,
            format,
            pipeline_config,
            deliveries,
        } => replay::replay_cmd(
            &pipeline_config.resolve()?,
            &paths,
            format == ReplayFormat::Json,
            deliveries.as_deref(),
        ),
        Command::Hook {
            command: HookCommand::Signal,
        } => {
            hooks::signal();
            Ok(())
        }
        Command::Hook {
            command: HookCommand::Install { project, settings },
        } => hooks::install(project, settings),
        Command::Tune { command } => tune::tune(command),
    }
}
