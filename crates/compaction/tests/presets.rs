//! The Codex preset's view and the artifact ledger through the real service.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use pith_compaction::{ledger::Ledger, project, CompactionConfig, CompactionTrigger, ProjectionStyle};
use pith_core::{Message, Role};

fn manual() -> CompactionTrigger {
    CompactionTrigger::Manual { instructions: None }
}

#[tokio::test]
async fn the_codex_view_is_instructions_summary_and_user_messages_only() {
    let h = Harness::new(32_000);
    let mut messages = vec![Message::system("Always answer in English.")];
    messages.extend(turns(0, 12, 1_500));
    let id = h.session(messages).await;
    h.summary("CODEX SUMMARY");
    h.service(CompactionConfig::codex())
        .compact(id, manual())
        .await
        .unwrap();
    let view = view(h.store.as_ref(), id).await;
    let projected = project(&view, ProjectionStyle::Reminder);
    assert_eq!(projected.len(), 2, "instructions and the handoff only");
    assert_eq!(projected[0].role, Role::System);
    let handoff = projected[1].text_content();
    assert!(handoff.contains("CODEX SUMMARY"));
    // The newest user messages, in order, after the summary.
    let a = handoff.find("Turn 10: please look at src/file_10.rs").unwrap();
    let b = handoff.find("Turn 11: please look at src/file_11.rs").unwrap();
    assert!(a < b);
    assert!(projected.iter().all(|m| m.tool_calls().next().is_none()));
    assert!(projected.iter().all(|m| m.tool_results().next().is_none()));
}

#[tokio::test]
async fn the_ledger_names_what_the_summary_forgot_and_is_carried_forward() {
    let h = Harness::new(32_000);
    let id = h.session(turns(0, 12, 1_500)).await;
    h.summary("FORGETFUL");
    let service = h.service(CompactionConfig::default());
    let first = service.compact(id, manual()).await.unwrap();
    assert!(first.meta.summary.starts_with("FORGETFUL"));
    assert!(
        first.meta.summary.contains("src/file_0.rs"),
        "{}",
        first.meta.summary
    );
    assert!(first
        .meta
        .summary
        .contains("Turn 0: please look at src/file_0.rs"));
    let carried = Ledger::from_meta(&first.meta).unwrap();
    assert!(carried.read.contains(&"src/file_0.rs".to_string()));

    append(h.store.as_ref(), id, turns(12, 24, 1_500)).await;
    h.summary("STILL FORGETFUL");
    let second = service.compact(id, manual()).await.unwrap();
    // The earlier paths stay, and the previous ledger was not fed back as summary text.
    assert!(second.meta.summary.contains("src/file_0.rs"));
    assert!(second.meta.summary.contains("src/file_12.rs"));
    assert_eq!(second.meta.summary.matches("<artifact-ledger>").count(), 1);
    let prompt = user_prompt(h.provider.requests().last().unwrap());
    assert!(!prompt.contains("<artifact-ledger>"), "{prompt}");
    assert!(second.tokens_after <= 32_000 - 16_384);

    // Switched off: the summary is the model's text alone.
    let h = Harness::new(32_000);
    let id = h.session(turns(0, 12, 1_500)).await;
    h.summary("PLAIN");
    let off = h
        .service(CompactionConfig::default().with_ledger(false))
        .compact(id, manual())
        .await
        .unwrap();
    assert_eq!(off.meta.summary, "PLAIN");
}
