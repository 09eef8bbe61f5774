//! Bad input never panics: it is a typed error naming the file and the place, or — for records
//! of an unknown type — skipped and counted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pith_import::{import_file, import_reader, Format, ImportError, Location};

const CLAUDE_USER: &str = r#"{"type":"user","sessionId":"s","uuid":"u1","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hello"}}"#;

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn a_truncated_jsonl_line_is_a_truncated_error_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{CLAUDE_USER}\n{{\"type\":\"assistant\",\"message\":{{\"id\":\"m\",\"content\":[{{\"type\":\"te"
    );
    let path = write(&dir, "cut.jsonl", text.as_bytes());
    let err = import_file(&path).unwrap_err();
    match &err {
        ImportError::Truncated { file, location, .. } => {
            assert_eq!(file, &path);
            assert_eq!(location, &Location::Line(2));
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("cut.jsonl: line 2: truncated JSON"), "{text}");
}

#[test]
fn a_truncated_document_is_a_truncated_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "x.traj",
        b"{\n  \"history\": [\n    {\"role\": \"user\", \"content\": \"hi",
    );
    let err = import_file(&path).unwrap_err();
    assert!(matches!(err, ImportError::Truncated { .. }), "{err:?}");
}

#[test]
fn invalid_utf8_is_a_typed_error_with_line_and_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = format!("{CLAUDE_USER}\n").into_bytes();
    let line2: &[u8] = b"{\"type\":\"user\",\"sessionId\":\"s\",\"message\":{\"content\":\"caf\xE9\"}}\n";
    let bad_at = line2.iter().position(|&b| b == 0xE9).unwrap() as u64;
    bytes.extend_from_slice(line2);
    let path = write(&dir, "latin1.jsonl", &bytes);
    let err = import_file(&path).unwrap_err();
    match &err {
        ImportError::InvalidUtf8 { location, byte, .. } => {
            assert_eq!(location, &Location::Line(2));
            assert_eq!(*byte, bad_at);
        }
        other => panic!("expected InvalidUtf8, got {other:?}"),
    }
    assert!(err.to_string().contains("invalid UTF-8"), "{err}");

    let md = write(
        &dir,
        "h.aider.chat.history.md",
        b"# aider chat started at 2025-01-01 10:00:00\n\n#### caf\xE9\n",
    );
    assert!(matches!(
        import_file(&md).unwrap_err(),
        ImportError::InvalidUtf8 {
            location: Location::Line(3),
            ..
        }
    ));

    let doc = write(
        &dir,
        "d.traj",
        b"{\"history\": [{\"role\": \"user\", \"content\": \"\xFF\"}]}",
    );
    assert!(matches!(
        import_file(&doc).unwrap_err(),
        ImportError::InvalidUtf8 {
            location: Location::File,
            ..
        }
    ));
}

#[test]
fn unknown_record_types_are_skipped_and_counted() {
    let text = format!(
        "{CLAUDE_USER}\n{{\"type\":\"telemetry-beacon\",\"sessionId\":\"s\"}}\n{{\"type\":\"telemetry-beacon\"}}\n{{\"type\":\"system\",\"subtype\":\"mystery\"}}\n"
    );
    let s = import_reader(None, "session.jsonl", text.as_bytes()).unwrap();
    assert_eq!(s.format, Format::ClaudeCode);
    assert_eq!(s.report.skipped.get("telemetry-beacon"), Some(&2));
    assert_eq!(s.report.skipped.get("system/mystery"), Some(&1));
    assert_eq!(s.report.records, 4);
    assert_eq!(s.messages().count(), 1);

    let codex = "{\"timestamp\":\"2025-01-01T00:00:00Z\",\"type\":\"session_meta\",\"payload\":{}}\n\
                 {\"timestamp\":\"2025-01-01T00:00:00Z\",\"type\":\"response_item\",\"payload\":{\"type\":\"hologram\"}}\n";
    let s = import_reader(None, "rollout.jsonl", codex.as_bytes()).unwrap();
    assert_eq!(s.report.skipped.get("response_item/hologram"), Some(&1));
}

#[test]
fn a_json_file_of_no_known_format_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "package.json",
        br#"{"name": "left-pad", "version": "1.3.0"}"#,
    );
    let err = import_file(&path).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ImportError::UnknownFormat { .. }), "{err:?}");
    assert!(text.contains("package.json: unknown transcript format"), "{text}");
    assert!(text.contains("\"name\""), "the error says what was seen: {text}");

    let lines = "{\"kind\":\"a\"}\n{\"kind\":\"b\"}\n";
    let err = import_reader(None, "x.jsonl", lines.as_bytes()).unwrap_err();
    assert!(matches!(err, ImportError::UnknownFormat { .. }), "{err:?}");

    let err = import_reader(None, "empty", &b""[..]).unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
    let err = import_reader(None, "notes.txt", &b"just some notes\n"[..]).unwrap_err();
    assert!(matches!(err, ImportError::UnknownFormat { .. }));
    assert!(pith_import::detect("package.json", br#"{"name": "left-pad"}"#).is_err());
}

#[test]
fn a_wrong_shape_names_the_place_and_what_was_expected() {
    let err = import_reader(Some(Format::SweAgent), "a.traj", &br#"{"history": 3}"#[..]).unwrap_err();
    assert!(
        err.to_string()
            .contains("a.traj: $.history: expected a `history` array"),
        "{err}"
    );
    let line = r#"{"type":"user","sessionId":"s","message":{"content":42}}"#;
    let err = import_reader(Some(Format::ClaudeCode), "c.jsonl", line.as_bytes()).unwrap_err();
    assert!(
        err.to_string()
            .contains("c.jsonl: line 1: expected `message.content`"),
        "{err}"
    );
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let err = import_file("/definitely/not/here.jsonl").unwrap_err();
    assert!(matches!(err, ImportError::Io { .. }));
    assert!(err.to_string().contains("/definitely/not/here.jsonl"));
}
