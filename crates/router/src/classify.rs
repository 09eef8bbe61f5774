//! Turning HTTP error replies into typed [`ProviderError`]s.
//!
//! Both wire protocols report errors as a status code plus a JSON body (OpenAI:
//! `{"error":{"message","type","code"}}`, Anthropic: `{"type":"error","error":{"type","message"}}`,
//! llama.cpp: OpenAI's shape plus `n_prompt_tokens` and `n_ctx`). The classification order is:
//! overflow (error code, error type or message pattern) first, then rate limits, credentials,
//! payload size, other client errors and server errors.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::ProviderError;
use crate::overflow::{is_context_overflow, parse_overflow_sizes};

/// Longest provider message kept in an error; bodies can be whole HTML pages.
const MAX_MESSAGE_CHARS: usize = 2_000;

/// The fields of a provider error body that matter for classification.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorBody {
    /// The human-readable message (the raw body when it is not JSON).
    pub message: String,
    /// The error type (`invalid_request_error`, `exceed_context_size_error`, ...).
    pub kind: Option<String>,
    /// The error code (`context_length_exceeded`, ...).
    pub code: Option<String>,
    /// llama.cpp's `n_ctx`: the context size of the slot.
    pub n_ctx: Option<u64>,
    /// llama.cpp's `n_prompt_tokens`: the size of the rejected prompt.
    pub n_prompt_tokens: Option<u64>,
}

fn as_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl ErrorBody {
    /// Parses an error body of either protocol; a non-JSON body becomes the message as is.
    /// An empty body becomes "`<status>` status code (no body)".
    pub fn parse(status: u16, body: &str) -> Self {
        let trimmed = body.trim();
        if trimmed.is_empty() {
            return Self {
                message: format!("{status} status code (no body)"),
                ..Self::default()
            };
        }
        let Ok(json) = serde_json::from_str::<Value>(trimmed) else {
            return Self {
                message: clip(trimmed),
                ..Self::default()
            };
        };
        // OpenAI and Anthropic nest the details under "error"; some gateways do not.
        let err = match json.get("error") {
            Some(e @ Value::Object(_)) => e,
            _ => &json,
        };
        let message = as_text(err.get("message"))
            .or_else(|| as_text(json.get("message")))
            .or_else(|| as_text(json.get("error")))
            .unwrap_or_else(|| trimmed.to_string());
        Self {
            message: clip(&message),
            kind: as_text(err.get("type")),
            code: as_text(err.get("code")),
            n_ctx: err.get("n_ctx").and_then(Value::as_u64),
            n_prompt_tokens: err.get("n_prompt_tokens").and_then(Value::as_u64),
        }
    }

    /// Whether the structured fields or the message say "context overflow".
    pub fn is_overflow(&self, status: Option<u16>) -> bool {
        let coded = [self.code.as_deref(), self.kind.as_deref()]
            .into_iter()
            .flatten()
            .any(|c| c == "context_length_exceeded" || c == "exceed_context_size_error");
        (coded && status != Some(429)) || is_context_overflow(status, &self.message)
    }

    /// The overflow error this body describes, with the stated sizes.
    pub fn overflow_error(&self) -> ProviderError {
        let sizes = parse_overflow_sizes(&self.message);
        ProviderError::ContextOverflow {
            message: self.message.clone(),
            limit: self.n_ctx.or(sizes.limit),
            requested: self.n_prompt_tokens.or(sizes.requested),
        }
    }
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Classifies an HTTP error reply. `retry_after` is the wait the response headers asked for.
pub fn classify_http(status: u16, body: &str, retry_after: Option<Duration>) -> ProviderError {
    let parsed = ErrorBody::parse(status, body);
    if parsed.is_overflow(Some(status)) {
        return parsed.overflow_error();
    }
    let message = parsed.message;
    match status {
        429 => ProviderError::RateLimited { message, retry_after },
        401 | 403 => ProviderError::Auth { status, message },
        413 => ProviderError::PayloadTooLarge { message },
        // Anthropic's 529 "overloaded" and every 5xx are server-side.
        500..=599 => ProviderError::Server { status, message },
        _ => ProviderError::InvalidRequest { status, message },
    }
}

/// Classifies an error event inside a stream (an Anthropic `error` event or an OpenAI chunk
/// holding `error`), where no HTTP status is left to go by.
pub fn classify_stream_error(payload: &Value) -> ProviderError {
    let text = payload.to_string();
    let parsed = ErrorBody::parse(200, &text);
    if parsed.is_overflow(None) {
        return parsed.overflow_error();
    }
    let message = parsed.message;
    match parsed.kind.as_deref() {
        Some("rate_limit_error") => ProviderError::RateLimited {
            message,
            retry_after: None,
        },
        Some("overloaded_error") => ProviderError::Server { status: 529, message },
        Some("authentication_error") | Some("permission_error") => {
            ProviderError::Auth { status: 401, message }
        }
        Some("invalid_request_error") => ProviderError::InvalidRequest { status: 400, message },
        _ => ProviderError::Server { status: 500, message },
    }
}

/// Parses a `Retry-After` value: delay seconds or an HTTP date (relative to `now`).
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = DateTime::parse_from_rfc2822(value).ok()?.with_timezone(&Utc);
    Some((when - now).to_std().unwrap_or(Duration::ZERO))
}

/// The wait asked for by the headers: `retry-after-ms` (OpenAI) or `retry-after`.
pub fn retry_after_from_headers(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    get("retry-after").and_then(|v| parse_retry_after(v, Utc::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpp_overflow_carries_n_ctx() {
        let body = r#"{"error":{"code":400,"message":"request (6425 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":6425,"n_ctx":1024}}"#;
        match classify_http(400, body, None) {
            ProviderError::ContextOverflow { limit, requested, .. } => {
                assert_eq!(limit, Some(1024));
                assert_eq!(requested, Some(6425));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn status_mapping() {
        assert!(matches!(
            classify_http(413, "too big", None),
            ProviderError::PayloadTooLarge { .. }
        ));
        assert!(classify_http(413, "", None).is_context_overflow());
        assert!(classify_http(400, "", None).is_context_overflow());
        assert!(matches!(
            classify_http(401, "{}", None),
            ProviderError::Auth { .. }
        ));
        assert!(matches!(
            classify_http(529, "{}", None),
            ProviderError::Server { status: 529, .. }
        ));
        assert!(classify_http(408, "x", None).is_retryable());
        assert!(!classify_http(422, "x", None).is_retryable());
        let rl = classify_http(
            429,
            r#"{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached for tokens per minute"}}"#,
            Some(Duration::from_secs(3)),
        );
        assert!(
            matches!(rl, ProviderError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(3))
        );
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = DateTime::parse_from_rfc2822("Wed, 21 Oct 2015 07:28:00 GMT")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
