//! The blocking SQL of each store operation, run on the store's connection.
//!
//! Every function here runs inside `spawn_blocking` with the connection's mutex held. Writes use
//! IMMEDIATE transactions, so the read of the session row (generation, log length) and the writes
//! that depend on it happen under SQLite's write lock, also against other processes.

use std::collections::HashMap;

use chrono::{DateTime, SecondsFormat, Utc};
use pith_core::{CompactionMeta, Entry, EntryId, Message, SessionId, SessionRecord, StoredView};
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::common;
use crate::error::StoreError;
use crate::types::{AppendOutcome, AppendRequest, CommitRequest, RevisionExport, RevisionInfo};

/// The session row's mutable state.
pub struct Head {
    /// The record, with generation and `updated_at` from their columns.
    pub record: SessionRecord,
    /// Entries in the log.
    pub log_len: u64,
    /// Position of the latest compaction record.
    pub latest_seq: Option<u64>,
}

/// Formats a time so that it parses back to the same instant (nanoseconds, UTC).
pub fn time_text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

fn parse_time(text: &str, location: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| corrupt(location, e))
}

fn corrupt(location: &str, reason: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        location: location.to_string(),
        reason: reason.to_string(),
    }
}

/// Decodes a JSON column, naming the row on failure.
pub fn decode<T: serde::de::DeserializeOwned>(
    json: &str,
    location: impl Fn() -> String,
) -> Result<T, StoreError> {
    serde_json::from_str(json).map_err(|e| corrupt(&location(), e))
}

/// Begins an IMMEDIATE (write-locking) transaction.
pub fn write_tx(conn: &mut Connection) -> Result<Transaction<'_>, StoreError> {
    Ok(conn.transaction_with_behavior(TransactionBehavior::Immediate)?)
}

/// Reads the session row, or `SessionNotFound`.
pub fn head(conn: &Connection, id: SessionId) -> Result<Head, StoreError> {
    let row = conn
        .prepare_cached(
            "SELECT record, updated_at, generation, log_len, latest_seq FROM sessions WHERE id = ?1",
        )?
        .query_row(params![id.to_string()], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, Option<i64>>(4)?,
            ))
        })
        .optional()?;
    let Some((json, updated_at, generation, log_len, latest_seq)) = row else {
        return Err(StoreError::SessionNotFound(id));
    };
    let location = format!("sqlite sessions row {id}");
    let mut record: SessionRecord = decode(&json, || location.clone())?;
    record.updated_at = parse_time(&updated_at, &location)?;
    record.generation = generation as u64;
    Ok(Head {
        record,
        log_len: log_len as u64,
        latest_seq: latest_seq.map(|s| s as u64),
    })
}

/// Inserts entries at consecutive positions from `start`.
pub fn insert_entries(
    tx: &Transaction<'_>,
    id: SessionId,
    start: u64,
    entries: &[Entry],
) -> Result<(), StoreError> {
    let sid = id.to_string();
    let mut stmt = tx.prepare_cached(
        "INSERT INTO entries (session_id, seq, entry_id, kind, json) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for (i, e) in entries.iter().enumerate() {
        let json = serde_json::to_string(e)?;
        stmt.execute(params![
            sid,
            (start + i as u64) as i64,
            e.id().to_string(),
            e.kind(),
            json
        ])?;
    }
    Ok(())
}

/// The kind of a stored entry, or `None` when the session has no entry with this id.
pub fn entry_kind(conn: &Connection, id: SessionId, entry: EntryId) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT kind FROM entries WHERE session_id = ?1 AND entry_id = ?2")?
        .query_row(params![id.to_string(), entry.to_string()], |r| r.get(0))
        .optional()?)
}

fn touch(tx: &Transaction<'_>, id: SessionId, log_len: u64) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE sessions SET log_len = ?2, updated_at = ?3 WHERE id = ?1")?
        .execute(params![id.to_string(), log_len as i64, time_text(Utc::now())])?;
    Ok(())
}

/// Appends a batch in one transaction (dedupe key, head check, duplicate ids, then the inserts).
pub fn append(
    conn: &mut Connection,
    id: SessionId,
    request: &AppendRequest,
) -> Result<AppendOutcome, StoreError> {
    let tx = write_tx(conn)?;
    let len = head(&tx, id)?.log_len;
    if let Some(key) = &request.dedupe_key {
        let seen = tx
            .prepare_cached("SELECT 1 FROM dedupe_keys WHERE session_id = ?1 AND key = ?2")?
            .exists(params![id.to_string(), key])?;
        if seen {
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
    for e in &request.entries {
        if entry_kind(&tx, id, e.id())?.is_some() {
            return Err(StoreError::DuplicateEntry(e.id()));
        }
    }
    insert_entries(&tx, id, len, &request.entries)?;
    if let Some(key) = &request.dedupe_key {
        tx.prepare_cached("INSERT INTO dedupe_keys (session_id, key) VALUES (?1, ?2)")?
            .execute(params![id.to_string(), key])?;
    }
    let new_len = len + request.entries.len() as u64;
    touch(&tx, id, new_len)?;
    tx.commit()?;
    Ok(AppendOutcome {
        len: new_len,
        deduplicated: false,
    })
}

/// Commits a compaction record in one IMMEDIATE transaction that checks the generation.
pub fn commit(conn: &mut Connection, id: SessionId, request: &CommitRequest) -> Result<u64, StoreError> {
    let tx = write_tx(conn)?;
    let head = head(&tx, id)?;
    common::validate_commit(id, head.record.generation, request)?;
    let meta = &request.meta;
    if entry_kind(&tx, id, meta.id)?.is_some() {
        return Err(StoreError::DuplicateEntry(meta.id));
    }
    for r in common::referenced_ids(meta) {
        let ok = match entry_kind(&tx, id, r)?.as_deref() {
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
        &tx,
        id,
        seq,
        std::slice::from_ref(&Entry::Compaction(Box::new(meta.clone()))),
    )?;
    tx.prepare_cached(
        "INSERT INTO compactions (session_id, generation, seq, idempotency_key, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        id.to_string(),
        meta.generation as i64,
        seq as i64,
        meta.idempotency_key,
        time_text(meta.created_at)
    ])?;
    tx.prepare_cached("UPDATE sessions SET generation = ?2, latest_seq = ?3 WHERE id = ?1")?
        .execute(params![id.to_string(), meta.generation as i64, seq as i64])?;
    touch(&tx, id, seq + 1)?;
    tx.commit()?;
    Ok(meta.generation)
}

fn entry_at(conn: &Connection, id: SessionId, seq: u64) -> Result<Entry, StoreError> {
    let json: Option<String> = conn
        .prepare_cached("SELECT json FROM entries WHERE session_id = ?1 AND seq = ?2")?
        .query_row(params![id.to_string(), seq as i64], |r| r.get(0))
        .optional()?;
    let json =
        json.ok_or_else(|| corrupt(&format!("sqlite entries {id}"), format!("no entry at seq {seq}")))?;
    decode(&json, || format!("sqlite entries {id} seq {seq}"))
}

/// Entries with `from <= seq < to`, in order; compaction records are skipped when `messages_only`.
pub fn entries_between(
    conn: &Connection,
    id: SessionId,
    from: u64,
    to: u64,
    skip_compactions: bool,
) -> Result<Vec<Entry>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, json FROM entries WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 \
         AND (?4 = 0 OR kind <> 'compaction') ORDER BY seq",
    )?;
    let mut rows = stmt.query(params![
        id.to_string(),
        from as i64,
        to as i64,
        skip_compactions as i64
    ])?;
    let mut out = Vec::with_capacity(to.saturating_sub(from).min(1 << 20) as usize);
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let json: String = row.get(1)?;
        out.push(decode(&json, || format!("sqlite entries {id} seq {seq}"))?);
    }
    Ok(out)
}

/// Loads the view: the session row, the latest compaction, its retained entries by id and the
/// entries from the tail start on. Returns the view and the number of rows read.
pub fn load_view(conn: &mut Connection, id: SessionId) -> Result<(StoredView, u64), StoreError> {
    // A read transaction: every query sees the same snapshot.
    let tx = conn.transaction()?;
    let head = head(&tx, id)?;
    let Some(latest) = head.latest_seq else {
        let tail = entries_between(&tx, id, 0, head.log_len, false)?;
        let rows = 1 + tail.len() as u64;
        return Ok((
            common::assemble_view(head.record, None, vec![], vec![], tail, head.log_len),
            rows,
        ));
    };
    let location = format!("sqlite entries {id}");
    let meta: CompactionMeta = match entry_at(&tx, id, latest)? {
        Entry::Compaction(m) => *m,
        other => {
            return Err(corrupt(
                &location,
                format!("seq {latest} holds a {}", other.kind()),
            ))
        }
    };
    let mut rows = 2u64;
    let mut found: HashMap<EntryId, Message> = HashMap::new();
    {
        let mut stmt =
            tx.prepare_cached("SELECT json FROM entries WHERE session_id = ?1 AND entry_id = ?2")?;
        for r in meta.retained_instructions.iter().chain(&meta.retained_reminders) {
            let json: Option<String> = stmt
                .query_row(params![id.to_string(), r.to_string()], |row| row.get(0))
                .optional()?;
            if let Some(json) = json {
                rows += 1;
                if let Entry::Message(m) = decode(&json, || format!("{location} entry {r}"))? {
                    found.insert(*r, m);
                }
            }
        }
    }
    let instructions = common::pick_retained(&meta.retained_instructions, &found, &meta, &location)?;
    let reminders = common::pick_retained(&meta.retained_reminders, &found, &meta, &location)?;
    let tail_from = match meta.tail_start {
        Some(t) => {
            rows += 1;
            let seq: Option<i64> = tx
                .prepare_cached("SELECT seq FROM entries WHERE session_id = ?1 AND entry_id = ?2")?
                .query_row(params![id.to_string(), t.to_string()], |r| r.get(0))
                .optional()?;
            seq.ok_or_else(|| {
                corrupt(
                    &location,
                    format!("compaction {} references entry {t} which is not stored", meta.id),
                )
            })? as u64
        }
        None => latest,
    };
    let tail = entries_between(&tx, id, tail_from, head.log_len, true)?;
    rows += tail.len() as u64;
    let view = common::assemble_view(
        head.record,
        Some(meta),
        instructions,
        reminders,
        tail,
        head.log_len,
    );
    Ok((view, rows))
}

/// Position and commit time of each compaction, generation 1 first.
pub fn commits(conn: &Connection, id: SessionId) -> Result<Vec<(u64, DateTime<Utc>)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, created_at FROM compactions WHERE session_id = ?1 ORDER BY generation",
    )?;
    let mut rows = stmt.query(params![id.to_string()])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let at: String = row.get(1)?;
        out.push((seq as u64, parse_time(&at, &format!("sqlite compactions {id}"))?));
    }
    Ok(out)
}

/// The revisions of a session, from the compaction index.
pub fn revisions(conn: &mut Connection, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError> {
    let tx = conn.transaction()?;
    let head = head(&tx, id)?;
    let commits = commits(&tx, id)?;
    Ok(common::revisions_from_commits(
        &head.record,
        &commits,
        head.log_len,
    ))
}

/// Exports a revision from the log prefix that ends where the next generation was committed.
pub fn export(conn: &mut Connection, id: SessionId, generation: u64) -> Result<RevisionExport, StoreError> {
    let tx = conn.transaction()?;
    let head = head(&tx, id)?;
    let commits = commits(&tx, id)?;
    let latest = commits.len() as u64;
    if generation > latest {
        return Err(StoreError::RevisionNotFound {
            session: id,
            generation,
            latest,
        });
    }
    let end = commits.get(generation as usize).map_or(head.log_len, |c| c.0);
    let prefix = entries_between(&tx, id, 0, end, false)?;
    common::export_from_log(&head.record, &prefix, generation)
}

/// Finds the latest compaction with this idempotency key.
pub fn find_compaction(
    conn: &mut Connection,
    id: SessionId,
    key: &str,
) -> Result<Option<CompactionMeta>, StoreError> {
    let tx = conn.transaction()?;
    head(&tx, id)?;
    let seq: Option<i64> = tx
        .prepare_cached(
            "SELECT seq FROM compactions WHERE session_id = ?1 AND idempotency_key = ?2 \
             ORDER BY generation DESC LIMIT 1",
        )?
        .query_row(params![id.to_string(), key], |r| r.get(0))
        .optional()?;
    let Some(seq) = seq else { return Ok(None) };
    match entry_at(&tx, id, seq as u64)? {
        Entry::Compaction(m) => Ok(Some(*m)),
        other => Err(corrupt(
            &format!("sqlite entries {id}"),
            format!(
                "seq {seq} holds a {} where the compaction index points",
                other.kind()
            ),
        )),
    }
}

/// Deletes every row of a session.
pub fn delete(conn: &mut Connection, id: SessionId) -> Result<(), StoreError> {
    let tx = write_tx(conn)?;
    head(&tx, id)?;
    let sid = id.to_string();
    for table in ["entries", "dedupe_keys", "compactions", "breakers", "usage"] {
        // Table names come from the fixed list above; the value is a parameter.
        tx.execute(
            &format!("DELETE FROM {table} WHERE session_id = ?1"),
            params![sid],
        )?;
    }
    tx.execute("DELETE FROM sessions WHERE id = ?1", params![sid])?;
    tx.commit()?;
    Ok(())
}
