//! The Anthropic provider against wiremock on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pith_core::{FinishReason, Message, Part, Role, ToolDeclaration, Usage};
use pith_router::{
    Anthropic, ChatRequest, Provider, ProviderConfig, ProviderError, ProviderLimits, StackedProvider,
    StreamEvent,
};
use pith_testkit::wire::{anthropic_message, anthropic_overflow_body, json_response, AnthropicStream};
use serde_json::{json, Value};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn fast_limits() -> ProviderLimits {
    ProviderLimits::default()
        .with_max_retries(3)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
}

fn provider(server: &MockServer, limits: ProviderLimits) -> StackedProvider {
    let config = ProviderConfig::default()
        .with_base_url(format!("{}/v1", server.uri()))
        .with_api_key("sk-ant-test")
        .with_limits(limits);
    Anthropic::stacked("anthropic", &config).unwrap()
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

#[tokio::test]
async fn non_streaming_request_mapping_and_reply() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "sk-ant-test"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(json_response(200, anthropic_message("Done.", 10, 5, 3_000, 500)))
        .expect(1)
        .mount(&server)
        .await;
    let messages = vec![
        Message::system("Rule one."),
        Message::text(Role::Developer, "Rule two."),
        Message::user("Run ls."),
        Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning {
                    text: "think".into(),
                    signature: Some("sig".into()),
                },
                Part::ToolCall {
                    call_id: "toolu_1".into(),
                    name: "bash".into(),
                    arguments: json!({"cmd": "ls"}),
                },
            ],
        ),
        Message::tool_result("toolu_1", "a.txt", false),
        Message::user("Thanks."),
    ];
    let tools = vec![ToolDeclaration {
        name: "bash".into(),
        description: "Runs a command".into(),
        parameters: json!({"type": "object"}),
    }];
    let p = provider(&server, fast_limits());
    let reply = p
        .chat(
            ChatRequest::new("claude-sonnet-4", messages)
                .with_tools(tools)
                .with_temperature(0.0),
            None,
        )
        .await
        .unwrap();
    assert_eq!(reply.message.text_content(), "Done.");
    assert_eq!(reply.finish, FinishReason::Stop);
    assert_eq!(reply.usage, Usage::from_anthropic(10, 5, 3_000, 500));
    assert_eq!(reply.usage.prompt_tokens(), 3_510);

    let body = &bodies(&server).await[0];
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "Rule one."}, {"type": "text", "text": "Rule two."}])
    );
    assert_eq!(body["max_tokens"], 8_192);
    let msgs = body["messages"].as_array().unwrap();
    assert_eq!(
        msgs.len(),
        3,
        "tool result and next user text merge into one user message: {msgs:?}"
    );
    assert_eq!(
        msgs[1]["content"][0],
        json!({"type": "thinking", "thinking": "think", "signature": "sig"})
    );
    assert_eq!(
        msgs[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}})
    );
    assert_eq!(msgs[2]["role"], "user");
    assert_eq!(
        msgs[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt", "is_error": false})
    );
    assert_eq!(msgs[2]["content"][1], json!({"type": "text", "text": "Thanks."}));
    assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
}

#[tokio::test]
async fn streaming_text_thinking_tool_deltas_and_usage() {
    let server = MockServer::start().await;
    let stream = AnthropicStream::new()
        .message_start(40, 1_000, 200)
        .ping()
        .thinking_block(&["Let me ", "check."], "sig-1")
        .text_block(&["Look", "ing."])
        .tool_use_block("toolu_9", "read", &["{\"path\":", " \"x.rs\"}"])
        .message_delta("tool_use", 33)
        .message_stop();
    Mock::given(method("POST"))
        .respond_with(stream.response())
        .mount(&server)
        .await;
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    let sink = move |e: &StreamEvent| sink_events.lock().unwrap().push(e.clone());
    let reply = provider(&server, fast_limits())
        .chat(
            ChatRequest::new("claude", vec![Message::user("hi")]).streaming(true),
            Some(&sink),
        )
        .await
        .unwrap();
    assert_eq!(reply.finish, FinishReason::ToolCalls);
    assert_eq!(reply.usage, Usage::from_anthropic(40, 33, 1_000, 200));
    assert_eq!(reply.message.text_content(), "Looking.");
    assert_eq!(
        reply.message.parts[0],
        Part::Reasoning {
            text: "Let me check.".into(),
            signature: Some("sig-1".into())
        }
    );
    let calls: Vec<_> = reply
        .message
        .tool_calls()
        .map(|(id, n, a)| (id.to_string(), n.to_string(), a.clone()))
        .collect();
    assert_eq!(
        calls,
        vec![("toolu_9".into(), "read".into(), json!({"path": "x.rs"}))]
    );
    let events = events.lock().unwrap();
    assert!(events.contains(&StreamEvent::ReasoningDelta {
        text: "Let me ".into()
    }));
    assert!(events.contains(&StreamEvent::TextDelta { text: "ing.".into() }));
    assert!(events.contains(&StreamEvent::ToolCallDelta {
        index: 0,
        id: None,
        name: None,
        arguments: " \"x.rs\"}".into()
    }));
    assert!(events.contains(&StreamEvent::Finish {
        reason: FinishReason::ToolCalls
    }));
    assert!(events
        .iter()
        .any(|e| matches!(e, StreamEvent::Usage { usage } if usage.output == 33)));
}

#[tokio::test]
async fn overloaded_then_success_honours_retry_after() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(json_response(200, anthropic_message("ok", 1, 1, 0, 0)))
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits());
    let started = Instant::now();
    let reply = p
        .chat(ChatRequest::new("claude", vec![Message::user("hi")]), None)
        .await
        .unwrap();
    assert_eq!(reply.message.text_content(), "ok");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(p.attempts(), 2);
}

#[tokio::test]
async fn overloaded_529_until_give_up() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ))
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits().with_max_retries(3));
    let err = p
        .chat(ChatRequest::new("claude", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Server { status: 529, .. }),
        "{err:?}"
    );
    assert_eq!(p.attempts(), 4);
    assert_eq!(server.received_requests().await.unwrap().len(), 4);
}

#[tokio::test]
async fn prompt_too_long_is_an_overflow_with_sizes_and_one_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(400, anthropic_overflow_body(213_462, 200_000)))
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits());
    let err = p
        .chat(ChatRequest::new("claude", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    match err {
        ProviderError::ContextOverflow { limit, requested, .. } => {
            assert_eq!(limit, Some(200_000));
            assert_eq!(requested, Some(213_462));
        }
        other => panic!("expected an overflow, got {other:?}"),
    }
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn request_too_large_413_is_payload_too_large_not_overflow() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(413, json!({"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}})))
        .mount(&server)
        .await;
    let err = provider(&server, fast_limits())
        .chat(ChatRequest::new("claude", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::PayloadTooLarge { .. }), "{err:?}");
    assert!(!err.is_retryable() && !err.is_context_overflow());
}

#[tokio::test]
async fn error_event_mid_stream_is_typed() {
    let server = MockServer::start().await;
    let stream = AnthropicStream::new()
        .message_start(5, 0, 0)
        .error("overloaded_error", "Overloaded");
    Mock::given(method("POST"))
        .respond_with(stream.response())
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits().with_max_retries(1));
    let err = p
        .chat(
            ChatRequest::new("claude", vec![Message::user("hi")]).streaming(true),
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Server { status: 529, .. }),
        "{err:?}"
    );
    // Nothing reached a sink, so the overload is retried once.
    assert_eq!(p.attempts(), 2);
}

#[tokio::test]
async fn stream_cut_before_message_stop_is_a_transport_error() {
    let server = MockServer::start().await;
    let stream = AnthropicStream::new().message_start(5, 0, 0).text_block(&["par"]);
    Mock::given(method("POST"))
        .respond_with(stream.response())
        .mount(&server)
        .await;
    let sink = |_: &StreamEvent| {};
    let p = provider(&server, fast_limits());
    let err = p
        .chat(
            ChatRequest::new("claude", vec![Message::user("hi")]).streaming(true),
            Some(&sink),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Transport(_)), "{err:?}");
    assert_eq!(p.attempts(), 1);
}

#[tokio::test]
async fn malformed_reply_is_invalid_response() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("<html>bad gateway</html>", "text/html"))
        .mount(&server)
        .await;
    let err = provider(&server, fast_limits())
        .chat(ChatRequest::new("claude", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::InvalidResponse(_)), "{err:?}");

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(200, json!({"id": "msg", "type": "message"})))
        .mount(&server)
        .await;
    let err = provider(&server, fast_limits())
        .chat(ChatRequest::new("claude", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::InvalidResponse(_)), "{err:?}");
}

#[tokio::test]
async fn bad_key_is_auth_and_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(401, json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})))
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits());
    let err = p
        .chat(ChatRequest::new("claude", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Auth { status: 401, .. }));
    assert!(!err.to_string().contains("sk-ant-test"));
    assert_eq!(p.attempts(), 1);
}
