//! devboy's configuration crate: reading and validating its two config
//! files (the proxy's `devboy.toml` / `.mcp.json`, and the pipeline's
//! `pipeline_config.toml`) into effective settings, and the small rules
//! that go with them: where files live, how tools are named for the
//! client, what a tool's name says it does, and the Claude Code hooks.
//!
//! Key design decision: **everything that leaves this crate is already
//! resolved.** Config files are validated in one pass that expands
//! `${VAR}`s, applies defaults, resolves relative paths and assigns unique
//! tool-name prefixes, so the proxy never re-checks a field and a bad file
//! fails at startup with one message that names the file, the key path and
//! what was expected. The crate reads the config file and the environment
//! and nothing else; it knows nothing of MCP, tokio or the pipeline.
//!
//! - [`call`]: [`call::ResolvedCall`], one tool call's facts decided once:
//!   its key, its side-effect class, the paths it names.
//! - [`config`]: [`config::ProxyConfig`] from a `.mcp.json` or `devboy.toml`.
//! - [`date`]: [`date::civil_from_days`], the one calendar date.
//! - [`hash`]: [`hash::fnv1a64`], the one stable hash for names and ids.
//! - [`hooks`]: the Claude Code compaction hooks: their input, merging them
//!   into `.claude/settings.json`.
//! - [`identifier`]: [`identifier::words`], the one identifier splitter.
//! - [`naming`]: [`naming::ToolNamer`], exposed names within 64 characters.
//! - [`paths`]: XDG config, telemetry and runtime directories, one place for all.
//! - [`pipeline_config`]: `pipeline_config.toml`, the pipeline's knobs,
//!   described once ([`pipeline_config::schema`]), and their resolution
//!   against one session.
//! - [`speculation`]: the words of read-only speculation (where a result
//!   came from, why a follow-up was declined, how a prefetch ended).
//! - [`tokens`]: the cheap token estimate, where the tokenizer would cost
//!   more than the figure is worth.
//! - [`tool_schema`]: tool input schemas compacted, accepting the same
//!   arguments.
//! - [`tool_verb`]: [`tool_verb::VerbClass`], the verb a tool's name
//!   carries (telemetry's endpoint class, the tuner's side-effect guess).
//! - [`transcripts`]: Claude Code's session transcripts, collected.
//! - [`value_model`]: [`value_model::ToolValueModel`], what a tool is worth.

#![deny(missing_docs)]

/// The name devboy gives itself: its MCP server name, and the upstream name
/// its built-in tools are counted under.
pub const SERVER_NAME: &str = "devboy";

pub mod call;
pub mod config;
pub mod date;
pub mod hash;
pub mod hooks;
pub mod identifier;
pub mod naming;
pub mod paths;
pub mod pipeline_config;
pub mod speculation;
pub mod tokens;
pub mod tool_schema;
pub mod tool_verb;
pub mod transcripts;
pub mod value_model;
