//! An in-memory store.
//!
//! For tests, benchmarks and throwaway embedded sessions. Everything is lost when the store is
//! dropped. It implements the same semantics as the durable backends, including the generation
//! check and dedupe keys, behind one mutex per store.
//!
//! Each session keeps an index from entry id to log position and the position of the latest
//! compaction, so [`SessionStore::load_view`] clones only the entries the view holds (the retained
//! instructions and reminders and the tail) whatever the size of the archived history. When a
//! compaction commits, the entries no view reads any more are kept as their JSON (see
//! [`slot`]), so a long-running session's history costs a fraction of its size as values.

mod slot;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::Utc;
use pith_core::{CompactionMeta, Entry, SessionId, SessionRecord, StoredView};
use slot::Slot;

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
    log: Vec<Slot>,
    /// Positions below this one were considered for the archive at the latest commit.
    archived_below: usize,
    /// Entry id → position in `log`.
    ids: HashMap<pith_core::EntryId, usize>,
    /// Digests of the dedupe keys seen ([`key_digest`]): 16 bytes each whatever the key's length.
    dedupe: HashSet<[u8; 16]>,
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

    /// Entries of the session's log kept as JSON because no view reads them any more (the
    /// history before the latest compaction's tail that it does not retain); `None` for an
    /// unknown session. The rest of the log is kept as values.
    pub fn archived_entries(&self, id: SessionId) -> Option<u64> {
        let map = self.lock();
        let data = map.get(&id).filter(|d| d.record.is_some())?;
        Some(data.log.iter().filter(|s| s.is_archived()).count() as u64)
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
        let ids = request
            .instructions
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id, i))
            .collect();
        let log = request
            .instructions
            .into_iter()
            .map(|m| Slot::live(Entry::Message(m)))
            .collect();
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
        let digest = request.dedupe_key.as_deref().map(key_digest);
        if let Some(key) = &digest {
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
            data.log.push(Slot::live(e));
        }
        if let Some(key) = digest {
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
        let location = format!("memory session {id}");
        let Some(meta) = data
            .latest_compaction
            .and_then(|p| data.log.get(p)?.as_compaction().cloned())
        else {
            self.last_load_rows.store(log_len, Ordering::Relaxed);
            let log = slot::decode_all(&data.log, &location)?;
            return Ok(common::assemble_view(record, None, vec![], vec![], log, log_len));
        };
        let pick = |ids: &[pith_core::EntryId]| -> Result<Vec<pith_core::Message>, StoreError> {
            let mut found = HashMap::with_capacity(ids.len());
            for i in ids {
                let Some(slot) = data.ids.get(i).and_then(|&p| data.log.get(p)) else {
                    continue;
                };
                if let Entry::Message(m) = slot.entry(&location)?.into_owned() {
                    found.insert(*i, m);
                }
            }
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
        let mut tail = Vec::with_capacity(data.log.len().saturating_sub(tail_from));
        for slot in data.log.get(tail_from..).unwrap_or_default() {
            if slot.as_compaction().is_none() {
                tail.push(slot.entry(&location)?.into_owned());
            }
        }
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
        slot::decode_all(&session_mut(&mut map, id)?.log, &format!("memory session {id}"))
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
            let valid = match data.ids.get(&r).and_then(|&p| data.log.get(p)) {
                Some(slot) if slot.is_message() => true,
                Some(_) => Some(r) == request.meta.tail_start,
                None => false,
            };
            if !valid {
                return Err(common::missing_reference(&request.meta, r));
            }
        }
        let generation = request.meta.generation;
        let position = data.log.len();
        archive_before_tail(data, &request.meta, position);
        data.ids.insert(request.meta.id, position);
        data.latest_compaction = Some(position);
        data.log
            .push(Slot::live(Entry::Compaction(Box::new(request.meta))));
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
            .filter_map(Slot::as_compaction)
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
        let commits: Vec<(u64, chrono::DateTime<Utc>)> = data
            .log
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_compaction().map(|m| (i as u64, m.created_at)))
            .collect();
        Ok(common::revisions_from_commits(
            &record,
            &commits,
            data.log.len() as u64,
        ))
    }

    async fn export_revision(&self, id: SessionId, generation: u64) -> Result<RevisionExport, StoreError> {
        let mut map = self.lock();
        let data = session_mut(&mut map, id)?;
        let record = record_of(data, id)?;
        let log = slot::decode_all(&data.log, &format!("memory session {id}"))?;
        common::export_from_log(&record, &log, generation)
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

/// Archives what no view reads once `meta` commits at `position`: the entries before its tail
/// that it does not retain, from where the previous commit stopped.
fn archive_before_tail(data: &mut SessionData, meta: &CompactionMeta, position: usize) {
    let tail_from = meta
        .tail_start
        .and_then(|t| data.ids.get(&t).copied())
        .unwrap_or(position);
    let retained: HashSet<pith_core::EntryId> = common::referenced_ids(meta).collect();
    let from = data.archived_below.min(tail_from);
    for slot in data.log.get_mut(from..tail_from).unwrap_or_default() {
        let kept = match slot {
            Slot::Live(e) => retained.contains(&e.id()),
            Slot::ArchivedMessage(_) | Slot::ArchivedOther(_) => true,
        };
        if !kept {
            slot.archive();
        }
    }
    data.archived_below = data.archived_below.max(tail_from);
}

/// The first 128 bits of the key's SHA-256: two different keys collide with a probability of
/// about 2^-128 per pair, far below any hardware error rate, so the set can hold digests instead
/// of the keys (a runtime's keys are 40-60 bytes each, three per turn).
fn key_digest(key: &str) -> [u8; 16] {
    use sha2::{Digest, Sha256};
    let full = Sha256::digest(key.as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}
