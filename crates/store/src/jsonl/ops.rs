//! The blocking file operations of the JSONL store, run with the session's locks held.

use std::collections::HashMap;

use chrono::Utc;
use pith_core::{CompactionMeta, Entry, EntryId, Message, SessionId, SessionRecord, StoredView};
use serde::Deserialize;

use super::archive::{self, Adopted, ArchiveRecord, Boundary, Locator};
use super::files;
use super::{lock, Inner, MessageIndex, Paths};
use crate::common;
use crate::error::StoreError;
use crate::types::{AppendOutcome, AppendRequest, CommitRequest};

#[derive(Deserialize)]
struct IdOnly {
    id: EntryId,
    #[serde(rename = "type")]
    kind: String,
}

/// The boundary (generation 0 when none was written yet).
pub fn boundary(paths: &Paths) -> Result<Boundary, StoreError> {
    Ok(files::read_json(&paths.boundary)?.unwrap_or_default())
}

/// The record, with the generation the boundary adopts.
pub fn record(paths: &Paths, id: SessionId) -> Result<(SessionRecord, Boundary), StoreError> {
    let mut record: SessionRecord =
        files::read_json(&paths.session)?.ok_or(StoreError::SessionNotFound(id))?;
    let b = boundary(paths)?;
    record.generation = b.generation;
    Ok((record, b))
}

/// Writes the record with a fresh `updated_at`.
pub fn touch(paths: &Paths, mut record: SessionRecord) -> Result<SessionRecord, StoreError> {
    record.updated_at = Utc::now();
    files::write_atomic(&paths.session, &serde_json::to_vec(&record)?)?;
    Ok(record)
}

/// Every adopted archive record, reporting skipped lines.
pub fn adopted(inner: &Inner, paths: &Paths, b: &Boundary) -> Result<Adopted, StoreError> {
    let mut a = archive::read(&paths.compactions, b, 0, 0)?;
    inner.warn(std::mem::take(&mut a.warnings));
    Ok(a)
}

/// The message index of a session, brought up to date with the file.
pub fn index(inner: &Inner, id: SessionId, paths: &Paths) -> Result<MessageIndex, StoreError> {
    let len = match std::fs::metadata(&paths.messages) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(StoreError::io(paths.messages.display(), e)),
    };
    let mut idx = lock(&inner.index).remove(&id).unwrap_or_default();
    if len < idx.bytes {
        idx = MessageIndex::default();
    }
    if len > idx.bytes {
        let lines = files::read_lines::<IdOnly>(&paths.messages, idx.bytes, idx.offsets.len() as u64)?;
        for (offset, line, e) in lines.items {
            idx.offsets.push(offset);
            idx.ids.insert(e.id, (line, e.kind == "message"));
        }
        idx.bytes = lines.good_end;
        inner.warn(lines.torn.into_iter().collect());
    }
    lock(&inner.index).insert(id, idx.clone());
    Ok(idx)
}

/// Appends a batch: dedupe key, head check, duplicate ids, then one synced write.
pub fn append(
    inner: &Inner,
    id: SessionId,
    paths: &Paths,
    request: &AppendRequest,
) -> Result<AppendOutcome, StoreError> {
    let (record, b) = record(paths, id)?;
    let idx = index(inner, id, paths)?;
    let adopted = adopted(inner, paths, &b)?;
    let len = idx.offsets.len() as u64 + adopted.records.len() as u64;
    let dedupe = files::read_lines::<String>(&paths.dedupe, 0, 0)?;
    if let Some(key) = &request.dedupe_key {
        if dedupe.items.iter().any(|(_, _, k)| k == key) {
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
    let compaction_ids: Vec<EntryId> = adopted.records.iter().map(|r| r.meta.id).collect();
    for e in &request.entries {
        if idx.ids.contains_key(&e.id()) || compaction_ids.contains(&e.id()) {
            return Err(StoreError::DuplicateEntry(e.id()));
        }
    }
    let mut bytes = Vec::new();
    for e in &request.entries {
        serde_json::to_writer(&mut bytes, e)?;
        bytes.push(b'\n');
    }
    // Cut a torn line left by an interrupted append before writing after it.
    if paths.messages.exists() {
        files::truncate_to(&paths.messages, idx.bytes)?;
    }
    files::append_synced(&paths.messages, &bytes)?;
    if let Some(key) = &request.dedupe_key {
        if paths.dedupe.exists() {
            files::truncate_to(&paths.dedupe, dedupe.good_end)?;
        }
        let mut line = serde_json::to_vec(key)?;
        line.push(b'\n');
        files::append_synced(&paths.dedupe, &line)?;
    }
    index(inner, id, paths)?;
    touch(paths, record)?;
    Ok(AppendOutcome {
        len: len + request.entries.len() as u64,
        deduplicated: false,
    })
}

/// Commits a compaction: archive line synced first, then the boundary replaced atomically.
pub fn commit(
    inner: &Inner,
    id: SessionId,
    paths: &Paths,
    request: &CommitRequest,
) -> Result<u64, StoreError> {
    let (record, b) = record(paths, id)?;
    common::validate_commit(id, b.generation, request)?;
    let meta = &request.meta;
    let idx = index(inner, id, paths)?;
    let adopted = adopted(inner, paths, &b)?;
    if idx.ids.contains_key(&meta.id) || adopted.records.iter().any(|r| r.meta.id == meta.id) {
        return Err(StoreError::DuplicateEntry(meta.id));
    }
    let locate = |e: EntryId, need_message: bool| -> Result<Locator, StoreError> {
        if let Some(&(line, is_message)) = idx.ids.get(&e) {
            if is_message || !need_message {
                let offset = idx.offsets.get(line as usize).copied().unwrap_or(idx.bytes);
                return Ok(Locator { id: e, line, offset });
            }
        }
        if !need_message {
            if let Some(r) = adopted.records.iter().find(|r| r.meta.id == e) {
                return Ok(Locator {
                    id: e,
                    line: r.messages,
                    offset: r.messages_bytes,
                });
            }
        }
        Err(common::missing_reference(meta, e))
    };
    let retained = meta
        .retained_instructions
        .iter()
        .chain(&meta.retained_reminders)
        .map(|&e| locate(e, true))
        .collect::<Result<Vec<_>, _>>()?;
    let lines = idx.offsets.len() as u64;
    let tail = match meta.tail_start {
        Some(t) => locate(t, false)?,
        None => Locator {
            id: meta.id,
            line: lines,
            offset: idx.bytes,
        },
    };
    let rec = ArchiveRecord {
        generation: meta.generation,
        seq: lines + adopted.records.len() as u64,
        messages: lines,
        messages_bytes: idx.bytes,
        tail,
        retained,
        meta: meta.clone(),
    };
    let (line, sha256) = archive::encode(&rec)?;
    // Drop uncommitted or torn archive lines, then archive, then move the boundary.
    if paths.compactions.exists() {
        files::truncate_to(&paths.compactions, adopted.end)?;
    }
    files::append_synced(&paths.compactions, &line)?;
    let boundary = Boundary {
        generation: meta.generation,
        sha256,
        offset: adopted.end,
        line: adopted.records.len() as u64,
    };
    files::write_atomic(&paths.boundary, &serde_json::to_vec(&boundary)?)?;
    touch(paths, record)?;
    Ok(meta.generation)
}

/// Loads the view from the adopted archive line, the retained lines and the tail.
pub fn load_view(inner: &Inner, id: SessionId, paths: &Paths) -> Result<(StoredView, u64), StoreError> {
    let (record, b) = record(paths, id)?;
    if b.generation == 0 {
        adopted(inner, paths, &b)?;
        let lines = files::read_lines::<Entry>(&paths.messages, 0, 0)?;
        inner.warn(lines.torn.into_iter().collect());
        let tail: Vec<Entry> = lines.items.into_iter().map(|(_, _, e)| e).collect();
        let n = tail.len() as u64;
        return Ok((common::assemble_view(record, None, vec![], vec![], tail, n), n));
    }
    let mut latest = archive::read(&paths.compactions, &b, b.offset, b.line)?;
    inner.warn(std::mem::take(&mut latest.warnings));
    let mut rows = latest.lines_read;
    let rec = latest.records.pop().ok_or_else(|| StoreError::Corrupt {
        location: paths.compactions.display().to_string(),
        reason: format!("no record at the boundary's offset {}", b.offset),
    })?;
    let location = paths.messages.display().to_string();
    let mut found: HashMap<EntryId, Message> = HashMap::new();
    for loc in &rec.retained {
        rows += 1;
        match files::read_line_at::<Entry>(&paths.messages, loc.offset, loc.line)? {
            Entry::Message(m) if m.id == loc.id => {
                found.insert(m.id, m);
            }
            other => {
                return Err(StoreError::Corrupt {
                    location: format!("{location}:{}", loc.line + 1),
                    reason: format!("expected message {}, found entry {}", loc.id, other.id()),
                })
            }
        }
    }
    let meta: &CompactionMeta = &rec.meta;
    let instructions = common::pick_retained(&meta.retained_instructions, &found, meta, &location)?;
    let reminders = common::pick_retained(&meta.retained_reminders, &found, meta, &location)?;
    let lines = files::read_lines::<Entry>(&paths.messages, rec.tail.offset, rec.tail.line)?;
    inner.warn(lines.torn.into_iter().collect());
    rows += lines.items.len() as u64;
    let log_len = rec.tail.line + lines.items.len() as u64 + b.generation;
    let tail = lines.items.into_iter().map(|(_, _, e)| e).collect();
    let view = common::assemble_view(record, Some(rec.meta), instructions, reminders, tail, log_len);
    Ok((view, rows))
}

/// The whole log: message lines with the adopted compaction records at their positions.
pub fn load_log(
    inner: &Inner,
    id: SessionId,
    paths: &Paths,
) -> Result<(SessionRecord, Vec<Entry>), StoreError> {
    let (record, b) = record(paths, id)?;
    let adopted = adopted(inner, paths, &b)?;
    let lines = files::read_lines::<Entry>(&paths.messages, 0, 0)?;
    inner.warn(lines.torn.into_iter().collect());
    let mut log = Vec::with_capacity(lines.items.len() + adopted.records.len());
    let mut records = adopted.records.into_iter().peekable();
    for (_, _, e) in lines.items {
        while let Some(r) = records.next_if(|r| r.seq == log.len() as u64) {
            log.push(Entry::Compaction(Box::new(r.meta)));
        }
        log.push(e);
    }
    log.extend(records.map(|r| Entry::Compaction(Box::new(r.meta))));
    Ok((record, log))
}
