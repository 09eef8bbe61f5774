//! Reliability and security harnesses of pith.
//!
//! pith promises that no entry is ever lost or duplicated, that a compaction is applied whole or
//! not at all, that the original history is always recoverable, that bad input gets a clear
//! error and that no secret leaks. The tests of this crate prove each promise against the real
//! stores, the real HTTP providers and real OS processes; this library holds the pieces they
//! share, so that each piece can be reused by anyone who wants to check the same promises
//! against their own deployment:
//!
//! - [`faulty`]: [`FaultyStore`], a [`pith_store::SessionStore`] wrapper that fails the Nth
//!   write of a kind, or a kind of read, with a typed backend error;
//! - [`pause`]: named crash points ([`CrashPoint`]) and wrappers that stop a process at one of
//!   them ([`PausingStore`], [`PausingSummarizer`]), so a parent can `SIGKILL` it exactly there;
//! - [`echo`]: [`EchoProvider`], a deterministic model provider usable from any process;
//! - [`fuzzing`]: the bodies of the fuzz targets (importers, SSE parsers), shared with the
//!   proptest coverage that runs in CI;
//! - [`check`]: invariant checks over a stored session (unique entries, strictly increasing
//!   generations, every revision exports with a valid checksum and fits its window).
//!
//! The binaries `crash_child` and `pg_worker` are the child processes of the crash and
//! multi-process tests; `docs/RELIABILITY.md` lists every promise with the test that proves it.

#![warn(missing_docs)]

pub mod check;
pub mod echo;
pub mod faulty;
pub mod fuzzing;
pub mod pause;

pub use check::{check_session, CheckError, SessionReport};
pub use echo::{echo_router, EchoProvider, ECHO_MODEL};
pub use faulty::{FaultPlan, FaultyStore, ReadKind, WriteKind};
pub use pause::{CrashPoint, PausingStore, PausingSummarizer, TornCommit};
