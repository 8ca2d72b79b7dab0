//! One SHA-256 over every encoder output for the GitHub corpus (see
//! `tests/encode_corpus.rs`): the texts of `encode::candidates` and of
//! `encode::encode` in every format, for each body. A change to the
//! encoders that must not change any output keeps this hash.
//!
//! ```text
//! cargo run --release -p devboy-pipeline --example encode_fingerprint
//! ```

#[allow(dead_code)]
#[path = "../tests/encode_corpus.rs"]
mod corpus;

use std::time::Instant;

use devboy_pipeline::encode::{candidates, encode, Format};
use sha2::{Digest, Sha256};

fn main() {
    let bodies = match corpus::load() {
        Ok(bodies) => bodies,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let mut hash = Sha256::new();
    let mut texts = 0usize;
    let start = Instant::now();
    for body in &bodies {
        for encoded in candidates(&body.value) {
            hash.update(encoded.format().name().as_bytes());
            hash.update([0]);
            hash.update((encoded.text().len() as u64).to_le_bytes());
            hash.update(encoded.text().as_bytes());
            texts += 1;
        }
        hash.update([1]);
        for format in Format::ALL {
            match encode(&body.value, format) {
                Some(encoded) => {
                    hash.update([2]);
                    hash.update((encoded.text().len() as u64).to_le_bytes());
                    hash.update(encoded.text().as_bytes());
                    texts += 1;
                }
                None => hash.update([3]),
            }
        }
    }
    let elapsed = start.elapsed();
    let digest = hash.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    println!("bodies {} texts {texts} in {elapsed:.2?}", bodies.len());
    println!("sha256 {hex}");
}
