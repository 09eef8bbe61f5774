//! The async driver of one turn: performs the actions of the state machine.
//!
//! The driver owns no decisions. It asks [`fsm::step`] what to do, does it with the router, the
//! store, the tools and the compaction service, and feeds the outcome back as the next event.
//! Every await that can take long races the turn's cancellation token; store writes do not, so
//! an append is either whole or absent, never half-done.

use std::collections::VecDeque;

use pith_compaction::{CompactionError, CompactionTrigger, OverflowInfo};
use pith_core::{AgentEvent, Entry, EventSink, Message, SessionId, StoredView, Usage};
use pith_router::{ChatRequest, ChatResponse, ProviderError};
use pith_store::{AppendRequest, StoreError, UsagePurpose, UsageRecord};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::{CompactKindName, RuntimeError};
use crate::events::DeltaSink;
use crate::exec::{self, CallResult, CallSpec, ExecLimits};
use crate::fsm::{self, Action, CompactKind, CompactionFailure, Event, FailReason, Notice, TurnState};
use crate::pipeline::Prepared;
use crate::runtime::Inner;
use crate::turn::{CompactionReport, TurnOutcome, TurnPlan};

/// What performing one action led to.
enum Next {
    /// Nothing to feed back.
    Continue,
    /// The next event.
    Event(Event),
}

/// The state of one running turn.
pub(crate) struct TurnDriver<'a> {
    rt: &'a Inner,
    session_id: SessionId,
    model: String,
    turn: u64,
    plan: TurnPlan,
    cancel: CancellationToken,
    state: TurnState,
    prepared: Option<Prepared>,
    /// The view the budget was decided for; the request is built from it when it is sent.
    view: Option<StoredView>,
    /// The model-call slot held from loading the view until the reply arrives.
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Time spent waiting for model-call slots.
    slot_wait: std::time::Duration,
    reply: Option<ChatResponse>,
    results: Vec<CallResult>,
    usage: Usage,
    compactions: Vec<CompactionReport>,
    model_requests: u32,
    tool_calls: u32,
    final_message: Option<Message>,
    overflow: Option<ProviderError>,
    model_error: Option<ProviderError>,
    compaction_error: Option<CompactionError>,
    store_error: Option<StoreError>,
    error: Option<RuntimeError>,
}

impl<'a> TurnDriver<'a> {
    pub(crate) fn new(
        rt: &'a Inner,
        session_id: SessionId,
        model: String,
        turn: u64,
        plan: TurnPlan,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            rt,
            session_id,
            model,
            turn,
            plan,
            cancel,
            state: TurnState::new(rt.config.max_steps),
            prepared: None,
            view: None,
            slot: None,
            slot_wait: std::time::Duration::ZERO,
            reply: None,
            results: Vec::new(),
            usage: Usage::default(),
            compactions: Vec::new(),
            model_requests: 0,
            tool_calls: 0,
            final_message: None,
            overflow: None,
            model_error: None,
            compaction_error: None,
            store_error: None,
            error: None,
        }
    }

    /// Runs the turn to a terminal state.
    pub(crate) async fn run(mut self) -> Result<TurnOutcome, RuntimeError> {
        let span = tracing::info_span!("turn", session_id = %self.session_id, turn = self.turn);
        async {
            let mut events = VecDeque::from([Event::Start]);
            while let Some(event) = events.pop_front() {
                let (state, actions) = fsm::step(self.state, event);
                self.state = state;
                for action in actions {
                    match self.perform(action).await {
                        Next::Continue => {}
                        Next::Event(e @ Event::StoreFailed) => {
                            events.clear();
                            events.push_back(e);
                            break;
                        }
                        Next::Event(e) => events.push_back(e),
                    }
                }
            }
        }
        .instrument(span)
        .await;
        self.finish()
    }

    fn finish(mut self) -> Result<TurnOutcome, RuntimeError> {
        match (self.state.phase, self.final_message.take()) {
            (fsm::Phase::Done, Some(message)) => Ok(TurnOutcome {
                session_id: self.session_id,
                turn: self.turn,
                message,
                usage: self.usage,
                compactions: self.compactions,
                model_requests: self.model_requests,
                tool_calls: self.tool_calls,
                resumed: self.plan.resumed,
                model_slot_wait: self.slot_wait,
            }),
            (fsm::Phase::Cancelled, _) => Err(RuntimeError::Cancelled),
            _ => Err(self.error.take().unwrap_or(RuntimeError::Internal)),
        }
    }

    fn publish(&self, event: AgentEvent) {
        self.rt.events.publish(event);
    }

    async fn perform(&mut self, action: Action) -> Next {
        match action {
            Action::Emit(notice) => {
                self.emit(notice);
                Next::Continue
            }
            Action::PersistInput => {
                if self.plan.resumed {
                    return Next::Continue;
                }
                let request = AppendRequest::message(self.plan.user.clone())
                    .with_dedupe_key(self.plan.input_key.clone());
                self.append(request).await
            }
            // The large steps are boxed: a turn's future is as large as its largest step, and
            // thousands of turns waiting for a model-call slot should each hold only the small
            // state they wait in, not room for a model call, a compaction and the tools.
            Action::PersistStep | Action::PersistCancelledTools => Box::pin(self.persist_step()).await,
            Action::PersistFinal => Box::pin(self.persist_final()).await,
            Action::BuildView => Box::pin(self.build_view()).await,
            Action::Compact(kind) => Box::pin(self.compact(kind)).await,
            Action::CallModel => Box::pin(self.call_model()).await,
            Action::RunTools => Box::pin(self.run_tools()).await,
        }
    }

    fn emit(&mut self, notice: Notice) {
        let session_id = self.session_id;
        let turn = self.turn;
        match notice {
            Notice::Started => self.publish(AgentEvent::TurnStarted { session_id, turn }),
            Notice::Finished => self.publish(AgentEvent::TurnFinished {
                session_id,
                turn,
                usage: self.usage,
                compactions: self.compactions.len() as u32,
            }),
            Notice::Cancelled => self.publish(AgentEvent::TurnFailed {
                session_id,
                turn,
                error: RuntimeError::Cancelled.to_string(),
            }),
            Notice::Failed(reason) => {
                let error = self.error_for(reason);
                self.publish(AgentEvent::TurnFailed {
                    session_id,
                    turn,
                    error: error.to_string(),
                });
                self.error = Some(error);
            }
        }
    }

    fn error_for(&mut self, reason: FailReason) -> RuntimeError {
        match reason {
            FailReason::CompactionFailed(kind) => match self.compaction_error.take() {
                Some(source) => RuntimeError::CompactionFailed {
                    kind: CompactKindName(kind),
                    source,
                },
                None => RuntimeError::Internal,
            },
            FailReason::CircuitOpen(kind) => RuntimeError::CircuitOpen {
                kind: CompactKindName(kind),
                session: self.session_id,
            },
            FailReason::OverflowAfterCompaction => match self.overflow.take() {
                Some(source) => RuntimeError::OverflowAfterCompaction { source },
                None => RuntimeError::Internal,
            },
            FailReason::DoesNotFit => RuntimeError::DoesNotFit {
                model: self.model.clone(),
                tokens: self.prepared.as_ref().map_or(0, |p| p.context_tokens),
                window: self.prepared.as_ref().map_or(0, |p| p.window),
            },
            FailReason::ModelFailed => match self.model_error.take() {
                Some(e) => RuntimeError::Model(e),
                None => RuntimeError::Internal,
            },
            FailReason::StoreFailed => match self.store_error.take() {
                Some(e) => RuntimeError::Store(e),
                None => RuntimeError::Internal,
            },
            FailReason::StepLimit => RuntimeError::StepLimit(self.state.max_steps),
            FailReason::UnexpectedEvent => RuntimeError::Internal,
        }
    }

    async fn append(&mut self, request: AppendRequest) -> Next {
        match self.rt.store.append(self.session_id, request).await {
            Ok(_) => Next::Continue,
            Err(e) => {
                self.store_error = Some(e);
                Next::Event(Event::StoreFailed)
            }
        }
    }

    fn step_key(&mut self) -> String {
        let key = format!("{}/step/{}", self.plan.turn_key, self.plan.next_step);
        self.plan.next_step += 1;
        key
    }

    /// Appends the reply together with one result per call (error results for cancelled calls).
    async fn persist_step(&mut self) -> Next {
        let Some(reply) = self.reply.take() else {
            return Next::Continue;
        };
        let results = std::mem::take(&mut self.results);
        let calls = CallSpec::all_in(&reply.message);
        let mut entries = vec![Entry::Message(reply.message)];
        for call in &calls {
            let result = results
                .iter()
                .find(|r| r.call_id == call.call_id)
                .cloned()
                .unwrap_or_else(|| CallResult {
                    call_id: call.call_id.clone(),
                    name: call.name.clone(),
                    content: format!("tool call {} was cancelled before it started", call.name),
                    status: exec::CallStatus::Cancelled,
                });
            entries.push(Entry::Message(result.to_message()));
        }
        let key = self.step_key();
        self.append(AppendRequest::new(entries).with_dedupe_key(key))
            .await
    }

    async fn persist_final(&mut self) -> Next {
        let Some(reply) = self.reply.take() else {
            return Next::Event(Event::StoreFailed);
        };
        let key = self.step_key();
        let message = reply.message;
        match self
            .append(AppendRequest::message(message.clone()).with_dedupe_key(key))
            .await
        {
            Next::Continue => {
                self.final_message = Some(message);
                Next::Event(Event::Persisted)
            }
            other => other,
        }
    }

    /// Takes a model-call slot if the runtime bounds them and the turn holds none yet.
    ///
    /// `false` when the turn was cancelled while waiting.
    async fn take_slot(&mut self) -> bool {
        let Some(slots) = self.rt.model_slots.as_ref() else {
            return true;
        };
        if self.slot.is_some() {
            return true;
        }
        let started = std::time::Instant::now();
        let permit = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return false,
            p = slots.clone().acquire_owned() => p,
        };
        self.slot_wait += started.elapsed();
        // The semaphore is never closed, so acquiring only fails if that changes; a turn then
        // runs unbounded rather than failing.
        self.slot = permit.ok();
        true
    }

    async fn build_view(&mut self) -> Next {
        if self.cancel.is_cancelled() || !self.take_slot().await {
            return Next::Event(Event::Cancel);
        }
        let loaded = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Next::Event(Event::Cancel),
            v = self.rt.store.load_view(self.session_id) => v,
        };
        let view = match loaded {
            Ok(v) => pith_compaction::tier::masked_view(v),
            Err(e) => {
                self.store_error = Some(e);
                return Next::Event(Event::StoreFailed);
            }
        };
        let window = self.rt.router.context_window(&self.model);
        let tools = self.rt.tools.declarations();
        match self.rt.pipeline.prepare(&view, &tools, window) {
            Ok(prepared) => {
                tracing::debug!(
                    context_tokens = prepared.context_tokens,
                    threshold = prepared.threshold,
                    window,
                    budget = ?prepared.budget,
                    "view prepared"
                );
                let budget = prepared.budget;
                if budget == fsm::Budget::Fits {
                    // Past the soft threshold: the summary starts in the background.
                    self.rt.compaction.speculate(
                        self.session_id,
                        prepared.generation,
                        prepared.context_tokens,
                        prepared.threshold,
                    );
                }
                self.prepared = Some(prepared);
                self.view = Some(view);
                Next::Event(Event::ViewReady(budget))
            }
            Err(e) => {
                self.compaction_error = Some(CompactionError::InvalidConfig(e));
                // A configuration that cannot work with the window: the budget cannot be judged,
                // so the request is treated as not fitting and the turn fails with the reason.
                Next::Event(Event::ViewReady(fsm::Budget::OverWindow))
            }
        }
    }

    async fn compact(&mut self, kind: CompactKind) -> Next {
        if self.cancel.is_cancelled() {
            return Next::Event(Event::Cancel);
        }
        let trigger = match kind {
            CompactKind::Proactive => CompactionTrigger::Proactive,
            CompactKind::Reactive => CompactionTrigger::Reactive(
                self.overflow
                    .as_ref()
                    .and_then(OverflowInfo::from_error)
                    .unwrap_or_default(),
            ),
        };
        let result = self
            .rt
            .compaction
            .compact_with_cancel(self.session_id, trigger, self.cancel.child_token())
            .await;
        match result {
            Ok(result) => {
                if !result.noop {
                    self.compactions.push(CompactionReport::new(kind, &result));
                }
                Next::Event(Event::Compacted { noop: result.noop })
            }
            Err(CompactionError::Cancelled) => Next::Event(Event::Cancel),
            Err(_) if self.cancel.is_cancelled() => Next::Event(Event::Cancel),
            Err(CompactionError::CircuitOpen) => {
                self.compaction_error = Some(CompactionError::CircuitOpen);
                Next::Event(Event::CompactionFailed(CompactionFailure::CircuitOpen))
            }
            // Nothing to do, or another process committed first: the view may have changed, so
            // it is rebuilt; the budget check decides again.
            Err(CompactionError::NotNeeded { .. } | CompactionError::Conflict { .. }) => {
                Next::Event(Event::Compacted { noop: true })
            }
            Err(e) => {
                tracing::warn!(error = %e, ?kind, "compaction failed");
                self.compaction_error = Some(e);
                Next::Event(Event::CompactionFailed(CompactionFailure::Failed))
            }
        }
    }

    async fn call_model(&mut self) -> Next {
        if self.cancel.is_cancelled() {
            return Next::Event(Event::Cancel);
        }
        let (Some(prepared), Some(view)) = (self.prepared.as_ref(), self.view.take()) else {
            return Next::Event(Event::ModelFailed);
        };
        // Built only now that the request is sent, by moving the view's messages.
        let messages = self.rt.pipeline.request_messages(view);
        let config = &self.rt.config;
        let mut request = ChatRequest::new(self.model.clone(), messages)
            .with_tools(self.rt.tools.declarations())
            .streaming(config.stream);
        if let Some(max) = config.max_output_tokens {
            request = request.with_max_tokens(max);
        }
        if let Some(t) = config.temperature {
            request = request.with_temperature(t);
        }
        self.publish(AgentEvent::ModelRequest {
            session_id: self.session_id,
            model: self.model.clone(),
            estimated_tokens: prepared.context_tokens,
        });
        self.model_requests += 1;
        let sink = DeltaSink::new(self.rt.events.as_ref(), self.session_id);
        let router = self.rt.router.clone();
        let span = tracing::info_span!("llm.request", model = %self.model, attempt = self.model_requests);
        let result = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Next::Event(Event::Cancel),
            r = router.chat(request, Some(&sink)).instrument(span) => r,
        };
        // The request is gone with the call: the next view is loaded under a new slot.
        self.slot = None;
        match result {
            Ok(mut response) => {
                response.message.meta.model = Some(self.model.clone());
                self.usage.add(&response.usage);
                self.publish(AgentEvent::ModelResponse {
                    session_id: self.session_id,
                    model: self.model.clone(),
                    usage: response.usage,
                    finish: response.finish,
                });
                self.record_usage(response.usage).await;
                let tool_calls = response.message.has_tool_calls();
                self.reply = Some(response);
                Next::Event(Event::Replied { tool_calls })
            }
            Err(e) if e.is_context_overflow() => {
                tracing::info!(error = %e, "provider reported a context overflow");
                self.overflow = Some(e);
                Next::Event(Event::Overflow)
            }
            Err(ProviderError::Cancelled) if self.cancel.is_cancelled() => Next::Event(Event::Cancel),
            Err(e) => {
                self.model_error = Some(e);
                Next::Event(Event::ModelFailed)
            }
        }
    }

    async fn record_usage(&self, usage: Usage) {
        if usage.is_zero() {
            return;
        }
        let record = UsageRecord {
            at: chrono::Utc::now(),
            model: self.model.clone(),
            purpose: UsagePurpose::Turn,
            usage,
            discarded: false,
        };
        if let Err(e) = self.rt.store.record_usage(self.session_id, record).await {
            // The ledger is accounting, not history: a failed write must not fail the turn.
            tracing::warn!(error = %e, "recording turn usage failed");
        }
    }

    async fn run_tools(&mut self) -> Next {
        let Some(reply) = self.reply.as_ref() else {
            return Next::Event(Event::ToolsDone);
        };
        let calls = CallSpec::all_in(&reply.message);
        if self.cancel.is_cancelled() {
            return Next::Event(Event::Cancel);
        }
        for call in &calls {
            self.publish(AgentEvent::ToolCall {
                session_id: self.session_id,
                call_id: call.call_id.clone(),
                name: call.name.clone(),
            });
        }
        let limits = ExecLimits {
            concurrency: self.rt.config.tool_concurrency,
            timeout: self.rt.config.tool_timeout,
        };
        let session_id = self.session_id;
        let events = self.rt.events.clone();
        let mut finished = 0u32;
        let results = exec::run_calls(&self.rt.tools, session_id, &calls, limits, &self.cancel, |r| {
            finished += 1;
            events.publish(AgentEvent::ToolResult {
                session_id,
                call_id: r.call_id.clone(),
                name: r.name.clone(),
                is_error: r.is_error(),
            });
        })
        .await;
        self.tool_calls += finished;
        self.results = results;
        if self.cancel.is_cancelled() {
            return Next::Event(Event::Cancel);
        }
        Next::Event(Event::ToolsDone)
    }
}
