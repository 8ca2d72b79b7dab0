//! What a session tag in the visible ids costs, per id format: o200k tokens
//! of the hint lines that print ids, over sequence numbers 1..=200 and a
//! sample of tags, beside how many tags each format can draw from and the
//! odds that two of ten devboy processes (ten restarts in a day) share one.
//! The figures in docs/measurements.md ("Session tags in ids") come from
//! this.
//!
//! ```text
//! cargo run --release -p devboy-pipeline --example id_cost
//! ```

use std::time::Instant;

use devboy_pipeline::{
    hints::{id_line, near_reference as near_hint, reference as reference_hint},
    IdAllocator, ReferenceId, SessionTag, Tokenizer,
};

/// Sequence numbers measured: the ids a session actually reaches.
const SEQUENCES: std::ops::RangeInclusive<u64> = 1..=200;
/// Tags sampled per format.
const TAGS: usize = 300;
/// Processes in a day whose ids could meet in one model context.
const PROCESSES: u32 = 10;

/// One candidate spelling of an id.
struct Format {
    name: &'static str,
    /// How many tags it has (estimated where marked).
    tags: f64,
    estimated: bool,
    /// The id text for a tag drawn from `draw` and a sequence number.
    spell: fn(&str, u64) -> String,
    /// A tag from a random number.
    draw: Box<dyn Fn(u64) -> String>,
}

fn main() {
    let o200k = Tokenizer::O200k;
    let start = Instant::now();
    o200k.warm_up();
    let load = start.elapsed();

    let words = one_token_words();
    let accepted = drawn_tag_share();
    let letters = |x: u64, n: usize| -> String {
        (0..n)
            .map(|i| (b'a' + ((x >> (5 * i)) % 26) as u8) as char)
            .collect()
    };
    let words_for_draw = words.clone();
    let formats = vec![
        Format {
            name: "`r3` (today, no tag)",
            tags: 1.0,
            estimated: false,
            spell: |_, n| format!("r{n}"),
            draw: Box::new(|_| String::new()),
        },
        Format {
            name: "`k7r3` (letter+digit tag before)",
            tags: 260.0,
            estimated: false,
            spell: |t, n| format!("{t}r{n}"),
            draw: Box::new(move |x| format!("{}{}", letters(x, 1), (x >> 40) % 10)),
        },
        Format {
            name: "`r3.k7` (letter+digit tag after a dot)",
            tags: 260.0,
            estimated: false,
            spell: |t, n| format!("r{n}.{t}"),
            draw: Box::new(move |x| format!("{}{}", letters(x, 1), (x >> 40) % 10)),
        },
        Format {
            name: "`r3k7q` (letter+digit+letter tag after)",
            tags: 6_760.0,
            estimated: false,
            spell: |t, n| format!("r{n}{t}"),
            draw: Box::new(move |x| {
                format!("{}{}{}", letters(x, 1), (x >> 40) % 10, letters(x >> 10, 1))
            }),
        },
        Format {
            name: "`kq3` (2 random letters for the `r`)",
            tags: 676.0,
            estimated: false,
            spell: |t, n| format!("{t}{n}"),
            draw: Box::new(move |x| letters(x, 2)),
        },
        Format {
            name: "`kqzt3` (4 random letters for the `r`)",
            tags: 456_976.0,
            estimated: false,
            spell: |t, n| format!("{t}{n}"),
            draw: Box::new(move |x| letters(x, 4)),
        },
        Format {
            name: "`cat3` (a one-token word for the `r`)",
            tags: words.len() as f64,
            estimated: false,
            spell: |t, n| format!("{t}{n}"),
            draw: Box::new(move |x| {
                words_for_draw[(x % words_for_draw.len() as u64) as usize].clone()
            }),
        },
        Format {
            name: "**`kafrum3` (chosen: 6 letters, 2 tokens)**",
            tags: 26f64.powi(6) * accepted,
            estimated: true,
            spell: |t, n| format!("{t}{n}"),
            draw: Box::new(|x| SessionTag::from_seed(x).to_string()),
        },
    ];

    println!("o200k vocabulary loaded in {load:.2?}");
    println!(
        "ids {}..={} x {TAGS} tags per format; mean (max) o200k tokens per line\n",
        SEQUENCES.start(),
        SEQUENCES.end()
    );
    println!("| id format | tags | P(2 of {PROCESSES} share a tag) | `> [id: …]` | `> [ref: …]` | `> [near-ref: …]` | elision hint |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for format in &formats {
        let mut lines = [
            Stat::default(),
            Stat::default(),
            Stat::default(),
            Stat::default(),
        ];
        for t in 0..TAGS as u64 {
            let tag = (format.draw)(mix(t + 1));
            for n in SEQUENCES {
                let id = (format.spell)(&tag, n);
                let base = (format.spell)(&tag, n.max(2) - 1);
                let texts = [
                    format!("> [id: {id}]"),
                    format!("> [ref: {id}, unchanged; devboy_expand {id}]"),
                    format!("> [near-ref: {base}, changed below; devboy_expand {id}]"),
                    format!("> [elided 38 of 120 items (82-119); all: devboy_expand {id}]"),
                ];
                for (stat, text) in lines.iter_mut().zip(&texts) {
                    stat.add(o200k.count(text));
                }
            }
        }
        println!(
            "| {} | {}{} | {} | {} | {} | {} | {} |",
            format.name,
            if format.estimated { "≈" } else { "" },
            thousands(format.tags),
            odds(format.tags),
            lines[0],
            lines[1],
            lines[2],
            lines[3],
        );
    }

    // The chosen format through the pipeline's own hint functions.
    let mut ids = IdAllocator::seeded(mix(99));
    let mut worst = [0usize; 3];
    let mut previous: Option<ReferenceId> = None;
    for _ in SEQUENCES {
        let id = ids.next();
        let base = previous.unwrap_or(id);
        let costs = [
            o200k.count(&id_line(id)),
            o200k.count(&reference_hint(id)),
            o200k.count(&near_hint(base, id)),
        ];
        for (w, c) in worst.iter_mut().zip(costs) {
            *w = (*w).max(c);
        }
        previous = Some(id);
    }
    println!(
        "\npipeline hints, tag `{}`, ids 1..=200: id line ≤ {}, reference ≤ {}, near-reference ≤ {} tokens",
        ids.tag(),
        worst[0],
        worst[1],
        worst[2]
    );
    let start = Instant::now();
    let draws = 1_000u64;
    for seed in 0..draws {
        std::hint::black_box(SessionTag::from_seed(mix(seed)));
    }
    println!(
        "drawing a tag (vocabulary loaded): {:.1?} each; {:.2}% of 6-letter strings cost 2 tokens",
        start.elapsed() / draws as u32,
        accepted * 100.0
    );
}

/// Lower-case words of 3 to 8 letters that o200k spells as one token after
/// a space.
fn one_token_words() -> Vec<String> {
    let bpe = tiktoken_rs::o200k_base_singleton();
    (0..199_998u32)
        .filter_map(|rank| bpe.decode(&[rank]).ok())
        .filter_map(|t| t.strip_prefix(' ').map(str::to_owned))
        .filter(|w| (3..=8).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_lowercase()))
        .collect()
}

/// The share of 6-letter lower-case strings that cost two o200k tokens
/// after a space, from 400,000 uniform draws.
fn drawn_tag_share() -> f64 {
    let samples = 400_000u64;
    let hits = (0..samples)
        .filter(|&i| {
            let x = mix(i ^ 0x5EED);
            let tag: String = (0..6)
                .map(|k| (b'a' + ((x >> (6 * k)) % 26) as u8) as char)
                .collect();
            Tokenizer::O200k.count(&format!(" {tag}")) == 2
        })
        .count();
    hits as f64 / samples as f64
}

/// Odds that at least two of [`PROCESSES`] processes draw the same of
/// `tags` tags (the birthday bound, exact product).
fn odds(tags: f64) -> String {
    let mut distinct = 1.0;
    for i in 0..PROCESSES {
        distinct *= (1.0 - f64::from(i) / tags).max(0.0);
    }
    let p = 1.0 - distinct;
    if p >= 0.01 {
        format!("{:.0}%", p * 100.0)
    } else {
        format!("{p:.1e}")
    }
}

fn thousands(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.1} M", x / 1e6)
    } else {
        let n = x.round() as u64;
        if n >= 1000 {
            format!("{},{:03}", n / 1000, n % 1000)
        } else {
            n.to_string()
        }
    }
}

/// SplitMix64's finalizer: well-spread numbers from a counter.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Default)]
struct Stat {
    sum: usize,
    n: usize,
    max: usize,
}

impl Stat {
    fn add(&mut self, tokens: usize) {
        self.sum += tokens;
        self.n += 1;
        self.max = self.max.max(tokens);
    }
}

impl std::fmt::Display for Stat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mean = self.sum as f64 / self.n.max(1) as f64;
        write!(f, "{mean:.2} ({})", self.max)
    }
}
