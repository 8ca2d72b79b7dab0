//! Editing `pipeline_config.toml` without losing what a person wrote.
//!
//! The file has two authors: people, and `devboy tune`. The tuner edits
//! the file in place with `toml_edit`, which keeps every comment, blank
//! line, key order and quoting it does not touch, and it marks each value
//! it sets with a trailing comment:
//!
//! ```toml
//! [endpoints.search__code]
//! dedup = false  # tune: D1 2026-05-12: 0.4% of 312 results repeated …
//! ```
//!
//! That mark is how the two authors are told apart on the next run:
//!
//! - a value with the mark is the tuner's, and the tuner may change it;
//! - an endpoint key without it is a person's, and holds: no rule changes
//!   it, nor sets the same key for an endpoint its pattern matches (a
//!   person's `[endpoints."search__*"] dedup = true` keeps D1 away from
//!   every `search__` tool);
//! - a top-level key without it is a person's when its value differs from
//!   the built-in default (a key at its default, such as those of the
//!   documented file written on first use, says nothing either way).
//!
//! To make a tuned value your own, delete its `# tune:` comment.
//!
//! The marks work the same for every value the tuner writes: numbers,
//! strings (`[profiles] model = "…"`), and `follow_up` arrays of inline
//! tables, whose mark follows the closing bracket.
//!
//! # Schema versions
//!
//! Version 2 is a strict subset of version 3, and devboy refuses a
//! version 3 key in a file that says `schema_version = 2`. So when the
//! tuner writes a key only version 3 knows ([`needs_v3`]) into such a
//! file, it also sets `schema_version = 3` (marked like any value it
//! sets); every other line keeps its meaning. [`ConfigFile::bumped`] tells
//! the caller, whose report says so. Version 1 files are never edited.
//!
//! Every edited text is parsed again with devboy's own loader
//! ([`PipelineConfig::from_str`]) before it is written, and the write
//! replaces the file atomically (temporary file, then rename).

use std::path::{Path, PathBuf};

use devboy_core::pipeline_config::schema;
use devboy_core::pipeline_config::{PipelineConfig, EMBEDDED_PIPELINE_TOML, SCHEMA_VERSION};
use globset::Glob;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, Value};

use crate::error::TuneError;
use crate::rules::{Change, Setting, Target};

/// `config`, unless devboy left some of it out: the tuner edits and writes
/// only files devboy reads whole, so that what it tunes is what runs.
fn loaded_whole(config: PipelineConfig) -> Result<PipelineConfig, TuneError> {
    if config.problems.is_empty() {
        Ok(config)
    } else {
        Err(TuneError::Refused(format!(
            "fix the pipeline config first (devboy leaves these out):\n{}",
            config.problems.join("\n")
        )))
    }
}

/// The start of the trailing comment that marks a value as the tuner's.
pub const MARK: &str = "# tune:";

/// The comment put above the first endpoint table the tuner adds.
const HEADER: &str =
    "# Set by `devboy tune` (values marked `# tune:`; delete the mark to make a value yours).";

/// A `pipeline_config.toml` being edited.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    /// Where it is read from and written to.
    pub path: PathBuf,
    /// Whether the file existed (else the text is the embedded default).
    pub existed: bool,
    /// The `schema_version` this edit raised from 2 to 3, if it did.
    bumped: bool,
    doc: DocumentMut,
    /// The project's committed file this one is read on top of
    /// ([`PipelineConfig::layered`]), if there is one.
    project: Option<Box<ConfigFile>>,
}

impl ConfigFile {
    /// Reads `path`, or starts from the documented embedded default when
    /// it does not exist. The text must load as a pipeline config.
    pub fn open(path: &Path) -> Result<Self, TuneError> {
        Self::open_over(path, None)
    }

    /// [`ConfigFile::open`] for a member's own file read on top of a
    /// project's committed `project` file: its effective config is the
    /// two layered, and a file that does not exist yet starts with no
    /// keys of its own (the documented default would set, and so
    /// override, every key of the project's).
    pub fn open_over(path: &Path, project: Option<&Path>) -> Result<Self, TuneError> {
        let base = match project {
            Some(p) if p.is_file() => Some(Box::new(Self::open(p)?)),
            Some(p) => {
                return Err(TuneError::io(
                    p,
                    std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
                ))
            }
            None => None,
        };
        let (text, existed) = match std::fs::read_to_string(path) {
            Ok(text) => (text, true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match base {
                Some(_) => (
                    format!(
                        "# devboy's pipeline config: this member's own values, on top of the project's {}\nschema_version = {SCHEMA_VERSION}\n",
                        project.map(|p| p.display().to_string()).unwrap_or_default()
                    ),
                    false,
                ),
                None => (EMBEDDED_PIPELINE_TOML.to_owned(), false),
            },
            Err(e) => return Err(TuneError::io(path, e)),
        };
        let mut file = Self::from_text(path, &text, existed)?;
        file.project = base;
        Ok(file)
    }

    /// A file at `path` holding `text`.
    pub fn from_text(path: &Path, text: &str, existed: bool) -> Result<Self, TuneError> {
        loaded_whole(PipelineConfig::from_str(text, path)?)?;
        let doc = text.parse::<DocumentMut>().map_err(|e| TuneError::Toml {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(ConfigFile {
            path: path.to_path_buf(),
            existed,
            bumped: false,
            doc,
            project: None,
        })
    }

    /// The text as it stands.
    pub fn text(&self) -> String {
        self.doc.to_string()
    }

    /// The text loaded as a config.
    pub fn config(&self) -> Result<PipelineConfig, TuneError> {
        loaded_whole(match &self.project {
            Some(project) => project.config()?.overlaid(&self.text(), &self.path)?,
            None => PipelineConfig::from_str(&self.text(), &self.path)?,
        })
    }

    /// The file's `schema_version` (the current one when absent).
    pub fn schema_version(&self) -> i64 {
        self.doc
            .get("schema_version")
            .and_then(Item::as_integer)
            .unwrap_or(i64::from(SCHEMA_VERSION))
    }

    /// Whether an [`ConfigFile::apply`] raised `schema_version` from 2 to 3
    /// (see the module docs).
    pub fn bumped(&self) -> bool {
        self.bumped
    }

    /// The hand edit that holds `target`, as written, if one does; see the
    /// module docs. `defaults` is the built-in config.
    pub fn held_by_hand(&self, target: &Target, defaults: &PipelineConfig) -> Option<String> {
        // A person's value in the project's committed file holds too: a
        // member's tuner does not undo what the team decided by hand.
        self.held_here(target, defaults).or_else(|| {
            let project = self.project.as_ref()?;
            project
                .held_here(target, defaults)
                .map(|by| format!("{by} (in {})", project.path.display()))
        })
    }

    fn held_here(&self, target: &Target, defaults: &PipelineConfig) -> Option<String> {
        match target {
            Target::Global { section, key } => {
                let value = self
                    .doc
                    .get(section)?
                    .as_table_like()?
                    .get(key)?
                    .as_value()?;
                if is_marked(value)
                    || default_of(section, key, defaults).is_some_and(|d| same_value(&d, value))
                {
                    return None;
                }
                Some(format!("[{section}] {key} = {}", value_text(value)))
            }
            Target::Endpoint { name, key, .. } => self.held_in("endpoints", name, key),
            Target::Tool { name, key } => self.held_in("tools", name, key),
        }
    }

    /// A person's value of `key` in a `[<section>."PATTERN"]` table whose
    /// pattern matches `name`.
    fn held_in(&self, section: &str, name: &str, key: &str) -> Option<String> {
        let tables = self.doc.get(section)?.as_table_like()?;
        tables.iter().find_map(|(pattern, item)| {
            let value = item.as_table_like()?.get(key)?.as_value()?;
            let matches = Glob::new(pattern)
                .map(|g| g.compile_matcher().is_match(name))
                .unwrap_or(pattern == name);
            (matches && !is_marked(value))
                .then(|| format!("[{section}.\"{pattern}\"] {key} = {}", value_text(value)))
        })
    }

    /// Whether the value at `target` carries the tuner's mark.
    pub fn is_tuned(&self, target: &Target) -> bool {
        let value = match target {
            Target::Global { section, key } => self
                .doc
                .get(section)
                .and_then(Item::as_table_like)
                .and_then(|t| t.get(key)),
            Target::Endpoint { name, key, .. } | Target::Tool { name, key } => self
                .doc
                .get(section_of(target))
                .and_then(Item::as_table_like)
                .and_then(|t| t.get(name))
                .and_then(Item::as_table_like)
                .and_then(|t| t.get(key)),
        };
        value.and_then(Item::as_value).is_some_and(is_marked)
    }

    /// Sets `change.to` at `change.target`, marked with `date` and the
    /// reason. An endpoint table written inline (`"x" = { … }`) cannot carry
    /// the mark and is left alone (returns `false`).
    pub fn apply(&mut self, change: &Change, date: &str) -> bool {
        let comment = format!(
            "  {MARK} {} {date}: {}",
            change.rule,
            one_line(&change.reason)
        );
        let value = toml_value(&change.to);
        if needs_v3(&change.target) && self.schema_version() == 2 {
            self.bump_to_v3(&change.target);
        }
        match &change.target {
            Target::Global { section, key } => {
                let item = self
                    .doc
                    .entry(section)
                    .or_insert_with(|| Item::Table(Table::new()));
                match item.as_table_mut() {
                    Some(table) => {
                        set(table, key, value, comment);
                        true
                    }
                    None => false,
                }
            }
            Target::Endpoint { name, key, .. } | Target::Tool { name, key } => {
                let header_needed = !self.doc.to_string().contains(HEADER);
                // Comments after the last table (the documented default ends
                // with the explanation of these tables) stay above the
                // tables the tuner adds, which go last.
                let trailing = self.doc.trailing().as_str().unwrap_or_default().to_owned();
                let endpoints = self
                    .doc
                    .entry(section_of(&change.target))
                    .or_insert_with(|| {
                        let mut t = Table::new();
                        t.set_implicit(true);
                        Item::Table(t)
                    });
                let Some(endpoints) = endpoints.as_table_mut() else {
                    return false;
                };
                let mut moved_trailing = false;
                if endpoints.get(name).is_none() {
                    let mut t = Table::new();
                    let mut prefix = if header_needed {
                        format!("\n{HEADER}\n")
                    } else {
                        "\n".to_owned()
                    };
                    if !trailing.trim().is_empty() {
                        prefix = format!(
                            "{}{prefix}",
                            trailing.trim_end_matches('\n').to_owned() + "\n"
                        );
                        moved_trailing = true;
                    }
                    t.decor_mut().set_prefix(prefix);
                    // Quoted, as the documented examples write them.
                    match quoted_key(name) {
                        Some(key) => endpoints.insert_formatted(&key, Item::Table(t)),
                        None => endpoints.insert(name, Item::Table(t)),
                    };
                }
                let done = match endpoints.get_mut(name).and_then(Item::as_table_mut) {
                    Some(table) => {
                        set(table, key, value, comment);
                        true
                    }
                    None => false,
                };
                if moved_trailing {
                    self.doc.set_trailing("");
                }
                done
            }
        }
    }

    /// `schema_version = 2` → `3`, keeping how the line is written and any
    /// comment on it; a line without a comment gets the tuner's mark
    /// saying why.
    fn bump_to_v3(&mut self, target: &Target) {
        let Some(Item::Value(old)) = self.doc.get_mut("schema_version") else {
            return;
        };
        let mut value = Value::from(i64::from(SCHEMA_VERSION));
        let decor = old.decor().clone();
        *value.decor_mut() = decor;
        let commented = value
            .decor()
            .suffix()
            .and_then(|s| s.as_str())
            .is_some_and(|s| s.contains('#'));
        if !commented {
            value.decor_mut().set_suffix(format!(
                "  {MARK} was 2; {target} needs version 3 (version 2 is a subset of it)"
            ));
        }
        *old = value;
        self.bumped = true;
    }

    /// Writes the text to the file, after checking that devboy loads it.
    /// Through a symlink, the link's target is replaced.
    pub fn write(&self) -> Result<(), TuneError> {
        let text = self.text();
        loaded_whole(PipelineConfig::from_str(&text, &self.path)?)?;
        let target = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| TuneError::io(parent, e))?;
        }
        devboy_sharedfile::replace_shared(&target, text.as_bytes())
            .map_err(|e| TuneError::io(&target, e))
    }
}

/// The top-level table of a pattern target.
fn section_of(target: &Target) -> &'static str {
    match target {
        Target::Tool { .. } => "tools",
        _ => "endpoints",
    }
}

/// Sets `key` in `table`, keeping the key (and the comments above it) and
/// the spacing before the value when the key exists.
fn set(table: &mut Table, key: &str, mut value: Value, comment: String) {
    value.decor_mut().set_suffix(comment);
    match table.get_mut(key) {
        Some(item) => {
            let prefix = item
                .as_value()
                .and_then(|v| v.decor().prefix())
                .and_then(|p| p.as_str())
                .unwrap_or(" ")
                .to_owned();
            value.decor_mut().set_prefix(prefix);
            *item = Item::Value(value);
        }
        None => {
            value.decor_mut().set_prefix(" ");
            table.insert(key, Item::Value(value));
        }
    }
}

/// `name` as a quoted key (`"gh__list_issues"`).
fn quoted_key(name: &str) -> Option<toml_edit::Key> {
    Value::from(name).to_string().trim().parse().ok()
}

fn is_marked(value: &Value) -> bool {
    value
        .decor()
        .suffix()
        .and_then(|s| s.as_str())
        .is_some_and(|s| s.trim_start().starts_with(MARK))
}

fn value_text(value: &Value) -> String {
    let mut v = value.clone();
    v.decor_mut().clear();
    v.to_string()
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

fn toml_value(s: &Setting) -> Value {
    match s {
        Setting::Bool(b) => Value::from(*b),
        Setting::Int(n) => Value::from(i64::try_from(*n).unwrap_or(i64::MAX)),
        Setting::Str(s) => Value::from(s.as_str()),
        // Never a value to write; an empty string fails the loader's check
        // before anything is written.
        Setting::Unset => Value::from(""),
        Setting::FollowUps(links) => {
            // `[{ tool = "…", probability = 0.45 }, …]` on one line, so
            // the mark after it covers the whole list.
            let mut array = Array::new();
            for (tool, p) in links {
                let mut t = InlineTable::new();
                t.insert("tool", Value::from(tool.as_str()));
                t.insert("probability", Value::from(f64::from(*p) / 100.0));
                array.push(Value::InlineTable(t));
            }
            Value::Array(array)
        }
    }
}

/// The report's line for a `schema_version` raised from 2 to 3.
pub fn bump_note(path: &Path, dry_run: bool) -> String {
    format!(
        "{}: schema_version 2 -> 3{}, because a key written is new in version 3; version 2 is a subset of version 3, so every other line keeps its meaning",
        path.display(),
        if dry_run { " (would be)" } else { "" }
    )
}

/// Whether writing `target` needs `schema_version = 3`: the description
/// of the file dates the key after version 2.
pub fn needs_v3(target: &Target) -> bool {
    let path = match target {
        Target::Global { section, key } => format!("{section}.{key}"),
        Target::Endpoint { key, .. } => format!("endpoints.*.{key}"),
        Target::Tool { key, .. } => format!("tools.*.{key}"),
    };
    schema::lookup(&path).is_some_and(|k| k.since > 2)
}

/// The built-in value of a top-level key, as the file would write it
/// (`None` for a key unset by default, such as `profiles.model`: any
/// model written by hand holds).
fn default_of(section: &str, key: &str, defaults: &PipelineConfig) -> Option<Value> {
    Some(match defaults.key_value(&format!("{section}.{key}"), 0)? {
        schema::KeyValue::Bool(b) => Value::from(b),
        schema::KeyValue::Count(n) => Value::from(i64::try_from(n).ok()?),
        schema::KeyValue::Fraction(x) => Value::from(x),
        schema::KeyValue::Text(s) => Value::from(s),
        schema::KeyValue::Globs(_)
        | schema::KeyValue::Paths(_)
        | schema::KeyValue::FollowUps(_) => return None,
        // A name: `auto`, `o200k`, `read_only`, …
        name => Value::from(name.to_string()),
    })
}

/// Whether two values are equal, ignoring how they are written.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Integer(a), Value::Integer(b)) => a.value() == b.value(),
        (Value::Boolean(a), Value::Boolean(b)) => a.value() == b.value(),
        (Value::String(a), Value::String(b)) => a.value() == b.value(),
        (Value::Float(a), Value::Float(b)) => a.value() == b.value(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::Rule;

    const HAND: &str = r#"# my pipeline config
schema_version = 2

[dedup]
# I like a long TTL
ttl_secs = 7200
max_entries = 256   # the default, says nothing

[endpoints."gh__*"]
dedup = true        # mine

[tools."fs__write_*"]
side_effect = "mutating"
"#;

    fn change(rule: Rule, target: Target, to: Setting) -> Change {
        Change {
            rule,
            target,
            from: Setting::Bool(true),
            to,
            reason: "because\nreasons".into(),
        }
    }

    fn global(key: &'static str) -> Target {
        Target::Global {
            section: "dedup",
            key,
        }
    }

    fn endpoint(name: &str, key: &'static str) -> Target {
        Target::Endpoint {
            name: name.into(),
            tool: 1,
            key,
        }
    }

    fn file(text: &str) -> ConfigFile {
        ConfigFile::from_text(Path::new("/x/pipeline_config.toml"), text, true).unwrap()
    }

    #[test]
    fn apply_keeps_every_line_it_does_not_change() {
        let mut f = file(HAND);
        assert!(f.apply(
            &change(Rule::C1, global("max_entries"), Setting::Int(512)),
            "2026-05-12"
        ));
        assert!(f.apply(
            &change(
                Rule::T1,
                endpoint("gh__list_issues", "template"),
                Setting::Str("md_tables_csv".into())
            ),
            "2026-05-12"
        ));
        assert!(f.apply(
            &change(
                Rule::P3,
                Target::Tool {
                    name: "fs__read_text_file".into(),
                    key: "side_effect"
                },
                Setting::Str("read_only".into())
            ),
            "2026-05-12"
        ));
        let text = f.text();
        for line in HAND.lines().filter(|l| !l.starts_with("max_entries")) {
            assert!(text.contains(line), "lost {line:?}:\n{text}");
        }
        assert!(
            text.contains("max_entries = 512  # tune: C1 2026-05-12: because reasons\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "[endpoints.\"gh__list_issues\"]\ntemplate = \"md_tables_csv\"  # tune: T1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "[tools.\"fs__read_text_file\"]\nside_effect = \"read_only\"  # tune: P3"
            ),
            "{text}"
        );
        assert!(text.contains(HEADER), "{text}");
        // The new endpoint table comes after the hand-written one.
        assert!(text.find("gh__list_issues").unwrap() > text.find("\"gh__*\"").unwrap());
        let config = f.config().unwrap();
        assert_eq!(config.dedup.max_entries, 512);
        assert_eq!(config.dedup.ttl.as_secs(), 7200);
        let s = config.endpoint("gh__list_issues");
        assert_eq!(s.template.as_deref(), Some("md_tables_csv"));
        assert!(s.dedup, "the hand-written glob still applies");
    }

    #[test]
    fn hand_edits_are_told_apart_from_defaults_and_tuned_values() {
        let defaults = PipelineConfig::embedded_default();
        let mut f = file(HAND);
        assert_eq!(
            f.held_by_hand(&global("ttl_secs"), &defaults).as_deref(),
            Some("[dedup] ttl_secs = 7200")
        );
        assert_eq!(f.held_by_hand(&global("max_entries"), &defaults), None);
        assert_eq!(f.held_by_hand(&global("min_body_bytes"), &defaults), None);
        assert_eq!(
            f.held_by_hand(&endpoint("gh__search", "dedup"), &defaults)
                .as_deref(),
            Some("[endpoints.\"gh__*\"] dedup = true")
        );
        assert_eq!(
            f.held_by_hand(&endpoint("gh__search", "near_ref"), &defaults),
            None
        );
        assert_eq!(
            f.held_by_hand(&endpoint("fs__read", "dedup"), &defaults),
            None
        );
        let tool = Target::Tool {
            name: "fs__write_file".into(),
            key: "side_effect",
        };
        assert!(f.held_by_hand(&tool, &defaults).is_some());
        // What the tuner writes is its own next time.
        f.apply(
            &change(Rule::C1, global("max_entries"), Setting::Int(1024)),
            "2026-05-12",
        );
        f.apply(
            &change(
                Rule::D1,
                endpoint("fs__read", "dedup"),
                Setting::Bool(false),
            ),
            "2026-05-12",
        );
        let again = file(&f.text());
        assert!(again.is_tuned(&global("max_entries")));
        assert!(again.is_tuned(&endpoint("fs__read", "dedup")));
        assert_eq!(again.held_by_hand(&global("max_entries"), &defaults), None);
        assert_eq!(
            again.held_by_hand(&endpoint("fs__read", "dedup"), &defaults),
            None
        );
        assert!(!again.is_tuned(&global("ttl_secs")));
    }

    #[test]
    fn a_tuned_value_is_updated_in_place() {
        let mut f = file(HAND);
        f.apply(
            &change(
                Rule::D1,
                endpoint("fs__read", "dedup"),
                Setting::Bool(false),
            ),
            "2026-05-12",
        );
        f.apply(
            &change(Rule::D2, endpoint("fs__read", "dedup"), Setting::Bool(true)),
            "2026-06-12",
        );
        let text = f.text();
        assert_eq!(
            text.matches("[endpoints.\"fs__read\"]").count(),
            1,
            "{text}"
        );
        assert!(
            text.contains("dedup = true  # tune: D2 2026-06-12"),
            "{text}"
        );
        assert!(!text.contains("D1"), "{text}");
    }

    #[test]
    fn inline_tables_are_left_alone() {
        let mut f = file("[endpoints]\nx = { dedup = true }\n");
        assert!(!f.apply(
            &change(Rule::D1, endpoint("x", "near_ref"), Setting::Bool(true)),
            "d"
        ));
        assert!(f.apply(
            &change(Rule::D1, endpoint("y", "dedup"), Setting::Bool(false)),
            "d"
        ));
        let config = f.config().unwrap();
        assert!(!config.endpoint("y").dedup);
        assert!(config.endpoint("x").dedup);
    }

    #[test]
    fn a_missing_file_starts_from_the_documented_default_and_writes_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("pipeline_config.toml");
        let mut f = ConfigFile::open(&path).unwrap();
        assert!(!f.existed);
        f.apply(
            &change(Rule::C1, global("max_entries"), Setting::Int(512)),
            "d",
        );
        f.apply(
            &change(
                Rule::D1,
                endpoint("gh__search", "dedup"),
                Setting::Bool(false),
            ),
            "d",
        );
        f.write().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, f.text());
        assert!(
            text.starts_with("# pipeline_config.toml"),
            "documentation kept"
        );
        assert!(text.contains("max_entries = 512  # tune: C1"));
        // The documentation of the tables stays above the tables added.
        let docs = text.find("# [tools.\"fs__read_*\"]").unwrap();
        let table = text.find("[endpoints.\"gh__search\"]").unwrap();
        assert!(docs < table, "{text}");
        assert!(
            text.trim_end()
                .ends_with("dedup = false  # tune: D1 d: because reasons"),
            "{text}"
        );
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
        let reopened = ConfigFile::open(&path).unwrap();
        assert!(reopened.existed);
    }

    #[test]
    fn an_invalid_file_is_an_error_naming_it() {
        let err = ConfigFile::from_text(Path::new("/x/p.toml"), "[dedup]\nmax_entires = 3\n", true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/x/p.toml") && err.contains("max_entires"),
            "{err}"
        );
    }

    fn tool(name: &str, key: &'static str) -> Target {
        Target::Tool {
            name: name.into(),
            key,
        }
    }

    fn profiles(key: &'static str) -> Target {
        Target::Global {
            section: "profiles",
            key,
        }
    }

    fn follow_ups(links: &[(&str, u32)]) -> Setting {
        Setting::FollowUps(links.iter().map(|(t, p)| ((*t).into(), *p)).collect())
    }

    #[test]
    fn follow_up_is_written_as_one_marked_line_of_inline_tables() {
        let mut f = file(HAND);
        let to = follow_ups(&[("fs__list_directory", 45), ("gh__get_issue", 100)]);
        assert!(f.apply(
            &change(Rule::P3, tool("fs__read_text_file", "follow_up"), to),
            "d"
        ));
        let text = f.text();
        assert!(
            text.contains("[tools.\"fs__read_text_file\"]\nfollow_up = [{ tool = \"fs__list_directory\", probability = 0.45 }, { tool = \"gh__get_issue\", probability = 1.0 }]  # tune: P3 d: because reasons\n"),
            "{text}"
        );
        // devboy reads it back as written.
        let model = f.config().unwrap().tool_model("fs__read_text_file");
        let links: Vec<(&str, f64)> = model
            .follow_up
            .iter()
            .map(|l| (l.tool.as_str(), l.probability))
            .collect();
        assert_eq!(
            links,
            vec![("fs__list_directory", 0.45), ("gh__get_issue", 1.0)]
        );
        // The tuner's own next time; a person's once the mark is gone.
        let defaults = PipelineConfig::embedded_default();
        let again = file(&text);
        let target = tool("fs__read_text_file", "follow_up");
        assert!(again.is_tuned(&target));
        assert_eq!(again.held_by_hand(&target, &defaults), None);
        let by_hand = file(&text.replace("  # tune: P3 d: because reasons", ""));
        assert!(by_hand
            .held_by_hand(&target, &defaults)
            .is_some_and(|b| b.starts_with("[tools.\"fs__read_text_file\"] follow_up = [{ tool")));
        // A multi-line list written by hand holds too.
        let multi = "schema_version = 3\n[tools.\"fs__*\"]\nfollow_up = [\n  { tool = \"a__b\", probability = 0.5 },\n]\n";
        assert!(file(multi).held_by_hand(&target, &defaults).is_some());
    }

    #[test]
    fn typical_tokens_and_profile_strings_are_set_and_told_apart() {
        let defaults = PipelineConfig::embedded_default();
        let mut f = file("schema_version = 3\n\n[profiles]\nclient = \"auto\"\n");
        assert!(f.apply(
            &change(
                Rule::V1,
                tool("gh__search", "typical_tokens"),
                Setting::Int(1800)
            ),
            "d"
        ));
        assert!(f.apply(
            &change(
                Rule::P1,
                profiles("model"),
                Setting::Str("claude-x-1".into())
            ),
            "d"
        ));
        assert!(f.apply(
            &change(Rule::P2, profiles("agent"), Setting::Str("marathon".into())),
            "d"
        ));
        let text = f.text();
        assert!(
            text.contains("[profiles]\nclient = \"auto\"\nmodel = \"claude-x-1\"  # tune: P1 d: because reasons\nagent = \"marathon\"  # tune: P2"),
            "{text}"
        );
        assert!(text.contains("typical_tokens = 1800  # tune: V1"), "{text}");
        assert!(!f.bumped(), "already version 3");
        let config = f.config().unwrap();
        assert_eq!(config.tool_model("gh__search").typical_tokens, Some(1800));
        assert_eq!(config.profiles.model.as_deref(), Some("claude-x-1"));
        let again = file(&text);
        for t in [
            profiles("model"),
            profiles("agent"),
            tool("gh__search", "typical_tokens"),
        ] {
            assert!(again.is_tuned(&t), "{t}");
            assert_eq!(again.held_by_hand(&t, &defaults), None, "{t}");
        }
        // By hand: a model always holds (it has no default); an agent or
        // llm selection holds unless it is the default "auto".
        let hand = file(
            "schema_version = 3\n[profiles]\nmodel = \"gpt-4o\"\nagent = \"auto\"\nllm = \"claude\"\n",
        );
        assert_eq!(
            hand.held_by_hand(&profiles("model"), &defaults).as_deref(),
            Some("[profiles] model = \"gpt-4o\"")
        );
        assert_eq!(hand.held_by_hand(&profiles("agent"), &defaults), None);
        assert_eq!(
            hand.held_by_hand(&profiles("llm"), &defaults).as_deref(),
            Some("[profiles] llm = \"claude\"")
        );
        let marathon = file("schema_version = 3\n[profiles]\nagent = \"marathon\"\n");
        assert!(marathon
            .held_by_hand(&profiles("agent"), &defaults)
            .is_some());
    }

    #[test]
    fn a_version_3_key_raises_schema_version_2_and_nothing_else_does() {
        // A version 2 key leaves version 2 alone.
        let mut f = file(HAND);
        f.apply(
            &change(
                Rule::P3,
                tool("fs__read_text_file", "side_effect"),
                Setting::Str("read_only".into()),
            ),
            "d",
        );
        assert!(!f.bumped());
        assert!(f.text().contains("\nschema_version = 2\n"));
        // A version 3 key raises it, and the result loads (as version 3).
        f.apply(
            &change(
                Rule::V1,
                tool("gh__search", "typical_tokens"),
                Setting::Int(900),
            ),
            "d",
        );
        assert!(f.bumped());
        let text = f.text();
        assert!(
            text.contains("\nschema_version = 3  # tune: was 2; [tools.\"gh__search\"] typical_tokens needs version 3 (version 2 is a subset of it)\n"),
            "{text}"
        );
        let config = f.config().unwrap();
        assert_eq!(config.file_version, 3);
        assert_eq!(config.dedup.ttl.as_secs(), 7200, "the rest means the same");
        // Without the bump, devboy would refuse the key: the bump is needed.
        let unbumped = text.replace("schema_version = 3", "schema_version = 2");
        let err = ConfigFile::from_text(Path::new("/x/p.toml"), &unbumped, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("schema_version = 3"), "{err}");
        // A comment on the line is kept rather than replaced.
        let mut f = file("schema_version = 2 # mine\n");
        f.apply(
            &change(Rule::P1, profiles("model"), Setting::Str("m".into())),
            "d",
        );
        assert!(
            f.text().starts_with("schema_version = 3 # mine\n"),
            "{}",
            f.text()
        );
        // A file without schema_version is read as the current version.
        let mut f = file("[dedup]\nenabled = true\n");
        f.apply(
            &change(Rule::P1, profiles("model"), Setting::Str("m".into())),
            "d",
        );
        assert!(!f.bumped() && !f.text().contains("schema_version"));
        f.config().unwrap();
    }

    #[test]
    fn which_keys_need_version_3() {
        assert!(needs_v3(&profiles("model")));
        assert!(needs_v3(&profiles("agent")));
        assert!(!needs_v3(&profiles("tokenizer")));
        assert!(!needs_v3(&global("max_entries")));
        assert!(needs_v3(&tool("x__y", "follow_up")));
        assert!(needs_v3(&tool("x__y", "typical_tokens")));
        assert!(!needs_v3(&tool("x__y", "side_effect")));
        assert!(!needs_v3(&endpoint("x__y", "dedup")));
    }
}
