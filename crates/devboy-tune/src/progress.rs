//! A one-line progress bar on stderr, for reads large enough to make a
//! person wonder. It draws from its own thread every 100 ms, so workers
//! only bump an atomic counter; it draws nothing unless asked to (the
//! caller passes whether stderr is a terminal) and the input is large.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Inputs smaller than this finish before a bar would be worth seeing.
pub const MIN_BYTES: u64 = 16 << 20;

/// Counts bytes done out of a known total.
#[derive(Debug)]
pub struct Progress {
    total: u64,
    done: AtomicU64,
}

impl Progress {
    /// Bytes processed so far.
    pub fn add(&self, bytes: u64) {
        self.done.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Runs `work`, drawing a bar labelled `label` on stderr meanwhile when
    /// `draw` is set and `total` is at least [`MIN_BYTES`]. The bar is
    /// erased when `work` returns.
    pub fn run<R>(label: &str, total: u64, draw: bool, work: impl FnOnce(&Progress) -> R) -> R {
        let progress = Progress {
            total,
            done: AtomicU64::new(0),
        };
        if !draw || total < MIN_BYTES {
            return work(&progress);
        }
        let stop = AtomicBool::new(false);
        let start = Instant::now();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut stderr = std::io::stderr();
                while !stop.load(Ordering::Relaxed) {
                    let line = progress.render(label, start.elapsed());
                    let _ = write!(stderr, "\r{line}");
                    let _ = stderr.flush();
                    std::thread::sleep(Duration::from_millis(100));
                }
                // Erase the line so later output starts clean.
                let _ = write!(stderr, "\r\x1b[2K");
                let _ = stderr.flush();
            });
            let result = work(&progress);
            stop.store(true, Ordering::Relaxed);
            result
        })
    }

    /// The bar as text, e.g.
    /// `reading [##########··········]  50%  12.0/24.0 MB  1.2 s`.
    pub fn render(&self, label: &str, elapsed: Duration) -> String {
        const WIDTH: usize = 24;
        let done = self.done.load(Ordering::Relaxed).min(self.total);
        let fraction = if self.total == 0 {
            1.0
        } else {
            done as f64 / self.total as f64
        };
        let filled = ((fraction * WIDTH as f64) as usize).min(WIDTH);
        format!(
            "{label} [{}{}] {:>3.0}%  {:.1}/{:.1} MB  {:.1} s",
            "#".repeat(filled),
            "·".repeat(WIDTH - filled),
            fraction * 100.0,
            done as f64 / 1e6,
            self.total as f64 / 1e6,
            elapsed.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_fraction_and_sizes() {
        let p = Progress {
            total: 24_000_000,
            done: AtomicU64::new(0),
        };
        p.add(12_000_000);
        let line = p.render("reading", Duration::from_millis(1200));
        assert_eq!(
            line,
            "reading [############············]  50%  12.0/24.0 MB  1.2 s"
        );
        p.add(u64::MAX / 2);
        assert!(p.render("x", Duration::ZERO).contains("100%"));
    }

    #[test]
    fn small_inputs_draw_nothing_and_return_the_result() {
        let out = Progress::run("x", 10, true, |p| {
            p.add(10);
            7
        });
        assert_eq!(out, 7);
    }
}
