//! The per-session circuit breaker, as pure transitions over the persisted state.
//!
//! Consecutive counted failures are stored with the session, so an open circuit survives a
//! process restart. At `max_failures` the circuit opens (and the caller publishes
//! `CompactionCircuitOpened` exactly once, on that transition); while open, compaction makes no
//! model call. A success resets the count; only an operator's reset closes an open circuit.

use chrono::Utc;
use pith_store::BreakerState;

/// What a counted failure did to the breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureOutcome {
    /// The new state to persist.
    pub state: BreakerState,
    /// Whether this failure opened the circuit (publish the event now, and only now).
    pub opened_now: bool,
}

/// Applies one counted failure.
pub fn on_failure(state: &BreakerState, max_failures: u32, error: &str) -> FailureOutcome {
    let failures = state.consecutive_failures.saturating_add(1);
    let open = state.open || failures >= max_failures;
    let opened_now = open && !state.open;
    FailureOutcome {
        state: BreakerState {
            consecutive_failures: failures,
            open,
            opened_at: if opened_now {
                Some(Utc::now())
            } else {
                state.opened_at
            },
            last_error: Some(error.chars().take(500).collect()),
        },
        opened_now,
    }
}

/// The state after a success: `None` when nothing needs persisting.
pub fn on_success(state: &BreakerState) -> Option<BreakerState> {
    (state.consecutive_failures > 0 || state.open).then(BreakerState::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_once_at_max_failures_and_success_resets() {
        let s0 = BreakerState::default();
        let a = on_failure(&s0, 3, "e1");
        assert!(!a.opened_now && !a.state.open);
        let b = on_failure(&a.state, 3, "e2");
        assert!(!b.opened_now);
        let c = on_failure(&b.state, 3, "e3");
        assert!(c.opened_now && c.state.open);
        assert!(c.state.opened_at.is_some());
        let d = on_failure(&c.state, 3, "e4");
        assert!(!d.opened_now && d.state.open);
        assert_eq!(on_success(&b.state), Some(BreakerState::default()));
        assert_eq!(on_success(&s0), None);
    }
}
