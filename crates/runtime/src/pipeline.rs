//! The ContextPipeline: from the stored view to the request that is sent, with its budget.
//!
//! Three stages, run before **every** model call (also between the tool calls of one turn):
//!
//! 1. **projection**: the stored view rendered as messages
//!    (`pith_compaction::projection::project`): instructions, reminders, summary handoff, tail;
//! 2. **trim**: over-long tool-result bodies are clipped by the one clipping rule
//!    (`pith_compaction::prompt::clip_tool_output`); user text, instructions and tool arguments
//!    are never touched;
//! 3. **budget check**: the context size is the larger of the last reply's reported usage plus
//!    the estimate of what came after it (replies after the latest compaction only) and the
//!    estimate of the whole request including tool schemas, compared with the threshold of the
//!    compaction crate (`window − reserve`) and the window itself.
//!
//! The estimate agrees with `pith_compaction::overflow::context_tokens` (a test checks it) but
//! costs O(new entries): per-entry estimates are cached per session and reused while the view's
//! generation and tail prefix are unchanged.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pith_compaction::overflow;
use pith_compaction::prompt::clip_tool_output;
use pith_compaction::{projection, ConfigError, ProjectionStyle};
use pith_core::{EntryId, Message, Part, SessionId, StoredView, TokenCounter, ToolDeclaration};

use crate::fsm::Budget;

/// The request the pipeline prepared, with its budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The messages to send: projected and trimmed.
    pub messages: Vec<Message>,
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
    /// The generation of the view the request was built from.
    pub generation: u64,
}

/// Cached per-entry estimates of one session's tail.
#[derive(Debug, Default)]
struct TailCache {
    generation: u64,
    ids: Vec<EntryId>,
    /// `prefix[i]` = tokens of the first `i` tail entries.
    prefix: Vec<u64>,
    /// Instructions and reminders before the tail.
    fixed: HashMap<EntryId, u64>,
}

impl TailCache {
    /// Brings the cache up to date with `view`, estimating only entries it has not seen.
    fn update(&mut self, view: &StoredView, counter: &dyn TokenCounter) {
        let reusable = self.generation == view.generation
            && self.ids.len() <= view.tail.len()
            && self.ids.first().is_none_or(|id| *id == view.tail[0].id())
            && self
                .ids
                .last()
                .is_none_or(|id| *id == view.tail[self.ids.len() - 1].id());
        if !reusable {
            *self = TailCache {
                generation: view.generation,
                ..TailCache::default()
            };
        }
        if self.prefix.is_empty() {
            self.prefix.push(0);
        }
        for entry in &view.tail[self.ids.len()..] {
            let tokens = entry
                .as_message()
                .map_or(0, |m| overflow::message_tokens(counter, m));
            let last = self.prefix.last().copied().unwrap_or(0);
            self.prefix.push(last + tokens);
            self.ids.push(entry.id());
        }
    }

    fn fixed_tokens(&mut self, messages: &[Message], counter: &dyn TokenCounter) -> u64 {
        messages
            .iter()
            .map(|m| {
                *self
                    .fixed
                    .entry(m.id)
                    .or_insert_with(|| overflow::message_tokens(counter, m))
            })
            .sum()
    }

    fn total(&self) -> u64 {
        self.prefix.last().copied().unwrap_or(0)
    }

    /// Tokens of the tail entries after position `pos`.
    fn after(&self, pos: usize) -> u64 {
        self.total() - self.prefix.get(pos + 1).copied().unwrap_or(self.total())
    }
}

/// Projects, trims and budgets the model view before every model call.
pub struct ContextPipeline {
    counter: Arc<dyn TokenCounter>,
    style: ProjectionStyle,
    reserve: Option<u64>,
    max_messages: usize,
    threshold_ratio: Option<f64>,
    cache: Mutex<HashMap<SessionId, TailCache>>,
}

impl std::fmt::Debug for ContextPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextPipeline")
            .field("style", &self.style)
            .field("reserve", &self.reserve)
            .field("max_messages", &self.max_messages)
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
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Compacts at `ratio` × window instead of the reserve rule (the compaction crate's
    /// `threshold_ratio`; `None`: the reserve rule).
    pub fn with_threshold_ratio(mut self, ratio: Option<f64>) -> Self {
        self.threshold_ratio = ratio;
        self
    }

    /// Builds the request for `view` under `window` and decides its budget.
    pub fn prepare(
        &self,
        view: &StoredView,
        tools: &[ToolDeclaration],
        window: u64,
    ) -> Result<Prepared, ConfigError> {
        let threshold = overflow::threshold_with_ratio(window, self.reserve, self.threshold_ratio)?;
        let messages = trim(projection::project(view, self.style));
        let (estimate, context_tokens) = self.measure(view, tools);
        let message_count = overflow::view_message_count(view);
        let budget = if context_tokens > window {
            Budget::OverWindow
        } else if context_tokens > threshold || message_count > self.max_messages {
            Budget::OverThreshold
        } else {
            Budget::Fits
        };
        Ok(Prepared {
            messages,
            context_tokens,
            estimate,
            message_count,
            threshold,
            window,
            budget,
            generation: view.generation,
        })
    }

    /// (whole-request estimate, context size decided on), with cached per-entry estimates.
    fn measure(&self, view: &StoredView, tools: &[ToolDeclaration]) -> (u64, u64) {
        let counter = self.counter.as_ref();
        let mut caches = match self.cache.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let cache = caches.entry(view.session.id).or_default();
        cache.update(view, counter);
        let reminders = projection::recent_reminders(&view.reminders);
        let fixed = counter.count_tools(tools)
            + cache.fixed_tokens(&view.instructions, counter)
            + cache.fixed_tokens(reminders, counter)
            + overflow::summary_tokens(view, self.style, counter);
        let estimate = fixed + cache.total();
        let reported =
            overflow::last_measured_reply(view).map(|(pos, measured, _)| measured + cache.after(pos));
        (estimate, estimate.max(reported.unwrap_or(0)))
    }

    /// Drops the cached estimates of a session (after it was deleted).
    pub fn forget(&self, session: SessionId) {
        if let Ok(mut caches) = self.cache.lock() {
            caches.remove(&session);
        }
    }
}

/// Clips over-long tool-result bodies; nothing else is shortened.
pub fn trim(mut messages: Vec<Message>) -> Vec<Message> {
    for message in &mut messages {
        for part in &mut message.parts {
            if let Part::ToolResult { content, .. } = part {
                if let std::borrow::Cow::Owned(clipped) = clip_tool_output(content) {
                    *content = clipped;
                }
            }
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::{EstimateCounter, SessionRecord, Usage};

    fn view(log: &[pith_core::Entry], record: &SessionRecord) -> StoredView {
        StoredView::from_log(record.clone(), log).unwrap()
    }

    #[test]
    fn the_cached_estimate_agrees_with_the_compaction_crate_as_the_log_grows() {
        let counter: Arc<dyn TokenCounter> = Arc::new(EstimateCounter);
        let pipeline = ContextPipeline::new(counter.clone(), ProjectionStyle::Reminder, None, 50);
        let tools = vec![ToolDeclaration {
            name: "read".into(),
            description: "reads a file".into(),
            parameters: serde_json::json!({"type": "object"}),
        }];
        let record = SessionRecord::new("scripted/m", tools.clone());
        let mut log: Vec<pith_core::Entry> = vec![Message::system("rules").into()];
        for i in 0..20u64 {
            log.push(Message::user(format!("question {i} {}", "x".repeat(i as usize * 50))).into());
            let mut reply = Message::assistant(format!("answer {i}"));
            if i % 3 == 0 {
                reply.usage = Some(Usage::from_openai(400 * (i + 1), 20, 0));
            }
            log.push(reply.into());
            log.push(Message::tool_result(format!("c{i}"), "y".repeat(9_000), false).into());
            let v = view(&log, &record);
            let prepared = pipeline.prepare(&v, &tools, 8_192).unwrap();
            let expected = overflow::context_tokens(&v, ProjectionStyle::Reminder, &tools, counter.as_ref());
            assert_eq!(prepared.context_tokens, expected, "after {} entries", log.len());
            assert_eq!(
                prepared.estimate,
                overflow::estimate_view(&v, ProjectionStyle::Reminder, &tools, counter.as_ref())
            );
        }
        let v = view(&log, &record);
        let prepared = pipeline.prepare(&v, &tools, 8_192).unwrap();
        assert_eq!(prepared.budget, Budget::OverWindow);
        // Tool-result bodies are clipped; user text is not.
        let longest_tool = prepared
            .messages
            .iter()
            .flat_map(|m| m.tool_results().map(|(_, c, _)| c.len()))
            .max()
            .unwrap();
        assert!(longest_tool < 4_200, "{longest_tool}");
        assert!(prepared.messages.iter().any(|m| m.text_content().len() > 950));
        let small = pipeline
            .prepare(&view(&log[..4], &record), &tools, 128_000)
            .unwrap();
        assert_eq!(small.budget, Budget::Fits);
    }
}
