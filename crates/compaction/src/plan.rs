//! Planning a compaction before any model call: the cut, the budgets, the size check.
//!
//! The cut comes from [`crate::select`] under the scaled tail budget (shrunk when the provider
//! counted more tokens than the local estimate). Then the would-be view — measured with a
//! summary of `max_summary_tokens` — must reach `target_ratio` × threshold: if it does not, fewer
//! turns are kept (later cuts), then fewer old reminders; if even the newest message alone with no
//! reminder is too big, the compaction fails here, before spending a summary call on it.

use pith_core::{Message, StoredView, TokenCounter, ToolDeclaration};

use crate::config::{CompactionConfig, TailPolicy};
use crate::error::CompactionError;
use crate::overflow::{self, message_tokens};
use crate::projection::{recent_reminders, MAX_RETAINED_REMINDERS};
use crate::prune::{self, layout, Layout};
use crate::select::{latest_cut, next_cut, select_cut, valid_cuts, TailLimits};

/// What the planner needs.
#[derive(Clone, Copy)]
pub struct PlanInput<'a> {
    /// The stored view.
    pub view: &'a StoredView,
    /// Its tail messages, in order.
    pub msgs: &'a [&'a Message],
    /// The session's tool declarations.
    pub tools: &'a [ToolDeclaration],
    /// The token counter.
    pub counter: &'a dyn TokenCounter,
    /// The configuration.
    pub config: &'a CompactionConfig,
    /// The overflow threshold of the session model.
    pub threshold: u64,
    /// Whether the count signal fired (keep at most `max_messages / 2`).
    pub count_fired: bool,
    /// The request size a provider stated in an overflow error.
    pub requested: Option<u64>,
}

/// A planned compaction.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    /// The new view's layout.
    pub layout: Layout<'a>,
    /// Context size before.
    pub tokens_before: u64,
    /// `target_ratio` × threshold.
    pub target: u64,
    /// How much more the provider counts than the local estimate (≥ 1).
    pub calibration: f64,
    /// Tokens the handoff may add after the summary (the artifact ledger, or the user messages of
    /// [`TailPolicy::UserMessages`]); the layout fits the target with them.
    pub appendix_budget: u64,
}

/// How many times more tokens the provider counted than the local estimate (1 when it did not).
///
/// From the overflow error's stated request size when there is one, else from the last reply
/// after the latest compaction: its reported prompt tokens against the estimate of what it saw.
pub fn calibration(input: &PlanInput<'_>) -> f64 {
    let view = input.view;
    let style = input.config.projection;
    let counter = input.counter;
    let estimate = overflow::estimate_view(view, style, input.tools, counter).max(1);
    if let Some(requested) = input.requested {
        return (requested as f64 / estimate as f64).max(1.0);
    }
    let Some((pos, _, prompt)) = overflow::last_measured_reply(view) else {
        return 1.0;
    };
    let fixed = counter.count_tools(input.tools)
        + view
            .instructions
            .iter()
            .map(|m| message_tokens(counter, m))
            .sum::<u64>()
        + recent_reminders(&view.reminders)
            .iter()
            .map(|m| message_tokens(counter, m))
            .sum::<u64>()
        + overflow::summary_tokens(view, style, counter);
    let before: u64 = view.tail[..pos]
        .iter()
        .filter_map(|e| e.as_message())
        .map(|m| message_tokens(counter, m))
        .sum();
    (prompt as f64 / (fixed + before).max(1) as f64).max(1.0)
}

/// Plans a compaction; `Ok(None)` when there is nothing to summarise or drop.
pub fn plan<'a>(input: PlanInput<'a>) -> Result<Option<Plan<'a>>, CompactionError> {
    let config = input.config;
    let style = config.projection;
    let local = overflow::context_tokens(input.view, style, input.tools, input.counter);
    let tokens_before = local.max(input.requested.unwrap_or(0));
    let ratio = calibration(&input);
    let budget = (config.effective_keep_recent_tokens(input.threshold) as f64 / ratio).floor() as u64;
    let limits = TailLimits {
        turns: config.keep_recent_turns,
        tokens: budget,
        messages: input.count_fired.then_some(config.max_messages / 2),
    };
    let valid = valid_cuts(input.msgs);
    let first = select_cut(input.msgs, &valid, input.counter, limits);
    let target = prune::target(input.threshold, config.target_ratio);
    let bound = prune::summary_overhead(style, input.counter) + config.max_summary_tokens;
    let size = |l: &Layout<'_>| prune::tokens_after(l, bound, input.tools, input.counter);

    let done = |l, appendix| Ok(finish(l, tokens_before, target, ratio, appendix));

    if config.tail_policy == TailPolicy::UserMessages {
        // Nothing kept verbatim: the user messages ride in the handoff, within what is left.
        let all = input.msgs.len();
        for limit in (0..=MAX_RETAINED_REMINDERS).rev() {
            let l = layout(input.view, input.msgs, all, limit);
            if size(&l) <= target {
                let appendix = config.keep_recent_tokens.min(target - size(&l));
                return done(l, appendix);
            }
        }
        let minimal = layout(input.view, input.msgs, all, 0);
        prune::validate(size(&minimal), input.threshold, target)?;
        return done(minimal, 0);
    }

    let last = latest_cut(&valid).max(first);
    let reserve = if config.ledger {
        crate::ledger::reserve(input.view, &input.msgs[..last], input.threshold, input.counter)
    } else {
        0
    };
    let mut cut = Some(first);
    while let Some(k) = cut {
        let l = layout(input.view, input.msgs, k, MAX_RETAINED_REMINDERS);
        if size(&l) + reserve <= target {
            return done(l, reserve);
        }
        cut = next_cut(&valid, k);
    }
    // The smallest tail: the ledger shrinks to what is left before any reminder is dropped.
    for limit in (0..=MAX_RETAINED_REMINDERS).rev() {
        let l = layout(input.view, input.msgs, last, limit);
        if size(&l) <= target {
            let appendix = reserve.min(target - size(&l));
            return done(l, appendix);
        }
    }
    let minimal = layout(input.view, input.msgs, last, 0);
    prune::validate(size(&minimal), input.threshold, target)?;
    Err(CompactionError::NoProgress {
        tokens_after: size(&minimal),
        target,
    })
}

fn finish(
    layout: Layout<'_>,
    tokens_before: u64,
    target: u64,
    calibration: f64,
    appendix_budget: u64,
) -> Option<Plan<'_>> {
    (!layout.is_empty()).then_some(Plan {
        layout,
        tokens_before,
        target,
        calibration,
        appendix_budget,
    })
}
