//! Model-call slots (`RuntimeConfig::max_concurrent_model_calls`): turns of many sessions share a
//! bounded number of model calls, and the time a turn waits for one is reported.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pith_compaction::CompactionConfig;
use pith_core::Usage;
use pith_router::{
    ChatRequest, ChatResponse, ModelInfo, ModelRouter, Provider, ProviderError, ScriptedProvider, StreamSink,
};
use pith_runtime::{CancellationToken, Runtime, RuntimeConfig, TurnOutcome};
use pith_store::MemoryStore;

const MODEL: &str = "slow/model";

/// Answers every call with text after `delay`, counting the calls in flight.
struct Slow {
    delay: Duration,
    in_flight: AtomicUsize,
    most: AtomicUsize,
}

#[async_trait]
impl Provider for Slow {
    fn name(&self) -> &str {
        "slow"
    }

    async fn chat(
        &self,
        request: ChatRequest,
        _sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let mut reply = ScriptedProvider::text_reply("done", Usage::from_openai(50, 5, 0));
        reply.model = request.model;
        Ok(reply)
    }
}

/// A runtime over the memory store whose one model answers after `delay`.
fn runtime(delay: Duration, config: RuntimeConfig) -> (Runtime, Arc<Slow>) {
    let provider = Arc::new(Slow {
        delay,
        in_flight: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
    });
    let router = ModelRouter::new()
        .with_provider("slow", provider.clone())
        .with_model(
            MODEL,
            ModelInfo {
                context_window: 100_000,
                max_output: 512,
            },
        );
    let rt = Runtime::builder()
        .router(router)
        .store(Arc::new(MemoryStore::new()))
        .compaction(CompactionConfig::default())
        .config(config)
        .build()
        .unwrap();
    (rt, provider)
}

/// Runs one turn in each of `sessions` sessions at once; returns the outcomes and the most
/// model calls that were in flight together.
async fn run(sessions: usize, config: RuntimeConfig) -> (Vec<TurnOutcome>, usize) {
    let (rt, provider) = runtime(Duration::from_millis(40), config);
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let id = rt.create_session(MODEL, "Be brief.").await.unwrap();
        let rt = rt.clone();
        tasks.push(tokio::spawn(async move {
            rt.run_turn(id, format!("question {s}"), CancellationToken::new())
                .await
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap().unwrap());
    }
    (outcomes, provider.most.load(Ordering::SeqCst))
}

#[tokio::test]
async fn slots_bound_the_model_calls_in_flight_and_report_the_wait() {
    let (outcomes, most) = run(4, RuntimeConfig::default().with_max_concurrent_model_calls(2)).await;
    assert_eq!(outcomes.len(), 4);
    assert!(most <= 2, "{most} model calls ran at once with 2 slots");
    let waited = outcomes
        .iter()
        .filter(|o| o.model_slot_wait >= Duration::from_millis(20))
        .count();
    assert!(
        waited >= 2,
        "two of four turns must wait for a slot: {outcomes:?}"
    );
    assert!(outcomes.iter().all(|o| o.text() == "done"));
}

#[tokio::test]
async fn without_slots_every_session_calls_at_once_and_nothing_waits() {
    let (outcomes, most) = run(4, RuntimeConfig::default()).await;
    assert_eq!(most, 4, "unbounded: the four calls overlap");
    assert!(outcomes.iter().all(|o| o.model_slot_wait.is_zero()));
}

#[tokio::test]
async fn a_turn_cancelled_while_waiting_for_a_slot_ends_cancelled() {
    let (rt, provider) = runtime(
        Duration::from_millis(300),
        RuntimeConfig::default().with_max_concurrent_model_calls(1),
    );
    let a = rt.create_session(MODEL, "Be brief.").await.unwrap();
    let b = rt.create_session(MODEL, "Be brief.").await.unwrap();
    let first = {
        let rt = rt.clone();
        tokio::spawn(async move { rt.run_turn(a, "first", CancellationToken::new()).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let cancel = CancellationToken::new();
    let waiting = {
        let (rt, cancel) = (rt.clone(), cancel.clone());
        tokio::spawn(async move { rt.run_turn(b, "second", cancel).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    cancel.cancel();
    let second = waiting.await.unwrap();
    assert!(
        matches!(second, Err(pith_runtime::RuntimeError::Cancelled)),
        "{second:?}"
    );
    assert_eq!(provider.most.load(Ordering::SeqCst), 1);
    assert_eq!(first.await.unwrap().unwrap().text(), "done");
}
