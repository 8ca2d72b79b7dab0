//! docs/ARCHITECTURE.md's crate graph is the workspace's: the block after
//! the `<!-- crate-graph` marker lists every workspace crate once, with
//! exactly the workspace crates it depends on (normal dependencies, as
//! `cargo metadata` reports them), and every dependency is listed below
//! its dependent (dependencies point one way).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The crates in the order the document lists them, and their edges.
fn documented() -> (Vec<String>, Graph) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path).expect("read docs/ARCHITECTURE.md");
    let after = text
        .split_once("<!-- crate-graph")
        .expect("docs/ARCHITECTURE.md has a `<!-- crate-graph` marker")
        .1;
    let block = after
        .split_once("```text\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("a ```text block after the crate-graph marker")
        .0;
    let (mut order, mut graph) = (Vec::new(), Graph::new());
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (head, deps) = line.split_once('→').unwrap_or((line, ""));
        let name = head.split_whitespace().next().expect("a crate name");
        let deps: BTreeSet<String> = deps
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_owned)
            .collect();
        assert!(
            graph.insert(name.to_owned(), deps).is_none(),
            "{name} is listed twice in the crate graph"
        );
        order.push(name.to_owned());
    }
    (order, graph)
}

/// Each workspace package and the workspace packages it depends on.
fn actual() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let members: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|d| members.contains(d))
                .map(str::to_owned)
                .collect();
            (p["name"].as_str().unwrap_or_default().to_owned(), deps)
        })
        .collect()
}

#[test]
fn the_crate_graph_in_architecture_md_is_the_workspace() {
    let (order, documented) = documented();
    let actual = actual();
    let mut wrong = Vec::new();
    for name in actual.keys().filter(|n| !documented.contains_key(*n)) {
        wrong.push(format!("{name}: not in the graph"));
    }
    for name in documented.keys().filter(|n| !actual.contains_key(*n)) {
        wrong.push(format!("{name}: in the graph, not in the workspace"));
    }
    for (name, deps) in &actual {
        let Some(stated) = documented.get(name) else {
            continue;
        };
        for missing in deps.difference(stated) {
            wrong.push(format!("missing edge {name} → {missing}"));
        }
        for extra in stated.difference(deps) {
            wrong.push(format!("extra edge {name} → {extra} (no such dependency)"));
        }
    }
    let position = |n: &str| order.iter().position(|o| o == n);
    for (name, deps) in &documented {
        for dep in deps {
            if matches!((position(dep), position(name)), (Some(d), Some(n)) if d <= n) {
                wrong.push(format!("{dep} is listed above {name}, which depends on it"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's crate graph differs from `cargo metadata`:\n  {}",
        wrong.join("\n  ")
    );
}
