//! The user-message tail of [`TailPolicy::UserMessages`] (Codex's policy).
//!
//! The new view holds no conversation message at all: the summary covers everything, and the most
//! recent user messages (newest first within the budget, shown in their order) follow it verbatim
//! inside the handoff, in a block opened by [`USER_MESSAGES_OPEN`]. The tool history is dropped,
//! so no tool call can lose its result. The budget is min(`keep_recent_tokens`, what is left of
//! `target_ratio` × threshold once the instructions, reminders and summary are counted).
//!
//! [`TailPolicy::UserMessages`]: crate::config::TailPolicy::UserMessages

use pith_core::{Entry, Message, TokenCounter};

use crate::ledger::is_user_authored;

/// The line that opens the user-message block in a handoff.
pub const USER_MESSAGES_OPEN: &str = "<user-messages>";
/// The line that closes it.
pub const USER_MESSAGES_CLOSE: &str = "</user-messages>";

/// Every user-authored message of a log, in order.
pub fn user_messages(log: &[Entry]) -> Vec<&Message> {
    log.iter()
        .filter_map(Entry::as_message)
        .filter(|m| is_user_authored(m))
        .collect()
}

/// The block of the most recent `users` within `budget` tokens (empty when none fits).
pub fn render_user_messages(users: &[&Message], budget: u64, counter: &dyn TokenCounter) -> String {
    let frame = format!("\n\n{USER_MESSAGES_OPEN}\n{USER_MESSAGES_CLOSE}");
    let mut left = budget.saturating_sub(counter.count_text(&frame) + 2);
    let mut picked = Vec::new();
    for m in users.iter().rev() {
        let line = format!("{}\n\n", m.text_content().trim());
        let t = counter.count_text(&line);
        if t > left {
            break;
        }
        left -= t;
        picked.push(line);
    }
    if picked.is_empty() {
        return String::new();
    }
    picked.reverse();
    format!(
        "\n\n{USER_MESSAGES_OPEN}\n{}{USER_MESSAGES_CLOSE}",
        picked.concat()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::EstimateCounter;

    #[test]
    fn keeps_the_newest_messages_in_order_within_the_budget() {
        let log: Vec<Entry> = vec![
            Message::user("x".repeat(400)).into(),
            Message::assistant("ok").into(),
            Message::user("second").into(),
            Message::user("<system-reminder>r</system-reminder>").into(),
            Message::user("third").into(),
        ];
        let users = user_messages(&log);
        assert_eq!(users.len(), 3);
        let block = render_user_messages(&users, 40, &EstimateCounter);
        assert!(block.contains("second\n\nthird"), "{block}");
        assert!(!block.contains("xxxx"));
        assert!(EstimateCounter.count_text(&block) <= 40);
        assert!(render_user_messages(&users, 3, &EstimateCounter).is_empty());
    }
}
