//! Stage 2: where to cut the view.
//!
//! The tail kept verbatim is the last `keep_recent_turns` turns (a turn starts at a user
//! message) within a token budget; the newest message is always kept, even alone over budget.
//! A cut is only ever made before a user or assistant message, and never between a tool call and
//! a result that answers it, so every kept tool result keeps its call. When the last turn alone is
//! over budget the turn is split: its prefix is summarised and its suffix kept.

use rustc_hash::FxHashMap;

use pith_core::{Message, Role, TokenCounter};

use crate::overflow::message_tokens;

/// Limits on the kept tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailLimits {
    /// Turns kept at most.
    pub turns: usize,
    /// Tokens kept at most (unless the newest message alone is bigger).
    pub tokens: u64,
    /// Messages kept at most (the count signal keeps at most `max_messages / 2`).
    pub messages: Option<usize>,
}

/// Whether a message starts a turn: a user message that is not injected harness text.
pub fn starts_turn(m: &Message) -> bool {
    m.role == Role::User && !m.is_reminder() && m.tool_results().next().is_none()
}

/// The unanswered calls of one id, newest first: the newest inline, older ones (an id the
/// provider repeated before answering) in a vector that stays unallocated in the usual case.
#[derive(Default)]
struct Open {
    newest: Option<usize>,
    older: Vec<usize>,
}

impl Open {
    fn push(&mut self, position: usize) {
        if let Some(previous) = self.newest.replace(position) {
            self.older.push(previous);
        }
    }

    fn pop(&mut self) -> Option<usize> {
        let newest = self.newest.take();
        self.newest = self.older.pop();
        newest
    }
}

/// For each position `i`, whether the view may be cut just before message `i` (position 0 is
/// always allowed: nothing summarised). A cut is allowed before a user or assistant message
/// when no message at or after it holds a result for a call before it.
pub fn valid_cuts(messages: &[&Message]) -> Vec<bool> {
    let n = messages.len();
    // Pair each result with the nearest preceding unanswered call of the same id.
    let mut open: FxHashMap<&str, Open> = FxHashMap::default();
    let mut call_of = vec![usize::MAX; n];
    for (j, m) in messages.iter().enumerate() {
        for (id, _) in m.tool_results().map(|(id, c, _)| (id, c)) {
            if let Some(i) = open.get_mut(id).and_then(Open::pop) {
                call_of[j] = call_of[j].min(i);
            }
        }
        for (id, _, _) in m.tool_calls() {
            open.entry(id).or_default().push(j);
        }
    }
    let mut valid = vec![false; n];
    let mut suffix_min = usize::MAX;
    for i in (0..n).rev() {
        suffix_min = suffix_min.min(call_of[i]);
        let role_ok = matches!(messages[i].role, Role::User | Role::Assistant);
        valid[i] = i == 0 || (role_ok && suffix_min >= i);
    }
    valid
}

/// The cut: messages before it are summarised, messages from it on are kept verbatim.
///
/// Returns the earliest allowed cut whose kept suffix stays within `limits`; when even the newest
/// message (with the call its result answers) is over the limits, the latest allowed cut.
pub fn select_cut(
    messages: &[&Message],
    valid: &[bool],
    counter: &dyn TokenCounter,
    limits: TailLimits,
) -> usize {
    select_by(messages, valid, |m, _| message_tokens(counter, m), limits)
}

/// [`select_cut`] with the messages' tokens already counted (`tokens[i]` of `messages[i]`).
pub fn select_cut_counted(
    messages: &[&Message],
    valid: &[bool],
    tokens: &[u64],
    limits: TailLimits,
) -> usize {
    select_by(
        messages,
        valid,
        |_, k| tokens.get(k).copied().unwrap_or_default(),
        limits,
    )
}

fn select_by(
    messages: &[&Message],
    valid: &[bool],
    tokens_of: impl Fn(&Message, usize) -> u64,
    limits: TailLimits,
) -> usize {
    let n = messages.len();
    if n == 0 {
        return 0;
    }
    let mut tokens = 0u64;
    let mut users = 0usize;
    let mut best = None;
    for k in (0..n).rev() {
        let m = messages[k];
        tokens += tokens_of(m, k);
        if starts_turn(m) {
            users += 1;
        }
        let turns = users + usize::from(!starts_turn(m));
        let kept = n - k;
        let within = tokens <= limits.tokens
            && turns <= limits.turns.max(1)
            && limits.messages.is_none_or(|max| kept <= max.max(1));
        if !within {
            break;
        }
        if valid[k] {
            best = Some(k);
        }
    }
    best.unwrap_or_else(|| latest_cut(valid))
}

/// The latest allowed cut that keeps at least the newest message (0 when there is none).
pub fn latest_cut(valid: &[bool]) -> usize {
    (1..valid.len()).rev().find(|&k| valid[k]).unwrap_or(0)
}

/// The next allowed cut after `cut` (keeping fewer messages), if any.
pub fn next_cut(valid: &[bool], cut: usize) -> Option<usize> {
    (cut + 1..valid.len()).find(|&k| valid[k])
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::{EstimateCounter, Part};
    use serde_json::json;

    fn call(id: &str) -> Message {
        let mut m = Message::assistant("");
        m.parts = vec![Part::ToolCall {
            call_id: id.into(),
            name: "read".into(),
            arguments: json!({"path": "a.rs"}),
        }];
        m
    }

    fn limits(turns: usize, tokens: u64) -> TailLimits {
        TailLimits {
            turns,
            tokens,
            messages: None,
        }
    }

    #[test]
    fn never_cuts_between_a_call_and_its_results() {
        let msgs = [
            Message::user("start"),
            call("a"),
            Message::tool_result("a", "x".repeat(400), false),
            Message::assistant("done"),
        ];
        let refs: Vec<&Message> = msgs.iter().collect();
        let valid = valid_cuts(&refs);
        assert_eq!(valid, vec![true, true, false, true]);
        // A budget too small for the tool result still never cuts before it.
        let cut = select_cut(&refs, &valid, &EstimateCounter, limits(4, 1));
        assert_eq!(cut, 3);
    }

    #[test]
    fn parallel_calls_with_interleaved_results_stay_together() {
        let mut two = call("a");
        two.parts.extend(call("b").parts);
        let msgs = [
            Message::user("go"),
            two,
            Message::tool_result("a", "1", false),
            Message::assistant("thinking"),
            Message::tool_result("b", "2", false),
            Message::user("next"),
        ];
        let refs: Vec<&Message> = msgs.iter().collect();
        assert_eq!(valid_cuts(&refs), vec![true, true, false, false, false, true]);
    }

    #[test]
    fn a_repeated_call_id_pairs_its_result_with_the_nearest_unanswered_call() {
        let msgs = [
            Message::user("go"),
            call("a"),
            Message::user("meanwhile"),
            call("a"),
            Message::tool_result("a", "1", false),
            Message::user("next"),
        ];
        let refs: Vec<&Message> = msgs.iter().collect();
        // The result answers the second call, so the first stays unanswered and a cut may fall
        // anywhere up to the second call.
        assert_eq!(valid_cuts(&refs), vec![true, true, true, true, false, true]);
    }

    #[test]
    fn keeps_the_last_turns_within_budget() {
        let msgs: Vec<Message> = (0..6)
            .flat_map(|i| {
                [
                    Message::user(format!("q{i}")),
                    Message::assistant(format!("a{i}")),
                ]
            })
            .collect();
        let refs: Vec<&Message> = msgs.iter().collect();
        let valid = valid_cuts(&refs);
        assert_eq!(select_cut(&refs, &valid, &EstimateCounter, limits(4, 10_000)), 4);
        assert_eq!(select_cut(&refs, &valid, &EstimateCounter, limits(2, 10_000)), 8);
        // Newest message always kept.
        assert_eq!(select_cut(&refs, &valid, &EstimateCounter, limits(4, 0)), 11);
        let tokens: Vec<u64> = refs.iter().map(|m| message_tokens(&EstimateCounter, m)).collect();
        for (turns, budget) in [(4, 10_000), (2, 10_000), (4, 0), (6, 3), (1, 1)] {
            assert_eq!(
                select_cut_counted(&refs, &valid, &tokens, limits(turns, budget)),
                select_cut(&refs, &valid, &EstimateCounter, limits(turns, budget))
            );
        }
    }

    #[test]
    fn an_over_budget_last_turn_is_split() {
        let mut msgs = vec![
            Message::user("old"),
            Message::assistant("old answer"),
            Message::user("big task"),
        ];
        for i in 0..6 {
            msgs.push(call(&format!("c{i}")));
            msgs.push(Message::tool_result(format!("c{i}"), "z".repeat(400), false));
        }
        let refs: Vec<&Message> = msgs.iter().collect();
        let valid = valid_cuts(&refs);
        let cut = select_cut(&refs, &valid, &EstimateCounter, limits(4, 250));
        assert!(cut > 2, "the last turn's prefix is summarised");
        assert_eq!(refs[cut].role, Role::Assistant);
        assert_eq!(next_cut(&valid, cut), Some(cut + 2));
    }
}
