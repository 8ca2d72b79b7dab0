//! `devboy tune report --html FILE`: the report as one self-contained
//! page. Two bar charts (tokens saved per day, per server) drawn as
//! inline SVG here, then the report's tables; no script, font, image or
//! style sheet is fetched (the page's Content-Security-Policy forbids
//! it), so it opens the same offline, from a mail attachment or a CI
//! artifact, and reads the same without JavaScript.
//!
//! Every string from outside (tool and server names come from the
//! upstream servers) goes through [`escape`].
//!
//! Each bar is a `<rect class="bar">` carrying `data-label` and
//! `data-value` (tokens saved); its height is proportional to the value
//! on a linear axis that starts at zero, so bars compare by height. The
//! axis reaches each side of zero only as far as that side's data
//! ([`Axis`]): a cost of 8 tokens next to savings of thousands takes no
//! step of thousands below zero. A day without results is a bar of
//! height 0 with no value over it; with more bars than fit labelled,
//! every n-th is labelled (each bar keeps its `data-label` and tooltip).
//! Nothing is drawn outside the chart: the legend is laid out by the
//! widths of its texts and wraps when they do not fit in a row.

use std::fmt::Write as _;

use super::{client_name, SavingsReport, Tally, DEFINITIONS_LEGEND, LEGEND};
use crate::table::{int, pct};

/// The fill of a bar that saved tokens.
pub const SAVED_FILL: &str = "#2f6fb5";
/// The fill of a bar where devboy cost more than it saved.
pub const COST_FILL: &str = "#c0392b";

/// `s` safe as HTML text and as a quoted attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// At most this many bar labels (and values over bars) are drawn: 45°
/// labels 11 px high need about 25 px of the 850 px plot each.
const MAX_LABELS: usize = 31;

/// One bar of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// Under the bar.
    pub label: String,
    /// Tokens saved (negative: devboy cost more).
    pub value: i64,
    /// The saving as a share of the baseline, shown over the bar.
    pub pct: Option<f64>,
}

impl Bar {
    fn of(label: &str, t: &Tally) -> Bar {
        Bar {
            label: label.to_owned(),
            value: t.saved(),
            pct: t.saved_pct(),
        }
    }
}

/// A step of 1, 2 or 5 times a power of ten near `span / 5`.
fn tick_step(span: f64) -> f64 {
    let raw = (span / 5.0).max(1.0);
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * power)
}

/// A chart's y axis, in tokens: from `lo` (zero or below) to `hi` (zero
/// or above), with round ticks `step` apart.
///
/// Each side of zero reaches as far as its own data, rounded up to a
/// round step of that side's size (never coarser than `step`), so a side
/// with little data takes little of the plot: values −8 and 12,000 give
/// −8 to 15,000, not −5,000 to 15,000.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Axis {
    lo: f64,
    hi: f64,
    step: f64,
}

impl Axis {
    fn of(values: impl Iterator<Item = i64> + Clone) -> Axis {
        let max = values.clone().max().unwrap_or(0).max(0) as f64;
        let min = values.min().unwrap_or(0).min(0) as f64;
        let step = tick_step(max - min);
        let reach = |v: f64| {
            let side_step = tick_step(v).min(step);
            (v / side_step).ceil() * side_step
        };
        let (lo, hi) = (-reach(-min), reach(max));
        // Nothing but zeros: one step up, so the plot has a scale.
        let hi = if hi == lo { step } else { hi };
        Axis { lo, hi, step }
    }

    /// The values to label, bottom up: the multiples of `step` within
    /// the axis, and each end where it is no such multiple and lies at
    /// least `gap` of the axis (in tokens) from the nearest label.
    fn ticks(&self, gap: f64) -> Vec<f64> {
        let mut ticks: Vec<f64> = Vec::new();
        let first = (self.lo / self.step).ceil() as i64;
        let last = (self.hi / self.step).floor() as i64;
        for k in first..=last {
            ticks.push(k as f64 * self.step);
        }
        for end in [self.lo, self.hi] {
            if ticks.iter().all(|t| (t - end).abs() >= gap) {
                ticks.push(end);
            }
        }
        ticks.sort_by(f64::total_cmp);
        ticks
    }
}

/// About how wide `text` is at `font_size` px in a sans-serif font: a
/// generous 0.62 em a character, so that what is laid out by it fits.
fn text_width(text: &str, font_size: f64) -> f64 {
    text.chars().count() as f64 * font_size * 0.62
}

/// Where each legend entry goes: the x of its swatch and its row. The
/// entries fill rows in order, a new row when the next would not fit
/// between `left` and `right`, and each row is aligned to `right`.
fn legend_layout(texts: &[&str], left: f64, right: f64) -> Vec<(f64, usize)> {
    const SWATCH: f64 = 17.0;
    const GAP: f64 = 24.0;
    let widths: Vec<f64> = texts.iter().map(|t| SWATCH + text_width(t, 12.0)).collect();
    let mut rows: Vec<Vec<usize>> = Vec::new();
    let mut used = 0.0;
    for (i, w) in widths.iter().enumerate() {
        match rows.last_mut() {
            Some(row) if used + GAP + w <= right - left => {
                row.push(i);
                used += GAP + w;
            }
            _ => {
                rows.push(vec![i]);
                used = *w;
            }
        }
    }
    let mut placed = vec![(0.0, 0); texts.len()];
    for (r, row) in rows.iter().enumerate() {
        let total: f64 = row.iter().map(|i| widths[*i]).sum::<f64>()
            + GAP * (row.len().saturating_sub(1)) as f64;
        let mut x = (right - total).max(left);
        for i in row {
            placed[*i] = (x, r);
            x += widths[*i] + GAP;
        }
    }
    placed
}

/// A number short: `950`, `12.3k`, `4.1M`.
fn short(n: f64) -> String {
    let a = n.abs();
    let s = if a < 1e3 {
        format!("{a:.0}")
    } else if a < 1e6 {
        format!("{:.1}k", a / 1e3)
    } else {
        format!("{:.1}M", a / 1e6)
    };
    if n < 0.0 {
        format!("-{s}")
    } else {
        s
    }
}

/// A bar chart of `bars` as an inline `<svg>` with id `id`: a title, a
/// y axis of tokens with ticks, one labelled bar per entry, an x-axis
/// title and a legend.
pub fn bar_chart(id: &str, title: &str, x_title: &str, bars: &[Bar]) -> String {
    const W: f64 = 960.0;
    const LEFT: f64 = 90.0;
    const RIGHT: f64 = 20.0;
    let has_cost = bars.iter().any(|b| b.value < 0);
    let legend: Vec<(&str, &str)> = [
        (SAVED_FILL, "tokens saved (baseline − received)"),
        (COST_FILL, "cost more than saved"),
    ]
    .into_iter()
    .filter(|(fill, _)| *fill == SAVED_FILL || has_cost)
    .collect();
    let texts: Vec<&str> = legend.iter().map(|(_, text)| *text).collect();
    let placed = legend_layout(&texts, LEFT, W - RIGHT);
    let legend_rows = placed.iter().map(|(_, r)| r + 1).max().unwrap_or(1);
    // The legend's rows, then room for a value over a bar that reaches
    // the plot's top (or over zero, for a cost, when nothing saved).
    let plot_top = 36.0 + 16.0 * legend_rows as f64 + 16.0;
    // Labels turn 45° when many; they need the room below.
    let rotate = bars.len() > 12;
    let bottom = if rotate { 100.0 } else { 56.0 };
    let h = plot_top + 230.0 + bottom;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = h - plot_top - bottom;
    let axis = Axis::of(bars.iter().map(|b| b.value));
    let y = |v: f64| plot_top + (axis.hi - v) / (axis.hi - axis.lo) * plot_h;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="{id}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" role="img" aria-labelledby="{id}-title">"#,
        id = escape(id)
    );
    let _ = write!(
        s,
        r##"<title id="{}-title">{}</title><rect x="0" y="0" width="{W}" height="{h}" fill="#ffffff"/>"##,
        escape(id),
        escape(title)
    );
    let _ = write!(
        s,
        r#"<text class="chart-title" x="{}" y="24" text-anchor="middle" font-size="17" font-weight="bold">{}</text>"#,
        W / 2.0,
        escape(title)
    );
    // Legend, top right.
    for ((fill, text), (lx, row)) in legend.iter().zip(&placed) {
        let ly = 36.0 + 16.0 * *row as f64;
        let _ = write!(
            s,
            r#"<g class="legend"><rect x="{lx:.1}" y="{ly}" width="12" height="12" fill="{fill}"/><text x="{:.1}" y="{}" font-size="12">{}</text></g>"#,
            lx + 17.0,
            ly + 10.0,
            escape(text)
        );
    }
    // Y axis: grid lines and tick labels, labels at least 14 px apart.
    let min_gap = 14.0 / plot_h * (axis.hi - axis.lo);
    for v in axis.ticks(min_gap) {
        let yy = y(v);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" x2="{}" y1="{yy:.2}" y2="{yy:.2}" stroke="{}" stroke-width="1"/><text class="tick" x="{}" y="{:.2}" text-anchor="end" font-size="11">{}</text>"##,
            W - RIGHT,
            if v == 0.0 { "#444444" } else { "#e3e3e3" },
            LEFT - 6.0,
            yy + 4.0,
            short(v)
        );
    }
    let _ = write!(
        s,
        r#"<text class="axis-title" transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle" font-size="12">tokens saved</text>"#,
        plot_top + plot_h / 2.0
    );
    let _ = write!(
        s,
        r#"<text class="axis-title" x="{:.1}" y="{}" text-anchor="middle" font-size="12">{}</text>"#,
        LEFT + plot_w / 2.0,
        h - 8.0,
        escape(x_title)
    );
    // Bars.
    let n = bars.len().max(1) as f64;
    let slot = plot_w / n;
    let width = (slot * 0.7).min(80.0);
    let zero = y(0.0);
    let label_every = bars.len().div_ceil(MAX_LABELS).max(1);
    for (i, bar) in bars.iter().enumerate() {
        let cx = LEFT + slot * (i as f64 + 0.5);
        let top = y(bar.value as f64);
        let (by, bh) = if bar.value >= 0 {
            (top, zero - top)
        } else {
            (zero, top - zero)
        };
        let fill = if bar.value >= 0 {
            SAVED_FILL
        } else {
            COST_FILL
        };
        let label = escape(&bar.label);
        let pct_text = bar.pct.map_or(String::new(), |p| format!(" ({}%)", pct(p)));
        let _ = write!(
            s,
            r#"<rect class="bar" data-label="{label}" data-value="{}" x="{:.2}" y="{by:.2}" width="{width:.2}" height="{bh:.2}" fill="{fill}"><title>{label}: {} tokens saved{pct_text}</title></rect>"#,
            bar.value,
            cx - width / 2.0,
            int(bar.value),
        );
        // A day without results (no baseline, nothing saved) gets no value:
        // the empty slot reads as such, where "0" over each would clutter.
        let empty = bar.value == 0 && bar.pct.is_none();
        if bars.len() <= MAX_LABELS && !empty {
            let _ = write!(
                s,
                r#"<text class="bar-value" x="{cx:.2}" y="{:.2}" text-anchor="middle" font-size="10">{}</text>"#,
                by - 4.0,
                short(bar.value as f64)
                    + &bar.pct.map_or(String::new(), |p| format!(" · {}%", pct(p)))
            );
        }
        if i % label_every != 0 {
            continue;
        }
        let shown: String = if bar.label.chars().count() > 18 {
            bar.label.chars().take(17).chain(['…']).collect()
        } else {
            bar.label.clone()
        };
        let ly = zero.max(plot_top + plot_h) + 16.0;
        if rotate {
            let _ = write!(
                s,
                r#"<text class="bar-label" transform="translate({cx:.2} {ly:.2}) rotate(-45)" text-anchor="end" font-size="11">{}</text>"#,
                escape(&shown)
            );
        } else {
            let _ = write!(
                s,
                r#"<text class="bar-label" x="{cx:.2}" y="{ly:.2}" text-anchor="middle" font-size="11">{}</text>"#,
                escape(&shown)
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// An HTML table: `head`, one row per entry, a totals footer. Cells are
/// escaped here; columns from `numeric` on are right-aligned.
fn table(head: &[&str], numeric: usize, rows: &[Vec<String>], total: &[String]) -> String {
    let cell = |tag: &str, i: usize, text: &str| {
        let class = if i >= numeric { r#" class="n""# } else { "" };
        format!("<{tag}{class}>{}</{tag}>", escape(text))
    };
    let mut s = String::from("<table><thead><tr>");
    for (i, h) in head.iter().enumerate() {
        s.push_str(&cell("th", i, h));
    }
    s.push_str("</tr></thead><tbody>");
    for row in rows {
        s.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            s.push_str(&cell("td", i, c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody><tfoot><tr>");
    for (i, c) in total.iter().enumerate() {
        s.push_str(&cell("td", i, c));
    }
    s.push_str("</tr></tfoot></table>");
    s
}

const FIGURE_HEAD: [&str; 7] = [
    "calls", "baseline", "received", "saved", "saved %", "dedup", "encoder",
];

fn row(lead: &[String], t: &Tally) -> Vec<String> {
    let mut cells = lead.to_vec();
    cells.extend(t.cells());
    cells
}

fn head(lead: &[&'static str]) -> Vec<&'static str> {
    lead.iter().chain(FIGURE_HEAD.iter()).copied().collect()
}

fn total_row(lead: usize, t: &Tally) -> Vec<String> {
    let mut cells = vec!["total".to_owned()];
    cells.resize(lead, String::new());
    cells.extend(t.cells());
    cells
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;background:#fff}\
h1{font-size:22px;margin:0 0 6px}h2{font-size:17px;margin:28px 0 8px}p{margin:4px 0;color:#444}\
.chart{display:block;margin:16px 0;border:1px solid #ddd}\
table{border-collapse:collapse;font-size:13px;margin:6px 0}th,td{padding:3px 10px;border-bottom:1px solid #e5e5e5;text-align:left;white-space:nowrap}\
th{background:#f4f6f8}.n{text-align:right;font-variant-numeric:tabular-nums}tfoot td{font-weight:bold;border-top:2px solid #999}\
.total{font-size:15px;margin:10px 0}";

/// The per-session table, the line on sessions without results, and the
/// definitions legend.
fn sessions(s: &mut String, report: &SavingsReport) {
    s.push_str("<h2>Per session</h2>");
    let mut head_sessions = head(&["session", "client", "first result (UTC)"]);
    head_sessions.extend(["definitions", "tools"]);
    let rows: Vec<Vec<String>> = report
        .sessions
        .iter()
        .map(|x| {
            let mut cells = row(
                &[
                    x.session.clone(),
                    x.client.map_or("-", client_name).to_owned(),
                    x.first_result(),
                ],
                &x.figures,
            );
            cells.extend(x.definition_cells());
            cells
        })
        .collect();
    s.push_str(&table(
        &head_sessions,
        3,
        &rows,
        &total_row(3, &report.total),
    ));
    if let Some(line) = report.sessions_without_results() {
        let _ = write!(s, "<p class=\"no-results\">{}.</p>", escape(&line));
    }
    let _ = write!(s, "<p>{}.</p>", escape(DEFINITIONS_LEGEND));
}

/// The whole page.
pub fn page(report: &SavingsReport) -> String {
    let mut s = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    s.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">");
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    s.push_str("<title>devboy: tokens saved</title><style>");
    s.push_str(STYLE);
    s.push_str("</style></head><body>");
    let _ = write!(
        s,
        "<h1>devboy: tokens saved</h1><p>{}</p>",
        escape(&report.heading())
    );
    let _ = write!(
        s,
        "<p>{}{}</p>",
        escape(&report.read_line()),
        escape(
            &report
                .skipped()
                .map_or(String::new(), |k| format!("; skipped: {k}"))
        )
    );
    if !report.has_results() {
        let _ = write!(
            s,
            "<p class=\"empty\">{}</p>",
            escape(&report.empty_message())
        );
        if !report.is_empty() {
            sessions(&mut s, report);
        }
        s.push_str("</body></html>\n");
        return s;
    }
    let t = &report.total;
    let [calls, baseline, received, saved, _, dedup, encoder] =
        <[String; 7]>::try_from(t.cells()).unwrap_or_else(|_| Default::default());
    let _ = write!(
        s,
        "<p class=\"total\">{calls} calls: the model would have received <b>{baseline}</b> tokens, it received <b>{received}</b>; saved <b>{saved}</b>{} (dedup {dedup}, encoder {encoder}).</p>",
        t.saved_pct().map_or(String::new(), |p| format!(" ({}%)", pct(p))),
    );
    let days: Vec<Bar> = report
        .days
        .iter()
        .map(|d| Bar::of(&d.date, &d.figures))
        .collect();
    s.push_str(&bar_chart(
        "chart-days",
        "Tokens saved per day",
        "day (UTC)",
        &days,
    ));
    let servers: Vec<Bar> = report
        .servers
        .iter()
        .map(|d| Bar::of(&d.server, &d.figures))
        .collect();
    s.push_str(&bar_chart(
        "chart-servers",
        "Tokens saved per server",
        "server (tool name prefix)",
        &servers,
    ));
    let _ = write!(s, "<p>{}.</p>", escape(LEGEND));
    if let Some(line) = report.expanded_line() {
        let _ = write!(s, "<p class=\"expanded\">{}.</p>", escape(&line));
    }

    s.push_str("<h2>Per day (UTC)</h2>");
    let rows: Vec<Vec<String>> = report
        .days
        .iter()
        .map(|d| row(std::slice::from_ref(&d.date), &d.figures))
        .collect();
    s.push_str(&table(&head(&["date"]), 1, &rows, &total_row(1, t)));

    sessions(&mut s, report);

    s.push_str("<h2>Per server</h2>");
    let rows: Vec<Vec<String>> = report
        .servers
        .iter()
        .map(|x| row(std::slice::from_ref(&x.server), &x.figures))
        .collect();
    s.push_str(&table(&head(&["server"]), 1, &rows, &total_row(1, t)));

    s.push_str("<h2>Per tool</h2>");
    let rows: Vec<Vec<String>> = report
        .tools
        .iter()
        .map(|x| row(&[x.label(), x.server.clone()], &x.figures))
        .collect();
    s.push_str(&table(
        &head(&["tool", "server"]),
        2,
        &rows,
        &total_row(2, t),
    ));
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape(r#"<img src=x onerror="a('b')">&"#),
            "&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt;&amp;"
        );
    }

    const DAY: u64 = 86_400_000;
    const T0: u64 = 1_764_201_600_000; // 2025-11-27 00:00 UTC

    /// A result of tool 7 on each of `days` (days after T0; 60 of 100
    /// tokens saved), with `today` days after T0 the window's end.
    fn report_on(tool_name: &str, days: &[u64], today: u64) -> SavingsReport {
        use crate::event::Record;
        use crate::names::ExposedNames;
        use crate::read::EventTable;
        let table = EventTable {
            records: days
                .iter()
                .map(|day| Record {
                    ts_ms: T0 + day * DAY,
                    tokens_baseline: 100,
                    tokens_final: 40,
                    encoder_saved: 60,
                    ..Record::blank(7, 1)
                })
                .collect(),
            ..EventTable::default()
        };
        let names = ExposedNames::from_pairs([("0000000000000007", tool_name.to_owned())]);
        SavingsReport::of(
            &table,
            &names,
            super::super::SavingsOptions {
                input: "/t/events".into(),
                names_file: "/t/names.json".into(),
                days: 30,
                now_ms: T0 + today * DAY + 1,
            },
        )
    }

    fn report(tool_name: &str, records: u64) -> SavingsReport {
        let days: Vec<u64> = (0..records).collect();
        report_on(tool_name, &days, records.saturating_sub(1))
    }

    #[test]
    fn the_page_is_self_contained_and_escapes_server_names() {
        let page = page(&report("<script>alert(1)</script>__x", 3));
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;__x"));
        for outside in [" src=", " href=", "url(", "@import"] {
            assert!(!page.contains(outside), "{outside}");
        }
        assert_eq!(bars(&page).len(), 3 + 1, "three days, one server");
        assert!(page.contains("<tfoot><tr><td>total</td>"));
    }

    /// The `<svg id="chart-days">` of a page.
    fn days_chart(page: &str) -> &str {
        let start = page.find("<svg id=\"chart-days\"").unwrap();
        &page[start..start + page[start..].find("</svg>").unwrap()]
    }

    #[test]
    fn days_without_results_are_empty_bars() {
        // Results on days 0 and 3 of a 30-day window, today day 5.
        let page = page(&report_on("fs__read", &[0, 3], 5));
        let chart = days_chart(&page);
        let read = bars(chart);
        let values: Vec<(&str, i64)> = read.iter().map(|(l, v, _)| (l.as_str(), *v)).collect();
        assert_eq!(
            values,
            [
                ("2025-11-27", 60),
                ("2025-11-28", 0),
                ("2025-11-29", 0),
                ("2025-11-30", 60),
                ("2025-12-01", 0),
                ("2025-12-02", 0),
            ]
        );
        assert_eq!(read[1].2, 0.0, "an empty day has no height");
        // Values only over the days with results; every day labelled.
        assert_eq!(chart.matches("class=\"bar-value\"").count(), 2, "{chart}");
        assert_eq!(chart.matches("class=\"bar-label\"").count(), 6);
    }

    #[test]
    fn many_days_are_labelled_every_few() {
        let days: Vec<u64> = (0..90).collect();
        let page = page(&report_on("fs__read", &days, 89));
        let chart = days_chart(&page);
        assert_eq!(bars(chart).len(), 90);
        let labels = chart.matches("class=\"bar-label\"").count();
        assert!((20..=MAX_LABELS).contains(&labels), "{labels} labels");
        assert_eq!(chart.matches("class=\"bar-value\"").count(), 0);
    }

    #[test]
    fn an_empty_page_says_so() {
        let page = page(&report("a__b", 0));
        assert!(page.contains("nothing to report yet"), "{page}");
        assert!(!page.contains("<svg"));
    }

    #[test]
    fn each_side_of_the_axis_reaches_as_far_as_its_data() {
        let axis = |values: &[i64]| Axis::of(values.iter().copied());
        let small_cost = axis(&[12_000, -8]);
        assert_eq!(
            small_cost,
            Axis {
                lo: -8.0,
                hi: 15_000.0,
                step: 5_000.0
            }
        );
        // -8 lies a hair from 0 on this scale: no label of its own.
        assert_eq!(small_cost.ticks(300.0), [0.0, 5_000.0, 10_000.0, 15_000.0]);
        let only_cost = axis(&[-8, 0]);
        assert_eq!((only_cost.lo, only_cost.hi), (-8.0, 0.0));
        assert_eq!(only_cost.ticks(0.5), [-8.0, -6.0, -4.0, -2.0, 0.0]);
        // An end that is no multiple of the step is labelled when apart.
        let mixed = axis(&[1_000, 250, 0, -100]);
        assert_eq!((mixed.lo, mixed.hi, mixed.step), (-100.0, 1_000.0, 500.0));
        assert_eq!(mixed.ticks(60.0), [-100.0, 0.0, 500.0, 1_000.0]);
        let small_saving = axis(&[-12_000, 3]);
        assert_eq!((small_saving.lo, small_saving.hi), (-15_000.0, 3.0));
        assert_eq!(
            axis(&[0, 0]),
            Axis {
                lo: 0.0,
                hi: 1.0,
                step: 1.0
            }
        );
    }

    #[test]
    fn the_legend_fits_and_wraps() {
        let texts = ["tokens saved (baseline − received)", "cost more than saved"];
        let extent = |placed: &[(f64, usize)], i: usize| {
            (placed[i].0, placed[i].0 + 17.0 + text_width(texts[i], 12.0))
        };
        let wide = legend_layout(&texts, 90.0, 940.0);
        assert_eq!((wide[0].1, wide[1].1), (0, 0), "one row");
        assert!(extent(&wide, 1).1 <= 940.0 + 1e-9, "{wide:?}");
        assert!(extent(&wide, 0).1 < extent(&wide, 1).0, "{wide:?}");
        let narrow = legend_layout(&texts, 90.0, 400.0);
        assert_eq!((narrow[0].1, narrow[1].1), (0, 1), "two rows");
        for i in 0..2 {
            let (from, to) = extent(&narrow, i);
            assert!(from >= 90.0 && to <= 400.0 + 1e-9, "{narrow:?}");
        }
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(1000.0), 200.0);
        assert_eq!(tick_step(7.0), 2.0);
        assert_eq!(tick_step(0.0), 1.0);
        assert_eq!(tick_step(33_000.0), 10_000.0);
        assert_eq!(short(12_345.0), "12.3k");
        assert_eq!(short(-950.0), "-950");
    }

    /// (label, value, height) of each bar, read back from the SVG.
    fn bars(svg: &str) -> Vec<(String, i64, f64)> {
        svg.split("<rect class=\"bar\"")
            .skip(1)
            .map(|rest| {
                let attr = |name: &str| {
                    let start = rest.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                    rest[start..][..rest[start..].find('"').unwrap()].to_owned()
                };
                (
                    attr("data-label"),
                    attr("data-value").parse().unwrap(),
                    attr("height").parse().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn bar_heights_are_proportional_and_names_escaped() {
        let input = [("a<b>", 1000), ("c", 250), ("d", 0), ("e", -100)];
        let chart = bar_chart(
            "x",
            "T & t",
            "server",
            &input
                .iter()
                .map(|(l, v)| Bar {
                    label: (*l).to_owned(),
                    value: *v,
                    pct: None,
                })
                .collect::<Vec<_>>(),
        );
        assert!(!chart.contains("a<b>"), "{chart}");
        assert!(chart.contains("T &amp; t"));
        assert!(
            chart.contains(COST_FILL),
            "a negative bar has the cost fill"
        );
        let read = bars(&chart);
        assert_eq!(read.len(), 4);
        assert_eq!(read[0].0, "a&lt;b&gt;");
        let per_token = read[0].2 / 1000.0;
        for (_, value, height) in &read {
            assert!(
                (height - value.unsigned_abs() as f64 * per_token).abs() < 0.02,
                "{read:?}"
            );
        }
    }
}
