//! The model view: what the model sees of a stored view.
//!
//! `instructions ++ retained reminders ++ summary handoff ++ tail`. Instructions come first,
//! verbatim and in order; then up to the ten most recent earlier reminders; then the latest
//! summary in the configured style; then every message of the tail, with tool outputs a tiered
//! compaction masked shown as placeholders. A view without a compaction is its log's messages as
//! they are, and an empty history gets no synthetic instruction.

use chrono::{DateTime, Utc};
use pith_core::{CompactionMeta, EntryId, Message, MessageMeta, Part, Role, StoredView};
use uuid_shim::derived_id;

use crate::config::ProjectionStyle;

/// Reminders from before the tail that stay in the view, at most.
pub const MAX_RETAINED_REMINDERS: usize = 10;

/// The reasoning text that stands in on the assistant handoff message for providers that require
/// a reasoning block; the summary model's own reasoning is never carried over.
pub const HANDOFF_REASONING_MARKER: &str = "[summary of earlier context follows]";

/// The user message that introduces a `Handoff`.
pub const HANDOFF_CONTINUATION: &str = "The earlier part of this conversation was compacted. Continue the \
work from the summary below and the messages after it.";

/// The most recent reminders, at most ten.
pub fn recent_reminders(reminders: &[Message]) -> &[Message] {
    &reminders[reminders.len().saturating_sub(MAX_RETAINED_REMINDERS)..]
}

fn synthetic(id: EntryId, role: Role, parts: Vec<Part>, at: DateTime<Utc>) -> Message {
    Message {
        id,
        role,
        parts,
        created_at: at,
        usage: None,
        finish: None,
        meta: MessageMeta {
            synthetic: true,
            ..MessageMeta::default()
        },
    }
}

/// The messages that carry a compaction's summary, in `style`; none when the record has no
/// summary (a tiered compaction that only masked tool outputs of a session never summarised).
pub fn summary_messages(meta: &CompactionMeta, style: ProjectionStyle) -> Vec<Message> {
    if meta.summary.trim().is_empty() {
        return Vec::new();
    }
    render_summary(meta.id, &meta.summary, meta.created_at, style)
}

/// The messages a summary text would be projected into (fresh ids), for measuring.
pub fn summary_text_messages(summary: &str, style: ProjectionStyle) -> Vec<Message> {
    render_summary(EntryId::new(), summary, Utc::now(), style)
}

fn render_summary(id: EntryId, summary: &str, at: DateTime<Utc>, style: ProjectionStyle) -> Vec<Message> {
    let summary = summary.trim();
    match style {
        ProjectionStyle::Reminder => vec![synthetic(
            id,
            Role::User,
            vec![Part::text(format!(
                "<system-reminder>\nSummary of the earlier conversation:\n{summary}\n</system-reminder>"
            ))],
            at,
        )],
        ProjectionStyle::Handoff => vec![
            synthetic(id, Role::User, vec![Part::text(HANDOFF_CONTINUATION)], at),
            synthetic(
                derived_id(id, 1),
                Role::Assistant,
                vec![
                    Part::Reasoning {
                        text: HANDOFF_REASONING_MARKER.into(),
                        signature: None,
                    },
                    Part::text(summary),
                ],
                at,
            ),
        ],
        ProjectionStyle::SummaryMessage => vec![synthetic(
            id,
            Role::User,
            vec![Part::text(format!(
                "Summary of the earlier conversation:\n\n{summary}"
            ))],
            at,
        )],
    }
}

fn masked(message: &Message, meta: &CompactionMeta) -> Message {
    let mut m = message.clone();
    for part in &mut m.parts {
        if let Part::ToolResult { call_id, content, .. } = part {
            if let Some(mask) = meta
                .masked
                .iter()
                .find(|x| x.entry_id == message.id && &x.call_id == call_id)
            {
                *content = crate::tier::placeholder(mask);
            }
        }
    }
    m
}

/// Projects a stored view into the messages sent to the model.
pub fn project(view: &StoredView, style: ProjectionStyle) -> Vec<Message> {
    let Some(meta) = &view.compaction else {
        return view.tail_messages().cloned().collect();
    };
    let reminders = recent_reminders(&view.reminders);
    let mut out = Vec::with_capacity(view.instructions.len() + reminders.len() + 2 + view.tail.len());
    out.extend(view.instructions.iter().cloned());
    out.extend(reminders.iter().cloned());
    out.extend(summary_messages(meta, style));
    for m in view.tail_messages() {
        if meta.masked.iter().any(|x| x.entry_id == m.id) {
            out.push(masked(m, meta));
        } else {
            out.push(m.clone());
        }
    }
    out
}

mod uuid_shim {
    use pith_core::EntryId;

    /// A stable id derived from another one (for the second message of a handoff).
    pub fn derived_id(id: EntryId, n: u128) -> EntryId {
        EntryId::from_uuid(uuid::Uuid::from_u128(id.as_uuid().as_u128() ^ n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::{CompactionStrategy, CompactionTriggerKind, SessionRecord, Usage};

    pub(crate) fn meta(summary: &str) -> CompactionMeta {
        CompactionMeta {
            id: EntryId::new(),
            generation: 1,
            summary: summary.into(),
            summarized: None,
            tail_start: None,
            retained_instructions: vec![],
            retained_reminders: vec![],
            masked: vec![],
            tokens_before: 0,
            tokens_after: 0,
            strategy: CompactionStrategy::Deterministic,
            summary_model: None,
            trigger: CompactionTriggerKind::Manual,
            usage: Usage::default(),
            summary_calls: 0,
            idempotency_key: "k".into(),
            created_at: Utc::now(),
            extra: None,
        }
    }

    #[test]
    fn empty_history_gets_no_synthetic_instruction() {
        let view = StoredView::from_log(SessionRecord::new("m", vec![]), &[]).unwrap();
        assert!(project(&view, ProjectionStyle::Reminder).is_empty());
    }

    #[test]
    fn reminder_style_is_a_tagged_user_message_not_a_system_one() {
        let msgs = summary_messages(&meta("S"), ProjectionStyle::Reminder);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].role, Role::User);
        assert!(msgs[0].text_content().starts_with("<system-reminder>"));
        assert!(msgs[0].text_content().ends_with("</system-reminder>"));
        assert!(
            !msgs[0].is_reminder(),
            "pith's own summary never counts as a reminder"
        );
    }
}
