//! An in-memory store.
//!
//! For tests, benchmarks and throwaway embedded sessions. Everything is lost when the store is
//! dropped. It implements the same semantics as the durable backends, including the generation
//! check and dedupe keys, behind one mutex per store.
//!
//! Each session keeps an index from entry id to log position and the position of the latest
//! compaction, so [`SessionStore::load_view`] clones only the entries the view holds (the retained
//! instructions and reminders and the tail) whatever the size of the archived history.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::Utc;
use pith_core::{CompactionMeta, Entry, SessionId, SessionRecord, StoredView};

use crate::common;
use crate::error::StoreError;
use crate::store::SessionStore;
use crate::types::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, RevisionExport, RevisionInfo,
    UsageRecord,
};

#[derive(Debug, Default)]
struct SessionData {
    record: Option<SessionRecord>,
    log: Vec<Entry>,
    /// Entry id → position in `log`.
    ids: HashMap<pith_core::EntryId, usize>,
    dedupe: HashSet<String>,
    breaker: BreakerState,
    usage: Vec<UsageRecord>,
    /// Position of the latest compaction record in `log`.
    latest_compaction: Option<usize>,
}

/// A store that keeps everything in process memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<SessionId, SessionData>>,
    last_load_rows: AtomicU64,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries cloned by the most recent `load_view` (see [`SessionStore::last_view_load_rows`]).
    pub fn last_load_rows(&self) -> u64 {
        self.last_load_rows.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, SessionData>> {
        // A panic while holding the lock cannot leave a half-applied operation: every operation
        // validates first and mutates last, so the data is consistent even if poisoned.
        match self.sessions.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

fn session_mut(
    map: &mut HashMap<SessionId, SessionData>,
    id: SessionId,
) -> Result<&mut SessionData, StoreError> {
    map.get_mut(&id)
        .filter(|s| s.record.is_some())
        .ok_or(StoreError::SessionNotFound(id))
}

fn record_of(data: &SessionData, id: SessionId) -> Result<SessionRecord, StoreError> {
    data.record.clone().ok_or(StoreError::SessionNotFound(id))
}

#[async_trait]
impl SessionStore for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn create_session(&self, request: CreateSession) -> Result<SessionRecord, StoreError> {
        let mut map = self.lock();
        if map.contains_key(&request.id) {
            return Err(StoreError::SessionExists(request.id));
        }
        let now = Utc::now();
        let record = SessionRecord {
            id: request.id,
            model: request.model,
            tools: request.tools,
            created_at: now,
            updated_at: now,
            generation: 0,
        };
        let log: Vec<Entry> = request.instructions.into_iter().map(Entry::Message).collect();
        let ids = log.iter().enumerate().map(|(i, e)| (e.id(), i)).collect();
        map.insert(
            request.id,
            SessionData {
                record: Some(record.clone()),
                log,
                ids,
                ..SessionData::default()
            },
        );
        Ok(record)
    }

    async fn get_session(&self, id: SessionId) -> Result<SessionRecord, StoreError> {
        let mut map = self.lock();
        record_of(session_mut(&mut map, id)?, id)
    }

    async fn update_session(&self, record: SessionRecord) -> Result<SessionRecord, StoreError> {
        let mut map = self.lock();
        let data = session_mut(&mut map, record.id)?;
        let current = record_of(data, record.id)?;
        let updated = SessionRecord {
            model: record.model,
            tools: record.tools,
            updated_at: Utc::now(),
            ..current
        };
        data.record = Some(updated.clone());
        Ok(updated)
    }

    async fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let map = self.lock();
        let mut out: Vec<SessionRecord> = map.values().filter_map(|d| d.record.clone()).collect();
        out.sort_by_key(|r| (r.created_at, r.id));
        Ok(out)
    }

    async fn append(&self, id: SessionId, request: AppendRequest) -> Result<AppendOutcome, StoreError> {
        common::validate_append(&request)?;
        let mut map = self.lock();
        let data = session_mut(&mut map, id)?;
        let len = data.log.len() as u64;
        if let Some(key) = &request.dedupe_key {
            if data.dedupe.contains(key) {
                return Ok(AppendOutcome {
                    len,
                    deduplicated: true,
                });
            }
        }
        if let Some(expected) = request.expected_len {
            if expected != len {
                return Err(StoreError::HeadMismatch {
                    session: id,
                    expected,
                    actual: len,
                });
            }
        }
        if let Some(dup) = request.entries.iter().find(|e| data.ids.contains_key(&e.id())) {
            return Err(StoreError::DuplicateEntry(dup.id()));
        }
        for e in request.entries {
            data.ids.insert(e.id(), data.log.len());
            data.log.push(e);
        }
        if let Some(key) = request.dedupe_key {
            data.dedupe.insert(key);
        }
        if let Some(r) = data.record.as_mut() {
            r.updated_at = Utc::now();
        }
        Ok(AppendOutcome {
            len: data.log.len() as u64,
            deduplicated: false,
        })
    }

    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError> {
        let mut map = self.lock();
        let data = session_mut(&mut map, id)?;
        let record = record_of(data, id)?;
        let log_len = data.log.len() as u64;
        let Some(meta) = data
            .latest_compaction
            .and_then(|p| data.log.get(p)?.as_compaction().cloned())
        else {
            self.last_load_rows.store(log_len, Ordering::Relaxed);
            return Ok(common::assemble_view(
                record,
                None,
                vec![],
                vec![],
                data.log.clone(),
                log_len,
            ));
        };
        let location = format!("memory session {id}");
        let pick = |ids: &[pith_core::EntryId]| -> Result<Vec<pith_core::Message>, StoreError> {
            let found = ids
                .iter()
                .filter_map(|i| Some((*i, data.log.get(*data.ids.get(i)?)?.as_message()?.clone())))
                .collect();
            common::pick_retained(ids, &found, &meta, &location)
        };
        let instructions = pick(&meta.retained_instructions)?;
        let reminders = pick(&meta.retained_reminders)?;
        let tail_from = match meta.tail_start {
            Some(t) => *data.ids.get(&t).ok_or_else(|| StoreError::Corrupt {
                location: location.clone(),
                reason: format!("compaction {} references entry {t} which is not stored", meta.id),
            })?,
            None => data.latest_compaction.unwrap_or(data.log.len()),
        };
        let tail: Vec<Entry> = data.log[tail_from..]
            .iter()
            .filter(|e| !matches!(e, Entry::Compaction(_)))
            .cloned()
            .collect();
        let rows = 1 + instructions.len() + reminders.len() + tail.len();
        self.last_load_rows.store(rows as u64, Ordering::Relaxed);
        Ok(common::assemble_view(
            record,
            Some(meta),
            instructions,
            reminders,
            tail,
            log_len,
        ))
    }

    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError> {
        let mut map = self.lock();
        Ok(session_mut(&mut map, id)?.log.clone())
    }

    async fn commit_compaction(&self, id: SessionId, request: CommitRequest) -> Result<u64, StoreError> {
        let mut map = self.lock();
        let data = session_mut(&mut map, id)?;
        let current = record_of(data, id)?.generation;
        common::validate_commit(id, current, &request)?;
        if data.ids.contains_key(&request.meta.id) {
            return Err(StoreError::DuplicateEntry(request.meta.id));
        }
        for r in common::referenced_ids(&request.meta) {
            let entry = data.ids.get(&r).and_then(|&p| data.log.get(p));
            let valid = match entry {
                Some(Entry::Message(_)) => true,
                Some(_) => Some(r) == request.meta.tail_start,
                None => false,
            };
            if !valid {
                return Err(common::missing_reference(&request.meta, r));
            }
        }
        let generation = request.meta.generation;
        data.ids.insert(request.meta.id, data.log.len());
        data.latest_compaction = Some(data.log.len());
        data.log.push(Entry::Compaction(Box::new(request.meta)));
        if let Some(r) = data.record.as_mut() {
            r.generation = generation;
            r.updated_at = Utc::now();
        }
        Ok(generation)
    }

    async fn find_compaction(&self, id: SessionId, key: &str) -> Result<Option<CompactionMeta>, StoreError> {
        let mut map = self.lock();
        let data = session_mut(&mut map, id)?;
        Ok(data
            .log
            .iter()
            .rev()
            .filter_map(Entry::as_compaction)
            .find(|c| c.idempotency_key == key)
            .cloned())
    }

    async fn breaker(&self, id: SessionId) -> Result<BreakerState, StoreError> {
        let mut map = self.lock();
        Ok(session_mut(&mut map, id)?.breaker.clone())
    }

    async fn set_breaker(&self, id: SessionId, state: BreakerState) -> Result<(), StoreError> {
        let mut map = self.lock();
        session_mut(&mut map, id)?.breaker = state;
        Ok(())
    }

    async fn record_usage(&self, id: SessionId, record: UsageRecord) -> Result<(), StoreError> {
        let mut map = self.lock();
        session_mut(&mut map, id)?.usage.push(record);
        Ok(())
    }

    async fn usage(&self, id: SessionId) -> Result<Vec<UsageRecord>, StoreError> {
        let mut map = self.lock();
        Ok(session_mut(&mut map, id)?.usage.clone())
    }

    async fn list_revisions(&self, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError> {
        let mut map = self.lock();
        let data = session_mut(&mut map, id)?;
        let record = record_of(data, id)?;
        Ok(common::revisions(&record, &data.log))
    }

    async fn export_revision(&self, id: SessionId, generation: u64) -> Result<RevisionExport, StoreError> {
        let mut map = self.lock();
        let data = session_mut(&mut map, id)?;
        let record = record_of(data, id)?;
        common::export_from_log(&record, &data.log, generation)
    }

    fn last_view_load_rows(&self) -> Option<u64> {
        Some(self.last_load_rows())
    }

    async fn delete_session(&self, id: SessionId) -> Result<(), StoreError> {
        let mut map = self.lock();
        map.remove(&id)
            .filter(|d| d.record.is_some())
            .map(|_| ())
            .ok_or(StoreError::SessionNotFound(id))
    }
}
