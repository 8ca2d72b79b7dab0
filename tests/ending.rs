//! devboy ends the way its client ends it (invariant 13), with real servers
//! running behind it: a realistic `.mcp.json` of server-filesystem started
//! by `npx` (npm, a shell and node: grandchildren), mcp-server-git and
//! mcp-server-time from the test peers' virtualenv (Python servers take
//! 0.4–0.5 s to exit once their stdin closes) and an HTTP server that is
//! down.
//!
//! Claude Code 2.1.330 ends a stdio server it is done with (on `/exit`) by
//! signals to the server's pid alone, read from its bundle: SIGINT; 100 ms
//! later, if the process still runs, SIGTERM; 400 ms after that, SIGKILL
//! (its debug log: "SIGTERM failed, sending SIGKILL to MCP server
//! process"). Only then does it close the server's stdin and stdout, which
//! are Unix socket pairs (Node's pipes), not pipes. On Windows it closes
//! stdin instead and kills the process tree 300 ms later. A devboy killed
//! cannot stop its servers.
//!
//! - That schedule, over socket pairs: devboy is gone before the SIGKILL,
//!   and so is every process it started.
//! - Closing stdin alone: devboy and its servers are gone within 300 ms.
//! - Real Claude Code, interactive in tmux: `/exit` sends devboy SIGINT
//!   and no SIGKILL, and devboy's servers are gone.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::TempDir;
use devboy_testkit::{peers, ClaudeCode, Script, ScriptedModel, TerminalSession};
use serde_json::{json, Value};

/// The servers of [`realistic_mcp_json`] that come up.
const SERVING: [&str; 3] = ["fs", "git", "time"];

/// A project (a git repository with a file) and a `.mcp.json` for devboy
/// of the servers a user has; returns the config's path.
fn realistic_mcp_json(dir: &Path) -> PathBuf {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("notes.txt"), "ending\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "notes.txt"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-qm",
            "notes",
        ],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(&project)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }
    let project = project.canonicalize().unwrap();
    let config = json!({"mcpServers": {
        // npx finds the package installed in tests/peers, offline.
        "fs": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", project],
            "cwd": peers::peers_dir(),
            "env": {"NPM_CONFIG_UPDATE_NOTIFIER": "false"},
        },
        "git": {
            "command": peers::venv_bin("mcp-server-git"),
            "args": ["--repository", project],
        },
        "time": {"command": peers::venv_bin("mcp-server-time")},
        // Port 9 (discard) has nobody listening on loopback.
        "down": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
    }});
    let path = dir.join("devboy.mcp.json");
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    path
}

/// devboy started as Claude Code starts a stdio server: stdin and stdout
/// are Unix socket pairs, stderr piped, in Claude Code's process group.
struct Served {
    child: Child,
    stdin: Option<UnixStream>,
    stdout: BufReader<UnixStream>,
    next_id: i64,
}

impl Served {
    fn start(config: &Path, dir: &Path) -> Self {
        let (stdin, their_stdin) = UnixStream::pair().unwrap();
        let (stdout, their_stdout) = UnixStream::pair().unwrap();
        stdout
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let child = Command::new(common::devboy_bin())
            .args(["mcp", "--config"])
            .arg(config)
            .args(["--list-grace-ms", "30000"])
            .env("RUST_LOG", common::test_log_filter())
            .env("DEVBOY_TELEMETRY", "off")
            .env("DEVBOY_CONFIG_DIR", dir.join("config"))
            .env("DEVBOY_CACHE_DIR", dir.join("cache"))
            .env("DEVBOY_RUNTIME_DIR", dir.join("run"))
            .stdin(Stdio::from(OwnedFd::from(their_stdin)))
            .stdout(Stdio::from(OwnedFd::from(their_stdout)))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start devboy");
        let mut served = Self {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
            next_id: 0,
        };
        served.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "ending-test", "version": "0"}}),
        );
        served.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        served
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").unwrap();
    }

    /// Sends a request and returns its result, skipping notifications.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let read = self.stdout.read_line(&mut line).expect("devboy answers");
            assert!(read > 0, "devboy closed its stdout");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message["result"].clone();
            }
        }
    }

    /// Polls `devboy_status` (up to 90 s: a first npx or Python start on a
    /// busy machine is slow) until every server in [`SERVING`] is ready,
    /// then has each of them answer a call.
    fn wait_serving(&mut self, project: &Path) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let status = self.request(
                "tools/call",
                json!({"name": "devboy_status", "arguments": {}}),
            );
            let report: Value =
                serde_json::from_str(status["content"][0]["text"].as_str().unwrap()).unwrap();
            let ready = SERVING
                .iter()
                .all(|name| common::upstream(&report, name)["state"] == "ready");
            if ready {
                break;
            }
            assert!(Instant::now() < deadline, "servers not ready: {report}");
            std::thread::sleep(Duration::from_millis(200));
        }
        for (tool, arguments) in [
            ("fs__list_allowed_directories", json!({})),
            ("git__git_status", json!({"repo_path": project})),
            ("time__get_current_time", json!({"timezone": "UTC"})),
        ] {
            let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
            assert!(result["content"].is_array(), "{tool}: {result}");
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    /// Closes devboy's stdin and stdout, as Claude Code does once done.
    fn close(&mut self) {
        self.stdin = None;
        let _ = self.stdout.get_ref().shutdown(std::net::Shutdown::Both);
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The processes descended from `pid` now, with their command lines.
fn descendants(pid: u32) -> Vec<(u32, String)> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // The parent is the second field after the parenthesised name.
            let parent = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            Some((p, parent.parse().ok()?))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found
        .into_iter()
        .skip(1)
        .map(|p| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .unwrap_or_default();
            (p, cmdline)
        })
        .collect()
}

/// Checks that `processes` hold the servers' whole trees (npx's node
/// grandchild among them).
fn assert_servers_running(processes: &[(u32, String)]) {
    for part in ["server-filesystem", "mcp-server-git", "mcp-server-time"] {
        assert!(
            processes.iter().any(|(_, cmd)| cmd.contains(part)),
            "no {part} among devboy's processes: {processes:#?}"
        );
    }
    assert!(
        processes
            .iter()
            .any(|(_, cmd)| cmd.starts_with("node ") && cmd.contains("server-filesystem")),
        "npx's node is not among devboy's processes: {processes:#?}"
    );
}

/// Polls until every one of `processes` is gone (or a zombie) or
/// `deadline` passes; returns those still running.
fn still_running(processes: &[(u32, String)], deadline: Instant) -> Vec<(u32, String)> {
    loop {
        let running: Vec<(u32, String)> = processes
            .iter()
            .filter(|(pid, _)| !common::process_gone(*pid))
            .cloned()
            .collect();
        if running.is_empty() || Instant::now() >= deadline {
            return running;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What Claude Code sends a stdio server it is done with: SIGINT; SIGTERM
/// if it still runs 100 ms later; SIGKILL if it still runs 400 ms after
/// that. Returns the signals sent.
fn end_as_claude_code_does(served: &mut Served) -> Vec<&'static str> {
    let signal = |name: &str, pid: u32| {
        let sent = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(sent.success(), "kill -{name}");
    };
    let pid = served.pid();
    let mut sent = Vec::new();
    for (name, then_wait) in [
        ("INT", Duration::from_millis(100)),
        ("TERM", Duration::from_millis(400)),
        ("KILL", Duration::ZERO),
    ] {
        if served.exited() {
            break;
        }
        signal(name, pid);
        sent.push(name);
        let until = Instant::now() + then_wait;
        while Instant::now() < until && !served.exited() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    served.close();
    sent
}

#[test]
fn claude_codes_exit_signals_end_devboy_and_its_servers_before_the_sigkill() {
    let dir = TempDir::new("ending-signals");
    let config = realistic_mcp_json(dir.path());
    let mut served = Served::start(&config, dir.path());
    served.wait_serving(&dir.path().join("project").canonicalize().unwrap());
    let processes = descendants(served.pid());
    assert_servers_running(&processes);
    let started = Instant::now();
    let sent = end_as_claude_code_does(&mut served);
    assert!(
        !sent.contains(&"KILL"),
        "devboy still ran 500 ms after SIGINT: Claude Code sent {sent:?}"
    );
    let left = still_running(&processes, started + Duration::from_secs(1));
    assert!(left.is_empty(), "still running 1 s after SIGINT: {left:#?}");
}

#[test]
fn closing_stdin_ends_devboy_and_its_servers_before_claude_code_kills_the_tree() {
    let dir = TempDir::new("ending-stdin");
    let config = realistic_mcp_json(dir.path());
    let mut served = Served::start(&config, dir.path());
    served.wait_serving(&dir.path().join("project").canonicalize().unwrap());
    let mut processes = descendants(served.pid());
    assert_servers_running(&processes);
    processes.push((served.pid(), "devboy".to_owned()));
    let started = Instant::now();
    served.close();
    // Claude Code (on Windows) kills the process tree 300 ms after
    // closing stdin.
    let left = still_running(&processes, started + Duration::from_millis(300));
    assert!(
        left.is_empty(),
        "still running 300 ms after stdin closed: {left:#?}"
    );
}

#[test]
fn claude_code_exits_without_killing_devboy() {
    let dir = TempDir::new("ending-claude");
    let config = realistic_mcp_json(dir.path());
    let run = dir.path().join("run");
    let model = ScriptedModel::start(Script::new().final_text("ok")).unwrap();
    let claude = ClaudeCode::new().unwrap().model(&model);
    let config = config.to_str().unwrap().to_owned();
    let run_dir = run.to_str().unwrap().to_owned();
    claude
        .mcp_add_with_env(
            "devboy",
            common::devboy_bin(),
            &["mcp", "--config", &config, "--list-grace-ms", "30000"],
            &[
                ("DEVBOY_RUNTIME_DIR", &run_dir),
                ("DEVBOY_TELEMETRY", "off"),
                ("DEVBOY_CACHE_DIR", &format!("{run_dir}/cache")),
            ],
        )
        .unwrap();
    let terminal = TerminalSession::start(&claude, &["--debug"]).unwrap();
    // devboy's pid is its control socket's name; its servers are up once
    // `devboy status` says so.
    let deadline = Instant::now() + Duration::from_secs(90);
    let (pid, processes) = loop {
        let status = Command::new(common::devboy_bin())
            .args(["status", "--format", "json"])
            .env("DEVBOY_RUNTIME_DIR", &run)
            .output()
            .unwrap();
        let status: Value = serde_json::from_slice(&status.stdout).unwrap_or_default();
        let process = &status["processes"][0];
        let ready = SERVING.iter().all(|name| {
            process["upstreams"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|u| u["name"] == *name && u["state"] == "ready")
        });
        if let (true, Some(pid)) = (ready, process["pid"].as_u64()) {
            let pid = pid as u32;
            break (pid, descendants(pid));
        }
        assert!(
            Instant::now() < deadline,
            "devboy's servers not ready: {status}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_servers_running(&processes);
    terminal.type_line("/exit").unwrap();
    terminal
        .wait_until("Claude Code to exit", Duration::from_secs(30), || {
            !terminal.running()
        })
        .unwrap();
    let mut all = processes.clone();
    all.push((pid, "devboy".to_owned()));
    let left = still_running(&all, Instant::now() + Duration::from_secs(1));
    assert!(left.is_empty(), "still running after /exit: {left:#?}");
    let debug: String = std::fs::read_dir(claude.home().join(".claude/debug"))
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|f| std::fs::read_to_string(f.path()).ok())
        .collect();
    let said: Vec<&str> = debug
        .lines()
        .filter(|l| l.contains("MCP server \"devboy\"") && l.contains("SIG"))
        .collect();
    assert!(
        said.iter().any(|l| l.contains("Sending SIGINT")),
        "Claude Code's debug log says nothing of stopping devboy: {said:#?}"
    );
    assert!(
        !said.iter().any(|l| l.contains("SIGKILL")),
        "Claude Code killed devboy: {said:#?}"
    );
}
