//! The identity of a forwarded body: the first 128 bits of its SHA-256.

use std::fmt;

use sha2::{Digest, Sha256};

/// The first 128 bits of the SHA-256 of a body's bytes.
///
/// Two bodies with the same fingerprint are treated as byte-identical. With
/// 128 bits the chance that any two of a session's bodies collide is far
/// below anything else that can go wrong (about n²/2¹²⁹ for n bodies).
/// Prints as 32 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint([u8; Fingerprint::LEN]);

impl Fingerprint {
    /// Length in bytes.
    pub const LEN: usize = 16;
    /// Length of the hex form.
    pub const HEX_LEN: usize = 2 * Self::LEN;

    /// The fingerprint of `body`.
    pub fn of(body: &[u8]) -> Self {
        let digest = Sha256::digest(body);
        let mut prefix = [0u8; Self::LEN];
        prefix.copy_from_slice(&digest[..Self::LEN]);
        Self(prefix)
    }

    /// A fingerprint from its raw bytes (e.g. read back from a capture).
    pub const fn from_bytes(bytes: [u8; Self::LEN]) -> Self {
        Self(bytes)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; Self::LEN] {
        &self.0
    }

    /// The first `n` hex characters (all 32 if `n` is larger).
    pub fn short(&self, n: usize) -> String {
        let hex = self.hex();
        let n = n.min(Self::HEX_LEN);
        hex[..n].iter().map(|&b| char::from(b)).collect()
    }

    fn hex(&self) -> [u8; Self::HEX_LEN] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; Self::HEX_LEN];
        for (i, byte) in self.0.iter().enumerate() {
            out[2 * i] = DIGITS[usize::from(byte >> 4)];
            out[2 * i + 1] = DIGITS[usize::from(byte & 0x0f)];
        }
        out
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.hex();
        // Only ASCII hex digits were written, so this cannot fail.
        f.write_str(std::str::from_utf8(&hex).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_the_sha256_prefix() {
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
        assert_eq!(
            Fingerprint::of(b"abc").to_string(),
            "ba7816bf8f01cfea414140de5dae2223"
        );
        assert_eq!(
            Fingerprint::of(b"").to_string(),
            "e3b0c44298fc1c149afbf4c8996fb924"
        );
    }

    #[test]
    fn display_is_32_lowercase_hex() {
        let s = Fingerprint::of(b"hello").to_string();
        assert_eq!(s.len(), Fingerprint::HEX_LEN);
        assert!(s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    }

    #[test]
    fn short_is_a_prefix_and_clamps() {
        let fp = Fingerprint::of(b"abc");
        assert_eq!(fp.short(8), "ba7816bf");
        assert_eq!(fp.short(0), "");
        assert_eq!(fp.short(1000), fp.to_string());
    }

    #[test]
    fn equal_bytes_equal_fingerprints() {
        assert_eq!(Fingerprint::of(b"x"), Fingerprint::of(b"x"));
        assert_ne!(Fingerprint::of(b"x"), Fingerprint::of(b"y"));
        let fp = Fingerprint::of(b"round");
        assert_eq!(Fingerprint::from_bytes(*fp.as_bytes()), fp);
        assert!(format!("{fp:?}").contains(&fp.to_string()));
    }
}
