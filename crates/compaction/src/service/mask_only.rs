//! The masking step of tiered compaction: commit masks alone when they are enough.
//!
//! Before a summary is planned, [`CompactionService::try_mask_only`] asks [`crate::tier::choose`]
//! for the old tool outputs to mask. When they free enough and the masked view reaches
//! `target_ratio` × threshold (scaled by how much more the provider counts than the local
//! estimate), a [`CompactionStrategy::MaskOnly`] record is committed with no summary call: it keeps
//! the current summary, tail start, instructions and reminders, and lists the masks (the earlier
//! ones and the new ones). Otherwise nothing happens here and the service summarises as usual.

use chrono::Utc;
use pith_core::{AgentEvent, CompactionMeta, CompactionStrategy, EntryId, MaskedEntry, StoredView, Usage};
use pith_store::CommitRequest;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{CompactionService, Outcome};
use crate::config::TailPolicy;
use crate::error::CompactionError;
use crate::overflow;
use crate::plan::{calibration, PlanInput};
use crate::prune;
use crate::tier;
use crate::trigger::{CompactionResult, CompactionTrigger};

/// Stands in for the manual-instructions hash in a mask-only record's idempotency key, so that it
/// can never equal the key of a summary.
const MASK_ONLY_KEY_TAG: &str = "mask-only";

/// What the masking step needs from the service's run.
pub(super) struct MaskStep<'a> {
    pub session: pith_core::SessionId,
    pub trigger: &'a CompactionTrigger,
    /// The loaded view, with its record's masks applied.
    pub view: &'a StoredView,
    pub threshold: u64,
    /// Log entries (compaction records excluded).
    pub log_entries: u64,
    pub cancel: &'a CancellationToken,
}

impl CompactionService {
    /// Tiered compaction: commits new masks alone when they bring the view to the target, making
    /// no summary call; `Ok(None)` when tiered compaction is off, the trigger is manual (an
    /// explicit request for a summary), the count signal fired (masking does not lower the
    /// message count), too little would be freed, or the masked view is still over the target.
    pub(super) async fn try_mask_only(
        &self,
        step: MaskStep<'_>,
        started: &mut bool,
    ) -> Result<Option<Outcome>, CompactionError> {
        let config = &*self.config;
        let view = step.view;
        if !config.tiered
            || matches!(step.trigger, CompactionTrigger::Manual { .. })
            || config.tail_policy == TailPolicy::UserMessages
            || overflow::view_message_count(view) > config.effective_max_messages()
        {
            return Ok(None);
        }
        let counter = self.counter.as_ref();
        let Some(choice) = tier::choose(view, counter, step.threshold) else {
            return Ok(None);
        };
        let style = config.projection;
        let tools = &view.session.tools;
        let requested = match step.trigger {
            CompactionTrigger::Reactive(info) => info.requested,
            _ => None,
        };
        let ratio = calibration(&PlanInput {
            view,
            msgs: &[],
            tools,
            counter,
            config,
            threshold: step.threshold,
            count_fired: false,
            requested,
        });
        let tokens_before = overflow::context_tokens(view, style, tools, counter).max(requested.unwrap_or(0));
        let mut masked = view.clone();
        tier::mask_in_place(&mut masked, &choice.masks);
        let tokens_after = overflow::estimate_view(&masked, style, tools, counter);
        let target = prune::target(step.threshold, config.target_ratio);
        let calibrated = (tokens_after as f64 * ratio).ceil() as u64;
        tracing::debug!(
            freed = choice.freed,
            masks = choice.masks.len(),
            tokens_after,
            calibrated,
            target,
            "tiered masking"
        );
        if calibrated > target {
            return Ok(None);
        }
        let key = prune::idempotency_key(
            step.session,
            choice.masks.last().map(|m| m.entry_id),
            step.log_entries,
            Some(MASK_ONLY_KEY_TAG),
        );
        if let Some(meta) = self
            .store
            .find_compaction(step.session, &key)
            .await
            .map_err(CompactionError::PersistFailed)?
        {
            return Ok(Some(Outcome::Done(CompactionResult::existing(meta))));
        }
        if step.cancel.is_cancelled() {
            return Err(CompactionError::Cancelled);
        }
        *started = true;
        self.events.publish(AgentEvent::CompactionStarted {
            session_id: step.session,
            trigger: step.trigger.kind(),
        });
        let meta = mask_only_meta(MaskRecord {
            view,
            new_masks: choice.masks,
            tokens_before,
            tokens_after,
            trigger: step.trigger,
            key,
            log_entries: step.log_entries,
        });
        let generation = self
            .store
            .commit_compaction(
                step.session,
                CommitRequest {
                    meta: meta.clone(),
                    expected_generation: view.generation,
                },
            )
            .await
            .map_err(CompactionError::from_store)?;
        // A summary written in the background for the old generation no longer applies.
        self.drop_speculation(step.session);
        self.events.publish(AgentEvent::HistoryReplaced {
            session_id: step.session,
            generation,
        });
        tracing::info!(
            tokens_before,
            tokens_after,
            generation,
            "mask-only compaction committed"
        );
        Ok(Some(Outcome::Committed(CompactionResult {
            tokens_before,
            tokens_after,
            strategy: meta.strategy,
            usage: meta.usage,
            noop: false,
            summary_calls: 0,
            meta,
        })))
    }
}

/// What a mask-only record is built from.
struct MaskRecord<'a> {
    view: &'a StoredView,
    new_masks: Vec<MaskedEntry>,
    tokens_before: u64,
    tokens_after: u64,
    trigger: &'a CompactionTrigger,
    key: String,
    log_entries: u64,
}

/// The mask-only record: the current view (summary, tail start, retained instructions and
/// reminders, carried ledger) with the earlier masks and the new ones.
fn mask_only_meta(input: MaskRecord<'_>) -> CompactionMeta {
    let view = input.view;
    let previous = view.compaction.as_ref();
    let mut masked = previous.map(|m| m.masked.clone()).unwrap_or_default();
    masked.extend(input.new_masks);
    let mut extra = previous
        .and_then(|m| m.extra.clone())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    if let Some(fields) = extra.as_object_mut() {
        // Replies before this record measured the unmasked view: their usage no longer applies.
        fields.insert(prune::EXTRA_TAIL_ENTRIES.into(), json!(view.tail.len()));
        fields.insert(prune::EXTRA_LOG_ENTRIES.into(), json!(input.log_entries));
        fields.insert(prune::EXTRA_INSTRUCTIONS_HASH.into(), Value::Null);
        fields.insert(prune::EXTRA_DROPPED_REMINDERS.into(), json!(0));
    }
    CompactionMeta {
        id: EntryId::new(),
        generation: view.generation + 1,
        summary: previous.map(|m| m.summary.clone()).unwrap_or_default(),
        summarized: previous.and_then(|m| m.summarized),
        tail_start: view.tail.first().map(|e| e.id()),
        retained_instructions: view.instructions.iter().map(|m| m.id).collect(),
        retained_reminders: view.reminders.iter().map(|m| m.id).collect(),
        masked,
        tokens_before: input.tokens_before,
        tokens_after: input.tokens_after,
        strategy: CompactionStrategy::MaskOnly,
        summary_model: None,
        trigger: input.trigger.kind(),
        usage: Usage::default(),
        summary_calls: 0,
        idempotency_key: input.key,
        created_at: Utc::now(),
        extra: Some(extra),
    }
}
