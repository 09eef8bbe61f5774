//! Scripted-provider tests of the CompactionService.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::*;
use pith_compaction::{
    overflow, CompactionConfig, CompactionError, CompactionTrigger, IncrementalMode, OverflowInfo,
};
use pith_core::{AgentEvent, CompactionStrategy, FinishReason, Message, Usage};
use pith_router::{
    ChatRequest, ChatResponse, ModelInfo, Provider, ProviderError, ScriptedProvider, StreamSink,
};
use pith_store::UsagePurpose;
use tokio_util::sync::CancellationToken;

fn manual() -> CompactionTrigger {
    CompactionTrigger::Manual { instructions: None }
}

#[tokio::test]
async fn a_retry_with_the_same_key_makes_one_model_call() {
    let h = Harness::new(32_000);
    let id = h.session(turns(0, 12, 2_000)).await;
    h.summary("SUMMARY-ONE");
    let service = h.service(CompactionConfig::default());
    let first = service.compact(id, manual()).await.unwrap();
    assert!(!first.noop);
    assert_eq!(first.summary_calls, 1);
    let again = service.compact(id, manual()).await.unwrap();
    assert!(again.noop);
    assert_eq!(again.meta, first.meta);
    assert_eq!(h.provider.requests().len(), 1);
    let log = h.store.load_log(id).await.unwrap();
    assert_eq!(log.iter().filter(|e| e.as_compaction().is_some()).count(), 1);
}

#[tokio::test]
async fn the_second_incremental_compaction_sends_only_the_delta_and_the_previous_summary() {
    let h = Harness::new(32_000);
    let id = h.session(turns(0, 12, 2_000)).await;
    h.summary("SUMMARY-ONE");
    h.summary("SUMMARY-TWO");
    let service = h.service(CompactionConfig::default().with_ledger(false));
    let first = service.compact(id, manual()).await.unwrap();
    let kept_first = first.meta.tail_start.unwrap();
    append(h.store.as_ref(), id, turns(100, 108, 2_000)).await;
    let second = service.compact(id, manual()).await.unwrap();
    assert_eq!(second.meta.generation, 2);
    assert_eq!(second.meta.summary, "SUMMARY-TWO");
    let requests = h.provider.requests();
    assert_eq!(requests.len(), 2);
    let prompt = user_prompt(&requests[1]);
    assert_eq!(
        section(&prompt, "previous-summary").unwrap().trim(),
        "SUMMARY-ONE"
    );
    let conversation = section(&prompt, "conversation").unwrap();
    assert!(
        !conversation.contains("Turn 0:"),
        "already summarised turns are not sent again"
    );
    assert!(conversation.contains("Turn 100:"), "the delta is sent");
    let log = h.store.load_log(id).await.unwrap();
    let kept_text = log
        .iter()
        .filter_map(|e| e.as_message())
        .find(|m| m.id == kept_first)
        .unwrap()
        .text_content();
    if !kept_text.is_empty() {
        assert!(
            conversation.contains(&kept_text),
            "the first compaction's tail is part of the delta"
        );
    }
    let kept = section(&prompt, "kept-verbatim").unwrap();
    assert!(kept.contains("Turn 107:"), "the kept tail is sent for reference");
    assert!(!conversation.contains("Turn 107:"));
}

#[tokio::test]
async fn a_summary_model_window_smaller_than_the_span_gives_chunks_then_a_merge() {
    let provider = Arc::new(ScriptedProvider::new("scripted"));
    let router = router(provider.clone(), 200_000).with_model(
        "scripted/small",
        ModelInfo {
            context_window: 4_096,
            max_output: 512,
        },
    );
    let h = Harness::with_router(router, provider);
    let id = h.session(turns(0, 40, 3_000)).await;
    for i in 0..30 {
        h.summary(&format!("chunk summary {i}"));
    }
    let config = CompactionConfig::default()
        .with_ledger(false)
        .with_summary_model("scripted/small")
        .with_max_summary_calls(40);
    let result = h.service(config).compact(id, manual()).await.unwrap();
    let requests = h.provider.requests();
    assert!(requests.len() >= 3, "{} requests", requests.len());
    let budget = pith_compaction::budget::RequestBudget::for_window(4_096);
    for r in &requests {
        let tokens = pith_compaction::budget::request_tokens(&pith_core::EstimateCounter, &r.messages);
        assert!(
            budget.fits(tokens),
            "every request fits the summary model: {tokens}"
        );
        assert_eq!(r.max_tokens, Some(409));
        assert_eq!(r.model, "small");
    }
    let last = user_prompt(requests.last().unwrap());
    assert!(
        last.contains("Partial summary 1 of"),
        "the last call merges the chunk summaries"
    );
    assert_eq!(result.summary_calls as usize, requests.len());
    assert_eq!(
        result.meta.summary,
        format!("chunk summary {}", requests.len() - 1)
    );
    assert_eq!(result.strategy, CompactionStrategy::ModelSummary);
}

#[tokio::test]
async fn an_empty_summary_fails_and_leaves_history_unchanged() {
    let h = Harness::new(32_000);
    let id = h.session(turns(0, 12, 2_000)).await;
    h.provider.push_text("   ", Usage::from_openai(900, 3, 0));
    let before = h.store.load_log(id).await.unwrap();
    let err = h
        .service(CompactionConfig::default())
        .compact(id, manual())
        .await
        .unwrap_err();
    assert!(matches!(err, CompactionError::SummaryFailed(_)), "{err}");
    assert_eq!(h.store.load_log(id).await.unwrap(), before);
    let ledger = h.store.usage(id).await.unwrap();
    assert_eq!(ledger.len(), 1);
    assert!(ledger[0].discarded);
    assert_eq!(ledger[0].usage.input, 900);
    assert_eq!(h.store.breaker(id).await.unwrap().consecutive_failures, 1);
}

#[tokio::test]
async fn three_failures_open_the_circuit_once_and_reset_closes_it() {
    let h = Harness::new(32_000);
    let id = h.session(turns(0, 12, 2_000)).await;
    let service = h.service(CompactionConfig::default());
    for _ in 0..3 {
        h.provider
            .push_error(ProviderError::InvalidResponse("garbled".into()));
        let err = service.compact(id, manual()).await.unwrap_err();
        assert!(matches!(err, CompactionError::SummaryFailed(_)));
    }
    let opened = |events: &[AgentEvent]| {
        events
            .iter()
            .filter(|e| matches!(e, AgentEvent::CompactionCircuitOpened { .. }))
            .count()
    };
    assert_eq!(opened(&h.sink.events()), 1);
    h.summary("never used while open");
    let err = service.compact(id, manual()).await.unwrap_err();
    assert!(matches!(err, CompactionError::CircuitOpen));
    assert_eq!(
        h.provider.requests().len(),
        3,
        "an open circuit makes no model call"
    );
    assert_eq!(opened(&h.sink.events()), 1, "published exactly once");
    assert!(service.circuit_status(id).await.unwrap().open);
    service.reset_circuit(id).await.unwrap();
    assert!(h
        .sink
        .events()
        .iter()
        .any(|e| matches!(e, AgentEvent::CompactionCircuitReset { .. })));
    let ok = service.compact(id, manual()).await.unwrap();
    assert!(!ok.noop);
    assert_eq!(service.circuit_status(id).await.unwrap().consecutive_failures, 0);
}

/// A provider that cancels a token right after the inner provider replied.
struct CancelAfterReply {
    inner: Arc<ScriptedProvider>,
    token: CancellationToken,
}

#[async_trait]
impl Provider for CancelAfterReply {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn chat(
        &self,
        request: ChatRequest,
        sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        let reply = self.inner.chat(request, sink).await;
        self.token.cancel();
        reply
    }
}

#[tokio::test]
async fn cancellation_after_the_model_returns_commits_nothing_and_records_usage() {
    let inner = Arc::new(ScriptedProvider::new("scripted"));
    let token = CancellationToken::new();
    let wrapper = Arc::new(CancelAfterReply {
        inner: inner.clone(),
        token: token.clone(),
    });
    let router = pith_router::ModelRouter::new()
        .with_provider("scripted", wrapper)
        .with_model(
            MODEL,
            ModelInfo {
                context_window: 32_000,
                max_output: 1_000,
            },
        );
    let h = Harness::with_router(router, inner);
    let id = h.session(turns(0, 12, 2_000)).await;
    h.summary("a summary that arrives too late");
    let before = h.store.load_log(id).await.unwrap();
    let err = h
        .service(CompactionConfig::default())
        .compact_with_cancel(id, manual(), token)
        .await
        .unwrap_err();
    assert!(matches!(err, CompactionError::Cancelled));
    assert_eq!(h.store.load_log(id).await.unwrap(), before);
    let ledger = h.store.usage(id).await.unwrap();
    assert_eq!(ledger.len(), 1);
    assert!(ledger[0].discarded);
    assert_eq!(ledger[0].purpose, UsagePurpose::Summary);
    assert_eq!(h.store.breaker(id).await.unwrap().consecutive_failures, 0);
}

#[tokio::test]
async fn append_mode_concatenates_then_merges_past_max_summary_tokens() {
    let h = Harness::new(32_000);
    let id = h.session(turns(0, 12, 1_000)).await;
    let config = CompactionConfig::default()
        .with_ledger(false)
        .with_incremental_mode(IncrementalMode::Append)
        .with_max_summary_tokens(60);
    let service = h.service(config);
    h.summary("first summary");
    service.compact(id, manual()).await.unwrap();
    append(h.store.as_ref(), id, turns(20, 26, 1_000)).await;
    h.summary("delta summary");
    let second = service.compact(id, manual()).await.unwrap();
    assert_eq!(second.meta.summary, "first summary\n\ndelta summary");
    let delta_prompt = user_prompt(&h.provider.requests()[1]);
    assert!(
        section(&delta_prompt, "previous-summary").is_none(),
        "append mode sends the delta alone"
    );
    append(h.store.as_ref(), id, turns(40, 46, 1_000)).await;
    h.summary(&"long delta ".repeat(20));
    h.summary("merged summary");
    let third = service.compact(id, manual()).await.unwrap();
    assert_eq!(third.meta.summary, "merged summary");
    assert_eq!(third.summary_calls, 2);
    let requests = h.provider.requests();
    assert_eq!(requests.len(), 4);
    let merge = user_prompt(&requests[3]);
    let previous = section(&merge, "previous-summary").unwrap();
    assert!(previous.contains("first summary\n\ndelta summary"));
    assert!(previous.contains("long delta"));
}

#[tokio::test]
async fn a_reactive_trigger_calibrates_from_the_stated_token_counts() {
    let h = Harness::new(128_000);
    let id = h.session(turns(0, 30, 3_000)).await;
    // The learned 24k window is smaller than the span: chunk summaries, then a merge.
    for i in 0..12 {
        h.summary(&format!("reactive summary {i}"));
    }
    let error = ProviderError::ContextOverflow {
        message: "request (40000 tokens) exceeds the available context size (24000 tokens)".into(),
        limit: Some(24_000),
        requested: Some(40_000),
    };
    let info = OverflowInfo::from_error(&error).unwrap();
    let result = h
        .service(CompactionConfig::default())
        .compact(id, CompactionTrigger::Reactive(info))
        .await
        .unwrap();
    assert_eq!(
        h.router.context_window(MODEL),
        24_000,
        "the stated limit corrects the window"
    );
    assert_eq!(result.tokens_before, 40_000);
    let threshold = overflow::threshold(24_000, None).unwrap();
    assert!(result.tokens_after <= (threshold as f64 * 0.6) as u64);
    let view = view(h.store.as_ref(), id).await;
    let after = overflow::context_tokens(&view, Default::default(), &[], &pith_core::EstimateCounter);
    assert_eq!(after, result.tokens_after);
    // The calibration (40,000 stated vs. the local estimate) shrank the kept tail below the
    // uncalibrated budget of 40% of the threshold.
    assert!(result.tokens_after < threshold * 2 / 5 + 1_500);
}

#[tokio::test]
async fn a_non_success_finish_is_a_failure() {
    let h = Harness::new(32_000);
    let id = h.session(turns(0, 12, 2_000)).await;
    h.provider.push(Ok(ScriptedProvider::reply(
        Message::assistant("half a summ"),
        FinishReason::Length,
        Usage::from_openai(10, 10, 0),
    )));
    let err = h
        .service(CompactionConfig::default())
        .compact(id, manual())
        .await
        .unwrap_err();
    assert!(matches!(err, CompactionError::SummaryFailed(_)), "{err}");
    assert!(view(h.store.as_ref(), id).await.compaction.is_none());
}

#[tokio::test]
async fn an_empty_session_has_nothing_to_compact() {
    let h = Harness::new(32_000);
    let empty = h.session(vec![]).await;
    let service = h.service(CompactionConfig::default());
    assert!(matches!(
        service.compact(empty, manual()).await,
        Err(CompactionError::NoMessagesToCompact)
    ));
    let only_rules = h.session(vec![Message::system("be brief")]).await;
    assert!(matches!(
        service.compact(only_rules, manual()).await,
        Err(CompactionError::NoMessagesToCompact)
    ));
    assert_eq!(h.store.breaker(empty).await.unwrap().consecutive_failures, 0);
    assert!(h.provider.requests().is_empty());
}

#[tokio::test]
async fn a_single_user_message_larger_than_the_window_does_not_fit() {
    let h = Harness::new(8_192);
    let id = h.session(vec![Message::user("p".repeat(60_000))]).await;
    let err = h
        .service(CompactionConfig::default().with_deterministic_summarizer())
        .compact(id, CompactionTrigger::Proactive)
        .await
        .unwrap_err();
    assert!(matches!(err, CompactionError::DoesNotFit { .. }), "{err}");
    assert!(err.counts_toward_breaker());
    assert_eq!(h.store.breaker(id).await.unwrap().consecutive_failures, 1);
}

#[tokio::test]
async fn proactive_compaction_is_skipped_when_not_needed() {
    let h = Harness::new(128_000);
    let id = h.session(turns(0, 2, 100)).await;
    let err = h
        .service(CompactionConfig::default())
        .compact(id, CompactionTrigger::Proactive)
        .await
        .unwrap_err();
    assert!(matches!(err, CompactionError::NotNeeded { .. }));
    assert!(!err.counts_toward_breaker());
    assert!(h.provider.requests().is_empty());
}
