//! The overflow classifier against real provider error messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pith_router::classify::classify_http;
use pith_router::overflow::{is_context_overflow, parse_overflow_sizes, OverflowSizes};
use pith_router::ProviderError;

/// (provider, status, message, is overflow, stated limit, stated request size)
type Case = (
    &'static str,
    Option<u16>,
    &'static str,
    bool,
    Option<u64>,
    Option<u64>,
);

const CASES: &[Case] = &[
    // Overflows, by provider.
    ("anthropic", Some(400), "prompt is too long: 213462 tokens > 200000 maximum", true, Some(200_000), Some(213_462)),
    ("bedrock-claude", Some(400), "ValidationException: prompt is too long: 204800 tokens > 200000 maximum", true, Some(200_000), Some(204_800)),
    ("bedrock", Some(400), "Input is too long for requested model.", true, None, None),
    ("openai", Some(400), "Your input exceeds the context window of this model. Please adjust your input and try again.", true, None, None),
    ("openai", Some(400), "This model's maximum context length is 128000 tokens. However, your messages resulted in 130521 tokens. Please reduce the length of the messages.", true, Some(128_000), Some(130_521)),
    ("openai-old", Some(400), "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.", true, Some(8_192), Some(9_000)),
    ("azure", Some(400), "This model's maximum context length is 128000 tokens. However, your messages resulted in 200000 tokens (199500 in the messages, 500 in the functions). Please reduce the length of the messages or functions.", true, Some(128_000), Some(200_000)),
    ("deepseek", Some(400), "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens (69000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.", true, Some(65_536), Some(70_000)),
    ("litellm", Some(400), "Requested token count exceeds the model's maximum context length of 131072 tokens. You requested a total of 140000 tokens", true, Some(131_072), None),
    ("openai-compatible", Some(400), "Input length (265330) exceeds model's maximum context length (262144).", true, Some(262_144), Some(265_330)),
    ("gemini", Some(400), "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).", true, Some(1_048_575), Some(1_196_265)),
    ("vertex-gemini", Some(400), "The input token count (2000000) exceeds the maximum number of tokens allowed (1048576).", true, Some(1_048_576), Some(2_000_000)),
    ("xai", Some(400), "This model's maximum prompt length is 131072 but the request contains 537812 tokens.", true, Some(131_072), Some(537_812)),
    ("groq", Some(400), "Please reduce the length of the messages or completion.", true, None, None),
    ("openrouter", Some(400), "This endpoint's maximum context length is 16385 tokens. However, you requested about 118874 tokens (118374 of text input, 500 in the output). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.", true, Some(16_385), Some(118_874)),
    ("poolside", Some(400), "Input length 300000 exceeds the maximum allowed input length of 262144 tokens.", true, Some(262_144), Some(300_000)),
    ("together", Some(400), "The input (40000 tokens) is longer than the model's context length (32768 tokens).", true, Some(32_768), Some(40_000)),
    ("copilot", Some(400), "prompt token count of 140000 exceeds the limit of 128000", true, Some(128_000), Some(140_000)),
    ("llama.cpp", Some(400), "request (6425 tokens) exceeds the available context size (1024 tokens), try increasing it", true, Some(1_024), Some(6_425)),
    ("llama.cpp-old", Some(400), "the request exceeds the available context size, try increasing it", true, None, None),
    ("lm-studio", Some(400), "The number of tokens to keep from the initial prompt is greater than the context length. Try to load the model with a larger context length, or provide a shorter input", true, None, None),
    ("minimax", Some(400), "invalid params, context window exceeds limit (2013)", true, None, None),
    ("kimi", Some(400), "Your request exceeded model token limit: 262144 (requested: 300000)", true, Some(262_144), Some(300_000)),
    ("mistral", Some(400), "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length", true, Some(32_768), Some(40_000)),
    ("z.ai", Some(400), "model_context_window_exceeded", true, None, None),
    ("ollama", Some(400), "prompt too long; exceeded max context length by 1200 tokens", true, None, None),
    ("vllm", Some(400), "This model's maximum context length is 32768 tokens. However, you requested 1000 output tokens and your prompt contains at least 32000 input tokens, for a total of at least 33000 tokens. Please reduce the length of the input prompt or the number of requested output tokens.", true, Some(32_768), Some(33_000)),
    ("vllm-old", Some(400), "The decoder prompt (length 40000) is longer than the maximum model length of 32768. Make sure that `max_model_len` is no smaller than the number of text tokens.", true, Some(32_768), None),
    ("cerebras", Some(400), "400 status code (no body)", true, None, None),
    ("cerebras", Some(413), "413 status code (no body)", true, None, None),
    ("generic", Some(400), "context length exceeded", true, None, None),
    ("generic-code", Some(400), "context_length_exceeded", true, None, None),
    ("generic", Some(400), "Too many tokens in the request for this model", true, None, None),
    ("generic", Some(400), "token limit exceeded for model", true, None, None),
    ("no-status", None, "prompt is too long: 300000 tokens > 200000 maximum", true, Some(200_000), Some(300_000)),
    // Not overflows: rate limits, throttling, quotas, payload size, other client errors.
    ("bedrock-throttling", Some(400), "ThrottlingException: Too many tokens, please wait before trying again.", false, None, None),
    ("bedrock-throttling", None, "Too many tokens, please wait before trying again.", false, None, None),
    ("bedrock-formatted", None, "Throttling error: Too many tokens, please wait before trying again.", false, None, None),
    ("bedrock-formatted", None, "Service unavailable: The model is overloaded, too many tokens in flight", false, None, None),
    ("openai-429", Some(429), "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 5000. Please try again in 8s.", false, None, None),
    ("openai-tpm", Some(429), "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 50000.", false, None, None),
    ("openai-tpm-400", Some(400), "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000. The input or output tokens must be reduced in order to run successfully.", false, None, None),
    ("groq-429", Some(429), "Rate limit reached for model `llama3-70b-8192` in organization `org_x` on tokens per minute (TPM): Limit 6000, Used 0, Requested 12000.", false, None, None),
    ("anthropic-429", Some(429), "Number of request tokens has exceeded your per-minute rate limit", false, None, None),
    ("anthropic-429", None, "This request would exceed the rate limit for your organization of 40,000 input tokens per minute.", false, None, None),
    ("generic-429", Some(429), "Too Many Requests", false, None, None),
    ("any-429", Some(429), "context length exceeded", false, None, None),
    ("openai-quota", Some(429), "You exceeded your current quota, please check your plan and billing details.", false, None, None),
    ("gemini-429", Some(429), "Resource has been exhausted (e.g. check quota).", false, None, None),
    ("anthropic-529", Some(529), "Overloaded", false, None, None),
    ("anthropic-413", Some(413), "Request exceeds the maximum size", false, None, None),
    ("nginx-413", Some(413), "413 Request Entity Too Large", false, None, None),
    ("anthropic-max-tokens", Some(400), "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-20250514", false, None, None),
    ("openai-auth", Some(401), "Incorrect API key provided: sk-abc***. You can find your API key at https://platform.openai.com/account/api-keys.", false, None, None),
    ("openai-pairing", Some(400), "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", false, None, None),
    ("openai-model", Some(404), "The model `gpt-9` does not exist or you do not have access to it.", false, None, None),
    ("server", Some(500), "500 Internal Server Error", false, None, None),
    ("empty-401", Some(401), "401 status code (no body)", false, None, None),
    ("anthropic-empty-text", Some(400), "messages: text content blocks must be non-empty", false, None, None),
];

#[test]
fn classifier_table() {
    assert!(CASES.len() >= 40, "the table holds {} cases", CASES.len());
    let mut failures = Vec::new();
    for (provider, status, message, overflow, limit, requested) in CASES {
        if is_context_overflow(*status, message) != *overflow {
            failures.push(format!(
                "{provider} ({status:?}): expected overflow={overflow}: {message}"
            ));
            continue;
        }
        if *overflow {
            let sizes = parse_overflow_sizes(message);
            let want = OverflowSizes {
                limit: *limit,
                requested: *requested,
            };
            if sizes != want {
                failures.push(format!(
                    "{provider}: sizes {sizes:?}, expected {want:?}: {message}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} misclassified:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn http_classification_agrees_with_the_table() {
    for (provider, status, message, overflow, limit, _) in CASES {
        let Some(status) = status else { continue };
        let body =
            serde_json::json!({"error": {"message": message, "type": "invalid_request_error"}}).to_string();
        let err = classify_http(*status, &body, None);
        assert_eq!(
            err.is_context_overflow(),
            *overflow,
            "{provider}: {message} -> {err:?}"
        );
        if let ProviderError::ContextOverflow { limit: got, .. } = &err {
            assert_eq!(got, limit, "{provider}");
        }
        if !overflow && *status == 429 {
            assert!(
                matches!(err, ProviderError::RateLimited { .. }),
                "{provider}: {err:?}"
            );
        }
        if !overflow && *status == 413 {
            assert!(
                matches!(err, ProviderError::PayloadTooLarge { .. }),
                "{provider}: {err:?}"
            );
        }
    }
}

#[test]
fn structured_codes_are_overflows_even_with_unknown_text() {
    let openai = r#"{"error":{"message":"Request rejected.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
    assert!(classify_http(400, openai, None).is_context_overflow());
    let llama = r#"{"error":{"code":400,"message":"too big","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":2048}}"#;
    match classify_http(400, llama, None) {
        ProviderError::ContextOverflow { limit, requested, .. } => {
            assert_eq!((limit, requested), (Some(2_048), Some(5_000)));
        }
        other => panic!("{other:?}"),
    }
    // An empty body on 400 or 413 is Cerebras's overflow; on 413 with any text it is not.
    assert!(classify_http(400, "", None).is_context_overflow());
    assert!(classify_http(413, "  ", None).is_context_overflow());
    assert!(matches!(
        classify_http(413, "body too large", None),
        ProviderError::PayloadTooLarge { .. }
    ));
}
