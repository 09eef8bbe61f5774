//! What a compaction kept: file paths and user messages of the summarised span found in the view.

use std::collections::BTreeSet;

use pith_core::{CompactionMeta, Entry, Message, Part, Role};
use serde::{Deserialize, Serialize};

use crate::paths::{paths_of_call, Access};

/// Kept and total counts, serialised as `[kept, total]`.
pub type KeptOfTotal = [u64; 2];

/// Retention figures of one compaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Paths named by read-like calls in the span.
    pub read_paths: KeptOfTotal,
    /// Paths named by modify-like calls in the span.
    pub modified_paths: KeptOfTotal,
    /// User-authored messages in the span (reminders and other tools' summaries excluded).
    pub user_messages: KeptOfTotal,
}

/// All searchable text of a view: text, tool arguments, tool results and reasoning.
pub fn view_text(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        for p in &m.parts {
            match p {
                Part::Text { text } | Part::Reasoning { text, .. } => out.push_str(text),
                Part::ToolCall { name, arguments, .. } => {
                    out.push_str(name);
                    out.push(' ');
                    out.push_str(&pith_core::tokens::arguments_text(arguments));
                }
                Part::ToolResult { content, .. } => out.push_str(content),
                Part::Image { .. } | Part::Document { .. } => {}
            }
            out.push('\n');
        }
    }
    out
}

/// Whether a message is user-authored: a user message that is not a reminder, not another tool's
/// summary and not synthesised.
pub fn is_user_authored(m: &Message) -> bool {
    m.role == Role::User
        && !m.is_reminder()
        && !m.meta.external_summary
        && !m.meta.synthetic
        && !m.text_content().trim().is_empty()
}

/// The entries a compaction summarised (its `summarized` range, inclusive), from the log.
pub fn span<'a>(log: &'a [Entry], meta: &CompactionMeta) -> &'a [Entry] {
    let Some(range) = meta.summarized else { return &[] };
    let first = log.iter().position(|e| e.id() == range.first);
    let last = log.iter().position(|e| e.id() == range.last);
    match (first, last) {
        (Some(a), Some(b)) if a <= b => &log[a..=b],
        _ => &[],
    }
}

/// Counts what of `span` is present in `view`.
pub fn measure(span: &[Entry], view: &str) -> Retention {
    let mut read = BTreeSet::new();
    let mut modified = BTreeSet::new();
    let mut users = Vec::new();
    for m in span.iter().filter_map(Entry::as_message) {
        for (_, name, args) in m.tool_calls() {
            for (access, path) in paths_of_call(name, args) {
                match access {
                    Access::Read => read.insert(path),
                    Access::Modify => modified.insert(path),
                };
            }
        }
        if is_user_authored(m) {
            users.push(m.text_content());
        }
    }
    let kept = |set: &BTreeSet<String>| set.iter().filter(|p| view.contains(p.as_str())).count() as u64;
    Retention {
        read_paths: [kept(&read), read.len() as u64],
        modified_paths: [kept(&modified), modified.len() as u64],
        user_messages: [
            users.iter().filter(|u| view.contains(u.trim())).count() as u64,
            users.len() as u64,
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_paths_and_user_messages_found_in_the_view() {
        let span: Vec<Entry> = vec![
            Message::user("fix the bug").into(),
            Message::new(
                Role::Assistant,
                vec![
                    Part::ToolCall {
                        call_id: "a".into(),
                        name: "Read".into(),
                        arguments: json!({"file_path": "src/a.rs"}),
                    },
                    Part::ToolCall {
                        call_id: "b".into(),
                        name: "Edit".into(),
                        arguments: json!({"file_path": "src/b.rs"}),
                    },
                ],
            )
            .into(),
            Message::user("<system-reminder>x</system-reminder>").into(),
        ];
        let r = measure(&span, "summary: read src/a.rs; user said: fix the bug");
        assert_eq!(r.read_paths, [1, 1]);
        assert_eq!(r.modified_paths, [0, 1]);
        assert_eq!(r.user_messages, [1, 1]);
    }
}
