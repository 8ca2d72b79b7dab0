//! `devboy ctl` and `devboy status`: a running devboy, reached through its
//! control socket (`devboy_mcp::control`), from any terminal.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::{json, Value};

/// `devboy ctl ACTION [SERVER]`.
#[derive(clap::Args)]
pub struct CtlArgs {
    /// list, restart, enable or disable.
    #[arg(value_parser = ["list", "restart", "enable", "disable"])]
    action: String,
    /// The server (its name in the config, or its prefix).
    server: Option<String>,
    /// The devboy process to ask, when several run (see devboy status).
    #[arg(long)]
    pid: Option<u32>,
}

/// `devboy status`.
#[derive(clap::Args)]
pub struct StatusArgs {
    /// text for people, json for scripts.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
    /// Only this devboy process (its pid, as devboy status shows it).
    #[arg(long)]
    pid: Option<u32>,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn sockets() -> Vec<(u32, PathBuf)> {
    devboy_mcp::control::running(&devboy_core::paths::runtime_dir())
}

/// Restarts, enables, disables or lists a running devboy's servers.
pub fn ctl(args: CtlArgs) -> anyhow::Result<()> {
    if args.action != "list" && args.server.is_none() {
        bail!("`devboy ctl {}` needs a server's name", args.action);
    }
    let running = sockets();
    let runtime = runtime()?;
    let socket = match (args.pid, running.as_slice()) {
        (_, []) => bail!(
            "no devboy is running for this user (looked in {})",
            devboy_mcp::control::socket_dir(&devboy_core::paths::runtime_dir()).display()
        ),
        (Some(pid), _) => running
            .iter()
            .find(|(p, _)| *p == pid)
            .map(|(_, s)| s.clone())
            .with_context(|| format!("no running devboy has pid {pid}; see devboy status"))?,
        (None, [(_, socket)]) => socket.clone(),
        (None, many) => {
            // The one devboy that has the server, when only one has it.
            let having: Vec<&PathBuf> = match &args.server {
                Some(server) => many
                    .iter()
                    .filter(|(_, socket)| has_server(&runtime, socket, server))
                    .map(|(_, socket)| socket)
                    .collect(),
                None => Vec::new(),
            };
            match having.as_slice() {
                [socket] => (*socket).clone(),
                _ => {
                    let pids: Vec<String> = many.iter().map(|(p, _)| p.to_string()).collect();
                    bail!(
                        "{} devboy processes run ({}){}; say which with --pid",
                        many.len(),
                        pids.join(", "),
                        if having.len() > 1 {
                            format!(", {} of them with this server", having.len())
                        } else {
                            String::new()
                        }
                    )
                }
            }
        }
    };
    let request = json!({"action": args.action, "server": args.server});
    let answer = runtime
        .block_on(devboy_mcp::control::request(&socket, &request))
        .with_context(|| format!("asking {}", socket.display()))?;
    if let Some(error) = answer["error"].as_str() {
        bail!("{error}");
    }
    if let Some(server) = args.server {
        let state = answer["state"].as_str().unwrap_or("?");
        println!("{server}: {state}");
        for upstream in answer["upstreams"].as_array().into_iter().flatten() {
            if upstream["name"] == server.as_str() || upstream["prefix"] == server.as_str() {
                if let Some(error) = upstream["last_error"].as_str() {
                    println!("  last error: {error}");
                }
            }
        }
        let wanted = if args.action == "disable" {
            "disabled"
        } else {
            "ready"
        };
        if state != wanted {
            bail!("{server} is {state}, not {wanted}");
        }
    } else {
        for upstream in answer["upstreams"].as_array().into_iter().flatten() {
            println!("{}", upstream_line(upstream));
        }
    }
    Ok(())
}

/// Prints every running devboy of this user: what it serves, its servers,
/// its sessions' figures.
pub fn status(args: StatusArgs) -> anyhow::Result<()> {
    let runtime = runtime()?;
    let mut running = sockets();
    if let Some(pid) = args.pid {
        running.retain(|(p, _)| *p == pid);
        if running.is_empty() {
            bail!("no running devboy has pid {pid}; see devboy status");
        }
    }
    let reports: Vec<Value> = running
        .into_iter()
        .map(|(pid, socket)| {
            runtime
                .block_on(devboy_mcp::control::request(
                    &socket,
                    &json!({"action": "status"}),
                ))
                .unwrap_or_else(|e| json!({"pid": pid, "error": e.to_string()}))
        })
        .collect();
    if args.format == "json" {
        println!("{}", json!({ "processes": reports }));
        return Ok(());
    }
    if reports.is_empty() {
        println!("no devboy is running for this user");
        return Ok(());
    }
    for report in &reports {
        print!("{}", process_text(report));
    }
    Ok(())
}

/// Whether the devboy at `socket` has a server named (or prefixed)
/// `server`.
fn has_server(runtime: &tokio::runtime::Runtime, socket: &Path, server: &str) -> bool {
    runtime
        .block_on(devboy_mcp::control::request(
            socket,
            &json!({"action": "list"}),
        ))
        .ok()
        .and_then(|answer| answer["upstreams"].as_array().cloned())
        .is_some_and(|upstreams| {
            upstreams
                .iter()
                .any(|u| u["name"] == server || u["prefix"] == server)
        })
}

fn upstream_line(u: &Value) -> String {
    let mut line = format!(
        "  {:<14} {:<10} {:>3} tools  {} calls  {} errors",
        u["name"].as_str().unwrap_or("?"),
        u["state"].as_str().unwrap_or("?"),
        u["tools"],
        u["calls"],
        u["errors"],
    );
    if let Some(error) = u["last_error"].as_str() {
        // An invalid entry's errors, one a line: each under the server.
        line.push_str(&format!(
            "  last error: {}",
            error.replace('\n', "\n      ")
        ));
    }
    line
}

/// One session's figures as a line.
fn session_line(s: &Value) -> String {
    let savings = &s["savings"];
    let tokens = match (
        savings["tokens_raw"].as_u64(),
        savings["tokens_final"].as_u64(),
    ) {
        (Some(raw), Some(fin)) if raw > 0 => format!(
            "{raw} tokens as sent, {fin} to the model ({:.1}% saved; dedup {}%, encoder {}%)",
            100.0 * (raw as f64 - fin as f64) / raw as f64,
            savings["dedup_savings_pct"],
            savings["encoder_savings_pct"],
        ),
        _ => "no results yet".to_owned(),
    };
    // Counted in the figures above: a repeat of what the model was shown
    // lowers the saving.
    let expanded = &savings["expanded"];
    let tokens = match (expanded["calls"].as_u64(), expanded["tokens"].as_u64()) {
        (Some(calls), Some(expanded_tokens)) if calls > 0 => format!(
            "{tokens}; devboy_expand delivered {expanded_tokens} of those in {calls} call{}, {} of them again",
            if calls == 1 { "" } else { "s" },
            expanded["again_tokens"],
        ),
        _ => tokens,
    };
    let mut line = match s["calls"].as_u64() {
        Some(calls) => format!("  session: {calls} calls, {tokens}"),
        None => format!("  session: {tokens}"),
    };
    if let Some(pipeline) = s["pipeline"].as_str() {
        line.push_str(&format!("; pipeline {pipeline}"));
    }
    let speculation = &s["speculation"];
    if speculation["enabled"] == true {
        line.push_str(&format!(
            "; speculation {} prefetched, {} used",
            speculation["dispatched"], speculation["used"]
        ));
    }
    line.push('\n');
    line
}

/// One process as text.
fn process_text(report: &Value) -> String {
    let pid = &report["pid"];
    if let Some(error) = report["error"].as_str() {
        return format!("devboy {pid}: not answering ({error})\n");
    }
    let mut out = format!(
        "devboy {pid} ({}), serving {}, config {}, up {} s\n",
        report["devboy"].as_str().unwrap_or("?"),
        report["serving"].as_str().unwrap_or("?"),
        report["config"].as_str().unwrap_or("?"),
        report["uptime_s"],
    );
    for problem in report["config_problem"]
        .as_str()
        .into_iter()
        .flat_map(str::lines)
    {
        out.push_str(&format!("  config problem: {problem}\n"));
    }
    for upstream in report["upstreams"].as_array().into_iter().flatten() {
        out.push_str(&upstream_line(upstream));
        out.push('\n');
    }
    let (open, sessions) = match &report["sessions"] {
        Value::Array(sessions) => (None, sessions.clone()),
        Value::Object(o) => (
            Some(o.get("open").cloned().unwrap_or_default()),
            o.get("sessions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        ),
        other => {
            out.push_str(&format!("  sessions: {other}\n"));
            (None, Vec::new())
        }
    };
    if let Some(open) = open {
        out.push_str(&format!("  open HTTP sessions: {open}\n"));
    }
    for s in &sessions {
        out.push_str(&session_line(s));
    }
    out
}
