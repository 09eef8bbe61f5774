//! The tower stack with in-process endpoints: timeouts and Retry-After on tokio's paused
//! clock, rate limits on the real clock (governor's clock ignores tokio's), shared budgets, and
//! the `llm.request` spans.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use pith_core::{Message, Usage};
use pith_router::stack::{Endpoint, ProviderCall};
use pith_router::{
    ChatRequest, ChatResponse, Provider, ProviderError, ProviderLimits, ScriptedProvider, StackedProvider,
    StreamEvent,
};

type Step = Box<
    dyn Fn(ProviderCall) -> futures::future::BoxFuture<'static, Result<ChatResponse, ProviderError>>
        + Send
        + Sync,
>;

/// An endpoint that plays one behaviour per attempt (the last one repeats).
struct FakeEndpoint {
    steps: Mutex<VecDeque<Arc<Step>>>,
    last: Mutex<Option<Arc<Step>>>,
}

impl FakeEndpoint {
    fn new(steps: Vec<Step>) -> Arc<Self> {
        Arc::new(Self {
            steps: Mutex::new(steps.into_iter().map(Arc::new).collect()),
            last: Mutex::new(None),
        })
    }
}

#[async_trait]
impl Endpoint for FakeEndpoint {
    fn name(&self) -> &str {
        "fake"
    }

    async fn send(&self, call: ProviderCall) -> Result<ChatResponse, ProviderError> {
        let step = {
            let mut steps = self.steps.lock().unwrap();
            let mut last = self.last.lock().unwrap();
            if let Some(s) = steps.pop_front() {
                *last = Some(s.clone());
            }
            last.clone().expect("at least one step")
        };
        step(call).await
    }
}

fn ok() -> Step {
    Box::new(|_| Box::pin(async { Ok(ScriptedProvider::text_reply("ok", Usage::default())) }))
}

fn fail(make: fn() -> ProviderError) -> Step {
    Box::new(move |_| Box::pin(async move { Err(make()) }))
}

fn hang() -> Step {
    Box::new(|_| Box::pin(futures::future::pending()))
}

fn request() -> ChatRequest {
    ChatRequest::new("m", vec![Message::user("hi")])
}

fn limits() -> ProviderLimits {
    ProviderLimits::default()
        .with_backoff(Duration::from_millis(100), Duration::from_secs(1))
        .with_request_timeout(None)
        .with_idle_timeout(None)
}

#[tokio::test(start_paused = true)]
async fn request_timeout_on_paused_clock() {
    let endpoint = FakeEndpoint::new(vec![hang()]);
    let limits = limits()
        .with_max_retries(0)
        .with_request_timeout(Some(Duration::from_secs(600)));
    let p = StackedProvider::new(endpoint, &limits).unwrap();
    let started = tokio::time::Instant::now();
    let err = p.chat(request(), None).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Timeout(d) if d == Duration::from_secs(600)),
        "{err:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(600));
}

#[tokio::test(start_paused = true)]
async fn timeouts_are_retried_with_backoff() {
    let endpoint = FakeEndpoint::new(vec![hang(), hang(), ok()]);
    let limits = limits()
        .with_max_retries(2)
        .with_request_timeout(Some(Duration::from_secs(10)));
    let p = StackedProvider::new(endpoint, &limits).unwrap();
    let started = tokio::time::Instant::now();
    p.chat(request(), None).await.unwrap();
    assert_eq!(p.attempts(), 3);
    // Two timeouts of 10 s plus two jittered backoffs (50..100 ms, then 100..200 ms).
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(20_150) && elapsed <= Duration::from_millis(20_300),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn idle_stream_times_out_but_activity_keeps_it_alive() {
    // Bytes arrive every 5 s for 60 s, then silence.
    let trickle: Step = Box::new(|call: ProviderCall| {
        Box::pin(async move {
            for _ in 0..12 {
                tokio::time::sleep(Duration::from_secs(5)).await;
                call.touch();
            }
            futures::future::pending::<()>().await;
            unreachable!()
        })
    });
    let endpoint = FakeEndpoint::new(vec![trickle]);
    let limits = limits()
        .with_max_retries(0)
        .with_idle_timeout(Some(Duration::from_secs(30)));
    let p = StackedProvider::new(endpoint, &limits).unwrap();
    let started = tokio::time::Instant::now();
    let err = p.chat(request().streaming(true), None).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Timeout(d) if d == Duration::from_secs(30)),
        "{err:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(90));
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_on_paused_clock() {
    let endpoint = FakeEndpoint::new(vec![
        fail(|| ProviderError::RateLimited {
            message: "slow down".into(),
            retry_after: Some(Duration::from_secs(30)),
        }),
        ok(),
    ]);
    let p = StackedProvider::new(endpoint, &limits()).unwrap();
    let started = tokio::time::Instant::now();
    p.chat(request(), None).await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    assert_eq!(p.attempts(), 2);
}

#[tokio::test(start_paused = true)]
async fn overflow_and_auth_are_never_retried() {
    for make in [
        (|| ProviderError::overflow("prompt is too long")) as fn() -> ProviderError,
        || ProviderError::Auth {
            status: 401,
            message: "bad key".into(),
        },
        || ProviderError::PayloadTooLarge {
            message: "too big".into(),
        },
    ] {
        let endpoint = FakeEndpoint::new(vec![fail(make), ok()]);
        let p = StackedProvider::new(endpoint, &limits()).unwrap();
        assert!(p.chat(request(), None).await.is_err());
        assert_eq!(p.attempts(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn events_reach_the_sink_in_order() {
    let streaming: Step = Box::new(|call: ProviderCall| {
        Box::pin(async move {
            for t in ["a", "b", "c"] {
                call.emit(StreamEvent::TextDelta { text: t.into() });
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok(ScriptedProvider::text_reply("abc", Usage::default()))
        })
    });
    let p = StackedProvider::new(FakeEndpoint::new(vec![streaming]), &limits()).unwrap();
    let seen = Arc::new(Mutex::new(String::new()));
    let s = seen.clone();
    let sink = move |e: &StreamEvent| {
        if let StreamEvent::TextDelta { text } = e {
            s.lock().unwrap().push_str(text);
        }
    };
    p.chat(request().streaming(true), Some(&sink)).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), "abc");
}

#[tokio::test]
async fn request_rate_limit_holds_across_clones() {
    // 8 requests at 20/s with a burst of 2 take at least (8 - 2) / 20 = 0.3 s.
    let endpoint = FakeEndpoint::new(vec![ok()]);
    let limits = limits().with_requests_per_second(Some(20.0), 2);
    let p = Arc::new(StackedProvider::new(endpoint, &limits).unwrap());
    let started = std::time::Instant::now();
    let calls = (0..8).map(|_| {
        let p = p.clone();
        tokio::spawn(async move { p.chat(request(), None).await })
    });
    for r in futures::future::join_all(calls).await {
        r.unwrap().unwrap();
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(290),
        "8 requests took only {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[tokio::test]
async fn token_rate_limit_delays_requests_once_the_budget_is_spent() {
    // 6,000 tokens per minute refill at 100 per second. The first request (~6,000 estimated
    // tokens) spends the whole budget at once; the next one (100 tokens) must wait ~1 s.
    let endpoint = FakeEndpoint::new(vec![ok()]);
    let limits = limits().with_tokens_per_minute(Some(6_000));
    let p = StackedProvider::new(endpoint, &limits).unwrap();
    let started = std::time::Instant::now();
    p.chat(
        ChatRequest::new("m", vec![Message::user("x".repeat(24_000))]),
        None,
    )
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_millis(500));
    p.chat(ChatRequest::new("m", vec![Message::user("x".repeat(400))]), None)
        .await
        .unwrap();
    // The budget refills from the first charge on, so the whole run takes at least 1 s.
    let total = started.elapsed();
    assert!(
        total >= Duration::from_millis(990) && total < Duration::from_secs(3),
        "{total:?}"
    );
}

#[tokio::test]
async fn concurrency_limit_is_shared() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (f, pk) = (in_flight.clone(), peak.clone());
    let slow: Step = Box::new(move |_| {
        let (f, pk) = (f.clone(), pk.clone());
        Box::pin(async move {
            let now = f.fetch_add(1, Ordering::SeqCst) + 1;
            pk.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            f.fetch_sub(1, Ordering::SeqCst);
            Ok(ScriptedProvider::text_reply("ok", Usage::default()))
        })
    });
    let limits = limits().with_max_concurrency(Some(3));
    let p = Arc::new(StackedProvider::new(FakeEndpoint::new(vec![slow]), &limits).unwrap());
    let calls = (0..10).map(|_| {
        let p = p.clone();
        tokio::spawn(async move { p.chat(request(), None).await })
    });
    for r in futures::future::join_all(calls).await {
        r.unwrap().unwrap();
    }
    assert_eq!(peak.load(Ordering::SeqCst), 3);
}
