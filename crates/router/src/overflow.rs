//! Recognising context-overflow errors.
//!
//! Providers say "your request does not fit the context window" in many ways: error codes
//! (`context_length_exceeded`, llama.cpp's `exceed_context_size_error`), dozens of message texts,
//! an empty 400/413 body, or nothing at all (a reply that silently reports more input than the
//! window holds). This module turns those signals into one answer so that the runtime can compact
//! and retry instead of failing. Hosts with their own HTTP clients can call
//! [`is_context_overflow`] and [`parse_overflow_sizes`] directly.
//!
//! Rate-limit and throttling texts are rejected even when they also match an overflow pattern:
//! Bedrock's "Too many tokens, please wait before trying again" is throttling, and compacting a
//! session because of a tokens-per-minute limit would destroy context for nothing.

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};

use crate::error::ProviderError;
use crate::request::ChatResponse;

/// Message patterns of known providers that mean "the request exceeds the context window".
const OVERFLOW_PATTERNS: &[&str] = &[
    r"prompt is too long",                    // Anthropic
    r"input is too long for requested model", // Amazon Bedrock
    r"exceeds the context window",            // OpenAI
    r"exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))", // LiteLLM
    r"input token count.*exceeds the maximum", // Google Gemini
    r"maximum prompt length is \d+",          // xAI
    r"reduce the length of the messages",     // Groq
    r"maximum context length is [\d,]+",      // OpenAI, OpenRouter, vLLM
    r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?", // Poolside
    r"input \([\d,]+ tokens\) is longer than the model'?s context length", // Together AI
    r"exceeds the limit of [\d,]+",           // GitHub Copilot
    r"exceeds the available context size",    // llama.cpp server
    r"exceed_context_size_error",             // llama.cpp error type
    r"greater than the context length",       // LM Studio
    r"context window exceeds limit",          // MiniMax
    r"exceeded model token limit",            // Kimi
    r"too large for model with [\d,]+ maximum context length", // Mistral
    r"model_context_window_exceeded",         // z.ai
    r"prompt too long; exceeded (?:max )?context length", // Ollama
    r"maximum model length is [\d,]+",        // vLLM
    r"longer than the maximum model length",  // vLLM
    r"requested [\d,]+ output tokens",        // vLLM
    r"prompt contains.*[\d,]+ input tokens",  // vLLM
    r"context[_ ]length[_ ]exceeded",         // generic, OpenAI code
    r"too many tokens",                       // generic
    r"token limit exceeded",                  // generic
    r"^\s*4(?:00|13)\s*(?:status code)?\s*\(no body\)", // Cerebras
];

/// Texts that mean rate limiting or throttling; they are never an overflow.
const NON_OVERFLOW_PATTERNS: &[&str] = &[
    r"^\s*(?:throttling error|service unavailable):",
    r"rate[_ ]?limit",
    r"too many requests",
    r"tokens per minute",
    r"requests per minute",
    r"\btpm\b",
    r"\brpm\b",
    r"throttl",
    r"please wait before trying again",
    r"quota",
];

fn compile(patterns: &[&str]) -> Vec<Regex> {
    // The patterns are constants covered by a unit test; a pattern that failed to compile would
    // only weaken recognition, never panic a host.
    patterns
        .iter()
        .filter_map(|p| RegexBuilder::new(p).case_insensitive(true).build().ok())
        .collect()
}

static OVERFLOW: LazyLock<Vec<Regex>> = LazyLock::new(|| compile(OVERFLOW_PATTERNS));
static NON_OVERFLOW: LazyLock<Vec<Regex>> = LazyLock::new(|| compile(NON_OVERFLOW_PATTERNS));

/// Whether `message` (with the HTTP `status`, when known) says the request exceeds the model's
/// context window.
///
/// A 429 is never an overflow, nor is any text that speaks of rate limits or throttling. A 400 or
/// 413 whose whole message is the status with "(no body)" counts as an overflow (Cerebras).
pub fn is_context_overflow(status: Option<u16>, message: &str) -> bool {
    if status == Some(429) || is_rate_limit_message(message) {
        return false;
    }
    OVERFLOW.iter().any(|re| re.is_match(message))
}

/// Whether `message` speaks of rate limits, quotas or throttling.
pub fn is_rate_limit_message(message: &str) -> bool {
    NON_OVERFLOW.iter().any(|re| re.is_match(message))
}

/// The sizes an overflow message states.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OverflowSizes {
    /// The model's context window, in tokens.
    pub limit: Option<u64>,
    /// The size of the rejected request, in tokens.
    pub requested: Option<u64>,
}

/// How to read sizes from one message shape: the regex and which capture group holds the limit
/// and which the request size.
struct SizePattern {
    re: Regex,
    limit: Option<usize>,
    requested: Option<usize>,
}

const SIZE_PATTERNS: &[(&str, Option<usize>, Option<usize>)] = &[
    // llama.cpp: "request (6425 tokens) exceeds the available context size (1024 tokens)"
    (
        r"request \(([\d,]+) tokens\) exceeds the available context size \(([\d,]+) tokens\)",
        Some(2),
        Some(1),
    ),
    // Gemini: "input token count (N) exceeds the maximum number of tokens allowed (M)"
    (
        r"input token count \(([\d,]+)\) exceeds the maximum number of tokens allowed \(([\d,]+)\)",
        Some(2),
        Some(1),
    ),
    // xAI: "maximum prompt length is N but the request contains M tokens"
    (
        r"maximum prompt length is ([\d,]+) but the request contains ([\d,]+) tokens",
        Some(1),
        Some(2),
    ),
    // Copilot: "prompt token count of N exceeds the limit of M"
    (
        r"prompt token count of ([\d,]+) exceeds the limit of ([\d,]+)",
        Some(2),
        Some(1),
    ),
    // Mistral: "Prompt contains N tokens ... too large for model with M maximum context length"
    (
        r"prompt contains ([\d,]+) tokens.*too large for model with ([\d,]+) maximum context length",
        Some(2),
        Some(1),
    ),
    // Together: "The input (N tokens) is longer than the model's context length (M tokens)"
    (
        r"input \(([\d,]+) tokens\) is longer than the model'?s context length \(([\d,]+) tokens\)",
        Some(2),
        Some(1),
    ),
    // Poolside: "Input length N exceeds the maximum allowed input length of M tokens"
    (
        r"input length ([\d,]+) exceeds (?:the )?maximum allowed input length of ([\d,]+)",
        Some(2),
        Some(1),
    ),
    // LiteLLM: "Input length (N) exceeds model's maximum context length (M)"
    (
        r"input length \(([\d,]+)\) exceeds (?:the )?(?:model'?s )?maximum context length \(([\d,]+)\)",
        Some(2),
        Some(1),
    ),
    // Kimi: "exceeded model token limit: N (requested: M)"
    (
        r"exceeded model token limit: ([\d,]+) \(requested: ([\d,]+)\)",
        Some(1),
        Some(2),
    ),
    // Anthropic: "prompt is too long: 213462 tokens > 200000 maximum", and generic "N tokens > M"
    (r"([\d,]+) tokens > ([\d,]+)", Some(2), Some(1)),
    // OpenAI / OpenRouter / vLLM: "maximum context length is N tokens"
    (r"maximum context length is ([\d,]+)", Some(1), None),
    (r"maximum context length of ([\d,]+)", Some(1), None),
    // vLLM: "maximum model length is N" / "longer than the maximum model length of N"
    (r"maximum model length (?:is|of) ([\d,]+)", Some(1), None),
    // vLLM: "for a total of at least N tokens"; OpenAI: "resulted in N tokens", "requested about N tokens"
    (r"for a total of (?:at least )?([\d,]+) tokens", None, Some(1)),
    (r"resulted in ([\d,]+) tokens", None, Some(1)),
    (r"requested (?:about )?([\d,]+) tokens", None, Some(1)),
    // llama.cpp JSON fields quoted into text
    (r#"n_ctx"?\s*[:=]\s*([\d,]+)"#, Some(1), None),
    (r#"n_prompt_tokens"?\s*[:=]\s*([\d,]+)"#, None, Some(1)),
];

static SIZES: LazyLock<Vec<SizePattern>> = LazyLock::new(|| {
    SIZE_PATTERNS
        .iter()
        .filter_map(|(p, limit, requested)| {
            let re = RegexBuilder::new(p).case_insensitive(true).build().ok()?;
            Some(SizePattern {
                re,
                limit: *limit,
                requested: *requested,
            })
        })
        .collect()
});

fn number(text: &str) -> Option<u64> {
    text.replace(',', "").parse().ok()
}

/// Extracts the window and the request size an overflow message states, when it states them.
pub fn parse_overflow_sizes(message: &str) -> OverflowSizes {
    let mut sizes = OverflowSizes::default();
    for pattern in SIZES.iter() {
        if sizes.limit.is_some() && sizes.requested.is_some() {
            break;
        }
        let Some(caps) = pattern.re.captures(message) else {
            continue;
        };
        let group = |i: Option<usize>| i.and_then(|i| caps.get(i)).and_then(|m| number(m.as_str()));
        if sizes.limit.is_none() {
            sizes.limit = group(pattern.limit);
        }
        if sizes.requested.is_none() {
            sizes.requested = group(pattern.requested);
        }
    }
    sizes
}

/// Builds a [`ProviderError::ContextOverflow`] from a provider message, with the sizes it states.
pub fn overflow_error(message: impl Into<String>) -> ProviderError {
    let message = message.into();
    let sizes = parse_overflow_sizes(&message);
    ProviderError::ContextOverflow {
        message,
        limit: sizes.limit,
        requested: sizes.requested,
    }
}

/// Checks a successful reply for the structured overflow signals of providers that do not fail:
/// reported input above the window (silent overflow, e.g. z.ai), or a reply stopped for length
/// with no output after the input filled at least 99% of the window (the server truncated the
/// prompt to fit). `window` is the catalogue's window for the model; 0 disables the check.
pub fn response_overflow(response: &ChatResponse, window: u64) -> Option<ProviderError> {
    if window == 0 {
        return None;
    }
    let input = response.usage.prompt_tokens();
    if input > window {
        return Some(ProviderError::ContextOverflow {
            message: format!(
                "reported input of {input} tokens exceeds the context window of {window} tokens"
            ),
            limit: None,
            requested: Some(input),
        });
    }
    let filled = input.saturating_mul(100) >= window.saturating_mul(99);
    if response.finish == pith_core::FinishReason::Length && response.usage.output == 0 && filled {
        return Some(ProviderError::ContextOverflow {
            message: format!(
                "reply stopped for length with no output after {input} input tokens filled the window of {window}"
            ),
            limit: None,
            requested: Some(input),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(OVERFLOW.len(), OVERFLOW_PATTERNS.len());
        assert_eq!(NON_OVERFLOW.len(), NON_OVERFLOW_PATTERNS.len());
        assert_eq!(SIZES.len(), SIZE_PATTERNS.len());
    }

    #[test]
    fn sizes_of_llama_cpp_and_anthropic() {
        let s = parse_overflow_sizes(
            "request (6425 tokens) exceeds the available context size (1024 tokens), try increasing it",
        );
        assert_eq!(s.limit, Some(1024));
        assert_eq!(s.requested, Some(6425));
        let s = parse_overflow_sizes("prompt is too long: 213,462 tokens > 200,000 maximum");
        assert_eq!(s.limit, Some(200_000));
        assert_eq!(s.requested, Some(213_462));
    }

    #[test]
    fn a_429_is_never_an_overflow() {
        assert!(!is_context_overflow(Some(429), "prompt is too long"));
        assert!(is_context_overflow(Some(400), "prompt is too long"));
    }
}
