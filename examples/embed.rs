//! A basic agent with one tool, embedded in a program.
//!
//! Offline by default: a scripted provider plays the model. Set `OPENAI_BASE_URL` (and
//! `OPENAI_API_KEY` if the endpoint needs one; `PITH_MODEL` picks the model, default
//! `openai/gpt-4o-mini`) to run the same agent against a real OpenAI-compatible endpoint.
//!
//! ```text
//! cargo run --example embed
//! OPENAI_BASE_URL=http://127.0.0.1:8080/v1 PITH_MODEL=openai/local cargo run --example embed
//! ```

use std::sync::Arc;

use pith::core::{AgentEvent, FinishReason, Message, Part, Role, Usage};
use pith::router::{ModelRouter, ScriptedProvider};
use pith::{CancellationToken, FnTool, MemoryStore, Runtime, ToolContext, ToolError};
use serde_json::{json, Value};

/// The model and router: the real endpoint when configured, else a scripted stand-in.
fn router() -> Result<(ModelRouter, String), Box<dyn std::error::Error>> {
    if std::env::var("OPENAI_BASE_URL").is_ok() {
        let model = std::env::var("PITH_MODEL").unwrap_or_else(|_| "openai/gpt-4o-mini".into());
        return Ok((ModelRouter::from_env()?, model));
    }
    let provider = Arc::new(ScriptedProvider::new("scripted"));
    let call = Message::new(
        Role::Assistant,
        vec![Part::ToolCall {
            call_id: "call_1".into(),
            name: "word_count".into(),
            arguments: json!({"text": "the quick brown fox jumps over the lazy dog"}),
        }],
    );
    provider.push(Ok(ScriptedProvider::reply(
        call,
        FinishReason::ToolCalls,
        Usage::from_openai(120, 20, 0),
    )));
    provider.push_text("The sentence has 9 words.", Usage::from_openai(160, 8, 0));
    Ok((
        ModelRouter::new().with_provider("scripted", provider),
        "scripted/demo".into(),
    ))
}

/// Counts the words of a text.
fn word_count(
) -> FnTool<impl Fn(Value, ToolContext) -> std::future::Ready<Result<String, ToolError>> + Send + Sync> {
    FnTool::new(
        "word_count",
        "Counts the words of a text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |args: Value, _ctx: ToolContext| {
            std::future::ready(match args["text"].as_str() {
                Some(text) => Ok(text.split_whitespace().count().to_string()),
                None => Err(ToolError::InvalidArguments("`text` must be a string".into())),
            })
        },
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (router, model) = router()?;
    let runtime = Runtime::builder()
        .router(router)
        .store(Arc::new(MemoryStore::new()))
        .tool(word_count())
        .build()?;

    // Everything the runtime does is an event; print the interesting ones as they happen.
    let mut events = runtime.subscribe();
    let printer = tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            match event {
                AgentEvent::ToolCall { name, .. } => println!("  [tool call] {name}"),
                AgentEvent::ToolResult { name, is_error, .. } => {
                    println!("  [tool result] {name} (error: {is_error})")
                }
                AgentEvent::TurnFinished { usage, .. } => {
                    println!(
                        "  [turn finished] {} prompt + {} output tokens",
                        usage.prompt_tokens(),
                        usage.output
                    );
                    break;
                }
                _ => {}
            }
        }
    });

    let session = runtime
        .create_session(
            &model,
            "You are a helpful assistant. Use the word_count tool to count words.",
        )
        .await?;
    let question = "How many words are in: the quick brown fox jumps over the lazy dog?";
    println!("user: {question}");
    let outcome = runtime
        .run_turn(session, question, CancellationToken::new())
        .await?;
    printer.await?;
    println!("assistant: {}", outcome.text());
    println!(
        "({} model requests, {} tool calls)",
        outcome.model_requests, outcome.tool_calls
    );
    Ok(())
}
