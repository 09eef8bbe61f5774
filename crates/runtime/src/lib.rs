//! pith-runtime: the Turn state machine, its driver, tools and the embedding API.
//!
//! A [`Runtime`] drives turns: it appends the user's input, prepares the model view (projection,
//! trim of tool-result bodies, budget check) before **every** model call, compacts proactively
//! when the view is over the threshold and reactively when the provider still reports an
//! overflow (then retries the same request once), runs tool calls concurrently with a limit and
//! a timeout, and publishes everything as [`pith_core::AgentEvent`]s.
//!
//! The decisions live in [`fsm`], a pure state machine with no I/O; the async driver only
//! performs the actions it returns. That separation is what makes the guarantees testable: every
//! turn ends within a step bound, and a model request gets at most one proactive and one reactive
//! compaction.
//!
//! ```no_run
//! # async fn demo(router: pith_router::ModelRouter, store: std::sync::Arc<dyn pith_store::SessionStore>)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use pith_runtime::Runtime;
//! use tokio_util::sync::CancellationToken;
//!
//! let runtime = Runtime::builder().router(router).store(store).build()?;
//! let session = runtime.create_session("openai/gpt-4o-mini", "You are terse.").await?;
//! let outcome = runtime.run_turn(session, "hello", CancellationToken::new()).await?;
//! println!("{}", outcome.text());
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod config;
mod driver;
pub mod error;
pub mod events;
pub mod exec;
pub mod fsm;
pub mod pipeline;
pub mod registry;
mod runtime;
pub mod tool;
pub mod turn;

pub use config::RuntimeConfig;
pub use error::{BuildError, RuntimeError};
pub use events::EventBus;
pub use pipeline::ContextPipeline;
pub use registry::ToolRegistry;
pub use runtime::{Runtime, RuntimeBuilder};
pub use tokio_util::sync::CancellationToken;
pub use tool::{FnTool, Tool, ToolContext, ToolError};
pub use turn::{CompactionReport, TurnInput, TurnOutcome};
