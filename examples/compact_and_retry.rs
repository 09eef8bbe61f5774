//! Compact-and-retry: a provider rejects a request as too long, the runtime compacts the session
//! and retries the same request once, automatically.
//!
//! Offline by default: a scripted provider answers a few turns, then rejects the next request
//! with an overflow error stating a 4,096-token window; the runtime summarises the old turns and
//! the retry succeeds. With `OPENAI_BASE_URL` set, the same session runs against a real
//! OpenAI-compatible endpoint whose window is declared small (`PITH_WINDOW`, default 4,096), so
//! compaction happens proactively before the request that would not fit.

use std::sync::Arc;

use pith::compaction::CompactionConfig;
use pith::core::{AgentEvent, Usage};
use pith::router::{ModelInfo, ModelRouter, ProviderError, ScriptedProvider};
use pith::{CancellationToken, MemoryStore, Runtime};

const TURNS: usize = 6;

fn router() -> Result<(ModelRouter, String, bool), Box<dyn std::error::Error>> {
    if std::env::var("OPENAI_BASE_URL").is_ok() {
        let model = std::env::var("PITH_MODEL").unwrap_or_else(|_| "openai/gpt-4o-mini".into());
        let window = std::env::var("PITH_WINDOW")
            .ok()
            .and_then(|w| w.parse().ok())
            .unwrap_or(4_096);
        let router = ModelRouter::from_env()?.with_model(
            &model,
            ModelInfo {
                context_window: window,
                max_output: 512,
            },
        );
        return Ok((router, model, true));
    }
    let provider = Arc::new(ScriptedProvider::new("scripted"));
    for i in 0..TURNS {
        let answer = format!(
            "Answer {i}: {}",
            "The service reads its settings from config.toml. ".repeat(25)
        );
        provider.push_text(answer, Usage::from_openai(400 + 350 * i as u64, 300, 0));
    }
    // The provider rejects the next request (a real OpenAI message), the summary call succeeds,
    // and the retried request is answered.
    provider.push_error(ProviderError::ContextOverflow {
        message: "This model's maximum context length is 4096 tokens. However, your messages resulted in 4400 tokens."
            .into(),
        limit: Some(4_096),
        requested: Some(4_400),
    });
    provider.push_text(
        "- The user asked six questions about configuration.\n- Settings live in config.toml.",
        Usage::from_openai(1_900, 40, 0),
    );
    provider.push_text("It reads config.toml.", Usage::from_openai(300, 6, 0));
    let router = ModelRouter::new().with_provider("scripted", provider).with_model(
        "scripted/demo",
        ModelInfo {
            context_window: 8_192,
            max_output: 512,
        },
    );
    Ok((router, "scripted/demo".into(), false))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (router, model, real) = router()?;
    let runtime = Runtime::builder()
        .router(router)
        .store(Arc::new(MemoryStore::new()))
        .compaction(
            CompactionConfig::default()
                .with_keep_recent_turns(1)
                .with_max_summary_tokens(200),
        )
        .build()?;
    let mut events = runtime.subscribe();
    let session = runtime
        .create_session(&model, "You answer questions about a service's configuration.")
        .await?;

    let questions = TURNS + 1;
    for i in 0..questions {
        let question = if real {
            format!("Question {i}: describe, in about 150 words, how a service could read its settings from config.toml.")
        } else if i < TURNS {
            format!("Question {i} about the configuration?")
        } else {
            "So where does it read its settings from?".to_string()
        };
        let outcome = runtime
            .run_turn(session, question, CancellationToken::new())
            .await?;
        let first_line = outcome
            .text()
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(70)
            .collect::<String>();
        println!(
            "turn {}: {} model request(s): {first_line}",
            i + 1,
            outcome.model_requests
        );
        for c in &outcome.compactions {
            println!(
                "  compacted ({:?}): {} -> {} tokens, generation {}",
                c.kind, c.tokens_before, c.tokens_after, c.generation
            );
        }
    }
    while let Ok(event) = events.try_recv() {
        if let AgentEvent::HistoryReplaced { generation, .. } = event {
            println!("history replaced: generation {generation}");
        }
    }
    let log = runtime.store().load_log(session).await?;
    println!(
        "the log still holds all {} entries; nothing was deleted",
        log.len()
    );
    Ok(())
}
