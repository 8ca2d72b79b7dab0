//! `devboy encode` and `devboy decode`: one body through the router, and
//! back.

use std::io::{Read, Write};

use anyhow::{bail, Context};
use devboy_core::pipeline_config::PipelineConfig;
use devboy_pipeline::encode;
use devboy_pipeline::hints::ENCODED_PREFIX;
use devboy_pipeline::route::{route, RouteConfig};
use devboy_pipeline::shape::classify;
use devboy_pipeline::template::{self, DecodedBody};

fn read_stdin() -> anyhow::Result<String> {
    let mut body = String::new();
    std::io::stdin()
        .read_to_string(&mut body)
        .context("reading the body from stdin (it must be UTF-8)")?;
    Ok(body)
}

/// Prints what the model would see of the body on stdin: its cheapest
/// lossless encoding, or the body itself when nothing is cheaper. With
/// `tool`, that endpoint's settings apply (`encode`, `template`). Nothing is
/// elided here: elision needs a session to expand from. A summary goes to
/// stderr.
pub fn encode_cmd(config: &PipelineConfig, tool: Option<&str>) -> anyhow::Result<()> {
    let body = read_stdin()?;
    let settings = tool.map(|t| config.endpoint(t));
    let tokenizer = devboy_session::default_tokenizer(config);
    let baseline = tokenizer.count(&body);
    let enabled = settings.as_ref().is_none_or(|s| s.encode) && config.encoding.enabled;
    let route_config = RouteConfig {
        tokenizer,
        // The whole body, however long: nothing to expand from.
        budget_tokens: usize::MAX,
        only: settings.and_then(|s| s.template),
        ..RouteConfig::default()
    };
    let classified = classify(&body);
    let routed = if enabled {
        route(&body, &classified, baseline, &route_config, None)
    } else {
        None
    };
    let mut out = std::io::stdout().lock();
    match &routed {
        Some(r) => {
            out.write_all(r.text.as_bytes())?;
            if !r.text.ends_with('\n') {
                out.write_all(b"\n")?;
            }
            let pct = 100.0 * (baseline as f64 - r.tokens as f64) / baseline.max(1) as f64;
            eprintln!(
                "devboy encode: {} as {}: {baseline} → {} {tokenizer} tokens (−{pct:.1}%)",
                classified.shape.name(),
                r.format,
                r.tokens
            );
        }
        None => {
            out.write_all(body.as_bytes())?;
            eprintln!(
                "devboy encode: {}: nothing cheaper than the body ({baseline} {tokenizer} tokens); unchanged",
                classified.shape.name()
            );
        }
    }
    Ok(())
}

/// Turns an encoded body on stdin back into the original: Markdown or text
/// exactly, JSON as compact JSON with its keys in their original order. A
/// body cut or changed after it was encoded fails its check: an error,
/// never a different original. A body without an encoding hint is what
/// `devboy encode` leaves as it is (prose, JSON nothing beat), so it is
/// printed unchanged: `encode | decode` gives back what went in.
pub fn decode_cmd() -> anyhow::Result<()> {
    let text = read_stdin()?;
    let decoded = decode_text(&text)?;
    let mut out = std::io::stdout().lock();
    out.write_all(decoded.as_bytes())?;
    Ok(())
}

/// The original of an encoded text (see [`decode_cmd`]).
pub fn decode_text(text: &str) -> anyhow::Result<String> {
    match template::decode(text) {
        Ok(DecodedBody::Text(original)) => return Ok(original),
        Ok(DecodedBody::Json(value)) => return Ok(value.to_string()),
        Err(template::TemplateDecodeError::NotEncoded) => {}
        Err(error) => bail!("cannot decode: {error}"),
    }
    if !text.starts_with(ENCODED_PREFIX) {
        return Ok(text.to_owned());
    }
    // The line break `devboy encode` ends its output with is allowed for by
    // the check (`encode::check`), and JSON ignores it.
    match encode::decode(text) {
        Ok(value) => Ok(value.to_string()),
        Err(error) => bail!("cannot decode: {error}"),
    }
}
