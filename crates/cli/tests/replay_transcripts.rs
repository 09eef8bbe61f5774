//! `pith replay --json` on every shared transcript, at 128k and 32k, for each policy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Mutex;

use assert_cmd::Command;
use serde_json::Value;

fn replay(file: &PathBuf, window: u64, policy: &str) -> Value {
    let output = Command::cargo_bin("pith")
        .unwrap()
        .args(["--store", "memory", "--json", "replay"])
        .arg(file)
        .args(["--window", &window.to_string(), "--policy", policy])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{} at {window} ({policy}) failed: {}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn every_transcript_replays_under_every_policy_and_window() {
    let Some(files) = pith_testkit::transcripts::manifest() else {
        return;
    };
    let jobs: Vec<(PathBuf, u64, &str)> = files
        .iter()
        .flat_map(|(path, _)| {
            [128_000u64, 32_000].into_iter().flat_map(move |w| {
                ["pith", "pi", "codex"]
                    .into_iter()
                    .map(move |p| (path.clone(), w, p))
            })
        })
        .collect();
    let queue = Mutex::new(jobs);
    let failures = Mutex::new(Vec::new());
    let clipped_large = Mutex::new(false);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let job = queue.lock().unwrap().pop();
                let Some((file, window, policy)) = job else { break };
                let r = replay(&file, window, policy);
                let name = file.display().to_string();
                let max = r["max_request_tokens"].as_u64().unwrap();
                if r["tool_pairs_split"] != 0 {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{name} {window} {policy}: tool pairs split {r}"));
                }
                if max > window {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{name} {window} {policy}: request of {max} tokens"));
                }
                // The per-call figures add up to the totals, one per model call.
                let calls = r["per_call"].as_array().unwrap();
                let sum = |key: &str| calls.iter().map(|c| c[key].as_u64().unwrap()).sum::<u64>();
                let biggest = calls.iter().map(|c| c["request_tokens"].as_u64().unwrap()).max();
                if calls.len() as u64 != r["model_calls"].as_u64().unwrap()
                    || sum("request_tokens") != r["input_tokens_total"].as_u64().unwrap()
                    || sum("no_compaction_tokens") != r["input_tokens_no_compaction"].as_u64().unwrap()
                    || biggest.unwrap_or(0) != max
                {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{name} {window} {policy}: per-call figures disagree {r}"));
                }
                for c in r["compactions"].as_array().unwrap() {
                    if c["tokens_after"].as_u64().unwrap() > r["threshold"].as_u64().unwrap() {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{name} {window} {policy}: view over threshold {c}"));
                    }
                }
                if name.ends_with("psf__requests-1142.traj.json") {
                    // The 868 KB final tool output is larger than any window: it is sent clipped, and
                    // the report says so.
                    assert!(r["tool_outputs_clipped"].as_u64().unwrap() >= 1, "{r}");
                    *clipped_large.lock().unwrap() = true;
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(
        clipped_large.into_inner().unwrap(),
        "the oversized mini-SWE-agent transcript was not replayed"
    );
}
