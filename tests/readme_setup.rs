//! The README's setup, run as written by a new user: its shell blocks under
//! "Adding devboy to Claude Code" go through bash, line for line, in a
//! fresh `HOME`, with the real Claude Code; then a scripted model calls a
//! proxied tool in a project whose `.mcp.json` is an ordinary one (servers
//! started by path and by the Python peers, one HTTP server that is down,
//! one whose token is unset), moved behind devboy by the README's command.
//!
//! One line is not run: `cargo install --locked --path .` (a release build of the
//! whole workspace into the user's cargo bin would take many minutes and
//! touch the machine outside the test); the binary under test stands in
//! for it on `PATH` under the name `devboy`.

mod common;

use std::path::{Path, PathBuf};

use std::time::Duration;

use devboy_testkit::{peers, ClaudeCode, Script, ScriptedModel, TerminalSession, Turn};
use serde_json::{json, Value};

const DEVBOY: &str = env!("CARGO_BIN_EXE_devboy");
const INSTALL_LINE: &str = "cargo install --locked --path .";

/// The `sh` blocks of README.md after `heading`, up to the next `## `.
fn readme_blocks(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(peers::workspace_root().join("README.md")).unwrap();
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("README.md has no {heading:?}"));
    let section = &readme[start + heading.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut blocks = Vec::new();
    let mut rest = section;
    while let Some(open) = rest.find("```sh\n") {
        let body = &rest[open + 6..];
        let close = body.find("```").expect("closed block");
        blocks.push(body[..close].to_owned());
        rest = &body[close..][3..];
    }
    blocks
}

/// The README's block that moves a project's `.mcp.json` behind devboy.
fn readme_project_block() -> String {
    readme_blocks("## Adding devboy to Claude Code")
        .into_iter()
        .find(|b| b.contains("devboy init --project"))
        .expect("a project block")
}

/// A directory holding `devboy`, as `cargo install` would leave it.
fn bin_dir(claude: &ClaudeCode) -> PathBuf {
    let dir = claude.scratch_dir().join("cargo-bin");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("devboy");
    if !link.exists() {
        std::os::unix::fs::symlink(DEVBOY, &link).unwrap();
    }
    dir
}

/// `PATH` with [`bin_dir`] first, as after `cargo install`.
fn path_with_devboy(claude: &ClaudeCode) -> String {
    let bins = bin_dir(claude);
    std::env::join_paths(std::iter::once(bins).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap()
    .to_string_lossy()
    .into_owned()
}

/// Runs one README block with bash (`set -e`: every command must
/// succeed) in `dir`; returns stdout.
fn run_block(claude: &ClaudeCode, block: &str, dir: &Path) -> String {
    let script: Vec<&str> = block
        .lines()
        .filter(|line| !line.trim_start().starts_with(INSTALL_LINE))
        .collect();
    let script = format!("set -euo pipefail\n{}", script.join("\n"));
    let bins = bin_dir(claude);
    let mut cmd = claude.shell(&script, &[&bins]);
    cmd.current_dir(dir);
    let out = devboy_testkit::claude::run_with_timeout(cmd, Duration::from_secs(120)).unwrap();
    assert!(out.success(), "README block failed:\n{script}\n{out}");
    out.stdout
}

/// Writes `project/.mcp.json` as a user's might be: a filesystem server
/// started by path, one HTTP server that is down, one whose token is
/// unset, and `more`; makes the folder a git repository. Returns the
/// file's JSON.
fn write_realistic_mcp_json(project: &Path, more: Value) -> Value {
    let fs = peers::server_filesystem(Path::new("."));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut servers = json!({
        "filesystem": {"command": fs.program_str(), "args": fs.args},
        "issues": {"type": "http", "url": format!("http://127.0.0.1:{port}/mcp")},
        "github": {"type": "http", "url": "https://api.example/mcp",
                   "headers": {"Authorization": "Bearer ${DEVBOY_README_TEST_UNSET_TOKEN}"}},
    });
    for (name, server) in more.as_object().expect("servers by name") {
        servers[name] = server.clone();
    }
    let original = json!({ "mcpServers": servers });
    std::fs::write(
        project.join(".mcp.json"),
        serde_json::to_string_pretty(&original).unwrap(),
    )
    .unwrap();
    std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(project)
        .status()
        .unwrap();
    original
}

fn connected(list: &str, name: &str) -> bool {
    list.lines()
        .any(|l| l.starts_with(&format!("{name}:")) && l.contains("✔ Connected"))
}

#[test]
fn readme_user_setup_works_as_written() {
    let blocks = readme_blocks("## Adding devboy to Claude Code");
    let setup = &blocks[0];
    assert!(setup.contains(INSTALL_LINE), "{setup}");
    assert!(setup.contains("devboy init"), "{setup}");
    let claude = ClaudeCode::new().unwrap();
    // A Claude Desktop config for `devboy init` to import.
    let desktop = claude.home().join(".config/Claude");
    std::fs::create_dir_all(&desktop).unwrap();
    let fs = peers::server_filesystem(claude.project());
    std::fs::write(
        desktop.join("claude_desktop_config.json"),
        json!({"mcpServers": {"filesystem": {"command": fs.program_str(), "args": fs.args}}})
            .to_string(),
    )
    .unwrap();
    let stdout = run_block(&claude, setup, claude.project());
    assert!(connected(&stdout, "devboy"), "{stdout}");
    let config = claude.home().join(".config/devboy/devboy.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("[servers.filesystem]"), "{text}");
    // Running `devboy init` again must not lose the file.
    let again = claude
        .shell("devboy init", &[&bin_dir(&claude)])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
}

#[test]
fn readme_project_setup_works_as_written_with_a_realistic_mcp_json() {
    let project_block = &readme_project_block();
    assert!(project_block.contains("cd your-project"), "{project_block}");

    let claude = ClaudeCode::new().unwrap();
    let parent = claude.scratch_dir().join("work");
    let project = parent.join("your-project");
    std::fs::create_dir_all(&project).unwrap();
    let marker = "first contact marker 5521";
    std::fs::write(project.join("notes.txt"), marker).unwrap();
    let git = peers::server_git(Path::new("."));
    let original = write_realistic_mcp_json(
        &project,
        json!({"git": {"command": git.program_str(), "args": git.args}}),
    );

    let stdout = run_block(&claude, project_block, &parent);
    assert!(connected(&stdout, "devboy"), "{stdout}");
    let moved: Value =
        serde_json::from_str(&std::fs::read_to_string(project.join("devboy.mcp.json")).unwrap())
            .unwrap();
    assert_eq!(moved, original, "the servers moved exactly");

    // A session in that project, in interactive Claude Code: the model
    // reads a file through devboy while two servers behind it are down.
    // The first prompt gets a text answer, the tool call comes with the
    // second: the filesystem server may come up after devboy's first
    // tools/list (answered within 4 s with what is ready) and then reach
    // Claude Code by list_changed.
    let tool = "mcp__devboy__filesystem__read_text_file";
    let model = ScriptedModel::start(Script::new().final_text("ok")).unwrap();
    let path = path_with_devboy(&claude);
    let claude = claude
        .model(&model)
        .project_dir(&project)
        .unwrap()
        .env("PATH", &path);
    let terminal = TerminalSession::start(&claude, &["--allowedTools", tool]).unwrap();
    terminal.ask(&model, "Hello.").unwrap();
    std::thread::sleep(Duration::from_secs(5));
    model.push(Turn::tool_use(tool, json!({"path": "notes.txt"})));
    terminal.type_line("Read notes.txt.").unwrap();
    let results = terminal.tool_results(&model).unwrap();
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert!(results[0].text().contains(marker), "{:?}", results[0]);
}

/// The line `devboy init --project` printed for `claude mcp list`, after
/// its `# `.
fn predicted_listing(init: &str) -> &str {
    init.lines()
        .find_map(|l| l.trim_start().strip_prefix("claude mcp list     # "))
        .unwrap_or_else(|| panic!("no `claude mcp list` line in:\n{init}"))
}

/// Claude Code's `claude mcp list` line for `name`, in `claude`'s project.
fn listing_line(claude: &ClaudeCode, name: &str) -> String {
    let list = run_block(claude, "claude mcp list", claude.project());
    list.lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in:\n{list}"))
        .to_owned()
}

/// `devboy init --project` says what `claude mcp list` then shows, as the
/// real Claude Code shows it: pending approval in a fresh `HOME`; with a
/// devboy registered for every project too, that one until the project's
/// is approved (which `claude mcp get` confirms); connected once approved.
#[test]
fn init_project_says_what_claude_mcp_list_shows() {
    let claude = ClaudeCode::new().unwrap();
    // A fresh HOME has approved no project server.
    std::fs::write(claude.home().join(".claude/settings.json"), "{}").unwrap();
    let time = peers::server_time();
    std::fs::write(
        claude.project().join(".mcp.json"),
        json!({"mcpServers": {"time": {"command": time.program_str(), "args": time.args}}})
            .to_string(),
    )
    .unwrap();
    let init = || run_block(&claude, "devboy init --project", claude.project());

    let said = init();
    let pending = predicted_listing(&said);
    assert_eq!(
        pending,
        "devboy: devboy mcp --config devboy.mcp.json - ⏸ Pending approval (run `claude` to approve), then ✔ Connected",
        "{said}"
    );
    let shown = listing_line(&claude, "devboy");
    assert_eq!(
        Some(shown.as_str()),
        pending.split(", then ").next(),
        "{said}"
    );
    assert!(!said.contains("- ✔ Connected\n"), "{said}");

    run_block(
        &claude,
        "claude mcp add -s user devboy -- devboy mcp",
        claude.project(),
    );
    let said = init();
    assert_eq!(
        predicted_listing(&said),
        "devboy: devboy mcp: your user-scope devboy, until you approve the project's; \
         then devboy: devboy mcp --config devboy.mcp.json - ✔ Connected",
        "{said}"
    );
    assert!(
        said.contains("note: devboy is also registered in Claude Code's user scope as `devboy`: Claude Code starts that one here until you approve the project's"),
        "{said}"
    );
    assert_eq!(
        listing_line(&claude, "devboy"),
        "devboy: devboy mcp - ✔ Connected"
    );
    let get = run_block(&claude, "claude mcp get devboy", claude.project());
    assert!(get.contains("Scope: User config"), "{get}");

    std::fs::write(
        claude.home().join(".claude/settings.json"),
        json!({"enableAllProjectMcpServers": true}).to_string(),
    )
    .unwrap();
    let said = init();
    let approved = predicted_listing(&said);
    assert_eq!(
        approved, "devboy: devboy mcp --config devboy.mcp.json - ✔ Connected",
        "{said}"
    );
    assert_eq!(listing_line(&claude, "devboy"), approved);
    let get = run_block(&claude, "claude mcp get devboy", claude.project());
    assert!(get.contains("Scope: Project config"), "{get}");
}

/// Kills the `devboy serve` a README block left running.
struct ServeGuard(PathBuf);

impl Drop for ServeGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new("pkill")
            .args([
                "-f",
                &format!(
                    "devboy serve --http 127.0.0.1:8765 --token-file {}",
                    self.0.display()
                ),
            ])
            .status();
    }
}

/// The README's HTTP setup as written, in a fresh `HOME`: a
/// token file only its user reads, `devboy serve --http` in the
/// background, Claude Code registering it with the bearer header; then
/// `claude mcp list` says connected and a scripted model calls a devboy
/// tool over HTTP.
#[test]
fn readme_http_setup_works_as_written() {
    let blocks = readme_blocks("## Adding devboy to Claude Code");
    let block = blocks
        .iter()
        .find(|b| b.contains("devboy serve --http"))
        .expect("an HTTP block");
    let model = ScriptedModel::start(
        Script::new()
            .tool_use("mcp__devboy-http__devboy_status", json!({}))
            .final_text("done"),
    )
    .unwrap();
    let claude = ClaudeCode::new().unwrap().model(&model);
    let token = claude.home().join(".devboy-token");
    let _serve = ServeGuard(token.clone());
    // The background server keeps no pipe of the test's open.
    let log = claude.scratch_dir().join("block.log");
    let script = format!("set -euo pipefail\nexec >{} 2>&1\n{block}", log.display());
    // Not through run_with_timeout, which ends the whole process group
    // with the shell: the user's `devboy serve … &` outlives the block.
    let status = claude
        .shell(&script, &[&bin_dir(&claude)])
        .current_dir(claude.project())
        .stdin(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(
        status.success(),
        "README block failed:\n{script}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&token).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o077,
        0,
        "the token file is the user's alone: {mode:o}"
    );
    // Connected once devboy listens.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let list = claude.mcp_list().unwrap();
        if connected(&list, "devboy-http") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{list}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    claude
        .run_print("Status?", &["mcp__devboy-http__devboy_status"])
        .unwrap()
        .assert_success();
    let results = model.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert!(
        results[0].text().contains("\"upstreams\""),
        "{}",
        results[0].text()
    );
}

/// The README's login, as a new user meets it: a project whose
/// `.mcp.json` has, beside a filesystem server, one that is down and one
/// whose token is unset, a server behind an OAuth login
/// (`tests/conformance/oauth-server.mjs`, whose access tokens live 40 s,
/// so are due for a refresh after 10), in a checkout whose folder is not named as the README's
/// example. The README's blocks run as written (`cd` to this folder,
/// `NAME` the server's key, `$BROWSER` a script that follows the
/// redirect); then Claude Code, in print mode and interactive, has the
/// model read the server's tool through devboy, which refreshes the
/// token by itself each time.
#[test]
fn readme_login_works_as_written_for_a_project_server_behind_oauth() {
    let project_block = &readme_project_block();
    let login_blocks = readme_blocks("### Upstreams that need a login");
    let login_block = login_blocks
        .iter()
        .find(|b| b.contains("devboy login NAME"))
        .expect("a login block");

    let mut oauth_server = std::process::Command::new(peers::conformance_bin("node"));
    oauth_server
        .arg(peers::conformance_dir().join("oauth-server.mjs"))
        .env("PORT", "0")
        .env("TOKEN_TTL", "40");
    let (_server, url) = common::start_until(oauth_server, "oauth server listening on ", false);

    let claude = ClaudeCode::new().unwrap();
    let parent = claude.scratch_dir().join("work");
    let project = parent.join("wc-2");
    std::fs::create_dir_all(&project).unwrap();
    write_realistic_mcp_json(&project, json!({"notes": {"type": "http", "url": url}}));

    let here = project_block.replace("cd your-project", "cd wc-2");
    let stdout = run_block(&claude, &here, &parent);
    assert!(stdout.contains("devboy"), "{stdout}");
    let claude = claude.env(
        "BROWSER",
        format!(
            "python3 {}",
            peers::conformance_dir().join("browser.py").display()
        ),
    );
    let login = run_block(&claude, &login_block.replace("NAME", "notes"), &project);
    assert!(
        !login.contains("at_") && !login.contains("rt_"),
        "no token printed: {login}"
    );
    let claude = claude.project_dir(&project).unwrap();
    let doctor = {
        let mut cmd = claude.shell("devboy doctor", &[&bin_dir(&claude)]);
        cmd.current_dir(&project);
        devboy_testkit::claude::run_with_timeout(cmd, Duration::from_secs(120)).unwrap()
    };
    assert!(
        doctor
            .stdout
            .lines()
            .any(|l| l.contains("✔ notes (") && l.contains("ready")),
        "devboy doctor after the login:\n{doctor}"
    );

    // Print mode, once the access token is due for a refresh (rmcp
    // refreshes one that has under 30 s left).
    std::thread::sleep(Duration::from_millis(10_500));
    let tool = "mcp__devboy__notes__secret_note";
    let note = "the note behind the login: 4417 tangerine";
    let model = ScriptedModel::start(
        Script::new()
            .tool_use(tool, json!({}))
            .final_text("note read"),
    )
    .unwrap();
    let path = path_with_devboy(&claude);
    let claude = claude.model(&model).env("PATH", &path);
    let out = claude.run_print("Read the note.", &[tool]).unwrap();
    out.assert_success();
    let results = model.tool_results();
    assert_eq!(results.len(), 1, "{results:?}\n{out}");
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert_eq!(results[0].text().trim(), note, "print mode");

    // Interactive, once the next one is due.
    std::thread::sleep(Duration::from_millis(10_500));
    let model = ScriptedModel::start(Script::new().final_text("ok")).unwrap();
    let claude = claude.model(&model);
    let terminal = TerminalSession::start(&claude, &["--allowedTools", tool]).unwrap();
    terminal.ask(&model, "Hello.").unwrap();
    model.push(Turn::tool_use(tool, json!({})));
    terminal.type_line("Read the note.").unwrap();
    let results = terminal.tool_results(&model).unwrap();
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert_eq!(results[0].text().trim(), note, "interactive");
}

/// An events feed as GitHub's `/repos/:o/:r/events` gives one: every row
/// has the same top-level keys, `payload` is shaped by `type`, and `actor`,
/// `repo` and `org` repeat from row to row. Made up here (recorded feeds
/// are other projects' data; `scripts/mixed-pages` measures on those).
fn events_feed() -> Value {
    let actors: Vec<Value> = ["octo-ann", "octo-bo", "octo-cy"]
        .iter()
        .enumerate()
        .map(|(i, login)| {
            json!({"id": 5100 + i, "login": login, "display_login": login,
                   "gravatar_id": "", "url": format!("https://api.github.com/users/{login}"),
                   "avatar_url": format!("https://avatars.githubusercontent.com/u/{}?", 5100 + i)})
        })
        .collect();
    let repo = json!({"id": 77012, "name": "acme/widgets",
                      "url": "https://api.github.com/repos/acme/widgets"});
    let org = json!({"id": 9001, "login": "acme", "gravatar_id": "",
                     "url": "https://api.github.com/orgs/acme",
                     "avatar_url": "https://avatars.githubusercontent.com/u/9001?"});
    let rows: Vec<Value> = (0..24)
        .map(|i| {
            let (kind, payload) = match i % 4 {
                0 => ("PushEvent", json!({"push_id": 880_000 + i, "size": 1, "ref": "refs/heads/main",
                        "head": format!("{:040x}", 0xabc_0000 + i), "commits": [{"sha": format!("{:040x}", 0xdef_0000 + i),
                        "message": format!("Fix widget {i} alignment"), "distinct": true}]})),
                1 => ("IssuesEvent", json!({"action": "opened", "issue": {"number": 300 + i,
                        "title": format!("Widget {i} flickers"), "state": "open", "comments": i % 3}})),
                2 => ("WatchEvent", json!({"action": "started"})),
                _ => ("IssueCommentEvent", json!({"action": "created", "issue": {"number": 299 + i},
                        "comment": {"id": 61_000 + i, "body": format!("Seen on build {i} too.")}})),
            };
            json!({"id": format!("{}", 42_000_000 + i), "type": kind, "actor": actors[i % 3],
                   "repo": repo, "payload": payload, "public": true,
                   "created_at": format!("2026-11-{:02}T10:{:02}:00Z", 1 + i / 4, i), "org": org})
        })
        .collect();
    Value::Array(rows)
}

/// Issue 39 as a new user meets it: Claude Code with its tool search on
/// (its default against Anthropic's API), the README's project setup on a
/// realistic `.mcp.json` in a folder not named as the README's, and an
/// events feed read through devboy twice, in print mode and interactive.
/// The feed reaches the model in the `refs` encoding, which decodes to
/// the file's JSON byte for byte; the second read is a reference, and the
/// model expands it with `devboy_expand`, which was loaded up front: no
/// search before it.
#[test]
fn readme_project_setup_with_tool_search_on_encodes_an_events_feed_and_expands_at_once() {
    let project_block = &readme_project_block();
    let claude = ClaudeCode::new().unwrap();
    let parent = claude.scratch_dir().join("work");
    let project = parent.join("checkout-39");
    std::fs::create_dir_all(&project).unwrap();
    let feed = events_feed();
    let compact = serde_json::to_string(&feed).unwrap();
    let file = serde_json::to_string_pretty(&feed).unwrap();
    std::fs::write(project.join("events.json"), &file).unwrap();
    write_realistic_mcp_json(&project, json!({}));
    let here = project_block.replace("cd your-project", "cd checkout-39");
    let stdout = run_block(&claude, &here, &parent);
    assert!(connected(&stdout, "devboy"), "{stdout}");

    let read = "mcp__devboy__filesystem__read_text_file";
    let expand = "mcp__devboy__devboy_expand";
    let path = path_with_devboy(&claude);
    let claude = claude
        .project_dir(&project)
        .unwrap()
        .env("PATH", &path)
        .env("ENABLE_TOOL_SEARCH", "true");
    let check = |results: &[devboy_testkit::ToolResultSeen], mode: &str| {
        assert_eq!(results.len(), 3, "{mode}: {results:#?}");
        let first = results[0].text();
        assert!(!results[0].is_error, "{mode}: {first}");
        assert!(
            first.contains("> [encoded: refs;"),
            "{mode}: the feed is encoded with references: {first}"
        );
        // What the model saw, less devboy's id line, decodes to what the
        // server answered: the file's text, indentation and all, as the
        // `content` of its structured result.
        let shown = match first.rsplit_once('\n') {
            Some((body, last)) if last.starts_with("> [id: ") => body,
            _ => first.as_str(),
        };
        let decoded = match devboy_pipeline::template::decode(shown) {
            Ok(devboy_pipeline::DecodedBody::Json(value)) => value,
            _ => devboy_pipeline::encode::decode(shown)
                .unwrap_or_else(|e| panic!("{mode}: {e}\n{shown}")),
        };
        assert_eq!(decoded, json!({ "content": file }), "{mode}: exact");
        assert!(
            first.len() * 2 < compact.len(),
            "{mode}: {} bytes for {} of compact JSON",
            first.len(),
            compact.len()
        );
        assert!(
            results[1].text().starts_with("> [ref: "),
            "{mode}: the second read is a reference: {}",
            results[1].text()
        );
        assert_eq!(results[2].tool_name.as_deref(), Some(expand), "{mode}");
        assert!(!results[2].is_error, "{mode}: {:?}", results[2]);
        assert!(
            results[2].text().contains("Widget 21 flickers"),
            "{mode}: {}",
            results[2].text()
        );
    };
    let turns = || {
        [
            Turn::tool_use(read, json!({"path": "events.json"})),
            Turn::tool_use(read, json!({"path": "events.json"})),
            Turn::tool_use(
                expand,
                json!({"id": devboy_testkit::scripted_model::LAST_ID}),
            ),
        ]
    };

    // Print mode.
    let mut script = Script::new();
    for turn in turns() {
        script = script.turn(turn);
    }
    let model = ScriptedModel::start(script.final_text("read")).unwrap();
    let claude = claude.model(&model);
    claude
        .run_print("Read events.json twice.", &[read, expand])
        .unwrap()
        .assert_success();
    let first_request = &model.main_requests()[0];
    let up_front = first_request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["name"] == expand && t.get("defer_loading").is_none_or(|d| d != &json!(true)));
    assert!(up_front, "devboy_expand is loaded, not behind the search");
    check(&model.tool_results(), "print mode");

    // Interactive.
    let model = ScriptedModel::start(Script::new().final_text("ok")).unwrap();
    let interactive = claude.model(&model);
    let terminal = TerminalSession::start(
        &interactive,
        &["--allowedTools", &format!("{read},{expand}")],
    )
    .unwrap();
    terminal.ask(&model, "Hello.").unwrap();
    std::thread::sleep(Duration::from_secs(5));
    for turn in turns() {
        model.push(turn);
    }
    terminal.type_line("Read events.json twice.").unwrap();
    terminal
        .wait_until("the three tool results", Duration::from_secs(90), || {
            model.tool_results().len() >= 3
        })
        .unwrap();
    check(&model.tool_results(), "interactive");
}
