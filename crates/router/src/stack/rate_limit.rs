//! Limits requests per second and estimated input tokens per minute.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use pith_core::{EstimateCounter, TokenCounter};
use tower::{Layer, Service, ServiceExt};

use super::{ProviderCall, ResponseFuture};
use crate::error::ProviderError;
use crate::request::{ChatRequest, ChatResponse};

/// Applies a governor rate limit shared by every clone of the wrapped service.
///
/// The request limiter admits `requests_per_second` with a burst; the token limiter charges
/// each request's estimated input tokens (bytes / 4 of messages and tool schemas) against
/// `tokens_per_minute`. A request larger than the whole minute's budget is charged the whole
/// budget, so it waits for a full minute's worth but is never rejected.
#[derive(Clone, Default)]
pub struct RateLimitLayer {
    requests: Option<Arc<DefaultDirectRateLimiter>>,
    tokens: Option<(Arc<DefaultDirectRateLimiter>, NonZeroU32)>,
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("requests", &self.requests.is_some())
            .field("tokens_per_minute", &self.tokens.as_ref().map(|t| t.1))
            .finish()
    }
}

impl RateLimitLayer {
    /// A limiter for `requests_per_second` (burst `burst`) and `tokens_per_minute`; `None`
    /// leaves that dimension unlimited.
    ///
    /// # Errors
    /// [`ProviderError::InvalidConfig`] when the request rate is not a positive finite number.
    pub fn new(
        requests_per_second: Option<f64>,
        burst: u32,
        tokens_per_minute: Option<u32>,
    ) -> Result<Self, ProviderError> {
        let requests = match requests_per_second {
            None => None,
            Some(rps) => {
                let period = (rps.is_finite() && rps > 0.0)
                    .then(|| Duration::from_secs_f64(1.0 / rps))
                    .and_then(Quota::with_period)
                    .ok_or_else(|| {
                        ProviderError::InvalidConfig(format!(
                            "requests_per_second must be a positive number, got {rps}"
                        ))
                    })?;
                let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
                Some(Arc::new(RateLimiter::direct(period.allow_burst(burst))))
            }
        };
        let tokens = tokens_per_minute.and_then(NonZeroU32::new).map(|tpm| {
            let limiter = RateLimiter::direct(Quota::per_minute(tpm).allow_burst(tpm));
            (Arc::new(limiter), tpm)
        });
        Ok(Self { requests, tokens })
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            limits: self.clone(),
        }
    }
}

/// The service of [`RateLimitLayer`].
#[derive(Clone)]
pub struct RateLimitService<S> {
    inner: S,
    limits: RateLimitLayer,
}

/// The input tokens a request is charged: bytes / 4 of its messages and tool schemas.
pub fn estimated_tokens(request: &ChatRequest) -> u64 {
    let counter = EstimateCounter;
    counter.count_messages(&request.messages) + counter.count_tools(&request.tools)
}

impl<S> Service<ProviderCall> for RateLimitService<S>
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
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let limits = self.limits.clone();
        Box::pin(async move {
            if let Some(requests) = &limits.requests {
                requests.until_ready().await;
            }
            if let Some((tokens, budget)) = &limits.tokens {
                let wanted = u32::try_from(estimated_tokens(&call.request)).unwrap_or(u32::MAX);
                if let Some(n) = NonZeroU32::new(wanted.min(budget.get())) {
                    // `n` never exceeds the burst, so capacity is always sufficient.
                    let _ = tokens.until_n_ready(n).await;
                }
            }
            inner.oneshot(call).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_rates_are_config_errors() {
        assert!(RateLimitLayer::new(Some(0.0), 1, None).is_err());
        assert!(RateLimitLayer::new(Some(f64::NAN), 1, None).is_err());
        assert!(RateLimitLayer::new(Some(2.5), 3, Some(1000)).is_ok());
    }
}
