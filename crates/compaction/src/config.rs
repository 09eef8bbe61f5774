//! Compaction configuration and its validation.
//!
//! Every number has a default that works from a 2k-token local model to a 1M-token window: the
//! budgets that matter (the tail kept verbatim, the reserve) scale with the window, and
//! [`CompactionConfig::validate`] rejects combinations that could never produce a valid view.

use std::sync::Arc;

use crate::summary::Summarizer;

/// Default number of recent turns kept verbatim.
pub const DEFAULT_KEEP_RECENT_TURNS: usize = 4;
/// Default token budget of the verbatim tail (before scaling to the window).
pub const DEFAULT_KEEP_RECENT_TOKENS: u64 = 20_000;
/// Default length a summary is asked for, and the bound on a merged summary.
pub const DEFAULT_MAX_SUMMARY_TOKENS: u64 = 1_000;
/// Default message-count signal: more messages than this in the view trigger a compaction.
pub const DEFAULT_MAX_MESSAGES: usize = 50;
/// Default consecutive failures that open the circuit.
pub const DEFAULT_MAX_FAILURES: u32 = 3;
/// Default reserve for the next prompt and reply when none is configured.
pub const DEFAULT_RESERVE_TOKENS: u64 = 16_384;
/// Default share of the threshold a committed view may use.
pub const DEFAULT_TARGET_RATIO: f64 = 0.6;
/// Default cap on summary calls (chunks, merges, retries) of one compaction.
pub const DEFAULT_MAX_SUMMARY_CALLS: u32 = 16;

/// How the summary is rendered into the model view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ProjectionStyle {
    /// One user message `<system-reminder>…</system-reminder>` (a tag in text, not a system role).
    #[default]
    Reminder,
    /// A user continuation message followed by an assistant handoff message.
    Handoff,
    /// One plain user message wrapping the summary.
    SummaryMessage,
}

/// How a compaction after an earlier one produces its summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum IncrementalMode {
    /// Send the delta with the previous summary in `<previous-summary>`; one bounded summary out.
    #[default]
    Update,
    /// Summarise the delta alone and append it; merge with an `Update` call once the
    /// concatenation passes `max_summary_tokens`.
    Append,
}

/// A configuration that can never produce a valid view.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The context window is zero.
    #[error("context window must be positive")]
    ZeroWindow,
    /// An explicit reserve leaves no room in the window.
    #[error("reserve_tokens {reserve} must be smaller than the context window {window}")]
    ReserveTooLarge {
        /// The configured reserve.
        reserve: u64,
        /// The model's window.
        window: u64,
    },
    /// `target_ratio` is outside (0, 1].
    #[error("target_ratio {0} must be greater than 0 and at most 1")]
    TargetRatio(f64),
    /// A count that must be positive is zero.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// `max_messages` is too small for the count signal to make progress.
    #[error("max_messages {0} must be at least 2 so a compaction can keep max_messages / 2 messages")]
    MaxMessagesTooSmall(usize),
    /// `threshold_ratio` is outside (0, 1).
    #[error("threshold_ratio {0} must be greater than 0 and smaller than 1")]
    ThresholdRatio(f64),
}

/// What a compaction keeps verbatim after the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum TailPolicy {
    /// The most recent turns within the tail budget (pith's and pi's policy).
    #[default]
    RecentTurns,
    /// No conversation message at all: the summary covers everything, and the most recent user
    /// messages within `keep_recent_tokens` follow it verbatim, in order (Codex's policy: the tool
    /// history is dropped, so no tool pair can ever be split).
    UserMessages,
}

/// Opt-in relevance selection: a grader picks which groups of the span reach the summarizer.
#[derive(Clone)]
#[non_exhaustive]
pub struct RelevanceConfig {
    /// The grader that scores groups.
    pub grader: Arc<dyn crate::relevance::Grader>,
}

impl std::fmt::Debug for RelevanceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelevanceConfig").finish_non_exhaustive()
    }
}

impl RelevanceConfig {
    /// Relevance selection with this grader.
    pub fn new(grader: Arc<dyn crate::relevance::Grader>) -> Self {
        Self { grader }
    }
}

/// Configuration of the compaction service.
#[derive(Clone)]
#[non_exhaustive]
pub struct CompactionConfig {
    /// Recent turns kept verbatim (a turn starts at a user message).
    pub keep_recent_turns: usize,
    /// Token budget of the verbatim tail; the effective budget is min(this, 40% of the threshold).
    pub keep_recent_tokens: u64,
    /// Length the summary prompt asks for, and the bound on a merged or deterministic summary.
    pub max_summary_tokens: u64,
    /// The model that writes summaries (`None`: the session's model).
    pub summary_model: Option<String>,
    /// Summarise only the delta since the previous compaction.
    pub enable_incremental: bool,
    /// How the delta is folded into the previous summary.
    pub incremental_mode: IncrementalMode,
    /// The count signal: more messages than this in the view trigger a compaction.
    pub max_messages: usize,
    /// Consecutive counted failures that open the circuit.
    pub max_failures: u32,
    /// Reserve for the next prompt and reply (`None`: 16,384 with the 15% fallback).
    pub reserve_tokens: Option<u64>,
    /// Share of the threshold a committed view may use at most.
    pub target_ratio: f64,
    /// Cap on summary calls of one compaction (chunks, merges and overflow retries included).
    pub max_summary_calls: u32,
    /// How the summary is rendered into the view.
    pub projection: ProjectionStyle,
    /// The summarizer (`None`: the model-backed one, through the router).
    pub summarizer: Option<Arc<dyn Summarizer>>,
    /// Opt-in relevance selection (off by default: no grader request is made).
    pub relevance: Option<RelevanceConfig>,
    /// Whether the count signal (`max_messages`) can trigger a compaction (on by default).
    pub count_signal: bool,
    /// Compact at this share of the window instead of the reserve rule (`None`: the reserve rule).
    pub threshold_ratio: Option<f64>,
    /// What is kept verbatim after the summary.
    pub tail_policy: TailPolicy,
    /// The artifact ledger: paths, user messages, errors and decisions of every summarised span,
    /// carried forward and appended to the handoff (on by default).
    pub ledger: bool,
    /// Tiered compaction: mask old tool outputs before summarising, and commit the masks alone
    /// when that brings the view to `target_ratio` × threshold (on by default; see [`crate::tier`]).
    pub tiered: bool,
    /// Speculative compaction: past the soft threshold the summary is written in the background
    /// and adopted at the threshold when still valid ([`crate::speculative`]; on by default).
    pub speculative: bool,
}

impl std::fmt::Debug for CompactionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionConfig")
            .field("keep_recent_turns", &self.keep_recent_turns)
            .field("keep_recent_tokens", &self.keep_recent_tokens)
            .field("max_summary_tokens", &self.max_summary_tokens)
            .field("summary_model", &self.summary_model)
            .field("enable_incremental", &self.enable_incremental)
            .field("incremental_mode", &self.incremental_mode)
            .field("max_messages", &self.max_messages)
            .field("max_failures", &self.max_failures)
            .field("reserve_tokens", &self.reserve_tokens)
            .field("target_ratio", &self.target_ratio)
            .field("max_summary_calls", &self.max_summary_calls)
            .field("projection", &self.projection)
            .field(
                "summarizer",
                &self
                    .summarizer
                    .as_ref()
                    .map(|s| s.strategy().as_str())
                    .unwrap_or("model"),
            )
            .field("relevance", &self.relevance.is_some())
            .field("count_signal", &self.count_signal)
            .field("threshold_ratio", &self.threshold_ratio)
            .field("tail_policy", &self.tail_policy)
            .field("ledger", &self.ledger)
            .field("tiered", &self.tiered)
            .field("speculative", &self.speculative)
            .finish()
    }
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            keep_recent_turns: DEFAULT_KEEP_RECENT_TURNS,
            keep_recent_tokens: DEFAULT_KEEP_RECENT_TOKENS,
            max_summary_tokens: DEFAULT_MAX_SUMMARY_TOKENS,
            summary_model: None,
            enable_incremental: true,
            incremental_mode: IncrementalMode::Update,
            max_messages: DEFAULT_MAX_MESSAGES,
            max_failures: DEFAULT_MAX_FAILURES,
            reserve_tokens: None,
            target_ratio: DEFAULT_TARGET_RATIO,
            max_summary_calls: DEFAULT_MAX_SUMMARY_CALLS,
            projection: ProjectionStyle::Reminder,
            summarizer: None,
            relevance: None,
            count_signal: true,
            threshold_ratio: None,
            tail_policy: TailPolicy::RecentTurns,
            ledger: true,
            tiered: true,
            speculative: true,
        }
    }
}

impl CompactionConfig {
    /// Sets the number of recent turns kept verbatim.
    pub fn with_keep_recent_turns(mut self, turns: usize) -> Self {
        self.keep_recent_turns = turns;
        self
    }

    /// Sets the token budget of the verbatim tail.
    pub fn with_keep_recent_tokens(mut self, tokens: u64) -> Self {
        self.keep_recent_tokens = tokens;
        self
    }

    /// Sets the summary length.
    pub fn with_max_summary_tokens(mut self, tokens: u64) -> Self {
        self.max_summary_tokens = tokens;
        self
    }

    /// Uses another model for summaries.
    pub fn with_summary_model(mut self, model: impl Into<String>) -> Self {
        self.summary_model = Some(model.into());
        self
    }

    /// Turns incremental summaries on or off.
    pub fn with_incremental(mut self, enabled: bool) -> Self {
        self.enable_incremental = enabled;
        self
    }

    /// Chooses how incremental compactions fold the delta in.
    pub fn with_incremental_mode(mut self, mode: IncrementalMode) -> Self {
        self.incremental_mode = mode;
        self
    }

    /// Sets the message-count signal.
    pub fn with_max_messages(mut self, max: usize) -> Self {
        self.max_messages = max;
        self
    }

    /// Sets the failures that open the circuit.
    pub fn with_max_failures(mut self, max: u32) -> Self {
        self.max_failures = max;
        self
    }

    /// Sets an explicit reserve (must be smaller than the window).
    pub fn with_reserve_tokens(mut self, reserve: u64) -> Self {
        self.reserve_tokens = Some(reserve);
        self
    }

    /// Sets the share of the threshold a committed view may use.
    pub fn with_target_ratio(mut self, ratio: f64) -> Self {
        self.target_ratio = ratio;
        self
    }

    /// Caps the summary calls of one compaction.
    pub fn with_max_summary_calls(mut self, calls: u32) -> Self {
        self.max_summary_calls = calls;
        self
    }

    /// Chooses how the summary is rendered into the view.
    pub fn with_projection(mut self, style: ProjectionStyle) -> Self {
        self.projection = style;
        self
    }

    /// Uses this summarizer instead of the model-backed one.
    pub fn with_summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> Self {
        self.summarizer = Some(summarizer);
        self
    }

    /// Uses the deterministic (model-free) summarizer.
    pub fn with_deterministic_summarizer(self) -> Self {
        self.with_summarizer(Arc::new(crate::deterministic::DeterministicSummarizer::new()))
    }

    /// Turns on relevance selection with this grader.
    pub fn with_relevance(mut self, relevance: RelevanceConfig) -> Self {
        self.relevance = Some(relevance);
        self
    }

    /// pi's policy: reserve 16,384 (15% fallback), keep the newest 20,000 tokens (scaled to at most
    /// 40% of the threshold), no turn limit, no count signal, no artifact ledger, no tiered masking,
    /// no speculation.
    ///
    /// For comparing pith's defaults with the policy of the pi coding agent on the same sessions.
    pub fn pi() -> Self {
        Self::default()
            .with_reserve_tokens(DEFAULT_RESERVE_TOKENS)
            .with_keep_recent_tokens(20_000)
            .with_keep_recent_turns(usize::MAX)
            .with_count_signal(false)
            .with_ledger(false)
            .with_tiered(false)
            .with_speculative(false)
    }

    /// Codex's policy: compact at 90% of the window; the new view is the instructions, a summary
    /// of everything and the most recent user messages within 20,000 tokens (the tool history is
    /// dropped); no count signal, no artifact ledger, no tiered masking, no speculation.
    ///
    /// For comparing pith's defaults with the policy of the Codex CLI on the same sessions.
    pub fn codex() -> Self {
        Self::default()
            .with_threshold_ratio(0.9)
            .with_keep_recent_tokens(20_000)
            .with_tail_policy(TailPolicy::UserMessages)
            .with_count_signal(false)
            .with_ledger(false)
            .with_tiered(false)
            .with_speculative(false)
    }

    /// Turns the count signal on or off (off: only tokens trigger a compaction).
    pub fn with_count_signal(mut self, enabled: bool) -> Self {
        self.count_signal = enabled;
        self
    }

    /// Compacts at `ratio` × window instead of the reserve rule (must be in (0, 1)).
    pub fn with_threshold_ratio(mut self, ratio: f64) -> Self {
        self.threshold_ratio = Some(ratio);
        self
    }

    /// Chooses what is kept verbatim after the summary.
    pub fn with_tail_policy(mut self, policy: TailPolicy) -> Self {
        self.tail_policy = policy;
        self
    }

    /// Turns the artifact ledger on or off.
    pub fn with_ledger(mut self, enabled: bool) -> Self {
        self.ledger = enabled;
        self
    }

    /// Turns tiered compaction (masking old tool outputs before summarising) on or off.
    pub fn with_tiered(mut self, enabled: bool) -> Self {
        self.tiered = enabled;
        self
    }

    /// Turns speculative compaction on or off.
    pub fn with_speculative(mut self, enabled: bool) -> Self {
        self.speculative = enabled;
        self
    }

    /// The message count over which the count signal fires (`usize::MAX` when it is off).
    pub fn effective_max_messages(&self) -> usize {
        if self.count_signal {
            self.max_messages
        } else {
            usize::MAX
        }
    }

    /// The threshold a context may grow to under `window`: `threshold_ratio` × window when set,
    /// else the reserve rule of [`crate::overflow::threshold`].
    pub fn threshold(&self, window: u64) -> Result<u64, ConfigError> {
        crate::overflow::threshold_with_ratio(window, self.reserve_tokens, self.threshold_ratio)
    }

    /// Checks the configuration against a model's window.
    pub fn validate(&self, window: u64) -> Result<(), ConfigError> {
        self.threshold(window)?;
        if !(self.target_ratio > 0.0 && self.target_ratio <= 1.0) {
            return Err(ConfigError::TargetRatio(self.target_ratio));
        }
        if self.keep_recent_turns == 0 {
            return Err(ConfigError::Zero("keep_recent_turns"));
        }
        if self.max_summary_tokens == 0 {
            return Err(ConfigError::Zero("max_summary_tokens"));
        }
        if self.max_failures == 0 {
            return Err(ConfigError::Zero("max_failures"));
        }
        if self.max_summary_calls == 0 {
            return Err(ConfigError::Zero("max_summary_calls"));
        }
        if self.count_signal && self.max_messages < 2 {
            return Err(ConfigError::MaxMessagesTooSmall(self.max_messages));
        }
        Ok(())
    }

    /// The effective tail budget for a threshold: min(configured, 40% of the threshold).
    pub fn effective_keep_recent_tokens(&self, threshold: u64) -> u64 {
        self.keep_recent_tokens.min(threshold.saturating_mul(2) / 5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_design() {
        let c = CompactionConfig::default();
        assert_eq!(c.keep_recent_turns, 4);
        assert_eq!(c.keep_recent_tokens, 20_000);
        assert_eq!(c.max_summary_tokens, 1_000);
        assert!(c.enable_incremental);
        assert_eq!(c.max_messages, 50);
        assert_eq!(c.max_failures, 3);
        assert_eq!(c.reserve_tokens, None);
        assert!((c.target_ratio - 0.6).abs() < f64::EPSILON);
        assert_eq!(c.projection, ProjectionStyle::Reminder);
        assert!(c.relevance.is_none());
        assert!(c.validate(128_000).is_ok());
        assert!(c.validate(2_048).is_ok());
    }

    #[test]
    fn invalid_configurations_are_typed_errors() {
        let c = CompactionConfig::default().with_reserve_tokens(8_192);
        assert_eq!(
            c.validate(8_192),
            Err(ConfigError::ReserveTooLarge {
                reserve: 8_192,
                window: 8_192
            })
        );
        assert_eq!(
            CompactionConfig::default()
                .with_target_ratio(1.5)
                .validate(10_000),
            Err(ConfigError::TargetRatio(1.5))
        );
        assert_eq!(
            CompactionConfig::default()
                .with_keep_recent_turns(0)
                .validate(10_000),
            Err(ConfigError::Zero("keep_recent_turns"))
        );
        assert_eq!(
            CompactionConfig::default().with_max_messages(1).validate(10_000),
            Err(ConfigError::MaxMessagesTooSmall(1))
        );
        assert_eq!(
            CompactionConfig::default().validate(0),
            Err(ConfigError::ZeroWindow)
        );
    }

    #[test]
    fn the_pi_and_codex_presets() {
        let pi = CompactionConfig::pi();
        assert_eq!(pi.reserve_tokens, Some(16_384));
        assert_eq!(pi.effective_keep_recent_tokens(1_000_000), 20_000);
        assert_eq!(pi.effective_max_messages(), usize::MAX);
        assert!(!pi.ledger);
        assert_eq!(pi.threshold(200_000), Ok(170_000));
        assert!(pi.validate(32_000).is_ok());

        let codex = CompactionConfig::codex();
        assert_eq!(codex.threshold(32_000), Ok(28_800));
        assert_eq!(codex.tail_policy, TailPolicy::UserMessages);
        assert_eq!(codex.effective_max_messages(), usize::MAX);
        assert!(codex.validate(2_048).is_ok());
        assert_eq!(
            CompactionConfig::default()
                .with_threshold_ratio(1.0)
                .validate(10_000),
            Err(ConfigError::ThresholdRatio(1.0))
        );
        assert_eq!(
            CompactionConfig::default()
                .with_threshold_ratio(0.0)
                .validate(10_000),
            Err(ConfigError::ThresholdRatio(0.0))
        );
        // With the count signal off, max_messages is not checked.
        assert!(CompactionConfig::default()
            .with_max_messages(1)
            .with_count_signal(false)
            .validate(10_000)
            .is_ok());
    }

    #[test]
    fn tail_budget_scales_with_the_window() {
        let c = CompactionConfig::default();
        assert_eq!(c.effective_keep_recent_tokens(1_000_000), 20_000);
        assert_eq!(c.effective_keep_recent_tokens(1_700), 680);
    }
}
