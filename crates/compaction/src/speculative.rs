//! Speculative compaction: the summary is written before the threshold is reached.
//!
//! A summary call takes seconds; made when the context crosses the threshold, it is seconds the
//! user waits on the turn that crossed it. When the context passes the *soft* threshold
//! ([`soft_threshold`]: `threshold − clamp(12.5% of threshold, 8,000, 32,000)`; no speculation
//! when that gap is over a quarter of the threshold) the runtime calls [`CompactionService::speculate`], which plans a
//! compaction of the current view and runs its summary in the background. Nothing is committed
//! then. When the hard threshold is reached, the synchronous compaction adopts that summary if
//! it still describes the head of what must be compacted:
//!
//! - the view is still at the generation the speculation started from (no other compaction
//!   committed in between), and
//! - the speculation's last summarised message is still in the view's tail at a valid cut (the
//!   log is append-only, so the messages added since stay after it, in the kept tail), and
//! - the view built from it fits `target_ratio` × threshold.
//!
//! Otherwise the speculation is discarded (its calls are recorded in the usage ledger as
//! discarded) and the compaction summarises synchronously, exactly as without speculation. A
//! speculation that is still running when the threshold is reached is awaited: it started
//! earlier, so the wait is shorter than a fresh summary.
//!
//! When tiered compaction will most likely reach the target by masking old tool outputs alone,
//! no speculative summary is written: it would be paid for and thrown away.
//!
//! Because the tail grows between the soft and the hard threshold, the speculation plans with
//! the tail budget shrunk by the gap between the two thresholds, so the view it leaves at the
//! hard threshold keeps about the tail a synchronous compaction would keep.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pith_core::{EntryId, Message, SessionId, StoredView};
use pith_store::UsagePurpose;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::CompactionError;
use crate::plan::{plan, PlanInput};
use crate::projection::MAX_RETAINED_REMINDERS;
use crate::prune::{self, Layout};
use crate::select::valid_cuts;
use crate::service::CompactionService;
use crate::summary::{CallLog, SummaryOutput};

/// The smallest gap between the soft and the hard threshold, in tokens.
pub const SOFT_GAP_MIN: u64 = 8_000;
/// The largest gap between the soft and the hard threshold, in tokens.
pub const SOFT_GAP_MAX: u64 = 32_000;

/// The soft threshold at which a speculative summary starts, if speculation pays off.
///
/// `threshold − clamp(threshold / 8, 8,000, 32,000)`. `None` when that gap is more than a
/// quarter of the threshold (thresholds under 32,000 tokens): the tail that grows between the two
/// thresholds would then leave no room for the summary within `target_ratio` × threshold, so the
/// speculative summary would be thrown away — a summary call paid for nothing.
pub fn soft_threshold(threshold: u64) -> Option<u64> {
    let gap = (threshold / 8).clamp(SOFT_GAP_MIN, SOFT_GAP_MAX);
    (gap <= threshold / 4).then(|| threshold - gap)
}

/// A summary written ahead of the threshold.
#[derive(Debug)]
pub(crate) struct Speculated {
    /// The last message the summary covers.
    pub last_summarized: EntryId,
    /// The summary (without the handoff's appendix, which is rendered at commit).
    pub output: SummaryOutput,
}

/// A speculation in flight (or finished and not yet used).
struct Pending {
    generation: u64,
    cancel: CancellationToken,
    calls: Arc<CallLog>,
    task: JoinHandle<Result<Option<Speculated>, CompactionError>>,
}

/// The speculations of a service, one per session at most.
#[derive(Default)]
pub(crate) struct Speculations {
    slots: Mutex<HashMap<SessionId, Pending>>,
}

impl Speculations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Pending>> {
        match self.slots.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Whether a speculation of `session` is held (running or finished).
    pub(crate) fn holds(&self, session: SessionId) -> bool {
        self.lock().contains_key(&session)
    }
}

/// A speculative summary adopted by a compaction: the layout it covers and its summary.
pub(crate) struct Adopted<'a> {
    /// The view's layout with the speculation's cut.
    pub layout: Layout<'a>,
    /// The summary.
    pub output: SummaryOutput,
}

impl CompactionService {
    /// Starts a speculative summary of `session` in the background when `context_tokens` is
    /// past the soft threshold of `threshold` but not past the threshold itself, speculation is
    /// on, and none is held for this `generation` yet. Returns whether one was started.
    ///
    /// Called by the runtime after every budget check; cheap when there is nothing to do. A
    /// speculation of an older generation is discarded first. Outside a Tokio runtime nothing
    /// starts.
    pub fn speculate(
        &self,
        session: SessionId,
        generation: u64,
        context_tokens: u64,
        threshold: u64,
    ) -> bool {
        let due = soft_threshold(threshold).is_some_and(|soft| context_tokens > soft);
        if !self.config().speculative
            || self.config().relevance.is_some()
            || !due
            || context_tokens > threshold
        {
            return false;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let mut slots = self.speculations().lock();
        if slots.get(&session).is_some_and(|p| p.generation == generation) {
            return false;
        }
        if let Some(old) = slots.remove(&session) {
            self.discard(session, old);
        }
        let cancel = CancellationToken::new();
        let calls = Arc::new(CallLog::new());
        let this = self.clone();
        let (c, l) = (cancel.clone(), calls.clone());
        let task = runtime.spawn(async move { this.speculative_summary(session, generation, c, l).await });
        tracing::debug!(session_id = %session, generation, context_tokens, "speculative summary started");
        slots.insert(
            session,
            Pending {
                generation,
                cancel,
                calls,
                task,
            },
        );
        true
    }

    /// Whether a speculative summary of `session` is held (running or finished, not yet used).
    pub fn has_speculation(&self, session: SessionId) -> bool {
        self.speculations().holds(session)
    }

    /// Discards the session's speculation, if any (after a commit made it stale).
    pub(crate) fn drop_speculation(&self, session: SessionId) {
        let held = self.speculations().lock().remove(&session);
        if let Some(pending) = held {
            self.discard(session, pending);
        }
    }

    /// Cancels a speculation and records what it spent as discarded.
    fn discard(&self, session: SessionId, pending: Pending) {
        pending.cancel.cancel();
        pending.task.abort();
        let this = self.clone();
        let calls = pending.calls;
        let record = async move {
            this.record_usage(session, &calls, true).await;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(record);
        }
    }

    /// Plans the compaction of the current view and writes its summary; nothing is committed.
    async fn speculative_summary(
        &self,
        session: SessionId,
        generation: u64,
        cancel: CancellationToken,
        calls: Arc<CallLog>,
    ) -> Result<Option<Speculated>, CompactionError> {
        let store = self.store();
        let breaker = store
            .breaker(session)
            .await
            .map_err(CompactionError::PersistFailed)?;
        if breaker.open {
            return Err(CompactionError::CircuitOpen);
        }
        let mut view = store
            .load_view(session)
            .await
            .map_err(CompactionError::PersistFailed)?;
        // Measured as sent (masked outputs as placeholders), summarised as logged.
        let originals = crate::tier::apply_masks(&mut view);
        if view.generation != generation {
            return Ok(None);
        }
        let window = self.router().context_window(&view.session.model);
        let config = self.config();
        config.validate(window)?;
        let threshold = config.threshold(window)?;
        let Some(soft) = soft_threshold(threshold) else {
            return Ok(None);
        };
        let gap = threshold - soft;
        if self.masking_will_do(&view, threshold, gap) {
            tracing::debug!(session_id = %session, "masks alone will reach the target; no speculative summary");
            return Ok(None);
        }
        let mut shrunk = config.clone();
        shrunk.keep_recent_tokens = config.effective_keep_recent_tokens(threshold).saturating_sub(gap);
        let msgs: Vec<&Message> = view.tail_messages().collect();
        let planned = plan(PlanInput {
            view: &view,
            msgs: &msgs,
            tools: &view.session.tools,
            counter: self.counter(),
            config: &shrunk,
            threshold,
            count_fired: false,
            requested: None,
        })?;
        let Some(planned) = planned else {
            return Ok(None);
        };
        let Some(last) = planned.layout.cut.checked_sub(1).map(|i| msgs[i].id) else {
            return Ok(None);
        };
        let span = planned
            .layout
            .span
            .iter()
            .map(|m| originals.get(&m.id).unwrap_or(m).clone())
            .collect();
        let (job, previous) = self
            .summary_job(session, &view, &planned.layout, span, None, &cancel, &calls)
            .await?;
        let output = self.summarize(job, previous).await?;
        Ok(Some(Speculated {
            last_summarized: last,
            output,
        }))
    }

    /// Whether tiered compaction will most likely handle the threshold alone (a mask-only commit,
    /// no summary call), in which case a speculative summary would be paid for and thrown away.
    ///
    /// The view is projected to the threshold: it grows by `gap` tokens with the share of tool
    /// output it has now; the outputs beyond the protected newest ones are masked when that frees
    /// enough, and the rest must reach the target.
    fn masking_will_do(&self, view: &StoredView, threshold: u64, gap: u64) -> bool {
        let config = self.config();
        if !config.tiered
            || config.tail_policy == crate::config::TailPolicy::UserMessages
            || crate::overflow::view_message_count(view) > config.effective_max_messages()
        {
            return false;
        }
        let counter = self.counter();
        let now =
            crate::overflow::estimate_view(view, config.projection, &view.session.tools, counter).max(1);
        let outputs: u64 = view
            .tail_messages()
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match p {
                pith_core::Part::ToolResult { content, .. } => {
                    Some(counter.count_text(&crate::prompt::clip_tool_output(content)))
                }
                _ => None,
            })
            .sum();
        let grown_outputs = outputs + (gap as f64 * outputs as f64 / now as f64) as u64;
        let freed = grown_outputs.saturating_sub(crate::tier::protected_tokens(threshold));
        freed >= crate::tier::min_freed_tokens(threshold)
            && (now + gap).saturating_sub(freed) <= prune::target(threshold, config.target_ratio)
    }

    /// Takes the session's speculation for a compaction of `view`: awaited when still running,
    /// adopted when it is still the head of what must be compacted and fits `target`, else
    /// discarded. Its calls move to `calls` when adopted.
    pub(crate) async fn adopt<'a>(
        &self,
        session: SessionId,
        view: &'a StoredView,
        msgs: &'a [&'a Message],
        fits: impl Fn(&Layout<'_>, &SummaryOutput) -> bool,
        cancel: &CancellationToken,
        calls: &CallLog,
    ) -> Result<Option<Adopted<'a>>, CompactionError> {
        let Some(mut pending) = self.speculations().lock().remove(&session) else {
            return Ok(None);
        };
        if pending.generation != view.generation {
            tracing::debug!(session_id = %session, "speculation of an older generation discarded");
            self.discard(session, pending);
            return Ok(None);
        }
        let joined = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                self.discard(session, pending);
                return Err(CompactionError::Cancelled);
            }
            r = &mut pending.task => r,
        };
        let speculated = match joined {
            Ok(Ok(Some(s))) => s,
            Ok(Ok(None)) => return Ok(None),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "speculative summary failed; summarising now");
                self.discard(session, pending);
                return Ok(None);
            }
            Err(e) => {
                tracing::debug!(error = %e, "speculative summary task ended; summarising now");
                self.discard(session, pending);
                return Ok(None);
            }
        };
        let valid = valid_cuts(msgs);
        let cut = msgs
            .iter()
            .position(|m| m.id == speculated.last_summarized)
            .map(|i| i + 1)
            .filter(|&k| valid.get(k).copied().unwrap_or(false));
        let Some(cut) = cut else {
            tracing::debug!(session_id = %session, "speculation no longer the head of the view; discarded");
            self.discard(session, pending);
            return Ok(None);
        };
        let layout = prune::layout(view, msgs, cut, MAX_RETAINED_REMINDERS);
        if layout.is_empty() || !fits(&layout, &speculated.output) {
            tracing::debug!(session_id = %session, "speculative view would not fit the target; discarded");
            self.discard(session, pending);
            return Ok(None);
        }
        for call in pending.calls.calls() {
            calls.record(&call.model, call.purpose, call.usage);
        }
        tracing::debug!(
            session_id = %session,
            summary_calls = pending.calls.count(UsagePurpose::Summary),
            "speculative summary adopted"
        );
        Ok(Some(Adopted {
            layout,
            output: speculated.output,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_threshold_keeps_a_clamped_gap() {
        // 12.5% of 170,000 is 21,250: within the clamp.
        assert_eq!(soft_threshold(170_000), Some(170_000 - 21_250));
        // Large thresholds: at most 32,000 below.
        assert_eq!(soft_threshold(1_000_000), Some(1_000_000 - 32_000));
        // 12.5% of 111,616 is 13,952.
        assert_eq!(soft_threshold(111_616), Some(111_616 - 13_952));
        // Small thresholds: at least 8,000 below ...
        assert_eq!(soft_threshold(40_000), Some(32_000));
        assert_eq!(soft_threshold(32_000), Some(24_000));
        // ... unless that is more than a quarter of the threshold: no speculation.
        assert_eq!(soft_threshold(31_999), None);
        assert_eq!(soft_threshold(15_616), None);
        assert_eq!(soft_threshold(0), None);
    }
}
