//! Session stores for pith.
//!
//! One [`SessionStore`] trait, four backends: [`MemoryStore`] for tests and embedded throwaway
//! sessions, [`SqliteStore`] (the embedded default: one file, WAL, migrations), `PostgresStore`
//! (feature `postgres`, for many runtime processes sharing sessions) and [`JsonlStore`] (a
//! directory per session, fsynced and checksummed). Every backend passes the same conformance
//! suite (`tests/conformance`). Each backend's module documents its durability model.
//!
//! Loading a view never reads the archived history: every backend finds the latest compaction,
//! the instructions and reminders it retains and the entries from its tail start through an
//! index, so the cost follows the size of the view, not of the log.
//! [`SessionStore::last_view_load_rows`] reports what the last load read, for tests.
//!
//! The log is append-only: a compaction is committed as one more entry, atomically with a
//! generation check, so the original history is always recoverable and two processes can never
//! both commit on the same generation.

#![warn(missing_docs)]

pub mod common;
pub mod error;
pub mod jsonl;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod sqlite;
pub mod store;
pub mod types;

pub use error::StoreError;
pub use jsonl::JsonlStore;
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;
pub use store::SessionStore;
pub use types::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, RevisionExport, RevisionInfo,
    UsagePurpose, UsageRecord,
};
