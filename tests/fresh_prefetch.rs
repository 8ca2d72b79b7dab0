//! Invariant 14, "fresh or nothing", end to end against the real
//! `server-filesystem`: a file written on disk by something devboy never
//! sees (Claude Code's own Edit and Write tools, an editor, a formatter,
//! `git checkout`) at any moment between a search, its prefetched reads
//! landing and the agent's read, is never served from the prefetch: the
//! agent always reads what is on disk now. And Claude Code's `PostToolUse`
//! hook (`devboy hook signal`) makes a running devboy drop what it holds of
//! the file it names.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::{text_of, toml_str, Devboy, TempDir};
use devboy_testkit::peers;
use serde_json::{json, Value};

/// devboy over server-filesystem at `root`, results untouched by the token
/// pipeline so they compare with the file, its runtime directory (where
/// hook signals go) at `runtime`.
async fn devboy(root: &Path, runtime: &Path) -> Devboy {
    let peer = peers::server_filesystem(root);
    let args: Vec<String> = peer.args.iter().map(|a| toml_str(a)).collect();
    let config = format!(
        "[servers.fs]\ncommand = {}\nargs = [{}]\n",
        toml_str(&peer.program_str()),
        args.join(", ")
    );
    Devboy::start_full(
        &config,
        "devboy.toml",
        &["--list-grace-ms", "30000", "--pipeline", "passthrough"],
        None,
        &[("DEVBOY_RUNTIME_DIR", runtime.as_os_str())],
    )
    .await
}

/// Writes `text` to `path` and dates it an hour back, as a file of a
/// checkout that has not been touched for a while.
fn settled_file(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

/// A deterministic stream of choices (xorshift), so a failing trial can be
/// replayed.
struct Choices(u64);

impl Choices {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn speculation(status: &Value) -> &Value {
    &status["session"]["speculation"]
}

/// 200 trials: three files, a search that prefetches their reads, a
/// write to one of them at a random moment (or none), then the agent's
/// read: it must be the file as it is on disk, every time.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_written_behind_devboys_back_is_never_served_stale() {
    let data = TempDir::new("fresh");
    let root = data.path().canonicalize().unwrap();
    let runtime = root.join("run");
    let devboy = devboy(&root, &runtime).await;
    let mut choices = Choices(0x2545_f491_4f6c_dd1d);
    let (mut written, mut wrong) = (0, Vec::new());
    for trial in 0..200 {
        let dir = root.join(format!("t{trial}"));
        std::fs::create_dir_all(&dir).unwrap();
        let files: Vec<PathBuf> = (0..3).map(|k| dir.join(format!("note{k}.txt"))).collect();
        for (k, file) in files.iter().enumerate() {
            settled_file(
                file,
                &format!("trial {trial} file {k} version 1\n").repeat(20),
            );
        }
        let search = devboy
            .call(
                "fs__search_files",
                json!({"path": dir.display().to_string(), "pattern": "**/*.txt"}),
            )
            .await;
        assert_ne!(search.is_error, Some(true), "{}", text_of(&search));
        let target = &files[choices.next(3) as usize];
        // Before the prefetches are even sent, while they are in flight,
        // after they landed; or no write at all.
        let wait = Duration::from_millis(choices.next(120));
        let write = choices.next(2) == 0;
        tokio::time::sleep(wait).await;
        if write {
            written += 1;
            // Half the time the same size: only the time and the content
            // tell this write apart.
            let version = if choices.next(2) == 0 {
                format!("trial {trial} file X version 2\n").repeat(20)
            } else {
                format!("trial {trial} version 2, longer\n").repeat(25)
            };
            std::fs::write(target, version).unwrap();
        }
        let read = devboy
            .call(
                "fs__read_text_file",
                json!({"path": target.display().to_string()}),
            )
            .await;
        let on_disk = std::fs::read_to_string(target).unwrap();
        if text_of(&read) != on_disk {
            wrong.push(format!("trial {trial} (waited {wait:?}, wrote: {write})"));
        }
    }
    let status = devboy.status().await;
    let spec = speculation(&status);
    assert!(wrong.is_empty(), "stale reads: {wrong:?}\n{spec}");
    // The check is exercised both ways: prefetches were served, and
    // written files' prefetches were dropped as stale.
    let hits = spec["hits"].as_u64().unwrap_or(0);
    let stale = spec["wasted"]["stale"].as_u64().unwrap_or(0);
    assert!(hits >= 40, "{hits} hits in 200 trials: {spec}");
    assert!(stale >= 10, "{stale} stale of {written} written: {spec}");
    eprintln!("200 trials, {written} with a write: {hits} served from a prefetch, {stale} dropped as stale, 0 stale reads");
}

/// Claude Code's `PostToolUse` hook for its Write tool, run as Claude Code
/// runs it (`devboy hook signal` with the event on stdin), makes the
/// running devboy drop the prefetch of that file before the agent reads it.
#[tokio::test(flavor = "multi_thread")]
async fn a_post_tool_use_hook_drops_the_prefetch_of_the_file_it_names() {
    let data = TempDir::new("fresh-hook");
    let root = data.path().canonicalize().unwrap();
    let runtime = root.join("run");
    let files: Vec<PathBuf> = (0..3).map(|k| root.join(format!("doc{k}.md"))).collect();
    for file in &files {
        settled_file(file, &"# a settled document\n".repeat(30));
    }
    let devboy = devboy(&root, &runtime).await;
    devboy
        .call(
            "fs__search_files",
            json!({"path": root.display().to_string(), "pattern": "**/*.md"}),
        )
        .await;
    let landed = |status: &Value| speculation(status)["held"].as_u64() == Some(3);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !landed(&devboy.status().await) {
        assert!(tokio::time::Instant::now() < deadline, "prefetches landed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The hook, as Claude Code runs it after its Write tool. devboy runs in
    // the test's working directory: that is the project the hook names.
    let project = std::env::current_dir().unwrap();
    let event = json!({
        "session_id": "s1",
        "cwd": project.display().to_string(),
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": files[0].display().to_string(), "content": "x"},
        "tool_response": {"success": true},
    });
    let mut hook = std::process::Command::new(common::devboy_bin())
        .args(["hook", "signal"])
        .env("DEVBOY_RUNTIME_DIR", &runtime)
        .env("CLAUDE_PROJECT_DIR", &project)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    hook.stdin
        .take()
        .unwrap()
        .write_all(event.to_string().as_bytes())
        .unwrap();
    assert!(hook.wait().unwrap().success());
    // The running devboy picks it up within a poll, at its next call.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = devboy.status().await;
        if speculation(&status)["wasted"]["invalidated"] == 1 {
            assert_eq!(speculation(&status)["held"], 2, "{status}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the hook's write reached devboy: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
