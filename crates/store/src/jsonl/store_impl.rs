//! `SessionStore` for [`JsonlStore`].

use std::sync::atomic::Ordering;

use async_trait::async_trait;
use chrono::Utc;
use pith_core::{CompactionMeta, Entry, SessionId, SessionRecord, StoredView};

use super::files;
use super::ops;
use super::{lock, JsonlStore, Paths};
use crate::common;
use crate::error::StoreError;
use crate::store::SessionStore;
use crate::types::{
    AppendOutcome, AppendRequest, BreakerState, CommitRequest, CreateSession, RevisionExport, RevisionInfo,
    UsageRecord,
};

#[async_trait]
impl SessionStore for JsonlStore {
    fn backend(&self) -> &'static str {
        "jsonl"
    }

    async fn create_session(&self, request: CreateSession) -> Result<SessionRecord, StoreError> {
        let id = request.id;
        let mutex = std::sync::Arc::clone(lock(&self.inner.locks).entry(id).or_default());
        let _guard = mutex.lock().await;
        let root = self.inner.root.clone();
        tokio::task::spawn_blocking(move || {
            let paths = Paths::new(&root, id);
            if paths.dir.exists() {
                return Err(StoreError::SessionExists(id));
            }
            let now = Utc::now();
            let record = SessionRecord {
                id,
                model: request.model,
                tools: request.tools,
                created_at: now,
                updated_at: now,
                generation: 0,
            };
            // Build the directory under a temporary name and rename it into place, so a session
            // directory is either complete or absent.
            let tmp = root.join(format!(".tmp-{id}-{}", uuid::Uuid::now_v7()));
            std::fs::create_dir(&tmp).map_err(|e| StoreError::io(tmp.display(), e))?;
            let write = || -> Result<(), StoreError> {
                let mut lines = Vec::new();
                for m in &request.instructions {
                    serde_json::to_writer(&mut lines, &Entry::Message(m.clone()))?;
                    lines.push(b'\n');
                }
                files::append_synced(&tmp.join("messages.jsonl"), &lines)?;
                files::write_atomic(&tmp.join("session.json"), &serde_json::to_vec(&record)?)?;
                files::sync_dir(&tmp)?;
                Ok(())
            };
            if let Err(e) = write() {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
            if let Err(e) = std::fs::rename(&tmp, &paths.dir) {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(if paths.dir.exists() {
                    StoreError::SessionExists(id)
                } else {
                    StoreError::io(paths.dir.display(), e)
                });
            }
            files::sync_dir(&root)?;
            Ok(record)
        })
        .await?
    }

    async fn get_session(&self, id: SessionId) -> Result<SessionRecord, StoreError> {
        self.with_session(id, false, "get_session", move |_, p| Ok(ops::record(p, id)?.0))
            .await
    }

    async fn update_session(&self, record: SessionRecord) -> Result<SessionRecord, StoreError> {
        let id = record.id;
        self.with_session(id, true, "update_session", move |_, p| {
            let (current, _) = ops::record(p, id)?;
            ops::touch(
                p,
                SessionRecord {
                    model: record.model,
                    tools: record.tools,
                    ..current
                },
            )
        })
        .await
    }

    async fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let root = self.inner.root.clone();
        let ids = tokio::task::spawn_blocking(move || -> Result<Vec<SessionId>, StoreError> {
            let dir = std::fs::read_dir(&root).map_err(|e| StoreError::io(root.display(), e))?;
            let mut ids = Vec::new();
            for entry in dir {
                let entry = entry.map_err(|e| StoreError::io(root.display(), e))?;
                // Temporary and deleted directories start with a dot and do not parse.
                if let Some(id) = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.parse::<SessionId>().ok())
                {
                    ids.push(id);
                }
            }
            Ok(ids)
        })
        .await??;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.get_session(id).await {
                Ok(r) => out.push(r),
                // Deleted meanwhile.
                Err(StoreError::SessionNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        out.sort_by_key(|r| (r.created_at, r.id));
        Ok(out)
    }

    async fn append(&self, id: SessionId, request: AppendRequest) -> Result<AppendOutcome, StoreError> {
        common::validate_append(&request)?;
        self.with_session(id, true, "append", move |inner, p| {
            ops::append(inner, id, p, &request)
        })
        .await
    }

    async fn load_view(&self, id: SessionId) -> Result<StoredView, StoreError> {
        self.with_session(id, false, "load_view", move |inner, p| {
            let (view, rows) = ops::load_view(inner, id, p)?;
            inner.last_load_rows.store(rows, Ordering::Relaxed);
            Ok(view)
        })
        .await
    }

    async fn load_log(&self, id: SessionId) -> Result<Vec<Entry>, StoreError> {
        self.with_session(id, false, "load_log", move |inner, p| {
            Ok(ops::load_log(inner, id, p)?.1)
        })
        .await
    }

    async fn commit_compaction(&self, id: SessionId, request: CommitRequest) -> Result<u64, StoreError> {
        self.with_session(id, true, "commit_compaction", move |inner, p| {
            ops::commit(inner, id, p, &request)
        })
        .await
    }

    async fn find_compaction(&self, id: SessionId, key: &str) -> Result<Option<CompactionMeta>, StoreError> {
        let key = key.to_string();
        self.with_session(id, false, "find_compaction", move |inner, p| {
            let (_, b) = ops::record(p, id)?;
            let adopted = ops::adopted(inner, p, &b)?;
            Ok(adopted
                .records
                .into_iter()
                .rev()
                .map(|r| r.meta)
                .find(|m| m.idempotency_key == key))
        })
        .await
    }

    async fn breaker(&self, id: SessionId) -> Result<BreakerState, StoreError> {
        self.with_session(id, false, "breaker", move |_, p| {
            Ok(files::read_json(&p.breaker)?.unwrap_or_default())
        })
        .await
    }

    async fn set_breaker(&self, id: SessionId, state: BreakerState) -> Result<(), StoreError> {
        self.with_session(id, true, "set_breaker", move |_, p| {
            files::write_atomic(&p.breaker, &serde_json::to_vec(&state)?)
        })
        .await
    }

    async fn record_usage(&self, id: SessionId, record: UsageRecord) -> Result<(), StoreError> {
        self.with_session(id, true, "record_usage", move |inner, p| {
            let existing = files::read_lines::<UsageRecord>(&p.usage, 0, 0)?;
            inner.warn(existing.torn.into_iter().collect());
            if p.usage.exists() {
                files::truncate_to(&p.usage, existing.good_end)?;
            }
            let mut line = serde_json::to_vec(&record)?;
            line.push(b'\n');
            files::append_synced(&p.usage, &line)
        })
        .await
    }

    async fn usage(&self, id: SessionId) -> Result<Vec<UsageRecord>, StoreError> {
        self.with_session(id, false, "usage", move |inner, p| {
            let lines = files::read_lines::<UsageRecord>(&p.usage, 0, 0)?;
            inner.warn(lines.torn.into_iter().collect());
            Ok(lines.items.into_iter().map(|(_, _, r)| r).collect())
        })
        .await
    }

    async fn list_revisions(&self, id: SessionId) -> Result<Vec<RevisionInfo>, StoreError> {
        self.with_session(id, false, "list_revisions", move |inner, p| {
            let (record, b) = ops::record(p, id)?;
            let adopted = ops::adopted(inner, p, &b)?;
            let idx = ops::index(inner, id, p)?;
            let commits: Vec<_> = adopted
                .records
                .iter()
                .map(|r| (r.seq, r.meta.created_at))
                .collect();
            let log_len = idx.offsets.len() as u64 + commits.len() as u64;
            Ok(common::revisions_from_commits(&record, &commits, log_len))
        })
        .await
    }

    async fn export_revision(&self, id: SessionId, generation: u64) -> Result<RevisionExport, StoreError> {
        self.with_session(id, false, "export_revision", move |inner, p| {
            let (record, log) = ops::load_log(inner, id, p)?;
            common::export_from_log(&record, &log, generation)
        })
        .await
    }

    async fn delete_session(&self, id: SessionId) -> Result<(), StoreError> {
        let root = self.inner.root.clone();
        self.with_session(id, true, "delete_session", move |inner, p| {
            // Rename first (atomic: the session disappears at once), then remove the files.
            let trash = root.join(format!(".deleted-{id}-{}", uuid::Uuid::now_v7()));
            std::fs::rename(&p.dir, &trash).map_err(|e| StoreError::io(p.dir.display(), e))?;
            files::sync_dir(&root)?;
            lock(&inner.index).remove(&id);
            std::fs::remove_dir_all(&trash).map_err(|e| StoreError::io(trash.display(), e))
        })
        .await
    }

    fn last_view_load_rows(&self) -> Option<u64> {
        Some(self.last_load_rows())
    }
}
