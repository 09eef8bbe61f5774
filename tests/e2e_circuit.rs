//! (c) The summary model keeps failing: the third failure opens the circuit, a subscriber sees
//! `CompactionCircuitOpened` exactly once, the turn fails cleanly, `reset_circuit` closes it and
//! the next turn succeeds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pith::compaction::CompactionConfig;
use pith::core::{AgentEvent, Role};
use pith::runtime::fsm::CompactKind;
use pith::{CancellationToken, RuntimeConfig, RuntimeError};
use support::*;

#[tokio::test]
async fn the_circuit_opens_once_fails_turns_cleanly_and_resets() {
    let env = env(
        8_192,
        CompactionConfig::default()
            .with_keep_recent_turns(1)
            .with_max_summary_tokens(200),
        RuntimeConfig::default().with_stream(false),
        vec![],
    )
    .await;
    let rt = &env.runtime;
    let session = rt
        .create_session(MODEL, "You answer questions about the build.")
        .await
        .unwrap();
    for i in 0..4 {
        env.script
            .turn(text(&format!("Answer {i}: {}", "cargo builds it. ".repeat(60))));
        rt.run_turn(session, format!("Question {i}?"), CancellationToken::new())
            .await
            .unwrap();
    }
    // A subscriber on its own task, as an operator's monitor would be.
    let mut rx = rt.subscribe();
    let monitor = tokio::spawn(async move {
        let mut opened = Vec::new();
        while let Ok(event) = rx.recv().await {
            if let AgentEvent::CompactionCircuitOpened {
                session_id,
                consecutive_failures,
            } = event
            {
                opened.push((session_id, consecutive_failures));
            }
            if matches!(event, AgentEvent::TurnFinished { .. }) {
                break;
            }
        }
        opened
    });

    // Three turns overflow and their summaries fail: the third failure opens the circuit.
    for i in 0..3 {
        env.script.turn(overflow_plain());
        env.script.summary(server_error());
        let err = rt
            .run_turn(
                session,
                format!("Failing question {i}?"),
                CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, RuntimeError::CompactionFailed { kind, .. } if kind.0 == CompactKind::Reactive),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("reactive compaction failed: summary failed"),
            "{err}"
        );
        let status = rt.circuit_status(session).await.unwrap();
        assert_eq!(status.consecutive_failures, i + 1);
        assert_eq!(status.open, i == 2);
    }
    // With the circuit open, compaction makes no model call and the turn says why.
    env.script.turn(overflow_plain());
    let err = rt
        .run_turn(session, "Still there?", CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::CircuitOpen { .. }), "{err}");
    assert!(err.to_string().contains("circuit"), "{err}");
    assert_eq!(
        env.requests().await.1.len(),
        3,
        "no summary request while the circuit is open"
    );

    // Every failed turn left a consistent log: inputs only, no half answers.
    let log = env.messages(session).await;
    assert_log_pairs(&log);
    assert_eq!(
        log.iter().rev().take(4).filter(|m| m.role == Role::User).count(),
        4
    );

    rt.reset_circuit(session).await.unwrap();
    assert!(!rt.circuit_status(session).await.unwrap().open);
    env.script.turn(overflow_plain());
    env.script.summary(summary(
        "- Four questions about the build; the summarizer was down for a while.",
    ));
    env.script.turn(text("Yes, and cargo builds it."));
    let out = rt
        .run_turn(session, "Are you back?", CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text(), "Yes, and cargo builds it.");
    assert_eq!(out.compactions.len(), 1);

    let opened = monitor.await.unwrap();
    assert_eq!(
        opened,
        [(session, 3)],
        "the circuit-opened event is published exactly once"
    );
    let (turns, summaries) = env.requests().await;
    assert_eq!(summaries.len(), 4);
    assert_eq!(turns.len(), 4 + 4 + 2);
    assert_eq!(env.script.remaining(), (0, 0));
    env.check_turn_requests("You answer questions about the build.")
        .await;
}
