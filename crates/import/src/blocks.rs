//! Conversions shared by the formats: Anthropic-style content blocks, finish reasons, usage.

use pith_core::{FinishReason, Part, Usage};
use serde_json::Value;

use crate::read::{str_of, take_str, u64_of};

/// Converts an image block (`{source: {type: base64, media_type, data}}` or `{source: {url}}`,
/// or pi's `{mimeType, data}`) to a part.
pub(crate) fn image(mut block: Value) -> Option<Part> {
    if let Some(mut source) = block.get_mut("source").map(Value::take) {
        let media_type = str_of(&source, "media_type").unwrap_or("image/png").to_string();
        let data = take_str(&mut source, "data").or_else(|| take_str(&mut source, "url"))?;
        return Some(Part::Image {
            media_type,
            source: data,
        });
    }
    let media_type = str_of(&block, "mimeType").unwrap_or("image/png").to_string();
    let data = take_str(&mut block, "data")?;
    Some(Part::Image {
        media_type,
        source: data,
    })
}

/// The text of a tool-result body that is a string or a list of blocks, with its image blocks
/// as separate parts. Text blocks are joined by newlines.
pub(crate) fn result_body(content: Value) -> (String, Vec<Part>) {
    match content {
        Value::String(s) => (s, Vec::new()),
        Value::Array(blocks) => {
            let mut text = String::new();
            let mut extra = Vec::new();
            for mut block in blocks {
                match str_of(&block, "type") {
                    Some("text") => {
                        if let Some(t) = take_str(&mut block, "text") {
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(&t);
                        }
                    }
                    Some("image") => extra.extend(image(block)),
                    _ => {}
                }
            }
            (text, extra)
        }
        Value::Null => (String::new(), Vec::new()),
        other => (other.to_string(), Vec::new()),
    }
}

/// Maps an Anthropic or pi stop reason to a finish reason.
pub(crate) fn finish(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop" | "stop_sequence" => FinishReason::Stop,
        "tool_use" | "toolUse" | "tool_calls" => FinishReason::ToolCalls,
        "max_tokens" | "length" => FinishReason::Length,
        "refusal" | "content_filter" => FinishReason::ContentFilter,
        "aborted" | "cancelled" => FinishReason::Cancelled,
        "error" => FinishReason::Error,
        _ => FinishReason::Other,
    }
}

/// Anthropic usage (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
/// `cache_creation_input_tokens`).
pub(crate) fn anthropic_usage(usage: &Value) -> Option<Usage> {
    if !usage.is_object() {
        return None;
    }
    Some(Usage::from_anthropic(
        u64_of(usage, "input_tokens").unwrap_or(0),
        u64_of(usage, "output_tokens").unwrap_or(0),
        u64_of(usage, "cache_read_input_tokens").unwrap_or(0),
        u64_of(usage, "cache_creation_input_tokens").unwrap_or(0),
    ))
}

/// OpenAI usage (`prompt_tokens` including `prompt_tokens_details.cached_tokens`).
pub(crate) fn openai_usage(usage: &Value) -> Option<Usage> {
    let prompt = u64_of(usage, "prompt_tokens")?;
    let completion = u64_of(usage, "completion_tokens").unwrap_or(0);
    let cached = usage
        .get("prompt_tokens_details")
        .and_then(|d| u64_of(d, "cached_tokens"))
        .unwrap_or(0);
    Some(Usage::from_openai(prompt, completion, cached))
}

/// Text or a list of `{type: text, text}` blocks as one string (chat-completions content).
pub(crate) fn chat_text(content: Value) -> String {
    result_body(content).0
}
