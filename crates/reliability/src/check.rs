//! Invariant checks over a stored session.
//!
//! [`check_session`] reads a session back through the [`SessionStore`] trait and checks the
//! promises every backend makes, whatever happened before (crashes, concurrent processes,
//! injected faults):
//!
//! - no entry id appears twice in the log;
//! - compaction generations are 1, 2, 3, … in log order (strictly increasing, none skipped);
//! - every revision exports, and its checksum is the sha256 of its bytes, which are the
//!   canonical JSON of its view;
//! - the view each compaction committed fits `window − reserve` (the threshold).

use std::collections::HashSet;

use pith_compaction::overflow::estimate_view;
use pith_compaction::ProjectionStyle;
use pith_core::{sha256_hex, Entry, EntryId, SessionId, StoredView, TokenCounter};
use pith_store::{SessionStore, StoreError};

/// A broken invariant, or a failure to read the session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The store could not be read.
    #[error("reading session {session} failed: {source}")]
    Store {
        /// The session.
        session: SessionId,
        /// The store error.
        #[source]
        source: StoreError,
    },
    /// An entry id is in the log twice.
    #[error("entry {id} appears twice in the log (positions {first} and {second})")]
    DuplicateEntry {
        /// The id.
        id: EntryId,
        /// Its first position.
        first: usize,
        /// Its second position.
        second: usize,
    },
    /// A compaction record does not carry the next generation.
    #[error("compaction at log position {position} has generation {found}, expected {expected}")]
    Generation {
        /// Its position in the log.
        position: usize,
        /// The generation it carries.
        found: u64,
        /// The generation it should carry.
        expected: u64,
    },
    /// A revision's checksum or bytes do not match its view.
    #[error("revision {generation} does not verify: {reason}")]
    Export {
        /// The generation.
        generation: u64,
        /// What did not match.
        reason: &'static str,
    },
    /// A committed view is larger than the threshold.
    #[error("the view committed at generation {generation} needs {tokens} tokens, above the threshold {threshold}")]
    DoesNotFit {
        /// The generation.
        generation: u64,
        /// The view's estimated size.
        tokens: u64,
        /// `window − reserve`.
        threshold: u64,
    },
    /// The log could not be turned into a view.
    #[error("the log prefix up to generation {generation} is not a valid view: {reason}")]
    View {
        /// The generation.
        generation: u64,
        /// Why.
        reason: String,
    },
}

/// What a successful check saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionReport {
    /// Entries in the log (compaction records included).
    pub entries: usize,
    /// Message entries in the log.
    pub messages: usize,
    /// The generations of the compaction records, in log order.
    pub generations: Vec<u64>,
    /// The checksums of every revision, generation 0 first.
    pub checksums: Vec<String>,
    /// The largest committed view's estimated size.
    pub max_committed_tokens: u64,
}

/// Checks a session's invariants; `threshold` is `window − reserve` of its model.
pub async fn check_session(
    store: &dyn SessionStore,
    session: SessionId,
    threshold: u64,
    style: ProjectionStyle,
    counter: &dyn TokenCounter,
) -> Result<SessionReport, CheckError> {
    let err = |source| CheckError::Store { session, source };
    let record = store.get_session(session).await.map_err(err)?;
    let log = store.load_log(session).await.map_err(err)?;

    let mut seen = std::collections::HashMap::with_capacity(log.len());
    for (i, e) in log.iter().enumerate() {
        if let Some(first) = seen.insert(e.id(), i) {
            return Err(CheckError::DuplicateEntry {
                id: e.id(),
                first,
                second: i,
            });
        }
    }

    let mut generations = Vec::new();
    let mut max_committed_tokens = 0;
    for (position, entry) in log.iter().enumerate() {
        let Entry::Compaction(meta) = entry else { continue };
        let expected = generations.len() as u64 + 1;
        if meta.generation != expected {
            return Err(CheckError::Generation {
                position,
                found: meta.generation,
                expected,
            });
        }
        generations.push(meta.generation);
        let view = StoredView::from_log(record.clone(), &log[..=position]).map_err(|e| CheckError::View {
            generation: meta.generation,
            reason: e.to_string(),
        })?;
        let tokens = estimate_view(&view, style, &record.tools, counter);
        if tokens > threshold {
            return Err(CheckError::DoesNotFit {
                generation: meta.generation,
                tokens,
                threshold,
            });
        }
        max_committed_tokens = max_committed_tokens.max(tokens);
    }

    let revisions = store.list_revisions(session).await.map_err(err)?;
    let mut checksums = Vec::with_capacity(revisions.len());
    let mut listed = HashSet::new();
    for info in &revisions {
        listed.insert(info.generation);
        let export = store
            .export_revision(session, info.generation)
            .await
            .map_err(err)?;
        if sha256_hex(&export.bytes) != export.sha256 {
            return Err(CheckError::Export {
                generation: info.generation,
                reason: "the checksum is not the sha256 of the bytes",
            });
        }
        match export.view.canonical_json() {
            Ok(bytes) if bytes == export.bytes => {}
            _ => {
                return Err(CheckError::Export {
                    generation: info.generation,
                    reason: "the bytes are not the canonical JSON of the view",
                })
            }
        }
        checksums.push(export.sha256);
    }
    if listed.len() != generations.len() + 1 {
        return Err(CheckError::Export {
            generation: generations.len() as u64,
            reason: "the revision list does not have one revision per generation",
        });
    }
    Ok(SessionReport {
        entries: log.len(),
        messages: log.iter().filter(|e| matches!(e, Entry::Message(_))).count(),
        generations,
        checksums,
        max_committed_tokens,
    })
}
