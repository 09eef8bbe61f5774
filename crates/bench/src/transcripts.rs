//! Finding the shared real-world transcripts for the benches.
//!
//! The folder is `../shared/transcripts` beside the workspace root (or `PITH_TRANSCRIPTS`), located
//! by `pith_testkit`; when it is absent outside CI the benches print a SKIP line and measure
//! nothing rather than fail.

use std::path::PathBuf;

use pith_core::{Entry, SessionRecord, StoredView};

/// One transcript loaded for benchmarking.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// Path relative to the transcripts folder (e.g. `pi-session/large-session.jsonl`).
    pub name: String,
    /// The absolute path.
    pub path: PathBuf,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// The imported session record.
    pub record: SessionRecord,
    /// The imported log.
    pub entries: Vec<Entry>,
}

impl Transcript {
    /// The model's view of the whole log, as a store would load it before any compaction.
    ///
    /// # Errors
    /// When the imported log does not form a valid view (the importer guarantees it does).
    pub fn view(&self) -> Result<StoredView, pith_core::ViewError> {
        StoredView::from_log(self.record.clone(), &self.entries)
    }
}

/// Every shared transcript that imports, largest first; `None` when the folder is absent.
///
/// Files that fail to import are reported on standard error and left out.
pub fn load_all() -> Option<Vec<Transcript>> {
    let manifest = pith_testkit::transcripts::manifest()?;
    let mut out = Vec::new();
    for (path, entry) in manifest {
        match pith_import::import_file(&path) {
            Ok(imported) => out.push(Transcript {
                name: entry.file.clone(),
                path,
                bytes: entry.bytes,
                record: imported.record,
                entries: imported.entries,
            }),
            Err(e) => eprintln!("skipping {}: {e}", entry.file),
        }
    }
    Some(out)
}
