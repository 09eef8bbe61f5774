//! Runtime errors.

use pith_compaction::CompactionError;
use pith_core::SessionId;
use pith_router::ProviderError;
use pith_store::StoreError;

use crate::fsm::CompactKind;
use crate::registry::DuplicateTool;

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No router was given.
    #[error("a runtime needs a model router: call .router(..)")]
    MissingRouter,
    /// No store was given.
    #[error("a runtime needs a session store: call .store(..)")]
    MissingStore,
    /// Two tools share a name.
    #[error(transparent)]
    DuplicateTool(#[from] DuplicateTool),
}

/// Why a turn (or another runtime call) did not succeed. Whatever the variant, the session log
/// is consistent: it loads, and the next turn can continue from it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The input of a turn is empty.
    #[error("turn input is empty")]
    EmptyInput,
    /// The turn was cancelled; what was complete is persisted.
    #[error("turn cancelled")]
    Cancelled,
    /// A compaction the turn needed failed.
    #[error("{kind} compaction failed: {source}")]
    CompactionFailed {
        /// Which compaction.
        kind: CompactKindName,
        /// Why.
        #[source]
        source: CompactionError,
    },
    /// A compaction the turn needed was refused because the session's circuit is open.
    #[error("{kind} compaction refused: the compaction circuit of session {session} is open; reset it to compact again")]
    CircuitOpen {
        /// Which compaction.
        kind: CompactKindName,
        /// The session.
        session: SessionId,
    },
    /// The request overflowed again after it was compacted and retried.
    #[error("the request still overflows the context window after compaction and one retry: {source}")]
    OverflowAfterCompaction {
        /// The provider's second overflow.
        #[source]
        source: ProviderError,
    },
    /// The request is larger than the model's window even after compaction.
    #[error("the request needs about {tokens} tokens but the window of {model} is {window}")]
    DoesNotFit {
        /// The model.
        model: String,
        /// Estimated request size.
        tokens: u64,
        /// The model's window.
        window: u64,
    },
    /// The model call failed.
    #[error("model call failed: {0}")]
    Model(#[source] ProviderError),
    /// Reading or writing the session failed.
    #[error("session store failed: {0}")]
    Store(#[from] StoreError),
    /// Circuit status or reset failed.
    #[error("compaction service failed: {0}")]
    Compaction(#[source] CompactionError),
    /// The turn used its step bound.
    #[error("turn stopped after {0} steps (the step bound); raise RuntimeConfig::max_steps if the task needs more")]
    StepLimit(u32),
    /// The state machine received an event it did not expect (a bug in pith).
    #[error("internal error: the turn state machine received an unexpected event")]
    Internal,
}

/// The name of a compaction kind in error messages ("proactive", "reactive").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactKindName(pub CompactKind);

impl std::fmt::Display for CompactKindName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            CompactKind::Proactive => "proactive",
            CompactKind::Reactive => "reactive",
        })
    }
}

impl RuntimeError {
    /// Whether the turn was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, RuntimeError::Cancelled)
    }
}
