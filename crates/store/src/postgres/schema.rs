//! The Postgres schema and its migrations.
//!
//! Versions are rows of `pith_schema_version`. [`migrate`] runs in one transaction holding a
//! transaction-scoped advisory lock, so two processes starting at once apply each migration once:
//! the second waits for the lock, then sees the version the first committed.

use deadpool_postgres::Client;

use crate::error::StoreError;

/// Advisory lock key for migrations ("pith" in ASCII).
const MIGRATION_LOCK: i64 = 0x7069_7468;

/// The schema changes, in order: `MIGRATIONS[i]` takes the database from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: sessions, the append-only log, dedupe keys, the compaction index, breaker and usage.
    // Times are RFC 3339 text with nanoseconds (TIMESTAMPTZ keeps only microseconds) and JSON is
    // TEXT so that what was written is read back byte for byte.
    r#"
    CREATE TABLE pith_sessions (
        id            UUID PRIMARY KEY,
        record        TEXT NOT NULL,
        created_at    TEXT NOT NULL,
        updated_at    TEXT NOT NULL,
        generation    BIGINT NOT NULL DEFAULT 0,
        log_len       BIGINT NOT NULL DEFAULT 0,
        latest_seq    BIGINT
    );
    CREATE TABLE pith_entries (
        session_id    UUID NOT NULL,
        seq           BIGINT NOT NULL,
        entry_id      UUID NOT NULL,
        kind          TEXT NOT NULL,
        json          TEXT NOT NULL,
        PRIMARY KEY (session_id, seq),
        UNIQUE (session_id, entry_id)
    );
    CREATE TABLE pith_dedupe_keys (
        session_id    UUID NOT NULL,
        key           TEXT NOT NULL,
        PRIMARY KEY (session_id, key)
    );
    CREATE TABLE pith_compactions (
        session_id      UUID NOT NULL,
        generation      BIGINT NOT NULL,
        seq             BIGINT NOT NULL,
        idempotency_key TEXT NOT NULL,
        created_at      TEXT NOT NULL,
        PRIMARY KEY (session_id, generation)
    );
    CREATE INDEX pith_compactions_by_key ON pith_compactions (session_id, idempotency_key);
    CREATE TABLE pith_breakers (
        session_id    UUID PRIMARY KEY,
        state         TEXT NOT NULL
    );
    CREATE TABLE pith_usage (
        session_id    UUID NOT NULL,
        seq           BIGINT NOT NULL,
        record        TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    "#,
];

/// Applies every migration the database has not seen; returns the resulting version.
pub async fn migrate(client: &mut Client) -> Result<u32, StoreError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS pith_schema_version (version INTEGER PRIMARY KEY)")
        .await?;
    let row = tx
        .query_one("SELECT coalesce(max(version), 0) FROM pith_schema_version", &[])
        .await?;
    let mut version: i32 = row.get(0);
    let latest = MIGRATIONS.len() as i32;
    if version > latest {
        return Err(StoreError::Corrupt {
            location: "postgres pith_schema_version".into(),
            reason: format!(
                "the database has schema version {version}, newer than this build's {latest}; upgrade pith"
            ),
        });
    }
    while let Some(sql) = MIGRATIONS.get(version as usize) {
        tx.batch_execute(sql).await?;
        version += 1;
        tx.execute(
            "INSERT INTO pith_schema_version (version) VALUES ($1)",
            &[&version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(version as u32)
}
