//! One compaction planning pass with no model: the work before a summary call.
//!
//! Mirrors what `CompactionService::compact` does before it calls the summarizer: token
//! accounting and the overflow decision, the cut (`select` inside `plan`), the span and kept
//! messages copied out of the view, the summary request rendered (`prompt`) and measured against
//! the summary model's budget. This is the counterpart of pi's `prepareCompaction` +
//! `convertToLlm` + `serializeConversation`, which the targets compare against.

use pith_compaction::budget::request_tokens;
use pith_compaction::overflow::{self, Decision};
use pith_compaction::plan::{plan, PlanInput};
use pith_compaction::prompt::{render_messages, PromptInput, PromptMode};
use pith_compaction::{CompactionConfig, CompactionError, ConfigError};
use pith_core::{Message, StoredView, TokenCounter};

/// Why a planning pass could not run.
#[derive(Debug, thiserror::Error)]
pub enum PlanningError {
    /// The window and reserve do not form a valid threshold.
    #[error("invalid compaction configuration")]
    Config(#[from] ConfigError),
    /// The planner found no cut that reaches the target.
    #[error("the planner found no valid compaction")]
    Plan(#[from] CompactionError),
}

/// What one pass produced (kept so the optimiser cannot drop the work, and for reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassFigures {
    /// Whether the overflow stage asked for a compaction.
    pub needed: bool,
    /// The decided context size in tokens.
    pub context_tokens: u64,
    /// Messages summarised (0 when there was nothing to summarise).
    pub span_messages: usize,
    /// Bytes of the rendered summary request (system + user prompt).
    pub prompt_bytes: usize,
    /// Estimated tokens of the summary request.
    pub request_tokens: u64,
}

/// Runs one planning pass over `view` under `window`.
///
/// The pass runs in full whether or not the overflow stage fired, so every transcript measures
/// the same work: a manual compaction plans the same way.
///
/// # Errors
/// [`PlanningError`] when the configuration is invalid for `window` or no cut reaches the target.
pub fn plan_pass(
    view: &StoredView,
    window: u64,
    config: &CompactionConfig,
    counter: &dyn TokenCounter,
) -> Result<PassFigures, PlanningError> {
    let tools = &view.session.tools;
    let decision = overflow::decide(view, tools, counter, window, config)?;
    let (needed, context_tokens) = match decision {
        Decision::NotNeeded { context_tokens, .. } | Decision::Tokens { context_tokens, .. } => {
            (decision.is_needed(), context_tokens)
        }
        Decision::Count { .. } => (
            true,
            overflow::context_tokens(view, config.projection, tools, counter),
        ),
    };
    let threshold = overflow::threshold(window, config.reserve_tokens)?;
    let msgs: Vec<&Message> = view.tail_messages().collect();
    let planned = plan(PlanInput {
        view,
        msgs: &msgs,
        tools,
        counter,
        config,
        threshold,
        count_fired: matches!(decision, Decision::Count { .. }),
        requested: None,
    })?;
    let Some(planned) = planned else {
        return Ok(PassFigures {
            needed,
            context_tokens,
            span_messages: 0,
            prompt_bytes: 0,
            request_tokens: 0,
        });
    };
    let span: Vec<Message> = planned.layout.span.iter().map(|m| (*m).clone()).collect();
    let kept: Vec<Message> = planned.layout.kept.iter().map(|m| (*m).clone()).collect();
    let previous = view.compaction.as_ref().map(|m| m.summary.as_str());
    let request = render_messages(&PromptInput {
        span: &span,
        kept: &kept,
        previous_summary: previous,
        instructions: None,
        max_summary_tokens: config.max_summary_tokens,
        mode: if previous.is_some() {
            PromptMode::Update
        } else {
            PromptMode::First
        },
    });
    let prompt_bytes = request.iter().map(|m| m.text_content().len()).sum();
    Ok(PassFigures {
        needed,
        context_tokens,
        span_messages: span.len(),
        prompt_bytes,
        request_tokens: request_tokens(counter, &request),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::{EstimateCounter, SessionRecord};

    #[test]
    fn a_long_session_plans_a_summary_of_its_old_part() {
        let log: Vec<pith_core::Entry> = (0..60)
            .flat_map(|i| {
                [
                    Message::user(format!("request {i} {}", "x".repeat(2_000))).into(),
                    Message::assistant(format!("answer {i} {}", "y".repeat(2_000))).into(),
                ]
            })
            .collect();
        let view = StoredView::from_log(SessionRecord::new("m", vec![]), &log).unwrap();
        let figures = plan_pass(&view, 32_000, &CompactionConfig::default(), &EstimateCounter).unwrap();
        assert!(figures.needed);
        assert!(figures.span_messages > 60, "{figures:?}");
        assert!(figures.prompt_bytes > 100_000, "{figures:?}");
        assert!(figures.request_tokens >= figures.prompt_bytes as u64 / 4);
    }

    #[test]
    fn a_short_session_has_nothing_to_summarise() {
        let log: Vec<pith_core::Entry> = vec![Message::user("hi").into()];
        let view = StoredView::from_log(SessionRecord::new("m", vec![]), &log).unwrap();
        let figures = plan_pass(&view, 32_000, &CompactionConfig::default(), &EstimateCounter).unwrap();
        assert!(!figures.needed);
        assert_eq!(figures.span_messages, 0);
    }
}
