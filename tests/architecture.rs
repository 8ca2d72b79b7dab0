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

/// devboy-mcp's modules, lowest first: a module may use those of its own
/// level and below, never above (docs/ARCHITECTURE.md, "Inside
/// devboy-mcp"). A module's name is its file or folder under `src/`; the
/// crate root (`lib.rs`) only declares modules and re-exports, so it is
/// not one of them.
const MCP_LEVELS: &[(&str, &[&str])] = &[
    (
        "transport",
        &[
            "sync",
            "wire",
            "client_stdio",
            "frame",
            "view",
            "tap",
            "relay",
            "child",
        ],
    ),
    ("catalog", &["catalog", "tool_search", "definitions"]),
    ("upstream", &["upstream", "listing_cache", "oauth"]),
    ("proxy", &["proxy"]),
    ("resolve", &["resolve", "lazy", "partition"]),
    ("pipeline", &["answers", "seam", "processor", "speculation"]),
    ("stack", &["stack"]),
    ("builtin", &["builtin"]),
    ("session", &["session"]),
    ("serve", &["reload", "control", "serve", "http", "doctor"]),
];

/// Which of devboy-mcp's modules each module names (`crate::m…`), in its
/// code outside its tests (a file's `#[cfg(test)] mod` and all after it);
/// `lib` stands for an item of the crate root.
fn mcp_imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/devboy-mcp/src");
    let mut files = Vec::new();
    let mut pending = vec![src.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read devboy-mcp/src") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let is_module = |name: &str| src.join(format!("{name}.rs")).exists() || src.join(name).is_dir();
    let mut imports: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&src).expect("under src");
        let first = relative
            .components()
            .next()
            .expect("a path")
            .as_os_str()
            .to_string_lossy()
            .into_owned();
        let module = first.trim_end_matches(".rs").to_owned();
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read a source file");
        let code = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
        let used = imports.entry(module.clone()).or_default();
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or_default();
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group
                        .split('}')
                        .next()
                        .unwrap_or_default()
                        .split(',')
                        .map(|n| n.trim().split("::").next().unwrap_or_default())
                        .collect(),
                    None => vec![rest
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or_default()],
                };
                for name in names.into_iter().filter(|n| !n.is_empty()) {
                    let target = if is_module(name) { name } else { "lib" };
                    if target != module {
                        used.insert(target.to_owned());
                    }
                }
            }
        }
    }
    imports
}

#[test]
fn devboy_mcp_modules_import_downward_only_and_in_no_loop() {
    let level_of = |module: &str| {
        MCP_LEVELS
            .iter()
            .position(|(_, modules)| modules.contains(&module))
    };
    let imports = mcp_imports();
    let mut wrong = Vec::new();
    for (module, used) in &imports {
        let Some(level) = level_of(module) else {
            wrong.push(format!("{module}: not in MCP_LEVELS (give it a level)"));
            continue;
        };
        for target in used {
            match level_of(target) {
                None if target == "lib" => wrong.push(format!(
                    "{module} uses an item of the crate root: name its module instead"
                )),
                None => wrong.push(format!("{module} uses {target}, which has no level")),
                Some(to) if to > level => wrong.push(format!(
                    "{module} ({}) uses {target} ({}), a level above",
                    MCP_LEVELS[level].0, MCP_LEVELS[to].0
                )),
                Some(_) => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "devboy-mcp's module order:\n{}",
        wrong.join("\n")
    );
    // Within a level too: no module reaches itself through others.
    for start in imports.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(&String, Vec<&String>)> = vec![(start, vec![start])];
        while let Some((module, path)) = stack.pop() {
            for next in imports.get(module).into_iter().flatten() {
                assert!(
                    next != start,
                    "an import loop in devboy-mcp: {} -> {next}",
                    path.iter()
                        .map(|m| m.as_str())
                        .collect::<Vec<_>>()
                        .join(" -> ")
                );
                if seen.insert(next) {
                    let mut longer = path.clone();
                    longer.push(next);
                    stack.push((next, longer));
                }
            }
        }
    }
    // The check reads what it should: the stack uses the resolver, and
    // every level but the lowest is used by one above it.
    assert!(imports["stack"].contains("resolve"), "{imports:?}");
}
