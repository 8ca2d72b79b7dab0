//! The one stable, non-cryptographic hash devboy uses where a value must be
//! the same in every build and process: 64-bit FNV-1a.
//!
//! `std`'s hasher is randomly seeded per process, so it cannot name files
//! shared between devboy processes (the partition state file), shorten tool
//! names stably, or key identifiers read back from telemetry. Nothing here
//! is meant to resist an adversary.

/// 64-bit FNV-1a of `bytes`. Pinned: the value must not change between
/// releases (file names and exposed tool names depend on it).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
