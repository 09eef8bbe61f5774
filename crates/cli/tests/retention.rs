//! Retention after every compaction, counted from the dumped views with this test's own path
//! search: 100% of modified paths, at least 99% of read paths and 100% of the user messages that
//! fit the user-message budget (min(20,000, 25% of the threshold), newest first), on every shared
//! transcript at 32k and 128k — with the deterministic summarizer (`pith replay --dump-views`)
//! and with a scripted model summary that names nothing (the library replay).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use assert_cmd::Command;
use async_trait::async_trait;
use pith_cli::replay::{replay, DumpedView, ReplayInput, ReplayOptions};
use pith_compaction::{CompactionError, CompactionStrategy, Summarizer, SummaryJob, SummaryOutput};
use pith_core::{EstimateCounter, Message, Part, Role, TokenCounter};
use serde_json::Value;

const WINDOWS: [u64; 2] = [32_000, 128_000];

/// Paths a call names, as (modified, path): this test's own reading of the tool shapes.
fn call_paths(name: &str, args: &Value) -> Vec<(bool, String)> {
    let args = match args {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
        v => v.clone(),
    };
    let name = name.to_lowercase();
    let mut out = Vec::new();
    let key = [
        "file_path",
        "path",
        "filePath",
        "file",
        "filename",
        "notebook_path",
    ]
    .iter()
    .find_map(|k| args.get(k).and_then(Value::as_str));
    let sub = args.get("command").and_then(Value::as_str).unwrap_or("");
    if let Some(p) = key {
        match name.as_str() {
            "read" | "read_file" | "view" | "open" | "cat" | "view_file" => out.push((false, p.to_string())),
            "str_replace_editor" if sub == "view" => out.push((false, p.to_string())),
            "edit" | "write" | "multiedit" | "edit_file" | "write_file" | "create" | "create_file"
            | "notebookedit" | "str_replace_editor" => out.push((true, p.to_string())),
            _ => {}
        }
    }
    let script = match args.get("command") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => {
            let w: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
            if w.len() == 3 && w[1].starts_with('-') && w[0].ends_with("sh") {
                w[2].to_string()
            } else {
                w.join(" ")
            }
        }
        _ => String::new(),
    };
    let patch = if name == "apply_patch" {
        args.get("input")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    } else {
        script.clone()
    };
    for line in patch.lines() {
        let line = line.trim();
        for head in ["*** Update File: ", "*** Add File: ", "*** Delete File: "] {
            if let Some(p) = line.strip_prefix(head) {
                out.push((true, p.trim().to_string()));
            }
        }
    }
    let shell = [
        "bash",
        "shell",
        "exec_command",
        "local_shell",
        "execute_bash",
        "run",
    ];
    if shell.contains(&name.as_str()) {
        let pathish = |t: &str| {
            let t = t.trim_matches(['"', '\'']);
            !t.is_empty()
                && !t.starts_with('-')
                && (t.contains('/') || t.contains('.'))
                && t.chars().all(|c| c.is_alphanumeric() || "/._-~+@".contains(c))
                && t.chars().any(char::is_alphabetic)
        };
        for seg in script.split(['|', ';', '&', '\n']) {
            let w: Vec<&str> = seg.split_whitespace().collect();
            for i in 1..w.len() {
                if (w[i - 1] == ">" || w[i - 1] == ">>") && pathish(w[i]) {
                    out.push((true, w[i].trim_matches(['"', '\'']).to_string()));
                }
            }
            let Some(s) = w.iter().position(|t| !t.contains('=')) else {
                continue;
            };
            let prog = w[s].rsplit('/').next().unwrap();
            if !["cat", "head", "tail", "nl", "less", "sed", "bat"].contains(&prog) {
                continue;
            }
            let modified = prog == "sed" && w.iter().any(|t| t.starts_with("-i"));
            for t in &w[s + 1..] {
                if [">", ">>", "<"].contains(t) {
                    break;
                }
                if pathish(t) && !t.starts_with("s/") && !t.contains(',') {
                    out.push((modified, t.trim_matches(['"', '\'']).to_string()));
                }
            }
        }
    }
    out
}

fn view_text(messages: &[Message]) -> String {
    let mut text = String::new();
    for m in messages {
        for p in &m.parts {
            match p {
                Part::Text { text: t } | Part::Reasoning { text: t, .. } => text.push_str(t),
                Part::ToolCall { name, arguments, .. } => {
                    text.push_str(name);
                    text.push_str(&arguments.to_string());
                    if let Some(s) = arguments.as_str() {
                        text.push_str(s);
                    }
                    for v in arguments.as_object().into_iter().flat_map(|o| o.values()) {
                        if let Some(s) = v.as_str() {
                            text.push_str(s);
                            text.push('\n');
                        }
                    }
                }
                Part::ToolResult { content, .. } => text.push_str(content),
                _ => {}
            }
            text.push('\n');
        }
    }
    text
}

fn written_by_user(m: &Message) -> bool {
    m.role == Role::User
        && !m.is_reminder()
        && !m.meta.external_summary
        && !m.meta.synthetic
        && m.tool_results().next().is_none()
        && !m.text_content().trim().is_empty()
}

/// [kept, total] of read paths, modified paths and budgeted user messages of one dumped view.
fn measure(view: &DumpedView, threshold: u64) -> [[u64; 2]; 3] {
    let text = view_text(&view.messages);
    let mut read = std::collections::BTreeSet::new();
    let mut modified = std::collections::BTreeSet::new();
    for m in &view.span {
        for (_, name, args) in m.tool_calls() {
            for (is_mod, p) in call_paths(name, args) {
                if is_mod {
                    modified.insert(p);
                } else {
                    read.insert(p);
                }
            }
        }
    }
    // The newest user messages of the span that fit the budget together.
    let budget = 20_000u64.min(threshold / 4);
    let mut used = 0;
    let mut users = Vec::new();
    for m in view.span.iter().rev().filter(|m| written_by_user(m)) {
        let t = m.text_content().trim().to_string();
        used += EstimateCounter.count_text(&t) + 4;
        if used > budget {
            break;
        }
        users.push(t);
    }
    let kept =
        |s: &std::collections::BTreeSet<String>| s.iter().filter(|p| text.contains(p.as_str())).count();
    [
        [kept(&read) as u64, read.len() as u64],
        [kept(&modified) as u64, modified.len() as u64],
        [
            users.iter().filter(|u| text.contains(u.as_str())).count() as u64,
            users.len() as u64,
        ],
    ]
}

fn threshold(window: u64) -> u64 {
    pith_compaction::threshold(window, None).unwrap()
}

/// Checks every dumped view of `dir`; returns the failures and the summed figures.
fn check_dir(dir: &Path, label: &str, window: u64, failures: &Mutex<Vec<String>>) -> [[u64; 2]; 3] {
    let mut sum = [[0u64; 2]; 3];
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        let view: DumpedView = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let [read, modified, users] = measure(&view, threshold(window));
        for (s, x) in sum.iter_mut().zip([read, modified, users]) {
            s[0] += x[0];
            s[1] += x[1];
        }
        let mut f = failures.lock().unwrap();
        if modified[0] < modified[1] {
            f.push(format!(
                "{label} {window} gen {}: modified {modified:?}",
                view.generation
            ));
        }
        if read[0] * 100 < read[1] * 99 {
            f.push(format!("{label} {window} gen {}: read {read:?}", view.generation));
        }
        if users[0] < users[1] {
            f.push(format!(
                "{label} {window} gen {}: user messages {users:?}",
                view.generation
            ));
        }
    }
    sum
}

fn run_jobs(jobs: Vec<(PathBuf, u64)>, run: impl Fn(&Path, u64, &Path) + Sync) -> Vec<String> {
    let queue = Mutex::new(jobs);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let job = queue.lock().unwrap().pop();
                let Some((file, window)) = job else { break };
                let dir = tempfile::tempdir().unwrap();
                run(&file, window, dir.path());
                let label = file.file_name().unwrap().to_string_lossy().to_string();
                let sum = check_dir(dir.path(), &label, window, &failures);
                eprintln!(
                    "{label} {window}: read {:?} modified {:?} users {:?}",
                    sum[0], sum[1], sum[2]
                );
            });
        }
    });
    failures.into_inner().unwrap()
}

fn jobs() -> Option<Vec<(PathBuf, u64)>> {
    let files = pith_testkit::transcripts::manifest()?;
    Some(
        files
            .iter()
            .flat_map(|(p, _)| WINDOWS.map(|w| (p.clone(), w)))
            .collect(),
    )
}

#[test]
fn deterministic_summaries_keep_every_artifact() {
    let Some(jobs) = jobs() else { return };
    let failures = run_jobs(jobs, |file, window, dir| {
        let out = Command::cargo_bin("pith")
            .unwrap()
            .args(["--store", "memory", "--json", "replay"])
            .arg(file)
            .args(["--window", &window.to_string(), "--dump-views"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    });
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A summary model that names nothing: everything retained comes from the ledger.
struct Forgetful;

#[async_trait]
impl Summarizer for Forgetful {
    fn strategy(&self) -> CompactionStrategy {
        CompactionStrategy::ModelSummary
    }

    async fn summarize(&self, _job: SummaryJob) -> Result<SummaryOutput, CompactionError> {
        Ok(SummaryOutput {
            text: "The work so far went well; continue where it stopped.".into(),
            strategy: CompactionStrategy::ModelSummary,
            model: Some("scripted/forgetful".into()),
        })
    }
}

#[test]
fn a_summary_that_omits_everything_still_keeps_every_artifact() {
    let Some(jobs) = jobs() else { return };
    let failures = run_jobs(jobs, |file, window, dir| {
        let imported = pith_import::import_file(file).unwrap();
        let input = ReplayInput {
            format: imported.format.as_str().to_string(),
            record: imported.record,
            entries: imported.entries,
        };
        let options = ReplayOptions::new(window)
            .with_summarizer(Arc::new(Forgetful))
            .with_dump_views(Some(dir.to_path_buf()));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let store = Arc::new(pith_store::MemoryStore::new());
            replay(input, store, options).await.unwrap();
        });
    });
    assert!(failures.is_empty(), "{failures:#?}");
}
