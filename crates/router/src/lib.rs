//! The model router of pith.
//!
//! Every model call leaves pith through a [`ModelRouter`]: main turns and summary calls alike. The
//! router resolves a model name (`provider/model` or an alias) to a [`Provider`], knows each
//! model's context window (corrected when a provider's overflow error states the real limit), and
//! sends normalised [`ChatRequest`]s.
//!
//! Two wire protocols cover nearly every vendor and local server:
//! [`OpenAiCompatible`](providers::openai::OpenAiCompatible) (Chat Completions) and
//! [`Anthropic`](providers::anthropic::Anthropic) (Messages). Each HTTP provider runs inside a
//! tower [`stack`] (concurrency limit → rate limit → retry → timeout). [`overflow`] recognises
//! context-overflow errors from status codes, error codes and provider messages.

#![warn(missing_docs)]

pub mod builder;
pub mod catalog;
pub mod classify;
pub mod config;
pub mod error;
pub mod overflow;
pub mod provider;
pub mod providers;
pub mod request;
pub mod router;
pub mod secret;
pub mod stack;

pub use builder::RouterBuilder;
pub use catalog::{ModelCatalog, ModelInfo};
pub use config::{ProviderConfig, ProviderLimits};
pub use error::ProviderError;
pub use provider::{Provider, StreamSink};
pub use providers::anthropic::Anthropic;
pub use providers::openai::OpenAiCompatible;
pub use providers::scripted::ScriptedProvider;
pub use request::{ChatRequest, ChatResponse, StreamEvent};
pub use router::ModelRouter;
pub use secret::SecretString;
pub use stack::StackedProvider;
