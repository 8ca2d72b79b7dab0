//! One CSV record on one line, RFC 4180 quoting.
//!
//! Only what the Markdown-table template needs: a table row is one line,
//! so a record never spans lines. Written by hand because the rule is a
//! few lines and the crate's dependency list is not this module's to grow;
//! if another encoder adds a CSV crate, fold this into it.
//!
//! Grammar of a record (the reader is strict and accepts only this):
//!
//! ```text
//! record = field *( "," field )
//! field  = quoted / bare
//! quoted = DQUOTE *( any char except DQUOTE / 2DQUOTE ) DQUOTE
//! bare   = *( any char except "," DQUOTE LF )
//! ```
//!
//! The writer quotes a field iff it contains `,`, `"`, CR or LF, or it is
//! the only field of the record and empty (so an empty line never stands
//! for a record).

/// Appends `fields` as one record (no line break) to `out`.
pub(crate) fn write_record<S: AsRef<str>>(fields: &[S], out: &mut String) {
    for (i, field) in fields.iter().enumerate() {
        let field = field.as_ref();
        if i > 0 {
            out.push(',');
        }
        let lone_empty = fields.len() == 1 && field.is_empty();
        if lone_empty || field.contains([',', '"', '\r', '\n']) {
            out.push('"');
            out.push_str(&field.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(field);
        }
    }
}

/// Reads one record, or `None` if `line` breaks the grammar (including an
/// empty line, which the writer never produces).
pub(crate) fn read_record(line: &str) -> Option<Vec<String>> {
    if line.is_empty() || line.contains('\n') {
        return None;
    }
    let mut fields = Vec::new();
    let mut rest = line;
    loop {
        let (field, after) = if let Some(quoted) = rest.strip_prefix('"') {
            let mut field = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                match chars.next() {
                    Some((i, '"')) => {
                        if quoted[i + 1..].starts_with('"') {
                            field.push('"');
                            chars.next();
                        } else {
                            break i + 1;
                        }
                    }
                    Some((_, c)) => field.push(c),
                    None => return None,
                }
            };
            (field, &quoted[end..])
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            let bare = &rest[..end];
            if bare.contains('"') {
                return None;
            }
            (bare.to_string(), &rest[end..])
        };
        fields.push(field);
        match after.strip_prefix(',') {
            Some(next) => rest = next,
            None if after.is_empty() => return Some(fields),
            None => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(fields: &[&str]) -> String {
        let mut out = String::new();
        write_record(fields, &mut out);
        out
    }

    #[test]
    fn quoting() {
        assert_eq!(write(&["a", "b c", ""]), "a,b c,");
        assert_eq!(write(&["a,b", "say \"hi\""]), "\"a,b\",\"say \"\"hi\"\"\"");
        assert_eq!(write(&[""]), "\"\"");
        assert_eq!(write(&["", ""]), ",");
        assert_eq!(write(&[" x "]), " x ");
    }

    #[test]
    fn reading() {
        assert_eq!(
            read_record("a,b c,"),
            Some(vec!["a".into(), "b c".into(), "".into()])
        );
        assert_eq!(read_record("\"\""), Some(vec![String::new()]));
        assert_eq!(read_record(","), Some(vec![String::new(), String::new()]));
        assert_eq!(
            read_record("\"a,b\",\"say \"\"hi\"\"\""),
            Some(vec!["a,b".into(), "say \"hi\"".into()])
        );
        for bad in ["", "\"a", "\"a\"b", "a\"b", "\"a\"\"", "a\nb"] {
            assert_eq!(read_record(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn round_trip() {
        let samples: &[&[&str]] = &[
            &["a"],
            &[""],
            &["", "x"],
            &["é|ü", "\"", ",", "\"\"", "a\"b,c"],
        ];
        for fields in samples {
            let line = write(fields);
            let back = read_record(&line).expect("own output");
            assert_eq!(&back, fields);
        }
    }
}
