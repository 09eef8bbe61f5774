//! Agent events and the sink they are published through.
//!
//! Everything the runtime and the compaction service do is observable as an [`AgentEvent`]. Every
//! event names its session, so one subscriber can watch many sessions. Crates publish through an
//! [`EventSink`]; the runtime exposes the events on a broadcast channel.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::entry::{CompactionStrategy, CompactionTriggerKind};
use crate::ids::SessionId;
use crate::message::FinishReason;
use crate::usage::Usage;

/// Something that happened in a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// A turn began.
    TurnStarted {
        /// The session.
        session_id: SessionId,
        /// The turn's number within this process (1-based).
        turn: u64,
    },
    /// Streamed output text.
    TextDelta {
        /// The session.
        session_id: SessionId,
        /// The text fragment.
        text: String,
    },
    /// A model request is about to be sent.
    ModelRequest {
        /// The session.
        session_id: SessionId,
        /// The model.
        model: String,
        /// The local estimate of the request size.
        estimated_tokens: u64,
    },
    /// A model reply arrived.
    ModelResponse {
        /// The session.
        session_id: SessionId,
        /// The model.
        model: String,
        /// Reported usage.
        usage: Usage,
        /// Why the model stopped.
        finish: FinishReason,
    },
    /// The model called a tool.
    ToolCall {
        /// The session.
        session_id: SessionId,
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
    },
    /// A tool call finished.
    ToolResult {
        /// The session.
        session_id: SessionId,
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
        /// Whether the tool failed (or timed out, or was unknown).
        is_error: bool,
    },
    /// A compaction began.
    CompactionStarted {
        /// The session.
        session_id: SessionId,
        /// What caused it.
        trigger: CompactionTriggerKind,
    },
    /// A compaction committed (or found its result already committed).
    CompactionFinished {
        /// The session.
        session_id: SessionId,
        /// Context size before.
        tokens_before: u64,
        /// Context size after.
        tokens_after: u64,
        /// How the handoff was produced.
        strategy: CompactionStrategy,
    },
    /// A compaction failed; the history is unchanged.
    CompactionFailed {
        /// The session.
        session_id: SessionId,
        /// What went wrong.
        error: String,
        /// Consecutive failures counted by the circuit breaker so far.
        consecutive_failures: u32,
    },
    /// Compaction kept failing; the circuit is open and compaction makes no model call until reset.
    CompactionCircuitOpened {
        /// The session.
        session_id: SessionId,
        /// Consecutive failures that opened it.
        consecutive_failures: u32,
    },
    /// An operator closed the circuit again.
    CompactionCircuitReset {
        /// The session.
        session_id: SessionId,
    },
    /// The model view of the session was replaced by a new generation.
    HistoryReplaced {
        /// The session.
        session_id: SessionId,
        /// The new generation.
        generation: u64,
    },
    /// A turn ended with a final answer.
    TurnFinished {
        /// The session.
        session_id: SessionId,
        /// The turn's number.
        turn: u64,
        /// Usage of all model calls of the turn.
        usage: Usage,
        /// Compactions performed during the turn.
        compactions: u32,
    },
    /// A turn failed; the log is consistent.
    TurnFailed {
        /// The session.
        session_id: SessionId,
        /// The turn's number.
        turn: u64,
        /// What went wrong.
        error: String,
    },
}

impl AgentEvent {
    /// The session the event belongs to.
    pub fn session_id(&self) -> SessionId {
        match self {
            AgentEvent::TurnStarted { session_id, .. }
            | AgentEvent::TextDelta { session_id, .. }
            | AgentEvent::ModelRequest { session_id, .. }
            | AgentEvent::ModelResponse { session_id, .. }
            | AgentEvent::ToolCall { session_id, .. }
            | AgentEvent::ToolResult { session_id, .. }
            | AgentEvent::CompactionStarted { session_id, .. }
            | AgentEvent::CompactionFinished { session_id, .. }
            | AgentEvent::CompactionFailed { session_id, .. }
            | AgentEvent::CompactionCircuitOpened { session_id, .. }
            | AgentEvent::CompactionCircuitReset { session_id }
            | AgentEvent::HistoryReplaced { session_id, .. }
            | AgentEvent::TurnFinished { session_id, .. }
            | AgentEvent::TurnFailed { session_id, .. } => *session_id,
        }
    }
}

/// Where events go. Publishing must not block and must not fail the caller.
pub trait EventSink: Send + Sync {
    /// Publishes one event.
    fn publish(&self, event: AgentEvent);
}

impl<T: EventSink + ?Sized> EventSink for Arc<T> {
    fn publish(&self, event: AgentEvent) {
        (**self).publish(event)
    }
}

/// A sink that drops every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopSink;

impl EventSink for NoopSink {
    fn publish(&self, _event: AgentEvent) {}
}

/// A sink that keeps every event in memory, for tests and reports.
#[derive(Debug, Default)]
pub struct RecordingSink {
    events: Mutex<Vec<AgentEvent>>,
}

impl RecordingSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the events published so far.
    pub fn events(&self) -> Vec<AgentEvent> {
        match self.events.lock() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl EventSink for RecordingSink {
    fn publish(&self, event: AgentEvent) {
        match self.events.lock() {
            Ok(mut guard) => guard.push(event),
            Err(poisoned) => poisoned.into_inner().push(event),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_name_their_session_and_tag() {
        let id = SessionId::new();
        let e = AgentEvent::CompactionCircuitOpened {
            session_id: id,
            consecutive_failures: 3,
        };
        assert_eq!(e.session_id(), id);
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "compaction_circuit_opened");
        assert_eq!(v["session_id"], id.to_string());
        let sink = Arc::new(RecordingSink::new());
        sink.publish(e.clone());
        assert_eq!(sink.events(), vec![e]);
    }
}
