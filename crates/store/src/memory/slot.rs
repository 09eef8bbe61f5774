//! One position of the memory store's log: an entry a view can read, kept as a value, or an
//! entry of the archived history, kept as its serialized JSON.
//!
//! Once a compaction commits, the entries before its tail are read only by exports and full-log
//! loads (the view holds the summary instead), so the store keeps them as JSON text: less than
//! half the memory of the values for a typical message (a message is 160 bytes inline plus its
//! parts, strings and, for each tool call, a `serde_json::Map` of the arguments; its JSON is a
//! few hundred bytes). Compaction records and the entries the view still reads
//! (the retained instructions and reminders, the tail) stay values. Decoding an archived entry
//! gives back exactly the entry that was stored, the same round trip the JSONL store relies on.

use std::borrow::Cow;

use pith_core::{CompactionMeta, Entry};

use crate::error::StoreError;

/// A log position: 24 bytes inline, so the log's vector costs little per archived entry.
#[derive(Debug)]
pub(super) enum Slot {
    /// An entry a view may read, as a value (boxed: an entry is 160 bytes inline).
    Live(Box<Entry>),
    /// An archived message (what a compaction may reference), as its JSON.
    ArchivedMessage(Box<str>),
    /// Any other archived entry, as its JSON.
    ArchivedOther(Box<str>),
}

impl Slot {
    /// A live slot.
    pub(super) fn live(entry: Entry) -> Self {
        Slot::Live(Box::new(entry))
    }

    /// Whether the entry is kept as JSON.
    pub(super) fn is_archived(&self) -> bool {
        !matches!(self, Slot::Live(_))
    }

    /// The compaction record at this position, if it holds one (records are never archived).
    pub(super) fn as_compaction(&self) -> Option<&CompactionMeta> {
        match self {
            Slot::Live(e) => e.as_compaction(),
            Slot::ArchivedMessage(_) | Slot::ArchivedOther(_) => None,
        }
    }

    /// Whether this position holds a message.
    pub(super) fn is_message(&self) -> bool {
        match self {
            Slot::Live(e) => e.as_message().is_some(),
            Slot::ArchivedMessage(_) => true,
            Slot::ArchivedOther(_) => false,
        }
    }

    /// The entry, borrowed when live and decoded when archived.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when an archived entry does not decode (which would mean the
    /// process's memory was damaged; the serializer's own output always decodes).
    pub(super) fn entry(&self, location: &str) -> Result<Cow<'_, Entry>, StoreError> {
        match self {
            Slot::Live(e) => Ok(Cow::Borrowed(&**e)),
            Slot::ArchivedMessage(json) | Slot::ArchivedOther(json) => serde_json::from_str(json)
                .map(Cow::Owned)
                .map_err(|e| StoreError::Corrupt {
                    location: location.to_string(),
                    reason: format!("an archived entry does not decode: {e}"),
                }),
        }
    }

    /// Moves a live entry to the archive. Compaction records stay values (they are few and the
    /// view reads the latest), and an entry that cannot be serialized stays a value as well.
    pub(super) fn archive(&mut self) {
        let Slot::Live(entry) = self else { return };
        if matches!(**entry, Entry::Compaction(_)) {
            return;
        }
        if let Ok(json) = serde_json::to_string(entry) {
            let json = json.into_boxed_str();
            *self = if entry.as_message().is_some() {
                Slot::ArchivedMessage(json)
            } else {
                Slot::ArchivedOther(json)
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
        let mut slot = Slot::live(entry.clone());
        slot.archive();
        assert!(matches!(slot, Slot::ArchivedMessage(_)));
        assert!(slot.is_message());
        assert_eq!(slot.entry("test").unwrap().into_owned(), entry);
    }

    #[test]
    fn damaged_archive_text_is_a_corrupt_error_naming_the_location() {
        let slot = Slot::ArchivedMessage("{\"type\":\"message\"".into());
        let err = slot.entry("memory session s").unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { ref location, .. } if location == "memory session s"));
    }
}
