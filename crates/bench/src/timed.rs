//! Timing wrappers for the load harness: a provider and a store that record where time goes.
//!
//! The harness subtracts the time a turn spent inside model calls from the turn's wall time to
//! get the runtime's own cost; the provider adds its call time to a per-turn accumulator held in
//! a task-local (the runtime drives a turn inside the caller's task). The store records the
//! latency of every append and compaction commit, fsync included.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use pith_core::{CompactionMeta, Entry, SessionId, SessionRecord, StoredView};
use pith_router::{ChatRequest, ChatResponse, Provider, ProviderError, StreamSink};
use pith_store::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, RevisionExport, RevisionInfo,
    SessionStore, StoreError, UsageRecord,
};

/// Time and number of the model calls of one turn.
#[derive(Debug, Default)]
pub struct TurnClock {
    /// Nanoseconds spent inside model calls.
    pub model_nanos: AtomicU64,
    /// Model calls made.
    pub model_calls: AtomicU64,
}

tokio::task_local! {
    /// The clock of the turn the current task is running.
    pub static TURN_CLOCK: Arc<TurnClock>;
}

/// Calls made outside a turn's task-local scope (the harness checks it stays 0).
pub static UNATTRIBUTED_CALLS: AtomicU64 = AtomicU64::new(0);

/// A provider that adds the time of every call to the current turn's [`TURN_CLOCK`].
pub struct TimedProvider {
    inner: Arc<dyn Provider>,
}

impl TimedProvider {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Provider>) -> Self {
        Self { inner }
    }
}

#[async_trait]
impl Provider for TimedProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn chat(
        &self,
        request: ChatRequest,
        sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        let started = Instant::now();
        let result = self.inner.chat(request, sink).await;
        let nanos = started.elapsed().as_nanos() as u64;
        let attributed = TURN_CLOCK.try_with(|clock| {
            clock.model_nanos.fetch_add(nanos, Ordering::Relaxed);
            clock.model_calls.fetch_add(1, Ordering::Relaxed);
        });
        if attributed.is_err() {
            UNATTRIBUTED_CALLS.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

/// Latency samples in microseconds.
#[derive(Debug, Default)]
pub struct Samples(Mutex<Vec<u64>>);

impl Samples {
    /// Records one sample.
    pub fn record(&self, micros: u64) {
        match self.0.lock() {
            Ok(mut v) => v.push(micros),
            Err(p) => p.into_inner().push(micros),
        }
    }

    /// Takes the samples recorded so far.
    pub fn take(&self) -> Vec<u64> {
        match self.0.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        }
    }
}

/// A store that records the latency of appends and compaction commits.
pub struct TimedStore {
    inner: Arc<dyn SessionStore>,
    /// Latency of every `append`, in microseconds.
    pub appends: Samples,
    /// Latency of every `commit_compaction`, in microseconds.
    pub commits: Samples,
}

impl TimedStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn SessionStore>) -> Self {
        Self {
            inner,
            appends: Samples::default(),
            commits: Samples::default(),
        }
    }
}

fn micros(started: Instant) -> u64 {
    started.elapsed().as_micros() as u64
}

#[async_trait]
impl SessionStore for TimedStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn create_session(&self, request: CreateSession) -> Result<SessionRecord, StoreError> {
        self.inner.create_session(request).await
    }
    async fn get_session(&self, id: SessionId) -> Result<SessionRecord, StoreError> {
        self.inner.get_session(id).await
    }
    async fn update_session(&self, record: SessionRecord) -> Result<SessionRecord, StoreError> {
        self.inner.update_session(record).await
    }
    async fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        self.inner.list_sessions().await
    }
    async fn append(&self, id: SessionId, request: AppendRequest) -> Result<AppendOutcome, StoreError> {
        let started = Instant::now();
        let out = self.inner.append(id, request).await;
        self.appends.record(micros(started));
        out
    }
    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError> {
        self.inner.load_view(id).await
    }
    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError> {
        self.inner.load_log(id).await
    }
    async fn commit_compaction(&self, id: SessionId, request: CommitRequest) -> Result<u64, StoreError> {
        let started = Instant::now();
        let out = self.inner.commit_compaction(id, request).await;
        self.commits.record(micros(started));
        out
    }
    async fn find_compaction(&self, id: SessionId, key: &str) -> Result<Option<CompactionMeta>, StoreError> {
        self.inner.find_compaction(id, key).await
    }
    async fn breaker(&self, id: SessionId) -> Result<BreakerState, StoreError> {
        self.inner.breaker(id).await
    }
    async fn set_breaker(&self, id: SessionId, state: BreakerState) -> Result<(), StoreError> {
        self.inner.set_breaker(id, state).await
    }
    async fn record_usage(&self, id: SessionId, record: UsageRecord) -> Result<(), StoreError> {
        self.inner.record_usage(id, record).await
    }
    async fn usage(&self, id: SessionId) -> Result<Vec<UsageRecord>, StoreError> {
        self.inner.usage(id).await
    }
    async fn list_revisions(&self, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError> {
        self.inner.list_revisions(id).await
    }
    async fn export_revision(&self, id: SessionId, generation: u64) -> Result<RevisionExport, StoreError> {
        self.inner.export_revision(id, generation).await
    }
    async fn delete_session(&self, id: SessionId) -> Result<(), StoreError> {
        self.inner.delete_session(id).await
    }
    fn last_view_load_rows(&self) -> Option<u64> {
        self.inner.last_view_load_rows()
    }
}
