//! Turning a recorded session into a replay script.
//!
//! The runtime drives turns: a user input, then model calls and tool calls until a final answer.
//! A recorded session is cut into the same shape: each turn is the messages appended before its
//! input (earlier consecutive user messages, reminders, mid-session instructions), the input, the
//! recorded assistant replies in order, and the recorded results of their tool calls.

use std::collections::HashMap;

use pith_core::{Entry, EstimateCounter, Message, Part, Role, TokenCounter, ToolDeclaration};

/// Text of the reply that closes a turn whose recording ends on a tool call.
pub const CLOSING_REPLY: &str = "(the recorded session ends this turn here)";

/// One assistant reply and the size of the full, uncompacted history before it.
#[derive(Debug, Clone)]
pub struct ScriptedReply {
    /// The recorded assistant message.
    pub message: Message,
    /// Estimated tokens of everything recorded before this reply (instructions and tools included).
    pub history_tokens: u64,
}

/// One turn of a replay.
#[derive(Debug, Clone, Default)]
pub struct ReplayTurn {
    /// Messages appended to the log before the input.
    pub pre: Vec<Message>,
    /// The user input that starts the turn.
    pub input: Option<Message>,
    /// Assistant replies in order.
    pub replies: Vec<ScriptedReply>,
}

/// A whole replay.
#[derive(Debug, Clone, Default)]
pub struct ReplayScript {
    /// Leading system and developer messages.
    pub instructions: Vec<Message>,
    /// Tool declarations (from the recording, or derived from the tool names it uses).
    pub tools: Vec<ToolDeclaration>,
    /// The turns.
    pub turns: Vec<ReplayTurn>,
    /// Recorded tool results by call id, in recorded order (repeated ids are served by position).
    pub results: HashMap<String, Vec<(String, bool)>>,
    /// Tool names used by the recorded calls.
    pub tool_names: Vec<String>,
    /// Tool results longer than the clipping limit: the view carries them clipped.
    pub clipped_results: u64,
    /// Messages the recording had that the replay dropped (empty ones).
    pub dropped: u64,
}

impl ReplayScript {
    /// Number of model calls the script answers.
    pub fn replies(&self) -> usize {
        self.turns.iter().map(|t| t.replies.len()).sum()
    }
}

/// Builds the script of a recorded log.
pub fn build(entries: &[Entry], declared: &[ToolDeclaration]) -> ReplayScript {
    let counter = EstimateCounter;
    let messages: Vec<&Message> = entries.iter().filter_map(Entry::as_message).collect();
    let mut script = ReplayScript::default();
    let lead = messages.iter().take_while(|m| m.role.is_instruction()).count();
    script.instructions = messages[..lead].iter().map(|m| (*m).clone()).collect();
    let mut history: u64 = counter.count_messages(&script.instructions);
    let mut turn = ReplayTurn::default();
    let mut names: Vec<String> = Vec::new();

    for m in &messages[lead..] {
        let m = (*m).clone();
        if m.parts.is_empty() {
            script.dropped += 1;
            continue;
        }
        let tokens = counter.count_message(&m);
        match m.role {
            // A mid-session instruction joins the messages appended before the next input.
            Role::System | Role::Developer => turn.pre.push(m),
            Role::User => {
                if !turn.replies.is_empty() {
                    close(&mut script, &mut turn, history);
                }
                if let Some(previous) = turn.input.take() {
                    turn.pre.push(previous);
                }
                turn.input = Some(m);
            }
            Role::Assistant => {
                for (_, name, _) in m.tool_calls() {
                    if !names.iter().any(|n| n == name) {
                        names.push(name.to_string());
                    }
                }
                if turn.input.is_none() && turn.replies.is_empty() {
                    turn.input = Some(Message::user("(continue)"));
                }
                match turn.replies.last_mut() {
                    // The runtime ends a turn at a reply without tool calls; a recorded run of
                    // assistant messages with nothing in between is one reply.
                    Some(last) if !last.message.has_tool_calls() => last.message.parts.extend(m.parts),
                    _ => turn.replies.push(ScriptedReply {
                        message: m,
                        history_tokens: history,
                    }),
                }
            }
            Role::Tool => {
                for part in &m.parts {
                    if let Part::ToolResult {
                        call_id,
                        content,
                        is_error,
                    } = part
                    {
                        if content
                            .chars()
                            .nth(2 * pith_compaction::prompt::CLIP_KEEP_CHARS)
                            .is_some()
                        {
                            script.clipped_results += 1;
                        }
                        script
                            .results
                            .entry(call_id.clone())
                            .or_default()
                            .push((content.clone(), *is_error));
                    }
                }
            }
        }
        history += tokens;
    }
    if turn.input.is_some() || !turn.replies.is_empty() {
        close(&mut script, &mut turn, history);
    }
    script.tools = if declared.is_empty() {
        names
            .iter()
            .map(|n| ToolDeclaration {
                name: n.clone(),
                description: format!("The recorded {n} tool."),
                parameters: serde_json::json!({"type": "object"}),
            })
            .collect()
    } else {
        declared.to_vec()
    };
    for d in &script.tools {
        if !names.contains(&d.name) {
            names.push(d.name.clone());
        }
    }
    script.tool_names = names;
    // Every request carries the tool declarations.
    let tools = counter.count_tools(&script.tools);
    for reply in script.turns.iter_mut().flat_map(|t| t.replies.iter_mut()) {
        reply.history_tokens += tools;
    }
    script
}

fn close(script: &mut ReplayScript, turn: &mut ReplayTurn, history: u64) {
    let mut done = std::mem::take(turn);
    if done.replies.is_empty() {
        // A turn the recording never answered: its messages join the next turn's prefix.
        turn.pre = done.pre;
        if let Some(input) = done.input {
            turn.pre.push(input);
        }
        return;
    }
    if done.replies.last().is_some_and(|r| r.message.has_tool_calls()) {
        done.replies.push(ScriptedReply {
            message: Message::assistant(CLOSING_REPLY),
            history_tokens: history,
        });
    }
    script.turns.push(done);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> Message {
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall {
                call_id: id.into(),
                name: "bash".into(),
                arguments: json!({"command": "ls"}),
            }],
        )
    }

    #[test]
    fn turns_replies_and_results() {
        let log: Vec<Entry> = vec![
            Message::system("rules").into(),
            Message::user("a").into(),
            Message::user("<system-reminder>r</system-reminder>").into(),
            call("c1").into(),
            Message::tool_result("c1", "out", false).into(),
            Message::assistant("part one").into(),
            Message::assistant("part two").into(),
            Message::user("b").into(),
            call("c1").into(),
            Message::tool_result("c1", "again", true).into(),
        ];
        let s = build(&log, &[]);
        assert_eq!(s.instructions.len(), 1);
        assert_eq!(s.turns.len(), 2);
        assert_eq!(
            s.turns[0].pre.len(),
            1,
            "the first user message moves before the reminder input"
        );
        assert_eq!(s.turns[0].replies.len(), 2);
        assert_eq!(
            s.turns[0].replies[1].message.parts.len(),
            2,
            "consecutive replies merge"
        );
        assert_eq!(
            s.turns[1].replies.last().unwrap().message.text_content(),
            CLOSING_REPLY
        );
        assert_eq!(
            s.results["c1"],
            vec![("out".to_string(), false), ("again".to_string(), true)]
        );
        assert_eq!(s.tool_names, vec!["bash".to_string()]);
        assert!(s.turns[1].replies[0].history_tokens > s.turns[0].replies[0].history_tokens);
    }
}
