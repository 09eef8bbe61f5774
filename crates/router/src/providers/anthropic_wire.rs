//! Mapping pith's normalised types to and from Anthropic Messages JSON.
//!
//! Instructions (system and developer messages) go to the top-level `system` as one text block
//! each, verbatim and in order. Tool results travel as `tool_result` blocks in a user message;
//! consecutive messages of one role are merged, as the API requires alternating roles.

use std::collections::BTreeMap;

use pith_core::{FinishReason, Message, Part, Role, Usage};
use serde_json::{json, Map, Value};

use crate::error::ProviderError;
use crate::request::{ChatRequest, ChatResponse, StreamEvent};

fn source(media_type: &str, src: &str) -> Value {
    if src.starts_with("http://") || src.starts_with("https://") {
        json!({"type": "url", "url": src})
    } else if let Some(rest) = src.strip_prefix("data:") {
        let (meta, data) = rest.split_once(',').unwrap_or(("", rest));
        let media = meta.trim_end_matches(";base64");
        let media = if media.is_empty() { media_type } else { media };
        json!({"type": "base64", "media_type": media, "data": data})
    } else {
        json!({"type": "base64", "media_type": media_type, "data": src})
    }
}

fn block(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text } if text.is_empty() => None,
        Part::Text { text } => Some(json!({"type": "text", "text": text})),
        Part::Image {
            media_type,
            source: s,
        } => Some(json!({"type": "image", "source": source(media_type, s)})),
        Part::Document {
            media_type,
            source: s,
            title,
            ..
        } => {
            let mut b = json!({"type": "document", "source": source(media_type, s)});
            if let (Some(t), Some(obj)) = (title, b.as_object_mut()) {
                obj.insert("title".into(), json!(t));
            }
            Some(b)
        }
        Part::ToolCall {
            call_id,
            name,
            arguments,
        } => {
            let input = match arguments {
                Value::Object(_) => arguments.clone(),
                Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| json!({"input": s})),
                other => json!({"input": other}),
            };
            Some(json!({"type": "tool_use", "id": call_id, "name": name, "input": input}))
        }
        Part::ToolResult {
            call_id,
            content,
            is_error,
        } => Some(
            json!({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}),
        ),
        // Thinking goes back only with its signature; unsigned reasoning is not accepted.
        Part::Reasoning {
            text,
            signature: Some(sig),
        } => Some(json!({"type": "thinking", "thinking": text, "signature": sig})),
        Part::Reasoning { signature: None, .. } => None,
    }
}

/// The JSON body of a Messages request; `default_max_tokens` fills the required `max_tokens`.
pub fn request_body(request: &ChatRequest, default_max_tokens: u32) -> Value {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        if message.role.is_instruction() {
            let text = message.text_content();
            if !text.is_empty() {
                system.push(json!({"type": "text", "text": text}));
            }
            continue;
        }
        let role = if message.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        let blocks: Vec<Value> = message.parts.iter().filter_map(block).collect();
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((r, existing)) if *r == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert(
        "max_tokens".into(),
        json!(request.max_tokens.unwrap_or(default_max_tokens)),
    );
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if !request.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(request.stop));
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// Maps an Anthropic `stop_reason`.
pub fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

fn count(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// Reads Anthropic usage (`input_tokens` excludes both cache counts).
pub fn usage(value: &Value) -> Usage {
    Usage::from_anthropic(
        count(value, "input_tokens").unwrap_or(0),
        count(value, "output_tokens").unwrap_or(0),
        count(value, "cache_read_input_tokens").unwrap_or(0),
        count(value, "cache_creation_input_tokens").unwrap_or(0),
    )
}

fn part_of(block: &Value) -> Result<Option<Part>, ProviderError> {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    let s = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Ok(match kind {
        "text" => Some(Part::text(s("text"))),
        "thinking" => Some(Part::Reasoning {
            text: s("thinking"),
            signature: block.get("signature").and_then(Value::as_str).map(str::to_string),
        }),
        "redacted_thinking" => Some(Part::Reasoning {
            text: String::new(),
            signature: Some(s("data")),
        }),
        "tool_use" => {
            if s("id").is_empty() || s("name").is_empty() {
                return Err(ProviderError::InvalidResponse(
                    "tool_use block without id or name".into(),
                ));
            }
            Some(Part::ToolCall {
                call_id: s("id"),
                name: s("name"),
                arguments: block.get("input").cloned().unwrap_or_else(|| json!({})),
            })
        }
        _ => None,
    })
}

fn assemble(model: String, parts: Vec<Part>, finish: FinishReason, usage: Usage) -> ChatResponse {
    let mut message = Message::new(Role::Assistant, parts);
    message.usage = Some(usage);
    message.finish = Some(finish);
    message.meta.model = Some(model.clone());
    ChatResponse {
        model,
        message,
        finish,
        usage,
    }
}

/// Parses a non-streamed Messages reply.
pub fn parse_response(body: &Value) -> Result<ChatResponse, ProviderError> {
    if body.get("type").and_then(Value::as_str) == Some("error") {
        return Err(crate::classify::classify_stream_error(body));
    }
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ProviderError::InvalidResponse("reply has no content array".into()))?;
    let mut parts = Vec::new();
    for b in content {
        if let Some(p) = part_of(b)? {
            parts.push(p);
        }
    }
    let finish = body
        .get("stop_reason")
        .and_then(Value::as_str)
        .map(finish_reason)
        .unwrap_or(FinishReason::Other);
    let usage = body.get("usage").map(usage).unwrap_or_default();
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Ok(assemble(model, parts, finish, usage))
}

/// One content block being streamed.
#[derive(Debug)]
enum BlockState {
    Text(String),
    Thinking {
        text: String,
        signature: Option<String>,
    },
    Tool {
        ordinal: usize,
        id: String,
        name: String,
        json: String,
    },
    Other,
}

/// Assembles a streamed Messages reply from its events.
#[derive(Debug, Default)]
pub struct StreamState {
    model: String,
    blocks: BTreeMap<u64, BlockState>,
    tools: usize,
    usage: Usage,
    finish: Option<FinishReason>,
    stopped: bool,
}

impl StreamState {
    /// Whether `message_stop` arrived.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Applies one event (its `type` is in the JSON) and returns the stream events it carries.
    pub fn apply(&mut self, event: &Value) -> Result<Vec<StreamEvent>, ProviderError> {
        let mut out = Vec::new();
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                let msg = event.get("message").unwrap_or(&Value::Null);
                self.model = msg
                    .get("model")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if let Some(u) = msg.get("usage") {
                    self.usage = usage(u);
                }
            }
            "content_block_start" => {
                let b = event.get("content_block").unwrap_or(&Value::Null);
                let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let state = match b.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text" => BlockState::Text(s("text")),
                    "thinking" => BlockState::Thinking {
                        text: s("thinking"),
                        signature: None,
                    },
                    "tool_use" => {
                        let ordinal = self.tools;
                        self.tools += 1;
                        out.push(StreamEvent::ToolCallDelta {
                            index: ordinal,
                            id: Some(s("id")),
                            name: Some(s("name")),
                            arguments: String::new(),
                        });
                        BlockState::Tool {
                            ordinal,
                            id: s("id"),
                            name: s("name"),
                            json: String::new(),
                        }
                    }
                    _ => BlockState::Other,
                };
                self.blocks.insert(index, state);
            }
            "content_block_delta" => {
                let d = event.get("delta").unwrap_or(&Value::Null);
                let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                match (self.blocks.get_mut(&index), d.get("type").and_then(Value::as_str)) {
                    (Some(BlockState::Text(t)), Some("text_delta")) => {
                        t.push_str(&s("text"));
                        out.push(StreamEvent::TextDelta { text: s("text") });
                    }
                    (Some(BlockState::Thinking { text, .. }), Some("thinking_delta")) => {
                        text.push_str(&s("thinking"));
                        out.push(StreamEvent::ReasoningDelta { text: s("thinking") });
                    }
                    (Some(BlockState::Thinking { signature, .. }), Some("signature_delta")) => {
                        signature
                            .get_or_insert_with(String::new)
                            .push_str(&s("signature"));
                    }
                    (Some(BlockState::Tool { ordinal, json, .. }), Some("input_json_delta")) => {
                        json.push_str(&s("partial_json"));
                        out.push(StreamEvent::ToolCallDelta {
                            index: *ordinal,
                            id: None,
                            name: None,
                            arguments: s("partial_json"),
                        });
                    }
                    (None, _) => {
                        return Err(ProviderError::InvalidResponse(format!(
                            "delta for content block {index} that never started"
                        )))
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(u) = event.get("usage") {
                    // Output is cumulative; input counts appear here only on some servers.
                    let u2 = usage(u);
                    self.usage.output = u2.output;
                    if count(u, "input_tokens").is_some() {
                        self.usage.input = u2.input;
                    }
                    if count(u, "cache_read_input_tokens").is_some() {
                        self.usage.cache_read = u2.cache_read;
                    }
                    if count(u, "cache_creation_input_tokens").is_some() {
                        self.usage.cache_write = u2.cache_write;
                    }
                    out.push(StreamEvent::Usage { usage: self.usage });
                }
                if let Some(r) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    let reason = finish_reason(r);
                    self.finish = Some(reason);
                    out.push(StreamEvent::Finish { reason });
                }
            }
            "message_stop" => self.stopped = true,
            "error" => return Err(crate::classify::classify_stream_error(event)),
            // ping, content_block_stop and future event types carry nothing to assemble.
            _ => {}
        }
        Ok(out)
    }

    /// The assembled reply; an error when the stream ended before `message_stop`.
    pub fn finish(self) -> Result<ChatResponse, ProviderError> {
        if !self.stopped {
            return Err(super::http::incomplete());
        }
        let mut parts = Vec::new();
        for (_, b) in self.blocks {
            match b {
                BlockState::Text(t) if !t.is_empty() => parts.push(Part::text(t)),
                BlockState::Thinking { text, signature } => parts.push(Part::Reasoning { text, signature }),
                BlockState::Tool { id, name, json, .. } => parts.push(Part::ToolCall {
                    call_id: id,
                    name,
                    arguments: super::openai_wire::arguments(&json),
                }),
                _ => {}
            }
        }
        let finish = self.finish.unwrap_or(FinishReason::Other);
        Ok(assemble(self.model, parts, finish, self.usage))
    }
}
