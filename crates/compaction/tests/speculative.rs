//! Speculative compaction: a summary written past the soft threshold is adopted at the threshold
//! when it still covers the head of the view, and discarded (with a synchronous summary instead)
//! when the session diverged while it was being written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{append, turns, Harness};
use pith_compaction::{
    overflow, soft_threshold, CompactionConfig, CompactionError, CompactionService, CompactionTrigger,
    Summarizer, SummaryJob, SummaryOutput,
};
use pith_core::{CompactionStrategy, EntryId, EstimateCounter, Message, SessionId, Usage};
use pith_store::UsagePurpose;
use tokio::sync::Notify;

const WINDOW: u64 = 64_000;

/// What the summarizer saw of one job.
#[derive(Debug, Clone)]
struct Seen {
    last: Option<EntryId>,
    previous: Option<String>,
}

/// A summarizer whose first call waits for a gate (a slow summary model), that reports one
/// summary call per job to the job's call log and numbers its summaries.
struct Gated {
    label: &'static str,
    hold_first: AtomicBool,
    gate: Notify,
    entered: Notify,
    calls: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
}

impl Gated {
    fn new(label: &'static str, hold_first: bool) -> Arc<Self> {
        Arc::new(Self {
            label,
            hold_first: AtomicBool::new(hold_first),
            gate: Notify::new(),
            entered: Notify::new(),
            calls: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl Summarizer for Gated {
    fn strategy(&self) -> CompactionStrategy {
        CompactionStrategy::ModelSummary
    }

    async fn summarize(&self, job: SummaryJob) -> Result<SummaryOutput, CompactionError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        self.seen.lock().unwrap().push(Seen {
            last: job.span.last().map(|m| m.id),
            previous: job.previous_summary.clone(),
        });
        job.calls.record(
            "gated/model",
            UsagePurpose::Summary,
            Usage::from_openai(5_000, 300, 0),
        );
        if self.hold_first.swap(false, Ordering::SeqCst) {
            self.entered.notify_one();
            self.gate.notified().await;
        }
        Ok(SummaryOutput {
            text: format!("{} summary #{n} of {} messages", self.label, job.span.len()),
            strategy: CompactionStrategy::ModelSummary,
            model: Some("gated/model".into()),
        })
    }
}

/// Speculation alone: tiered masking off (it would handle these tool-heavy sessions by itself).
fn config(summarizer: Arc<Gated>) -> CompactionConfig {
    CompactionConfig::default()
        .with_count_signal(false)
        .with_tiered(false)
        .with_summarizer(summarizer)
}

/// (context tokens, generation, threshold) of the session's stored view.
async fn measure(h: &Harness, service: &CompactionService, id: SessionId) -> (u64, u64, u64) {
    let view = h.store.load_view(id).await.unwrap();
    let ctx = overflow::context_tokens(
        &view,
        service.config().projection,
        &view.session.tools,
        &EstimateCounter,
    );
    let threshold = service.config().threshold(WINDOW).unwrap();
    (ctx, view.generation, threshold)
}

/// A session between the soft and the hard threshold.
async fn session_past_soft(h: &Harness, service: &CompactionService) -> (SessionId, u64, u64) {
    let id = h.session(turns(0, 40, 8_000)).await;
    let (ctx, generation, threshold) = measure(h, service, id).await;
    assert!(
        ctx > soft_threshold(threshold).unwrap() && ctx <= threshold,
        "fixture must sit between the thresholds: {ctx} vs {threshold}"
    );
    (id, generation, ctx)
}

/// A session between the thresholds whose speculative summary call has started and waits.
async fn speculating(h: &Harness) -> (Arc<Gated>, CompactionService, SessionId, u64, u64) {
    let summarizer = Gated::new("spec", true);
    let service = h.service(config(summarizer.clone()));
    let (id, generation, ctx) = session_past_soft(h, &service).await;
    let threshold = service.config().threshold(WINDOW).unwrap();
    assert!(service.speculate(id, generation, ctx, threshold));
    summarizer.entered.notified().await;
    (summarizer, service, id, generation, threshold)
}

async fn wait_for_discarded_usage(h: &Harness, id: SessionId) -> usize {
    for _ in 0..200 {
        let n = h
            .store
            .usage(id)
            .await
            .unwrap()
            .iter()
            .filter(|r| r.discarded)
            .count();
        if n > 0 {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    0
}

#[tokio::test]
async fn speculation_starts_only_between_the_soft_and_the_hard_threshold() {
    let h = Harness::new(WINDOW);
    let summarizer = Gated::new("spec", false);
    let service = h.service(config(summarizer.clone()));
    let threshold = service.config().threshold(WINDOW).unwrap();
    let soft = soft_threshold(threshold).unwrap();
    let id = h.session(turns(0, 2, 100)).await;
    assert!(
        !service.speculate(id, 0, soft, threshold),
        "at the soft threshold: not yet"
    );
    assert!(
        !service.speculate(id, 0, threshold + 1, threshold),
        "over: compact instead"
    );
    let off = h.service(config(summarizer.clone()).with_speculative(false));
    assert!(!off.speculate(id, 0, soft + 1, threshold), "switched off");
    assert!(!CompactionConfig::pi().speculative && !CompactionConfig::codex().speculative);
    assert!(CompactionConfig::default().speculative, "on by default");
    assert!(service.speculate(id, 0, soft + 1, threshold));
    assert!(
        !service.speculate(id, 0, soft + 2, threshold),
        "one speculation per generation"
    );
    assert!(service.has_speculation(id));
}

#[tokio::test]
async fn the_threshold_compaction_adopts_the_background_summary() {
    let h = Harness::new(WINDOW);
    let (summarizer, service, id, generation, threshold) = speculating(&h).await;

    // The session goes on while the summary is being written, past the hard threshold.
    let later = turns(40, 48, 8_000);
    let later_ids: Vec<EntryId> = later.iter().map(|m| m.id).collect();
    append(h.store.as_ref(), id, later).await;
    let (ctx, _, _) = measure(&h, &service, id).await;
    assert!(ctx > threshold, "{ctx} must be over {threshold}");

    // The summary call is still running when the threshold is reached: it is awaited.
    let release = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        summarizer.gate.notify_one();
    };
    let (result, ()) = tokio::join!(service.compact(id, CompactionTrigger::Proactive), release);
    let result = result.unwrap();

    assert_eq!(summarizer.calls(), 1, "no second summary call");
    assert!(result.meta.summary.contains("spec summary #1"));
    let spec_last = summarizer.seen()[0].last.unwrap();
    assert_eq!(result.meta.summarized.unwrap().last, spec_last);
    let view = h.store.load_view(id).await.unwrap();
    assert_eq!(view.generation, generation + 1);
    let tail: Vec<EntryId> = view.tail_messages().map(|m| m.id).collect();
    for id in &later_ids {
        assert!(
            tail.contains(id),
            "messages added during the summary stay in the tail"
        );
    }
    let target = (threshold as f64 * service.config().target_ratio) as u64;
    assert!(
        result.tokens_after <= target,
        "{} > {target}",
        result.tokens_after
    );
    let usage = h.store.usage(id).await.unwrap();
    assert_eq!(usage.len(), 1);
    assert!(!usage[0].discarded, "the adopted call is not discarded");
    assert_eq!(result.meta.summary_calls, 1);
    assert!(!service.has_speculation(id));
}

#[tokio::test]
async fn a_speculation_of_a_diverged_session_is_discarded_for_a_synchronous_summary() {
    let h = Harness::new(WINDOW);
    let (summarizer, service, id, generation, threshold) = speculating(&h).await;

    // Meanwhile another process compacts the session (a new generation) ...
    let other_summarizer = Gated::new("other", false);
    let other = h.service(config(other_summarizer.clone()));
    let manual = CompactionTrigger::Manual {
        instructions: Some("keep the file names".into()),
    };
    other.compact(id, manual).await.unwrap();
    // ... and the session grows past the threshold again.
    append(h.store.as_ref(), id, turns(40, 84, 8_000)).await;
    let (ctx, generation_now, _) = measure(&h, &service, id).await;
    assert_eq!(generation_now, generation + 1);
    assert!(ctx > threshold, "{ctx} must be over {threshold}");

    let result = service.compact(id, CompactionTrigger::Proactive).await.unwrap();
    assert_eq!(
        summarizer.calls(),
        2,
        "the stale speculation is replaced by a summary now"
    );
    assert!(
        result.meta.summary.contains("spec summary #2"),
        "{}",
        result.meta.summary
    );
    assert!(!result.meta.summary.contains("#1"));
    let sync = &summarizer.seen()[1];
    assert!(
        sync.previous
            .as_deref()
            .unwrap_or("")
            .contains("other summary #1"),
        "the summary continues the other process's compaction: {:?}",
        sync.previous
    );
    assert_eq!(h.store.load_view(id).await.unwrap().generation, generation + 2);
    assert_eq!(
        wait_for_discarded_usage(&h, id).await,
        1,
        "the speculative call is in the ledger, marked discarded"
    );
}

#[tokio::test]
async fn a_speculation_that_would_not_fit_falls_back_to_a_synchronous_summary() {
    let h = Harness::new(WINDOW);
    let (summarizer, service, id, _, _) = speculating(&h).await;
    summarizer.gate.notify_one();
    // One long exchange after the speculation: keeping it all after the speculative cut
    // would not fit the target.
    append(
        h.store.as_ref(),
        id,
        vec![
            Message::user("x".repeat(60_000)),
            Message::assistant("y".repeat(40_000)),
            Message::user("go on"),
        ],
    )
    .await;
    let result = service.compact(id, CompactionTrigger::Proactive).await.unwrap();
    assert_eq!(summarizer.calls(), 2);
    let seen = summarizer.seen();
    assert_ne!(seen[0].last, seen[1].last, "the synchronous summary cuts later");
    assert_eq!(result.meta.summarized.unwrap().last, seen[1].last.unwrap());
    assert_eq!(wait_for_discarded_usage(&h, id).await, 1);
}

#[tokio::test]
async fn no_summary_is_speculated_when_masking_old_outputs_will_reach_the_target() {
    let h = Harness::new(WINDOW);
    let summarizer = Gated::new("spec", false);
    let service = h.service(config(summarizer.clone()).with_tiered(true));
    let (id, generation, ctx) = session_past_soft(&h, &service).await;
    let threshold = service.config().threshold(WINDOW).unwrap();
    assert!(service.speculate(id, generation, ctx, threshold));
    // Let the background task run to its end.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(summarizer.calls(), 0, "no summary call was speculated");

    append(h.store.as_ref(), id, turns(40, 48, 8_000)).await;
    let result = service.compact(id, CompactionTrigger::Proactive).await.unwrap();
    assert_eq!(result.strategy, CompactionStrategy::MaskOnly);
    assert_eq!(summarizer.calls(), 0);
    assert!(h.store.usage(id).await.unwrap().is_empty(), "nothing paid for");
}
