//! Markdown tables as CSV, with every byte around them kept.
//!
//! Each top-level GFM table of a document becomes a fenced `csv` block; the
//! text before, between and after tables, and any table this template
//! cannot restore exactly, stays as it was. A table's pipes, padding and
//! delimiter row are recorded in the fence's info string, compactly, and
//! only where they differ from the common layout.
//!
//! ````text
//! > [encoded: md tables as csv #208615340]
//! Open issues:
//!
//! ```csv
//! #,title,state
//! 1,"Crash on start, sometimes",open
//! ```
//!
//! 1 issue.
//! ````
//!
//! # Grammar (the decoder's specification)
//!
//! ```text
//! encoded  = HINT LF body
//! HINT     = "> [encoded: md tables as csv" CHECK "]"
//! CHECK    = " #" 9DIGIT                  ; see crate::encode::check
//! body     = *( block / line )            ; lines end with LF, the last may not
//! line     = any line that is not an opener, kept verbatim
//! block    = opener LF 1*( record LF ) FENCE [ LF ]
//! opener   = FENCE "csv" [ SP PAD ] [ SP DELIM ]
//! FENCE    = 3*"`"                        ; the closing line is exactly the same run
//! PAD      = "tight" / "aligned"          ; absent: spaced
//! DELIM    = the table's delimiter row verbatim (only `|`, `:`, `-`, SP, TAB;
//!            never starts with a letter, so it cannot be mistaken for PAD)
//! record   = one CSV record (fields quoted as JSON strings, see below)
//! ```
//!
//! A block stands for the table's lines: the first record is the header
//! row, then comes the delimiter row, then one row per further record. The
//! last table line ends with LF iff the closing fence does.
//!
//! **Delimiter row.** `DELIM` when given, else the default: for *spaced*
//! and *tight* tables `|` followed by `---|` once per header field
//! (`|---|---|`); for *aligned* tables `|`, then for each header field
//! a space, as many `-` as the widest field of that column has characters
//! (counting each `|` as two, for its escape; at least 3), a space and `|`
//! (`| --- | ----- |`), which is how formatters such as prettier lay out
//! tables without alignment. Its first character being `|` means
//! every row has a leading pipe; its last character being `|` means every
//! row has a trailing pipe. Its cells (split on `|` inside those pipes)
//! give each column's alignment (`:--` left, `--:` right, `:-:` center)
//! and width (the cell's length in characters, spaces included).
//!
//! **Rows.** A row of fields f₁…fₙ is: the leading pipe if any, the cells
//! joined by `|`, the trailing pipe if any. A cell is the field with every
//! `|` escaped as `\|`, padded by `PAD`:
//!
//! - *spaced*: one space on each side that has a pipe (`| a | b |`, and
//!   `a | b` without outer pipes);
//! - *tight*: no padding (`|a|b|`);
//! - *aligned*: one space on each side that has a pipe, and the content
//!   padded with spaces to the column's width (right-padded for left and
//!   unaligned columns, left-padded for right, split for center with the
//!   extra space on the right), so the cell is exactly as long as the
//!   delimiter cell above it.
//!
//! **CSV records.** Fields separated by `,`; a field is quoted (as a JSON
//! string, `\"` for `"`: a cell may hold code the model copies back, see
//! invariant 9) iff it contains `,`, `"` or a line break, or is the only
//! field of the record and empty. A row's field count is its own (GFM
//! allows body rows shorter or longer than the header).
//!
//! # What is converted, what is declined
//!
//! A table is converted only if it is a top-level table as GFM parses it
//! (not inside a list, a quote or a code block), starts at a line's first
//! byte, holds no carriage return, and one of the three paddings rebuilds
//! every one of its lines exactly. *Tight* always does when every row has
//! the outer pipes of the delimiter row; when several do, the encoder
//! picks the one that leaves the fewest characters in the fields, so
//! padding reaches the CSV only when no rule explains it. Any other table
//! is left as Markdown.
//!
//! The whole document is declined (`None`) if no table converts, or if any
//! of its own lines would read as an opener (a line of three or more
//! backticks followed by `csv` and then a space or the line's end).

use std::ops::Range;

use pulldown_cmark::{Event, Options, Parser, Tag};

use super::{
    check, checked_body, csv, fence_for, leading_backticks, Template, TemplateDecodeError,
};

/// The hint line of this template.
pub const HINT: &str = "> [encoded: md tables as csv]";

/// Encodes every top-level Markdown table of `doc` as a fenced CSV block,
/// keeping all other bytes, or `None` if no table converts or the result
/// would not decode back to `doc` exactly.
pub fn encode(doc: &str) -> Option<String> {
    if !doc.contains('|') || doc.split('\n').any(|line| parse_opener(line).is_some()) {
        return None;
    }
    let mut out = String::with_capacity(doc.len() + HINT.len() + 1);
    out.push_str(HINT);
    out.push('\n');
    let mut copied = 0usize;
    let mut converted = 0usize;
    for range in top_level_tables(doc) {
        let Some(region) = doc.get(range.clone()) else {
            continue;
        };
        let (body, terminator) = match region.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (region, ""),
        };
        let lines: Vec<&str> = body.split('\n').collect();
        let Some(block) = encode_table(&lines) else {
            continue;
        };
        out.push_str(doc.get(copied..range.start)?);
        out.push_str(&block);
        out.push_str(terminator);
        copied = range.end;
        converted += 1;
    }
    if converted == 0 {
        return None;
    }
    out.push_str(doc.get(copied..)?);
    let out = check::seal(&out)?;
    (decode(&out).as_deref() == Ok(doc)).then_some(out)
}

/// Decodes a text produced by [`encode`] back into the original document.
pub fn decode(text: &str) -> Result<String, TemplateDecodeError> {
    let body = checked_body(text, Template::MdTables)?;
    let malformed = |line: usize, reason: &'static str| TemplateDecodeError::Malformed {
        template: Template::MdTables,
        line,
        reason,
    };
    let mut out = String::with_capacity(body.len() * 2);
    let mut lines = body.split_inclusive('\n').enumerate();
    while let Some((index, raw)) = lines.next() {
        let line_no = index + 2; // 1-based, after the hint line
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let Some(opener) = parse_opener(line) else {
            out.push_str(raw);
            continue;
        };
        let mut records = Vec::new();
        let mut terminator = None;
        for (_, raw) in lines.by_ref() {
            let line = raw.strip_suffix('\n').unwrap_or(raw);
            if leading_backticks(line) == opener.fence && line.len() == opener.fence {
                terminator = Some(if raw.ends_with('\n') { "\n" } else { "" });
                break;
            }
            if !raw.ends_with('\n') {
                break;
            }
            records.push(line);
        }
        let terminator = terminator.ok_or(malformed(line_no, "csv block is not closed"))?;
        let table = render_table(&opener, &records)
            .ok_or(malformed(line_no, "csv block does not form a table"))?;
        out.push_str(&table);
        out.push_str(terminator);
    }
    Ok(out)
}

/// The byte ranges of the tables GFM finds outside any container, each
/// starting at a line's first byte and ending after a line break or at the
/// end of the document.
fn top_level_tables(doc: &str) -> Vec<Range<usize>> {
    let mut tables = Vec::new();
    let mut depth = 0usize;
    for (event, range) in Parser::new_ext(doc, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                let bytes = doc.as_bytes();
                let at_line_start =
                    range.start == 0 || bytes.get(range.start.wrapping_sub(1)) == Some(&b'\n');
                let ends_cleanly = range.end == doc.len()
                    || (range.end > 0 && bytes.get(range.end - 1) == Some(&b'\n'));
                if depth == 0 && matches!(tag, Tag::Table(_)) && at_line_start && ends_cleanly {
                    tables.push(range);
                }
                depth += 1;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    tables
}

/// How the cells of a table are padded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pad {
    Spaced,
    Tight,
    Aligned,
}

impl Pad {
    const ALL: [Pad; 3] = [Pad::Spaced, Pad::Tight, Pad::Aligned];

    fn word(self) -> Option<&'static str> {
        match self {
            Self::Spaced => None,
            Self::Tight => Some("tight"),
            Self::Aligned => Some("aligned"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Align {
    None,
    Left,
    Right,
    Center,
}

/// A parsed delimiter row.
#[derive(Debug)]
struct Delim<'a> {
    line: &'a str,
    lead: bool,
    trail: bool,
    /// Each column's width in characters and its alignment.
    columns: Vec<(usize, Align)>,
}

impl<'a> Delim<'a> {
    fn parse(line: &'a str) -> Option<Delim<'a>> {
        if !line.contains('-')
            || !line
                .bytes()
                .all(|b| matches!(b, b'|' | b':' | b'-' | b' ' | b'\t'))
        {
            return None;
        }
        let lead = line.starts_with('|');
        let trail = line.len() > usize::from(lead) && line.ends_with('|');
        let columns = split_row(line, lead, trail)?
            .into_iter()
            .map(|cell| {
                let t = cell.trim_matches([' ', '\t']);
                let align = match (t.starts_with(':'), t.len() > 1 && t.ends_with(':')) {
                    (true, true) => Align::Center,
                    (true, false) => Align::Left,
                    (false, true) => Align::Right,
                    (false, false) => Align::None,
                };
                (cell.chars().count(), align)
            })
            .collect();
        Some(Delim {
            line,
            lead,
            trail,
            columns,
        })
    }
}

/// The delimiter row assumed when the opener names none: `|---|---|`
/// for *spaced* and *tight* tables; for *aligned* ones `| --- | ----- |`,
/// each column as wide as its widest field (`|` escaped) and at least 3.
fn default_delim<S: AsRef<str>>(pad: Pad, rows: &[Vec<S>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    if pad != Pad::Aligned {
        return format!("|{}", "---|".repeat(columns));
    }
    let mut line = String::from("|");
    for column in 0..columns {
        let width = rows
            .iter()
            .filter_map(|row| row.get(column))
            .map(|field| escaped_width(field.as_ref()))
            .fold(3, usize::max);
        line.push(' ');
        line.extend(std::iter::repeat_n('-', width));
        line.push_str(" |");
    }
    line
}

/// The width in characters of a field once its pipes are escaped.
fn escaped_width(field: &str) -> usize {
    field.chars().count() + field.matches('|').count()
}

/// Splits a row into its raw cells: strips the outer pipes the style
/// requires (failing if one is missing), then splits on every `|` not
/// preceded by a backslash.
fn split_row(line: &str, lead: bool, trail: bool) -> Option<Vec<&str>> {
    let mut rest = line;
    if lead {
        rest = rest.strip_prefix('|')?;
    }
    if trail {
        let inner = rest.strip_suffix('|')?;
        if inner.ends_with('\\') {
            return None;
        }
        rest = inner;
    }
    let mut cells = Vec::new();
    let mut start = 0usize;
    let bytes = rest.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'|' && (i == 0 || bytes[i - 1] != b'\\') {
            cells.push(&rest[start..i]);
            start = i + 1;
        }
    }
    cells.push(&rest[start..]);
    Some(cells)
}

/// Which sides of cell `i` of `n` have a pipe next to them.
fn pipe_sides(delim: &Delim<'_>, i: usize, n: usize) -> (bool, bool) {
    (delim.lead || i > 0, delim.trail || i + 1 < n)
}

/// Parses a row's fields under a padding; the caller checks the result by
/// rendering it again.
fn parse_row(line: &str, delim: &Delim<'_>, pad: Pad) -> Option<Vec<String>> {
    let cells = split_row(line, delim.lead, delim.trail)?;
    let n = cells.len();
    let mut fields = Vec::with_capacity(n);
    for (i, cell) in cells.into_iter().enumerate() {
        let (before, after) = pipe_sides(delim, i, n);
        let content = match pad {
            Pad::Tight => cell,
            Pad::Spaced | Pad::Aligned => {
                let mut c = cell;
                if before {
                    c = c.strip_prefix(' ')?;
                }
                if after {
                    c = c.strip_suffix(' ')?;
                }
                if pad == Pad::Aligned {
                    c = c.trim_matches(' ');
                }
                c
            }
        };
        fields.push(content.replace("\\|", "|"));
    }
    Some(fields)
}

/// Renders a row of fields under a padding, or `None` if an aligned cell
/// does not fit its column.
fn render_row<S: AsRef<str>>(fields: &[S], delim: &Delim<'_>, pad: Pad) -> Option<String> {
    let n = fields.len();
    let mut out = String::new();
    if delim.lead {
        out.push('|');
    }
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        let content = field.as_ref().replace('|', "\\|");
        let (before, after) = pipe_sides(delim, i, n);
        let (left, right) = match pad {
            Pad::Tight => (0, 0),
            Pad::Spaced => (usize::from(before), usize::from(after)),
            Pad::Aligned => {
                let (width, align) = *delim.columns.get(i)?;
                let sides = usize::from(before) + usize::from(after);
                let room = width.checked_sub(sides)?;
                let fill = room.checked_sub(content.chars().count())?;
                let (l, r) = match align {
                    Align::None | Align::Left => (0, fill),
                    Align::Right => (fill, 0),
                    Align::Center => (fill / 2, fill - fill / 2),
                };
                (usize::from(before) + l, r + usize::from(after))
            }
        };
        out.extend(std::iter::repeat_n(' ', left));
        out.push_str(&content);
        out.extend(std::iter::repeat_n(' ', right));
    }
    if delim.trail {
        out.push('|');
    }
    Some(out)
}

/// Encodes one table's lines (without line breaks) as a fenced CSV block
/// (without a final line break), or `None` if no padding restores them.
fn encode_table(lines: &[&str]) -> Option<String> {
    if lines.len() < 2 || lines.iter().any(|l| l.contains('\r')) {
        return None;
    }
    let delim = Delim::parse(lines[1])?;
    let rows: Vec<&str> = std::iter::once(lines[0])
        .chain(lines[2..].iter().copied())
        .collect();
    // Every padding that restores all rows; the one leaving the least
    // whitespace in the fields wins (ties: the cheaper opener, in
    // `Pad::ALL` order).
    let (pad, parsed) = Pad::ALL
        .into_iter()
        .filter_map(|pad| {
            let parsed = rows
                .iter()
                .map(|line| {
                    let fields = parse_row(line, &delim, pad)?;
                    (render_row(&fields, &delim, pad)?.as_str() == *line).then_some(fields)
                })
                .collect::<Option<Vec<_>>>()?;
            Some((pad, parsed))
        })
        .min_by_key(|(_, parsed)| parsed.iter().flatten().map(String::len).sum::<usize>())?;
    let mut csv_text = String::new();
    for (i, fields) in parsed.iter().enumerate() {
        if i > 0 {
            csv_text.push('\n');
        }
        csv::write_record(fields, &mut csv_text);
    }
    let fence = fence_for(&csv_text);
    let mut block = format!("{fence}csv");
    if let Some(word) = pad.word() {
        block.push(' ');
        block.push_str(word);
    }
    if delim.line != default_delim(pad, &parsed) {
        block.push(' ');
        block.push_str(delim.line);
    }
    block.push('\n');
    block.push_str(&csv_text);
    block.push('\n');
    block.push_str(&fence);
    Some(block)
}

/// A parsed opener line.
#[derive(Debug)]
struct Opener<'a> {
    fence: usize,
    pad: Pad,
    delim: Option<&'a str>,
}

/// Parses an opener line; `None` for any other line.
fn parse_opener(line: &str) -> Option<Opener<'_>> {
    let fence = leading_backticks(line);
    if fence < 3 {
        return None;
    }
    let mut rest = line[fence..].strip_prefix("csv")?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let mut pad = Pad::Spaced;
    for candidate in [Pad::Tight, Pad::Aligned] {
        if let Some(after) = candidate
            .word()
            .and_then(|w| rest.strip_prefix(' ')?.strip_prefix(w))
        {
            if after.is_empty() || after.starts_with(' ') {
                pad = candidate;
                rest = after;
                break;
            }
        }
    }
    let delim = match rest {
        "" => None,
        _ => Some(rest.strip_prefix(' ').unwrap_or(rest)),
    };
    Some(Opener { fence, pad, delim })
}

/// Rebuilds a table's lines (joined by LF, no final line break) from a
/// block's opener and its CSV records.
fn render_table(opener: &Opener<'_>, records: &[&str]) -> Option<String> {
    let rows = records
        .iter()
        .map(|r| csv::read_record(r))
        .collect::<Option<Vec<_>>>()?;
    let header = rows.first()?;
    let default;
    let delim_line = match opener.delim {
        Some(line) => line,
        None => {
            default = default_delim(opener.pad, &rows);
            &default
        }
    };
    let delim = Delim::parse(delim_line)?;
    let mut out = render_row(header, &delim, opener.pad)?;
    out.push('\n');
    out.push_str(delim_line);
    for row in &rows[1..] {
        out.push('\n');
        out.push_str(&render_row(row, &delim, opener.pad)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(doc: &str) -> String {
        let encoded = encode(doc).unwrap_or_else(|| panic!("declined {doc:?}"));
        assert_eq!(decode(&encoded).as_deref(), Ok(doc));
        encoded
    }

    /// The text after the hint line, which must be this template's, checked.
    fn body(encoded: &str) -> &str {
        let (hint, body) = encoded.split_once('\n').unwrap_or((encoded, ""));
        assert_eq!(check::unchecked_hint(hint).as_deref(), Some(HINT));
        body
    }

    /// Decodes `text` with its check added, as the encoder would have.
    fn decode_sealed(text: &str) -> Result<String, TemplateDecodeError> {
        decode(&check::seal(text).unwrap_or_else(|| panic!("cannot seal {text}")))
    }

    #[test]
    fn spaced_table_with_default_delimiter() {
        let doc = "| a | b |\n|---|---|\n| 1 | 2 |\n";
        assert_eq!(body(&round_trip(doc)), "```csv\na,b\n1,2\n```\n");
    }

    #[test]
    fn spaced_delimiter_is_recorded() {
        let doc = "| a | b |\n| --- | :---: |\n| 1 | 2 |";
        assert_eq!(
            body(&round_trip(doc)),
            "```csv | --- | :---: |\na,b\n1,2\n```"
        );
    }

    #[test]
    fn tight_and_pipeless_tables() {
        let doc = "|a|b|\n|-|-|\n|1|2|\n";
        assert_eq!(
            body(&round_trip(doc)),
            "```csv tight |-|-|\na,b\n1,2\n```\n"
        );
        let doc = "a | b\n--- | ---\n1 | 2\n";
        assert_eq!(body(&round_trip(doc)), "```csv --- | ---\na,b\n1,2\n```\n");
    }

    #[test]
    fn aligned_table() {
        let doc = "\
| Name  | Qty |  Note  |
| :---- | --: | :----: |
| apple |   3 |  ripe  |
| fig   |  12 |   x    |
";
        assert_eq!(
            body(&round_trip(doc)),
            "```csv aligned | :---- | --: | :----: |\nName,Qty,Note\napple,3,ripe\nfig,12,x\n```\n"
        );
    }

    #[test]
    fn formatter_layout_needs_no_delimiter() {
        let doc = "| id  | name  |\n| --- | ----- |\n| 1   | alpha |\n| 22  | a\\|b  |\n";
        assert_eq!(
            body(&round_trip(doc)),
            "```csv aligned\nid,name\n1,alpha\n22,a|b\n```\n"
        );
    }

    #[test]
    fn every_table_and_all_text_around_them() {
        let doc = "# Report\n\nFirst:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nBetween.\n\n| c |\n|---|\n| 3 |\n\nEnd.";
        let encoded = round_trip(doc);
        assert_eq!(
            body(&encoded),
            "# Report\n\nFirst:\n\n```csv\na,b\n1,2\n```\n\nBetween.\n\n```csv\nc\n3\n```\n\nEnd."
        );
    }

    #[test]
    fn escaped_pipes_commas_quotes_and_empty_cells() {
        let doc = "| expr | note |\n|---|---|\n| a \\| b | say \"hi\", twice |\n|  | x |\n";
        assert_eq!(
            body(&round_trip(doc)),
            "```csv\nexpr,note\na | b,\"say \\\"hi\\\", twice\"\n,x\n```\n"
        );
    }

    #[test]
    fn a_lone_empty_cell_is_quoted() {
        let doc = "| a |\n|---|\n|  |\n";
        assert_eq!(body(&round_trip(doc)), "```csv\na\n\"\"\n```\n");
    }

    #[test]
    fn ragged_rows_keep_their_own_length() {
        let doc = "| a | b |\n|---|---|\n| 1 |\n| 1 | 2 | 3 |\n";
        assert_eq!(body(&round_trip(doc)), "```csv\na,b\n1\n1,2,3\n```\n");
    }

    #[test]
    fn backticks_in_cells_lengthen_the_fence() {
        let doc = "| a |\n|---|\n| ``` |\n";
        assert_eq!(body(&round_trip(doc)), "````csv\na\n```\n````\n");
    }

    #[test]
    fn unicode_cells() {
        round_trip("| имя | 値 |\n|---|---|\n| Привет 👋 | ✓ |\n");
    }

    #[test]
    fn inconsistent_padding_is_left_as_markdown() {
        // One table restorable, one not: only the first converts.
        // (The second one's last row lacks its trailing pipe.)
        let doc = "| a |\n|---|\n| 1 |\n\n| b | c |\n|---|---|\n| 2 | 3\n";
        let encoded = round_trip(doc);
        assert!(body(&encoded).ends_with("```\n\n| b | c |\n|---|---|\n| 2 | 3\n"));
        // Nothing restorable: declined.
        assert_eq!(encode("| b | c |\n|---|---|\n| 2 | 3\n"), None);
        // Irregular padding falls back to *tight*: exact, padding kept.
        let doc = "| b |   c|\n|---|---|\n|  2 | 3 |\n";
        assert_eq!(
            body(&round_trip(doc)),
            "```csv tight\n b ,   c\n  2 , 3 \n```\n"
        );
    }

    #[test]
    fn declines_what_it_should() {
        // No table at all.
        assert_eq!(encode("just text | with a pipe"), None);
        // A table inside a code fence is code.
        assert_eq!(encode("```\n| a |\n|---|\n| 1 |\n```\n"), None);
        // Inside a quote or a list.
        assert_eq!(encode("> | a |\n> |---|\n> | 1 |\n"), None);
        assert_eq!(encode("- x\n\n  | a |\n  |---|\n  | 1 |\n"), None);
        // Indented.
        assert_eq!(encode("  | a |\n  |---|\n  | 1 |\n"), None);
        // CRLF line breaks.
        assert_eq!(encode("| a |\r\n|---|\r\n| 1 |\r\n"), None);
        // The document already holds a line the decoder would take for an
        // opener.
        assert_eq!(encode("| a |\n|---|\n| 1 |\n\n```csv\nx\n```\n"), None);
        // A lazy continuation line (no pipes) belongs to the table in GFM
        // but fits no padding.
        assert_eq!(encode("| a | b |\n|---|---|\n| 1 | 2 |\nfoo\n"), None);
    }

    #[test]
    fn text_around_declined_tables_is_not_an_opener() {
        // A non-csv fence is ordinary text.
        let doc = "```rust\nlet x = 1;\n```\n\n| a |\n|---|\n| 1 |\n";
        round_trip(doc);
        assert!(parse_opener("```csvx").is_none());
        assert!(parse_opener("``csv").is_none());
        assert!(parse_opener("```csv").is_some());
        assert!(parse_opener("````csv tight").is_some());
    }

    #[test]
    fn opener_parsing() {
        let o = parse_opener("```csv").unwrap();
        assert_eq!((o.fence, o.pad, o.delim), (3, Pad::Spaced, None));
        let o = parse_opener("````csv tight |-|").unwrap();
        assert_eq!((o.fence, o.pad, o.delim), (4, Pad::Tight, Some("|-|")));
        let o = parse_opener("```csv aligned").unwrap();
        assert_eq!((o.pad, o.delim), (Pad::Aligned, None));
        let o = parse_opener("```csv  |---|").unwrap();
        assert_eq!((o.pad, o.delim), (Pad::Spaced, Some(" |---|")));
        let o = parse_opener("```csv tightly").unwrap();
        assert_eq!((o.pad, o.delim), (Pad::Spaced, Some("tightly")));
    }

    #[test]
    fn table_at_end_without_line_break() {
        let doc = "text\n\n| a |\n|---|\n| 1 |";
        assert_eq!(body(&round_trip(doc)), "text\n\n```csv\na\n1\n```");
    }

    #[test]
    fn decode_errors() {
        let bad = |body: &str| decode_sealed(&format!("{HINT}\n{body}"));
        assert!(matches!(
            bad("```csv\na\n"),
            Err(TemplateDecodeError::Malformed { line: 2, .. })
        ));
        assert!(matches!(
            bad("x\n```csv\n\"a\n```"),
            Err(TemplateDecodeError::Malformed { line: 3, .. })
        ));
        assert!(matches!(
            bad("```csv\n```"),
            Err(TemplateDecodeError::Malformed { .. })
        ));
        assert!(matches!(
            bad("```csv aligned | --- |\nabcd\n```"),
            Err(TemplateDecodeError::Malformed { .. })
        ));
        assert_eq!(decode("no hint"), Err(TemplateDecodeError::NotEncoded));
    }
}
