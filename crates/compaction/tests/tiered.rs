//! Tiered compaction: old tool outputs are masked before summarising, and a masking that is
//! enough on its own is committed without a summary call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashSet;

use common::*;
use pith_compaction::overflow::{self, message_tokens};
use pith_compaction::{project, prune, tier, CompactionConfig, CompactionTrigger};
use pith_core::{AgentEvent, CompactionStrategy, EntryId, EstimateCounter, Message, Part, StoredView};

/// 128k window: threshold 111,616; protected 40,000; at least 20,000 freed; target 66,969.
const WINDOW: u64 = 128_000;
const THRESHOLD: u64 = 111_616;

fn config() -> CompactionConfig {
    CompactionConfig::default().with_count_signal(false)
}

/// 120 turns with a ~980-token tool output each: ~125k tokens, nearly all of it tool output.
fn tool_heavy() -> Vec<Message> {
    turns(0, 120, 3_900)
}

/// (entry, call, tokens as sent) of every tool result of a view's tail, newest first.
fn results_newest_first(view: &StoredView) -> Vec<(EntryId, String, u64)> {
    let mut out = Vec::new();
    for m in view.tail_messages() {
        for part in &m.parts {
            if let Part::ToolResult { call_id, content, .. } = part {
                let sent = message_tokens(
                    &EstimateCounter,
                    &Message::tool_result(call_id, content.as_str(), false),
                );
                out.push((m.id, call_id.clone(), sent));
            }
        }
    }
    out.reverse();
    out
}

#[tokio::test]
async fn a_masking_that_reaches_the_target_commits_without_a_summary_call() {
    let h = Harness::new(WINDOW);
    let id = h.session(tool_heavy()).await;
    let before = view(h.store.as_ref(), id).await;
    let service = h.service(config());
    let r = service.compact(id, CompactionTrigger::Proactive).await.unwrap();
    assert_eq!(r.strategy, CompactionStrategy::MaskOnly);
    assert_eq!(r.summary_calls, 0);
    assert!(h.provider.requests().is_empty(), "no summary call is made");
    assert!(!r.meta.masked.is_empty());
    assert!(r.meta.summary.is_empty(), "no summary existed, none is invented");
    assert!(r.tokens_before > THRESHOLD);
    assert!(
        r.tokens_after <= prune::target(THRESHOLD, 0.6),
        "{}",
        r.tokens_after
    );

    // The originals stay in the log, untouched.
    let log = h.store.load_log(id).await.unwrap();
    for original in before.tail_messages() {
        let logged = log
            .iter()
            .filter_map(|e| e.as_message())
            .find(|m| m.id == original.id)
            .unwrap();
        assert_eq!(logged, original);
    }

    // Events as for any commit.
    let events = h.sink.events();
    assert!(events
        .iter()
        .any(|e| matches!(e, AgentEvent::CompactionStarted { .. })));
    assert!(events
        .iter()
        .any(|e| matches!(e, AgentEvent::HistoryReplaced { generation: 1, .. })));
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::CompactionFinished {
            strategy: CompactionStrategy::MaskOnly,
            ..
        }
    )));

    // The committed view no longer needs a compaction, and a repeat is a no-op.
    let after = tier::masked_view(view(h.store.as_ref(), id).await);
    let decision = overflow::decide(&after, &[], &EstimateCounter, WINDOW, &config()).unwrap();
    assert!(!decision.is_needed(), "{decision:?}");
    let again = service.compact(id, CompactionTrigger::Proactive).await.unwrap();
    assert!(again.noop);
    assert_eq!(again.meta.id, r.meta.id);
    assert_eq!(log.iter().filter(|e| e.as_compaction().is_some()).count(), 1);
}

#[tokio::test]
async fn the_newest_tool_output_is_protected() {
    let h = Harness::new(WINDOW);
    let id = h.session(tool_heavy()).await;
    let loaded = view(h.store.as_ref(), id).await;
    let r = h
        .service(config())
        .compact(id, CompactionTrigger::Proactive)
        .await
        .unwrap();
    let masked: HashSet<(EntryId, String)> = r
        .meta
        .masked
        .iter()
        .map(|m| (m.entry_id, m.call_id.clone()))
        .collect();
    let mut seen = 0;
    let mut protected = 0;
    for (entry, call, sent) in results_newest_first(&loaded) {
        if seen < tier::protected_tokens(THRESHOLD) {
            assert!(
                !masked.contains(&(entry, call)),
                "a result within the newest 40,000 tokens was masked"
            );
            protected += 1;
        } else {
            assert!(
                masked.contains(&(entry, call)),
                "every older result of 50 tokens or more is masked"
            );
        }
        seen += sent;
    }
    assert!(protected >= 40, "{protected} results protected");
    assert_eq!(tier::protected_tokens(THRESHOLD), 40_000);
    assert_eq!(tier::protected_tokens(10_000), 5_000);
}

#[tokio::test]
async fn results_under_fifty_tokens_are_never_masked() {
    let h = Harness::new(WINDOW);
    let mut messages = Vec::new();
    for i in 0..160 {
        // Every third output is tiny (about 40 tokens).
        let chars = if i % 3 == 0 { 150 } else { 5_000 };
        messages.extend(turn(i, chars));
    }
    let id = h.session(messages).await;
    let r = h
        .service(config())
        .compact(id, CompactionTrigger::Proactive)
        .await
        .unwrap();
    assert_eq!(r.strategy, CompactionStrategy::MaskOnly);
    let log = h.store.load_log(id).await.unwrap();
    for mask in &r.meta.masked {
        let m = log
            .iter()
            .filter_map(|e| e.as_message())
            .find(|m| m.id == mask.entry_id)
            .unwrap();
        let (_, content, _) = m.tool_results().next().unwrap();
        assert!(content.len() > 200, "a small result was masked: {content:?}");
        assert!(mask.tokens >= tier::MIN_MASKABLE_TOKENS);
    }
    assert!(log
        .iter()
        .filter_map(|e| e.as_message())
        .any(|m| m.tool_results().any(|(_, c, _)| c.len() < 200)));
}

#[tokio::test]
async fn too_little_to_free_means_a_summary_not_a_masking() {
    // Mostly user text: the tool outputs outside the protected window free far less than 20,000.
    let h = Harness::new(WINDOW);
    let mut messages = Vec::new();
    for i in 0..60 {
        messages.push(Message::user(format!(
            "Turn {i}: {}",
            "please consider this. ".repeat(360)
        )));
        messages.push(call(
            &format!("c{i}"),
            "read",
            serde_json::json!({ "path": "a.rs" }),
        ));
        messages.push(Message::tool_result(format!("c{i}"), "y".repeat(3_000), false));
        messages.push(Message::assistant(format!("Answer {i}")));
    }
    let id = h.session(messages).await;
    let loaded = view(h.store.as_ref(), id).await;
    assert!(tier::choose(&loaded, &EstimateCounter, THRESHOLD).is_none());
    for _ in 0..4 {
        h.summary("SUMMARY");
    }
    let r = h
        .service(config())
        .compact(id, CompactionTrigger::Proactive)
        .await
        .unwrap();
    assert_eq!(r.strategy, CompactionStrategy::ModelSummary);
    assert!(!h.provider.requests().is_empty());
    assert!(r.meta.masked.is_empty());
}

#[tokio::test]
async fn tiered_off_always_summarises() {
    let h = Harness::new(WINDOW);
    let id = h.session(tool_heavy()).await;
    for _ in 0..4 {
        h.summary("SUMMARY");
    }
    let r = h
        .service(config().with_tiered(false))
        .compact(id, CompactionTrigger::Proactive)
        .await
        .unwrap();
    assert_eq!(r.strategy, CompactionStrategy::ModelSummary);
    assert!(r.meta.masked.is_empty());
    assert!(CompactionConfig::default().tiered, "on by default");
    assert!(!CompactionConfig::pi().tiered && !CompactionConfig::codex().tiered);
}

#[tokio::test]
async fn the_placeholder_names_tool_call_and_size_and_is_what_is_counted() {
    let h = Harness::new(WINDOW);
    let id = h.session(tool_heavy()).await;
    let r = h
        .service(config())
        .compact(id, CompactionTrigger::Proactive)
        .await
        .unwrap();
    let stored = view(h.store.as_ref(), id).await;
    let projected = project(&stored, Default::default());
    let first = &r.meta.masked[0];
    let expected = format!(
        "[output of read (call {}) omitted from the context: about {} tokens]",
        first.call_id, first.tokens
    );
    let shown = projected.iter().find(|m| m.id == first.entry_id).unwrap();
    assert_eq!(shown.tool_results().next().unwrap().1, expected);
    assert_eq!(first.call_id, "call-0");
    assert!(first.tokens > 900);
    assert_no_split_tool_pair(&projected);

    // The estimate of the masked view is exactly what the projection sends.
    let unmasked = overflow::estimate_view(&stored, Default::default(), &[], &EstimateCounter);
    let masked = tier::masked_view(stored.clone());
    let estimate = overflow::estimate_view(&masked, Default::default(), &[], &EstimateCounter);
    let sent: u64 = projected
        .iter()
        .map(|m| message_tokens(&EstimateCounter, m))
        .sum();
    assert_eq!(estimate, sent);
    assert_eq!(estimate, r.tokens_after);
    assert!(unmasked > estimate + 20_000, "the raw view counts the originals");
    assert_eq!(
        overflow::context_tokens(&masked, Default::default(), &[], &EstimateCounter),
        estimate
    );
}

#[tokio::test]
async fn masks_survive_a_later_summary_which_reads_the_originals() {
    let h = Harness::new(WINDOW);
    let id = h.session(tool_heavy()).await;
    // A tail of 42,000 tokens: the 41 protected turns and about 30 masked ones.
    let cfg = config()
        .with_keep_recent_turns(1_000)
        .with_keep_recent_tokens(42_000);
    let service = h.service(cfg);
    let first = service.compact(id, CompactionTrigger::Proactive).await.unwrap();
    assert_eq!(first.strategy, CompactionStrategy::MaskOnly);
    append(h.store.as_ref(), id, turns(120, 121, 100)).await;
    h.summary("SUMMARY-TWO");
    let second = service
        .compact(id, CompactionTrigger::Manual { instructions: None })
        .await
        .unwrap();
    assert_eq!(second.strategy, CompactionStrategy::ModelSummary);
    let stored = view(h.store.as_ref(), id).await;
    let tail: HashSet<EntryId> = stored.tail_messages().map(|m| m.id).collect();
    assert!(
        !second.meta.masked.is_empty(),
        "masks in the kept tail are carried"
    );
    for m in &second.meta.masked {
        assert!(
            tail.contains(&m.entry_id),
            "only masks of kept entries are carried"
        );
        assert!(first.meta.masked.contains(m));
    }
    let carried = first
        .meta
        .masked
        .iter()
        .filter(|m| tail.contains(&m.entry_id))
        .count();
    assert_eq!(carried, second.meta.masked.len(), "every kept mask is carried");

    // The summariser got the original outputs of the masked entries it summarised.
    let prompt = user_prompt(&h.provider.requests()[0]);
    let conversation = section(&prompt, "conversation").unwrap();
    assert!(
        conversation.contains("// file 0\nxxxx"),
        "the original output is summarised"
    );
    assert!(!conversation.contains("omitted from the context"));

    // The committed size is the masked one.
    let masked = tier::masked_view(stored);
    assert_eq!(
        overflow::estimate_view(&masked, Default::default(), &[], &EstimateCounter),
        second.tokens_after
    );
}

#[test]
fn choose_is_pure_and_skips_masked_entries() {
    let log: Vec<pith_core::Entry> = tool_heavy().into_iter().map(Into::into).collect();
    let view = StoredView::from_log(pith_core::SessionRecord::new(MODEL, vec![]), &log).unwrap();
    let a = tier::choose(&view, &EstimateCounter, THRESHOLD).unwrap();
    let b = tier::choose(&view, &EstimateCounter, THRESHOLD).unwrap();
    assert_eq!(a, b);
    assert!(a.freed >= tier::min_freed_tokens(THRESHOLD));
    assert_eq!(tier::min_freed_tokens(THRESHOLD), 20_000);
    assert_eq!(tier::min_freed_tokens(20_000), 5_000);
    let mut masked = view.clone();
    let originals = tier::mask_in_place(&mut masked, &a.masks);
    assert_eq!(originals.len(), a.masks.len());
    let before = overflow::estimate_view(&view, Default::default(), &[], &EstimateCounter);
    let after = overflow::estimate_view(&masked, Default::default(), &[], &EstimateCounter);
    assert_eq!(
        before - after,
        a.freed,
        "freed is exactly what the estimate loses"
    );
}
