//! The child process of the crash-safety tests.
//!
//! Runs one compaction (`PITH_CRASH_MODE=compact`) or one turn (`PITH_CRASH_MODE=turn`) of an
//! existing session in a SQLite or JSONL store, and stops at the crash point named by
//! `PITH_CRASH_AT` (writing `PITH_CRASH_MARKER` first) so the parent can `SIGKILL` it there.
//! With `PITH_CRASH_SELF_KILL_US` set, it instead sends itself `SIGKILL` at a random delay (up to
//! that many microseconds) after a commit starts. On success it prints one JSON line.
//!
//! Environment: `PITH_CRASH_BACKEND` (`sqlite` | `jsonl`), `PITH_CRASH_PATH` (database file or
//! store directory), `PITH_CRASH_SESSION`, `PITH_CRASH_WINDOW` (default 8000),
//! `PITH_CRASH_INPUT` (the turn's input).

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pith_compaction::{CompactionConfig, CompactionService, CompactionTrigger, ModelSummarizer, Summarizer};
use pith_core::SessionId;
use pith_reliability::pause::Stop;
use pith_reliability::{echo_router, CrashPoint, PausingStore, PausingSummarizer, TornCommit};
use pith_runtime::{CancellationToken, Runtime};
use pith_store::{JsonlStore, SessionStore, SqliteStore};

fn var(name: &str) -> Result<String, Box<dyn Error>> {
    std::env::var(name).map_err(|_| format!("{name} must be set").into())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let backend = var("PITH_CRASH_BACKEND")?;
    let path = PathBuf::from(var("PITH_CRASH_PATH")?);
    let session: SessionId = var("PITH_CRASH_SESSION")?.parse()?;
    let mode = var("PITH_CRASH_MODE")?;
    let window: u64 = std::env::var("PITH_CRASH_WINDOW")
        .ok()
        .map(|w| w.parse())
        .transpose()?
        .unwrap_or(8_000);
    let stop = match std::env::var("PITH_CRASH_AT") {
        Ok(at) => Some(Stop {
            point: at.parse::<CrashPoint>()?,
            marker: PathBuf::from(var("PITH_CRASH_MARKER")?),
        }),
        Err(_) => None,
    };

    let (inner, torn): (Arc<dyn SessionStore>, TornCommit) = match backend.as_str() {
        "sqlite" => (
            Arc::new(SqliteStore::open(&path).await?),
            TornCommit::Sqlite { path: path.clone() },
        ),
        "jsonl" => {
            let store = JsonlStore::open(&path).await?;
            let session_dir = store.session_dir(session);
            (Arc::new(store), TornCommit::Jsonl { session_dir })
        }
        other => return Err(format!("unknown backend {other:?} (expected sqlite or jsonl)").into()),
    };
    let mut store = PausingStore::new(inner, stop.clone()).with_torn_commit(torn);
    if let Ok(max) = std::env::var("PITH_CRASH_SELF_KILL_US") {
        store = store.with_self_kill(Duration::from_micros(max.parse()?));
    }
    let store: Arc<dyn SessionStore> = Arc::new(store);

    let router = Arc::new(echo_router(window));
    let summarizer: Arc<dyn Summarizer> = Arc::new(PausingSummarizer::new(
        Arc::new(ModelSummarizer::new(router.clone())),
        stop,
    ));
    let config = CompactionConfig::default()
        .with_keep_recent_turns(2)
        .with_summarizer(summarizer);

    match mode.as_str() {
        "compact" => {
            let service = CompactionService::new(router, store, config);
            let result = service
                .compact(session, CompactionTrigger::Manual { instructions: None })
                .await?;
            println!(
                "{}",
                serde_json::json!({"generation": result.meta.generation, "noop": result.noop})
            );
        }
        "turn" => {
            let runtime = Runtime::builder()
                .router(router)
                .store(store)
                .compaction(config)
                .build()?;
            let outcome = runtime
                .run_turn(session, var("PITH_CRASH_INPUT")?, CancellationToken::new())
                .await?;
            println!("{}", serde_json::json!({"text": outcome.text()}));
        }
        other => return Err(format!("unknown mode {other:?} (expected compact or turn)").into()),
    }
    Ok(())
}
