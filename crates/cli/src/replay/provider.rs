//! The provider that answers a replay's model calls with the recorded replies.
//!
//! It reports usage the way a real provider would for the request it actually received (the
//! estimate of the compacted, clipped view — not the recorded session's original usage, which
//! measured a context pith never sends), records the size of every request, checks each request
//! for split tool pairs, and can reject one chosen request as a context overflow to exercise
//! compact-and-retry.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use pith_core::{EntryId, EstimateCounter, FinishReason, Message, Part, Role, TokenCounter, Usage};
use pith_router::{ChatRequest, ChatResponse, Provider, ProviderError, StreamSink};

use super::report::CallTokens;
use super::script::ScriptedReply;

/// What the provider saw, for the report.
#[derive(Debug, Clone, Default)]
pub struct ProviderStats {
    /// Requests received (the rejected overflow included).
    pub calls: u64,
    /// Largest request, in estimated tokens.
    pub max_request_tokens: u64,
    /// Sum of request sizes.
    pub input_tokens_total: u64,
    /// Sum of the full, uncompacted history sizes at each request.
    pub input_tokens_no_compaction: u64,
    /// Requests in which a tool result had no call before it, or a call no result after it.
    pub tool_pairs_split: u64,
    /// Requests rejected as overflow by injection.
    pub injected_overflows: u64,
    /// Every request's size with and without compaction, in order.
    pub per_call: Vec<CallTokens>,
}

/// Answers model calls from a queue of recorded replies.
#[derive(Debug)]
pub struct ReplayProvider {
    replies: Mutex<VecDeque<ScriptedReply>>,
    overflow_at: Option<u64>,
    stats: Mutex<ProviderStats>,
}

impl ReplayProvider {
    /// A provider serving `replies` in order; the request number `overflow_at` (1-based), if set,
    /// is rejected once as a context overflow.
    pub fn new(replies: Vec<ScriptedReply>, overflow_at: Option<u64>) -> Self {
        Self {
            replies: Mutex::new(replies.into()),
            overflow_at,
            stats: Mutex::new(ProviderStats::default()),
        }
    }

    /// A copy of the statistics so far.
    pub fn stats(&self) -> ProviderStats {
        lock(&self.stats).clone()
    }

    /// Replies not served yet.
    pub fn remaining(&self) -> usize {
        lock(&self.replies).len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Whether every tool result in `messages` follows its call and every call is answered.
pub fn pairs_intact(messages: &[Message]) -> bool {
    let mut open: Vec<String> = Vec::new();
    let mut answered_all = true;
    for m in messages {
        match m.role {
            Role::Assistant => {
                if !open.is_empty() {
                    answered_all = false;
                }
                open = m.tool_calls().map(|(id, _, _)| id.to_string()).collect();
            }
            Role::Tool => {
                for (id, _, _) in m.tool_results() {
                    match open.iter().position(|o| o == id) {
                        Some(i) => {
                            open.remove(i);
                        }
                        None => return false,
                    }
                }
            }
            Role::User | Role::System | Role::Developer => {
                if !open.is_empty() {
                    answered_all = false;
                }
            }
        }
    }
    answered_all
}

#[async_trait]
impl Provider for ReplayProvider {
    fn name(&self) -> &str {
        "replay"
    }

    async fn chat(
        &self,
        request: ChatRequest,
        _sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        let counter = EstimateCounter;
        let size = counter.count_messages(&request.messages) + counter.count_tools(&request.tools);
        let next_history = lock(&self.replies).front().map(|r| r.history_tokens).unwrap_or(0);
        let reject = {
            let mut s = lock(&self.stats);
            s.calls += 1;
            s.max_request_tokens = s.max_request_tokens.max(size);
            s.input_tokens_total += size;
            s.input_tokens_no_compaction += next_history;
            s.per_call.push(CallTokens {
                request_tokens: size,
                no_compaction_tokens: next_history,
            });
            if !pairs_intact(&request.messages) {
                s.tool_pairs_split += 1;
            }
            if self.overflow_at == Some(s.calls) {
                s.injected_overflows += 1;
                true
            } else {
                false
            }
        };
        if reject {
            return Err(ProviderError::ContextOverflow {
                message: format!("prompt is too long: {size} tokens (simulated provider limit)"),
                limit: None,
                requested: Some(size),
            });
        }
        let reply = lock(&self.replies)
            .pop_front()
            .ok_or(ProviderError::ScriptExhausted(0))?;
        let mut message = reply.message;
        message.id = EntryId::new();
        let finish = if message.has_tool_calls() {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        let usage = Usage {
            input: size,
            output: counter.count_message(&message),
            ..Usage::default()
        };
        message.usage = Some(usage);
        message.finish = Some(finish);
        message
            .parts
            .retain(|p| !matches!(p, Part::Text { text } if text.trim().is_empty()));
        Ok(ChatResponse {
            model: request.model,
            message,
            finish,
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_pairs_are_detected() {
        let call = Message::new(
            Role::Assistant,
            vec![Part::ToolCall {
                call_id: "c".into(),
                name: "bash".into(),
                arguments: json!({}),
            }],
        );
        let result = Message::tool_result("c", "ok", false);
        assert!(pairs_intact(&[call.clone(), result.clone()]));
        assert!(
            !pairs_intact(std::slice::from_ref(&result)),
            "a result without its call"
        );
        assert!(
            !pairs_intact(&[call.clone(), Message::user("next")]),
            "a call without its result"
        );
    }
}
