//! SWE-agent trajectories (`*.traj`): `{trajectory[], history[], info}`.
//!
//! `history` is the chat the model saw. Two modes exist:
//!
//! - function calling: assistant entries carry OpenAI-style `tool_calls` and the replies are
//!   `role: tool` entries with `tool_call_ids`;
//! - text commands: the assistant's `action` field holds the command it wrote in its text, and
//!   the next `user` entry is the observation. The action becomes a `bash` tool call (the text is
//!   kept) and the observation its result.

use std::path::Path;

use pith_core::{Part, Role};
use serde_json::{json, Value};

use crate::assemble::{message, Assembler};
use crate::blocks::chat_text;
use crate::error::{ImportError, Location};
use crate::read::{decode_json_string, str_of, take_str};

/// Builds the log from a parsed `.traj` document.
pub(crate) fn from_value(file: &Path, mut doc: Value) -> Result<Assembler, ImportError> {
    let Some(Value::Array(history)) = doc.get_mut("history").map(Value::take) else {
        return Err(ImportError::schema(
            file,
            Location::Path("$.history".into()),
            "a `history` array",
        ));
    };
    let mut asm = Assembler::new();
    let at = asm.time(None);
    // The call id of a text action still waiting for its observation.
    let mut text_action: Option<String> = None;
    for (i, mut entry) in history.into_iter().enumerate() {
        asm.report.records += 1;
        let source = format!("$.history[{i}]");
        let role = str_of(&entry, "role").unwrap_or("").to_string();
        let content = chat_text(entry.get_mut("content").map(Value::take).unwrap_or(Value::Null));
        match role.as_str() {
            "system" => {
                text_action = None;
                asm.push_message(message(Role::System, vec![Part::text(content)], at, source), None);
            }
            "user" => {
                if let Some(call_id) = text_action.take() {
                    asm.push_result(&call_id, content, false, Vec::new(), at, source);
                } else {
                    asm.push_message(message(Role::User, vec![Part::text(content)], at, source), None);
                }
            }
            "assistant" => {
                let mut parts = Vec::new();
                if !content.is_empty() {
                    parts.push(Part::text(content));
                }
                let calls = match entry.get_mut("tool_calls").map(Value::take) {
                    Some(Value::Array(calls)) => calls,
                    _ => Vec::new(),
                };
                for mut call in calls {
                    let mut function = call.get_mut("function").map(Value::take).unwrap_or(Value::Null);
                    let arguments = match function.get_mut("arguments").map(Value::take) {
                        Some(Value::String(raw)) => decode_json_string(raw).0,
                        Some(other) => other,
                        None => Value::Null,
                    };
                    parts.push(Part::ToolCall {
                        call_id: take_str(&mut call, "id").unwrap_or_default(),
                        name: take_str(&mut function, "name").unwrap_or_default(),
                        arguments,
                    });
                }
                text_action = None;
                let action = str_of(&entry, "action").map(str::trim_end).unwrap_or("");
                if !parts.iter().any(|p| matches!(p, Part::ToolCall { .. })) && !action.is_empty() {
                    let call_id = format!("swe-agent-action-{i}");
                    parts.push(Part::ToolCall {
                        call_id: call_id.clone(),
                        name: "bash".into(),
                        arguments: json!({ "command": action }),
                    });
                    asm.report.text_actions += 1;
                    text_action = Some(call_id);
                }
                asm.push_message(message(Role::Assistant, parts, at, source), None);
            }
            "tool" => {
                text_action = None;
                let ids: Vec<String> = entry
                    .get("tool_call_ids")
                    .and_then(Value::as_array)
                    .map(|ids| ids.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .or_else(|| str_of(&entry, "tool_call_id").map(|id| vec![id.to_string()]))
                    .unwrap_or_default();
                if ids.is_empty() {
                    return Err(ImportError::schema(
                        file,
                        Location::Path(format!("{source}.tool_call_ids")),
                        "the ids of the calls a tool entry answers",
                    ));
                }
                for id in ids {
                    asm.push_result(&id, content.clone(), false, Vec::new(), at, source.clone());
                }
            }
            other => {
                return Err(ImportError::schema(
                    file,
                    Location::Path(format!("{source}.role")),
                    format!("a role of system, user, assistant or tool, not {other:?}"),
                ))
            }
        }
    }
    Ok(asm)
}
