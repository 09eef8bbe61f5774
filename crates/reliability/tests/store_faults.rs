//! Store fault injection: a store that fails the Nth write of a kind, or a kind of read, under
//! the real CompactionService and Runtime over a real SQLite file. A failed commit is
//! `PersistFailed` with the view unchanged and counted by the breaker; a failed view load is a
//! typed error with nothing written to the log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use pith_compaction::{CompactionConfig, CompactionError, CompactionService, CompactionTrigger};
use pith_core::{Entry, Message, SessionId, Usage};
use pith_reliability::{FaultPlan, FaultyStore, ReadKind, WriteKind};
use pith_router::{ModelInfo, ModelRouter, ScriptedProvider};
use pith_runtime::{CancellationToken, Runtime, RuntimeError};
use pith_store::{AppendRequest, CreateSession, SessionStore, SqliteStore, StoreError, UsagePurpose};
use serde_json::Value;

const MODEL: &str = "scripted/test";

struct Setup {
    _dir: tempfile::TempDir,
    store: Arc<FaultyStore<SqliteStore>>,
    provider: Arc<ScriptedProvider>,
    router: Arc<ModelRouter>,
    session: SessionId,
}

async fn setup(plan: FaultPlan) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(dir.path().join("pith.db")).await.unwrap();
    let record = sqlite
        .create_session(CreateSession::new(MODEL).with_instruction("Be brief."))
        .await
        .unwrap();
    add_turns(&sqlite, record.id, 0, 6).await;
    let provider = Arc::new(ScriptedProvider::new("scripted"));
    let router = ModelRouter::new()
        .with_provider("scripted", provider.clone())
        .with_model(
            MODEL,
            ModelInfo {
                context_window: 8_000,
                max_output: 1_000,
            },
        );
    Setup {
        _dir: dir,
        store: Arc::new(FaultyStore::new(sqlite, plan)),
        provider,
        router: Arc::new(router),
        session: record.id,
    }
}

async fn add_turns(store: &dyn SessionStore, session: SessionId, from: usize, to: usize) {
    let entries = (from..to)
        .flat_map(|i| {
            [
                Message::user(format!("Request {i}: {}", "detail ".repeat(60))),
                Message::assistant(format!("Reply {i}: {}", "done ".repeat(60))),
            ]
        })
        .map(Entry::Message)
        .collect();
    store.append(session, AppendRequest::new(entries)).await.unwrap();
}

impl Setup {
    fn service(&self) -> CompactionService {
        let config = CompactionConfig::default().with_keep_recent_turns(2);
        CompactionService::new(self.router.clone(), self.store.clone(), config)
    }

    async fn snapshot(&self) -> (Value, Value) {
        let inner = self.store.inner();
        let log = inner.load_log(self.session).await.unwrap();
        let view = inner.load_view(self.session).await.unwrap();
        (
            serde_json::to_value(&log).unwrap(),
            serde_json::to_value(&view).unwrap(),
        )
    }

    async fn compact(&self) -> Result<u64, CompactionError> {
        self.service()
            .compact(self.session, CompactionTrigger::Manual { instructions: None })
            .await
            .map(|r| r.meta.generation)
    }

    fn summary(&self) {
        self.provider.push_text(
            "- the user made requests; replies were given",
            Usage::from_openai(900, 40, 0),
        );
    }
}

#[tokio::test]
async fn the_nth_failed_commit_is_persist_failed_with_the_view_unchanged_and_counted() {
    for nth in [1u64, 2] {
        let s = setup(FaultPlan::none().with_write_failure(WriteKind::Commit, nth)).await;
        if nth == 2 {
            s.summary();
            assert_eq!(s.compact().await.unwrap(), 1, "commit #1 goes through");
            add_turns(s.store.inner(), s.session, 10, 16).await;
        }
        let before = s.snapshot().await;
        s.summary();
        let err = s.compact().await.unwrap_err();
        assert!(
            matches!(&err, CompactionError::PersistFailed(StoreError::Backend(m)) if m.contains("Commit write #")),
            "{err:?}"
        );
        assert!(
            err.to_string().starts_with("persisting the compaction failed"),
            "{err}"
        );
        assert_eq!(
            s.snapshot().await,
            before,
            "log and view are exactly as before (nth = {nth})"
        );
        let breaker = s.store.inner().breaker(s.session).await.unwrap();
        assert_eq!(breaker.consecutive_failures, 1, "the breaker counts the failure");
        assert!(breaker.last_error.unwrap().contains("injected failure"));
        let usage = s.store.inner().usage(s.session).await.unwrap();
        let last = usage.last().unwrap();
        assert_eq!(
            (last.purpose, last.discarded, last.usage.input),
            (UsagePurpose::Summary, true, 900)
        );

        // The next attempt commits, and a success resets the count.
        s.summary();
        assert_eq!(s.compact().await.unwrap(), nth);
        assert_eq!(
            s.store
                .inner()
                .breaker(s.session)
                .await
                .unwrap()
                .consecutive_failures,
            0
        );
    }
}

#[tokio::test]
async fn repeated_commit_failures_open_the_circuit_and_stop_model_calls() {
    let s = setup(FaultPlan::none()).await;
    for attempt in 1..=3u64 {
        s.store
            .set_plan(FaultPlan::none().with_write_failure(WriteKind::Commit, attempt));
        s.summary();
        assert!(matches!(
            s.compact().await,
            Err(CompactionError::PersistFailed(_))
        ));
    }
    let breaker = s.store.inner().breaker(s.session).await.unwrap();
    assert!(breaker.open && breaker.consecutive_failures == 3, "{breaker:?}");
    let calls = s.provider.requests().len();
    s.store.set_plan(FaultPlan::none());
    s.summary();
    assert!(matches!(s.compact().await, Err(CompactionError::CircuitOpen)));
    assert_eq!(
        s.provider.requests().len(),
        calls,
        "an open circuit makes no model call"
    );
    assert_eq!(s.store.writes_reached(WriteKind::Commit), 0);
}

#[tokio::test]
async fn failed_usage_and_breaker_writes_do_not_undo_a_commit_or_fake_one() {
    // A lost ledger line is logged, the compaction itself is whole.
    let s = setup(FaultPlan::none().with_write_failure(WriteKind::Usage, 1)).await;
    s.summary();
    assert_eq!(s.compact().await.unwrap(), 1);
    assert_eq!(s.store.inner().load_view(s.session).await.unwrap().generation, 1);
    assert!(s.store.inner().usage(s.session).await.unwrap().is_empty());

    // A failed commit whose breaker write also fails still leaves the view unchanged.
    let s = setup(
        FaultPlan::none()
            .with_write_failure(WriteKind::Commit, 1)
            .with_write_failure(WriteKind::Breaker, 1),
    )
    .await;
    let before = s.snapshot().await;
    s.summary();
    assert!(matches!(
        s.compact().await,
        Err(CompactionError::PersistFailed(_))
    ));
    assert_eq!(s.snapshot().await, before);
}

#[tokio::test]
async fn a_view_load_failure_is_a_typed_error_and_writes_nothing_to_the_log() {
    let s = setup(FaultPlan::none().with_read_failure(ReadKind::View)).await;
    let before = s.snapshot().await;
    s.summary();
    let err = s.compact().await.unwrap_err();
    assert!(
        matches!(&err, CompactionError::PersistFailed(StoreError::Backend(m)) if m.contains("View read")),
        "{err:?}"
    );
    assert_eq!(s.provider.requests().len(), 0, "no model call without a view");
    for kind in [
        WriteKind::Append,
        WriteKind::Commit,
        WriteKind::Usage,
        WriteKind::Create,
    ] {
        assert_eq!(s.store.writes_reached(kind), 0, "{kind:?}");
    }
    assert_eq!(s.snapshot().await, before);

    // A turn loads the view before anything else: no write at all.
    let runtime = Runtime::builder()
        .router(s.router.clone())
        .store(s.store.clone())
        .build()
        .unwrap();
    let writes = s.store.total_writes_reached();
    let err = runtime
        .run_turn(s.session, "hello", CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RuntimeError::Store(StoreError::Backend(_))),
        "{err:?}"
    );
    assert_eq!(s.store.total_writes_reached(), writes, "no write of any kind");
    assert_eq!(s.snapshot().await, before);
}

#[tokio::test]
async fn a_failed_turn_append_loses_nothing_and_a_rerun_does_not_duplicate() {
    for nth in [1u64, 2] {
        let s = setup(FaultPlan::none().with_write_failure(WriteKind::Append, nth)).await;
        let runtime = Runtime::builder()
            .router(s.router.clone())
            .store(s.store.clone())
            .build()
            .unwrap();
        let (log_before, _) = s.snapshot().await;
        let n = log_before.as_array().unwrap().len();
        s.provider
            .push_text("first answer", Usage::from_openai(100, 5, 0));
        let err = runtime
            .run_turn(s.session, "what now?", CancellationToken::new())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("injected failure"), "{err}");
        let log = s.store.inner().load_log(s.session).await.unwrap();
        assert_eq!(
            log.len(),
            n + (nth as usize - 1),
            "only the appends before the failure"
        );

        s.provider
            .push_text("first answer", Usage::from_openai(100, 5, 0));
        runtime
            .run_turn(s.session, "what now?", CancellationToken::new())
            .await
            .unwrap();
        let log = s.store.inner().load_log(s.session).await.unwrap();
        let added: Vec<String> = log[n..]
            .iter()
            .filter_map(Entry::as_message)
            .map(Message::text_content)
            .collect();
        assert_eq!(added, ["what now?", "first answer"], "nth = {nth}");
    }
}
