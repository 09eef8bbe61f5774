//! What starts a compaction, and what a finished one reports.

use pith_core::{CompactionMeta, CompactionStrategy, CompactionTriggerKind, Usage};
use pith_router::ProviderError;

/// Why a compaction is requested.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CompactionTrigger {
    /// The local estimate says the next request will not fit: runs the overflow decision first.
    Proactive,
    /// The provider rejected a request as too long: skips the decision (the provider made it) and
    /// calibrates the estimate from the token counts in the error when present.
    Reactive(OverflowInfo),
    /// Someone asked for it, optionally with extra instructions for the summary.
    Manual {
        /// Extra instructions for the summary ("keep the API details", ...).
        instructions: Option<String>,
    },
}

impl CompactionTrigger {
    /// The kind recorded in the compaction record.
    pub fn kind(&self) -> CompactionTriggerKind {
        match self {
            CompactionTrigger::Proactive => CompactionTriggerKind::Proactive,
            CompactionTrigger::Reactive(_) => CompactionTriggerKind::Reactive,
            CompactionTrigger::Manual { .. } => CompactionTriggerKind::Manual,
        }
    }

    /// The manual instructions, if any (empty strings count as none).
    pub fn instructions(&self) -> Option<&str> {
        match self {
            CompactionTrigger::Manual {
                instructions: Some(text),
            } if !text.trim().is_empty() => Some(text.as_str()),
            _ => None,
        }
    }
}

/// What a provider said when it rejected a request as too long.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OverflowInfo {
    /// The provider's message.
    pub message: String,
    /// The window the provider stated, when it did.
    pub limit: Option<u64>,
    /// The request size the provider stated, when it did.
    pub requested: Option<u64>,
}

impl OverflowInfo {
    /// The overflow details of a provider error, or `None` when it is not an overflow.
    pub fn from_error(error: &ProviderError) -> Option<Self> {
        match error {
            ProviderError::ContextOverflow {
                message,
                limit,
                requested,
            } => Some(Self {
                message: message.clone(),
                limit: *limit,
                requested: *requested,
            }),
            _ => None,
        }
    }
}

/// A committed (or already committed) compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionResult {
    /// The compaction record.
    pub meta: CompactionMeta,
    /// Context size before.
    pub tokens_before: u64,
    /// Context size of the new view.
    pub tokens_after: u64,
    /// How the handoff was produced.
    pub strategy: CompactionStrategy,
    /// Usage of this call's summary requests (zero for a no-op).
    pub usage: Usage,
    /// The result already existed: nothing was summarised or committed by this call.
    pub noop: bool,
    /// Summary calls made by this call.
    pub summary_calls: u32,
}

impl CompactionResult {
    /// The result of an existing record, reported again without any work.
    pub fn existing(meta: CompactionMeta) -> Self {
        Self {
            tokens_before: meta.tokens_before,
            tokens_after: meta.tokens_after,
            strategy: meta.strategy,
            usage: Usage::default(),
            noop: true,
            summary_calls: 0,
            meta,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_info_comes_only_from_overflows() {
        let e = ProviderError::ContextOverflow {
            message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
            limit: Some(200_000),
            requested: Some(210_000),
        };
        let info = OverflowInfo::from_error(&e);
        assert_eq!(info.and_then(|i| i.requested), Some(210_000));
        assert!(OverflowInfo::from_error(&ProviderError::Cancelled).is_none());
        let manual = CompactionTrigger::Manual {
            instructions: Some("  ".into()),
        };
        assert_eq!(manual.instructions(), None);
        assert_eq!(manual.kind(), CompactionTriggerKind::Manual);
    }
}
