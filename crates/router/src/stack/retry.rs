//! Retries retryable failures with exponential backoff and jitter.

use std::task::{Context, Poll};
use std::time::Duration;

use rand::Rng;
use tower::{Layer, Service, ServiceExt};
use tracing::Instrument;

use super::{ProviderCall, ResponseFuture};
use crate::error::ProviderError;
use crate::request::ChatResponse;

/// Retry policy: how often and how long to wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first backoff; it doubles with each retry.
    pub initial_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
    /// The longest `Retry-After` honoured; a longer one ends the retries.
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1-based) without a `Retry-After`: the exponential
    /// backoff, capped, then jittered into its upper half so that clients spread out.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1));
        let base = self.initial_backoff.saturating_mul(factor).min(self.max_backoff);
        base.mul_f64(rand::thread_rng().gen_range(0.5..=1.0))
    }

    /// The wait before retry number `retry` after `error`, or `None` to give up.
    ///
    /// Gives up on errors that are not retryable (an overflow never is, nor a 4xx other than
    /// 408/409/429), after `max_retries`, and when the provider asks for a longer wait than
    /// `max_retry_after`.
    pub fn delay(&self, retry: u32, error: &ProviderError) -> Option<Duration> {
        if !error.is_retryable() || retry > self.max_retries {
            return None;
        }
        match error {
            ProviderError::RateLimited {
                retry_after: Some(wait),
                ..
            } => (*wait <= self.max_retry_after).then_some(*wait),
            _ => Some(self.backoff(retry)),
        }
    }
}

/// Applies a [`RetryPolicy`] and opens the `llm.request` span of each attempt.
#[derive(Debug, Clone)]
pub struct RetryLayer {
    policy: RetryPolicy,
    provider: String,
}

impl RetryLayer {
    /// Retries calls of `provider` according to `policy`.
    pub fn new(provider: impl Into<String>, policy: RetryPolicy) -> Self {
        Self {
            policy,
            provider: provider.into(),
        }
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = RetryService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`RetryLayer`].
#[derive(Debug, Clone)]
pub struct RetryService<S> {
    inner: S,
    layer: RetryLayer,
}

impl<S> Service<ProviderCall> for RetryService<S>
where
    S: Service<ProviderCall, Response = ChatResponse, Error = ProviderError> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = ChatResponse;
    type Error = ProviderError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ProviderCall) -> Self::Future {
        let inner = self.inner.clone();
        let RetryLayer { policy, provider } = self.layer.clone();
        Box::pin(async move {
            let mut attempt: u32 = 1;
            loop {
                let span = tracing::info_span!(
                    "llm.request",
                    provider = %provider,
                    model = %call.request.model,
                    attempt
                );
                let result = inner.clone().oneshot(call.clone()).instrument(span).await;
                let error = match result {
                    Ok(response) => return Ok(response),
                    Err(error) => error,
                };
                // A stream that already reached the caller's sink is not replayed.
                let delay = if call.has_emitted() {
                    None
                } else {
                    policy.delay(attempt, &error)
                };
                let Some(delay) = delay else {
                    return Err(error);
                };
                tracing::warn!(
                    provider = %provider,
                    attempt,
                    delay_ms = delay.as_millis() as u64,
                    error = %error,
                    "retrying model call"
                );
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(300),
            max_retry_after: Duration::from_secs(10),
        }
    }

    #[test]
    fn backoff_doubles_is_capped_and_jittered() {
        let p = policy();
        for _ in 0..50 {
            let b1 = p.backoff(1);
            assert!(b1 >= Duration::from_millis(50) && b1 <= Duration::from_millis(100));
            let b3 = p.backoff(3);
            assert!(b3 >= Duration::from_millis(150) && b3 <= Duration::from_millis(300));
        }
    }

    #[test]
    fn gives_up_on_overflow_and_after_max_retries() {
        let p = policy();
        assert_eq!(p.delay(1, &ProviderError::overflow("prompt is too long")), None);
        let server = ProviderError::Server {
            status: 503,
            message: String::new(),
        };
        assert!(p.delay(3, &server).is_some());
        assert_eq!(p.delay(4, &server), None);
        let long = ProviderError::RateLimited {
            message: String::new(),
            retry_after: Some(Duration::from_secs(60)),
        };
        assert_eq!(p.delay(1, &long), None);
        let short = ProviderError::RateLimited {
            message: String::new(),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(p.delay(1, &short), Some(Duration::from_secs(2)));
    }
}
