//! mini-SWE-agent trajectories (`*.traj.json`): `{info, messages[], trajectory_format}`.
//!
//! Plain chat messages. The action is the single ```` ```bash ```` block of an assistant message
//! (mini-SWE-agent runs a reply only when it holds exactly one such block); the next user message
//! is its observation — normally `<returncode>N</returncode><output>…</output>`, or the harness's
//! timeout message, or the final submission output. The block becomes a `bash` tool call (the
//! text is kept) and the observation its result, an error when the return code is not 0. A reply
//! with zero or several blocks ran nothing: it stays plain text, and the format-error message
//! after it stays a user message.

use std::path::Path;
use std::sync::OnceLock;

use pith_core::{Part, Role};
use regex::Regex;
use serde_json::{json, Value};

use crate::assemble::{message, Assembler};
use crate::blocks::{chat_text, openai_usage};
use crate::error::{ImportError, Location};
use crate::read::str_of;

fn action_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // mini-SWE-agent's own action pattern: ```bash\s*\n(.*?)\n```
    RE.get_or_init(|| match Regex::new(r"(?s)```bash\s*\n(.*?)\n```") {
        Ok(re) => re,
        Err(e) => unreachable!("the action pattern is a valid regex: {e}"),
    })
}

fn returncode_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(
        || match Regex::new(r"^\s*<returncode>\s*(-?\d+)\s*</returncode>") {
            Ok(re) => re,
            Err(e) => unreachable!("the return-code pattern is a valid regex: {e}"),
        },
    )
}

/// The command of an assistant text, when it holds exactly one bash block.
pub(crate) fn bash_action(text: &str) -> Option<&str> {
    let mut blocks = action_regex().captures_iter(text);
    let first = blocks.next()?.get(1)?.as_str();
    if blocks.next().is_some() {
        return None;
    }
    Some(first.trim())
}

/// Builds the log from a parsed `.traj.json` document.
pub(crate) fn from_value(file: &Path, mut doc: Value) -> Result<Assembler, ImportError> {
    let Some(Value::Array(messages)) = doc.get_mut("messages").map(Value::take) else {
        return Err(ImportError::schema(
            file,
            Location::Path("$.messages".into()),
            "a `messages` array",
        ));
    };
    let mut asm = Assembler::new();
    if let Some(model) = doc
        .pointer("/info/config/model/model_name")
        .and_then(Value::as_str)
    {
        asm.model_if_unset(model);
    }
    let at = asm.time(None);
    let mut action: Option<String> = None;
    for (i, mut entry) in messages.into_iter().enumerate() {
        asm.report.records += 1;
        let source = format!("$.messages[{i}]");
        let role = str_of(&entry, "role").unwrap_or("").to_string();
        let content = chat_text(entry.get_mut("content").map(Value::take).unwrap_or(Value::Null));
        match role.as_str() {
            "system" => {
                action = None;
                asm.push_message(message(Role::System, vec![Part::text(content)], at, source), None);
            }
            "user" => match action.take() {
                Some(call_id) => {
                    let failed = returncode_regex()
                        .captures(&content)
                        .and_then(|c| c.get(1))
                        .and_then(|m| m.as_str().parse::<i64>().ok())
                        .is_some_and(|code| code != 0);
                    asm.push_result(&call_id, content, failed, Vec::new(), at, source);
                }
                None => asm.push_message(message(Role::User, vec![Part::text(content)], at, source), None),
            },
            "assistant" => {
                let response = entry.pointer("/extra/response");
                let usage = response.and_then(|r| r.get("usage")).and_then(openai_usage);
                let model = response.and_then(|r| str_of(r, "model")).map(str::to_string);
                let reasoning = response
                    .and_then(|r| r.pointer("/choices/0/message/reasoning"))
                    .and_then(Value::as_str)
                    .filter(|r| !r.is_empty())
                    .map(str::to_string);
                let command = bash_action(&content).map(str::to_string);
                let mut parts = Vec::new();
                if let Some(text) = reasoning {
                    parts.push(Part::Reasoning {
                        text,
                        signature: None,
                    });
                }
                parts.push(Part::text(content));
                action = None;
                if let Some(command) = command {
                    let call_id = format!("mini-swe-agent-action-{i}");
                    parts.push(Part::ToolCall {
                        call_id: call_id.clone(),
                        name: "bash".into(),
                        arguments: json!({ "command": command }),
                    });
                    asm.report.text_actions += 1;
                    action = Some(call_id);
                }
                let mut m = message(Role::Assistant, parts, at, source);
                m.usage = usage;
                m.meta.model = model;
                asm.push_message(m, None);
            }
            other => {
                return Err(ImportError::schema(
                    file,
                    Location::Path(format!("{source}.role")),
                    format!("a role of system, user or assistant, not {other:?}"),
                ))
            }
        }
    }
    Ok(asm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_block_is_an_action() {
        assert_eq!(bash_action("THOUGHT: x\n\n```bash\nls -la\n```"), Some("ls -la"));
        assert_eq!(bash_action("```bash\na\n```\n```bash\nb\n```"), None);
        assert_eq!(bash_action("no block"), None);
    }
}
