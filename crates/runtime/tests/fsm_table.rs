//! Every transition of the Turn state machine, one table row each.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pith_runtime::fsm::{
    step, Action as A, Budget, CompactKind as K, CompactionFailure as CF, Event as E, FailReason as R,
    Notice as N, Phase as P, RequestBudget, TurnState,
};

fn at(phase: P, proactive: bool, reactive: bool) -> TurnState {
    TurnState {
        phase,
        request: RequestBudget {
            index: 0,
            proactive,
            reactive,
        },
        steps: 3,
        max_steps: 100,
        compactions: 0,
    }
}

fn compacting(kind: K, budget: Budget) -> P {
    P::Compacting { kind, budget }
}

fn failed(reason: R) -> (P, Vec<A>) {
    (P::Failed(reason), vec![A::Emit(N::Failed(reason))])
}

struct Row {
    name: &'static str,
    from: TurnState,
    event: E,
    to: P,
    actions: Vec<A>,
}

fn row(name: &'static str, from: TurnState, event: E, to: (P, Vec<A>)) -> Row {
    Row {
        name,
        from,
        event,
        to: to.0,
        actions: to.1,
    }
}

fn table() -> Vec<Row> {
    use Budget::*;
    vec![
        row(
            "start persists the input and builds the view",
            at(P::Idle, false, false),
            E::Start,
            (
                P::Preparing,
                vec![A::Emit(N::Started), A::PersistInput, A::BuildView],
            ),
        ),
        row(
            "a view that fits is sent",
            at(P::Preparing, false, false),
            E::ViewReady(Fits),
            (P::Sampling, vec![A::CallModel]),
        ),
        row(
            "over the threshold compacts proactively",
            at(P::Preparing, false, false),
            E::ViewReady(OverThreshold),
            (
                compacting(K::Proactive, OverThreshold),
                vec![A::Compact(K::Proactive)],
            ),
        ),
        row(
            "over the window compacts proactively",
            at(P::Preparing, false, false),
            E::ViewReady(OverWindow),
            (
                compacting(K::Proactive, OverWindow),
                vec![A::Compact(K::Proactive)],
            ),
        ),
        row(
            "the retry after a reactive compaction is sent, not compacted again",
            at(P::Preparing, false, true),
            E::ViewReady(OverThreshold),
            (P::Sampling, vec![A::CallModel]),
        ),
        row(
            "the retry after a reactive compaction that still exceeds the window fails",
            at(P::Preparing, false, true),
            E::ViewReady(OverWindow),
            failed(R::DoesNotFit),
        ),
        row(
            "a second proactive compaction is never requested: the provider judges",
            at(P::Preparing, true, false),
            E::ViewReady(OverThreshold),
            (P::Sampling, vec![A::CallModel]),
        ),
        row(
            "over the window with the proactive compaction spent fails",
            at(P::Preparing, true, false),
            E::ViewReady(OverWindow),
            failed(R::DoesNotFit),
        ),
        row(
            "a committed proactive compaction rebuilds the view",
            at(compacting(K::Proactive, OverThreshold), true, false),
            E::Compacted { noop: false },
            (P::Preparing, vec![A::BuildView]),
        ),
        row(
            "a committed reactive compaction rebuilds the view to retry the request",
            at(compacting(K::Reactive, OverWindow), false, true),
            E::Compacted { noop: false },
            (P::Preparing, vec![A::BuildView]),
        ),
        row(
            "a no-op compaction rebuilds the view too",
            at(compacting(K::Proactive, OverThreshold), true, false),
            E::Compacted { noop: true },
            (P::Preparing, vec![A::BuildView]),
        ),
        row(
            "a failed proactive compaction sends a request that fits the window",
            at(compacting(K::Proactive, OverThreshold), true, false),
            E::CompactionFailed(CF::Failed),
            (P::Sampling, vec![A::CallModel]),
        ),
        row(
            "an open circuit before a request that fits the window still sends it",
            at(compacting(K::Proactive, OverThreshold), true, false),
            E::CompactionFailed(CF::CircuitOpen),
            (P::Sampling, vec![A::CallModel]),
        ),
        row(
            "a failed proactive compaction over the window fails the turn",
            at(compacting(K::Proactive, OverWindow), true, false),
            E::CompactionFailed(CF::Failed),
            failed(R::CompactionFailed(K::Proactive)),
        ),
        row(
            "an open circuit over the window fails the turn",
            at(compacting(K::Proactive, OverWindow), true, false),
            E::CompactionFailed(CF::CircuitOpen),
            failed(R::CircuitOpen(K::Proactive)),
        ),
        row(
            "a failed reactive compaction fails the turn",
            at(compacting(K::Reactive, OverWindow), false, true),
            E::CompactionFailed(CF::Failed),
            failed(R::CompactionFailed(K::Reactive)),
        ),
        row(
            "an open circuit on overflow fails the turn",
            at(compacting(K::Reactive, OverWindow), false, true),
            E::CompactionFailed(CF::CircuitOpen),
            failed(R::CircuitOpen(K::Reactive)),
        ),
        row(
            "a reply with tool calls runs the tools",
            at(P::Sampling, false, false),
            E::Replied { tool_calls: true },
            (P::ExecutingTools, vec![A::RunTools]),
        ),
        row(
            "a final reply is persisted",
            at(P::Sampling, false, false),
            E::Replied { tool_calls: false },
            (P::Finishing, vec![A::PersistFinal]),
        ),
        row(
            "the first overflow compacts reactively",
            at(P::Sampling, false, false),
            E::Overflow,
            (compacting(K::Reactive, OverWindow), vec![A::Compact(K::Reactive)]),
        ),
        row(
            "an overflow after a proactive compaction still compacts reactively once",
            at(P::Sampling, true, false),
            E::Overflow,
            (compacting(K::Reactive, OverWindow), vec![A::Compact(K::Reactive)]),
        ),
        row(
            "the retried request overflowing again fails the turn",
            at(P::Sampling, true, true),
            E::Overflow,
            failed(R::OverflowAfterCompaction),
        ),
        row(
            "another model error fails the turn",
            at(P::Sampling, false, false),
            E::ModelFailed,
            failed(R::ModelFailed),
        ),
        row(
            "tool results are persisted with their calls and the next request is prepared",
            at(P::ExecutingTools, true, true),
            E::ToolsDone,
            (P::Preparing, vec![A::PersistStep, A::BuildView]),
        ),
        row(
            "a persisted final answer ends the turn",
            at(P::Finishing, false, false),
            E::Persisted,
            (P::Done, vec![A::Emit(N::Finished)]),
        ),
        row(
            "cancel while preparing",
            at(P::Preparing, false, false),
            E::Cancel,
            (P::Cancelled, vec![A::Emit(N::Cancelled)]),
        ),
        row(
            "cancel while compacting",
            at(compacting(K::Proactive, OverThreshold), true, false),
            E::Cancel,
            (P::Cancelled, vec![A::Emit(N::Cancelled)]),
        ),
        row(
            "cancel while sampling",
            at(P::Sampling, false, false),
            E::Cancel,
            (P::Cancelled, vec![A::Emit(N::Cancelled)]),
        ),
        row(
            "cancel while executing tools persists the calls with their results",
            at(P::ExecutingTools, false, false),
            E::Cancel,
            (
                P::Cancelled,
                vec![A::PersistCancelledTools, A::Emit(N::Cancelled)],
            ),
        ),
        row(
            "cancel while finishing",
            at(P::Finishing, false, false),
            E::Cancel,
            (P::Cancelled, vec![A::Emit(N::Cancelled)]),
        ),
        row(
            "cancel before start",
            at(P::Idle, false, false),
            E::Cancel,
            (P::Cancelled, vec![A::Emit(N::Cancelled)]),
        ),
        row(
            "a store failure while preparing fails the turn",
            at(P::Preparing, false, false),
            E::StoreFailed,
            failed(R::StoreFailed),
        ),
        row(
            "a store failure while finishing fails the turn",
            at(P::Finishing, false, false),
            E::StoreFailed,
            failed(R::StoreFailed),
        ),
        row(
            "an unexpected event is a driver bug and fails the turn",
            at(P::Sampling, false, false),
            E::ToolsDone,
            failed(R::UnexpectedEvent),
        ),
        row(
            "starting twice is unexpected",
            at(P::Preparing, false, false),
            E::Start,
            failed(R::UnexpectedEvent),
        ),
    ]
}

#[test]
fn every_transition_matches_the_table() {
    for r in table() {
        let (next, actions) = step(r.from, r.event);
        assert_eq!(next.phase, r.to, "{}: phase", r.name);
        assert_eq!(actions, r.actions, "{}: actions", r.name);
        assert_eq!(next.steps, r.from.steps + 1, "{}: steps", r.name);
    }
}

#[test]
fn flags_are_set_by_compactions_and_cleared_by_the_next_request() {
    let (s, _) = step(
        at(P::Preparing, false, false),
        E::ViewReady(Budget::OverThreshold),
    );
    assert!(s.request.proactive && !s.request.reactive);
    let (s, _) = step(s, E::Compacted { noop: false });
    assert_eq!(s.compactions, 1);
    let (s, _) = step(s, E::ViewReady(Budget::Fits));
    let (s, _) = step(s, E::Overflow);
    assert!(s.request.proactive && s.request.reactive);
    let (s, _) = step(s, E::Compacted { noop: true });
    assert_eq!(s.compactions, 1, "a no-op is not counted");
    let (s, _) = step(s, E::ViewReady(Budget::Fits));
    let (s, _) = step(s, E::Replied { tool_calls: true });
    let (s, _) = step(s, E::ToolsDone);
    assert_eq!(s.request.index, 1);
    assert!(!s.request.proactive && !s.request.reactive);
}

#[test]
fn terminal_states_ignore_events() {
    for phase in [P::Done, P::Cancelled, P::Failed(R::ModelFailed)] {
        for event in [E::Start, E::Cancel, E::StoreFailed, E::Overflow, E::Persisted] {
            let from = at(phase, false, false);
            let (next, actions) = step(from, event);
            assert_eq!(next, from);
            assert!(actions.is_empty());
        }
    }
}

#[test]
fn the_step_bound_fails_the_turn() {
    let mut s = TurnState::new(4);
    let events = [
        E::Start,
        E::ViewReady(Budget::Fits),
        E::Replied { tool_calls: true },
        E::ToolsDone,
        E::ViewReady(Budget::Fits),
    ];
    let mut last = Vec::new();
    for e in events {
        (s, last) = step(s, e);
    }
    assert_eq!(s.phase, P::Failed(R::StepLimit));
    assert_eq!(last, vec![A::Emit(N::Failed(R::StepLimit))]);
}

#[test]
fn a_tool_loop_runs_until_a_final_answer() {
    let mut s = TurnState::default();
    let mut all = Vec::new();
    let script = [
        E::Start,
        E::ViewReady(Budget::Fits),
        E::Replied { tool_calls: true },
        E::ToolsDone,
        E::ViewReady(Budget::OverThreshold),
        E::Compacted { noop: false },
        E::ViewReady(Budget::Fits),
        E::Replied { tool_calls: false },
        E::Persisted,
    ];
    for e in script {
        let (n, a) = step(s, e);
        s = n;
        all.extend(a);
    }
    assert_eq!(s.phase, P::Done);
    assert_eq!(s.compactions, 1);
    assert_eq!(all.iter().filter(|a| **a == A::CallModel).count(), 2);
    assert_eq!(all.last(), Some(&A::Emit(N::Finished)));
}
