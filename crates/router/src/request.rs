//! Normalised requests and responses.
//!
//! Providers translate these to and from their wire protocols. Messages are pith's own
//! [`pith_core::Message`]s: system and developer messages carry the instructions, tool results
//! live in tool messages, and every part kind maps to each protocol's nearest equivalent.

use pith_core::{FinishReason, Message, ToolDeclaration, Usage};
use serde::{Deserialize, Serialize};

/// A chat request in pith's normalised form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatRequest {
    /// The model, as the router knows it (`provider/model` or an alias); providers receive the
    /// bare model name.
    pub model: String,
    /// The conversation, instructions first.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(default)]
    pub tools: Vec<ToolDeclaration>,
    /// Maximum output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Stop sequences.
    #[serde(default)]
    pub stop: Vec<String>,
    /// Whether to stream the reply (stream events go to the sink given to the call).
    #[serde(default)]
    pub stream: bool,
}

impl ChatRequest {
    /// A request for `model` with these messages and defaults for everything else.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            messages,
            tools: Vec::new(),
            max_tokens: None,
            temperature: None,
            stop: Vec::new(),
            stream: false,
        }
    }

    /// Declares tools.
    pub fn with_tools(mut self, tools: Vec<ToolDeclaration>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the output limit.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets the temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Sets stop sequences.
    pub fn with_stop(mut self, stop: Vec<String>) -> Self {
        self.stop = stop;
        self
    }

    /// Asks for a streamed reply.
    pub fn streaming(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }
}

/// A complete reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The model that answered, as the provider named it.
    pub model: String,
    /// The assistant message (text, tool calls, reasoning). Its `usage` and `finish` are set.
    pub message: Message,
    /// Why the model stopped.
    pub finish: FinishReason,
    /// Reported usage (zero when the provider reported none).
    pub usage: Usage,
}

/// One event of a streamed reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// A fragment of output text.
    TextDelta {
        /// The fragment.
        text: String,
    },
    /// A fragment of reasoning text.
    ReasoningDelta {
        /// The fragment.
        text: String,
    },
    /// A fragment of a tool call; `id` and `name` arrive with the first fragment of a call.
    ToolCallDelta {
        /// The call's position in the reply.
        index: usize,
        /// The call id, on the first fragment.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool name, on the first fragment.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// A fragment of the JSON arguments.
        arguments: String,
    },
    /// Usage, usually at the end.
    Usage {
        /// The usage.
        usage: Usage,
    },
    /// The reply finished.
    Finish {
        /// Why.
        reason: FinishReason,
    },
}
