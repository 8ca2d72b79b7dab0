//! The BPE vocabularies devboy counts with, kept in the binary compressed.
//!
//! `tiktoken-rs` embeds each vocabulary as its `.tiktoken` text (every
//! token base64-encoded beside its rank in decimal): 3.6 MB for o200k and
//! 1.7 MB for cl100k, more than a tenth of devboy's binary. The same tokens
//! as raw bytes in rank order, each after its length, Snappy-compressed,
//! take 1.5 and 0.7 MB (token text compresses little with Snappy, but
//! Snappy is already built, and it checks the data as it unpacks); they are
//! unpacked once, on first use. `examples/pack_vocab.rs` writes the two
//! files from `tiktoken-rs`'s own tables, and a test below checks every
//! rank of both against them, so the counts stay `tiktoken-rs`'s exactly.
//!
//! The vocabularies are OpenAI's `o200k_base` and `cl100k_base` from
//! `tiktoken` (MIT licence), as `tiktoken-rs` 0.12 ships them.
//!
//! Packed format, before compression: `DBV1`, the number of tokens as a
//! little-endian `u32`, then each token in rank order as its length (LEB128)
//! and its bytes.

use tiktoken_rs::{CoreBPE, Rank};

/// What a packed vocabulary starts with, before compression.
const MAGIC: &[u8; 4] = b"DBV1";

/// One vocabulary as the binary holds it.
pub(super) struct Packed {
    /// The Snappy-compressed (raw format) packed tokens.
    data: &'static [u8],
    /// How many ordinary tokens it holds (ranks `0..tokens`).
    tokens: usize,
    /// Its special tokens and their ranks, which come after the ordinary ones.
    special: &'static [(&'static str, Rank)],
    /// Its split pattern, as `tiktoken-rs` spells it.
    pattern: &'static str,
}

/// `o200k_base` (GPT-4o and later).
pub(super) const O200K: Packed = Packed {
    data: include_bytes!("o200k_base.vocab"),
    tokens: 199_998,
    special: &[("<|endoftext|>", 199_999), ("<|endofprompt|>", 200_018)],
    pattern: tiktoken_rs::O200K_BASE_PAT_STR,
};

/// `cl100k_base` (GPT-4, GPT-3.5).
pub(super) const CL100K: Packed = Packed {
    data: include_bytes!("cl100k_base.vocab"),
    tokens: 100_256,
    special: &[
        ("<|endoftext|>", 100_257),
        ("<|fim_prefix|>", 100_258),
        ("<|fim_middle|>", 100_259),
        ("<|fim_suffix|>", 100_260),
        ("<|endofprompt|>", 100_276),
    ],
    pattern: concat!(
        r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|",
        r" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s",
    ),
};

/// A vocabulary unpacked: every token's bytes, end to end, in rank order.
pub(super) struct Unpacked {
    raw: Vec<u8>,
    /// Where each token's bytes start in `raw`, and where the last ends.
    bounds: Vec<(usize, usize)>,
}

impl Unpacked {
    /// The tokens in rank order.
    pub(super) fn tokens(&self) -> impl ExactSizeIterator<Item = &[u8]> {
        self.bounds
            .iter()
            .map(|&(start, end)| &self.raw[start..end])
    }
}

impl Packed {
    /// The tokens, or `None` if the data is not what [`pack`] writes for
    /// this vocabulary's size (which a test rules out for the files built in).
    pub(super) fn unpack(&self) -> Option<Unpacked> {
        let raw = snap::raw::Decoder::new().decompress_vec(self.data).ok()?;
        let body = raw.strip_prefix(MAGIC)?;
        let count = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
        if count != self.tokens {
            return None;
        }
        let mut at = MAGIC.len() + 4;
        let mut bounds = Vec::with_capacity(count);
        for _ in 0..count {
            let (len, used) = leb128(raw.get(at..)?)?;
            let start = at + used;
            let end = start.checked_add(len)?;
            if end > raw.len() {
                return None;
            }
            bounds.push((start, end));
            at = end;
        }
        (at == raw.len()).then_some(Unpacked { raw, bounds })
    }

    /// `tiktoken-rs`'s tokenizer for this vocabulary, built from the packed
    /// tokens instead of its embedded text.
    pub(super) fn core_bpe(&self) -> Option<CoreBPE> {
        let unpacked = self.unpack()?;
        let encoder = unpacked
            .tokens()
            .enumerate()
            .map(|(rank, token)| Some((token.to_vec(), Rank::try_from(rank).ok()?)))
            .collect::<Option<_>>()?;
        let special = self
            .special
            .iter()
            .map(|&(name, rank)| (name.to_owned(), rank))
            .collect();
        CoreBPE::new(encoder, special, self.pattern).ok()
    }
}

/// An unsigned LEB128 number at the start of `bytes`, and how many bytes it
/// took.
fn leb128(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut value = 0usize;
    for (i, &byte) in bytes.iter().enumerate().take(4) {
        value |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// `tokens`, in rank order, packed and compressed as the files built in are.
#[doc(hidden)]
pub fn pack<'a>(tokens: impl ExactSizeIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut raw = MAGIC.to_vec();
    raw.extend_from_slice(
        &u32::try_from(tokens.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for token in tokens {
        let mut len = token.len();
        loop {
            let low = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                raw.push(low);
                break;
            }
            raw.push(low | 0x80);
        }
        raw.extend_from_slice(token);
    }
    snap::raw::Encoder::new()
        .compress_vec(&raw)
        .expect("a vocabulary is far below Snappy's size limit")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both files built in hold exactly `tiktoken-rs`'s vocabularies, rank
    /// by rank, and its tokenizer built from them counts as its own does.
    #[test]
    fn the_packed_vocabularies_are_tiktoken_rs_s_own() {
        for (packed, theirs) in [
            (&O200K, tiktoken_rs::o200k_base().unwrap()),
            (&CL100K, tiktoken_rs::cl100k_base().unwrap()),
        ] {
            let ours = packed.unpack().expect("the file unpacks");
            assert_eq!(ours.tokens().len(), packed.tokens);
            for (rank, token) in ours.tokens().enumerate() {
                let rank = Rank::try_from(rank).unwrap();
                assert_eq!(theirs.decode_bytes(&[rank]).unwrap(), token, "rank {rank}");
            }
            // The next rank is no ordinary token: the sizes are right.
            let next = Rank::try_from(packed.tokens).unwrap();
            assert!(packed.special.iter().all(|&(_, rank)| rank >= next));
            let bpe = packed.core_bpe().expect("a tokenizer from the file");
            for text in [
                "fn main() { println!(\"héllo, wörld\"); }\n\n    indented  ",
                "日本語のテキスト and 12345 numbers, don't stop",
                "<|endoftext|> is ordinary text here",
            ] {
                assert_eq!(
                    bpe.encode_ordinary(text),
                    theirs.encode_ordinary(text),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn a_damaged_file_unpacks_to_nothing() {
        let tokens: [&[u8]; 3] = [b"a", b"bc", &[0xff; 200]];
        let good = pack(tokens.iter().copied());
        let packed = |data: &'static [u8], tokens| Packed {
            data,
            tokens,
            special: &[],
            pattern: "",
        };
        let good: &'static [u8] = Box::leak(good.into_boxed_slice());
        let unpacked = packed(good, 3).unpack().unwrap();
        assert_eq!(unpacked.tokens().collect::<Vec<_>>(), tokens);
        // Another size, a cut file, bytes that are not Snappy.
        assert!(packed(good, 4).unpack().is_none());
        assert!(packed(&good[..good.len() - 1], 3).unpack().is_none());
        assert!(packed(b"not snappy at all", 3).unpack().is_none());
    }
}
