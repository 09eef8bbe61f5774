//! The library behind the `pith` command-line tool.
//!
//! Everything the commands do lives here so it can be tested and reused: opening stores from URLs,
//! the seeded demo-session generator, the replay engine that re-drives imported transcripts through
//! the real runtime, and the report with its retention figures.

#![warn(missing_docs)]

pub mod commands;
pub mod demo_session;
pub mod paths;
pub mod replay;
pub mod store_url;
