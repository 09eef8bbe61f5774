//! pi coding-agent session JSONL.
//!
//! Line 1 is `{type: session, provider, modelId, ...}`; then `{type: message, message}` entries
//! with `role` `user`, `assistant`, `toolResult` or `bashExecution`, plus `model_change`,
//! `compaction` and `thinking_level_change` entries. A line may hold two JSON objects with no
//! newline between them (a bug of some pi versions); both are read.
//!
//! - assistant content blocks `text`, `thinking`, `toolCall{id, name, arguments}`; `usage
//!   {input, output, cacheRead, cacheWrite}` is Anthropic-style; an assistant message with no
//!   content (an aborted request) carries nothing and is skipped;
//! - `toolResult{toolCallId, content, isError}` is a tool message;
//! - `bashExecution{command, output, exitCode, cancelled}` is a command the user ran; it becomes a
//!   synthetic assistant message calling `bash` and its result, so views see what happened;
//! - `model_change` is a model change, `compaction{summary, tokensBefore}` a marker.

use std::io::BufRead;
use std::path::Path;

use pith_core::{MarkerKind, Part, Role, Usage};
use serde_json::{json, Value};

use crate::assemble::{message, Assembler};
use crate::blocks::{finish, image, result_body};
use crate::error::{ImportError, Location};
use crate::read::{json_values, parse_time, str_of, take_str, u64_of, Lines};

/// Reads a pi session.
pub(crate) fn read(file: &Path, reader: &mut dyn BufRead) -> Result<Assembler, ImportError> {
    let mut lines = Lines::new(reader, file);
    let mut asm = Assembler::new();
    while let Some((line, text)) = lines.next_line()? {
        let values = json_values(file, line, text)?;
        if values.len() > 1 {
            asm.report.warnings.push(format!(
                "line {line}: {} JSON objects on one line; all were read",
                values.len()
            ));
        }
        for record in values {
            asm.report.records += 1;
            entry(&mut asm, file, line, record)?;
        }
    }
    asm.report.max_line_bytes = lines.max_line_bytes();
    Ok(asm)
}

fn model_name(value: &Value, provider_key: &str, model_key: &str) -> Option<String> {
    let model = str_of(value, model_key)?;
    Some(match str_of(value, provider_key) {
        Some(p) if !p.is_empty() => format!("{p}/{model}"),
        _ => model.to_string(),
    })
}

fn entry(asm: &mut Assembler, file: &Path, line: u64, mut record: Value) -> Result<(), ImportError> {
    let at = asm.time(parse_time(record.get("timestamp")));
    let source = format!("line {line}");
    match str_of(&record, "type").unwrap_or("") {
        "session" => {
            asm.report.skip("session");
            if let Some(model) = model_name(&record, "provider", "modelId") {
                asm.model_if_unset(&model);
            }
        }
        "model_change" => {
            if let Some(model) = model_name(&record, "provider", "modelId") {
                asm.model_if_unset(&model);
                asm.push_model_change(model, at);
            }
        }
        "compaction" => {
            let kind = MarkerKind::ExternalCompaction {
                tool: "pi".into(),
                tokens_before: u64_of(&record, "tokensBefore"),
                trigger: None,
                summary: take_str(&mut record, "summary"),
            };
            let kept = u64_of(&record, "firstKeptEntryIndex")
                .map(|i| format!(" (firstKeptEntryIndex {i})"))
                .unwrap_or_default();
            asm.push_marker(kind, at, format!("{source}{kept}"));
        }
        "message" => {
            let Some(msg) = record.get_mut("message").filter(|m| m.is_object()) else {
                return Err(ImportError::schema(
                    file,
                    Location::Line(line),
                    "a `message` object in a message entry",
                ));
            };
            message_entry(asm, file, line, msg, at, source)?;
        }
        "" => asm.report.skip("(no type)"),
        other => asm.report.skip(other.to_string()),
    }
    Ok(())
}

fn message_entry(
    asm: &mut Assembler,
    file: &Path,
    line: u64,
    msg: &mut Value,
    at: chrono::DateTime<chrono::Utc>,
    source: String,
) -> Result<(), ImportError> {
    let role = str_of(msg, "role").unwrap_or("").to_string();
    match role.as_str() {
        "user" => {
            let parts = content_parts(msg.get_mut("content").map(Value::take));
            asm.push_message(message(Role::User, parts, at, source), None);
        }
        "assistant" => {
            let parts = content_parts(msg.get_mut("content").map(Value::take));
            if parts.is_empty() {
                asm.report.skip("message/assistant (empty)");
                return Ok(());
            }
            let mut m = message(Role::Assistant, parts, at, source);
            m.meta.model = model_name(msg, "provider", "model");
            m.usage = msg.get("usage").filter(|u| u.is_object()).map(|u| {
                Usage::from_anthropic(
                    u64_of(u, "input").unwrap_or(0),
                    u64_of(u, "output").unwrap_or(0),
                    u64_of(u, "cacheRead").unwrap_or(0),
                    u64_of(u, "cacheWrite").unwrap_or(0),
                )
            });
            m.finish = str_of(msg, "stopReason").map(finish);
            if let Some(model) = m.meta.model.clone() {
                asm.model_if_unset(&model);
            }
            asm.push_message(m, None);
        }
        "toolResult" => {
            let call_id = str_of(msg, "toolCallId").unwrap_or("").to_string();
            let is_error = msg.get("isError").and_then(Value::as_bool) == Some(true);
            let (text, extra) = result_body(msg.get_mut("content").map(Value::take).unwrap_or(Value::Null));
            asm.push_result(&call_id, text, is_error, extra, at, source);
        }
        "bashExecution" => {
            let command = take_str(msg, "command").unwrap_or_default();
            let output = take_str(msg, "output").unwrap_or_default();
            let failed = msg
                .get("exitCode")
                .and_then(Value::as_i64)
                .is_some_and(|c| c != 0)
                || msg.get("cancelled").and_then(Value::as_bool) == Some(true);
            let call_id = format!("pi-bash-line-{line}");
            let call = Part::ToolCall {
                call_id: call_id.clone(),
                name: "bash".into(),
                arguments: json!({ "command": command }),
            };
            let mut m = message(Role::Assistant, vec![call], at, source.clone());
            m.meta.synthetic = true;
            asm.push_message(m, None);
            asm.report.synthesized_calls += 1;
            asm.push_result(&call_id, output, failed, Vec::new(), at, source);
        }
        other => {
            if other.is_empty() {
                return Err(ImportError::schema(
                    file,
                    Location::Line(line),
                    "a `message.role`",
                ));
            }
            asm.report.skip(format!("message/{other}"));
        }
    }
    Ok(())
}

/// Parts of pi content: a string, or blocks `text`, `image`, `thinking`, `toolCall`.
fn content_parts(content: Option<Value>) -> Vec<Part> {
    let blocks = match content {
        Some(Value::String(s)) => return vec![Part::text(s)],
        Some(Value::Array(blocks)) => blocks,
        _ => return Vec::new(),
    };
    let mut parts = Vec::new();
    for mut block in blocks {
        match str_of(&block, "type") {
            Some("text") => parts.push(Part::text(take_str(&mut block, "text").unwrap_or_default())),
            Some("thinking") => parts.push(Part::Reasoning {
                text: take_str(&mut block, "thinking").unwrap_or_default(),
                signature: take_str(&mut block, "thinkingSignature").filter(|s| !s.is_empty()),
            }),
            Some("toolCall") => parts.push(Part::ToolCall {
                call_id: take_str(&mut block, "id").unwrap_or_default(),
                name: take_str(&mut block, "name").unwrap_or_default(),
                arguments: block.get_mut("arguments").map(Value::take).unwrap_or(Value::Null),
            }),
            Some("image") => parts.extend(image(block)),
            _ => {}
        }
    }
    parts
}
