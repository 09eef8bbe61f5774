//! The SQLite store: the embedded default.
//!
//! One database file holds every session. Durability model:
//!
//! - The journal is WAL and `synchronous=FULL`: a call that returned `Ok` has its transaction
//!   fsynced to the WAL, so it survives a process crash and a power loss.
//! - Every write is one transaction. An append (any number of entries) is one IMMEDIATE
//!   transaction: all of its entries are stored or none. A compaction commit reads the session's
//!   generation and writes the record inside one IMMEDIATE transaction, so the generation check
//!   holds against other tasks and other processes opening the same file.
//! - The schema is versioned by `PRAGMA user_version`, migrated on open (see [`schema`]).
//!
//! Tables: `sessions` (record JSON, generation, log length, position of the latest compaction),
//! `entries` (session, position, entry id unique per session, kind, JSON), `dedupe_keys`,
//! `compactions` (an index: session, generation, position, idempotency key), `breakers` and
//! `usage`. Loading a view reads the session row, the latest compaction, the entries it retains
//! by id and the entries from its tail start on: never the archived history.
//!
//! SQLite calls are blocking; each operation runs on tokio's blocking pool with the store's one
//! connection behind a mutex (SQLite serialises writers anyway).

pub mod ops;
pub mod schema;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::Utc;
use pith_core::{CompactionMeta, Entry, SessionId, SessionRecord, StoredView};
use rusqlite::{params, Connection};

use crate::common;
use crate::error::StoreError;
use crate::store::SessionStore;
use crate::types::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, RevisionExport, RevisionInfo,
    UsageRecord,
};
use ops::{decode, head, time_text, write_tx};

/// A session store in one SQLite file (or in memory).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    path: Option<PathBuf>,
    last_load_rows: Arc<AtomicU64>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates it to the current schema.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let p = path.clone();
        let conn = tokio::task::spawn_blocking(move || -> Result<Connection, StoreError> {
            let mut conn = Connection::open(&p)?;
            schema::configure(&conn, false)?;
            schema::migrate(&mut conn)?;
            Ok(conn)
        })
        .await??;
        Ok(Self::from_connection(conn, Some(path)))
    }

    /// A private in-memory database (for tests and throwaway sessions); gone when dropped.
    pub async fn open_in_memory() -> Result<Self, StoreError> {
        let conn = tokio::task::spawn_blocking(move || -> Result<Connection, StoreError> {
            let mut conn = Connection::open_in_memory()?;
            schema::configure(&conn, true)?;
            schema::migrate(&mut conn)?;
            Ok(conn)
        })
        .await??;
        Ok(Self::from_connection(conn, None))
    }

    fn from_connection(conn: Connection, path: Option<PathBuf>) -> Self {
        Self {
            conn: Arc::new(Mutex::new(conn)),
            path,
            last_load_rows: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The database file, or `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Rows read by the most recent `load_view` (see [`SessionStore::last_view_load_rows`]).
    pub fn last_load_rows(&self) -> u64 {
        self.last_load_rows.load(Ordering::Relaxed)
    }

    /// Counts the rows a session has in every table (for tests of deletion).
    pub async fn row_counts(&self, id: SessionId) -> Result<u64, StoreError> {
        self.run("row_counts", move |conn| {
            let sid = id.to_string();
            let mut total = 0u64;
            for (table, column) in [
                ("sessions", "id"),
                ("entries", "session_id"),
                ("dedupe_keys", "session_id"),
                ("compactions", "session_id"),
                ("breakers", "session_id"),
                ("usage", "session_id"),
            ] {
                // Names come from the fixed list above; the id is a parameter.
                let n: i64 = conn.query_row(
                    &format!("SELECT count(*) FROM {table} WHERE {column} = ?1"),
                    params![sid],
                    |r| r.get(0),
                )?;
                total += n as u64;
            }
            Ok(total)
        })
        .await
    }

    /// Runs a blocking operation on the connection.
    async fn run<T, F>(&self, op: &'static str, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        let span = tracing::debug_span!("store.op", backend = "sqlite", op);
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            // A panic inside an operation rolls its transaction back (the transaction guard is
            // dropped during unwinding), so a poisoned connection is still consistent.
            let mut guard = match conn.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            f(&mut guard)
        })
        .await?
    }
}

fn check_exists(conn: &Connection, id: SessionId) -> Result<(), StoreError> {
    head(conn, id).map(|_| ())
}

#[async_trait]
impl SessionStore for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn create_session(&self, request: CreateSession) -> Result<SessionRecord, StoreError> {
        self.run("create_session", move |conn| {
            let tx = write_tx(conn)?;
            let id = request.id;
            let exists = tx
                .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
                .exists(params![id.to_string()])?;
            if exists {
                return Err(StoreError::SessionExists(id));
            }
            let now = Utc::now();
            let record = SessionRecord {
                id,
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
            tx.execute(
                "INSERT INTO sessions (id, record, created_at, updated_at, generation, log_len) \
                 VALUES (?1, ?2, ?3, ?3, 0, ?4)",
                params![
                    id.to_string(),
                    serde_json::to_string(&record)?,
                    time_text(now),
                    entries.len() as i64
                ],
            )?;
            ops::insert_entries(&tx, id, 0, &entries)?;
            tx.commit()?;
            Ok(record)
        })
        .await
    }

    async fn get_session(&self, id: SessionId) -> Result<SessionRecord, StoreError> {
        self.run("get_session", move |conn| Ok(head(conn, id)?.record))
            .await
    }

    async fn update_session(&self, record: SessionRecord) -> Result<SessionRecord, StoreError> {
        self.run("update_session", move |conn| {
            let tx = write_tx(conn)?;
            let current = head(&tx, record.id)?.record;
            let updated = SessionRecord {
                model: record.model,
                tools: record.tools,
                updated_at: Utc::now(),
                ..current
            };
            tx.execute(
                "UPDATE sessions SET record = ?2, updated_at = ?3 WHERE id = ?1",
                params![
                    updated.id.to_string(),
                    serde_json::to_string(&updated)?,
                    time_text(updated.updated_at)
                ],
            )?;
            tx.commit()?;
            Ok(updated)
        })
        .await
    }

    async fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        self.run("list_sessions", move |conn| {
            let tx = conn.transaction()?;
            let ids: Vec<String> = {
                let mut stmt = tx.prepare_cached("SELECT id FROM sessions")?;
                let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
                rows.collect::<Result<_, _>>()?
            };
            let mut out = Vec::with_capacity(ids.len());
            for sid in ids {
                let id: SessionId =
                    sid.parse()
                        .map_err(|e: pith_core::IdParseError| StoreError::Corrupt {
                            location: "sqlite sessions".into(),
                            reason: e.to_string(),
                        })?;
                out.push(head(&tx, id)?.record);
            }
            out.sort_by_key(|r| (r.created_at, r.id));
            Ok(out)
        })
        .await
    }

    async fn append(&self, id: SessionId, request: AppendRequest) -> Result<AppendOutcome, StoreError> {
        common::validate_append(&request)?;
        self.run("append", move |conn| ops::append(conn, id, &request))
            .await
    }

    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError> {
        let counter = Arc::clone(&self.last_load_rows);
        self.run("load_view", move |conn| {
            let (view, rows) = ops::load_view(conn, id)?;
            counter.store(rows, Ordering::Relaxed);
            Ok(view)
        })
        .await
    }

    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError> {
        self.run("load_log", move |conn| {
            let tx = conn.transaction()?;
            let len = head(&tx, id)?.log_len;
            ops::entries_between(&tx, id, 0, len, false)
        })
        .await
    }

    async fn commit_compaction(&self, id: SessionId, request: CommitRequest) -> Result<u64, StoreError> {
        self.run("commit_compaction", move |conn| ops::commit(conn, id, &request))
            .await
    }

    async fn find_compaction(&self, id: SessionId, key: &str) -> Result<Option<CompactionMeta>, StoreError> {
        let key = key.to_string();
        self.run("find_compaction", move |conn| {
            ops::find_compaction(conn, id, &key)
        })
        .await
    }

    async fn breaker(&self, id: SessionId) -> Result<BreakerState, StoreError> {
        self.run("breaker", move |conn| {
            let tx = conn.transaction()?;
            check_exists(&tx, id)?;
            let json: Option<String> = rusqlite::OptionalExtension::optional(
                tx.prepare_cached("SELECT state FROM breakers WHERE session_id = ?1")?
                    .query_row(params![id.to_string()], |r| r.get(0)),
            )?;
            match json {
                Some(j) => decode(&j, || format!("sqlite breakers {id}")),
                None => Ok(BreakerState::default()),
            }
        })
        .await
    }

    async fn set_breaker(&self, id: SessionId, state: BreakerState) -> Result<(), StoreError> {
        self.run("set_breaker", move |conn| {
            let tx = write_tx(conn)?;
            check_exists(&tx, id)?;
            tx.execute(
                "INSERT INTO breakers (session_id, state) VALUES (?1, ?2) \
                 ON CONFLICT (session_id) DO UPDATE SET state = excluded.state",
                params![id.to_string(), serde_json::to_string(&state)?],
            )?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn record_usage(&self, id: SessionId, record: UsageRecord) -> Result<(), StoreError> {
        self.run("record_usage", move |conn| {
            let tx = write_tx(conn)?;
            check_exists(&tx, id)?;
            tx.execute(
                "INSERT INTO usage (session_id, seq, record) VALUES (?1, \
                 (SELECT coalesce(max(seq) + 1, 0) FROM usage WHERE session_id = ?1), ?2)",
                params![id.to_string(), serde_json::to_string(&record)?],
            )?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn usage(&self, id: SessionId) -> Result<Vec<UsageRecord>, StoreError> {
        self.run("usage", move |conn| {
            let tx = conn.transaction()?;
            check_exists(&tx, id)?;
            let mut stmt =
                tx.prepare_cached("SELECT seq, record FROM usage WHERE session_id = ?1 ORDER BY seq")?;
            let rows = stmt.query_map(params![id.to_string()], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, json) = row?;
                out.push(decode(&json, || format!("sqlite usage {id} seq {seq}"))?);
            }
            Ok(out)
        })
        .await
    }

    async fn list_revisions(&self, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError> {
        self.run("list_revisions", move |conn| ops::revisions(conn, id))
            .await
    }

    async fn export_revision(&self, id: SessionId, generation: u64) -> Result<RevisionExport, StoreError> {
        self.run("export_revision", move |conn| ops::export(conn, id, generation))
            .await
    }

    async fn delete_session(&self, id: SessionId) -> Result<(), StoreError> {
        self.run("delete_session", move |conn| ops::delete(conn, id))
            .await
    }

    fn last_view_load_rows(&self) -> Option<u64> {
        Some(self.last_load_rows())
    }
}
