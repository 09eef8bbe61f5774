//! One test per invariant of the design (the property tests are in `properties.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::*;
use pith_compaction::{
    overflow, project, prune, CompactionConfig, CompactionError, CompactionService, CompactionTrigger,
    ProjectionStyle,
};
use pith_core::{
    AgentEvent, CompactionMeta, Entry, EstimateCounter, FinishReason, Message, SessionId, SessionRecord,
    StoredView, Usage,
};
use pith_router::{
    ChatRequest, ChatResponse, ModelInfo, Provider, ProviderError, ScriptedProvider, StreamSink,
};
use pith_store::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, MemoryStore, RevisionExport,
    RevisionInfo, SessionStore, SqliteStore, StoreError, UsageRecord,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn manual() -> CompactionTrigger {
    CompactionTrigger::Manual { instructions: None }
}

fn mixed_session() -> Vec<Message> {
    let mut m = vec![Message::system("You are a careful engineer.")];
    m.extend(turns(0, 4, 1_500));
    m.push(Message::new(
        pith_core::Role::Developer,
        vec![pith_core::Part::text("Prefer small commits.")],
    ));
    m.extend(turns(4, 12, 1_500));
    m
}

#[tokio::test]
async fn invariant_1_a_tool_result_never_leaves_its_call() {
    let h = Harness::new(16_000);
    let mut messages = vec![Message::user("inspect everything")];
    for i in 0..20 {
        let mut two = call(&format!("a{i}"), "read", json!({"path": format!("a{i}.rs")}));
        two.parts
            .extend(call(&format!("b{i}"), "read", json!({"path": format!("b{i}.rs")})).parts);
        messages.push(two);
        messages.push(Message::tool_result(format!("a{i}"), "1".repeat(1_500), false));
        messages.push(Message::tool_result(format!("b{i}"), "2".repeat(1_500), false));
    }
    let id = h.session(messages).await;
    h.service(CompactionConfig::default().with_deterministic_summarizer())
        .compact(id, CompactionTrigger::Proactive)
        .await
        .unwrap();
    let view = view(h.store.as_ref(), id).await;
    assert!(view.compaction.is_some());
    assert_no_split_tool_pair(&project(&view, ProjectionStyle::Reminder));
}

#[tokio::test]
async fn invariant_2_instructions_are_never_summarised_shortened_or_reordered() {
    let h = Harness::new(32_000);
    let id = h.session(mixed_session()).await;
    h.summary("S1");
    h.summary("S2");
    let service = h.service(CompactionConfig::default());
    service.compact(id, manual()).await.unwrap();
    append(h.store.as_ref(), id, turns(20, 30, 1_500)).await;
    service.compact(id, manual()).await.unwrap();
    let log = h.store.load_log(id).await.unwrap();
    let view = view(h.store.as_ref(), id).await;
    assert_eq!(view.generation, 2);
    assert_instructions_intact(&log, &project(&view, ProjectionStyle::Reminder));
    for r in h.provider.requests() {
        let prompt = user_prompt(&r);
        assert!(!prompt.contains("careful engineer") && !prompt.contains("small commits"));
    }
}

#[tokio::test]
async fn invariant_3_user_text_and_tool_arguments_are_never_shortened() {
    let h = Harness::new(32_000);
    let long_user = format!("Requirements: {}", "must-keep ".repeat(700));
    let long_args = "z".repeat(9_000);
    let mut messages = vec![Message::user(long_user.clone())];
    messages.push(call(
        "big",
        "write",
        json!({"path": "a.txt", "content": long_args}),
    ));
    messages.push(Message::tool_result("big", "w".repeat(30_000), false));
    messages.extend(turns(0, 10, 1_000));
    let id = h.session(messages).await;
    h.summary("S");
    h.service(CompactionConfig::default())
        .compact(id, manual())
        .await
        .unwrap();
    let prompt = user_prompt(&h.provider.requests()[0]);
    assert!(
        prompt.contains(&long_user),
        "user text reaches the summarizer whole"
    );
    assert!(
        prompt.contains(&long_args),
        "tool arguments reach the summarizer whole"
    );
    assert!(
        !prompt.contains(&"w".repeat(4_001)),
        "tool-result bodies are clipped"
    );
    let log = h.store.load_log(id).await.unwrap();
    let view = view(h.store.as_ref(), id).await;
    assert_user_text_and_arguments_intact(&log, &project(&view, ProjectionStyle::Reminder));
}

/// A store that fails every commit, delegating everything else to a memory store.
struct FailingCommits(MemoryStore);

#[async_trait]
impl SessionStore for FailingCommits {
    fn backend(&self) -> &'static str {
        "failing"
    }
    async fn create_session(&self, r: CreateSession) -> Result<SessionRecord, StoreError> {
        self.0.create_session(r).await
    }
    async fn get_session(&self, id: SessionId) -> Result<SessionRecord, StoreError> {
        self.0.get_session(id).await
    }
    async fn update_session(&self, r: SessionRecord) -> Result<SessionRecord, StoreError> {
        self.0.update_session(r).await
    }
    async fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        self.0.list_sessions().await
    }
    async fn append(&self, id: SessionId, r: AppendRequest) -> Result<AppendOutcome, StoreError> {
        self.0.append(id, r).await
    }
    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError> {
        self.0.load_view(id).await
    }
    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError> {
        self.0.load_log(id).await
    }
    async fn commit_compaction(&self, _id: SessionId, _r: CommitRequest) -> Result<u64, StoreError> {
        Err(StoreError::Backend("disk full".into()))
    }
    async fn find_compaction(&self, id: SessionId, key: &str) -> Result<Option<CompactionMeta>, StoreError> {
        self.0.find_compaction(id, key).await
    }
    async fn breaker(&self, id: SessionId) -> Result<BreakerState, StoreError> {
        self.0.breaker(id).await
    }
    async fn set_breaker(&self, id: SessionId, s: BreakerState) -> Result<(), StoreError> {
        self.0.set_breaker(id, s).await
    }
    async fn record_usage(&self, id: SessionId, r: UsageRecord) -> Result<(), StoreError> {
        self.0.record_usage(id, r).await
    }
    async fn usage(&self, id: SessionId) -> Result<Vec<UsageRecord>, StoreError> {
        self.0.usage(id).await
    }
    async fn list_revisions(&self, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError> {
        self.0.list_revisions(id).await
    }
    async fn export_revision(&self, id: SessionId, g: u64) -> Result<RevisionExport, StoreError> {
        self.0.export_revision(id, g).await
    }
    async fn delete_session(&self, id: SessionId) -> Result<(), StoreError> {
        self.0.delete_session(id).await
    }
}

#[tokio::test]
async fn invariant_4_failure_leaves_history_unchanged() {
    type Setup = Box<dyn Fn(&Harness)>;
    let cases: Vec<(&str, Setup)> = vec![
        (
            "provider error",
            Box::new(|h: &Harness| {
                h.provider.push_error(ProviderError::Server {
                    status: 500,
                    message: "boom".into(),
                })
            }),
        ),
        ("empty summary", Box::new(|h: &Harness| h.summary(""))),
        (
            "non-success finish",
            Box::new(|h: &Harness| {
                h.provider.push(Ok(ScriptedProvider::reply(
                    Message::assistant("cut"),
                    FinishReason::ContentFilter,
                    Usage::default(),
                )))
            }),
        ),
        (
            "oversized result",
            Box::new(|h: &Harness| h.summary(&"long ".repeat(20_000))),
        ),
    ];
    for (name, setup) in cases {
        let h = Harness::new(32_000);
        let id = h.session(mixed_session()).await;
        setup(&h);
        let log = h.store.load_log(id).await.unwrap();
        let before = view(h.store.as_ref(), id).await;
        let err = h
            .service(CompactionConfig::default())
            .compact(id, manual())
            .await
            .unwrap_err();
        assert!(err.counts_toward_breaker(), "{name}: {err}");
        assert_eq!(h.store.load_log(id).await.unwrap(), log, "{name}: log unchanged");
        assert_eq!(view(h.store.as_ref(), id).await, before, "{name}: view unchanged");
    }

    // Cancellation before the commit.
    let h = Harness::new(32_000);
    let id = h.session(mixed_session()).await;
    let log = h.store.load_log(id).await.unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = h
        .service(CompactionConfig::default())
        .compact_with_cancel(id, manual(), cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, CompactionError::Cancelled));
    assert_eq!(h.store.load_log(id).await.unwrap(), log);

    // A storage error at commit.
    let h = Harness::with_store(32_000, Arc::new(FailingCommits(MemoryStore::new())));
    let id = h.session(mixed_session()).await;
    h.summary("fine summary");
    let log = h.store.load_log(id).await.unwrap();
    let err = h
        .service(CompactionConfig::default())
        .compact(id, manual())
        .await
        .unwrap_err();
    assert!(matches!(err, CompactionError::PersistFailed(_)), "{err}");
    assert_eq!(h.store.load_log(id).await.unwrap(), log);
    assert!(h.store.usage(id).await.unwrap()[0].discarded);
}

#[tokio::test]
async fn invariant_5_every_revision_stays_exportable() {
    let h = Harness::new(32_000);
    let original = mixed_session();
    let id = h.session(original.clone()).await;
    let service = h.service(CompactionConfig::default().with_deterministic_summarizer());
    service.compact(id, manual()).await.unwrap();
    append(h.store.as_ref(), id, turns(30, 40, 1_500)).await;
    service.compact(id, manual()).await.unwrap();
    let revisions = h.store.list_revisions(id).await.unwrap();
    assert_eq!(revisions.len(), 3);
    let gen0 = h.store.export_revision(id, 0).await.unwrap();
    let exported: Vec<Message> = gen0.view.tail_messages().cloned().collect();
    assert_eq!(
        exported, original,
        "generation 0 is the original history, byte for byte"
    );
    let gen1 = h.store.export_revision(id, 1).await.unwrap();
    assert_eq!(gen1.view.generation, 1);
    let log = h.store.load_log(id).await.unwrap();
    let messages = log.iter().filter(|e| e.as_message().is_some()).count();
    assert_eq!(messages, original.len() + 40, "no message ever left the log");
}

#[tokio::test]
async fn invariant_6_same_key_one_record_and_one_summarisation_run() {
    let h = Harness::new(32_000);
    let id = h.session(mixed_session()).await;
    h.summary("only once");
    let service = h.service(CompactionConfig::default());
    let (a, b) = tokio::join!(service.compact(id, manual()), service.compact(id, manual()));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.meta, b.meta);
    assert!(a.noop != b.noop, "exactly one of the two did the work");
    assert_eq!(h.provider.requests().len(), 1);
    let c = service.compact(id, manual()).await.unwrap();
    assert!(c.noop);
    let log = h.store.load_log(id).await.unwrap();
    assert_eq!(log.iter().filter(|e| e.as_compaction().is_some()).count(), 1);
    // The key is found by the store too.
    let found = h
        .store
        .find_compaction(id, &a.meta.idempotency_key)
        .await
        .unwrap();
    assert_eq!(found, Some(a.meta));
}

#[tokio::test]
async fn invariant_7_a_committed_view_fits_window_minus_reserve() {
    for window in [4_096u64, 8_192, 32_768, 200_000] {
        let h = Harness::new(window);
        let id = h.session(turns(0, 60, 6_000)).await;
        h.service(CompactionConfig::default().with_deterministic_summarizer())
            .compact(id, CompactionTrigger::Proactive)
            .await
            .unwrap();
        let view = view(h.store.as_ref(), id).await;
        let tokens = overflow::context_tokens(&view, ProjectionStyle::Reminder, &[], &EstimateCounter);
        assert!(
            tokens <= overflow::threshold(window, None).unwrap(),
            "{window}: {tokens}"
        );
    }
}

#[tokio::test]
async fn invariant_8_every_commit_reaches_the_target_or_fails() {
    let h = Harness::new(16_000);
    let id = h.session(turns(0, 40, 3_000)).await;
    let config = CompactionConfig::default().with_deterministic_summarizer();
    let service = h.service(config.clone());
    let result = service.compact(id, CompactionTrigger::Proactive).await.unwrap();
    let threshold = overflow::threshold(16_000, None).unwrap();
    let target = prune::target(threshold, config.target_ratio);
    assert!(result.tokens_after <= target);
    let after = view(h.store.as_ref(), id).await;
    assert!(!overflow::decide(&after, &[], &EstimateCounter, 16_000, &config)
        .unwrap()
        .is_needed());
    // Compacting again is a no-op: no loop.
    assert!(
        service
            .compact(id, CompactionTrigger::Proactive)
            .await
            .unwrap()
            .noop
    );
    // A summary too big for the target is a failure, never a commit.
    let h = Harness::new(16_000);
    let id = h.session(turns(0, 12, 1_000)).await;
    h.summary(&"word ".repeat(6_000));
    let err = h
        .service(CompactionConfig::default())
        .compact(id, manual())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CompactionError::NoProgress { .. } | CompactionError::DoesNotFit { .. }
        ),
        "{err}"
    );
    assert!(view(h.store.as_ref(), id).await.compaction.is_none());
}

#[tokio::test]
async fn invariant_9_an_open_circuit_makes_no_call_and_survives_reopening_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pith.db");
    let provider = Arc::new(ScriptedProvider::new("scripted"));
    let router = Arc::new(router(provider.clone(), 32_000));
    let id = {
        let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
        let id = new_session(store.as_ref(), mixed_session()).await;
        let sink = Arc::new(pith_core::RecordingSink::new());
        let service = CompactionService::new(router.clone(), store, CompactionConfig::default())
            .with_events(sink.clone());
        for _ in 0..3 {
            provider.push_error(ProviderError::InvalidResponse("bad".into()));
            assert!(service.compact(id, manual()).await.is_err());
        }
        let opened = sink
            .events()
            .iter()
            .filter(|e| matches!(e, AgentEvent::CompactionCircuitOpened { .. }))
            .count();
        assert_eq!(opened, 1);
        id
    };
    // A new process: reopen the file.
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let service = CompactionService::new(router, store.clone(), CompactionConfig::default());
    assert!(service.circuit_status(id).await.unwrap().open);
    provider.push_text("unused", Usage::default());
    assert!(matches!(
        service.compact(id, manual()).await,
        Err(CompactionError::CircuitOpen)
    ));
    assert_eq!(provider.requests().len(), 3, "no model call while open");
    service.reset_circuit(id).await.unwrap();
    assert!(!service.circuit_status(id).await.unwrap().open);
    assert!(!service.compact(id, manual()).await.unwrap().noop);
}

/// A provider that holds every call until `parties` calls are waiting, then runs `meanwhile`.
struct Rendezvous {
    inner: Arc<ScriptedProvider>,
    barrier: tokio::sync::Barrier,
    meanwhile: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

#[async_trait]
impl Provider for Rendezvous {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn chat(
        &self,
        request: ChatRequest,
        sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        if self.barrier.wait().await.is_leader() {
            if let Some(task) = self.meanwhile.lock().await.take() {
                task.await.unwrap();
            }
        }
        self.barrier.wait().await;
        self.inner.chat(request, sink).await
    }
}

async fn race(store_a: Arc<dyn SessionStore>, store_b: Arc<dyn SessionStore>) {
    let inner = Arc::new(ScriptedProvider::new("scripted"));
    inner.push_text("summary A", Usage::default());
    inner.push_text("summary B", Usage::default());
    let id = new_session(store_a.as_ref(), mixed_session()).await;
    let late = Message::user("appended while compacting");
    let late_id = late.id;
    let appender = store_a.clone();
    let meanwhile = tokio::spawn(async move { append(appender.as_ref(), id, vec![late]).await });
    let provider = Arc::new(Rendezvous {
        inner,
        barrier: tokio::sync::Barrier::new(2),
        meanwhile: tokio::sync::Mutex::new(Some(meanwhile)),
    });
    let router = Arc::new(
        pith_router::ModelRouter::new()
            .with_provider("scripted", provider)
            .with_model(
                MODEL,
                ModelInfo {
                    context_window: 32_000,
                    max_output: 1_000,
                },
            ),
    );
    let a = CompactionService::new(router.clone(), store_a.clone(), CompactionConfig::default());
    let b = CompactionService::new(router, store_b, CompactionConfig::default());
    let (ra, rb) = tokio::join!(a.compact(id, manual()), b.compact(id, manual()));
    let results = [ra, rb];
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let conflicts = results
        .iter()
        .filter(|r| matches!(r, Err(CompactionError::Conflict { .. })))
        .count();
    assert_eq!((ok, conflicts), (1, 1), "{results:?}");
    let log = store_a.load_log(id).await.unwrap();
    assert_eq!(
        log.iter().filter(|e| e.as_compaction().is_some()).count(),
        1,
        "exactly one commit"
    );
    let view = store_a.load_view(id).await.unwrap();
    assert!(
        view.tail_messages().any(|m| m.id == late_id),
        "the appended message is in the new view"
    );
    assert_eq!(
        store_a.breaker(id).await.unwrap().consecutive_failures,
        0,
        "a lost race is not a failure"
    );
}

#[tokio::test]
async fn invariant_10_two_processes_commit_exactly_once() {
    // Two services share one store; with a shared Postgres (see below) they are two pools.
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    race(store.clone(), store).await;
}

#[tokio::test]
async fn invariant_10_two_postgres_pools_commit_exactly_once() {
    let Some(url) = pith_testkit::postgres::url() else {
        return;
    };
    let a: Arc<dyn SessionStore> = Arc::new(pith_store::PostgresStore::connect(&url).await.unwrap());
    let b: Arc<dyn SessionStore> = Arc::new(pith_store::PostgresStore::connect(&url).await.unwrap());
    race(a, b).await;
}
