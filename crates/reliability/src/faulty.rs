//! A store wrapper that injects failures.
//!
//! [`FaultyStore`] forwards every call to the store it wraps, except the ones its [`FaultPlan`]
//! says to fail: the Nth write of a [`WriteKind`] (counting from 1, per kind), or every read of a
//! [`ReadKind`]. A failed call returns [`StoreError::Backend`] without reaching the inner store,
//! so it is exactly what a backend failing before it wrote anything looks like. The wrapper also
//! counts the writes that did reach the inner store, so a test can prove "no write happened".

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use pith_core::{CompactionMeta, Entry, SessionId, SessionRecord, StoredView};
use pith_store::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, RevisionExport, RevisionInfo,
    SessionStore, StoreError, UsageRecord,
};

/// A kind of store write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WriteKind {
    /// `create_session`.
    Create,
    /// `update_session`.
    Update,
    /// `append`.
    Append,
    /// `commit_compaction`.
    Commit,
    /// `set_breaker`.
    Breaker,
    /// `record_usage`.
    Usage,
    /// `delete_session`.
    Delete,
}

impl WriteKind {
    /// Every kind, for tests that go through all of them.
    pub const ALL: [WriteKind; 7] = [
        WriteKind::Create,
        WriteKind::Update,
        WriteKind::Append,
        WriteKind::Commit,
        WriteKind::Breaker,
        WriteKind::Usage,
        WriteKind::Delete,
    ];
}

/// A kind of store read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReadKind {
    /// `get_session` and `list_sessions`.
    Session,
    /// `load_view`.
    View,
    /// `load_log`.
    Log,
    /// `find_compaction`.
    FindCompaction,
    /// `breaker`.
    Breaker,
    /// `usage`, `list_revisions` and `export_revision`.
    Ledger,
}

/// Which calls fail.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct FaultPlan {
    /// Write kind → the ordinal (1-based, per kind) of the write that fails.
    pub fail_write: HashMap<WriteKind, u64>,
    /// Read kinds that always fail.
    pub fail_read: HashSet<ReadKind>,
}

impl FaultPlan {
    /// A plan that fails nothing.
    pub fn none() -> Self {
        Self::default()
    }

    /// Fails the `nth` write (1-based) of `kind`.
    pub fn with_write_failure(mut self, kind: WriteKind, nth: u64) -> Self {
        self.fail_write.insert(kind, nth);
        self
    }

    /// Fails every read of `kind`.
    pub fn with_read_failure(mut self, kind: ReadKind) -> Self {
        self.fail_read.insert(kind);
        self
    }
}

#[derive(Debug, Default)]
struct Counters {
    attempted: HashMap<WriteKind, u64>,
    reached: HashMap<WriteKind, u64>,
    injected: u64,
}

/// A [`SessionStore`] that fails the calls its [`FaultPlan`] names and forwards the rest.
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    plan: Mutex<FaultPlan>,
    counters: Mutex<Counters>,
}

impl<S: SessionStore> FaultyStore<S> {
    /// Wraps `inner`, failing what `plan` says.
    pub fn new(inner: S, plan: FaultPlan) -> Self {
        Self {
            inner,
            plan: Mutex::new(plan),
            counters: Mutex::default(),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Replaces the plan; the counters keep counting.
    pub fn set_plan(&self, plan: FaultPlan) {
        *lock(&self.plan) = plan;
    }

    /// Writes of `kind` that reached the inner store.
    pub fn writes_reached(&self, kind: WriteKind) -> u64 {
        lock(&self.counters).reached.get(&kind).copied().unwrap_or(0)
    }

    /// Writes of every kind that reached the inner store.
    pub fn total_writes_reached(&self) -> u64 {
        lock(&self.counters).reached.values().sum()
    }

    /// Failures injected so far.
    pub fn injected(&self) -> u64 {
        lock(&self.counters).injected
    }

    fn write(&self, kind: WriteKind) -> Result<(), StoreError> {
        let nth = lock(&self.plan).fail_write.get(&kind).copied();
        let mut c = lock(&self.counters);
        let n = {
            let a = c.attempted.entry(kind).or_insert(0);
            *a += 1;
            *a
        };
        if nth == Some(n) {
            c.injected += 1;
            return Err(StoreError::Backend(format!(
                "injected failure of {kind:?} write #{n}"
            )));
        }
        *c.reached.entry(kind).or_insert(0) += 1;
        Ok(())
    }

    fn read(&self, kind: ReadKind) -> Result<(), StoreError> {
        if lock(&self.plan).fail_read.contains(&kind) {
            lock(&self.counters).injected += 1;
            return Err(StoreError::Backend(format!("injected failure of {kind:?} read")));
        }
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

#[async_trait]
impl<S: SessionStore> SessionStore for FaultyStore<S> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn create_session(&self, request: CreateSession) -> Result<SessionRecord, StoreError> {
        self.write(WriteKind::Create)?;
        self.inner.create_session(request).await
    }
    async fn get_session(&self, id: SessionId) -> Result<SessionRecord, StoreError> {
        self.read(ReadKind::Session)?;
        self.inner.get_session(id).await
    }
    async fn update_session(&self, record: SessionRecord) -> Result<SessionRecord, StoreError> {
        self.write(WriteKind::Update)?;
        self.inner.update_session(record).await
    }
    async fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        self.read(ReadKind::Session)?;
        self.inner.list_sessions().await
    }
    async fn append(&self, id: SessionId, request: AppendRequest) -> Result<AppendOutcome, StoreError> {
        self.write(WriteKind::Append)?;
        self.inner.append(id, request).await
    }
    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError> {
        self.read(ReadKind::View)?;
        self.inner.load_view(id).await
    }
    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError> {
        self.read(ReadKind::Log)?;
        self.inner.load_log(id).await
    }
    async fn commit_compaction(&self, id: SessionId, request: CommitRequest) -> Result<u64, StoreError> {
        self.write(WriteKind::Commit)?;
        self.inner.commit_compaction(id, request).await
    }
    async fn find_compaction(&self, id: SessionId, key: &str) -> Result<Option<CompactionMeta>, StoreError> {
        self.read(ReadKind::FindCompaction)?;
        self.inner.find_compaction(id, key).await
    }
    async fn breaker(&self, id: SessionId) -> Result<BreakerState, StoreError> {
        self.read(ReadKind::Breaker)?;
        self.inner.breaker(id).await
    }
    async fn set_breaker(&self, id: SessionId, state: BreakerState) -> Result<(), StoreError> {
        self.write(WriteKind::Breaker)?;
        self.inner.set_breaker(id, state).await
    }
    async fn record_usage(&self, id: SessionId, record: UsageRecord) -> Result<(), StoreError> {
        self.write(WriteKind::Usage)?;
        self.inner.record_usage(id, record).await
    }
    async fn usage(&self, id: SessionId) -> Result<Vec<UsageRecord>, StoreError> {
        self.read(ReadKind::Ledger)?;
        self.inner.usage(id).await
    }
    async fn list_revisions(&self, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError> {
        self.read(ReadKind::Ledger)?;
        self.inner.list_revisions(id).await
    }
    async fn export_revision(&self, id: SessionId, generation: u64) -> Result<RevisionExport, StoreError> {
        self.read(ReadKind::Ledger)?;
        self.inner.export_revision(id, generation).await
    }
    async fn delete_session(&self, id: SessionId) -> Result<(), StoreError> {
        self.write(WriteKind::Delete)?;
        self.inner.delete_session(id).await
    }
    fn last_view_load_rows(&self) -> Option<u64> {
        self.inner.last_view_load_rows()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::Message;
    use pith_store::MemoryStore;

    #[tokio::test]
    async fn the_nth_write_of_a_kind_fails_and_only_that_one() {
        let store = FaultyStore::new(
            MemoryStore::new(),
            FaultPlan::none().with_write_failure(WriteKind::Append, 2),
        );
        let Ok(s) = store.create_session(CreateSession::new("m/m")).await else {
            panic!("create must pass");
        };
        assert!(store
            .append(s.id, AppendRequest::message(Message::user("a")))
            .await
            .is_ok());
        let second = store
            .append(s.id, AppendRequest::message(Message::user("b")))
            .await;
        assert!(matches!(second, Err(StoreError::Backend(ref m)) if m.contains("Append write #2")));
        assert!(store
            .append(s.id, AppendRequest::message(Message::user("c")))
            .await
            .is_ok());
        assert_eq!(store.writes_reached(WriteKind::Append), 2);
        assert_eq!(store.injected(), 1);
        let log = store.inner().load_log(s.id).await.map(|l| l.len()).unwrap_or(0);
        assert_eq!(log, 2, "the failed append wrote nothing");
    }

    #[tokio::test]
    async fn a_failing_read_kind_fails_every_time() {
        let store = FaultyStore::new(
            MemoryStore::new(),
            FaultPlan::none().with_read_failure(ReadKind::View),
        );
        let Ok(s) = store.create_session(CreateSession::new("m/m")).await else {
            panic!("create must pass");
        };
        assert!(store.load_view(s.id).await.is_err());
        assert!(store.load_view(s.id).await.is_err());
        assert!(store.load_log(s.id).await.is_ok());
    }
}
