//! Store errors.

use pith_core::{EntryId, SessionId};

/// Why a store operation failed. Nothing was written when an operation returns an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No session has this id.
    #[error("session {0} not found")]
    SessionNotFound(SessionId),
    /// A session with this id already exists.
    #[error("session {0} already exists")]
    SessionExists(SessionId),
    /// A compaction was committed on a stale generation; another commit won.
    #[error("generation conflict on session {session}: expected {expected}, found {actual}")]
    Conflict {
        /// The session.
        session: SessionId,
        /// The generation the caller based its compaction on.
        expected: u64,
        /// The session's current generation.
        actual: u64,
    },
    /// An append expected another log length.
    #[error("log head mismatch on session {session}: expected {expected} entries, found {actual}")]
    HeadMismatch {
        /// The session.
        session: SessionId,
        /// The length the caller expected.
        expected: u64,
        /// The actual length.
        actual: u64,
    },
    /// An entry id is already in the log (entry ids are unique).
    #[error("duplicate entry id {0}")]
    DuplicateEntry(EntryId),
    /// No revision with this generation exists.
    #[error("session {session} has no revision {generation} (latest is {latest})")]
    RevisionNotFound {
        /// The session.
        session: SessionId,
        /// The requested generation.
        generation: u64,
        /// The latest generation.
        latest: u64,
    },
    /// The request itself is invalid (e.g. an empty append, a compaction with a wrong generation).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Stored data could not be read back.
    #[error("corrupt data in {location}: {reason}")]
    Corrupt {
        /// File and line, or table and row.
        location: String,
        /// What was wrong.
        reason: String,
    },
    /// A file system error.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The path involved.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON (de)serialisation error.
    #[error("serialisation error: {0}")]
    Serde(#[from] serde_json::Error),
    /// A SQLite error.
    #[error("sqlite error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A Postgres error.
    #[cfg(feature = "postgres")]
    #[error("postgres error: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// A Postgres pool error.
    #[cfg(feature = "postgres")]
    #[error("postgres pool error: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    /// A background task running a blocking store operation panicked or was cancelled.
    #[error("store task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// An injected or otherwise unclassified backend failure (used by fault-injecting wrappers).
    #[error("backend failure: {0}")]
    Backend(String),
}

impl StoreError {
    /// Whether the error is a lost generation race (the caller may reload and retry).
    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Conflict { .. })
    }

    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.to_string(),
            source,
        }
    }
}
