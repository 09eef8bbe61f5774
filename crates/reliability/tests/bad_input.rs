//! The bad-input table: each bad input is a typed error naming the problem, and nothing is
//! written. Importer inputs go through the real importers; log-level inputs through the real
//! stores (memory, SQLite, JSONL) and the real CompactionService.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::sync::Arc;

use pith_compaction::{CompactionConfig, CompactionError, CompactionService, CompactionTrigger, ConfigError};
use pith_core::{Entry, Message, Part, SessionId};
use pith_import::{import_reader, validate, ImportError, ImportedSession, Location};
use pith_router::{ModelInfo, ModelRouter, ScriptedProvider};
use pith_store::{
    AppendRequest, CreateSession, JsonlStore, MemoryStore, SessionStore, SqliteStore, StoreError,
};
use serde_json::json;

const MODEL: &str = "scripted/test";
const CLAUDE_USER: &str = r#"{"type":"user","sessionId":"s","uuid":"u1","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hello"}}"#;

/// Imports bytes and, only when the import is whole, writes the session (how every caller of
/// the importers stores a transcript: nothing is written before the import succeeded).
async fn ingest(store: &dyn SessionStore, name: &str, bytes: impl Read) -> Result<SessionId, ImportError> {
    let ImportedSession { record, entries, .. } = import_reader(None, name, bytes)?;
    let session = store
        .create_session(CreateSession::new(record.model))
        .await
        .unwrap();
    store
        .append(session.id, AppendRequest::new(entries))
        .await
        .unwrap();
    Ok(session.id)
}

async fn assert_nothing_written(store: &dyn SessionStore) {
    assert!(store.list_sessions().await.unwrap().is_empty(), "nothing written");
}

#[tokio::test]
async fn a_truncated_json_line_names_file_and_line() {
    let store = MemoryStore::new();
    let text = format!("{CLAUDE_USER}\n{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"ty");
    let err = ingest(&store, "cut.jsonl", text.as_bytes()).await.unwrap_err();
    assert!(
        matches!(
            &err,
            ImportError::Truncated {
                location: Location::Line(2),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("cut.jsonl: line 2: truncated JSON"),
        "{err}"
    );
    assert_nothing_written(&store).await;
}

#[tokio::test]
async fn invalid_utf8_names_the_line_and_byte() {
    let store = MemoryStore::new();
    let mut bytes = format!("{CLAUDE_USER}\n").into_bytes();
    bytes.extend_from_slice(
        b"{\"type\":\"user\",\"sessionId\":\"s\",\"message\":{\"content\":\"caf\xE9\"}}\n",
    );
    let err = ingest(&store, "latin1.jsonl", bytes.as_slice())
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ImportError::InvalidUtf8 {
                location: Location::Line(2),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("invalid UTF-8 at byte"), "{err}");
    assert_nothing_written(&store).await;
}

/// A reader producing a 50 MB line without holding it in the test's memory.
fn fifty_mb_line(prefix: &str, fill: u8, suffix: &str) -> impl Read {
    const SIZE: u64 = 50 * 1024 * 1024;
    std::io::Cursor::new(prefix.as_bytes().to_vec())
        .chain(std::io::repeat(fill).take(SIZE))
        .chain(std::io::Cursor::new(suffix.as_bytes().to_vec()))
}

#[tokio::test]
async fn a_fifty_mb_line_that_never_closes_is_truncated_json_on_line_one() {
    let store = MemoryStore::new();
    let prefix = r#"{"type":"user","sessionId":"s","uuid":"u1","message":{"role":"user","content":""#;
    let err = ingest(&store, "huge.jsonl", fifty_mb_line(prefix, b'a', "\n"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ImportError::Truncated {
                location: Location::Line(1),
                ..
            }
        ),
        "{err:?}"
    );
    assert_nothing_written(&store).await;
}

#[tokio::test]
async fn a_fifty_mb_user_message_imports_but_cannot_be_compacted_or_sent() {
    // A well-formed 50 MB line is a real (if absurd) message: the import keeps it verbatim, and
    // compaction refuses it with sizes instead of shortening user text.
    let prefix = r#"{"type":"user","sessionId":"s","uuid":"u1","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":""#;
    let imported = import_reader(None, "huge.jsonl", fifty_mb_line(prefix, b'a', "\"}}\n")).unwrap();
    assert_eq!(
        imported.report.max_line_bytes,
        50 * 1024 * 1024 + prefix.len() as u64 + 4
    );
    let text = imported.entries[0].as_message().unwrap().text_content();
    assert_eq!(text.len(), 50 * 1024 * 1024, "user text is never shortened");

    let (service, store, session) =
        service_with(vec![Message::user(text)], CompactionConfig::default()).await;
    let before = store.load_log(session).await.unwrap();
    let err = service
        .compact(session, CompactionTrigger::Manual { instructions: None })
        .await
        .unwrap_err();
    match &err {
        CompactionError::DoesNotFit {
            needed, available, ..
        } => {
            assert!(*needed >= 50 * 1024 * 1024 / 4 && *available < *needed, "{err}");
        }
        other => panic!("expected DoesNotFit, got {other:?}"),
    }
    assert_eq!(
        store.load_log(session).await.unwrap(),
        before,
        "nothing committed"
    );
}

#[tokio::test]
async fn an_unknown_role_is_a_schema_error_naming_the_field() {
    let store = MemoryStore::new();
    let doc = json!({"info": {"config": {"model": {"model_name": "m"}}},
                     "messages": [{"role": "system", "content": "s"},
                                  {"role": "wizard", "content": "abracadabra"}],
                     "trajectory_format": "mini-swe-agent-1"});
    let err = ingest(&store, "run.traj.json", doc.to_string().as_bytes())
        .await
        .unwrap_err();
    assert!(matches!(&err, ImportError::Schema { .. }), "{err:?}");
    assert!(err.to_string().contains("role"), "{err}");
    assert_nothing_written(&store).await;

    // The same in a pith log: a stored line with an unknown role is corrupt data, named.
    let mut bad = serde_json::to_value(Entry::Message(Message::user("x"))).unwrap();
    assert_eq!(bad["role"], "user");
    bad["role"] = json!("wizard");
    let err = serde_json::from_value::<Entry>(bad).unwrap_err();
    assert!(err.to_string().contains("wizard"), "{err}");
}

fn call(id: &str) -> Message {
    Message::new(
        pith_core::Role::Assistant,
        vec![Part::ToolCall {
            call_id: id.into(),
            name: "read".into(),
            arguments: json!({"path": "a"}),
        }],
    )
}

#[test]
fn a_tool_result_with_no_call_at_all_is_rejected_by_position() {
    let log: Vec<Entry> = vec![
        Message::user("go"),
        Message::tool_result("call-ghost", "output", false),
        Message::assistant("done"),
    ]
    .into_iter()
    .map(Entry::Message)
    .collect();
    let err = validate(&log).unwrap_err();
    assert!(matches!(&err, ImportError::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains("entry 1"), "{err}");
    assert!(
        err.to_string().contains("\"call-ghost\" has no unanswered call"),
        "{err}"
    );
}

#[test]
fn repeated_tool_call_ids_are_legal_and_pair_by_position() {
    let log: Vec<Entry> = vec![
        Message::user("go"),
        call("call-1"),
        Message::tool_result("call-1", "first", false),
        call("call-1"),
        Message::tool_result("call-1", "second", false),
        Message::assistant("done"),
    ]
    .into_iter()
    .map(Entry::Message)
    .collect();
    validate(&log).unwrap();
    // A second result for an already answered call is not.
    let mut extra = log.clone();
    extra.insert(5, Entry::Message(Message::tool_result("call-1", "third", false)));
    assert!(validate(&extra).is_err());
}

async fn stores() -> (tempfile::TempDir, Vec<Arc<dyn SessionStore>>) {
    let dir = tempfile::tempdir().unwrap();
    let mut stores: Vec<Arc<dyn SessionStore>> = vec![
        Arc::new(MemoryStore::new()),
        Arc::new(SqliteStore::open(dir.path().join("d.db")).await.unwrap()),
        Arc::new(JsonlStore::open(dir.path().join("jsonl")).await.unwrap()),
    ];
    if let Some(url) = pith_testkit::postgres::url() {
        stores.push(Arc::new(pith_store::PostgresStore::connect(&url).await.unwrap()));
    }
    (dir, stores)
}

#[tokio::test]
async fn duplicate_entry_ids_are_rejected_by_every_store_with_nothing_written() {
    let (_dir, stores) = stores().await;
    for store in stores {
        let s = store.create_session(CreateSession::new(MODEL)).await.unwrap();
        let first = Message::user("one");
        store
            .append(s.id, AppendRequest::message(first.clone()))
            .await
            .unwrap();
        let before = store.load_log(s.id).await.unwrap();

        // Against the log, and within one batch.
        let mut again = Message::user("two");
        again.id = first.id;
        let err = store
            .append(
                s.id,
                AppendRequest::new(vec![Entry::Message(Message::user("ok")), Entry::Message(again)]),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::DuplicateEntry(id) if id == first.id),
            "{}",
            store.backend()
        );
        assert!(err.to_string().contains(&first.id.to_string()));
        let twin = Message::user("twin");
        let err = store
            .append(
                s.id,
                AppendRequest::new(vec![Entry::Message(twin.clone()), Entry::Message(twin)]),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::DuplicateEntry(_)),
            "{}: {err:?}",
            store.backend()
        );
        assert_eq!(store.load_log(s.id).await.unwrap(), before, "{}", store.backend());

        // Repeated tool-call ids are legal in every store.
        let pairs: Vec<Entry> = [
            call("c"),
            Message::tool_result("c", "1", false),
            call("c"),
            Message::tool_result("c", "2", false),
        ]
        .into_iter()
        .map(Entry::Message)
        .collect();
        store.append(s.id, AppendRequest::new(pairs)).await.unwrap();
    }
}

async fn service_with(
    messages: Vec<Message>,
    config: CompactionConfig,
) -> (CompactionService, Arc<dyn SessionStore>, SessionId) {
    let provider = Arc::new(ScriptedProvider::new("scripted"));
    let router = ModelRouter::new().with_provider("scripted", provider).with_model(
        MODEL,
        ModelInfo {
            context_window: 8_000,
            max_output: 1_000,
        },
    );
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let s = store.create_session(CreateSession::new(MODEL)).await.unwrap();
    if !messages.is_empty() {
        let entries = messages.into_iter().map(Entry::Message).collect();
        store.append(s.id, AppendRequest::new(entries)).await.unwrap();
    }
    (
        CompactionService::new(Arc::new(router), store.clone(), config),
        store,
        s.id,
    )
}

#[tokio::test]
async fn a_user_message_larger_than_the_window_does_not_fit_with_sizes() {
    let (service, store, session) = service_with(
        vec![
            Message::user("small start"),
            Message::assistant("ok"),
            Message::user("x".repeat(40_000)),
        ],
        CompactionConfig::default(),
    )
    .await;
    let before = store.load_log(session).await.unwrap();
    let err = service
        .compact(session, CompactionTrigger::Manual { instructions: None })
        .await
        .unwrap_err();
    match &err {
        CompactionError::DoesNotFit {
            needed, available, ..
        } => {
            assert!(*needed >= 10_000 && *available < 8_000, "{err}");
            let text = err.to_string();
            assert!(text.contains(&needed.to_string()) && text.contains(&available.to_string()));
        }
        other => panic!("expected DoesNotFit, got {other:?}"),
    }
    assert_eq!(
        store.load_log(session).await.unwrap(),
        before,
        "nothing committed"
    );
}

#[tokio::test]
async fn an_empty_session_has_no_messages_to_compact() {
    let (service, store, session) = service_with(Vec::new(), CompactionConfig::default()).await;
    let err = service
        .compact(session, CompactionTrigger::Manual { instructions: None })
        .await
        .unwrap_err();
    assert!(matches!(err, CompactionError::NoMessagesToCompact), "{err:?}");
    assert_eq!(err.to_string(), "no messages to compact");
    assert!(store.load_log(session).await.unwrap().is_empty());
    assert_eq!(
        store.breaker(session).await.unwrap().consecutive_failures,
        0,
        "not a counted failure"
    );
}

#[tokio::test]
async fn a_reserve_at_least_the_window_is_a_config_error_naming_both() {
    for reserve in [8_000, 9_000] {
        let config = CompactionConfig::default().with_reserve_tokens(reserve);
        let (service, store, session) =
            service_with(vec![Message::user("a"), Message::assistant("b")], config).await;
        let before = store.load_log(session).await.unwrap();
        let err = service
            .compact(session, CompactionTrigger::Manual { instructions: None })
            .await
            .unwrap_err();
        assert!(
            matches!(err, CompactionError::InvalidConfig(ConfigError::ReserveTooLarge { reserve: r, window: 8_000 }) if r == reserve),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&reserve.to_string()) && text.contains("8000"),
            "{text}"
        );
        assert_eq!(store.load_log(session).await.unwrap(), before);
    }
}
