//! The conformance suite against the in-memory store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance;

use conformance::Fixture;
use pith_store::{MemoryStore, SessionStore};

async fn make() -> Option<Fixture<MemoryStore>> {
    Some(Fixture {
        store: MemoryStore::new(),
        guard: Box::new(()),
    })
}

conformance_suite!(make);

/// A 100,000-entry session compacted near its end loads its view from the tail alone.
#[tokio::test]
async fn hundred_thousand_entries_view_reads_only_the_tail() {
    let store = MemoryStore::new();
    let (id, instr) = conformance::new_session(&store).await;
    let ids = conformance::append_users(&store, id, 100_000, 1_000).await;
    let meta = conformance::fixtures::compaction(1, "k", Some(ids[99_980]), vec![instr], vec![]);
    store
        .commit_compaction(
            id,
            pith_store::CommitRequest {
                meta,
                expected_generation: 0,
            },
        )
        .await
        .unwrap();
    let view = store.load_view(id).await.unwrap();
    assert_eq!(view.tail.len(), 20);
    assert_eq!(store.last_load_rows(), 1 + 1 + 20);
}
