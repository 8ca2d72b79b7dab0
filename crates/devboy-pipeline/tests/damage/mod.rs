//! Damage done to an encoded text, for the property every decoder keeps:
//! a cut or altered encoding decodes to exactly the original or fails.
//! Shared by the encoder and template property tests.

use proptest::prelude::*;

/// One byte-level change.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// Flip one bit of one byte.
    Flip(prop::sample::Index, u8),
    /// Insert a byte.
    Insert(prop::sample::Index, u8),
    /// Delete a byte.
    Delete(prop::sample::Index),
}

/// Random byte changes, biased towards the bytes the grammars care about.
pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let byte = prop_oneof![
        3 => prop::sample::select(b"\n,:;\"{}[]#0123456789. -`|>ax".to_vec()),
        1 => any::<u8>(),
    ];
    let one = prop_oneof![
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        (any::<prop::sample::Index>(), byte).prop_map(|(at, b)| Mutation::Insert(at, b)),
        any::<prop::sample::Index>().prop_map(Mutation::Delete),
    ];
    prop::collection::vec(one, 1..24)
}

/// `text` with one mutation applied; `None` if the bytes are no longer
/// UTF-8 (no decoder can be handed them: `devboy decode` refuses such
/// input before decoding).
fn mutate(text: &str, mutation: &Mutation) -> Option<String> {
    let mut bytes = text.as_bytes().to_vec();
    match mutation {
        Mutation::Flip(at, bit) if !bytes.is_empty() => {
            let at = at.index(bytes.len());
            bytes[at] ^= 1 << bit;
        }
        Mutation::Insert(at, b) => bytes.insert(at.index(bytes.len() + 1), *b),
        Mutation::Delete(at) if !bytes.is_empty() => {
            bytes.remove(at.index(bytes.len()));
        }
        _ => return None,
    }
    String::from_utf8(bytes).ok()
}

/// Every damaged version of `text` to try: each cut at a line boundary
/// (before and after the line break), each cut at a sampled byte, and each
/// mutation on its own and all of them together. Versions equal to `text` are left out.
pub fn damaged(text: &str, cuts: &[prop::sample::Index], mutations: &[Mutation]) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |s: &str| {
        if s != text {
            out.push(s.to_owned());
        }
    };
    for (at, _) in text.match_indices('\n') {
        push(&text[..at]);
        push(&text[..at + 1]);
    }
    for cut in cuts {
        let mut at = cut.index(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        push(&text[..at]);
    }
    // Each mutation on its own, then all of them one after another.
    let mut all = Some(text.to_owned());
    for m in mutations {
        if let Some(s) = mutate(text, m) {
            push(&s);
        }
        all = all.and_then(|t| mutate(&t, m));
    }
    if let Some(s) = all {
        push(&s);
    }
    out
}

/// Cut positions to sample.
pub fn cuts() -> impl Strategy<Value = Vec<prop::sample::Index>> {
    prop::collection::vec(any::<prop::sample::Index>(), 8..16)
}
