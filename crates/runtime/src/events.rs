//! The event broadcast: every [`AgentEvent`] of a runtime, to every subscriber.
//!
//! Events travel on a bounded [`tokio::sync::broadcast`] channel. Publishing never blocks the
//! turn: a subscriber that falls more than the channel's capacity behind does not slow anyone
//! down; instead its next `recv` returns `Err(RecvError::Lagged(n))`, telling it exactly how many
//! events it missed, and then continues with the oldest event still buffered. Events published
//! while nobody is subscribed are dropped.

use pith_core::{AgentEvent, EventSink, SessionId};
use pith_router::{StreamEvent, StreamSink};
use tokio::sync::broadcast;

/// Default number of events buffered per subscriber before it lags.
pub const DEFAULT_EVENT_CAPACITY: usize = 1_024;

/// A broadcast channel of agent events that is also an [`EventSink`].
#[derive(Debug, Clone)]
pub struct EventBus {
    tx: broadcast::Sender<AgentEvent>,
}

impl EventBus {
    /// A bus that buffers `capacity` events per subscriber (at least 1).
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        Self { tx }
    }

    /// A new subscriber; it receives every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<AgentEvent> {
        self.tx.subscribe()
    }

    /// Number of live subscribers.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new(DEFAULT_EVENT_CAPACITY)
    }
}

impl EventSink for EventBus {
    fn publish(&self, event: AgentEvent) {
        // An error only means nobody is listening right now, which is fine.
        let _ = self.tx.send(event);
    }
}

/// Publishes the streamed text of a model reply as `TextDelta` events of one session.
pub struct DeltaSink<'a> {
    events: &'a dyn EventSink,
    session_id: SessionId,
}

impl<'a> DeltaSink<'a> {
    /// A sink publishing to `events` on behalf of `session_id`.
    pub fn new(events: &'a dyn EventSink, session_id: SessionId) -> Self {
        Self { events, session_id }
    }
}

impl StreamSink for DeltaSink<'_> {
    fn on_event(&self, event: &StreamEvent) {
        if let StreamEvent::TextDelta { text } = event {
            self.events.publish(AgentEvent::TextDelta {
                session_id: self.session_id,
                text: text.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::SessionId;
    use tokio::sync::broadcast::error::RecvError;

    #[tokio::test]
    async fn a_lagging_subscriber_is_told_how_many_events_it_missed() {
        let bus = EventBus::new(2);
        let mut rx = bus.subscribe();
        let session_id = SessionId::new();
        for turn in 1..=5 {
            bus.publish(AgentEvent::TurnStarted { session_id, turn });
        }
        assert!(matches!(rx.recv().await, Err(RecvError::Lagged(3))));
        assert!(matches!(
            rx.recv().await,
            Ok(AgentEvent::TurnStarted { turn: 4, .. })
        ));
        assert!(matches!(
            rx.recv().await,
            Ok(AgentEvent::TurnStarted { turn: 5, .. })
        ));
    }

    #[test]
    fn publishing_without_subscribers_is_fine() {
        let bus = EventBus::default();
        bus.publish(AgentEvent::CompactionCircuitReset {
            session_id: SessionId::new(),
        });
        assert_eq!(bus.subscribers(), 0);
    }
}
