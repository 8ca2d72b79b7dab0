//! Token counting: the pipeline's cost measure.
//!
//! Every saving devboy claims is a difference of token counts, counted in
//! the target model's tokenizer where it is public. Claude's own tokenizer is not public, so
//! [`Tokenizer::O200k`] (OpenAI's `o200k_base`, the newest public BPE with a
//! large, code-friendly vocabulary) is the default. A savings report must
//! name the tokenizer it was counted with (invariant 8 in docs/invariants.md); use
//! [`Tokenizer::name`] or the [`Display`](fmt::Display) form for that.
//!
//! Counts are of *ordinary* text: a tool result that happens to contain
//! `<|endoftext|>` is counted as the characters it is, not as a special
//! token, because that is how it reaches the model.
//!
//! # Crate choice: `tiktoken-rs`
//!
//! The BPE encoders come from [`tiktoken-rs`](https://docs.rs/tiktoken-rs)
//! (0.12). The alternative, GitHub's `bpe-openai` (0.3), is faster per
//! call, but it serializes its vocabularies in a build script: a clean debug
//! build of it took 81 s on this 2-core machine against 20 s for
//! `tiktoken-rs`, with 26 crates in its graph against 16. Counting speed is
//! not the bottleneck of a proxy that counts each body a few times, so the
//! cheaper build wins.
//!
//! The vocabularies themselves are devboy's own packed copies of the ones
//! `tiktoken-rs` embeds ([`vocab`]: 2.2 MB for o200k and cl100k together,
//! where `tiktoken-rs`'s text takes 5.3 MB of the binary), each unpacked
//! once per process, on first use, and never for a tokenizer that is not
//! used; nothing is downloaded at build or run time.
//!
//! # Counting o200k faster, exactly
//!
//! Most of a `tiktoken-rs` count is its `fancy-regex` split. [`fast`] runs
//! the same split on the `regex` crate and counts the pieces with the same
//! vocabulary, for the same result (a property test below compares them);
//! `Tokenizer::O200k` uses it, and falls back to `tiktoken-rs`'s encoder if
//! its pattern check fails. It keeps the vocabulary in one compact table
//! (about 4 MB; `tiktoken-rs`'s own o200k tables took 62 MB).
//! `cl100k_base` has a different pattern and always goes through
//! `tiktoken-rs`.
//!
//! This module does no I/O, like the rest of the crate.

mod fast;
mod vocab;

#[doc(hidden)]
pub use vocab::pack as pack_vocabulary;

use std::fmt;
use std::sync::LazyLock;

use tiktoken_rs::CoreBPE;

/// `tiktoken-rs`'s o200k encoder, built from devboy's packed vocabulary;
/// only if the faster exact count of [`fast`] is unavailable.
static O200K_BPE: LazyLock<CoreBPE> = LazyLock::new(|| {
    vocab::O200K
        .core_bpe()
        .expect("the o200k vocabulary built in unpacks (a test checks it)")
});

/// `tiktoken-rs`'s cl100k encoder, built from devboy's packed vocabulary.
static CL100K_BPE: LazyLock<CoreBPE> = LazyLock::new(|| {
    vocab::CL100K
        .core_bpe()
        .expect("the cl100k vocabulary built in unpacks (a test checks it)")
});

/// A way to count the tokens a text costs the model.
///
/// ```
/// use devboy_pipeline::Tokenizer;
///
/// assert_eq!(Tokenizer::default().count("hello world"), 2);
/// assert_eq!(Tokenizer::default().name(), "o200k_base");
/// assert_eq!(Tokenizer::CharsPerToken(4.0).count("hello world"), 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tokenizer {
    /// OpenAI's `o200k_base` BPE (GPT-4o and later), the default proxy for
    /// Claude's tokenizer.
    O200k,
    /// OpenAI's older `cl100k_base` BPE (GPT-4, GPT-3.5), for comparison.
    Cl100k,
    /// An estimate without a vocabulary: the number of characters (Unicode
    /// scalar values) divided by this ratio, rounded up, so any non-empty
    /// text costs at least one token. `4.0` is the usual rule of thumb for
    /// English prose. A ratio that is not a positive finite number counts
    /// one token per character.
    CharsPerToken(f32),
}

impl Tokenizer {
    /// A short, stable name for reports: `o200k_base`, `cl100k_base` or
    /// `chars-per-token` (the [`Display`](fmt::Display) form adds the ratio).
    pub fn name(&self) -> &'static str {
        match self {
            Self::O200k => "o200k_base",
            Self::Cl100k => "cl100k_base",
            Self::CharsPerToken(_) => "chars-per-token",
        }
    }

    /// Loads this tokenizer's vocabulary (about 0.3 s and 60 MB for o200k,
    /// once per process) so that the first real count does not wait for
    /// it. Cheap when already loaded.
    pub fn warm_up(&self) {
        self.count("warm up");
    }

    /// The number of tokens `text` costs. The empty string costs 0.
    ///
    /// The first call for a BPE tokenizer parses its vocabulary (once per
    /// process); later calls only encode.
    pub fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        match self {
            Self::O200k => {
                fast::count(text).unwrap_or_else(|| O200K_BPE.encode_ordinary(text).len())
            }
            Self::Cl100k => CL100K_BPE.encode_ordinary(text).len(),
            Self::CharsPerToken(ratio) => {
                let chars = text.chars().count();
                if ratio.is_finite() && *ratio > 0.0 {
                    // f64 holds any realistic char count exactly.
                    (chars as f64 / f64::from(*ratio)).ceil() as usize
                } else {
                    chars
                }
            }
        }
    }
}

impl Tokenizer {
    /// The tokens of `text` when they are at most `limit`; past it, a
    /// number above `limit` that may fall short of the full count. The
    /// work is bounded by the limit: a text many times longer is counted
    /// by its start only.
    pub fn count_up_to(&self, text: &str, limit: usize) -> usize {
        // No token is longer than this many bytes on real text; a start of
        // this length that already counts past the limit settles it.
        const BYTES_PER_TOKEN: usize = 8;
        let reach = limit.saturating_add(1).saturating_mul(BYTES_PER_TOKEN);
        if text.len() <= reach {
            return self.count(text);
        }
        let mut end = reach;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let start = self.count(&text[..end]);
        if start > limit {
            start
        } else {
            self.count(text)
        }
    }
}

impl Tokenizer {
    /// What one tool definition costs the model on every request: the
    /// tokens of `{"name":…,"description":…,"input_schema":…}` as compact
    /// JSON, the three parts Claude Code sends for each tool, on every
    /// request (an absent description is `null`). The one measure
    /// of "definition tokens": telemetry records it for each `tools/list`
    /// devboy serves, and the tests that compare definitions direct and
    /// through devboy count with it.
    ///
    /// ```
    /// use devboy_pipeline::Tokenizer;
    ///
    /// let schema = serde_json::json!({"type": "object"});
    /// let schema = schema.as_object().unwrap();
    /// let n = Tokenizer::O200k.count_definition("echo", Some("Echoes its input."), schema);
    /// assert_eq!(
    ///     n,
    ///     Tokenizer::O200k.count(
    ///         r#"{"name":"echo","description":"Echoes its input.","input_schema":{"type":"object"}}"#
    ///     )
    /// );
    /// ```
    pub fn count_definition(
        &self,
        name: &str,
        description: Option<&str>,
        input_schema: &serde_json::Map<String, serde_json::Value>,
    ) -> usize {
        self.count(&definition_json(name, description, input_schema))
    }
}

/// A tool definition as Claude Code sends it to the model, compact JSON:
/// what [`Tokenizer::count_definition`] counts.
pub fn definition_json(
    name: &str,
    description: Option<&str>,
    input_schema: &serde_json::Map<String, serde_json::Value>,
) -> String {
    serde_json::json!({
        "name": name,
        "description": description,
        "input_schema": input_schema,
    })
    .to_string()
}

impl Default for Tokenizer {
    /// [`Tokenizer::O200k`], the stand-in for Claude's unpublished tokenizer.
    fn default() -> Self {
        Self::O200k
    }
}

impl fmt::Display for Tokenizer {
    /// The [`name`](Tokenizer::name), with the ratio for the estimator:
    /// `o200k_base`, `chars-per-token(4)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CharsPerToken(ratio) => write!(f, "{}({ratio})", self.name()),
            _ => f.write_str(self.name()),
        }
    }
}

/// `text`'s o200k count as `tiktoken-rs` itself makes it, for comparison
/// with [`Tokenizer::count`] (tests and benchmarks).
#[doc(hidden)]
pub fn tiktoken_o200k(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len()
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU64;

    use proptest::prelude::*;

    use super::*;
    use crate::hints::{id_line, near_reference, reference as reference_hint};
    use crate::ids::{ReferenceId, SessionTag};

    fn id(n: u64) -> ReferenceId {
        ReferenceId::new(SessionTag::FIXED, NonZeroU64::new(n).unwrap())
    }

    /// The fixed tag and a few drawn ones: every drawn tag costs the same.
    fn tags() -> [SessionTag; 4] {
        [
            SessionTag::FIXED,
            SessionTag::from_seed(1),
            SessionTag::from_seed(2),
            SessionTag::from_seed(u64::MAX),
        ]
    }

    const CODE: &str = "fn main() {\n    println!(\"hi\");\n}\n";
    const JSON: &str = "{\"path\":\"/repo/src/main.rs\",\"size\":1234}";

    #[test]
    fn the_fast_o200k_path_is_in_use() {
        assert!(fast::available(), "the o200k pattern or vocabulary changed");
    }

    /// Pieces of every kind o200k's pattern tells apart: cased letters,
    /// marks, digits, contractions, punctuation, slashes, every kind of
    /// whitespace (including the non-breaking and ideographic spaces and
    /// line breaks, alone and in runs), scripts without case, emoji.
    #[rustfmt::skip]
    const ATOMS: &[&str] = &[
        "a", "Z", "hello", "World", "HTTP", "camelCase", "é", "É", "\u{301}", "ß", "ǅ", "ʰ",
        "中文", "日本", "😀", "👍🏽", "7", "42", "12345", "٣", "'s", "'T", "'re", "'LL", "'d",
        "'", "\"", ",", ".", ":", "{", "}", "[", "]", "/", "//", "://", "-", "_", "#", "<|",
        "|>", "\\", " ", "  ", "   ", "\t", "\n", "\r\n", "\r", " \n", "\n\n", "\u{a0}",
        "\u{3000}", "\u{2028}", "\u{b}", "\u{c}", " \t ", "\n ", "  \n  ", "\u{0}", "\u{1f}",
        "\u{7f}", "\u{85}", "ſ", "'ſ", "'Re", "'VE", "'x", "'", "123456", "x'", "A'LL",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn the_fast_o200k_count_is_tiktokens(parts in proptest::collection::vec(0..ATOMS.len(), 0..40)) {
            let text: String = parts.iter().map(|&i| ATOMS[i]).collect();
            prop_assert_eq!(Tokenizer::O200k.count(&text), tiktoken_o200k(&text), "{:?}", text);
        }

        #[test]
        fn the_fast_o200k_count_is_tiktokens_on_ascii(text in "[\t\n\r\u{b}\u{c} -~]{0,80}") {
            prop_assert_eq!(Tokenizer::O200k.count(&text), tiktoken_o200k(&text), "{:?}", text);
        }

        #[test]
        fn the_fast_o200k_count_is_tiktokens_on_any_text(text in "\\PC{0,64}") {
            prop_assert_eq!(Tokenizer::O200k.count(&text), tiktoken_o200k(&text), "{:?}", text);
        }
    }

    #[test]
    fn default_is_o200k() {
        assert_eq!(Tokenizer::default(), Tokenizer::O200k);
    }

    #[test]
    fn names() {
        assert_eq!(Tokenizer::O200k.name(), "o200k_base");
        assert_eq!(Tokenizer::Cl100k.name(), "cl100k_base");
        assert_eq!(Tokenizer::CharsPerToken(4.0).name(), "chars-per-token");
        assert_eq!(Tokenizer::O200k.to_string(), "o200k_base");
        assert_eq!(
            Tokenizer::CharsPerToken(4.0).to_string(),
            "chars-per-token(4)"
        );
        assert_eq!(
            Tokenizer::CharsPerToken(3.5).to_string(),
            "chars-per-token(3.5)"
        );
    }

    #[test]
    fn empty_costs_nothing() {
        for t in [
            Tokenizer::O200k,
            Tokenizer::Cl100k,
            Tokenizer::CharsPerToken(4.0),
            Tokenizer::CharsPerToken(0.0),
        ] {
            assert_eq!(t.count(""), 0, "{t}");
        }
    }

    #[test]
    fn o200k_known_counts() {
        let t = Tokenizer::O200k;
        // The well-known sanity check: " world" is one token after "hello".
        assert_eq!(t.count("hello world"), 2);
        assert_eq!(t.count(CODE), 10);
        assert_eq!(t.count(JSON), 14);
        // o200k's larger vocabulary covers Cyrillic better than cl100k.
        assert_eq!(t.count("Привет, мир"), 4);
    }

    #[test]
    fn cl100k_known_counts() {
        let t = Tokenizer::Cl100k;
        assert_eq!(t.count("hello world"), 2);
        assert_eq!(t.count(CODE), 10);
        assert_eq!(t.count(JSON), 13);
        assert_eq!(t.count("Привет, мир"), 6);
    }

    #[test]
    fn special_token_text_counts_as_ordinary_text() {
        // Not the single special token: the characters as the model sees them.
        assert!(Tokenizer::O200k.count("<|endoftext|>") > 1);
    }

    #[test]
    fn estimator_rounds_up() {
        let t = Tokenizer::CharsPerToken(4.0);
        assert_eq!(t.count("a"), 1);
        assert_eq!(t.count("abcd"), 1);
        assert_eq!(t.count("abcde"), 2);
        assert_eq!(t.count("hello world"), 3); // 11 / 4 = 2.75
        assert_eq!(t.count(&"x".repeat(400)), 100);
        // Characters, not bytes: 6 Cyrillic letters are 12 bytes.
        assert_eq!(t.count("Привет"), 2);
        assert_eq!(Tokenizer::CharsPerToken(1.5).count("abc"), 2);
    }

    #[test]
    fn estimator_with_a_bad_ratio_counts_characters() {
        for ratio in [0.0, -4.0, f32::NAN, f32::INFINITY] {
            assert_eq!(Tokenizer::CharsPerToken(ratio).count("abcde"), 5);
        }
    }

    /// The line printed with every fresh body must stay cheap: it is paid
    /// on every miss. Exact o200k counts: 1 → 8, 99 → 8, 9999 → 9 (the
    /// session tag's second token over the untagged `r1`'s 7).
    #[test]
    fn id_line_costs_at_most_10_tokens() {
        for tag in tags() {
            for (n, expected) in [(1, 8), (99, 8), (9999, 9)] {
                let line = id_line(ReferenceId::new(tag, NonZeroU64::new(n).unwrap()));
                let cost = Tokenizer::O200k.count(&line);
                assert!(cost <= 10, "{line:?} costs {cost} o200k tokens");
                assert_eq!(cost, expected, "{line:?}");
            }
        }
    }

    const PIN_NEAR: usize = 19;

    /// Pins what the reference hint costs, so a wording change shows its
    /// price here. The design goal is about 15 tokens or fewer; the id,
    /// printed twice, costs 3 with its session tag (1 → 17, 99 → 17,
    /// 9999 → 19; 15 untagged).
    #[test]
    fn reference_hint_cost_is_pinned() {
        for tag in tags() {
            for (n, expected) in [(1, 17), (99, 17), (9999, 19)] {
                let hint = reference_hint(ReferenceId::new(tag, NonZeroU64::new(n).unwrap()));
                assert!(Tokenizer::O200k.count(&hint) <= 19, "{hint:?}");
                assert_eq!(
                    Tokenizer::O200k.count(&hint),
                    expected,
                    "{hint:?}: update this pin when the hint wording changes"
                );
            }
        }
    }

    /// Pins what an id line (at most) and a reference line cost for the
    /// first 99 ids of a session: the figures the id rule
    /// ([`crate::dedup_stage::id_pays`]) weighs.
    #[test]
    fn id_line_cost_is_pinned() {
        for tag in tags() {
            for n in [1, 99] {
                let id = ReferenceId::new(tag, NonZeroU64::new(n).unwrap());
                let line = Tokenizer::O200k.count(&crate::hints::id_line(id));
                assert!(
                    (7..=crate::dedup_stage::ID_LINE_TOKENS).contains(&line),
                    "{id}: {line}"
                );
                assert_eq!(
                    Tokenizer::O200k.count(&reference_hint(id)),
                    crate::dedup_stage::REFERENCE_TOKENS
                );
            }
        }
    }

    /// Pins the near-reference hint's cost (without the change lines that
    /// follow it, which are the content).
    #[test]
    fn near_hint_cost_is_pinned() {
        let hint = near_reference(id(3), id(4));
        assert_eq!(Tokenizer::O200k.count(&hint), PIN_NEAR, "{hint:?}");
    }
}
