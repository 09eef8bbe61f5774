//! Checks the invariants of an imported log.

use std::collections::HashSet;

use pith_core::{Entry, Part, Role};

use crate::error::{ImportError, Location};

/// Checks that a log keeps the invariants every importer guarantees:
///
/// - entry ids are unique;
/// - tool calls are only in assistant messages; tool results only in tool messages, and every
///   tool message holds at least one;
/// - every tool result follows the assistant message holding its call, before any later
///   non-tool entry, and answers a call not answered yet (repeated ids pair by position);
/// - every tool call is answered before the next non-tool entry (or the end of the log).
///
/// A tool result with no call at all is reported here, so callers can detect a broken log.
pub fn validate(entries: &[Entry]) -> Result<(), ImportError> {
    let mut ids = HashSet::with_capacity(entries.len());
    let mut pending: Vec<&str> = Vec::new();
    let invalid = |i: usize, problem: String| ImportError::Invalid {
        location: Location::Path(format!("entry {i}")),
        problem,
    };
    for (i, entry) in entries.iter().enumerate() {
        if !ids.insert(entry.id()) {
            return Err(invalid(i, format!("entry id {} appears twice", entry.id())));
        }
        let message = match entry {
            Entry::Message(m) if m.role == Role::Tool => m,
            other => {
                if let Some(call) = pending.first() {
                    return Err(invalid(
                        i,
                        format!("tool call {call:?} is not answered before this entry"),
                    ));
                }
                if let Entry::Message(m) = other {
                    for part in &m.parts {
                        match part {
                            Part::ToolCall { call_id, .. } if m.role == Role::Assistant => {
                                pending.push(call_id)
                            }
                            Part::ToolCall { call_id, .. } => {
                                return Err(invalid(
                                    i,
                                    format!("a {} message holds tool call {call_id:?}", m.role.as_str()),
                                ))
                            }
                            Part::ToolResult { call_id, .. } => {
                                return Err(invalid(
                                    i,
                                    format!("a {} message holds tool result {call_id:?}", m.role.as_str()),
                                ))
                            }
                            _ => {}
                        }
                    }
                }
                continue;
            }
        };
        let mut results = 0;
        for part in &message.parts {
            match part {
                Part::ToolResult { call_id, .. } => {
                    results += 1;
                    match pending.iter().position(|p| p == call_id) {
                        Some(at) => {
                            pending.remove(at);
                        }
                        None => {
                            return Err(invalid(
                                i,
                                format!("tool result {call_id:?} has no unanswered call before it"),
                            ))
                        }
                    }
                }
                Part::ToolCall { call_id, .. } => {
                    return Err(invalid(i, format!("a tool message holds tool call {call_id:?}")))
                }
                _ => {}
            }
        }
        if results == 0 {
            return Err(invalid(i, "a tool message holds no tool result".into()));
        }
    }
    if let Some(call) = pending.first() {
        return Err(invalid(
            entries.len(),
            format!("tool call {call:?} is never answered"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::Message;
    use serde_json::json;

    fn call(id: &str) -> Entry {
        Entry::Message(Message::new(
            Role::Assistant,
            vec![Part::ToolCall {
                call_id: id.into(),
                name: "bash".into(),
                arguments: json!({}),
            }],
        ))
    }

    fn result(id: &str) -> Entry {
        Entry::Message(Message::tool_result(id, "ok", false))
    }

    #[test]
    fn paired_log_is_valid() {
        validate(&[
            Entry::Message(Message::user("hi")),
            call("a"),
            result("a"),
            call("a"),
            result("a"),
        ])
        .unwrap();
    }

    #[test]
    fn a_result_without_a_call_is_detected() {
        let e = validate(&[Entry::Message(Message::user("hi")), result("a")]).unwrap_err();
        assert!(e.to_string().contains("has no unanswered call"), "{e}");
    }

    #[test]
    fn an_unanswered_call_and_a_late_result_are_detected() {
        let e = validate(&[call("a"), Entry::Message(Message::user("x")), result("a")]).unwrap_err();
        assert!(e.to_string().contains("not answered"), "{e}");
        assert!(validate(&[call("a")]).is_err());
    }

    #[test]
    fn duplicate_ids_are_detected() {
        let e = Entry::Message(Message::user("x"));
        assert!(validate(&[e.clone(), e])
            .unwrap_err()
            .to_string()
            .contains("twice"));
    }
}
