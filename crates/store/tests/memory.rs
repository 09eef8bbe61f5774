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

/// After two compactions the history no view reads is archived, and the log, the view and every
/// revision read back exactly what was written — tool calls with their arguments included.
#[tokio::test]
async fn archived_history_reads_back_exactly_and_the_view_keeps_what_it_retains() {
    use pith_core::{Entry, Message, Part, Role};
    let store = MemoryStore::new();
    let (id, instr) = conformance::new_session(&store).await;
    let mut written = Vec::new();
    for i in 0..30 {
        let m = if i % 2 == 0 {
            Message::new(Role::User, vec![Part::text(format!("question {i}"))])
        } else {
            Message::new(
                Role::Assistant,
                vec![Part::ToolCall {
                    call_id: format!("c{i}"),
                    name: "read".into(),
                    arguments: serde_json::json!({"path": format!("src/m{i}.rs"), "limit": i}),
                }],
            )
        };
        written.push(m.id);
        store
            .append(id, pith_store::AppendRequest::message(m))
            .await
            .unwrap();
    }
    let log_before = store.load_log(id).await.unwrap();
    let export_g0 = store.export_revision(id, 0).await.unwrap();
    let commit = |generation, tail, reminders| pith_store::CommitRequest {
        meta: conformance::fixtures::compaction(
            generation,
            &format!("k{generation}"),
            Some(tail),
            vec![instr],
            reminders,
        ),
        expected_generation: generation - 1,
    };
    // The first compaction keeps entry 4 as a reminder; the second keeps it again.
    store
        .commit_compaction(id, commit(1, written[10], vec![written[4]]))
        .await
        .unwrap();
    assert_eq!(
        store.archived_entries(id),
        Some(9),
        "entries 0-9 but the reminder"
    );
    store
        .commit_compaction(id, commit(2, written[20], vec![written[4]]))
        .await
        .unwrap();
    assert_eq!(store.archived_entries(id), Some(19));

    let log = store.load_log(id).await.unwrap();
    let messages: Vec<&Entry> = log.iter().filter(|e| e.as_compaction().is_none()).collect();
    assert_eq!(messages.len(), log_before.len());
    assert!(messages.iter().zip(&log_before).all(|(a, b)| *a == b));
    assert_eq!(store.export_revision(id, 0).await.unwrap(), export_g0);

    let view = store.load_view(id).await.unwrap();
    assert_eq!(view.instructions.len(), 1);
    assert_eq!(
        view.reminders.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![written[4]]
    );
    assert_eq!(view.tail.first().map(Entry::id), Some(written[20]));
    assert_eq!(view.tail.len(), 10);
    assert_eq!(store.archived_entries(pith_core::SessionId::new()), None);
}
