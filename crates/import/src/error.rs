//! The error type of the importers.
//!
//! Every variant names the file and, where it applies, the place in it (a line of a JSONL or
//! markdown file, or a JSON path inside a single-document format) and what was expected there, so
//! a person can open the file and see what is wrong.

use std::fmt;
use std::path::PathBuf;

/// A place inside an imported file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A 1-based line number (JSONL and markdown formats).
    Line(u64),
    /// A JSON path such as `$.history[3].content` (single-document formats).
    Path(String),
    /// The file as a whole.
    File,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Path(p) => f.write_str(p),
            Location::File => f.write_str("the file"),
        }
    }
}

/// Why a transcript could not be imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The file could not be opened or read.
    #[error("cannot read {file}: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes at a place are not valid UTF-8.
    #[error("{file}: {location}: invalid UTF-8 at byte {byte} (transcripts must be UTF-8 text)")]
    InvalidUtf8 {
        /// The file.
        file: PathBuf,
        /// The line (or the whole document).
        location: Location,
        /// Offset of the first invalid byte, within the line or document.
        byte: u64,
        /// The decoding error.
        #[source]
        source: std::str::Utf8Error,
    },
    /// The JSON ends before the value is complete (a truncated file or line).
    #[error("{file}: {location}: truncated JSON (the value ends before it is complete)")]
    Truncated {
        /// The file.
        file: PathBuf,
        /// The line (or the whole document).
        location: Location,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The text is not valid JSON.
    #[error("{file}: {location}: invalid JSON: {source}")]
    Json {
        /// The file.
        file: PathBuf,
        /// The line (or the whole document).
        location: Location,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The JSON is valid but a value has the wrong shape for the format.
    #[error("{file}: {location}: expected {expected}")]
    Schema {
        /// The file.
        file: PathBuf,
        /// Where the unexpected value is.
        location: Location,
        /// What the format requires there.
        expected: String,
    },
    /// The content matches no known transcript format.
    #[error(
        "{file}: unknown transcript format: {reason} (known formats: claude-code, codex, pi, swe-agent, \
         mini-swe-agent, openhands, aider)"
    )]
    UnknownFormat {
        /// The file.
        file: PathBuf,
        /// What was seen instead.
        reason: String,
    },
    /// A format name that pith does not know.
    #[error(
        "unknown format name {name:?} (known formats: claude-code, codex, pi, swe-agent, \
         mini-swe-agent, openhands, aider)"
    )]
    UnknownFormatName {
        /// The rejected name.
        name: String,
    },
    /// The imported entries break the log invariants (see [`crate::validate`]).
    #[error("invalid imported log: {location}: {problem}")]
    Invalid {
        /// The entry index where the problem was found.
        location: Location,
        /// What is wrong.
        problem: String,
    },
}

impl ImportError {
    /// A schema error at `location` of `file`.
    pub(crate) fn schema(file: &std::path::Path, location: Location, expected: impl Into<String>) -> Self {
        ImportError::Schema {
            file: file.to_path_buf(),
            location,
            expected: expected.into(),
        }
    }

    /// Turns a parser error into [`ImportError::Truncated`] or [`ImportError::Json`].
    pub(crate) fn from_json(file: &std::path::Path, location: Location, source: serde_json::Error) -> Self {
        if source.is_eof() {
            ImportError::Truncated {
                file: file.to_path_buf(),
                location,
                source,
            }
        } else {
            ImportError::Json {
                file: file.to_path_buf(),
                location,
                source,
            }
        }
    }
}
