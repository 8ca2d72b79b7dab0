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
//! on a linear axis that starts at zero, so bars compare by height.

use std::fmt::Write as _;

use super::{client_name, minute, SavingsReport, Tally};
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
    const TOP: f64 = 60.0;
    // Labels turn 45° when many; they need the room below.
    let rotate = bars.len() > 12;
    let bottom = if rotate { 100.0 } else { 56.0 };
    let h = TOP + 230.0 + bottom;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = h - TOP - bottom;
    let max = bars.iter().map(|b| b.value).max().unwrap_or(0).max(0) as f64;
    let min = bars.iter().map(|b| b.value).min().unwrap_or(0).min(0) as f64;
    let step = tick_step(max - min);
    let hi = ((max / step).ceil() * step).max(step);
    let lo = (min / step).floor() * step;
    let y = |v: f64| TOP + (hi - v) / (hi - lo) * plot_h;
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
    let has_cost = bars.iter().any(|b| b.value < 0);
    let mut lx = W - RIGHT - 330.0;
    for (fill, text, shown) in [
        (SAVED_FILL, "tokens saved (baseline − received)", true),
        (COST_FILL, "cost more than saved", has_cost),
    ] {
        if !shown {
            continue;
        }
        let _ = write!(
            s,
            r#"<g class="legend"><rect x="{lx}" y="36" width="12" height="12" fill="{fill}"/><text x="{}" y="46" font-size="12">{}</text></g>"#,
            lx + 17.0,
            escape(text)
        );
        lx += 230.0;
    }
    // Y axis: grid lines and tick labels.
    let mut v = lo;
    while v <= hi + step / 2.0 {
        let yy = y(v);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" x2="{}" y1="{yy:.2}" y2="{yy:.2}" stroke="{}" stroke-width="1"/><text x="{}" y="{:.2}" text-anchor="end" font-size="11">{}</text>"##,
            W - RIGHT,
            if v == 0.0 { "#444444" } else { "#e3e3e3" },
            LEFT - 6.0,
            yy + 4.0,
            short(v)
        );
        v += step;
    }
    let _ = write!(
        s,
        r#"<text class="axis-title" transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle" font-size="12">tokens saved</text>"#,
        TOP + plot_h / 2.0
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
        if bars.len() <= 31 {
            let _ = write!(
                s,
                r#"<text class="bar-value" x="{cx:.2}" y="{:.2}" text-anchor="middle" font-size="10">{}</text>"#,
                by - 4.0,
                short(bar.value as f64)
                    + &bar.pct.map_or(String::new(), |p| format!(" · {}%", pct(p)))
            );
        }
        let shown: String = if bar.label.chars().count() > 18 {
            bar.label.chars().take(17).chain(['…']).collect()
        } else {
            bar.label.clone()
        };
        let ly = zero.max(TOP + plot_h) + 16.0;
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
    let r = &report.read;
    let _ = write!(
        s,
        "<p>read {} result events and {} session summaries from {} files{}</p>",
        int(r.results as i64),
        int(r.sessions as i64),
        r.files,
        escape(
            &report
                .skipped()
                .map_or(String::new(), |k| format!("; skipped: {k}"))
        )
    );
    if report.is_empty() {
        let _ = writeln!(
            s,
            "<p class=\"empty\">{}</p></body></html>",
            escape(&report.empty_message())
        );
        return s;
    }
    let t = &report.total;
    let _ = write!(
        s,
        "<p class=\"total\">{} calls: the model would have received <b>{}</b> tokens, it received <b>{}</b>; saved <b>{}</b>{} (dedup {}, encoder {}).</p>",
        int(t.calls as i64),
        int(t.tokens_baseline as i64),
        int(t.tokens_final as i64),
        int(t.saved()),
        t.saved_pct().map_or(String::new(), |p| format!(" ({}%)", pct(p))),
        int(t.dedup_saved),
        int(t.encoder_saved),
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
    s.push_str("<p>baseline: tokens the model would have received without devboy; received: tokens it received; saved = baseline − received, of which dedup (references to results already sent) and encoder (shorter lossless formats).</p>");

    s.push_str("<h2>Per day (UTC)</h2>");
    let rows: Vec<Vec<String>> = report
        .days
        .iter()
        .map(|d| row(std::slice::from_ref(&d.date), &d.figures))
        .collect();
    s.push_str(&table(&head(&["date"]), 1, &rows, &total_row(1, t)));

    s.push_str("<h2>Per session</h2>");
    let mut head_sessions = head(&["session", "client", "first result"]);
    head_sessions.extend(["definitions", "tools"]);
    let rows: Vec<Vec<String>> = report
        .sessions
        .iter()
        .map(|x| {
            let mut cells = row(
                &[
                    x.session.clone(),
                    x.client.map_or("-", client_name).to_owned(),
                    minute(x.first_ms),
                ],
                &x.figures,
            );
            match x.definitions {
                Some(d) => cells.extend([int(d.tokens as i64), int(d.tools as i64)]),
                None => cells.extend(["-".to_owned(), "-".to_owned()]),
            }
            cells
        })
        .collect();
    s.push_str(&table(&head_sessions, 3, &rows, &total_row(3, t)));
    s.push_str("<p>definitions: tokens of the tool definitions every model request of the session carried (the last tools/list devboy served), when its summary recorded them.</p>");

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

    fn report(tool_name: &str, records: usize) -> SavingsReport {
        use crate::event::Record;
        use crate::names::ExposedNames;
        use crate::read::EventTable;
        let table = EventTable {
            records: (0..records as u64)
                .map(|i| Record {
                    ts_ms: 1_764_201_600_000 + i * 86_400_000,
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
                now_ms: 1_764_201_600_000 + 40 * 86_400_000,
            },
        )
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

    #[test]
    fn an_empty_page_says_so() {
        let page = page(&report("a__b", 0));
        assert!(page.contains("nothing to report yet"), "{page}");
        assert!(!page.contains("<svg"));
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
