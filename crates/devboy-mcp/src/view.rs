//! What the client shows the model of a result: the one place it is
//! decided. A client that forwards `structuredContent` (Claude Code does;
//! docs/invariants.md, "The client, as measured") shows that value
//! serialized instead of the text blocks; any other shows the text blocks.
//! The pipeline reads a result this way ([`shown`]), and the inline
//! follow-ups are appended this way ([`shown_blocks`]).

use devboy_session::Forwarded;
use rmcp::model::{CallToolResult, ContentBlock};

/// What the model is shown of one result, as devboy reads it.
pub(crate) enum Shown<'a> {
    /// The serialized `structuredContent` (the client forwards that).
    Structured(String, &'a serde_json::Value),
    /// The text blocks, in order (the client forwards the content).
    Text(Vec<&'a str>),
}

impl Shown<'_> {
    /// What the pipeline is handed of it.
    pub(crate) fn forwarded(&self) -> Forwarded<'_> {
        match self {
            Shown::Structured(text, value) => Forwarded::Single {
                text,
                json: Some(value),
            },
            Shown::Text(texts) if texts.len() == 1 => Forwarded::Single {
                text: texts[0],
                json: None,
            },
            Shown::Text(texts) => Forwarded::Blocks(texts),
        }
    }
}

/// What a client that does (or does not) forward `structuredContent` shows
/// of `result`, when it is all text; `None` for images, audio, resources
/// and mixed content.
pub(crate) fn shown(result: &CallToolResult, forwards_structured: bool) -> Option<Shown<'_>> {
    if forwards_structured {
        if let Some(value) = &result.structured_content {
            return serde_json::to_string(value)
                .ok()
                .map(|text| Shown::Structured(text, value));
        }
    }
    let mut texts = Vec::with_capacity(result.content.len());
    for block in &result.content {
        texts.push(block.as_text()?.text.as_str());
    }
    (!texts.is_empty()).then_some(Shown::Text(texts))
}

/// The blocks of `result` the client shows the model: its
/// `structuredContent` as JSON text for a client that shows that instead
/// of the text, else its content.
pub(crate) fn shown_blocks(
    result: &CallToolResult,
    forwards_structured: bool,
) -> Vec<ContentBlock> {
    match &result.structured_content {
        Some(structured) if forwards_structured => vec![ContentBlock::text(structured.to_string())],
        _ => result.content.clone(),
    }
}
