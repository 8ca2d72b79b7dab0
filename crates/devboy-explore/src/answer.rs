//! Answering "how does X work": entry symbols from the query, the flow
//! spine that links them, files ranked, and a rendering that fills a
//! character budget (a target, not a ceiling).
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

/// Scores of every symbol with any match.
fn score_symbols(graph: &Graph<'_>, q: &Query) -> HashMap<SymbolId, f64> {
    // Each name's stemmed words, once per distinct name (names repeat
    // across classes and files; this runs over every symbol per question).
    let mut name_words: HashMap<&str, Vec<String>> = HashMap::new();
    for &id in &graph.symbols {
        let name = graph.symbol(id).name.as_str();
        name_words
            .entry(name)
            .or_insert_with(|| words(name, Split::Fine).iter().map(|w| stem(w)).collect());
    }
    // How rare each stemmed word is among symbol names.
    let mut df: HashMap<&str, usize> = HashMap::new();
    for &id in &graph.symbols {
        let stems = &name_words[graph.symbol(id).name.as_str()];
        for (i, s) in stems.iter().enumerate() {
            if !stems[..i].contains(s) {
                *df.entry(s.as_str()).or_default() += 1;
            }
        }
    }
    let n = graph.symbols.len().max(1) as f64;
    let idf = |t: &str| (1.0 + n / (1.0 + *df.get(t).unwrap_or(&0) as f64)).ln();
    let mut out = HashMap::new();
    for &id in &graph.symbols {
        let sym = graph.symbol(id);
        let name_words = &name_words[sym.name.as_str()];
        let mut score = 0.0;
        if q.identifiers.contains(&sym.name) {
            score += 12.0;
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
        if !q.tests && is_test_path(&graph.path(id).to_ascii_lowercase()) {
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
            for &next in graph.calls.get(&at).map(Vec::as_slice).unwrap_or_default() {
                if !seen.insert(next) {
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
            i != j && lines[i].last() == lines[j].first() && !lines[i].contains(&lines[j][1])
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

/// The line a symbol's signature is on, as shown in a skeleton.
fn signature_line(lines: &[&str], sym: &Symbol) -> String {
    let line = lines.get(sym.sig as usize).copied().unwrap_or_default();
    let text = line.trim_end();
    let text: String = text.chars().take(200).collect();
    format!("{:>5}  {text}", sym.sig + 1)
}

/// Symbols listed in a file header: its types and functions, top level
/// first, at most a dozen.
fn header_symbols(symbols: &[Symbol]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for s in symbols
        .iter()
        .filter(|s| !(s.kind == Kind::Type && s.owner.is_some()))
    {
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
fn render_file(
    path: &str,
    lang: &str,
    text: &str,
    symbols: &[Symbol],
    render: Render,
    relevant: &HashSet<u32>,
) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let listed = header_symbols(symbols);
    match render {
        Render::Full => format!("#### {path} — {listed} · full\n{}", fenced(lang, text)),
        Render::Skeleton => {
            // Types, the relevant symbols and their type's members first,
            // in file order; the rest only while lines are left.
            let candidates: Vec<(usize, &Symbol)> = symbols
                .iter()
                .enumerate()
                .filter(|(_, s)| !(s.kind == Kind::Type && s.owner.is_some()))
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
            let mut keep: Vec<(u32, u32)> = symbols
                .iter()
                .enumerate()
                .filter(|(i, _)| relevant.contains(&(*i as u32)))
                .map(|(i, s)| {
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
                .filter(|s| s.kind.is_type() && s.owner.is_none())
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

/// Reads `query` against `graph`: entry symbols, spine, file ranking.
pub(crate) fn analyze(graph: &Graph<'_>, index: &Index, query: &str) -> Analysis {
    // The project's own name says nothing about where to look.
    let q = parse_query(query, &crate::project::project_names(&index.root));
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
    let (spine, paths) = spine(graph, &entry, &named);
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
            let mentioned = q.paths.iter().any(|m| mentions_path(path, m));
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

pub fn explore(index: &Index, query: &str, options: &Options) -> Answer {
    let graph = Graph::new(index);
    let Analysis {
        scores,
        spine,
        paths,
        on_spine,
        by_file,
        best,
        ranked,
        ..
    } = analyze(&graph, index, query);

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

    let mut text = String::new();
    let spine_names: Vec<String> = spine.iter().map(|&id| graph.qualified(id)).collect();
    text.push_str(&format!("# explore: {}\n", query.trim()));
    for path in flow_lines(&paths).iter().take(MAX_FLOW_LINES) {
        let names: Vec<String> = path.iter().map(|&id| graph.qualified(id)).collect();
        text.push_str(&format!("Flow: {}\n", names.join(" → ")));
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
        if body.len() >= options.budget_chars || relevance < floor {
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
        rel.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        rel.dedup_by_key(|r| r.0);
        let first = body.is_empty();
        // Past the share of the budget for sources, files are listed as
        // skeletons: more of the files that matter, each cheaply.
        let late = options.adaptive && body.len() >= options.budget_chars * SOURCE_SHARE / 100;
        let mut render = if sibling || (late && !on_spine.contains(&f)) {
            Render::Skeleton
        } else if several {
            Render::Excerpt
        } else if file.facts.lines <= WHOLE_FILE_LINES {
            Render::Full
        } else {
            Render::Excerpt
        };
        let fence = file.facts.lang.fence();
        let room = options.budget_chars.saturating_sub(body.len());
        let mut keep = rel.len().min(MAX_EXCERPT_SYMBOLS);
        let mut shown;
        loop {
            let kept: HashSet<u32> = rel.iter().take(keep).map(|r| r.0).collect();
            shown = render_file(&file.path, fence, &source, symbols, render, &kept);
            // The first file may take the budget and a quarter; the others
            // what is left.
            let limit = if first {
                options.budget_chars * 5 / 4
            } else {
                room
            };
            if shown.len() <= limit {
                break;
            }
            // Too big: fewer symbols, then smaller forms.
            match render {
                Render::Full if file.facts.lines > 40 => render = Render::Excerpt,
                Render::Excerpt if keep > 1 => keep -= 1,
                Render::Excerpt | Render::Full
                    if !first && options.adaptive && !on_spine.contains(&f) =>
                {
                    render = Render::Skeleton
                }
                _ => break,
            }
        }
        // Nothing shown may overshoot the budget by more than a quarter
        // (the first file excepted: an answer shows something).
        if !first && body.len() + shown.len() > options.budget_chars * 5 / 4 {
            continue;
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
}
