//! The real llama.cpp server (SmolLM2-135M on loopback) as the summary model. Skips with a
//! message when the local runtime is not set up; fails under CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use pith_compaction::{
    CompactionConfig, CompactionError, CompactionService, CompactionTrigger, ModelSummarizer,
};
use pith_core::{CompactionStrategy, Message};
use pith_router::{ModelInfo, ModelRouter, OpenAiCompatible, ProviderConfig};
use pith_store::{MemoryStore, SessionStore, UsagePurpose};
use pith_testkit::llama::{self, LlamaServer};

const LOCAL: &str = "local/smollm2";

fn router(server: &LlamaServer, window: u64) -> Arc<ModelRouter> {
    let config = ProviderConfig::default().with_base_url(server.base_url());
    let provider = Arc::new(OpenAiCompatible::stacked("local", &config).unwrap());
    Arc::new(ModelRouter::new().with_provider("local", provider).with_model(
        LOCAL,
        ModelInfo {
            context_window: window,
            max_output: 2_048,
        },
    ))
}

fn short_span() -> Vec<Message> {
    vec![
        Message::user("My name is Ada. We are fixing the login page in app/login.py."),
        Message::assistant("I read app/login.py: the password check compares hashes with ==."),
        Message::user("Use hmac.compare_digest instead and keep the function name check_password."),
        Message::assistant("Done: check_password now uses hmac.compare_digest. Tests pass."),
        Message::user("Great. Next, add rate limiting."),
        Message::assistant("I will add a limiter to app/login.py next."),
    ]
}

async fn session(store: &dyn SessionStore) -> pith_core::SessionId {
    let record = store
        .create_session(pith_store::CreateSession::new(LOCAL))
        .await
        .unwrap();
    append(store, record.id, short_span()).await;
    record.id
}

#[tokio::test]
async fn a_real_model_summary_commits_end_to_end() {
    let _guard = llama::serial().lock().await;
    let Some(server) = LlamaServer::start(2_048) else {
        return;
    };
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let id = session(store.as_ref()).await;
    // A 135M model rambles through the full format; a manual instruction keeps its answer short
    // enough to finish within the output reserve (a cut-off summary is a failure by design).
    // Greedy decoding with a line break as stop sequence: the small model's first line is its
    // summary, and the reply finishes with a success reason well within the output reserve.
    let router = router(&server, 2_048);
    let summarizer = ModelSummarizer::new(router.clone())
        .with_temperature(0.0)
        .with_stop(vec!["\n".into()]);
    let config = CompactionConfig::default()
        .with_keep_recent_turns(1)
        .with_max_summary_tokens(60)
        .with_summarizer(Arc::new(summarizer));
    let service = CompactionService::new(router, store.clone(), config);
    let trigger = CompactionTrigger::Manual {
        instructions: Some("Reply with one or two short sentences only, then stop.".into()),
    };
    let result = service.compact(id, trigger).await.unwrap();
    assert!(!result.noop);
    assert_eq!(result.strategy, CompactionStrategy::ModelSummary);
    assert!(!result.meta.summary.trim().is_empty());
    assert_eq!(result.meta.summary_model.as_deref(), Some(LOCAL));
    assert!(result.usage.prompt_tokens() > 100, "{:?}", result.usage);
    let view = store.load_view(id).await.unwrap();
    assert_eq!(view.generation, 1);
    let ledger = store.usage(id).await.unwrap();
    assert_eq!(ledger.len(), result.summary_calls as usize);
    assert!(ledger
        .iter()
        .all(|r| !r.discarded && r.purpose == UsagePurpose::Summary));
}

#[tokio::test]
async fn an_n_ctx_too_small_for_any_chunk_fails_typed_and_commits_nothing() {
    let _guard = llama::serial().lock().await;
    let Some(server) = LlamaServer::start(256) else {
        return;
    };
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let id = session(store.as_ref()).await;
    let before = store.load_log(id).await.unwrap();
    // The catalogue believes the model has 8k; the server's slot holds 256 tokens, less than the
    // summary instructions alone.
    let router = router(&server, 8_192);
    let config = CompactionConfig::default().with_keep_recent_turns(1);
    let service = CompactionService::new(router.clone(), store.clone(), config);
    let err = service
        .compact(id, CompactionTrigger::Manual { instructions: None })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CompactionError::DoesNotFit { .. } | CompactionError::SummaryFailed(_)
        ),
        "{err}"
    );
    assert!(err.counts_toward_breaker());
    assert_eq!(store.load_log(id).await.unwrap(), before, "nothing committed");
    assert_eq!(
        router.context_window(LOCAL),
        256,
        "the server's stated limit was learned"
    );
    let ledger = store.usage(id).await.unwrap();
    assert!(
        !ledger.is_empty(),
        "the call that reached the server is in the ledger"
    );
    assert!(ledger.iter().all(|r| r.discarded));
    assert_eq!(store.breaker(id).await.unwrap().consecutive_failures, 1);
}
