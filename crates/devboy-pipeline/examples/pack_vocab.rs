//! Writes the packed vocabularies `src/tokens/vocab.rs` builds in, from
//! `tiktoken-rs`'s own tables: `cargo run -p devboy-pipeline --example
//! pack_vocab` (after a `tiktoken-rs` upgrade; the vocab test then checks
//! the files against it).

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tokens");
    for (name, bpe, tokens) in [
        ("o200k_base", tiktoken_rs::o200k_base()?, 199_998u32),
        ("cl100k_base", tiktoken_rs::cl100k_base()?, 100_256),
    ] {
        let decoded = (0..tokens)
            .map(|rank| bpe.decode_bytes(&[rank]))
            .collect::<Result<Vec<_>, _>>()?;
        // The rank after the last is no ordinary token.
        if bpe.decode_bytes(&[tokens]).is_ok() {
            return Err(format!("{name} has more than {tokens} tokens").into());
        }
        let packed = devboy_pipeline::tokens::pack_vocabulary(decoded.iter().map(Vec::as_slice));
        let path = dir.join(format!("{name}.vocab"));
        std::fs::write(&path, &packed)?;
        let raw: usize = decoded.iter().map(Vec::len).sum();
        println!(
            "{}: {tokens} tokens, {raw} bytes of token text, {} bytes packed",
            path.display(),
            packed.len()
        );
    }
    Ok(())
}
