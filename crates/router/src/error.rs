//! Provider errors and their classification.

use std::time::Duration;

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The request does not fit the model's context window.
    #[error("context overflow: {message}")]
    ContextOverflow {
        /// The provider's message.
        message: String,
        /// The window the provider stated, when it did.
        limit: Option<u64>,
        /// The request size the provider stated, when it did.
        requested: Option<u64>,
    },
    /// Too many requests or tokens; retry after the given time when stated.
    #[error("rate limited (retry after {retry_after:?}): {message}")]
    RateLimited {
        /// The provider's message.
        message: String,
        /// The wait the provider asked for.
        retry_after: Option<Duration>,
    },
    /// The credentials were rejected.
    #[error("authentication failed (status {status}): {message}")]
    Auth {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider rejected the request as invalid (not an overflow).
    #[error("invalid request (status {status}): {message}")]
    InvalidRequest {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// HTTP 413 without token wording: the body is too large for the gateway, not the model.
    #[error("payload too large: {message}")]
    PayloadTooLarge {
        /// The provider's message.
        message: String,
    },
    /// A server-side failure.
    #[error("server error (status {status}): {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The request or the stream timed out.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The connection failed or broke.
    #[error("transport error: {0}")]
    Transport(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The reply could not be understood.
    #[error("invalid response: {0}")]
    InvalidResponse(String),
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// No provider serves the model, or the model name is malformed.
    #[error("unknown model {0:?}")]
    UnknownModel(String),
    /// A scripted provider ran out of scripted replies.
    #[error("script exhausted after {0} replies")]
    ScriptExhausted(usize),
    /// A provider or router configuration is invalid (bad URL, header or limit).
    #[error("invalid provider configuration: {0}")]
    InvalidConfig(String),
}

impl ProviderError {
    /// Whether retrying the same request may succeed. An overflow never is.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::RateLimited { .. }
            | ProviderError::Server { .. }
            | ProviderError::Timeout(_)
            | ProviderError::Transport(_) => true,
            ProviderError::InvalidRequest { status, .. } => matches!(status, 408 | 409),
            ProviderError::ContextOverflow { .. }
            | ProviderError::Auth { .. }
            | ProviderError::PayloadTooLarge { .. }
            | ProviderError::InvalidResponse(_)
            | ProviderError::Cancelled
            | ProviderError::UnknownModel(_)
            | ProviderError::ScriptExhausted(_)
            | ProviderError::InvalidConfig(_) => false,
        }
    }

    /// Whether the provider rejected the request as too long for the context window.
    pub fn is_context_overflow(&self) -> bool {
        match self {
            ProviderError::ContextOverflow { .. } => true,
            ProviderError::RateLimited { .. }
            | ProviderError::Auth { .. }
            | ProviderError::InvalidRequest { .. }
            | ProviderError::PayloadTooLarge { .. }
            | ProviderError::Server { .. }
            | ProviderError::Timeout(_)
            | ProviderError::Transport(_)
            | ProviderError::InvalidResponse(_)
            | ProviderError::Cancelled
            | ProviderError::UnknownModel(_)
            | ProviderError::ScriptExhausted(_)
            | ProviderError::InvalidConfig(_) => false,
        }
    }

    /// An overflow error with no stated sizes.
    pub fn overflow(message: impl Into<String>) -> Self {
        ProviderError::ContextOverflow {
            message: message.into(),
            limit: None,
            requested: None,
        }
    }
}
