//! The search behind `devboy_find_tools`: fielded BM25 over the upstream
//! tools' exposed names, descriptions and argument names.
//!
//! A lazy session is listed only a few tools, so the model finds the rest
//! by what it wants to do ("read a file", "commit"). Names weigh most
//! (`git__git_commit` is about committing whatever its description says),
//! argument names next (`path`, `repo_path` tell what a tool acts on), the
//! description least, each length-normalized so that a long description
//! does not win on length alone.

use std::collections::HashMap;

use rmcp::model::Tool;

/// BM25's parameters.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// How much a word counts in each field: name, argument names, description.
const WEIGHTS: [f64; 3] = [3.0, 1.5, 1.0];

/// A tool scoring under this share of the best one is left out: a weak
/// match would join the session's list and cost tokens on every request.
const RELATIVE_FLOOR: f64 = 0.5;

/// Words too common in tool descriptions to tell tools apart.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "if", "in", "is", "it",
    "its", "of", "on", "or", "that", "the", "this", "to", "use", "when", "which", "will", "with",
];

/// One tool as searched.
#[derive(Debug)]
struct Doc {
    name: String,
    /// Words of the name, the argument names and the description.
    fields: [Vec<String>; 3],
}

/// A search over a catalog's upstream tools.
#[derive(Debug, Default)]
pub struct ToolIndex {
    docs: Vec<Doc>,
    /// In how many tools each word occurs (any field).
    df: HashMap<String, usize>,
    /// Average field lengths.
    avg: [f64; 3],
}

impl ToolIndex {
    /// Indexes `tools` (exposed names).
    pub fn new<'a>(tools: impl Iterator<Item = &'a Tool>) -> Self {
        let docs: Vec<Doc> = tools
            .map(|tool| {
                let arguments = tool
                    .input_schema
                    .get("properties")
                    .and_then(|p| p.as_object())
                    .map(|p| p.keys().map(String::as_str).collect::<Vec<_>>().join(" "))
                    .unwrap_or_default();
                Doc {
                    name: tool.name.to_string(),
                    fields: [
                        words(&tool.name),
                        words(&arguments),
                        words(tool.description.as_deref().unwrap_or_default()),
                    ],
                }
            })
            .collect();
        let mut df: HashMap<String, usize> = HashMap::new();
        for doc in &docs {
            let mut seen: Vec<&String> = doc.fields.iter().flatten().collect();
            seen.sort_unstable();
            seen.dedup();
            for word in seen {
                *df.entry(word.clone()).or_default() += 1;
            }
        }
        let n = docs.len().max(1) as f64;
        let avg =
            [0, 1, 2].map(|k| docs.iter().map(|d| d.fields[k].len()).sum::<usize>() as f64 / n);
        Self { docs, df, avg }
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Up to `limit` tools matching `query`, best first (ties by name),
    /// none scoring under half the best; a tool named exactly in the query
    /// (exposed name) comes first.
    pub fn search(&self, query: &str, limit: usize) -> Vec<&str> {
        let terms = words(query);
        let n = self.docs.len() as f64;
        let mut scored: Vec<(f64, &str)> = self
            .docs
            .iter()
            .filter_map(|doc| {
                let mut score = 0.0;
                for term in &terms {
                    let Some(&d) = self.df.get(term) else {
                        continue;
                    };
                    let idf = (1.0 + (n - d as f64 + 0.5) / (d as f64 + 0.5)).ln();
                    let tf: f64 = (0..3)
                        .map(|k| {
                            let count = doc.fields[k].iter().filter(|w| *w == term).count() as f64;
                            let norm =
                                1.0 - B + B * doc.fields[k].len() as f64 / self.avg[k].max(1.0);
                            WEIGHTS[k] * count / norm
                        })
                        .sum();
                    if tf > 0.0 {
                        score += idf * tf * (K1 + 1.0) / (tf + K1);
                    }
                }
                if query.split_whitespace().any(|w| w == doc.name) {
                    score += 1e6;
                }
                (score > 0.0).then_some((score, doc.name.as_str()))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        let floor = scored.first().map_or(0.0, |best| best.0 * RELATIVE_FLOOR);
        scored
            .into_iter()
            .take_while(|(score, _)| *score >= floor)
            .take(limit)
            .map(|(_, name)| name)
            .collect()
    }
}

/// The words of a name or a text: split at anything but letters and
/// digits and at lower-to-upper case changes (`readFile`), lowercased,
/// stop words dropped, plurals and `-ing`/`-ed` endings cut.
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            let lower = word.to_lowercase();
            if !STOP_WORDS.contains(&lower.as_str()) {
                out.push(stem(&lower));
            }
            word.clear();
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && previous_lower {
                flush(&mut word, &mut out);
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            word.push(c);
        } else {
            previous_lower = false;
            flush(&mut word, &mut out);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// A light English stem: enough that "files", "listing" and "listed"
/// meet "file" and "list".
fn stem(word: &str) -> String {
    let cut = |suffix: &str, min: usize| {
        word.strip_suffix(suffix)
            .filter(|head| head.chars().count() >= min)
    };
    if let Some(head) = cut("ies", 3) {
        return format!("{head}y");
    }
    if let Some(head) = cut("ing", 3).or_else(|| cut("ed", 3)) {
        return head.to_owned();
    }
    if !word.ends_with("ss") {
        if let Some(head) = cut("s", 3) {
            return head.to_owned();
        }
    }
    word.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tool(name: &str, description: &str, arguments: &[&str]) -> Tool {
        let properties: serde_json::Map<String, serde_json::Value> = arguments
            .iter()
            .map(|a| ((*a).to_owned(), serde_json::json!({"type": "string"})))
            .collect();
        let schema = serde_json::json!({"type": "object", "properties": properties});
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema))
    }

    fn index() -> ToolIndex {
        let tools = [
            tool(
                "fs__read_text_file",
                "Read the complete contents of a file from the file system as text.",
                &["path", "head", "tail"],
            ),
            tool(
                "fs__list_directory",
                "Get a detailed listing of all files and directories in a specified path.",
                &["path"],
            ),
            tool(
                "git__git_commit",
                "Records changes to the repository",
                &["repo_path", "message"],
            ),
            tool(
                "memory__create_entities",
                "Create multiple new entities in the knowledge graph",
                &["entities"],
            ),
        ];
        ToolIndex::new(tools.iter())
    }

    #[test]
    fn words_split_names_and_cut_endings() {
        assert_eq!(words("git__git_commit"), ["git", "git", "commit"]);
        assert_eq!(words("readFileContents"), ["read", "file", "content"]);
        assert_eq!(words("Listing the entities"), ["list", "entity"]);
        assert_eq!(words("class access"), ["class", "access"]);
    }

    #[test]
    fn finds_tools_by_what_they_do() {
        let index = index();
        assert_eq!(index.search("read a file", 1), ["fs__read_text_file"]);
        assert_eq!(index.search("commit changes", 1), ["git__git_commit"]);
        assert_eq!(
            index.search("knowledge graph entity", 1),
            ["memory__create_entities"]
        );
        assert_eq!(index.search("list directories", 1), ["fs__list_directory"]);
    }

    #[test]
    fn weak_matches_are_left_out() {
        let index = index();
        // "path" is an argument of three tools; "read" names one of them.
        assert_eq!(index.search("read path", 5), ["fs__read_text_file"]);
    }

    #[test]
    fn an_exact_name_comes_first_and_nothing_matches_nothing() {
        let index = index();
        assert_eq!(
            index.search("git__git_commit path", 2)[0],
            "git__git_commit"
        );
        assert!(index.search("kubernetes", 5).is_empty());
        assert!(index.search("", 5).is_empty());
        assert_eq!(index.len(), 4);
    }
}
