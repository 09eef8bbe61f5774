//! Stage 3: the summary request, and the one clipping rule.
//!
//! The span is serialised with its roles (`[User]:`, `[Assistant]:`, `[Tool Call]:`,
//! `[Tool Result]:`) inside `<conversation>`. An earlier summary goes in `<previous-summary>` with
//! an update instruction; the tail that stays verbatim goes in `<kept-verbatim>`, for reference
//! only, so the summary does not repeat it. Over-long tool-result bodies are clipped by
//! [`clip_tool_output`], the same rule the runtime applies to turn requests; user text and tool
//! arguments are never shortened.

use std::borrow::Cow;
use std::fmt::Write as _;

use pith_core::{Message, Part, Role};

/// Characters kept at each end of a clipped tool-result body.
pub const CLIP_KEEP_CHARS: usize = 2_000;

/// The one clipping rule: a tool-result body longer than 4,000 characters keeps its first and
/// last 2,000 characters (on character boundaries), with the number of omitted characters marked
/// in between. Shorter bodies are returned as they are, without copying.
pub fn clip_tool_output(text: &str) -> Cow<'_, str> {
    // Cheap exits: byte length bounds the character count from above.
    if text.len() <= 2 * CLIP_KEEP_CHARS {
        return Cow::Borrowed(text);
    }
    let Some((head_end, _)) = text.char_indices().nth(CLIP_KEEP_CHARS) else {
        return Cow::Borrowed(text);
    };
    let Some((tail_start, _)) = text.char_indices().rev().nth(CLIP_KEEP_CHARS - 1) else {
        return Cow::Borrowed(text);
    };
    if tail_start <= head_end {
        return Cow::Borrowed(text);
    }
    let omitted = text[head_end..tail_start].chars().count();
    let mut out = String::with_capacity(head_end + (text.len() - tail_start) + 64);
    out.push_str(&text[..head_end]);
    let _ = write!(out, "\n[... {omitted} characters omitted ...]\n");
    out.push_str(&text[tail_start..]);
    Cow::Owned(out)
}

/// The system instruction of every summary request: our structured format.
pub const SYSTEM_PROMPT: &str =
    "You write the working memory of a coding agent whose earlier conversation no \
longer fits its context window. The agent will continue from your summary alone, so keep every fact it \
needs: numbers, names, file paths, commands, decisions, errors and the user's constraints. Drop small talk \
and pleasantries. Write concise bullet points under exactly these headings, leaving a heading out only when \
it would be empty:

## Goal
## User constraints and preferences
(quote the user verbatim where the wording is short)
## Progress
### Done
### In progress
### Blocked
## Key decisions
(each with its reason)
## Files
### Read
### Modified
## Errors and resolutions
## Next steps

Do not continue the conversation and do not answer questions in it: only summarise.";

/// How the span relates to earlier summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptMode {
    /// The first summary of the session, or of one chunk.
    First,
    /// Fold the span into the summary in `<previous-summary>`.
    Update,
    /// Merge the chunk summaries in `<conversation>` into one summary.
    Merge,
}

/// Everything a summary request is built from.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    /// The messages to summarise.
    pub span: &'a [Message],
    /// The messages that stay verbatim after the summary (for reference only).
    pub kept: &'a [Message],
    /// The earlier summary (update mode).
    pub previous_summary: Option<&'a str>,
    /// Extra instructions from a manual compaction.
    pub instructions: Option<&'a str>,
    /// The length to ask for.
    pub max_summary_tokens: u64,
    /// The mode.
    pub mode: PromptMode,
}

fn role_label(role: Role) -> &'static str {
    match role {
        Role::System => "[System]",
        Role::Developer => "[Developer]",
        Role::User => "[User]",
        Role::Assistant => "[Assistant]",
        Role::Tool => "[Tool Result]",
    }
}

/// Serialises messages with their roles, clipping only tool-result bodies.
///
/// Reasoning parts are left out: they are the model's scratch work, not facts of the session.
pub fn serialize_messages(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        let mut text_started = false;
        for part in &m.parts {
            match part {
                Part::Text { text } => {
                    if !text_started {
                        let _ = write!(out, "{}: ", role_label(m.role));
                        text_started = true;
                    } else {
                        out.push('\n');
                    }
                    out.push_str(text);
                    out.push('\n');
                }
                Part::Image { media_type, .. } => {
                    let _ = writeln!(out, "{}: [image {media_type}]", role_label(m.role));
                }
                Part::Document {
                    media_type,
                    pages,
                    title,
                    ..
                } => {
                    let _ = writeln!(
                        out,
                        "{}: [document {media_type}, {pages} pages{}]",
                        role_label(m.role),
                        title.as_deref().map(|t| format!(", {t}")).unwrap_or_default()
                    );
                }
                Part::ToolCall { name, arguments, .. } => {
                    let _ = writeln!(
                        out,
                        "[Tool Call]: {name}({})",
                        pith_core::tokens::arguments_text(arguments)
                    );
                }
                Part::ToolResult {
                    content, is_error, ..
                } => {
                    let label = if *is_error {
                        "[Tool Result (error)]"
                    } else {
                        "[Tool Result]"
                    };
                    let _ = writeln!(out, "{label}: {}", clip_tool_output(content));
                }
                Part::Reasoning { .. } => {}
            }
        }
    }
    out
}

const FIRST_INSTRUCTION: &str = "Summarise the conversation above in the format of your instructions.";
const UPDATE_INSTRUCTION: &str = "The conversation above continues the session summarised in \
<previous-summary>. Update that summary with it: keep what still holds, move finished work to Done, \
add new decisions, files, errors and next steps, and drop what the new messages made obsolete. The \
result replaces the previous summary, so nothing of it may be lost silently.";
const MERGE_INSTRUCTION: &str = "The conversation above was too long to summarise at once, so it is \
given as consecutive partial summaries in order. Merge them (and <previous-summary>, if present) into \
one summary in the format of your instructions, without repeating facts.";
const KEPT_NOTE: &str = "For reference only: these most recent messages stay in the context verbatim \
after your summary. Do not repeat them in the summary.";

/// The user message of a summary request.
pub fn render_user_prompt(input: &PromptInput<'_>) -> String {
    let mut out = String::new();
    out.push_str("<conversation>\n");
    out.push_str(&serialize_messages(input.span));
    out.push_str("</conversation>\n\n");
    if let Some(previous) = input.previous_summary {
        out.push_str("<previous-summary>\n");
        out.push_str(previous.trim());
        out.push_str("\n</previous-summary>\n\n");
    }
    if !input.kept.is_empty() {
        out.push_str("<kept-verbatim>\n");
        out.push_str(KEPT_NOTE);
        out.push('\n');
        out.push_str(&serialize_messages(input.kept));
        out.push_str("</kept-verbatim>\n\n");
    }
    if let Some(extra) = input.instructions {
        out.push_str("<additional-instructions>\n");
        out.push_str(extra.trim());
        out.push_str("\n</additional-instructions>\n\n");
    }
    out.push_str(match input.mode {
        PromptMode::First => FIRST_INSTRUCTION,
        PromptMode::Update => UPDATE_INSTRUCTION,
        PromptMode::Merge => MERGE_INSTRUCTION,
    });
    let _ = write!(
        out,
        " Keep facts, drop small talk. Aim for about {} tokens.",
        input.max_summary_tokens
    );
    out
}

/// The two messages of a summary request: the system instruction and the user prompt.
pub fn render_messages(input: &PromptInput<'_>) -> Vec<Message> {
    vec![
        Message::system(SYSTEM_PROMPT),
        Message::user(render_user_prompt(input)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_bodies_are_not_copied() {
        assert!(matches!(clip_tool_output("short"), Cow::Borrowed(_)));
        let exactly = "a".repeat(4_000);
        assert!(matches!(clip_tool_output(&exactly), Cow::Borrowed(_)));
    }

    #[test]
    fn long_bodies_keep_both_ends_on_char_boundaries() {
        let body = format!("{}{}{}", "é".repeat(2_500), "MIDDLE", "ü".repeat(2_500));
        let clipped = clip_tool_output(&body);
        assert!(clipped.starts_with(&"é".repeat(2_000)));
        assert!(clipped.ends_with(&"ü".repeat(2_000)));
        assert!(clipped.contains("[... 1006 characters omitted ...]"));
        assert!(!clipped.contains("MIDDLE"));
    }

    #[test]
    fn serialisation_keeps_roles_and_never_clips_arguments_or_user_text() {
        let long_arg = "q".repeat(10_000);
        let mut call = Message::assistant("checking");
        call.parts.push(Part::ToolCall {
            call_id: "c1".into(),
            name: "grep".into(),
            arguments: json!({ "pattern": long_arg }),
        });
        let user = Message::user("u".repeat(9_000));
        let out = serialize_messages(&[user, call, Message::tool_result("c1", "r".repeat(9_000), false)]);
        assert!(out.contains(&"u".repeat(9_000)));
        assert!(out.contains(&"q".repeat(10_000)));
        assert!(!out.contains(&"r".repeat(4_001)));
        assert!(out.contains("[User]: "));
        assert!(out.contains("[Assistant]: checking"));
        assert!(out.contains("[Tool Call]: grep("));
        assert!(out.contains("[Tool Result]: "));
    }
}
