//! One tool call, resolved once where it is routed.
//!
//! Every fact about a call that more than one layer needs is decided here,
//! by one rule each, and every layer reads it from the [`ResolvedCall`]
//! (docs/invariants.md, "One resolved call"):
//!
//! - its identity, [`CallKey`]: the exposed name and the arguments written
//!   canonically (object keys sorted at every depth, no arguments the same
//!   as `{}`), for the dedup cache, the prefetch store, the planner,
//!   telemetry and the capture alike;
//! - its effective side-effect class, [`side_effect`]: the user's config,
//!   else the server's annotations, else what devboy ships for well-known
//!   servers, else the verb of the tool's name, else unknown;
//! - the paths it names ([`paths_in_arguments`]), which it reads and, when
//!   its class may mutate, may write;
//! - where it goes and what the client is shown of its result.

use serde_json::{Map, Value};

use crate::pipeline_config::{PipelineConfig, SideEffectClass};
use crate::speculation::Served;
use crate::tool_verb::VerbClass;

/// A call's identity: the exposed name and the arguments with object keys
/// sorted at every depth (no arguments and `{}` are the same call; array
/// order is meaning and is kept).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallKey {
    /// `exposed`, a NUL (never in a tool name), the canonical arguments.
    text: String,
    split: usize,
}

impl CallKey {
    /// The key of a call of `exposed` with `arguments`.
    pub fn new(exposed: &str, arguments: Option<&Map<String, Value>>) -> Self {
        let mut text = String::with_capacity(exposed.len() + 64);
        text.push_str(exposed);
        text.push('\0');
        match arguments {
            Some(map) => write_object(map, &mut text),
            None => text.push_str("{}"),
        }
        Self {
            text,
            split: exposed.len(),
        }
    }

    /// The exposed tool name.
    pub fn exposed(&self) -> &str {
        &self.text[..self.split]
    }

    /// The arguments, canonically written.
    pub fn arguments(&self) -> &str {
        &self.text[self.split + 1..]
    }

    /// The key as bytes, for hashing (telemetry's salted call key, the
    /// dedup cache's call fingerprint).
    pub fn as_bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

/// `map` as compact JSON with every object's keys sorted, at every depth:
/// two argument objects that mean the same are written the same, whatever
/// order their keys came in (array order is kept: it is meaning).
pub fn canonical_object(map: &Map<String, Value>) -> String {
    let mut out = String::with_capacity(64);
    write_object(map, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => write_object(map, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn write_object(map: &Map<String, Value>, out: &mut String) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(key.clone()).to_string());
        out.push(':');
        write_canonical(value, out);
    }
    out.push('}');
}

/// The argument names whose values are paths a call reads or writes.
pub const PATH_ARGUMENTS: &[&str] = &[
    "path",
    "paths",
    "file_path",
    "filePath",
    "file",
    "files",
    "source",
    "destination",
    "target",
    "directory",
    "dir",
];

/// The paths named in a call's arguments (see [`PATH_ARGUMENTS`]), in
/// order, without duplicates. Nested objects are not searched: a path deep
/// inside a payload is data, not the call's target.
pub fn paths_in_arguments(arguments: Option<&Map<String, Value>>) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    let Some(arguments) = arguments else {
        return paths;
    };
    let mut push = |value: &str| {
        if !value.is_empty() && !paths.iter().any(|p| p == value) {
            paths.push(value.to_owned());
        }
    };
    for key in PATH_ARGUMENTS {
        match arguments.get(*key) {
            Some(Value::String(s)) => push(s),
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).for_each(&mut push),
            _ => {}
        }
    }
    paths
}

/// Where a side-effect class came from, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClassSource {
    /// A `[tools."GLOB"]` table's `side_effect`: the user's word.
    Config,
    /// The server's MCP annotations (`readOnlyHint`, `destructiveHint`).
    Annotations,
    /// devboy's table of well-known servers' tools.
    Shipped,
    /// The verb of the tool's name (`read_file`, `create_issue`): a guess.
    Verb,
    /// Nothing says; the class is unknown.
    Nothing,
}

/// What is known of a tool before the config is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolClassFacts<'a> {
    /// What the server's annotations say (unknown without them).
    pub annotated: SideEffectClass,
    /// What devboy ships for this tool of a well-known server.
    pub shipped: Option<SideEffectClass>,
    /// The tool's name, whose verb is the last resort (the upstream's
    /// name, or the exposed name when only that is known).
    pub name: &'a str,
}

impl<'a> ToolClassFacts<'a> {
    /// Only the name is known (telemetry and logs hold no annotations).
    pub fn by_name(name: &'a str) -> Self {
        Self {
            annotated: SideEffectClass::Unknown,
            shipped: None,
            name,
        }
    }
}

/// A call's effective side-effect class and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SideEffect {
    /// The class.
    pub class: SideEffectClass,
    /// Which rule gave it.
    pub source: ClassSource,
}

impl SideEffect {
    /// What devboy knows when nothing is said (unknown: may mutate).
    pub const UNKNOWN: SideEffect = SideEffect {
        class: SideEffectClass::Unknown,
        source: ClassSource::Nothing,
    };

    /// A class the caller states itself (a built-in's own annotations, a
    /// replayed body).
    pub fn stated(class: SideEffectClass) -> Self {
        match class {
            SideEffectClass::Unknown => Self::UNKNOWN,
            class => Self {
                class,
                source: ClassSource::Annotations,
            },
        }
    }

    /// Whether the call may change what other calls return: it forgets
    /// what was read from the paths it names (unknown counts as may).
    pub fn may_mutate(self) -> bool {
        self.class.may_mutate()
    }

    /// Whether the call surely changes something (a write: its result
    /// answers that one call and is not expected to repeat).
    pub fn changes_something(self) -> bool {
        matches!(
            self.class,
            SideEffectClass::Mutating | SideEffectClass::Destructive
        )
    }

    /// Whether devboy may make the call before the agent asks: read-only
    /// by a rule stronger than a guess from the name.
    pub fn may_prefetch(self) -> bool {
        !self.class.may_mutate() && self.source < ClassSource::Verb
    }
}

/// The effective side-effect class of the tool exposed as `exposed`: the
/// last matching `[tools."GLOB"]` table that sets `side_effect`, else the
/// server's annotations, else devboy's shipped class for a well-known
/// server's tool, else the class the verb of its name makes evident, else
/// unknown. The one place this is decided (docs/invariants.md).
pub fn side_effect(
    config: &PipelineConfig,
    exposed: &str,
    facts: ToolClassFacts<'_>,
) -> SideEffect {
    let found = |class: SideEffectClass, source| SideEffect { class, source };
    if let Some(class) = config.configured_side_effect(exposed) {
        return found(class, ClassSource::Config);
    }
    if facts.annotated != SideEffectClass::Unknown {
        return found(facts.annotated, ClassSource::Annotations);
    }
    if let Some(class) = facts.shipped.filter(|c| *c != SideEffectClass::Unknown) {
        return found(class, ClassSource::Shipped);
    }
    match VerbClass::of_exposed(facts.name).side_effect() {
        Some(class) => found(class, ClassSource::Verb),
        None => SideEffect::UNKNOWN,
    }
}

/// Where a call goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallRoute {
    /// One of devboy's built-in tools: devboy answers it itself.
    Builtin,
    /// An upstream's tool.
    Upstream {
        /// The upstream's configured name.
        upstream: String,
        /// The tool's name on the upstream.
        tool: String,
    },
}

/// One tool call with every fact the layers share, decided once.
#[derive(Debug, Clone)]
pub struct ResolvedCall {
    /// The name the agent called (what `[endpoints.*]` and `[tools.*]`
    /// globs match).
    pub exposed: String,
    /// Where it goes.
    pub route: CallRoute,
    /// The arguments, as the agent sent them.
    pub arguments: Option<Map<String, Value>>,
    /// Its identity.
    pub key: CallKey,
    /// Its effective side-effect class.
    pub side_effect: SideEffect,
    /// The paths its arguments name: what it reads, and what it may write
    /// when [`SideEffect::may_mutate`].
    pub paths: Vec<String>,
    /// The client shows the model `structuredContent` instead of the text
    /// blocks when a result has it (Claude Code does; see
    /// docs/invariants.md, "The client, as measured").
    pub forwards_structured: bool,
    /// The client's name from `initialize`, if it gave one.
    pub client: Option<String>,
    /// Where the result comes from: the upstream, or a prefetch.
    pub served: Served,
}

impl ResolvedCall {
    /// The call of `exposed` with `arguments` going to `route`, of class
    /// `side_effect`: its key and paths are derived here, and only here.
    pub fn new(
        exposed: impl Into<String>,
        route: CallRoute,
        arguments: Option<Map<String, Value>>,
        side_effect: SideEffect,
    ) -> Self {
        let exposed = exposed.into();
        let key = CallKey::new(&exposed, arguments.as_ref());
        let paths = paths_in_arguments(arguments.as_ref());
        Self {
            exposed,
            route,
            arguments,
            key,
            side_effect,
            paths,
            forwards_structured: false,
            client: None,
            served: Served::Upstream,
        }
    }

    /// This call, as seen by a client that does (or does not) show the
    /// model `structuredContent`, named `client`.
    pub fn shown_to(mut self, forwards_structured: bool, client: Option<String>) -> Self {
        self.forwards_structured = forwards_structured;
        self.client = client;
        self
    }

    /// This call, answered from `served`.
    pub fn served(mut self, served: Served) -> Self {
        self.served = served;
        self
    }

    /// The upstream's configured name (`devboy` for a built-in).
    pub fn upstream(&self) -> &str {
        match &self.route {
            CallRoute::Builtin => crate::SERVER_NAME,
            CallRoute::Upstream { upstream, .. } => upstream,
        }
    }

    /// The tool's name where it is answered (the exposed name for a
    /// built-in).
    pub fn tool(&self) -> &str {
        match &self.route {
            CallRoute::Builtin => &self.exposed,
            CallRoute::Upstream { tool, .. } => tool,
        }
    }

    /// devboy answers it with a built-in tool: its result answers this one
    /// question and gets an id only once the tool's answers repeat.
    pub fn is_builtin(&self) -> bool {
        self.route == CallRoute::Builtin
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn key_order_does_not_matter_at_any_depth() {
        let a = object(json!({"b": 1, "a": {"y": [1, {"q": 2, "p": 3}], "x": null}}));
        let b = object(json!({"a": {"x": null, "y": [1, {"p": 3, "q": 2}]}, "b": 1}));
        assert_eq!(CallKey::new("t", Some(&a)), CallKey::new("t", Some(&b)));
        assert_eq!(
            CallKey::new("t", Some(&a)).arguments(),
            r#"{"a":{"x":null,"y":[1,{"p":3,"q":2}]},"b":1}"#
        );
    }

    #[test]
    fn names_values_and_array_order_do_matter() {
        let a = object(json!({"path": "/a"}));
        let b = object(json!({"path": "/b"}));
        assert_ne!(CallKey::new("t", Some(&a)), CallKey::new("t", Some(&b)));
        assert_ne!(CallKey::new("t", Some(&a)), CallKey::new("u", Some(&a)));
        let c = object(json!({"p": [1, 2]}));
        let d = object(json!({"p": [2, 1]}));
        assert_ne!(CallKey::new("t", Some(&c)), CallKey::new("t", Some(&d)));
        let none = CallKey::new("t", None);
        assert_eq!(none, CallKey::new("t", Some(&Map::new())));
        assert_eq!((none.exposed(), none.arguments()), ("t", "{}"));
        assert_eq!(none.as_bytes(), b"t\0{}");
    }

    #[test]
    fn paths_are_the_named_arguments_in_order_once_each() {
        let args = object(json!({
            "paths": ["/a", "/b", "/a"],
            "path": "/c",
            "content": {"path": "/nested"},
            "destination": "",
        }));
        assert_eq!(paths_in_arguments(Some(&args)), ["/c", "/a", "/b"]);
        assert!(paths_in_arguments(None).is_empty());
    }

    fn config(toml: &str) -> PipelineConfig {
        PipelineConfig::from_str(toml, std::path::Path::new("test.toml")).unwrap()
    }

    #[test]
    fn the_config_beats_annotations_beat_shipped_beats_the_verb() {
        use SideEffectClass::*;
        let plain = config("schema_version = 3\n");
        let facts = |annotated, shipped, name| ToolClassFacts {
            annotated,
            shipped,
            name,
        };
        let class = |c: &PipelineConfig, f| {
            let s = side_effect(c, "s__create_thing", f);
            (s.class, s.source)
        };
        // The verb of `create_thing` says mutating; each stronger rule wins.
        assert_eq!(
            class(&plain, facts(Unknown, None, "create_thing")),
            (Mutating, ClassSource::Verb)
        );
        assert_eq!(
            class(&plain, facts(Unknown, Some(ReadOnly), "create_thing")),
            (ReadOnly, ClassSource::Shipped)
        );
        assert_eq!(
            class(&plain, facts(Destructive, Some(ReadOnly), "create_thing")),
            (Destructive, ClassSource::Annotations)
        );
        let configured =
            config("schema_version = 3\n[tools.\"s__create_*\"]\nside_effect = \"pure\"\n");
        assert_eq!(
            class(
                &configured,
                facts(Destructive, Some(ReadOnly), "create_thing")
            ),
            (Pure, ClassSource::Config)
        );
        // No rule says anything: unknown, which may mutate.
        let none = side_effect(
            &plain,
            "s__frobnicate",
            ToolClassFacts::by_name("frobnicate"),
        );
        assert_eq!(none, SideEffect::UNKNOWN);
        assert!(none.may_mutate() && !none.changes_something() && !none.may_prefetch());
    }

    #[test]
    fn a_guess_from_the_name_never_allows_a_prefetch() {
        let plain = config("schema_version = 3\n");
        let guessed = side_effect(
            &plain,
            "s__read_thing",
            ToolClassFacts::by_name("read_thing"),
        );
        assert_eq!(guessed.class, SideEffectClass::ReadOnly);
        assert!(!guessed.may_mutate() && !guessed.may_prefetch());
        let shipped = side_effect(
            &plain,
            "s__read_thing",
            ToolClassFacts {
                shipped: Some(SideEffectClass::ReadOnly),
                ..ToolClassFacts::by_name("read_thing")
            },
        );
        assert!(shipped.may_prefetch());
    }

    #[test]
    fn a_resolved_call_derives_key_and_paths_once() {
        let args = object(json!({"path": "/x", "b": 1}));
        let call = ResolvedCall::new(
            "fs__read",
            CallRoute::Upstream {
                upstream: "fs".into(),
                tool: "read".into(),
            },
            Some(args.clone()),
            SideEffect::stated(SideEffectClass::ReadOnly),
        );
        assert_eq!(call.key, CallKey::new("fs__read", Some(&args)));
        assert_eq!(call.paths, ["/x"]);
        assert_eq!((call.upstream(), call.tool()), ("fs", "read"));
        let builtin = ResolvedCall::new(
            "devboy_status",
            CallRoute::Builtin,
            None,
            SideEffect::UNKNOWN,
        );
        assert_eq!(
            (builtin.upstream(), builtin.tool()),
            ("devboy", "devboy_status")
        );
        assert!(builtin.is_builtin());
    }
}
