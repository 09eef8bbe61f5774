//! `pith sessions`, `pith compact` and `pith circuit`.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result};
use pith_compaction::{CompactionConfig, CompactionService, CompactionTrigger};
use pith_core::SessionId;
use pith_router::{ModelInfo, ModelRouter};

use super::{CircuitAction, SessionsAction};
use crate::store_url::StoreUrl;

fn parse_id(id: &str) -> Result<SessionId> {
    Ok(id.parse::<SessionId>()?)
}

pub async fn run(store: &StoreUrl, action: SessionsAction, json: bool) -> Result<()> {
    let store = store.open().await?;
    match action {
        SessionsAction::List => {
            let sessions = store.list_sessions().await?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&sessions)?);
            } else if sessions.is_empty() {
                outln!("no sessions");
            } else {
                outln!("{:<36}  {:<28}  {:>3}  updated", "id", "model", "gen");
                for s in sessions {
                    outln!(
                        "{:<36}  {:<28}  {:>3}  {}",
                        s.id,
                        s.model,
                        s.generation,
                        s.updated_at.to_rfc3339()
                    );
                }
            }
        }
        SessionsAction::Show { id } => {
            let id = parse_id(&id)?;
            let view = store.load_view(id).await?;
            let revisions = store.list_revisions(id).await?;
            let breaker = store.breaker(id).await?;
            if json {
                let out = serde_json::json!({ "view": view, "revisions": revisions, "breaker": breaker });
                outln!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                outln!(
                    "session {}  model {}  generation {}",
                    view.session.id,
                    view.session.model,
                    view.generation
                );
                outln!("log entries {}  tail entries {}", view.log_len, view.tail.len());
                if let Some(meta) = &view.compaction {
                    outln!(
                        "latest compaction: {} -> {} tokens ({}, {:?})",
                        meta.tokens_before,
                        meta.tokens_after,
                        meta.strategy.as_str(),
                        meta.trigger
                    );
                }
                outln!(
                    "revisions: {}",
                    revisions
                        .iter()
                        .map(|r| r.generation.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                outln!(
                    "circuit: {} ({} consecutive failures)",
                    if breaker.open { "open" } else { "closed" },
                    breaker.consecutive_failures
                );
            }
        }
        SessionsAction::Export {
            id,
            revision,
            format,
            output,
        } => {
            let id = parse_id(&id)?;
            let generation = match revision {
                Some(g) => g,
                None => store.get_session(id).await?.generation,
            };
            let export = store.export_revision(id, generation).await?;
            let bytes = if format == "jsonl" {
                let style = CompactionConfig::default().projection;
                let mut out = Vec::new();
                for m in pith_compaction::project(&export.view, style) {
                    serde_json::to_writer(&mut out, &m)?;
                    out.push(b'\n');
                }
                out
            } else {
                export.bytes.clone()
            };
            match output {
                Some(path) => std::fs::write(&path, &bytes)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => std::io::stdout()
                    .write_all(&bytes)
                    .context("cannot write to standard output")?,
            }
            eprintln!("revision {} sha256 {}", export.generation, export.sha256);
        }
        SessionsAction::Delete { id } => {
            let id = parse_id(&id)?;
            store.delete_session(id).await?;
            if json {
                outln!("{}", serde_json::json!({ "deleted": id.to_string() }));
            } else {
                outln!("deleted session {id}");
            }
        }
    }
    Ok(())
}

async fn service(
    store: &StoreUrl,
    id: SessionId,
    summary_model: Option<String>,
    window: Option<u64>,
) -> Result<CompactionService> {
    let store = store.open().await?;
    let record = store.get_session(id).await?;
    let mut router = match &summary_model {
        Some(_) => ModelRouter::from_env().context("cannot configure the summary model's provider")?,
        None => ModelRouter::new(),
    };
    if let Some(window) = window {
        router = router.with_model(
            &record.model,
            ModelInfo {
                context_window: window,
                max_output: 8_192,
            },
        );
    }
    let config = match summary_model {
        Some(model) => CompactionConfig::default().with_summary_model(model),
        None => CompactionConfig::default().with_deterministic_summarizer(),
    };
    Ok(CompactionService::new(Arc::new(router), store, config))
}

pub async fn compact(
    store: &StoreUrl,
    id: &str,
    instructions: Option<String>,
    summary_model: Option<String>,
    window: Option<u64>,
    json: bool,
) -> Result<()> {
    let id = parse_id(id)?;
    let service = service(store, id, summary_model, window).await?;
    let result = service
        .compact(id, CompactionTrigger::Manual { instructions })
        .await?;
    if json {
        let out = serde_json::json!({ "noop": result.noop, "record": result.meta });
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else if result.noop {
        outln!("already compacted at generation {}", result.meta.generation);
    } else {
        outln!(
            "compacted session {id}: generation {}, {} -> {} tokens ({})",
            result.meta.generation,
            result.tokens_before,
            result.tokens_after,
            result.strategy.as_str()
        );
    }
    Ok(())
}

pub async fn circuit(store: &StoreUrl, action: CircuitAction, json: bool) -> Result<()> {
    let (id, reset) = match action {
        CircuitAction::Status { id } => (parse_id(&id)?, false),
        CircuitAction::Reset { id } => (parse_id(&id)?, true),
    };
    let service = service(store, id, None, None).await?;
    if reset {
        service.reset_circuit(id).await?;
    }
    let state = service.circuit_status(id).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&state)?);
    } else {
        outln!(
            "session {id}: circuit {} ({} consecutive failures{})",
            if state.open { "open" } else { "closed" },
            state.consecutive_failures,
            state
                .last_error
                .map(|e| format!("; last: {e}"))
                .unwrap_or_default()
        );
    }
    Ok(())
}
