//! Opening a store from a `--store` URL.
//!
//! `sqlite://path` (the default, `sqlite://./pith.db`), `postgres://…` or `postgresql://…`,
//! `jsonl://dir` and `memory`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pith_store::SessionStore;

/// The default store URL.
pub const DEFAULT_STORE: &str = "sqlite://./pith.db";

/// A parsed store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A Postgres connection string.
    Postgres(String),
    /// A JSONL directory.
    Jsonl(PathBuf),
    /// Process memory (gone when the command exits).
    Memory,
}

impl std::str::FromStr for StoreUrl {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        if s == "memory" || s == "memory://" {
            return Ok(StoreUrl::Memory);
        }
        if let Some(path) = s.strip_prefix("sqlite://") {
            if path.is_empty() {
                bail!("store URL {s:?} names no file; use sqlite://path/to/file.db");
            }
            return Ok(StoreUrl::Sqlite(PathBuf::from(path)));
        }
        if let Some(dir) = s.strip_prefix("jsonl://") {
            if dir.is_empty() {
                bail!("store URL {s:?} names no directory; use jsonl://path/to/dir");
            }
            return Ok(StoreUrl::Jsonl(PathBuf::from(dir)));
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(StoreUrl::Postgres(s.to_string()));
        }
        bail!("unknown store URL {s:?}; expected sqlite://path, postgres://..., jsonl://dir or memory")
    }
}

impl StoreUrl {
    /// Opens (creating if needed) the store.
    pub async fn open(&self) -> Result<Arc<dyn SessionStore>> {
        Ok(match self {
            StoreUrl::Memory => Arc::new(pith_store::MemoryStore::new()),
            StoreUrl::Sqlite(path) => Arc::new(
                pith_store::SqliteStore::open(path)
                    .await
                    .with_context(|| format!("cannot open SQLite store {}", path.display()))?,
            ),
            StoreUrl::Jsonl(dir) => Arc::new(
                pith_store::JsonlStore::open(dir)
                    .await
                    .with_context(|| format!("cannot open JSONL store {}", dir.display()))?,
            ),
            StoreUrl::Postgres(url) => open_postgres(url).await?,
        })
    }
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> Result<Arc<dyn SessionStore>> {
    Ok(Arc::new(
        pith_store::PostgresStore::connect(url)
            .await
            .context("cannot connect to Postgres")?,
    ))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_url: &str) -> Result<Arc<dyn SessionStore>> {
    bail!("this pith was built without the `postgres` feature")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_scheme_and_rejects_others() {
        assert_eq!("memory".parse::<StoreUrl>().unwrap(), StoreUrl::Memory);
        assert_eq!(
            "sqlite://./pith.db".parse::<StoreUrl>().unwrap(),
            StoreUrl::Sqlite("./pith.db".into())
        );
        assert_eq!(
            "jsonl://d".parse::<StoreUrl>().unwrap(),
            StoreUrl::Jsonl("d".into())
        );
        assert!(matches!(
            "postgres://u@h/db".parse::<StoreUrl>().unwrap(),
            StoreUrl::Postgres(_)
        ));
        assert!("mysql://x".parse::<StoreUrl>().is_err());
        assert!("sqlite://".parse::<StoreUrl>().is_err());
    }
}
