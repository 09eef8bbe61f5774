//! The load harness with the stub in a process of its own, and in the harness's process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use pith_bench::load::{self, LoadConfig, LoadError};
use pith_bench::stub::StubConfig;
use pith_bench::stub_process::StubProcessError;
use pith_store::MemoryStore;

fn small() -> LoadConfig {
    LoadConfig::default()
        .with_sessions(4)
        .with_turns(2)
        .with_stub(StubConfig::default().with_latency(Duration::from_millis(1)))
}

#[tokio::test]
async fn a_separate_stub_serves_every_call_and_reports_its_own_usage() {
    let config = small().with_stub_process(env!("CARGO_BIN_EXE_load"));
    let report = load::run(&config, Arc::new(MemoryStore::new())).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    // Each turn: one reply with tool calls, one final answer.
    assert_eq!(report.stub_replies, [8, 8, 0]);
    let usage = report.stub_usage.expect("the stub process reports its usage");
    assert_eq!(usage.answered(), 16);
    assert_eq!(usage.bad_requests, 0);
    assert!(usage.peak_rss_mib > 0.0, "{usage:?}");
}

#[tokio::test]
async fn an_inside_stub_gives_the_same_counts_without_separate_usage() {
    let report = load::run(&small(), Arc::new(MemoryStore::new())).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.stub_replies, [8, 8, 0]);
    assert!(report.stub_usage.is_none());
}

#[tokio::test]
async fn an_executable_that_is_no_stub_is_a_clear_error() {
    // `true` exits at once without printing a URL.
    let config = small().with_stub_process("true");
    match load::run(&config, Arc::new(MemoryStore::new())).await {
        Err(LoadError::StubProcess(StubProcessError::NoUrl(printed))) => assert!(printed.is_empty()),
        other => panic!("expected a missing-URL error, got {other:?}"),
    }
}
