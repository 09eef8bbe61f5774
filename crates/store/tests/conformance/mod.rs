//! The store conformance suite: one set of checks every backend must pass.
//!
//! Each backend's test file declares `mod conformance;` and expands [`conformance_suite!`] with an
//! async function returning `Option<Fixture<S>>` (`None` skips, for a missing Postgres outside CI).
//! Every check creates its own sessions with fresh ids, so checks can share one database.

#![allow(dead_code)]

pub mod fixtures;

use std::any::Any;

use pith_core::{Entry, EntryId, Message, SessionId, StoredView};
use pith_store::common;
use pith_store::{AppendRequest, BreakerState, CommitRequest, CreateSession, SessionStore, StoreError};

use fixtures::*;

/// A store under test and whatever must live as long as it (a temporary directory).
pub struct Fixture<S> {
    /// The store.
    pub store: S,
    /// Kept alive until the check ends.
    pub guard: Box<dyn Any + Send>,
}

/// Generates one `#[tokio::test]` per check for a backend.
#[macro_export]
macro_rules! conformance_suite {
    ($make:path) => {
        $crate::conformance_suite!(@each $make;
            round_trip_every_part, round_trip_every_entry_kind, ten_thousand_appends_then_cheap_view,
            stale_generation_conflicts, concurrent_commits_one_wins, idempotency_key_lookup,
            old_revision_export_is_stable, revisions_are_listed, retried_append_is_deduplicated,
            head_mismatch_writes_nothing, duplicate_entry_ids_are_refused, breaker_round_trip,
            usage_round_trip, delete_removes_everything, unknown_session_is_not_found,
            sessions_are_listed_and_updated, dangling_references_are_refused, view_without_compaction);
    };
    (@each $make:path; $($check:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let Some(fixture) = $make().await else { return };
                $crate::conformance::$check(&fixture.store).await;
                drop(fixture);
            }
        )*
    };
}

/// Creates a session with one instruction; returns its id and the instruction's id.
pub async fn new_session<S: SessionStore>(store: &S) -> (SessionId, EntryId) {
    let record = store
        .create_session(CreateSession::new("openai/gpt-4o").with_instruction("You are terse."))
        .await
        .unwrap();
    let log = store.load_log(record.id).await.unwrap();
    (record.id, log[0].id())
}

/// Appends `n` user messages in batches of `batch`; returns their ids.
pub async fn append_users<S: SessionStore>(store: &S, id: SessionId, n: usize, batch: usize) -> Vec<EntryId> {
    let mut ids = Vec::with_capacity(n);
    let mut i = 0;
    while i < n {
        let chunk: Vec<Entry> = (i..(i + batch).min(n))
            .map(|k| user(&format!("message {k}")))
            .collect();
        ids.extend(chunk.iter().map(Entry::id));
        i += chunk.len();
        store.append(id, AppendRequest::new(chunk)).await.unwrap();
    }
    ids
}

/// Asserts the cheap view equals the reference view built from the whole log.
pub async fn assert_view_matches_reference<S: SessionStore>(store: &S, id: SessionId) -> StoredView {
    let view = store.load_view(id).await.unwrap();
    let record = store.get_session(id).await.unwrap();
    let log = store.load_log(id).await.unwrap();
    let reference = StoredView::from_log(record, &log).unwrap();
    assert_eq!(view, reference, "cheap view differs from the reference view");
    view
}

async fn commit<S: SessionStore>(
    store: &S,
    id: SessionId,
    meta: pith_core::CompactionMeta,
) -> Result<u64, StoreError> {
    let expected_generation = meta.generation - 1;
    store
        .commit_compaction(
            id,
            CommitRequest {
                meta,
                expected_generation,
            },
        )
        .await
}

/// Every part kind survives a round trip.
pub async fn round_trip_every_part<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    let msgs = vec![Entry::Message(every_part()), Entry::Message(tool_result())];
    store.append(id, AppendRequest::new(msgs.clone())).await.unwrap();
    let log = store.load_log(id).await.unwrap();
    assert_eq!(&log[1..], &msgs[..]);
    assert_view_matches_reference(store, id).await;
}

/// Messages, model changes, markers and compactions survive a round trip, in order.
pub async fn round_trip_every_entry_kind<S: SessionStore>(store: &S) {
    let (id, instr) = new_session(store).await;
    let first = user("first");
    let entries = vec![
        first.clone(),
        model_change(),
        marker(),
        user("<system-reminder>be nice</system-reminder>"),
    ];
    store
        .append(id, AppendRequest::new(entries.clone()))
        .await
        .unwrap();
    let reminder = entries[3].id();
    let meta = compaction(1, "k1", Some(entries[1].id()), vec![instr], vec![reminder]);
    assert_eq!(commit(store, id, meta.clone()).await.unwrap(), 1);
    let after = user("after");
    store
        .append(id, AppendRequest::new(vec![after.clone()]))
        .await
        .unwrap();
    let log = store.load_log(id).await.unwrap();
    assert_eq!(log.len(), 7);
    assert_eq!(&log[1..5], &entries[..]);
    assert_eq!(log[5], Entry::Compaction(meta.clone()));
    assert_eq!(log[6], after);
    let view = assert_view_matches_reference(store, id).await;
    assert_eq!(view.generation, 1);
    assert_eq!(view.compaction.as_ref(), Some(&meta));
    assert_eq!(view.instructions.len(), 1);
    assert_eq!(view.reminders.len(), 1);
    assert_eq!(view.tail.len(), 4);
    assert_eq!(view.log_len, 7);
    assert_eq!(store.get_session(id).await.unwrap().generation, 1);
}

/// 10,000 appended entries, a compaction near the end: the view load reads only the tail.
pub async fn ten_thousand_appends_then_cheap_view<S: SessionStore>(store: &S) {
    let (id, instr) = new_session(store).await;
    let ids = append_users(store, id, 10_000, 100).await;
    let meta = compaction(1, "big", Some(ids[9_990]), vec![instr], vec![]);
    commit(store, id, meta).await.unwrap();
    append_users(store, id, 5, 5).await;
    let view = store.load_view(id).await.unwrap();
    let rows = store.last_view_load_rows();
    assert_eq!(view.tail.len(), 15);
    assert_eq!(view.log_len, 10_007);
    if let Some(rows) = rows {
        assert!(
            rows <= 15 + 1 + 4,
            "view load read {rows} rows for a 15-entry tail"
        );
    }
    assert_view_matches_reference(store, id).await;
}

/// A commit on a stale generation fails with `Conflict` and writes nothing.
pub async fn stale_generation_conflicts<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    let ids = append_users(store, id, 3, 3).await;
    commit(store, id, compaction(1, "a", Some(ids[2]), vec![], vec![]))
        .await
        .unwrap();
    let before = store.load_log(id).await.unwrap();
    let stale = CommitRequest {
        meta: compaction(1, "b", Some(ids[1]), vec![], vec![]),
        expected_generation: 0,
    };
    match store.commit_compaction(id, stale).await {
        Err(StoreError::Conflict {
            session,
            expected,
            actual,
        }) => {
            assert_eq!((session, expected, actual), (id, 0, 1));
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(store.load_log(id).await.unwrap(), before);
    assert_eq!(store.get_session(id).await.unwrap().generation, 1);
    assert!(store.find_compaction(id, "b").await.unwrap().is_none());
}

/// Two tasks committing on the same generation: exactly one wins.
pub async fn concurrent_commits_one_wins<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    let ids = append_users(store, id, 4, 4).await;
    for round in 0..5u64 {
        let a = commit(
            store,
            id,
            compaction(round + 1, &format!("a{round}"), Some(ids[3]), vec![], vec![]),
        );
        let b = commit(
            store,
            id,
            compaction(round + 1, &format!("b{round}"), Some(ids[2]), vec![], vec![]),
        );
        let (ra, rb) = futures::join!(a, b);
        let wins = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "round {round}: {ra:?} / {rb:?}");
        for r in [ra, rb] {
            if let Err(e) = r {
                assert!(e.is_conflict(), "loser must see a conflict, got {e}");
            }
        }
    }
    let log = store.load_log(id).await.unwrap();
    assert_eq!(
        log.iter().filter(|e| matches!(e, Entry::Compaction(_))).count(),
        5
    );
    assert_eq!(store.get_session(id).await.unwrap().generation, 5);
}

/// A committed compaction is found by its idempotency key.
pub async fn idempotency_key_lookup<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    let ids = append_users(store, id, 3, 3).await;
    let m1 = compaction(1, "key-one", Some(ids[1]), vec![], vec![]);
    commit(store, id, m1.clone()).await.unwrap();
    let m2 = compaction(2, "key-two", Some(ids[2]), vec![], vec![]);
    commit(store, id, m2.clone()).await.unwrap();
    assert_eq!(store.find_compaction(id, "key-one").await.unwrap(), Some(m1));
    assert_eq!(store.find_compaction(id, "key-two").await.unwrap(), Some(m2));
    assert_eq!(store.find_compaction(id, "key-three").await.unwrap(), None);
}

/// An old revision exports byte-identically after later compactions and appends.
pub async fn old_revision_export_is_stable<S: SessionStore>(store: &S) {
    let (id, instr) = new_session(store).await;
    let ids = append_users(store, id, 6, 2).await;
    let g0 = store.export_revision(id, 0).await.unwrap();
    assert_eq!(g0.sha256, pith_core::sha256_hex(&g0.bytes));
    commit(store, id, compaction(1, "k1", Some(ids[3]), vec![instr], vec![]))
        .await
        .unwrap();
    append_users(store, id, 3, 3).await;
    let g1 = store.export_revision(id, 1).await.unwrap();
    commit(store, id, compaction(2, "k2", Some(ids[5]), vec![instr], vec![]))
        .await
        .unwrap();
    append_users(store, id, 2, 1).await;
    let g0_again = store.export_revision(id, 0).await.unwrap();
    let g1_again = store.export_revision(id, 1).await.unwrap();
    assert_eq!(g0.sha256, g0_again.sha256);
    assert_eq!(g0.bytes, g0_again.bytes);
    assert_eq!(g1.sha256, g1_again.sha256);
    assert_eq!(g0.view.tail.len(), 7);
    assert_eq!(g1.view.generation, 1);
    let record = store.get_session(id).await.unwrap();
    let log = store.load_log(id).await.unwrap();
    for g in 0..=2 {
        let reference = common::export_from_log(&record, &log, g).unwrap();
        assert_eq!(
            store.export_revision(id, g).await.unwrap().sha256,
            reference.sha256,
            "generation {g}"
        );
    }
    match store.export_revision(id, 3).await {
        Err(StoreError::RevisionNotFound {
            generation: 3,
            latest: 2,
            ..
        }) => {}
        other => panic!("expected RevisionNotFound, got {other:?}"),
    }
}

/// `list_revisions` agrees with the reference built from the log.
pub async fn revisions_are_listed<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    let first = store.list_revisions(id).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].generation, first[0].log_len), (0, 1));
    let ids = append_users(store, id, 4, 4).await;
    commit(store, id, compaction(1, "k1", Some(ids[2]), vec![], vec![]))
        .await
        .unwrap();
    append_users(store, id, 2, 2).await;
    commit(store, id, compaction(2, "k2", Some(ids[3]), vec![], vec![]))
        .await
        .unwrap();
    let revisions = store.list_revisions(id).await.unwrap();
    let record = store.get_session(id).await.unwrap();
    let log = store.load_log(id).await.unwrap();
    assert_eq!(revisions, common::revisions(&record, &log));
    let lens: Vec<u64> = revisions.iter().map(|r| r.log_len).collect();
    assert_eq!(lens, vec![5, 8, 9]);
}

/// A retried append with the same dedupe key adds nothing.
pub async fn retried_append_is_deduplicated<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    let request = AppendRequest::new(vec![user("a"), user("b")]).with_dedupe_key("turn-1/step-1");
    let first = store.append(id, request.clone()).await.unwrap();
    assert_eq!((first.len, first.deduplicated), (3, false));
    let again = store.append(id, request).await.unwrap();
    assert_eq!((again.len, again.deduplicated), (3, true));
    let other = AppendRequest::new(vec![user("c")]).with_dedupe_key("turn-1/step-2");
    assert_eq!(store.append(id, other.clone()).await.unwrap().len, 4);
    assert!(store.append(id, other).await.unwrap().deduplicated);
    assert_eq!(store.load_log(id).await.unwrap().len(), 4);
}

/// An append expecting another log length fails with `HeadMismatch` and writes nothing.
pub async fn head_mismatch_writes_nothing<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    append_users(store, id, 2, 2).await;
    match store
        .append(id, AppendRequest::new(vec![user("x")]).expecting(2))
        .await
    {
        Err(StoreError::HeadMismatch {
            session,
            expected,
            actual,
        }) => {
            assert_eq!((session, expected, actual), (id, 2, 3));
        }
        other => panic!("expected HeadMismatch, got {other:?}"),
    }
    assert_eq!(store.load_log(id).await.unwrap().len(), 3);
    let ok = store
        .append(id, AppendRequest::new(vec![user("y")]).expecting(3))
        .await
        .unwrap();
    assert_eq!(ok.len, 4);
}

/// A duplicate entry id (in the log, in one batch, or as a compaction id) is refused.
pub async fn duplicate_entry_ids_are_refused<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    let m = user("once");
    store
        .append(id, AppendRequest::new(vec![m.clone()]))
        .await
        .unwrap();
    let err = store
        .append(id, AppendRequest::new(vec![user("new"), m.clone()]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::DuplicateEntry(e) if e == m.id()),
        "{err}"
    );
    let twice = user("twice");
    let err = store
        .append(id, AppendRequest::new(vec![twice.clone(), twice.clone()]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::DuplicateEntry(e) if e == twice.id()),
        "{err}"
    );
    let mut meta = compaction(1, "k", Some(m.id()), vec![], vec![]);
    meta.id = m.id();
    let err = commit(store, id, meta).await.unwrap_err();
    assert!(
        matches!(err, StoreError::DuplicateEntry(e) if e == m.id()),
        "{err}"
    );
    assert_eq!(store.load_log(id).await.unwrap().len(), 2);
    assert_eq!(store.get_session(id).await.unwrap().generation, 0);
}

/// Breaker state round-trips and defaults to closed.
pub async fn breaker_round_trip<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    assert_eq!(store.breaker(id).await.unwrap(), BreakerState::default());
    store.set_breaker(id, open_breaker()).await.unwrap();
    assert_eq!(store.breaker(id).await.unwrap(), open_breaker());
    store.set_breaker(id, BreakerState::default()).await.unwrap();
    assert_eq!(store.breaker(id).await.unwrap(), BreakerState::default());
}

/// The usage ledger round-trips in order.
pub async fn usage_round_trip<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    assert!(store.usage(id).await.unwrap().is_empty());
    for r in usage_records() {
        store.record_usage(id, r).await.unwrap();
    }
    assert_eq!(
        store.usage(id).await.unwrap(),
        usage_records_with_times(store, id).await
    );
}

async fn usage_records_with_times<S: SessionStore>(store: &S, id: SessionId) -> Vec<pith_store::UsageRecord> {
    // The records carry their own times; compare everything else against the fixture.
    let stored = store.usage(id).await.unwrap();
    let expected = usage_records();
    assert_eq!(stored.len(), expected.len());
    for (s, e) in stored.iter().zip(&expected) {
        assert_eq!(
            (&s.model, s.purpose, s.usage, s.discarded),
            (&e.model, e.purpose, e.usage, e.discarded)
        );
    }
    stored
}

/// Deleting a session removes it and everything it owns.
pub async fn delete_removes_everything<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    let ids = append_users(store, id, 3, 3).await;
    commit(store, id, compaction(1, "k", Some(ids[1]), vec![], vec![]))
        .await
        .unwrap();
    store.set_breaker(id, open_breaker()).await.unwrap();
    store.record_usage(id, usage_records().remove(0)).await.unwrap();
    store
        .append(id, AppendRequest::new(vec![user("d")]).with_dedupe_key("d"))
        .await
        .unwrap();
    store.delete_session(id).await.unwrap();
    assert!(matches!(store.get_session(id).await, Err(StoreError::SessionNotFound(s)) if s == id));
    assert!(matches!(
        store.load_log(id).await,
        Err(StoreError::SessionNotFound(_))
    ));
    assert!(matches!(
        store.delete_session(id).await,
        Err(StoreError::SessionNotFound(_))
    ));
    assert!(!store.list_sessions().await.unwrap().iter().any(|r| r.id == id));
    // The id can be used again, and nothing of the old session comes back.
    store
        .create_session(CreateSession::new("m").with_id(id))
        .await
        .unwrap();
    assert_eq!(store.load_log(id).await.unwrap().len(), 0);
    assert_eq!(store.breaker(id).await.unwrap(), BreakerState::default());
    assert!(store.usage(id).await.unwrap().is_empty());
    assert!(store.find_compaction(id, "k").await.unwrap().is_none());
    let again = store
        .append(id, AppendRequest::new(vec![user("d")]).with_dedupe_key("d"))
        .await
        .unwrap();
    assert!(!again.deduplicated);
    store.delete_session(id).await.unwrap();
}

/// Every operation on an unknown session fails with `SessionNotFound`.
pub async fn unknown_session_is_not_found<S: SessionStore>(store: &S) {
    let id = SessionId::new();
    let nf = |r: Result<(), StoreError>, op: &str| match r {
        Err(StoreError::SessionNotFound(s)) if s == id => {}
        other => panic!("{op}: expected SessionNotFound, got {other:?}"),
    };
    nf(store.get_session(id).await.map(drop), "get_session");
    let mut record = pith_core::SessionRecord::new("m", vec![]);
    record.id = id;
    nf(store.update_session(record).await.map(drop), "update_session");
    nf(
        store
            .append(id, AppendRequest::new(vec![user("x")]))
            .await
            .map(drop),
        "append",
    );
    nf(store.load_view(id).await.map(drop), "load_view");
    nf(store.load_log(id).await.map(drop), "load_log");
    let meta = compaction(1, "k", None, vec![], vec![]);
    nf(
        store
            .commit_compaction(
                id,
                CommitRequest {
                    meta,
                    expected_generation: 0,
                },
            )
            .await
            .map(drop),
        "commit",
    );
    nf(store.find_compaction(id, "k").await.map(drop), "find_compaction");
    nf(store.breaker(id).await.map(drop), "breaker");
    nf(store.set_breaker(id, open_breaker()).await, "set_breaker");
    nf(
        store.record_usage(id, usage_records().remove(0)).await,
        "record_usage",
    );
    nf(store.usage(id).await.map(drop), "usage");
    nf(store.list_revisions(id).await.map(drop), "list_revisions");
    nf(store.export_revision(id, 0).await.map(drop), "export_revision");
    nf(store.delete_session(id).await, "delete_session");
}

/// Sessions are listed oldest first; an update changes model and tools but not the generation.
pub async fn sessions_are_listed_and_updated<S: SessionStore>(store: &S) {
    let (a, _) = new_session(store).await;
    let (b, _) = new_session(store).await;
    let dup = store.create_session(CreateSession::new("m").with_id(a)).await;
    assert!(
        matches!(dup, Err(StoreError::SessionExists(s)) if s == a),
        "{dup:?}"
    );
    let listed: Vec<SessionId> = store
        .list_sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .filter(|i| *i == a || *i == b)
        .collect();
    assert_eq!(listed, vec![a, b]);
    let ids = append_users(store, a, 2, 2).await;
    commit(store, a, compaction(1, "k", Some(ids[1]), vec![], vec![]))
        .await
        .unwrap();
    let mut record = store.get_session(a).await.unwrap();
    let before = record.clone();
    record.model = "anthropic/claude".into();
    record.tools = vec![pith_core::ToolDeclaration {
        name: "bash".into(),
        description: "runs a command".into(),
        parameters: serde_json::json!({"type": "object"}),
    }];
    record.generation = 99;
    let updated = store.update_session(record.clone()).await.unwrap();
    assert_eq!(updated.model, "anthropic/claude");
    assert_eq!(updated.generation, 1);
    assert_eq!(updated.created_at, before.created_at);
    assert!(updated.updated_at >= before.updated_at);
    assert_eq!(store.get_session(a).await.unwrap(), updated);
}

/// A compaction naming entries the log does not hold is refused and writes nothing.
pub async fn dangling_references_are_refused<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    let ids = append_users(store, id, 2, 2).await;
    for meta in [
        compaction(1, "k", Some(EntryId::new()), vec![], vec![]),
        compaction(1, "k", Some(ids[0]), vec![EntryId::new()], vec![]),
        compaction(1, "k", Some(ids[0]), vec![], vec![EntryId::new()]),
    ] {
        let err = commit(store, id, meta).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidRequest(_)), "{err}");
    }
    let mut wrong_generation = compaction(2, "k", Some(ids[0]), vec![], vec![]);
    wrong_generation.generation = 2;
    let err = store
        .commit_compaction(
            id,
            CommitRequest {
                meta: wrong_generation,
                expected_generation: 0,
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidRequest(_)), "{err}");
    assert_eq!(store.load_log(id).await.unwrap().len(), 3);
    let err = store.append(id, AppendRequest::new(vec![])).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidRequest(_)), "{err}");
}

/// Without a compaction the view is the whole log; a compaction without a tail start keeps
/// only what came after it.
pub async fn view_without_compaction<S: SessionStore>(store: &S) {
    let (id, _) = new_session(store).await;
    append_users(store, id, 3, 2).await;
    let view = assert_view_matches_reference(store, id).await;
    assert_eq!((view.generation, view.tail.len(), view.log_len), (0, 4, 4));
    commit(store, id, compaction(1, "all", None, vec![], vec![]))
        .await
        .unwrap();
    let view = assert_view_matches_reference(store, id).await;
    assert!(view.tail.is_empty());
    append_users(store, id, 1, 1).await;
    let view = assert_view_matches_reference(store, id).await;
    assert_eq!((view.generation, view.tail.len(), view.log_len), (1, 1, 6));
    let message: Message = view.tail[0].as_message().cloned().unwrap();
    assert_eq!(message.text_content(), "message 0");
}
