//! `pith replay --json` with tiered compaction on and off over real transcripts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn replay(file: &Path, window: u64, extra: &[&str]) -> Value {
    let output = Command::cargo_bin("pith")
        .unwrap()
        .args(["--store", "memory", "--json", "replay"])
        .arg(file)
        .args(["--window", &window.to_string()])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{} at {window} {extra:?} failed: {}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Compactions that wrote a summary (each one at least one summary-model call).
fn summarising(r: &Value) -> u64 {
    r["compactions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["strategy"] != "mask_only")
        .count() as u64
}

fn transcript(suffix: &str) -> Option<std::path::PathBuf> {
    let files = pith_testkit::transcripts::manifest()?;
    Some(
        files
            .into_iter()
            .map(|(path, _)| path)
            .find(|p| p.to_string_lossy().ends_with(suffix))
            .expect("the transcript is in the manifest"),
    )
}

#[test]
fn tiered_compaction_avoids_a_summary_on_a_real_codex_session() {
    // A Codex session whose context is mostly tool output. Under pi's policy (no count signal)
    // with a target of 0.8 of the threshold, its first compaction can be done by masking alone.
    let Some(file) = transcript("rollout-2025-09-25T08-02-05-0199812e-64f0-7f73-91fc-095dda01c36e.jsonl")
    else {
        return;
    };
    let window = 32_000;
    let common = ["--policy", "pi", "--target-ratio", "0.8"];
    let on = replay(&file, window, &[&common[..], &["--tiered"]].concat());
    let off = replay(&file, window, &[&common[..], &["--no-tiered"]].concat());
    assert_eq!(on["tiered"], true);
    assert_eq!(off["tiered"], false);
    let mask_only = on["mask_only_compactions"].as_u64().unwrap();
    assert!(mask_only >= 1, "{on}");
    assert_eq!(off["mask_only_compactions"], 0);
    assert!(
        summarising(&on) < summarising(&off),
        "tiered avoids a summary: {} vs {}",
        summarising(&on),
        summarising(&off)
    );
    assert!(on["masked_outputs"].as_u64().unwrap() > 0);
    for r in [&on, &off] {
        assert_eq!(r["tool_pairs_split"], 0, "{r}");
        assert!(r["max_request_tokens"].as_u64().unwrap() <= window, "{r}");
        assert_eq!(
            r["model_calls"], on["model_calls"],
            "both replays send every recorded call"
        );
    }
}

#[test]
fn the_pith_policy_has_tiered_on_and_the_flag_turns_it_off() {
    let Some(file) = transcript("aider/afi-core.aider.chat.history.md") else {
        return;
    };
    let on = replay(&file, 32_000, &[]);
    let off = replay(&file, 32_000, &["--no-tiered"]);
    let pi = replay(&file, 32_000, &["--policy", "pi"]);
    assert_eq!(on["tiered"], true);
    assert_eq!(off["tiered"], false);
    assert_eq!(pi["tiered"], false);
    for r in [&on, &off, &pi] {
        assert_eq!(r["tool_pairs_split"], 0);
        assert!(r["max_request_tokens"].as_u64().unwrap() <= 32_000);
    }
}
