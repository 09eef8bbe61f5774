//! Stage 5: the new view and its record.
//!
//! Given a cut, [`Layout`] says what the new view holds: every instruction (the retained ones and
//! those before the cut), up to ten of the most recent reminders, the summary, and the kept tail.
//! [`tokens_after`] measures it the way the overflow stage will, so a committed view is checked
//! against `target_ratio` × threshold before it is committed — a view over the target would
//! fire the next compaction at once, which is how compaction loops start. [`build_meta`] writes the
//! record; the service commits it.

use chrono::Utc;
use pith_core::{
    CompactionMeta, CompactionStrategy, CompactionTriggerKind, EntryId, EntryRange, Message, SessionId,
    StoredView, TokenCounter, ToolDeclaration, Usage,
};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::config::ProjectionStyle;
use crate::error::CompactionError;
use crate::overflow::message_tokens;
use crate::projection::{summary_text_messages, MAX_RETAINED_REMINDERS};

/// What the view holds after cutting before `cut`.
#[derive(Debug, Clone)]
pub struct Layout<'a> {
    /// Instructions in the view before the summary, in order.
    pub instructions: Vec<&'a Message>,
    /// Reminders kept before the summary, in order.
    pub reminders: Vec<&'a Message>,
    /// Conversation messages to summarise, in order.
    pub span: Vec<&'a Message>,
    /// Messages kept verbatim from the cut on.
    pub kept: &'a [&'a Message],
    /// Reminders that leave the view.
    pub dropped_reminders: usize,
    /// The cut (index into the tail messages).
    pub cut: usize,
}

/// Splits the tail messages `msgs` of `view` at `cut`, retaining at most `reminder_limit` reminders.
pub fn layout<'a>(
    view: &'a StoredView,
    msgs: &'a [&'a Message],
    cut: usize,
    reminder_limit: usize,
) -> Layout<'a> {
    let before = &msgs[..cut];
    let mut instructions: Vec<&Message> = view.instructions.iter().collect();
    let mut reminders: Vec<&Message> = view.reminders.iter().collect();
    let mut span = Vec::new();
    for m in before {
        if m.role.is_instruction() {
            instructions.push(m);
        } else if m.is_reminder() {
            reminders.push(m);
        } else {
            span.push(*m);
        }
    }
    let limit = reminder_limit.min(MAX_RETAINED_REMINDERS);
    let dropped = reminders.len().saturating_sub(limit);
    reminders.drain(..dropped);
    Layout {
        instructions,
        reminders,
        span,
        kept: &msgs[cut..],
        dropped_reminders: dropped,
        cut,
    }
}

impl Layout<'_> {
    /// Whether cutting here changes nothing worth a compaction (nothing summarised or dropped).
    pub fn is_empty(&self) -> bool {
        self.span.is_empty() && self.dropped_reminders == 0
    }
}

/// Tokens of the summary as projected, without the summary text itself.
pub fn summary_overhead(style: ProjectionStyle, counter: &dyn TokenCounter) -> u64 {
    summary_text_messages("", style)
        .iter()
        .map(|m| message_tokens(counter, m))
        .sum()
}

/// Tokens of a summary text once projected in `style` (exact, as the overflow stage counts it).
pub fn projected_summary_tokens(summary: &str, style: ProjectionStyle, counter: &dyn TokenCounter) -> u64 {
    summary_text_messages(summary, style)
        .iter()
        .map(|m| message_tokens(counter, m))
        .sum()
}

/// Context size of the new view, given the projected summary's size in tokens.
pub fn tokens_after(
    layout: &Layout<'_>,
    summary_tokens: u64,
    tools: &[ToolDeclaration],
    counter: &dyn TokenCounter,
) -> u64 {
    let messages = layout
        .instructions
        .iter()
        .chain(&layout.reminders)
        .chain(layout.kept)
        .map(|m| message_tokens(counter, m))
        .sum::<u64>();
    counter.count_tools(tools) + messages + summary_tokens
}

/// Checks a new view's size: over the threshold it cannot fit (`DoesNotFit`); over the target it
/// would not stop the next compaction (`NoProgress`).
pub fn validate(tokens_after: u64, threshold: u64, target: u64) -> Result<(), CompactionError> {
    if tokens_after > threshold {
        return Err(CompactionError::DoesNotFit {
            what: "compacted view tokens",
            needed: tokens_after,
            available: threshold,
        });
    }
    if tokens_after > target {
        return Err(CompactionError::NoProgress { tokens_after, target });
    }
    Ok(())
}

/// `target_ratio` × threshold.
pub fn target(threshold: u64, ratio: f64) -> u64 {
    (threshold as f64 * ratio).floor() as u64
}

/// Lower-case hex sha256 of manual instructions, when there are any.
pub fn instructions_hash(instructions: Option<&str>) -> Option<String> {
    instructions.map(|t| hex::encode(Sha256::digest(t.trim().as_bytes())))
}

/// The idempotency key: (session, last summarised entry, entries in the log, manual instructions).
pub fn idempotency_key(
    session: SessionId,
    last_summarized: Option<EntryId>,
    log_entries: u64,
    instructions_hash: Option<&str>,
) -> String {
    let mut h = Sha256::new();
    h.update(session.to_string().as_bytes());
    h.update(b"|");
    h.update(
        last_summarized
            .map(|e| e.to_string())
            .unwrap_or_default()
            .as_bytes(),
    );
    h.update(b"|");
    h.update(log_entries.to_string().as_bytes());
    h.update(b"|");
    h.update(instructions_hash.unwrap_or("").as_bytes());
    hex::encode(h.finalize())
}

/// Key of [`CompactionMeta::extra`]: tail entries present when the compaction committed.
pub const EXTRA_TAIL_ENTRIES: &str = "tail_entries";
/// Key of [`CompactionMeta::extra`]: log entries (compaction records excluded) at commit.
pub const EXTRA_LOG_ENTRIES: &str = "log_entries";
/// Key of [`CompactionMeta::extra`]: hash of the manual instructions.
pub const EXTRA_INSTRUCTIONS_HASH: &str = "instructions_sha256";
/// Key of [`CompactionMeta::extra`]: reminders that left the view.
pub const EXTRA_DROPPED_REMINDERS: &str = "dropped_reminders";

/// Tail entries present when `meta` committed, when recorded.
pub fn recorded_tail_entries(meta: &CompactionMeta) -> Option<u64> {
    meta.extra.as_ref()?.get(EXTRA_TAIL_ENTRIES)?.as_u64()
}

/// Log entries (compaction records excluded) when `meta` committed, when recorded.
pub fn recorded_log_entries(meta: &CompactionMeta) -> Option<u64> {
    meta.extra.as_ref()?.get(EXTRA_LOG_ENTRIES)?.as_u64()
}

/// Hash of the manual instructions `meta` was made with, when recorded.
pub fn recorded_instructions_hash(meta: &CompactionMeta) -> Option<String> {
    Some(
        meta.extra
            .as_ref()?
            .get(EXTRA_INSTRUCTIONS_HASH)?
            .as_str()?
            .to_string(),
    )
}

/// Everything a compaction record is built from.
#[derive(Debug, Clone)]
pub struct RecordInput<'a> {
    /// The new view's layout.
    pub layout: &'a Layout<'a>,
    /// The summary.
    pub summary: String,
    /// The generation this commit creates.
    pub generation: u64,
    /// Context size before.
    pub tokens_before: u64,
    /// Context size after.
    pub tokens_after: u64,
    /// How the summary was produced.
    pub strategy: CompactionStrategy,
    /// The model that wrote it.
    pub summary_model: Option<String>,
    /// What caused the compaction.
    pub trigger: CompactionTriggerKind,
    /// Usage of the summary calls.
    pub usage: Usage,
    /// Summary calls made.
    pub summary_calls: u32,
    /// The idempotency key.
    pub key: String,
    /// Tail entries of the new view at commit.
    pub tail_entries: u64,
    /// Log entries (compaction records excluded) at commit.
    pub log_entries: u64,
    /// Hash of the manual instructions.
    pub instructions_hash: Option<String>,
}

/// Builds the compaction record.
pub fn build_meta(input: RecordInput<'_>) -> CompactionMeta {
    let layout = input.layout;
    let summarized = match (layout.span.first(), layout.span.last()) {
        (Some(first), Some(last)) => Some(EntryRange {
            first: first.id,
            last: last.id,
            messages: layout.span.len() as u64,
        }),
        _ => None,
    };
    CompactionMeta {
        id: EntryId::new(),
        generation: input.generation,
        summary: input.summary,
        summarized,
        tail_start: layout.kept.first().map(|m| m.id),
        retained_instructions: layout.instructions.iter().map(|m| m.id).collect(),
        retained_reminders: layout.reminders.iter().map(|m| m.id).collect(),
        masked: Vec::new(),
        tokens_before: input.tokens_before,
        tokens_after: input.tokens_after,
        strategy: input.strategy,
        summary_model: input.summary_model,
        trigger: input.trigger,
        usage: input.usage,
        summary_calls: input.summary_calls,
        idempotency_key: input.key,
        created_at: Utc::now(),
        extra: Some(json!({
            EXTRA_TAIL_ENTRIES: input.tail_entries,
            EXTRA_LOG_ENTRIES: input.log_entries,
            EXTRA_INSTRUCTIONS_HASH: input.instructions_hash,
            EXTRA_DROPPED_REMINDERS: layout.dropped_reminders,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::{EstimateCounter, SessionRecord};

    #[test]
    fn layout_retains_instructions_and_the_ten_latest_reminders() {
        let mut log: Vec<pith_core::Entry> = vec![Message::system("rules").into()];
        for i in 0..12 {
            log.push(Message::user(format!("<system-reminder>r{i}</system-reminder>")).into());
            log.push(Message::user(format!("q{i}")).into());
        }
        log.push(Message::assistant("last").into());
        let view = StoredView::from_log(SessionRecord::new("m", vec![]), &log).unwrap();
        let msgs: Vec<&Message> = view.tail_messages().collect();
        let l = layout(&view, &msgs, msgs.len() - 1, MAX_RETAINED_REMINDERS);
        assert_eq!(l.instructions.len(), 1);
        assert_eq!(l.reminders.len(), 10);
        assert_eq!(l.dropped_reminders, 2);
        assert!(l.reminders[0].text_content().contains("r2"));
        assert_eq!(l.span.len(), 12);
        assert_eq!(l.kept.len(), 1);
        let t = tokens_after(&l, 100, &[], &EstimateCounter);
        assert!(t > 100);
        assert!(validate(t, t, t).is_ok());
        assert!(matches!(
            validate(t, t, t - 1),
            Err(CompactionError::NoProgress { .. })
        ));
        assert!(matches!(
            validate(t, t - 1, t - 1),
            Err(CompactionError::DoesNotFit { .. })
        ));
    }

    #[test]
    fn keys_depend_on_every_component() {
        let s = SessionId::new();
        let e = EntryId::new();
        let base = idempotency_key(s, Some(e), 10, None);
        assert_eq!(base, idempotency_key(s, Some(e), 10, None));
        assert_ne!(base, idempotency_key(s, Some(e), 11, None));
        assert_ne!(base, idempotency_key(s, None, 10, None));
        assert_ne!(base, idempotency_key(s, Some(e), 10, Some("abc")));
    }
}
