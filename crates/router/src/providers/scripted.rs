//! A provider that answers from an explicit script.
//!
//! For tests and offline runs. Replies are consumed in order, whatever the prompt says: scripts
//! are explicit and never keyed on prompt text. Every request is captured for assertions.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use pith_core::{FinishReason, Message, Part, Role, Usage};

use crate::error::ProviderError;
use crate::provider::{Provider, StreamSink};
use crate::request::{ChatRequest, ChatResponse, StreamEvent};

/// One scripted step: a reply or an error.
pub type ScriptStep = Result<ChatResponse, ProviderError>;

/// A provider that replays a queue of replies and errors.
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    name: String,
    script: Mutex<VecDeque<ScriptStep>>,
    requests: Mutex<Vec<ChatRequest>>,
    served: Mutex<usize>,
}

impl ScriptedProvider {
    /// A provider named `name` with an empty script.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// Appends a step to the script.
    pub fn push(&self, step: ScriptStep) {
        lock(&self.script).push_back(step);
    }

    /// Appends a text reply with the given usage.
    pub fn push_text(&self, text: impl Into<String>, usage: Usage) {
        self.push(Ok(Self::text_reply(text, usage)));
    }

    /// Appends an error.
    pub fn push_error(&self, error: ProviderError) {
        self.push(Err(error));
    }

    /// A reply holding `text`, finished with `Stop`.
    pub fn text_reply(text: impl Into<String>, usage: Usage) -> ChatResponse {
        Self::reply(Message::assistant(text), FinishReason::Stop, usage)
    }

    /// A reply holding an arbitrary assistant message.
    pub fn reply(mut message: Message, finish: FinishReason, usage: Usage) -> ChatResponse {
        message.role = Role::Assistant;
        message.usage = Some(usage);
        message.finish = Some(finish);
        ChatResponse {
            model: "scripted".into(),
            message,
            finish,
            usage,
        }
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<ChatRequest> {
        lock(&self.requests).clone()
    }

    /// How many steps remain.
    pub fn remaining(&self) -> usize {
        lock(&self.script).len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

#[async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        &self.name
    }

    async fn chat(
        &self,
        request: ChatRequest,
        sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        lock(&self.requests).push(request.clone());
        let step = lock(&self.script).pop_front();
        let served = {
            let mut s = lock(&self.served);
            *s += 1;
            *s
        };
        let mut response = step.ok_or(ProviderError::ScriptExhausted(served - 1))??;
        response.model = request.model.clone();
        if let (true, Some(sink)) = (request.stream, sink) {
            for part in &response.message.parts {
                match part {
                    Part::Text { text } => sink.on_event(&StreamEvent::TextDelta { text: text.clone() }),
                    Part::Reasoning { text, .. } => {
                        sink.on_event(&StreamEvent::ReasoningDelta { text: text.clone() })
                    }
                    _ => {}
                }
            }
            sink.on_event(&StreamEvent::Usage {
                usage: response.usage,
            });
            sink.on_event(&StreamEvent::Finish {
                reason: response.finish,
            });
        }
        Ok(response)
    }
}
