//! Observing the compaction circuit breaker: a session whose compactions keep failing trips its
//! circuit, `CompactionCircuitOpened` is published once, and an operator resets it.
//!
//! Offline by default: the scripted summary model fails three times. With `OPENAI_BASE_URL` set,
//! summaries are requested from a model the endpoint does not serve (`PITH_BROKEN_MODEL`,
//! default `openai/no-such-summary-model`), which fails the same way against a real server.

use std::sync::Arc;

use pith::compaction::CompactionConfig;
use pith::core::{AgentEvent, Usage};
use pith::router::{ModelRouter, ProviderError, ScriptedProvider};
use pith::{CancellationToken, MemoryStore, Runtime};

fn setup() -> Result<(ModelRouter, String, CompactionConfig), Box<dyn std::error::Error>> {
    let config = CompactionConfig::default()
        .with_keep_recent_turns(1)
        .with_max_failures(3);
    if std::env::var("OPENAI_BASE_URL").is_ok() {
        let model = std::env::var("PITH_MODEL").unwrap_or_else(|_| "openai/gpt-4o-mini".into());
        let broken =
            std::env::var("PITH_BROKEN_MODEL").unwrap_or_else(|_| "openai/no-such-summary-model".into());
        return Ok((ModelRouter::from_env()?, model, config.with_summary_model(broken)));
    }
    let provider = Arc::new(ScriptedProvider::new("scripted"));
    provider.push_text("Hello! How can I help?", Usage::from_openai(30, 8, 0));
    provider.push_text("Paris.", Usage::from_openai(50, 2, 0));
    for _ in 0..3 {
        provider.push_error(ProviderError::Server {
            status: 503,
            message: "summary model overloaded".into(),
        });
    }
    // After the reset the summary succeeds.
    provider.push_text(
        "- The user greeted and asked for the capital of France (Paris).",
        Usage::from_openai(90, 15, 0),
    );
    Ok((
        ModelRouter::new().with_provider("scripted", provider),
        "scripted/demo".into(),
        config,
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (router, model, config) = setup()?;
    let runtime = Runtime::builder()
        .router(router)
        .store(Arc::new(MemoryStore::new()))
        .compaction(config)
        .build()?;

    // An operator's monitor: a subscriber on its own task.
    let mut events = runtime.subscribe();
    let monitor = tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(AgentEvent::CompactionFailed {
                    error,
                    consecutive_failures,
                    ..
                }) => {
                    println!("  [monitor] compaction failed ({consecutive_failures} in a row): {error}")
                }
                Ok(AgentEvent::CompactionCircuitOpened {
                    session_id,
                    consecutive_failures,
                }) => {
                    println!(
                        "  [monitor] circuit OPEN for {session_id} after {consecutive_failures} failures"
                    )
                }
                Ok(AgentEvent::CompactionCircuitReset { session_id }) => {
                    println!("  [monitor] circuit reset for {session_id}");
                }
                Ok(AgentEvent::CompactionFinished {
                    tokens_before,
                    tokens_after,
                    ..
                }) => {
                    println!("  [monitor] compaction finished: {tokens_before} -> {tokens_after} tokens");
                    break;
                }
                Ok(_) => {}
                // A slow monitor is told how many events it missed instead of slowing turns down.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    println!("  [monitor] missed {n} events")
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });

    let session = runtime.create_session(&model, "You are brief.").await?;
    for q in ["Hi!", "What is the capital of France?"] {
        let outcome = runtime.run_turn(session, q, CancellationToken::new()).await?;
        println!("{q} -> {}", outcome.text());
    }
    for attempt in 1..=4 {
        match runtime.compact(session, None).await {
            Ok(r) => println!(
                "compaction {attempt}: ok ({} -> {} tokens)",
                r.tokens_before, r.tokens_after
            ),
            Err(e) => println!("compaction {attempt}: {e}"),
        }
    }
    let status = runtime.circuit_status(session).await?;
    println!(
        "circuit open: {} ({} consecutive failures)",
        status.open, status.consecutive_failures
    );

    runtime.reset_circuit(session).await?;
    if std::env::var("OPENAI_BASE_URL").is_ok() {
        println!(
            "(the summary model is still broken against the real endpoint; the next compaction fails again)"
        );
    }
    match runtime.compact(session, None).await {
        Ok(r) => println!("after reset: compacted to generation {}", r.meta.generation),
        Err(e) => println!("after reset: {e}"),
    }
    if std::env::var("OPENAI_BASE_URL").is_err() {
        monitor.await?;
    }
    Ok(())
}
