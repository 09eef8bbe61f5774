//! The request type of the tower stack.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, Notify};

use crate::request::{ChatRequest, StreamEvent};

/// One provider call as it travels through the stack.
///
/// Cloning is cheap and shares the request, the event channel, the activity signal and the
/// "emitted" flag, so a retried attempt sends the same request without copying its messages,
/// reports to the same sink, and the retry layer can tell whether the sink has already seen output
/// (such an attempt is not retried: the sink would see output twice).
#[derive(Debug, Clone)]
pub struct ProviderCall {
    /// The request; `model` is the bare model name the provider knows. Shared by the call's
    /// attempts: it holds the whole view, and a call can wait on the provider for seconds.
    pub request: Arc<ChatRequest>,
    events: Option<mpsc::UnboundedSender<StreamEvent>>,
    emitted: Arc<AtomicBool>,
    activity: Arc<Notify>,
}

impl ProviderCall {
    /// A call whose stream events are dropped.
    pub fn new(request: ChatRequest) -> Self {
        Self {
            request: Arc::new(request),
            events: None,
            emitted: Arc::new(AtomicBool::new(false)),
            activity: Arc::new(Notify::new()),
        }
    }

    /// A call whose stream events go to `events`.
    pub fn with_events(request: ChatRequest, events: mpsc::UnboundedSender<StreamEvent>) -> Self {
        Self {
            events: Some(events),
            ..Self::new(request)
        }
    }

    /// Delivers a stream event to the caller's sink (if any) and marks the call as having
    /// produced output.
    pub fn emit(&self, event: StreamEvent) {
        self.emitted.store(true, Ordering::SeqCst);
        if let Some(tx) = &self.events {
            // A closed receiver means the caller went away; the reply is still assembled.
            let _ = tx.send(event);
        }
    }

    /// Whether any stream event has been emitted by any attempt of this call.
    pub fn has_emitted(&self) -> bool {
        self.emitted.load(Ordering::SeqCst)
    }

    /// Signals that bytes arrived; resets the idle timeout.
    pub fn touch(&self) {
        self.activity.notify_one();
    }

    /// The activity signal the idle timeout waits on.
    pub fn activity(&self) -> Arc<Notify> {
        self.activity.clone()
    }
}
