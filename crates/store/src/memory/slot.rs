//! One position of the memory store's log: an entry a view can read, kept as a value, or an
//! entry of the archived history, kept as its serialized JSON.
//!
//! Once a compaction commits, the entries before its tail are read only by exports and full-log
//! loads (the view holds the summary instead), so the store keeps them as JSON text: about a
//! third of the memory of the values for a typical message, whose tool-call arguments otherwise
//! sit in a `serde_json::Map` each. Compaction records and the entries the view still reads
//! (the retained instructions and reminders, the tail) stay values. Decoding an archived entry
//! gives back exactly the entry that was stored, the same round trip the JSONL store relies on.

use std::borrow::Cow;

use pith_core::{CompactionMeta, Entry};

use crate::error::StoreError;

/// A log position.
#[derive(Debug)]
pub(super) enum Slot {
    /// An entry a view may read, as a value.
    Live(Entry),
    /// An entry of the archived history, as its JSON.
    Archived {
        /// Whether the entry is a message (what a compaction may reference).
        message: bool,
        /// `serde_json` of the entry.
        json: Box<str>,
    },
}

impl Slot {
    /// The compaction record at this position, if it holds one (records are never archived).
    pub(super) fn as_compaction(&self) -> Option<&CompactionMeta> {
        match self {
            Slot::Live(e) => e.as_compaction(),
            Slot::Archived { .. } => None,
        }
    }

    /// Whether this position holds a message.
    pub(super) fn is_message(&self) -> bool {
        match self {
            Slot::Live(e) => e.as_message().is_some(),
            Slot::Archived { message, .. } => *message,
        }
    }

    /// The entry, borrowed when live and decoded when archived.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when an archived entry does not decode (which would mean the
    /// process's memory was damaged; the serializer's own output always decodes).
    pub(super) fn entry(&self, location: &str) -> Result<Cow<'_, Entry>, StoreError> {
        match self {
            Slot::Live(e) => Ok(Cow::Borrowed(e)),
            Slot::Archived { json, .. } => {
                serde_json::from_str(json)
                    .map(Cow::Owned)
                    .map_err(|e| StoreError::Corrupt {
                        location: location.to_string(),
                        reason: format!("an archived entry does not decode: {e}"),
                    })
            }
        }
    }

    /// Moves a live entry to the archive. Compaction records stay values (they are few and the
    /// view reads the latest), and an entry that cannot be serialized stays a value as well.
    pub(super) fn archive(&mut self) {
        let Slot::Live(entry) = self else { return };
        if matches!(entry, Entry::Compaction(_)) {
            return;
        }
        if let Ok(json) = serde_json::to_string(entry) {
            *self = Slot::Archived {
                message: entry.as_message().is_some(),
                json: json.into_boxed_str(),
            };
        }
    }
}

/// Every entry of `log`, in order, as values.
///
/// # Errors
/// [`StoreError::Corrupt`] when an archived entry does not decode.
pub(super) fn decode_all(log: &[Slot], location: &str) -> Result<Vec<Entry>, StoreError> {
    log.iter()
        .map(|s| s.entry(location).map(Cow::into_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pith_core::{Message, Part, Role};

    #[test]
    fn an_archived_message_decodes_to_the_same_entry_and_keeps_its_kind() {
        let entry = Entry::Message(Message::new(
            Role::Assistant,
            vec![
                Part::text("looking"),
                Part::ToolCall {
                    call_id: "c1".into(),
                    name: "read".into(),
                    arguments: serde_json::json!({"path": "src/lib.rs", "lines": [1, 20]}),
                },
            ],
        ));
        let mut slot = Slot::Live(entry.clone());
        slot.archive();
        assert!(matches!(slot, Slot::Archived { message: true, .. }));
        assert!(slot.is_message());
        assert_eq!(slot.entry("test").unwrap().into_owned(), entry);
    }

    #[test]
    fn damaged_archive_text_is_a_corrupt_error_naming_the_location() {
        let slot = Slot::Archived {
            message: true,
            json: "{\"type\":\"message\"".into(),
        };
        let err = slot.entry("memory session s").unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { ref location, .. } if location == "memory session s"));
    }
}
