//! Routing, the catalogue, structured overflow signals, fallbacks and tracing spans.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pith_core::{FinishReason, Message, Usage};
use pith_router::{
    ChatRequest, ModelInfo, ModelRouter, OpenAiCompatible, ProviderConfig, ProviderError, ProviderLimits,
    ScriptedProvider,
};
use pith_testkit::wire::{json_response, openai_completion};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer};

fn request(model: &str) -> ChatRequest {
    ChatRequest::new(model, vec![Message::user("hi")])
}

fn usage(input: u64, output: u64) -> Usage {
    Usage::from_openai(input, output, 0)
}

#[tokio::test]
async fn routes_by_prefix_and_alias() {
    let a = Arc::new(ScriptedProvider::new("a"));
    let b = Arc::new(ScriptedProvider::new("b"));
    a.push_text("from a", usage(1, 1));
    b.push_text("from b", usage(1, 1));
    let router = ModelRouter::builder()
        .provider("a", a.clone())
        .provider("b", b.clone())
        .alias("fast", "b/small-model")
        .build()
        .unwrap();
    assert_eq!(
        router
            .chat(request("a/x"), None)
            .await
            .unwrap()
            .message
            .text_content(),
        "from a"
    );
    assert_eq!(
        router
            .chat(request("fast"), None)
            .await
            .unwrap()
            .message
            .text_content(),
        "from b"
    );
    assert_eq!(b.requests()[0].model, "small-model");
    assert!(matches!(
        router.chat(request("c/x"), None).await,
        Err(ProviderError::UnknownModel(_))
    ));
    assert!(matches!(
        router.chat(request("no-slash"), None).await,
        Err(ProviderError::UnknownModel(_))
    ));
}

#[tokio::test]
async fn catalogue_overrides_and_learning() {
    let p = Arc::new(ScriptedProvider::new("p"));
    p.push_error(ProviderError::ContextOverflow {
        message: "prompt is too long: 9000 tokens > 8000 maximum".into(),
        limit: Some(8_000),
        requested: Some(9_000),
    });
    let router = ModelRouter::builder()
        .provider("p", p.clone())
        .alias("big", "p/model")
        .model(
            "big",
            ModelInfo {
                context_window: 32_000,
                max_output: 4_000,
            },
        )
        .build()
        .unwrap();
    assert_eq!(router.context_window("p/model"), 32_000);
    assert_eq!(router.model_info("big").max_output, 4_000);
    let err = router.chat(request("big"), None).await.unwrap_err();
    assert!(err.is_context_overflow());
    assert_eq!(router.context_window("big"), 8_000);
    assert_eq!(router.context_window("anthropic/claude-sonnet-4-5"), 200_000);
}

#[tokio::test]
async fn silent_overflow_and_filled_window_are_overflows() {
    let p = Arc::new(ScriptedProvider::new("p"));
    let router = ModelRouter::builder()
        .provider("p", p.clone())
        .model(
            "p/m",
            ModelInfo {
                context_window: 10_000,
                max_output: 1_000,
            },
        )
        .build()
        .unwrap();
    // Reported input above the window: the provider accepted an oversized request.
    p.push_text("fine", usage(12_000, 10));
    let err = router.chat(request("p/m"), None).await.unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::ContextOverflow {
                requested: Some(12_000),
                ..
            }
        ),
        "{err:?}"
    );
    // Stopped for length with no output after filling >= 99% of the window.
    p.push(Ok(ScriptedProvider::reply(
        Message::assistant(""),
        FinishReason::Length,
        usage(9_950, 0),
    )));
    assert!(router
        .chat(request("p/m"), None)
        .await
        .unwrap_err()
        .is_context_overflow());
    // A length stop with output, or at 98% of the window, is a normal reply.
    p.push(Ok(ScriptedProvider::reply(
        Message::assistant("abc"),
        FinishReason::Length,
        usage(9_950, 3),
    )));
    assert!(router.chat(request("p/m"), None).await.is_ok());
    p.push(Ok(ScriptedProvider::reply(
        Message::assistant(""),
        FinishReason::Length,
        usage(9_800, 0),
    )));
    assert!(router.chat(request("p/m"), None).await.is_ok());
}

#[tokio::test]
async fn fallbacks_on_retryable_errors_only() {
    let main = Arc::new(ScriptedProvider::new("main"));
    let backup = Arc::new(ScriptedProvider::new("backup"));
    let router = ModelRouter::builder()
        .provider("main", main.clone())
        .provider("backup", backup.clone())
        .fallbacks("main/m", vec!["backup/m".into()])
        .build()
        .unwrap();
    main.push_error(ProviderError::Server {
        status: 503,
        message: "down".into(),
    });
    backup.push_text("backup answered", usage(1, 1));
    let reply = router.chat(request("main/m"), None).await.unwrap();
    assert_eq!(reply.message.text_content(), "backup answered");
    // An overflow goes back to the caller, who must compact; no fallback hides it.
    main.push_error(ProviderError::overflow("prompt is too long"));
    backup.push_text("should not be used", usage(1, 1));
    assert!(router
        .chat(request("main/m"), None)
        .await
        .unwrap_err()
        .is_context_overflow());
    assert_eq!(backup.remaining(), 1);
}

/// Records the fields of every `llm.request` span.
#[derive(Clone, Default)]
struct SpanRecorder(Arc<Mutex<Vec<SpanFields>>>);

/// The (name, value) fields of one span.
type SpanFields = Vec<(String, String)>;

struct FieldVisitor<'a>(&'a mut Vec<(String, String)>);

impl Visit for FieldVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_string(), format!("{value:?}")));
    }
}

impl<S: tracing::Subscriber> Layer<S> for SpanRecorder {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: Context<'_, S>,
    ) {
        if attrs.metadata().name() == "llm.request" {
            let mut fields = Vec::new();
            attrs.record(&mut FieldVisitor(&mut fields));
            self.0.lock().unwrap().push(fields);
        }
    }
}

#[tokio::test]
async fn each_attempt_gets_an_llm_request_span_without_content() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(json_response(
            500,
            serde_json::json!({"error": {"message": "boom"}}),
        ))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(json_response(200, openai_completion("ok", 3, 1, 0)))
        .mount(&server)
        .await;
    let recorder = SpanRecorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let limits = ProviderLimits::default().with_backoff(Duration::from_millis(1), Duration::from_millis(2));
    let config = ProviderConfig::default()
        .with_base_url(format!("{}/v1", server.uri()))
        .with_api_key("sk-span-secret")
        .with_limits(limits);
    let router = ModelRouter::builder().openai("openai", config).build().unwrap();
    let secret_prompt = "my secret prompt text";
    router
        .chat(
            ChatRequest::new("openai/gpt-4o", vec![Message::user(secret_prompt)]),
            None,
        )
        .await
        .unwrap();
    let spans = recorder.0.lock().unwrap().clone();
    assert_eq!(spans.len(), 2, "{spans:?}");
    for (i, fields) in spans.iter().enumerate() {
        let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("provider").as_deref(), Some("openai"));
        assert_eq!(get("model").as_deref(), Some("gpt-4o"));
        assert_eq!(get("attempt"), Some((i + 1).to_string()));
        let all = format!("{fields:?}");
        assert!(!all.contains(secret_prompt) && !all.contains("sk-span-secret"));
    }
}

#[test]
fn openai_from_config_rejects_bad_urls_and_headers() {
    let bad = ProviderConfig::default().with_base_url("ftp://example");
    assert!(matches!(
        OpenAiCompatible::new("x", &bad),
        Err(ProviderError::InvalidConfig(_))
    ));
    let bad = ProviderConfig::default().with_header("bad header", "v");
    assert!(matches!(
        OpenAiCompatible::new("x", &bad),
        Err(ProviderError::InvalidConfig(_))
    ));
    let bad_key = ProviderConfig::default().with_api_key("line\nbreak-secret");
    let err = OpenAiCompatible::new("x", &bad_key).unwrap_err();
    assert!(!err.to_string().contains("break-secret"), "{err}");
}
