//! The SQL of each Postgres store operation.
//!
//! Writes lock the session row (`SELECT ... FOR UPDATE`) first: the generation check of a commit,
//! the head check and the position numbers of an append are then decided by one transaction at a
//! time per session, across every process sharing the database, so positions are gap-free and
//! never duplicated and exactly one of two racing commits wins.

use std::collections::HashMap;

use chrono::{DateTime, SecondsFormat, Utc};
use pith_core::{CompactionMeta, Entry, EntryId, Message, SessionId, SessionRecord, StoredView};
use tokio_postgres::{GenericClient, Transaction};
use uuid::Uuid;

use crate::common;
use crate::error::StoreError;
use crate::types::{AppendOutcome, AppendRequest, CommitRequest};

/// The session row's state.
pub struct Head {
    /// The record, with generation and `updated_at` from their columns.
    pub record: SessionRecord,
    /// Entries in the log.
    pub log_len: u64,
    /// Position of the latest compaction record.
    pub latest_seq: Option<u64>,
}

/// Formats a time so that it parses back to the same instant.
pub fn time_text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

fn corrupt(location: impl Into<String>, reason: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        location: location.into(),
        reason: reason.to_string(),
    }
}

/// Decodes a JSON column.
pub fn decode<T: serde::de::DeserializeOwned>(
    json: &str,
    location: impl Fn() -> String,
) -> Result<T, StoreError> {
    serde_json::from_str(json).map_err(|e| corrupt(location(), e))
}

/// Reads the session row (locking it when `for_update`), or `SessionNotFound`.
pub async fn head<C: GenericClient>(c: &C, id: SessionId, for_update: bool) -> Result<Head, StoreError> {
    let sql = if for_update {
        "SELECT record, updated_at, generation, log_len, latest_seq FROM pith_sessions WHERE id = $1 FOR UPDATE"
    } else {
        "SELECT record, updated_at, generation, log_len, latest_seq FROM pith_sessions WHERE id = $1"
    };
    let row = c
        .query_opt(sql, &[id.as_uuid()])
        .await?
        .ok_or(StoreError::SessionNotFound(id))?;
    let location = || format!("postgres pith_sessions {id}");
    let mut record: SessionRecord = decode(row.get(0), location)?;
    let updated_at: &str = row.get(1);
    record.updated_at = DateTime::parse_from_rfc3339(updated_at)
        .map_err(|e| corrupt(location(), e))?
        .with_timezone(&Utc);
    record.generation = row.get::<_, i64>(2) as u64;
    Ok(Head {
        record,
        log_len: row.get::<_, i64>(3) as u64,
        latest_seq: row.get::<_, Option<i64>>(4).map(|s| s as u64),
    })
}

/// Kinds of the stored entries among `ids`.
async fn kinds<C: GenericClient>(
    c: &C,
    id: SessionId,
    ids: &[EntryId],
) -> Result<HashMap<EntryId, String>, StoreError> {
    let uuids: Vec<Uuid> = ids.iter().map(|e| *e.as_uuid()).collect();
    let rows = c
        .query(
            "SELECT entry_id, kind FROM pith_entries WHERE session_id = $1 AND entry_id = ANY($2)",
            &[id.as_uuid(), &uuids],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (EntryId::from_uuid(r.get(0)), r.get::<_, String>(1)))
        .collect())
}

/// Inserts entries at consecutive positions from `start`, in one statement.
async fn insert_entries(
    tx: &Transaction<'_>,
    id: SessionId,
    start: u64,
    entries: &[Entry],
) -> Result<(), StoreError> {
    let mut seqs = Vec::with_capacity(entries.len());
    let mut ids = Vec::with_capacity(entries.len());
    let mut kinds = Vec::with_capacity(entries.len());
    let mut jsons = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        seqs.push((start + i as u64) as i64);
        ids.push(*e.id().as_uuid());
        kinds.push(e.kind().to_string());
        jsons.push(serde_json::to_string(e)?);
    }
    tx.execute(
        "INSERT INTO pith_entries (session_id, seq, entry_id, kind, json) \
         SELECT $1, s, e, k, j FROM unnest($2::bigint[], $3::uuid[], $4::text[], $5::text[]) AS t(s, e, k, j)",
        &[id.as_uuid(), &seqs, &ids, &kinds, &jsons],
    )
    .await?;
    Ok(())
}

async fn touch(tx: &Transaction<'_>, id: SessionId, log_len: u64) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE pith_sessions SET log_len = $2, updated_at = $3 WHERE id = $1",
        &[id.as_uuid(), &(log_len as i64), &time_text(Utc::now())],
    )
    .await?;
    Ok(())
}

/// Creates the session row and its instructions.
pub async fn create(
    tx: &Transaction<'_>,
    record: &SessionRecord,
    entries: &[Entry],
) -> Result<bool, StoreError> {
    let inserted = tx
        .execute(
            "INSERT INTO pith_sessions (id, record, created_at, updated_at, generation, log_len) \
             VALUES ($1, $2, $3, $3, 0, $4) ON CONFLICT (id) DO NOTHING",
            &[
                record.id.as_uuid(),
                &serde_json::to_string(record)?,
                &time_text(record.created_at),
                &(entries.len() as i64),
            ],
        )
        .await?;
    if inserted == 0 {
        return Ok(false);
    }
    insert_entries(tx, record.id, 0, entries).await?;
    Ok(true)
}

/// Appends a batch under the session row lock.
pub async fn append(
    tx: &Transaction<'_>,
    id: SessionId,
    request: &AppendRequest,
) -> Result<AppendOutcome, StoreError> {
    let len = head(tx, id, true).await?.log_len;
    if let Some(key) = &request.dedupe_key {
        let seen = tx
            .query_opt(
                "SELECT 1 FROM pith_dedupe_keys WHERE session_id = $1 AND key = $2",
                &[id.as_uuid(), key],
            )
            .await?;
        if seen.is_some() {
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
    let ids: Vec<EntryId> = request.entries.iter().map(Entry::id).collect();
    let existing = kinds(tx, id, &ids).await?;
    if let Some(dup) = ids.iter().find(|e| existing.contains_key(e)) {
        return Err(StoreError::DuplicateEntry(*dup));
    }
    insert_entries(tx, id, len, &request.entries).await?;
    if let Some(key) = &request.dedupe_key {
        tx.execute(
            "INSERT INTO pith_dedupe_keys (session_id, key) VALUES ($1, $2)",
            &[id.as_uuid(), key],
        )
        .await?;
    }
    let new_len = len + request.entries.len() as u64;
    touch(tx, id, new_len).await?;
    Ok(AppendOutcome {
        len: new_len,
        deduplicated: false,
    })
}

/// Commits a compaction under the session row lock, checking the generation.
pub async fn commit(tx: &Transaction<'_>, id: SessionId, request: &CommitRequest) -> Result<u64, StoreError> {
    let head = head(tx, id, true).await?;
    common::validate_commit(id, head.record.generation, request)?;
    let meta = &request.meta;
    let mut wanted: Vec<EntryId> = common::referenced_ids(meta).collect();
    wanted.push(meta.id);
    let found = kinds(tx, id, &wanted).await?;
    if found.contains_key(&meta.id) {
        return Err(StoreError::DuplicateEntry(meta.id));
    }
    for r in common::referenced_ids(meta) {
        let ok = match found.get(&r).map(String::as_str) {
            Some("message") => true,
            Some(_) => Some(r) == meta.tail_start,
            None => false,
        };
        if !ok {
            return Err(common::missing_reference(meta, r));
        }
    }
    let seq = head.log_len;
    insert_entries(
        tx,
        id,
        seq,
        std::slice::from_ref(&Entry::Compaction(Box::new(meta.clone()))),
    )
    .await?;
    tx.execute(
        "INSERT INTO pith_compactions (session_id, generation, seq, idempotency_key, created_at) \
         VALUES ($1, $2, $3, $4, $5)",
        &[
            id.as_uuid(),
            &(meta.generation as i64),
            &(seq as i64),
            &meta.idempotency_key,
            &time_text(meta.created_at),
        ],
    )
    .await?;
    tx.execute(
        "UPDATE pith_sessions SET generation = $2, latest_seq = $3 WHERE id = $1",
        &[id.as_uuid(), &(meta.generation as i64), &(seq as i64)],
    )
    .await?;
    touch(tx, id, seq + 1).await?;
    Ok(meta.generation)
}

/// Entries with `from <= seq < to`, in order, optionally without compaction records.
pub async fn entries_between<C: GenericClient>(
    c: &C,
    id: SessionId,
    from: u64,
    to: u64,
    skip_compactions: bool,
) -> Result<Vec<Entry>, StoreError> {
    let rows = c
        .query(
            "SELECT seq, json FROM pith_entries WHERE session_id = $1 AND seq >= $2 AND seq < $3 \
             AND (NOT $4 OR kind <> 'compaction') ORDER BY seq",
            &[id.as_uuid(), &(from as i64), &(to as i64), &skip_compactions],
        )
        .await?;
    rows.iter()
        .map(|r| {
            decode(r.get(1), || {
                format!("postgres pith_entries {id} seq {}", r.get::<_, i64>(0))
            })
        })
        .collect()
}

/// Loads the view from the latest compaction, its retained entries and the tail; returns the
/// view and the number of rows read.
pub async fn load_view<C: GenericClient>(c: &C, id: SessionId) -> Result<(StoredView, u64), StoreError> {
    let head = head(c, id, false).await?;
    let Some(latest) = head.latest_seq else {
        let tail = entries_between(c, id, 0, head.log_len, false).await?;
        let rows = 1 + tail.len() as u64;
        return Ok((
            common::assemble_view(head.record, None, vec![], vec![], tail, head.log_len),
            rows,
        ));
    };
    let location = format!("postgres pith_entries {id}");
    let row = c
        .query_opt(
            "SELECT json FROM pith_entries WHERE session_id = $1 AND seq = $2",
            &[id.as_uuid(), &(latest as i64)],
        )
        .await?
        .ok_or_else(|| corrupt(location.clone(), format!("no entry at seq {latest}")))?;
    let meta: CompactionMeta = match decode(row.get(0), || format!("{location} seq {latest}"))? {
        Entry::Compaction(m) => *m,
        other => {
            return Err(corrupt(
                location,
                format!("seq {latest} holds a {}", other.kind()),
            ))
        }
    };
    let mut rows_read = 2u64;
    let retained: Vec<Uuid> = meta
        .retained_instructions
        .iter()
        .chain(&meta.retained_reminders)
        .map(|e| *e.as_uuid())
        .collect();
    let mut found: HashMap<EntryId, Message> = HashMap::new();
    if !retained.is_empty() {
        let rows = c
            .query(
                "SELECT json FROM pith_entries WHERE session_id = $1 AND entry_id = ANY($2)",
                &[id.as_uuid(), &retained],
            )
            .await?;
        rows_read += rows.len() as u64;
        for r in &rows {
            if let Entry::Message(m) = decode(r.get(0), || location.clone())? {
                found.insert(m.id, m);
            }
        }
    }
    let instructions = common::pick_retained(&meta.retained_instructions, &found, &meta, &location)?;
    let reminders = common::pick_retained(&meta.retained_reminders, &found, &meta, &location)?;
    let tail_from = match meta.tail_start {
        Some(t) => {
            rows_read += 1;
            let row = c
                .query_opt(
                    "SELECT seq FROM pith_entries WHERE session_id = $1 AND entry_id = $2",
                    &[id.as_uuid(), t.as_uuid()],
                )
                .await?
                .ok_or_else(|| {
                    corrupt(
                        location.clone(),
                        format!("compaction {} references entry {t} which is not stored", meta.id),
                    )
                })?;
            row.get::<_, i64>(0) as u64
        }
        None => latest,
    };
    let tail = entries_between(c, id, tail_from, head.log_len, true).await?;
    rows_read += tail.len() as u64;
    let view = common::assemble_view(
        head.record,
        Some(meta),
        instructions,
        reminders,
        tail,
        head.log_len,
    );
    Ok((view, rows_read))
}

/// Position and commit time of each compaction, generation 1 first.
pub async fn commits<C: GenericClient>(
    c: &C,
    id: SessionId,
) -> Result<Vec<(u64, DateTime<Utc>)>, StoreError> {
    let rows = c
        .query(
            "SELECT seq, created_at FROM pith_compactions WHERE session_id = $1 ORDER BY generation",
            &[id.as_uuid()],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let at: &str = r.get(1);
            let at = DateTime::parse_from_rfc3339(at)
                .map_err(|e| corrupt(format!("postgres pith_compactions {id}"), e))?
                .with_timezone(&Utc);
            Ok((r.get::<_, i64>(0) as u64, at))
        })
        .collect()
}

/// Finds the latest compaction with this idempotency key.
pub async fn find_compaction<C: GenericClient>(
    c: &C,
    id: SessionId,
    key: &str,
) -> Result<Option<CompactionMeta>, StoreError> {
    head(c, id, false).await?;
    let row = c
        .query_opt(
            "SELECT e.json FROM pith_compactions c JOIN pith_entries e \
             ON e.session_id = c.session_id AND e.seq = c.seq \
             WHERE c.session_id = $1 AND c.idempotency_key = $2 ORDER BY c.generation DESC LIMIT 1",
            &[id.as_uuid(), &key],
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    match decode(row.get(0), || format!("postgres pith_entries {id}"))? {
        Entry::Compaction(m) => Ok(Some(*m)),
        other => Err(corrupt(
            format!("postgres pith_entries {id}"),
            format!("index points at a {}", other.kind()),
        )),
    }
}

/// Deletes every row of a session.
pub async fn delete(tx: &Transaction<'_>, id: SessionId) -> Result<(), StoreError> {
    head(tx, id, true).await?;
    for sql in [
        "DELETE FROM pith_entries WHERE session_id = $1",
        "DELETE FROM pith_dedupe_keys WHERE session_id = $1",
        "DELETE FROM pith_compactions WHERE session_id = $1",
        "DELETE FROM pith_breakers WHERE session_id = $1",
        "DELETE FROM pith_usage WHERE session_id = $1",
        "DELETE FROM pith_sessions WHERE id = $1",
    ] {
        tx.execute(sql, &[id.as_uuid()]).await?;
    }
    Ok(())
}
