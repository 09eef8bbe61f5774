//! The throwaway PostgreSQL server of the test command.
//!
//! `scripts/test` (through `scripts/lib/postgres.sh`) starts a PostgreSQL server on a free
//! loopback port and exports its URL as `PITH_TEST_POSTGRES_URL`. Tests call [`url`] to find it.
//! Several tests share one database, so each test must use its own session ids (or schema).

/// The environment variable holding the test server's URL.
pub const URL_VAR: &str = "PITH_TEST_POSTGRES_URL";

/// The URL of the test server, or `None` (after printing why) when it is not configured.
///
/// Under CI (`CI=true`) a missing server is a failure, not a skip: the Postgres tests must run
/// there, so this panics with a message saying how to provide one.
pub fn url() -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            if crate::transcripts::is_ci() {
                panic!(
                    "CI=true but {URL_VAR} is not set: run the tests through scripts/test (which starts a \
                     throwaway PostgreSQL server) or export {URL_VAR}=postgres://user@host:port/db"
                );
            }
            eprintln!(
                "SKIP: {URL_VAR} is not set — run scripts/test, or `source scripts/lib/postgres.sh && \
                 pith_postgres_start`, to run the Postgres tests"
            );
            None
        }
    }
}
