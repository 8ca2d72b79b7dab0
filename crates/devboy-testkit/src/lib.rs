//! Test infrastructure for devboy.
//!
//! - [`peers`]: absolute paths of the pinned real MCP servers and clients
//!   installed by `tests/peers/install.sh` (missing peers panic, so tests
//!   fail instead of skipping).
//! - [`scripted_model`]: a local HTTP server speaking the Anthropic Messages
//!   API that answers from a [`Script`] and records every request, so a test
//!   sees exactly what the model was shown.
//! - [`oracle_llm`]: a ranking model on loopback (Anthropic Messages and
//!   OpenAI chat completions) that steers `find_files` to given gold
//!   files, with a prompt cache and scripted faults.
//! - [`claude`]: runs the real Claude Code CLI offline in a temporary `HOME`
//!   against a scripted model.
//! - [`claude_session`]: one Claude Code process driven turn by turn (stream-json on
//!   stdin and stdout), for conversations with several user turns and slash
//!   commands such as `/compact`.
//! - [`terminal`]: interactive Claude Code in a private tmux terminal, for
//!   what only the interactive mode does.
//! - [`stores`]: real object-store servers on loopback (moto's S3 server,
//!   Azurite's blob service), each with the environment `object_store`
//!   reads to reach it.

#![warn(missing_docs)]

pub mod claude;
pub mod claude_session;
mod http;
pub mod oracle_llm;
pub mod peers;
pub mod scripted_model;
pub mod stores;
pub mod terminal;

pub use claude::{ClaudeCode, ClaudeOutput};
pub use claude_session::ClaudeSession;
pub use oracle_llm::{OracleLlm, OracleOptions};
pub use scripted_model::{RequestKind, Script, ScriptedModel, ToolResultSeen, Turn};
pub use stores::{AzuriteServer, S3Server};
pub use terminal::TerminalSession;
