//! What an import produced and what it had to leave out or make up.

use std::collections::BTreeMap;

use pith_core::{Entry, SessionRecord};

use crate::format::Format;

/// Facts about one import: what was skipped, synthesised or dropped, and how much memory the
/// reader needed.
///
/// Nothing the importer leaves out is silent: every skipped record is counted here by type, and
/// every made-up or dropped item is counted and, where useful, described in `warnings`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportReport {
    /// Records (lines, list items or events) read from the file.
    pub records: u64,
    /// Records that carry nothing the model saw, by type (e.g. `progress`,
    /// `system/turn_duration`, `event_msg/agent_reasoning`, `thinking_level_change`).
    pub skipped: BTreeMap<String, u64>,
    /// Error results synthesised for tool calls that never got one (`meta.synthetic = true`).
    pub synthesized_results: u64,
    /// Tool calls synthesised from a record that ran a command outside the model (pi's
    /// `bashExecution`), each in its own synthetic assistant message.
    pub synthesized_calls: u64,
    /// Tool calls recovered from plain text (mini-SWE-agent bash blocks, SWE-agent text actions).
    pub text_actions: u64,
    /// Tool results with no unanswered call before them; they are dropped.
    pub dropped_results: u64,
    /// Reported token usages that could not be attached to an assistant message.
    pub unattached_usage: u64,
    /// The longest line the streaming reader held at once, in bytes (0 for single-document
    /// formats, which are parsed whole).
    pub max_line_bytes: u64,
    /// Human-readable notes about anything unusual, with its place in the file.
    pub warnings: Vec<String>,
}

impl ImportReport {
    /// Counts one skipped record of `kind`.
    pub(crate) fn skip(&mut self, kind: impl Into<String>) {
        *self.skipped.entry(kind.into()).or_insert(0) += 1;
    }

    /// Total number of skipped records.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }
}

/// A transcript turned into a pith session.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ImportedSession {
    /// The session record: the model (empty when the file names none), the tool declarations
    /// when the file has them, and the first and last timestamps of the file.
    pub record: SessionRecord,
    /// The log, in file order, satisfying [`crate::validate`].
    pub entries: Vec<Entry>,
    /// The format the file was read as.
    pub format: Format,
    /// What was skipped, synthesised or dropped.
    pub report: ImportReport,
}

impl ImportedSession {
    /// The model the file names, if any.
    pub fn model(&self) -> Option<&str> {
        Some(self.record.model.as_str()).filter(|m| !m.is_empty())
    }

    /// The messages of the log, in order.
    pub fn messages(&self) -> impl Iterator<Item = &pith_core::Message> {
        self.entries.iter().filter_map(Entry::as_message)
    }
}
