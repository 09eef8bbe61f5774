//! Messages and their parts.
//!
//! A [`Message`] is one turn of one speaker. Its content is a list of [`Part`]s so that text,
//! pictures, documents, tool calls, tool results and model reasoning travel together in the order
//! the provider produced them. Tool results always live in [`Role::Tool`] messages; importers
//! normalise formats (such as Anthropic's) that carry them in user messages.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::EntryId;
use crate::usage::Usage;

/// The opening tag that marks injected harness text (a reminder) in a user message.
pub const REMINDER_TAG: &str = "<system-reminder>";

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Operator instructions; never summarised, shortened or reordered.
    System,
    /// Developer instructions (OpenAI's developer role); treated like system instructions.
    Developer,
    /// The human, or harness text injected on the human's side.
    User,
    /// The model.
    Assistant,
    /// Results of tool calls.
    Tool,
}

impl Role {
    /// Whether messages of this role are instructions (system or developer).
    pub fn is_instruction(self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }

    /// A stable lower-case name ("user", "assistant", ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One piece of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A picture, by URL or inline base64 data.
    Image {
        /// MIME type, e.g. `image/png`.
        media_type: String,
        /// A URL, or base64 data.
        source: String,
    },
    /// A document such as a PDF; token estimates count its pages.
    Document {
        /// MIME type, e.g. `application/pdf`.
        media_type: String,
        /// Number of pages.
        pages: u32,
        /// A URL, or base64 data.
        source: String,
        /// Optional title shown to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// A call of a tool by the model.
    ToolCall {
        /// The provider's call id. It may repeat across a log; results pair with the nearest
        /// preceding unanswered call of the same id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments, as JSON.
        arguments: serde_json::Value,
    },
    /// The result of a tool call.
    ToolResult {
        /// The id of the call this answers.
        call_id: String,
        /// The tool's output as text.
        content: String,
        /// Whether the tool failed.
        #[serde(default)]
        is_error: bool,
    },
    /// Model reasoning ("thinking") that some providers require to be sent back.
    Reasoning {
        /// The reasoning text (may be empty when the provider only returns a signature).
        text: String,
        /// An opaque provider signature, when the provider uses one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text { text: text.into() }
    }

    /// The text of a `Text` part, if it is one.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Part::Text { text } => Some(text),
            _ => None,
        }
    }
}

/// Why the model stopped generating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural stop or a stop sequence.
    Stop,
    /// The model wants tools to run.
    ToolCalls,
    /// The output limit was reached.
    Length,
    /// A content filter stopped the output.
    ContentFilter,
    /// The request was cancelled.
    Cancelled,
    /// The provider reported an error.
    Error,
    /// A reason pith does not know.
    Other,
}

impl FinishReason {
    /// Whether the output is complete (a stop or a tool-call request).
    pub fn is_success(self) -> bool {
        matches!(self, FinishReason::Stop | FinishReason::ToolCalls)
    }
}

/// Facts about a message that are not content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageMeta {
    /// The message is a summary written by another tool's compaction (e.g. the user message that
    /// follows a Claude Code `compact_boundary`). It stays in the log as a user message.
    #[serde(default, skip_serializing_if = "is_false")]
    pub external_summary: bool,
    /// The message was synthesised by pith, e.g. an error result for a tool call that never got
    /// one; it was not produced by the model, the user or a tool.
    #[serde(default, skip_serializing_if = "is_false")]
    pub synthetic: bool,
    /// Where the message came from in an imported file (e.g. `line 42`), for diagnostics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The model that produced an assistant message, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One message of a session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Unique id of the log entry.
    pub id: EntryId,
    /// Who speaks.
    pub role: Role,
    /// The content, in order.
    pub parts: Vec<Part>,
    /// When the message was created.
    pub created_at: DateTime<Utc>,
    /// Provider-reported usage of the call that produced this (assistant) message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Why the model stopped, for assistant messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<FinishReason>,
    /// Non-content facts.
    #[serde(default)]
    pub meta: MessageMeta,
}

impl Message {
    /// A message with a fresh id and the current time.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Self {
            id: EntryId::new(),
            role,
            parts,
            created_at: Utc::now(),
            usage: None,
            finish: None,
            meta: MessageMeta::default(),
        }
    }

    /// A message holding one text part.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self::new(role, vec![Part::text(text)])
    }

    /// A system instruction.
    pub fn system(text: impl Into<String>) -> Self {
        Self::text(Role::System, text)
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::text(Role::User, text)
    }

    /// An assistant message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::text(Role::Assistant, text)
    }

    /// A tool message answering `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>, is_error: bool) -> Self {
        Self::new(
            Role::Tool,
            vec![Part::ToolResult {
                call_id: call_id.into(),
                content: content.into(),
                is_error,
            }],
        )
    }

    /// All text parts joined by newlines.
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if let Part::Text { text } = part {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }

    /// Whether this is a reminder: a user message whose first text part, trimmed, starts with
    /// `<system-reminder>`. Summaries written by pith or by another tool are never reminders.
    pub fn is_reminder(&self) -> bool {
        if self.role != Role::User || self.meta.external_summary || self.meta.synthetic {
            return false;
        }
        self.parts
            .iter()
            .find_map(Part::as_text)
            .is_some_and(|t| t.trim_start().starts_with(REMINDER_TAG))
    }

    /// The tool calls this message makes, as (call id, name, arguments).
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &serde_json::Value)> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall {
                call_id,
                name,
                arguments,
            } => Some((call_id.as_str(), name.as_str(), arguments)),
            _ => None,
        })
    }

    /// The tool results this message carries, as (call id, content, is_error).
    pub fn tool_results(&self) -> impl Iterator<Item = (&str, &str, bool)> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolResult {
                call_id,
                content,
                is_error,
            } => Some((call_id.as_str(), content.as_str(), *is_error)),
            _ => None,
        })
    }

    /// Whether the message holds at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.tool_calls().next().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_kind_round_trips_with_stable_tags() {
        let msg = Message::new(
            Role::Assistant,
            vec![
                Part::text("hi"),
                Part::Image {
                    media_type: "image/png".into(),
                    source: "data:...".into(),
                },
                Part::Document {
                    media_type: "application/pdf".into(),
                    pages: 3,
                    source: "u".into(),
                    title: None,
                },
                Part::ToolCall {
                    call_id: "c1".into(),
                    name: "bash".into(),
                    arguments: serde_json::json!({"cmd": "ls"}),
                },
                Part::ToolResult {
                    call_id: "c1".into(),
                    content: "ok".into(),
                    is_error: false,
                },
                Part::Reasoning {
                    text: "hmm".into(),
                    signature: Some("sig".into()),
                },
            ],
        );
        let json = serde_json::to_value(&msg).unwrap();
        let tags: Vec<&str> = json["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            tags,
            [
                "text",
                "image",
                "document",
                "tool_call",
                "tool_result",
                "reasoning"
            ]
        );
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, msg);
    }

    #[test]
    fn reminders_are_user_messages_starting_with_the_tag() {
        assert!(Message::user("  <system-reminder>x</system-reminder>").is_reminder());
        assert!(!Message::user("please <system-reminder>").is_reminder());
        assert!(!Message::assistant("<system-reminder>x").is_reminder());
        let mut summary = Message::user("<system-reminder>summary</system-reminder>");
        summary.meta.external_summary = true;
        assert!(!summary.is_reminder());
    }

    #[test]
    fn finish_reason_success() {
        assert!(FinishReason::Stop.is_success());
        assert!(FinishReason::ToolCalls.is_success());
        assert!(!FinishReason::Length.is_success());
    }
}
