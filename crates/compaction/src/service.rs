//! The CompactionService: composes the stages and owns the I/O.
//!
//! One call of [`CompactionService::compact`] checks the breaker, loads the view, decides
//! (proactive only), selects the cut, derives the idempotency key, summarises, validates the new
//! view, re-checks cancellation and commits with the generation check. Whatever fails, the stored
//! log and view are exactly as before; the usage of every model call is still written to the
//! ledger (marked discarded), and counted failures advance the persisted circuit breaker.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use pith_core::{AgentEvent, EstimateCounter, EventSink, Message, NoopSink, SessionId, TokenCounter};
use pith_router::ModelRouter;
use pith_store::{BreakerState, CommitRequest, SessionStore, UsagePurpose, UsageRecord};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::breaker;
use crate::config::{CompactionConfig, IncrementalMode, TailPolicy};
use crate::error::CompactionError;
use crate::model::ModelSummarizer;
use crate::overflow::{self, Decision};
use crate::plan::{plan, Plan, PlanInput};
use crate::prompt::PromptMode;
use crate::prune::{self, RecordInput};
use crate::relevance;
use crate::speculative::Speculations;
use crate::summary::{CallLog, Summarizer, SummaryJob};
use crate::trigger::{CompactionResult, CompactionTrigger};

mod mask_only;

/// The staged compaction service. Cheap to clone: everything inside is shared.
#[derive(Clone)]
pub struct CompactionService {
    router: Arc<ModelRouter>,
    store: Arc<dyn SessionStore>,
    config: Arc<CompactionConfig>,
    events: Arc<dyn EventSink>,
    counter: Arc<dyn TokenCounter>,
    summarizer: Arc<dyn Summarizer>,
    /// One lock per session: compactions of one session in this process run one at a time, so a
    /// concurrent retry finds the first one's record instead of summarising again.
    locks: Arc<std::sync::Mutex<HashMap<SessionId, Arc<tokio::sync::Mutex<()>>>>>,
    /// Summaries written ahead of the threshold ([`crate::speculative`]).
    speculations: Arc<Speculations>,
}

impl std::fmt::Debug for CompactionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionService")
            .field("store", &self.store.backend())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

enum Outcome {
    /// Nothing new was done (an existing record, or nothing to do).
    Done(CompactionResult),
    /// A new compaction was committed.
    Committed(CompactionResult),
}

impl CompactionService {
    /// A service over a router (summary calls) and a store (views, commits, breaker, ledger).
    pub fn new(router: Arc<ModelRouter>, store: Arc<dyn SessionStore>, config: CompactionConfig) -> Self {
        let summarizer: Arc<dyn Summarizer> = match &config.summarizer {
            Some(s) => s.clone(),
            None => Arc::new(ModelSummarizer::new(router.clone())),
        };
        Self {
            router,
            store,
            config: Arc::new(config),
            events: Arc::new(NoopSink),
            counter: Arc::new(EstimateCounter),
            summarizer,
            locks: Arc::default(),
            speculations: Arc::default(),
        }
    }

    pub(crate) fn store(&self) -> &dyn SessionStore {
        self.store.as_ref()
    }

    pub(crate) fn router(&self) -> &ModelRouter {
        &self.router
    }

    pub(crate) fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    pub(crate) fn speculations(&self) -> &Speculations {
        &self.speculations
    }

    fn session_lock(&self, session: SessionId) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = match self.locks.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        locks.retain(|_, l| Arc::strong_count(l) > 1);
        locks.entry(session).or_default().clone()
    }

    /// Publishes events to `sink`.
    pub fn with_events(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.events = sink;
        self
    }

    /// Counts tokens with `counter` (default: the bytes/4 estimate).
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &CompactionConfig {
        &self.config
    }

    /// Compacts a session.
    pub async fn compact(
        &self,
        session: SessionId,
        trigger: CompactionTrigger,
    ) -> Result<CompactionResult, CompactionError> {
        self.compact_with_cancel(session, trigger, CancellationToken::new())
            .await
    }

    /// Compacts a session; `cancel` stops it at any point before the commit.
    pub async fn compact_with_cancel(
        &self,
        session: SessionId,
        trigger: CompactionTrigger,
        cancel: CancellationToken,
    ) -> Result<CompactionResult, CompactionError> {
        let span = tracing::info_span!("compaction", session_id = %session, trigger = ?trigger.kind());
        async move {
            let lock = self.session_lock(session);
            let _guard = lock.lock().await;
            let state = self
                .store
                .breaker(session)
                .await
                .map_err(CompactionError::PersistFailed)?;
            if state.open {
                return Err(CompactionError::CircuitOpen);
            }
            let calls = Arc::new(CallLog::new());
            let mut started = false;
            let result = self.run(session, &trigger, &cancel, &calls, &mut started).await;
            self.record_usage(session, &calls, !matches!(result, Ok(Outcome::Committed(_))))
                .await;
            match result {
                Ok(Outcome::Committed(r)) | Ok(Outcome::Done(r)) => {
                    if let Some(next) = breaker::on_success(&state) {
                        if let Err(e) = self.store.set_breaker(session, next).await {
                            tracing::warn!(error = %e, "could not reset the breaker count");
                        }
                    }
                    self.events.publish(AgentEvent::CompactionFinished {
                        session_id: session,
                        tokens_before: r.tokens_before,
                        tokens_after: r.tokens_after,
                        strategy: r.strategy,
                    });
                    Ok(r)
                }
                Err(e) => {
                    self.on_failure(session, &state, &e, started).await;
                    Err(e)
                }
            }
        }
        .instrument(span)
        .await
    }

    /// The session's breaker state.
    pub async fn circuit_status(&self, session: SessionId) -> Result<BreakerState, CompactionError> {
        self.store
            .breaker(session)
            .await
            .map_err(CompactionError::PersistFailed)
    }

    /// Closes the session's circuit and clears its failure count.
    pub async fn reset_circuit(&self, session: SessionId) -> Result<(), CompactionError> {
        self.store
            .set_breaker(session, BreakerState::default())
            .await
            .map_err(CompactionError::PersistFailed)?;
        self.events
            .publish(AgentEvent::CompactionCircuitReset { session_id: session });
        Ok(())
    }

    async fn on_failure(
        &self,
        session: SessionId,
        state: &BreakerState,
        error: &CompactionError,
        started: bool,
    ) {
        let mut failures = state.consecutive_failures;
        if error.counts_toward_breaker() {
            let outcome = breaker::on_failure(state, self.config.max_failures, &error.to_string());
            failures = outcome.state.consecutive_failures;
            match self.store.set_breaker(session, outcome.state).await {
                Ok(()) if outcome.opened_now => {
                    self.events.publish(AgentEvent::CompactionCircuitOpened {
                        session_id: session,
                        consecutive_failures: failures,
                    });
                }
                Ok(()) => {}
                Err(e) => tracing::warn!(error = %e, "could not persist the breaker state"),
            }
        }
        if started || error.counts_toward_breaker() {
            self.events.publish(AgentEvent::CompactionFailed {
                session_id: session,
                error: error.to_string(),
                consecutive_failures: failures,
            });
        }
    }

    pub(crate) async fn record_usage(&self, session: SessionId, calls: &CallLog, discarded: bool) {
        for call in calls.calls() {
            let record = UsageRecord {
                at: Utc::now(),
                model: call.model,
                purpose: call.purpose,
                usage: call.usage,
                discarded,
            };
            if let Err(e) = self.store.record_usage(session, record).await {
                tracing::warn!(error = %e, "could not record summary usage");
            }
        }
    }

    async fn run(
        &self,
        session: SessionId,
        trigger: &CompactionTrigger,
        cancel: &CancellationToken,
        calls: &Arc<CallLog>,
        started: &mut bool,
    ) -> Result<Outcome, CompactionError> {
        let config = &*self.config;
        let counter = self.counter.as_ref();
        let mut view = self
            .store
            .load_view(session)
            .await
            .map_err(CompactionError::PersistFailed)?;
        // Measure what is sent: masked outputs count as their placeholders (originals kept aside).
        let originals = crate::tier::apply_masks(&mut view);
        let model = view.session.model.clone();
        if let CompactionTrigger::Reactive(info) = trigger {
            if let Some(limit) = info.limit {
                self.router.learn_window(&model, limit);
            }
        }
        let window = self.router.context_window(&model);
        config.validate(window)?;
        let threshold = config.threshold(window)?;
        let instructions_hash = prune::instructions_hash(trigger.instructions());
        let log_entries = view.log_len.saturating_sub(view.generation);

        // A reactive trigger right after a compaction of the same log is not a repeat: the
        // provider rejected the view that compaction produced, so it must be compacted further
        // (the idempotency key below still catches a true repeat of a reactive compaction).
        let reactive = matches!(trigger, CompactionTrigger::Reactive(_));
        // Likewise a proactive one when the view no longer fits (the window was found smaller).
        if let Some(meta) = &view.compaction {
            let same_log = prune::recorded_log_entries(meta) == Some(log_entries)
                && prune::recorded_instructions_hash(meta) == instructions_hash;
            let fits = matches!(trigger, CompactionTrigger::Manual { .. })
                || overflow::context_tokens(&view, config.projection, &view.session.tools, counter)
                    <= threshold;
            if same_log && !reactive && fits {
                return Ok(Outcome::Done(CompactionResult::existing(meta.clone())));
            }
        }
        let existing_or_empty = |view: &pith_core::StoredView| match &view.compaction {
            Some(meta) => Ok(Outcome::Done(CompactionResult::existing(meta.clone()))),
            None => Err(CompactionError::NoMessagesToCompact),
        };
        if overflow::view_message_count(&view) == 0 {
            return existing_or_empty(&view);
        }
        let tools = view.session.tools.clone();
        let decision = overflow::decide(&view, &tools, counter, window, config)?;
        if let (
            CompactionTrigger::Proactive,
            Decision::NotNeeded {
                context_tokens,
                threshold,
            },
        ) = (trigger, decision)
        {
            return match &view.compaction {
                Some(meta) => Ok(Outcome::Done(CompactionResult::existing(meta.clone()))),
                None => Err(CompactionError::NotNeeded {
                    context_tokens,
                    threshold,
                }),
            };
        }
        let step = mask_only::MaskStep {
            session,
            trigger,
            view: &view,
            threshold,
            log_entries,
            cancel,
        };
        if let Some(outcome) = self.try_mask_only(step, started).await? {
            return Ok(outcome);
        }
        let requested = match trigger {
            CompactionTrigger::Reactive(info) => info.requested,
            _ => None,
        };
        let msgs: Vec<&Message> = view.tail_messages().collect();
        let plan = plan(PlanInput {
            view: &view,
            msgs: &msgs,
            tools: &tools,
            counter,
            config,
            threshold,
            count_fired: overflow::view_message_count(&view) > config.effective_max_messages(),
            requested,
        });
        let Plan {
            layout,
            tokens_before,
            target,
            calibration,
            appendix_budget,
        } = match plan {
            Ok(Some(p)) => p,
            Ok(None) => return existing_or_empty(&view),
            Err(e) => return Err(e),
        };
        tracing::debug!(calibration, cut = layout.cut, target, "planned");
        // A summary written ahead of the threshold replaces the summary call when it still
        // covers the head of the view (see `speculative`); manual instructions need their own.
        let mut layout = layout;
        let mut adopted = None;
        if trigger.instructions().is_none() && self.speculations.holds(session) {
            let fits = |l: &crate::prune::Layout<'_>, o: &crate::summary::SummaryOutput| {
                let summary = prune::projected_summary_tokens(&o.text, config.projection, counter);
                prune::tokens_after(l, summary, &tools, counter) + appendix_budget <= target
            };
            if let Some(a) = self.adopt(session, &view, &msgs, fits, cancel, calls).await? {
                layout = a.layout;
                adopted = Some(a.output);
            }
        }
        let last_summarized = layout.cut.checked_sub(1).map(|i| msgs[i].id);
        let key = prune::idempotency_key(
            session,
            last_summarized,
            log_entries,
            instructions_hash.as_deref(),
        );
        if let Some(meta) = self
            .store
            .find_compaction(session, &key)
            .await
            .map_err(CompactionError::PersistFailed)?
        {
            return Ok(Outcome::Done(CompactionResult::existing(meta)));
        }
        if cancel.is_cancelled() {
            return Err(CompactionError::Cancelled);
        }
        *started = true;
        self.events.publish(AgentEvent::CompactionStarted {
            session_id: session,
            trigger: trigger.kind(),
        });

        // The summarizer and the ledger read masked outputs as they are in the log.
        let unmasked: Vec<Message> = layout
            .span
            .iter()
            .map(|m| originals.get(&m.id).unwrap_or(m).clone())
            .collect();
        let output = match adopted {
            Some(output) => output,
            None => {
                let (job, previous) = self
                    .summary_job(
                        session,
                        &view,
                        &layout,
                        unmasked.clone(),
                        trigger.instructions(),
                        cancel,
                        calls,
                    )
                    .await?;
                self.summarize(job, previous)
                    .instrument(tracing::info_span!(
                        "compaction.stage",
                        stage = "summary",
                        tokens_before
                    ))
                    .await?
            }
        };

        let ledger_layout = prune::Layout {
            span: unmasked.iter().collect(),
            ..layout.clone()
        };
        let (text, ledger) = self
            .appendix(
                session,
                &view,
                &ledger_layout,
                &output.text,
                appendix_budget,
                threshold,
            )
            .await?;
        let output = crate::summary::SummaryOutput { text, ..output };
        let summary_tokens = prune::projected_summary_tokens(&output.text, config.projection, counter);
        let tokens_after = prune::tokens_after(&layout, summary_tokens, &tools, counter);
        prune::validate(tokens_after, threshold, target)?;
        if cancel.is_cancelled() {
            return Err(CompactionError::Cancelled);
        }
        let tail_entries = layout
            .kept
            .first()
            .and_then(|first| view.tail.iter().position(|e| e.id() == first.id))
            .map(|pos| (view.tail.len() - pos) as u64)
            .unwrap_or(0);
        let meta = prune::build_meta(RecordInput {
            layout: &layout,
            summary: output.text,
            generation: view.generation + 1,
            tokens_before,
            tokens_after,
            strategy: output.strategy,
            summary_model: output.model,
            trigger: trigger.kind(),
            usage: calls.usage(UsagePurpose::Summary),
            summary_calls: calls.count(UsagePurpose::Summary),
            key,
            tail_entries,
            log_entries,
            instructions_hash,
        });
        let mut meta = meta;
        if let Some(previous) = &view.compaction {
            meta.masked = crate::tier::carried(&previous.masked, layout.kept);
        }
        crate::ledger::attach(&mut meta, ledger.as_ref());
        let generation = self
            .store
            .commit_compaction(
                session,
                CommitRequest {
                    meta: meta.clone(),
                    expected_generation: view.generation,
                },
            )
            .await
            .map_err(CompactionError::from_store)?;
        self.drop_speculation(session);
        self.events.publish(AgentEvent::HistoryReplaced {
            session_id: session,
            generation,
        });
        tracing::info!(tokens_before, tokens_after, generation, "compaction committed");
        Ok(Outcome::Committed(CompactionResult {
            tokens_before,
            tokens_after,
            strategy: meta.strategy,
            usage: meta.usage,
            noop: false,
            summary_calls: meta.summary_calls,
            meta,
        }))
    }

    /// The handoff text: the summary, then the user messages ([`TailPolicy::UserMessages`]) or the
    /// artifact ledger (what the summary misses), within `budget` tokens; and the ledger to carry.
    async fn appendix(
        &self,
        session: SessionId,
        view: &pith_core::StoredView,
        layout: &crate::prune::Layout<'_>,
        summary: &str,
        budget: u64,
        threshold: u64,
    ) -> Result<(String, Option<crate::ledger::Ledger>), CompactionError> {
        let counter = self.counter.as_ref();
        let summary = summary.trim_end();
        if self.config.tail_policy == TailPolicy::UserMessages {
            let log = self
                .store
                .load_log(session)
                .await
                .map_err(CompactionError::PersistFailed)?;
            let users = crate::policy::user_messages(&log);
            let block = crate::policy::render_user_messages(&users, budget, counter);
            return Ok((format!("{summary}{block}"), None));
        }
        if !self.config.ledger {
            return Ok((summary.to_string(), None));
        }
        let ledger = crate::ledger::carried(view, &layout.span);
        let user_budget = crate::ledger::user_budget(threshold);
        let rendered = ledger.render(summary, budget, user_budget, counter);
        Ok((format!("{summary}{rendered}"), Some(ledger)))
    }

    /// The summary job for `layout`: `span` (the layout's span with masked outputs restored; with
    /// incremental summaries off, everything before the cut), graded when relevance selection is
    /// on; and the previous summary.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn summary_job(
        &self,
        session: SessionId,
        view: &pith_core::StoredView,
        layout: &crate::prune::Layout<'_>,
        span: Vec<Message>,
        instructions: Option<&str>,
        cancel: &CancellationToken,
        calls: &Arc<CallLog>,
    ) -> Result<(SummaryJob, Option<String>), CompactionError> {
        let config = &*self.config;
        let mut span = span;
        let mut previous = view
            .compaction
            .as_ref()
            .map(|m| crate::ledger::strip_appendix(&m.summary).to_string())
            .filter(|s| !s.trim().is_empty());
        if !config.enable_incremental && view.compaction.is_some() {
            let log = self
                .store
                .load_log(session)
                .await
                .map_err(CompactionError::PersistFailed)?;
            span = full_span(&log, layout.kept.first().map(|m| m.id));
            previous = None;
        }
        if let Some(relevance) = &config.relevance {
            let groups = relevance::groups(&span);
            let request = relevance::GradeRequest {
                groups: relevance::render_groups(&span, &groups),
                instructions: instructions.map(str::to_string),
            };
            let keep = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(CompactionError::Cancelled),
                r = relevance.grader.grade(request, calls) => r.map_err(CompactionError::GraderFailed)?,
            };
            span = relevance::apply(&span, &groups, &keep);
        }
        let model = &view.session.model;
        let summary_model = config.summary_model.clone().unwrap_or_else(|| model.clone());
        let job = SummaryJob {
            session,
            window: self.router.context_window(&summary_model),
            model: summary_model,
            span,
            kept: layout.kept.iter().map(|m| (*m).clone()).collect(),
            previous_summary: previous.clone(),
            mode: PromptMode::Update,
            instructions: instructions.map(str::to_string),
            max_summary_tokens: config.max_summary_tokens,
            max_calls: config.max_summary_calls,
            counter: self.counter.clone(),
            cancel: cancel.clone(),
            calls: calls.clone(),
        };
        Ok((job, previous))
    }

    /// Runs the summarizer in the configured incremental mode.
    pub(crate) async fn summarize(
        &self,
        mut job: SummaryJob,
        previous: Option<String>,
    ) -> Result<crate::summary::SummaryOutput, CompactionError> {
        let Some(previous) = previous.filter(|_| self.config.incremental_mode == IncrementalMode::Append)
        else {
            return self.summarizer.summarize(job).await;
        };
        // Append: summarise the delta alone, concatenate, merge once past the bound.
        job.previous_summary = None;
        job.mode = PromptMode::First;
        let merge = job.clone();
        let delta = self.summarizer.summarize(job).await?;
        let joined = format!("{}\n\n{}", previous.trim(), delta.text.trim());
        if self.counter.count_text(&joined) <= self.config.max_summary_tokens {
            return Ok(crate::summary::SummaryOutput {
                text: joined,
                ..delta
            });
        }
        let merge = SummaryJob {
            span: Vec::new(),
            previous_summary: Some(joined),
            mode: PromptMode::Update,
            max_calls: merge
                .max_calls
                .saturating_sub(merge.calls.count(UsagePurpose::Summary))
                .max(1),
            ..merge
        };
        self.summarizer.summarize(merge).await
    }
}

/// Every conversation message of the log before `tail_start` (non-incremental mode).
fn full_span(log: &[pith_core::Entry], tail_start: Option<pith_core::EntryId>) -> Vec<Message> {
    log.iter()
        .take_while(|e| Some(e.id()) != tail_start)
        .filter_map(pith_core::Entry::as_message)
        .filter(|m| !m.role.is_instruction() && !m.is_reminder() && !m.meta.synthetic)
        .cloned()
        .collect()
}
