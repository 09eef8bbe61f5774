//! Conformance checks of the log: round trips, appends, dedupe keys, head checks, views.

use pith_core::{Entry, Message};
use pith_store::{AppendRequest, SessionStore, StoreError};

use super::fixtures::*;
use super::{append_users, assert_view_matches_reference, commit, new_session};

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
    assert_eq!(log[5], Entry::Compaction(Box::new(meta.clone())));
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
