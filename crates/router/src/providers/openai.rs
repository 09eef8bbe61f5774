//! The OpenAI-compatible Chat Completions provider.
//!
//! Serves OpenAI itself and everything that speaks its protocol: Azure-style gateways,
//! OpenRouter, Groq, vLLM, Ollama, LM Studio and llama.cpp's server. Streaming asks for usage in
//! the last chunk (`stream_options.include_usage`).

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;

use super::http::{env_var, event_json, incomplete, json_body, sse, HttpClient};
use super::openai_wire::{parse_response, request_body, StreamState, WireOptions};
use crate::config::ProviderConfig;
use crate::error::ProviderError;
use crate::request::ChatResponse;
use crate::secret::SecretString;
use crate::stack::{Endpoint, ProviderCall, StackedProvider};

/// OpenAI's own API, the default base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// A Chat Completions endpoint (wrap it with [`OpenAiCompatible::stacked`] to get limits,
/// retries and timeouts).
pub struct OpenAiCompatible {
    name: String,
    http: HttpClient,
    options: WireOptions,
}

impl std::fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatible {
    /// An endpoint named `name` (the router prefix) for `config`. Unset fields come from the
    /// environment: the base URL from `OPENAI_BASE_URL` (else OpenAI's), the key from
    /// `OPENAI_API_KEY` (optional: local servers need none).
    ///
    /// # Errors
    /// [`ProviderError::InvalidConfig`] for a malformed base URL or header.
    pub fn new(name: impl Into<String>, config: &ProviderConfig) -> Result<Self, ProviderError> {
        let base_url = config
            .base_url
            .clone()
            .or_else(|| env_var("OPENAI_BASE_URL"))
            .unwrap_or_else(|| OPENAI_BASE_URL.to_string());
        let api_key = config
            .api_key
            .clone()
            .or_else(|| env_var("OPENAI_API_KEY").map(SecretString::from));
        let official = base_url.contains("api.openai.com");
        let mut headers: Vec<(String, String, bool)> = config
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone(), false))
            .collect();
        if let Some(key) = api_key.as_ref().filter(|k| !k.is_empty()) {
            headers.push(("authorization".into(), format!("Bearer {}", key.expose()), true));
        }
        Ok(Self {
            name: name.into(),
            http: HttpClient::new(&base_url, headers, config.log_content)?,
            options: WireOptions {
                developer_role: config.developer_role.unwrap_or(official),
                max_completion_tokens: official,
            },
        })
    }

    /// This endpoint wrapped in the tower stack described by `config.limits`.
    ///
    /// # Errors
    /// [`ProviderError::InvalidConfig`] for a malformed base URL, header or limit.
    pub fn stacked(
        name: impl Into<String>,
        config: &ProviderConfig,
    ) -> Result<StackedProvider, ProviderError> {
        StackedProvider::new(Arc::new(Self::new(name, config)?), &config.limits)
    }
}

#[async_trait]
impl Endpoint for OpenAiCompatible {
    fn name(&self) -> &str {
        &self.name
    }

    async fn send(&self, call: ProviderCall) -> Result<ChatResponse, ProviderError> {
        let body = request_body(&call.request, self.options);
        let response = self.http.post("/chat/completions", body, &call).await?;
        if !call.request.stream {
            return parse_response(&json_body(response).await?);
        }
        let mut events = sse(response, &call);
        let mut state = StreamState::default();
        while let Some(event) = events.next().await {
            let event = event?;
            if event.data.trim() == "[DONE]" {
                return state.finish();
            }
            if event.data.trim().is_empty() {
                continue;
            }
            for e in state.apply(&event_json(&event)?)? {
                call.emit(e);
            }
        }
        // EOF without [DONE]: complete only if the server said why it stopped.
        state.finish().map_err(|_| incomplete())
    }
}
