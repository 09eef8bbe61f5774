//! (a) A long tool-using session crosses the threshold in the middle of a turn: the runtime
//! compacts proactively between two tool calls, and every later request fits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use pith::compaction::CompactionConfig;
use pith::core::AgentEvent;
use pith::runtime::fsm::CompactKind;
use pith::{CancellationToken, RuntimeConfig};
use support::*;

#[tokio::test]
async fn a_turn_compacts_between_two_tool_calls_and_every_later_request_fits() {
    let window = 8_192;
    let env = env(
        window,
        CompactionConfig::default().with_keep_recent_turns(2),
        RuntimeConfig::default().with_stream(false),
        vec![Arc::new(read_tool(3_600))],
    )
    .await;
    let rt = &env.runtime;
    let mut rx = rt.subscribe();
    let session = rt
        .create_session(MODEL, "You are a coding agent. Read files before answering.")
        .await
        .unwrap();

    // An earlier turn, so the session has history of its own.
    env.script.turn(tool_call("t0", "README.md"));
    env.script.turn(text("The README describes the build."));
    rt.run_turn(session, "What does the README say?", CancellationToken::new())
        .await
        .unwrap();

    // The long turn: twelve file reads of ~900 tokens each, then an answer.
    for i in 0..12 {
        env.script
            .turn(tool_call(&format!("c{i}"), &format!("src/m{i}.rs")));
    }
    env.script.turn(text("All modules print hello."));
    env.script.summary(summary(
        "- The user asked what the modules do.\n- src/m0.rs .. src/m7.rs each print \"hello\".",
    ));
    env.script.summary(summary(
        "- The user asked what the modules do.\n- Every module so far prints \"hello\".",
    ));
    let out = rt
        .run_turn(
            session,
            "Read src/m0.rs to src/m11.rs and tell me what they do.",
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.text(), "All modules print hello.");
    assert_eq!(out.tool_calls, 12);
    assert!(!out.compactions.is_empty(), "the turn crossed the threshold");
    assert!(out.compactions.iter().all(|c| c.kind == CompactKind::Proactive));

    // The compaction happened between tool calls of this one turn.
    let events = drain(&mut rx);
    let second_turn = events
        .iter()
        .rposition(|e| matches!(e, AgentEvent::TurnStarted { .. }))
        .unwrap();
    let turn_events = &events[second_turn..];
    let first_compaction = turn_events
        .iter()
        .position(|e| matches!(e, AgentEvent::CompactionFinished { .. }))
        .unwrap();
    assert!(turn_events[..first_compaction]
        .iter()
        .any(|e| matches!(e, AgentEvent::ToolResult { .. })));
    assert!(turn_events[first_compaction..]
        .iter()
        .any(|e| matches!(e, AgentEvent::ToolCall { .. })));
    assert!(turn_events
        .iter()
        .any(|e| matches!(e, AgentEvent::HistoryReplaced { .. })));

    // Exact HTTP traffic: 2 + 13 turn requests, one summary request per compaction.
    let (turns, summaries) = env.requests().await;
    assert_eq!(turns.len(), 15);
    assert_eq!(
        summaries.len(),
        out.compactions
            .iter()
            .map(|c| c.summary_calls as usize)
            .sum::<usize>()
    );
    assert_eq!(env.script.remaining().0, 0);

    // Every request is well-formed and fits the window; after the first compaction every request
    // is below the threshold again.
    let sizes = env
        .check_turn_requests("You are a coding agent. Read files before answering.")
        .await;
    let threshold = pith::compaction::threshold(window, None).unwrap();
    let compacted_at = turns
        .iter()
        .position(|b| b["messages"].to_string().contains("<system-reminder>"))
        .expect("a request carries the summary");
    assert!(
        compacted_at > 2,
        "the compaction came mid-turn, after some tool calls"
    );
    for (i, size) in sizes.iter().enumerate().skip(compacted_at) {
        assert!(
            *size <= threshold,
            "request {i} has {size} tokens, over the threshold {threshold}"
        );
    }
    assert!(sizes[..compacted_at].iter().any(|s| *s > threshold / 2));

    // The log still holds every message; the view is the compacted one.
    let log = env.messages(session).await;
    assert_log_pairs(&log);
    assert_eq!(
        log.iter().filter(|m| m.role == pith::core::Role::Tool).count(),
        13
    );
}
