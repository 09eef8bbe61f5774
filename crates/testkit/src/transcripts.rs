//! The shared real-world transcripts.
//!
//! Tests read them in place from `../shared/transcripts` (relative to the workspace root, or the
//! directory named by `PITH_TRANSCRIPTS`). On a user's clone the folder may be absent: tests then
//! skip with a clear message. Under `CI=true` a missing folder is a failure, never a skip.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One file listed in `MANIFEST.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct ManifestEntry {
    /// Path relative to the transcripts folder.
    pub file: String,
    /// Size in bytes.
    pub bytes: u64,
    /// The format name (e.g. `claude-code-session-jsonl`).
    pub format: String,
    /// sha256 of the file.
    #[serde(default)]
    pub sha256: String,
}

/// Whether this run is CI (`CI=true` or `CI=1`).
pub fn is_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true") | Ok("1"))
}

fn workspace_root() -> PathBuf {
    // crates/testkit -> workspace root
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The transcripts folder, or `None` (after printing why) when it is absent outside CI.
///
/// # Panics
/// Under CI when the folder is missing: CI must run the real-world tests.
pub fn dir() -> Option<PathBuf> {
    let dir = std::env::var_os("PITH_TRANSCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/transcripts"));
    if dir.join("MANIFEST.json").is_file() {
        return Some(dir);
    }
    if is_ci() {
        panic!(
            "CI=true but the shared transcripts are missing at {} (clone ../shared beside the checkout)",
            dir.display()
        );
    }
    eprintln!(
        "SKIP: shared transcripts not found at {} — set PITH_TRANSCRIPTS or place ../shared beside the checkout",
        dir.display()
    );
    None
}

/// Every file of the manifest, with its absolute path, largest first.
pub fn manifest() -> Option<Vec<(PathBuf, ManifestEntry)>> {
    let dir = dir()?;
    let text = std::fs::read_to_string(dir.join("MANIFEST.json")).expect("read MANIFEST.json");
    let entries: Vec<ManifestEntry> = serde_json::from_str(&text).expect("parse MANIFEST.json");
    let mut out: Vec<(PathBuf, ManifestEntry)> =
        entries.into_iter().map(|e| (dir.join(&e.file), e)).collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.1.bytes));
    Some(out)
}
