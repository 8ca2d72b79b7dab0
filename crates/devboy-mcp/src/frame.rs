//! The last bound on one result: what a single message to the client may
//! carry, whatever else failed.
//!
//! The pipeline keeps every result it processes within the client's own
//! limits (devboy-pipeline's router). What it does not process — a
//! passthrough session, a result that ran past its deadline, an error, an
//! image, a result whose endpoint may not be elided — would otherwise go
//! out whole, and a client that takes at most so much in one message drops
//! the whole connection for one larger line (Claude Code disconnects past
//! 16 MB): every upstream session and every id the model holds would go
//! with it. [`within_frame`] cuts such a result to [`MAX_RESULT_BYTES`]
//! and says so, so that one huge result costs only itself.

use devboy_core::call::ResolvedCall;
use rmcp::model::{CallToolResult, ContentBlock};

/// The most bytes one result may take as JSON in its message: far above
/// any bound the pipeline keeps (Claude Code shows 50,000 characters
/// inline), so that a session without one (`--pipeline passthrough`)
/// passes what a client can take as it came; under
/// [`crate::wire::MAX_WRITTEN_BYTES`], and well under the 16 MB Claude Code
/// takes in one message.
pub(crate) const MAX_RESULT_BYTES: usize = 10 << 20;

/// What is kept of a text too long even without its structured twin: JSON
/// escaping can make a text longer, so this is well under
/// [`MAX_RESULT_BYTES`].
pub(crate) const KEPT_TEXT_BYTES: usize = 4 << 20;

/// `result`, or when its JSON is over [`MAX_RESULT_BYTES`], as much of it
/// as fits: its `structuredContent` dropped first (the text carries the
/// same data), then text cut to [`KEPT_TEXT_BYTES`] at a line break and
/// blocks that do not fit left out, with one last line saying what was
/// cut and how to get less.
pub(crate) fn within_frame(call: &ResolvedCall, result: CallToolResult) -> CallToolResult {
    // JSON escaping makes a character at most six bytes: most results are
    // known to fit without being serialized again.
    let raw: usize = result.content.iter().map(block_bytes).sum();
    if result.structured_content.is_none() && raw.saturating_mul(6) <= MAX_RESULT_BYTES {
        return result;
    }
    let structured = result.structured_content.as_ref().map_or(0, json_bytes);
    let content: usize = result.content.iter().map(json_bytes).sum();
    if content + structured <= MAX_RESULT_BYTES {
        return result;
    }
    let mut result = result;
    // The text carries what the structured twin does.
    result.structured_content = None;
    if content <= MAX_RESULT_BYTES {
        return result;
    }
    let shown: usize = result.content.iter().map(block_bytes).sum();
    let mut room = KEPT_TEXT_BYTES;
    let mut kept = Vec::with_capacity(result.content.len() + 1);
    let mut left_out = 0usize;
    for block in std::mem::take(&mut result.content) {
        let bytes = block_bytes(&block);
        if bytes <= room {
            room -= bytes;
            kept.push(block);
            continue;
        }
        match block {
            ContentBlock::Text(text) if room > 0 => {
                let cut = cut_at_line(&text.text, room);
                room -= cut.len();
                kept.push(ContentBlock::text(cut));
            }
            _ => left_out += 1,
        }
    }
    let mut note = format!(
        "> [cut: this result was {shown} bytes, more than one message to the client may carry; \
         the first {} are shown",
        KEPT_TEXT_BYTES - room
    );
    if left_out > 0 {
        note.push_str(&format!(", {left_out} content blocks left out"));
    }
    note.push_str(&format!(
        ". Call {} again asking for less (a range, a page, a filter)]",
        call.exposed
    ));
    kept.push(ContentBlock::text(note));
    result.content = kept;
    tracing::warn!(
        tool = %call.exposed,
        bytes = shown,
        "a result over what one message may carry was cut"
    );
    result
}

/// Bytes of `value` as JSON.
fn json_bytes<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(0, |v| v.len())
}

/// What `block` weighs in a message: its text, or its encoded data.
fn block_bytes(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text(text) => text.text.len(),
        ContentBlock::Image(image) => image.data.len(),
        ContentBlock::Audio(audio) => audio.data.len(),
        other => serde_json::to_string(other).map_or(0, |s| s.len()),
    }
}

/// The longest start of `text` within `limit` bytes that ends with a line
/// break, or at a character boundary when no line break is near.
fn cut_at_line(text: &str, limit: usize) -> String {
    let mut end = limit.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let start = &text[..end];
    match start.rfind('\n') {
        Some(at) if at + 4096 >= end => start[..=at].to_owned(),
        _ => start.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devboy_core::call::{CallRoute, SideEffect};

    fn call() -> ResolvedCall {
        ResolvedCall::new(
            "fs__read_text_file",
            CallRoute::Upstream {
                upstream: "fs".into(),
                tool: "read_text_file".into(),
            },
            None,
            SideEffect::UNKNOWN,
        )
    }

    #[test]
    fn a_result_within_the_frame_is_untouched() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("x\n".repeat(1000))]);
        result.structured_content = Some(serde_json::json!({"content": "x\n".repeat(1000)}));
        assert_eq!(within_frame(&call(), result.clone()), result);
    }

    #[test]
    fn a_structured_twin_over_the_frame_is_dropped_and_the_text_kept_whole() {
        let text = "x\n".repeat(MAX_RESULT_BYTES / 4);
        let mut result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
        result.structured_content = Some(serde_json::json!({ "content": text }));
        let out = within_frame(&call(), result);
        assert_eq!(out.structured_content, None);
        assert_eq!(out.content, vec![ContentBlock::text(text)]);
    }

    #[test]
    fn a_huge_text_and_its_structured_twin_are_cut_to_the_frame_at_a_line() {
        let text: String = (0..1_000_000).map(|i| format!("line {i}\n")).collect();
        let mut result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
        result.structured_content = Some(serde_json::json!({ "content": text }));
        let cut = within_frame(&call(), result);
        assert_eq!(cut.structured_content, None);
        let texts: Vec<&str> = cut
            .content
            .iter()
            .map(|b| b.as_text().unwrap().text.as_str())
            .collect();
        assert_eq!(texts.len(), 2);
        assert!(texts[0].len() <= KEPT_TEXT_BYTES && texts[0].ends_with('\n'));
        assert!(text.starts_with(texts[0]));
        assert!(
            texts[1].starts_with("> [cut: this result was "),
            "{}",
            texts[1]
        );
        assert!(texts[1].contains("Call fs__read_text_file again asking for less"));
        let all: usize = texts.iter().map(|t| t.len()).sum();
        assert!(all <= KEPT_TEXT_BYTES + 300);
    }

    #[test]
    fn an_image_too_large_for_the_frame_is_left_out_and_said() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("a chart"),
            ContentBlock::image("A".repeat(MAX_RESULT_BYTES + 1), "image/png"),
        ]);
        let cut = within_frame(&call(), result);
        assert_eq!(cut.content.len(), 2);
        assert_eq!(cut.content[0].as_text().unwrap().text, "a chart");
        assert!(cut.content[1]
            .as_text()
            .unwrap()
            .text
            .contains("1 content blocks left out"));
    }
}
