//! Token budgets of a summary request.
//!
//! A summary request must itself fit the summary model's window, or the compaction fails with
//! the very overflow it was meant to cure. The request reserves min(8,192, window/10) tokens for
//! the summary (its `max_tokens`) and keeps 5% of the window as headroom for estimate error; the
//! rest is the input budget. A request over it is chunked.

use pith_core::{Message, TokenCounter};

/// Upper bound of the output reserve.
pub const MAX_OUTPUT_RESERVE: u64 = 8_192;
/// Headroom kept free, in percent of the window.
pub const HEADROOM_PERCENT: u64 = 5;

/// The budget of requests to one summary model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBudget {
    /// The summary model's window.
    pub window: u64,
    /// Tokens reserved for the summary (the request's `max_tokens`).
    pub output_reserve: u64,
    /// Tokens kept free for estimate error.
    pub headroom: u64,
}

impl RequestBudget {
    /// The budget for a model with this window.
    pub fn for_window(window: u64) -> Self {
        Self {
            window,
            output_reserve: MAX_OUTPUT_RESERVE.min(window / 10).max(1),
            headroom: window * HEADROOM_PERCENT / 100,
        }
    }

    /// Tokens the request's messages may use.
    pub fn input_budget(&self) -> u64 {
        self.window.saturating_sub(self.output_reserve + self.headroom)
    }

    /// The request's `max_tokens`.
    pub fn max_tokens(&self) -> u32 {
        u32::try_from(self.output_reserve).unwrap_or(u32::MAX)
    }

    /// Whether messages of this size fit.
    pub fn fits(&self, input_tokens: u64) -> bool {
        input_tokens <= self.input_budget()
    }
}

/// Estimated input tokens of a request's messages.
pub fn request_tokens(counter: &dyn TokenCounter, messages: &[Message]) -> u64 {
    messages.iter().map(|m| counter.count_message(m)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_is_min_of_8192_and_a_tenth() {
        let small = RequestBudget::for_window(4_096);
        assert_eq!(small.output_reserve, 409);
        assert_eq!(small.headroom, 204);
        assert_eq!(small.input_budget(), 4_096 - 409 - 204);
        let large = RequestBudget::for_window(200_000);
        assert_eq!(large.output_reserve, 8_192);
        assert_eq!(large.headroom, 10_000);
        assert_eq!(large.max_tokens(), 8_192);
        assert!(large.fits(181_808));
        assert!(!large.fits(181_809));
    }
}
