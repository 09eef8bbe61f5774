//! The ContextPipeline: the budget check before every model call, and the request it sends.
//!
//! Run before **every** model call (also between the tool calls of one turn), in two steps:
//!
//! 1. **budget check** ([`ContextPipeline::prepare`]): the context size is the larger of the
//!    last reply's reported usage plus the estimate of what came after it (replies after the
//!    latest compaction only) and the estimate of the whole request including tool schemas,
//!    compared with the threshold of the compaction crate (`window − reserve`) and the window
//!    itself; the count signal compares the view's conversation messages with `max_messages`.
//!    Tool-result bodies are measured as the clipping rule will send them.
//! 2. **request** ([`ContextPipeline::request_messages`]), only when a request is actually sent:
//!    the stored view projected (`pith_compaction::projection`: instructions, reminders, summary
//!    handoff, tail) with over-long tool-result bodies clipped by the one clipping rule
//!    (`pith_compaction::prompt::clip_tool_output`); user text, instructions and tool arguments
//!    are never touched.
//!
//! The check agrees exactly with `pith_compaction::overflow::context_tokens` and
//! `view_message_count` (tests check it) but costs O(new entries): per-entry estimates, the
//! message count, the newest measured reply and the tokens of the parts only a compaction
//! changes are carried forward per session (see `tail_cache`), and no message is copied. The
//! request is built by moving the loaded view's messages; only clipped tool results are new
//! strings.

mod tail_cache;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pith_compaction::overflow;
use pith_compaction::prompt::clip_tool_output;
use pith_compaction::{projection, ConfigError, ProjectionStyle};
use pith_core::{Entry, Message, Part, SessionId, StoredView, TokenCounter, ToolDeclaration};

use crate::fsm::Budget;
use tail_cache::TailCache;

/// Sessions whose running totals are kept by default (see
/// [`ContextPipeline::with_max_cached_sessions`]).
pub const DEFAULT_MAX_CACHED_SESSIONS: usize = 16_384;

/// The budget decided for a view: what the driver needs to choose between sampling and
/// compacting. The request's messages are built separately, only when a request is sent
/// ([`ContextPipeline::request_messages`]), so a check copies nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepared {
    /// The context size decided on: max(reported usage + later estimate, whole estimate).
    pub context_tokens: u64,
    /// The local estimate of the whole request.
    pub estimate: u64,
    /// Conversation messages in the view (the count signal).
    pub message_count: usize,
    /// The compaction threshold.
    pub threshold: u64,
    /// The model's window.
    pub window: u64,
    /// The verdict.
    pub budget: Budget,
    /// The generation of the view the budget was decided for.
    pub generation: u64,
}

/// The pipeline's shared state: one running-totals cache per session, and the tools' tokens.
#[derive(Debug, Default)]
struct State {
    sessions: HashMap<SessionId, TailCache>,
    /// The tool declarations last measured and their tokens (they rarely change).
    tools: Option<(Vec<ToolDeclaration>, u64)>,
    /// Logical clock for eviction.
    tick: u64,
}

impl State {
    fn tool_tokens(&mut self, tools: &[ToolDeclaration], counter: &dyn TokenCounter) -> u64 {
        match &self.tools {
            Some((cached, tokens)) if cached.as_slice() == tools => *tokens,
            _ => {
                let tokens = counter.count_tools(tools);
                self.tools = Some((tools.to_vec(), tokens));
                tokens
            }
        }
    }

    /// Drops the least recently used quarter of the caches when there are more than `max`.
    fn evict(&mut self, max: usize) {
        if self.sessions.len() <= max {
            return;
        }
        let keep = max - max / 4;
        let mut ticks: Vec<u64> = self.sessions.values().map(|c| c.used).collect();
        let cut = ticks.len() - keep;
        let (_, nth, _) = ticks.select_nth_unstable(cut);
        let oldest_kept = *nth;
        self.sessions.retain(|_, c| c.used >= oldest_kept);
    }
}

/// Decides the budget before every model call and builds the request that is sent.
pub struct ContextPipeline {
    counter: Arc<dyn TokenCounter>,
    style: ProjectionStyle,
    reserve: Option<u64>,
    max_messages: usize,
    threshold_ratio: Option<f64>,
    max_cached_sessions: usize,
    state: Mutex<State>,
}

impl std::fmt::Debug for ContextPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextPipeline")
            .field("style", &self.style)
            .field("reserve", &self.reserve)
            .field("max_messages", &self.max_messages)
            .field("max_cached_sessions", &self.max_cached_sessions)
            .finish_non_exhaustive()
    }
}

impl ContextPipeline {
    /// A pipeline that estimates with `counter`, projects in `style` and uses the compaction
    /// crate's reserve rule and count signal.
    pub fn new(
        counter: Arc<dyn TokenCounter>,
        style: ProjectionStyle,
        reserve: Option<u64>,
        max_messages: usize,
    ) -> Self {
        Self {
            counter,
            style,
            reserve,
            max_messages,
            threshold_ratio: None,
            max_cached_sessions: DEFAULT_MAX_CACHED_SESSIONS,
            state: Mutex::new(State::default()),
        }
    }

    /// Compacts at `ratio` × window instead of the reserve rule (the compaction crate's
    /// `threshold_ratio`; `None`: the reserve rule).
    pub fn with_threshold_ratio(mut self, ratio: Option<f64>) -> Self {
        self.threshold_ratio = ratio;
        self
    }

    /// Keeps the running totals of at most `n` sessions (at least 1); past that, the least
    /// recently checked quarter is dropped and rebuilt from its view on its next check. Bounds
    /// the pipeline's memory in a process that serves many sessions over its lifetime.
    pub fn with_max_cached_sessions(mut self, n: usize) -> Self {
        self.max_cached_sessions = n.max(1);
        self
    }

    /// Sessions whose running totals are cached now.
    pub fn cached_sessions(&self) -> usize {
        self.lock().sessions.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a cache: whatever a panicking holder left is still a valid cache or is
        // rebuilt by the next check's validity test.
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Decides the budget of the request `view` would make under `window`: O(entries appended
    /// since the previous check of the session), no message copied.
    pub fn prepare(
        &self,
        view: &StoredView,
        tools: &[ToolDeclaration],
        window: u64,
    ) -> Result<Prepared, ConfigError> {
        let threshold = overflow::threshold_with_ratio(window, self.reserve, self.threshold_ratio)?;
        let counter = self.counter.as_ref();
        let mut state = self.lock();
        state.tick += 1;
        let tick = state.tick;
        let tool_tokens = state.tool_tokens(tools, counter);
        let totals = match state.sessions.get_mut(&view.session.id) {
            Some(cache) => {
                cache.update(view, self.style, counter);
                cache.used = tick;
                cache.totals(view)
            }
            None => {
                let mut cache = TailCache::build(view, self.style, counter);
                cache.used = tick;
                let totals = cache.totals(view);
                state.sessions.insert(view.session.id, cache);
                state.evict(self.max_cached_sessions);
                totals
            }
        };
        drop(state);
        let estimate = tool_tokens + totals.view_tokens;
        let context_tokens = estimate.max(totals.reported.unwrap_or(0));
        let message_count = totals.messages;
        let budget = if context_tokens > window {
            Budget::OverWindow
        } else if context_tokens > threshold || message_count > self.max_messages {
            Budget::OverThreshold
        } else {
            Budget::Fits
        };
        Ok(Prepared {
            context_tokens,
            estimate,
            message_count,
            threshold,
            window,
            budget,
            generation: view.generation,
        })
    }

    /// The messages of the request for `view`, consuming it: the projection of
    /// `pith_compaction::projection::project` with over-long tool-result bodies clipped
    /// (exactly `trim(project(&view, style))`). The view's messages are moved, not copied; only
    /// clipped tool results and the summary handoff are new. Call it only for a request that is
    /// sent: it costs O(view).
    pub fn request_messages(&self, view: StoredView) -> Vec<Message> {
        let masked = view
            .compaction
            .as_ref()
            .is_some_and(|meta| !meta.masked.is_empty());
        if masked {
            // Masked tool outputs are rendered by the projection; rare enough to take the
            // copying path that shares its code.
            return trim(projection::project(&view, self.style));
        }
        let StoredView {
            compaction,
            instructions,
            reminders,
            tail,
            ..
        } = view;
        let tail_len = tail.len();
        let tail = tail.into_iter().filter_map(|e| match e {
            Entry::Message(m) => Some(m),
            _ => None,
        });
        let Some(meta) = compaction else {
            return tail.map(clip).collect();
        };
        let keep = reminders.len().saturating_sub(projection::MAX_RETAINED_REMINDERS);
        let summary = projection::summary_messages(&meta, self.style);
        let mut out =
            Vec::with_capacity(instructions.len() + reminders.len() - keep + summary.len() + tail_len);
        out.extend(instructions.into_iter().map(clip));
        out.extend(reminders.into_iter().skip(keep).map(clip));
        out.extend(summary.into_iter().map(clip));
        out.extend(tail.map(clip));
        out
    }

    /// Drops the cached totals of a session (after it was deleted).
    pub fn forget(&self, session: SessionId) {
        self.lock().sessions.remove(&session);
    }
}

/// Clips the over-long tool-result bodies of one message; nothing else is shortened.
fn clip(mut message: Message) -> Message {
    for part in &mut message.parts {
        if let Part::ToolResult { content, .. } = part {
            if let std::borrow::Cow::Owned(clipped) = clip_tool_output(content) {
                *content = clipped;
            }
        }
    }
    message
}

/// Clips over-long tool-result bodies; nothing else is shortened.
pub fn trim(messages: Vec<Message>) -> Vec<Message> {
    messages.into_iter().map(clip).collect()
}

#[cfg(test)]
mod tests;
