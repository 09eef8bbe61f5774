//! The OpenAI-compatible provider against wiremock on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pith_core::{FinishReason, Message, Part, Role, ToolDeclaration, Usage};
use pith_router::{
    ChatRequest, OpenAiCompatible, Provider, ProviderConfig, ProviderError, ProviderLimits, StackedProvider,
    StreamEvent,
};
use pith_testkit::wire::{
    assert_instructions, check_openai_request, json_response, openai_completion, openai_overflow_body,
    openai_requests, openai_tool_completion, OpenAiStream,
};
use serde_json::json;
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn fast_limits() -> ProviderLimits {
    ProviderLimits::default()
        .with_max_retries(3)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
}

fn provider(server: &MockServer, limits: ProviderLimits) -> StackedProvider {
    let config = ProviderConfig::default()
        .with_base_url(format!("{}/v1", server.uri()))
        .with_api_key("sk-test-key")
        .with_limits(limits);
    OpenAiCompatible::stacked("openai", &config).unwrap()
}

fn conversation() -> Vec<Message> {
    let mut call = Message::new(
        Role::Assistant,
        vec![
            Part::text("Let me look."),
            Part::ToolCall {
                call_id: "call_1".into(),
                name: "read".into(),
                arguments: json!({"path": "a.txt"}),
            },
            Part::ToolCall {
                call_id: "call_2".into(),
                name: "read".into(),
                arguments: json!({"path": "b.txt"}),
            },
        ],
    );
    call.parts.push(Part::Reasoning {
        text: "private".into(),
        signature: None,
    });
    vec![
        Message::system("You are terse."),
        Message::text(Role::Developer, "Answer in English."),
        Message::user("Read both files."),
        call,
        Message::tool_result("call_1", "alpha", false),
        Message::tool_result("call_2", "beta", true),
        Message::new(
            Role::User,
            vec![
                Part::text("And this picture?"),
                Part::Image {
                    media_type: "image/png".into(),
                    source: "iVBORw0KGgo=".into(),
                },
            ],
        ),
    ]
}

fn tools() -> Vec<ToolDeclaration> {
    vec![ToolDeclaration {
        name: "read".into(),
        description: "Reads a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }]
}

#[tokio::test]
async fn non_streaming_request_mapping_and_reply() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test-key"))
        .respond_with(json_response(
            200,
            openai_completion("Both read.", 1_000, 12, 600),
        ))
        .expect(1)
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits());
    let request = ChatRequest::new("gpt-4o", conversation())
        .with_tools(tools())
        .with_max_tokens(256)
        .with_temperature(0.2)
        .with_stop(vec!["END".into()]);
    let reply = p.chat(request, None).await.unwrap();
    assert_eq!(reply.message.text_content(), "Both read.");
    assert_eq!(reply.finish, FinishReason::Stop);
    assert_eq!(reply.usage, Usage::from_openai(1_000, 12, 600));
    assert_eq!(reply.usage.cache_read, 600);
    assert_eq!(reply.message.usage, Some(reply.usage));

    let bodies = openai_requests(&server).await;
    let body = &bodies[0];
    check_openai_request(body, 128_000);
    // Not api.openai.com: the developer message goes as system, and max_tokens keeps its name.
    assert_instructions(body, &["You are terse.", "Answer in English."]);
    assert_eq!(body["messages"][1]["role"], "system");
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(body["stop"], json!(["END"]));
    let msgs = body["messages"].as_array().unwrap();
    let assistant = &msgs[3];
    assert_eq!(assistant["content"], "Let me look.");
    assert_eq!(
        assistant["tool_calls"][1]["function"]["arguments"],
        r#"{"path":"b.txt"}"#
    );
    assert!(
        !body.to_string().contains("private"),
        "reasoning must not go on the wire"
    );
    assert_eq!(
        msgs[4],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "alpha"})
    );
    assert_eq!(msgs[5]["tool_call_id"], "call_2");
    assert_eq!(
        msgs[6]["content"][1]["image_url"]["url"],
        "data:image/png;base64,iVBORw0KGgo="
    );
    assert_eq!(body["tools"][0]["function"]["name"], "read");
    assert!(body.get("stream").is_none());
}

#[tokio::test]
async fn non_streaming_parallel_tool_calls() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(
            200,
            openai_tool_completion(&[("c1", "read", r#"{"path":"x"}"#), ("c2", "ls", "{}")], 50, 9),
        ))
        .mount(&server)
        .await;
    let reply = provider(&server, fast_limits())
        .chat(ChatRequest::new("m", vec![Message::user("go")]), None)
        .await
        .unwrap();
    assert_eq!(reply.finish, FinishReason::ToolCalls);
    let calls: Vec<_> = reply
        .message
        .tool_calls()
        .map(|(id, n, a)| (id.to_string(), n.to_string(), a.clone()))
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0], ("c1".into(), "read".into(), json!({"path": "x"})));
    assert_eq!(calls[1].1, "ls");
}

#[tokio::test]
async fn streaming_text_tool_call_deltas_and_usage() {
    let server = MockServer::start().await;
    let stream = OpenAiStream::new()
        .text("Hel")
        .text("lo")
        .tool_call(0, "call_a", "read")
        .tool_args(0, "{\"pa")
        .tool_args(0, "th\":\"a.txt\"}")
        .tool_call(1, "call_b", "ls")
        .tool_args(1, "{}")
        .finish("tool_calls")
        .usage(300, 20, 100)
        .done();
    Mock::given(method("POST"))
        .and(body_partial_json(
            json!({"stream": true, "stream_options": {"include_usage": true}}),
        ))
        .respond_with(stream.response())
        .expect(1)
        .mount(&server)
        .await;
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    let sink = move |e: &StreamEvent| sink_events.lock().unwrap().push(e.clone());
    let reply = provider(&server, fast_limits())
        .chat(
            ChatRequest::new("m", vec![Message::user("hi")]).streaming(true),
            Some(&sink),
        )
        .await
        .unwrap();
    assert_eq!(reply.message.text_content(), "Hello");
    assert_eq!(reply.finish, FinishReason::ToolCalls);
    assert_eq!(reply.usage, Usage::from_openai(300, 20, 100));
    let calls: Vec<_> = reply
        .message
        .tool_calls()
        .map(|(id, _, a)| (id.to_string(), a.clone()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_a".into(), json!({"path": "a.txt"})),
            ("call_b".into(), json!({}))
        ]
    );
    let events = events.lock().unwrap();
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello");
    let arg_deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDelta {
                index: 0, arguments, ..
            } if !arguments.is_empty() => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(arg_deltas, ["{\"pa", "th\":\"a.txt\"}"]);
    assert!(events.contains(&StreamEvent::Finish {
        reason: FinishReason::ToolCalls
    }));
    assert!(events
        .iter()
        .any(|e| matches!(e, StreamEvent::Usage { usage } if usage.output == 20)));
}

#[tokio::test]
async fn rate_limited_then_success_waits_for_retry_after() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(json_response(200, openai_completion("ok", 5, 1, 0)))
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits());
    let started = Instant::now();
    let reply = p
        .chat(ChatRequest::new("m", vec![Message::user("hi")]), None)
        .await
        .unwrap();
    assert_eq!(reply.message.text_content(), "ok");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retried before Retry-After: {:?}",
        started.elapsed()
    );
    assert_eq!(p.attempts(), 2);
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_until_give_up() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(
            503,
            json!({"error": {"message": "upstream unavailable"}}),
        ))
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits().with_max_retries(2));
    let err = p
        .chat(ChatRequest::new("m", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Server { status: 503, .. }),
        "{err:?}"
    );
    assert_eq!(p.attempts(), 3);
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn overflow_is_classified_and_never_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(400, openai_overflow_body(128_000, 130_512)))
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits());
    let err = p
        .chat(ChatRequest::new("m", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    match err {
        ProviderError::ContextOverflow { limit, requested, .. } => {
            assert_eq!(limit, Some(128_000));
            assert_eq!(requested, Some(130_512));
        }
        other => panic!("expected an overflow, got {other:?}"),
    }
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    assert_eq!(p.attempts(), 1);
}

#[tokio::test]
async fn client_errors_other_than_408_409_429_are_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(422, json!({"error": {"message": "bad schema"}})))
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits());
    let err = p
        .chat(ChatRequest::new("m", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::InvalidRequest { status: 422, .. }));
    assert_eq!(p.attempts(), 1);
}

#[tokio::test]
async fn malformed_json_is_invalid_response() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("{\"choices\": [", "application/json"))
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits());
    let err = p
        .chat(ChatRequest::new("m", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::InvalidResponse(_)), "{err:?}");
    assert_eq!(p.attempts(), 1);

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(OpenAiStream::new().text("a").raw("{not json").response())
        .mount(&server)
        .await;
    let err = provider(&server, fast_limits())
        .chat(
            ChatRequest::new("m", vec![Message::user("hi")]).streaming(true),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::InvalidResponse(_)), "{err:?}");
}

#[tokio::test]
async fn stream_that_ends_before_finishing_is_a_transport_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(OpenAiStream::new().text("partial").response())
        .mount(&server)
        .await;
    let p = provider(&server, fast_limits());
    let events = Arc::new(Mutex::new(0usize));
    let counter = events.clone();
    let sink = move |_: &StreamEvent| *counter.lock().unwrap() += 1;
    let err = p
        .chat(
            ChatRequest::new("m", vec![Message::user("hi")]).streaming(true),
            Some(&sink),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Transport(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "transport error: stream ended before the reply finished"
    );
    // The sink already saw output, so the stack does not replay the stream.
    assert_eq!(p.attempts(), 1);
    assert_eq!(*events.lock().unwrap(), 1);
}

#[tokio::test]
async fn connection_dropped_mid_stream_is_a_transport_error() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 65_536];
        let _ = socket.read(&mut buf).await.unwrap();
        let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let chunk = format!("{:x}\r\n{event}\r\n", event.len());
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(chunk.as_bytes()).await.unwrap();
        socket.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Dropping the socket ends the chunked body without its terminating chunk.
    });
    let config = ProviderConfig::default()
        .with_base_url(format!("http://{addr}/v1"))
        .with_limits(fast_limits());
    let p = OpenAiCompatible::stacked("openai", &config).unwrap();
    let sink = |_: &StreamEvent| {};
    let err = p
        .chat(
            ChatRequest::new("m", vec![Message::user("hi")]).streaming(true),
            Some(&sink),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Transport(_)), "{err:?}");
    assert!(err.is_retryable());
    assert_eq!(p.attempts(), 1);
    server.await.unwrap();
}

#[tokio::test]
async fn slow_server_times_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            json_response(200, openai_completion("late", 1, 1, 0)).set_delay(Duration::from_secs(5)),
        )
        .mount(&server)
        .await;
    let limits = fast_limits()
        .with_max_retries(0)
        .with_request_timeout(Some(Duration::from_millis(200)));
    let started = Instant::now();
    let err = provider(&server, limits)
        .chat(ChatRequest::new("m", vec![Message::user("hi")]), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Timeout(d) if d == Duration::from_millis(200)),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn official_openai_gets_developer_role_and_max_completion_tokens() {
    // The mapping is pure; check it without a server.
    use pith_router::providers::openai_wire::{request_body, WireOptions};
    let options = WireOptions {
        developer_role: true,
        max_completion_tokens: true,
    };
    let body = request_body(
        &ChatRequest::new(
            "gpt-4o",
            vec![Message::text(Role::Developer, "be brief"), Message::user("x")],
        )
        .with_max_tokens(9),
        options,
    );
    assert_eq!(body["messages"][0]["role"], "developer");
    assert_eq!(body["max_completion_tokens"], 9);
    assert!(body.get("max_tokens").is_none());
}
