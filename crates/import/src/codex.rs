//! Codex CLI rollout JSONL.
//!
//! Each line is `{timestamp, type, payload}`. The model context is rebuilt from `response_item`
//! lines only: `message` (roles user, assistant, developer, system), `reasoning`,
//! `function_call` / `function_call_output`, `custom_tool_call` / `custom_tool_call_output` and
//! `local_shell_call`. A run of consecutive assistant-side items (reasoning, assistant message,
//! calls) is one assistant message. `event_msg` lines duplicate the items and are skipped, except
//! `token_count`, whose `last_token_usage` is attached to the assistant message of that model call.
//! `turn_context` gives the model; a `compacted` line is Codex's own compaction (a marker).

use std::io::BufRead;
use std::path::Path;

use pith_core::{MarkerKind, Part, Role, Usage};
use serde_json::{json, Value};

use crate::assemble::{message, Assembler};
use crate::error::ImportError;
use crate::read::{decode_json_string, json_values, parse_time, str_of, take_str, u64_of, Lines};

/// Reads a Codex rollout.
pub(crate) fn read(file: &Path, reader: &mut dyn BufRead) -> Result<Assembler, ImportError> {
    let mut lines = Lines::new(reader, file);
    let mut state = State {
        asm: Assembler::new(),
        accumulating: false,
        pending_usage: None,
        current_model: None,
    };
    while let Some((line, text)) = lines.next_line()? {
        for record in json_values(file, line, text)? {
            state.asm.report.records += 1;
            state.record(line, record);
        }
    }
    if state.pending_usage.take().is_some() {
        state.asm.report.unattached_usage += 1;
    }
    state.asm.report.max_line_bytes = lines.max_line_bytes();
    Ok(state.asm)
}

struct State {
    asm: Assembler,
    /// The last response item was assistant-side, so the next one extends the open message.
    accumulating: bool,
    /// A usage report seen before the items of its model call (older rollouts write it first).
    pending_usage: Option<Usage>,
    current_model: Option<String>,
}

impl State {
    fn record(&mut self, line: u64, mut record: Value) {
        let at = self.asm.time(parse_time(record.get("timestamp")));
        let kind = str_of(&record, "type").unwrap_or("").to_string();
        let mut payload = record.get_mut("payload").map(Value::take).unwrap_or(Value::Null);
        match kind.as_str() {
            "response_item" => self.item(line, at, payload),
            "event_msg" if str_of(&payload, "type") == Some("token_count") => self.token_count(&payload),
            "event_msg" => {
                let sub = str_of(&payload, "type").unwrap_or("other");
                self.asm.report.skip(format!("event_msg/{sub}"));
            }
            "turn_context" => {
                self.asm.report.skip("turn_context");
                if let Some(model) = str_of(&payload, "model") {
                    if self.current_model.as_deref() != Some(model) {
                        if self.current_model.is_some() {
                            self.accumulating = false;
                            self.asm.push_model_change(model.to_string(), at);
                        }
                        self.asm.model_if_unset(model);
                        self.current_model = Some(model.to_string());
                    }
                }
            }
            "compacted" => {
                self.accumulating = false;
                let summary = take_str(&mut payload, "message");
                let kind = MarkerKind::ExternalCompaction {
                    tool: "codex".into(),
                    tokens_before: None,
                    trigger: None,
                    summary,
                };
                self.asm.push_marker(kind, at, format!("line {line}"));
            }
            "" => self.asm.report.skip("(no type)"),
            other => self.asm.report.skip(other),
        }
    }

    fn token_count(&mut self, payload: &Value) {
        let Some(last) = payload.get("info").and_then(|i| i.get("last_token_usage")) else {
            self.asm.report.skip("event_msg/token_count (no info)");
            return;
        };
        let usage = Usage::from_openai(
            u64_of(last, "input_tokens").unwrap_or(0),
            u64_of(last, "output_tokens").unwrap_or(0),
            u64_of(last, "cached_input_tokens").unwrap_or(0),
        );
        // Newer rollouts write the usage after the items of the call: attach it to the open
        // assistant message. Older ones write it before: keep it for the next assistant message.
        let attached = match self.asm.open_message() {
            Some(m) if m.usage.is_none() && self.pending_usage.is_none() => {
                m.usage = Some(usage);
                true
            }
            _ => false,
        };
        if !attached && self.pending_usage.replace(usage).is_some() {
            self.asm.report.unattached_usage += 1;
        }
    }

    fn item(&mut self, line: u64, at: chrono::DateTime<chrono::Utc>, mut item: Value) {
        let source = format!("line {line}");
        let kind = str_of(&item, "type").unwrap_or("").to_string();
        match kind.as_str() {
            "message" => {
                let role = match str_of(&item, "role") {
                    Some("assistant") => Role::Assistant,
                    Some("developer") => Role::Developer,
                    Some("system") => Role::System,
                    _ => Role::User,
                };
                let parts = message_parts(item.get_mut("content").map(Value::take));
                if role == Role::Assistant {
                    self.assistant_parts(parts, at, source);
                } else {
                    self.accumulating = false;
                    self.asm.push_message(message(role, parts, at, source), None);
                }
            }
            "reasoning" => {
                let mut text = String::new();
                for s in item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(t) = str_of(s, "text") {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(t);
                    }
                }
                let signature = take_str(&mut item, "encrypted_content");
                self.assistant_parts(vec![Part::Reasoning { text, signature }], at, source);
            }
            "function_call" => {
                let arguments = match take_str(&mut item, "arguments") {
                    Some(raw) => {
                        let (value, ok) = decode_json_string(raw);
                        if !ok {
                            self.asm.report.warnings.push(format!(
                                "{source}: function_call arguments are not JSON; kept as a string"
                            ));
                        }
                        value
                    }
                    None => item.get_mut("arguments").map(Value::take).unwrap_or(Value::Null),
                };
                let call = Part::ToolCall {
                    call_id: take_str(&mut item, "call_id").unwrap_or_default(),
                    name: take_str(&mut item, "name").unwrap_or_default(),
                    arguments,
                };
                self.assistant_parts(vec![call], at, source);
            }
            "custom_tool_call" => {
                let input = take_str(&mut item, "input").unwrap_or_default();
                let call = Part::ToolCall {
                    call_id: take_str(&mut item, "call_id").unwrap_or_default(),
                    name: take_str(&mut item, "name").unwrap_or_default(),
                    arguments: json!({ "input": input }),
                };
                self.assistant_parts(vec![call], at, source);
            }
            "local_shell_call" => {
                let call_id = take_str(&mut item, "call_id")
                    .or_else(|| take_str(&mut item, "id"))
                    .unwrap_or_default();
                let call = Part::ToolCall {
                    call_id,
                    name: "local_shell".into(),
                    arguments: item.get_mut("action").map(Value::take).unwrap_or(Value::Null),
                };
                self.assistant_parts(vec![call], at, source);
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                self.accumulating = false;
                let call_id = str_of(&item, "call_id").unwrap_or("").to_string();
                let output = item.get_mut("output").map(Value::take).unwrap_or(Value::Null);
                let (text, is_error) = output_text(output);
                self.asm
                    .push_result(&call_id, text, is_error, Vec::new(), at, source);
            }
            "" => self.asm.report.skip("response_item/(no type)"),
            other => self.asm.report.skip(format!("response_item/{other}")),
        }
    }

    /// Adds assistant-side parts: to the open message while a run lasts, else a new message.
    fn assistant_parts(&mut self, parts: Vec<Part>, at: chrono::DateTime<chrono::Utc>, source: String) {
        let rest = if self.accumulating {
            self.asm.extend_open(parts)
        } else {
            Err(parts)
        };
        if let Err(parts) = rest {
            let mut m = message(Role::Assistant, parts, at, source);
            m.meta.model = self.current_model.clone();
            m.usage = self.pending_usage.take();
            self.asm.push_message(m, None);
        }
        self.accumulating = true;
    }
}

/// Parts of a message item: `input_text` / `output_text` blocks as text, `input_image` as images.
fn message_parts(content: Option<Value>) -> Vec<Part> {
    let mut parts = Vec::new();
    match content {
        Some(Value::String(s)) => parts.push(Part::text(s)),
        Some(Value::Array(blocks)) => {
            for mut block in blocks {
                match str_of(&block, "type") {
                    Some("input_image") => {
                        if let Some(url) = take_str(&mut block, "image_url") {
                            let media_type = url
                                .strip_prefix("data:")
                                .and_then(|r| r.split(';').next())
                                .unwrap_or("image/png")
                                .to_string();
                            parts.push(Part::Image {
                                media_type,
                                source: url,
                            });
                        }
                    }
                    _ => {
                        if let Some(text) = take_str(&mut block, "text") {
                            parts.push(Part::text(text));
                        }
                    }
                }
            }
        }
        _ => {}
    }
    parts
}

/// The text of a call output: a JSON string that may hold `{output, metadata: {exit_code}}` (the
/// text is kept, a non-zero exit code marks an error), or an object with `content`.
fn output_text(output: Value) -> (String, bool) {
    let decoded = match output {
        Value::String(raw) => match serde_json::from_str::<Value>(&raw) {
            Ok(v @ Value::Object(_)) => v,
            _ => return (raw, false),
        },
        other => other,
    };
    let mut decoded = decoded;
    let exit = decoded
        .get("metadata")
        .and_then(|m| m.get("exit_code"))
        .and_then(Value::as_i64);
    let failed = decoded.get("success").and_then(Value::as_bool) == Some(false);
    let text = take_str(&mut decoded, "output")
        .or_else(|| take_str(&mut decoded, "content"))
        .unwrap_or_else(|| decoded.to_string());
    (text, failed || exit.is_some_and(|c| c != 0))
}
