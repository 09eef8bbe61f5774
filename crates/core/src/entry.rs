//! The append-only session log and the compaction record.
//!
//! A session's log is a sequence of [`Entry`]s. Nothing in it is rewritten or deleted: a
//! compaction appends a [`CompactionMeta`] that says which part of the log the model sees from
//! now on, and the original messages stay where they were, so every earlier view can be exported.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::EntryId;
use crate::message::Message;
use crate::usage::Usage;

/// One entry of a session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    /// A message.
    Message(Message),
    /// The session switched model.
    ModelChange(ModelChange),
    /// A committed compaction: the model view changes here.
    ///
    /// Boxed: the record is several times larger than a message, and an enum is as large inline
    /// as its largest variant, so an unboxed record would make every message entry of a log
    /// (in memory, in a view, in a request) pay for it.
    Compaction(Box<CompactionMeta>),
    /// A fact about the history that is not content, such as another tool's compaction.
    Marker(Marker),
}

impl Entry {
    /// The entry's unique id.
    pub fn id(&self) -> EntryId {
        match self {
            Entry::Message(m) => m.id,
            Entry::ModelChange(c) => c.id,
            Entry::Compaction(c) => c.id,
            Entry::Marker(m) => m.id,
        }
    }

    /// A stable lower-case name of the entry kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Entry::Message(_) => "message",
            Entry::ModelChange(_) => "model_change",
            Entry::Compaction(_) => "compaction",
            Entry::Marker(_) => "marker",
        }
    }

    /// The message, if this entry is one.
    pub fn as_message(&self) -> Option<&Message> {
        match self {
            Entry::Message(m) => Some(m),
            _ => None,
        }
    }

    /// The compaction record, if this entry is one.
    pub fn as_compaction(&self) -> Option<&CompactionMeta> {
        match self {
            Entry::Compaction(c) => Some(c),
            _ => None,
        }
    }
}

impl From<Message> for Entry {
    fn from(m: Message) -> Self {
        Entry::Message(m)
    }
}

/// The session switched to another model from this point on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelChange {
    /// Unique id of the log entry.
    pub id: EntryId,
    /// The new model (`provider/model` or an alias).
    pub model: String,
    /// When the switch happened.
    pub created_at: DateTime<Utc>,
}

/// A non-content fact about the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    /// Unique id of the log entry.
    pub id: EntryId,
    /// What the marker records.
    pub kind: MarkerKind,
    /// When it happened.
    pub created_at: DateTime<Utc>,
    /// Where it came from in an imported file, for diagnostics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Kinds of markers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MarkerKind {
    /// Another tool compacted the conversation here (Claude Code's `compact_boundary`, pi's
    /// `compaction` entry). pith's own view ignores it; replays use it as ground truth.
    ExternalCompaction {
        /// The tool that compacted ("claude-code", "pi", ...).
        tool: String,
        /// The context size the tool reported before compacting.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_before: Option<u64>,
        /// What triggered it ("auto", "manual", ...), when recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trigger: Option<String>,
        /// The tool's summary, when the format keeps it in the marker itself (pi).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
}

/// What caused a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTriggerKind {
    /// The local estimate said the next request would not fit.
    Proactive,
    /// The provider rejected a request as too long.
    Reactive,
    /// Someone asked for it.
    Manual,
}

/// How a compaction produced its handoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStrategy {
    /// A summary model wrote the summary.
    ModelSummary,
    /// The deterministic (model-free) summarizer extracted it.
    Deterministic,
    /// Only old tool outputs were masked; no summary call was made.
    MaskOnly,
}

impl CompactionStrategy {
    /// A stable lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionStrategy::ModelSummary => "model_summary",
            CompactionStrategy::Deterministic => "deterministic",
            CompactionStrategy::MaskOnly => "mask_only",
        }
    }
}

/// The span of the log a compaction summarised (inclusive on both ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryRange {
    /// First summarised entry.
    pub first: EntryId,
    /// Last summarised entry.
    pub last: EntryId,
    /// Number of messages in the span.
    pub messages: u64,
}

/// A tool output that a tiered compaction replaced by a placeholder in the view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaskedEntry {
    /// The tool message whose result is masked (the original stays in the log).
    pub entry_id: EntryId,
    /// The tool call the result answers.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// Estimated size of the masked output.
    pub tokens: u64,
}

/// The compaction record: everything needed to build the new view and to audit the compaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionMeta {
    /// Unique id of the log entry.
    pub id: EntryId,
    /// The generation this compaction creates (the first compaction creates generation 1).
    pub generation: u64,
    /// The summary text the handoff carries.
    pub summary: String,
    /// The span the summary covers, when something was summarised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarized: Option<EntryRange>,
    /// The first entry of the tail kept verbatim; every entry from it on is in the view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail_start: Option<EntryId>,
    /// Instructions before the tail that stay in the view verbatim, in order.
    #[serde(default)]
    pub retained_instructions: Vec<EntryId>,
    /// Reminders before the tail that stay in the view, in order.
    #[serde(default)]
    pub retained_reminders: Vec<EntryId>,
    /// Tool outputs shown as placeholders.
    #[serde(default)]
    pub masked: Vec<MaskedEntry>,
    /// Context size before the compaction.
    pub tokens_before: u64,
    /// Context size of the new view.
    pub tokens_after: u64,
    /// How the handoff was produced.
    pub strategy: CompactionStrategy,
    /// The model that wrote the summary, for [`CompactionStrategy::ModelSummary`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_model: Option<String>,
    /// What caused the compaction.
    pub trigger: CompactionTriggerKind,
    /// Usage of all summary calls of this compaction.
    #[serde(default)]
    pub usage: Usage,
    /// Number of summary calls made.
    #[serde(default)]
    pub summary_calls: u32,
    /// The idempotency key; a second compaction with the same key returns this record.
    pub idempotency_key: String,
    /// When it was committed.
    pub created_at: DateTime<Utc>,
    /// Extra structured data carried forward (e.g. the artifact ledger), opaque to the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_serialize_with_a_type_tag() {
        let e = Entry::ModelChange(ModelChange {
            id: EntryId::new(),
            model: "openai/gpt-4o".into(),
            created_at: Utc::now(),
        });
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "model_change");
        assert_eq!(serde_json::from_value::<Entry>(v).unwrap(), e);
        let m = Entry::Message(Message::user("hi"));
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["type"], "message");
        assert_eq!(v["role"], "user");
    }
}
