//! The testkit's request checker rejects what it must, and the overflow bodies it builds are
//! classified as the real servers' are.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use pith_core::Message;
use pith_router::classify::classify_http;
use pith_router::{ChatRequest, OpenAiCompatible, Provider, ProviderConfig, ProviderError, ProviderLimits};
use pith_testkit::wire::{
    anthropic_overflow_body, assert_instructions, check_openai_request, json_response, llama_overflow_body,
    openai_overflow_body,
};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer};

fn paired() -> serde_json::Value {
    json!({"messages": [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "b"},
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
        {"role": "assistant", "content": "done"}
    ]})
}

#[test]
fn accepts_a_well_formed_request_and_estimates_it() {
    let estimate = check_openai_request(&paired(), 1_000);
    // "rules" + "go" + 2 x ("ls" + "{}") + "b" + "a" + "done" = 21 bytes -> 6 tokens.
    assert_eq!(estimate, 6);
    assert_instructions(&paired(), &["rules"]);
}

#[test]
#[should_panic(expected = "have no results")]
fn rejects_a_call_without_result() {
    let mut body = paired();
    body["messages"].as_array_mut().unwrap().truncate(4);
    check_openai_request(&body, 1_000);
}

#[test]
#[should_panic(expected = "which no open call has")]
fn rejects_an_orphan_result() {
    let mut body = paired();
    body["messages"][4]["tool_call_id"] = json!("c9");
    check_openai_request(&body, 1_000);
}

#[test]
#[should_panic(expected = "comes after conversation messages")]
fn rejects_instructions_after_conversation() {
    let mut body = paired();
    body["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "system", "content": "late"}));
    check_openai_request(&body, 1_000);
}

#[test]
#[should_panic(expected = "exceeds the declared window")]
fn rejects_a_request_over_the_window() {
    check_openai_request(&paired(), 5);
}

#[test]
#[should_panic(expected = "instructions differ")]
fn instructions_must_be_verbatim() {
    assert_instructions(&paired(), &["rules!"]);
}

#[test]
fn overflow_bodies_classify_with_their_sizes() {
    let cases = [
        (openai_overflow_body(128_000, 140_000), 128_000, 140_000),
        (anthropic_overflow_body(210_000, 200_000), 200_000, 210_000),
        (llama_overflow_body(6_425, 1_024), 1_024, 6_425),
    ];
    for (body, limit, requested) in cases {
        match classify_http(400, &body.to_string(), None) {
            ProviderError::ContextOverflow {
                limit: l,
                requested: r,
                ..
            } => assert_eq!((l, r), (Some(limit), Some(requested)), "{body}"),
            other => panic!("{body}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn llama_style_overflow_over_http_for_a_streaming_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(400, llama_overflow_body(3_000, 2_048)))
        .mount(&server)
        .await;
    let config = ProviderConfig::default()
        .with_base_url(format!("{}/v1", server.uri()))
        .with_limits(
            ProviderLimits::default().with_backoff(Duration::from_millis(1), Duration::from_millis(2)),
        );
    let p = OpenAiCompatible::stacked("local", &config).unwrap();
    let err = p
        .chat(
            ChatRequest::new("m", vec![Message::user("x")]).streaming(true),
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::ContextOverflow {
                limit: Some(2_048),
                requested: Some(3_000),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(p.attempts(), 1);
}
