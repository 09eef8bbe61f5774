//! Stage 3: the summary request, and the one clipping rule.
//!
//! The span is serialised with its roles (`[User]:`, `[Assistant]:`, `[Tool Call]:`,
//! `[Tool Result]:`) inside `<conversation>`. An earlier summary goes in `<previous-summary>` with
//! an update instruction; the tail that stays verbatim goes in `<kept-verbatim>`, for reference
//! only, so the summary does not repeat it. Over-long tool-result bodies are clipped by
//! [`clip_tool_output`], the same rule the runtime applies to turn requests; user text and tool
//! arguments are never shortened.

use std::borrow::{Borrow, Cow};
use std::fmt::Write as _;

use pith_core::{Message, Part, Role};

/// Characters kept at each end of a clipped tool-result body.
pub const CLIP_KEEP_CHARS: usize = 2_000;

/// The one clipping rule: a tool-result body longer than 4,000 characters keeps its first and
/// last 2,000 characters (on character boundaries), with the number of omitted characters marked
/// in between. Shorter bodies are returned as they are, without copying.
pub fn clip_tool_output(text: &str) -> Cow<'_, str> {
    let Some(clip) = clip_points(text) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(clip.len(text));
    clip.write(text, &mut out);
    Cow::Owned(out)
}

/// Bytes of [`clip_tool_output`]`(text)`, computed without building it.
pub fn clipped_len(text: &str) -> usize {
    clip_points(text).map_or(text.len(), |clip| clip.len(text))
}

/// Appends [`clip_tool_output`]`(text)` to `out` without an intermediate copy.
pub fn push_clipped(out: &mut String, text: &str) {
    match clip_points(text) {
        Some(clip) => clip.write(text, out),
        None => out.push_str(text),
    }
}

/// Where a long body is clipped: the end of its head, the start of its tail (byte offsets) and
/// the characters in between.
#[derive(Debug, Clone, Copy)]
struct Clip {
    head_end: usize,
    tail_start: usize,
    omitted: usize,
}

const MARK_OPEN: &str = "\n[... ";
const MARK_CLOSE: &str = " characters omitted ...]\n";

impl Clip {
    /// Bytes of the clipped text.
    fn len(self, text: &str) -> usize {
        self.head_end
            + MARK_OPEN.len()
            + decimal_digits(self.omitted)
            + MARK_CLOSE.len()
            + (text.len() - self.tail_start)
    }

    fn write(self, text: &str, out: &mut String) {
        out.push_str(&text[..self.head_end]);
        out.push_str(MARK_OPEN);
        let _ = write!(out, "{}", self.omitted);
        out.push_str(MARK_CLOSE);
        out.push_str(&text[self.tail_start..]);
    }
}

fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// The clip of `text`, or `None` when it is kept whole.
fn clip_points(text: &str) -> Option<Clip> {
    // Cheap exits: byte length bounds the character count from above.
    if text.len() <= 2 * CLIP_KEEP_CHARS {
        return None;
    }
    // Where the head ends and the tail starts; found from the byte offsets when those bytes are
    // ASCII (one byte per character, the usual case), else by walking the characters.
    let bytes = text.as_bytes();
    let head_end = match bytes.get(..=CLIP_KEEP_CHARS) {
        Some(head) if head.is_ascii() => CLIP_KEEP_CHARS,
        _ => text.char_indices().nth(CLIP_KEEP_CHARS)?.0,
    };
    let tail_start = match bytes.get(bytes.len() - CLIP_KEEP_CHARS..) {
        Some(tail) if tail.is_ascii() => bytes.len() - CLIP_KEEP_CHARS,
        _ => text.char_indices().rev().nth(CLIP_KEEP_CHARS - 1)?.0,
    };
    if tail_start <= head_end {
        return None;
    }
    let omitted = text[head_end..tail_start].chars().count();
    Some(Clip {
        head_end,
        tail_start,
        omitted,
    })
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
    let mut out = String::with_capacity(serialized_len_hint(messages));
    write_messages(&mut out, messages);
    out
}

/// A capacity for the serialisation of `messages`: exact for text and tool results, a guess for
/// tool arguments (not measured here, to keep this a walk over lengths only).
fn serialized_len_hint<M: Borrow<Message>>(messages: &[M]) -> usize {
    messages
        .iter()
        .flat_map(|m| &m.borrow().parts)
        .map(|part| match part {
            Part::Text { text } => text.len() + 16,
            Part::ToolCall { name, .. } => name.len() + 80,
            Part::ToolResult { content, .. } => content.len().min(4 * (2 * CLIP_KEEP_CHARS) + 64) + 24,
            Part::Reasoning { .. } => 0,
            Part::Image { .. } | Part::Document { .. } => 64,
        })
        .sum()
}

/// Appends the serialisation of `messages` to `out` (see [`serialize_messages`]).
fn write_messages<M: Borrow<Message>>(out: &mut String, messages: &[M]) {
    for m in messages {
        let m = m.borrow();
        let mut text_started = false;
        for part in &m.parts {
            match part {
                Part::Text { text } => {
                    if !text_started {
                        out.push_str(role_label(m.role));
                        out.push_str(": ");
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
                    out.push_str("[Tool Call]: ");
                    out.push_str(name);
                    out.push('(');
                    pith_core::tokens::push_arguments_text(out, arguments);
                    out.push_str(")\n");
                }
                Part::ToolResult {
                    content, is_error, ..
                } => {
                    out.push_str(if *is_error {
                        "[Tool Result (error)]: "
                    } else {
                        "[Tool Result]: "
                    });
                    push_clipped(out, content);
                    out.push('\n');
                }
                Part::Reasoning { .. } => {}
            }
        }
    }
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
    user_prompt(
        input.span,
        input.kept,
        input.previous_summary,
        input.instructions,
        input.max_summary_tokens,
        input.mode,
    )
}

/// The two messages of a summary request: the system instruction and the user prompt.
pub fn render_messages(input: &PromptInput<'_>) -> Vec<Message> {
    request_messages(render_user_prompt(input))
}

/// The system instruction followed by `user_prompt`.
fn request_messages(user_prompt: String) -> Vec<Message> {
    vec![Message::system(SYSTEM_PROMPT), Message::user(user_prompt)]
}

/// [`PromptInput`] over borrowed messages, as a planned layout holds them: the request is
/// rendered straight from the view, without copying the span and kept messages first.
#[derive(Debug, Clone, Copy)]
pub struct PromptRefs<'a> {
    /// The messages to summarise.
    pub span: &'a [&'a Message],
    /// The messages that stay verbatim after the summary (for reference only).
    pub kept: &'a [&'a Message],
    /// The earlier summary (update mode).
    pub previous_summary: Option<&'a str>,
    /// Extra instructions from a manual compaction.
    pub instructions: Option<&'a str>,
    /// The length to ask for.
    pub max_summary_tokens: u64,
    /// The mode.
    pub mode: PromptMode,
}

/// [`render_user_prompt`] of borrowed messages (byte-identical).
pub fn render_user_prompt_refs(input: &PromptRefs<'_>) -> String {
    user_prompt(
        input.span,
        input.kept,
        input.previous_summary,
        input.instructions,
        input.max_summary_tokens,
        input.mode,
    )
}

/// [`render_messages`] of borrowed messages (byte-identical).
pub fn render_messages_refs(input: &PromptRefs<'_>) -> Vec<Message> {
    request_messages(render_user_prompt_refs(input))
}

/// The user prompt, written into one string sized up front.
fn user_prompt<M: Borrow<Message>>(
    span: &[M],
    kept: &[M],
    previous_summary: Option<&str>,
    instructions: Option<&str>,
    max_summary_tokens: u64,
    mode: PromptMode,
) -> String {
    let capacity = serialized_len_hint(span)
        + serialized_len_hint(kept)
        + previous_summary.map_or(0, str::len)
        + instructions.map_or(0, str::len)
        + KEPT_NOTE.len()
        + UPDATE_INSTRUCTION.len().max(MERGE_INSTRUCTION.len())
        + 256;
    let mut out = String::with_capacity(capacity);
    out.push_str("<conversation>\n");
    write_messages(&mut out, span);
    out.push_str("</conversation>\n\n");
    if let Some(previous) = previous_summary {
        out.push_str("<previous-summary>\n");
        out.push_str(previous.trim());
        out.push_str("\n</previous-summary>\n\n");
    }
    if !kept.is_empty() {
        out.push_str("<kept-verbatim>\n");
        out.push_str(KEPT_NOTE);
        out.push('\n');
        write_messages(&mut out, kept);
        out.push_str("</kept-verbatim>\n\n");
    }
    if let Some(extra) = instructions {
        out.push_str("<additional-instructions>\n");
        out.push_str(extra.trim());
        out.push_str("\n</additional-instructions>\n\n");
    }
    out.push_str(match mode {
        PromptMode::First => FIRST_INSTRUCTION,
        PromptMode::Update => UPDATE_INSTRUCTION,
        PromptMode::Merge => MERGE_INSTRUCTION,
    });
    let _ = write!(
        out,
        " Keep facts, drop small talk. Aim for about {max_summary_tokens} tokens."
    );
    out
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

    /// The clipping rule as first written: the reference the in-place forms must equal.
    fn clip_reference(text: &str) -> String {
        if text.len() <= 2 * CLIP_KEEP_CHARS {
            return text.to_string();
        }
        let Some((head_end, _)) = text.char_indices().nth(CLIP_KEEP_CHARS) else {
            return text.to_string();
        };
        let Some((tail_start, _)) = text.char_indices().rev().nth(CLIP_KEEP_CHARS - 1) else {
            return text.to_string();
        };
        if tail_start <= head_end {
            return text.to_string();
        }
        let omitted = text[head_end..tail_start].chars().count();
        format!(
            "{}\n[... {omitted} characters omitted ...]\n{}",
            &text[..head_end],
            &text[tail_start..]
        )
    }

    proptest::proptest! {
        #[test]
        fn clip_length_and_in_place_clip_equal_the_clipped_text(
            head in "[a-zé😀\n]{0,40}",
            unit in "[a-zé😀\n]{1,3}",
            repeat in 0usize..12_000,
        ) {
            let text = format!("{head}{}", unit.repeat(repeat));
            let reference = clip_reference(&text);
            let clipped = clip_tool_output(&text);
            proptest::prop_assert_eq!(clipped.as_ref(), reference.as_str());
            proptest::prop_assert_eq!(clipped_len(&text), reference.len());
            let mut out = String::from("x");
            push_clipped(&mut out, &text);
            proptest::prop_assert_eq!(&out[1..], reference.as_str());
        }
    }

    #[test]
    fn borrowed_and_owned_messages_render_the_same_request() {
        let args = json!({ "pattern": "a\"b\\c\u{1}é", "n": [1, 2.5, null, true] });
        let mut call = Message::assistant("checking");
        call.parts.push(Part::ToolCall {
            call_id: "c1".into(),
            name: "grep".into(),
            arguments: args.clone(),
        });
        let mut string_call = Message::assistant("");
        string_call.parts = vec![Part::ToolCall {
            call_id: "c2".into(),
            name: "read".into(),
            arguments: json!("{\"path\": \"a.rs\"}"),
        }];
        let span = vec![
            Message::user("u"),
            call,
            string_call,
            Message::tool_result("c1", "é".repeat(9_999), true),
        ];
        let kept = vec![Message::tool_result("c2", "short", false)];
        let span_refs: Vec<&Message> = span.iter().collect();
        let kept_refs: Vec<&Message> = kept.iter().collect();
        for mode in [PromptMode::First, PromptMode::Update, PromptMode::Merge] {
            let owned = render_user_prompt(&PromptInput {
                span: &span,
                kept: &kept,
                previous_summary: Some(" prev "),
                instructions: Some("extra"),
                max_summary_tokens: 500,
                mode,
            });
            let borrowed = render_user_prompt_refs(&PromptRefs {
                span: &span_refs,
                kept: &kept_refs,
                previous_summary: Some(" prev "),
                instructions: Some("extra"),
                max_summary_tokens: 500,
                mode,
            });
            assert_eq!(owned, borrowed);
            assert!(owned.contains(&format!(
                "[Tool Call]: grep({})",
                pith_core::tokens::arguments_text(&args)
            )));
        }
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
