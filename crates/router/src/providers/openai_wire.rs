//! Mapping pith's normalised types to and from OpenAI Chat Completions JSON.
//!
//! Pure functions: the endpoint in [`super::openai`] does the I/O.

use std::collections::BTreeMap;

use pith_core::{FinishReason, Message, Part, Role, Usage};
use serde_json::{json, Map, Value};

use crate::error::ProviderError;
use crate::request::{ChatRequest, ChatResponse, StreamEvent};

/// Options of the request mapping that depend on the server.
#[derive(Debug, Clone, Copy, Default)]
pub struct WireOptions {
    /// Send developer messages with the `developer` role instead of `system`.
    pub developer_role: bool,
    /// Send the output limit as `max_completion_tokens` (OpenAI's current name) instead of
    /// `max_tokens` (what compatible servers accept).
    pub max_completion_tokens: bool,
}

fn image_url(media_type: &str, source: &str) -> String {
    if source.starts_with("http://") || source.starts_with("https://") || source.starts_with("data:") {
        source.to_string()
    } else {
        format!("data:{media_type};base64,{source}")
    }
}

/// The content of a user or system message: a plain string when it is text only, else parts.
fn content(parts: &[&Part]) -> Value {
    let text_only = parts.iter().all(|p| matches!(p, Part::Text { .. }));
    if text_only {
        let texts: Vec<&str> = parts.iter().filter_map(|p| p.as_text()).collect();
        return Value::String(texts.join("\n"));
    }
    let items: Vec<Value> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(json!({"type": "text", "text": text})),
            Part::Image { media_type, source } => {
                Some(json!({"type": "image_url", "image_url": {"url": image_url(media_type, source)}}))
            }
            Part::Document {
                media_type,
                source,
                title,
                ..
            } => Some(json!({"type": "file", "file": {
                "file_data": image_url(media_type, source),
                "filename": title.clone().unwrap_or_else(|| "document".into()),
            }})),
            _ => None,
        })
        .collect();
    Value::Array(items)
}

fn push_message(out: &mut Vec<Value>, message: &Message, options: WireOptions) {
    let role = match message.role {
        Role::System => "system",
        Role::Developer if options.developer_role => "developer",
        Role::Developer => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    // Tool results become one `role: tool` message each, wherever they were stored.
    for (call_id, text, _is_error) in message.tool_results() {
        out.push(json!({"role": "tool", "tool_call_id": call_id, "content": text}));
    }
    let parts: Vec<&Part> = message
        .parts
        .iter()
        .filter(|p| {
            !matches!(
                p,
                Part::ToolResult { .. } | Part::Reasoning { .. } | Part::ToolCall { .. }
            )
        })
        .collect();
    if message.role == Role::Assistant {
        let text: Vec<&str> = parts.iter().filter_map(|p| p.as_text()).collect();
        let calls: Vec<Value> = message
            .tool_calls()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function",
                       "function": {"name": name, "arguments": pith_core::tokens::arguments_text(args)}})
            })
            .collect();
        if text.is_empty() && calls.is_empty() {
            return;
        }
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        m.insert(
            "content".into(),
            if text.is_empty() {
                Value::Null
            } else {
                json!(text.join("\n"))
            },
        );
        if !calls.is_empty() {
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        out.push(Value::Object(m));
        return;
    }
    if role == "tool" || parts.is_empty() {
        return;
    }
    out.push(json!({"role": role, "content": content(&parts)}));
}

/// The JSON body of a Chat Completions request.
pub fn request_body(request: &ChatRequest, options: WireOptions) -> Value {
    let mut messages = Vec::new();
    for message in &request.messages {
        push_message(&mut messages, message, options);
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(n) = request.max_tokens {
        let key = if options.max_completion_tokens {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body.insert(key.into(), json!(n));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if !request.stop.is_empty() {
        body.insert("stop".into(), json!(request.stop));
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

/// Maps an OpenAI `finish_reason`.
pub fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Reads OpenAI usage (`prompt_tokens` includes `cached_tokens`).
pub fn usage(value: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cached = n(value.pointer("/prompt_tokens_details/cached_tokens"));
    Usage::from_openai(
        n(value.get("prompt_tokens")),
        n(value.get("completion_tokens")),
        cached,
    )
}

/// Tool arguments as JSON; text that is not JSON is kept as a string so nothing is lost.
pub fn arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
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

/// Parses a non-streamed Chat Completions reply.
pub fn parse_response(body: &Value) -> Result<ChatResponse, ProviderError> {
    if let Some(err) = body.get("error").filter(|e| !e.is_null()) {
        return Err(crate::classify::classify_stream_error(&json!({"error": err})));
    }
    let choice = body
        .pointer("/choices/0")
        .ok_or_else(|| ProviderError::InvalidResponse("reply has no choices".into()))?;
    let message = choice
        .get("message")
        .ok_or_else(|| ProviderError::InvalidResponse("choice has no message".into()))?;
    let mut parts = Vec::new();
    if let Some(r) = message
        .get("reasoning_content")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        parts.push(Part::Reasoning {
            text: r.to_string(),
            signature: None,
        });
    }
    if let Some(t) = message
        .get("content")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        parts.push(Part::text(t));
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = call.pointer("/function/name").and_then(Value::as_str);
        let (Some(id), Some(name)) = (call.get("id").and_then(Value::as_str), name) else {
            return Err(ProviderError::InvalidResponse(
                "tool call without id or name".into(),
            ));
        };
        let raw = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        parts.push(Part::ToolCall {
            call_id: id.to_string(),
            name: name.to_string(),
            arguments: arguments(raw),
        });
    }
    let finish = choice
        .get("finish_reason")
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

#[derive(Debug, Default)]
struct ToolCallState {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles a streamed reply from its chunks.
#[derive(Debug, Default)]
pub struct StreamState {
    model: String,
    text: String,
    reasoning: String,
    calls: BTreeMap<usize, ToolCallState>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
}

impl StreamState {
    /// Applies one chunk and returns the events it carries.
    pub fn apply(&mut self, chunk: &Value) -> Result<Vec<StreamEvent>, ProviderError> {
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(crate::classify::classify_stream_error(&json!({"error": err})));
        }
        let mut events = Vec::new();
        if let Some(m) = chunk.get("model").and_then(Value::as_str) {
            self.model = m.to_string();
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let u = usage(u);
            self.usage = Some(u);
            events.push(StreamEvent::Usage { usage: u });
        }
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            if let Some(r) = delta
                .get("reasoning_content")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                self.reasoning.push_str(r);
                events.push(StreamEvent::ReasoningDelta { text: r.to_string() });
            }
            if let Some(t) = delta
                .get("content")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                self.text.push_str(t);
                events.push(StreamEvent::TextDelta { text: t.to_string() });
            }
            for tc in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let index = tc.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                let state = self.calls.entry(index).or_default();
                let id = tc.get("id").and_then(Value::as_str).map(str::to_string);
                let name = tc
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let args = tc
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if let Some(id) = &id {
                    state.id.clone_from(id);
                }
                if let Some(name) = &name {
                    state.name.push_str(name);
                }
                state.arguments.push_str(args);
                events.push(StreamEvent::ToolCallDelta {
                    index,
                    id,
                    name,
                    arguments: args.to_string(),
                });
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                let reason = finish_reason(reason);
                self.finish = Some(reason);
                events.push(StreamEvent::Finish { reason });
            }
        }
        Ok(events)
    }

    /// The assembled reply; an error when the stream never said why it stopped.
    pub fn finish(self) -> Result<ChatResponse, ProviderError> {
        let finish = self.finish.ok_or_else(super::http::incomplete)?;
        let mut parts = Vec::new();
        if !self.reasoning.is_empty() {
            parts.push(Part::Reasoning {
                text: self.reasoning,
                signature: None,
            });
        }
        if !self.text.is_empty() {
            parts.push(Part::text(self.text));
        }
        for (_, call) in self.calls {
            if call.id.is_empty() || call.name.is_empty() {
                return Err(ProviderError::InvalidResponse(
                    "streamed tool call without id or name".into(),
                ));
            }
            parts.push(Part::ToolCall {
                call_id: call.id,
                name: call.name,
                arguments: arguments(&call.arguments),
            });
        }
        Ok(assemble(
            self.model,
            parts,
            finish,
            self.usage.unwrap_or_default(),
        ))
    }
}
