//! (b) against the real llama.cpp server: a session longer than the server's `n_ctx` gets the
//! server's real `exceed_context_size_error`, the runtime compacts, retries the same request
//! once, and the retry succeeds. Skips with a message
//! when the local server is not set up; fails under CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use pith::compaction::CompactionConfig;
use pith::core::{AgentEvent, Entry, Message};
use pith::router::{ModelInfo, ModelRouter, OpenAiCompatible, ProviderConfig};
use pith::runtime::fsm::CompactKind;
use pith::store::{AppendRequest, SessionStore, SqliteStore};
use pith::{CancellationToken, Runtime, RuntimeConfig};
use pith_testkit::llama::{self, LlamaServer};

const LOCAL: &str = "local/smollm2";
const N_CTX: u32 = 2_048;

fn history() -> Vec<Entry> {
    let files = [
        "app/login.py",
        "app/session.py",
        "app/limits.py",
        "tests/test_login.py",
    ];
    let mut out = Vec::new();
    for i in 0..18 {
        let file = files[i % files.len()];
        out.push(Message::user(format!(
            "Step {i}: my name is Ada and we are hardening the login flow. Please review {file} and tell me \
             what to change so that password checks are constant-time and failed attempts are limited."
        )));
        out.push(Message::assistant(format!(
            "Step {i}: I reviewed {file}. The password check compares hashes with ==, which leaks timing; \
             use hmac.compare_digest in check_password. Failed attempts are not limited yet: add a \
             counter per user in app/limits.py with a limit of 5 attempts per 15 minutes, and a test in \
             tests/test_login.py that the sixth attempt is rejected. Keep the function names unchanged."
        )));
    }
    out.into_iter().map(Entry::Message).collect()
}

#[tokio::test]
async fn the_real_server_overflow_is_compacted_and_the_retry_succeeds() {
    let _guard = llama::serial().lock().await;
    let Some(server) = LlamaServer::start(N_CTX) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("pith.db")).await.unwrap());
    let provider = Arc::new(
        OpenAiCompatible::stacked(
            "local",
            &ProviderConfig::default().with_base_url(server.base_url()),
        )
        .unwrap(),
    );
    // The catalogue believes in an 8k window, so the local estimate sends the request; only the
    // server knows its slot holds 2,048 tokens.
    let router = ModelRouter::new().with_provider("local", provider).with_model(
        LOCAL,
        ModelInfo {
            context_window: 8_192,
            max_output: 1_024,
        },
    );
    let runtime = Runtime::builder()
        .router(router)
        .store(store.clone())
        // The summary is extracted deterministically: a 135M model asked for a summary within
        // a tenth of a 2k window does not reliably stop in time, and this test is about the
        // runtime's reaction to the server's real overflow, not about summary quality (the
        // compaction crate's own llama test covers model-written summaries).
        .compaction(
            CompactionConfig::default()
                .with_keep_recent_turns(1)
                .with_max_summary_tokens(150)
                .with_deterministic_summarizer(),
        )
        .config(
            RuntimeConfig::default()
                .with_max_output_tokens(48)
                .with_temperature(0.0),
        )
        .build()
        .unwrap();
    let session = runtime
        .create_session(LOCAL, "You are a concise coding assistant.")
        .await
        .unwrap();
    store
        .append(session, AppendRequest::new(history()))
        .await
        .unwrap();
    let mut rx = runtime.subscribe();

    let out = runtime
        .run_turn(
            session,
            "What is my name? Answer in one short sentence.",
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!out.text().trim().is_empty());
    assert_eq!(out.model_requests, 2, "the overflowing request and its one retry");
    let kinds: Vec<CompactKind> = out.compactions.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CompactKind::Reactive]);
    assert_eq!(
        out.compactions[0].strategy,
        pith::core::CompactionStrategy::Deterministic
    );
    assert_eq!(
        runtime.router().context_window(LOCAL),
        u64::from(N_CTX),
        "the server's n_ctx was learned"
    );

    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, AgentEvent::ModelRequest { .. }))
            .count(),
        2
    );
    assert!(
        events.iter().any(|e| matches!(e, AgentEvent::TextDelta { .. })),
        "the reply was streamed"
    );
    assert!(matches!(
        events.last(),
        Some(AgentEvent::TurnFinished { compactions: 1, .. })
    ));
    let view = store.load_view(session).await.unwrap();
    assert_eq!(view.generation, 1);
    assert!(view
        .compaction
        .as_ref()
        .is_some_and(|c| !c.summary.trim().is_empty()));
}
