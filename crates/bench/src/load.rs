//! The load harness: many concurrent sessions through the full runtime against the stub.
//!
//! Every session runs `turns` turns one after the other; all sessions run at once. Each turn is
//! a user input, a model reply with tool calls, the tools' results and a final answer, through
//! `Runtime::run_turn` with a real router (OpenAI-compatible provider, HTTP over loopback), the
//! real ContextPipeline and CompactionService (summaries come from the stub too) and the chosen
//! store. At the end every session's log is loaded and checked: each input once, each tool call
//! with exactly one result, one final answer per turn, no entry twice.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pith_compaction::CompactionConfig;
use pith_core::{Entry, Role, SessionId};
use pith_router::{ModelRouter, OpenAiCompatible, Provider, ProviderConfig, ProviderError, ProviderLimits};
use pith_runtime::{BuildError, CancellationToken, FnTool, Runtime, RuntimeConfig, RuntimeError};
use pith_store::{SessionStore, StoreError};
use serde::Serialize;

use crate::stub::{StubConfig, StubServer, TOOL_NAME};
use crate::stub_process::{StubProcess, StubProcessError, StubReport};
use crate::timed::{TimedProvider, TimedStore, TurnClock, TURN_CLOCK, UNATTRIBUTED_CALLS};

/// The model the sessions use: the stub behind the provider named `stub`.
pub const MODEL: &str = "stub/stub-model";

/// What to run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LoadConfig {
    /// Concurrent sessions.
    pub sessions: usize,
    /// Turns per session.
    pub turns: usize,
    /// The stub's behaviour (latency, tool calls per reply).
    pub stub: StubConfig,
    /// Model calls in flight at once (the provider's concurrency limit, i.e. open connections);
    /// the runtime's model-call slots (`RuntimeConfig::max_concurrent_model_calls`) are set to
    /// the same number, so a turn waiting for a call holds no view.
    pub provider_concurrency: usize,
    /// The executable to run the stub in a process of its own (started with
    /// [`SERVE_STUB_FLAG`](crate::stub_process::SERVE_STUB_FLAG)), so that the peak RSS and the
    /// CPU per turn are the runtime's alone; `None` serves it inside the harness's process.
    pub stub_process: Option<PathBuf>,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            sessions: 50,
            turns: 3,
            stub: StubConfig::default(),
            provider_concurrency: 256,
            stub_process: None,
        }
    }
}

impl LoadConfig {
    /// Sets the number of sessions.
    pub fn with_sessions(mut self, n: usize) -> Self {
        self.sessions = n;
        self
    }
    /// Sets the turns per session.
    pub fn with_turns(mut self, n: usize) -> Self {
        self.turns = n;
        self
    }
    /// Runs the stub as `exe` in a process of its own (see [`LoadConfig::stub_process`]).
    pub fn with_stub_process(mut self, exe: impl Into<PathBuf>) -> Self {
        self.stub_process = Some(exe.into());
        self
    }

    /// Sets the stub's behaviour.
    pub fn with_stub(mut self, stub: StubConfig) -> Self {
        self.stub = stub;
        self
    }
    /// Sets the provider's concurrency limit.
    pub fn with_provider_concurrency(mut self, n: usize) -> Self {
        self.provider_concurrency = n.max(1);
        self
    }
}

/// Why the harness could not run (a lost entry is a finding in the report, not an error).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The stub server could not bind a loopback port.
    #[error("cannot start the stub server")]
    Stub(#[source] std::io::Error),
    /// The stub's own process failed.
    #[error("the stub process failed")]
    StubProcess(#[from] StubProcessError),
    /// The provider or router configuration was rejected.
    #[error("cannot configure the provider")]
    Provider(#[source] ProviderError),
    /// The runtime could not be built.
    #[error("cannot build the runtime")]
    Build(#[source] BuildError),
    /// Creating a session failed.
    #[error("cannot create a session")]
    CreateSession(#[source] RuntimeError),
    /// Loading a session's log for the final check failed.
    #[error("cannot load the log of session {session}")]
    LoadLog {
        /// The session.
        session: SessionId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A session task panicked.
    #[error("a session task panicked")]
    Panicked(#[source] tokio::task::JoinError),
}

/// Percentiles of a set of durations, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest sample.
    pub max_us: f64,
}

impl Percentiles {
    /// Percentiles of `samples` (microseconds; sorted in place).
    pub fn of(samples: &mut [f64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Self {
            count: samples.len(),
            p50_us: at(0.5),
            p99_us: at(0.99),
            max_us: at(1.0),
        }
    }
}

/// The result of the final log check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LogCheck {
    /// Sessions checked.
    pub sessions: usize,
    /// Entries read back.
    pub entries: u64,
    /// Compaction records among them.
    pub compactions: u64,
    /// Expected entries that are missing (inputs, tool calls or results, final answers).
    pub lost: u64,
    /// Entries (or inputs, calls, results) present more than once.
    pub duplicated: u64,
}

/// What one load run measured.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    /// The store backend.
    pub store: String,
    /// Concurrent sessions.
    pub sessions: usize,
    /// Turns per session.
    pub turns_per_session: usize,
    /// The stub's latency per model call, in milliseconds.
    pub stub_latency_ms: f64,
    /// The provider's concurrency limit, which is also the runtime's model-call slots.
    pub provider_concurrency: usize,
    /// Turns that finished with a final answer.
    pub turns_ok: u64,
    /// Turns that returned an error.
    pub turns_failed: u64,
    /// The first few turn errors, for the operator.
    pub first_errors: Vec<String>,
    /// Wall time of all turns, in seconds.
    pub elapsed_s: f64,
    /// Finished turns per second.
    pub turns_per_s: f64,
    /// Model calls per second (turns and summaries).
    pub model_calls_per_s: f64,
    /// Per turn: wall time minus the stub's latency × the turn's model calls minus the wait for
    /// a model-call slot — everything the stub did not spend sleeping and the concurrency limit
    /// did not queue: runtime, HTTP client, stub parsing, waiting for a CPU.
    pub overhead: Percentiles,
    /// Per turn: wall time minus the time spent inside model calls and waiting for a model-call
    /// slot — the runtime's own share (store, pipeline, compaction, tools, state machine,
    /// waiting for a CPU).
    pub runtime_only: Percentiles,
    /// Per turn: time waited for a model-call slot (`TurnOutcome::model_slot_wait`): the queue
    /// in front of the provider's concurrency limit, which the two overheads leave out.
    pub slot_wait: Percentiles,
    /// Latency of every store append (fsync included for durable stores).
    pub append_latency: Percentiles,
    /// Latency of every compaction commit.
    pub commit_latency: Percentiles,
    /// Model calls made outside a turn's clock (0 when every call was attributed).
    pub unattributed_calls: u64,
    /// Requests the stub answered, by kind: tool calls, final answers, summaries.
    pub stub_replies: [u64; 3],
    /// The stub process's CPU time and peak RSS when it ran in a process of its own (then
    /// `cpu_s` and `peak_rss_mib` are the runtime's and its HTTP client's alone); `None` when it
    /// ran inside the harness's process.
    pub stub_usage: Option<StubReport>,
    /// CPU time (user + system) of the harness's process during the turns, in seconds: runtime
    /// and HTTP client (and the stub server, when it runs inside).
    pub cpu_s: f64,
    /// `cpu_s` per finished turn, in microseconds: the CPU a turn costs, whatever the machine's
    /// load (wall-time overheads also hold the time spent waiting for a CPU).
    pub cpu_per_turn_us: f64,
    /// Peak resident set size of the harness's process (VmHWM), in MiB: the runtime, its store
    /// and its HTTP client (and the stub, when it runs inside).
    pub peak_rss_mib: f64,
    /// The final log check.
    pub check: LogCheck,
}

impl LoadReport {
    /// Whether the run kept every entry exactly once and finished every turn.
    pub fn is_clean(&self) -> bool {
        self.check.lost == 0 && self.check.duplicated == 0 && self.turns_failed == 0
    }
}

/// The user input of turn `t` of session `s`: unique, so the check can find each one.
pub fn input_text(s: usize, t: usize) -> String {
    format!("session {s} turn {t}: look up the value twice and tell me if the lookups agree")
}

fn router(base_url: &str, concurrency: usize) -> Result<ModelRouter, LoadError> {
    let limits = ProviderLimits::default()
        .with_max_concurrency(Some(concurrency))
        .with_max_retries(0)
        .with_request_timeout(Some(Duration::from_secs(120)));
    let config = ProviderConfig::default()
        .with_base_url(base_url)
        .with_api_key("stub-key")
        .with_limits(limits);
    let stacked = OpenAiCompatible::stacked("stub", &config).map_err(LoadError::Provider)?;
    let timed: Arc<dyn Provider> = Arc::new(TimedProvider::new(Arc::new(stacked)));
    ModelRouter::builder()
        .provider("stub", timed)
        .build()
        .map_err(LoadError::Provider)
}

fn runtime(
    router: ModelRouter,
    store: Arc<dyn SessionStore>,
    concurrency: usize,
) -> Result<Runtime, LoadError> {
    let lookup = FnTool::new(
        TOOL_NAME,
        "Looks a key up.",
        serde_json::json!({"type": "object", "properties": {"key": {"type": "string"}}}),
        |args: serde_json::Value, _ctx| async move {
            let key = args
                .get("key")
                .and_then(|k| k.as_str())
                .unwrap_or("?")
                .to_string();
            Ok(format!("value of {key}: 42"))
        },
    );
    Runtime::builder()
        .router(router)
        .store(store)
        .compaction(CompactionConfig::default())
        .config(
            RuntimeConfig::default()
                .with_stream(false)
                .with_max_concurrent_model_calls(concurrency),
        )
        .tool(lookup)
        .build()
        .map_err(LoadError::Build)
}

/// Per-turn timings of one session.
#[derive(Default)]
struct SessionOutcome {
    overhead_us: Vec<f64>,
    runtime_us: Vec<f64>,
    slot_wait_us: Vec<f64>,
    ok: u64,
    failed: u64,
    errors: Vec<String>,
}

async fn run_session(
    rt: Runtime,
    id: SessionId,
    s: usize,
    turns: usize,
    latency: Duration,
) -> SessionOutcome {
    let mut out = SessionOutcome::default();
    for t in 0..turns {
        let clock = Arc::new(TurnClock::default());
        let started = Instant::now();
        let result = TURN_CLOCK
            .scope(
                clock.clone(),
                rt.run_turn(id, input_text(s, t), CancellationToken::new()),
            )
            .await;
        let wall = started.elapsed().as_secs_f64() * 1e6;
        let calls = clock.model_calls.load(Ordering::Relaxed) as f64;
        let model = clock.model_nanos.load(Ordering::Relaxed) as f64 / 1e3;
        match result {
            Ok(outcome) => {
                let queued = outcome.model_slot_wait.as_secs_f64() * 1e6;
                out.ok += 1;
                out.overhead_us
                    .push(wall - calls * latency.as_secs_f64() * 1e6 - queued);
                out.runtime_us.push(wall - model - queued);
                out.slot_wait_us.push(queued);
            }
            Err(e) => {
                out.failed += 1;
                if out.errors.len() < 3 {
                    out.errors.push(format!("session {s} turn {t}: {e}"));
                }
            }
        }
    }
    out
}

/// Runs the load against `store` and checks every session's log at the end.
///
/// # Errors
/// [`LoadError`] when the harness itself cannot run; lost entries and failed turns are reported
/// in the [`LoadReport`] (see [`LoadReport::is_clean`]).
pub async fn run(config: &LoadConfig, store: Arc<dyn SessionStore>) -> Result<LoadReport, LoadError> {
    let stub = match &config.stub_process {
        Some(exe) => Stub::Process(Box::new(StubProcess::spawn(exe, config.stub).await?)),
        None => Stub::Inside(StubServer::start(config.stub).await.map_err(LoadError::Stub)?),
    };
    let timed = Arc::new(TimedStore::new(store));
    let rt = runtime(
        router(&stub.base_url(), config.provider_concurrency)?,
        timed.clone(),
        config.provider_concurrency,
    )?;
    let mut ids = Vec::with_capacity(config.sessions);
    for _ in 0..config.sessions {
        let id = rt
            .create_session(MODEL, "You answer lookups. Use the lookup tool.")
            .await
            .map_err(LoadError::CreateSession)?;
        ids.push(id);
    }
    timed.appends.take();
    let unattributed_before = UNATTRIBUTED_CALLS.load(Ordering::Relaxed);
    let cpu_before = crate::rss::cpu_seconds().unwrap_or(0.0);
    let started = Instant::now();
    let tasks: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(s, id)| {
            // Sessions start spread evenly over one stub latency, as a service's users arrive,
            // instead of all calling the model in the same instant (and then in lock-step, since
            // every reply takes the same time). The offset is before the first turn's clock.
            let offset = config
                .stub
                .latency
                .mul_f64(s as f64 / config.sessions.max(1) as f64);
            let (rt, id, turns, latency) = (rt.clone(), *id, config.turns, config.stub.latency);
            tokio::spawn(async move {
                tokio::time::sleep(offset).await;
                run_session(rt, id, s, turns, latency).await
            })
        })
        .collect();
    let mut overhead = Vec::new();
    let mut runtime_only = Vec::new();
    let mut slot_wait = Vec::new();
    let (mut ok, mut failed, mut first_errors) = (0, 0, Vec::new());
    for task in tasks {
        let o = task.await.map_err(LoadError::Panicked)?;
        overhead.extend(o.overhead_us);
        runtime_only.extend(o.runtime_us);
        slot_wait.extend(o.slot_wait_us);
        ok += o.ok;
        failed += o.failed;
        first_errors.extend(
            o.errors
                .into_iter()
                .take(5usize.saturating_sub(first_errors.len())),
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_s = crate::rss::cpu_seconds().unwrap_or(0.0) - cpu_before;
    let (stats, stub_usage) = match stub {
        Stub::Inside(server) => (StubReport::of_stats(server.stats()), None),
        Stub::Process(process) => {
            let report = process.finish().await?;
            (report, Some(report))
        }
    };
    let stub_replies = [stats.tool_replies, stats.final_replies, stats.summary_replies];
    let mut appends: Vec<f64> = timed.appends.take().into_iter().map(|v| v as f64).collect();
    let mut commits: Vec<f64> = timed.commits.take().into_iter().map(|v| v as f64).collect();
    let check = check_logs(timed.as_ref(), &ids, config).await?;
    Ok(LoadReport {
        store: timed.backend().to_string(),
        sessions: config.sessions,
        turns_per_session: config.turns,
        stub_latency_ms: config.stub.latency.as_secs_f64() * 1e3,
        provider_concurrency: config.provider_concurrency,
        turns_ok: ok,
        turns_failed: failed,
        first_errors,
        elapsed_s: elapsed,
        turns_per_s: ok as f64 / elapsed,
        model_calls_per_s: stats.answered() as f64 / elapsed,
        overhead: Percentiles::of(&mut overhead),
        runtime_only: Percentiles::of(&mut runtime_only),
        slot_wait: Percentiles::of(&mut slot_wait),
        append_latency: Percentiles::of(&mut appends),
        commit_latency: Percentiles::of(&mut commits),
        unattributed_calls: UNATTRIBUTED_CALLS.load(Ordering::Relaxed) - unattributed_before,
        stub_replies,
        stub_usage,
        cpu_s,
        cpu_per_turn_us: if ok == 0 { 0.0 } else { cpu_s * 1e6 / ok as f64 },
        peak_rss_mib: crate::rss::peak_rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0),
        check,
    })
}

/// Where the stub runs.
enum Stub {
    /// Inside the harness's process.
    Inside(StubServer),
    /// In a process of its own.
    Process(Box<StubProcess>),
}

impl Stub {
    fn base_url(&self) -> String {
        match self {
            Stub::Inside(server) => server.base_url(),
            Stub::Process(process) => process.base_url().to_string(),
        }
    }
}

/// Loads every session's full log and counts what is missing or present twice.
async fn check_logs(
    store: &dyn SessionStore,
    ids: &[SessionId],
    config: &LoadConfig,
) -> Result<LogCheck, LoadError> {
    let mut check = LogCheck::default();
    for (s, id) in ids.iter().enumerate() {
        let log = store
            .load_log(*id)
            .await
            .map_err(|source| LoadError::LoadLog { session: *id, source })?;
        let one = check_log(&log, s, config.turns, config.stub.calls_per_reply);
        check.sessions += 1;
        check.entries += one.entries;
        check.compactions += one.compactions;
        check.lost += one.lost;
        check.duplicated += one.duplicated;
    }
    Ok(check)
}

/// Checks one session's log: `turns` inputs, each answered by a reply with `calls` tool calls,
/// their results and a final answer.
pub fn check_log(log: &[Entry], s: usize, turns: usize, calls: usize) -> LogCheck {
    let mut check = LogCheck {
        sessions: 1,
        entries: log.len() as u64,
        ..LogCheck::default()
    };
    let mut ids = HashSet::new();
    let mut inputs: HashMap<String, u64> = HashMap::new();
    let mut call_ids: HashMap<String, u64> = HashMap::new();
    let mut result_ids: HashMap<String, u64> = HashMap::new();
    let mut finals = 0u64;
    for entry in log {
        if !ids.insert(entry.id()) {
            check.duplicated += 1;
        }
        let Some(m) = entry.as_message() else {
            check.compactions += u64::from(matches!(entry, Entry::Compaction(_)));
            continue;
        };
        match m.role {
            Role::User if m.tool_results().next().is_none() => {
                *inputs.entry(m.text_content()).or_default() += 1;
            }
            Role::Assistant if m.tool_calls().next().is_none() => finals += 1,
            _ => {}
        }
        for (id, _, _) in m.tool_calls() {
            *call_ids.entry(id.to_string()).or_default() += 1;
        }
        for (id, _, _) in m.tool_results() {
            *result_ids.entry(id.to_string()).or_default() += 1;
        }
    }
    for t in 0..turns {
        match inputs.remove(&input_text(s, t)) {
            None => check.lost += 1,
            Some(n) => check.duplicated += n - 1,
        }
    }
    check.duplicated += inputs.values().sum::<u64>();
    let expected_calls = (turns * calls) as u64;
    let found_calls = call_ids.len() as u64;
    check.lost += expected_calls.saturating_sub(found_calls);
    check.duplicated += found_calls.saturating_sub(expected_calls);
    for (id, n) in &call_ids {
        check.duplicated += n - 1;
        match result_ids.get(id) {
            None => check.lost += 1,
            Some(r) => check.duplicated += r - 1,
        }
    }
    check.duplicated += result_ids.keys().filter(|id| !call_ids.contains_key(*id)).count() as u64;
    check.lost += (turns as u64).saturating_sub(finals);
    check.duplicated += finals.saturating_sub(turns as u64);
    check
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::{Message, Part};

    fn turn(s: usize, t: usize) -> Vec<Entry> {
        let mut call = Message::assistant("Looking it up.");
        for k in 0..2 {
            call.parts.push(Part::ToolCall {
                call_id: format!("c{t}_{k}"),
                name: TOOL_NAME.into(),
                arguments: serde_json::json!({}),
            });
        }
        vec![
            Message::user(input_text(s, t)).into(),
            call.into(),
            Message::tool_result(format!("c{t}_0"), "1", false).into(),
            Message::tool_result(format!("c{t}_1"), "1", false).into(),
            Message::assistant("done").into(),
        ]
    }

    #[test]
    fn a_complete_log_passes_and_damage_is_counted() {
        let log: Vec<Entry> = (0..3).flat_map(|t| turn(7, t)).collect();
        let ok = check_log(&log, 7, 3, 2);
        assert_eq!((ok.lost, ok.duplicated, ok.entries), (0, 0, 15));
        let mut missing = log.clone();
        missing.remove(3);
        assert_eq!(check_log(&missing, 7, 3, 2).lost, 1);
        let mut twice = log.clone();
        twice.push(log[0].clone());
        let dup = check_log(&twice, 7, 3, 2);
        assert_eq!(
            (dup.lost, dup.duplicated),
            (0, 2),
            "same entry id and same input twice"
        );
        assert_eq!(check_log(&log, 7, 4, 2).lost, 1 + 2 + 1);
    }

    #[test]
    fn percentiles_pick_ranks() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!((p.p50_us, p.p99_us, p.max_us), (51.0, 99.0, 100.0));
    }
}
