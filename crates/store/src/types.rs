//! Request and result types of the store operations.

use chrono::{DateTime, Utc};
use pith_core::{CompactionMeta, Entry, Message, SessionId, StoredView, ToolDeclaration, Usage};
use serde::{Deserialize, Serialize};

/// What a new session starts with.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CreateSession {
    /// The id to use (a fresh one by default).
    pub id: SessionId,
    /// The model turns are sent to.
    pub model: String,
    /// Tools declared to the model.
    pub tools: Vec<ToolDeclaration>,
    /// Instructions, appended to the log as system messages.
    pub instructions: Vec<Message>,
}

impl CreateSession {
    /// A session for `model` with a fresh id, no tools and no instructions.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            id: SessionId::new(),
            model: model.into(),
            tools: Vec::new(),
            instructions: Vec::new(),
        }
    }

    /// Uses a given id.
    pub fn with_id(mut self, id: SessionId) -> Self {
        self.id = id;
        self
    }

    /// Declares tools.
    pub fn with_tools(mut self, tools: Vec<ToolDeclaration>) -> Self {
        self.tools = tools;
        self
    }

    /// Adds a system instruction.
    pub fn with_instruction(mut self, text: impl Into<String>) -> Self {
        self.instructions.push(Message::system(text));
        self
    }
}

/// Entries to append.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AppendRequest {
    /// The entries, in order. Must not be empty; compaction records go through
    /// [`crate::SessionStore::commit_compaction`] instead.
    pub entries: Vec<Entry>,
    /// When set, the append fails with `HeadMismatch` unless the log has exactly this many entries.
    pub expected_len: Option<u64>,
    /// When set, a second append with the same key is a no-op (a retried append after a crash).
    pub dedupe_key: Option<String>,
}

impl AppendRequest {
    /// Appends these entries with no head check and no dedupe key.
    pub fn new(entries: Vec<Entry>) -> Self {
        Self {
            entries,
            expected_len: None,
            dedupe_key: None,
        }
    }

    /// Appends one message.
    pub fn message(message: Message) -> Self {
        Self::new(vec![Entry::Message(message)])
    }

    /// Requires the log to have `len` entries.
    pub fn expecting(mut self, len: u64) -> Self {
        self.expected_len = Some(len);
        self
    }

    /// Makes the append idempotent under `key`.
    pub fn with_dedupe_key(mut self, key: impl Into<String>) -> Self {
        self.dedupe_key = Some(key.into());
        self
    }
}

/// The result of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    /// The number of entries in the log afterwards (the new head).
    pub len: u64,
    /// The dedupe key had been seen before, so nothing was appended.
    pub deduplicated: bool,
}

/// A compaction to commit.
#[derive(Debug, Clone)]
pub struct CommitRequest {
    /// The record; its `generation` must be `expected_generation + 1`.
    pub meta: CompactionMeta,
    /// The generation the compaction was computed from.
    pub expected_generation: u64,
}

/// Persisted circuit-breaker state of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerState {
    /// Consecutive counted compaction failures.
    pub consecutive_failures: u32,
    /// Whether the circuit is open (compaction makes no model call).
    pub open: bool,
    /// When it opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_at: Option<DateTime<Utc>>,
    /// The last counted failure, for operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// What a model call was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsagePurpose {
    /// A turn's model call.
    Turn,
    /// A summary call of a compaction.
    Summary,
    /// A relevance-grading call of a compaction.
    Grader,
}

/// One line of the usage ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// When the call finished.
    pub at: DateTime<Utc>,
    /// The model.
    pub model: String,
    /// What the call was for.
    pub purpose: UsagePurpose,
    /// Reported usage.
    pub usage: Usage,
    /// The result was discarded (a failed or cancelled compaction); the cost was still incurred.
    #[serde(default)]
    pub discarded: bool,
}

/// One revision of a session's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisionInfo {
    /// The generation (0 = the original view).
    pub generation: u64,
    /// When the revision began (session creation for 0, the commit otherwise).
    pub created_at: DateTime<Utc>,
    /// Entries in the log when the revision was superseded (or now, for the latest).
    pub log_len: u64,
}

/// An exported revision: the exact view as of a generation, with its checksum.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionExport {
    /// The generation.
    pub generation: u64,
    /// The view.
    pub view: StoredView,
    /// The canonical JSON bytes of the view.
    pub bytes: Vec<u8>,
    /// Lower-case hex sha256 of `bytes`.
    pub sha256: String,
}

impl RevisionExport {
    /// Builds an export from a view, computing bytes and checksum.
    pub fn from_view(view: StoredView) -> Result<Self, serde_json::Error> {
        let bytes = view.canonical_json()?;
        let sha256 = pith_core::sha256_hex(&bytes);
        Ok(Self {
            generation: view.generation,
            view,
            bytes,
            sha256,
        })
    }
}
