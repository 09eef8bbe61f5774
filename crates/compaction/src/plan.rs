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
use crate::measure::{LayoutSizes, PassTokens};
use crate::overflow::{self, message_tokens};
use crate::projection::{recent_reminders, MAX_RETAINED_REMINDERS};
use crate::prune::{self, layout, Layout};
use crate::select::{latest_cut, next_cut, select_cut_counted, valid_cuts, TailLimits};

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
    let tokens = PassTokens::new(input.view, input.config.projection, input.tools, input.counter);
    plan_counted(input, &tokens)
}

/// [`plan`] on a view already counted for the pass (`tokens`, of `input.view` with
/// `input.tools` in the configured projection): every size the planner compares comes from that
/// one count, so a pass counts each message once however many cuts it tries.
pub fn plan_counted<'a>(
    input: PlanInput<'a>,
    tokens: &PassTokens,
) -> Result<Option<Plan<'a>>, CompactionError> {
    let config = input.config;
    let style = config.projection;
    let local = tokens.context_tokens();
    let tokens_before = local.max(input.requested.unwrap_or(0));
    let ratio = tokens.calibration(input.requested);
    let budget = (config.effective_keep_recent_tokens(input.threshold) as f64 / ratio).floor() as u64;
    let limits = TailLimits {
        turns: config.keep_recent_turns,
        tokens: budget,
        messages: input.count_fired.then_some(config.max_messages / 2),
    };
    let counts = tokens.tokens_of(input.view, input.msgs, input.counter);
    let valid = valid_cuts(input.msgs);
    let first = select_cut_counted(input.msgs, &valid, &counts, limits);
    let target = prune::target(input.threshold, config.target_ratio);
    let bound = prune::summary_overhead(style, input.counter) + config.max_summary_tokens;
    let sizes = LayoutSizes::new(tokens, input.msgs, &counts);
    // The size of `layout(view, msgs, cut, limit)` as `prune::tokens_after` measures it.
    let size = |cut: usize, limit: usize| sizes.tokens_after(cut, limit, bound);
    let lay = |cut: usize, limit: usize| layout(input.view, input.msgs, cut, limit);

    let done = |l, appendix| Ok(finish(l, tokens_before, target, ratio, appendix));

    if config.tail_policy == TailPolicy::UserMessages {
        // Nothing kept verbatim: the user messages ride in the handoff, within what is left.
        let all = input.msgs.len();
        for limit in (0..=MAX_RETAINED_REMINDERS).rev() {
            let s = size(all, limit);
            if s <= target {
                let appendix = config.keep_recent_tokens.min(target - s);
                return done(lay(all, limit), appendix);
            }
        }
        prune::validate(size(all, 0), input.threshold, target)?;
        return done(lay(all, 0), 0);
    }

    let last = latest_cut(&valid).max(first);
    let reserve = if config.ledger {
        crate::ledger::reserve(input.view, &input.msgs[..last], input.threshold, input.counter)
    } else {
        0
    };
    let mut cut = Some(first);
    while let Some(k) = cut {
        if size(k, MAX_RETAINED_REMINDERS) + reserve <= target {
            return done(lay(k, MAX_RETAINED_REMINDERS), reserve);
        }
        cut = next_cut(&valid, k);
    }
    // The smallest tail: the ledger shrinks to what is left before any reminder is dropped.
    for limit in (0..=MAX_RETAINED_REMINDERS).rev() {
        let s = size(last, limit);
        if s <= target {
            let appendix = reserve.min(target - s);
            return done(lay(last, limit), appendix);
        }
    }
    let minimal = size(last, 0);
    prune::validate(minimal, input.threshold, target)?;
    Err(CompactionError::NoProgress {
        tokens_after: minimal,
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
