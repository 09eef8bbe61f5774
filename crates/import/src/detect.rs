//! Format detection from content.
//!
//! The first line of a JSONL file tells its format by the keys of its record; a single JSON
//! document (SWE-agent, mini-SWE-agent, OpenHands) by its top-level structure; aider's markdown
//! by its run header or `#### ` lines. The file name is only a last hint, for a JSON document
//! whose structure lies beyond the bytes that were looked at.

use std::path::Path;

use serde_json::Value;

use crate::aider::HEADER;
use crate::error::ImportError;
use crate::format::Format;
use crate::read::str_of;

/// How many leading bytes detection looks at.
pub const HEAD_BYTES: usize = 64 * 1024;

/// What the first bytes of a file say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sniff {
    /// The format is known.
    Known(Format),
    /// A single JSON document whose structure is beyond the head: parse it whole to tell.
    Document,
    /// No known format; the reason says what was seen.
    Unknown(String),
}

/// Detects the format of a file from its first bytes (`head`, ideally [`HEAD_BYTES`] or the
/// whole file when shorter). `name` is used in errors and as a last hint for JSON documents.
pub fn detect(name: impl AsRef<Path>, head: &[u8]) -> Result<Format, ImportError> {
    let name = name.as_ref();
    let unknown = |reason: String| ImportError::UnknownFormat {
        file: name.to_path_buf(),
        reason,
    };
    match sniff(head, head.len() < HEAD_BYTES) {
        Sniff::Known(format) => Ok(format),
        Sniff::Unknown(reason) => Err(unknown(reason)),
        Sniff::Document => by_first_key(head)
            .or_else(|| by_substrings(head))
            .or_else(|| by_name(name))
            .ok_or_else(|| {
                unknown(format!(
                    "a JSON document whose structure is not visible in its first {} bytes",
                    head.len()
                ))
            }),
    }
}

/// Sniffs the head. `complete` says the head is the whole input.
pub(crate) fn sniff(head: &[u8], complete: bool) -> Sniff {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let start = head
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(head.len());
    let body = &head[start..];
    let Some(&first) = body.first() else {
        return Sniff::Unknown("the file is empty".into());
    };
    match first {
        b'[' => document(body, complete),
        b'{' => {
            let newline = memchr::memchr(b'\n', body);
            let line = &body[..newline.unwrap_or(body.len())];
            if newline.is_some() || complete {
                let parsed = serde_json::Deserializer::from_slice(line)
                    .into_iter::<Value>()
                    .next();
                match parsed {
                    Some(Ok(value)) => match record_format(&value) {
                        Some(format) => Sniff::Known(format),
                        None => document(body, complete),
                    },
                    Some(Err(e)) if e.is_eof() => document(body, complete),
                    // Not JSON on its own line: parsing the whole input gives the precise error.
                    _ => document(body, complete),
                }
            } else {
                // A first line longer than the head: look at the keys it starts with.
                by_substrings(body).map_or(Sniff::Document, Sniff::Known)
            }
        }
        _ => {
            let text = String::from_utf8_lossy(&body[..body.len().min(HEAD_BYTES)]);
            if text.starts_with(HEADER)
                || text
                    .lines()
                    .any(|l| l.starts_with("#### ") || l.starts_with(HEADER))
            {
                Sniff::Known(Format::Aider)
            } else {
                Sniff::Unknown("neither JSON nor an aider chat history".into())
            }
        }
    }
}

fn document(body: &[u8], complete: bool) -> Sniff {
    if !complete {
        return Sniff::Document;
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => match document_format(&value) {
            Some(format) => Sniff::Known(format),
            None => Sniff::Unknown(document_mismatch(&value)),
        },
        Err(_) => Sniff::Document,
    }
}

/// Why a parsed JSON document is of no known format.
pub(crate) fn document_mismatch(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let keys: Vec<&str> = map.keys().take(8).map(String::as_str).collect();
            format!(
                "a JSON object with keys {keys:?}; expected `history` (SWE-agent), `messages` \
                 (mini-SWE-agent) or one JSONL record per line"
            )
        }
        Value::Array(_) => {
            "a JSON array that is not an OpenHands event list (objects with `action` or `observation`)".into()
        }
        _ => "a JSON value that is neither an object nor an array".into(),
    }
}

/// The format of a JSONL record, by its keys.
pub(crate) fn record_format(record: &Value) -> Option<Format> {
    let kind = str_of(record, "type").unwrap_or("");
    if record.get("payload").is_some()
        && matches!(
            kind,
            "session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted"
        )
    {
        return Some(Format::Codex);
    }
    let claude_keys = ["sessionId", "parentUuid", "uuid", "leafUuid"];
    if claude_keys.iter().any(|k| record.get(k).is_some())
        || matches!(kind, "file-history-snapshot" | "queue-operation" | "progress")
    {
        return Some(Format::ClaudeCode);
    }
    if matches!(
        kind,
        "session" | "message" | "model_change" | "compaction" | "thinking_level_change"
    ) {
        return Some(Format::Pi);
    }
    None
}

/// The format of a single JSON document, by its structure.
pub(crate) fn document_format(doc: &Value) -> Option<Format> {
    match doc {
        Value::Object(map) if map.get("history").is_some_and(Value::is_array) => Some(Format::SweAgent),
        Value::Object(map) if map.get("messages").is_some_and(Value::is_array) => Some(Format::MiniSweAgent),
        Value::Array(events) => {
            let first = events.first()?;
            (first.get("action").is_some() || first.get("observation").is_some()).then_some(Format::OpenHands)
        }
        _ => None,
    }
}

/// Whether `"key"` is followed (after `:` and spaces) by `"value"` somewhere in `text`.
fn has_pair(text: &[u8], key: &str, value: &str) -> bool {
    let needle = format!("\"{key}\"");
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    for at in finder.find_iter(text) {
        let rest = &text[at + needle.len()..];
        let rest = trim_start(rest);
        if let Some(rest) = rest.strip_prefix(b":") {
            let rest = trim_start(rest);
            if rest.starts_with(format!("\"{value}\"").as_bytes()) {
                return true;
            }
        }
    }
    false
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let n = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[n..]
}

fn has_key(text: &[u8], key: &str) -> bool {
    memchr::memmem::find(text, format!("\"{key}\"").as_bytes()).is_some()
}

/// Detection from key/value pairs seen in a head that does not hold a complete value.
fn by_substrings(text: &[u8]) -> Option<Format> {
    if ["session_meta", "response_item", "event_msg", "turn_context"]
        .iter()
        .any(|v| has_pair(text, "type", v))
    {
        return Some(Format::Codex);
    }
    if has_key(text, "parentUuid") || has_key(text, "sessionId") {
        return Some(Format::ClaudeCode);
    }
    if has_pair(text, "type", "session") || has_pair(text, "type", "message") {
        return Some(Format::Pi);
    }
    if has_key(text, "trajectory_format") || has_key(text, "mini_version") {
        return Some(Format::MiniSweAgent);
    }
    if has_key(text, "tool_call_metadata") || (has_key(text, "observation") && has_key(text, "source")) {
        return Some(Format::OpenHands);
    }
    if has_key(text, "trajectory") || has_key(text, "history") {
        return Some(Format::SweAgent);
    }
    None
}

/// The first top-level key of a JSON object document, as its writers order them: mini-SWE-agent
/// writes `info` then `messages`; SWE-agent writes `environment`, `trajectory`, `history`, `info`.
fn by_first_key(head: &[u8]) -> Option<Format> {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let rest = trim_start(head).strip_prefix(b"{")?;
    let rest = trim_start(rest).strip_prefix(b"\"")?;
    let end = memchr::memchr(b'"', rest)?;
    match &rest[..end] {
        b"info" | b"messages" | b"trajectory_format" => Some(Format::MiniSweAgent),
        b"environment" | b"trajectory" | b"history" => Some(Format::SweAgent),
        _ => None,
    }
}

/// The last hint: conventional file names.
fn by_name(name: &Path) -> Option<Format> {
    let file = name.file_name()?.to_string_lossy().to_ascii_lowercase();
    if file.ends_with(".traj.json") {
        Some(Format::MiniSweAgent)
    } else if file.ends_with(".traj") {
        Some(Format::SweAgent)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_first_lines() {
        let codex = br#"{"timestamp":"t","type":"session_meta","payload":{}}
"#;
        assert_eq!(sniff(codex, true), Sniff::Known(Format::Codex));
        let pi = b"{\"type\":\"session\",\"id\":\"x\",\"cwd\":\"/\"}\n";
        assert_eq!(sniff(pi, true), Sniff::Known(Format::Pi));
        let claude = b"{\"type\":\"file-history-snapshot\",\"messageId\":\"m\"}\n";
        assert_eq!(sniff(claude, true), Sniff::Known(Format::ClaudeCode));
    }

    #[test]
    fn documents_and_markdown() {
        assert_eq!(
            sniff(b"{\n \"history\": []\n}", true),
            Sniff::Known(Format::SweAgent)
        );
        assert_eq!(
            sniff(b"[{\"id\":0,\"observation\":\"null\"}]", true),
            Sniff::Known(Format::OpenHands)
        );
        assert_eq!(sniff(b"{\n \"info\": {", false), Sniff::Document);
        assert_eq!(
            detect("x", b"{\n \"info\": {\"submission\": \"diff").unwrap(),
            Format::MiniSweAgent
        );
        assert_eq!(
            detect("x", b"{\n \"environment\": \"swe_main\", \"trajectory\": [").unwrap(),
            Format::SweAgent
        );
        assert_eq!(
            sniff(b"\n# aider chat started at 2025-01-01 10:00:00\n", true),
            Sniff::Known(Format::Aider)
        );
        assert!(matches!(sniff(b"{\"name\":\"x\"}", true), Sniff::Unknown(_)));
        assert!(matches!(sniff(b"hello", true), Sniff::Unknown(_)));
    }

    #[test]
    fn a_huge_first_line_is_told_by_its_keys() {
        let head = br#"{"parentUuid":null,"isSidechain":false,"message":{"content":"aaaaaaaa"#;
        assert_eq!(sniff(head, false), Sniff::Known(Format::ClaudeCode));
    }
}
