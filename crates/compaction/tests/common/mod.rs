//! Shared helpers of the compaction integration tests: a scripted router, sessions, checks.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use pith_compaction::{CompactionConfig, CompactionService};
use pith_core::{Entry, Message, Part, RecordingSink, Role, SessionId, StoredView, Usage};
use pith_router::{ModelInfo, ModelRouter, ScriptedProvider};
use pith_store::{AppendRequest, CreateSession, MemoryStore, SessionStore};
use serde_json::json;

/// The session model of the tests.
pub const MODEL: &str = "scripted/test";

/// A scripted provider in a router, a store and an event sink.
pub struct Harness {
    pub provider: Arc<ScriptedProvider>,
    pub router: Arc<ModelRouter>,
    pub store: Arc<dyn SessionStore>,
    pub sink: Arc<RecordingSink>,
}

pub fn router(provider: Arc<ScriptedProvider>, window: u64) -> ModelRouter {
    ModelRouter::new().with_provider("scripted", provider).with_model(
        MODEL,
        ModelInfo {
            context_window: window,
            max_output: 4_096,
        },
    )
}

impl Harness {
    pub fn new(window: u64) -> Self {
        Self::with_store(window, Arc::new(MemoryStore::new()))
    }

    pub fn with_store(window: u64, store: Arc<dyn SessionStore>) -> Self {
        let provider = Arc::new(ScriptedProvider::new("scripted"));
        Self {
            router: Arc::new(router(provider.clone(), window)),
            provider,
            store,
            sink: Arc::new(RecordingSink::new()),
        }
    }

    pub fn with_router(router: ModelRouter, provider: Arc<ScriptedProvider>) -> Self {
        Self {
            router: Arc::new(router),
            provider,
            store: Arc::new(MemoryStore::new()),
            sink: Arc::new(RecordingSink::new()),
        }
    }

    pub fn service(&self, config: CompactionConfig) -> CompactionService {
        CompactionService::new(self.router.clone(), self.store.clone(), config).with_events(self.sink.clone())
    }

    pub async fn session(&self, messages: Vec<Message>) -> SessionId {
        new_session(self.store.as_ref(), messages).await
    }

    pub fn summary(&self, text: &str) {
        self.provider.push_text(text, Usage::from_openai(1_000, 100, 0));
    }
}

pub async fn new_session(store: &dyn SessionStore, messages: Vec<Message>) -> SessionId {
    let record = store.create_session(CreateSession::new(MODEL)).await.unwrap();
    append(store, record.id, messages).await;
    record.id
}

pub async fn append(store: &dyn SessionStore, id: SessionId, messages: Vec<Message>) {
    if messages.is_empty() {
        return;
    }
    store
        .append(
            id,
            AppendRequest::new(messages.into_iter().map(Entry::Message).collect()),
        )
        .await
        .unwrap();
}

/// An assistant message calling `tool` with `args`.
pub fn call(id: &str, tool: &str, args: serde_json::Value) -> Message {
    let mut m = Message::assistant("");
    m.parts = vec![Part::ToolCall {
        call_id: id.into(),
        name: tool.into(),
        arguments: args,
    }];
    m
}

/// One turn: a request, a read call with its output, and an answer.
pub fn turn(i: usize, output_chars: usize) -> Vec<Message> {
    let id = format!("call-{i}");
    vec![
        Message::user(format!("Turn {i}: please look at src/file_{i}.rs")),
        call(&id, "read", json!({ "path": format!("src/file_{i}.rs") })),
        Message::tool_result(&id, format!("// file {i}\n{}", "x".repeat(output_chars)), false),
        Message::assistant(format!("Answer {i}: I'll keep file_{i} as it is.")),
    ]
}

pub fn turns(from: usize, to: usize, output_chars: usize) -> Vec<Message> {
    (from..to).flat_map(|i| turn(i, output_chars)).collect()
}

/// The text between `<open>` and `</close>` of a prompt.
pub fn section<'a>(prompt: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = prompt.find(&open)? + open.len();
    let end = prompt[start..].find(&close)? + start;
    Some(&prompt[start..end])
}

/// The user prompt of a captured summary request.
pub fn user_prompt(request: &pith_router::ChatRequest) -> String {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(Message::text_content)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every tool result in `messages` has its call earlier in `messages` (invariant 1).
pub fn assert_no_split_tool_pair(messages: &[Message]) {
    let mut open: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for m in messages {
        for (id, _, _) in m.tool_results() {
            let n = open
                .get_mut(id)
                .unwrap_or_else(|| panic!("tool result {id} without its call in the view"));
            assert!(*n > 0, "tool result {id} without an unanswered call");
            *n -= 1;
        }
        for (id, _, _) in m.tool_calls() {
            *open.entry(id.to_string()).or_default() += 1;
        }
    }
}

/// The instruction messages of the log appear in the projection verbatim and in order (invariant 2).
pub fn assert_instructions_intact(log: &[Entry], projected: &[Message]) {
    let original: Vec<&Message> = log
        .iter()
        .filter_map(Entry::as_message)
        .filter(|m| m.role.is_instruction())
        .collect();
    let shown: Vec<&Message> = projected.iter().filter(|m| m.role.is_instruction()).collect();
    assert_eq!(original.len(), shown.len(), "every instruction stays in the view");
    for (a, b) in original.iter().zip(&shown) {
        assert_eq!(*a, *b, "instructions are verbatim and in order");
    }
}

/// Every user text and tool call in the projection equals the logged original (invariant 3).
pub fn assert_user_text_and_arguments_intact(log: &[Entry], projected: &[Message]) {
    let by_id: std::collections::HashMap<_, _> = log
        .iter()
        .filter_map(Entry::as_message)
        .map(|m| (m.id, m))
        .collect();
    for m in projected.iter().filter(|m| !m.meta.synthetic) {
        let original = by_id
            .get(&m.id)
            .expect("every non-synthetic message is a logged one");
        if m.role == Role::User || m.has_tool_calls() {
            assert_eq!(
                &m.parts, &original.parts,
                "user text and tool arguments are never shortened"
            );
        }
    }
}

pub async fn view(store: &dyn SessionStore, id: SessionId) -> StoredView {
    store.load_view(id).await.unwrap()
}
