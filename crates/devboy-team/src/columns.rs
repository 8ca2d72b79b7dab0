//! Fingerprints as Parquet: one row per endpoint, one column per field of
//! [`Fingerprint`] plus `schema_version` and `member`. docs/team.md names
//! every column and what it holds.
//!
//! The file's key-value metadata carries `devboy.schema_version`; a file
//! of a newer version is refused as a whole ([`TeamError::NewerSchema`]),
//! so the reader never guesses at fields it does not know. Columns a
//! version-1 reader does not know are ignored (fields may be added without
//! a new version); a column it needs that is missing or of another type
//! makes the file damaged, with the column named.

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float64Type, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, Date32Array, Float64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use devboy_tune::fingerprint::{Fingerprint, FINGERPRINT_SCHEMA_VERSION};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::error::TeamError;

/// The metadata key holding the schema version.
pub const SCHEMA_KEY: &str = "devboy.schema_version";

/// The Arrow schema of a fingerprint file.
pub fn schema() -> Schema {
    let u64 = |name: &str| Field::new(name, DataType::UInt64, false);
    let f64 = |name: &str| Field::new(name, DataType::Float64, false);
    let text = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    Schema::new(vec![
        Field::new("schema_version", DataType::UInt32, false),
        text("member", true),
        text("endpoint", false),
        Field::new("members", DataType::UInt32, false),
        u64("sessions"),
        u64("calls"),
        u64("errors"),
        u64("deduped"),
        f64("dup_rate"),
        u64("sequenced"),
        f64("implied_dup_rate"),
        u64("sequenced_bodies"),
        f64("near_share"),
        f64("id_line_tokens"),
        f64("reference_saved_tokens"),
        f64("chars_mean"),
        u64("tokens_p50"),
        u64("tokens_p90"),
        u64("shaped"),
        text("shape_dominant", true),
        f64("shape_share"),
        Field::new(
            "inner_formats_top3",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            false,
        ),
        u64("encoded"),
        text("template_top", true),
        f64("template_share"),
        f64("baseline_tokens"),
        f64("dedup_saved_tokens"),
        f64("encoder_saved_tokens"),
        Field::new("first_day", DataType::Date32, false),
        Field::new("last_day", DataType::Date32, false),
        text("devboy_version", false),
        text("tokenizer", false),
    ])
}

/// `rows` as a Parquet file; `member` is this member's id (`None` for the
/// team's aggregate).
pub fn write(rows: &[Fingerprint], member: Option<&str>) -> Result<Bytes, TeamError> {
    write_as(rows, member, FINGERPRINT_SCHEMA_VERSION)
}

/// [`write`] claiming another schema version: what a newer devboy's file
/// looks like to this one (for tests of the reader's refusal).
pub fn write_as(
    rows: &[Fingerprint],
    member: Option<&str>,
    version: u32,
) -> Result<Bytes, TeamError> {
    let schema = Arc::new(schema());
    let n = rows.len();
    let u64s = |f: fn(&Fingerprint) -> u64| -> ArrayRef {
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(f)))
    };
    let f64s = |f: fn(&Fingerprint) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(rows.iter().map(f)))
    };
    let texts = |f: fn(&Fingerprint) -> Option<&str>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    };
    let mut inner = ListBuilder::new(StringBuilder::new());
    for r in rows {
        for format in &r.inner_formats_top3 {
            inner.values().append_value(format);
        }
        inner.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from(vec![version; n])),
        Arc::new(std::iter::repeat_n(member, n).collect::<StringArray>()),
        texts(|r| Some(&r.endpoint)),
        Arc::new(UInt32Array::from_iter_values(
            rows.iter().map(|r| r.members),
        )),
        u64s(|r| r.sessions),
        u64s(|r| r.calls),
        u64s(|r| r.errors),
        u64s(|r| r.deduped),
        f64s(|r| r.dup_rate),
        u64s(|r| r.sequenced),
        f64s(|r| r.implied_dup_rate),
        u64s(|r| r.sequenced_bodies),
        f64s(|r| r.near_share),
        f64s(|r| r.id_line_tokens),
        f64s(|r| r.reference_saved_tokens),
        f64s(|r| r.chars_mean),
        u64s(|r| r.tokens_p50),
        u64s(|r| r.tokens_p90),
        u64s(|r| r.shaped),
        texts(|r| r.shape_dominant.as_deref()),
        f64s(|r| r.shape_share),
        Arc::new(inner.finish()),
        u64s(|r| r.encoded),
        texts(|r| r.template_top.as_deref()),
        f64s(|r| r.template_share),
        f64s(|r| r.baseline_tokens),
        f64s(|r| r.dedup_saved_tokens),
        f64s(|r| r.encoder_saved_tokens),
        Arc::new(Date32Array::from_iter_values(
            rows.iter().map(|r| r.first_day),
        )),
        Arc::new(Date32Array::from_iter_values(
            rows.iter().map(|r| r.last_day),
        )),
        texts(|r| Some(&r.devboy_version)),
        texts(|r| Some(&r.tokenizer)),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns)
        .map_err(|e| TeamError::Encode(e.to_string()))?;
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_key_value_metadata(Some(vec![KeyValue::new(
            SCHEMA_KEY.to_owned(),
            version.to_string(),
        )]))
        .set_created_by(format!(
            "devboy {}",
            devboy_tune::fingerprint::DEVBOY_VERSION
        ))
        .build();
    let mut out = Vec::with_capacity(256 + n * 96);
    let mut writer = ArrowWriter::try_new(&mut out, schema, Some(properties))
        .map_err(|e| TeamError::Encode(e.to_string()))?;
    writer
        .write(&batch)
        .map_err(|e| TeamError::Encode(e.to_string()))?;
    writer
        .close()
        .map_err(|e| TeamError::Encode(e.to_string()))?;
    Ok(Bytes::from(out))
}

/// A file read back: its rows and the member it names (if any).
#[derive(Debug)]
pub struct FileRows {
    /// The rows.
    pub rows: Vec<Fingerprint>,
    /// The `member` column's value (a member's file names one member).
    pub member: Option<String>,
}

/// Reads a fingerprint file.
pub fn read(bytes: Bytes) -> Result<FileRows, TeamError> {
    let damaged = |why: String| TeamError::Damaged(why);
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| damaged(format!("not a Parquet file ({e})")))?;
    let version = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == SCHEMA_KEY))
        .and_then(|k| k.value.as_deref())
        .map(|v| {
            v.parse::<u32>()
                .map_err(|_| damaged(format!("{SCHEMA_KEY} is {v:?}")))
        })
        .transpose()?
        .ok_or_else(|| damaged(format!("no {SCHEMA_KEY} in its metadata")))?;
    if version > FINGERPRINT_SCHEMA_VERSION {
        return Err(TeamError::NewerSchema(version));
    }
    let reader = builder
        .build()
        .map_err(|e| damaged(format!("unreadable ({e})")))?;
    let mut rows = Vec::new();
    let mut member = None;
    for batch in reader {
        let batch = batch.map_err(|e| damaged(format!("unreadable ({e})")))?;
        member = member.or(read_batch(&batch, &mut rows)?);
    }
    Ok(FileRows { rows, member })
}

fn read_batch(
    batch: &RecordBatch,
    rows: &mut Vec<Fingerprint>,
) -> Result<Option<String>, TeamError> {
    let column = |name: &str| -> Result<&ArrayRef, TeamError> {
        batch
            .column_by_name(name)
            .ok_or_else(|| TeamError::Damaged(format!("no column {name}")))
    };
    let typed = |name: &str, want: &DataType| -> Result<&ArrayRef, TeamError> {
        let c = column(name)?;
        if c.data_type() == want {
            Ok(c)
        } else {
            Err(TeamError::Damaged(format!(
                "column {name} is {}, not {want}",
                c.data_type()
            )))
        }
    };
    let u64s = |name: &str| -> Result<&UInt64Array, TeamError> {
        Ok(typed(name, &DataType::UInt64)?.as_primitive::<UInt64Type>())
    };
    let f64s = |name: &str| -> Result<&Float64Array, TeamError> {
        Ok(typed(name, &DataType::Float64)?.as_primitive::<Float64Type>())
    };
    let texts = |name: &str| -> Result<&StringArray, TeamError> {
        Ok(typed(name, &DataType::Utf8)?.as_string::<i32>())
    };
    let days = |name: &str| -> Result<&Date32Array, TeamError> {
        Ok(typed(name, &DataType::Date32)?.as_primitive::<Date32Type>())
    };
    let versions = typed("schema_version", &DataType::UInt32)?.as_primitive::<UInt32Type>();
    let member = texts("member")?;
    let endpoint = texts("endpoint")?;
    let members = typed("members", &DataType::UInt32)?.as_primitive::<UInt32Type>();
    let (sessions, calls, errors, deduped) = (
        u64s("sessions")?,
        u64s("calls")?,
        u64s("errors")?,
        u64s("deduped")?,
    );
    let (dup_rate, sequenced, implied, bodies, near) = (
        f64s("dup_rate")?,
        u64s("sequenced")?,
        f64s("implied_dup_rate")?,
        u64s("sequenced_bodies")?,
        f64s("near_share")?,
    );
    let (id_line, reference, chars, p50, p90) = (
        f64s("id_line_tokens")?,
        f64s("reference_saved_tokens")?,
        f64s("chars_mean")?,
        u64s("tokens_p50")?,
        u64s("tokens_p90")?,
    );
    let (shaped, shape, shape_share) = (
        u64s("shaped")?,
        texts("shape_dominant")?,
        f64s("shape_share")?,
    );
    let inner = column("inner_formats_top3")?;
    let DataType::List(item) = inner.data_type() else {
        return Err(TeamError::Damaged(
            "column inner_formats_top3 is not a list".into(),
        ));
    };
    if item.data_type() != &DataType::Utf8 {
        return Err(TeamError::Damaged(
            "column inner_formats_top3 is not a list of strings".into(),
        ));
    }
    let inner = inner.as_list::<i32>();
    let (encoded, template, template_share) = (
        u64s("encoded")?,
        texts("template_top")?,
        f64s("template_share")?,
    );
    let (baseline, dedup_saved, encoder_saved) = (
        f64s("baseline_tokens")?,
        f64s("dedup_saved_tokens")?,
        f64s("encoder_saved_tokens")?,
    );
    let (first, last) = (days("first_day")?, days("last_day")?);
    let (version, tokenizer) = (texts("devboy_version")?, texts("tokenizer")?);
    let text = |a: &StringArray, i: usize| (!a.is_null(i)).then(|| a.value(i).to_owned());
    let mut file_member = None;
    rows.reserve(batch.num_rows());
    for i in 0..batch.num_rows() {
        if versions.value(i) > FINGERPRINT_SCHEMA_VERSION {
            return Err(TeamError::NewerSchema(versions.value(i)));
        }
        if endpoint.is_null(i) {
            return Err(TeamError::Damaged(format!("row {i} has no endpoint")));
        }
        file_member = file_member.or_else(|| text(member, i));
        let formats = inner.value(i);
        let formats = formats.as_string::<i32>();
        rows.push(Fingerprint {
            endpoint: endpoint.value(i).to_owned(),
            members: members.value(i),
            sessions: sessions.value(i),
            calls: calls.value(i),
            errors: errors.value(i),
            deduped: deduped.value(i),
            dup_rate: dup_rate.value(i),
            sequenced: sequenced.value(i),
            implied_dup_rate: implied.value(i),
            sequenced_bodies: bodies.value(i),
            near_share: near.value(i),
            id_line_tokens: id_line.value(i),
            reference_saved_tokens: reference.value(i),
            chars_mean: chars.value(i),
            tokens_p50: p50.value(i),
            tokens_p90: p90.value(i),
            shaped: shaped.value(i),
            shape_dominant: text(shape, i),
            shape_share: shape_share.value(i),
            inner_formats_top3: formats.iter().flatten().map(str::to_owned).collect(),
            encoded: encoded.value(i),
            template_top: text(template, i),
            template_share: template_share.value(i),
            baseline_tokens: baseline.value(i),
            dedup_saved_tokens: dedup_saved.value(i),
            encoder_saved_tokens: encoder_saved.value(i),
            first_day: first.value(i),
            last_day: last.value(i),
            devboy_version: version.value(i).to_owned(),
            tokenizer: tokenizer.value(i).to_owned(),
        });
    }
    Ok(file_member)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(endpoint: &str) -> Fingerprint {
        Fingerprint {
            endpoint: endpoint.to_owned(),
            members: 1,
            sessions: 7,
            calls: 140,
            errors: 2,
            deduped: 120,
            dup_rate: 0.25,
            sequenced: 130,
            implied_dup_rate: 0.4,
            sequenced_bodies: 90,
            near_share: 0.1,
            id_line_tokens: 6.5,
            reference_saved_tokens: 88.25,
            chars_mean: 4012.5,
            tokens_p50: 950,
            tokens_p90: 3100,
            shaped: 140,
            shape_dominant: Some("markdown_table".into()),
            shape_share: 0.97,
            inner_formats_top3: vec!["url".into(), "hash".into()],
            encoded: 60,
            template_top: Some("md_tables_csv".into()),
            template_share: 0.96,
            baseline_tokens: 1200.0,
            dedup_saved_tokens: 300.0,
            encoder_saved_tokens: 210.5,
            first_day: 20_400,
            last_day: 20_418,
            devboy_version: "0.1.0".into(),
            tokenizer: "o200k_base".into(),
        }
    }

    #[test]
    fn every_field_survives_the_file() {
        let plain = Fingerprint {
            shape_dominant: None,
            template_top: None,
            inner_formats_top3: Vec::new(),
            ..row("fs__read_text_file")
        };
        let rows = vec![row("gh__list_issues"), plain];
        let bytes = write(&rows, Some("00000000000000aa")).unwrap();
        assert_eq!(&bytes[..4], b"PAR1");
        let back = read(bytes).unwrap();
        assert_eq!(back.rows, rows);
        assert_eq!(back.member.as_deref(), Some("00000000000000aa"));
        // The team's file names no member; an empty file is a file.
        let team = read(write(&rows, None).unwrap()).unwrap();
        assert_eq!(team.member, None);
        assert!(read(write(&[], None).unwrap()).unwrap().rows.is_empty());
    }

    #[test]
    fn a_newer_or_damaged_file_is_refused_with_why() {
        let newer = write_as(&[row("a__b")], None, FINGERPRINT_SCHEMA_VERSION + 1).unwrap();
        assert!(matches!(read(newer), Err(TeamError::NewerSchema(2))));
        let err = read(Bytes::from_static(b"not parquet at all")).unwrap_err();
        assert!(err.to_string().contains("not a Parquet file"), "{err}");
        // A Parquet file without the fingerprint columns.
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::UInt64, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(UInt64Array::from(vec![1u64])) as ArrayRef],
        )
        .unwrap();
        let properties = WriterProperties::builder()
            .set_key_value_metadata(Some(vec![KeyValue::new(
                SCHEMA_KEY.to_owned(),
                "1".to_owned(),
            )]))
            .build();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, schema, Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let err = read(Bytes::from(out)).unwrap_err();
        assert!(
            err.to_string().contains("no column schema_version"),
            "{err}"
        );
    }
}
