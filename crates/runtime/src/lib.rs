//! pith-runtime: the Turn state machine, its driver, tools and the embedding API.

#![warn(missing_docs)]

pub mod config;
pub mod events;
pub mod exec;
pub mod fsm;
pub mod registry;
pub mod tool;

pub use config::RuntimeConfig;
pub use events::EventBus;
pub use registry::ToolRegistry;
pub use tokio_util::sync::CancellationToken;
pub use tool::{FnTool, Tool, ToolContext, ToolError};
