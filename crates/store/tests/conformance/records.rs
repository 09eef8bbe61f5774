//! Conformance checks of per-session state: breaker, usage ledger, deletion, listing.

use pith_core::SessionId;
use pith_store::{AppendRequest, BreakerState, CommitRequest, CreateSession, SessionStore, StoreError};

use super::fixtures::*;
use super::{append_users, commit, new_session};

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
