//! The Turn state machine: a pure function from (state, event) to (state, actions).
//!
//! Nothing here performs I/O or awaits. The driver performs the [`Action`]s a step returns and
//! feeds what happened back as the next [`Event`]. Keeping the decisions in one pure function is
//! what makes the two safety properties checkable by table and property tests:
//!
//! - **bounded**: every step counts against [`TurnState::max_steps`]; the step that would exceed it
//!   fails the turn, so no sequence of events loops forever;
//! - **at most one proactive and one reactive compaction per model request, and at most one
//!   compaction before any single model call**: the flags of the current [`RequestBudget`] are set
//!   when a compaction is requested and only cleared when a new model request begins (after tool
//!   results were persisted); the retry after a reactive compaction is never compacted proactively.
//!
//! The transitions (every one has a row in the table test):
//!
//! ```text
//! Idle            --Start------------------------> Preparing        [Emit Started, PersistInput, BuildView]
//! Preparing       --ViewReady(Fits)--------------> Sampling         [CallModel]
//! Preparing       --ViewReady(Over*), none yet---> Compacting(P)    [Compact(Proactive)]
//! Preparing       --ViewReady(OverThreshold), after a compaction of this request
//!                 -------------------------------> Sampling         [CallModel]   (the provider judges)
//! Preparing       --ViewReady(OverWindow), after a compaction of this request
//!                 -------------------------------> Failed(DoesNotFit)
//! Compacting(*)   --Compacted--------------------> Preparing        [BuildView]
//! Compacting(P)   --CompactionFailed, fits window> Sampling         [CallModel]
//! Compacting(P)   --CompactionFailed, over window> Failed(CompactionFailed | CircuitOpen)
//! Compacting(R)   --CompactionFailed-------------> Failed(CompactionFailed | CircuitOpen)
//! Sampling        --Replied(tool calls)----------> ExecutingTools   [RunTools]
//! Sampling        --Replied(final)---------------> Finishing        [PersistFinal]
//! Sampling        --Overflow, 1st----------------> Compacting(R)    [Compact(Reactive)]
//! Sampling        --Overflow, 2nd----------------> Failed(OverflowAfterCompaction)
//! Sampling        --ModelFailed------------------> Failed(ModelFailed)
//! ExecutingTools  --ToolsDone--------------------> Preparing        [PersistStep, BuildView]  (next request)
//! Finishing       --Persisted--------------------> Done             [Emit Finished]
//! any non-terminal --Cancel----------------------> Cancelled        [PersistCancelledTools if executing tools, Emit Cancelled]
//! any non-terminal --StoreFailed-----------------> Failed(StoreFailed)
//! any non-terminal, step bound exceeded ---------> Failed(StepLimit)
//! anything else ---------------------------------> Failed(UnexpectedEvent)
//! ```

use serde::{Deserialize, Serialize};

/// Default bound on the number of steps of one turn.
pub const DEFAULT_MAX_STEPS: u32 = 256;

/// Which kind of compaction the machine asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactKind {
    /// The local estimate says the next request will not fit.
    Proactive,
    /// The provider rejected the request as too long.
    Reactive,
}

/// What the budget check of the context pipeline found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// The request fits below the compaction threshold.
    Fits,
    /// The request is over the threshold but still within the model's window.
    OverThreshold,
    /// The request does not fit the model's window at all.
    OverWindow,
}

/// Why a compaction did not help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionFailure {
    /// The compaction ran and failed (summary, persistence, no progress, ...).
    Failed,
    /// The session's circuit breaker is open; no compaction was attempted.
    CircuitOpen,
}

/// Why a turn failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailReason {
    /// A compaction that the turn could not do without failed.
    CompactionFailed(CompactKind),
    /// A compaction the turn needed was refused because the circuit is open.
    CircuitOpen(CompactKind),
    /// The request overflowed again after the reactive compaction of this request.
    OverflowAfterCompaction,
    /// The request is larger than the model's window and the request's proactive compaction is
    /// spent.
    DoesNotFit,
    /// The model call failed with an error that is not an overflow.
    ModelFailed,
    /// Reading or writing the session failed.
    StoreFailed,
    /// The turn used its step bound.
    StepLimit,
    /// The driver fed an event the current state does not expect (a driver bug).
    UnexpectedEvent,
}

/// The phase of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Not started.
    Idle,
    /// Building the model view and checking its budget.
    Preparing,
    /// Compacting; `budget` is what the budget check found before (for proactive compactions).
    Compacting {
        /// The kind of compaction running.
        kind: CompactKind,
        /// The budget of the request before the compaction.
        budget: Budget,
    },
    /// Waiting for the model.
    Sampling,
    /// Running the tool calls of the last reply.
    ExecutingTools,
    /// Persisting the final answer.
    Finishing,
    /// The turn ended with a final answer.
    Done,
    /// The turn failed; the log is consistent.
    Failed(FailReason),
    /// The turn was cancelled; what was complete is persisted.
    Cancelled,
}

impl Phase {
    /// Whether the turn is over.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Done | Phase::Failed(_) | Phase::Cancelled)
    }
}

/// Compactions already spent on the current model request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RequestBudget {
    /// 0-based index of the model request within the turn.
    pub index: u32,
    /// A proactive compaction was requested for this request.
    pub proactive: bool,
    /// A reactive compaction was requested for this request.
    pub reactive: bool,
}

/// The whole state of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TurnState {
    /// The phase.
    pub phase: Phase,
    /// The current model request and the compactions spent on it.
    pub request: RequestBudget,
    /// Steps taken so far.
    pub steps: u32,
    /// The bound on steps.
    pub max_steps: u32,
    /// Compactions that committed during the turn.
    pub compactions: u32,
}

impl TurnState {
    /// A fresh turn bounded by `max_steps` steps.
    pub fn new(max_steps: u32) -> Self {
        Self {
            phase: Phase::Idle,
            request: RequestBudget::default(),
            steps: 0,
            max_steps: max_steps.max(1),
            compactions: 0,
        }
    }
}

impl Default for TurnState {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_STEPS)
    }
}

/// What happened (fed to the machine by the driver).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The caller started the turn.
    Start,
    /// The view was built and its budget checked.
    ViewReady(Budget),
    /// A compaction committed (`noop`: there was nothing to do and nothing changed).
    Compacted {
        /// Nothing was committed.
        noop: bool,
    },
    /// A compaction failed or was refused.
    CompactionFailed(CompactionFailure),
    /// The model replied.
    Replied {
        /// The reply asks for tools to run.
        tool_calls: bool,
    },
    /// The provider rejected the request as too long.
    Overflow,
    /// The model call failed otherwise.
    ModelFailed,
    /// Every tool call of the reply has a result.
    ToolsDone,
    /// The final answer was persisted.
    Persisted,
    /// A store operation failed.
    StoreFailed,
    /// The caller cancelled the turn.
    Cancel,
}

/// Lifecycle notices the driver publishes as events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Notice {
    /// The turn began.
    Started,
    /// The turn finished with a final answer.
    Finished,
    /// The turn failed.
    Failed(FailReason),
    /// The turn was cancelled.
    Cancelled,
}

/// What the driver must do, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Append the user's input to the log.
    PersistInput,
    /// Build the model view and check its budget; answers with [`Event::ViewReady`].
    BuildView,
    /// Compact the session; answers with [`Event::Compacted`] or [`Event::CompactionFailed`].
    Compact(CompactKind),
    /// Send the last built request; answers with [`Event::Replied`], [`Event::Overflow`] or
    /// [`Event::ModelFailed`].
    CallModel,
    /// Run the tool calls of the last reply; answers with [`Event::ToolsDone`].
    RunTools,
    /// Append the reply with its tool results, together, as one entry batch.
    PersistStep,
    /// Append the final reply; answers with [`Event::Persisted`].
    PersistFinal,
    /// Append the reply with the results that completed and error results for the cancelled calls.
    PersistCancelledTools,
    /// Publish a lifecycle notice.
    Emit(Notice),
}

fn fail(mut state: TurnState, reason: FailReason) -> (TurnState, Vec<Action>) {
    state.phase = Phase::Failed(reason);
    (state, vec![Action::Emit(Notice::Failed(reason))])
}

fn goto(mut state: TurnState, phase: Phase, actions: Vec<Action>) -> (TurnState, Vec<Action>) {
    state.phase = phase;
    (state, actions)
}

/// Advances the turn by one event. Terminal states ignore every event.
pub fn step(state: TurnState, event: Event) -> (TurnState, Vec<Action>) {
    if state.phase.is_terminal() {
        return (state, Vec::new());
    }
    let mut state = state;
    state.steps = state.steps.saturating_add(1);
    if event == Event::Cancel {
        let actions = match state.phase {
            Phase::ExecutingTools => vec![Action::PersistCancelledTools, Action::Emit(Notice::Cancelled)],
            _ => vec![Action::Emit(Notice::Cancelled)],
        };
        return goto(state, Phase::Cancelled, actions);
    }
    if event == Event::StoreFailed {
        return fail(state, FailReason::StoreFailed);
    }
    if state.steps > state.max_steps {
        return fail(state, FailReason::StepLimit);
    }
    transition(state, event)
}

fn transition(mut state: TurnState, event: Event) -> (TurnState, Vec<Action>) {
    use Action as A;
    match (state.phase, event) {
        (Phase::Idle, Event::Start) => goto(
            state,
            Phase::Preparing,
            vec![A::Emit(Notice::Started), A::PersistInput, A::BuildView],
        ),
        (Phase::Preparing, Event::ViewReady(Budget::Fits)) => {
            goto(state, Phase::Sampling, vec![A::CallModel])
        }
        // One compaction per model call: the retry after a reactive compaction is not compacted
        // proactively again.
        (Phase::Preparing, Event::ViewReady(budget))
            if !state.request.proactive && !state.request.reactive =>
        {
            state.request.proactive = true;
            let phase = Phase::Compacting {
                kind: CompactKind::Proactive,
                budget,
            };
            goto(state, phase, vec![A::Compact(CompactKind::Proactive)])
        }
        // The proactive compaction of this request is spent: let the provider judge a request
        // that still fits the window; never send one that cannot.
        (Phase::Preparing, Event::ViewReady(Budget::OverThreshold)) => {
            goto(state, Phase::Sampling, vec![A::CallModel])
        }
        (Phase::Preparing, Event::ViewReady(Budget::OverWindow)) => fail(state, FailReason::DoesNotFit),
        (Phase::Compacting { .. }, Event::Compacted { noop }) => {
            if !noop {
                state.compactions += 1;
            }
            goto(state, Phase::Preparing, vec![A::BuildView])
        }
        (
            Phase::Compacting {
                kind: CompactKind::Proactive,
                budget,
            },
            Event::CompactionFailed(why),
        ) => match budget {
            Budget::Fits | Budget::OverThreshold => goto(state, Phase::Sampling, vec![A::CallModel]),
            Budget::OverWindow => fail(state, failure_reason(why, CompactKind::Proactive)),
        },
        (
            Phase::Compacting {
                kind: CompactKind::Reactive,
                ..
            },
            Event::CompactionFailed(why),
        ) => fail(state, failure_reason(why, CompactKind::Reactive)),
        (Phase::Sampling, Event::Replied { tool_calls: true }) => {
            goto(state, Phase::ExecutingTools, vec![A::RunTools])
        }
        (Phase::Sampling, Event::Replied { tool_calls: false }) => {
            goto(state, Phase::Finishing, vec![A::PersistFinal])
        }
        (Phase::Sampling, Event::Overflow) if !state.request.reactive => {
            state.request.reactive = true;
            let phase = Phase::Compacting {
                kind: CompactKind::Reactive,
                budget: Budget::OverWindow,
            };
            goto(state, phase, vec![A::Compact(CompactKind::Reactive)])
        }
        (Phase::Sampling, Event::Overflow) => fail(state, FailReason::OverflowAfterCompaction),
        (Phase::Sampling, Event::ModelFailed) => fail(state, FailReason::ModelFailed),
        (Phase::ExecutingTools, Event::ToolsDone) => {
            state.request = RequestBudget {
                index: state.request.index.saturating_add(1),
                proactive: false,
                reactive: false,
            };
            goto(state, Phase::Preparing, vec![A::PersistStep, A::BuildView])
        }
        (Phase::Finishing, Event::Persisted) => goto(state, Phase::Done, vec![A::Emit(Notice::Finished)]),
        _ => fail(state, FailReason::UnexpectedEvent),
    }
}

fn failure_reason(why: CompactionFailure, kind: CompactKind) -> FailReason {
    match why {
        CompactionFailure::Failed => FailReason::CompactionFailed(kind),
        CompactionFailure::CircuitOpen => FailReason::CircuitOpen(kind),
    }
}
