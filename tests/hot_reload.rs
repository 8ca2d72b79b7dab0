//! Hot reload: edits to `devboy.toml` and
//! `pipeline_config.toml` take effect in a running devboy, with the client
//! still connected: an added server starts, a changed one restarts, a
//! removed one stops, the untouched one keeps its process; a file that no
//! longer parses changes nothing; a pipeline rule applies from the next
//! result. Against the devboy test server (`t`) and `server-filesystem`
//! (`fs`).

mod common;

use std::path::Path;
use std::sync::atomic::Ordering;

use common::{text_of, toml_str, Devboy};
use devboy_testkit::peers;
use serde_json::json;

fn t_entry(extra: &str) -> String {
    format!("[servers.t]\ncommand = \"{{server}}\"\n{extra}\n")
}

fn fs_entry(root: &Path) -> String {
    let fs = peers::server_filesystem(root);
    let args: Vec<String> = fs.args.iter().map(|a| toml_str(a)).collect();
    format!(
        "[servers.fs]\ncommand = {}\nargs = [{}]\n",
        toml_str(&fs.program_str()),
        args.join(", ")
    )
}

/// Writes `text` as the running devboy's config (`{server}` expanded as
/// the harness does), so that its modification is seen.
fn rewrite(devboy: &Devboy, text: &str) {
    let text = text.replace("{server}", &common::test_server_bin().display().to_string());
    // A new file renamed over the old, as editors save.
    let path = devboy.dir.path().join("devboy.toml");
    let next = devboy.dir.path().join("devboy.toml.new");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, &path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_edits_apply_while_the_client_stays_connected() {
    let devboy = Devboy::start(&t_entry("")).await;
    let root = devboy.dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "reloaded\n").unwrap();
    let pid = text_of(&devboy.call("t__pid", json!({})).await);

    // Added: fs starts, its tools arrive with list_changed; t is untouched.
    let seen = devboy.recorder.tool_list_changed.load(Ordering::SeqCst);
    rewrite(&devboy, &format!("{}\n{}", t_entry(""), fs_entry(&root)));
    common::until("fs's tools", async || {
        devboy
            .tool_names()
            .await
            .iter()
            .any(|n| n == "fs__read_text_file")
    })
    .await;
    assert!(devboy.recorder.tool_list_changed.load(Ordering::SeqCst) > seen);
    let path = root.join("a.txt").display().to_string();
    let read = devboy
        .call("fs__read_text_file", json!({"path": path}))
        .await;
    assert!(text_of(&read).contains("reloaded"), "{}", text_of(&read));
    assert_eq!(
        text_of(&devboy.call("t__pid", json!({})).await),
        pid,
        "t kept its process"
    );

    // Broken: nothing changes, everything still works.
    rewrite(&devboy, "[servers.t\ncommand = ");
    common::until("the problem shown", async || {
        devboy.status().await["config_problem"].is_string()
    })
    .await;
    let problem = devboy.status().await["config_problem"].clone();
    let said = problem.as_str().unwrap();
    assert!(
        said.contains("devboy.toml:1") && said.contains("last config that parsed"),
        "{problem}"
    );
    assert_eq!(text_of(&devboy.call("t__pid", json!({})).await), pid);
    assert!(devboy
        .tool_names()
        .await
        .iter()
        .any(|n| n == "fs__read_text_file"));

    // Changed: t restarts from its new entry; removed: fs stops.
    rewrite(&devboy, &t_entry("env = { DEVBOY_RELOADED = \"1\" }"));
    common::until("t restarted and fs gone", async || {
        let names = devboy.tool_names().await;
        let fs_gone = !names.iter().any(|n| n.starts_with("fs__"));
        let t = devboy.call("t__pid", json!({})).await;
        fs_gone && t.is_error != Some(true) && text_of(&t) != pid
    })
    .await;
    let status = devboy.status().await;
    assert!(status["config_problem"].is_null(), "fixed: {status}");
    let names: Vec<&str> = status["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["name"].as_str())
        .collect();
    assert_eq!(names, ["t"], "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_config_edit_applies_from_the_next_result() {
    let root_dir = common::TempDir::new("reload-pipeline-root");
    let root = root_dir.path().canonicalize().unwrap();
    let devboy = Devboy::start_with_pipeline(&fs_entry(&root), "").await;
    let long = "the same long line, again and again\n".repeat(60);
    for name in ["a.txt", "b.txt"] {
        std::fs::write(root.join(name), &long).unwrap();
    }
    let read = async |name: &str| {
        let path = root.join(name).display().to_string();
        text_of(
            &devboy
                .call("fs__read_text_file", json!({"path": path}))
                .await,
        )
    };
    read("a.txt").await;
    assert!(
        read("a.txt").await.starts_with("> [ref: "),
        "dedup on by default"
    );

    // The user turns dedup off for this tool, saving as editors do.
    let file = devboy.dir.path().join("pipeline_config.toml");
    let next = devboy.dir.path().join("pipeline_config.toml.new");
    std::fs::write(&next, "[endpoints.\"fs__read_text_file\"]\ndedup = false\n").unwrap();
    std::fs::rename(&next, &file).unwrap();
    common::until("the rule applied", async || {
        read("b.txt").await;
        !read("b.txt").await.starts_with("> [ref: ")
    })
    .await;
    let again = read("b.txt").await;
    assert!(again.contains("again and again"), "{again}");
}
