//! The common importer interface and the import entry points.

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::Path;

use chrono::Utc;
use pith_core::SessionRecord;
use serde_json::Value;

use crate::assemble::Assembler;
use crate::detect::{document_format, document_mismatch, sniff, Sniff, HEAD_BYTES};
use crate::error::ImportError;
use crate::format::Format;
use crate::read::{json_document, parse_document};
use crate::report::ImportedSession;
use crate::validate::validate;
use crate::{aider, claude, codex, mini_swe, openhands, pi, swe_agent};

/// Reads one transcript format.
///
/// Every format has one importer; [`importer`] returns it. Streaming formats read line by line
/// (memory bounded by the longest line); single-document formats parse the document and drop the
/// raw text.
pub trait Importer: Send + Sync {
    /// The format this importer reads.
    fn format(&self) -> Format;

    /// Reads a whole transcript. `name` is the file name used in errors.
    fn import(&self, name: &Path, reader: &mut dyn BufRead) -> Result<ImportedSession, ImportError>;
}

/// The importer of one format (a unit type per format).
#[derive(Debug, Clone, Copy)]
struct FormatImporter(Format);

impl Importer for FormatImporter {
    fn format(&self) -> Format {
        self.0
    }

    fn import(&self, name: &Path, reader: &mut dyn BufRead) -> Result<ImportedSession, ImportError> {
        let asm = match self.0 {
            Format::ClaudeCode => claude::read(name, reader)?,
            Format::Codex => codex::read(name, reader)?,
            Format::Pi => pi::read(name, reader)?,
            Format::Aider => aider::read(name, reader)?,
            Format::SweAgent | Format::MiniSweAgent | Format::OpenHands => {
                let doc = json_document(reader, name)?;
                from_document(self.0, name, doc)?
            }
        };
        finish(self.0, asm)
    }
}

static IMPORTERS: [FormatImporter; 7] = [
    FormatImporter(Format::ClaudeCode),
    FormatImporter(Format::Codex),
    FormatImporter(Format::Pi),
    FormatImporter(Format::SweAgent),
    FormatImporter(Format::MiniSweAgent),
    FormatImporter(Format::OpenHands),
    FormatImporter(Format::Aider),
];

/// The importer of `format`.
pub fn importer(format: Format) -> &'static dyn Importer {
    let index = Format::ALL.iter().position(|f| *f == format).unwrap_or(0);
    &IMPORTERS[index]
}

fn from_document(format: Format, name: &Path, doc: Value) -> Result<Assembler, ImportError> {
    match format {
        Format::SweAgent => swe_agent::from_value(name, doc),
        Format::MiniSweAgent => mini_swe::from_value(name, doc),
        Format::OpenHands => openhands::from_value(name, doc),
        other => Err(ImportError::UnknownFormat {
            file: name.to_path_buf(),
            reason: format!("{other} is not a single-document format"),
        }),
    }
}

fn finish(format: Format, asm: Assembler) -> Result<ImportedSession, ImportError> {
    let done = asm.finish();
    validate(&done.entries)?;
    let mut record = SessionRecord::new(done.model.unwrap_or_default(), done.tools);
    record.created_at = done.first_time.unwrap_or_else(Utc::now);
    record.updated_at = done.last_time.unwrap_or(record.created_at);
    Ok(ImportedSession {
        record,
        entries: done.entries,
        format,
        report: done.report,
    })
}

/// Imports a transcript file, detecting its format from its content.
pub fn import_file(path: impl AsRef<Path>) -> Result<ImportedSession, ImportError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|source| ImportError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    import_reader(None, path, file)
}

/// Imports a transcript from any reader. With `format` `None` the format is detected from the
/// first bytes (see [`crate::detect()`]); `name` names the input in errors.
pub fn import_reader<R: Read>(
    format: Option<Format>,
    name: impl AsRef<Path>,
    mut reader: R,
) -> Result<ImportedSession, ImportError> {
    let name = name.as_ref();
    let io = |source| ImportError::Io {
        file: name.to_path_buf(),
        source,
    };
    if let Some(format) = format {
        let mut buffered = BufReader::with_capacity(HEAD_BYTES, reader);
        return importer(format).import(name, &mut buffered);
    }
    let mut head = Vec::with_capacity(HEAD_BYTES);
    reader
        .by_ref()
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(io)?;
    let complete = head.len() < HEAD_BYTES;
    match sniff(&head, complete) {
        Sniff::Known(format) => {
            let mut buffered = BufReader::with_capacity(HEAD_BYTES, Cursor::new(head).chain(reader));
            importer(format).import(name, &mut buffered)
        }
        Sniff::Unknown(reason) => Err(ImportError::UnknownFormat {
            file: name.to_path_buf(),
            reason,
        }),
        Sniff::Document => {
            let mut bytes = head;
            reader.read_to_end(&mut bytes).map_err(io)?;
            let doc = match parse_document(&bytes, name) {
                Ok(doc) => doc,
                Err(ImportError::Json { source, .. })
                    if source.to_string().contains("trailing characters") =>
                {
                    return Err(ImportError::UnknownFormat {
                        file: name.to_path_buf(),
                        reason: "JSON lines whose first record is of no known type".into(),
                    })
                }
                Err(e) => return Err(e),
            };
            drop(bytes);
            let Some(format) = document_format(&doc) else {
                return Err(ImportError::UnknownFormat {
                    file: name.to_path_buf(),
                    reason: document_mismatch(&doc),
                });
            };
            let asm = from_document(format, name, doc)?;
            finish(format, asm)
        }
    }
}
