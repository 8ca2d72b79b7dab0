//! Answering "how does X work": entry symbols from the query, the flow
//! spine that links them, files ranked, and a rendering that fills a
//! character budget (a ceiling for the whole answer, heading and flow
//! lines included).
//!
//! **Entry symbols.** Identifiers in the query (`RealCall`,
//! `get_response`, `Session.send`) match symbol names exactly; the other
//! words match the words of symbol names (split at case changes and
//! underscores), weighted by how rare the word is among names, and less
//! so file paths and doc comments. Test files count for less unless the
//! query is about tests.
//!
//! **Spine.** The call paths (up to [`MAX_HOPS`] calls long) from one entry
//! symbol to another: the mechanism the question is about.
//!
//! **Rendering.** Files in order of relevance until the budget is met. A
//! file with a symbol on the spine is shown in full (a long one as its
//! relevant symbols in full and the rest as signature lines). A file off
//! the spine whose type implements a supertype with at least
//! [`MIN_SIBLINGS`] implementers is one of a family of interchangeable
//! implementations: it is shown as a skeleton, its symbols' signature
//! lines under a header that lists them and says how to get a body — all
//! but one: a family none of whose members is on the spine keeps its
//! member whose contract methods are shortest whole (or those methods in
//! full), as an exemplar of what the others do. Other
//! files are shown in full when short, as excerpts (their most relevant
//! symbols) when long; once [`SOURCE_SHARE`] of the budget is used, further
//! relevant files are skeletons, so that more of them fit. Adaptive sizing
//! (every skeleton) is off with `adaptive = false` (devboy's
//! `[explore] adaptive`, or `DEVBOY_ADAPTIVE_EXPLORE=0`, read by the
//! caller); without a spine no family member is a skeleton.
//!
//! **Mentions.** Paths the query names (`requests/models.py`, a
//! traceback's `…/_pytest/python.py`, a module `_pytest.python`) rank
//! their files with the spine.

use std::collections::{HashMap, HashSet, VecDeque};

use devboy_core::identifier::{words, Split};
use serde::Serialize;

use crate::extract::{Kind, Symbol};
use crate::graph::{Graph, SymbolId};
use crate::index::Index;

/// Implementers a supertype needs for its implementations to count as
/// interchangeable siblings.
pub const MIN_SIBLINGS: usize = 3;

/// The longest call path the spine follows.
pub const MAX_HOPS: usize = 4;

/// The longest from a method of an entry type (not itself named).
const TYPE_METHOD_HOPS: usize = 1;

/// Room kept in the budget for the line counting the files shown.
const SUMMARY_LINE_CHARS: usize = 48;

/// Files up to this many lines are shown whole; longer ones as excerpts.
pub const WHOLE_FILE_LINES: u32 = 220;

/// Files less relevant than this share of the most relevant one are left
/// out, however much budget is left.
const RELEVANCE_FLOOR: f64 = 0.25;

/// The most flow lines shown.
const MAX_FLOW_LINES: usize = 6;

/// The most entry symbols taken from a query.
const MAX_ENTRIES: usize = 12;

/// Lines of context kept around an excerpted symbol.
const CONTEXT_LINES: u32 = 1;

/// The share of the budget (percent) for sources in full or as excerpts;
/// past it, further files are skeletons.
const SOURCE_SHARE: usize = 70;

/// The most symbols an excerpt keeps in full.
const MAX_EXCERPT_SYMBOLS: usize = 4;

/// The most signature lines a skeleton shows.
const MAX_SKELETON_LINES: usize = 16;

/// The most lines of a type's declaration an excerpt keeps.
const MAX_TYPE_HEAD: u32 = 30;

/// A type's declaration longer than this many lines is, in an excerpt,
/// its signature line alone, unless the question names the type.
const LONG_TYPE_HEAD: u32 = 12;

/// What to answer and how: plain data the caller builds from its config
/// (this crate reads no environment and no config file).
#[derive(Debug, Clone)]
pub struct Options {
    /// The size to aim for, in characters.
    pub budget_chars: usize,
    /// Skeletons for off-spine family members.
    pub adaptive: bool,
}

impl Options {
    /// The size an answer aims for when the caller has no other.
    pub const DEFAULT_BUDGET_CHARS: usize = 16_000;
}

impl Default for Options {
    /// [`Options::DEFAULT_BUDGET_CHARS`], skeletons on.
    fn default() -> Self {
        Options {
            budget_chars: Self::DEFAULT_BUDGET_CHARS,
            adaptive: true,
        }
    }
}

/// How a file was rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Render {
    Full,
    Skeleton,
    Excerpt,
}

/// One file of an answer.
#[derive(Debug, Clone, Serialize)]
pub struct FileAnswer {
    pub path: String,
    pub render: Render,
    pub chars: usize,
}

/// The index's size, for the answer's JSON.
#[derive(Debug, Clone, Serialize)]
pub struct IndexFacts {
    pub files: usize,
    pub symbols: usize,
    pub edges: usize,
    pub seconds: f64,
}

/// An answer: what the model sees, and what it is made of.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub text: String,
    pub files: Vec<FileAnswer>,
    /// The spine's symbols, `Owner.name`, in flow order.
    pub spine: Vec<String>,
    pub index: IndexFacts,
}

const STOPWORDS: &[&str] = &[
    "a", "an", "the", "how", "does", "do", "did", "is", "are", "was", "were", "what", "which",
    "where", "when", "why", "who", "its", "it", "of", "in", "on", "to", "for", "from", "by",
    "with", "through", "and", "or", "not", "this", "that", "these", "those", "be", "can", "could",
    "should", "would", "will", "i", "we", "you", "my", "our", "me", "there", "get", "work",
    "works", "handle", "handles", "use", "uses", "used", "using", "into", "via", "as", "at", "if",
    "then", "than", "so", "some", "any", "all", "when", "after", "before", "about", "code", "file",
    "files", "function", "class", "method", "explain", "show",
];

/// A light stem, so `requests`, `request` and `requested` meet.
pub(crate) fn stem(word: &str) -> String {
    let w = word;
    for suffix in ["ies", "ing", "ed", "es", "s"] {
        if w.len() > suffix.len() + 3 && w.ends_with(suffix) && !w.ends_with("ss") {
            let base = &w[..w.len() - suffix.len()];
            return if suffix == "ies" {
                format!("{base}y")
            } else {
                base.to_owned()
            };
        }
    }
    w.to_owned()
}

/// What a query asks about.
#[derive(Debug, Default)]
pub(crate) struct Query {
    /// Identifiers written as such (a case change inside, `_`, `.`).
    pub(crate) identifiers: Vec<String>,
    /// Stemmed words.
    pub(crate) terms: Vec<String>,
    /// Literal strings the code may hold as written, looked for in file
    /// text only: hyphenated names (`unused-import`, `--foo-bar` as
    /// `foo-bar`) and codes that mix letters and digits (`W0611`, `E501`).
    pub(crate) literals: Vec<String>,
    /// Members named with what they belong to (`Session.send`,
    /// `Router::layer`, `next.run`): (owner, member), the owner
    /// lowercase.
    pub(crate) qualified: Vec<(String, String)>,
    /// Whether it is about tests.
    tests: bool,
    /// File paths it mentions (`requests/models.py`, a traceback's
    /// `File "…/_pytest/python.py"`), and the files dotted module names
    /// may be (`_pytest.python` → `_pytest/python.py`).
    paths: Vec<String>,
}

/// Whether `path` (`/`-separated, relative) is what `mention` names: one
/// ends with the other at a `/`, or they end with the same two segments
/// (a traceback's path from another checkout, `…/_pytest/python.py`).
fn mentions_path(path: &str, mention: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (path.split('/').collect(), mention.split('/').collect());
    let same = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    same > 0 && (same == a.len().min(b.len()) || same >= 2)
}

/// The paths a query's text mentions, as [`Query::paths`].
fn path_mentions(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |p: String| {
        if !out.contains(&p) {
            out.push(p);
        }
    };
    for raw in text.split(|c: char| c.is_whitespace() || "\"'`()[]{}<>,;:=".contains(c)) {
        let raw = raw
            .trim_end_matches(['.', '!', '?'])
            .trim_start_matches("./");
        if raw.len() < 4 || raw.contains("://") {
            continue;
        }
        if raw.contains('/') && crate::lang::Lang::of_path(raw).is_some() {
            add(raw.trim_start_matches('/').to_owned());
            continue;
        }
        let segments: Vec<&str> = raw.split('.').collect();
        let identifier = |s: &&str| {
            !s.is_empty()
                && s.chars().all(|c| c.is_alphanumeric() || c == '_')
                && !s.chars().next().is_some_and(|c| c.is_ascii_digit())
        };
        let module_like = segments[0]
            .chars()
            .next()
            .is_some_and(|c| c.is_lowercase() || c == '_');
        if segments.len() >= 2 && module_like && segments.iter().all(identifier) {
            if crate::lang::Lang::of_path(raw).is_some() && segments.len() == 2 {
                add(raw.to_owned());
                continue;
            }
            for k in (2..=segments.len()).rev() {
                let base = segments[..k].join("/");
                add(format!("{base}.py"));
                add(format!("{base}/__init__.py"));
            }
        }
    }
    out
}

/// The query's identifiers and words; a word that is one of the project's
/// names (`project`, [`crate::project::normalize`]d) is left out.
fn parse_query(text: &str, project: &[String]) -> Query {
    let mut q = Query {
        paths: path_mentions(text),
        literals: literals(text),
        ..Query::default()
    };
    // Rust's and C++'s paths read as dotted names.
    let text = text.replace("::", ".");
    for raw in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')) {
        let raw = raw.trim_matches('.');
        if raw.is_empty() || project.contains(&crate::project::normalize(raw)) {
            continue;
        }
        let inner_case = raw.chars().skip(1).any(char::is_uppercase);
        if inner_case || raw.contains('_') || raw.contains('.') {
            for part in raw.split('.').filter(|p| !p.is_empty()) {
                q.identifiers.push(part.to_owned());
            }
        }
        let parts: Vec<&str> = raw.split('.').filter(|p| !p.is_empty()).collect();
        if let [.., owner, member] = parts[..] {
            let identifier = |s: &str| {
                s.chars()
                    .next()
                    .is_some_and(|c| c.is_alphabetic() || c == '_')
            };
            let pair = (owner.to_lowercase(), member.to_owned());
            if identifier(owner) && identifier(member) && !q.qualified.contains(&pair) {
                q.qualified.push(pair);
            }
        }
        for w in words(raw, Split::Fine) {
            if w.len() < 2 || STOPWORDS.contains(&w.as_str()) {
                continue;
            }
            if w == "test" || w == "tests" {
                q.tests = true;
            }
            let s = stem(&w);
            if !q.terms.contains(&s) {
                q.terms.push(s);
            }
        }
    }
    q
}

/// The literals of `text`, as [`Query::literals`], in order of appearance.
fn literals(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for token in text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_')) {
        let token = token.trim_matches('-');
        let hyphenated = token.split('-').filter(|p| !p.is_empty()).count() >= 2
            && token.split('-').all(|p| !p.is_empty())
            && token.chars().any(char::is_alphabetic);
        let code = token.len() >= 4
            && token.chars().all(|c| c.is_ascii_alphanumeric())
            && token.chars().any(|c| c.is_ascii_digit())
            && token
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
            && token.chars().filter(char::is_ascii_digit).count() >= 2;
        if (hyphenated || code) && token.len() >= 4 && !out.iter().any(|o| o == token) {
            out.push(token.to_owned());
        }
    }
    out
}

/// Tests, test support, samples and benchmarks: what a question about how
/// something works is rarely about.
pub(crate) fn is_test_path(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    p.contains("mock")
        || p.contains("fake")
        || p.contains("sample")
        || p.contains("example")
        || p.contains("benchmark")
        || p.contains("/benches/")
        || p.starts_with("benches/")
        || p.contains("testing")
        || p.contains("/test/")
        || p.contains("/tests/")
        || p.starts_with("test/")
        || p.starts_with("tests/")
        || p.contains("/testing/")
        || p.contains("_test.")
        || p.contains("test_")
        || p.contains("tests.")
        || p.contains("test.")
        || p.contains("/spec/")
        || p.contains(".spec.")
}

/// Whether symbol `id` belongs to `owner` (lowercase): its type's name,
/// or the name of its file or folder.
fn belongs_to(graph: &Graph<'_>, id: SymbolId, owner: &str) -> bool {
    if graph
        .owner_name(id)
        .is_some_and(|o| o.eq_ignore_ascii_case(owner))
    {
        return true;
    }
    let path = graph.path(id);
    let mut segments = path.rsplit('/');
    let file = segments.next().unwrap_or_default();
    let stem = file.split('.').next().unwrap_or_default();
    stem.eq_ignore_ascii_case(owner)
        || segments
            .next()
            .is_some_and(|d| d.eq_ignore_ascii_case(owner))
}

/// Whether a symbol is test code: in a test file ([`is_test_path`]), or
/// declared as a test where it lives (`#[cfg(test)]` modules, `TestX`
/// functions, [`crate::extract::Symbol::test`]).
fn is_test_symbol(graph: &Graph<'_>, id: SymbolId) -> bool {
    graph.symbol(id).test || is_test_path(graph.path(id))
}

/// Scores of every symbol with any match.
fn score_symbols(graph: &Graph<'_>, q: &Query) -> HashMap<SymbolId, f64> {
    // How rare each stemmed word is among symbol names.
    let n = graph.symbols.len().max(1) as f64;
    let idf = |t: &str| (1.0 + n / (1.0 + *graph.stem_df.get(t).unwrap_or(&0) as f64)).ln();
    let mut out = HashMap::new();
    for &id in &graph.symbols {
        let sym = graph.symbol(id);
        let name_words = &graph.name_stems[sym.name.as_str()];
        let mut score = 0.0;
        if q.identifiers.contains(&sym.name) {
            score += 12.0;
            // Named with its owner (`next.run` for `Next.run`, not every
            // `run`), or its module (`middleware::from_fn`).
            if q.qualified
                .iter()
                .any(|(owner, member)| *member == sym.name && belongs_to(graph, id, owner))
            {
                score += 12.0;
            }
        }
        let doc = if sym.doc.is_empty() || q.terms.is_empty() {
            String::new()
        } else {
            sym.doc.to_ascii_lowercase()
        };
        let mut matched = 0usize;
        for (i, t) in q.terms.iter().enumerate() {
            if let Some(at) = name_words.iter().position(|w| w == t) {
                score += 3.0 * idf(t);
                matched += 1;
                // Two words the query puts together, together in the name
                // ("interceptor chain" in `RealInterceptorChain`).
                if q.terms
                    .get(i + 1)
                    .is_some_and(|next| name_words.get(at + 1) == Some(next))
                {
                    score += 1.5 * (idf(t) + idf(&q.terms[i + 1]));
                }
            }
            if !doc.is_empty() && doc.contains(t.as_str()) {
                score += 0.4 * idf(t);
            }
        }
        if score <= 0.0 {
            continue;
        }
        if matched > 0 {
            // Names the query covers entirely are what it is about.
            let coverage = matched as f64 / name_words.len().max(1) as f64;
            score *= 0.25 + 0.75 * coverage;
        }
        if !q.tests && is_test_symbol(graph, id) {
            score *= 0.2;
        }
        out.insert(id, score);
    }
    out
}

/// The entry symbols: the best scored, down to a third of the best.
fn entries(scores: &HashMap<SymbolId, f64>) -> Vec<SymbolId> {
    let mut ranked: Vec<(SymbolId, f64)> = scores.iter().map(|(&id, &s)| (id, s)).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let Some(&(_, best)) = ranked.first() else {
        return Vec::new();
    };
    ranked
        .into_iter()
        .take_while(|&(_, s)| s >= best / 3.0)
        .take(MAX_ENTRIES)
        .map(|(id, _)| id)
        .collect()
}

/// The spine: symbols on call paths from one entry to another, in the
/// order the paths were found (callers before callees). A type among the
/// entries stands for its methods too: a path may start at one and ends
/// when it reaches a method of another entry type.
fn spine(
    graph: &Graph<'_>,
    entries: &[SymbolId],
    named: &dyn Fn(SymbolId) -> bool,
    test: &dyn Fn(SymbolId) -> bool,
) -> (Vec<SymbolId>, Vec<Vec<SymbolId>>) {
    // Each target, and the entry it stands for.
    let mut targets: HashMap<SymbolId, SymbolId> = HashMap::new();
    // (start, the entry it stands for, how many calls a path may take)
    let mut starts: Vec<(SymbolId, SymbolId, usize)> = Vec::new();
    // One of many interchangeable implementations is not where a flow
    // starts or ends (the contract it implements is): such a type is no
    // target, and does not stand for its methods. A method the query
    // names itself still counts.
    let sibling_type = |id: SymbolId| {
        let s = graph.symbol(id);
        (s.kind.is_type() && !graph.families_of(&s.name, MIN_SIBLINGS).is_empty())
            || (graph.member_of.contains_key(&id) && !named(id))
    };
    for &e in entries.iter().filter(|&&e| !sibling_type(e)) {
        targets.insert(e, e);
        starts.push((e, e, MAX_HOPS));
        if graph.symbol(e).kind.is_type() {
            // A type's methods: short paths only, or every helper of a
            // large class would join the spine.
            for m in graph.methods_of(&graph.symbol(e).name) {
                targets.entry(m).or_insert(e);
                starts.push((m, e, TYPE_METHOD_HOPS));
            }
        }
    }
    // A method of an interface many types implement is where the flow
    // dispatches to them: the contract, an end worth showing whether or
    // not the query named it.
    let dispatch = |id: SymbolId| {
        graph.symbol(id).kind == Kind::Method
            && graph.owner_name(id).is_some_and(|o| {
                graph.is_interface(o)
                    && graph
                        .implementers
                        .get(o)
                        .is_some_and(|i| i.len() >= MIN_SIBLINGS)
            })
    };
    // A contract's method leads to the implementations of it the question
    // is about (`adapter.send` resolves to `BaseAdapter.send`, which
    // `HTTPAdapter.send` implements).
    let overrides = |at: SymbolId| -> Vec<SymbolId> {
        let s = graph.symbol(at);
        if s.kind != Kind::Method {
            return Vec::new();
        }
        let Some(owner) = graph.owner_name(at) else {
            return Vec::new();
        };
        graph
            .implementers
            .get(owner)
            .into_iter()
            .flatten()
            .flat_map(|t| graph.methods_of(t))
            .filter(|&m| graph.symbol(m).name == s.name && targets.contains_key(&m))
            .collect()
    };
    let mut out: Vec<SymbolId> = Vec::new();
    let mut paths: Vec<Vec<SymbolId>> = Vec::new();
    for &(start, entry, hops) in &starts {
        let mut parent: HashMap<SymbolId, SymbolId> = HashMap::new();
        let mut queue = VecDeque::from([(start, 0usize)]);
        let mut seen = HashSet::from([start]);
        while let Some((at, depth)) = queue.pop_front() {
            if depth == hops {
                continue;
            }
            let calls: Vec<SymbolId> = graph.reached(at).collect();
            for next in calls.into_iter().chain(overrides(at)) {
                // A flow through the code under test, not through the
                // tests' helpers (unless the question is about tests).
                if !seen.insert(next) || test(next) {
                    continue;
                }
                parent.insert(next, at);
                if targets.get(&next).is_some_and(|&t| t != entry) || dispatch(next) {
                    let mut path = vec![next];
                    let mut cur = next;
                    while let Some(&p) = parent.get(&cur) {
                        path.push(p);
                        cur = p;
                    }
                    path.reverse();
                    for &id in &path {
                        if !out.contains(&id) {
                            out.push(id);
                        }
                    }
                    paths.push(path);
                }
                queue.push_back((next, depth + 1));
            }
        }
    }
    (out, paths)
}

/// The most callees of the best entry that join the spine.
const ENTRY_CALLEES: usize = 3;

/// What the best entry calls in other files (at most [`ENTRY_CALLEES`]:
/// those the question scores first, then the longest; no test code),
/// each as the path
/// `[entry, callee]`: how a question's function does its work is in what
/// it calls (gin's `handleHTTPRequest` finds the route with
/// `getValue` and runs the chain with `Context.Next`), whether or not the
/// question names them.
fn entry_callees(
    graph: &Graph<'_>,
    entries: &[SymbolId],
    scores: &HashMap<SymbolId, f64>,
    test: &dyn Fn(SymbolId) -> bool,
) -> Vec<(SymbolId, Vec<SymbolId>)> {
    let Some(&entry) = entries.first() else {
        return Vec::new();
    };
    if graph.symbol(entry).kind.is_type() || test(entry) {
        return Vec::new();
    }
    let mut callees: Vec<SymbolId> = graph
        .reached(entry)
        .filter(|&c| c.file != entry.file && !test(c) && !graph.symbol(c).kind.is_type())
        .collect();
    // The question's own words first, then the callees that do the most
    // work (the longest): a route lookup before a setter.
    let score = |id: &SymbolId| scores.get(id).copied().unwrap_or(0.0);
    let size = |id: &SymbolId| {
        let s = graph.symbol(*id);
        s.end.saturating_sub(s.start)
    };
    callees.sort_by(|a, b| {
        score(b)
            .total_cmp(&score(a))
            .then(size(b).cmp(&size(a)))
            .then(a.cmp(b))
    });
    callees
        .into_iter()
        .take(ENTRY_CALLEES)
        .map(|c| (c, vec![entry, c]))
        .collect()
}

/// The spine's paths as lines to show: each path once, none that is part
/// of a longer one, callers' paths before their callees'.
fn flow_lines(paths: &[Vec<SymbolId>]) -> Vec<Vec<SymbolId>> {
    let contains = |long: &[SymbolId], short: &[SymbolId]| {
        long.len() > short.len() && long.windows(short.len()).any(|w| w == short)
    };
    let mut lines: Vec<Vec<SymbolId>> = Vec::new();
    for p in paths {
        if !lines.contains(p) && !paths.iter().any(|q| contains(q, p)) {
            lines.push(p.clone());
        }
    }
    // A path that starts where another ends continues it.
    while let Some((i, j)) = (0..lines.len())
        .flat_map(|i| (0..lines.len()).map(move |j| (i, j)))
        .find(|&(i, j)| {
            // …unless that would visit a symbol twice (a loop).
            i != j
                && lines[i].last() == lines[j].first()
                && !lines[j][1..].iter().any(|id| lines[i].contains(id))
        })
    {
        let tail = lines.remove(j);
        let i = if j < i { i - 1 } else { i };
        lines[i].extend_from_slice(&tail[1..]);
    }
    let snapshot = lines.clone();
    lines.retain(|p| !snapshot.iter().any(|q| contains(q, p)));
    // A path that starts where another path goes comes after it.
    let mut ordered: Vec<Vec<SymbolId>> = Vec::new();
    while !lines.is_empty() {
        let pick = (0..lines.len())
            .find(|&i| {
                !lines
                    .iter()
                    .enumerate()
                    .any(|(j, other)| j != i && other[1..].contains(&lines[i][0]))
            })
            .unwrap_or(0);
        ordered.push(lines.remove(pick));
    }
    ordered
}

/// The fewest top-level symbols of a short file for [`scattered`] to
/// apply.
const SCATTERED_MIN_SYMBOLS: usize = 8;

/// Whether the relevant symbols `rel` are a small part of a file of many
/// (one of a module's two dozen one-line wrappers): an excerpt shows them,
/// the whole file would mostly show the rest.
fn scattered(symbols: &[Symbol], rel: &[(u32, f64)]) -> bool {
    let top = symbols.iter().filter(|s| s.parent.is_none()).count();
    top >= SCATTERED_MIN_SYMBOLS && rel.len() * 4 < top
}

/// The longest question echoed in an answer's heading, in characters.
const MAX_HEADING_CHARS: usize = 160;

/// What an answer's heading echoes of `query`: its first line, cut to
/// [`MAX_HEADING_CHARS`].
fn heading(query: &str) -> String {
    let query = query.trim();
    let first = query.lines().next().unwrap_or_default().trim();
    let cut: String = first.chars().take(MAX_HEADING_CHARS).collect();
    if cut.len() < query.len() {
        format!("{cut} …")
    } else {
        cut
    }
}

/// A rendered file cut at a line to at most `room` characters, its code
/// fence closed and the cut said.
fn cut_to(shown: &str, room: usize) -> String {
    const CUT: &str = "      … cut to the budget; read the file for the rest\n";
    let fence: String = shown
        .lines()
        .nth(1)
        .map(|l| l.chars().take_while(|&c| c == '`').collect())
        .unwrap_or_default();
    let reserve = CUT.len() + fence.len() + 1;
    let mut out = String::new();
    for line in shown.lines() {
        if out.len() + line.len() + 1 + reserve > room {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(CUT);
    out.push_str(&fence);
    out.push('\n');
    out
}

/// A file's lines with its test code (the outermost test symbols, the
/// attributes and blank lines before them) replaced by one line saying
/// how much was left out.
fn without_tests(lines: &[&str], symbols: &[Symbol]) -> String {
    let outermost = |s: &Symbol| s.test && s.parent.is_none_or(|p| !symbols[p as usize].test);
    let mut cut = vec![false; lines.len()];
    for s in symbols.iter().filter(|s| outermost(s)) {
        // Up over attributes, blank lines and the test module's own
        // opening (`#[cfg(test)] mod tests {`, its `use`s); down over the
        // braces that opening left open.
        let (mut start, mut end) = (s.start as usize, (s.end as usize).min(lines.len() - 1));
        let mut opened = 0;
        while start > 0 && {
            let above = lines[start - 1].trim();
            above.is_empty()
                || above.starts_with("#[")
                || above.starts_with('@')
                || above.starts_with("use ")
                || (above.starts_with("mod ") && above.ends_with('{'))
        } {
            start -= 1;
            if lines[start].trim().starts_with("mod ") {
                opened += 1;
            }
        }
        while opened > 0 && end + 1 < lines.len() {
            let below = lines[end + 1].trim();
            if below == "}" {
                opened -= 1;
            } else if !below.is_empty() {
                break;
            }
            end += 1;
        }
        for c in cut.iter_mut().take(end + 1).skip(start) {
            *c = true;
        }
    }
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        if cut[i] {
            let from = i;
            while i < lines.len() && cut[i] {
                i += 1;
            }
            out.push_str(&format!("    … {} lines of tests\n", i - from));
        } else {
            out.push_str(lines[i]);
            out.push('\n');
            i += 1;
        }
    }
    out
}

/// The line a symbol's signature is on, as shown in a skeleton.
fn signature_line(lines: &[&str], sym: &Symbol) -> String {
    let line = lines.get(sym.sig as usize).copied().unwrap_or_default();
    let text = line.trim_end();
    let text: String = text.chars().take(200).collect();
    format!("{:>5}  {text}", sym.sig + 1)
}

/// Symbols listed in a file header: its types and functions, top level
/// first, at most a dozen.
fn header_symbols(symbols: &[Symbol], hide_tests: bool) -> String {
    let mut names: Vec<&str> = Vec::new();
    for s in symbols.iter().filter(|s| {
        let hidden_test = hide_tests && s.test;
        !(s.is_impl_record() || hidden_test)
    }) {
        if !names.contains(&s.name.as_str()) {
            names.push(&s.name);
        }
    }
    let more = names.len().saturating_sub(12);
    let mut text = names.into_iter().take(12).collect::<Vec<_>>().join(", ");
    if more > 0 {
        text.push_str(&format!(", … {more} more"));
    }
    text
}

fn fenced(lang: &str, body: &str) -> String {
    let fence = if body.contains("```") { "````" } else { "```" };
    let mut out = format!("{fence}{lang}\n{body}");
    if !body.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(fence);
    out.push('\n');
    out
}

/// Renders one file.
// One call site and a test: a struct for these would only be unpacked.
#[allow(clippy::too_many_arguments)]
fn render_file(
    path: &str,
    lang: &str,
    text: &str,
    symbols: &[Symbol],
    render: Render,
    relevant: &HashSet<u32>,
    hide_tests: bool,
    named: &[String],
) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let listed = header_symbols(symbols, hide_tests);
    // Test code is left out, unless it is what the question is about.
    let shown = |i: usize, s: &Symbol| !(hide_tests && s.test) || relevant.contains(&(i as u32));
    match render {
        Render::Full if hide_tests && symbols.iter().any(|s| s.test) => format!(
            "#### {path} — {listed} · full (tests left out)\n{}",
            fenced(lang, &without_tests(&lines, symbols))
        ),
        Render::Full => format!("#### {path} — {listed} · full\n{}", fenced(lang, text)),
        Render::Skeleton => {
            // Types, the relevant symbols and their type's members first,
            // in file order; the rest only while lines are left.
            let candidates: Vec<(usize, &Symbol)> = symbols
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.is_impl_record())
                .filter(|(i, s)| shown(*i, s))
                .collect();
            let first = |i: usize, s: &Symbol| {
                s.kind.is_type()
                    || relevant.contains(&(i as u32))
                    || s.parent.is_some_and(|p| relevant.contains(&p))
            };
            let mut chosen: Vec<usize> = candidates
                .iter()
                .filter(|(i, s)| first(*i, s))
                .map(|(i, _)| *i)
                .take(MAX_SKELETON_LINES)
                .collect();
            for (i, _) in candidates.iter().filter(|(i, s)| !first(*i, s)) {
                if chosen.len() >= MAX_SKELETON_LINES {
                    break;
                }
                chosen.push(*i);
            }
            chosen.sort_unstable();
            let mut body: Vec<String> = chosen
                .iter()
                .map(|&i| signature_line(&lines, &symbols[i]))
                .collect();
            if candidates.len() > chosen.len() {
                body.push(format!("      … {} more", candidates.len() - chosen.len()));
            }
            format!(
                "#### {path} — {listed} · skeleton (signatures only; read the file for a body)\n{}",
                fenced(lang, &body.join("\n"))
            )
        }
        Render::Excerpt => {
            // Relevant symbols in full; every other symbol's signature line.
            // A type is its declaration, up to its first member (its
            // relevant members are kept on their own).
            let head_end = |i: usize, s: &Symbol| -> u32 {
                if !s.kind.is_type() {
                    return s.end;
                }
                let first_member = symbols
                    .iter()
                    .filter(|m| m.parent == Some(i as u32))
                    .map(|m| m.start)
                    .min();
                match first_member {
                    Some(line) => line.saturating_sub(1).min(s.sig + MAX_TYPE_HEAD),
                    None => s.end.min(s.sig + MAX_TYPE_HEAD),
                }
            };
            // A long declaration (two dozen constructor parameters, a data
            // class's fields) is its signature line, unless the question
            // names the type.
            let long_head = |i: usize, s: &Symbol| {
                s.kind.is_type()
                    && head_end(i, s).saturating_sub(s.sig) > LONG_TYPE_HEAD
                    && !named.iter().any(|n| n.eq_ignore_ascii_case(&s.name))
            };
            let mut keep: Vec<(u32, u32)> = symbols
                .iter()
                .enumerate()
                .filter(|(i, _)| relevant.contains(&(*i as u32)))
                .map(|(i, s)| {
                    if long_head(i, s) {
                        return (s.sig, s.sig);
                    }
                    (
                        s.start.saturating_sub(CONTEXT_LINES),
                        head_end(i, s) + CONTEXT_LINES,
                    )
                })
                .collect();
            // Types' signature lines, for orientation (the header names
            // the rest).
            for s in symbols
                .iter()
                .filter(|s| s.kind.is_type() && s.owner.is_none() && !(hide_tests && s.test))
            {
                keep.push((s.sig, s.sig));
            }
            keep.sort();
            let mut merged: Vec<(u32, u32)> = Vec::new();
            for (a, b) in keep {
                match merged.last_mut() {
                    Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            let mut body = String::new();
            let mut next = 0u32;
            for (a, b) in merged {
                let b = b.min(lines.len().saturating_sub(1) as u32);
                if a > next {
                    body.push_str("      …\n");
                }
                for n in a..=b {
                    let line = lines.get(n as usize).copied().unwrap_or_default();
                    body.push_str(&format!("{:>5}  {line}\n", n + 1));
                }
                next = b + 1;
            }
            if (next as usize) < lines.len() {
                body.push_str("      …\n");
            }
            format!(
                "#### {path} — {listed} · excerpt (the relevant symbols; read the file for the rest)\n{}",
                fenced(lang, &body)
            )
        }
    }
}

/// Answers `query` from `index`.
/// What a question picks out of the graph: its words, the scored
/// symbols, the spine and its paths, and the files ranked.
pub(crate) struct Analysis {
    pub(crate) q: Query,
    scores: HashMap<SymbolId, f64>,
    spine: Vec<SymbolId>,
    paths: Vec<Vec<SymbolId>>,
    on_spine: HashSet<u32>,
    by_file: HashMap<u32, Vec<(u32, f64)>>,
    best: f64,
    /// Files (index positions) with their relevance, most relevant first.
    pub(crate) ranked: Vec<(u32, f64)>,
}

impl Analysis {
    /// Whether the query names `path` (by path, module or traceback).
    pub(crate) fn mentions(&self, path: &str) -> bool {
        self.q.paths.iter().any(|m| mentions_path(path, m))
    }
}

/// How far the spine reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Call paths between the entries only: what `find_files` ranks by.
    Entries,
    /// Also what the best entry calls ([`entry_callees`]): what `explore`
    /// shows. (`find_files` does not take it: it moved SWE-bench Lite up
    /// and Verified down, 0.516 → 0.514 recall@gold.)
    Callees,
}

/// Reads `query` against `graph`: entry symbols, spine, file ranking.
pub(crate) fn analyze(graph: &Graph<'_>, index: &Index, query: &str, reach: Reach) -> Analysis {
    // The project's own name says nothing about where to look.
    let q = parse_query(query, &graph.project);
    let scores = score_symbols(graph, &q);
    let entry = entries(&scores);
    if tracing::enabled!(tracing::Level::DEBUG) {
        let mut fams: Vec<(&String, usize)> =
            graph.members.iter().map(|(k, v)| (k, v.len())).collect();
        fams.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (k, n) in fams.iter().take(15) {
            tracing::debug!("family {k}: {n}");
        }
        for e in &entry {
            tracing::debug!("entry {} {:.2}", graph.qualified(*e), scores[e]);
        }
    }
    // A family member the query names by a name it does not share with
    // the others (`Logger`, not every plugin's `pytest_runtest_setup`).
    let named = |id: SymbolId| {
        let name = &graph.symbol(id).name;
        q.identifiers.contains(name)
            && graph
                .by_name
                .get(name.as_str())
                .is_some_and(|all| all.len() < MIN_SIBLINGS)
    };
    let test = |id: SymbolId| !q.tests && is_test_symbol(graph, id);
    let (mut spine, mut paths) = spine(graph, &entry, &named, &test);
    if reach == Reach::Callees {
        for (callee, path) in entry_callees(graph, &entry, &scores, &test) {
            if !spine.contains(&callee) {
                for &id in &path {
                    if !spine.contains(&id) {
                        spine.push(id);
                    }
                }
                paths.push(path);
            }
        }
    }
    let on_spine: HashSet<u32> = spine.iter().map(|id| id.file).collect();

    // File relevance: its best symbol, a share of the others, the spine.
    let mut by_file: HashMap<u32, Vec<(u32, f64)>> = HashMap::new();
    for (&id, &s) in &scores {
        by_file.entry(id.file).or_default().push((id.symbol, s));
    }
    for id in &spine {
        by_file.entry(id.file).or_default();
    }
    let best = scores.values().copied().fold(0.0, f64::max);
    // The types the flow goes through: their implementations are what it
    // dispatches to, and rank next to it (shown as skeletons when many).
    let flow_types: HashSet<&str> = spine.iter().filter_map(|&id| graph.type_of(id)).collect();
    for (f, file) in index.files.iter().enumerate() {
        let implements_flow =
            file.facts.symbols.iter().any(|s| {
                s.kind.is_type() && s.supers.iter().any(|t| flow_types.contains(t.as_str()))
            });
        if implements_flow && !is_test_path(&file.path) {
            by_file.entry(f as u32).or_default();
        }
    }
    // Families with no supertype the question matches as a whole (at
    // least three members scored): their members rank like implementations
    // of the flow's types.
    let asked_families: HashSet<&str> = graph
        .members
        .iter()
        .filter(|(_, ids)| ids.iter().filter(|id| scores.contains_key(id)).count() >= MIN_SIBLINGS)
        .map(|(k, _)| k.as_str())
        .collect();
    let implements_flow = |f: u32| {
        let symbols = &index.files[f as usize].facts.symbols;
        symbols.iter().enumerate().any(|(i, s)| {
            (s.kind.is_type() && s.supers.iter().any(|t| flow_types.contains(t.as_str())))
                || graph
                    .member_of
                    .get(&SymbolId {
                        file: f,
                        symbol: i as u32,
                    })
                    .is_some_and(|k| asked_families.contains(k.as_str()))
        })
    };
    let mut ranked: Vec<(u32, f64)> = by_file
        .iter()
        .map(|(&f, list)| {
            let mut s: Vec<f64> = list.iter().map(|x| x.1).collect();
            s.sort_by(|a, b| b.total_cmp(a));
            let top = s.first().copied().unwrap_or(0.0);
            let rest: f64 = s.iter().skip(1).sum::<f64>().min(top / 2.0);
            let path = &index.files[f as usize].path;
            // A package that only re-exports is not what naming it is about.
            let mentioned = q.paths.iter().any(|m| mentions_path(path, m))
                && !crate::find::reexports(&index.files[f as usize]);
            let bonus = if on_spine.contains(&f) || mentioned {
                best
            } else if implements_flow(f) && !is_test_path(&index.files[f as usize].path) {
                best / 2.0
            } else {
                0.0
            };
            (f, top + 0.3 * rest + bonus)
        })
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Analysis {
        q,
        scores,
        spine,
        paths,
        on_spine,
        by_file,
        best,
        ranked,
    }
}

/// Answers `query` from `index`, joining its graph now (see
/// [`explore_in`] for a kept one).
pub fn explore(index: &Index, query: &str, options: &Options) -> Answer {
    explore_in(&Graph::new(index), query, options)
}

/// Answers `query` from `graph` (and the index it joins).
pub fn explore_in(graph: &Graph<'_>, query: &str, options: &Options) -> Answer {
    let index = graph.index;
    let Analysis {
        q,
        scores,
        spine,
        paths,
        on_spine,
        by_file,
        best,
        ranked,
    } = analyze(graph, index, query, Reach::Callees);

    // Which symbols of a file are relevant: scored or on the spine.
    let mut relevant: HashMap<u32, HashSet<u32>> = HashMap::new();
    for (&f, list) in &by_file {
        let min = best / 4.0;
        relevant
            .entry(f)
            .or_default()
            .extend(list.iter().filter(|x| x.1 >= min).map(|x| x.0));
    }
    for id in &spine {
        relevant.entry(id.file).or_default().insert(id.symbol);
    }
    // Test code inside a source file (a Rust `mod tests`) is not how the
    // code works, unless the question is about tests.
    let hide_tests = !q.tests;
    if hide_tests {
        for (&f, symbols) in relevant.iter_mut() {
            let facts = &index.files[f as usize].facts;
            symbols.retain(|&i| !facts.symbols[i as usize].test);
        }
    }

    let mut text = String::new();
    let spine_names: Vec<String> = spine.iter().map(|&id| graph.qualified(id)).collect();
    // The question's first line names the answer (the model has the
    // rest: an issue pasted whole is not worth its budget twice).
    text.push_str(&format!("# explore: {}\n", heading(query)));
    // The flow lines take at most a quarter of the budget.
    // Paths through overloads of one name read the same: each line once.
    let mut shown: Vec<String> = Vec::new();
    // The functions the flow lines shown name, in the order they are
    // first named: each file shows those bodies before anything else.
    let mut flow_order: HashMap<SymbolId, usize> = HashMap::new();
    // A flow line is a claim: each step one the code shows. A path goes
    // as far as its first step only a name guessed (it still ranked the
    // files).
    let claimed: Vec<Vec<SymbolId>> = paths
        .iter()
        .filter_map(|path| {
            let upto = (1..path.len())
                .find(|&i| !graph.claims(path[i - 1], path[i]))
                .unwrap_or(path.len());
            (upto >= 2).then(|| path[..upto].to_vec())
        })
        .collect();
    for path in flow_lines(&claimed) {
        if shown.len() == MAX_FLOW_LINES {
            break;
        }
        let names: Vec<String> = path.iter().map(|&id| graph.qualified(id)).collect();
        let line = format!("Flow: {}\n", names.join(" → "));
        if shown.contains(&line) {
            continue;
        }
        if text.len() + line.len() > options.budget_chars / 4 {
            break;
        }
        text.push_str(&line);
        shown.push(line);
        for &id in &path {
            if !graph.symbol(id).kind.is_type() {
                let next = flow_order.len();
                flow_order.entry(id).or_insert(next);
            }
        }
    }
    // What a flow line names is relevant where it is declared.
    for id in flow_order.keys() {
        relevant.entry(id.file).or_default().insert(id.symbol);
    }
    let mut files = Vec::new();
    let mut body = String::new();
    // Families with a member on the spine already have their exemplar.
    let spine_families: HashSet<String> = spine
        .iter()
        .flat_map(|&id| {
            let mut fams: Vec<String> = graph
                .type_of(id)
                .map(|t| graph.families_of(t, MIN_SIBLINGS))
                .unwrap_or_default()
                .into_iter()
                .map(str::to_owned)
                .collect();
            fams.extend(graph.member_of.get(&id).cloned());
            fams
        })
        .collect();
    let floor = ranked.first().map_or(0.0, |r| r.1) * RELEVANCE_FLOOR;
    // The files' share of the budget: what the heading, the flow lines and
    // the count line leave.
    let budget = options
        .budget_chars
        .saturating_sub(text.len() + SUMMARY_LINE_CHARS);
    // The symbols of file `f` that stand for `family`: the methods its
    // supertype declares, or the family's own members there.
    let family_symbols = |f: u32, family: &str| -> Vec<u32> {
        let symbols = &index.files[f as usize].facts.symbols;
        match graph.members.get(family) {
            Some(ids) => ids
                .iter()
                .filter(|id| id.file == f)
                .map(|id| id.symbol)
                .collect(),
            None => {
                let contract: HashSet<&str> = graph
                    .methods_of(family)
                    .into_iter()
                    .map(|m| graph.symbol(m).name.as_str())
                    .collect();
                (0..symbols.len() as u32)
                    .filter(|&i| {
                        let m = &symbols[i as usize];
                        m.kind == Kind::Method && contract.contains(m.name.as_str())
                    })
                    .collect()
            }
        }
    };
    // Each family's exemplar: of its members among the relevant files, the
    // one whose family symbols are shortest (the plainest example).
    let mut exemplars: HashMap<String, (u32, u32)> = HashMap::new();
    for &(f, _) in ranked.iter().filter(|r| r.1 >= floor) {
        let symbols = &index.files[f as usize].facts.symbols;
        for family in graph.families_in_file(f, MIN_SIBLINGS) {
            let size: u32 = family_symbols(f, &family)
                .iter()
                .map(|&i| symbols[i as usize].end - symbols[i as usize].start + 1)
                .sum();
            if size > 0 && exemplars.get(&family).is_none_or(|&(_, best)| size < best) {
                exemplars.insert(family, (f, size));
            }
        }
    }
    for (f, relevance) in ranked {
        // Sized to the answer: what is barely related is not filler.
        if body.len() >= budget || relevance < floor {
            break;
        }
        let file = &index.files[f as usize];
        let Some(source) = index.read(&file.path) else {
            continue;
        };
        let symbols = &file.facts.symbols;
        let families = graph.families_in_file(f, MIN_SIBLINGS);
        let mut sibling =
            options.adaptive && !spine.is_empty() && !on_spine.contains(&f) && !families.is_empty();
        // A family none of whose members is on the spine keeps one member
        // in full: an exemplar of what the others do.
        let mut exemplar_of: Option<&str> = None;
        if sibling {
            if let Some(family) = families.iter().find(|fam| {
                exemplars.get(*fam).map(|e| e.0) == Some(f) && !spine_families.contains(*fam)
            }) {
                exemplar_of = Some(family);
                sibling = false;
            }
        }
        // The file's relevant symbols, best first (spine first), at most
        // a few: an excerpt of a large module stays an excerpt.
        let mut rel: Vec<(u32, f64)> = relevant
            .remove(&f)
            .unwrap_or_default()
            .into_iter()
            .map(|i| {
                let id = SymbolId { file: f, symbol: i };
                let spine_first = if spine.contains(&id) {
                    best * 10.0
                } else {
                    0.0
                };
                (i, scores.get(&id).copied().unwrap_or(0.0) + spine_first)
            })
            .collect();
        // Several members of the family in this one file: the shortest is
        // the example, the others stay signatures (an excerpt).
        let mut several = false;
        if let Some(family) = exemplar_of {
            // What the exemplar does for the family, in full.
            let mut own = family_symbols(f, family);
            several = own.len() > 1 && graph.members.contains_key(family);
            if several {
                own.sort_by_key(|&i| symbols[i as usize].end - symbols[i as usize].start);
                own.truncate(1);
                rel.clear();
            }
            for i in own {
                rel.push((i, best * 20.0));
            }
        }
        // A function a flow line names before anything else of the file
        // (the mechanism, not the constructor beside it), in flow order;
        // then by score.
        let flow_rank = |i: u32| {
            flow_order
                .get(&SymbolId { file: f, symbol: i })
                .copied()
                .unwrap_or(usize::MAX)
        };
        rel.sort_by(|a, b| {
            flow_rank(a.0)
                .cmp(&flow_rank(b.0))
                .then(b.1.total_cmp(&a.1))
                .then(a.0.cmp(&b.0))
        });
        rel.dedup_by_key(|r| r.0);
        let first = body.is_empty();
        // Past the share of the budget for sources, files are listed as
        // skeletons: more of the files that matter, each cheaply.
        let late = options.adaptive && body.len() >= budget * SOURCE_SHARE / 100;
        let mut render = if sibling || (late && !on_spine.contains(&f)) {
            Render::Skeleton
        } else if several {
            Render::Excerpt
        } else if file.facts.lines <= WHOLE_FILE_LINES && !scattered(symbols, &rel) {
            Render::Full
        } else {
            Render::Excerpt
        };
        let fence = file.facts.lang.fence();
        // What is left, the newline before the file counted.
        let room = budget.saturating_sub(body.len() + 1);
        let mut keep = rel.len().min(MAX_EXCERPT_SYMBOLS);
        let mut shown;
        loop {
            let kept: HashSet<u32> = rel.iter().take(keep).map(|r| r.0).collect();
            shown = render_file(
                &file.path,
                fence,
                &source,
                symbols,
                render,
                &kept,
                hide_tests,
                &q.identifiers,
            );
            if shown.len() <= room {
                break;
            }
            // Too big: fewer symbols, then smaller forms.
            match render {
                Render::Full if file.facts.lines > 40 => render = Render::Excerpt,
                Render::Excerpt if keep > 1 => keep -= 1,
                Render::Excerpt | Render::Full
                    if options.adaptive && (first || !on_spine.contains(&f)) =>
                {
                    render = Render::Skeleton
                }
                _ => break,
            }
        }
        // Nothing shown overshoots the budget: a file that does not fit
        // is left out, or, when it is the first and even its smallest
        // form does not fit, cut to the budget (an answer shows
        // something).
        if shown.len() > room {
            if !first {
                continue;
            }
            shown = cut_to(&shown, room);
        }
        files.push(FileAnswer {
            path: file.path.clone(),
            render,
            chars: shown.len(),
        });
        body.push('\n');
        body.push_str(&shown);
    }
    if files.is_empty() {
        text.push_str("\nNothing in the code matches the question's words. Try the names of types or functions.\n");
    } else {
        let count = |r: Render| files.iter().filter(|f| f.render == r).count();
        text.push_str(&format!(
            "{} files: {} full, {} excerpts, {} skeletons\n",
            files.len(),
            count(Render::Full),
            count(Render::Excerpt),
            count(Render::Skeleton)
        ));
        text.push_str(&body);
    }
    let edges = graph.calls.values().map(Vec::len).sum::<usize>()
        + graph.implementers.values().map(Vec::len).sum::<usize>();
    Answer {
        text,
        files,
        spine: spine_names,
        index: IndexFacts {
            files: index.files.len(),
            symbols: graph.symbols.len(),
            edges,
            seconds: index.stats.seconds,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_give_identifiers_and_terms() {
        let text =
            "How does OkHttp process a request through RealCall.execute and its interceptors?";
        let q = parse_query(text, &[]);
        assert_eq!(q.identifiers, ["OkHttp", "RealCall", "execute"]);
        assert_eq!(
            q.terms,
            [
                "ok",
                "http",
                "process",
                "request",
                "real",
                "call",
                "execute",
                "interceptor"
            ]
        );
        assert!(!q.tests);
        assert!(q.paths.is_empty(), "{:?}", q.paths);
        assert_eq!(q.qualified, [("realcall".to_owned(), "execute".to_owned())]);
        let q = parse_query(
            "How does Router::layer wrap routes, and next.run(request)?",
            &[],
        );
        assert_eq!(q.identifiers, ["Router", "layer", "next", "run"]);
        assert_eq!(
            q.qualified,
            [
                ("router".to_owned(), "layer".to_owned()),
                ("next".to_owned(), "run".to_owned())
            ]
        );
        let q = parse_query(
            "File \"/usr/lib/site-packages/_pytest/python.py\", line 3, in f; see requests/models.py and sphinx.ext.autodoc",
            &[],
        );
        assert!(
            q.paths
                .contains(&"usr/lib/site-packages/_pytest/python.py".to_string()),
            "{:?}",
            q.paths
        );
        assert!(
            q.paths.contains(&"requests/models.py".to_string()),
            "{:?}",
            q.paths
        );
        assert!(
            q.paths
                .contains(&"sphinx/ext/autodoc/__init__.py".to_string()),
            "{:?}",
            q.paths
        );
        assert!(mentions_path(
            "src/_pytest/python.py",
            "usr/lib/site-packages/_pytest/python.py"
        ));
        assert!(mentions_path("src/_pytest/python.py", "_pytest/python.py"));
        assert!(!mentions_path("src/_pytest/python.py", "test/python.py"));
        assert!(!mentions_path("src/my_python.py", "python.py"));
        // Literals: hyphenated names and codes, as written.
        assert_eq!(
            literals(
                "W0611 (unused-import) fires; run with --load-plugins=x and E501, not v2 or 4-5"
            ),
            ["W0611", "unused-import", "load-plugins", "E501"]
        );
        // The project's own name is left out.
        let q = parse_query(text, &["okhttp".to_owned()]);
        assert_eq!(q.identifiers, ["RealCall", "execute"]);
        assert_eq!(q.terms[0], "process");
    }

    /// Paths are joined end to start into longer flow lines, but never
    /// into one that visits a symbol twice.
    #[test]
    fn flow_lines_join_paths_without_loops() {
        let id = |symbol| SymbolId { file: 0, symbol };
        let (a, b, c, d) = (id(0), id(1), id(2), id(3));
        assert_eq!(flow_lines(&[vec![a, b], vec![b, c]]), [vec![a, b, c]]);
        let lines = flow_lines(&[vec![a, b], vec![b, c, a], vec![c, d]]);
        assert!(
            lines.iter().all(|l| {
                let mut seen = l.clone();
                seen.sort();
                seen.dedup();
                seen.len() == l.len()
            }),
            "{lines:?}"
        );
    }

    /// A Rust file shown whole leaves out its `#[cfg(test)] mod tests`,
    /// unless the question is about tests.
    #[test]
    fn a_file_shown_whole_leaves_out_its_tests() {
        let text = "pub fn dispatch(path: &str) -> usize {\n    path.len()\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn dispatch_counts() {\n        assert_eq!(dispatch(\"ab\"), 2);\n    }\n}\n";
        let facts = crate::extract::extract(crate::lang::Lang::Rust, text).unwrap();
        let full = |hide_tests| {
            let none = HashSet::new();
            render_file(
                "src/route.rs",
                "rust",
                text,
                &facts.symbols,
                Render::Full,
                &none,
                hide_tests,
                &[],
            )
        };
        let hidden = full(true);
        assert!(hidden.contains("pub fn dispatch(path: &str)"), "{hidden}");
        assert!(
            !hidden.contains("cfg(test)") && !hidden.contains("dispatch_counts"),
            "{hidden}"
        );
        assert!(hidden.contains("… 10 lines of tests"), "{hidden}");
        let asked = full(false);
        assert!(asked.contains("fn dispatch_counts()"), "{asked}");
    }

    /// The budget is a ceiling for the whole answer, heading and flow
    /// lines included (it was a target the first file could overshoot by
    /// a quarter, and the heading was not counted); a short module whose
    /// question touches one of its many functions is an excerpt.
    #[test]
    fn the_answer_stays_within_its_budget() {
        let module = |i: usize| {
            let helpers: String = (0..10)
                .map(|h| format!("def helper_{h}(value):\n    return value + {h}\n\n"))
                .collect();
            format!(
                "{helpers}def route_request_{i}(request):\n    \"\"\"Routes a request to its handler.\"\"\"\n    handler = find_handler_{i}(request.path)\n    return handler(request)\n\ndef find_handler_{i}(path):\n    return lambda request: (path, request)\n"
            )
        };
        let mut files: Vec<(String, String)> = (0..12)
            .map(|i| (format!("pkg/router_{i}.py"), module(i)))
            .collect();
        // One module whose every function the question matches, each long
        // and with a long signature: even its skeleton is longer than the
        // smallest budget, so it is cut.
        let body: String = (0..30)
            .map(|n| format!("    request.route_step_{n} = {n}\n"))
            .collect();
        let routes: String = (0..20)
            .map(|i| format!("def route_request_to_handler_number_{i}(request, session, adapter, timeout, verify, cert, proxies, stream, redirects, hooks, cookies, auth, headers):\n{body}    return request\n\n"))
            .collect();
        files.push(("pkg/all_routes.py".into(), routes));
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let (index, dir) = crate::testing::indexed("answer-budget", &refs);
        for budget in [1_000, 1_500, 3_000, 6_000] {
            let options = Options {
                budget_chars: budget,
                ..Options::default()
            };
            let answer = explore(&index, "How is a request routed to its handler?", &options);
            assert!(!answer.files.is_empty(), "{}", answer.text);
            assert!(
                answer.text.len() <= budget,
                "{} > {budget}:\n{}",
                answer.text.len(),
                answer.text
            );
            // What does not fit is cut at a line, its fence closed.
            if budget == 1_000 {
                assert!(answer.text.contains("cut to the budget"), "{}", answer.text);
            }
            assert_eq!(answer.text.matches("```").count() % 2, 0, "{}", answer.text);
            // Two of a module's twelve functions: an excerpt, not the file.
            assert!(
                answer.files.iter().all(|f| f.render != Render::Full),
                "{:?}",
                answer.files
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    /// "How does Session.send reach HTTPAdapter.send": `adapter.send()`
    /// (one of many `send`s, and not the session's own) reaches the base
    /// class that declares it, and the base class's method leads to the
    /// implementation the question names: the hop between the two files
    /// is the flow.
    #[test]
    fn a_question_naming_two_symbols_shows_the_hop_between_them() {
        let method = |class: &str, body: &str| {
            format!("class {class}:\n    def send(self, request):\n        {body}\n\n")
        };
        let sessions = format!(
            "{}class Session(Mixin):\n    def send(self, request):\n        adapter = self.get_adapter()\n        return adapter.send(request)\n\n    def get_adapter(self):\n        return None\n",
            method("Mixin", "return self.send(request)")
        );
        let adapters = format!(
            "{}class HTTPAdapter(BaseAdapter):\n    def send(self, request):\n        return self.build_response(request)\n\n    def build_response(self, request):\n        return request\n",
            method("BaseAdapter", "raise NotImplementedError")
        );
        let (index, dir) = crate::testing::indexed(
            "answer-hop",
            &[
                ("pkg/sessions.py", &sessions),
                ("pkg/adapters.py", &adapters),
                ("pkg/mail.py", &method("Mailer", "return request")),
                ("pkg/channel.py", &method("Channel", "return request")),
            ],
        );
        let answer = explore(
            &index,
            "How does Session.send reach HTTPAdapter.send?",
            &Options::default(),
        );
        assert!(
            answer
                .text
                .contains("Session.send → BaseAdapter.send → HTTPAdapter.send"),
            "{}",
            answer.text
        );
        let shown: Vec<&str> = answer.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            shown[..2],
            ["pkg/adapters.py", "pkg/sessions.py"],
            "{shown:?}"
        );
        assert!(answer.text.len() <= Options::default().budget_chars);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// OkHttp, as a new user found it: the flow lines named
    /// `RealInterceptorChain.proceed`, and the excerpt of its file showed
    /// the constructor's two dozen parameters instead of `proceed`'s body.
    /// A function a flow line names comes first, whole; a long declaration
    /// the question does not name is its signature line.
    #[test]
    fn a_flow_lines_function_is_shown_before_a_long_constructor() {
        let params: String = (0..24).map(|i| format!("  val param{i}: Int,\n")).collect();
        let fillers: String = (0..48)
            .map(|i| format!("  fun withTimeout{i}(value: Int): Interceptor.Chain {{\n    return this\n  }}\n\n"))
            .collect();
        let chain = format!(
            "package okhttp3.internal.http\n\nclass RealInterceptorChain(\n  internal val call: RealCall,\n  private val interceptors: List<Interceptor>,\n  private val index: Int,\n  internal val request: Request,\n{params}) : Interceptor.Chain {{\n  private var calls: Int = 0\n\n{fillers}  override fun request(): Request = request\n\n  override fun proceed(request: Request): Response {{\n    check(index < interceptors.size)\n    calls++\n    val next = RealInterceptorChain(call, interceptors, index + 1, request)\n    val interceptor = interceptors[index]\n    val response = interceptor.intercept(next)\n    return response\n  }}\n}}\n"
        );
        let interceptor = |name: &str| {
            format!("package okhttp3.internal\n\nclass {name} : Interceptor {{\n  override fun intercept(chain: Interceptor.Chain): Response {{\n    val request = chain.request()\n    return chain.proceed(request)\n  }}\n}}\n")
        };
        let (index, dir) = crate::testing::indexed(
            "answer-okhttp",
            &[
                ("okhttp/src/okhttp3/internal/http/RealInterceptorChain.kt", &chain),
                (
                    "okhttp/src/okhttp3/Interceptor.kt",
                    "package okhttp3\n\nfun interface Interceptor {\n  fun intercept(chain: Chain): Response\n\n  interface Chain {\n    fun request(): Request\n\n    fun proceed(request: Request): Response\n  }\n}\n",
                ),
                (
                    "okhttp/src/okhttp3/internal/connection/RealCall.kt",
                    "package okhttp3.internal.connection\n\nclass RealCall(val client: OkHttpClient, val originalRequest: Request) {\n  internal fun getResponseWithInterceptorChain(): Response {\n    val interceptors = mutableListOf<Interceptor>()\n    val chain = RealInterceptorChain(this, interceptors, 0, originalRequest)\n    return chain.proceed(originalRequest)\n  }\n}\n",
                ),
                ("okhttp/src/okhttp3/internal/CacheInterceptor.kt", &interceptor("CacheInterceptor")),
                ("okhttp/src/okhttp3/internal/BridgeInterceptor.kt", &interceptor("BridgeInterceptor")),
                ("okhttp/src/okhttp3/internal/RetryInterceptor.kt", &interceptor("RetryInterceptor")),
            ],
        );
        let answer = explore(
            &index,
            "How does OkHttp process a request through its interceptor chain?",
            &Options::default(),
        );
        let text = &answer.text;
        assert!(text.contains("→ RealInterceptorChain.proceed"), "{text}");
        assert!(
            text.contains("override fun proceed(request: Request): Response {"),
            "{text}"
        );
        assert!(
            text.contains("val response = interceptor.intercept(next)"),
            "{text}"
        );
        // The constructor is its signature line: none of its parameters.
        assert!(text.contains("class RealInterceptorChain("), "{text}");
        assert!(!text.contains("val param7: Int,"), "{text}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
