//! Crash safety: a compaction and a turn run in a child process that is `SIGKILL`ed at each
//! step, for the SQLite and JSONL stores. After the kill the log is either unchanged or fully
//! compacted, never half; every earlier revision still exports with its checksum; rerunning
//! completes the work exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pith_compaction::ProjectionStyle;
use pith_core::{Entry, EstimateCounter, Message, Part, Role, SessionId};
use pith_reliability::{check_session, CrashPoint, ECHO_MODEL};
use pith_store::{AppendRequest, CreateSession, JsonlStore, SessionStore, SqliteStore};
use serde_json::{json, Value};

const WINDOW: u64 = 8_000;
/// `window − reserve` for the child's window (the 15% fallback).
const THRESHOLD: u64 = WINDOW - WINDOW * 15 / 100;

#[derive(Debug, Clone, Copy)]
enum Backend {
    Sqlite,
    Jsonl,
}

struct Fixture {
    _dir: tempfile::TempDir,
    backend: Backend,
    path: PathBuf,
    marker: PathBuf,
    session: SessionId,
}

impl Fixture {
    async fn new(backend: Backend) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = match backend {
            Backend::Sqlite => dir.path().join("pith.db"),
            Backend::Jsonl => dir.path().join("store"),
        };
        let marker = dir.path().join("crash.marker");
        let mut f = Fixture {
            _dir: dir,
            backend,
            path,
            marker,
            session: SessionId::new(),
        };
        let store = f.open().await;
        let record = store
            .create_session(CreateSession::new(ECHO_MODEL).with_instruction("You are terse."))
            .await
            .unwrap();
        f.session = record.id;
        append_turns(store.as_ref(), f.session, 0, 8).await;
        f
    }

    async fn open(&self) -> Arc<dyn SessionStore> {
        match self.backend {
            Backend::Sqlite => Arc::new(SqliteStore::open(&self.path).await.unwrap()),
            Backend::Jsonl => Arc::new(JsonlStore::open(&self.path).await.unwrap()),
        }
    }

    fn child(&self, mode: &str, at: Option<CrashPoint>, extra: &[(&str, String)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_crash_child"));
        let backend = match self.backend {
            Backend::Sqlite => "sqlite",
            Backend::Jsonl => "jsonl",
        };
        cmd.env("PITH_CRASH_BACKEND", backend)
            .env("PITH_CRASH_PATH", &self.path)
            .env("PITH_CRASH_SESSION", self.session.to_string())
            .env("PITH_CRASH_MODE", mode)
            .env("PITH_CRASH_WINDOW", WINDOW.to_string())
            .env("PITH_CRASH_MARKER", &self.marker)
            .env_remove("PITH_CRASH_AT")
            .env_remove("PITH_CRASH_SELF_KILL_US")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(at) = at {
            cmd.env("PITH_CRASH_AT", at.as_str());
        }
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs the child until it reaches `at`, then SIGKILLs it.
    fn kill_at(&self, mode: &str, at: CrashPoint, extra: &[(&str, String)]) {
        let _ = std::fs::remove_file(&self.marker);
        let mut child = self.child(mode, Some(at), extra).spawn().unwrap();
        wait_for_marker(&mut child, &self.marker);
        child.kill().unwrap(); // SIGKILL on Unix
        let status = child.wait().unwrap();
        assert!(!status.success(), "the child must die by the signal");
    }

    /// Runs the child to completion and returns its JSON line.
    fn run(&self, mode: &str, extra: &[(&str, String)]) -> Value {
        let out = self.child(mode, None, extra).output().unwrap();
        assert!(
            out.status.success(),
            "child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    async fn state(&self) -> State {
        let store = self.open().await;
        let log = store.load_log(self.session).await.unwrap();
        let report = check_session(
            store.as_ref(),
            self.session,
            THRESHOLD,
            ProjectionStyle::default(),
            &EstimateCounter,
        )
        .await
        .unwrap_or_else(|e| panic!("invariants broken after the kill: {e}"));
        State {
            log: serde_json::to_value(&log).unwrap(),
            entries: log,
            checksums: report.checksums,
        }
    }
}

struct State {
    log: Value,
    entries: Vec<Entry>,
    checksums: Vec<String>,
}

fn wait_for_marker(child: &mut Child, marker: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                std::io::Read::read_to_string(&mut e, &mut err).unwrap();
            }
            panic!("the child exited ({status}) before its crash point: {err}");
        }
        assert!(
            Instant::now() < deadline,
            "the child never reached its crash point"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn turn(i: usize) -> Vec<Entry> {
    let id = format!("call-{i}");
    let mut call = Message::assistant("");
    call.parts = vec![Part::ToolCall {
        call_id: id.clone(),
        name: "read".into(),
        arguments: json!({ "path": format!("src/file_{i}.rs") }),
    }];
    vec![
        Message::user(format!("Turn {i}: please look at src/file_{i}.rs")),
        call,
        Message::tool_result(&id, format!("// file {i}\n{}", "x".repeat(600)), false),
        Message::assistant(format!("Answer {i}: file_{i} is fine.")),
    ]
    .into_iter()
    .map(Entry::Message)
    .collect()
}

async fn append_turns(store: &dyn SessionStore, session: SessionId, from: usize, to: usize) {
    let entries = (from..to).flat_map(turn).collect();
    store.append(session, AppendRequest::new(entries)).await.unwrap();
}

fn compactions(log: &[Entry]) -> Vec<u64> {
    log.iter()
        .filter_map(|e| match e {
            Entry::Compaction(m) => Some(m.generation),
            _ => None,
        })
        .collect()
}

/// The log after a kill is the old one, or the old one plus exactly one compaction record.
fn unchanged_or_compacted(before: &State, after: &State) -> bool {
    if after.log == before.log {
        return false;
    }
    let n = before.entries.len();
    assert_eq!(after.entries.len(), n + 1, "a compaction adds exactly one entry");
    assert_eq!(
        serde_json::to_value(&after.entries[..n]).unwrap(),
        before.log,
        "the earlier log is untouched"
    );
    assert!(
        matches!(after.entries[n], Entry::Compaction(_)),
        "the new entry is the record"
    );
    true
}

async fn compaction_killed_at(backend: Backend, at: CrashPoint, committed: bool) {
    let f = Fixture::new(backend).await;
    let before = f.state().await;
    assert_eq!(before.checksums.len(), 1);

    f.kill_at("compact", at, &[]);
    let after = f.state().await;
    assert_eq!(
        unchanged_or_compacted(&before, &after),
        committed,
        "{backend:?} killed at {}: expected committed = {committed}",
        at.as_str()
    );
    assert_eq!(
        after.checksums[0], before.checksums[0],
        "revision 0 exports byte-identical"
    );

    // Rerunning completes the compaction exactly once; a further rerun changes nothing.
    let out = f.run("compact", &[]);
    assert_eq!(out["generation"], 1, "{out}");
    let done = f.state().await;
    assert_eq!(compactions(&done.entries), vec![1]);
    assert_eq!(done.entries.len(), before.entries.len() + 1);
    assert_eq!(done.checksums[0], before.checksums[0]);
    if committed {
        assert_eq!(done.log, after.log, "the rerun found the committed record");
    }
    f.run("compact", &[]);
    let again = f.state().await;
    assert_eq!(
        again.log, done.log,
        "the idempotency key prevents a second record"
    );
    assert_eq!(again.checksums, done.checksums);
}

#[tokio::test]
async fn sqlite_compaction_killed_after_the_summary_changes_nothing() {
    compaction_killed_at(Backend::Sqlite, CrashPoint::AfterSummary, false).await;
}

#[tokio::test]
async fn sqlite_compaction_killed_inside_the_commit_changes_nothing() {
    compaction_killed_at(Backend::Sqlite, CrashPoint::InCommit, false).await;
}

#[tokio::test]
async fn sqlite_compaction_killed_after_the_commit_is_complete() {
    compaction_killed_at(Backend::Sqlite, CrashPoint::AfterCommit, true).await;
}

#[tokio::test]
async fn jsonl_compaction_killed_after_the_summary_changes_nothing() {
    compaction_killed_at(Backend::Jsonl, CrashPoint::AfterSummary, false).await;
}

#[tokio::test]
async fn jsonl_compaction_killed_between_archive_and_boundary_changes_nothing() {
    compaction_killed_at(Backend::Jsonl, CrashPoint::InCommit, false).await;
}

#[tokio::test]
async fn jsonl_compaction_killed_after_the_commit_is_complete() {
    compaction_killed_at(Backend::Jsonl, CrashPoint::AfterCommit, true).await;
}

/// Kills real commits at random delays, many times, on one session that keeps growing.
async fn random_kills_during_commits(backend: Backend, rounds: usize) {
    let f = Fixture::new(backend).await;
    let (mut killed_before, mut killed_after, mut finished) = (0, 0, 0);
    for round in 0..rounds {
        let before = f.state().await;
        let generation = round as u64 + 1;
        let max_us = ["500", "2000", "5000", "10000"][round % 4].to_string();
        let out = f
            .child("compact", None, &[("PITH_CRASH_SELF_KILL_US", max_us)])
            .output()
            .unwrap();
        let after = f.state().await;
        let compacted = unchanged_or_compacted(&before, &after);
        match (out.status.success(), compacted) {
            (true, true) => finished += 1,
            (true, false) => panic!("the child succeeded but nothing was committed"),
            (false, true) => killed_after += 1,
            (false, false) => killed_before += 1,
        }
        assert_eq!(after.checksums[..before.checksums.len()], before.checksums[..]);
        // Complete the round, then grow the session for the next one.
        let out = f.run("compact", &[]);
        assert_eq!(out["generation"], generation, "{out}");
        let done = f.state().await;
        assert_eq!(compactions(&done.entries), (1..=generation).collect::<Vec<_>>());
        let store = f.open().await;
        append_turns(store.as_ref(), f.session, 10 * (round + 1), 10 * (round + 1) + 4).await;
    }
    eprintln!(
        "{backend:?}: {rounds} rounds: killed before the commit {killed_before}, killed after it \
         {killed_after}, finished {finished}"
    );
}

#[tokio::test]
async fn sqlite_commits_killed_at_random_delays_are_whole_or_absent() {
    random_kills_during_commits(Backend::Sqlite, 12).await;
}

#[tokio::test]
async fn jsonl_commits_killed_at_random_delays_are_whole_or_absent() {
    random_kills_during_commits(Backend::Jsonl, 12).await;
}

/// A turn killed at `at`; rerunning the same input completes the turn without a duplicate.
async fn turn_killed_at(backend: Backend, at: CrashPoint, persisted: usize) {
    let f = Fixture::new(backend).await;
    let before = f.state().await;
    let input = [("PITH_CRASH_INPUT", "Please summarise file_7.".to_string())];
    f.kill_at("turn", at, &input);
    let after = f.state().await;
    let n = before.entries.len();
    assert_eq!(after.entries.len(), n + persisted, "killed at {}", at.as_str());
    assert_eq!(serde_json::to_value(&after.entries[..n]).unwrap(), before.log);

    if persisted < 2 {
        let out = f.run("turn", &input);
        assert_eq!(out["text"], "echo: Please summarise file_7.");
    }
    let done = f.state().await;
    let added: Vec<&Message> = done.entries[n..].iter().filter_map(Entry::as_message).collect();
    assert_eq!(done.entries.len(), n + 2, "the input and the reply, once each");
    assert_eq!(added[0].role, Role::User);
    assert_eq!(added[0].text_content(), "Please summarise file_7.");
    assert_eq!(added[1].role, Role::Assistant);
    assert_eq!(added[1].text_content(), "echo: Please summarise file_7.");
    assert_eq!(done.checksums[0].len(), 64);
}

#[tokio::test]
async fn sqlite_turns_killed_at_each_step_resume_without_duplicates() {
    turn_killed_at(Backend::Sqlite, CrashPoint::AfterInput, 1).await;
    turn_killed_at(Backend::Sqlite, CrashPoint::BeforeReply, 1).await;
    turn_killed_at(Backend::Sqlite, CrashPoint::AfterReply, 2).await;
}

#[tokio::test]
async fn jsonl_turns_killed_at_each_step_resume_without_duplicates() {
    turn_killed_at(Backend::Jsonl, CrashPoint::AfterInput, 1).await;
    turn_killed_at(Backend::Jsonl, CrashPoint::BeforeReply, 1).await;
    turn_killed_at(Backend::Jsonl, CrashPoint::AfterReply, 2).await;
}
