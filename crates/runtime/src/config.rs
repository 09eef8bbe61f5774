//! Runtime configuration.

use std::time::Duration;

use crate::events::DEFAULT_EVENT_CAPACITY;
use crate::fsm::DEFAULT_MAX_STEPS;

/// Default number of tool calls of one reply that run at the same time.
pub const DEFAULT_TOOL_CONCURRENCY: usize = 4;
/// Default time one tool call may take.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// How the runtime drives turns. Compaction has its own configuration
/// (`pith_compaction::CompactionConfig`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RuntimeConfig {
    /// Bound on state-machine steps per turn; roughly three steps per model request.
    pub max_steps: u32,
    /// Tool calls of one reply running at the same time.
    pub tool_concurrency: usize,
    /// Time one tool call may take before it becomes an error result.
    pub tool_timeout: Duration,
    /// Events buffered per subscriber before it lags.
    pub event_capacity: usize,
    /// Ask providers to stream, so output arrives as `TextDelta` events.
    pub stream: bool,
    /// Maximum output tokens per model call (`None`: the provider's default).
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature (`None`: the provider's default).
    pub temperature: Option<f32>,
    /// Turns of this runtime that may be between loading their view and receiving the model's
    /// reply at the same time (`None`: no bound).
    ///
    /// A turn takes a slot before it loads the view it will send and gives it back when the
    /// reply arrives, so a turn that waits holds no view and no request: with many sessions and
    /// a provider that takes N calls at a time, setting this to N bounds the memory of requests
    /// in flight to N requests instead of one per waiting session. The time a turn waits is
    /// reported in `TurnOutcome::model_slot_wait`.
    pub max_concurrent_model_calls: Option<usize>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_steps: DEFAULT_MAX_STEPS,
            tool_concurrency: DEFAULT_TOOL_CONCURRENCY,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            event_capacity: DEFAULT_EVENT_CAPACITY,
            stream: true,
            max_output_tokens: None,
            temperature: None,
            max_concurrent_model_calls: None,
        }
    }
}

impl RuntimeConfig {
    /// Sets the step bound per turn.
    pub fn with_max_steps(mut self, steps: u32) -> Self {
        self.max_steps = steps;
        self
    }

    /// Sets how many tool calls run at the same time.
    pub fn with_tool_concurrency(mut self, n: usize) -> Self {
        self.tool_concurrency = n;
        self
    }

    /// Sets the time one tool call may take.
    pub fn with_tool_timeout(mut self, timeout: Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }

    /// Sets the events buffered per subscriber.
    pub fn with_event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity;
        self
    }

    /// Turns streaming on or off.
    pub fn with_stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// Bounds the turns that hold a view for a model call at the same time (at least 1); see
    /// [`RuntimeConfig::max_concurrent_model_calls`].
    pub fn with_max_concurrent_model_calls(mut self, n: usize) -> Self {
        self.max_concurrent_model_calls = Some(n.max(1));
        self
    }

    /// Sets the output limit of each model call.
    pub fn with_max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = Some(tokens);
        self
    }

    /// Sets the sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }
}
