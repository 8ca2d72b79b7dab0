//! One CSV record on one line, fields quoted as JSON strings.
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
//! quoted = JSON-string                     ; RFC 8259
//! bare   = *( any char except "," DQUOTE LF )
//! ```
//!
//! The writer quotes a field iff it contains `,`, `"`, CR or LF, or it is
//! the only field of the record and empty (so an empty line never stands
//! for a record). Quoting is JSON's, not RFC 4180's doubled `""`: a table
//! cell may hold code the model copies back, and JSON escaping is the one
//! it reads correctly (invariant 9, verbatim text).

/// Appends `fields` as one record (no line break) to `out`.
pub(crate) fn write_record<S: AsRef<str>>(fields: &[S], out: &mut String) {
    for (i, field) in fields.iter().enumerate() {
        let field = field.as_ref();
        if i > 0 {
            out.push(',');
        }
        let lone_empty = fields.len() == 1 && field.is_empty();
        if lone_empty || field.contains([',', '"', '\r', '\n']) {
            // Serializing a str cannot fail.
            out.push_str(&serde_json::to_string(field).unwrap_or_default());
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
        let (field, after) = if rest.starts_with('"') {
            let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<String>();
            let field = stream.next()?.ok()?;
            (field, &rest[stream.byte_offset()..])
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
        assert_eq!(write(&["a,b", "say \"hi\""]), r#""a,b","say \"hi\"""#);
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
            read_record(r#""a,b","say \"hi\"""#),
            Some(vec!["a,b".into(), "say \"hi\"".into()])
        );
        for bad in ["", "\"a", "\"a\"b", "a\"b", "\"a\"\"", "a\nb", " \"a\""] {
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
