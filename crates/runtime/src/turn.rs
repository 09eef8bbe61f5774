//! Turn inputs, outcomes, and the dedupe keys that make a rerun of a turn safe.
//!
//! A turn appends the user's input first, then one batch per model reply (the reply together with
//! its tool results), then the final answer. Each append carries a dedupe key derived from the
//! request, so a retried append is a no-op. When a turn stopped before its final answer (a crash
//! between the model's reply and its persistence, a failure, a cancellation) and is run again
//! with the same input, the runtime finds the input already at the end of the log and continues
//! that turn instead of appending the input a second time; the steps already persisted are kept
//! and counted, so later keys do not collide with them.

use pith_compaction::CompactionResult;
use pith_core::{CompactionStrategy, Entry, Message, Part, Role, SessionId, StoredView, Usage};
use serde::{Deserialize, Serialize};

use crate::fsm::CompactKind;

/// What the user says in a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnInput {
    /// The content of the user message.
    pub parts: Vec<Part>,
}

impl TurnInput {
    /// Input of one text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            parts: vec![Part::text(text)],
        }
    }

    /// Whether there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.parts
            .iter()
            .all(|p| matches!(p, Part::Text { text } if text.trim().is_empty()))
    }
}

impl From<&str> for TurnInput {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

impl From<String> for TurnInput {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

impl From<Vec<Part>> for TurnInput {
    fn from(parts: Vec<Part>) -> Self {
        Self { parts }
    }
}

/// A compaction performed during a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionReport {
    /// Proactive (before a request) or reactive (after a provider overflow).
    pub kind: CompactKind,
    /// The generation the compaction created.
    pub generation: u64,
    /// Context size before.
    pub tokens_before: u64,
    /// Context size after.
    pub tokens_after: u64,
    /// How the handoff was produced.
    pub strategy: CompactionStrategy,
    /// Usage of the summary calls.
    pub usage: Usage,
    /// Summary calls made.
    pub summary_calls: u32,
}

impl CompactionReport {
    pub(crate) fn new(kind: CompactKind, result: &CompactionResult) -> Self {
        Self {
            kind,
            generation: result.meta.generation,
            tokens_before: result.tokens_before,
            tokens_after: result.tokens_after,
            strategy: result.strategy,
            usage: result.usage,
            summary_calls: result.summary_calls,
        }
    }
}

/// The result of a successful turn.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TurnOutcome {
    /// The session.
    pub session_id: SessionId,
    /// The turn's number within this runtime (1-based).
    pub turn: u64,
    /// The final assistant message, as persisted.
    pub message: Message,
    /// Usage of all model calls of the turn (summary calls are in `compactions`).
    pub usage: Usage,
    /// Compactions committed during the turn, in order.
    pub compactions: Vec<CompactionReport>,
    /// Model calls sent (retries after an overflow included).
    pub model_requests: u32,
    /// Tool calls run.
    pub tool_calls: u32,
    /// The turn continued an earlier run with the same input that had not finished.
    pub resumed: bool,
    /// Time the turn waited for a model-call slot
    /// (`RuntimeConfig::max_concurrent_model_calls`); zero when unbounded.
    pub model_slot_wait: std::time::Duration,
}

impl TurnOutcome {
    /// The text of the final answer.
    pub fn text(&self) -> String {
        self.message.text_content()
    }
}

/// Where a turn starts: a new input, or the continuation of an unfinished run of the same input.
#[derive(Debug, Clone)]
pub(crate) struct TurnPlan {
    /// The user message of the turn (already in the log when `resumed`).
    pub user: Message,
    /// The input is already in the log.
    pub resumed: bool,
    /// Index of the next step (replies already persisted after the input).
    pub next_step: u32,
    /// Dedupe key of the input append.
    pub input_key: String,
    /// Prefix of the dedupe keys of the turn's steps.
    pub turn_key: String,
}

fn is_user_input(m: &Message) -> bool {
    m.role == Role::User && !m.is_reminder() && !m.meta.synthetic && !m.meta.external_summary
}

fn digest(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    hex::encode(&h.finalize()[..16])
}

/// Plans a turn: continues an unfinished run of the same input found at the end of the view,
/// or starts a new one.
pub(crate) fn plan(session: SessionId, view: &StoredView, input: &TurnInput) -> TurnPlan {
    let input_json = serde_json::to_string(&input.parts).unwrap_or_default();
    let messages: Vec<(usize, &Message)> = view
        .tail
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_message().map(|m| (i, m)))
        .collect();
    let last_input = messages.iter().rposition(|(_, m)| is_user_input(m));
    if let Some(k) = last_input {
        let (pos, user) = messages[k];
        let after = &messages[k + 1..];
        let finished = after
            .iter()
            .any(|(_, m)| m.role == Role::Assistant && !m.has_tool_calls());
        if user.parts == input.parts && !finished {
            let anchor = anchor_of(view, pos);
            let next_step = after.iter().filter(|(_, m)| m.role == Role::Assistant).count() as u32;
            return TurnPlan {
                user: user.clone(),
                resumed: true,
                next_step,
                input_key: format!("input/{}", digest(&[&session.to_string(), &anchor, &input_json])),
                turn_key: format!("turn/{}", user.id),
            };
        }
    }
    let user = Message::new(Role::User, input.parts.clone());
    let anchor = anchor_of(view, view.tail.len());
    TurnPlan {
        input_key: format!("input/{}", digest(&[&session.to_string(), &anchor, &input_json])),
        turn_key: format!("turn/{}", user.id),
        user,
        resumed: false,
        next_step: 0,
    }
}

/// The id of the entry before tail position `pos`, or the generation when there is none.
fn anchor_of(view: &StoredView, pos: usize) -> String {
    match pos.checked_sub(1).and_then(|i| view.tail.get(i)) {
        Some(e) => Entry::id(e).to_string(),
        None => format!("generation-{}", view.generation),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::SessionRecord;

    fn view(messages: Vec<Message>) -> StoredView {
        let log: Vec<Entry> = messages.into_iter().map(Into::into).collect();
        StoredView::from_log(SessionRecord::new("scripted/m", vec![]), &log).unwrap()
    }

    #[test]
    fn a_new_input_gets_a_fresh_message() {
        let v = view(vec![
            Message::system("rules"),
            Message::user("a"),
            Message::assistant("b"),
        ]);
        let p = plan(v.session.id, &v, &"a".into());
        assert!(!p.resumed, "the earlier 'a' turn finished");
        assert_eq!(p.next_step, 0);
        let again = plan(v.session.id, &v, &"a".into());
        assert_eq!(
            p.input_key, again.input_key,
            "the input key is derived from the request"
        );
    }

    #[test]
    fn an_unfinished_run_of_the_same_input_is_continued() {
        let user = Message::user("do it");
        let mut call = Message::assistant("");
        call.parts = vec![Part::ToolCall {
            call_id: "c1".into(),
            name: "t".into(),
            arguments: serde_json::json!({}),
        }];
        let result = Message::tool_result("c1", "ok", false);
        let v = view(vec![Message::system("s"), user.clone(), call, result]);
        let p = plan(v.session.id, &v, &"do it".into());
        assert!(p.resumed);
        assert_eq!(p.user.id, user.id);
        assert_eq!(p.next_step, 1);
        assert_eq!(p.turn_key, format!("turn/{}", user.id));
        let other = plan(v.session.id, &v, &"something else".into());
        assert!(!other.resumed);
    }

    #[test]
    fn reminders_are_not_inputs() {
        let v = view(vec![
            Message::user("x"),
            Message::user("<system-reminder>r</system-reminder>"),
        ]);
        assert!(plan(v.session.id, &v, &"x".into()).resumed);
        assert!(TurnInput::text("  ").is_empty());
        assert!(!TurnInput::text("hi").is_empty());
    }
}
