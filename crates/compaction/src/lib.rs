//! The staged CompactionService of pith.
//!
//! When a session's history outgrows the model's window, the service summarises the old part,
//! keeps the recent part verbatim and commits the new view through the session store — durably,
//! idempotently, and without ever destroying the original history. The stages are separate
//! modules of pure functions; [`CompactionService`] composes them and owns the I/O:
//!
//! 1. [`overflow`] — is a compaction needed (token and count signals)?
//! 2. [`select`] — where to cut: the tail kept verbatim, never splitting a tool pair.
//! 3. [`prompt`] — the summary request, and the one clipping rule for tool outputs.
//! 4. [`summary`] — the summarizer: [`ModelSummarizer`] (with recursive chunking) or
//!    [`DeterministicSummarizer`].
//! 5. [`prune`] — the new view's size check and the compaction record.
//!
//! Around them: [`plan`] (the cut and budgets before any model call), [`budget`] (the summary
//! request's budget), [`breaker`] (the per-session circuit breaker), [`relevance`] (opt-in
//! grading of the span), [`projection`] (how a stored view becomes the model's messages),
//! [`measure`] (the token counts of one planning pass, counted once), [`tier`] (tiered
//! compaction: old tool outputs masked before summarising) and [`speculative`] (the summary
//! written in the background before the threshold is reached).

#![warn(missing_docs)]

pub mod artifacts;
pub mod breaker;
pub mod budget;
pub mod config;
pub mod deterministic;
pub mod error;
pub mod ledger;
mod ledger_cost;
mod ledger_decisions;
mod ledger_scan;
pub mod measure;
pub mod model;
pub mod overflow;
pub mod plan;
pub mod policy;
pub mod projection;
pub mod prompt;
pub mod prune;
pub mod relevance;
pub mod select;
pub mod service;
pub mod speculative;
pub mod summary;
pub mod tier;
pub mod trigger;

pub use config::{
    CompactionConfig, ConfigError, IncrementalMode, ProjectionStyle, RelevanceConfig, TailPolicy,
};
pub use deterministic::DeterministicSummarizer;
pub use error::CompactionError;
pub use ledger::Ledger;
pub use model::ModelSummarizer;
pub use overflow::{decide, threshold, Decision};
pub use projection::project;
pub use prompt::clip_tool_output;
pub use relevance::{Grader, ModelGrader};
pub use service::CompactionService;
pub use speculative::soft_threshold;
pub use summary::{CallLog, Summarizer, SummaryJob, SummaryOutput};
pub use trigger::{CompactionResult, CompactionTrigger, OverflowInfo};

pub use pith_core::{CompactionMeta, CompactionStrategy};
pub use pith_store::BreakerState;
