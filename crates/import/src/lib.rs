//! Importers for real agent transcripts.
//!
//! pith reads the session files that agent tools write — Claude Code, Codex, pi, SWE-agent,
//! mini-SWE-agent, OpenHands and aider — into its own log of [`pith_core::Entry`]s, so that
//! compaction, the runtime and the benchmarks run on what agents really produce.
//!
//! - [`import_file`] / [`import_reader`] read a transcript, detecting its format from its content
//!   (or taking a given [`Format`]);
//! - [`detect()`] tells the format from the first bytes of a file;
//! - [`validate`] checks the invariants every imported log keeps (tool results follow their
//!   calls, every call is answered, entry ids are unique);
//! - [`Importer`] is the interface each format implements; [`importer`] returns it.
//!
//! The rules that are the same for every format (tool use carried as text becomes tool calls,
//! unanswered calls get synthesised error results, repeated call ids pair by position, results
//! without a call are dropped and reported) are described in `docs/FORMATS.md` and enforced in
//! one place. JSONL and markdown formats are read line by line, so memory is bounded by the
//! longest line, not the file; [`ImportReport::max_line_bytes`] says how long that was.

#![warn(missing_docs)]

mod aider;
mod assemble;
mod blocks;
mod claude;
mod codex;
mod detect;
mod error;
mod format;
mod importer;
mod mini_swe;
mod openhands;
mod pi;
mod read;
mod report;
mod swe_agent;
mod validate;

pub use assemble::UNANSWERED_RESULT;
pub use detect::{detect, HEAD_BYTES};
pub use error::{ImportError, Location};
pub use format::Format;
pub use importer::{import_file, import_reader, importer, Importer};
pub use report::{ImportReport, ImportedSession};
pub use validate::validate;
