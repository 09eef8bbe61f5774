//! Provider faults end to end: the real OpenAI-compatible provider against wiremock on loopback
//! returns garbage bodies, truncated bodies and streams, 5xx, cut-short and empty summaries.
//! Every one is a failure with nothing committed; the usage the provider reported is recorded
//! in the ledger (marked discarded) even though the summary was thrown away.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use pith_compaction::{CompactionConfig, CompactionError, CompactionService, CompactionTrigger};
use pith_core::{Entry, Message, Role, SessionId};
use pith_router::{ModelInfo, ModelRouter, OpenAiCompatible, ProviderConfig, ProviderError, ProviderLimits};
use pith_runtime::{CancellationToken, Runtime, RuntimeConfig};
use pith_store::{AppendRequest, CreateSession, SessionStore, SqliteStore, UsagePurpose};
use pith_testkit::wire::{json_response, openai_completion, sse_response, OpenAiStream};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const MODEL: &str = "openai/gpt-test";

struct Setup {
    _dir: tempfile::TempDir,
    server: MockServer,
    store: Arc<dyn SessionStore>,
    router: Arc<ModelRouter>,
    session: SessionId,
}

async fn setup() -> Setup {
    let server = MockServer::start().await;
    let limits = ProviderLimits::default()
        .with_max_retries(2)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(5));
    let config = ProviderConfig::default()
        .with_base_url(format!("{}/v1", server.uri()))
        .with_api_key("sk-reliability-test")
        .with_limits(limits);
    let provider = OpenAiCompatible::stacked("openai", &config).unwrap();
    let router = ModelRouter::new()
        .with_provider("openai", Arc::new(provider))
        .with_model(
            MODEL,
            ModelInfo {
                context_window: 8_000,
                max_output: 1_000,
            },
        );
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(dir.path().join("p.db")).await.unwrap());
    let record = store
        .create_session(CreateSession::new(MODEL).with_instruction("Be brief."))
        .await
        .unwrap();
    let entries = (0..6)
        .flat_map(|i| {
            [
                Message::user(format!("Request {i}: {}", "detail ".repeat(60))),
                Message::assistant(format!("Reply {i}: {}", "done ".repeat(60))),
            ]
        })
        .map(Entry::Message)
        .collect();
    store
        .append(record.id, AppendRequest::new(entries))
        .await
        .unwrap();
    Setup {
        _dir: dir,
        server,
        store,
        router: Arc::new(router),
        session: record.id,
    }
}

impl Setup {
    async fn mount(&self, response: ResponseTemplate) {
        self.server.reset().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(response)
            .mount(&self.server)
            .await;
    }

    async fn snapshot(&self) -> Value {
        let log = self.store.load_log(self.session).await.unwrap();
        let view = self.store.load_view(self.session).await.unwrap();
        json!({"log": log, "view": view})
    }

    async fn compact(&self) -> Result<u64, CompactionError> {
        let config = CompactionConfig::default()
            .with_keep_recent_turns(2)
            .with_max_failures(100);
        CompactionService::new(self.router.clone(), self.store.clone(), config)
            .compact(self.session, CompactionTrigger::Manual { instructions: None })
            .await
            .map(|r| r.meta.generation)
    }
}

fn truncated(body: &Value) -> String {
    let text = body.to_string();
    text[..text.len() / 2].to_string()
}

fn with_finish(mut body: Value, reason: &str) -> Value {
    body["choices"][0]["finish_reason"] = json!(reason);
    body
}

#[tokio::test]
async fn summary_call_faults_fail_without_a_commit_and_keep_reported_usage() {
    let s = setup().await;
    let cases: Vec<(&str, ResponseTemplate, Option<u64>)> = vec![
        (
            "garbage body",
            ResponseTemplate::new(200).set_body_raw("<html>upstream hiccup</html>", "text/html"),
            None,
        ),
        (
            "truncated JSON body",
            ResponseTemplate::new(200).set_body_raw(
                truncated(&openai_completion("- a summary", 900, 40, 0)),
                "application/json",
            ),
            None,
        ),
        (
            "truncated stream body",
            OpenAiStream::new()
                .text("- a sum")
                .raw(r#"{"id":"chatcmpl-test","choi"#)
                .response(),
            None,
        ),
        (
            "503 on every attempt",
            json_response(
                503,
                json!({"error": {"message": "overloaded", "type": "server_error"}}),
            ),
            None,
        ),
        (
            "500 on every attempt",
            ResponseTemplate::new(500).set_body_raw("internal error", "text/plain"),
            None,
        ),
        (
            "summary cut short by max_tokens",
            json_response(
                200,
                with_finish(openai_completion("- a summ", 900, 40, 0), "length"),
            ),
            Some(900),
        ),
        (
            "empty summary",
            json_response(200, openai_completion("   ", 700, 1, 0)),
            Some(700),
        ),
        (
            "content filtered",
            json_response(
                200,
                with_finish(openai_completion("", 650, 0, 0), "content_filter"),
            ),
            Some(650),
        ),
    ];
    let before = s.snapshot().await;
    for (name, response, reported) in cases {
        s.mount(response).await;
        let ledger_before = s.store.usage(s.session).await.unwrap().len();
        let err = s.compact().await.unwrap_err();
        assert!(
            matches!(err, CompactionError::SummaryFailed(_)),
            "{name}: {err:?}"
        );
        assert!(!err.to_string().is_empty());
        assert_eq!(s.snapshot().await, before, "{name}: nothing committed");
        let requests = s.server.received_requests().await.unwrap().len();
        assert!(requests >= 1, "{name}: the provider was called");
        let ledger = s.store.usage(s.session).await.unwrap();
        let new = &ledger[ledger_before..];
        assert!(!new.is_empty(), "{name}: the call is in the ledger");
        assert!(new
            .iter()
            .all(|r| r.discarded && r.purpose == UsagePurpose::Summary));
        let input: u64 = new.iter().map(|r| r.usage.input).sum();
        assert_eq!(input, reported.unwrap_or(0), "{name}: reported usage is recorded");
    }
    let breaker = s.store.breaker(s.session).await.unwrap();
    assert_eq!(breaker.consecutive_failures, 8, "each failure counted");

    // The provider recovers: the next compaction commits.
    s.mount(json_response(
        200,
        openai_completion("- the user made six requests", 900, 40, 0),
    ))
    .await;
    assert_eq!(s.compact().await.unwrap(), 1);
    let last = s.store.usage(s.session).await.unwrap().pop().unwrap();
    assert!(!last.discarded && last.usage.input == 900);
}

#[tokio::test]
async fn server_errors_are_retried_before_the_summary_fails() {
    let s = setup().await;
    s.mount(ResponseTemplate::new(502).set_body_raw("bad gateway", "text/plain"))
        .await;
    let err = s.compact().await.unwrap_err();
    match err {
        CompactionError::SummaryFailed(ProviderError::Server { status, .. }) => assert_eq!(status, 502),
        other => panic!("expected a server error, got {other:?}"),
    }
    assert_eq!(
        s.server.received_requests().await.unwrap().len(),
        3,
        "1 try + 2 retries"
    );
}

#[tokio::test]
async fn a_truncated_streamed_turn_reply_is_an_error_and_is_not_persisted() {
    let s = setup().await;
    let runtime = Runtime::builder()
        .router(s.router.clone())
        .store(s.store.clone())
        .config(RuntimeConfig::default().with_stream(true))
        .build()
        .unwrap();
    let streams = [
        OpenAiStream::new().text("Hel").text("lo"),
        OpenAiStream::new()
            .text("Hel")
            .raw(r#"{"id":"chatcmpl-test","choices":[{"ind"#),
        OpenAiStream::new().raw("not json at all"),
    ];
    let n = s.store.load_log(s.session).await.unwrap().len();
    for (i, stream) in streams.iter().enumerate() {
        s.mount(sse_response(stream.body())).await;
        let err = runtime
            .run_turn(s.session, "say hello", CancellationToken::new())
            .await
            .unwrap_err();
        assert!(!err.to_string().is_empty(), "stream {i}");
        let log = s.store.load_log(s.session).await.unwrap();
        let roles: Vec<Role> = log[n..]
            .iter()
            .filter_map(Entry::as_message)
            .map(|m| m.role)
            .collect();
        assert_eq!(
            roles,
            [Role::User],
            "stream {i}: the input once, no partial reply"
        );
    }
    // A complete stream finishes the same turn (the input is not appended again).
    s.mount(
        OpenAiStream::new()
            .text("Hello")
            .finish("stop")
            .usage(120, 2, 0)
            .done()
            .response(),
    )
    .await;
    let outcome = runtime
        .run_turn(s.session, "say hello", CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.text(), "Hello");
    let log = s.store.load_log(s.session).await.unwrap();
    let added: Vec<String> = log[n..]
        .iter()
        .filter_map(Entry::as_message)
        .map(Message::text_content)
        .collect();
    assert_eq!(added, ["say hello", "Hello"]);
}
