//! Claude Code session JSONL.
//!
//! One record per line; `type` is `user`, `assistant`, `system`, `progress`,
//! `file-history-snapshot`, `queue-operation` or `summary`. An API response is streamed into
//! several `assistant` records (one per content block) that share `message.id`; they are merged
//! into one assistant message even when tool results arrive between them. Tool results come in
//! `user` records as `tool_result` blocks and become tool messages; other blocks of such a record
//! become a user message after them. A `system` record with `subtype: compact_boundary` is
//! Claude Code's own compaction: it becomes an external-compaction marker, and the summary in the
//! next user record stays a user message flagged `external_summary`.

use std::io::BufRead;
use std::path::Path;

use pith_core::{MarkerKind, Part, Role, REMINDER_TAG};
use serde_json::Value;

use crate::assemble::{message, Assembler};
use crate::blocks::{anthropic_usage, finish, image, result_body};
use crate::error::{ImportError, Location};
use crate::read::{json_values, parse_time, str_of, take_str, u64_of, Lines};

/// Reads a Claude Code session.
pub(crate) fn read(file: &Path, reader: &mut dyn BufRead) -> Result<Assembler, ImportError> {
    let mut lines = Lines::new(reader, file);
    let mut state = State {
        asm: Assembler::new(),
        after_boundary: false,
    };
    while let Some((line, text)) = lines.next_line()? {
        for record in json_values(file, line, text)? {
            state.asm.report.records += 1;
            state.record(file, line, record)?;
        }
    }
    let max = lines.max_line_bytes();
    state.asm.report.max_line_bytes = max;
    Ok(state.asm)
}

struct State {
    asm: Assembler,
    /// A compact boundary was seen and its summary (the next user record) not yet.
    after_boundary: bool,
}

impl State {
    fn record(&mut self, file: &Path, line: u64, mut record: Value) -> Result<(), ImportError> {
        let kind = str_of(&record, "type").unwrap_or("").to_string();
        match kind.as_str() {
            "assistant" => self.assistant(file, line, &mut record),
            "user" => self.user(file, line, &mut record),
            "system" if str_of(&record, "subtype") == Some("compact_boundary") => {
                let at = self.asm.time(parse_time(record.get("timestamp")));
                let meta = record.get("compactMetadata");
                let kind = MarkerKind::ExternalCompaction {
                    tool: "claude-code".into(),
                    tokens_before: meta.and_then(|m| u64_of(m, "preTokens")),
                    trigger: meta.and_then(|m| str_of(m, "trigger")).map(str::to_string),
                    summary: None,
                };
                self.asm.push_marker(kind, at, format!("line {line}"));
                self.after_boundary = true;
                Ok(())
            }
            "system" => {
                let sub = str_of(&record, "subtype").unwrap_or("other");
                self.asm.report.skip(format!("system/{sub}"));
                Ok(())
            }
            "" => {
                self.asm.report.skip("(no type)");
                Ok(())
            }
            other => {
                self.asm.report.skip(other);
                Ok(())
            }
        }
    }

    fn assistant(&mut self, file: &Path, line: u64, record: &mut Value) -> Result<(), ImportError> {
        let at = self.asm.time(parse_time(record.get("timestamp")));
        let Some(msg) = record.get_mut("message").filter(|m| m.is_object()) else {
            return Err(ImportError::schema(
                file,
                Location::Line(line),
                "a `message` object in an assistant record",
            ));
        };
        let id = str_of(msg, "id").map(str::to_string);
        let model = str_of(msg, "model").map(str::to_string);
        let usage = msg.get("usage").and_then(anthropic_usage);
        let stop = str_of(msg, "stop_reason").map(finish);
        let parts = assistant_parts(msg.get_mut("content").map(Value::take), &mut self.asm);
        if let Some(m) = model.as_deref().filter(|m| !m.starts_with('<')) {
            self.asm.model_if_unset(m);
        }
        let same_response = id.is_some() && self.asm.open_key() == id.as_deref();
        let rest = if same_response {
            self.asm.extend_open(parts)
        } else {
            Err(parts)
        };
        if let Err(parts) = rest {
            let mut m = message(Role::Assistant, parts, at, format!("line {line}"));
            m.meta.model = model;
            self.asm.push_message(m, id);
        }
        if let Some(open) = self.asm.open_message() {
            if usage.is_some() {
                open.usage = usage;
            }
            if stop.is_some() {
                open.finish = stop;
            }
        }
        Ok(())
    }

    fn user(&mut self, file: &Path, line: u64, record: &mut Value) -> Result<(), ImportError> {
        let at = self.asm.time(parse_time(record.get("timestamp")));
        let compact_summary = record.get("isCompactSummary").and_then(Value::as_bool) == Some(true);
        let Some(content) = record
            .get_mut("message")
            .and_then(|m| m.get_mut("content"))
            .map(Value::take)
        else {
            return Err(ImportError::schema(
                file,
                Location::Line(line),
                "a `message.content` in a user record",
            ));
        };
        let source = format!("line {line}");
        let mut groups: Vec<Vec<Part>> = Vec::new();
        match content {
            Value::String(text) => groups.push(vec![Part::text(text)]),
            Value::Array(blocks) => {
                let mut current: Vec<Part> = Vec::new();
                for mut block in blocks {
                    match str_of(&block, "type") {
                        Some("tool_result") => {
                            let call_id = str_of(&block, "tool_use_id").unwrap_or("").to_string();
                            let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
                            let body = block.get_mut("content").map(Value::take).unwrap_or(Value::Null);
                            let (text, extra) = result_body(body);
                            self.asm
                                .push_result(&call_id, text, is_error, extra, at, source.clone());
                        }
                        Some("text") => {
                            let text = take_str(&mut block, "text").unwrap_or_default();
                            if text.trim_start().starts_with(REMINDER_TAG) {
                                // A reminder is a message of its own, never part of a request.
                                if !current.is_empty() {
                                    groups.push(std::mem::take(&mut current));
                                }
                                groups.push(vec![Part::text(text)]);
                            } else {
                                current.push(Part::text(text));
                            }
                        }
                        Some("image") => current.extend(image(block)),
                        other => {
                            let other = other.unwrap_or("(no type)");
                            self.asm.report.skip(format!("user block/{other}"));
                        }
                    }
                }
                if !current.is_empty() {
                    groups.push(current);
                }
            }
            _ => {
                return Err(ImportError::schema(
                    file,
                    Location::Line(line),
                    "`message.content` to be a string or a list of content blocks",
                ))
            }
        }
        for parts in groups {
            let mut m = message(Role::User, parts, at, source.clone());
            if self.after_boundary || compact_summary {
                m.meta.external_summary = true;
                self.after_boundary = false;
            }
            self.asm.push_message(m, None);
        }
        Ok(())
    }
}

/// The parts of an assistant record's content. Whitespace-only text blocks (Claude Code streams a
/// `"\n\n"` block before thinking) are dropped: providers reject them.
fn assistant_parts(content: Option<Value>, asm: &mut Assembler) -> Vec<Part> {
    let blocks = match content {
        Some(Value::Array(blocks)) => blocks,
        Some(Value::String(text)) if !text.trim().is_empty() => return vec![Part::text(text)],
        _ => return Vec::new(),
    };
    let mut parts = Vec::new();
    for mut block in blocks {
        match str_of(&block, "type") {
            Some("text") => {
                let text = take_str(&mut block, "text").unwrap_or_default();
                if !text.trim().is_empty() {
                    parts.push(Part::text(text));
                }
            }
            Some("thinking") => parts.push(Part::Reasoning {
                text: take_str(&mut block, "thinking").unwrap_or_default(),
                signature: take_str(&mut block, "signature"),
            }),
            Some("redacted_thinking") => parts.push(Part::Reasoning {
                text: String::new(),
                signature: take_str(&mut block, "data"),
            }),
            Some("tool_use" | "server_tool_use") => parts.push(Part::ToolCall {
                call_id: take_str(&mut block, "id").unwrap_or_default(),
                name: take_str(&mut block, "name").unwrap_or_default(),
                arguments: block.get_mut("input").map(Value::take).unwrap_or(Value::Null),
            }),
            other => {
                let other = other.unwrap_or("(no type)");
                asm.report.skip(format!("assistant block/{other}"));
            }
        }
    }
    parts
}
