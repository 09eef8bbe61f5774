//! Features without an invariant of their own: projection styles, reminder retention, split
//! turns, relevance selection, the count signal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use pith_compaction::projection::{HANDOFF_REASONING_MARKER, MAX_RETAINED_REMINDERS};
use pith_compaction::{
    overflow, project, CompactionConfig, CompactionTrigger, Decision, ModelGrader, ProjectionStyle,
    RelevanceConfig,
};
use pith_core::{Message, Part, Role};
use serde_json::json;

fn manual() -> CompactionTrigger {
    CompactionTrigger::Manual { instructions: None }
}

#[tokio::test]
async fn the_three_projection_styles_and_the_handoff_reasoning_marker() {
    let h = Harness::new(32_000);
    let mut messages = vec![Message::system("Always answer in English.")];
    messages.extend(turns(0, 12, 1_500));
    let id = h.session(messages).await;
    h.summary("THE SUMMARY");
    // The exact handoff text is checked: no artifact ledger after it.
    h.service(CompactionConfig::default().with_ledger(false))
        .compact(id, manual())
        .await
        .unwrap();
    let view = view(h.store.as_ref(), id).await;
    let tail = view.tail_messages().count();

    let reminder = project(&view, ProjectionStyle::Reminder);
    assert_eq!(reminder.len(), 1 + 1 + tail);
    assert_eq!(reminder[0].role, Role::System);
    assert_eq!(reminder[1].role, Role::User);
    let text = reminder[1].text_content();
    assert!(text.starts_with("<system-reminder>") && text.ends_with("</system-reminder>"));
    assert!(text.contains("THE SUMMARY"));

    let handoff = project(&view, ProjectionStyle::Handoff);
    assert_eq!(handoff.len(), 1 + 2 + tail);
    assert_eq!(handoff[1].role, Role::User);
    assert_eq!(handoff[2].role, Role::Assistant);
    assert_eq!(
        handoff[2].parts[0],
        Part::Reasoning {
            text: HANDOFF_REASONING_MARKER.into(),
            signature: None
        },
        "a fixed non-empty marker stands in for reasoning"
    );
    assert_eq!(handoff[2].text_content(), "THE SUMMARY");

    let plain = project(&view, ProjectionStyle::SummaryMessage);
    assert_eq!(plain.len(), 1 + 1 + tail);
    assert_eq!(plain[1].role, Role::User);
    assert!(plain[1].text_content().contains("THE SUMMARY"));
    assert!(!plain[1].text_content().contains("<system-reminder>"));
    // The tail is the same in every style.
    assert_eq!(reminder[2..], plain[2..]);
    assert_eq!(reminder[2..], handoff[3..]);
}

#[tokio::test]
async fn eleven_reminders_right_after_a_compaction_and_the_oldest_dropped() {
    let h = Harness::new(64_000);
    let mut messages = Vec::new();
    for i in 0..14 {
        messages.push(Message::user(format!(
            "<system-reminder>reminder {i}</system-reminder>"
        )));
        messages.extend(turn(i, 500));
    }
    messages.extend(turns(100, 104, 200));
    let id = h.session(messages).await;
    let config = CompactionConfig::default().with_deterministic_summarizer();
    h.service(config).compact(id, manual()).await.unwrap();
    let view = view(h.store.as_ref(), id).await;
    assert_eq!(view.reminders.len(), MAX_RETAINED_REMINDERS);
    assert!(view.reminders[0].text_content().contains("reminder 4"));
    assert!(view.reminders[9].text_content().contains("reminder 13"));
    let projected = project(&view, ProjectionStyle::Reminder);
    let tagged = projected
        .iter()
        .filter(|m| m.role == Role::User && m.text_content().trim_start().starts_with("<system-reminder>"))
        .count();
    assert_eq!(tagged, 11, "ten retained reminders plus the summary");
    assert!(!projected.iter().any(|m| m.text_content().contains("reminder 3<")));
}

#[tokio::test]
async fn an_over_budget_last_turn_is_split_without_splitting_a_tool_pair() {
    let h = Harness::new(16_000);
    let mut messages = vec![Message::user("Refactor the parser; keep the public API.")];
    for i in 0..30 {
        let id = format!("c{i}");
        messages.push(call(&id, "read", json!({ "path": format!("src/p{i}.rs") })));
        messages.push(Message::tool_result(&id, "y".repeat(2_000), false));
    }
    let id = h.session(messages).await;
    let result = h
        .service(CompactionConfig::default().with_deterministic_summarizer())
        .compact(id, CompactionTrigger::Proactive)
        .await
        .unwrap();
    let view = view(h.store.as_ref(), id).await;
    let tail: Vec<Message> = view.tail_messages().cloned().collect();
    assert_eq!(
        tail[0].role,
        Role::Assistant,
        "the turn's suffix is kept from an assistant message"
    );
    assert!(
        tail.iter().all(|m| m.role != Role::User),
        "the turn's prefix was summarised"
    );
    assert_no_split_tool_pair(&project(&view, ProjectionStyle::Reminder));
    assert!(result
        .meta
        .summary
        .contains("Refactor the parser; keep the public API."));
}

#[tokio::test]
async fn relevance_selection_off_adds_no_request_and_on_drops_ungraded_groups() {
    // Off (the default): one request, the summary.
    let h = Harness::new(32_000);
    let mut messages = turns(0, 10, 500);
    messages.push(Message::user("final question"));
    messages.push(Message::assistant("final answer"));
    let id = h.session(messages.clone()).await;
    h.summary("s");
    h.service(CompactionConfig::default())
        .compact(id, manual())
        .await
        .unwrap();
    assert_eq!(h.provider.requests().len(), 1);

    // On: a grader request first; it keeps group 3 only.
    let h = Harness::new(32_000);
    let id = h.session(messages).await;
    h.summary("3");
    h.summary("graded summary");
    let grader = Arc::new(ModelGrader::new(h.router.clone(), MODEL));
    let config = CompactionConfig::default()
        .with_ledger(false)
        .with_relevance(RelevanceConfig::new(grader));
    let result = h.service(config).compact(id, manual()).await.unwrap();
    assert_eq!(result.meta.summary, "graded summary");
    let requests = h.provider.requests();
    assert_eq!(requests.len(), 2);
    let grading = user_prompt(&requests[0]);
    assert!(grading.contains("<part 1>"));
    let conversation = section(&user_prompt(&requests[1]), "conversation")
        .unwrap()
        .to_string();
    // Group 2 (turn 0's tool call with its output) was not chosen: dropped whole.
    assert!(!conversation.contains("read({\"path\":\"src/file_0.rs\"})"));
    assert!(!conversation.contains("// file 0"));
    // Group 3 (turn 0's answer) was chosen; user requests (policy) are always kept.
    assert!(conversation.contains("Answer 0"));
    assert!(conversation.contains("Turn 0: please look"));
    assert!(conversation.contains("Turn 5: please look"));
    let ledger = h.store.usage(id).await.unwrap();
    assert!(ledger
        .iter()
        .any(|r| r.purpose == pith_store::UsagePurpose::Grader));
}

#[tokio::test]
async fn the_count_signal_on_a_single_200_message_turn_makes_progress() {
    let h = Harness::new(128_000);
    let mut messages = vec![Message::user("Run the whole migration.")];
    for i in 0..100 {
        let id = format!("m{i}");
        messages.push(call(&id, "bash", json!({ "command": format!("step {i}") })));
        messages.push(Message::tool_result(&id, "ok", false));
    }
    messages.truncate(200);
    let id = h.session(messages).await;
    let config = CompactionConfig::default().with_deterministic_summarizer();
    let service = h.service(config.clone());
    let before = view(h.store.as_ref(), id).await;
    assert!(matches!(
        overflow::decide(&before, &[], &pith_core::EstimateCounter, 128_000, &config).unwrap(),
        Decision::Count { messages: 200, .. }
    ));
    service.compact(id, CompactionTrigger::Proactive).await.unwrap();
    let after = view(h.store.as_ref(), id).await;
    assert!(overflow::view_message_count(&after) <= 25);
    assert_no_split_tool_pair(&project(&after, ProjectionStyle::Reminder));
    assert!(
        !overflow::decide(&after, &[], &pith_core::EstimateCounter, 128_000, &config)
            .unwrap()
            .is_needed()
    );
    assert_eq!(service.circuit_status(id).await.unwrap().consecutive_failures, 0);
    // A second proactive call is a no-op, not a failure.
    let again = service.compact(id, CompactionTrigger::Proactive).await.unwrap();
    assert!(again.noop);
}
