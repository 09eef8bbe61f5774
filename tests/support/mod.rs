//! Shared set-up of the end-to-end tests: a wiremock OpenAI-compatible server that answers turn
//! requests and summary requests from two scripted queues, a SQLite store in a temp dir, and a
//! runtime wired to both.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pith::compaction::CompactionConfig;
use pith::core::{AgentEvent, Entry, Message, Role};
use pith::router::config::{ProviderConfig, ProviderLimits};
use pith::router::{ModelInfo, ModelRouter};
use pith::runtime::{FnTool, Runtime, RuntimeConfig, ToolContext, ToolError};
use pith::store::{SessionStore, SqliteStore};
use serde_json::{json, Value};
use tempfile::TempDir;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The turn model, as the router names it.
pub const MODEL: &str = "mock/gpt-test";
/// The summary model (a large window, so summaries never need chunking).
pub const SUMMARY_MODEL: &str = "mock/summarizer";

/// Answers turn requests and summary requests from separate queues, in order. An empty queue
/// answers 500 with a message naming the queue, so a test that sends more requests than it
/// scripted fails loudly.
#[derive(Default)]
pub struct Script {
    turns: Mutex<VecDeque<Reply>>,
    summaries: Mutex<VecDeque<Reply>>,
}

/// A scripted answer, built from the request it answers (so reported usage is realistic).
pub type Reply = Box<dyn Fn(&Value) -> ResponseTemplate + Send + Sync>;

/// The prompt size a server would report for a request: its JSON bytes / 4.
pub fn prompt_tokens(body: &Value) -> u64 {
    (body["messages"].to_string().len() as u64 + body["tools"].to_string().len() as u64).div_ceil(4)
}

impl Script {
    pub fn turn(&self, r: Reply) {
        self.turns.lock().unwrap().push_back(r);
    }
    pub fn summary(&self, r: Reply) {
        self.summaries.lock().unwrap().push_back(r);
    }
    pub fn remaining(&self) -> (usize, usize) {
        (
            self.turns.lock().unwrap().len(),
            self.summaries.lock().unwrap().len(),
        )
    }
}

struct Responder(Arc<Script>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let summary = body["model"] == "summarizer";
        let queue = if summary { &self.0.summaries } else { &self.0.turns };
        let next = queue.lock().unwrap().pop_front();
        next.map(|reply| reply(&body)).unwrap_or_else(|| {
            ResponseTemplate::new(500).set_body_json(json!({"error": {"message": format!(
                "test script exhausted for {} requests", if summary { "summary" } else { "turn" })}}))
        })
    }
}

/// One end-to-end environment.
pub struct Env {
    pub server: MockServer,
    pub db: std::path::PathBuf,
    pub script: Arc<Script>,
    pub store: Arc<SqliteStore>,
    pub runtime: Runtime,
    pub window: u64,
    _dir: TempDir,
}

/// A tool that returns `chars` characters of a file-like text for any path.
pub fn read_tool(
    chars: usize,
) -> FnTool<impl Fn(Value, ToolContext) -> std::future::Ready<Result<String, ToolError>> + Send + Sync> {
    FnTool::new(
        "read_file",
        "Reads a file and returns its contents.",
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        move |args: Value, _ctx: ToolContext| {
            let path = args["path"].as_str().unwrap_or("?").to_string();
            let line = format!("{path}: fn main() {{ println!(\"hello\"); }}\n");
            let mut body = String::with_capacity(chars);
            while body.len() + line.len() <= chars {
                body.push_str(&line);
            }
            std::future::ready(Ok(body))
        },
    )
}

/// Provider settings for tests: no retries, so HTTP request counts are exact.
pub fn provider_config(base_url: String) -> ProviderConfig {
    ProviderConfig::default().with_base_url(base_url).with_limits(
        ProviderLimits::default()
            .with_max_retries(0)
            .with_request_timeout(Some(Duration::from_secs(30))),
    )
}

/// A router whose `mock` provider is the mock server at `uri`; the turn model has `window` tokens.
pub fn router_for(uri: &str, window: u64) -> ModelRouter {
    ModelRouter::builder()
        .openai("mock", provider_config(format!("{uri}/v1")))
        .model(
            MODEL,
            ModelInfo {
                context_window: window,
                max_output: 256,
            },
        )
        .model(
            SUMMARY_MODEL,
            ModelInfo {
                context_window: 128_000,
                max_output: 4_096,
            },
        )
        .build()
        .unwrap()
}

/// Starts the mock server and builds a runtime over a SQLite store in a temp dir; the turn model
/// has `window` tokens.
pub async fn env(
    window: u64,
    compaction: CompactionConfig,
    config: RuntimeConfig,
    tools: Vec<Arc<dyn pith::Tool>>,
) -> Env {
    let server = MockServer::start().await;
    let script = Arc::new(Script::default());
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Responder(script.clone()))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pith.db");
    let store = Arc::new(SqliteStore::open(&db).await.unwrap());
    let router = router_for(&server.uri(), window);
    let mut builder = Runtime::builder()
        .router(router)
        .store(store.clone())
        .compaction(compaction.with_summary_model(SUMMARY_MODEL))
        .config(config);
    for t in tools {
        builder = builder.tool_arc(t);
    }
    Env {
        server,
        db,
        script,
        store,
        runtime: builder.build().unwrap(),
        window,
        _dir: dir,
    }
}

/// A text answer; the reported prompt size is the request's.
pub fn text(reply: &str) -> Reply {
    let reply = reply.to_string();
    Box::new(move |body| {
        pith_testkit::wire::json_response(
            200,
            pith_testkit::wire::openai_completion(&reply, prompt_tokens(body), 12, 0),
        )
    })
}

/// A streamed text answer in two deltas.
pub fn streamed_text(first: &str, second: &str) -> Reply {
    let (first, second) = (first.to_string(), second.to_string());
    Box::new(move |body| {
        pith_testkit::wire::OpenAiStream::new()
            .text(&first)
            .text(&second)
            .finish("stop")
            .usage(prompt_tokens(body), 7, 0)
            .done()
            .response()
    })
}

/// A call of `read_file` on `path`.
pub fn tool_call(id: &str, path: &str) -> Reply {
    let (id, args) = (id.to_string(), json!({ "path": path }).to_string());
    Box::new(move |body| {
        pith_testkit::wire::json_response(
            200,
            pith_testkit::wire::openai_tool_completion(&[(&id, "read_file", &args)], prompt_tokens(body), 9),
        )
    })
}

/// A summary.
pub fn summary(text: &str) -> Reply {
    let text = text.to_string();
    Box::new(move |body| {
        pith_testkit::wire::json_response(
            200,
            pith_testkit::wire::openai_completion(&text, prompt_tokens(body), 60, 0),
        )
    })
}

/// OpenAI's overflow answer, claiming the model's window is `limit` and the request `requested`.
pub fn overflow(limit: u64, requested: u64) -> Reply {
    Box::new(move |_| {
        pith_testkit::wire::json_response(400, pith_testkit::wire::openai_overflow_body(limit, requested))
    })
}

/// An overflow answer that states no sizes.
pub fn overflow_plain() -> Reply {
    Box::new(|_| {
        pith_testkit::wire::json_response(
            400,
            json!({"error": {"message": "This model's maximum context length was exceeded. Please reduce the length of the messages.",
                "type": "invalid_request_error", "code": "context_length_exceeded"}}),
        )
    })
}

/// A server error (not retried: the test provider has no retries).
pub fn server_error() -> Reply {
    Box::new(|_| {
        ResponseTemplate::new(500).set_body_json(json!({"error": {"message": "summarizer is down"}}))
    })
}

impl Env {
    /// The SQLite file of the store.
    pub fn store_path(&self) -> std::path::PathBuf {
        self.db.clone()
    }

    /// Another runtime (a restarted process) over the same mock server, with `store`.
    pub fn runtime_with(&self, store: Arc<dyn SessionStore>, tools: Vec<Arc<dyn pith::Tool>>) -> Runtime {
        let mut builder = Runtime::builder()
            .router(router_for(&self.server.uri(), self.window))
            .store(store)
            .compaction(CompactionConfig::default().with_summary_model(SUMMARY_MODEL))
            .config(RuntimeConfig::default().with_stream(false));
        for t in tools {
            builder = builder.tool_arc(t);
        }
        builder.build().unwrap()
    }

    /// Request bodies the server received: (turn requests, summary requests).
    pub async fn requests(&self) -> (Vec<Value>, Vec<Value>) {
        let all = pith_testkit::wire::openai_requests(&self.server).await;
        all.into_iter().partition(|b| b["model"] != "summarizer")
    }

    /// Checks every turn request: tool calls and results paired, exactly `instructions` first and
    /// verbatim, the estimate within the window. Returns each request's estimate.
    pub async fn check_turn_requests(&self, instructions: &str) -> Vec<u64> {
        let (turns, _) = self.requests().await;
        turns
            .iter()
            .map(|b| {
                pith_testkit::wire::assert_instructions(b, &[instructions]);
                pith_testkit::wire::check_openai_request(b, self.window)
            })
            .collect()
    }

    /// The session's log, messages only.
    pub async fn messages(&self, session: pith::core::SessionId) -> Vec<Message> {
        self.store
            .load_log(session)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                Entry::Message(m) => Some(m),
                _ => None,
            })
            .collect()
    }
}

/// Every tool call in `messages` has exactly one result after it, before the next user or
/// assistant message.
pub fn assert_log_pairs(messages: &[Message]) {
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m.role {
            Role::Tool => {
                for (id, _, _) in m.tool_results() {
                    let pos = open
                        .iter()
                        .position(|c| c == id)
                        .unwrap_or_else(|| panic!("result {i} answers no open call {id}"));
                    open.remove(pos);
                }
            }
            Role::User | Role::Assistant => {
                assert!(open.is_empty(), "message {i} follows unanswered calls {open:?}");
                open.extend(m.tool_calls().map(|(id, _, _)| id.to_string()));
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "unanswered calls at the end: {open:?}");
}

/// Drains every event received so far.
pub fn drain(rx: &mut tokio::sync::broadcast::Receiver<AgentEvent>) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// The stable type names of events.
pub fn kinds(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}
