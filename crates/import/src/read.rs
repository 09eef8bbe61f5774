//! Reading input: lines with bounded memory, whole documents, and small JSON helpers.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use serde_json::Value;

use crate::error::{ImportError, Location};

/// Reads a file line by line, reusing one buffer, so memory is bounded by the longest line.
pub(crate) struct Lines<'a> {
    reader: &'a mut dyn BufRead,
    file: PathBuf,
    buf: Vec<u8>,
    line: u64,
    max_line: u64,
}

impl<'a> Lines<'a> {
    /// A line reader over `reader`, naming `file` in errors.
    pub(crate) fn new(reader: &'a mut dyn BufRead, file: &Path) -> Self {
        Self {
            reader,
            file: file.to_path_buf(),
            buf: Vec::new(),
            line: 0,
            max_line: 0,
        }
    }

    /// The next line as UTF-8 text without its line ending, or `None` at the end of the input.
    /// The text borrows the reader's buffer and is valid until the next call.
    pub(crate) fn next_line(&mut self) -> Result<Option<(u64, &str)>, ImportError> {
        self.buf.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| ImportError::Io {
                file: self.file.clone(),
                source,
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        self.max_line = self.max_line.max(self.buf.len() as u64);
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        let text = std::str::from_utf8(&self.buf).map_err(|source| ImportError::InvalidUtf8 {
            file: self.file.clone(),
            location: Location::Line(self.line),
            byte: source.valid_up_to() as u64,
            source,
        })?;
        Ok(Some((self.line, text)))
    }

    /// The longest line read so far, in bytes.
    pub(crate) fn max_line_bytes(&self) -> u64 {
        self.max_line
    }
}

/// Parses every JSON value on one line (a line may hold several values with no newline between
/// them, a known bug of some writers). Blank lines give no values.
pub(crate) fn json_values(file: &Path, line: u64, text: &str) -> Result<Vec<Value>, ImportError> {
    let mut out = Vec::with_capacity(1);
    for value in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        out.push(value.map_err(|e| ImportError::from_json(file, Location::Line(line), e))?);
    }
    Ok(out)
}

/// Reads and parses a whole JSON document; the raw bytes are dropped once parsed.
pub(crate) fn json_document(reader: &mut dyn BufRead, file: &Path) -> Result<Value, ImportError> {
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).map_err(|source| ImportError::Io {
        file: file.to_path_buf(),
        source,
    })?;
    parse_document(&bytes, file)
}

/// Parses a whole JSON document from bytes, checking UTF-8 first for a precise error.
pub(crate) fn parse_document(bytes: &[u8], file: &Path) -> Result<Value, ImportError> {
    let text = std::str::from_utf8(bytes).map_err(|source| ImportError::InvalidUtf8 {
        file: file.to_path_buf(),
        location: Location::File,
        byte: source.valid_up_to() as u64,
        source,
    })?;
    serde_json::from_str(text).map_err(|e| {
        let location = Location::Line(e.line() as u64);
        ImportError::from_json(file, location, e)
    })
}

/// Takes a string field out of a JSON object, leaving `null` behind (no copy of large text).
pub(crate) fn take_str(value: &mut Value, key: &str) -> Option<String> {
    match value.get_mut(key).map(Value::take) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// A string field of a JSON object, borrowed.
pub(crate) fn str_of<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

/// An unsigned integer field of a JSON object (accepting integral floats).
pub(crate) fn u64_of(value: &Value, key: &str) -> Option<u64> {
    let v = value.get(key)?;
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
}

/// Parses a timestamp: RFC 3339, a naive ISO date-time (taken as UTC), or epoch milliseconds.
pub(crate) fn parse_time(value: Option<&Value>) -> Option<DateTime<Utc>> {
    match value? {
        Value::String(s) => DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .ok()
            .or_else(|| {
                NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
                    .ok()
                    .map(|n| Utc.from_utc_datetime(&n))
            }),
        Value::Number(n) => n.as_i64().and_then(|ms| Utc.timestamp_millis_opt(ms).single()),
        _ => None,
    }
}

/// Decodes a JSON string that holds JSON (tool arguments); text that is not JSON stays a string.
pub(crate) fn decode_json_string(text: String) -> (Value, bool) {
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => (v, true),
        Err(_) => (Value::String(text), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_values_on_one_line_are_both_read() {
        let v = json_values(Path::new("f"), 1, r#"{"a":1}{"b":2}"#).unwrap();
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn truncated_line_is_a_truncated_error() {
        let e = json_values(Path::new("f.jsonl"), 7, r#"{"a":"#).unwrap_err();
        assert!(matches!(e, ImportError::Truncated { .. }), "{e}");
        assert!(e.to_string().contains("f.jsonl: line 7: truncated JSON"));
    }

    #[test]
    fn times_parse_in_three_shapes() {
        assert!(parse_time(Some(&Value::from("2025-01-20T20:29:13.519638"))).is_some());
        assert!(parse_time(Some(&Value::from("2025-12-08T22:41:05.306Z"))).is_some());
        assert!(parse_time(Some(&Value::from(1765234951978_i64))).is_some());
        assert!(parse_time(Some(&Value::from("yesterday"))).is_none());
    }
}
