//! Property tests of the Turn state machine: bounded, and never a compaction loop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use pith_runtime::fsm::{step, Action, Budget, CompactKind, CompactionFailure, Event, Phase, TurnState};
use proptest::prelude::*;

fn any_budget() -> impl Strategy<Value = Budget> {
    prop_oneof![
        Just(Budget::Fits),
        Just(Budget::OverThreshold),
        Just(Budget::OverWindow)
    ]
}

fn any_event() -> impl Strategy<Value = Event> {
    prop_oneof![
        Just(Event::Start),
        any_budget().prop_map(Event::ViewReady),
        any::<bool>().prop_map(|noop| Event::Compacted { noop }),
        Just(Event::CompactionFailed(CompactionFailure::Failed)),
        Just(Event::CompactionFailed(CompactionFailure::CircuitOpen)),
        any::<bool>().prop_map(|tool_calls| Event::Replied { tool_calls }),
        Just(Event::Overflow),
        Just(Event::ModelFailed),
        Just(Event::ToolsDone),
        Just(Event::Persisted),
        Just(Event::StoreFailed),
        Just(Event::Cancel),
    ]
}

/// Checks the compaction bounds on the actions a run produced (tagged by request index).
fn check_compaction_bounds(actions: &[(u32, Action)]) -> Result<(), TestCaseError> {
    let mut per_request: HashMap<(u32, CompactKind), u32> = HashMap::new();
    let mut since_last_call = 0u32;
    for (request, action) in actions {
        match action {
            Action::Compact(kind) => {
                *per_request.entry((*request, *kind)).or_default() += 1;
                since_last_call += 1;
                prop_assert!(since_last_call <= 1, "two compactions before one model call");
            }
            Action::CallModel => since_last_call = 0,
            _ => {}
        }
    }
    for ((request, kind), n) in per_request {
        prop_assert!(n <= 1, "{n} {kind:?} compactions for request {request}");
    }
    Ok(())
}

/// An environment that answers each generating action with a random but well-formed event.
fn answer(action: Action, choice: u8) -> Option<Event> {
    let budgets = [Budget::Fits, Budget::OverThreshold, Budget::OverWindow];
    match action {
        Action::BuildView => Some(Event::ViewReady(budgets[usize::from(choice % 3)])),
        Action::Compact(_) => Some(match choice % 3 {
            0 => Event::Compacted { noop: false },
            1 => Event::Compacted { noop: true },
            _ => Event::CompactionFailed(
                [CompactionFailure::Failed, CompactionFailure::CircuitOpen][usize::from(choice % 2)],
            ),
        }),
        Action::CallModel => Some(match choice % 5 {
            0 | 1 => Event::Overflow,
            2 => Event::Replied { tool_calls: true },
            3 => Event::Replied {
                tool_calls: choice % 7 < 1,
            },
            _ => Event::ModelFailed,
        }),
        Action::RunTools => Some(Event::ToolsDone),
        Action::PersistFinal => Some(Event::Persisted),
        Action::PersistInput | Action::PersistStep | Action::PersistCancelledTools | Action::Emit(_) => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// Arbitrary events, valid or not: the turn ends within its step bound, and no request is
    /// compacted more than once per kind, nor any model call preceded by two compactions.
    #[test]
    fn arbitrary_events_terminate_within_the_bound(
        max_steps in 1u32..64,
        events in proptest::collection::vec(any_event(), 0..200),
    ) {
        let mut state = TurnState::new(max_steps);
        let mut actions = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let request = state.request.index;
            let (next, out) = step(state, *event);
            actions.extend(out.into_iter().map(|a| (request, a)));
            state = next;
            if i as u32 >= max_steps {
                prop_assert!(state.phase.is_terminal(), "not terminal after {} events", i + 1);
            }
        }
        prop_assert!(state.steps <= max_steps + 1);
        check_compaction_bounds(&actions)?;
    }

    /// A random but well-formed environment (what the driver feeds): every run ends within the
    /// bound, with at most one proactive and one reactive compaction per request.
    #[test]
    fn driven_runs_terminate_and_never_loop_compaction(
        max_steps in 8u32..200,
        choices in proptest::collection::vec(any::<u8>(), 400),
        cancel_at in proptest::option::of(0usize..400),
    ) {
        let mut state = TurnState::new(max_steps);
        let mut pending = vec![Event::Start];
        let mut actions = Vec::new();
        let mut fed = 0usize;
        while let Some(event) = pending.pop() {
            let event = if Some(fed) == cancel_at { Event::Cancel } else { event };
            fed += 1;
            let request = state.request.index;
            let (next, out) = step(state, event);
            state = next;
            for a in &out {
                if let Some(e) = answer(*a, choices[fed % choices.len()]) {
                    pending.push(e);
                }
            }
            actions.extend(out.into_iter().map(|a| (request, a)));
            prop_assert!(fed <= max_steps as usize + 1, "no end after {fed} events");
        }
        prop_assert!(state.phase.is_terminal(), "stopped in {:?}", state.phase);
        check_compaction_bounds(&actions)?;
        if state.phase == Phase::Done {
            prop_assert!(actions.iter().any(|(_, a)| *a == Action::PersistFinal));
        }
    }
}
