//! The replay engine: re-drives a recorded session through the real runtime.
//!
//! A [`provider::ReplayProvider`] answers each model call with the recorded assistant reply, a
//! [`tools::ReplayTool`] per recorded tool name answers each call with the recorded result, and
//! everything else is pith's own: the Turn FSM and driver, the ContextPipeline, the
//! CompactionService and the store. Summaries come from the deterministic summarizer unless a
//! summary model is given. Afterwards the log is read back to report every compaction with the
//! view right after it.

pub mod policy;
pub mod provider;
pub mod report;
pub mod retention;
pub mod script;
pub mod tools;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pith_compaction::ProjectionStyle;
use pith_core::{AgentEvent, CompactionMeta, Entry, Message, SessionRecord, StoredView};
use pith_router::{ModelInfo, ModelRouter};
use pith_runtime::{CancellationToken, Runtime, RuntimeConfig};
use pith_store::{AppendRequest, CreateSession, SessionStore};
use tokio::sync::broadcast::error::RecvError;

pub use policy::Policy;
pub use report::{CallTokens, CompactionRow, ReplayReport};

/// The model name replays run under.
pub const REPLAY_MODEL: &str = "replay/recorded";

/// A recorded session to replay.
#[derive(Debug, Clone)]
pub struct ReplayInput {
    /// The format name for the report.
    pub format: String,
    /// The recorded session record (tool declarations are used when present).
    pub record: SessionRecord,
    /// The recorded log.
    pub entries: Vec<Entry>,
}

/// How to replay.
#[derive(Clone)]
#[non_exhaustive]
pub struct ReplayOptions {
    /// Context window to replay under.
    pub window: u64,
    /// Compaction policy.
    pub policy: Policy,
    /// A real summary model (`provider/model`); the deterministic summarizer when `None`.
    pub summary_model: Option<String>,
    /// Write the view right after each compaction into this directory.
    pub dump_views: Option<PathBuf>,
    /// Reject this model call (1-based) once as a provider overflow, to exercise compact-and-retry.
    pub overflow_at: Option<u64>,
    /// Called after each turn with (turns done, turns total).
    pub progress: Option<Arc<dyn Fn(u64, u64) + Send + Sync>>,
    /// A summarizer to use instead of the deterministic one or the summary model.
    pub summarizer: Option<Arc<dyn pith_compaction::Summarizer>>,
    /// Tiered compaction on or off; `None` (the default) leaves it as the policy sets it (on for
    /// pith, off for pi and codex).
    pub tiered: Option<bool>,
    /// The share of the threshold a committed view may use (`None`: the policy's).
    pub target_ratio: Option<f64>,
}

impl std::fmt::Debug for ReplayOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayOptions")
            .field("window", &self.window)
            .field("policy", &self.policy)
            .field("summary_model", &self.summary_model)
            .field("dump_views", &self.dump_views)
            .field("overflow_at", &self.overflow_at)
            .field("tiered", &self.tiered)
            .field("target_ratio", &self.target_ratio)
            .finish()
    }
}

impl ReplayOptions {
    /// Replays under `window` with pith's policy and the deterministic summarizer.
    pub fn new(window: u64) -> Self {
        Self {
            window,
            policy: Policy::Pith,
            summary_model: None,
            dump_views: None,
            overflow_at: None,
            progress: None,
            summarizer: None,
            tiered: None,
            target_ratio: None,
        }
    }

    /// Overrides the policy's `target_ratio` (the share of the threshold a committed view may use).
    pub fn with_target_ratio(mut self, ratio: Option<f64>) -> Self {
        self.target_ratio = ratio;
        self
    }

    /// Turns tiered compaction on or off (`None`: as the policy sets it), to compare masking
    /// before summarising with summarising only.
    pub fn with_tiered(mut self, tiered: Option<bool>) -> Self {
        self.tiered = tiered;
        self
    }

    /// Summarises with `summarizer` (e.g. a scripted one) instead of the deterministic one.
    pub fn with_summarizer(mut self, summarizer: Arc<dyn pith_compaction::Summarizer>) -> Self {
        self.summarizer = Some(summarizer);
        self
    }

    /// Uses a policy preset.
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Uses a real summary model.
    pub fn with_summary_model(mut self, model: Option<String>) -> Self {
        self.summary_model = model;
        self
    }

    /// Dumps views into `dir`.
    pub fn with_dump_views(mut self, dir: Option<PathBuf>) -> Self {
        self.dump_views = dir;
        self
    }

    /// Rejects call `n` once as an overflow.
    pub fn with_overflow_at(mut self, n: Option<u64>) -> Self {
        self.overflow_at = n;
        self
    }

    /// Reports progress after each turn.
    pub fn with_progress(mut self, progress: Arc<dyn Fn(u64, u64) + Send + Sync>) -> Self {
        self.progress = Some(progress);
        self
    }
}

/// The view right after one compaction, as dumped by `--dump-views`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DumpedView {
    /// The generation the compaction created.
    pub generation: u64,
    /// The model call it fired at.
    pub at_call: u64,
    /// Ids of the first and last summarised entries.
    pub summarized: Option<pith_core::EntryRange>,
    /// The messages the model sees right after the compaction (tool outputs clipped as sent).
    pub messages: Vec<Message>,
    /// The messages the compaction summarised, as recorded (for checking what survived).
    pub span: Vec<Message>,
}

/// Replays `input` into `store`.
pub async fn replay(
    input: ReplayInput,
    store: Arc<dyn SessionStore>,
    options: ReplayOptions,
) -> Result<ReplayReport> {
    let script = script::build(&input.entries, &input.record.tools);
    if script.turns.is_empty() {
        bail!("the recording holds no turn to replay (no user message answered by the model)");
    }
    let replies: Vec<_> = script
        .turns
        .iter()
        .flat_map(|t| t.replies.iter().cloned())
        .collect();
    let provider = Arc::new(provider::ReplayProvider::new(replies, options.overflow_at));
    let mut router = match &options.summary_model {
        Some(_) => ModelRouter::from_env().context("cannot configure the summary model's provider")?,
        None => ModelRouter::new(),
    };
    router = router.with_provider("replay", provider.clone()).with_model(
        REPLAY_MODEL,
        ModelInfo {
            context_window: options.window,
            max_output: 8_192,
        },
    );
    let mut config = options.policy.config();
    if let Some(tiered) = options.tiered {
        config = config.with_tiered(tiered);
    }
    if let Some(ratio) = options.target_ratio {
        config = config.with_target_ratio(ratio);
    }
    let tiered = config.tiered;
    config = match (&options.summarizer, &options.summary_model) {
        (Some(summarizer), _) => config.with_summarizer(summarizer.clone()),
        (None, Some(model)) => config.with_summary_model(model.clone()),
        (None, None) => config.with_deterministic_summarizer(),
    };
    let threshold = config
        .threshold(options.window)
        .map_err(|e| anyhow::anyhow!("invalid window {}: {e}", options.window))?;
    let style: ProjectionStyle = config.projection;
    let results = Arc::new(tools::RecordedResults::new(script.results.clone()));
    let mut builder = Runtime::builder()
        .router(router)
        .store(store.clone())
        .compaction(config)
        .config(
            RuntimeConfig::default()
                .with_max_steps(1_000_000)
                .with_stream(false)
                .with_event_capacity(1 << 16),
        );
    for name in &script.tool_names {
        builder = builder.tool(tools::ReplayTool::new(name.clone(), results.clone()));
    }
    let runtime = builder.build().context("cannot build the runtime")?;
    let mut create = CreateSession::new(REPLAY_MODEL).with_tools(script.tools.clone());
    create.instructions = script.instructions.clone();
    let session = store
        .create_session(create)
        .await
        .context("cannot create the replay session")?
        .id;

    let mut events = runtime.subscribe();
    let collector = tokio::spawn(async move {
        let mut calls = 0u64;
        let mut at_call = Vec::new();
        loop {
            match events.recv().await {
                Ok(AgentEvent::ModelRequest { .. }) => calls += 1,
                Ok(AgentEvent::HistoryReplaced { generation, .. }) => at_call.push((generation, calls)),
                Ok(_) => {}
                Err(RecvError::Lagged(n)) => {
                    return Err(anyhow::anyhow!("the report missed {n} runtime events"))
                }
                Err(RecvError::Closed) => return Ok(at_call),
            }
        }
    });

    let total = script.turns.len() as u64;
    for (i, turn) in script.turns.iter().enumerate() {
        if !turn.pre.is_empty() {
            let entries = turn.pre.iter().cloned().map(Entry::Message).collect();
            store
                .append(session, AppendRequest::new(entries))
                .await
                .context("cannot append recorded messages")?;
        }
        let input = turn.input.clone().unwrap_or_else(|| Message::user("(continue)"));
        runtime
            .run_turn(session, input.parts, CancellationToken::new())
            .await
            .with_context(|| format!("turn {} of {total} failed", i + 1))?;
        if let Some(progress) = &options.progress {
            progress(i as u64 + 1, total);
        }
    }
    drop(runtime);
    let at_call = collector.await.context("event collector stopped")??;
    let stats = provider.stats();

    let record = store.get_session(session).await?;
    let log = store.load_log(session).await?;
    let mut rows = Vec::new();
    let mut summary_tokens = 0;
    let mut summary_calls = 0u64;
    let mut mask_only = 0u64;
    let mut masked_outputs = 0u64;
    let mut masked_before = std::collections::HashSet::new();
    if let Some(dir) = &options.dump_views {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    for (pos, entry) in log.iter().enumerate() {
        let Entry::Compaction(meta) = entry else { continue };
        let view = StoredView::from_log(record.clone(), &log[..=pos]).context("cannot rebuild a view")?;
        let messages = pith_runtime::pipeline::trim(pith_compaction::project(&view, style));
        let text = retention::view_text(&messages);
        let calls_before = at_call
            .iter()
            .find(|(g, _)| *g == meta.generation)
            .map(|(_, c)| *c)
            .unwrap_or(0);
        let row = row_of(&log, meta, &text, calls_before);
        summary_tokens +=
            meta.usage.input + meta.usage.output + meta.usage.cache_read + meta.usage.cache_write;
        summary_calls += u64::from(meta.summary_calls);
        if meta.strategy == pith_core::CompactionStrategy::MaskOnly {
            mask_only += 1;
        }
        for m in &meta.masked {
            if masked_before.insert((m.entry_id, m.call_id.clone())) {
                masked_outputs += 1;
            }
        }
        if let Some(dir) = &options.dump_views {
            let span = retention::span(&log, meta)
                .iter()
                .filter_map(Entry::as_message)
                .cloned()
                .collect();
            let dump = DumpedView {
                generation: meta.generation,
                at_call: row.at_call,
                summarized: meta.summarized,
                messages,
                span,
            };
            let path = dir.join(format!("view-{:04}.json", meta.generation));
            let bytes = serde_json::to_vec_pretty(&dump)?;
            std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        }
        rows.push(row);
    }
    Ok(ReplayReport {
        format: input.format,
        window: options.window,
        threshold,
        policy: options.policy.as_str().to_string(),
        model_calls: stats.calls,
        compactions: rows,
        max_request_tokens: stats.max_request_tokens,
        input_tokens_total: stats.input_tokens_total,
        summary_tokens_total: summary_tokens,
        input_tokens_no_compaction: stats.input_tokens_no_compaction,
        per_call: stats.per_call,
        tool_pairs_split: stats.tool_pairs_split,
        turns: total,
        summary_calls,
        tiered,
        mask_only_compactions: mask_only,
        masked_outputs,
        tool_outputs_clipped: script.clipped_results,
        simulated_overflows: stats.injected_overflows,
        session_id: session.to_string(),
    })
}

fn row_of(log: &[Entry], meta: &CompactionMeta, view_text: &str, calls_before: u64) -> CompactionRow {
    let trigger = match meta.trigger {
        pith_core::CompactionTriggerKind::Proactive => "proactive",
        pith_core::CompactionTriggerKind::Reactive => "reactive",
        pith_core::CompactionTriggerKind::Manual => "manual",
    };
    // A proactive compaction precedes the next call; a reactive one answers the rejected call.
    let at_call = if trigger == "proactive" {
        calls_before + 1
    } else {
        calls_before.max(1)
    };
    let kept_from_entry = meta
        .tail_start
        .and_then(|id| log.iter().position(|e| e.id() == id))
        .unwrap_or(log.len()) as u64;
    CompactionRow {
        at_call,
        trigger: trigger.to_string(),
        generation: meta.generation,
        tokens_before: meta.tokens_before,
        tokens_after: meta.tokens_after,
        kept_from_entry,
        strategy: meta.strategy.as_str().to_string(),
        summary_calls: meta.summary_calls,
        retention: retention::measure(retention::span(log, meta), view_text),
    }
}
