//! The Anthropic Messages provider.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;

use super::anthropic_wire::{parse_response, request_body, StreamState};
use super::http::{env_var, event_json, json_body, sse, HttpClient};
use crate::catalog::DEFAULT_MAX_OUTPUT;
use crate::config::ProviderConfig;
use crate::error::ProviderError;
use crate::request::ChatResponse;
use crate::secret::SecretString;
use crate::stack::{Endpoint, ProviderCall, StackedProvider};

/// Anthropic's API, the default base URL.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";
/// The API version pith speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A Messages endpoint (wrap it with [`Anthropic::stacked`] to get limits, retries and
/// timeouts).
pub struct Anthropic {
    name: String,
    http: HttpClient,
    default_max_tokens: u32,
}

impl std::fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Anthropic")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Anthropic {
    /// An endpoint named `name` (the router prefix) for `config`; sends `x-api-key` and
    /// `anthropic-version: 2023-06-01`. Unset fields come from the environment: the key from
    /// `ANTHROPIC_API_KEY`, the base URL from `ANTHROPIC_BASE_URL` (else Anthropic's).
    ///
    /// # Errors
    /// [`ProviderError::InvalidConfig`] for a malformed base URL or header.
    pub fn new(name: impl Into<String>, config: &ProviderConfig) -> Result<Self, ProviderError> {
        let base_url = config
            .base_url
            .clone()
            .or_else(|| env_var("ANTHROPIC_BASE_URL"))
            .unwrap_or_else(|| ANTHROPIC_BASE_URL.to_string());
        let api_key = config
            .api_key
            .clone()
            .or_else(|| env_var("ANTHROPIC_API_KEY").map(SecretString::from));
        let mut headers: Vec<(String, String, bool)> =
            vec![("anthropic-version".into(), ANTHROPIC_VERSION.into(), false)];
        headers.extend(config.headers.iter().map(|(k, v)| (k.clone(), v.clone(), false)));
        if let Some(key) = api_key.as_ref().filter(|k| !k.is_empty()) {
            headers.push(("x-api-key".into(), key.expose().to_string(), true));
        }
        let default_max_tokens = config
            .default_max_tokens
            .unwrap_or(u32::try_from(DEFAULT_MAX_OUTPUT).unwrap_or(8_192));
        Ok(Self {
            name: name.into(),
            http: HttpClient::new(&base_url, headers, config.log_content)?,
            default_max_tokens,
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
impl Endpoint for Anthropic {
    fn name(&self) -> &str {
        &self.name
    }

    async fn send(&self, call: ProviderCall) -> Result<ChatResponse, ProviderError> {
        let body = request_body(&call.request, self.default_max_tokens);
        let response = self.http.post("/messages", body, &call).await?;
        if !call.request.stream {
            return parse_response(&json_body(response).await?);
        }
        let mut events = sse(response, &call);
        let mut state = StreamState::default();
        while let Some(event) = events.next().await {
            let event = event?;
            if event.data.trim().is_empty() {
                continue;
            }
            for e in state.apply(&event_json(&event)?)? {
                call.emit(e);
            }
            if state.is_stopped() {
                break;
            }
        }
        state.finish()
    }
}
