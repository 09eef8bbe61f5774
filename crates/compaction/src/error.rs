//! The compaction error and its breaker classification.

use pith_router::ProviderError;
use pith_store::StoreError;

use crate::config::ConfigError;

/// Why a compaction did not commit. Whatever the variant, the stored log and the model view are
/// exactly as they were before the call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactionError {
    /// The session has no conversation to summarise.
    #[error("no messages to compact")]
    NoMessagesToCompact,
    /// A proactive compaction was asked for but the view is within the threshold.
    #[error("compaction not needed: context {context_tokens} tokens is within the threshold {threshold}")]
    NotNeeded {
        /// Context size of the view.
        context_tokens: u64,
        /// The threshold it was compared with.
        threshold: u64,
    },
    /// The summary call failed, returned an empty summary or did not finish.
    #[error("summary failed: {0}")]
    SummaryFailed(#[source] ProviderError),
    /// The store could not load or commit.
    #[error("persisting the compaction failed: {0}")]
    PersistFailed(#[source] StoreError),
    /// The session's circuit is open; reset it to compact again.
    #[error("compaction circuit is open for this session; reset it to compact again")]
    CircuitOpen,
    /// Even the smallest possible view (or summary request) does not fit.
    #[error("{what} do not fit: {needed} needed, {available} available")]
    DoesNotFit {
        /// What did not fit, with its unit ("compacted view tokens", "summary calls", ...).
        what: &'static str,
        /// Tokens needed.
        needed: u64,
        /// Tokens available.
        available: u64,
    },
    /// The new view would not be small enough to stop compaction from firing again.
    #[error("compaction would leave {tokens_after} tokens, above the target of {target}")]
    NoProgress {
        /// Context size the new view would have.
        tokens_after: u64,
        /// The target (`target_ratio` × threshold).
        target: u64,
    },
    /// The compaction was cancelled before it committed.
    #[error("compaction cancelled")]
    Cancelled,
    /// Another compaction committed first on the same generation.
    #[error("another compaction committed first (generation {expected} is now {actual})")]
    Conflict {
        /// The generation this compaction was based on.
        expected: u64,
        /// The generation found at commit.
        actual: u64,
    },
    /// The configuration cannot work with the model's window.
    #[error("invalid compaction configuration: {0}")]
    InvalidConfig(#[from] ConfigError),
    /// A relevance grader failed.
    #[error("relevance grading failed: {0}")]
    GraderFailed(#[source] ProviderError),
}

impl CompactionError {
    /// Whether this failure counts toward the session's circuit breaker.
    ///
    /// Only failures that would repeat on the next attempt count: a no-op, an empty session, a
    /// cancellation or a lost generation race never do.
    pub fn counts_toward_breaker(&self) -> bool {
        match self {
            CompactionError::SummaryFailed(_)
            | CompactionError::DoesNotFit { .. }
            | CompactionError::NoProgress { .. }
            | CompactionError::PersistFailed(_)
            | CompactionError::GraderFailed(_) => true,
            CompactionError::NoMessagesToCompact
            | CompactionError::NotNeeded { .. }
            | CompactionError::CircuitOpen
            | CompactionError::Cancelled
            | CompactionError::Conflict { .. }
            | CompactionError::InvalidConfig(_) => false,
        }
    }

    /// Maps a store error, keeping a lost generation race as [`CompactionError::Conflict`].
    pub fn from_store(error: StoreError) -> Self {
        match error {
            StoreError::Conflict { expected, actual, .. } => CompactionError::Conflict { expected, actual },
            other => CompactionError::PersistFailed(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaker_counts_only_repeating_failures() {
        assert!(CompactionError::SummaryFailed(ProviderError::Cancelled).counts_toward_breaker());
        assert!(CompactionError::NoProgress {
            tokens_after: 2,
            target: 1
        }
        .counts_toward_breaker());
        assert!(!CompactionError::Cancelled.counts_toward_breaker());
        assert!(!CompactionError::NoMessagesToCompact.counts_toward_breaker());
        let conflict = CompactionError::from_store(StoreError::Conflict {
            session: pith_core::SessionId::new(),
            expected: 1,
            actual: 2,
        });
        assert!(matches!(
            conflict,
            CompactionError::Conflict {
                expected: 1,
                actual: 2
            }
        ));
        assert!(!conflict.counts_toward_breaker());
    }
}
