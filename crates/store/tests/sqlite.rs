//! The conformance suite against SQLite (a real file in a temporary directory), plus reopen,
//! deletion and large-session checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance;

use conformance::{fixtures, Fixture};
use pith_store::{AppendRequest, CommitRequest, SessionStore, SqliteStore};

async fn make() -> Option<Fixture<SqliteStore>> {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("pith.db")).await.unwrap();
    Some(Fixture {
        store,
        guard: Box::new(dir),
    })
}

conformance_suite!(make);

#[tokio::test]
async fn in_memory_database_works() {
    let store = SqliteStore::open_in_memory().await.unwrap();
    conformance::round_trip_every_entry_kind(&store).await;
    assert!(store.path().is_none());
}

#[tokio::test]
async fn reopening_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pith.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let (id, instr) = conformance::new_session(&store).await;
    let ids = conformance::append_users(&store, id, 10, 5).await;
    let meta = fixtures::compaction(1, "k", Some(ids[7]), vec![instr], vec![]);
    store
        .commit_compaction(
            id,
            CommitRequest {
                meta: meta.clone(),
                expected_generation: 0,
            },
        )
        .await
        .unwrap();
    store
        .append(
            id,
            AppendRequest::new(vec![fixtures::user("x")]).with_dedupe_key("dk"),
        )
        .await
        .unwrap();
    store.set_breaker(id, fixtures::open_breaker()).await.unwrap();
    store
        .record_usage(id, fixtures::usage_records().remove(1))
        .await
        .unwrap();
    let log = store.load_log(id).await.unwrap();
    let view = store.load_view(id).await.unwrap();
    let record = store.get_session(id).await.unwrap();
    let export = store.export_revision(id, 0).await.unwrap();
    drop(store);

    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.get_session(id).await.unwrap(), record);
    assert_eq!(store.load_log(id).await.unwrap(), log);
    assert_eq!(store.load_view(id).await.unwrap(), view);
    assert_eq!(store.breaker(id).await.unwrap(), fixtures::open_breaker());
    assert_eq!(store.usage(id).await.unwrap().len(), 1);
    assert_eq!(store.find_compaction(id, "k").await.unwrap(), Some(meta));
    assert_eq!(store.export_revision(id, 0).await.unwrap().sha256, export.sha256);
    let again = store
        .append(
            id,
            AppendRequest::new(vec![fixtures::user("x")]).with_dedupe_key("dk"),
        )
        .await;
    assert!(again.unwrap().deduplicated);
}

#[tokio::test]
async fn delete_leaves_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("pith.db")).await.unwrap();
    let (id, _) = conformance::new_session(&store).await;
    let ids = conformance::append_users(&store, id, 5, 5).await;
    let meta = fixtures::compaction(1, "k", Some(ids[2]), vec![], vec![]);
    store
        .commit_compaction(
            id,
            CommitRequest {
                meta,
                expected_generation: 0,
            },
        )
        .await
        .unwrap();
    store
        .append(
            id,
            AppendRequest::new(vec![fixtures::user("y")]).with_dedupe_key("dk"),
        )
        .await
        .unwrap();
    store.set_breaker(id, fixtures::open_breaker()).await.unwrap();
    store
        .record_usage(id, fixtures::usage_records().remove(0))
        .await
        .unwrap();
    assert_eq!(store.row_counts(id).await.unwrap(), 1 + 8 + 1 + 1 + 1 + 1);
    store.delete_session(id).await.unwrap();
    assert_eq!(store.row_counts(id).await.unwrap(), 0);
}

#[tokio::test]
async fn two_handles_on_one_file_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pith.db");
    let a = SqliteStore::open(&path).await.unwrap();
    let b = SqliteStore::open(&path).await.unwrap();
    let (id, _) = conformance::new_session(&a).await;
    let ids = conformance::append_users(&b, id, 4, 4).await;
    for round in 1..=10u64 {
        let ma = fixtures::compaction(round, &format!("a{round}"), Some(ids[3]), vec![], vec![]);
        let mb = fixtures::compaction(round, &format!("b{round}"), Some(ids[2]), vec![], vec![]);
        let (ra, rb) = tokio::join!(
            a.commit_compaction(
                id,
                CommitRequest {
                    meta: ma,
                    expected_generation: round - 1
                }
            ),
            b.commit_compaction(
                id,
                CommitRequest {
                    meta: mb,
                    expected_generation: round - 1
                }
            ),
        );
        assert_eq!(
            ra.is_ok() as u8 + rb.is_ok() as u8,
            1,
            "round {round}: {ra:?} {rb:?}"
        );
    }
    assert_eq!(a.get_session(id).await.unwrap().generation, 10);
}

/// A 100,000-entry session compacted near its end loads its view from the tail alone.
#[tokio::test]
async fn hundred_thousand_entries_view_reads_only_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("pith.db")).await.unwrap();
    let (id, instr) = conformance::new_session(&store).await;
    let ids = conformance::append_users(&store, id, 100_000, 5_000).await;
    let meta = fixtures::compaction(1, "k", Some(ids[99_980]), vec![instr], vec![]);
    store
        .commit_compaction(
            id,
            CommitRequest {
                meta,
                expected_generation: 0,
            },
        )
        .await
        .unwrap();
    let view = store.load_view(id).await.unwrap();
    assert_eq!(view.tail.len(), 20);
    assert_eq!(view.log_len, 100_002);
    // session row + compaction row + one retained instruction + tail-start lookup + 20 tail rows
    assert_eq!(store.last_load_rows(), 1 + 1 + 1 + 1 + 20);
}
