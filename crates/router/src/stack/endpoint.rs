//! The innermost service: one wire protocol to one endpoint.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;

use super::{ProviderCall, ResponseFuture};
use crate::error::ProviderError;
use crate::request::ChatResponse;

/// Sends one attempt of a call over a wire protocol. The stack adds limits, retries and
/// timeouts around it.
#[async_trait]
pub trait Endpoint: Send + Sync + 'static {
    /// The provider's name, for tracing and errors.
    fn name(&self) -> &str;

    /// Performs one attempt: sends the request, emits stream events through `call`, and returns
    /// the assembled reply or a classified error.
    async fn send(&self, call: ProviderCall) -> Result<ChatResponse, ProviderError>;
}

/// Adapts an [`Endpoint`] to a `tower::Service` and counts the attempts that reach it.
#[derive(Clone)]
pub struct EndpointService {
    endpoint: Arc<dyn Endpoint>,
    attempts: Arc<AtomicU64>,
}

impl EndpointService {
    /// Wraps `endpoint`; every call increments `attempts`.
    pub fn new(endpoint: Arc<dyn Endpoint>, attempts: Arc<AtomicU64>) -> Self {
        Self { endpoint, attempts }
    }
}

impl tower::Service<ProviderCall> for EndpointService {
    type Response = ChatResponse;
    type Error = ProviderError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ProviderCall) -> Self::Future {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let endpoint = self.endpoint.clone();
        Box::pin(async move { endpoint.send(call).await })
    }
}
