//! pith: an agent-turn runtime whose core is context compaction done right.
pub use pith_core as core;
