//! `--dump-views` files match the report: retention recomputed from the dumped view and the
//! summarised span with the test's own simple path search gives the report's numbers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::Write;

use assert_cmd::Command;
use pith_core::{Entry, Message, Part, Role};
use serde_json::{json, Value};

/// Writes a generated coding session as a pi session file (structured read/edit/write calls).
fn write_pi_session(path: &std::path::Path) {
    let session = pith_cli::demo_session::generate(11, 10, "anthropic/claude-sonnet-4-5");
    let mut out = std::fs::File::create(path).unwrap();
    writeln!(
        out,
        "{}",
        json!({"type": "session", "id": "t", "timestamp": "2025-11-20T23:33:50.805Z", "cwd": "/work", "provider": "anthropic", "modelId": "claude-sonnet-4-5"})
    )
    .unwrap();
    let rename = |name: &str| {
        match name {
            "read_file" => "read",
            "edit_file" => "edit",
            "write_file" => "write",
            other => other,
        }
        .to_string()
    };
    let mut names = std::collections::HashMap::new();
    for m in session.entries.iter().filter_map(Entry::as_message) {
        let message = match m.role {
            Role::System => continue,
            Role::User => {
                json!({"role": "user", "content": [{"type": "text", "text": m.text_content()}], "timestamp": 1})
            }
            Role::Assistant => {
                let content: Vec<Value> = m
                    .parts
                    .iter()
                    .map(|p| match p {
                        Part::ToolCall { call_id, name, arguments } => {
                            names.insert(call_id.clone(), rename(name));
                            json!({"type": "toolCall", "id": call_id, "name": rename(name), "arguments": arguments})
                        }
                        other => json!({"type": "text", "text": other.as_text().unwrap_or_default()}),
                    })
                    .collect();
                let stop = if m.has_tool_calls() { "toolUse" } else { "stop" };
                json!({"role": "assistant", "content": content, "stopReason": stop, "timestamp": 1,
                       "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}})
            }
            Role::Tool | Role::Developer => {
                let (id, content, is_error) = m.tool_results().next().unwrap();
                json!({"role": "toolResult", "toolCallId": id, "toolName": names[id], "content": [{"type": "text", "text": content}], "isError": is_error, "timestamp": 1})
            }
        };
        writeln!(
            out,
            "{}",
            json!({"type": "message", "timestamp": "2025-11-20T23:34:00.000Z", "message": message})
        )
        .unwrap();
    }
}

/// The test's own search: `path` arguments of read / edit / write calls, and user texts.
fn own_retention(span: &[Message], view: &str) -> [[u64; 2]; 3] {
    let mut read = BTreeSet::new();
    let mut modified = BTreeSet::new();
    let mut users = Vec::new();
    for m in span {
        for p in &m.parts {
            if let Part::ToolCall { name, arguments, .. } = p {
                if let Some(path) = arguments.get("path").and_then(Value::as_str) {
                    match name.as_str() {
                        "read" => {
                            read.insert(path.to_string());
                        }
                        "edit" | "write" => {
                            modified.insert(path.to_string());
                        }
                        _ => {}
                    }
                }
            }
        }
        if m.role == Role::User && !m.text_content().starts_with("<system-reminder>") {
            users.push(m.text_content());
        }
    }
    let kept = |s: &BTreeSet<String>| s.iter().filter(|p| view.contains(p.as_str())).count() as u64;
    [
        [kept(&read), read.len() as u64],
        [kept(&modified), modified.len() as u64],
        [
            users.iter().filter(|u| view.contains(u.trim())).count() as u64,
            users.len() as u64,
        ],
    ]
}

fn text_of(messages: &[Message]) -> String {
    serde_json::to_string(messages).unwrap()
        + &messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.clone()),
                Part::ToolResult { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
}

#[test]
fn dumped_views_match_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.jsonl");
    write_pi_session(&file);
    let views = dir.path().join("views");
    let output = Command::cargo_bin("pith")
        .unwrap()
        .args(["--store", "memory", "--json", "replay"])
        .arg(&file)
        .args(["--window", "32000", "--dump-views"])
        .arg(&views)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["format"], "pi");
    let rows = report["compactions"].as_array().unwrap();
    assert!(rows.len() >= 2, "{report}");
    let mut files: Vec<_> = std::fs::read_dir(&views)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), rows.len());
    for (path, row) in files.iter().zip(rows) {
        let dump: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(dump["generation"], row["generation"]);
        assert_eq!(dump["at_call"], row["at_call"]);
        let messages: Vec<Message> = serde_json::from_value(dump["messages"].clone()).unwrap();
        let span: Vec<Message> = serde_json::from_value(dump["span"].clone()).unwrap();
        assert!(!span.is_empty());
        let [read, modified, users] = own_retention(&span, &text_of(&messages));
        let r = &row["retention"];
        assert_eq!(r["read_paths"], json!(read), "{}", path.display());
        assert_eq!(r["modified_paths"], json!(modified), "{}", path.display());
        assert_eq!(r["user_messages"], json!(users), "{}", path.display());
    }
}
