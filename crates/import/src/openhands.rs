//! OpenHands event lists: a JSON array of `{id, source, action | observation, args | content,
//! extras, cause, tool_call_metadata}`.
//!
//! - `message` actions are user or assistant text by their `source`; a `system` action is the
//!   system prompt (and its `tools` the declarations);
//! - an agent action with `tool_call_metadata` is a tool call (`function_name`, `tool_call_id`,
//!   the arguments from the model response); actions of one model response share an assistant
//!   message, whose text is the action's `thought`;
//! - an agent action without metadata that runs something (`run`, `run_ipython`, `edit`, `read`,
//!   `write`, `browse`, `browse_interactive`) gets a synthesised call id;
//! - an observation is the result of the action its `cause` names; its text is `content`, or
//!   `message` when the content is empty;
//! - environment events, state changes and `null` observations never reach the model and are
//!   skipped.

use std::collections::HashMap;
use std::path::Path;

use pith_core::{Part, Role, ToolDeclaration};
use serde_json::{json, Value};

use crate::assemble::{message, Assembler};
use crate::error::{ImportError, Location};
use crate::read::{decode_json_string, parse_time, str_of, take_str};

const RUNNABLE: [&str; 7] = [
    "run",
    "run_ipython",
    "edit",
    "read",
    "write",
    "browse",
    "browse_interactive",
];

/// Builds the log from a parsed event list.
pub(crate) fn from_value(file: &Path, doc: Value) -> Result<Assembler, ImportError> {
    let Value::Array(events) = doc else {
        return Err(ImportError::schema(
            file,
            Location::Path("$".into()),
            "a JSON array of events",
        ));
    };
    let mut asm = Assembler::new();
    // Action id -> the call id its observation answers.
    let mut calls: HashMap<i64, String> = HashMap::new();
    for (i, mut event) in events.into_iter().enumerate() {
        asm.report.records += 1;
        let source = format!("$[{i}]");
        let at = asm.time(parse_time(event.get("timestamp")));
        if !event.is_object() {
            return Err(ImportError::schema(
                file,
                Location::Path(source),
                "an event object",
            ));
        }
        let from = str_of(&event, "source").unwrap_or("").to_string();
        if let Some(action) = str_of(&event, "action").map(str::to_string) {
            action_event(&mut asm, &mut calls, &mut event, &action, &from, at, source);
        } else if let Some(observation) = str_of(&event, "observation").map(str::to_string) {
            let cause = event.get("cause").and_then(Value::as_i64);
            let call_id = cause.and_then(|c| calls.remove(&c)).or_else(|| {
                event
                    .pointer("/tool_call_metadata/tool_call_id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            match call_id {
                Some(call_id) if observation != "null" => {
                    let mut text = take_str(&mut event, "content").unwrap_or_default();
                    if text.is_empty() {
                        text = take_str(&mut event, "message").unwrap_or_default();
                    }
                    let failed = event.get("success").and_then(Value::as_bool) == Some(false)
                        || observation == "error";
                    asm.push_result(&call_id, text, failed, Vec::new(), at, source);
                }
                _ => asm.report.skip(format!("observation/{observation}")),
            }
        } else {
            return Err(ImportError::schema(
                file,
                Location::Path(source),
                "an event with an `action` or an `observation`",
            ));
        }
    }
    Ok(asm)
}

fn action_event(
    asm: &mut Assembler,
    calls: &mut HashMap<i64, String>,
    event: &mut Value,
    action: &str,
    from: &str,
    at: chrono::DateTime<chrono::Utc>,
    source: String,
) {
    let id = event.get("id").and_then(Value::as_i64);
    let mut args = event.get_mut("args").map(Value::take).unwrap_or(Value::Null);
    match (action, from) {
        ("message", "user") => {
            let text = take_str(&mut args, "content").unwrap_or_default();
            asm.push_message(message(Role::User, vec![Part::text(text)], at, source), None);
        }
        ("system", _) => {
            asm.tools = tools(args.get("tools"));
            let text = take_str(&mut args, "content").unwrap_or_default();
            asm.push_message(message(Role::System, vec![Part::text(text)], at, source), None);
        }
        ("message" | "finish", "agent") if event.get("tool_call_metadata").is_none() => {
            let text = take_str(&mut args, "content")
                .or_else(|| take_str(&mut args, "final_thought"))
                .filter(|t| !t.is_empty())
                .or_else(|| take_str(event, "message"))
                .unwrap_or_default();
            asm.push_message(message(Role::Assistant, vec![Part::text(text)], at, source), None);
        }
        (_, "agent") => {
            let metadata = event.get_mut("tool_call_metadata").map(Value::take);
            let (call_id, name, arguments, response_id, model) = match metadata {
                Some(mut meta) => {
                    let call_id = take_str(&mut meta, "tool_call_id").unwrap_or_default();
                    let name = take_str(&mut meta, "function_name").unwrap_or_else(|| action.to_string());
                    let response = meta.get("model_response");
                    let arguments = response
                        .and_then(|r| r.pointer("/choices/0/message/tool_calls"))
                        .and_then(Value::as_array)
                        .and_then(|calls| calls.iter().find(|c| str_of(c, "id") == Some(call_id.as_str())))
                        .and_then(|c| c.pointer("/function/arguments"))
                        .and_then(Value::as_str)
                        .map(|raw| decode_json_string(raw.to_string()).0);
                    let response_id = response.and_then(|r| str_of(r, "id")).map(str::to_string);
                    let model = response.and_then(|r| str_of(r, "model")).map(str::to_string);
                    (call_id, name, arguments, response_id, model)
                }
                None if RUNNABLE.contains(&action) => {
                    let call_id = format!("openhands-action-{}", id.unwrap_or_default());
                    (call_id, action.to_string(), None, None, None)
                }
                None => {
                    asm.report.skip(format!("action/{action}"));
                    return;
                }
            };
            let thought = take_str(&mut args, "thought").unwrap_or_default();
            let arguments = arguments.unwrap_or_else(|| {
                let mut a = args;
                if let Some(obj) = a.as_object_mut() {
                    obj.remove("thought");
                }
                a
            });
            if let Some(id) = id {
                calls.insert(id, call_id.clone());
            }
            if let Some(m) = model.as_deref() {
                asm.model_if_unset(m);
            }
            let call = Part::ToolCall {
                call_id,
                name,
                arguments,
            };
            let same_response = response_id.is_some() && asm.open_key() == response_id.as_deref();
            let rest = if same_response {
                asm.extend_open(vec![call])
            } else {
                Err(vec![call])
            };
            if let Err(call) = rest {
                let mut parts = Vec::new();
                if !thought.is_empty() {
                    parts.push(Part::text(thought));
                }
                parts.extend(call);
                let mut m = message(Role::Assistant, parts, at, source);
                m.meta.model = model;
                asm.push_message(m, response_id);
            }
        }
        _ => asm.report.skip(format!("action/{action}")),
    }
}

fn tools(tools: Option<&Value>) -> Vec<ToolDeclaration> {
    let mut out = Vec::new();
    for tool in tools.and_then(Value::as_array).into_iter().flatten() {
        let f = tool.get("function").unwrap_or(tool);
        if let Some(name) = str_of(f, "name") {
            out.push(ToolDeclaration {
                name: name.to_string(),
                description: str_of(f, "description").unwrap_or("").to_string(),
                parameters: f.get("parameters").cloned().unwrap_or_else(|| json!({})),
            });
        }
    }
    out
}
