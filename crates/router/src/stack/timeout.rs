//! Applies a timeout to each attempt and an idle timeout to streams.

use std::task::{Context, Poll};
use std::time::Duration;

use tower::{Layer, Service, ServiceExt};

use super::{ProviderCall, ResponseFuture};
use crate::error::ProviderError;
use crate::request::ChatResponse;

/// Fails an attempt with [`ProviderError::Timeout`] when it takes longer than `request`, or
/// when a streamed reply stays silent (no bytes) for longer than `idle`.
///
/// The idle limit applies to streaming requests only: a non-streamed reply arrives in one piece
/// after the whole generation, so silence is expected there and `request` bounds it.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeoutLayer {
    request: Option<Duration>,
    idle: Option<Duration>,
}

impl TimeoutLayer {
    /// A layer with the given limits; `None` disables one.
    pub fn new(request: Option<Duration>, idle: Option<Duration>) -> Self {
        Self { request, idle }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = TimeoutService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TimeoutService { inner, limits: *self }
    }
}

/// The service of [`TimeoutLayer`].
#[derive(Debug, Clone)]
pub struct TimeoutService<S> {
    inner: S,
    limits: TimeoutLayer,
}

impl<S> Service<ProviderCall> for TimeoutService<S>
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
        let TimeoutLayer { request, idle } = self.limits;
        let idle = idle.filter(|_| call.request.stream);
        let activity = call.activity();
        Box::pin(async move {
            let attempt = async move {
                let fut = inner.oneshot(call);
                let Some(idle) = idle else {
                    return fut.await;
                };
                tokio::pin!(fut);
                loop {
                    tokio::select! {
                        res = &mut fut => return res,
                        _ = activity.notified() => continue,
                        _ = tokio::time::sleep(idle) => return Err(ProviderError::Timeout(idle)),
                    }
                }
            };
            match request {
                Some(limit) => tokio::time::timeout(limit, attempt)
                    .await
                    .unwrap_or(Err(ProviderError::Timeout(limit))),
                None => attempt.await,
            }
        })
    }
}
