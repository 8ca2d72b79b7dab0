//! Plain-text tables and number formats for the reports.
//!
//! Hand-written rather than a table crate: the reports need aligned
//! columns and nothing else (no wrapping, borders or colours), which is a
//! few lines, and a crate would add build time on every machine.

/// How a column is aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A table of text cells.
#[derive(Clone, Debug, Default)]
pub struct TextTable {
    header: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
    /// Rows after which a rule is drawn.
    rules: Vec<usize>,
}

impl TextTable {
    /// A table with these columns.
    pub fn new(columns: &[(&str, Align)]) -> Self {
        TextTable {
            header: columns.iter().map(|(h, a)| ((*h).to_owned(), *a)).collect(),
            ..TextTable::default()
        }
    }

    /// Adds a row (missing cells are empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Draws a rule under the rows added so far.
    pub fn rule(&mut self) {
        self.rules.push(self.rows.len());
    }

    /// The table as lines of text, columns two spaces apart.
    pub fn render(&self) -> String {
        let n = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|(h, _)| width(h)).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(width(cell));
            }
        }
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut out = String::new();
            for (i, cell) in cells.enumerate().take(n) {
                if i > 0 {
                    out.push_str("  ");
                }
                let pad = " ".repeat(widths[i].saturating_sub(width(cell)));
                match self.header[i].1 {
                    Align::Left => {
                        out.push_str(cell);
                        out.push_str(&pad);
                    }
                    Align::Right => {
                        out.push_str(&pad);
                        out.push_str(cell);
                    }
                }
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
            out
        };
        let total: usize = widths.iter().sum::<usize>() + 2 * n.saturating_sub(1);
        let mut out = line(&mut self.header.iter().map(|(h, _)| h.as_str()));
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for (r, row) in self.rows.iter().enumerate() {
            if self.rules.contains(&r) && r > 0 {
                out.push_str(&"-".repeat(total));
                out.push('\n');
            }
            let mut cells = row.iter().map(String::as_str).chain(std::iter::repeat(""));
            out.push_str(&line(&mut cells));
        }
        out
    }
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// An integer with thousands separators: `1,234,567`.
pub fn int(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A size in characters, short: `512`, `14.2k`, `3.1M`.
pub fn size(n: f64) -> String {
    if n < 1000.0 {
        format!("{n:.0}")
    } else if n < 1e6 {
        format!("{:.1}k", n / 1e3)
    } else {
        format!("{:.1}M", n / 1e6)
    }
}

/// A percentage with one decimal: `12.5`.
pub fn pct(x: f64) -> String {
    format!("{x:.1}")
}

/// The civil date (UTC) of a Unix millisecond, `YYYY-MM-DD`.
pub fn date(unix_ms: u64) -> String {
    let (y, m, d) = devboy_core::date::civil_from_days((unix_ms / 86_400_000) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let mut t = TextTable::new(&[("name", Align::Left), ("n", Align::Right)]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long name".into(), "1,000".into()]);
        t.rule();
        t.row(vec!["total".into()]);
        assert_eq!(
            t.render(),
            "name           n\n----------------\na              1\nlong name  1,000\n----------------\ntotal\n"
        );
    }

    #[test]
    fn formats() {
        assert_eq!(int(0), "0");
        assert_eq!(int(999), "999");
        assert_eq!(int(1000), "1,000");
        assert_eq!(int(-1_234_567), "-1,234,567");
        assert_eq!(size(512.0), "512");
        assert_eq!(size(14_200.0), "14.2k");
        assert_eq!(size(3_100_000.0), "3.1M");
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(1_715_472_000_000), "2024-05-12");
        assert_eq!(date(951_782_400_000), "2000-02-29");
    }
}
