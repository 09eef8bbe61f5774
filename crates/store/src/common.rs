//! Rules every backend applies the same way: request validation and revision reconstruction.

use chrono::{DateTime, Utc};
use pith_core::{CompactionMeta, Entry, EntryId, Message, SessionId, SessionRecord, StoredView};

use crate::error::StoreError;
use crate::types::{AppendRequest, CommitRequest, RevisionExport, RevisionInfo};

/// Checks an append request before anything is written.
pub fn validate_append(request: &AppendRequest) -> Result<(), StoreError> {
    if request.entries.is_empty() {
        return Err(StoreError::InvalidRequest(
            "an append needs at least one entry".into(),
        ));
    }
    if request.entries.iter().any(|e| matches!(e, Entry::Compaction(_))) {
        return Err(StoreError::InvalidRequest(
            "compaction records are committed with commit_compaction, not appended".into(),
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(request.entries.len());
    for e in &request.entries {
        if !seen.insert(e.id()) {
            return Err(StoreError::DuplicateEntry(e.id()));
        }
    }
    Ok(())
}

/// Checks a commit request against the session's current generation.
pub fn validate_commit(session: SessionId, current: u64, request: &CommitRequest) -> Result<(), StoreError> {
    if request.expected_generation != current {
        return Err(StoreError::Conflict {
            session,
            expected: request.expected_generation,
            actual: current,
        });
    }
    if request.meta.generation != current + 1 {
        return Err(StoreError::InvalidRequest(format!(
            "compaction record has generation {} but commits on generation {current}",
            request.meta.generation
        )));
    }
    Ok(())
}

/// Positions (in the log) of the compaction records, in order: index `g - 1` holds generation `g`.
pub fn compaction_positions(log: &[Entry]) -> Vec<usize> {
    log.iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Entry::Compaction(_)))
        .map(|(i, _)| i)
        .collect()
}

/// The revisions of a log.
pub fn revisions(session: &SessionRecord, log: &[Entry]) -> Vec<RevisionInfo> {
    let commits: Vec<(u64, DateTime<Utc>)> = log
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_compaction().map(|m| (i as u64, m.created_at)))
        .collect();
    revisions_from_commits(session, &commits, log.len() as u64)
}

/// The revisions of a session from its compaction index alone: `commits` holds, for each
/// generation `g >= 1` in order, the log position its record was committed at and its commit time.
///
/// Backends with an index use this instead of reading the whole log; it agrees with [`revisions`].
pub fn revisions_from_commits(
    session: &SessionRecord,
    commits: &[(u64, DateTime<Utc>)],
    log_len: u64,
) -> Vec<RevisionInfo> {
    let mut out = Vec::with_capacity(commits.len() + 1);
    let mut created_at = session.created_at;
    for (g, &(pos, committed_at)) in commits.iter().enumerate() {
        out.push(RevisionInfo {
            generation: g as u64,
            created_at,
            log_len: pos,
        });
        created_at = committed_at;
    }
    out.push(RevisionInfo {
        generation: commits.len() as u64,
        created_at,
        log_len,
    });
    out
}

/// The error for a compaction record that names an entry the log does not hold (before it).
pub fn missing_reference(meta: &CompactionMeta, entry: EntryId) -> StoreError {
    StoreError::InvalidRequest(format!(
        "compaction {} references entry {entry} which is not in the log",
        meta.id
    ))
}

/// The entry ids a compaction record needs when its view is loaded: the retained instructions and
/// reminders (which must be messages) and the tail start (any non-compaction entry).
pub fn referenced_ids(meta: &CompactionMeta) -> impl Iterator<Item = EntryId> + '_ {
    meta.retained_instructions
        .iter()
        .chain(meta.retained_reminders.iter())
        .chain(meta.tail_start.iter())
        .copied()
}

/// Assembles a view from the pieces an indexed backend loaded: the latest compaction (if any),
/// the retained instructions and reminders (in the record's order), the entries from the tail
/// start on, and the log length. Compaction records in `tail` are dropped, as
/// [`StoredView::from_log`] does; the result is equal to what it builds from the whole log.
pub fn assemble_view(
    session: SessionRecord,
    compaction: Option<CompactionMeta>,
    instructions: Vec<Message>,
    reminders: Vec<Message>,
    tail: Vec<Entry>,
    log_len: u64,
) -> StoredView {
    StoredView {
        generation: compaction.as_ref().map_or(0, |m| m.generation),
        session,
        compaction,
        instructions,
        reminders,
        tail: tail
            .into_iter()
            .filter(|e| !matches!(e, Entry::Compaction(_)))
            .collect(),
        log_len,
    }
}

/// Picks the retained messages named by `ids` out of `found` (id → message), in `ids` order.
///
/// A missing id means the stored data lost an entry the compaction record needs: `Corrupt`.
pub fn pick_retained(
    ids: &[EntryId],
    found: &std::collections::HashMap<EntryId, Message>,
    meta: &CompactionMeta,
    location: &str,
) -> Result<Vec<Message>, StoreError> {
    ids.iter()
        .map(|id| {
            found.get(id).cloned().ok_or_else(|| StoreError::Corrupt {
                location: location.to_string(),
                reason: format!("compaction {} references entry {id} which is not stored", meta.id),
            })
        })
        .collect()
}

/// The exact view as of `generation`: built from the log up to the commit of the next generation.
///
/// The embedded session record is frozen to that revision (its generation, and its creation time
/// as `updated_at`), so an export is byte-identical however the session changes afterwards.
pub fn export_from_log(
    session: &SessionRecord,
    log: &[Entry],
    generation: u64,
) -> Result<RevisionExport, StoreError> {
    let positions = compaction_positions(log);
    let latest = positions.len() as u64;
    if generation > latest {
        return Err(StoreError::RevisionNotFound {
            session: session.id,
            generation,
            latest,
        });
    }
    let end = positions.get(generation as usize).copied().unwrap_or(log.len());
    let mut frozen = session.clone();
    frozen.generation = generation;
    frozen.updated_at = frozen.created_at;
    let view = StoredView::from_log(frozen, &log[..end]).map_err(|e| StoreError::Corrupt {
        location: format!("session {}", session.id),
        reason: e.to_string(),
    })?;
    Ok(RevisionExport::from_view(view)?)
}
