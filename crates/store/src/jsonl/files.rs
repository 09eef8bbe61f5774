//! File primitives of the JSONL store: durable appends, atomic replacement, line parsing.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::StoreError;

/// Something a load noticed and skipped instead of failing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadWarning {
    /// The last line of a file is incomplete (no trailing newline) or unparsable: a write was
    /// interrupted. The line is ignored and removed by the next write.
    TornLine {
        /// The file.
        path: String,
        /// 1-based line number.
        line: u64,
    },
    /// A compaction record follows the one the boundary file adopts: the process stopped after
    /// archiving it and before moving the boundary, so it was never committed. It is ignored and
    /// removed by the next commit.
    UnmatchedCompaction {
        /// The archive file.
        path: String,
        /// 1-based line number.
        line: u64,
        /// The generation the record claims.
        generation: u64,
    },
}

impl std::fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadWarning::TornLine { path, line } => write!(f, "torn last line ignored at {path}:{line}"),
            LoadWarning::UnmatchedCompaction {
                path,
                line,
                generation,
            } => write!(
                f,
                "uncommitted compaction record (generation {generation}) ignored at {path}:{line}"
            ),
        }
    }
}

/// Parsed lines of a file region.
pub struct Lines<T> {
    /// Each complete, parsed line with its byte offset and 0-based line index.
    pub items: Vec<(u64, u64, T)>,
    /// Byte offset just past the last good line (where the next write must start).
    pub good_end: u64,
    /// A torn last line, when there was one.
    pub torn: Option<LoadWarning>,
}

/// Reads `path` from byte `offset` (which is the start of line `first_line`) to its end and
/// parses every line. A torn last line is reported, not an error; an unparsable line followed by
/// more data is `Corrupt`, naming file and line. A missing file reads as empty.
pub fn read_lines<T: DeserializeOwned>(
    path: &Path,
    offset: u64,
    first_line: u64,
) -> Result<Lines<T>, StoreError> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.seek(SeekFrom::Start(offset))
                .map_err(|e| StoreError::io(path.display(), e))?;
            f.read_to_end(&mut bytes)
                .map_err(|e| StoreError::io(path.display(), e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io(path.display(), e)),
    }
    parse_lines(path, &bytes, offset, first_line)
}

/// Parses the lines of `bytes`, which start at byte `offset` / line `first_line` of `path`.
pub fn parse_lines<T: DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
    offset: u64,
    first_line: u64,
) -> Result<Lines<T>, StoreError> {
    let mut items = Vec::new();
    let mut pos = 0usize;
    let mut line = first_line;
    let mut torn = None;
    let mut good_end = offset;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let (text, complete) = match rest.iter().position(|&b| b == b'\n') {
            Some(n) => (&rest[..n], true),
            None => (rest, false),
        };
        let next = pos + text.len() + usize::from(complete);
        let is_last = next >= bytes.len();
        let parsed = if complete {
            serde_json::from_slice::<T>(text).ok()
        } else {
            None
        };
        match parsed {
            Some(v) => {
                items.push((offset + pos as u64, line, v));
                good_end = offset + next as u64;
            }
            None if is_last => {
                torn = Some(LoadWarning::TornLine {
                    path: path.display().to_string(),
                    line: line + 1,
                });
                break;
            }
            None => {
                let reason = match serde_json::from_slice::<T>(text) {
                    Err(e) => e.to_string(),
                    Ok(_) => "unterminated line".to_string(),
                };
                return Err(StoreError::Corrupt {
                    location: format!("{}:{}", path.display(), line + 1),
                    reason,
                });
            }
        }
        pos = next;
        line += 1;
    }
    Ok(Lines {
        items,
        good_end,
        torn,
    })
}

/// Reads one line starting at `offset` and parses it.
pub fn read_line_at<T: DeserializeOwned>(path: &Path, offset: u64, line: u64) -> Result<T, StoreError> {
    let mut f = File::open(path).map_err(|e| StoreError::io(path.display(), e))?;
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| StoreError::io(path.display(), e))?;
    let mut reader = std::io::BufReader::new(f);
    let mut buf = Vec::new();
    std::io::BufRead::read_until(&mut reader, b'\n', &mut buf)
        .map_err(|e| StoreError::io(path.display(), e))?;
    serde_json::from_slice(&buf).map_err(|e| StoreError::Corrupt {
        location: format!("{}:{}", path.display(), line + 1),
        reason: e.to_string(),
    })
}

/// Cuts `path` back to `len` bytes (dropping a torn or uncommitted tail) and syncs it.
pub fn truncate_to(path: &Path, len: u64) -> Result<(), StoreError> {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| StoreError::io(path.display(), e))?;
    let current = f.metadata().map_err(|e| StoreError::io(path.display(), e))?.len();
    if current > len {
        f.set_len(len).map_err(|e| StoreError::io(path.display(), e))?;
        f.sync_all().map_err(|e| StoreError::io(path.display(), e))?;
    }
    Ok(())
}

/// Appends bytes to `path` (creating it) and fsyncs before returning.
pub fn append_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| StoreError::io(path.display(), e))?;
    f.write_all(bytes)
        .map_err(|e| StoreError::io(path.display(), e))?;
    f.sync_data().map_err(|e| StoreError::io(path.display(), e))
}

/// Replaces `path` atomically: write a temporary file, fsync it, rename it over `path`, fsync
/// the directory. A reader sees the old or the new content, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp).map_err(|e| StoreError::io(tmp.display(), e))?;
        f.write_all(bytes).map_err(|e| StoreError::io(tmp.display(), e))?;
        f.sync_all().map_err(|e| StoreError::io(tmp.display(), e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| StoreError::io(path.display(), e))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Fsyncs a directory so that renames and creations in it are durable.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(dir.display(), e))
}

/// Reads and parses a whole JSON file; `None` when it does not exist.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StoreError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                location: path.display().to_string(),
                reason: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(path.display(), e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn torn_and_corrupt_lines_are_told_apart() {
        let p = Path::new("f.jsonl");
        let ok: Lines<u32> = parse_lines(p, b"1\n2\n3\n", 0, 0).unwrap();
        assert_eq!(ok.items.len(), 3);
        assert_eq!(ok.good_end, 6);
        assert!(ok.torn.is_none());
        let torn: Lines<u32> = parse_lines(p, b"1\n2\n3", 0, 0).unwrap();
        assert_eq!((torn.items.len(), torn.good_end), (2, 4));
        assert_eq!(
            torn.torn,
            Some(LoadWarning::TornLine {
                path: "f.jsonl".into(),
                line: 3
            })
        );
        let bad_last: Lines<u32> = parse_lines(p, b"1\nxx\n", 10, 5).unwrap();
        assert_eq!((bad_last.items.len(), bad_last.good_end), (1, 12));
        let err = parse_lines::<u32>(p, b"1\nxx\n3\n", 0, 0).err().unwrap();
        assert!(err.to_string().contains("f.jsonl:2"), "{err}");
    }
}
