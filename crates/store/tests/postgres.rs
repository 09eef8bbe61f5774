//! The conformance suite against a real Postgres server (`PITH_TEST_POSTGRES_URL`, started by
//! `scripts/test`), plus the two-process race and a large-session check.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance;

use std::sync::Arc;

use conformance::{fixtures, Fixture};
use pith_core::Entry;
use pith_store::{AppendRequest, CommitRequest, PostgresStore, SessionStore};

async fn make() -> Option<Fixture<PostgresStore>> {
    let url = pith_testkit::postgres::url()?;
    let store = PostgresStore::connect(&url).await.unwrap();
    Some(Fixture {
        store,
        guard: Box::new(()),
    })
}

conformance_suite!(make);

/// Two pools (two processes) race `commit_compaction` on the same generation for 100 rounds
/// while a third appends: exactly one commit per round, no append lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_race_commits_while_a_third_appends() {
    let Some(url) = pith_testkit::postgres::url() else {
        return;
    };
    let a = Arc::new(PostgresStore::connect(&url).await.unwrap());
    let b = Arc::new(PostgresStore::connect(&url).await.unwrap());
    let c = Arc::new(PostgresStore::connect(&url).await.unwrap());
    let (id, _) = conformance::new_session(&*a).await;
    let first = conformance::append_users(&*a, id, 2, 2).await;
    let tail = first[1];

    let appender = {
        let c = Arc::clone(&c);
        tokio::spawn(async move {
            let mut appended = 0u64;
            for i in 0..300 {
                c.append(id, AppendRequest::new(vec![fixtures::user(&format!("live {i}"))]))
                    .await
                    .unwrap();
                appended += 1;
            }
            appended
        })
    };
    let mut wins = 0;
    for round in 1..=100u64 {
        let ma = fixtures::compaction(round, &format!("a{round}"), Some(tail), vec![], vec![]);
        let mb = fixtures::compaction(round, &format!("b{round}"), Some(tail), vec![], vec![]);
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
        let ok = ra.is_ok() as u32 + rb.is_ok() as u32;
        assert_eq!(ok, 1, "round {round}: {ra:?} / {rb:?}");
        for r in [ra, rb] {
            if let Err(e) = r {
                assert!(e.is_conflict(), "round {round}: {e}");
            }
        }
        wins += ok;
    }
    let appended = appender.await.unwrap();
    assert_eq!(wins, 100);
    let log = a.load_log(id).await.unwrap();
    let compactions = log.iter().filter(|e| matches!(e, Entry::Compaction(_))).count();
    let live = log
        .iter()
        .filter_map(Entry::as_message)
        .filter(|m| m.text_content().starts_with("live "))
        .count() as u64;
    assert_eq!(compactions, 100);
    assert_eq!(live, appended);
    assert_eq!(log.len() as u64, 1 + 2 + 100 + appended);
    let generations: Vec<u64> = log
        .iter()
        .filter_map(Entry::as_compaction)
        .map(|m| m.generation)
        .collect();
    assert_eq!(generations, (1..=100).collect::<Vec<_>>());
    assert_eq!(b.get_session(id).await.unwrap().generation, 100);
    conformance::assert_view_matches_reference(&*b, id).await;
    a.delete_session(id).await.unwrap();
}

/// A 100,000-entry session compacted near its end loads its view from the tail alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_entries_view_reads_only_the_tail() {
    let Some(url) = pith_testkit::postgres::url() else {
        return;
    };
    let store = PostgresStore::connect(&url).await.unwrap();
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
    store.delete_session(id).await.unwrap();
}
