//! Two OS processes run turns and compactions on the same sessions of one Postgres database for
//! `PITH_RELIABILITY_SECONDS` seconds (default 10 here; the full run is 60 — see
//! docs/RELIABILITY.md). Afterwards: no entry lost or duplicated, generations strictly
//! increasing with exactly one commit each, and every committed view fits its window.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::process::Command;

use pith_compaction::{threshold, ProjectionStyle};
use pith_core::{EstimateCounter, Role, SessionId};
use pith_reliability::{check_session, ECHO_MODEL};
use pith_store::{CreateSession, PostgresStore, SessionStore};
use serde_json::Value;

const WINDOW: u64 = 4_000;
const SESSIONS: usize = 3;

fn seconds() -> u64 {
    std::env::var("PITH_RELIABILITY_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_sessions_without_losing_or_duplicating_entries() {
    let Some(url) = pith_testkit::postgres::url() else {
        return;
    };
    let store = PostgresStore::connect(&url).await.unwrap();
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let record = store
            .create_session(CreateSession::new(ECHO_MODEL).with_instruction("Answer briefly."))
            .await
            .unwrap();
        sessions.push(record.id);
    }
    let ids: Vec<String> = sessions.iter().map(SessionId::to_string).collect();
    let dir = tempfile::tempdir().unwrap();
    let secs = seconds();

    let workers: Vec<_> = ["a", "b"]
        .iter()
        .map(|w| {
            let log = dir.path().join(format!("worker-{w}.jsonl"));
            let child = Command::new(env!("CARGO_BIN_EXE_pg_worker"))
                .env("PITH_WORKER_URL", &url)
                .env("PITH_WORKER_ID", w)
                .env("PITH_WORKER_SESSIONS", ids.join(","))
                .env("PITH_WORKER_SECONDS", secs.to_string())
                .env("PITH_WORKER_LOG", &log)
                .env("PITH_WORKER_WINDOW", WINDOW.to_string())
                .spawn()
                .unwrap();
            (child, log)
        })
        .collect();
    let mut ops: Vec<Value> = Vec::new();
    for (mut child, log) in workers {
        let status = child.wait().unwrap();
        assert!(status.success(), "worker failed: {status}");
        let text = std::fs::read_to_string(log).unwrap();
        ops.extend(text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()));
    }

    let threshold = threshold(WINDOW, None).unwrap();
    let mut commits: HashSet<(String, u64)> = HashSet::new();
    let (mut turns_ok, mut turns_failed, mut manual_commits, mut turn_compactions) = (0, 0, 0, 0);
    let mut errors: HashMap<String, usize> = HashMap::new();
    for op in &ops {
        let session = op["session"].as_str().unwrap().to_string();
        match (op["op"].as_str().unwrap(), op["ok"].as_bool().unwrap()) {
            ("turn", true) => {
                turns_ok += 1;
                turn_compactions += op["compactions"].as_array().unwrap().len();
            }
            ("turn", false) => turns_failed += 1,
            ("compact", true) if op["noop"] == false => {
                manual_commits += 1;
                let generation = op["generation"].as_u64().unwrap();
                assert!(
                    commits.insert((session, generation)),
                    "two commits of one generation: {op}"
                );
            }
            _ => {}
        }
        if let Some(e) = op["error"].as_str() {
            *errors.entry(e.chars().take(90).collect()).or_default() += 1;
        }
    }

    let mut total_entries = 0;
    let mut max_generation = 0;
    for &session in &sessions {
        let report = check_session(
            &store,
            session,
            threshold,
            ProjectionStyle::default(),
            &EstimateCounter,
        )
        .await
        .unwrap_or_else(|e| panic!("session {session}: {e}"));
        total_entries += report.entries;
        max_generation = max_generation.max(report.generations.len());
        let log = store.load_log(session).await.unwrap();
        let ids: HashSet<String> = log.iter().map(|e| e.id().to_string()).collect();
        let mut users: HashMap<String, usize> = HashMap::new();
        let mut replies = 0;
        for m in log.iter().filter_map(pith_core::Entry::as_message) {
            match m.role {
                Role::User => *users.entry(m.text_content()).or_default() += 1,
                Role::Assistant => replies += 1,
                _ => {}
            }
        }
        let turns: Vec<&Value> = ops
            .iter()
            .filter(|o| o["op"] == "turn" && o["session"] == session.to_string())
            .collect();
        for op in &turns {
            let input = op["input"].as_str().unwrap();
            let seen = users.get(input).copied().unwrap_or(0);
            if op["ok"] == true {
                assert_eq!(seen, 1, "a successful turn's input is in the log once: {op}");
                let reply = op["reply_id"].as_str().unwrap();
                assert!(
                    ids.contains(reply),
                    "a successful turn's reply is in the log: {op}"
                );
            } else {
                assert!(seen <= 1, "a failed turn's input is not duplicated: {op}");
            }
        }
        assert!(users.values().all(|&n| n == 1), "no input appears twice");
        let ok = turns.iter().filter(|o| o["ok"] == true).count();
        let failed = turns.len() - ok;
        assert!(
            replies >= ok && replies <= ok + failed,
            "one reply per successful turn, none duplicated: {replies} replies, {ok} turns ok, {failed} failed"
        );
        let known: HashSet<&str> = turns.iter().map(|o| o["input"].as_str().unwrap()).collect();
        assert!(
            users.keys().all(|u| known.contains(u.as_str())),
            "no input from nowhere"
        );
    }
    eprintln!(
        "{secs} s, 2 processes, {SESSIONS} sessions: {} operations, {turns_ok} turns ok, {turns_failed} failed, \
         {manual_commits} manual commits, {turn_compactions} compactions inside turns, highest generation \
         {max_generation}, {total_entries} entries; errors: {errors:?}",
        ops.len()
    );
    assert_eq!(
        turns_failed, 0,
        "no turn fails because another process shares its session: {errors:?}"
    );
    assert!(turns_ok >= 10, "both processes made progress");
    assert!(max_generation >= 2, "compactions were committed");
}
