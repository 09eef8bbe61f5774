//! Builds a valid log out of the records of any format.
//!
//! Every importer feeds its messages, results and markers to an [`Assembler`] in file order. The
//! assembler enforces the fidelity rules that are the same for every format:
//!
//! - a tool result is paired, by position, with the first unanswered call of the same id in the
//!   assistant message that is still open (the last assistant message, as long as no user or
//!   assistant message came after it); ids may repeat within a file;
//! - a result with no such call is dropped and reported;
//! - when the open assistant message is closed (by any later non-tool entry, or by the end of the
//!   file), every call still unanswered gets a synthesised error result right after the results
//!   it did get, so every call is answered;
//! - every entry gets a fresh UUID v7 id; the source position goes into `meta.source`.

use chrono::{DateTime, Utc};
use pith_core::{Entry, EntryId, Marker, MarkerKind, Message, ModelChange, Part, Role, ToolDeclaration};

use crate::report::ImportReport;

/// The text of a synthesised result for a call that never got one.
pub const UNANSWERED_RESULT: &str =
    "error: this tool call was never answered (the turn ended before a result was recorded)";

/// The assistant message whose calls may still be answered.
#[derive(Debug)]
struct Open {
    /// Index of the assistant message in `entries`.
    index: usize,
    /// Ids of the calls without a result yet, in call order.
    pending: Vec<String>,
    /// A format-specific key of the open message (Claude's `message.id`, OpenHands' response id).
    key: Option<String>,
}

/// Collects entries in file order and keeps tool calls and results paired.
#[derive(Debug)]
pub(crate) struct Assembler {
    entries: Vec<Entry>,
    open: Option<Open>,
    /// The import report, filled by the importer and the assembler.
    pub(crate) report: ImportReport,
    /// The session's model, when the file names one.
    pub(crate) model: Option<String>,
    /// Tool declarations, when the file has them.
    pub(crate) tools: Vec<ToolDeclaration>,
    first_time: Option<DateTime<Utc>>,
    last_time: Option<DateTime<Utc>>,
}

impl Assembler {
    /// An empty assembler.
    pub(crate) fn new() -> Self {
        Self {
            entries: Vec::new(),
            open: None,
            report: ImportReport::default(),
            model: None,
            tools: Vec::new(),
            first_time: None,
            last_time: None,
        }
    }

    /// The time to stamp on an entry: the record's own, else the previous entry's, else now.
    pub(crate) fn time(&mut self, stamp: Option<DateTime<Utc>>) -> DateTime<Utc> {
        match stamp {
            Some(t) => {
                self.first_time.get_or_insert(t);
                self.last_time = Some(t);
                t
            }
            None => self.last_time.unwrap_or_else(Utc::now),
        }
    }

    /// Sets the session model unless one is already known.
    pub(crate) fn model_if_unset(&mut self, model: &str) {
        if self.model.is_none() && !model.is_empty() {
            self.model = Some(model.to_string());
        }
    }

    /// The key of the open assistant message, if one is open.
    pub(crate) fn open_key(&self) -> Option<&str> {
        self.open.as_ref().and_then(|o| o.key.as_deref())
    }

    /// Appends a user, system, developer or assistant message. Closes the open assistant message
    /// first; an assistant message becomes the new open one, keyed by `key`.
    pub(crate) fn push_message(&mut self, message: Message, key: Option<String>) {
        debug_assert!(message.role != Role::Tool, "tool results go through push_result");
        self.close();
        if message.role == Role::Assistant {
            let pending = message.tool_calls().map(|(id, _, _)| id.to_string()).collect();
            self.open = Some(Open {
                index: self.entries.len(),
                pending,
                key,
            });
        }
        self.entries.push(Entry::Message(message));
    }

    /// Adds parts to the open assistant message (streamed blocks of one response). Gives the parts
    /// back when no assistant message is open.
    pub(crate) fn extend_open(&mut self, parts: Vec<Part>) -> Result<(), Vec<Part>> {
        let Some(open) = self.open.as_mut() else {
            return Err(parts);
        };
        let Some(Entry::Message(message)) = self.entries.get_mut(open.index) else {
            return Err(parts);
        };
        for part in parts {
            if let Part::ToolCall { call_id, .. } = &part {
                open.pending.push(call_id.clone());
            }
            message.parts.push(part);
        }
        Ok(())
    }

    /// The open assistant message, to update its usage, finish reason or model.
    pub(crate) fn open_message(&mut self) -> Option<&mut Message> {
        let index = self.open.as_ref()?.index;
        match self.entries.get_mut(index) {
            Some(Entry::Message(m)) => Some(m),
            _ => None,
        }
    }

    /// Appends the result of a tool call, paired with the first unanswered call of that id in the
    /// open assistant message. `extra` parts (e.g. images) follow the result in the same message.
    /// A result with no such call is dropped, counted and described in a warning.
    pub(crate) fn push_result(
        &mut self,
        call_id: &str,
        content: String,
        is_error: bool,
        extra: Vec<Part>,
        created_at: DateTime<Utc>,
        source: String,
    ) {
        let position = self
            .open
            .as_ref()
            .and_then(|o| o.pending.iter().position(|p| p == call_id));
        let (Some(open), Some(position)) = (self.open.as_mut(), position) else {
            self.report.dropped_results += 1;
            self.report.warnings.push(format!(
                "{source}: result for tool call {call_id:?} has no unanswered call before it; dropped"
            ));
            return;
        };
        open.pending.remove(position);
        let mut parts = vec![Part::ToolResult {
            call_id: call_id.to_string(),
            content,
            is_error,
        }];
        parts.extend(extra);
        let mut message = Message::new(Role::Tool, parts);
        message.created_at = created_at;
        message.meta.source = Some(source);
        self.entries.push(Entry::Message(message));
    }

    /// Appends a marker of another tool's compaction.
    pub(crate) fn push_marker(&mut self, kind: MarkerKind, created_at: DateTime<Utc>, source: String) {
        self.close();
        self.entries.push(Entry::Marker(Marker {
            id: EntryId::new(),
            kind,
            created_at,
            source: Some(source),
        }));
    }

    /// Appends a model change.
    pub(crate) fn push_model_change(&mut self, model: String, created_at: DateTime<Utc>) {
        self.close();
        self.entries.push(Entry::ModelChange(ModelChange {
            id: EntryId::new(),
            model,
            created_at,
        }));
    }

    /// Closes the open assistant message, answering its unanswered calls with synthesised errors.
    pub(crate) fn close(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        if open.pending.is_empty() {
            return;
        }
        let (created_at, source) = match self.entries.get(open.index) {
            Some(Entry::Message(m)) => (m.created_at, m.meta.source.clone()),
            _ => (Utc::now(), None),
        };
        for call_id in open.pending {
            let mut message = Message::tool_result(call_id, UNANSWERED_RESULT, true);
            message.created_at = created_at;
            message.meta.synthetic = true;
            message.meta.source = Some(match &source {
                Some(s) => format!("synthesised for the call at {s}"),
                None => "synthesised".to_string(),
            });
            self.entries.push(Entry::Message(message));
            self.report.synthesized_results += 1;
        }
    }

    /// Closes the log and returns its entries, the report and the first and last timestamps.
    pub(crate) fn finish(mut self) -> Finished {
        self.close();
        Finished {
            entries: self.entries,
            report: self.report,
            model: self.model,
            tools: self.tools,
            first_time: self.first_time,
            last_time: self.last_time,
        }
    }
}

/// The output of [`Assembler::finish`].
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) entries: Vec<Entry>,
    pub(crate) report: ImportReport,
    pub(crate) model: Option<String>,
    pub(crate) tools: Vec<ToolDeclaration>,
    pub(crate) first_time: Option<DateTime<Utc>>,
    pub(crate) last_time: Option<DateTime<Utc>>,
}

/// A message of `role` with `parts`, stamped and sourced.
pub(crate) fn message(role: Role, parts: Vec<Part>, created_at: DateTime<Utc>, source: String) -> Message {
    let mut m = Message::new(role, parts);
    m.created_at = created_at;
    m.meta.source = Some(source);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> Part {
        Part::ToolCall {
            call_id: id.into(),
            name: "bash".into(),
            arguments: json!({}),
        }
    }

    #[test]
    fn unanswered_calls_get_synthetic_errors_before_the_next_message() {
        let mut a = Assembler::new();
        let now = Utc::now();
        a.push_message(
            message(Role::Assistant, vec![call("a"), call("b")], now, "line 1".into()),
            None,
        );
        a.push_result("a", "ok".into(), false, vec![], now, "line 2".into());
        a.push_message(
            message(Role::User, vec![Part::text("next")], now, "line 3".into()),
            None,
        );
        let f = a.finish();
        let roles: Vec<_> = f
            .entries
            .iter()
            .filter_map(|e| e.as_message())
            .map(|m| m.role)
            .collect();
        assert_eq!(roles, [Role::Assistant, Role::Tool, Role::Tool, Role::User]);
        let synth = f.entries[2].as_message().unwrap();
        assert!(synth.meta.synthetic);
        assert_eq!(synth.tool_results().next().unwrap().0, "b");
        assert_eq!(f.report.synthesized_results, 1);
    }

    #[test]
    fn repeated_ids_pair_by_position_and_orphans_are_dropped() {
        let mut a = Assembler::new();
        let now = Utc::now();
        a.push_message(message(Role::Assistant, vec![call("x")], now, "1".into()), None);
        a.push_result("x", "first".into(), false, vec![], now, "2".into());
        a.push_message(message(Role::Assistant, vec![call("x")], now, "3".into()), None);
        a.push_result("x", "second".into(), false, vec![], now, "4".into());
        a.push_result("x", "third".into(), false, vec![], now, "5".into());
        let f = a.finish();
        assert_eq!(f.entries.len(), 4);
        assert_eq!(f.report.dropped_results, 1);
        assert!(f.report.warnings[0].contains("dropped"));
    }
}
