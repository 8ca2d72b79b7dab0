//! The cheap token estimate: a count from a length, for the places where
//! running the tokenizer would cost more than the figure is worth (a
//! planner's prior, a budget check before a call, a client that reports
//! no usage). Exact counts, the ones telemetry and the pipeline report,
//! always go through `devboy_pipeline`'s `Tokenizer`; nothing here is
//! reported as a measured figure.
//!
//! One rule, four bytes a token (about right for English and code in the
//! BPE vocabularies devboy counts with), rounded up so that any non-empty
//! text costs at least one. File paths split into more tokens than prose,
//! so a prompt made of paths is estimated at 3.5 bytes a token
//! ([`estimate_paths`]).

/// Bytes per token of [`estimate`].
pub const BYTES_PER_TOKEN: usize = 4;

/// Estimated tokens of a text of `bytes` bytes: `bytes / 4`, rounded up.
///
/// ```
/// assert_eq!(devboy_core::tokens::estimate(0), 0);
/// assert_eq!(devboy_core::tokens::estimate(9), 3);
/// ```
pub fn estimate(bytes: usize) -> usize {
    bytes.div_ceil(BYTES_PER_TOKEN)
}

/// Estimated tokens of a text of `bytes` bytes made mostly of file paths
/// (a directory listing, a tree): `bytes / 3.5`, rounded up.
///
/// ```
/// assert_eq!(devboy_core::tokens::estimate_paths(7), 2);
/// ```
pub fn estimate_paths(bytes: usize) -> usize {
    (bytes * 2).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cost_more_than_prose_and_nothing_costs_nothing() {
        assert_eq!((estimate(0), estimate_paths(0)), (0, 0));
        assert_eq!((estimate(1), estimate_paths(1)), (1, 1));
        for bytes in [10, 100, 4096] {
            assert!(estimate_paths(bytes) >= estimate(bytes), "{bytes}");
        }
        assert_eq!(estimate(4096), 1024);
        assert_eq!(estimate_paths(350), 100);
    }
}
