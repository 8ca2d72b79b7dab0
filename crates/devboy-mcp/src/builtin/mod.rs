//! devboy's own tools, served next to the proxied ones.
//!
//! A built-in is a type implementing [`BuiltinTool`] in a file of its own
//! in this module, plus one line in [`BuiltinRegistry::shipped_for`]; the
//! catalog lists the registry's tools first, in registry order. A
//! built-in's call gets a [`BuiltinContext`]: its arguments, progress and
//! cancellation, and the capabilities it may use (an upstream call through
//! the same stack an agent's call takes, the pipeline's memory, the
//! session's figures, the servers, the lazy listing, the session's
//! events). The contract itself lives with the call stack
//! ([`crate::stack`]), which answers built-in calls.
//!
//! A call's arguments are checked against the tool's declared input schema
//! before the tool runs: a tool reads only arguments that fit it, and a
//! call that does not fit is an `isError` result naming the argument.
//!
//! Built-in names use a single underscore (`devboy_status`); proxied names
//! always contain `__`, so the two can never collide.

mod api;
mod code;
mod compact;
mod expand;
mod explore;
mod find_files;
mod find_tools;
mod roots;
mod run;
mod sampling;
mod servers;
mod status;

use std::sync::Arc;

pub(crate) use run::NAME as RUN;
pub(crate) use servers::control_of;
pub(crate) use status::upstreams_report;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};

pub use crate::stack::{BuiltinContext, BuiltinRegistry, BuiltinTool};

impl BuiltinRegistry {
    /// The tools devboy ships, with the embedded pipeline config.
    pub fn shipped() -> Self {
        Self::shipped_for(
            &devboy_core::pipeline_config::PipelineConfig::embedded_default(),
            None,
            &devboy_core::config::CodeConfig::default(),
        )
    }

    /// The shipped tools, configured by the pipeline config (`[explore]`),
    /// the model `find_files` navigates with (`[retrieval.llm]`) and code
    /// mode's `[code]`: one line per tool.
    pub fn shipped_for(
        config: &devboy_core::pipeline_config::PipelineConfig,
        retrieval: Option<devboy_core::config::LlmConfig>,
        code: &devboy_core::config::CodeConfig,
    ) -> Self {
        Self::empty()
            .with(status::Status)
            .with(servers::Servers)
            .with(compact::Compact)
            .with(expand::Expand)
            .with(explore::Explore::new(&config.explore))
            .with(find_files::FindFiles::new(
                retrieval,
                roots::AllowedRoots::new(&config.explore.allowed_roots),
            ))
            .with(find_tools::FindTools)
            .with(run::Run::new(code))
    }
}

/// Built-in tools are all idempotent, non-destructive and closed-world;
/// they differ in title and in whether they only read. A title says what
/// the tool does, without "devboy": Claude Code shows it after the
/// server's name (`devboy - Expand a result (MCP)`).
fn annotations(title: &str, read_only: bool) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(read_only)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

/// A tool definition with an input schema given as JSON.
fn definition(name: &'static str, description: &'static str, schema: serde_json::Value) -> Tool {
    let schema = match schema {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    };
    Tool::new(name, description, schema)
}

#[cfg(test)]
mod titles {
    use super::*;

    /// What a person reads for each tool in the client (Claude Code:
    /// "devboy - TITLE (MCP)"): what it does, not its name again.
    #[test]
    fn each_builtin_has_its_title() {
        let titles: Vec<(String, String)> = BuiltinRegistry::shipped()
            .tools()
            .iter()
            .map(|tool| {
                let d = tool.definition();
                let title = d.annotations.and_then(|a| a.title).unwrap_or_default();
                (d.name.into_owned(), title)
            })
            .collect();
        let expected = [
            ("devboy_status", "Proxy status"),
            ("devboy_servers", "Manage the servers"),
            ("devboy_compact", "Mark the context compacted"),
            ("devboy_expand", "Expand a result"),
            ("devboy_explore", "Explore how code works"),
            ("devboy_find_files", "Find the relevant files"),
            ("devboy_find_tools", "Find more tools"),
            ("devboy_run", "Run a script over the tools"),
        ]
        .map(|(name, title)| (name.to_owned(), title.to_owned()));
        assert_eq!(titles, expected);
    }
}

#[cfg(test)]
mod schemas {
    use super::*;
    use serde_json::{json, Value};

    /// A keyword the check does not read would pass unchecked: every
    /// shipped schema keeps to the ones it does.
    #[test]
    fn every_shipped_schema_uses_only_what_the_check_reads() {
        const SCHEMA: [&str; 4] = ["type", "properties", "required", "additionalProperties"];
        const PROPERTY: [&str; 5] = ["type", "enum", "minimum", "maximum", "description"];
        for tool in BuiltinRegistry::shipped().tools() {
            let d = tool.definition();
            let schema = &d.input_schema;
            for key in schema.keys() {
                assert!(SCHEMA.contains(&key.as_str()), "{}: `{key}`", d.name);
            }
            assert_eq!(schema.get("type"), Some(&json!("object")), "{}", d.name);
            let properties = schema.get("properties").and_then(Value::as_object);
            for (name, property) in properties.into_iter().flatten() {
                for key in property.as_object().into_iter().flat_map(|p| p.keys()) {
                    assert!(
                        PROPERTY.contains(&key.as_str()),
                        "{}.{name}: `{key}`",
                        d.name
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod definition_size {
    use super::*;

    /// What a definition costs the model on every request, in o200k.
    fn cost(tool: &Tool) -> usize {
        crate::definitions::definition_tokens(
            std::slice::from_ref(tool),
            devboy_pipeline::Tokenizer::O200k,
        ) as usize
    }

    /// Each built-in pays for itself only if it is short: none over 120
    /// tokens.
    #[test]
    fn no_builtin_definition_is_longer_than_120_tokens() {
        let registry = BuiltinRegistry::shipped();
        let mut listed = 0;
        let mut over = Vec::new();
        for tool in registry.tools() {
            let d = tool.definition();
            let n = cost(&d);
            let lazy = if tool.lazy_only() {
                "  (lazy sessions only)"
            } else {
                ""
            };
            println!("{:<20} {n:>4} tokens{lazy}", d.name);
            if !tool.lazy_only() {
                listed += n;
            }
            if n > 120 {
                over.push(format!("{} costs {n} tokens", d.name));
            }
        }
        println!("{:<20} {listed:>4} tokens", "listed to all");
        assert!(over.is_empty(), "{over:?}");
    }
}
