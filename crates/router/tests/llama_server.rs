//! The OpenAI-compatible provider and the router against a real llama.cpp server (xllamacpp
//! serving SmolLM2-135M on loopback). Skips with a message when the runtime is not set up,
//! fails under CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pith_core::{FinishReason, Message};
use pith_router::{
    ChatRequest, ModelRouter, OpenAiCompatible, ProviderConfig, ProviderError, ProviderLimits,
    StackedProvider, StreamEvent,
};
use pith_testkit::llama::{self, LlamaServer};

const N_CTX: u32 = 1024;

fn stacked(server: &LlamaServer) -> Arc<StackedProvider> {
    // Generous retries: if the overflow were (wrongly) retryable, attempts would show it.
    let limits = ProviderLimits::default()
        .with_max_retries(3)
        .with_backoff(Duration::from_millis(10), Duration::from_millis(50));
    let config = ProviderConfig::default()
        .with_base_url(server.base_url())
        .with_limits(limits);
    Arc::new(OpenAiCompatible::stacked("local", &config).unwrap())
}

fn short_request() -> ChatRequest {
    ChatRequest::new(
        "local/smollm2",
        vec![
            Message::system("You are a helpful assistant."),
            Message::user("Say hello."),
        ],
    )
    .with_max_tokens(8)
    .with_temperature(0.0)
}

#[tokio::test]
async fn completion_non_streaming_and_streaming() {
    let _guard = llama::serial().lock().await;
    let Some(server) = LlamaServer::start(N_CTX) else {
        return;
    };
    let provider = stacked(&server);
    let router = ModelRouter::builder()
        .provider("local", provider.clone())
        .build()
        .unwrap();

    let reply = router.chat(short_request(), None).await.unwrap();
    assert!(
        !reply.message.text_content().trim().is_empty(),
        "empty reply: {reply:?}"
    );
    assert!(
        matches!(reply.finish, FinishReason::Stop | FinishReason::Length),
        "{:?}",
        reply.finish
    );
    let usage = reply.usage;
    assert!(
        usage.prompt_tokens() > 5 && usage.prompt_tokens() < 200,
        "{usage:?}"
    );
    assert!(usage.output >= 1 && usage.output <= 8, "{usage:?}");
    if reply.finish == FinishReason::Length {
        assert_eq!(usage.output, 8, "a length stop uses the whole output budget");
    }
    assert_eq!(reply.message.usage, Some(usage));

    let deltas = Arc::new(Mutex::new(Vec::new()));
    let d = deltas.clone();
    let sink = move |e: &StreamEvent| d.lock().unwrap().push(e.clone());
    let streamed = router
        .chat(short_request().streaming(true), Some(&sink))
        .await
        .unwrap();
    let events = deltas.lock().unwrap().clone();
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(!text.trim().is_empty());
    assert_eq!(text, streamed.message.text_content());
    assert!(events.contains(&StreamEvent::Finish {
        reason: streamed.finish
    }));
    assert!(events
        .iter()
        .any(|e| matches!(e, StreamEvent::Usage { usage } if *usage == streamed.usage)));
    // Same prompt, same count (part of it may now come from the server's prompt cache).
    assert_eq!(streamed.usage.prompt_tokens(), usage.prompt_tokens());
    assert!(streamed.usage.output >= 1 && streamed.usage.output <= 8);
    assert_eq!(provider.attempts(), 2);
}

#[tokio::test]
async fn over_long_request_is_an_overflow_with_n_ctx_and_is_not_retried() {
    let _guard = llama::serial().lock().await;
    let Some(server) = LlamaServer::start(N_CTX) else {
        return;
    };
    let provider = stacked(&server);
    let router = ModelRouter::builder()
        .provider("local", provider.clone())
        .build()
        .unwrap();
    assert_eq!(router.context_window("local/smollm2"), 128_000);

    let long = "the quick brown fox jumps over the lazy dog ".repeat(600);
    for stream in [false, true] {
        let request = ChatRequest::new("local/smollm2", vec![Message::user(long.clone())])
            .with_max_tokens(8)
            .streaming(stream);
        let before = provider.attempts();
        let sink = |_: &StreamEvent| {};
        let err = router.chat(request, Some(&sink)).await.unwrap_err();
        match &err {
            ProviderError::ContextOverflow {
                limit,
                requested,
                message,
            } => {
                assert_eq!(*limit, Some(u64::from(N_CTX)), "{message}");
                assert!(requested.unwrap() > u64::from(N_CTX), "{message}");
                assert!(
                    message.contains("exceeds the available context size"),
                    "{message}"
                );
            }
            other => panic!("stream={stream}: expected an overflow, got {other:?}"),
        }
        assert!(!err.is_retryable());
        assert_eq!(
            provider.attempts() - before,
            1,
            "stream={stream}: the overflow was retried"
        );
    }
    // The router learned the real window from the error.
    assert_eq!(router.context_window("local/smollm2"), u64::from(N_CTX));
}
