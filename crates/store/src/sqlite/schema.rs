//! The SQLite schema and its migrations.
//!
//! The schema version is SQLite's `user_version` pragma. [`MIGRATIONS`] lists every change in
//! order; opening a database applies the ones it has not seen yet, each in its own IMMEDIATE
//! transaction together with the version bump, so a crash never leaves a half-migrated file and
//! two processes opening the same file at once apply each migration exactly once.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::StoreError;

/// The schema changes, in order: `MIGRATIONS[i]` takes the database from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: sessions, the append-only log, dedupe keys, the compaction index, breaker and usage.
    r#"
    CREATE TABLE sessions (
        id            TEXT PRIMARY KEY NOT NULL,
        record        TEXT NOT NULL,
        created_at    TEXT NOT NULL,
        updated_at    TEXT NOT NULL,
        generation    INTEGER NOT NULL DEFAULT 0,
        log_len       INTEGER NOT NULL DEFAULT 0,
        latest_seq    INTEGER
    );
    CREATE TABLE entries (
        session_id    TEXT NOT NULL,
        seq           INTEGER NOT NULL,
        entry_id      TEXT NOT NULL,
        kind          TEXT NOT NULL,
        json          TEXT NOT NULL,
        UNIQUE (session_id, seq),
        UNIQUE (session_id, entry_id)
    );
    CREATE TABLE dedupe_keys (
        session_id    TEXT NOT NULL,
        key           TEXT NOT NULL,
        PRIMARY KEY (session_id, key)
    ) WITHOUT ROWID;
    CREATE TABLE compactions (
        session_id      TEXT NOT NULL,
        generation      INTEGER NOT NULL,
        seq             INTEGER NOT NULL,
        idempotency_key TEXT NOT NULL,
        created_at      TEXT NOT NULL,
        PRIMARY KEY (session_id, generation)
    ) WITHOUT ROWID;
    CREATE INDEX compactions_by_key ON compactions (session_id, idempotency_key);
    CREATE TABLE breakers (
        session_id    TEXT PRIMARY KEY NOT NULL,
        state         TEXT NOT NULL
    );
    CREATE TABLE usage (
        session_id    TEXT NOT NULL,
        seq           INTEGER NOT NULL,
        record        TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    "#,
];

/// The schema version this build writes.
pub fn latest_version() -> u32 {
    MIGRATIONS.len() as u32
}

/// Sets the connection pragmas: WAL journal, `synchronous=FULL`, a busy timeout.
pub fn configure(conn: &Connection, in_memory: bool) -> Result<(), StoreError> {
    if !in_memory {
        // WAL lets readers proceed while one writer commits; the mode is stored in the file.
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    // FULL: every commit fsyncs the WAL, so a committed append or compaction survives power
    // loss, not only a process crash (NORMAL would keep the file consistent but may lose the
    // last commits).
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(())
}

/// Applies every migration the database has not seen; returns the resulting version.
pub fn migrate(conn: &mut Connection) -> Result<u32, StoreError> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version: u32 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version > latest_version() {
            return Err(StoreError::Corrupt {
                location: "sqlite user_version".into(),
                reason: format!(
                    "the database has schema version {version}, newer than this build's {}; \
                     upgrade pith to open it",
                    latest_version()
                ),
            });
        }
        let Some(sql) = MIGRATIONS.get(version as usize) else {
            return Ok(version);
        };
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn migrating_twice_is_a_no_op() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut conn).unwrap(), latest_version());
        assert_eq!(migrate(&mut conn).unwrap(), latest_version());
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 6);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", latest_version() + 1)
            .unwrap();
        let err = migrate(&mut conn).unwrap_err();
        assert!(err.to_string().contains("newer than this build"), "{err}");
    }
}
