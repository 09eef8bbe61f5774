//! Rules every backend applies the same way: request validation and revision reconstruction.

use pith_core::{Entry, SessionId, SessionRecord, StoredView};

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
    let positions = compaction_positions(log);
    let mut out = Vec::with_capacity(positions.len() + 1);
    let mut created_at = session.created_at;
    for (g, &pos) in positions.iter().enumerate() {
        out.push(RevisionInfo {
            generation: g as u64,
            created_at,
            log_len: pos as u64,
        });
        if let Some(meta) = log[pos].as_compaction() {
            created_at = meta.created_at;
        }
    }
    out.push(RevisionInfo {
        generation: positions.len() as u64,
        created_at,
        log_len: log.len() as u64,
    });
    out
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
