//! Store benchmarks: batched append throughput and the view load of a 100,000-entry session.
//!
//! Memory, SQLite (a file) and JSONL always; Postgres too when `PITH_TEST_POSTGRES_URL` is set
//! and the `postgres` feature is on. Run with
//! `cargo bench -p pith-store --all-features --bench store -- --measurement-time 5`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pith_core::{
    CompactionMeta, CompactionStrategy, CompactionTriggerKind, Entry, EntryId, Message, SessionId, Usage,
};
use pith_store::{
    AppendRequest, CommitRequest, CreateSession, JsonlStore, MemoryStore, SessionStore, SqliteStore,
};
use tokio::runtime::Runtime;

const BATCH: usize = 1_000;
const SESSION: usize = 100_000;
const TAIL: usize = 20;

fn batch(n: usize) -> Vec<Entry> {
    (0..n)
        .map(|i| {
            Entry::Message(Message::user(format!(
                "message {i}: the quick brown fox jumps over the lazy dog"
            )))
        })
        .collect()
}

fn meta(tail_start: EntryId, instruction: EntryId) -> CompactionMeta {
    CompactionMeta {
        id: EntryId::new(),
        generation: 1,
        summary: "a summary of the session so far".into(),
        summarized: None,
        tail_start: Some(tail_start),
        retained_instructions: vec![instruction],
        retained_reminders: vec![],
        masked: vec![],
        tokens_before: 1_000_000,
        tokens_after: 1_000,
        strategy: CompactionStrategy::Deterministic,
        summary_model: None,
        trigger: CompactionTriggerKind::Proactive,
        usage: Usage::default(),
        summary_calls: 0,
        idempotency_key: "bench".into(),
        created_at: chrono::Utc::now(),
        extra: None,
    }
}

/// A session of `SESSION` entries compacted so that the view keeps the last `TAIL`.
async fn big_session<S: SessionStore>(store: &S) -> SessionId {
    let record = store
        .create_session(CreateSession::new("bench/model").with_instruction("be brief"))
        .await
        .unwrap();
    let instruction = store.load_log(record.id).await.unwrap()[0].id();
    let mut tail_start = None;
    for chunk in 0..SESSION / 5_000 {
        let entries = batch(5_000);
        if chunk == SESSION / 5_000 - 1 {
            tail_start = Some(entries[5_000 - TAIL].id());
        }
        store
            .append(record.id, AppendRequest::new(entries))
            .await
            .unwrap();
    }
    let meta = meta(tail_start.unwrap(), instruction);
    store
        .commit_compaction(
            record.id,
            CommitRequest {
                meta,
                expected_generation: 0,
            },
        )
        .await
        .unwrap();
    record.id
}

fn bench_backend<S: SessionStore + 'static>(c: &mut Criterion, rt: &Runtime, name: &str, store: Arc<S>) {
    let mut group = c.benchmark_group(format!("append_{BATCH}/{name}"));
    group.throughput(Throughput::Elements(BATCH as u64));
    let session = rt
        .block_on(store.create_session(CreateSession::new("bench/model")))
        .unwrap()
        .id;
    group.bench_function("batch", |b| {
        b.to_async(rt).iter_batched(
            || AppendRequest::new(batch(BATCH)),
            |request| {
                let store = Arc::clone(&store);
                async move { store.append(session, request).await.unwrap() }
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();

    let big = rt.block_on(big_session(&*store));
    let mut group = c.benchmark_group(format!("load_view_{SESSION}/{name}"));
    group.bench_function("tail_20", |b| {
        b.to_async(rt).iter(|| {
            let store = Arc::clone(&store);
            async move {
                let view = store.load_view(big).await.unwrap();
                assert_eq!(view.tail.len(), TAIL);
                view
            }
        })
    });
    group.finish();
}

fn stores(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    bench_backend(c, &rt, "memory", Arc::new(MemoryStore::new()));
    let sqlite = rt
        .block_on(SqliteStore::open(dir.path().join("bench.db")))
        .unwrap();
    bench_backend(c, &rt, "sqlite", Arc::new(sqlite));
    let jsonl = rt.block_on(JsonlStore::open(dir.path().join("jsonl"))).unwrap();
    bench_backend(c, &rt, "jsonl", Arc::new(jsonl));
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("PITH_TEST_POSTGRES_URL") {
        let pg = rt.block_on(pith_store::PostgresStore::connect(&url)).unwrap();
        bench_backend(c, &rt, "postgres", Arc::new(pg));
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_secs(1));
    targets = stores
}
criterion_main!(benches);
