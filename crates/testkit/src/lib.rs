//! Dev-only test support shared by the crates of the workspace.
//!
//! - [`transcripts`]: locate `../shared/transcripts` (skip with a message on a user's clone, fail
//!   under `CI=true`) and enumerate its files from `MANIFEST.json`.
//! - [`postgres`]: the URL of the throwaway PostgreSQL server that `scripts/test` starts.
//! - [`llama`]: start the local llama.cpp server (xllamacpp) for a given `n_ctx`.
//! - [`wire`]: wiremock builders for the OpenAI-compatible and Anthropic protocols.

#![warn(missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod llama;
pub mod postgres;
pub mod transcripts;
pub mod wire;
