//! The `SessionStore` trait.

use async_trait::async_trait;
use pith_core::{CompactionMeta, Entry, SessionId, SessionRecord, StoredView};

use crate::error::StoreError;
use crate::types::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, RevisionExport, RevisionInfo,
    UsageRecord,
};

/// Durable storage of sessions: records, append-only logs, compactions, breaker state and usage.
///
/// Every operation either happens whole or not at all. Implementations must be safe to share
/// between tasks (and, for shared backends, between processes): the generation check of
/// [`SessionStore::commit_compaction`] is what makes concurrent compaction safe.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// A short name of the backend ("memory", "sqlite", ...), for tracing.
    fn backend(&self) -> &'static str;

    /// Creates a session; its instructions become the first entries of the log.
    async fn create_session(&self, request: CreateSession) -> Result<SessionRecord, StoreError>;

    /// Loads a session record.
    async fn get_session(&self, id: SessionId) -> Result<SessionRecord, StoreError>;

    /// Replaces the mutable fields of a record (model, tools); bumps `updated_at`.
    /// The generation is the store's and is not changed by this call.
    async fn update_session(&self, record: SessionRecord) -> Result<SessionRecord, StoreError>;

    /// All session records, oldest first.
    async fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError>;

    /// Appends entries to the log (see [`AppendRequest`] for the head check and dedupe key).
    async fn append(&self, id: SessionId, request: AppendRequest) -> Result<AppendOutcome, StoreError>;

    /// Loads the current view: the latest compaction, the instructions and reminders it lists, and
    /// the entries from its tail start. Cost must not grow with the archived history.
    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError>;

    /// Loads the whole log, compaction records included, in order.
    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError>;

    /// Commits a compaction atomically: appends the record and advances the generation, if and
    /// only if the session is still at `expected_generation`; otherwise `Conflict`, nothing written.
    /// Returns the new generation.
    async fn commit_compaction(&self, id: SessionId, request: CommitRequest) -> Result<u64, StoreError>;

    /// Finds a committed compaction by its idempotency key.
    async fn find_compaction(&self, id: SessionId, key: &str) -> Result<Option<CompactionMeta>, StoreError>;

    /// The session's circuit-breaker state (default when never set).
    async fn breaker(&self, id: SessionId) -> Result<BreakerState, StoreError>;

    /// Persists the session's circuit-breaker state.
    async fn set_breaker(&self, id: SessionId, state: BreakerState) -> Result<(), StoreError>;

    /// Appends to the session's usage ledger.
    async fn record_usage(&self, id: SessionId, record: UsageRecord) -> Result<(), StoreError>;

    /// The session's usage ledger, oldest first.
    async fn usage(&self, id: SessionId) -> Result<Vec<UsageRecord>, StoreError>;

    /// Every revision of the view, generation 0 first.
    async fn list_revisions(&self, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError>;

    /// The exact view as of `generation`, with its sha256. Byte-identical however many
    /// compactions came after.
    async fn export_revision(&self, id: SessionId, generation: u64) -> Result<RevisionExport, StoreError>;

    /// Deletes a session with its whole log, archive, breaker state and usage ledger.
    async fn delete_session(&self, id: SessionId) -> Result<(), StoreError>;

    /// How many stored items (rows for SQL, lines for JSONL, entries for memory) the most recent
    /// [`SessionStore::load_view`] read, or `None` when the backend does not count.
    ///
    /// Tests use it to check that loading a view does not read the archived history.
    fn last_view_load_rows(&self) -> Option<u64> {
        None
    }
}

#[async_trait]
impl<T: SessionStore + ?Sized> SessionStore for std::sync::Arc<T> {
    fn backend(&self) -> &'static str {
        (**self).backend()
    }
    async fn create_session(&self, request: CreateSession) -> Result<SessionRecord, StoreError> {
        (**self).create_session(request).await
    }
    async fn get_session(&self, id: SessionId) -> Result<SessionRecord, StoreError> {
        (**self).get_session(id).await
    }
    async fn update_session(&self, record: SessionRecord) -> Result<SessionRecord, StoreError> {
        (**self).update_session(record).await
    }
    async fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        (**self).list_sessions().await
    }
    async fn append(&self, id: SessionId, request: AppendRequest) -> Result<AppendOutcome, StoreError> {
        (**self).append(id, request).await
    }
    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError> {
        (**self).load_view(id).await
    }
    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError> {
        (**self).load_log(id).await
    }
    async fn commit_compaction(&self, id: SessionId, request: CommitRequest) -> Result<u64, StoreError> {
        (**self).commit_compaction(id, request).await
    }
    async fn find_compaction(&self, id: SessionId, key: &str) -> Result<Option<CompactionMeta>, StoreError> {
        (**self).find_compaction(id, key).await
    }
    async fn breaker(&self, id: SessionId) -> Result<BreakerState, StoreError> {
        (**self).breaker(id).await
    }
    async fn set_breaker(&self, id: SessionId, state: BreakerState) -> Result<(), StoreError> {
        (**self).set_breaker(id, state).await
    }
    async fn record_usage(&self, id: SessionId, record: UsageRecord) -> Result<(), StoreError> {
        (**self).record_usage(id, record).await
    }
    async fn usage(&self, id: SessionId) -> Result<Vec<UsageRecord>, StoreError> {
        (**self).usage(id).await
    }
    async fn list_revisions(&self, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError> {
        (**self).list_revisions(id).await
    }
    async fn export_revision(&self, id: SessionId, generation: u64) -> Result<RevisionExport, StoreError> {
        (**self).export_revision(id, generation).await
    }
    async fn delete_session(&self, id: SessionId) -> Result<(), StoreError> {
        (**self).delete_session(id).await
    }
    fn last_view_load_rows(&self) -> Option<u64> {
        (**self).last_view_load_rows()
    }
}
