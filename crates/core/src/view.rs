//! The stored view of a session: the data the model view is projected from.
//!
//! A view is the latest compaction record, the instructions and reminders it retained, and the
//! log entries from its tail start on. Stores load it without reading archived history; how the
//! summary is rendered into messages (the projection style) is the compaction crate's business.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::entry::{CompactionMeta, Entry};
use crate::ids::EntryId;
use crate::message::Message;
use crate::session::SessionRecord;

/// The stored view of a session at one generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredView {
    /// The session record.
    pub session: SessionRecord,
    /// The generation of this view (0 = no compaction yet).
    pub generation: u64,
    /// The compaction that produced this view, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionMeta>,
    /// Instructions from before the tail, retained verbatim (empty without a compaction).
    #[serde(default)]
    pub instructions: Vec<Message>,
    /// Reminders from before the tail that stay in the view (empty without a compaction).
    #[serde(default)]
    pub reminders: Vec<Message>,
    /// Every entry from the tail start on (the whole log without a compaction), compaction
    /// records excluded.
    pub tail: Vec<Entry>,
    /// Number of entries in the log when the view was loaded (compaction records included).
    pub log_len: u64,
}

/// A view could not be built from a log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// The compaction record names an entry that is not in the log before it.
    #[error("compaction {compaction} references entry {entry} which is not in the log")]
    MissingEntry {
        /// The compaction record.
        compaction: EntryId,
        /// The missing entry.
        entry: EntryId,
    },
}

impl StoredView {
    /// Builds the view from a log (or a prefix of one), as of the last compaction record in it.
    ///
    /// Stores with an index load views more cheaply; this is the reference definition they must
    /// agree with, and what exports of old revisions use.
    pub fn from_log(session: SessionRecord, log: &[Entry]) -> Result<Self, ViewError> {
        let latest = log.iter().rposition(|e| matches!(e, Entry::Compaction(_)));
        let Some(pos) = latest else {
            return Ok(Self {
                generation: 0,
                session,
                compaction: None,
                instructions: Vec::new(),
                reminders: Vec::new(),
                tail: log.to_vec(),
                log_len: log.len() as u64,
            });
        };
        let Some(meta) = log[pos].as_compaction().cloned() else {
            return Err(ViewError::MissingEntry {
                compaction: log[pos].id(),
                entry: log[pos].id(),
            });
        };
        let index: HashMap<EntryId, usize> =
            log[..pos].iter().enumerate().map(|(i, e)| (e.id(), i)).collect();
        let pick = |ids: &[EntryId]| -> Result<Vec<Message>, ViewError> {
            ids.iter()
                .map(|id| {
                    index
                        .get(id)
                        .and_then(|&i| log[i].as_message().cloned())
                        .ok_or(ViewError::MissingEntry {
                            compaction: meta.id,
                            entry: *id,
                        })
                })
                .collect()
        };
        let instructions = pick(&meta.retained_instructions)?;
        let reminders = pick(&meta.retained_reminders)?;
        let tail_from = match meta.tail_start {
            Some(id) => *index.get(&id).ok_or(ViewError::MissingEntry {
                compaction: meta.id,
                entry: id,
            })?,
            None => pos,
        };
        let tail = log[tail_from..]
            .iter()
            .filter(|e| !matches!(e, Entry::Compaction(_)))
            .cloned()
            .collect();
        Ok(Self {
            generation: meta.generation,
            session,
            compaction: Some(meta),
            instructions,
            reminders,
            tail,
            log_len: log.len() as u64,
        })
    }

    /// The messages of the tail, in order.
    pub fn tail_messages(&self) -> impl Iterator<Item = &Message> {
        self.tail.iter().filter_map(Entry::as_message)
    }

    /// Canonical JSON bytes of the view (what exports write and checksum).
    pub fn canonical_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }
}

/// Lower-case hex sha256 of some bytes, as used for export and archive checksums.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{CompactionStrategy, CompactionTriggerKind};
    use crate::usage::Usage;
    use chrono::Utc;

    fn meta(generation: u64, tail_start: EntryId, instr: Vec<EntryId>) -> CompactionMeta {
        CompactionMeta {
            id: EntryId::new(),
            generation,
            summary: "s".into(),
            summarized: None,
            tail_start: Some(tail_start),
            retained_instructions: instr,
            retained_reminders: vec![],
            masked: vec![],
            tokens_before: 10,
            tokens_after: 5,
            strategy: CompactionStrategy::Deterministic,
            summary_model: None,
            trigger: CompactionTriggerKind::Manual,
            usage: Usage::default(),
            summary_calls: 0,
            idempotency_key: "k".into(),
            created_at: Utc::now(),
            extra: None,
        }
    }

    #[test]
    fn view_from_log_uses_latest_compaction() {
        let session = SessionRecord::new("m", vec![]);
        let sys = Message::system("rules");
        let u1 = Message::user("one");
        let u2 = Message::user("two");
        let u3 = Message::user("three");
        let mut log: Vec<Entry> = vec![sys.clone().into(), u1.into(), u2.clone().into()];
        log.push(Entry::Compaction(Box::new(meta(1, u2.id, vec![sys.id]))));
        log.push(u3.clone().into());
        let view = StoredView::from_log(session.clone(), &log).unwrap();
        assert_eq!(view.generation, 1);
        assert_eq!(view.instructions, vec![sys]);
        let tail: Vec<_> = view.tail_messages().map(|m| m.id).collect();
        assert_eq!(tail, vec![u2.id, u3.id]);
        assert_eq!(view.log_len, 5);
        let original = StoredView::from_log(session, &log[..3]).unwrap();
        assert_eq!(original.generation, 0);
        assert_eq!(original.tail.len(), 3);
    }

    #[test]
    fn missing_reference_is_an_error() {
        let session = SessionRecord::new("m", vec![]);
        let log: Vec<Entry> = vec![
            Message::user("x").into(),
            Entry::Compaction(Box::new(meta(1, EntryId::new(), vec![]))),
        ];
        assert!(matches!(
            StoredView::from_log(session, &log),
            Err(ViewError::MissingEntry { .. })
        ));
    }
}
