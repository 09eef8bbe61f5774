//! Stage 1: is a compaction needed?
//!
//! Two signals. The token signal compares the context size with the threshold
//! `window − max(15% of window, reserve)`; the context size is the larger of what the provider
//! last measured (plus an estimate of what came after) and the local estimate of the whole
//! request. The count signal fires when the view holds more than `max_messages` messages. Both
//! are pure functions of the view: the same input always gives the same answer, so a retried
//! decision is safe. Nothing here allocates in proportion to the history.

use pith_core::{Message, Part, Role, StoredView, TokenCounter, ToolDeclaration};

use crate::config::{CompactionConfig, ConfigError, ProjectionStyle, DEFAULT_RESERVE_TOKENS};
use crate::measure::PassTokens;
use crate::prompt::{clip_tool_output, clipped_len};

/// The share of the window always reserved, in percent.
pub const RESERVE_PERCENT: u64 = 15;

/// The threshold a context may grow to: `window − reserve`, where reserve = max(15% of the window,
/// `reserve_tokens`); an unset reserve means 16,384, falling back to 15% when that leaves no room.
pub fn threshold(window: u64, reserve: Option<u64>) -> Result<u64, ConfigError> {
    if window == 0 {
        return Err(ConfigError::ZeroWindow);
    }
    let percent = window * RESERVE_PERCENT / 100;
    let reserve = match reserve {
        Some(r) if r >= window => return Err(ConfigError::ReserveTooLarge { reserve: r, window }),
        Some(r) => r.max(percent),
        None if DEFAULT_RESERVE_TOKENS >= window => percent,
        None => DEFAULT_RESERVE_TOKENS.max(percent),
    };
    Ok(window - reserve)
}

/// The threshold with an optional ratio: `ratio` × window (floored, at least 1) when set, else
/// [`threshold`]'s reserve rule. A ratio outside (0, 1) is an error.
pub fn threshold_with_ratio(
    window: u64,
    reserve: Option<u64>,
    ratio: Option<f64>,
) -> Result<u64, ConfigError> {
    match ratio {
        None => threshold(window, reserve),
        Some(r) if !(r > 0.0 && r < 1.0) => Err(ConfigError::ThresholdRatio(r)),
        Some(_) if window == 0 => Err(ConfigError::ZeroWindow),
        Some(r) => Ok(((window as f64 * r).floor() as u64).max(1)),
    }
}

/// Tokens of one message as it is sent: tool-result bodies measured after the clipping rule.
pub fn message_tokens(counter: &dyn TokenCounter, message: &Message) -> u64 {
    message
        .parts
        .iter()
        .map(|part| match part {
            Part::ToolResult { content, .. } => tool_output_tokens(counter, content),
            other => counter.count_part(other),
        })
        .sum()
}

/// Tokens of a tool-result body after the clipping rule; measured from the clipped length, without
/// building the clipped text, when the counter depends on the length only.
fn tool_output_tokens(counter: &dyn TokenCounter, content: &str) -> u64 {
    if counter.count_len(0).is_some() {
        if let Some(tokens) = counter.count_len(clipped_len(content)) {
            return tokens;
        }
    }
    counter.count_text(&clip_tool_output(content))
}

/// Whether a message is conversation (not an instruction).
fn is_conversation(m: &Message) -> bool {
    !m.role.is_instruction()
}

/// Index into `view.tail` of the first entry written after the latest compaction.
///
/// Replies before it measured a context that no longer exists, so their usage is ignored.
pub fn first_entry_after_compaction(view: &StoredView) -> usize {
    let Some(meta) = &view.compaction else {
        return 0;
    };
    if let Some(n) = crate::prune::recorded_tail_entries(meta) {
        return (n as usize).min(view.tail.len());
    }
    view.tail
        .iter()
        .position(|e| e.as_message().is_some_and(|m| m.created_at > meta.created_at))
        .unwrap_or(view.tail.len())
}

/// Tokens of the summary as projected in `style`, for a view with a compaction.
pub fn summary_tokens(view: &StoredView, style: ProjectionStyle, counter: &dyn TokenCounter) -> u64 {
    match &view.compaction {
        Some(meta) => crate::projection::summary_messages(meta, style)
            .iter()
            .map(|m| message_tokens(counter, m))
            .sum(),
        None => 0,
    }
}

/// The local estimate of a whole request built from the view: tools, instructions, reminders,
/// summary and tail (tool-result bodies clipped).
pub fn estimate_view(
    view: &StoredView,
    style: ProjectionStyle,
    tools: &[ToolDeclaration],
    counter: &dyn TokenCounter,
) -> u64 {
    let fixed: u64 = counter.count_tools(tools)
        + view
            .instructions
            .iter()
            .map(|m| message_tokens(counter, m))
            .sum::<u64>()
        + crate::projection::recent_reminders(&view.reminders)
            .iter()
            .map(|m| message_tokens(counter, m))
            .sum::<u64>()
        + summary_tokens(view, style, counter);
    fixed
        + view
            .tail_messages()
            .map(|m| message_tokens(counter, m))
            .sum::<u64>()
}

/// The last reply after the latest compaction that reported usage: (its position among the tail
/// entries, its measured context size).
pub fn last_measured_reply(view: &StoredView) -> Option<(usize, u64, u64)> {
    let from = first_entry_after_compaction(view);
    view.tail[from..].iter().enumerate().rev().find_map(|(i, e)| {
        let m = e.as_message()?;
        let usage = m.usage.filter(|u| m.role == Role::Assistant && !u.is_zero())?;
        Some((from + i, usage.context_tokens(), usage.prompt_tokens()))
    })
}

/// The context size to decide on (seed 002): the larger of (a) the last reply's reported usage
/// plus the estimate of everything after it, counting only replies after the latest compaction,
/// and (b) the estimate of the whole request.
pub fn context_tokens(
    view: &StoredView,
    style: ProjectionStyle,
    tools: &[ToolDeclaration],
    counter: &dyn TokenCounter,
) -> u64 {
    let estimate = estimate_view(view, style, tools, counter);
    let reported = last_measured_reply(view).map(|(pos, measured, _)| {
        measured
            + view.tail[pos + 1..]
                .iter()
                .filter_map(|e| e.as_message())
                .map(|m| message_tokens(counter, m))
                .sum::<u64>()
    });
    estimate.max(reported.unwrap_or(0))
}

/// Number of conversation messages in the view's tail (instructions excluded): the count signal.
pub fn view_message_count(view: &StoredView) -> usize {
    view.tail_messages().filter(|m| is_conversation(m)).count()
}

/// The outcome of the overflow stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The view fits; no compaction.
    NotNeeded {
        /// Context size of the view.
        context_tokens: u64,
        /// The threshold.
        threshold: u64,
    },
    /// The context is over the threshold.
    Tokens {
        /// Context size of the view.
        context_tokens: u64,
        /// The threshold.
        threshold: u64,
    },
    /// The view holds more messages than `max_messages`.
    Count {
        /// Messages in the view.
        messages: usize,
        /// The configured maximum.
        max_messages: usize,
    },
}

impl Decision {
    /// Whether a compaction is needed.
    pub fn is_needed(&self) -> bool {
        !matches!(self, Decision::NotNeeded { .. })
    }
}

/// Decides whether the view needs compacting under `window`.
pub fn decide(
    view: &StoredView,
    tools: &[ToolDeclaration],
    counter: &dyn TokenCounter,
    window: u64,
    config: &CompactionConfig,
) -> Result<Decision, ConfigError> {
    let threshold = config.threshold(window)?;
    Ok(decision(
        view,
        context_tokens(view, config.projection, tools, counter),
        threshold,
        config,
    ))
}

/// [`decide`] on a view counted once for the whole pass (the same decision).
pub fn decide_counted(
    view: &StoredView,
    tokens: &PassTokens,
    window: u64,
    config: &CompactionConfig,
) -> Result<Decision, ConfigError> {
    let threshold = config.threshold(window)?;
    Ok(decision(view, tokens.context_tokens(), threshold, config))
}

/// Both signals, given the context size: tokens first, then the message count.
fn decision(view: &StoredView, context_tokens: u64, threshold: u64, config: &CompactionConfig) -> Decision {
    if context_tokens > threshold {
        return Decision::Tokens {
            context_tokens,
            threshold,
        };
    }
    let messages = view_message_count(view);
    if messages > config.effective_max_messages() {
        return Decision::Count {
            messages,
            max_messages: config.max_messages,
        };
    }
    Decision::NotNeeded {
        context_tokens,
        threshold,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::{EstimateCounter, SessionRecord, Usage};

    fn view_of(messages: Vec<Message>) -> StoredView {
        let log: Vec<_> = messages.into_iter().map(Into::into).collect();
        StoredView::from_log(SessionRecord::new("scripted/test", vec![]), &log).unwrap()
    }

    #[test]
    fn threshold_follows_the_reserve_rule() {
        assert_eq!(threshold(200_000, None).unwrap(), 170_000);
        assert_eq!(threshold(100_000, None).unwrap(), 100_000 - 16_384);
        // 16,384 would leave nothing of an 8k window: 15% instead.
        assert_eq!(threshold(8_192, None).unwrap(), 8_192 - 1_228);
        assert_eq!(threshold(2_048, None).unwrap(), 2_048 - 307);
        assert_eq!(threshold(10_000, Some(500)).unwrap(), 8_500);
        assert_eq!(threshold(10_000, Some(4_000)).unwrap(), 6_000);
        assert!(matches!(
            threshold(10_000, Some(10_000)),
            Err(ConfigError::ReserveTooLarge { .. })
        ));
    }

    #[test]
    fn provider_usage_counts_only_after_the_latest_compaction_and_wins_when_larger() {
        let mut reply = Message::assistant("ok");
        reply.usage = Some(Usage::from_openai(5_000, 100, 0));
        let view = view_of(vec![Message::user("hi"), reply, Message::user("abcdefgh")]);
        // usage 5,100 + 2 tokens of the later user message
        assert_eq!(
            context_tokens(&view, ProjectionStyle::Reminder, &[], &EstimateCounter),
            5_102
        );
        let small = view_of(vec![Message::user("x".repeat(4_000))]);
        assert_eq!(
            context_tokens(&small, ProjectionStyle::Reminder, &[], &EstimateCounter),
            1_000
        );
    }

    #[test]
    fn decide_fires_on_tokens_then_count() {
        let config = CompactionConfig::default().with_max_messages(4);
        let big = view_of(vec![Message::user("x".repeat(40_000))]);
        assert!(matches!(
            decide(&big, &[], &EstimateCounter, 8_192, &config).unwrap(),
            Decision::Tokens { .. }
        ));
        let many = view_of((0..5).map(|i| Message::user(format!("m{i}"))).collect());
        assert_eq!(
            decide(&many, &[], &EstimateCounter, 8_192, &config).unwrap(),
            Decision::Count {
                messages: 5,
                max_messages: 4
            }
        );
        let few = view_of(vec![Message::user("hi")]);
        assert!(!decide(&few, &[], &EstimateCounter, 8_192, &config)
            .unwrap()
            .is_needed());
    }

    #[test]
    fn huge_tool_outputs_are_measured_clipped() {
        let m = Message::tool_result("c", "y".repeat(868_000), false);
        let t = message_tokens(&EstimateCounter, &m);
        assert!(t < 1_100, "{t}");
    }

    #[test]
    fn length_measured_outputs_count_as_their_clipped_text() {
        struct TextOnly;
        impl TokenCounter for TextOnly {
            fn count_text(&self, text: &str) -> u64 {
                EstimateCounter.count_text(text)
            }
        }
        for body in ["short".to_string(), "é".repeat(4_321), "y".repeat(868_000)] {
            let m = Message::tool_result("c", body, false);
            assert_eq!(
                message_tokens(&EstimateCounter, &m),
                message_tokens(&TextOnly, &m)
            );
        }
    }

    #[test]
    fn the_counted_decision_is_the_decision() {
        let mut reply = Message::assistant("ok");
        reply.usage = Some(Usage::from_openai(7_000, 100, 0));
        let config = CompactionConfig::default().with_max_messages(4);
        for view in [
            view_of(vec![Message::user("x".repeat(40_000))]),
            view_of((0..5).map(|i| Message::user(format!("m{i}"))).collect()),
            view_of(vec![Message::user("hi"), reply, Message::user("abcdefgh")]),
        ] {
            let pass = PassTokens::new(&view, config.projection, &[], &EstimateCounter);
            assert_eq!(
                decide_counted(&view, &pass, 8_192, &config).unwrap(),
                decide(&view, &[], &EstimateCounter, 8_192, &config).unwrap()
            );
        }
    }
}
