//! Conformance checks of compaction commits: generations, races, idempotency keys, revisions.

use pith_core::{Entry, EntryId};
use pith_store::common;
use pith_store::{AppendRequest, CommitRequest, SessionStore, StoreError};

use super::fixtures::*;
use super::{append_users, commit, new_session};

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
