//! The JSONL store: a directory per session, plain files a person can read.
//!
//! Layout of `<root>/<session_id>/`:
//!
//! - `session.json`: the record (replaced atomically);
//! - `messages.jsonl`: every non-compaction entry, one JSON line each, append-only;
//! - `compactions.jsonl`: the compaction archive, one checksummed line per generation (see
//!   [`archive`]), each carrying its generation, its log position and where its view's
//!   pieces are in `messages.jsonl`, so loading a view reads only those lines and the tail;
//! - `boundary.json`: the adopted generation, its line's checksum and offset (atomic);
//! - `dedupe.jsonl`, `breaker.json`, `usage.jsonl`: dedupe keys, breaker state, usage ledger;
//! - `.lock`: the OS file lock (`flock`) writers hold exclusively and readers shared.
//!
//! Durability model: every write is fsynced before the call returns; files replaced whole are
//! written to a temporary file, fsynced, renamed and the directory fsynced. A compaction's archive
//! line is synced before the boundary that adopts it is written, so after a crash either the old
//! or the new generation is adopted, never a record without its archive. On load, a torn last
//! line (an interrupted append) and an archive line no boundary adopts (a crash between the two
//! writes) are ignored and reported (see [`JsonlStore::warnings`] and `tracing` warnings); the
//! next write cuts them off. A damaged line in the middle of a file is `Corrupt`, naming file and
//! line. An append's lines are written with one `write` call; a crash can still leave only the
//! first lines of a batch, which then stay. A crash after an append's lines are synced but
//! before its dedupe key is can make the retry fail with `DuplicateEntry` (the entries are in).
//!
//! Writers are serialised by a per-session async mutex in the process and by the lock file
//! across processes. Session directories are named by the session's UUID, so no id can name a
//! path outside the root.

pub mod archive;
pub mod files;
mod ops;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pith_core::{EntryId, SessionId};

use crate::error::StoreError;
pub use files::LoadWarning;

mod store_impl;

/// A session store keeping each session in a directory of JSON and JSONL files.
#[derive(Debug, Clone)]
pub struct JsonlStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    locks: Mutex<HashMap<SessionId, Arc<tokio::sync::Mutex<()>>>>,
    index: Mutex<HashMap<SessionId, MessageIndex>>,
    warnings: Mutex<Vec<LoadWarning>>,
    last_load_rows: AtomicU64,
}

/// Where each line of a session's `messages.jsonl` starts, built once per process and extended
/// as the file grows (it is append-only).
#[derive(Debug, Default, Clone)]
struct MessageIndex {
    /// Bytes of the file covered (the end of the last good line).
    bytes: u64,
    /// Byte offset of each line.
    offsets: Vec<u64>,
    /// Entry id → (line index, is a message).
    ids: HashMap<EntryId, (u64, bool)>,
}

/// The files of one session.
#[derive(Debug, Clone)]
struct Paths {
    dir: PathBuf,
    session: PathBuf,
    messages: PathBuf,
    compactions: PathBuf,
    boundary: PathBuf,
    dedupe: PathBuf,
    breaker: PathBuf,
    usage: PathBuf,
    lock: PathBuf,
}

impl Paths {
    fn new(root: &Path, id: SessionId) -> Self {
        // The directory name is the UUID's canonical text: hex digits and dashes only.
        let dir = root.join(id.to_string());
        Self {
            session: dir.join("session.json"),
            messages: dir.join("messages.jsonl"),
            compactions: dir.join("compactions.jsonl"),
            boundary: dir.join("boundary.json"),
            dedupe: dir.join("dedupe.jsonl"),
            breaker: dir.join("breaker.json"),
            usage: dir.join("usage.jsonl"),
            lock: dir.join(".lock"),
            dir,
        }
    }
}

impl JsonlStore {
    /// Opens a store rooted at `root`, creating the directory when needed.
    pub async fn open(root: impl AsRef<Path>) -> Result<Self, StoreError> {
        let root = root.as_ref().to_path_buf();
        let r = root.clone();
        tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&r).map_err(|e| StoreError::io(r.display(), e))
        })
        .await??;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                locks: Mutex::default(),
                index: Mutex::default(),
                warnings: Mutex::default(),
                last_load_rows: AtomicU64::new(0),
            }),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The directory of a session (whether or not it exists).
    pub fn session_dir(&self, id: SessionId) -> PathBuf {
        Paths::new(&self.inner.root, id).dir
    }

    /// Everything loads have skipped so far (torn lines, uncommitted compaction records).
    pub fn warnings(&self) -> Vec<LoadWarning> {
        lock(&self.inner.warnings).clone()
    }

    /// Returns and clears the warnings collected so far.
    pub fn take_warnings(&self) -> Vec<LoadWarning> {
        std::mem::take(&mut *lock(&self.inner.warnings))
    }

    /// Lines read by the most recent `load_view` (see `SessionStore::last_view_load_rows`).
    pub fn last_load_rows(&self) -> u64 {
        self.inner.last_load_rows.load(Ordering::Relaxed)
    }

    /// Runs `f` on the blocking pool holding the session's locks: the in-process mutex and the
    /// lock file (exclusive when `write`, shared otherwise).
    async fn with_session<T, F>(
        &self,
        id: SessionId,
        write: bool,
        op: &'static str,
        f: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner, &Paths) -> Result<T, StoreError> + Send + 'static,
    {
        let mutex = Arc::clone(lock(&self.inner.locks).entry(id).or_default());
        let _guard = mutex.lock().await;
        let inner = Arc::clone(&self.inner);
        let span = tracing::debug_span!("store.op", backend = "jsonl", op);
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            let paths = Paths::new(&inner.root, id);
            let file = match std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&paths.lock)
            {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(StoreError::SessionNotFound(id))
                }
                Err(e) => return Err(StoreError::io(paths.lock.display(), e)),
            };
            let locked = if write { file.lock() } else { file.lock_shared() };
            locked.map_err(|e| StoreError::io(paths.lock.display(), e))?;
            // Another process may have deleted the session while we waited for the lock.
            if !paths.session.exists() {
                return Err(StoreError::SessionNotFound(id));
            }
            f(&inner, &paths)
        })
        .await?
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every guarded structure is a cache or a list that stays valid if a holder panicked.
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Inner {
    fn warn(&self, warnings: Vec<LoadWarning>) {
        for w in &warnings {
            tracing::warn!(backend = "jsonl", "{w}");
        }
        lock(&self.warnings).extend(warnings);
    }
}
