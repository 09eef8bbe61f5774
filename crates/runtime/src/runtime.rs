//! The embedding API: [`Runtime`] and its builder.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pith_compaction::{CompactionConfig, CompactionResult, CompactionService, CompactionTrigger};
use pith_core::{AgentEvent, EstimateCounter, EventSink, SessionId, TokenCounter};
use pith_router::ModelRouter;
use pith_store::{BreakerState, CreateSession, SessionStore};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::config::RuntimeConfig;
use crate::driver::TurnDriver;
use crate::error::{BuildError, RuntimeError};
use crate::events::EventBus;
use crate::pipeline::ContextPipeline;
use crate::registry::ToolRegistry;
use crate::tool::Tool;
use crate::turn::{self, TurnInput, TurnOutcome};

/// Everything a turn needs, shared by all clones of a runtime.
pub(crate) struct Inner {
    pub(crate) router: Arc<ModelRouter>,
    pub(crate) store: Arc<dyn SessionStore>,
    pub(crate) compaction: CompactionService,
    pub(crate) tools: ToolRegistry,
    pub(crate) config: RuntimeConfig,
    pub(crate) events: Arc<EventBus>,
    pub(crate) pipeline: ContextPipeline,
    /// Model-call slots (`RuntimeConfig::max_concurrent_model_calls`); `None` when unbounded.
    pub(crate) model_slots: Option<Arc<tokio::sync::Semaphore>>,
    turns: AtomicU64,
    /// One turn at a time per session within this runtime.
    locks: Mutex<HashMap<SessionId, Arc<tokio::sync::Mutex<()>>>>,
}

/// An agent-turn runtime: sessions, turns, tools, compaction and events.
///
/// Cheap to clone; clones share everything. Build one with [`Runtime::builder`].
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("store", &self.inner.store.backend())
            .field("tools", &self.inner.tools)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Runtime`]: a router and a store are required, the rest has defaults.
#[derive(Default)]
pub struct RuntimeBuilder {
    router: Option<Arc<ModelRouter>>,
    store: Option<Arc<dyn SessionStore>>,
    compaction: CompactionConfig,
    tools: Vec<Arc<dyn Tool>>,
    config: RuntimeConfig,
    counter: Option<Arc<dyn TokenCounter>>,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("router", &self.router.is_some())
            .field("store", &self.store.as_ref().map(|s| s.backend()))
            .field("compaction", &self.compaction)
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|t| t.name().to_string())
                    .collect::<Vec<_>>(),
            )
            .field("config", &self.config)
            .finish()
    }
}

impl RuntimeBuilder {
    /// The router every model call goes through (turns and summaries).
    pub fn router(mut self, router: impl Into<Arc<ModelRouter>>) -> Self {
        self.router = Some(router.into());
        self
    }

    /// The session store.
    pub fn store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The compaction configuration (default: [`CompactionConfig::default`]).
    pub fn compaction(mut self, config: CompactionConfig) -> Self {
        self.compaction = config;
        self
    }

    /// Registers a tool.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Registers a shared tool.
    pub fn tool_arc(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// The runtime configuration (default: [`RuntimeConfig::default`]).
    pub fn config(mut self, config: RuntimeConfig) -> Self {
        self.config = config;
        self
    }

    /// The token counter of budget checks and compaction (default: the bytes/4 estimate).
    pub fn counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = Some(counter);
        self
    }

    /// Builds the runtime.
    pub fn build(self) -> Result<Runtime, BuildError> {
        let router = self.router.ok_or(BuildError::MissingRouter)?;
        let store = self.store.ok_or(BuildError::MissingStore)?;
        let mut tools = ToolRegistry::new();
        for tool in self.tools {
            tools.register(tool)?;
        }
        let counter: Arc<dyn TokenCounter> = self.counter.unwrap_or_else(|| Arc::new(EstimateCounter));
        let events = Arc::new(EventBus::new(self.config.event_capacity));
        let pipeline = ContextPipeline::new(
            counter.clone(),
            self.compaction.projection,
            self.compaction.reserve_tokens,
            self.compaction.effective_max_messages(),
        )
        .with_threshold_ratio(self.compaction.threshold_ratio);
        let sink: Arc<dyn EventSink> = events.clone();
        let compaction = CompactionService::new(router.clone(), store.clone(), self.compaction)
            .with_events(sink)
            .with_counter(counter);
        Ok(Runtime {
            inner: Arc::new(Inner {
                router,
                store,
                compaction,
                tools,
                model_slots: self
                    .config
                    .max_concurrent_model_calls
                    .map(|n| Arc::new(tokio::sync::Semaphore::new(n))),
                config: self.config,
                events,
                pipeline,
                turns: AtomicU64::new(0),
                locks: Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl Runtime {
    /// A builder.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// Creates a session for `model` (`provider/model` or an alias) with a system instruction
    /// (none when empty) and the runtime's tools declared.
    pub async fn create_session(
        &self,
        model: impl Into<String>,
        instructions: impl Into<String>,
    ) -> Result<SessionId, RuntimeError> {
        let instructions = instructions.into();
        let mut request = CreateSession::new(model).with_tools(self.inner.tools.declarations());
        if !instructions.trim().is_empty() {
            request = request.with_instruction(instructions);
        }
        Ok(self.inner.store.create_session(request).await?.id)
    }

    /// Runs one turn: the input, then model calls and tool calls until the model gives a final
    /// answer. Compacts proactively before any request over the threshold and reactively (then
    /// retries once) when the provider reports an overflow. Cancelling `cancel` stops the turn
    /// in whatever state it is; what was complete stays persisted.
    ///
    /// Running the same input again after a turn stopped without a final answer continues that
    /// turn instead of appending the input twice.
    pub async fn run_turn(
        &self,
        session: SessionId,
        input: impl Into<TurnInput>,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, RuntimeError> {
        let input = input.into();
        if input.is_empty() {
            return Err(RuntimeError::EmptyInput);
        }
        let lock = self.session_lock(session);
        let _guard = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(RuntimeError::Cancelled),
            g = lock.lock() => g,
        };
        let view = self.inner.store.load_view(session).await?;
        let model = view.session.model.clone();
        let plan = turn::plan(session, &view, &input);
        drop(view);
        let number = self.inner.turns.fetch_add(1, Ordering::Relaxed) + 1;
        TurnDriver::new(&self.inner, session, model, number, plan, cancel)
            .run()
            .await
    }

    fn session_lock(&self, session: SessionId) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = match self.inner.locks.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        locks.entry(session).or_default().clone()
    }

    /// A subscriber to every event of this runtime (all sessions; each event names its session).
    ///
    /// The channel is bounded by `RuntimeConfig::event_capacity`. A subscriber that falls that
    /// far behind is not waited for: its next `recv` returns
    /// `Err(broadcast::error::RecvError::Lagged(n))` with the number `n` of events it missed,
    /// and the following `recv` continues with the oldest event still buffered.
    pub fn subscribe(&self) -> broadcast::Receiver<AgentEvent> {
        self.inner.events.subscribe()
    }

    /// The session's compaction circuit breaker.
    pub async fn circuit_status(&self, session: SessionId) -> Result<BreakerState, RuntimeError> {
        self.inner
            .compaction
            .circuit_status(session)
            .await
            .map_err(RuntimeError::Compaction)
    }

    /// Closes the session's compaction circuit, so compaction calls the model again.
    pub async fn reset_circuit(&self, session: SessionId) -> Result<(), RuntimeError> {
        self.inner
            .compaction
            .reset_circuit(session)
            .await
            .map_err(RuntimeError::Compaction)
    }

    /// Compacts a session now, with optional extra instructions for the summary.
    pub async fn compact(
        &self,
        session: SessionId,
        instructions: Option<String>,
    ) -> Result<CompactionResult, RuntimeError> {
        self.inner
            .compaction
            .compact(session, CompactionTrigger::Manual { instructions })
            .await
            .map_err(RuntimeError::Compaction)
    }

    /// Deletes a session with its whole log and archive.
    pub async fn delete_session(&self, session: SessionId) -> Result<(), RuntimeError> {
        self.inner.store.delete_session(session).await?;
        self.inner.pipeline.forget(session);
        if let Ok(mut locks) = self.inner.locks.lock() {
            locks.remove(&session);
        }
        Ok(())
    }

    /// The session store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.inner.store
    }

    /// The model router.
    pub fn router(&self) -> &Arc<ModelRouter> {
        &self.inner.router
    }

    /// The registered tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.inner.tools
    }
}
