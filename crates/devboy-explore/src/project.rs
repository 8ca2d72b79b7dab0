//! The names a project goes by. A question that names the project itself
//! ("how does OkHttp process a request") says nothing about where to look
//! in it, yet the name matches the files named after the project (version
//! constants, the package's entry module). The checkout's folder is often
//! not named after the project (a worktree, a CI checkout), so the names
//! are read from the build files and the git remote as well.

use std::path::Path;

/// Last words that name a project's aggregate rather than the project:
/// `okhttp-parent` is OkHttp (only after a separator: `taproot` stays).
const AGGREGATE_SUFFIXES: &[&str] = &["parent", "root", "project", "workspace", "monorepo"];

/// The project's names, normalized ([`normalize`]), without repeats: the
/// folder's name, the name in each build file at the root
/// (`settings.gradle(.kts)`, `Cargo.toml`, `package.json`,
/// `pyproject.toml`, `setup.cfg`, `setup.py`, `go.mod`) and the
/// repository's name in the git remote `origin`. Names under three
/// characters are left out: they would drop ordinary words.
pub fn project_names(root: &Path) -> Vec<String> {
    let mut raw: Vec<String> = Vec::new();
    if let Some(name) = root.file_name().and_then(|n| n.to_str()) {
        raw.push(name.to_owned());
    }
    let read = |name: &str| std::fs::read_to_string(root.join(name)).ok();
    for gradle in ["settings.gradle.kts", "settings.gradle"] {
        if let Some(text) = read(gradle) {
            raw.extend(gradle_root_name(&text));
        }
    }
    if let Some(text) = read("Cargo.toml") {
        raw.extend(toml_name(&text, &["package"]));
    }
    if let Some(text) = read("pyproject.toml") {
        raw.extend(toml_name(&text, &["project", "tool.poetry"]));
    }
    if let Some(text) = read("setup.cfg") {
        raw.extend(toml_name(&text, &["metadata"]));
    }
    if let Some(text) = read("setup.py") {
        raw.extend(setup_py_name(&text));
    }
    if let Some(text) = read("package.json") {
        raw.extend(package_json_name(&text));
    }
    if let Some(text) = read("go.mod") {
        raw.extend(go_module_name(&text));
    }
    raw.extend(git_remote_name(root));
    let mut names: Vec<String> = Vec::new();
    for name in raw {
        let mut forms = vec![normalize(&name)];
        if let Some((stem, last)) = name.rsplit_once(['-', '_', '.']) {
            if AGGREGATE_SUFFIXES.contains(&last.to_ascii_lowercase().as_str()) {
                forms.push(normalize(stem));
            }
        }
        for form in forms {
            if form.chars().count() >= 3 && !names.contains(&form) {
                names.push(form);
            }
        }
    }
    names
}

/// Lowercase, without `-`, `_`, `.` and spaces: `OkHttp`, `ok-http` and
/// `ok_http` are one name.
pub fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '-' | '_' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The first quoted string on a line, `"…"` or `'…'`.
fn quoted(text: &str) -> Option<String> {
    let start = text.find(['"', '\''])?;
    let quote = text[start..].chars().next()?;
    let rest = &text[start + 1..];
    let end = rest.find(quote)?;
    Some(rest[..end].to_owned()).filter(|s| !s.is_empty())
}

/// `rootProject.name = "okhttp-parent"`.
fn gradle_root_name(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find(|l| l.starts_with("rootProject.name"))
        .and_then(quoted)
}

/// `name = "…"` in the first of `sections` that has one (`[package]`,
/// `[project]`, `[metadata]` in setup.cfg, which is close enough to TOML
/// for this: `name = value`, unquoted there).
fn toml_name(text: &str, sections: &[&str]) -> Option<String> {
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_owned();
            continue;
        }
        if !sections.contains(&section.as_str()) {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim() == "name" {
            let value = value.trim();
            return quoted(value).or_else(|| {
                Some(value.to_owned()).filter(|v| !v.is_empty() && !v.contains(['{', '[', '%']))
            });
        }
    }
    None
}

/// `setup(name="requests", …)`, the literal form only.
fn setup_py_name(text: &str) -> Option<String> {
    let at = text.find("name=").or_else(|| text.find("name ="))?;
    let after = &text[at..];
    let value = after.split_once('=')?.1.trim_start();
    if value.starts_with(['"', '\'']) {
        quoted(value.lines().next()?)
    } else {
        None
    }
}

/// `"name": "@scope/pkg"` is `pkg`.
fn package_json_name(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let name = value.get("name")?.as_str()?;
    Some(name.rsplit('/').next()?.to_owned())
}

/// `module github.com/gin-gonic/gin` (a major version suffix `/v2` skipped).
fn go_module_name(text: &str) -> Option<String> {
    let module = text
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("module "))?
        .trim()
        .trim_matches('"');
    module
        .rsplit('/')
        .find(|part| {
            !(part.len() >= 2
                && part.starts_with('v')
                && part[1..].chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_owned)
}

/// The repository's name in the url of the remote `origin`
/// (`git@github.com:square/okhttp.git`, `https://…/okhttp`), read from the
/// git config (a worktree's `.git` file points to its repository).
fn git_remote_name(root: &Path) -> Option<String> {
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_file() {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let dir = text.trim().strip_prefix("gitdir:")?.trim();
        let dir = root.join(dir);
        // A worktree's gitdir holds `commondir`, the repository's.
        match std::fs::read_to_string(dir.join("commondir")) {
            Ok(common) => dir.join(common.trim()),
            Err(_) => dir,
        }
    } else {
        dot_git
    };
    let config = std::fs::read_to_string(git_dir.join("config")).ok()?;
    let mut in_origin = false;
    for line in config.lines().map(str::trim) {
        if line.starts_with('[') {
            in_origin = line == "[remote \"origin\"]";
            continue;
        }
        if !in_origin {
            continue;
        }
        if let Some((key, url)) = line.split_once('=') {
            if key.trim() == "url" {
                let url = url.trim().trim_end_matches('/');
                let last = url.rsplit(['/', ':']).next()?;
                let name = last.strip_suffix(".git").unwrap_or(last);
                return Some(name.to_owned()).filter(|n| !n.is_empty());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempdir::Dir {
        let dir = tempdir::Dir::new();
        for (path, text) in files {
            let path = dir.0.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    mod tempdir {
        /// A scratch directory named unlike any project, removed on drop.
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let dir = std::env::temp_dir()
                    .join(format!("devboy-project-{}-{n}", std::process::id()))
                    .join("checkout-7f3a");
                std::fs::create_dir_all(&dir).unwrap();
                Self(dir)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
            }
        }
    }

    #[test]
    fn names_come_from_build_files_and_the_remote_not_only_the_folder() {
        let dir = tree(&[
            (
                "settings.gradle.kts",
                "pluginManagement {}\nrootProject.name = \"okhttp-parent\"\ninclude(\":okhttp\")\n",
            ),
            (
                ".git/config",
                "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@github.com:square/okhttp.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
            ),
        ]);
        let names = project_names(&dir.0);
        assert_eq!(names, ["checkout7f3a", "okhttpparent", "okhttp"]);
    }

    #[test]
    fn each_ecosystem_names_its_package() {
        let cases: &[(&str, &str, &str)] = &[
            ("Cargo.toml", "[workspace]\nmembers = []\n[package]\nname = \"ripgrep\"\nversion = \"1\"\n", "ripgrep"),
            ("pyproject.toml", "[build-system]\nrequires = []\n[project]\nname = \"scikit-learn\"\n", "scikitlearn"),
            ("pyproject.toml", "[tool.poetry]\nname = 'httpx'\n", "httpx"),
            ("setup.cfg", "[metadata]\nname = Django\nversion = attr: django.__version__\n", "django"),
            ("setup.py", "from setuptools import setup\nsetup(\n    name=\"requests\",\n    version=about[\"__version__\"],\n)\n", "requests"),
            ("package.json", "{\"name\": \"@nestjs/core\", \"version\": \"1.0.0\"}", "core"),
            ("go.mod", "module github.com/go-chi/chi/v5\n\ngo 1.20\n", "chi"),
        ];
        for (file, text, want) in cases {
            let dir = tree(&[(file, text)]);
            let names = project_names(&dir.0);
            assert!(names.contains(&want.to_string()), "{file}: {names:?}");
        }
    }

    #[test]
    fn a_worktree_reads_its_repositorys_remote() {
        let dir = tree(&[
            (
                "repo/.git/config",
                "[remote \"origin\"]\n\turl = https://github.com/psf/requests\n",
            ),
            ("repo/.git/worktrees/wt/commondir", "../..\n"),
        ]);
        let worktree = dir.0.join("wt");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(
            worktree.join(".git"),
            format!(
                "gitdir: {}\n",
                dir.0.join("repo/.git/worktrees/wt").display()
            ),
        )
        .unwrap();
        assert!(project_names(&worktree).contains(&"requests".to_owned()));
    }

    #[test]
    fn short_names_and_unparsable_values_are_left_out() {
        let dir = tree(&[
            ("package.json", "{\"name\": \"ws\"}"),
            ("setup.py", "setup(name=NAME)\n"),
        ]);
        assert_eq!(project_names(&dir.0), ["checkout7f3a"]);
    }
}
