//! The model router of pith.
//!
//! Every model call leaves pith through a [`ModelRouter`]: main turns and summary calls alike. The
//! router resolves a model name (`provider/model` or an alias) to a [`Provider`], knows each
//! model's context window (corrected when a provider's overflow error states the real limit), and
//! sends normalised [`ChatRequest`]s.

#![warn(missing_docs)]

pub mod catalog;
pub mod error;
pub mod provider;
pub mod providers;
pub mod request;
pub mod router;

pub use catalog::{ModelCatalog, ModelInfo};
pub use error::ProviderError;
pub use provider::{Provider, StreamSink};
pub use providers::scripted::ScriptedProvider;
pub use request::{ChatRequest, ChatResponse, StreamEvent};
pub use router::ModelRouter;
