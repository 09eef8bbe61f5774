//! A deterministic model provider that needs no network.
//!
//! Child processes of the crash and multi-process tests need a model that answers the same way
//! in every process. [`EchoProvider`] answers a summary request (one that carries a
//! `<conversation>` block) with a short bullet summary naming how many characters it read, and
//! any other request with `echo: ` and the last user text; it reports usage estimated from the
//! request's bytes.

use async_trait::async_trait;
use pith_core::{FinishReason, Message, Role, Usage};
use pith_router::{ChatRequest, ChatResponse, Provider, ProviderError, StreamSink};

/// Answers every request deterministically (see the module documentation).
#[derive(Debug, Clone)]
pub struct EchoProvider {
    name: String,
}

impl EchoProvider {
    /// A provider registered under `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}

#[async_trait]
impl Provider for EchoProvider {
    fn name(&self) -> &str {
        &self.name
    }

    async fn chat(
        &self,
        request: ChatRequest,
        _sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        let texts: Vec<String> = request.messages.iter().map(Message::text_content).collect();
        let input_bytes: usize = texts.iter().map(String::len).sum();
        let text = if texts.iter().any(|t| t.contains("<conversation>")) {
            format!("- The user and the assistant worked through {input_bytes} characters of conversation.\n- Keep going with the latest request.")
        } else {
            let last = request
                .messages
                .iter()
                .rev()
                .find(|m| m.role == Role::User)
                .map(Message::text_content)
                .unwrap_or_default();
            format!("echo: {}", last.chars().take(200).collect::<String>())
        };
        let usage = Usage::from_openai(input_bytes.div_ceil(4) as u64, text.len().div_ceil(4) as u64, 0);
        let mut message = Message::assistant(text);
        message.usage = Some(usage);
        message.finish = Some(FinishReason::Stop);
        Ok(ChatResponse {
            model: request.model,
            message,
            finish: FinishReason::Stop,
            usage,
        })
    }
}

/// The model the child processes of the reliability tests use.
pub const ECHO_MODEL: &str = "echo/test";

/// A router with an [`EchoProvider`] named `echo` serving [`ECHO_MODEL`] with `window` tokens.
pub fn echo_router(window: u64) -> pith_router::ModelRouter {
    pith_router::ModelRouter::new()
        .with_provider("echo", std::sync::Arc::new(EchoProvider::new("echo")))
        .with_model(
            ECHO_MODEL,
            pith_router::ModelInfo {
                context_window: window,
                max_output: 1_024,
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn summary_requests_get_a_summary_and_turns_an_echo() {
        let router = echo_router(8_000);
        let turn = ChatRequest::new(ECHO_MODEL, vec![Message::user("hello there")]);
        let reply = router.chat(turn, None).await.map(|r| r.message.text_content());
        assert_eq!(reply.ok().as_deref(), Some("echo: hello there"));
        let summary = ChatRequest::new(ECHO_MODEL, vec![Message::user("<conversation>x</conversation>")]);
        let reply = router.chat(summary, None).await.map(|r| r.message.text_content());
        assert!(reply.is_ok_and(|t| t.starts_with("- The user")));
    }
}
