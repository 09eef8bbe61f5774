//! (b) The server answers a real overflow body: one compaction, the same request retried, success.
//! (f) A proactive compaction whose estimate undercounts, then a real overflow: one reactive
//!     compaction and success, never a third compaction.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pith::compaction::CompactionConfig;
use pith::core::{AgentEvent, Role, SessionId};
use pith::runtime::fsm::CompactKind;
use pith::{CancellationToken, RuntimeConfig, RuntimeError};
use serde_json::Value;
use support::*;

/// Runs `turns` plain turns whose answers are `answer_chars` characters long.
async fn history(env: &Env, session: SessionId, turns: usize, answer_chars: usize, stream: bool) {
    for i in 0..turns {
        let answer = format!(
            "Answer {i}: {}",
            "the build uses cargo and a justfile. ".repeat(answer_chars / 36)
        );
        env.script.turn(if stream {
            streamed_text(&answer, "")
        } else {
            text(&answer)
        });
        env.runtime
            .run_turn(
                session,
                format!("Question {i} about the build?"),
                CancellationToken::new(),
            )
            .await
            .unwrap();
    }
}

fn last_user_text(body: &Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    user["content"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| user["content"].to_string())
}

#[tokio::test]
async fn an_overflow_is_compacted_and_the_same_request_retried_once() {
    let env = env(
        8_192,
        CompactionConfig::default().with_keep_recent_turns(1),
        RuntimeConfig::default(),
        vec![],
    )
    .await;
    let session = env
        .runtime
        .create_session(MODEL, "You answer questions about the build.")
        .await
        .unwrap();
    history(&env, session, 6, 2_000, true).await;
    let mut rx = env.runtime.subscribe();

    env.script.turn(overflow(2_048, 3_400));
    env.script.summary(summary(
        "- The user asked six questions about the build; it uses cargo and a justfile.",
    ));
    env.script.turn(streamed_text("It uses ", "cargo."));
    let out = env
        .runtime
        .run_turn(session, "So, what builds it?", CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text(), "It uses cargo.");
    assert_eq!(out.model_requests, 2);
    assert_eq!(out.compactions.len(), 1);
    assert_eq!(out.compactions[0].kind, CompactKind::Reactive);

    // Exactly: 6 history requests + the overflowing request + its retry; one summary request.
    let (turns, summaries) = env.requests().await;
    assert_eq!(turns.len(), 8);
    assert_eq!(summaries.len(), 1);
    assert_eq!(env.script.remaining(), (0, 0));
    env.check_turn_requests("You answer questions about the build.")
        .await;
    // The retry is the same request (same input, same instructions), compacted.
    let (failed, retried) = (&turns[6], &turns[7]);
    assert_eq!(last_user_text(failed), "So, what builds it?");
    assert_eq!(last_user_text(retried), "So, what builds it?");
    assert_eq!(failed["messages"][0], retried["messages"][0]);
    let retried_size = pith_testkit::wire::check_openai_request(retried, 2_048);
    assert!(retried_size < prompt_tokens(failed) / 2, "{retried_size}");
    // The window the provider stated was learned.
    assert_eq!(env.runtime.router().context_window(MODEL), 2_048);

    let events = drain(&mut rx);
    let kinds = kinds(&events);
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["It uses ", "cargo."]);
    assert_eq!(kinds.iter().filter(|k| *k == "compaction_finished").count(), 1);
    assert_eq!(kinds.iter().filter(|k| *k == "model_request").count(), 2);
    assert!(events.iter().all(|e| e.session_id() == session));
    let log = env.messages(session).await;
    assert_eq!(
        log.iter().filter(|m| m.role == Role::User).count(),
        7,
        "the input is stored once"
    );
}

async fn undercounting_env() -> (Env, SessionId) {
    let env = env(
        8_192,
        // Summaries are asked to stay under 200 tokens, so a view can fit a 2k window.
        CompactionConfig::default()
            .with_keep_recent_turns(2)
            .with_max_summary_tokens(200),
        RuntimeConfig::default().with_stream(false),
        vec![],
    )
    .await;
    let session = env
        .runtime
        .create_session(MODEL, "You answer questions about the build.")
        .await
        .unwrap();
    history(&env, session, 8, 3_400, false).await;
    assert_eq!(
        env.requests().await.1.len(),
        0,
        "no compaction while building the history"
    );
    (env, session)
}

fn long_input() -> String {
    format!(
        "Here is the CI log, what failed?\n{}",
        "error[E0308]: mismatched types in build.rs\n".repeat(22)
    )
}

#[tokio::test]
async fn a_proactive_compaction_that_undercounts_gets_one_reactive_compaction_and_no_third() {
    let (env, session) = undercounting_env().await;
    env.script.summary(summary(
        "- Eight questions about the build; it uses cargo and a justfile.",
    ));
    env.script.turn(overflow(2_048, 1_500));
    env.script.summary(summary(
        "- Eight questions about the build; cargo and a justfile.",
    ));
    env.script.turn(text("build.rs has a type mismatch."));
    let out = env
        .runtime
        .run_turn(session, long_input(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text(), "build.rs has a type mismatch.");
    let kinds: Vec<CompactKind> = out.compactions.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CompactKind::Proactive, CompactKind::Reactive]);
    let (turns, summaries) = env.requests().await;
    assert_eq!(summaries.len(), 2, "two compactions, each one summary call");
    assert_eq!(turns.len(), 8 + 2, "the compacted request and its one retry");
    assert_eq!(env.script.remaining(), (0, 0));
    pith_testkit::wire::check_openai_request(&turns[9], 2_048);
    env.check_turn_requests("You answer questions about the build.")
        .await;
    let generations: Vec<u64> = out.compactions.iter().map(|c| c.generation).collect();
    assert_eq!(generations, [1, 2]);
}

#[tokio::test]
async fn a_retry_that_overflows_again_fails_without_a_third_compaction() {
    let (env, session) = undercounting_env().await;
    let mut rx = env.runtime.subscribe();
    env.script.summary(summary("- Eight questions about the build."));
    env.script.turn(overflow(2_048, 1_500));
    env.script.summary(summary("- Eight questions about the build."));
    env.script.turn(overflow(1_024, 1_900));
    let err = env
        .runtime
        .run_turn(session, long_input(), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, RuntimeError::OverflowAfterCompaction { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("after compaction and one retry"),
        "{err}"
    );
    let (turns, summaries) = env.requests().await;
    assert_eq!(summaries.len(), 2);
    assert_eq!(turns.len(), 10);
    env.check_turn_requests("You answer questions about the build.")
        .await;
    let events = drain(&mut rx);
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| *k == "compaction_started")
            .count(),
        2
    );
    assert!(matches!(events.last(), Some(AgentEvent::TurnFailed { .. })));
    // The log is consistent: the input is there, no half answer.
    let log = env.messages(session).await;
    assert_eq!(log.last().unwrap().role, Role::User);
    assert_log_pairs(&log);
}
