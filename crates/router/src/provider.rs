//! The provider trait.

use async_trait::async_trait;

use crate::error::ProviderError;
use crate::request::{ChatRequest, ChatResponse, StreamEvent};

/// Receives the events of a streamed reply as they arrive.
pub trait StreamSink: Send + Sync {
    /// Handles one event.
    fn on_event(&self, event: &StreamEvent);
}

impl<F: Fn(&StreamEvent) + Send + Sync> StreamSink for F {
    fn on_event(&self, event: &StreamEvent) {
        self(event)
    }
}

/// A model provider: one wire protocol to one endpoint.
///
/// A provider receives the bare model name (the router strips the `provider/` prefix). Streaming
/// providers send events to `sink` and still return the assembled [`ChatResponse`].
#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name, for tracing and errors.
    fn name(&self) -> &str;

    /// Sends one request and returns the complete reply.
    async fn chat(
        &self,
        request: ChatRequest,
        sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError>;
}

#[async_trait]
impl<T: Provider + ?Sized> Provider for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    async fn chat(
        &self,
        request: ChatRequest,
        sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        (**self).chat(request, sink).await
    }
}
