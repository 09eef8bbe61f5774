//! The compaction archive (`compactions.jsonl`) and the boundary file (`boundary.json`).
//!
//! Each archive line is `{"generation","seq","sha256","record"}` where `record` is the JSON of an
//! [`ArchiveRecord`] and `sha256` its checksum. The boundary names the adopted generation, the
//! checksum of its line's record and the line's byte offset. A commit appends and fsyncs the line
//! first and replaces the boundary atomically second, so a crash in between leaves a record that
//! no boundary adopts: it is ignored on load and cut off by the next commit.

use std::path::Path;

use pith_core::{CompactionMeta, EntryId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::StoreError;
use crate::jsonl::files::{self, LoadWarning};

/// Where a message line starts in `messages.jsonl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locator {
    /// The entry.
    pub id: EntryId,
    /// 0-based line index.
    pub line: u64,
    /// Byte offset of the line.
    pub offset: u64,
}

/// What the archive stores for one compaction: the record and where its view's pieces are.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArchiveRecord {
    /// The generation the compaction created.
    pub generation: u64,
    /// Its position in the log (entries, compaction records included, before it).
    pub seq: u64,
    /// Message lines in `messages.jsonl` when it was committed.
    pub messages: u64,
    /// Size of `messages.jsonl` when it was committed.
    pub messages_bytes: u64,
    /// First line of the tail (line index and offset; the id is the tail start or the record's).
    pub tail: Locator,
    /// The retained instructions and reminders, in the record's order.
    pub retained: Vec<Locator>,
    /// The compaction record.
    pub meta: CompactionMeta,
}

#[derive(Serialize, Deserialize)]
struct ArchiveLine<'a> {
    generation: u64,
    seq: u64,
    sha256: String,
    #[serde(borrow)]
    record: &'a RawValue,
}

/// The boundary file: which archive line is the adopted latest compaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Boundary {
    /// The adopted generation (0: none yet).
    pub generation: u64,
    /// Checksum of the adopted line's record.
    pub sha256: String,
    /// Byte offset of the adopted line in `compactions.jsonl`.
    pub offset: u64,
    /// 0-based line index of the adopted line.
    pub line: u64,
}

/// Serialises an archive line (with its trailing newline) and returns it with its checksum.
pub fn encode(record: &ArchiveRecord) -> Result<(Vec<u8>, String), StoreError> {
    let json = serde_json::to_string(record)?;
    let sha256 = pith_core::sha256_hex(json.as_bytes());
    let raw = RawValue::from_string(json)?;
    let line = ArchiveLine {
        generation: record.generation,
        seq: record.seq,
        sha256: sha256.clone(),
        record: &raw,
    };
    let mut bytes = serde_json::to_vec(&line)?;
    bytes.push(b'\n');
    Ok((bytes, sha256))
}

/// The adopted archive: every record up to the boundary, checked, plus what a load skipped.
pub struct Adopted {
    /// Records of generations 1..=boundary, in order.
    pub records: Vec<ArchiveRecord>,
    /// Byte offset just past the adopted line (where the next line must be written).
    pub end: u64,
    /// Lines read.
    pub lines_read: u64,
    /// Torn or uncommitted lines that were ignored.
    pub warnings: Vec<LoadWarning>,
}

/// Reads the archive from byte `from` (line `first_line`), adopting lines up to the boundary.
///
/// With `from = 0` every record is returned; with the boundary's offset only the latest.
pub fn read(path: &Path, boundary: &Boundary, from: u64, first_line: u64) -> Result<Adopted, StoreError> {
    let lines = files::read_lines::<Box<RawValue>>(path, from, first_line)?;
    let mut out = Adopted {
        records: Vec::new(),
        end: from,
        lines_read: lines.items.len() as u64,
        warnings: lines.torn.into_iter().collect(),
    };
    let location = |line: u64| format!("{}:{}", path.display(), line + 1);
    let mut adopted_last = boundary.generation == 0;
    for (offset, line, raw) in lines.items {
        let parsed: ArchiveLine<'_> = serde_json::from_str(raw.get()).map_err(|e| StoreError::Corrupt {
            location: location(line),
            reason: e.to_string(),
        })?;
        if parsed.generation > boundary.generation || adopted_last {
            out.warnings.push(LoadWarning::UnmatchedCompaction {
                path: path.display().to_string(),
                line: line + 1,
                generation: parsed.generation,
            });
            continue;
        }
        let corrupt = |reason: String| StoreError::Corrupt {
            location: location(line),
            reason,
        };
        let sha = pith_core::sha256_hex(parsed.record.get().as_bytes());
        if sha != parsed.sha256 {
            return Err(corrupt(format!(
                "checksum mismatch: line says {}, record hashes to {sha}",
                parsed.sha256
            )));
        }
        let record: ArchiveRecord =
            serde_json::from_str(parsed.record.get()).map_err(|e| corrupt(e.to_string()))?;
        if from == 0 && record.generation != out.records.len() as u64 + 1 {
            return Err(corrupt(format!(
                "expected generation {}, found {}",
                out.records.len() + 1,
                record.generation
            )));
        }
        if record.generation != parsed.generation || record.seq != parsed.seq {
            return Err(corrupt("line header disagrees with its record".into()));
        }
        if parsed.generation == boundary.generation {
            if sha != boundary.sha256 || offset != boundary.offset {
                return Err(corrupt(format!(
                    "the boundary adopts generation {} with checksum {} at byte {}, the archive line differs",
                    boundary.generation, boundary.sha256, boundary.offset
                )));
            }
            adopted_last = true;
        }
        out.end = offset + (raw.get().len() as u64) + 1;
        out.records.push(record);
    }
    if !adopted_last {
        return Err(StoreError::Corrupt {
            location: path.display().to_string(),
            reason: format!(
                "the boundary adopts generation {} which the archive does not hold",
                boundary.generation
            ),
        });
    }
    Ok(out)
}
