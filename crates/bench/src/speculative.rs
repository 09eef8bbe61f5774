//! The latency a compaction adds to the turn that crosses the threshold: speculative against
//! synchronous compaction, with a summary model that takes seconds.
//!
//! One run: a session pre-filled to just below the soft threshold (a 64,000-token window), then
//! turns of the full runtime, each a user request, a model reply calling `read`, the tool's output
//! and a final answer. The agent model answers after `model_latency`, the tool after
//! `tool_latency`, the summary model after `summary_latency`. Turns go on until one of them
//! compacts; the *added latency* is that turn's wall time minus the median wall time of the
//! turns before it (same shape: two model calls, one tool call). Synchronous compaction adds the
//! whole summary call; speculative compaction started the summary turns earlier, at the soft
//! threshold. Tiered masking is off: alone it would handle these tool-heavy turns with no
//! summary call, and the summary call's latency is what is measured.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pith_compaction::CompactionConfig;
use pith_core::{EstimateCounter, FinishReason, Message, Part, Role, TokenCounter, Usage};
use pith_router::{ChatRequest, ChatResponse, ModelInfo, ModelRouter, Provider, ProviderError, StreamSink};
use pith_runtime::{BuildError, CancellationToken, FnTool, Runtime, RuntimeConfig, RuntimeError};
use pith_store::{AppendRequest, MemoryStore, SessionStore, StoreError};
use serde::Serialize;

/// The agent model.
pub const AGENT_MODEL: &str = "agent/coder";
/// The summary model.
pub const SUMMARY_MODEL: &str = "summary/writer";
/// The agent model's window.
pub const WINDOW: u64 = 64_000;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct LatencyConfig {
    /// Time the agent model takes per reply.
    pub model_latency: Duration,
    /// Time the `read` tool takes.
    pub tool_latency: Duration,
    /// Time the summary model takes per summary.
    pub summary_latency: Duration,
    /// Whether speculative compaction is on.
    pub speculative: bool,
}

impl Default for LatencyConfig {
    fn default() -> Self {
        Self {
            model_latency: Duration::from_millis(150),
            tool_latency: Duration::from_millis(100),
            summary_latency: Duration::from_secs(2),
            speculative: true,
        }
    }
}

impl LatencyConfig {
    /// Sets the summary model's latency.
    pub fn with_summary_latency(mut self, latency: Duration) -> Self {
        self.summary_latency = latency;
        self
    }
    /// Turns speculative compaction on or off.
    pub fn with_speculative(mut self, on: bool) -> Self {
        self.speculative = on;
        self
    }
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// The runtime could not be built.
    #[error("cannot build the runtime")]
    Build(#[source] BuildError),
    /// A turn failed.
    #[error("a turn failed")]
    Turn(#[source] RuntimeError),
    /// The pre-filled history could not be written.
    #[error("cannot write the pre-filled history")]
    Store(#[source] StoreError),
    /// No turn compacted within the turn limit.
    #[error("no compaction within {0} turns")]
    NoCompaction(usize),
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRun {
    /// Whether speculative compaction was on.
    pub speculative: bool,
    /// Turns run until the compaction.
    pub turns: usize,
    /// Wall time of the turn that compacted, in milliseconds.
    pub crossing_turn_ms: f64,
    /// Median wall time of the turns before it, in milliseconds.
    pub typical_turn_ms: f64,
    /// The difference: the latency the compaction added to its turn.
    pub added_ms: f64,
    /// Summary model calls made during the run.
    pub summary_calls: u64,
    /// Strategy and size change of the compaction.
    pub tokens_before: u64,
    /// Context size after the compaction.
    pub tokens_after: u64,
}

/// The agent model: calls `read` on a user request, answers after a tool result.
struct Agent {
    latency: Duration,
}

/// The summary model: a short summary after `latency`.
struct SummaryWriter {
    latency: Duration,
    calls: Arc<AtomicU64>,
}

fn usage_of(request: &ChatRequest) -> Usage {
    Usage::from_openai(EstimateCounter.count_messages(&request.messages), 60, 0)
}

#[async_trait]
impl Provider for Agent {
    fn name(&self) -> &str {
        "agent"
    }

    async fn chat(
        &self,
        request: ChatRequest,
        _: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        tokio::time::sleep(self.latency).await;
        let usage = usage_of(&request);
        let n = request.messages.len();
        let after_tool = request.messages.last().is_some_and(|m| m.role == Role::Tool);
        if after_tool {
            let text = format!("Read it; the module is consistent with the rest ({n} messages so far).");
            return Ok(pith_router::ScriptedProvider::reply(
                Message::assistant(text),
                FinishReason::Stop,
                usage,
            ));
        }
        let mut call = Message::assistant("");
        call.parts = vec![Part::ToolCall {
            call_id: format!("call-{n}"),
            name: "read".into(),
            arguments: serde_json::json!({ "path": format!("src/module_{n}.rs") }),
        }];
        Ok(pith_router::ScriptedProvider::reply(
            call,
            FinishReason::ToolCalls,
            usage,
        ))
    }
}

#[async_trait]
impl Provider for SummaryWriter {
    fn name(&self) -> &str {
        "summary"
    }

    async fn chat(
        &self,
        request: ChatRequest,
        _: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.latency).await;
        let text = "## Goal\nReview every module.\n## Progress\nModules read so far are consistent.";
        Ok(pith_router::ScriptedProvider::text_reply(
            text,
            usage_of(&request),
        ))
    }
}

fn module_text(seed: usize) -> String {
    let mut out = String::with_capacity(3_600);
    let mut i = 0;
    while out.len() < 3_600 {
        out.push_str(&format!("fn item_{seed}_{i}() -> u64 {{ {} }}\n", seed * 31 + i));
        i += 1;
    }
    out
}

/// A pre-filled history of `turns` earlier turns (user, call, result, answer).
fn history(turns: usize) -> Vec<pith_core::Entry> {
    (0..turns)
        .flat_map(|i| {
            let id = format!("old-{i}");
            let mut call = Message::assistant("");
            call.parts = vec![Part::ToolCall {
                call_id: id.clone(),
                name: "read".into(),
                arguments: serde_json::json!({ "path": format!("src/old_{i}.rs") }),
            }];
            [
                Message::user(format!("Review src/old_{i}.rs.")),
                call,
                Message::tool_result(&id, module_text(i), false),
                Message::assistant(format!("src/old_{i}.rs is fine.")),
            ]
        })
        .map(pith_core::Entry::Message)
        .collect()
}

fn runtime(config: &LatencyConfig, calls: Arc<AtomicU64>) -> Result<Runtime, LatencyError> {
    let info = |w| ModelInfo {
        context_window: w,
        max_output: 4_096,
    };
    let router = ModelRouter::new()
        .with_provider(
            "agent",
            Arc::new(Agent {
                latency: config.model_latency,
            }),
        )
        .with_provider(
            "summary",
            Arc::new(SummaryWriter {
                latency: config.summary_latency,
                calls,
            }),
        )
        .with_model(AGENT_MODEL, info(WINDOW))
        .with_model(SUMMARY_MODEL, info(WINDOW));
    let tool_latency = config.tool_latency;
    let read = FnTool::new(
        "read",
        "Reads a file.",
        serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        move |args: serde_json::Value, _ctx| async move {
            tokio::time::sleep(tool_latency).await;
            let path = args.get("path").and_then(|p| p.as_str()).unwrap_or("?").len();
            Ok(module_text(path))
        },
    );
    Runtime::builder()
        .router(router)
        .store(Arc::new(MemoryStore::new()))
        .compaction(
            CompactionConfig::default()
                .with_summary_model(SUMMARY_MODEL)
                .with_count_signal(false)
                // Masking alone would handle these tool-heavy turns with no summary at all; the
                // harness measures what a summary call adds.
                .with_tiered(false)
                .with_speculative(config.speculative),
        )
        .config(RuntimeConfig::default().with_stream(false))
        .tool(read)
        .build()
        .map_err(LatencyError::Build)
}

fn median(samples: &mut [f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Runs turns until one compacts and measures what the compaction added to it.
///
/// # Errors
/// [`LatencyError`] when the runtime cannot be built, a turn fails or nothing compacts.
pub async fn run(config: LatencyConfig) -> Result<LatencyRun, LatencyError> {
    const MAX_TURNS: usize = 40;
    let calls = Arc::new(AtomicU64::new(0));
    let rt = runtime(&config, calls.clone())?;
    let session = rt
        .create_session(AGENT_MODEL, "You are a careful code reviewer.")
        .await
        .map_err(LatencyError::Turn)?;
    // ~38,000 tokens: just below the soft threshold of the 64,000-token window (39,616).
    rt.store()
        .append(session, AppendRequest::new(history(36)))
        .await
        .map_err(LatencyError::Store)?;
    let mut typical = Vec::new();
    for turn in 1..=MAX_TURNS {
        let started = Instant::now();
        let out = rt
            .run_turn(
                session,
                format!("Review the next module ({turn})."),
                CancellationToken::new(),
            )
            .await
            .map_err(LatencyError::Turn)?;
        let ms = started.elapsed().as_secs_f64() * 1_000.0;
        if let Some(c) = out.compactions.first() {
            let typical_ms = median(&mut typical);
            return Ok(LatencyRun {
                speculative: config.speculative,
                turns: turn,
                crossing_turn_ms: ms,
                typical_turn_ms: typical_ms,
                added_ms: ms - typical_ms,
                summary_calls: calls.load(Ordering::SeqCst),
                tokens_before: c.tokens_before,
                tokens_after: c.tokens_after,
            });
        }
        typical.push(ms);
    }
    Err(LatencyError::NoCompaction(MAX_TURNS))
}
