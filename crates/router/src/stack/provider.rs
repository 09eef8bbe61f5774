//! A [`Provider`] whose calls go through the tower stack.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::mpsc;
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt};

use super::concurrency::ConcurrencyLayer;
use super::rate_limit::RateLimitLayer;
use super::retry::{RetryLayer, RetryPolicy};
use super::timeout::TimeoutLayer;
use super::{Endpoint, EndpointService, ProviderCall};
use crate::config::ProviderLimits;
use crate::error::ProviderError;
use crate::provider::{Provider, StreamSink};
use crate::request::{ChatRequest, ChatResponse};

type StackService = BoxCloneService<ProviderCall, ChatResponse, ProviderError>;

/// A provider that sends every call through concurrency limit → rate limit → retry → timeout
/// → the wire endpoint. Clones of the `Arc` share one stack and so one set of budgets.
pub struct StackedProvider {
    name: String,
    // BoxCloneService is Send but not Sync; each call clones it out of the mutex.
    service: Mutex<StackService>,
    attempts: Arc<AtomicU64>,
}

impl std::fmt::Debug for StackedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackedProvider")
            .field("name", &self.name)
            .field("attempts", &self.attempts())
            .finish()
    }
}

impl StackedProvider {
    /// Wraps `endpoint` in the stack described by `limits`.
    ///
    /// # Errors
    /// [`ProviderError::InvalidConfig`] when a limit is invalid (e.g. a non-positive rate).
    pub fn new(endpoint: Arc<dyn Endpoint>, limits: &ProviderLimits) -> Result<Self, ProviderError> {
        let name = endpoint.name().to_string();
        let attempts = Arc::new(AtomicU64::new(0));
        let policy = RetryPolicy {
            max_retries: limits.max_retries,
            initial_backoff: limits.initial_backoff,
            max_backoff: limits.max_backoff,
            max_retry_after: limits.max_retry_after,
        };
        let service = ServiceBuilder::new()
            .layer(ConcurrencyLayer::new(limits.max_concurrency))
            .layer(RateLimitLayer::new(
                limits.requests_per_second,
                limits.burst,
                limits.tokens_per_minute,
            )?)
            .layer(RetryLayer::new(name.clone(), policy))
            .layer(TimeoutLayer::new(limits.request_timeout, limits.idle_timeout))
            .service(EndpointService::new(endpoint, attempts.clone()));
        Ok(Self {
            name,
            service: Mutex::new(BoxCloneService::new(service)),
            attempts,
        })
    }

    /// How many attempts reached the wire endpoint so far (retries included).
    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::SeqCst)
    }

    fn service(&self) -> StackService {
        match self.service.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

#[async_trait]
impl Provider for StackedProvider {
    fn name(&self) -> &str {
        &self.name
    }

    async fn chat(
        &self,
        request: ChatRequest,
        sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        let service = self.service();
        let Some(sink) = sink else {
            return service.oneshot(ProviderCall::new(request)).await;
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let fut = service.oneshot(ProviderCall::with_events(request, tx));
        tokio::pin!(fut);
        // Forward events while the call runs, so the sink sees them as they arrive.
        let result = loop {
            tokio::select! {
                biased;
                Some(event) = rx.recv() => sink.on_event(&event),
                result = &mut fut => break result,
            }
        };
        while let Ok(event) = rx.try_recv() {
            sink.on_event(&event);
        }
        result
    }
}
