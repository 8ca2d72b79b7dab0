//! devboy installed the way MCP servers are (issue 41): `packaging/build.py`
//! packages the binary under test as the npm launcher `devboy` with its
//! platform's package `@devboy/<os>-<cpu>`, and as a wheel; each is
//! installed from the local files into a fresh `HOME` with no Rust
//! toolchain on `PATH` (cargo, rustc and rustup shadowed by stubs that
//! fail), and run through the line the README gives:
//! `claude mcp add devboy -- npx -y devboy mcp` (or `uvx devboy mcp`).
//! Real Claude Code connects to it (`claude mcp list`), and the Python
//! SDK's client lists devboy's tools through the same command.
//!
//! Nothing is fetched: npm installs the two tarballs `--offline`, and uv
//! finds the wheel through `UV_FIND_LINKS` with no index, so the command a
//! user types is unchanged.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use devboy_testkit::{peers, ClaudeCode};

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");

/// The packages of the binary under test, in `dir`: (npm platform tarball,
/// npm launcher tarball, wheel).
fn build_packages(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    // What a release carries: the binary without its debug info (the test
    // build has it; the release profile has none).
    let binary = dir.join("devboy");
    std::fs::copy(DEVBOY, &binary).unwrap();
    let stripped = Command::new("strip")
        .arg("--strip-debug")
        .arg(&binary)
        .status()
        .is_ok_and(|s| s.success());
    eprintln!(
        "binary {} MB (debug info stripped: {stripped})",
        size_mb(&binary)
    );
    let out = dir.join("packages");
    let made = Command::new("python3")
        .arg(peers::workspace_root().join("packaging/build.py"))
        .arg("--binary")
        .arg(&binary)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(made.status.success(), "build.py: {}", text(&made));
    eprintln!("{}", String::from_utf8_lossy(&made.stdout));
    let find = |test: &dyn Fn(&str) -> bool| -> PathBuf {
        std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| test(&p.file_name().unwrap().to_string_lossy()))
            .unwrap_or_else(|| panic!("no such package in {}", out.display()))
    };
    (
        find(&|n| n.starts_with("devboy-linux-") && n.ends_with(".tgz")),
        find(&|n| n.starts_with("devboy-0") && n.ends_with(".tgz")),
        find(&|n| n.ends_with(".whl")),
    )
}

fn size_mb(path: &Path) -> String {
    format!("{:.1}", std::fs::metadata(path).unwrap().len() as f64 / 1e6)
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `devboy --version` ran the packaged binary.
fn says_its_version(out: &Output) {
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("devboy "),
        "{}",
        text(out)
    );
}

/// The directory `program` is found in on this test's `PATH`.
fn dir_of(program: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .find(|d| d.join(program).is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

/// A `PATH` with node, npm and npx, uv and uvx, the system's tools and
/// Python, and no Rust toolchain: stubs named cargo, rustc and rustup come
/// first and fail.
fn path_without_rust(root: &Path) -> String {
    let stubs = root.join("no-rust");
    std::fs::create_dir_all(&stubs).unwrap();
    for tool in ["cargo", "rustc", "rustup"] {
        let stub = stubs.join(tool);
        std::fs::write(
            &stub,
            format!("#!/bin/sh\necho '{tool} is not installed' >&2\nexit 127\n"),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let uv = peers::venv_bin("uvx");
    let dirs = [
        stubs,
        dir_of("node"),
        uv.parent().unwrap().to_path_buf(),
        "/usr/bin".into(),
        "/bin".into(),
    ];
    std::env::join_paths(dirs)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Where and how the test's user runs commands: their project folder,
/// their `PATH` (no Rust) and their fresh `HOME`.
struct User {
    dir: PathBuf,
    path: String,
    home: PathBuf,
}

impl User {
    /// Runs `argv` in the project with only `env` (and `PATH`, `HOME`).
    fn run(&self, env: &[(&str, &str)], argv: &[&str]) -> Output {
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..])
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("NPM_CONFIG_UPDATE_NOTIFIER", "false")
            .env("NPM_CONFIG_FUND", "false")
            .env("NPM_CONFIG_AUDIT", "false");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// Runs `argv` and asserts that it succeeded.
    fn ok(&self, env: &[(&str, &str)], argv: &[&str]) -> Output {
        let out = self.run(env, argv);
        assert!(out.status.success(), "{}: {}", argv.join(" "), text(&out));
        out
    }
}

/// The names of the tools an MCP client gets from `command args` started
/// in `dir`: the Python SDK's stdio client (pinned in tests/peers).
fn tools_listed(user: &User, env: &[(&str, &str)], server: &[&str]) -> Vec<String> {
    let script = r#"
import json, os, sys
import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

async def main():
    command, *args = json.loads(sys.argv[1])
    # The whole environment (the SDK passes only a few variables by default).
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ), cwd=sys.argv[2])
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        tools = (await client.list_tools()).tools
        print(json.dumps([t.name for t in tools]))

anyio.run(main)
"#;
    let python = peers::python();
    let server_json = serde_json::to_string(server).unwrap();
    let out = user.ok(
        env,
        &[
            python.to_str().unwrap(),
            "-c",
            script,
            &server_json,
            user.dir.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("[]")).unwrap()
}

/// Claude Code's line for `devboy` after `claude mcp add devboy -- COMMAND`.
fn claude_connects(claude: &ClaudeCode, command: &str, args: &[&str]) -> String {
    claude.mcp_add("devboy", command, args).unwrap();
    let list = claude.mcp_list().unwrap();
    let line = list
        .lines()
        .find(|l| l.starts_with("devboy:"))
        .unwrap_or_else(|| panic!("no devboy in claude mcp list:\n{list}"))
        .to_owned();
    let _ = claude.run(&["mcp", "remove", "-s", "user", "devboy"]);
    line
}

#[test]
fn the_npm_and_pypi_packages_install_from_their_files_and_serve_claude_code_with_no_rust() {
    let root = tempfile::tempdir().unwrap();
    let (platform, launcher, wheel) = build_packages(root.path());
    eprintln!(
        "npm {} MB + {} MB, wheel {} MB",
        size_mb(&platform),
        size_mb(&launcher),
        size_mb(&wheel)
    );
    let project = root.path().join("checkout-41");
    std::fs::create_dir_all(&project).unwrap();
    let path = path_without_rust(root.path());
    let claude = ClaudeCode::new()
        .unwrap()
        .project_dir(&project)
        .unwrap()
        .env("PATH", &path);
    let user = User {
        dir: project.clone(),
        path: path.clone(),
        home: claude.home().to_path_buf(),
    };

    let no_cargo = user.run(&[], &["sh", "-c", "cargo --version"]);
    assert!(!no_cargo.status.success(), "cargo is on the test's PATH");

    // npm: the launcher and this platform's package from their tarballs.
    user.ok(
        &[],
        &[
            "npm",
            "install",
            "--offline",
            "--loglevel=error",
            platform.to_str().unwrap(),
            launcher.to_str().unwrap(),
        ],
    );
    says_its_version(&user.ok(&[], &["npx", "-y", "devboy", "--version"]));
    let line = claude_connects(&claude, "npx", &["-y", "devboy", "mcp"]);
    assert!(line.contains("Connected"), "{line}");
    let tools = tools_listed(&user, &[], &["npx", "-y", "devboy", "mcp"]);
    assert!(tools.iter().any(|t| t == "devboy_expand"), "{tools:?}");
    eprintln!("npx: {line}\n  {} tools: {tools:?}", tools.len());

    // PyPI: `uvx devboy mcp` with uv pointed at the wheel's folder.
    let wheels = wheel.parent().unwrap().to_str().unwrap().to_owned();
    let uv_env = [
        ("UV_FIND_LINKS", wheels.as_str()),
        ("UV_NO_INDEX", "1"),
        ("UV_OFFLINE", "1"),
        ("UV_PYTHON_DOWNLOADS", "never"),
    ];
    let uv_claude = uv_env.iter().fold(claude, |c, (k, v)| c.env(*k, *v));
    says_its_version(&user.ok(&uv_env, &["uvx", "devboy", "--version"]));
    let line = claude_connects(&uv_claude, "uvx", &["devboy", "mcp"]);
    assert!(line.contains("Connected"), "{line}");
    let tools = tools_listed(&user, &uv_env, &["uvx", "devboy", "mcp"]);
    assert!(tools.iter().any(|t| t == "devboy_expand"), "{tools:?}");
    eprintln!("uvx: {line}\n  {} tools", tools.len());

    // pip (and so pipx): the wheel puts `devboy` on the environment's PATH.
    let venv = root.path().join("venv");
    user.ok(&[], &["python3", "-m", "venv", venv.to_str().unwrap()]);
    user.ok(
        &[],
        &[
            venv.join("bin/pip").to_str().unwrap(),
            "install",
            "--quiet",
            "--no-index",
            "--disable-pip-version-check",
            wheel.to_str().unwrap(),
        ],
    );
    says_its_version(&user.ok(
        &[],
        &[venv.join("bin/devboy").to_str().unwrap(), "--version"],
    ));
}
