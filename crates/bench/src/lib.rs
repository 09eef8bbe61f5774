//! Benchmarks of pith and the load harness behind `docs/BENCHMARKS.md`.
//!
//! The criterion benches in `benches/` measure the pure hot paths: one compaction planning pass
//! over a real transcript ([`planning`]), the per-turn budget check as the history grows
//! ([`history`] builds the histories), and the deterministic summarizer. The `load` binary
//! drives many concurrent sessions through the full runtime against [`stub`], a loopback
//! OpenAI-compatible server of our own, run in a process of its own by default
//! ([`stub_process`]; [`load`] holds the harness). `plot-budget` draws the
//! budget-check figure from criterion's results ([`plot`]).

#![warn(missing_docs)]

pub mod history;
pub mod load;
pub mod planning;
pub mod plot;
pub mod rss;
pub mod speculative;
pub mod stub;
pub mod stub_process;
pub mod timed;
pub mod transcripts;
