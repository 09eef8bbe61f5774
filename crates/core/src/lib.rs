//! Core data model of pith.
//!
//! Every other crate of the workspace speaks in these types: ids, messages and their parts, usage
//! as providers report it, the append-only session log, compaction records, the stored view of a
//! session, agent events and token estimation. Nothing here performs I/O.

#![warn(missing_docs)]

pub mod entry;
pub mod event;
pub mod ids;
pub mod message;
pub mod session;
pub mod tokens;
pub mod usage;
pub mod view;

pub use entry::{
    CompactionMeta, CompactionStrategy, CompactionTriggerKind, Entry, EntryRange, Marker, MarkerKind,
    MaskedEntry, ModelChange,
};
pub use event::{AgentEvent, EventSink, NoopSink, RecordingSink};
pub use ids::{EntryId, IdParseError, SessionId};
pub use message::{FinishReason, Message, MessageMeta, Part, Role, REMINDER_TAG};
pub use session::{SessionRecord, ToolDeclaration};
pub use tokens::{EstimateCounter, TiktokenCounter, TokenCounter};
pub use usage::Usage;
pub use view::{sha256_hex, StoredView, ViewError};
