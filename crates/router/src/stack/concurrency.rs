//! Limits the number of calls in flight.

use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::Semaphore;
use tower::{Layer, Service, ServiceExt};

use super::{ProviderCall, ResponseFuture};
use crate::error::ProviderError;
use crate::request::ChatResponse;

/// Applies a concurrency limit shared by every clone of the wrapped service.
#[derive(Debug, Clone)]
pub struct ConcurrencyLayer {
    semaphore: Option<Arc<Semaphore>>,
}

impl ConcurrencyLayer {
    /// At most `max` calls in flight; `None` means unlimited.
    pub fn new(max: Option<usize>) -> Self {
        Self {
            semaphore: max.map(|n| Arc::new(Semaphore::new(n.max(1)))),
        }
    }
}

impl<S> Layer<S> for ConcurrencyLayer {
    type Service = ConcurrencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyService {
            inner,
            semaphore: self.semaphore.clone(),
        }
    }
}

/// The service of [`ConcurrencyLayer`]: holds a permit for the whole call, retries included.
#[derive(Debug, Clone)]
pub struct ConcurrencyService<S> {
    inner: S,
    semaphore: Option<Arc<Semaphore>>,
}

impl<S> Service<ProviderCall> for ConcurrencyService<S>
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
        let semaphore = self.semaphore.clone();
        Box::pin(async move {
            // The semaphore is never closed, so acquiring only fails if it were; treat that
            // as "no limit" rather than failing the call.
            let _permit = match semaphore {
                Some(s) => s.acquire_owned().await.ok(),
                None => None,
            };
            inner.oneshot(call).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower::service_fn;

    #[tokio::test(start_paused = true)]
    async fn at_most_n_calls_in_flight() {
        let current = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (c, p) = (current.clone(), peak.clone());
        let inner = service_fn(move |call: ProviderCall| {
            let (c, p) = (c.clone(), p.clone());
            async move {
                let now = c.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                c.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, ProviderError>(crate::ScriptedProvider::text_reply(
                    call.request.model.clone(),
                    Default::default(),
                ))
            }
        });
        let svc = ConcurrencyLayer::new(Some(2)).layer(inner);
        let calls = (0..6).map(|i| {
            let svc = svc.clone();
            async move {
                svc.oneshot(ProviderCall::new(crate::ChatRequest::new(
                    format!("m{i}"),
                    vec![],
                )))
                .await
            }
        });
        for r in futures::future::join_all(calls).await {
            assert!(r.is_ok());
        }
        assert_eq!(peak.load(Ordering::SeqCst), 2);
    }
}
