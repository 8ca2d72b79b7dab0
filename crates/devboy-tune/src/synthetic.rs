//! Generated telemetry, in the documented event schema, for benchmarks and
//! tests: a workload of endpoints with known duplicate rates, shapes and
//! encoder savings, played through the simulation's model of the dedup
//! cache at devboy's default bounds, so that the recorded outcomes are what
//! the pipeline would have recorded for these fingerprints.
//!
//! Each session goes to its own file, as each devboy process does, and
//! ends with its session summary. The generator is deterministic for a
//! seed.

use std::io::Write as _;
use std::path::Path;

use crate::simulate::CacheModel;

/// One endpoint of a workload.
#[derive(Clone, Debug)]
pub struct EndpointSpec {
    /// The exposed tool name (written to `endpoint-names.json`).
    pub name: String,
    /// Its shape.
    pub shape: &'static str,
    /// Inner formats every result carries.
    pub inner: Vec<&'static str>,
    /// Typical body size in characters (±10%).
    pub chars: u32,
    /// Probability that a result repeats a body delivered earlier in the
    /// partition.
    pub dup_rate: f64,
    /// Whether dedup was on when the events were recorded.
    pub dedup_on: bool,
    /// Results of this endpoint change a little each time (a polled
    /// status): new fingerprint, the same size as the previous one.
    pub polling: bool,
    /// The template the router used, if any.
    pub template: Option<&'static str>,
    /// Share of baseline tokens the encoder saved on bodies.
    pub encoder_ratio: f64,
    /// Relative call frequency.
    pub weight: u32,
}

impl EndpointSpec {
    /// A plain endpoint: JSON records, dedup on, no repeats, no encoding.
    pub fn new(name: &str) -> Self {
        EndpointSpec {
            name: name.to_owned(),
            shape: "array_of_objects",
            inner: Vec::new(),
            chars: 4000,
            dup_rate: 0.0,
            dedup_on: true,
            polling: false,
            template: None,
            encoder_ratio: 0.0,
            weight: 1,
        }
    }

    /// The `h(name)` written in events: 16 hex digits (a stand-in for the
    /// salted SHA-256 prefix; only consistency matters to the tuner).
    pub fn hash(&self) -> String {
        format!("{:016x}", devboy_core::hash::fnv1a64(self.name.as_bytes()))
    }
}

/// A whole workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The endpoints.
    pub endpoints: Vec<EndpointSpec>,
    /// Sessions (one file each).
    pub sessions: usize,
    /// Results per session.
    pub events_per_session: usize,
    /// Compactions per session, evenly spaced.
    pub compactions_per_session: u32,
    /// Milliseconds between results.
    pub interval_ms: u64,
    /// The first session's start, Unix milliseconds.
    pub start_ms: u64,
    /// Write a malformed line after every this many events (0: never).
    pub malformed_every: usize,
    /// The random seed.
    pub seed: u64,
}

impl Workload {
    /// A mix like a developer's month: issue lists (Markdown tables that
    /// repeat), file reads that repeat often, code search that never
    /// repeats, a polled CI status, diffs.
    pub fn typical(sessions: usize, events_per_session: usize, start_ms: u64) -> Self {
        let spec = EndpointSpec::new;
        Workload {
            endpoints: vec![
                EndpointSpec {
                    shape: "markdown_table",
                    inner: vec!["url"],
                    chars: 9000,
                    dup_rate: 0.3,
                    template: Some("md_tables_csv"),
                    encoder_ratio: 0.45,
                    weight: 4,
                    ..spec("gh__list_issues")
                },
                EndpointSpec {
                    shape: "prose",
                    chars: 6000,
                    dup_rate: 0.4,
                    weight: 6,
                    ..spec("fs__read_text_file")
                },
                EndpointSpec {
                    shape: "array_of_objects",
                    inner: vec!["url", "hash"],
                    chars: 3000,
                    dup_rate: 0.0,
                    encoder_ratio: 0.2,
                    weight: 3,
                    ..spec("gh__search_code")
                },
                EndpointSpec {
                    shape: "nested_object",
                    inner: vec!["url", "log_line", "hash"],
                    chars: 2500,
                    polling: true,
                    encoder_ratio: 0.1,
                    weight: 2,
                    ..spec("ci__get_pipeline_status")
                },
                EndpointSpec {
                    shape: "nested_object",
                    inner: vec!["diff"],
                    chars: 12000,
                    dup_rate: 0.1,
                    template: Some("fenced_fields"),
                    encoder_ratio: 0.15,
                    weight: 1,
                    ..spec("gh__get_pull_request_diff")
                },
                EndpointSpec {
                    shape: "flat_object",
                    chars: 300,
                    dup_rate: 0.5,
                    weight: 2,
                    ..spec("time__get_current_time")
                },
            ],
            sessions,
            events_per_session,
            compactions_per_session: 2,
            interval_ms: 4000,
            start_ms,
            malformed_every: 0,
            seed: 0x5eed,
        }
    }

    /// `endpoint-names.json` for this workload.
    pub fn names_json(&self) -> String {
        let map: serde_json::Map<String, serde_json::Value> = self
            .endpoints
            .iter()
            .map(|e| (e.hash(), serde_json::Value::from(e.name.clone())))
            .collect();
        serde_json::Value::Object(map).to_string()
    }

    /// Writes one `events-….jsonl` file per session into `dir`; returns
    /// the result events written.
    pub fn write(&self, dir: &Path) -> std::io::Result<u64> {
        std::fs::create_dir_all(dir)?;
        let mut rng = Rng(self.seed | 1);
        let hashes: Vec<String> = self.endpoints.iter().map(EndpointSpec::hash).collect();
        let weights: u32 = self.endpoints.iter().map(|e| e.weight.max(1)).sum();
        let mut written = 0;
        let mut next_fp: u128 = 1;
        for s in 0..self.sessions {
            let session = format!("{:016x}", 0xa000_0000_0000_0000u64 + s as u64);
            let start =
                self.start_ms + s as u64 * self.events_per_session as u64 * self.interval_ms;
            let path = dir.join(format!("events-{:08}-{s:06}.jsonl", start / 1000));
            let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
            let per_partition =
                self.events_per_session / (self.compactions_per_session as usize + 1);
            // Per endpoint: bodies delivered in this partition, and the last one.
            let mut delivered: Vec<Vec<(u128, u32)>> = vec![Vec::new(); self.endpoints.len()];
            // What devboy's cache (default bounds) remembers.
            let mut cache = CacheModel::with_bounds(256, 4 << 20, 1_800_000);
            let mut partition = 0u32;
            let (mut base_total, mut fin_total, mut ds_total, mut es_total) =
                (0i64, 0i64, 0i64, 0i64);
            for i in 0..self.events_per_session {
                if per_partition > 0
                    && i > 0
                    && i % per_partition == 0
                    && partition < self.compactions_per_session
                {
                    partition += 1;
                    delivered.iter_mut().for_each(Vec::clear);
                    cache.clear();
                }
                let mut pick = rng.below(u64::from(weights)) as u32;
                let k = self
                    .endpoints
                    .iter()
                    .position(|e| {
                        let w = e.weight.max(1);
                        if pick < w {
                            true
                        } else {
                            pick -= w;
                            false
                        }
                    })
                    .unwrap_or(0);
                let e = &self.endpoints[k];
                let repeat = !delivered[k].is_empty() && rng.chance(e.dup_rate);
                let (fp, chars) = if repeat {
                    delivered[k][rng.below(delivered[k].len() as u64) as usize]
                } else {
                    next_fp += 1;
                    let chars = match (e.polling, delivered[k].last()) {
                        (true, Some(&(_, c))) => c + rng.below(8) as u32,
                        _ => e.chars - e.chars / 10 + rng.below(u64::from(e.chars / 5 + 1)) as u32,
                    };
                    (next_fp, chars)
                };
                let baseline = i64::from(chars / 4);
                let large = chars >= 512;
                let ts = start + i as u64 * self.interval_ms;
                let hit = e.dedup_on && large && {
                    let hit = cache.lookup(fp, ts);
                    if !hit {
                        cache.record(fp, chars as usize, ts);
                    }
                    hit
                };
                let (dedup, fin, ds, es, template) = if hit {
                    ("hit", 15, baseline - 15, 0, None)
                } else {
                    let es = (baseline as f64 * e.encoder_ratio) as i64;
                    let id = if e.dedup_on && large { 6 } else { 0 };
                    let d = if e.dedup_on { "miss" } else { "off" };
                    (
                        d,
                        baseline - es + id,
                        -id,
                        es,
                        e.template.filter(|_| es > 0),
                    )
                };
                if !repeat {
                    delivered[k].push((fp, chars));
                }
                base_total += baseline;
                fin_total += fin;
                ds_total += ds;
                es_total += es;
                let inner: Vec<String> = e.inner.iter().map(|f| format!("\"{f}\"")).collect();
                let template = template.map_or("null".to_owned(), |t| format!("\"{t}\""));
                writeln!(
                    out,
                    r#"{{"kind":"result","v":1,"ts_ms":{ts},"session":"{session}","call":"{call:016x}","tool":"{tool}","upstream":"0000000000000000","endpoint_class":"get","response_chars":{chars},"shape":"{shape}","inner_formats":[{inner}],"fingerprint":"{fp:032x}","path_hashes":[],"dedup":"{dedup}","layer":"L2","action":"x","format":{template},"template":{template},"tokenizer":"o200k_base","tokens_baseline":{baseline},"tokens_final":{fin},"dedup_saved":{ds},"encoder_saved":{es},"elided":false,"context_partition":{partition},"is_error":false,"prefetched":null,"prefetch_hit":null}}"#,
                    call = i,
                    tool = hashes[k],
                    shape = e.shape,
                    inner = inner.join(","),
                )?;
                written += 1;
                if self.malformed_every > 0 && (i + 1) % self.malformed_every == 0 {
                    writeln!(out, "{{\"v\":1,\"kind\":\"result\",\"ts_ms\":")?;
                }
            }
            let end = start + self.events_per_session as u64 * self.interval_ms;
            writeln!(
                out,
                r#"{{"kind":"session","v":1,"ts_ms":{end},"session":"{session}","started_ms":{start},"ended_ms":{end},"events":{n},"results":{n},"sample_rate":1.0,"tokens_baseline":{base_total},"tokens_final":{fin_total},"dedup_saved":{ds_total},"encoder_saved":{es_total},"compactions":{partition},"client":"claude-code"}}"#,
                n = self.events_per_session,
            )?;
            out.flush()?;
        }
        Ok(written)
    }
}

/// xorshift64*: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{read_events, ReadOptions};

    #[test]
    fn generated_events_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Workload::typical(3, 200, 1_700_000_000_000);
        w.malformed_every = 50;
        let n = w.write(dir.path()).unwrap();
        assert_eq!(n, 600);
        let table = read_events(&ReadOptions {
            input: dir.path().to_path_buf(),
            since_ms: 0,
        })
        .unwrap();
        assert_eq!(table.stats.results, 600);
        assert_eq!(table.stats.sessions, 3);
        assert_eq!(table.stats.malformed, 12);
        assert_eq!(table.stats.files, 3);
    }
}
