//! A worker process of the multi-process Postgres test.
//!
//! Runs turns and manual compactions on shared sessions of one Postgres database until a
//! deadline, and writes one JSON line per operation to `PITH_WORKER_LOG` (appended and flushed
//! as it goes, so a parent can audit every operation the worker saw succeed). Turn inputs are
//! `<worker>-<n>`, unique across workers, so the parent can find each one in the final logs.
//!
//! Environment: `PITH_WORKER_URL` (Postgres URL), `PITH_WORKER_ID`, `PITH_WORKER_SESSIONS`
//! (comma-separated session ids), `PITH_WORKER_SECONDS`, `PITH_WORKER_LOG`,
//! `PITH_WORKER_WINDOW` (default 4000).

use std::error::Error;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pith_compaction::CompactionConfig;
use pith_core::SessionId;
use pith_reliability::echo_router;
use pith_runtime::{CancellationToken, Runtime};
use pith_store::{PostgresStore, SessionStore};
use serde_json::json;

fn var(name: &str) -> Result<String, Box<dyn Error>> {
    std::env::var(name).map_err(|_| format!("{name} must be set").into())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let url = var("PITH_WORKER_URL")?;
    let id = var("PITH_WORKER_ID")?;
    let sessions = var("PITH_WORKER_SESSIONS")?
        .split(',')
        .map(str::parse::<SessionId>)
        .collect::<Result<Vec<_>, _>>()?;
    if sessions.is_empty() {
        return Err("PITH_WORKER_SESSIONS names no session".into());
    }
    let seconds: u64 = var("PITH_WORKER_SECONDS")?.parse()?;
    let window: u64 = std::env::var("PITH_WORKER_WINDOW")
        .ok()
        .map(|w| w.parse())
        .transpose()?
        .unwrap_or(4_000);
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(var("PITH_WORKER_LOG")?)?;

    let store: Arc<dyn SessionStore> = Arc::new(PostgresStore::connect(&url).await?);
    let runtime = Runtime::builder()
        .router(echo_router(window))
        .store(store)
        .compaction(
            CompactionConfig::default()
                .with_keep_recent_turns(2)
                .with_max_messages(16)
                .with_max_failures(1_000),
        )
        .build()?;

    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let session = sessions[(n as usize) % sessions.len()];
        let line = if n.is_multiple_of(10) {
            match runtime.compact(session, None).await {
                Ok(r) => json!({"op": "compact", "session": session, "ok": true,
                                "generation": r.meta.generation, "noop": r.noop}),
                Err(e) => json!({"op": "compact", "session": session, "ok": false, "error": e.to_string()}),
            }
        } else {
            let input = format!("{id}-{n}");
            match runtime
                .run_turn(session, input.as_str(), CancellationToken::new())
                .await
            {
                Ok(outcome) => json!({"op": "turn", "session": session, "ok": true, "input": input,
                                      "text": outcome.text(), "reply_id": outcome.message.id,
                                      "compactions": outcome.compactions.iter().map(|c| c.generation).collect::<Vec<_>>()}),
                Err(e) => json!({"op": "turn", "session": session, "ok": false, "input": input,
                                 "error": e.to_string()}),
            }
        };
        writeln!(log, "{line}")?;
        log.flush()?;
    }
    Ok(())
}
