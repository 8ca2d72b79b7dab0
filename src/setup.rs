//! `devboy init` and `devboy doctor`: the files a new user needs, and a
//! look at what works without an MCP client.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use devboy_core::config::import::{
    self, ProjectApproval, RegisteredServer, Registration, PROJECT_SERVERS_FILE,
};
use devboy_core::config::{ConfigSource, ProxyConfig, EMBEDDED_DEFAULT_TOML};
use devboy_core::pipeline_config::PipelineConfig;
use devboy_mcp::doctor::{self, ServerCommand, ServerUrl, UrlProbeError};
use serde_json::Value;

/// Claude Code's limit for `tools/list` (`claude mcp list` reports a
/// timeout past it).
const CLAUDE_TOOLS_LIST_LIMIT: Duration = Duration::from_secs(5);

/// How long an HTTP server registered under another name gets to say, in
/// `initialize`, whether it is devboy.
const IDENTIFY_WAIT: Duration = Duration::from_secs(2);

/// How long `devboy init` waits for the servers it starts (as `devboy
/// doctor` does by default).
const INIT_START_WAIT: Duration = Duration::from_secs(30);

/// `devboy init`: writes `<config dir>/devboy.toml`, importing the servers
/// of `from` or, when not given, of Claude Desktop's config if there is one.
pub fn init_user(from: Option<&Path>, force: bool) -> anyhow::Result<()> {
    let target = devboy_core::paths::default_config_file();
    if target.exists() && !force {
        bail!(
            "{} already exists; edit it, or run `devboy init --force` to write a new one (the old one is kept as devboy.toml.bak)",
            target.display()
        );
    }
    let source = match from {
        Some(path) => Some(path.to_path_buf()),
        None => claude_desktop_config().filter(|p| p.is_file()),
    };
    let mut text = EMBEDDED_DEFAULT_TOML.to_owned();
    let mut imported = Vec::new();
    if let Some(source) = &source {
        let json = std::fs::read_to_string(source)
            .with_context(|| format!("reading {}", source.display()))?;
        let servers = import::mcp_servers_to_toml(&json)
            .with_context(|| format!("{}: importing its servers", source.display()))?;
        for name in &servers.skipped_devboy {
            println!(
                "skipped `{name}` of {}: it is devboy itself",
                source.display()
            );
        }
        if !servers.names.is_empty() {
            text.push_str(&format!(
                "\n# ------------------------------------------------ imported by `devboy init`\n# from {}\n\n{}",
                source.display(),
                servers.toml
            ));
        }
        imported = servers.names;
    }
    let dir = target.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if target.exists() {
        let backup = target.with_extension("toml.bak");
        std::fs::rename(&target, &backup)
            .with_context(|| format!("keeping the old file as {}", backup.display()))?;
        println!("kept the old config as {}", backup.display());
    }
    std::fs::write(&target, text).with_context(|| format!("writing {}", target.display()))?;
    match (&source, imported.is_empty()) {
        (Some(source), false) => println!(
            "wrote {} with {} server(s) from {}: {}",
            target.display(),
            imported.len(),
            source.display(),
            imported.join(", ")
        ),
        _ => println!(
            "wrote {} (no servers yet: add [servers.NAME] tables, see the comments in it)",
            target.display()
        ),
    }
    report_config_problems(&target);
    keep_tool_lists(&target);
    println!(
        "\nNext, register devboy with Claude Code for all your projects (user scope):\n  \
         claude mcp add devboy -s user -- devboy mcp\n  \
         claude mcp list     # devboy: devboy mcp - ✔ Connected\n  \
         devboy doctor       # each server's state, and what Claude Code sees"
    );
    warn_other_registrations(&["user"]);
    Ok(())
}

/// `devboy init --project DIR`: the project's `.mcp.json` servers move to
/// `devboy.mcp.json`, and `.mcp.json` starts devboy on that file.
pub fn init_project(dir: &Path) -> anyhow::Result<()> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("project directory {}", dir.display()))?;
    let mcp_path = dir.join(".mcp.json");
    let servers_path = dir.join(PROJECT_SERVERS_FILE);
    let mcp = match std::fs::read_to_string(&mcp_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{} does not exist; `devboy init` (without --project) sets devboy up for all your projects",
            mcp_path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("reading {}", mcp_path.display())),
    };
    let existing = match std::fs::read_to_string(&servers_path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", servers_path.display())),
    };
    let split = import::split_project_mcp_json(&mcp, existing.as_deref())
        .with_context(|| format!("{}", mcp_path.display()))?;
    // The servers first: if writing .mcp.json then fails, nothing is lost.
    write_replacing(&servers_path, &split.servers_file)?;
    write_replacing(&mcp_path, &split.mcp_json)?;
    if split.moved.is_empty() {
        println!(
            "{} already starts devboy on {PROJECT_SERVERS_FILE}; nothing to move",
            mcp_path.display()
        );
    } else {
        println!(
            "moved {} server(s) from .mcp.json to {PROJECT_SERVERS_FILE}: {}\n.mcp.json now starts devboy: devboy mcp --config {PROJECT_SERVERS_FILE}",
            split.moved.len(),
            split.moved.join(", ")
        );
    }
    report_config_problems(&servers_path);
    // Claude Code starts project servers in the project directory, and
    // their relative paths mean that directory.
    if std::env::set_current_dir(&dir).is_ok() {
        keep_tool_lists(&servers_path);
    }
    if !split.moved.is_empty() {
        println!(
            "\nBoth files use relative paths: commit them to share the setup (each teammate needs `devboy` on PATH,\n\
             and runs `devboy doctor` here once: it starts every server and keeps its tool list)."
        );
    }
    let approval = import::project_server_approval(
        PROJECT_SERVER,
        &dir.display().to_string(),
        &ApprovalSettings::read(&dir).files(),
    );
    if approval == ProjectApproval::Pending {
        println!(
            "Claude Code asks once, when it next starts in this project, to approve the project server `{PROJECT_SERVER}`\n\
             (until then `claude mcp list` and `devboy doctor` show it as pending approval)."
        );
    }
    let others: Vec<Registration> = claude_code_registrations(&dir)
        .into_iter()
        .filter(|r| r.known_devboy() && r.scope != "project")
        .collect();
    // Of two registrations named alike Claude Code lists one.
    let shadow = others
        .iter()
        .find(|r| r.name == PROJECT_SERVER && r.scope == "local")
        .or_else(|| {
            others
                .iter()
                .find(|r| r.name == PROJECT_SERVER && approval != ProjectApproval::Approved)
        });
    println!(
        "Check it:\n  claude mcp list     # {}\n  \
         devboy doctor       # each server's state, and what Claude Code sees",
        listed_as(approval, shadow)
    );
    for registration in &others {
        println!("note: {}", also_registered(registration, approval));
    }
    Ok(())
}

/// The name `devboy init --project` gives devboy in `.mcp.json`.
const PROJECT_SERVER: &str = "devboy";

/// What `claude mcp list` shows for `devboy` in the project, as Claude
/// Code 2.1.330 does: the project's pending approval until the user
/// approves it, a rejected one not at all, and `shadow` (devboy registered
/// alike in the local scope, or in the user scope while the project's is
/// not approved) instead of the project's.
fn listed_as(approval: ProjectApproval, shadow: Option<&Registration>) -> String {
    let project = format!("{PROJECT_SERVER}: devboy mcp --config {PROJECT_SERVERS_FILE}");
    let Some(shadow) = shadow else {
        return match approval {
            ProjectApproval::Pending => format!(
                "{project} - ⏸ Pending approval (run `claude` to approve), then ✔ Connected"
            ),
            ProjectApproval::Approved => format!("{project} - ✔ Connected"),
            ProjectApproval::Rejected => format!(
                "no {PROJECT_SERVER} line: you rejected it (disabledMcpjsonServers); `claude mcp reset-project-choices` asks again"
            ),
        };
    };
    let theirs = format!(
        "{}: {}: your {}-scope devboy",
        shadow.name,
        registered_target(&shadow.server),
        shadow.scope
    );
    match (shadow.scope, approval) {
        ("user", ProjectApproval::Pending) => {
            format!("{theirs}, until you approve the project's; then {project} - ✔ Connected")
        }
        ("user", _) => format!("{theirs} (you rejected the project's)"),
        _ => format!("{theirs}, which Claude Code starts here instead of the project's"),
    }
}

/// A registered server as `claude mcp list` names it: the command line, or
/// the URL.
fn registered_target(server: &RegisteredServer) -> String {
    match server {
        RegisteredServer::Stdio { command, args, .. } => std::iter::once(command.as_str())
            .chain(args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        RegisteredServer::Http { url, .. } => url.clone(),
    }
}

/// What a devboy `registration` outside the project means next to the
/// project's: with one name, Claude Code starts one of the two (local over
/// the project's once approved, that over the user's; measured with
/// Claude Code 2.1.330 and `claude mcp get`); with two, both.
fn also_registered(registration: &Registration, approval: ProjectApproval) -> String {
    let (scope, name) = (registration.scope, &registration.name);
    let remove = format!("keep one registration (`claude mcp remove {name} -s {scope}`)");
    let which = if name != PROJECT_SERVER {
        "Claude Code starts both here, and the model is offered every tool twice".to_owned()
    } else {
        match (scope, approval) {
            ("user", ProjectApproval::Pending) => format!(
                "Claude Code starts that one here until you approve the project's, then the project's (`claude mcp get {name}` says which)"
            ),
            ("user", _) => "Claude Code starts the project's here".to_owned(),
            _ => format!("Claude Code starts that one here, not the project's (`claude mcp get {name}` says which)"),
        }
    };
    format!(
        "devboy is also registered in Claude Code's {scope} scope as `{name}`: {which}; {remove}"
    )
}

/// Asks `find_files`' configured model one small rank question, as
/// `find_files` would; prints what happened. Returns whether it answered.
async fn check_model(config: &devboy_core::config::LlmConfig) -> bool {
    use devboy_core::config::LlmProvider;
    use devboy_retrieval::Llm as _;
    if config.provider == LlmProvider::Sampling {
        println!(
            "  ! mcp-sampling: the connected client's own model, when it offers sampling; Claude Code does not, so there find_files ranks offline"
        );
        return true;
    }
    let llm = match devboy_retrieval::HttpLlm::from_config(config, &|v| std::env::var(v).ok()) {
        Ok(llm) => llm,
        Err(error) => {
            println!(
                "  ✘ {}/{}: {error}; find_files ranks offline",
                config.provider.name(),
                config.model
            );
            return false;
        }
    };
    let tree = devboy_retrieval::Tree::from_paths(["src/server.py", "README.md"]);
    let prompt = devboy_retrieval::prompt::beam(
        &tree,
        "Where does the server start?",
        tree.children(tree.root()),
        &[],
        1,
    );
    let started = std::time::Instant::now();
    match llm.rank(&prompt).await {
        Ok(answer) => {
            println!(
                "  ✔ {}: answered a rank call in {} ms ({} input, {} output tokens; picked {:?})",
                llm.describe(),
                started.elapsed().as_millis(),
                answer.usage.input_tokens,
                answer.usage.output_tokens,
                answer.ranked_ids
            );
            true
        }
        Err(error) => {
            println!("  ✘ {}: {error}; find_files ranks offline", llm.describe());
            false
        }
    }
}

/// `devboy doctor`: the config, each upstream started and checked, and
/// devboy's registrations in Claude Code, each started as Claude Code
/// would. Fails when something a user would trip over was found.
/// The value of `flag` Claude Code starts devboy with in `project` (an
/// HTTP registration's devboy was started with its own), as a path there.
fn registered_flag(project: &Path, registrations: &[Registration], flag: &str) -> Option<PathBuf> {
    registrations
        .iter()
        .find_map(|r| match &r.server {
            RegisteredServer::Stdio { args, .. } => flag_value(args, flag),
            RegisteredServer::Http { .. } => None,
        })
        .map(|file| project.join(file))
}

/// The config `devboy mcp` would serve here: `config` when given, else
/// the one Claude Code starts devboy with in this directory, else the
/// default one.
pub fn config_here(config: Option<&Path>) -> anyhow::Result<ProxyConfig> {
    let project = std::env::current_dir().context("the current directory")?;
    let registered = registered_flag(&project, &claude_code_registrations(&project), "--config");
    Ok(ProxyConfig::resolve_or_default(
        config.or(registered.as_deref()),
    )?)
}

pub fn doctor(config: Option<&Path>, wait: Duration) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut problems = 0usize;
    println!("devboy {}", env!("CARGO_PKG_VERSION"));
    let project = std::env::current_dir().context("the current directory")?;
    let registrations = claude_code_registrations(&project);
    let registered = |flag: &str| registered_flag(&project, &registrations, flag);
    // What `devboy mcp` would serve here, problems and all.
    let loaded = ProxyConfig::resolve_or_default(config.or(registered("--config").as_deref()));
    match &loaded {
        Ok(config) => {
            match &config.source {
                ConfigSource::File(path) => println!("config: {}", path.display()),
                ConfigSource::Embedded => println!(
                    "config: none found at {}; the built-in default (no servers). `devboy init` writes one.",
                    devboy_core::paths::default_config_file().display()
                ),
            }
            problems += print_config_problems(&config.problems);
            for warning in &config.warnings {
                println!("  warning: {warning}");
            }
            let checks = runtime.block_on(doctor::check_upstreams(
                config,
                wait,
                Some(devboy_core::paths::listing_cache_dir()),
            ));
            if !checks.is_empty() {
                println!("\nupstreams (started to check, then stopped):");
            }
            problems += print_checks(&checks);
            if let Some(llm) = &config.retrieval_llm {
                println!("\nfind_files' model ([retrieval.llm]):");
                if !runtime.block_on(check_model(llm)) {
                    problems += 1;
                }
            }
        }
        Err(error) => {
            problems += 1;
            println!("config: {error}");
        }
    }
    match PipelineConfig::resolve_or_default(
        registered("--pipeline-config").as_deref(),
        Some(&project),
    ) {
        Ok(pipeline) => {
            if pipeline.layers.is_empty() {
                println!("\npipeline config: none applies; the built-in defaults");
            } else {
                let layers: Vec<String> = pipeline
                    .layers
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                let later_wins = if layers.len() > 1 {
                    " (a later file's keys win)"
                } else {
                    ""
                };
                println!("\npipeline config: {}{later_wins}", layers.join(" < "));
            }
            problems += print_config_problems(&pipeline.problems);
            for warning in &pipeline.warnings {
                println!("  warning: {warning}");
            }
        }
        Err(error) => {
            problems += 1;
            println!("\npipeline config: {error}");
        }
    }

    println!("\nClaude Code:");
    let registrations = devboy_registrations(&runtime, registrations);
    if registrations.is_empty() {
        println!(
            "  devboy is not registered for {} (`claude mcp add devboy -s user -- devboy mcp`)",
            project.display()
        );
    }
    problems += print_name_clashes(&registrations);
    let approvals = ApprovalSettings::read(&project);
    for registration in &registrations {
        let (target, checked) = match &registration.server {
            RegisteredServer::Stdio { command, args, env } => {
                let line = std::iter::once(command.as_str())
                    .chain(args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" ");
                let server = ServerCommand {
                    command: command.clone(),
                    args: args.clone(),
                    env: env.iter().cloned().collect(),
                    cwd: Some(project.clone()),
                };
                let checked = runtime
                    .block_on(doctor::probe_server(&server, CLAUDE_TOOLS_LIST_LIMIT))
                    .map(|probe| format!("started as Claude Code would: {}", timings(&probe)))
                    .map_err(|error| format!("started as Claude Code would: {error}"));
                (line, checked)
            }
            RegisteredServer::Http { sse, url, headers } => {
                // Claude Code expands `${VAR}` in a project's .mcp.json
                // from its environment, which is this shell's here.
                let expanded = if registration.scope == "project" {
                    expand_http(url, headers)
                } else {
                    Ok((url.clone(), headers.clone()))
                };
                let checked = match &expanded {
                    Ok((url, headers)) => check_http(&runtime, registration, *sse, url, headers),
                    Err(error) => Err(format!(
                        "{error} in this shell; Claude Code started here would send the entry without it (set it before `claude`, or write the value)"
                    )),
                };
                (url.clone(), checked)
            }
        };
        let (mut mark, said) = match checked {
            Ok(said) => ("✔", said),
            Err(said) => {
                problems += 1;
                ("✘", said)
            }
        };
        // A project server runs only once approved in Claude Code.
        let approval = (registration.scope == "project").then(|| {
            import::project_server_approval(
                &registration.name,
                &project.display().to_string(),
                &approvals.files(),
            )
        });
        let approval = match approval {
            Some(ProjectApproval::Pending) => {
                if mark == "✔" {
                    mark = "!";
                }
                Some("pending approval in Claude Code: it asks when `claude` next starts in this project and does not start it until then (`claude mcp list` shows it as pending)".to_owned())
            }
            Some(ProjectApproval::Rejected) => {
                if mark != "✘" {
                    problems += 1;
                }
                mark = "✘";
                Some(format!(
                    "rejected in Claude Code (disabledMcpjsonServers): it is not started; `claude mcp reset-project-choices` asks again, or take \"{}\" out of disabledMcpjsonServers in .claude/settings.local.json",
                    registration.name
                ))
            }
            Some(ProjectApproval::Approved) | None => None,
        };
        println!(
            "  {mark} {} scope, `{}`: {target}",
            registration.scope, registration.name
        );
        if let Some(approval) = approval {
            println!("      {approval}");
        }
        println!("      {said}");
    }
    runtime.shutdown_timeout(Duration::from_millis(200));
    if problems > 0 {
        bail!("{problems} problem(s) found");
    }
    println!("\nno problems found");
    Ok(())
}

/// A probe's timings, as the doctor prints them.
fn timings(probe: &doctor::ServerProbe) -> String {
    format!(
        "initialize {} ms, tools/list {} ms ({} tools; Claude Code allows {} s)",
        probe.initialize_ms,
        probe.tools_list_ms,
        probe.tools,
        CLAUDE_TOOLS_LIST_LIMIT.as_secs()
    )
}

/// A project entry's URL and header values with `${VAR}` expanded as
/// Claude Code expands them.
#[allow(clippy::type_complexity)]
fn expand_http(
    url: &str,
    headers: &[(String, String)],
) -> Result<(String, Vec<(String, String)>), String> {
    let url = import::expand_from_env(url)?;
    let headers = headers
        .iter()
        .map(|(k, v)| Ok((k.clone(), import::expand_from_env(v)?)))
        .collect::<Result<_, String>>()?;
    Ok((url, headers))
}

/// The registrations that are devboy: those whose entry says so, and the
/// HTTP entries under other names whose server answers `initialize` as
/// devboy (asked all at once, each for [`IDENTIFY_WAIT`]; nothing is said
/// of the others, which are not devboy's business).
fn devboy_registrations(
    runtime: &tokio::runtime::Runtime,
    registrations: Vec<Registration>,
) -> Vec<Registration> {
    let unknown: Vec<ServerUrl> = registrations
        .iter()
        .filter(|r| !r.known_devboy())
        .filter_map(|r| match &r.server {
            RegisteredServer::Http { url, headers, .. } => Some(ServerUrl {
                url: url.clone(),
                headers: headers.clone(),
            }),
            RegisteredServer::Stdio { .. } => None,
        })
        .collect();
    let mut names = if unknown.is_empty() {
        Vec::new()
    } else {
        runtime.block_on(doctor::server_names(&unknown, IDENTIFY_WAIT))
    }
    .into_iter();
    registrations
        .into_iter()
        .filter(|r| {
            r.known_devboy()
                || names.next().flatten().as_deref() == Some(devboy_mcp::SERVER_INFO_NAME)
        })
        .collect()
}

/// Says what Claude Code makes of devboy registered more than once;
/// returns the problems. One name in several scopes: Claude Code uses the
/// first and warns of the rest (a problem). Several names (a stdio
/// `devboy` and an HTTP `devboy-http`, say): each runs, and the model is
/// offered every tool once per name (a note).
fn print_name_clashes(registrations: &[Registration]) -> usize {
    let mut names: Vec<(&str, Vec<&str>)> = Vec::new();
    for registration in registrations {
        match names.iter_mut().find(|(n, _)| *n == registration.name) {
            Some((_, scopes)) => scopes.push(registration.scope),
            None => names.push((&registration.name, vec![registration.scope])),
        }
    }
    let mut problems = 0;
    for (name, scopes) in &names {
        if scopes.len() > 1 {
            problems += 1;
            println!(
                "  ✘ `{name}` is registered in {} scopes ({}); Claude Code uses the first (local, then project, then user) and warns about the rest: keep one (`claude mcp remove {name} -s {}`)",
                scopes.len(),
                scopes.join(", "),
                scopes[scopes.len() - 1]
            );
        }
    }
    if names.len() > 1 {
        let tools: Vec<String> = names
            .iter()
            .map(|(name, _)| format!("mcp__{name}__…"))
            .collect();
        let removes: Vec<String> = names
            .iter()
            .map(|(name, scopes)| format!("`claude mcp remove {name} -s {}`", scopes[0]))
            .collect();
        println!(
            "  note: devboy is registered under {} names; Claude Code starts each and offers the model every tool once per name ({}): keep one and remove the others ({})",
            names.len(),
            tools.join(", "),
            removes.join(", ")
        );
    }
    problems
}

/// Asks a devboy registered over HTTP as Claude Code would (its URL, its
/// headers as written); what went wrong says how to fix it, and never
/// the token.
fn check_http(
    runtime: &tokio::runtime::Runtime,
    registration: &Registration,
    sse: bool,
    url: &str,
    headers: &[(String, String)],
) -> Result<String, String> {
    let (name, scope) = (&registration.name, registration.scope);
    let add_again = format!(
        "`claude mcp remove {name} -s {scope}`, then `claude mcp add --transport http -s {scope} {name} {url} --header \"Authorization: Bearer $(cat TOKEN_FILE)\"`"
    );
    if sse {
        return Err(format!(
            "registered with `--transport sse`, which devboy does not serve (`devboy serve --http` speaks Streamable HTTP): {add_again}"
        ));
    }
    let server = ServerUrl {
        url: url.to_owned(),
        headers: headers.to_vec(),
    };
    let probe = match runtime.block_on(doctor::probe_url(&server, CLAUDE_TOOLS_LIST_LIMIT)) {
        Ok(probe) => probe,
        Err(error) => return Err(http_failure(&error, url, headers, &add_again)),
    };
    if probe.name != devboy_mcp::SERVER_INFO_NAME {
        return Err(format!(
            "answers as `{}`, not devboy: is another server listening at {url}?",
            probe.server
        ));
    }
    Ok(format!(
        "answered as Claude Code would ask: {}",
        timings(&probe)
    ))
}

/// What a failed HTTP probe means for a devboy registration, and the fix.
fn http_failure(
    error: &UrlProbeError,
    url: &str,
    headers: &[(String, String)],
    add_again: &str,
) -> String {
    let authorized = headers
        .iter()
        .any(|(key, _)| key.eq_ignore_ascii_case("authorization"));
    match error {
        UrlProbeError::NotListening { address } => format!(
            "not answering: nothing listens at {address} (connection refused); is `devboy serve --http {address}` running?"
        ),
        UrlProbeError::Refused { status: 401, .. } if !authorized => format!(
            "devboy refused it ({error}): the registration sends no Authorization header; add --header \"Authorization: Bearer …\" ({add_again}); without it Claude Code reads the 401 as a request for OAuth"
        ),
        UrlProbeError::Refused { status: 401, .. } => format!(
            "devboy refused it ({error}): the Authorization header's token is not the one `devboy serve` was started with (its --token-file or DEVBOY_HTTP_TOKEN); register the right one: {add_again}"
        ),
        UrlProbeError::Refused { status: 403, .. } => format!(
            "devboy refused it ({error}): it refuses a browser Origin not given with --allow-origin and a Host that is not loopback or given with --allow-host"
        ),
        UrlProbeError::Refused { status: 404, .. } => format!(
            "{error}: the URL's path is `{}`, and `devboy serve` answers MCP at {} only",
            url_path(url),
            devboy_mcp::http::MCP_PATH
        ),
        UrlProbeError::Timeout {
            request: "tools/list",
            ..
        } => format!("{error} (Claude Code would report `tools fetch failed`)"),
        _ => error.to_string(),
    }
}

/// The path of `url` (`/` when it has none).
fn url_path(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    rest.find('/').map_or("/", |at| &rest[at..])
}

/// Prints one line per upstream check (and the error and last stderr
/// lines of one that failed); returns how many are neither ready nor
/// disabled.
fn print_checks(checks: &[doctor::UpstreamCheck]) -> usize {
    let mut problems = 0;
    for check in checks {
        let ok = matches!(check.state.as_str(), "ready" | "disabled");
        if !ok {
            problems += 1;
        }
        let timing = check
            .ready_ms
            .map(|ms| format!(" (up in {ms} ms)"))
            .unwrap_or_default();
        let kept = if check.listing == "cached" {
            " (listed from an earlier run)"
        } else {
            ""
        };
        println!(
            "  {} {} ({}, prefix {}): {}, {} tool(s){kept}{timing}",
            if ok { "✔" } else { "✘" },
            check.name,
            check.transport,
            check.prefix,
            check.state,
            check.tools
        );
        if let Some(error) = &check.error {
            println!("      {error}");
        }
        // The last three lines the error does not already quote, each once
        // (a server restarted with backoff says the same thing each time).
        let mut shown: Vec<&str> = Vec::new();
        for line in check.stderr_tail.iter().rev() {
            let quoted = check
                .error
                .as_deref()
                .is_some_and(|e| e.contains(line.as_str()));
            if shown.len() == 3 {
                break;
            }
            if !quoted && !shown.contains(&line.as_str()) {
                shown.push(line);
            }
        }
        for line in shown.iter().rev() {
            println!("      stderr: {line}");
        }
    }
    if checks.iter().any(|c| c.listing == "live") {
        println!(
            "  (their tool lists are kept in {}: `devboy mcp` lists them at once, before the servers are up)",
            devboy_core::paths::listing_cache_dir().display()
        );
    }
    problems
}

/// Starts each server of the config at `path` once, as `devboy doctor`
/// does, so that their tool lists are kept: the first `tools/list` of
/// Claude Code's first session then has every tool at once, which print
/// mode (`claude -p`, the Agent SDK) needs. Says what it found; a server
/// that does not start is reported, never an error of `init`.
fn keep_tool_lists(path: &Path) {
    let Ok(config) = ProxyConfig::load(path) else {
        return; // report_config_problems has said why
    };
    if !config.upstreams.iter().any(|u| u.enabled) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    println!(
        "
starting each server once, so that Claude Code's first session lists its tools at once:"
    );
    let checks = runtime.block_on(doctor::check_upstreams(
        &config,
        INIT_START_WAIT,
        Some(devboy_core::paths::listing_cache_dir()),
    ));
    print_checks(&checks);
    runtime.shutdown_timeout(Duration::from_millis(200));
}

/// The value after `flag` (or in `flag=VALUE`) in `devboy mcp`'s arguments.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, arg)| {
        if arg == flag {
            args.get(i + 1).map(String::as_str)
        } else {
            arg.strip_prefix(flag)
                .and_then(|rest| rest.strip_prefix('='))
        }
    })
}

/// Prints a config's problems, each with its file, line:col, key and fix;
/// returns how many.
fn print_config_problems(problems: &[String]) -> usize {
    for problem in problems {
        println!("  ✘ {problem}");
    }
    if !problems.is_empty() {
        println!(
            "      (devboy serves without these until they are fixed; a running devboy reads a fixed file within a second)"
        );
    }
    problems.len()
}

/// Loads the config just written and says which servers will not start.
fn report_config_problems(path: &Path) {
    match ProxyConfig::load(path) {
        Ok(config) => {
            for problem in &config.problems {
                println!("note: {problem}");
            }
            for (server, why) in config.unusable_upstreams() {
                println!(
                    "note: `{}` will show as failed until fixed: {why}",
                    server.name
                );
            }
        }
        Err(error) => println!("note: {error}"),
    }
}

/// Says where else devboy is registered for this directory, other than
/// `expected` scopes.
fn warn_other_registrations(expected: &[&str]) {
    let Ok(project) = std::env::current_dir() else {
        return;
    };
    for registration in claude_code_registrations(&project) {
        if registration.known_devboy() && !expected.contains(&registration.scope) {
            println!(
                "note: devboy is also registered in Claude Code's {} scope as `{}`; keep one registration (`claude mcp remove {} -s {}`)",
                registration.scope, registration.name, registration.name, registration.scope
            );
        }
    }
}

/// devboy's registrations in Claude Code's files for `project`, and every
/// HTTP entry (see [`Registration`]).
fn claude_code_registrations(project: &Path) -> Vec<Registration> {
    let claude_json = claude_json_path().and_then(|p| read_json(&p));
    let project_json = read_json(&project.join(".mcp.json"));
    import::claude_registrations(
        claude_json.as_ref(),
        &project.display().to_string(),
        project_json.as_ref(),
    )
}

/// `~/.claude.json` (in `$CLAUDE_CONFIG_DIR` when that is set).
fn claude_json_path() -> Option<PathBuf> {
    if let Some(dir) = claude_config_dir_env() {
        return Some(dir.join(".claude.json"));
    }
    home().map(|home| home.join(".claude.json"))
}

/// The user's Claude Code settings, `~/.claude/settings.json` (in
/// `$CLAUDE_CONFIG_DIR` when that is set).
fn claude_user_settings_path() -> Option<PathBuf> {
    match claude_config_dir_env() {
        Some(dir) => Some(dir.join("settings.json")),
        None => home().map(|home| home.join(".claude").join("settings.json")),
    }
}

fn claude_config_dir_env() -> Option<PathBuf> {
    std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// A JSON file, if it is there and parses.
fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// The Claude Code files a project server's approval is read from.
struct ApprovalSettings {
    claude_json: Option<Value>,
    user: Option<Value>,
    project: Option<Value>,
    local: Option<Value>,
}

impl ApprovalSettings {
    fn read(project: &Path) -> Self {
        Self {
            claude_json: claude_json_path().and_then(|p| read_json(&p)),
            user: claude_user_settings_path().and_then(|p| read_json(&p)),
            project: read_json(&project.join(".claude").join("settings.json")),
            local: read_json(&project.join(".claude").join("settings.local.json")),
        }
    }

    fn files(&self) -> import::ApprovalFiles<'_> {
        import::ApprovalFiles {
            claude_json: self.claude_json.as_ref(),
            user: self.user.as_ref(),
            project: self.project.as_ref(),
            local: self.local.as_ref(),
        }
    }
}

/// Claude Desktop's config file on this system.
fn claude_desktop_config() -> Option<PathBuf> {
    if cfg!(target_os = "macos") {
        let home = PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?);
        return Some(home.join("Library/Application Support/Claude/claude_desktop_config.json"));
    }
    Some(
        devboy_core::paths::xdg_config_home()
            .join("Claude")
            .join("claude_desktop_config.json"),
    )
}

/// Replaces `path` whole (temporary file, synced, then renamed), so an
/// interrupted write leaves the old file, never half of the new one. A
/// file that already says `text` is left as it is (its time and mode).
fn write_replacing(path: &Path, text: &str) -> anyhow::Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == text.as_bytes()) {
        return Ok(());
    }
    devboy_sharedfile::replace_shared(path, text.as_bytes())
        .with_context(|| format!("replacing {}", path.display()))
}
