//! `pith chat`: an interactive, streamed conversation with a provider.

use std::io::Write;

use anyhow::{Context, Result};
use pith_compaction::CompactionConfig;
use pith_core::{AgentEvent, SessionId};
use pith_router::ModelRouter;
use pith_runtime::{CancellationToken, Runtime, RuntimeConfig};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::store_url::StoreUrl;

pub async fn run(store: &StoreUrl, model: &str, session: Option<&str>) -> Result<()> {
    let store = store.open().await?;
    let router = ModelRouter::from_env().context("cannot configure providers from the environment")?;
    let runtime = Runtime::builder()
        .router(router)
        .store(store)
        .compaction(CompactionConfig::default())
        .config(RuntimeConfig::default().with_stream(true))
        .build()
        .context("cannot build the runtime")?;
    let session = match session {
        Some(id) => id.parse::<SessionId>()?,
        None => {
            runtime
                .create_session(model, "You are a helpful assistant.")
                .await?
        }
    };
    eprintln!("session {session} with {model}; type /exit to leave");
    let mut events = runtime.subscribe();
    let printer = tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            match event {
                AgentEvent::TextDelta { text, .. } => {
                    print!("{text}");
                    let _ = std::io::stdout().flush();
                }
                AgentEvent::CompactionFinished {
                    tokens_before,
                    tokens_after,
                    ..
                } => {
                    eprintln!("\n[compacted {tokens_before} -> {tokens_after} tokens]");
                }
                AgentEvent::CompactionCircuitOpened { .. } => eprintln!("\n[compaction circuit opened]"),
                _ => {}
            }
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        eprint!("> ");
        let Some(line) = lines.next_line().await? else {
            break;
        };
        let line = line.trim();
        if line == "/exit" {
            break;
        }
        if line.is_empty() {
            continue;
        }
        let cancel = CancellationToken::new();
        let outcome = runtime.run_turn(session, line, cancel).await;
        println!();
        if let Err(e) = outcome {
            eprintln!("error: {e}");
        }
    }
    drop(runtime);
    printer.abort();
    Ok(())
}
