//! wiremock builders for the two wire protocols, and a checker for captured requests.
//!
//! Responses:
//! - OpenAI Chat Completions: [`openai_completion`], [`openai_tool_completion`] (JSON) and
//!   [`OpenAiStream`] (an SSE body built chunk by chunk: text deltas, tool-call argument deltas,
//!   finish, the usage chunk, `[DONE]`).
//! - Anthropic Messages: [`anthropic_message`] (JSON) and [`AnthropicStream`] (an SSE body of
//!   `message_start`, content blocks with `text_delta` / `input_json_delta` / `thinking_delta`,
//!   `message_delta` with usage, `message_stop`, or an `error` event).
//! - Overflow error bodies as the servers send them: [`openai_overflow_body`] (400,
//!   `context_length_exceeded`), [`anthropic_overflow_body`] (400, "prompt is too long"),
//!   [`llama_overflow_body`] (400, `exceed_context_size_error` with `n_ctx`).
//! - [`json_response`] and [`sse_response`] wrap bodies in a `ResponseTemplate`.
//!
//! Requests: [`check_openai_request`] asserts the invariants every request pith sends must hold
//! (tool calls and results paired, instructions first, the estimate within the window);
//! [`assert_instructions`] checks the instructions are exactly the expected texts.
//! [`openai_requests`] collects the JSON bodies a `MockServer` received.

use serde_json::{json, Value};
use wiremock::ResponseTemplate;

/// A JSON response with `status`.
pub fn json_response(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(body)
}

/// A 200 `text/event-stream` response holding `body`.
pub fn sse_response(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_raw(body.into_bytes(), "text/event-stream")
}

fn openai_usage(prompt: u64, completion: u64, cached: u64) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached}
    })
}

/// A non-streamed Chat Completions reply with `text`, finish reason `stop` and the given usage
/// (`prompt` includes `cached`, as OpenAI reports it).
pub fn openai_completion(text: &str, prompt: u64, completion: u64, cached: u64) -> Value {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": openai_usage(prompt, completion, cached)
    })
}

/// A non-streamed reply that calls tools: `calls` are (id, name, JSON arguments text).
pub fn openai_tool_completion(calls: &[(&str, &str, &str)], prompt: u64, completion: u64) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function",
                                        "function": {"name": name, "arguments": args}})
        })
        .collect();
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
        "usage": openai_usage(prompt, completion, 0)
    })
}

/// Builds an OpenAI SSE body chunk by chunk.
#[derive(Debug, Default, Clone)]
pub struct OpenAiStream {
    events: Vec<String>,
}

impl OpenAiStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn chunk(mut self, choices: Value, usage: Option<Value>) -> Self {
        let mut c = json!({"id": "chatcmpl-test", "object": "chat.completion.chunk",
                           "model": "gpt-test", "choices": choices});
        if let Some(u) = usage {
            c["usage"] = u;
        }
        self.events.push(format!("data: {c}\n\n"));
        self
    }

    /// A text delta.
    pub fn text(self, piece: &str) -> Self {
        self.chunk(
            json!([{"index": 0, "delta": {"content": piece}, "finish_reason": null}]),
            None,
        )
    }

    /// The first delta of tool call `index`: its id and name, with no arguments yet.
    pub fn tool_call(self, index: usize, id: &str, name: &str) -> Self {
        self.chunk(
            json!([{"index": 0, "delta": {"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}, "finish_reason": null}]),
            None,
        )
    }

    /// A fragment of tool call `index`'s arguments.
    pub fn tool_args(self, index: usize, piece: &str) -> Self {
        self.chunk(
            json!([{"index": 0, "delta": {"tool_calls": [{"index": index,
                "function": {"arguments": piece}}]}, "finish_reason": null}]),
            None,
        )
    }

    /// The chunk that carries the finish reason (`stop`, `length`, `tool_calls`).
    pub fn finish(self, reason: &str) -> Self {
        self.chunk(json!([{"index": 0, "delta": {}, "finish_reason": reason}]), None)
    }

    /// The final usage chunk (empty `choices`), sent with `stream_options.include_usage`.
    pub fn usage(self, prompt: u64, completion: u64, cached: u64) -> Self {
        self.chunk(json!([]), Some(openai_usage(prompt, completion, cached)))
    }

    /// A raw `data:` line, e.g. malformed JSON.
    pub fn raw(mut self, data: &str) -> Self {
        self.events.push(format!("data: {data}\n\n"));
        self
    }

    /// The `[DONE]` sentinel.
    pub fn done(self) -> Self {
        self.raw("[DONE]")
    }

    /// The SSE body.
    pub fn body(&self) -> String {
        self.events.concat()
    }

    /// The body as a 200 `text/event-stream` response.
    pub fn response(&self) -> ResponseTemplate {
        sse_response(self.body())
    }
}

/// A non-streamed Messages reply with `text`, stop reason `end_turn` and usage (Anthropic's
/// `input` excludes the cache counts).
pub fn anthropic_message(text: &str, input: u64, output: u64, cache_read: u64, cache_write: u64) -> Value {
    json!({
        "id": "msg_test", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": input, "output_tokens": output,
                  "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_write}
    })
}

/// Builds an Anthropic SSE body event by event; content block indexes are assigned in order.
#[derive(Debug, Default, Clone)]
pub struct AnthropicStream {
    events: Vec<String>,
    next_block: usize,
}

impl AnthropicStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one event of `kind` with `data`.
    pub fn event(mut self, kind: &str, data: Value) -> Self {
        self.events.push(format!("event: {kind}\ndata: {data}\n\n"));
        self
    }

    /// `message_start` with the input-side usage.
    pub fn message_start(self, input: u64, cache_read: u64, cache_write: u64) -> Self {
        self.event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_test", "type": "message",
                "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
                "usage": {"input_tokens": input, "output_tokens": 1,
                          "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_write}}}),
        )
    }

    fn block(mut self, start: Value, deltas: Vec<Value>) -> Self {
        let index = self.next_block;
        self.next_block += 1;
        self = self.event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        for d in deltas {
            self = self.event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": d}),
            );
        }
        self.event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        )
    }

    /// A text block streamed in `pieces`.
    pub fn text_block(self, pieces: &[&str]) -> Self {
        let deltas = pieces
            .iter()
            .map(|p| json!({"type": "text_delta", "text": p}))
            .collect();
        self.block(json!({"type": "text", "text": ""}), deltas)
    }

    /// A thinking block streamed in `pieces`, then its signature.
    pub fn thinking_block(self, pieces: &[&str], signature: &str) -> Self {
        let mut deltas: Vec<Value> = pieces
            .iter()
            .map(|p| json!({"type": "thinking_delta", "thinking": p}))
            .collect();
        deltas.push(json!({"type": "signature_delta", "signature": signature}));
        self.block(json!({"type": "thinking", "thinking": ""}), deltas)
    }

    /// A tool_use block whose input JSON arrives in `json_pieces`.
    pub fn tool_use_block(self, id: &str, name: &str, json_pieces: &[&str]) -> Self {
        let deltas = json_pieces
            .iter()
            .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
            .collect();
        self.block(
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            deltas,
        )
    }

    /// `message_delta` with the stop reason and the cumulative output tokens.
    pub fn message_delta(self, stop_reason: &str, output: u64) -> Self {
        self.event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": {"output_tokens": output}}),
        )
    }

    /// `message_stop`.
    pub fn message_stop(self) -> Self {
        self.event("message_stop", json!({"type": "message_stop"}))
    }

    /// An `error` event (e.g. `overloaded_error`).
    pub fn error(self, kind: &str, message: &str) -> Self {
        self.event(
            "error",
            json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    /// A `ping` event.
    pub fn ping(self) -> Self {
        self.event("ping", json!({"type": "ping"}))
    }

    /// The SSE body.
    pub fn body(&self) -> String {
        self.events.concat()
    }

    /// The body as a 200 `text/event-stream` response.
    pub fn response(&self) -> ResponseTemplate {
        sse_response(self.body())
    }
}

/// OpenAI's 400 body for a request over the window.
pub fn openai_overflow_body(limit: u64, requested: u64) -> Value {
    json!({"error": {
        "message": format!("This model's maximum context length is {limit} tokens. However, your messages resulted in {requested} tokens. Please reduce the length of the messages."),
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
}

/// Anthropic's 400 body for a request over the window.
pub fn anthropic_overflow_body(requested: u64, limit: u64) -> Value {
    json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": format!("prompt is too long: {requested} tokens > {limit} maximum")}})
}

/// llama.cpp server's 400 body for a prompt over the slot's context.
pub fn llama_overflow_body(n_prompt_tokens: u64, n_ctx: u64) -> Value {
    json!({"error": {"code": 400,
        "message": format!("request ({n_prompt_tokens} tokens) exceeds the available context size ({n_ctx} tokens), try increasing it"),
        "type": "exceed_context_size_error", "n_prompt_tokens": n_prompt_tokens, "n_ctx": n_ctx}})
}

/// The JSON bodies of every request `server` received, in order.
pub async fn openai_requests(server: &wiremock::MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("request body is JSON"))
        .collect()
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Asserts the invariants of an OpenAI Chat Completions request body and returns its size
/// estimate in tokens (UTF-8 bytes / 4, rounded up, of message texts, tool-call names and
/// arguments, and tool schemas):
///
/// - every `role: tool` message answers a call of an earlier assistant message that is still
///   unanswered, and every call is answered before the next user or assistant message;
/// - system/developer messages come first, before any other role, with non-empty text;
/// - the estimate is at most `window_tokens`.
///
/// # Panics
/// When an invariant does not hold, with the offending message index.
pub fn check_openai_request(body: &Value, window_tokens: u64) -> u64 {
    let messages = body["messages"].as_array().expect("request has a messages array");
    assert!(!messages.is_empty(), "request has no messages");
    let mut bytes: u64 = 0;
    let mut open: Vec<String> = Vec::new();
    let mut instructions_done = false;
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"]
            .as_str()
            .unwrap_or_else(|| panic!("message {i} has no role"));
        let text = text_of(&m["content"]);
        bytes += text.len() as u64;
        match role {
            "system" | "developer" => {
                assert!(
                    !instructions_done,
                    "instruction message {i} comes after conversation messages"
                );
                assert!(!text.is_empty(), "instruction message {i} is empty");
            }
            "tool" => {
                instructions_done = true;
                let id = m["tool_call_id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("tool message {i} has no tool_call_id"));
                let pos = open
                    .iter()
                    .position(|c| c == id)
                    .unwrap_or_else(|| panic!("tool message {i} answers {id:?}, which no open call has"));
                open.remove(pos);
            }
            "user" | "assistant" => {
                instructions_done = true;
                assert!(
                    open.is_empty(),
                    "message {i} ({role}) comes before tool calls {open:?} were answered"
                );
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    let id = call["id"]
                        .as_str()
                        .unwrap_or_else(|| panic!("tool call in message {i} has no id"));
                    let name = call["function"]["name"].as_str().unwrap_or("");
                    let args = call["function"]["arguments"].as_str().unwrap_or("");
                    bytes += (name.len() + args.len()) as u64;
                    open.push(id.to_string());
                }
            }
            other => panic!("message {i} has unknown role {other:?}"),
        }
    }
    assert!(
        open.is_empty(),
        "tool calls {open:?} at the end of the request have no results"
    );
    for tool in body["tools"].as_array().into_iter().flatten() {
        bytes += tool["function"].to_string().len() as u64;
    }
    let estimate = bytes.div_ceil(4);
    assert!(
        estimate <= window_tokens,
        "request estimate of {estimate} tokens exceeds the declared window of {window_tokens}"
    );
    estimate
}

/// Asserts that the request's leading system/developer messages are exactly `expected`, in
/// order and verbatim.
///
/// # Panics
/// When they differ.
pub fn assert_instructions(body: &Value, expected: &[&str]) {
    let messages = body["messages"].as_array().expect("request has a messages array");
    let got: Vec<String> = messages
        .iter()
        .take_while(|m| matches!(m["role"].as_str(), Some("system") | Some("developer")))
        .map(|m| text_of(&m["content"]))
        .collect();
    assert_eq!(got, expected, "instructions differ from the expected ones");
}
