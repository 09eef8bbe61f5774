//! (d) Cancellation mid-turn leaves a log that loads and continues.
//! (e) The driver dropped between the model's reply and its persistence (a simulated crash), the
//!     turn rerun: no duplicate entries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pith::compaction::CompactionConfig;
use pith::core::{AgentEvent, CompactionMeta, Entry, Role, SessionId, SessionRecord, StoredView};
use pith::runtime::FnTool;
use pith::store::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, RevisionExport, RevisionInfo,
    SessionStore, SqliteStore, StoreError, UsageRecord,
};
use pith::{CancellationToken, RuntimeConfig, RuntimeError, Tool, ToolContext, ToolError};
use serde_json::{json, Value};
use support::*;
use tokio::sync::Notify;

fn slow_tool() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "slow_build",
        "Runs the full build (slow).",
        json!({"type": "object"}),
        |_args: Value, ctx: ToolContext| async move {
            tokio::select! {
                _ = ctx.cancel.cancelled() => Err(ToolError::failed("stopped")),
                _ = tokio::time::sleep(Duration::from_secs(60)) => Ok("built".to_string()),
            }
        },
    ))
}

fn two_calls() -> Reply {
    Box::new(|body| {
        pith_testkit::wire::json_response(
            200,
            pith_testkit::wire::openai_tool_completion(
                &[
                    ("c1", "read_file", r#"{"path":"build.rs"}"#),
                    ("c2", "slow_build", "{}"),
                ],
                prompt_tokens(body),
                20,
            ),
        )
    })
}

/// Cancels `cancel` as soon as an event matching `when` is published.
fn cancel_on(
    rx: tokio::sync::broadcast::Receiver<AgentEvent>,
    cancel: CancellationToken,
    when: fn(&AgentEvent) -> bool,
) -> tokio::task::JoinHandle<()> {
    let mut rx = rx;
    tokio::spawn(async move {
        while let Ok(e) = rx.recv().await {
            if when(&e) {
                cancel.cancel();
                return;
            }
        }
    })
}

#[tokio::test]
async fn cancelling_during_tool_calls_keeps_calls_paired_and_the_session_continues() {
    let env = env(
        8_192,
        CompactionConfig::default(),
        RuntimeConfig::default().with_stream(false),
        vec![Arc::new(read_tool(400)), slow_tool()],
    )
    .await;
    let rt = &env.runtime;
    let session = rt
        .create_session(MODEL, "You are a build assistant.")
        .await
        .unwrap();
    env.script.turn(two_calls());
    let cancel = CancellationToken::new();
    let watcher = cancel_on(
        rt.subscribe(),
        cancel.clone(),
        |e| matches!(e, AgentEvent::ToolResult { name, .. } if name == "read_file"),
    );
    let err = rt.run_turn(session, "Build it.", cancel).await.unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    watcher.await.unwrap();

    // The reply is persisted with a result for each call: the finished one and a synthetic error.
    let log = env.messages(session).await;
    assert_log_pairs(&log);
    let roles: Vec<Role> = log.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::System, Role::User, Role::Assistant, Role::Tool, Role::Tool]
    );
    let slow = &log[4];
    assert!(slow.meta.synthetic);
    assert!(slow
        .tool_results()
        .all(|(id, _, is_error)| id == "c2" && is_error));
    assert!(!log[3].tool_results().any(|(_, _, e)| e));

    // The log loads and the session continues.
    env.store.load_view(session).await.unwrap();
    env.script
        .turn(text("The build was interrupted; build.rs looks fine."));
    let out = rt
        .run_turn(session, "What happened?", CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text(), "The build was interrupted; build.rs looks fine.");
    let sizes = env.check_turn_requests("You are a build assistant.").await;
    assert_eq!(sizes.len(), 2);
}

#[tokio::test]
async fn cancelling_while_waiting_for_the_model_persists_only_the_input() {
    let env = env(
        8_192,
        CompactionConfig::default(),
        RuntimeConfig::default().with_stream(false),
        vec![],
    )
    .await;
    let rt = &env.runtime;
    let session = rt.create_session(MODEL, "Be brief.").await.unwrap();
    env.script.turn(Box::new(|body| {
        pith_testkit::wire::json_response(
            200,
            pith_testkit::wire::openai_completion("late", prompt_tokens(body), 1, 0),
        )
        .set_delay(Duration::from_secs(3))
    }));
    let cancel = CancellationToken::new();
    let watcher = cancel_on(rt.subscribe(), cancel.clone(), |e| {
        matches!(e, AgentEvent::ModelRequest { .. })
    });
    let started = std::time::Instant::now();
    let err = rt.run_turn(session, "Slow question?", cancel).await.unwrap_err();
    assert!(matches!(err, RuntimeError::Cancelled));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "cancellation did not wait for the reply"
    );
    watcher.await.unwrap();
    let log = env.messages(session).await;
    assert_eq!(
        log.iter().map(|m| m.role).collect::<Vec<_>>(),
        [Role::System, Role::User]
    );

    // Asking the same question again continues that turn; the input is not stored twice.
    env.script.turn(text("Now answered."));
    let out = rt
        .run_turn(session, "Slow question?", CancellationToken::new())
        .await
        .unwrap();
    assert!(out.resumed);
    let log = env.messages(session).await;
    assert_eq!(
        log.iter().map(|m| m.role).collect::<Vec<_>>(),
        [Role::System, Role::User, Role::Assistant]
    );
}

/// A store that "crashes" (never returns) when asked to persist a final answer, once armed.
struct CrashingStore {
    inner: Arc<SqliteStore>,
    armed: AtomicBool,
    crashed: Notify,
}

#[async_trait]
impl SessionStore for CrashingStore {
    fn backend(&self) -> &'static str {
        "crashing"
    }
    async fn create_session(&self, r: CreateSession) -> Result<SessionRecord, StoreError> {
        self.inner.create_session(r).await
    }
    async fn get_session(&self, id: SessionId) -> Result<SessionRecord, StoreError> {
        self.inner.get_session(id).await
    }
    async fn update_session(&self, r: SessionRecord) -> Result<SessionRecord, StoreError> {
        self.inner.update_session(r).await
    }
    async fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        self.inner.list_sessions().await
    }
    async fn append(&self, id: SessionId, r: AppendRequest) -> Result<AppendOutcome, StoreError> {
        let final_answer = r
            .entries
            .iter()
            .any(|e| matches!(e, Entry::Message(m) if m.role == Role::Assistant && !m.has_tool_calls()));
        if final_answer && self.armed.load(Ordering::SeqCst) {
            self.crashed.notify_one();
            std::future::pending::<()>().await;
        }
        self.inner.append(id, r).await
    }
    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError> {
        self.inner.load_view(id).await
    }
    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError> {
        self.inner.load_log(id).await
    }
    async fn commit_compaction(&self, id: SessionId, r: CommitRequest) -> Result<u64, StoreError> {
        self.inner.commit_compaction(id, r).await
    }
    async fn find_compaction(&self, id: SessionId, key: &str) -> Result<Option<CompactionMeta>, StoreError> {
        self.inner.find_compaction(id, key).await
    }
    async fn breaker(&self, id: SessionId) -> Result<BreakerState, StoreError> {
        self.inner.breaker(id).await
    }
    async fn set_breaker(&self, id: SessionId, s: BreakerState) -> Result<(), StoreError> {
        self.inner.set_breaker(id, s).await
    }
    async fn record_usage(&self, id: SessionId, r: UsageRecord) -> Result<(), StoreError> {
        self.inner.record_usage(id, r).await
    }
    async fn usage(&self, id: SessionId) -> Result<Vec<UsageRecord>, StoreError> {
        self.inner.usage(id).await
    }
    async fn list_revisions(&self, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError> {
        self.inner.list_revisions(id).await
    }
    async fn export_revision(&self, id: SessionId, g: u64) -> Result<RevisionExport, StoreError> {
        self.inner.export_revision(id, g).await
    }
    async fn delete_session(&self, id: SessionId) -> Result<(), StoreError> {
        self.inner.delete_session(id).await
    }
}

#[tokio::test]
async fn a_crash_between_reply_and_persist_then_a_rerun_duplicates_nothing() {
    let env = env(
        8_192,
        CompactionConfig::default(),
        RuntimeConfig::default().with_stream(false),
        vec![],
    )
    .await;
    let crashing = Arc::new(CrashingStore {
        inner: env.store.clone(),
        armed: AtomicBool::new(false),
        crashed: Notify::new(),
    });
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(read_tool(800))];
    let first = env.runtime_with(crashing.clone(), tools.clone());
    let session = first.create_session(MODEL, "You read code.").await.unwrap();
    env.script.turn(text("Hi."));
    first
        .run_turn(session, "Hello", CancellationToken::new())
        .await
        .unwrap();

    // The turn reads a file (persisted), gets its final answer, and dies before persisting it.
    crashing.armed.store(true, Ordering::SeqCst);
    env.script.turn(tool_call("c1", "src/lib.rs"));
    env.script.turn(text("lib.rs prints hello (first attempt)."));
    let input = "What does src/lib.rs do?";
    tokio::select! {
        r = first.run_turn(session, input, CancellationToken::new()) => panic!("the turn should not finish: {r:?}"),
        _ = crashing.crashed.notified() => {}
    }
    drop(first);
    let before = env.messages(session).await;
    assert_eq!(
        before.iter().filter(|m| m.role == Role::Assistant).count(),
        2,
        "hello answer + the tool call"
    );

    // A restarted process reruns the same turn over the same SQLite file.
    let store = Arc::new(SqliteStore::open(env.store_path()).await.unwrap());
    let second = env.runtime_with(store.clone(), tools);
    env.script.turn(text("lib.rs prints hello."));
    let out = second
        .run_turn(session, input, CancellationToken::new())
        .await
        .unwrap();
    assert!(out.resumed);
    assert_eq!(out.model_requests, 1, "the persisted tool step is not redone");
    assert_eq!(out.text(), "lib.rs prints hello.");

    let log: Vec<_> = store.load_log(session).await.unwrap();
    let messages: Vec<_> = log.iter().filter_map(Entry::as_message).collect();
    let texts: Vec<(Role, String)> = messages.iter().map(|m| (m.role, m.text_content())).collect();
    assert_eq!(
        texts
            .iter()
            .filter(|(r, t)| *r == Role::User && t == input)
            .count(),
        1,
        "{texts:?}"
    );
    assert_eq!(messages.iter().filter(|m| m.has_tool_calls()).count(), 1);
    assert_eq!(messages.iter().filter(|m| m.role == Role::Tool).count(), 1);
    let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant
        ]
    );
    let ids: std::collections::HashSet<_> = log.iter().map(Entry::id).collect();
    assert_eq!(ids.len(), log.len());
    assert_log_pairs(&messages.into_iter().cloned().collect::<Vec<_>>());
    let (turns, _) = env.requests().await;
    assert_eq!(turns.len(), 1 + 2 + 1);
    assert_eq!(
        turns[3]["messages"].as_array().unwrap().len(),
        6,
        "the rerun saw the persisted step"
    );
}

#[tokio::test]
async fn cancelling_during_a_compaction_commits_nothing_and_the_session_continues() {
    let env = env(
        8_192,
        CompactionConfig::default().with_keep_recent_turns(1),
        RuntimeConfig::default().with_stream(false),
        vec![],
    )
    .await;
    let rt = &env.runtime;
    let session = rt
        .create_session(MODEL, "You are a build assistant.")
        .await
        .unwrap();
    for i in 0..3 {
        env.script
            .turn(text(&format!("Answer {i}: {}", "it builds. ".repeat(40))));
        rt.run_turn(session, format!("Question {i}?"), CancellationToken::new())
            .await
            .unwrap();
    }
    env.script.turn(overflow_plain());
    env.script.summary(Box::new(|body| {
        pith_testkit::wire::json_response(
            200,
            pith_testkit::wire::openai_completion("- too late", prompt_tokens(body), 5, 0),
        )
        .set_delay(Duration::from_secs(3))
    }));
    let cancel = CancellationToken::new();
    let watcher = cancel_on(rt.subscribe(), cancel.clone(), |e| {
        matches!(e, AgentEvent::CompactionStarted { .. })
    });
    let started = std::time::Instant::now();
    let err = rt.run_turn(session, "One more?", cancel).await.unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the compaction did not stop"
    );
    watcher.await.unwrap();
    let view = env.store.load_view(session).await.unwrap();
    assert_eq!(view.generation, 0, "a cancelled compaction commits nothing");
    assert!(!rt.circuit_status(session).await.unwrap().open);
    assert_log_pairs(&env.messages(session).await);

    // The next turn continues the same input, compacts and answers.
    env.script.turn(overflow_plain());
    env.script.summary(summary("- Three questions about the build."));
    env.script.turn(text("Yes."));
    let out = rt
        .run_turn(session, "One more?", CancellationToken::new())
        .await
        .unwrap();
    assert!(out.resumed);
    assert_eq!(out.compactions.len(), 1);

    // Deleting the session removes it from the store.
    rt.delete_session(session).await.unwrap();
    assert!(env.store.load_view(session).await.is_err());
    assert!(matches!(
        rt.run_turn(session, "anyone?", CancellationToken::new()).await,
        Err(RuntimeError::Store(_))
    ));
}
