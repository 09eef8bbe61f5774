//! Turns against the scripted provider and the memory store: the driver's happy paths, events,
//! tool loops and the failure modes that need no HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use pith_compaction::CompactionConfig;
use pith_core::{AgentEvent, Entry, FinishReason, Message, Part, Role, Usage};
use pith_router::{ModelInfo, ModelRouter, ProviderError, ScriptedProvider};
use pith_runtime::{CancellationToken, FnTool, Runtime, RuntimeConfig, RuntimeError, ToolContext, ToolError};
use pith_store::{MemoryStore, SessionStore};
use serde_json::{json, Value};

const MODEL: &str = "scripted/small";

fn usage(prompt: u64) -> Usage {
    Usage::from_openai(prompt, 10, 0)
}

fn tool_reply(calls: &[(&str, &str, Value)]) -> pith_router::ChatResponse {
    let parts = calls
        .iter()
        .map(|(id, name, args)| Part::ToolCall {
            call_id: (*id).into(),
            name: (*name).into(),
            arguments: args.clone(),
        })
        .collect();
    ScriptedProvider::reply(
        Message::new(Role::Assistant, parts),
        FinishReason::ToolCalls,
        usage(100),
    )
}

fn setup(window: u64, compaction: CompactionConfig) -> (Runtime, Arc<ScriptedProvider>, Arc<MemoryStore>) {
    let provider = Arc::new(ScriptedProvider::new("scripted"));
    let router = ModelRouter::new()
        .with_provider("scripted", provider.clone())
        .with_model(
            MODEL,
            ModelInfo {
                context_window: window,
                max_output: 512,
            },
        );
    let store = Arc::new(MemoryStore::new());
    let runtime = Runtime::builder()
        .router(router)
        .store(store.clone())
        .compaction(compaction)
        .config(RuntimeConfig::default().with_tool_timeout(std::time::Duration::from_secs(5)))
        .tool(FnTool::new(
            "echo",
            "Returns its text argument.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            |args: Value, _ctx: ToolContext| async move {
                args["text"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ToolError::InvalidArguments("text is required".into()))
            },
        ))
        .build()
        .unwrap();
    (runtime, provider, store)
}

fn drain(rx: &mut tokio::sync::broadcast::Receiver<AgentEvent>) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

fn names(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn a_simple_turn_streams_text_and_persists_input_and_answer() {
    let (rt, provider, store) = setup(8_192, CompactionConfig::default());
    let mut rx = rt.subscribe();
    let session = rt.create_session(MODEL, "Be brief.").await.unwrap();
    provider.push_text("Hello!", usage(20));
    let out = rt
        .run_turn(session, "hi", CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text(), "Hello!");
    assert_eq!(out.model_requests, 1);
    assert_eq!(out.usage, usage(20));
    assert!(out.compactions.is_empty());
    let events = drain(&mut rx);
    assert_eq!(
        names(&events),
        [
            "turn_started",
            "model_request",
            "text_delta",
            "model_response",
            "turn_finished"
        ]
    );
    assert!(events.iter().all(|e| e.session_id() == session));
    let log = store.load_log(session).await.unwrap();
    let roles: Vec<Role> = log.iter().filter_map(Entry::as_message).map(|m| m.role).collect();
    assert_eq!(roles, [Role::System, Role::User, Role::Assistant]);
    let req = &provider.requests()[0];
    assert_eq!(req.messages[0].text_content(), "Be brief.");
    assert_eq!(req.tools.len(), 1);
    assert!(req.stream);
}

#[tokio::test]
async fn tool_calls_run_and_their_results_are_persisted_with_the_call() {
    let (rt, provider, store) = setup(8_192, CompactionConfig::default());
    let session = rt.create_session(MODEL, "Use tools.").await.unwrap();
    provider.push(Ok(tool_reply(&[
        ("c1", "echo", json!({"text": "one"})),
        ("c2", "missing", json!({})),
        ("c3", "echo", json!({})),
    ])));
    provider.push_text("done", usage(200));
    let out = rt
        .run_turn(session, "go", CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text(), "done");
    assert_eq!(out.tool_calls, 3);
    assert_eq!(out.model_requests, 2);
    let log = store.load_log(session).await.unwrap();
    let msgs: Vec<&Message> = log.iter().filter_map(Entry::as_message).collect();
    assert_eq!(msgs.len(), 7, "system, user, call, 3 results, answer");
    let results: Vec<(String, String, bool)> = msgs
        .iter()
        .flat_map(|m| {
            m.tool_results()
                .map(|(a, b, c)| (a.to_string(), b.to_string(), c))
        })
        .collect();
    assert_eq!(results[0], ("c1".into(), "one".into(), false));
    assert!(results[1].1.contains("unknown tool") && results[1].2);
    assert!(results[2].1.contains("text is required") && results[2].2);
    // The second request carries the call and its results.
    let second = &provider.requests()[1];
    assert_eq!(second.messages.iter().filter(|m| m.role == Role::Tool).count(), 3);
}

#[tokio::test]
async fn a_model_error_fails_the_turn_and_keeps_the_log_consistent() {
    let (rt, provider, store) = setup(8_192, CompactionConfig::default());
    let mut rx = rt.subscribe();
    let session = rt.create_session(MODEL, "").await.unwrap();
    provider.push_error(ProviderError::Auth {
        status: 401,
        message: "bad key".into(),
    });
    let err = rt
        .run_turn(session, "hi", CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, RuntimeError::Model(ProviderError::Auth { .. })),
        "{err}"
    );
    let events = drain(&mut rx);
    assert_eq!(names(&events).last().unwrap(), "turn_failed");
    // The input is kept; rerunning the same input continues the turn without a second copy.
    provider.push_text("ok", usage(20));
    let out = rt
        .run_turn(session, "hi", CancellationToken::new())
        .await
        .unwrap();
    assert!(out.resumed);
    let log = store.load_log(session).await.unwrap();
    let users = log
        .iter()
        .filter_map(Entry::as_message)
        .filter(|m| m.role == Role::User)
        .count();
    assert_eq!(users, 1);
}

#[tokio::test]
async fn an_overflow_that_compaction_cannot_fix_fails_with_the_second_overflow() {
    let config = CompactionConfig::default()
        .with_deterministic_summarizer()
        .with_keep_recent_turns(1);
    let (rt, provider, _store) = setup(8_192, config);
    let session = rt.create_session(MODEL, "rules").await.unwrap();
    for i in 0..3 {
        provider.push_text(format!("answer {i}"), usage(100));
        rt.run_turn(session, format!("question {i}"), CancellationToken::new())
            .await
            .unwrap();
    }
    provider.push_error(ProviderError::overflow("prompt is too long"));
    provider.push_error(ProviderError::overflow("prompt is too long"));
    let err = rt
        .run_turn(session, "again", CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, RuntimeError::OverflowAfterCompaction { .. }),
        "{err}"
    );
    assert_eq!(
        provider.remaining(),
        0,
        "exactly two model calls: the request and its one retry"
    );
}

#[tokio::test]
async fn empty_input_and_a_cancelled_token_are_refused_early() {
    let (rt, provider, store) = setup(8_192, CompactionConfig::default());
    let session = rt.create_session(MODEL, "").await.unwrap();
    assert!(matches!(
        rt.run_turn(session, "  ", CancellationToken::new()).await,
        Err(RuntimeError::EmptyInput)
    ));
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert!(rt
        .run_turn(session, "hi", cancel)
        .await
        .unwrap_err()
        .is_cancelled());
    assert!(provider.requests().is_empty());
    assert!(store.load_log(session).await.unwrap().is_empty());
}
