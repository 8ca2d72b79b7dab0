//! `find_files`: the files a question or an issue is about, ranked — the
//! offline ranker, which needs no model.
//!
//! Three rankings are fused by reciprocal rank (`1 / (RRF_K + rank)`, each
//! weighted):
//!
//! - **Code**: what the code graph says ([`crate::answer`]'s analysis):
//!   symbols the query names or describes, the call paths between them,
//!   files it mentions by path, module or traceback line, implementations
//!   of the types on those paths.
//! - **Paths**: fielded BM25 over each file's path, the basename weighted
//!   [`BASENAME_WEIGHT`], the parent directory [`PARENT_WEIGHT`], the whole
//!   path 1, with the query's words (stemmed as the code ranking stems
//!   them).
//! - **Text**: files whose text contains the query's identifiers and
//!   literals (hyphenated names such as `unused-import`, codes such as
//!   `W0611`), each weighted by how rare it is across files (looked up in
//!   the words the index keeps per file: no file is read).
//!
//! A file the query names by path comes first whatever the rankings say,
//! unless it is a package `__init__.py` that only re-exports
//! ([`reexports`]); a named test file points at the file it is named after,
//! and the one code file holding a message code the query quotes (`W0511`)
//! is where it is defined (each [`TESTED_BONUS`]); tests, samples and
//! benchmarks it does not name count [`TEST_FACTOR`] of their score.
//! The weights (code 1, paths [`PATH_SHARE`], text [`TEXT_SHARE`], offset
//! [`RRF_K`], tests [`TEST_FACTOR`]) were chosen on SWE-bench Lite's
//! mid-size repositories and kept only where they did not lower the
//! figures on SWE-bench Verified's other repositories, never tuned on (see
//! docs/measurements.md#find-files).

use std::collections::HashMap;

use aho_corasick::AhoCorasick;
use serde::Serialize;

use devboy_core::identifier::{words, Split};

use crate::answer::{analyze, stem, Reach};
use crate::graph::Graph;
use crate::index::{is_word_char, Index};

/// Weight of a path's basename words.
pub const BASENAME_WEIGHT: f64 = 3.0;
/// Weight of its parent directory's words.
pub const PARENT_WEIGHT: f64 = 1.5;
/// The rank offset of reciprocal-rank fusion.
const RRF_K: f64 = 5.0;
/// How much the path ranking counts next to the code ranking.
const PATH_SHARE: f64 = 0.5;
/// How much the file-text ranking counts.
const TEXT_SHARE: f64 = 0.7;
/// What a test, sample or benchmark file's fused score is worth, unless
/// the query names it by path: the files an issue is about are the code
/// it describes; tests come with it.
const TEST_FACTOR: f64 = 0.3;
/// BM25's parameters.
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

/// One file found.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    pub path: String,
    pub score: f64,
}

/// The words of a path's fields: basename (without extension), parent
/// directory, the whole path.
fn path_fields(path: &str) -> [Vec<String>; 3] {
    let stemmed =
        |s: &str| -> Vec<String> { words(s, Split::Fine).iter().map(|w| stem(w)).collect() };
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    let base = file.split_once('.').map_or(file, |(b, _)| b);
    let parent = dir.rsplit('/').next().unwrap_or("");
    [stemmed(base), stemmed(parent), stemmed(path)]
}

/// Fielded BM25 of every file's path against `terms`; files with no match
/// are left out.
fn path_ranking(index: &Index, terms: &[String]) -> Vec<(u32, f64)> {
    let fields: Vec<[Vec<String>; 3]> = index.files.iter().map(|f| path_fields(&f.path)).collect();
    let n = fields.len().max(1) as f64;
    let weights = [BASENAME_WEIGHT, PARENT_WEIGHT, 1.0];
    let avg: Vec<f64> = (0..3)
        .map(|k| fields.iter().map(|f| f[k].len()).sum::<usize>() as f64 / n)
        .collect();
    let mut df: HashMap<&str, usize> = HashMap::new();
    for f in &fields {
        let mut seen: Vec<&str> = f[2].iter().map(String::as_str).collect();
        seen.sort_unstable();
        seen.dedup();
        for w in seen {
            *df.entry(w).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        if index.files[i].generated {
            continue;
        }
        let mut score = 0.0;
        for t in terms {
            let Some(&d) = df.get(t.as_str()) else {
                continue;
            };
            let idf = (1.0 + (n - d as f64 + 0.5) / (d as f64 + 0.5)).ln();
            // BM25F: field-weighted term frequency, length-normalized per field.
            let tf: f64 = (0..3)
                .map(|k| {
                    let count = f[k].iter().filter(|w| *w == t).count() as f64;
                    let norm = 1.0 - BM25_B + BM25_B * f[k].len() as f64 / avg[k].max(1.0);
                    weights[k] * count / norm
                })
                .sum();
            if tf > 0.0 {
                score += idf * tf * (BM25_K1 + 1.0) / (tf + BM25_K1);
            }
        }
        if score > 0.0 {
            out.push((i as u32, score));
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// Files whose text contains the query's identifiers (at least
/// [`MIN_IDENTIFIER`] characters long) or literals, scored by how rare
/// each is across files.
/// With them, the files that alone (of the code, tests aside) hold one of
/// the literals: where an error code or an option is defined.
fn text_ranking(
    index: &Index,
    identifiers: &[String],
    literals: &[String],
) -> (Vec<(u32, f64)>, Vec<u32>) {
    let mut ids: Vec<&str> = identifiers
        .iter()
        .map(String::as_str)
        .filter(|i| i.len() >= MIN_IDENTIFIER)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.truncate(MAX_IDENTIFIERS);
    for literal in literals.iter().take(MAX_IDENTIFIERS) {
        if !ids.contains(&literal.as_str()) {
            ids.push(literal);
        }
    }
    if ids.is_empty() {
        return (Vec::new(), Vec::new());
    }
    // Looked up in each file's kept words, all at once: no file is read.
    // Every identifier and literal is made of word characters, so it is
    // in the text exactly when it is in one of the text's words.
    ids.retain(|i| i.chars().all(is_word_char));
    let Ok(automaton) = AhoCorasick::new(&ids) else {
        return (Vec::new(), Vec::new());
    };
    // Message codes: capitals, then digits (`W0511`, `E501`, `TS2322`).
    let code = |i: &str| {
        let digits = i.trim_start_matches(|c: char| c.is_ascii_uppercase());
        digits.len() >= 2 && digits.len() < i.len() && digits.chars().all(|c| c.is_ascii_digit())
    };
    let literal: Vec<bool> = ids
        .iter()
        .map(|i| code(i) && literals.iter().any(|l| l == i))
        .collect();
    let mut hits: Vec<(u32, Vec<usize>)> = Vec::new();
    let mut df = vec![0usize; ids.len()];
    // Per literal: the code files holding it, up to two.
    let mut holders: Vec<Vec<u32>> = vec![Vec::new(); ids.len()];
    let mut seen = vec![false; ids.len()];
    for (f, file) in index.files.iter().enumerate() {
        if file.generated {
            continue;
        }
        seen.fill(false);
        for m in automaton.find_overlapping_iter(&file.words) {
            seen[m.pattern().as_usize()] = true;
        }
        let found: Vec<usize> = (0..ids.len()).filter(|&i| seen[i]).collect();
        for &i in &found {
            df[i] += 1;
            if literal[i] && holders[i].len() < 2 && !crate::answer::is_test_path(&file.path) {
                holders[i].push(f as u32);
            }
        }
        if !found.is_empty() {
            hits.push((f as u32, found));
        }
    }
    let n = index.files.len().max(1) as f64;
    let mut out: Vec<(u32, f64)> = hits
        .into_iter()
        .map(|(f, found)| {
            let score = found
                .iter()
                .map(|&i| (1.0 + n / (1.0 + df[i] as f64)).ln())
                .sum();
            (f, score)
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut defining: Vec<u32> = holders
        .into_iter()
        .filter_map(|h| (h.len() == 1).then(|| h[0]))
        .collect();
    defining.sort_unstable();
    defining.dedup();
    (out, defining)
}

/// What a source file gains when a test file named after it (`test_x.py`,
/// `x_test.go`, `XTest.kt`) is named by the query: as much as a first
/// place in the code ranking.
const TESTED_BONUS: f64 = 1.0 / (RRF_K + 1.0);

/// A file's name without its directories and extensions, lowercase.
fn file_stem(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.split('.').next().unwrap_or(name).to_ascii_lowercase()
}

/// The stem of the file a test file is named after: `tests/test_fields.py`
/// → `fields`; `None` when its name does not say.
fn tested_stem(path: &str) -> Option<String> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name);
    // `FooTest`, `FooTests`, `TestFoo`: the case change says where the
    // name ends (`conftest` is no test of `conf`).
    let camel = |rest: &str| rest.chars().next().is_some_and(char::is_uppercase);
    let tested = stem
        .strip_prefix("test_")
        .or_else(|| stem.strip_suffix("_test"))
        .or_else(|| stem.strip_suffix("_tests"))
        .or_else(|| stem.strip_suffix("Tests"))
        .or_else(|| stem.strip_suffix("Test"))
        .or_else(|| stem.strip_prefix("Test").filter(|rest| camel(rest)))?;
    Some(tested.trim_matches('_').to_ascii_lowercase()).filter(|t| t.len() >= 3)
}

/// The fewest top-level functions and classes of a package's
/// `__init__.py` that holds code of its own.
const MIN_PACKAGE_DEFINITIONS: usize = 4;

/// Whether `file` is a package's `__init__.py` that mostly re-exports
/// what its modules define: `from sklearn.compose import
/// ColumnTransformer` names the package, but the code is in
/// `_column_transformer.py`. Such a file is not first for being named.
pub(crate) fn reexports(file: &crate::index::IndexedFile) -> bool {
    file.path.rsplit('/').next() == Some("__init__.py")
        && file
            .facts
            .symbols
            .iter()
            .filter(|s| s.parent.is_none() && s.owner.is_none())
            .count()
            < MIN_PACKAGE_DEFINITIONS
}

/// The shortest identifier looked for in file text.
const MIN_IDENTIFIER: usize = 4;
/// The most identifiers looked for.
const MAX_IDENTIFIERS: usize = 24;

/// The `k` files most likely to be what `query` is about, best first,
/// with no model.
pub fn rank_offline(index: &Index, query: &str, k: usize) -> Vec<Found> {
    rank_in(&Graph::new(index), query, k)
}

/// [`rank_offline`] over a graph already joined (a [`crate::Kept`] one).
pub fn rank_in(graph: &Graph<'_>, query: &str, k: usize) -> Vec<Found> {
    let index = graph.index;
    let analysis = analyze(graph, index, query, Reach::Entries);
    let paths = path_ranking(index, &analysis.q.terms);
    let (rrf_k, path_share, text_share) = (RRF_K, PATH_SHARE, TEXT_SHARE);
    let mut fused: HashMap<u32, f64> = HashMap::new();
    for (rank, &(f, _)) in analysis.ranked.iter().enumerate() {
        *fused.entry(f).or_default() += 1.0 / (rrf_k + rank as f64 + 1.0);
    }
    for (rank, &(f, _)) in paths.iter().enumerate() {
        *fused.entry(f).or_default() += path_share / (rrf_k + rank as f64 + 1.0);
    }
    let (text, defining) = text_ranking(index, &analysis.q.identifiers, &analysis.q.literals);
    for (rank, &(f, _)) in text.iter().enumerate() {
        *fused.entry(f).or_default() += text_share / (rrf_k + rank as f64 + 1.0);
    }
    // The one file that holds a code or an option the issue quotes
    // (`W0511`, `ignore-paths`) is where it is defined.
    for f in defining {
        *fused.entry(f).or_default() += TESTED_BONUS;
    }
    // Named by path: first. A test file named points at what it tests.
    let mut tested: Vec<String> = Vec::new();
    for (f, file) in index.files.iter().enumerate() {
        if analysis.mentions(&file.path) && !reexports(file) {
            *fused.entry(f as u32).or_default() += 1.0;
            if crate::answer::is_test_path(&file.path) {
                tested.extend(tested_stem(&file.path));
            }
        }
    }
    if !tested.is_empty() {
        for (f, file) in index.files.iter().enumerate() {
            if !crate::answer::is_test_path(&file.path)
                && tested.iter().any(|t| *t == file_stem(&file.path))
            {
                *fused.entry(f as u32).or_default() += TESTED_BONUS;
            }
        }
    }
    let mut out: Vec<(u32, f64)> = fused
        .into_iter()
        .filter(|(f, _)| !index.files[*f as usize].generated)
        .map(|(f, score)| {
            let path = &index.files[f as usize].path;
            if crate::answer::is_test_path(path) && !analysis.mentions(path) {
                (f, score * TEST_FACTOR)
            } else {
                (f, score)
            }
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out.into_iter()
        .take(k)
        .map(|(f, score)| Found {
            path: index.files[f as usize].path.clone(),
            score,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_file_names_what_it_tests() {
        assert_eq!(
            tested_stem("tests/test_fields.py").as_deref(),
            Some("fields")
        );
        assert_eq!(tested_stem("pkg/router_test.go").as_deref(), Some("router"));
        assert_eq!(
            tested_stem("src/test/kotlin/RealCallTest.kt").as_deref(),
            Some("realcall")
        );
        assert_eq!(tested_stem("tests/conftest.py"), None);
        assert_eq!(tested_stem("tests/test_a.py"), None);
    }

    #[test]
    fn path_fields_split_basename_parent_and_path() {
        let [base, parent, all] = path_fields("src/_pytest/assertion/rewrite.py");
        assert_eq!(base, ["rewrite"]);
        assert_eq!(parent, ["assertion"]);
        assert_eq!(all, ["src", "pytest", "assertion", "rewrite", "py"]);
    }
}

#[cfg(test)]
mod ranking_tests {
    use super::*;

    /// The code an issue is about ranks above the tests that exercise
    /// it, though the tests repeat its words in their names and path and
    /// test support defines a function of the same name (with tests
    /// counted whole, the two test files come first); a test file the
    /// issue names by path still comes first.
    #[test]
    fn code_ranks_above_its_tests_unless_a_test_is_named() {
        let files = [
            (
                "wire/fields.py",
                "def parse_header(line):\n    \"\"\"Splits a header line into its fields.\"\"\"\n    return line.split(',')[:-1]\n",
            ),
            (
                "tests/test_parse_header.py",
                "from wire.fields import parse_header\n\ndef test_parse_header_keeps_every_field():\n    assert parse_header('a,b') == ['a', 'b']\n\ndef test_parse_header_of_one_field():\n    assert parse_header('a') == ['a']\n",
            ),
            (
                "tests/support/headers.py",
                "def parse_header(line):\n    \"\"\"A header line's fields, for the tests.\"\"\"\n    return line.split(',')\n",
            ),
            ("wire/other.py", "def unrelated():\n    return 1\n"),
        ];
        let (index, dir) = crate::testing::indexed("find-tests", &files);
        let ranked = |query: &str| -> Vec<String> {
            rank_offline(&index, query, 3)
                .into_iter()
                .map(|f| f.path)
                .collect()
        };
        let about = ranked("parse_header drops the last field of a header, and no test catches it");
        assert_eq!(about[0], "wire/fields.py", "{about:?}");
        let named = ranked("tests/test_parse_header.py fails: parse_header drops the last field");
        assert_eq!(named[0], "tests/test_parse_header.py", "{named:?}");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// `from pkg.compose import ColumnTransformer` names the package, whose
    /// `__init__.py` only re-exports: the module defining the class comes
    /// first. A package `__init__.py` with code of its own, named the same
    /// way, still does.
    #[test]
    fn a_package_that_only_reexports_is_not_first_for_being_named() {
        let classes: String = (1..=4)
            .map(|i| {
                format!("class Documenter{i}:\n    def generate(self):\n        return {i}\n\n")
            })
            .collect();
        let files = [
            (
                "pkg/compose/__init__.py",
                "from ._column_transformer import ColumnTransformer, make_column_transformer\n\n__all__ = ['ColumnTransformer', 'make_column_transformer']\n".to_owned(),
            ),
            (
                "pkg/compose/_column_transformer.py",
                "class ColumnTransformer:\n    def fit(self, X):\n        return self._remainder(X)\n\n    def _remainder(self, X):\n        return X\n\ndef make_column_transformer(*steps):\n    return ColumnTransformer()\n".to_owned(),
            ),
            ("pkg/ext/autodoc/__init__.py", classes),
            (
                "pkg/ext/autodoc/directive.py",
                "def run_documenter(documenter):\n    return documenter.generate()\n".to_owned(),
            ),
        ];
        let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
        let (index, dir) = crate::testing::indexed("find-init", &files);
        let first = |query: &str| rank_offline(&index, query, 1)[0].path.clone();
        assert_eq!(
            first("from pkg.compose import ColumnTransformer; fit drops the remainder columns"),
            "pkg/compose/_column_transformer.py"
        );
        assert_eq!(
            first("pkg.ext.autodoc skips members when generate runs"),
            "pkg/ext/autodoc/__init__.py"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
