//! Provider configuration: endpoint, credentials and the limits of the tower stack.

use std::time::Duration;

use crate::secret::SecretString;

/// Limits applied to every call of one provider by its tower stack (see [`crate::stack`]).
///
/// All clones of a provider share one concurrency budget and one rate limiter.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProviderLimits {
    /// Calls in flight at once (`None`: unlimited). Default 16.
    pub max_concurrency: Option<usize>,
    /// Requests per second (`None`: unlimited). Default unlimited.
    pub requests_per_second: Option<f64>,
    /// Requests allowed at once above the steady rate. Default 1.
    pub burst: u32,
    /// Estimated input tokens per minute (`None`: unlimited). Default unlimited.
    pub tokens_per_minute: Option<u32>,
    /// Retries after the first attempt, for retryable errors only. Default 3.
    pub max_retries: u32,
    /// The first backoff; it doubles with each retry. Default 500 ms.
    pub initial_backoff: Duration,
    /// The longest backoff between two attempts. Default 30 s.
    pub max_backoff: Duration,
    /// The longest `Retry-After` honoured; a provider asking for more ends the retries, since
    /// the caller is better placed to decide. Default 60 s.
    pub max_retry_after: Duration,
    /// Limit on one attempt, from sending to the last byte (`None`: none). Default 600 s.
    pub request_timeout: Option<Duration>,
    /// Limit on silence while a reply arrives (`None`: none). Default 120 s.
    pub idle_timeout: Option<Duration>,
}

impl Default for ProviderLimits {
    fn default() -> Self {
        Self {
            max_concurrency: Some(16),
            requests_per_second: None,
            burst: 1,
            tokens_per_minute: None,
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            request_timeout: Some(Duration::from_secs(600)),
            idle_timeout: Some(Duration::from_secs(120)),
        }
    }
}

impl ProviderLimits {
    /// Sets the concurrency limit.
    pub fn with_max_concurrency(mut self, n: Option<usize>) -> Self {
        self.max_concurrency = n;
        self
    }
    /// Sets the request rate and its burst.
    pub fn with_requests_per_second(mut self, rps: Option<f64>, burst: u32) -> Self {
        self.requests_per_second = rps;
        self.burst = burst.max(1);
        self
    }
    /// Sets the token rate.
    pub fn with_tokens_per_minute(mut self, tpm: Option<u32>) -> Self {
        self.tokens_per_minute = tpm;
        self
    }
    /// Sets the number of retries.
    pub fn with_max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }
    /// Sets the first and the longest backoff.
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max.max(initial);
        self
    }
    /// Sets the longest `Retry-After` honoured.
    pub fn with_max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = max;
        self
    }
    /// Sets the whole-request timeout.
    pub fn with_request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }
    /// Sets the idle-stream timeout.
    pub fn with_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.idle_timeout = timeout;
        self
    }
}

/// Configuration of one HTTP provider.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ProviderConfig {
    /// The API base URL, e.g. `https://api.openai.com/v1` (the protocol's default when unset).
    pub base_url: Option<String>,
    /// The API key (optional for local servers); redacted in `Debug`.
    pub api_key: Option<SecretString>,
    /// Extra headers sent with every request (e.g. a gateway's routing header).
    pub headers: Vec<(String, String)>,
    /// Limits of the provider's tower stack.
    pub limits: ProviderLimits,
    /// Output limit sent when a request sets none (Anthropic requires one). Default 8,192.
    pub default_max_tokens: Option<u32>,
    /// OpenAI-compatible only: send developer messages with the `developer` role (`Some(true)`)
    /// or as `system` (`Some(false)`). Default: `developer` for api.openai.com only, since most
    /// other servers reject the role.
    pub developer_role: Option<bool>,
    /// Record request bodies in `trace`-level events. Off by default: prompts may hold secrets.
    pub log_content: bool,
}

impl ProviderConfig {
    /// Sets the base URL.
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }
    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<SecretString>) -> Self {
        self.api_key = Some(key.into());
        self
    }
    /// Adds a header sent with every request.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// Sets the stack limits.
    pub fn with_limits(mut self, limits: ProviderLimits) -> Self {
        self.limits = limits;
        self
    }
    /// Sets the default output limit.
    pub fn with_default_max_tokens(mut self, n: u32) -> Self {
        self.default_max_tokens = Some(n);
        self
    }
    /// Chooses how developer messages are sent (OpenAI-compatible only).
    pub fn with_developer_role(mut self, developer: bool) -> Self {
        self.developer_role = Some(developer);
        self
    }
    /// Opts in to recording request bodies in trace events.
    pub fn with_log_content(mut self, on: bool) -> Self {
        self.log_content = on;
        self
    }
}
