//! Stage 4: the summarizer interface and the ledger of its calls.
//!
//! A [`Summarizer`] turns a span of messages (plus the previous summary, the kept tail for
//! reference and optional manual instructions) into summary text. The model-backed one
//! ([`crate::model::ModelSummarizer`]) calls the summary model through the router, chunking
//! recursively when the span does not fit; the deterministic one
//! ([`crate::deterministic::DeterministicSummarizer`]) needs no model. Every model call is
//! reported to the job's [`CallLog`], so its usage reaches the store's ledger even when the
//! summary is discarded.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use pith_core::{CompactionStrategy, Message, SessionId, TokenCounter, Usage};
use pith_store::UsagePurpose;
use tokio_util::sync::CancellationToken;

use crate::error::CompactionError;
use crate::prompt::PromptMode;

/// One model call made for a compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The model called.
    pub model: String,
    /// What the call was for.
    pub purpose: UsagePurpose,
    /// Reported usage (zero when the call failed without a reply).
    pub usage: Usage,
}

/// The calls a compaction made, shared between the service and its summarizer.
#[derive(Debug, Default)]
pub struct CallLog {
    calls: Mutex<Vec<CallRecord>>,
}

impl CallLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one call.
    pub fn record(&self, model: &str, purpose: UsagePurpose, usage: Usage) {
        let mut calls = match self.calls.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        calls.push(CallRecord {
            model: model.to_string(),
            purpose,
            usage,
        });
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<CallRecord> {
        match self.calls.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Number of calls for a purpose.
    pub fn count(&self, purpose: UsagePurpose) -> u32 {
        self.calls().iter().filter(|c| c.purpose == purpose).count() as u32
    }

    /// Total usage of all calls for a purpose.
    pub fn usage(&self, purpose: UsagePurpose) -> Usage {
        self.calls()
            .iter()
            .filter(|c| c.purpose == purpose)
            .map(|c| c.usage)
            .sum()
    }
}

/// What to summarise.
#[derive(Clone)]
#[non_exhaustive]
pub struct SummaryJob {
    /// The session (for tracing).
    pub session: SessionId,
    /// The summary model (`provider/model`).
    pub model: String,
    /// The summary model's context window.
    pub window: u64,
    /// The messages to summarise, oldest first.
    pub span: Vec<Message>,
    /// The messages that stay verbatim (for reference only; never summarised).
    pub kept: Vec<Message>,
    /// The previous summary, when the span continues an earlier compaction.
    pub previous_summary: Option<String>,
    /// How to treat the previous summary: [`PromptMode::Update`] folds the span into it,
    /// [`PromptMode::First`] summarises the span alone.
    pub mode: PromptMode,
    /// Manual extra instructions.
    pub instructions: Option<String>,
    /// The length to ask for and the bound on merged summaries.
    pub max_summary_tokens: u64,
    /// The cap on model calls.
    pub max_calls: u32,
    /// The token counter used for budgets.
    pub counter: Arc<dyn TokenCounter>,
    /// Cancels the job between and during calls.
    pub cancel: CancellationToken,
    /// Where calls are reported.
    pub calls: Arc<CallLog>,
}

impl std::fmt::Debug for SummaryJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummaryJob")
            .field("session", &self.session)
            .field("model", &self.model)
            .field("window", &self.window)
            .field("span", &self.span.len())
            .field("kept", &self.kept.len())
            .field("previous_summary", &self.previous_summary.is_some())
            .field("mode", &self.mode)
            .field("max_summary_tokens", &self.max_summary_tokens)
            .field("max_calls", &self.max_calls)
            .finish_non_exhaustive()
    }
}

/// A summary.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryOutput {
    /// The summary text (never empty).
    pub text: String,
    /// How it was produced.
    pub strategy: CompactionStrategy,
    /// The model that wrote it, for model summaries.
    pub model: Option<String>,
}

/// Turns a span into a summary.
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// How this summarizer produces summaries (recorded in every compaction record).
    fn strategy(&self) -> CompactionStrategy;

    /// Summarises a job. Model calls are reported to `job.calls` as they finish.
    async fn summarize(&self, job: SummaryJob) -> Result<SummaryOutput, CompactionError>;
}

#[async_trait]
impl<T: Summarizer + ?Sized> Summarizer for Arc<T> {
    fn strategy(&self) -> CompactionStrategy {
        (**self).strategy()
    }

    async fn summarize(&self, job: SummaryJob) -> Result<SummaryOutput, CompactionError> {
        (**self).summarize(job).await
    }
}

/// Cuts text to at most `max_tokens` tokens of `counter`, on a character boundary, marking the cut.
pub fn truncate_to_tokens(text: &str, max_tokens: u64, counter: &dyn TokenCounter) -> String {
    if counter.count_text(text) <= max_tokens {
        return text.to_string();
    }
    const MARK: &str = "\n[summary truncated]";
    let budget = max_tokens.saturating_sub(counter.count_text(MARK));
    // Binary search on character boundaries for the longest prefix within budget.
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
    let (mut lo, mut hi) = (0usize, bounds.len() - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if counter.count_text(&text[..bounds[mid]]) <= budget {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut out = text[..bounds[lo]].trim_end().to_string();
    out.push_str(MARK);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::EstimateCounter;

    #[test]
    fn truncation_respects_the_budget_and_char_boundaries() {
        let text = "é".repeat(5_000);
        let out = truncate_to_tokens(&text, 100, &EstimateCounter);
        assert!(EstimateCounter.count_text(&out) <= 100);
        assert!(out.ends_with("[summary truncated]"));
        assert_eq!(truncate_to_tokens("short", 100, &EstimateCounter), "short");
    }

    #[test]
    fn the_call_log_sums_by_purpose() {
        let log = CallLog::new();
        log.record("m", UsagePurpose::Summary, Usage::from_openai(10, 2, 0));
        log.record("m", UsagePurpose::Grader, Usage::from_openai(5, 1, 0));
        log.record("m", UsagePurpose::Summary, Usage::from_openai(1, 1, 0));
        assert_eq!(log.count(UsagePurpose::Summary), 2);
        assert_eq!(log.usage(UsagePurpose::Summary).input, 11);
    }
}
