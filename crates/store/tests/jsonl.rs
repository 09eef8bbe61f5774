//! The conformance suite against the JSONL store (real files in a temporary directory), plus
//! reopen, deletion and crash-recovery checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance;

use std::io::Write;

use conformance::{fixtures, Fixture};
use pith_store::jsonl::LoadWarning;
use pith_store::{AppendRequest, CommitRequest, JsonlStore, SessionStore, StoreError};

async fn make() -> Option<Fixture<JsonlStore>> {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    Some(Fixture {
        store,
        guard: Box::new(dir),
    })
}

conformance_suite!(make);

fn append_raw(path: &std::path::Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

#[tokio::test]
async fn reopening_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
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
    drop(store);

    let store = JsonlStore::open(dir.path()).await.unwrap();
    assert_eq!(store.get_session(id).await.unwrap(), record);
    assert_eq!(store.load_log(id).await.unwrap(), log);
    assert_eq!(store.load_view(id).await.unwrap(), view);
    assert_eq!(store.breaker(id).await.unwrap(), fixtures::open_breaker());
    assert_eq!(store.usage(id).await.unwrap().len(), 1);
    assert_eq!(store.find_compaction(id, "k").await.unwrap(), Some(meta));
    let again = store
        .append(
            id,
            AppendRequest::new(vec![fixtures::user("x")]).with_dedupe_key("dk"),
        )
        .await;
    assert!(again.unwrap().deduplicated);
    assert!(store.warnings().is_empty(), "{:?}", store.warnings());
}

#[tokio::test]
async fn delete_removes_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    let (id, _) = conformance::new_session(&store).await;
    conformance::append_users(&store, id, 3, 3).await;
    assert!(store.session_dir(id).is_dir());
    store.delete_session(id).await.unwrap();
    assert!(!store.session_dir(id).exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no leftovers in the root"
    );
}

#[tokio::test]
async fn torn_last_line_is_ignored_reported_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    let (id, _) = conformance::new_session(&store).await;
    conformance::append_users(&store, id, 3, 3).await;
    let before = store.load_log(id).await.unwrap();
    append_raw(
        &store.session_dir(id).join("messages.jsonl"),
        b"{\"type\":\"message\",\"id\":\"01",
    );
    let log = store.load_log(id).await.unwrap();
    assert_eq!(log, before);
    let warnings = store.take_warnings();
    assert!(
        warnings.iter().any(
            |w| matches!(w, LoadWarning::TornLine { path, line: 5 } if path.ends_with("messages.jsonl"))
        ),
        "{warnings:?}"
    );
    assert_eq!(store.load_view(id).await.unwrap().tail.len(), 4);
    // The next append cuts the torn bytes off and lands on a clean line.
    store
        .append(id, AppendRequest::new(vec![fixtures::user("after")]))
        .await
        .unwrap();
    store.take_warnings();
    assert_eq!(store.load_log(id).await.unwrap().len(), 5);
    assert!(store.warnings().is_empty(), "{:?}", store.warnings());
}

#[tokio::test]
async fn unmatched_compaction_record_is_ignored_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    let (id, _) = conformance::new_session(&store).await;
    let ids = conformance::append_users(&store, id, 4, 4).await;
    let m1 = fixtures::compaction(1, "k1", Some(ids[1]), vec![], vec![]);
    store
        .commit_compaction(
            id,
            CommitRequest {
                meta: m1,
                expected_generation: 0,
            },
        )
        .await
        .unwrap();
    let sdir = store.session_dir(id);
    let boundary = std::fs::read(sdir.join("boundary.json")).unwrap();
    let view_g1 = store.load_view(id).await.unwrap();
    // Commit generation 2, then put generation 1's boundary back: the state a crash between
    // archiving and moving the boundary leaves.
    let m2 = fixtures::compaction(2, "k2", Some(ids[3]), vec![], vec![]);
    store
        .commit_compaction(
            id,
            CommitRequest {
                meta: m2.clone(),
                expected_generation: 1,
            },
        )
        .await
        .unwrap();
    std::fs::write(sdir.join("boundary.json"), &boundary).unwrap();

    let reopened = JsonlStore::open(dir.path()).await.unwrap();
    assert_eq!(reopened.get_session(id).await.unwrap().generation, 1);
    assert_eq!(reopened.load_view(id).await.unwrap().tail, view_g1.tail);
    assert!(reopened.find_compaction(id, "k2").await.unwrap().is_none());
    let warnings = reopened.take_warnings();
    assert!(
        warnings.iter().any(|w| matches!(
            w,
            LoadWarning::UnmatchedCompaction {
                generation: 2,
                line: 2,
                ..
            }
        )),
        "{warnings:?}"
    );
    assert_eq!(reopened.load_log(id).await.unwrap().len(), 6);
    // A new commit on generation 1 replaces the uncommitted record.
    let m2b = fixtures::compaction(2, "k2b", Some(ids[2]), vec![], vec![]);
    reopened
        .commit_compaction(
            id,
            CommitRequest {
                meta: m2b.clone(),
                expected_generation: 1,
            },
        )
        .await
        .unwrap();
    reopened.take_warnings();
    assert_eq!(reopened.load_view(id).await.unwrap().compaction, Some(m2b));
    let log = reopened.load_log(id).await.unwrap();
    assert_eq!(log.len(), 7);
    assert!(
        !log.contains(&pith_core::Entry::Compaction(Box::new(m2))),
        "the uncommitted record never enters the log"
    );
    assert!(reopened.warnings().is_empty(), "{:?}", reopened.warnings());
}

#[tokio::test]
async fn corrupt_middle_line_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    let (id, _) = conformance::new_session(&store).await;
    conformance::append_users(&store, id, 3, 3).await;
    let path = store.session_dir(id).join("messages.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{not json";
    std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    match store.load_log(id).await {
        Err(StoreError::Corrupt { location, .. }) => {
            assert!(location.ends_with("messages.jsonl:3"), "{location}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(matches!(
        store.load_view(id).await,
        Err(StoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn tampered_archive_line_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    let (id, _) = conformance::new_session(&store).await;
    let ids = conformance::append_users(&store, id, 2, 2).await;
    let meta = fixtures::compaction(1, "k", Some(ids[1]), vec![], vec![]);
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
    let path = store.session_dir(id).join("compactions.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("summary of generation 1", "summary of generation X"),
    )
    .unwrap();
    let err = store.load_view(id).await.unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
}

/// A 100,000-entry session compacted near its end loads its view from the tail alone.
#[tokio::test]
async fn hundred_thousand_entries_view_reads_only_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
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
    let reopened = JsonlStore::open(dir.path()).await.unwrap();
    let view = reopened.load_view(id).await.unwrap();
    assert_eq!(view.tail.len(), 20);
    assert_eq!(view.log_len, 100_002);
    // archive line + one retained instruction + 20 tail lines
    assert_eq!(reopened.last_load_rows(), 1 + 1 + 20);
}
