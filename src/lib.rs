//! pith: an agent-turn runtime whose core is context compaction done right.
//!
//! This facade re-exports the workspace crates under short names and the types an embedding
//! program needs first: build a [`Runtime`] from a [`ModelRouter`], a [`SessionStore`] and a
//! [`CompactionConfig`], register [`Tool`]s, and call [`Runtime::run_turn`].

pub use pith_compaction as compaction;
pub use pith_core as core;
pub use pith_import as import;
pub use pith_router as router;
pub use pith_runtime as runtime;
pub use pith_store as store;

pub use pith_compaction::CompactionConfig;
pub use pith_core::AgentEvent;
pub use pith_router::ModelRouter;
pub use pith_runtime::{
    CancellationToken, FnTool, Runtime, RuntimeBuilder, RuntimeConfig, RuntimeError, Tool, ToolContext,
    ToolError, TurnInput, TurnOutcome,
};
pub use pith_store::{MemoryStore, SessionStore, SqliteStore};
