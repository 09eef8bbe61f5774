//! The Postgres store: for many runtime processes sharing sessions.
//!
//! Durability model: every operation is one transaction, committed before the call returns
//! (with the server's own durability settings: `synchronous_commit` and `fsync`). Concurrency
//! model: every write locks the session row with `SELECT ... FOR UPDATE` first, so the generation
//! check of a compaction commit, the head check of an append and the positions of appended
//! entries are decided by one transaction at a time per session across all processes: two
//! processes committing on the same generation produce exactly one commit, and appends racing a
//! commit are serialised with it, never lost, with gap-free positions. Views are read in one
//! REPEATABLE READ, read-only transaction, so they are a consistent snapshot.
//!
//! The schema (tables prefixed `pith_`) is migrated on [`PostgresStore::connect`] under an
//! advisory lock (see [`schema`]). Loading a view reads the session row, the latest compaction,
//! the entries it retains by id and the entries from its tail start on.

pub mod ops;
pub mod schema;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use pith_core::{CompactionMeta, Entry, SessionId, SessionRecord, StoredView};
use tokio_postgres::{IsolationLevel, NoTls};

use crate::common;
use crate::error::StoreError;
use crate::store::SessionStore;
use crate::types::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, RevisionExport, RevisionInfo,
    UsageRecord,
};
use ops::{decode, head};

/// A session store in a Postgres database, shared safely by many processes.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    last_load_rows: Arc<AtomicU64>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The pool's configuration holds the password; show only its size.
        f.debug_struct("PostgresStore")
            .field("pool_size", &self.pool.status().max_size)
            .finish()
    }
}

impl PostgresStore {
    /// Connects with a pool of up to 8 connections and migrates the schema.
    ///
    /// `url` is a libpq-style URL or key/value string, e.g.
    /// `postgres://user:password@127.0.0.1:5432/pith`. TLS is not used.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with_pool_size(url, 8).await
    }

    /// Connects with a pool of up to `max_size` connections and migrates the schema.
    pub async fn connect_with_pool_size(url: &str, max_size: usize) -> Result<Self, StoreError> {
        let config: tokio_postgres::Config = url.parse()?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(max_size.max(1))
            .build()
            .map_err(|e| StoreError::Backend(format!("cannot build the postgres pool: {e}")))?;
        let mut client = pool.get().await?;
        schema::migrate(&mut client).await?;
        Ok(Self {
            pool,
            last_load_rows: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Rows read by the most recent `load_view` (see [`SessionStore::last_view_load_rows`]).
    pub fn last_load_rows(&self) -> u64 {
        self.last_load_rows.load(Ordering::Relaxed)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }
}

macro_rules! in_tx {
    ($self:ident, $op:literal, |$tx:ident| $body:expr) => {{
        tracing::trace!(backend = "postgres", op = $op, "store.op");
        let mut client = $self.client().await?;
        let $tx = client.transaction().await?;
        let out = $body;
        $tx.commit().await?;
        Ok::<_, StoreError>(out)
    }};
}

macro_rules! in_snapshot {
    ($self:ident, |$tx:ident| $body:expr) => {{
        let mut client = $self.client().await?;
        let $tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let out = $body;
        $tx.commit().await?;
        Ok::<_, StoreError>(out)
    }};
}

#[async_trait]
impl SessionStore for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn create_session(&self, request: CreateSession) -> Result<SessionRecord, StoreError> {
        let now = Utc::now();
        let record = SessionRecord {
            id: request.id,
            model: request.model,
            tools: request.tools,
            created_at: now,
            updated_at: now,
            generation: 0,
        };
        let entries: Vec<Entry> = request.instructions.into_iter().map(Entry::Message).collect();
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = entries.iter().find(|e| !seen.insert(e.id())) {
            return Err(StoreError::DuplicateEntry(dup.id()));
        }
        in_tx!(self, "create_session", |tx| {
            if !ops::create(&tx, &record, &entries).await? {
                return Err(StoreError::SessionExists(record.id));
            }
            record
        })
    }

    async fn get_session(&self, id: SessionId) -> Result<SessionRecord, StoreError> {
        let client = self.client().await?;
        Ok(head(&**client, id, false).await?.record)
    }

    async fn update_session(&self, record: SessionRecord) -> Result<SessionRecord, StoreError> {
        in_tx!(self, "update_session", |tx| {
            let current = head(&*tx, record.id, true).await?.record;
            let updated = SessionRecord {
                model: record.model,
                tools: record.tools,
                updated_at: Utc::now(),
                ..current
            };
            tx.execute(
                "UPDATE pith_sessions SET record = $2, updated_at = $3 WHERE id = $1",
                &[
                    updated.id.as_uuid(),
                    &serde_json::to_string(&updated)?,
                    &ops::time_text(updated.updated_at),
                ],
            )
            .await?;
            updated
        })
    }

    async fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        in_snapshot!(self, |tx| {
            let rows = tx.query("SELECT id FROM pith_sessions", &[]).await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                out.push(head(&*tx, SessionId::from_uuid(r.get(0)), false).await?.record);
            }
            out.sort_by_key(|r| (r.created_at, r.id));
            out
        })
    }

    async fn append(&self, id: SessionId, request: AppendRequest) -> Result<AppendOutcome, StoreError> {
        common::validate_append(&request)?;
        in_tx!(self, "append", |tx| ops::append(&tx, id, &request).await?)
    }

    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError> {
        let (view, rows) = in_snapshot!(self, |tx| ops::load_view(&*tx, id).await?)?;
        self.last_load_rows.store(rows, Ordering::Relaxed);
        Ok(view)
    }

    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError> {
        in_snapshot!(self, |tx| {
            let len = head(&*tx, id, false).await?.log_len;
            ops::entries_between(&*tx, id, 0, len, false).await?
        })
    }

    async fn commit_compaction(&self, id: SessionId, request: CommitRequest) -> Result<u64, StoreError> {
        in_tx!(self, "commit_compaction", |tx| ops::commit(&tx, id, &request)
            .await?)
    }

    async fn find_compaction(&self, id: SessionId, key: &str) -> Result<Option<CompactionMeta>, StoreError> {
        in_snapshot!(self, |tx| ops::find_compaction(&*tx, id, key).await?)
    }

    async fn breaker(&self, id: SessionId) -> Result<BreakerState, StoreError> {
        in_snapshot!(self, |tx| {
            head(&*tx, id, false).await?;
            let row = tx
                .query_opt(
                    "SELECT state FROM pith_breakers WHERE session_id = $1",
                    &[id.as_uuid()],
                )
                .await?;
            match row {
                Some(r) => decode(r.get(0), || format!("postgres pith_breakers {id}"))?,
                None => BreakerState::default(),
            }
        })
    }

    async fn set_breaker(&self, id: SessionId, state: BreakerState) -> Result<(), StoreError> {
        in_tx!(self, "set_breaker", |tx| {
            head(&*tx, id, true).await?;
            tx.execute(
                "INSERT INTO pith_breakers (session_id, state) VALUES ($1, $2) \
                 ON CONFLICT (session_id) DO UPDATE SET state = excluded.state",
                &[id.as_uuid(), &serde_json::to_string(&state)?],
            )
            .await?;
        })
    }

    async fn record_usage(&self, id: SessionId, record: UsageRecord) -> Result<(), StoreError> {
        in_tx!(self, "record_usage", |tx| {
            // The row lock also serialises the position numbers of the ledger.
            head(&*tx, id, true).await?;
            tx.execute(
                "INSERT INTO pith_usage (session_id, seq, record) VALUES ($1, \
                 (SELECT coalesce(max(seq) + 1, 0) FROM pith_usage WHERE session_id = $1), $2)",
                &[id.as_uuid(), &serde_json::to_string(&record)?],
            )
            .await?;
        })
    }

    async fn usage(&self, id: SessionId) -> Result<Vec<UsageRecord>, StoreError> {
        in_snapshot!(self, |tx| {
            head(&*tx, id, false).await?;
            let rows = tx
                .query(
                    "SELECT seq, record FROM pith_usage WHERE session_id = $1 ORDER BY seq",
                    &[id.as_uuid()],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    decode(r.get(1), || {
                        format!("postgres pith_usage {id} seq {}", r.get::<_, i64>(0))
                    })
                })
                .collect::<Result<Vec<UsageRecord>, StoreError>>()?
        })
    }

    async fn list_revisions(&self, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError> {
        in_snapshot!(self, |tx| {
            let head = head(&*tx, id, false).await?;
            let commits = ops::commits(&*tx, id).await?;
            common::revisions_from_commits(&head.record, &commits, head.log_len)
        })
    }

    async fn export_revision(&self, id: SessionId, generation: u64) -> Result<RevisionExport, StoreError> {
        let (record, prefix) = in_snapshot!(self, |tx| {
            let head = head(&*tx, id, false).await?;
            let commits = ops::commits(&*tx, id).await?;
            let latest = commits.len() as u64;
            if generation > latest {
                return Err(StoreError::RevisionNotFound {
                    session: id,
                    generation,
                    latest,
                });
            }
            let end = commits.get(generation as usize).map_or(head.log_len, |c| c.0);
            (head.record, ops::entries_between(&*tx, id, 0, end, false).await?)
        })?;
        common::export_from_log(&record, &prefix, generation)
    }

    async fn delete_session(&self, id: SessionId) -> Result<(), StoreError> {
        in_tx!(self, "delete_session", |tx| ops::delete(&tx, id).await?)
    }

    fn last_view_load_rows(&self) -> Option<u64> {
        Some(self.last_load_rows())
    }
}
