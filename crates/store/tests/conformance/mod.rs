//! The store conformance suite: one set of checks every backend must pass.
//!
//! Each backend's test file declares `mod conformance;` and expands [`conformance_suite!`] with an
//! async function returning `Option<Fixture<S>>` (`None` skips, for a missing Postgres outside CI).
//! Every check creates its own sessions with fresh ids, so checks can share one database.

#![allow(dead_code)]

pub mod commits;
pub mod fixtures;
pub mod log;
pub mod records;

pub use commits::*;
pub use log::*;
pub use records::*;

use std::any::Any;

use pith_core::{Entry, EntryId, SessionId, StoredView};
use pith_store::{AppendRequest, CommitRequest, CreateSession, SessionStore, StoreError};

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

/// Commits `meta` on the generation before its own.
pub async fn commit<S: SessionStore>(
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
