//! Security: API keys never appear in logs, `Debug` output, errors, stored entries or exports;
//! SQL is only parameterised; session ids are validated at every boundary, so no id can name a
//! path outside a store's directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pith_compaction::{CompactionConfig, CompactionService, CompactionTrigger};
use pith_core::{Entry, Message, Part, SessionId, ToolDeclaration, Usage};
use pith_router::{
    Anthropic, ModelInfo, ModelRouter, OpenAiCompatible, ProviderConfig, ProviderLimits, SecretString,
};
use pith_runtime::{CancellationToken, Runtime, RuntimeConfig};
use pith_store::{
    AppendRequest, BreakerState, CreateSession, JsonlStore, SessionStore, SqliteStore, UsagePurpose,
    UsageRecord,
};
use pith_testkit::wire::{anthropic_message, json_response, openai_completion};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-canary-7f3a9c1e5b2d4f6a8c0e";
const ANTHROPIC_KEY: &str = "sk-ant-canary-0b1c2d3e4f5a6b7c";

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn assert_clean(what: &str, text: &str) {
    for key in [KEY, ANTHROPIC_KEY] {
        assert!(!text.contains(key), "{what} contains an API key:\n{text}");
        // Nor a long enough piece of it to be useful.
        assert!(!text.contains(&key[8..]), "{what} contains part of an API key");
    }
}

#[tokio::test]
async fn api_keys_never_reach_logs_debug_errors_entries_or_exports() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(capture.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = MockServer::start().await;
    let limits = ProviderLimits::default()
        .with_max_retries(1)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(2));
    let openai = ProviderConfig::default()
        .with_base_url(format!("{}/v1", server.uri()))
        .with_api_key(KEY)
        .with_limits(limits.clone());
    let anthropic = ProviderConfig::default()
        .with_base_url(format!("{}/anthropic/v1", server.uri()))
        .with_api_key(ANTHROPIC_KEY)
        .with_limits(limits);
    let mut debug = vec![
        format!("{openai:?}"),
        format!("{anthropic:?}"),
        format!("{:?}", SecretString::new(KEY)),
    ];
    let router = ModelRouter::new()
        .with_provider(
            "openai",
            Arc::new(OpenAiCompatible::stacked("openai", &openai).unwrap()),
        )
        .with_provider(
            "anthropic",
            Arc::new(Anthropic::stacked("anthropic", &anthropic).unwrap()),
        )
        .with_model(
            "openai/gpt-test",
            ModelInfo {
                context_window: 8_000,
                max_output: 1_000,
            },
        )
        .with_model(
            "anthropic/claude-test",
            ModelInfo {
                context_window: 8_000,
                max_output: 1_000,
            },
        );
    debug.push(format!("{router:?}"));

    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(dir.path().join("s.db")).await.unwrap());
    let runtime = Runtime::builder()
        .router(router)
        .store(store.clone())
        .compaction(CompactionConfig::default().with_keep_recent_turns(1))
        .config(RuntimeConfig::default().with_stream(false))
        .build()
        .unwrap();
    debug.push(format!("{runtime:?}"));

    // Successful turns on both protocols, then a manual compaction (a summary call).
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_response(200, openai_completion("All good.", 300, 4, 0)))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/anthropic/v1/messages"))
        .respond_with(json_response(200, anthropic_message("Fine.", 200, 3, 0, 0)))
        .mount(&server)
        .await;
    let a = runtime
        .create_session("openai/gpt-test", "Be brief.")
        .await
        .unwrap();
    let b = runtime
        .create_session("anthropic/claude-test", "Be brief.")
        .await
        .unwrap();
    for i in 0..3 {
        runtime
            .run_turn(a, format!("question {i}"), CancellationToken::new())
            .await
            .unwrap();
        runtime
            .run_turn(b, format!("question {i}"), CancellationToken::new())
            .await
            .unwrap();
    }
    runtime.compact(a, None).await.unwrap();

    // Errors: a provider that echoes the key back in its auth error, and a 500.
    let mut errors = Vec::new();
    server.reset().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_response(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}."),
                             "type": "invalid_request_error", "code": "invalid_api_key"}}),
        ))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/anthropic/v1/messages"))
        .respond_with(ResponseTemplate::new(500).set_body_raw("boom", "text/plain"))
        .mount(&server)
        .await;
    for (session, input) in [(a, "again"), (b, "again")] {
        let err = runtime
            .run_turn(session, input, CancellationToken::new())
            .await
            .unwrap_err();
        errors.push(format!("{err}"));
        errors.push(format!("{err:?}"));
        let mut source = std::error::Error::source(&err);
        while let Some(s) = source {
            errors.push(s.to_string());
            source = s.source();
        }
    }
    let failed = runtime.compact(a, Some("more".into())).await;
    if let Err(e) = failed {
        errors.push(format!("{e} {e:?}"));
    }

    // The key was really in use: every request carried it.
    let requests = server.received_requests().await.unwrap();
    assert!(requests.iter().any(|r| r
        .headers
        .get("authorization")
        .is_some_and(|v| v.to_str().unwrap().contains(KEY))));

    // Scan everything a person or a log shipper could see.
    for d in &debug {
        assert_clean("Debug output", d);
    }
    for e in &errors {
        assert_clean("an error", e);
    }
    for session in [a, b] {
        let log = store.load_log(session).await.unwrap();
        assert!(!log.is_empty());
        assert_clean("the stored log", &serde_json::to_string(&log).unwrap());
        assert_clean(
            "the usage ledger",
            &format!("{:?}", store.usage(session).await.unwrap()),
        );
        assert_clean(
            "the breaker",
            &format!("{:?}", store.breaker(session).await.unwrap()),
        );
        for rev in store.list_revisions(session).await.unwrap() {
            let export = store.export_revision(session, rev.generation).await.unwrap();
            assert_clean("an export", &String::from_utf8(export.bytes).unwrap());
        }
    }
    let db = std::fs::read(dir.path().join("s.db")).unwrap();
    let wal = std::fs::read(dir.path().join("s.db-wal")).unwrap_or_default();
    assert_clean("the database file", &String::from_utf8_lossy(&[db, wal].concat()));
    let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("llm.request") || logs.len() > 1_000,
        "tracing output was captured"
    );
    assert_clean("the tracing output", &logs);
}

const HOSTILE: &[&str] = &[
    "'); DROP TABLE entries;--",
    "\"; DROP TABLE sessions; --",
    "x' OR '1'='1",
    "Robert'); DELETE FROM compactions WHERE ('1'='1",
    "$1; TRUNCATE usage; --",
    "\\'; SELECT pg_sleep(5); --",
];

async fn hostile_round_trip(store: &dyn SessionStore) {
    for (i, evil) in HOSTILE.iter().enumerate() {
        let tool = ToolDeclaration {
            name: format!("tool{evil}"),
            description: evil.to_string(),
            parameters: json!({"type": "object", "description": evil}),
        };
        let record = store
            .create_session(CreateSession::new(format!("openai/{evil}")).with_tools(vec![tool.clone()]))
            .await
            .unwrap();
        let mut m = Message::user(*evil);
        m.parts.push(Part::ToolCall {
            call_id: evil.to_string(),
            name: evil.to_string(),
            arguments: json!({ "path": evil }),
        });
        let entries = vec![
            Entry::Message(m.clone()),
            Entry::Message(Message::tool_result(*evil, *evil, true)),
        ];
        store
            .append(
                record.id,
                AppendRequest::new(entries.clone()).with_dedupe_key(*evil),
            )
            .await
            .unwrap();
        let again = store
            .append(
                record.id,
                AppendRequest::new(entries.clone()).with_dedupe_key(*evil),
            )
            .await
            .unwrap();
        assert!(again.deduplicated, "the hostile dedupe key was stored intact");
        let breaker = BreakerState {
            consecutive_failures: 1,
            open: false,
            opened_at: None,
            last_error: Some(evil.to_string()),
        };
        store.set_breaker(record.id, breaker.clone()).await.unwrap();
        let usage = UsageRecord {
            at: chrono_now(),
            model: evil.to_string(),
            purpose: UsagePurpose::Turn,
            usage: Usage::from_openai(1, 1, 0),
            discarded: false,
        };
        store.record_usage(record.id, usage.clone()).await.unwrap();
        assert!(store.find_compaction(record.id, evil).await.unwrap().is_none());

        let back = store.get_session(record.id).await.unwrap();
        assert_eq!(back.model, format!("openai/{evil}"), "{}", store.backend());
        assert_eq!(back.tools, vec![tool]);
        assert_eq!(
            store.load_log(record.id).await.unwrap(),
            entries,
            "{} #{i}",
            store.backend()
        );
        assert_eq!(store.breaker(record.id).await.unwrap(), breaker);
        assert_eq!(store.usage(record.id).await.unwrap(), vec![usage]);
    }
    // Every table is still there and whole.
    let sessions = store.list_sessions().await.unwrap();
    assert!(sessions.len() >= HOSTILE.len());
}

fn chrono_now() -> chrono::DateTime<chrono::Utc> {
    // Whole seconds: every backend stores at least that precision.
    let now = chrono::Utc::now().timestamp();
    chrono::DateTime::from_timestamp(now, 0).unwrap()
}

#[tokio::test]
async fn hostile_strings_are_stored_and_read_back_intact_by_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("h.db")).await.unwrap();
    hostile_round_trip(&store).await;
    let conn = rusqlite::Connection::open(dir.path().join("h.db")).unwrap();
    for table in [
        "sessions",
        "entries",
        "compactions",
        "usage",
        "breakers",
        "dedupe_keys",
    ] {
        let n: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert!(n >= 0, "{table} exists");
    }
}

#[tokio::test]
async fn hostile_strings_are_stored_and_read_back_intact_by_postgres() {
    let Some(url) = pith_testkit::postgres::url() else {
        return;
    };
    let store = pith_store::PostgresStore::connect(&url).await.unwrap();
    hostile_round_trip(&store).await;
}

#[test]
fn session_ids_that_could_name_a_path_are_rejected_at_every_boundary() {
    for bad in [
        "../x",
        "..",
        "/etc/passwd",
        "a/b",
        "..\\x",
        "%2e%2e%2fx",
        "01a22cb9-3390-7726-9419-0146deddfa3c/../../x",
        "",
        "01a22cb9-3390-7726-9419-0146deddfa3c\0",
    ] {
        let parsed = bad.parse::<SessionId>();
        let err = parsed.expect_err(bad);
        assert!(err.to_string().contains("session"), "{err}");
        assert!(
            serde_json::from_value::<SessionId>(json!(bad)).is_err(),
            "serde accepts {bad:?}"
        );
        assert!(serde_json::from_value::<pith_core::EntryId>(json!(bad)).is_err());
    }
}

#[tokio::test]
async fn a_jsonl_session_directory_is_always_a_direct_child_of_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = JsonlStore::open(&root).await.unwrap();
    for _ in 0..200 {
        let id = SessionId::new();
        let path = store.session_dir(id);
        assert_eq!(path.parent(), Some(root.as_path()));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.chars().all(|c| c.is_ascii_hexdigit() || c == '-'), "{name}");
    }
    // A directory that is not a session id is never taken for one.
    std::fs::create_dir_all(root.join("..evil")).unwrap();
    std::fs::create_dir_all(root.join("not-a-session")).unwrap();
    let s = store.create_session(CreateSession::new("m/m")).await.unwrap();
    let listed = store.list_sessions().await.unwrap();
    assert_eq!(listed.iter().map(|r| r.id).collect::<Vec<_>>(), vec![s.id]);

    // Exporting and deleting stay inside the session's own directory.
    store.delete_session(s.id).await.unwrap();
    assert!(root.join("..evil").exists() && root.join("not-a-session").exists());
    assert!(dir.path().join("store").exists());
}

#[tokio::test]
async fn summary_usage_and_compaction_records_carry_no_key() {
    // The compaction record stores the summary model's name, never provider configuration.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_response(200, openai_completion("- summary", 500, 10, 0)))
        .mount(&server)
        .await;
    let config = ProviderConfig::default()
        .with_base_url(format!("{}/v1", server.uri()))
        .with_api_key(KEY);
    let router = ModelRouter::new()
        .with_provider(
            "openai",
            Arc::new(OpenAiCompatible::stacked("openai", &config).unwrap()),
        )
        .with_model(
            "openai/gpt-test",
            ModelInfo {
                context_window: 8_000,
                max_output: 1_000,
            },
        );
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::open(dir.path()).await.unwrap());
    let s = store
        .create_session(CreateSession::new("openai/gpt-test"))
        .await
        .unwrap();
    let entries = (0..6)
        .flat_map(|i| {
            [
                Message::user(format!("q{i}")),
                Message::assistant(format!("a{i}")),
            ]
        })
        .map(Entry::Message)
        .collect();
    store.append(s.id, AppendRequest::new(entries)).await.unwrap();
    CompactionService::new(
        Arc::new(router),
        store.clone(),
        CompactionConfig::default().with_keep_recent_turns(1),
    )
    .compact(s.id, CompactionTrigger::Manual { instructions: None })
    .await
    .unwrap();
    for file in walk(dir.path()) {
        let bytes = std::fs::read(&file).unwrap();
        assert_clean(&file.display().to_string(), &String::from_utf8_lossy(&bytes));
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
