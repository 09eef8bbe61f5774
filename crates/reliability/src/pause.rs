//! Named crash points, and wrappers that stop a process at one of them.
//!
//! A crash test runs a compaction or a turn in a child process and `SIGKILL`s it at an exact
//! step. To hit the step deterministically, the child wraps its store and summarizer in
//! [`PausingStore`] and [`PausingSummarizer`]: when the step named by its [`CrashPoint`] is
//! reached, the wrapper writes a marker file and blocks forever, and the parent, which waits for
//! the marker, kills the child there. Nothing after the step can run, exactly as after a power
//! cut at that instant.
//!
//! "Inside the commit" needs the on-disk state of a commit that was interrupted half-way, which no
//! store exposes a hook for. [`TornCommit`] produces it with the real backend: for JSONL the real
//! commit runs and the previous `boundary.json` is put back (the archive line is written, the
//! boundary that adopts it is not — the state a kill between the two writes leaves); for SQLite a
//! second connection opens a write transaction, inserts the compaction rows and is killed before
//! `COMMIT`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pith_compaction::{CompactionError, Summarizer, SummaryJob, SummaryOutput};
use pith_core::{CompactionMeta, CompactionStrategy, Entry, SessionId, SessionRecord, StoredView};
use pith_store::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, RevisionExport, RevisionInfo,
    SessionStore, StoreError, UsageRecord,
};

/// A step at which a process can be stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CrashPoint {
    /// The summary came back; nothing was committed yet.
    AfterSummary,
    /// Half-way through the commit (see [`TornCommit`]).
    InCommit,
    /// The commit returned; the `HistoryReplaced` event was not published yet.
    AfterCommit,
    /// A turn's input was appended; the model was not asked yet.
    AfterInput,
    /// The model replied; its reply was not appended yet.
    BeforeReply,
    /// The model's reply was appended; the turn did not return yet.
    AfterReply,
}

/// A crash point name that is not one of [`CrashPoint::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown crash point {0:?} (expected one of after-summary, in-commit, after-commit, after-input, before-reply, after-reply)")]
pub struct UnknownCrashPoint(pub String);

impl CrashPoint {
    /// Every crash point.
    pub const ALL: [CrashPoint; 6] = [
        CrashPoint::AfterSummary,
        CrashPoint::InCommit,
        CrashPoint::AfterCommit,
        CrashPoint::AfterInput,
        CrashPoint::BeforeReply,
        CrashPoint::AfterReply,
    ];

    /// The point's stable name (used in environment variables).
    pub fn as_str(self) -> &'static str {
        match self {
            CrashPoint::AfterSummary => "after-summary",
            CrashPoint::InCommit => "in-commit",
            CrashPoint::AfterCommit => "after-commit",
            CrashPoint::AfterInput => "after-input",
            CrashPoint::BeforeReply => "before-reply",
            CrashPoint::AfterReply => "after-reply",
        }
    }
}

impl std::str::FromStr for CrashPoint {
    type Err = UnknownCrashPoint;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CrashPoint::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownCrashPoint(s.to_string()))
    }
}

/// Where a process stops: the point, and the marker file announcing it.
#[derive(Debug, Clone)]
pub struct Stop {
    /// The point.
    pub point: CrashPoint,
    /// Written (and synced) when the point is reached, before blocking.
    pub marker: PathBuf,
}

impl Stop {
    /// Announces the point and blocks this thread forever; only a signal ends the process.
    pub fn halt(&self) -> ! {
        announce(&self.marker, self.point.as_str());
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// Writes and syncs the marker file. A failure is printed: the parent then times out waiting
/// for the marker and reports the child's stderr.
fn announce(marker: &Path, text: &str) {
    let result = std::fs::write(marker, text).and_then(|()| std::fs::File::open(marker)?.sync_all());
    if let Err(e) = result {
        eprintln!("cannot write crash marker {}: {e}", marker.display());
    }
}

/// How to leave a commit half-done at [`CrashPoint::InCommit`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TornCommit {
    /// A JSONL session directory: the archive line is written, the boundary is not.
    Jsonl {
        /// The session's directory (`JsonlStore::session_dir`).
        session_dir: PathBuf,
    },
    /// A SQLite database file: the compaction rows are inserted in an open transaction.
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
}

/// A store wrapper that stops the process at a store-side [`CrashPoint`].
///
/// Appends are counted: a turn without tool calls makes two (its input, then the reply), so
/// [`CrashPoint::AfterInput`] stops after the first, [`CrashPoint::BeforeReply`] before the
/// second and [`CrashPoint::AfterReply`] after it.
#[derive(Debug)]
pub struct PausingStore<S> {
    inner: S,
    stop: Option<Stop>,
    torn: Option<TornCommit>,
    self_kill: Option<Duration>,
    appends: AtomicU64,
}

impl<S: SessionStore> PausingStore<S> {
    /// Wraps `inner`; with `stop` `None` it only forwards.
    pub fn new(inner: S, stop: Option<Stop>) -> Self {
        Self {
            inner,
            stop,
            torn: None,
            self_kill: None,
            appends: AtomicU64::new(0),
        }
    }

    /// How [`CrashPoint::InCommit`] tears the commit (required for that point).
    pub fn with_torn_commit(mut self, torn: TornCommit) -> Self {
        self.torn = Some(torn);
        self
    }

    /// When a commit starts, sends `SIGKILL` to this process after a random delay up to `max`,
    /// so the kill lands anywhere inside (or just after) a real commit.
    pub fn with_self_kill(mut self, max: Duration) -> Self {
        self.self_kill = Some(max);
        self
    }

    fn at(&self, point: CrashPoint) -> Option<&Stop> {
        self.stop.as_ref().filter(|s| s.point == point)
    }

    fn tear(&self, stop: &Stop, id: SessionId, meta: &CompactionMeta) -> Result<(), StoreError> {
        match &self.torn {
            Some(TornCommit::Sqlite { path }) => {
                let conn = rusqlite::Connection::open(path)?;
                conn.busy_timeout(Duration::from_secs(10))?;
                conn.execute_batch("BEGIN IMMEDIATE")?;
                let json = serde_json::to_string(&Entry::Compaction(Box::new(meta.clone())))?;
                conn.execute(
                    "INSERT INTO entries (session_id, seq, entry_id, kind, json) \
                     VALUES (?1, (SELECT log_len FROM sessions WHERE id = ?1), ?2, 'compaction', ?3)",
                    rusqlite::params![id.to_string(), meta.id.to_string(), json],
                )?;
                conn.execute(
                    "INSERT INTO compactions (session_id, generation, seq, idempotency_key, created_at) \
                     VALUES (?1, ?2, (SELECT log_len FROM sessions WHERE id = ?1), ?3, ?4)",
                    rusqlite::params![
                        id.to_string(),
                        meta.generation as i64,
                        meta.idempotency_key,
                        meta.created_at.to_rfc3339()
                    ],
                )?;
                // The transaction stays open: the process is killed before COMMIT.
                stop.halt()
            }
            Some(TornCommit::Jsonl { .. }) | None => Err(StoreError::InvalidRequest(
                "the in-commit crash point needs a torn-commit mode for this store".into(),
            )),
        }
    }
}

#[async_trait]
impl<S: SessionStore> SessionStore for PausingStore<S> {
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
        let n = self.appends.fetch_add(1, Ordering::SeqCst) + 1;
        if n == 2 {
            if let Some(stop) = self.at(CrashPoint::BeforeReply) {
                stop.halt();
            }
        }
        let outcome = self.inner.append(id, request).await?;
        let after = match n {
            1 => self.at(CrashPoint::AfterInput),
            2 => self.at(CrashPoint::AfterReply),
            _ => None,
        };
        if let Some(stop) = after {
            stop.halt();
        }
        Ok(outcome)
    }
    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError> {
        self.inner.load_view(id).await
    }
    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError> {
        self.inner.load_log(id).await
    }
    async fn commit_compaction(&self, id: SessionId, request: CommitRequest) -> Result<u64, StoreError> {
        if let Some(max) = self.self_kill {
            spawn_self_kill(max);
        }
        if let Some(stop) = self.at(CrashPoint::InCommit) {
            if let Some(TornCommit::Jsonl { session_dir }) = &self.torn {
                let boundary = session_dir.join("boundary.json");
                let before = std::fs::read(&boundary).ok();
                self.inner.commit_compaction(id, request).await?;
                restore(&boundary, before.as_deref())?;
                stop.halt();
            }
            self.tear(stop, id, &request.meta)?;
        }
        let generation = self.inner.commit_compaction(id, request).await?;
        if let Some(stop) = self.at(CrashPoint::AfterCommit) {
            stop.halt();
        }
        Ok(generation)
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
}

/// Puts a boundary file back as it was (absent when `bytes` is `None`), atomically.
fn restore(boundary: &Path, bytes: Option<&[u8]>) -> Result<(), StoreError> {
    let io = |e| StoreError::io(boundary.display(), e);
    match bytes {
        Some(bytes) => {
            let tmp = boundary.with_extension("json.restore");
            std::fs::write(&tmp, bytes).map_err(io)?;
            std::fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io)?;
            std::fs::rename(&tmp, boundary).map_err(io)?;
        }
        None => std::fs::remove_file(boundary).map_err(io)?,
    }
    if let Some(dir) = boundary.parent() {
        std::fs::File::open(dir).and_then(|f| f.sync_all()).map_err(io)?;
    }
    Ok(())
}

/// Sends `SIGKILL` to this process after a random delay up to `max`, from another thread.
fn spawn_self_kill(max: Duration) {
    let micros = rand::random::<u64>() % (max.as_micros() as u64).max(1);
    let pid = std::process::id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_micros(micros));
        if let Err(e) = std::process::Command::new("kill").args(["-KILL", &pid]).status() {
            eprintln!("cannot send SIGKILL to {pid}: {e}");
        }
    });
}

/// A summarizer wrapper that stops the process at [`CrashPoint::AfterSummary`].
pub struct PausingSummarizer {
    inner: Arc<dyn Summarizer>,
    stop: Option<Stop>,
}

impl PausingSummarizer {
    /// Wraps `inner`; stops after it returns a summary when `stop` names
    /// [`CrashPoint::AfterSummary`].
    pub fn new(inner: Arc<dyn Summarizer>, stop: Option<Stop>) -> Self {
        Self { inner, stop }
    }
}

impl std::fmt::Debug for PausingSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PausingSummarizer")
            .field("stop", &self.stop)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Summarizer for PausingSummarizer {
    fn strategy(&self) -> CompactionStrategy {
        self.inner.strategy()
    }

    async fn summarize(&self, job: SummaryJob) -> Result<SummaryOutput, CompactionError> {
        let output = self.inner.summarize(job).await?;
        if let Some(stop) = self.stop.as_ref().filter(|s| s.point == CrashPoint::AfterSummary) {
            stop.halt();
        }
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_points_round_trip_their_names() {
        for p in CrashPoint::ALL {
            assert_eq!(p.as_str().parse::<CrashPoint>(), Ok(p));
        }
        let err = "mid-air".parse::<CrashPoint>().err();
        assert_eq!(err, Some(UnknownCrashPoint("mid-air".into())));
    }
}
