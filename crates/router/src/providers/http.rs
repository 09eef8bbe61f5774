//! The HTTP plumbing both wire protocols share: client, headers, error replies and SSE.

use std::time::Duration;

use eventsource_stream::{Event, Eventsource};
use futures::{Stream, TryStreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use serde_json::Value;

use crate::classify::{classify_http, retry_after_from_headers};
use crate::error::ProviderError;
use crate::stack::ProviderCall;

/// A stream ended before the reply finished: the connection closed mid-reply.
#[derive(Debug, thiserror::Error)]
#[error("stream ended before the reply finished")]
pub struct IncompleteStream;

/// An SSE stream could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("malformed event stream: {0}")]
pub struct MalformedStream(String);

/// A configured HTTP endpoint: base URL, fixed headers (credentials marked sensitive).
#[derive(Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    base_url: String,
    headers: HeaderMap,
    log_content: bool,
}

impl HttpClient {
    /// Builds a client for `base_url` with `headers` (values of `sensitive` headers are hidden
    /// from reqwest's `Debug`).
    pub(crate) fn new(
        base_url: &str,
        headers: Vec<(String, String, bool)>,
        log_content: bool,
    ) -> Result<Self, ProviderError> {
        let parsed = reqwest::Url::parse(base_url)
            .map_err(|e| ProviderError::InvalidConfig(format!("base URL {base_url:?} is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ProviderError::InvalidConfig(format!(
                "base URL {base_url:?} must start with http:// or https://"
            )));
        }
        let mut map = HeaderMap::new();
        for (name, value, sensitive) in headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ProviderError::InvalidConfig(format!("invalid header name {name:?}")))?;
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                // Never echo the value: it may be a key.
                ProviderError::InvalidConfig(format!("invalid characters in the value of header {name:?}"))
            })?;
            value.set_sensitive(sensitive);
            map.insert(header, value);
        }
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| ProviderError::InvalidConfig(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            base_url: base_url.trim_end_matches('/').to_string(),
            headers: map,
            log_content,
        })
    }

    /// POSTs `body` to `path`; a non-success status becomes a classified error.
    ///
    /// The body is serialised before the request is sent and its value dropped: a request's JSON
    /// tree takes several times the memory of its text, and the call can wait on the provider for
    /// seconds, so with many calls in flight only the text is held.
    pub(crate) async fn post(
        &self,
        path: &str,
        body: Value,
        call: &ProviderCall,
    ) -> Result<reqwest::Response, ProviderError> {
        if self.log_content {
            tracing::trace!(body = %body, "model request body");
        }
        // A JSON value always serialises; were it not to, the request never left.
        let bytes = serde_json::to_vec(&body).map_err(|e| ProviderError::Transport(Box::new(e)))?;
        drop(body);
        let response = self
            .client
            .post(format!("{}{}", self.base_url, path))
            .headers(self.headers.clone())
            .body(bytes)
            .send()
            .await
            .map_err(transport)?;
        call.touch();
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after_from_headers(response.headers());
        let text = response.text().await.unwrap_or_default();
        let text = redact_secrets(&text, &self.headers);
        Err(classify_http(status.as_u16(), &text, retry_after))
    }
}

/// Removes the values of sensitive headers (API keys) from an error body: some servers echo
/// the key they rejected, and the body becomes part of an error message that may be logged.
fn redact_secrets(text: &str, headers: &HeaderMap) -> String {
    let mut out = text.to_string();
    for value in headers.values().filter(|v| v.is_sensitive()) {
        if let Ok(v) = value.to_str() {
            let secret = v.strip_prefix("Bearer ").unwrap_or(v).trim();
            if secret.len() >= 8 {
                out = out.replace(secret, "[redacted]");
            }
        }
    }
    out
}

/// A transport failure, with the URL stripped (it is not secret, but errors stay small).
pub(crate) fn transport(error: reqwest::Error) -> ProviderError {
    ProviderError::Transport(Box::new(error.without_url()))
}

/// Reads a whole JSON body.
pub(crate) async fn json_body(response: reqwest::Response) -> Result<Value, ProviderError> {
    let bytes = response.bytes().await.map_err(transport)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        let head: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
        ProviderError::InvalidResponse(format!("reply is not JSON ({e}): {head}"))
    })
}

/// The server-sent events of a streamed reply; every received chunk resets the idle timeout.
pub(crate) fn sse(
    response: reqwest::Response,
    call: &ProviderCall,
) -> impl Stream<Item = Result<Event, ProviderError>> + Send + Unpin {
    let call = call.clone();
    response
        .bytes_stream()
        .inspect_ok(move |_| call.touch())
        .eventsource()
        .map_err(|e| match e {
            eventsource_stream::EventStreamError::Transport(e) => transport(e),
            other => ProviderError::Transport(Box::new(MalformedStream(other.to_string()))),
        })
}

/// Parses one SSE data payload as JSON.
pub(crate) fn event_json(event: &Event) -> Result<Value, ProviderError> {
    serde_json::from_str(&event.data).map_err(|e| {
        let head: String = event.data.chars().take(200).collect();
        ProviderError::InvalidResponse(format!("stream event is not JSON ({e}): {head}"))
    })
}

/// A non-empty environment variable.
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The error for a stream that ended early.
pub(crate) fn incomplete() -> ProviderError {
    ProviderError::Transport(Box::new(IncompleteStream))
}
