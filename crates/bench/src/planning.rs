//! One compaction planning pass with no model: the work before a summary call.
//!
//! Mirrors what `CompactionService::compact` does before it calls the summarizer: token
//! accounting and the overflow decision, the cut (`select` inside `plan`), the span and kept
//! messages copied out of the view, the summary request rendered (`prompt`) and measured against
//! the summary model's budget. This is the counterpart of pi's `prepareCompaction` +
//! `convertToLlm` + `serializeConversation`, which the targets compare against.

use pith_compaction::budget::request_tokens;
use pith_compaction::measure::PassTokens;
use pith_compaction::overflow::{self, Decision};
use pith_compaction::plan::{plan_counted, PlanInput};
use pith_compaction::prompt::{render_messages_refs, PromptMode, PromptRefs};
use pith_compaction::{CompactionConfig, CompactionError, ConfigError};
use pith_core::{Message, Part, StoredView, TokenCounter};

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
/// the same work: a manual compaction plans the same way. The view is counted once
/// ([`PassTokens`]) and the decision, the plan and its size checks share that count; the request
/// is rendered from the planned layout's borrowed messages.
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
    let tokens = PassTokens::new(view, config.projection, tools, counter);
    let decision = overflow::decide_counted(view, &tokens, window, config)?;
    let (needed, context_tokens) = match decision {
        Decision::NotNeeded { context_tokens, .. } | Decision::Tokens { context_tokens, .. } => {
            (decision.is_needed(), context_tokens)
        }
        Decision::Count { .. } => (true, tokens.context_tokens()),
    };
    let threshold = overflow::threshold(window, config.reserve_tokens)?;
    let msgs: Vec<&Message> = view.tail_messages().collect();
    let planned = plan_counted(
        PlanInput {
            view,
            msgs: &msgs,
            tools,
            counter,
            config,
            threshold,
            count_fired: matches!(decision, Decision::Count { .. }),
            requested: None,
        },
        &tokens,
    )?;
    let Some(planned) = planned else {
        return Ok(PassFigures {
            needed,
            context_tokens,
            span_messages: 0,
            prompt_bytes: 0,
            request_tokens: 0,
        });
    };
    let previous = view.compaction.as_ref().map(|m| m.summary.as_str());
    let request = render_messages_refs(&PromptRefs {
        span: &planned.layout.span,
        kept: planned.layout.kept,
        previous_summary: previous,
        instructions: None,
        max_summary_tokens: config.max_summary_tokens,
        mode: if previous.is_some() {
            PromptMode::Update
        } else {
            PromptMode::First
        },
    });
    Ok(PassFigures {
        needed,
        context_tokens,
        span_messages: planned.layout.span.len(),
        prompt_bytes: request.iter().map(text_len).sum(),
        request_tokens: request_tokens(counter, &request),
    })
}

/// `message.text_content().len()` without joining the text.
fn text_len(message: &Message) -> usize {
    let (parts, bytes) = message
        .parts
        .iter()
        .filter_map(Part::as_text)
        .fold((0usize, 0usize), |(n, b), t| (n + 1, b + t.len()));
    bytes + parts.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_compaction::plan::plan;
    use pith_compaction::prompt::{render_messages, PromptInput};
    use pith_core::{EstimateCounter, SessionRecord};

    /// The pass as first written: every stage counts the view on its own, the span and kept
    /// messages are copied, the request is rendered from the copies.
    fn reference_pass(
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

    /// What a plan decided: (cut, span, kept, dropped reminders, tokens before, target,
    /// calibration, appendix budget), or the error.
    type Outline = Result<Option<(usize, usize, usize, usize, u64, u64, u64, u64)>, String>;

    fn outline(plan: Result<Option<pith_compaction::plan::Plan<'_>>, CompactionError>) -> Outline {
        plan.map(|p| {
            p.map(|p| {
                (
                    p.layout.cut,
                    p.layout.span.len(),
                    p.layout.kept.len(),
                    p.layout.dropped_reminders,
                    p.tokens_before,
                    p.target,
                    p.calibration.to_bits(),
                    p.appendix_budget,
                )
            })
        })
        .map_err(|e| format!("{e:?}"))
    }

    /// The planner as first written: each question counted from scratch, a layout built and
    /// measured for every cut tried.
    fn reference_plan(input: PlanInput<'_>) -> Outline {
        use pith_compaction::config::TailPolicy;
        use pith_compaction::projection::MAX_RETAINED_REMINDERS;
        use pith_compaction::prune::{self, layout, Layout};
        use pith_compaction::select::{latest_cut, next_cut, select_cut, valid_cuts, TailLimits};
        let config = input.config;
        let style = config.projection;
        let local = overflow::context_tokens(input.view, style, input.tools, input.counter);
        let tokens_before = local.max(input.requested.unwrap_or(0));
        let ratio = pith_compaction::plan::calibration(&input);
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
        let done = |l: Layout<'_>, appendix: u64| -> Outline {
            Ok((!l.is_empty()).then_some((
                l.cut,
                l.span.len(),
                l.kept.len(),
                l.dropped_reminders,
                tokens_before,
                target,
                ratio.to_bits(),
                appendix,
            )))
        };
        let err = |e: CompactionError| -> Outline { Err(format!("{e:?}")) };
        if config.tail_policy == TailPolicy::UserMessages {
            let all = input.msgs.len();
            for limit in (0..=MAX_RETAINED_REMINDERS).rev() {
                let l = layout(input.view, input.msgs, all, limit);
                if size(&l) <= target {
                    let appendix = config.keep_recent_tokens.min(target - size(&l));
                    return done(l, appendix);
                }
            }
            let minimal = layout(input.view, input.msgs, all, 0);
            if let Err(e) = prune::validate(size(&minimal), input.threshold, target) {
                return err(e);
            }
            return done(minimal, 0);
        }
        let last = latest_cut(&valid).max(first);
        let reserve = if config.ledger {
            pith_compaction::ledger::reserve(input.view, &input.msgs[..last], input.threshold, input.counter)
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
        for limit in (0..=MAX_RETAINED_REMINDERS).rev() {
            let l = layout(input.view, input.msgs, last, limit);
            if size(&l) <= target {
                let appendix = reserve.min(target - size(&l));
                return done(l, appendix);
            }
        }
        let minimal = layout(input.view, input.msgs, last, 0);
        if let Err(e) = prune::validate(size(&minimal), input.threshold, target) {
            return err(e);
        }
        err(CompactionError::NoProgress {
            tokens_after: size(&minimal),
            target,
        })
    }

    #[test]
    fn the_counted_planner_plans_as_the_reference_on_every_transcript() {
        use pith_compaction::config::TailPolicy;
        let Some(transcripts) = crate::transcripts::load_all() else {
            return;
        };
        let configs = [
            CompactionConfig::default(),
            CompactionConfig::default().with_tail_policy(TailPolicy::UserMessages),
            CompactionConfig::default().with_max_messages(40),
        ];
        let mut planned = 0;
        for t in &transcripts {
            let view = t.view().unwrap();
            let msgs: Vec<&Message> = view.tail_messages().collect();
            for config in &configs {
                for (threshold, requested) in [(6_000, None), (27_000, Some(40_000)), (100_000, None)] {
                    let input = PlanInput {
                        view: &view,
                        msgs: &msgs,
                        tools: &view.session.tools,
                        counter: &EstimateCounter,
                        config,
                        threshold,
                        count_fired: msgs.len() > config.effective_max_messages(),
                        requested,
                    };
                    let tokens = PassTokens::new(&view, config.projection, input.tools, &EstimateCounter);
                    let fast = outline(plan_counted(input, &tokens));
                    assert_eq!(fast, reference_plan(input), "{} at {threshold}", t.name);
                    planned += usize::from(matches!(fast, Ok(Some(_))));
                }
            }
        }
        assert!(planned > 10, "{planned} plans");
    }

    #[test]
    fn the_pass_gives_the_figures_of_the_reference_on_every_transcript() {
        let Some(transcripts) = crate::transcripts::load_all() else {
            return;
        };
        let config = CompactionConfig::default();
        let mut compared = 0;
        for t in &transcripts {
            let view = t.view().unwrap();
            for window in [8_000, 32_000, 128_000] {
                let fast = plan_pass(&view, window, &config, &EstimateCounter);
                let reference = reference_pass(&view, window, &config, &EstimateCounter);
                assert_eq!(
                    format!("{fast:?}"),
                    format!("{reference:?}"),
                    "{} at window {window}",
                    t.name
                );
                compared += usize::from(fast.is_ok_and(|f| f.span_messages > 0));
            }
        }
        assert!(compared > 10, "{compared} passes planned a summary");
    }

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
